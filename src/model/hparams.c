/* Reading DeepSeek V4 hyperparameters from GGUF metadata, with one clear error per missing or
 * inconsistent key. Which keys exist and what they mean: docs/dsv4-flash-table.md. */
#include "model/hparams.h"

#include <stdio.h>
#include <string.h>

#include "core/error.h"

#define ARCH "deepseek4"

typedef struct reader {
    const halo_gguf *g;
    halo_error *err;
    halo_status st; /* first failure; later reads are skipped */
} reader;

static const char *key(const char *suffix) {
    static _Thread_local char buf[128];
    snprintf(buf, sizeof buf, ARCH ".%s", suffix);
    return buf;
}

static void get_u32(reader *r, const char *suffix, uint32_t *out) {
    if (!r->st) r->st = halo_gguf_get_u32(r->g, key(suffix), out, r->err);
}

static void get_f32(reader *r, const char *suffix, float *out) {
    if (!r->st) r->st = halo_gguf_get_f32(r->g, key(suffix), out, r->err);
}

static bool has(const reader *r, const char *suffix) {
    return halo_gguf_find_kv(r->g, key(suffix)) != NULL;
}

/* Optional keys keep *out's default when absent. */
static void opt_u32(reader *r, const char *suffix, uint32_t *out) {
    if (has(r, suffix)) get_u32(r, suffix, out);
}
static void opt_f32(reader *r, const char *suffix, float *out) {
    if (has(r, suffix)) get_f32(r, suffix, out);
}

static void fail(reader *r, halo_status st, const char *fmt, const char *k, long long v) {
    if (!r->st) r->st = halo_fail(r->err, st, fmt, k, v);
}

/* A per-layer array with at least n_layer entries (real files carry one more, for the MTP
 * layer, which halo does not run). */
static const halo_gguf_kv *layer_array(reader *r, const char *suffix, uint32_t n_layer) {
    if (r->st) return NULL;
    const halo_gguf_kv *kv;
    r->st = halo_gguf_get_array(r->g, key(suffix), &kv, r->err);
    if (r->st) return NULL;
    if (kv->count < n_layer) {
        fail(r, HALO_E_BAD_VALUE, "metadata key '%s' has %lld entries, fewer than the layers",
             key(suffix), (long long)kv->count);
        return NULL;
    }
    return kv;
}

static void read_compress_ratios(reader *r, halo_hparams *hp) {
    const halo_gguf_kv *kv = layer_array(r, "attention.compress_ratios", hp->n_layer);
    for (uint32_t il = 0; kv && il < hp->n_layer && !r->st; il++) {
        uint64_t v = 0;
        r->st = halo_gguf_array_u64(kv, il, &v, r->err);
        if (!r->st && v != 0 && v != 4 && v != 128) {
            r->st = halo_fail(r->err, HALO_E_BAD_VALUE,
                              "metadata key '%s' entry %u is %llu: DeepSeek V4 compresses by 0, "
                              "4 or 128", key("attention.compress_ratios"), il,
                              (unsigned long long)v);
        }
        hp->compress_ratio[il] = (uint32_t)v;
    }
}

static void read_clamps(reader *r, const char *suffix, float *out, uint32_t n_layer) {
    if (!has(r, suffix)) return; /* absent: no clamp */
    const halo_gguf_kv *kv = layer_array(r, suffix, n_layer);
    for (uint32_t il = 0; kv && il < n_layer && !r->st; il++) {
        double v = 0;
        r->st = halo_gguf_array_f64(kv, il, &v, r->err);
        out[il] = (float)v;
    }
}

static void read_rope_scaling(reader *r, halo_hparams *hp) {
    const char *type = NULL;
    if (r->st || !has(r, "rope.scaling.type")) return;
    r->st = halo_gguf_get_str(r->g, key("rope.scaling.type"), &type, r->err);
    if (r->st || strcmp(type, "none") == 0) return;
    if (strcmp(type, "yarn") != 0) {
        r->st = halo_fail(r->err, HALO_E_UNSUPPORTED,
                          "metadata key '%s' is '%s': halo implements 'yarn' and 'none'",
                          key("rope.scaling.type"), type);
        return;
    }
    hp->rope_yarn = true;
    get_f32(r, "rope.scaling.factor", &hp->yarn_factor);
    get_u32(r, "rope.scaling.original_context_length", &hp->yarn_orig_ctx);
    opt_f32(r, "rope.scaling.yarn_beta_fast", &hp->yarn_beta_fast);
    opt_f32(r, "rope.scaling.yarn_beta_slow", &hp->yarn_beta_slow);
}

static void read_vocab(reader *r, halo_hparams *hp) {
    if (r->st) return;
    if (has(r, "vocab_size")) {
        get_u32(r, "vocab_size", &hp->n_vocab);
        return;
    }
    const halo_gguf_kv *toks = halo_gguf_find_kv(r->g, "tokenizer.ggml.tokens");
    if (toks && toks->type == HALO_GGUF_ARRAY && toks->count <= UINT32_MAX) {
        hp->n_vocab = (uint32_t)toks->count;
        return;
    }
    r->st = halo_fail(r->err, HALO_E_NOT_FOUND,
                      "vocabulary size unknown: neither '%s' nor tokenizer.ggml.tokens is present",
                      key("vocab_size"));
}

/* Sane upper limits. Every dimension below sizes an allocation (activations, KV state, scratch)
 * or bounds a loop before any tensor is read, and products of two of them are formed in 64 bits:
 * capping each keeps those products far from overflow and a hostile file from asking for
 * terabytes. The limits sit one to three orders of magnitude above DeepSeek V4 Flash (and Pro):
 * embedding 4096 (7168), heads 64 (128), head dim 512, vocab 129280, experts 256 (384). */
#define MAX_EMBD (1u << 16)
#define MAX_HEADS 1024u
#define MAX_HEAD_DIM 8192u
#define MAX_RANK (1u << 16)
#define MAX_VOCAB (1u << 24)
#define MAX_EXPERTS 4096u
#define MAX_SHARED 64u
#define MAX_FF (1u << 18)
#define MAX_WINDOW (1u << 16)
#define MAX_TOPK (1u << 20)
#define MAX_CTX (1u << 30)
#define MAX_HC 16u
#define MAX_SINKHORN 1000u

static bool finite_f(float v) { return v == v && v - v == 0; }

/* Relations the forward pass relies on, and the limits above. */
static void check(reader *r, const halo_hparams *hp) {
#define REQUIRE(cond, k, v, msg)                                                                 \
    if (!r->st && !(cond)) fail(r, HALO_E_BAD_VALUE, "metadata key '%s' = %lld: " msg, key(k), \
                                (long long)(v))
#define REQUIRE_F(cond, k, v, msg)                                                               \
    if (!r->st && !(cond))                                                                       \
    r->st = halo_fail(r->err, HALO_E_BAD_VALUE, "metadata key '%s' = %g: " msg, key(k), (double)(v))
    REQUIRE(hp->n_layer >= 1 && hp->n_layer <= HALO_MAX_LAYERS, "block_count", hp->n_layer,
            "must be 1 to 256");
    REQUIRE(hp->n_embd > 0 && hp->n_embd <= MAX_EMBD, "embedding_length", hp->n_embd,
            "must be 1 to 65536");
    REQUIRE(hp->n_vocab > 0 && hp->n_vocab <= MAX_VOCAB, "vocab_size", hp->n_vocab,
            "must be 1 to 16777216");
    REQUIRE(hp->n_ctx_train <= MAX_CTX, "context_length", hp->n_ctx_train,
            "exceeds 2^30 positions");
    REQUIRE(hp->n_head > 0 && hp->n_head <= MAX_HEADS, "attention.head_count", hp->n_head,
            "must be 1 to 1024");
    REQUIRE(hp->n_head_kv == 1, "attention.head_count_kv", hp->n_head_kv,
            "DeepSeek V4 has one shared KV head");
    REQUIRE(hp->head_dim > 0 && hp->head_dim <= MAX_HEAD_DIM, "attention.key_length",
            hp->head_dim, "must be 1 to 8192");
    REQUIRE(hp->rope_dim > 0 && hp->rope_dim <= hp->head_dim && hp->rope_dim % 2 == 0,
            "rope.dimension_count", hp->rope_dim, "must be even and at most the head dim");
    REQUIRE(hp->q_lora_rank > 0 && hp->q_lora_rank <= MAX_RANK, "attention.q_lora_rank",
            hp->q_lora_rank, "must be 1 to 65536");
    REQUIRE(hp->o_lora_rank > 0 && hp->o_lora_rank <= MAX_RANK, "attention.output_lora_rank",
            hp->o_lora_rank, "must be 1 to 65536");
    REQUIRE(hp->o_groups > 0 && hp->n_head % hp->o_groups == 0, "attention.output_group_count",
            hp->o_groups, "must divide the head count");
    REQUIRE(hp->sliding_window > 0 && hp->sliding_window <= MAX_WINDOW,
            "attention.sliding_window", hp->sliding_window, "must be 1 to 65536");
    REQUIRE_F(finite_f(hp->norm_eps) && hp->norm_eps > 0, "attention.layer_norm_rms_epsilon",
              hp->norm_eps, "must be positive and finite");
    REQUIRE_F(finite_f(hp->rope_base) && hp->rope_base > 0, "rope.freq_base", hp->rope_base,
              "must be positive and finite");
    bool compressed = false, indexed = false;
    for (uint32_t il = 0; il < hp->n_layer && il < HALO_MAX_LAYERS; il++) {
        compressed |= hp->compress_ratio[il] != 0;
        indexed |= hp->compress_ratio[il] == 4;
    }
    if (compressed)
        REQUIRE_F(finite_f(hp->compress_rope_base) && hp->compress_rope_base > 0,
                  "attention.compress_rope_freq_base", hp->compress_rope_base,
                  "must be positive and finite");
    if (indexed) {
        REQUIRE(hp->indexer_n_head > 0 && hp->indexer_n_head <= MAX_HEADS,
                "attention.indexer.head_count", hp->indexer_n_head, "must be 1 to 1024");
        /* The indexer's queries and keys carry the same partial RoPE as attention. */
        REQUIRE(hp->indexer_head_dim >= hp->rope_dim && hp->indexer_head_dim <= MAX_HEAD_DIM,
                "attention.indexer.key_length", hp->indexer_head_dim,
                "must be at least rope.dimension_count and at most 8192");
        REQUIRE(hp->indexer_top_k > 0 && hp->indexer_top_k <= MAX_TOPK,
                "attention.indexer.top_k", hp->indexer_top_k, "must be 1 to 2^20");
    }
    if (hp->rope_yarn) {
        REQUIRE_F(finite_f(hp->yarn_factor) && hp->yarn_factor > 0, "rope.scaling.factor",
                  hp->yarn_factor, "must be positive and finite");
        REQUIRE(hp->yarn_orig_ctx > 0 && hp->yarn_orig_ctx <= MAX_CTX,
                "rope.scaling.original_context_length", hp->yarn_orig_ctx, "must be 1 to 2^30");
        REQUIRE_F(finite_f(hp->yarn_beta_fast), "rope.scaling.yarn_beta_fast", hp->yarn_beta_fast,
                  "must be finite");
        REQUIRE_F(finite_f(hp->yarn_beta_slow), "rope.scaling.yarn_beta_slow", hp->yarn_beta_slow,
                  "must be finite");
    }
    REQUIRE(hp->n_expert > 0 && hp->n_expert <= MAX_EXPERTS, "expert_count", hp->n_expert,
            "must be 1 to 4096");
    REQUIRE(hp->n_expert_used > 0 && hp->n_expert_used <= hp->n_expert &&
                hp->n_expert_used <= HALO_MAX_EXPERTS_USED,
            "expert_used_count", hp->n_expert_used, "must be 1 to expert_count (at most 64)");
    REQUIRE(hp->n_expert_shared <= MAX_SHARED, "expert_shared_count", hp->n_expert_shared,
            "must be at most 64");
    REQUIRE(hp->n_ff_exp > 0 && hp->n_ff_exp <= MAX_FF, "expert_feed_forward_length",
            hp->n_ff_exp, "must be 1 to 2^18");
    REQUIRE(hp->n_hash_layer <= hp->n_layer, "hash_layer_count", hp->n_hash_layer,
            "exceeds block_count");
    REQUIRE(hp->gating_func == HALO_GATING_SOFTMAX || hp->gating_func == HALO_GATING_SIGMOID ||
                hp->gating_func == HALO_GATING_SQRTSOFTPLUS,
            "expert_gating_func", hp->gating_func, "must be 1 (softmax), 2 (sigmoid) or 4 "
            "(sqrtsoftplus)");
    REQUIRE_F(finite_f(hp->expert_weights_scale), "expert_weights_scale",
              hp->expert_weights_scale, "must be finite");
    for (uint32_t il = 0; il < hp->n_layer && il < HALO_MAX_LAYERS; il++) {
        REQUIRE_F(finite_f(hp->swiglu_clamp_exp[il]) && hp->swiglu_clamp_exp[il] >= 0,
                  "swiglu_clamp_exp", hp->swiglu_clamp_exp[il], "must be finite and not negative");
        REQUIRE_F(finite_f(hp->swiglu_clamp_shexp[il]) && hp->swiglu_clamp_shexp[il] >= 0,
                  "swiglu_clamp_shexp", hp->swiglu_clamp_shexp[il],
                  "must be finite and not negative");
    }
    REQUIRE(hp->hc >= 1 && hp->hc <= MAX_HC, "hyper_connection.count", hp->hc, "must be 1 to 16");
    REQUIRE(hp->hc_sinkhorn_iters <= MAX_SINKHORN, "hyper_connection.sinkhorn_iterations",
            hp->hc_sinkhorn_iters, "must be at most 1000");
    REQUIRE_F(finite_f(hp->hc_eps) && hp->hc_eps >= 0, "hyper_connection.epsilon", hp->hc_eps,
              "must be finite and not negative");
#undef REQUIRE
#undef REQUIRE_F
}

halo_status halo_hparams_load(const halo_gguf *g, halo_hparams *hp, halo_error *err) {
    memset(hp, 0, sizeof *hp);
    reader r = {.g = g, .err = err};
    const char *arch = NULL;
    r.st = halo_gguf_get_str(g, "general.architecture", &arch, err);
    if (!r.st && strcmp(arch, ARCH) != 0)
        r.st = halo_fail(err, HALO_E_UNSUPPORTED,
                         "general.architecture is '%s': halo runs '" ARCH "' models", arch);

    get_u32(&r, "block_count", &hp->n_layer);
    if (!r.st && (hp->n_layer == 0 || hp->n_layer > HALO_MAX_LAYERS))
        fail(&r, HALO_E_BAD_VALUE, "metadata key '%s' = %lld: must be 1 to 256",
             key("block_count"), hp->n_layer);
    get_u32(&r, "embedding_length", &hp->n_embd);
    read_vocab(&r, hp);
    get_u32(&r, "context_length", &hp->n_ctx_train);

    get_u32(&r, "attention.head_count", &hp->n_head);
    get_u32(&r, "attention.head_count_kv", &hp->n_head_kv);
    get_u32(&r, "attention.key_length", &hp->head_dim);
    uint32_t value_len = 0;
    get_u32(&r, "attention.value_length", &value_len);
    if (!r.st && value_len != hp->head_dim)
        fail(&r, HALO_E_BAD_VALUE, "metadata key '%s' = %lld: must equal the key length",
             key("attention.value_length"), value_len);
    get_u32(&r, "rope.dimension_count", &hp->rope_dim);
    get_u32(&r, "attention.q_lora_rank", &hp->q_lora_rank);
    get_u32(&r, "attention.output_group_count", &hp->o_groups);
    get_u32(&r, "attention.output_lora_rank", &hp->o_lora_rank);
    get_u32(&r, "attention.sliding_window", &hp->sliding_window);
    get_f32(&r, "attention.layer_norm_rms_epsilon", &hp->norm_eps);

    read_compress_ratios(&r, hp);
    bool any_indexed = false, any_compressed = false;
    for (uint32_t il = 0; !r.st && il < hp->n_layer; il++) {
        any_compressed |= hp->compress_ratio[il] != 0;
        any_indexed |= hp->compress_ratio[il] == 4;
    }
    hp->compress_rope_base = 0;
    if (any_compressed) get_f32(&r, "attention.compress_rope_freq_base", &hp->compress_rope_base);
    if (any_indexed) {
        get_u32(&r, "attention.indexer.head_count", &hp->indexer_n_head);
        get_u32(&r, "attention.indexer.key_length", &hp->indexer_head_dim);
        get_u32(&r, "attention.indexer.top_k", &hp->indexer_top_k);
    }

    get_f32(&r, "rope.freq_base", &hp->rope_base);
    read_rope_scaling(&r, hp);

    get_u32(&r, "expert_count", &hp->n_expert);
    get_u32(&r, "expert_used_count", &hp->n_expert_used);
    get_u32(&r, "expert_shared_count", &hp->n_expert_shared);
    get_u32(&r, "expert_feed_forward_length", &hp->n_ff_exp);
    get_u32(&r, "expert_gating_func", &hp->gating_func);
    hp->expert_weights_scale = 1.0f;
    opt_f32(&r, "expert_weights_scale", &hp->expert_weights_scale);
    if (!r.st && has(&r, "expert_weights_norm"))
        r.st = halo_gguf_get_bool(g, key("expert_weights_norm"), &hp->expert_weights_norm, err);
    opt_u32(&r, "hash_layer_count", &hp->n_hash_layer);
    read_clamps(&r, "swiglu_clamp_exp", hp->swiglu_clamp_exp, hp->n_layer);
    read_clamps(&r, "swiglu_clamp_shexp", hp->swiglu_clamp_shexp, hp->n_layer);

    get_u32(&r, "hyper_connection.count", &hp->hc);
    get_u32(&r, "hyper_connection.sinkhorn_iterations", &hp->hc_sinkhorn_iters);
    get_f32(&r, "hyper_connection.epsilon", &hp->hc_eps);

    check(&r, hp);
    return r.st;
}
