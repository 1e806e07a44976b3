/* The synthetic DeepSeek V4 Flash: spec parsing, the tensor table, the metadata, and opening the
 * model in place. The bytes are made in synthetic_fill.c.
 *
 * Shapes follow llama.cpp v0.5.0's llama_model_deepseek4::load_arch_tensors and the released
 * config.json (docs/dsv4-flash-table.md gives the source of every number); tensors come in the
 * order of ds4's files. tests/model/test_synthetic.c checks the table against the independent
 * one in tests/common/dsv4_flash.c. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "model/synthetic.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/error.h"

/* Hyperparameters of deepseek-ai/DeepSeek-V4-Flash (config.json). */
enum {
    N_EMBD = 4096,
    N_VOCAB = 129280,
    N_HEAD = 64,
    HEAD_DIM = 512,
    ROPE_DIM = 64,
    Q_RANK = 1024,
    O_GROUPS = 8,
    O_RANK = 1024,
    N_EXPERT = 256,
    N_EXPERT_USED = 6,
    N_FF_EXP = 2048,
    N_HASH_LAYER = 3,
    HC = 4,
    IDX_HEADS = 64,
    IDX_DIM = 128,
    IDX_TOP_K = 512,
    WINDOW = 128,
};

static const char *const mix_names[HALO_SYNTH_MIX_COUNT] = {"dsv4-flash-q2", "dsv4-flash-q2q4",
                                                            "dsv4-flash-mxfp4"};

const char *halo_synth_mix_name(halo_synth_mix mix) {
    return mix < HALO_SYNTH_MIX_COUNT ? mix_names[mix] : "?";
}

bool halo_synth_is_path(const char *path) {
    return path && strncmp(path, HALO_SYNTH_PREFIX, strlen(HALO_SYNTH_PREFIX)) == 0;
}

uint32_t halo_synth_n_expert(const halo_synth_spec *s) {
    return s->n_expert ? s->n_expert : N_EXPERT;
}

uint32_t halo_synth_n_vocab(const halo_synth_spec *s) {
    return s->n_vocab ? s->n_vocab : N_VOCAB;
}

/* A decimal after a separator; *p is left after it. */
static bool parse_num(const char **p, unsigned long long max, unsigned long long *out) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(*p, &end, 10);
    if (end == *p || errno || v > max || **p == '-' || **p == '+') return false;
    *p = end;
    *out = v;
    return true;
}

halo_status halo_synth_parse(const char *s, halo_synth_spec *out, halo_error *err) {
    const char *p = halo_synth_is_path(s) ? s + strlen(HALO_SYNTH_PREFIX) : s;
    halo_synth_spec spec = {HALO_SYNTH_Q2, HALO_SYNTH_MAX_LAYER, 1, 0, 0};
    size_t len = strcspn(p, ":/@");
    int mix = -1;
    for (int i = 0; i < HALO_SYNTH_MIX_COUNT; i++)
        if (strlen(mix_names[i]) == len && strncmp(p, mix_names[i], len) == 0) mix = i;
    if (mix < 0)
        return halo_fail(err, HALO_E_INVALID_ARG,
                         "synthetic model '%s': unknown kind (expected dsv4-flash-q2, "
                         "dsv4-flash-q2q4 or dsv4-flash-mxfp4, then optionally :LAYERS, "
                         "/eEXPERTS, /vVOCAB and @SEED)",
                         s);
    spec.mix = (halo_synth_mix)mix;
    p += len;
    unsigned long long v;
    if (*p == ':') {
        p++;
        if (!parse_num(&p, HALO_SYNTH_MAX_LAYER, &v) || v < 1)
            return halo_fail(err, HALO_E_INVALID_ARG,
                             "synthetic model '%s': the layer count must be 1..%d", s,
                             HALO_SYNTH_MAX_LAYER);
        spec.n_layer = (uint32_t)v;
    }
    while (*p == '/') {
        char what = p[1];
        p += 2;
        if (what == 'e' && parse_num(&p, N_EXPERT, &v) && v >= N_EXPERT_USED)
            spec.n_expert = (uint32_t)v;
        else if (what == 'v' && parse_num(&p, N_VOCAB, &v) && v >= 16)
            spec.n_vocab = (uint32_t)v;
        else
            return halo_fail(err, HALO_E_INVALID_ARG,
                             "synthetic model '%s': /eN takes %d..%d experts, /vN %d..%d "
                             "vocabulary rows",
                             s, N_EXPERT_USED, N_EXPERT, 16, N_VOCAB);
    }
    if (*p == '@') {
        p++;
        if (!parse_num(&p, ~0ull, &v))
            return halo_fail(err, HALO_E_INVALID_ARG, "synthetic model '%s': bad seed", s);
        spec.seed = v;
    }
    if (*p) return halo_fail(err, HALO_E_INVALID_ARG, "synthetic model '%s': trailing '%s'", s, p);
    *out = spec;
    return HALO_OK;
}

/* config.json: two sliding-window-only layers, then ratio 4 (with the indexer) and ratio 128
 * alternating. A model cut to fewer layers keeps the first ones. */
static uint32_t layer_ratio(uint32_t il) {
    return il < 2 ? 0 : il % 2 == 0 ? 4 : 128;
}

/* ---- the table ----------------------------------------------------------------------------- */

typedef enum tclass {
    C_EMBD,    /* F16 */
    C_OUTPUT,  /* Q8_0 */
    C_VEC,     /* every 1-D tensor: F32 */
    C_F16,     /* HC mixers, router, compressors, indexer: F16 */
    C_Q8,      /* attention projections, shared expert: Q8_0 */
    C_HASH,    /* hash routing: I32 */
    C_GATE_UP, /* routed gate/up */
    C_DOWN,    /* routed down */
} tclass;

typedef struct walker {
    const halo_synth_spec *s;
    halo_synth_tensor_fn fn;
    void *user;
    uint64_t visited;
    bool stop;
} walker;

static uint32_t class_type(const halo_synth_spec *s, tclass c, int il) {
    switch (c) {
    case C_EMBD:
    case C_F16:
        return HALO_TYPE_F16;
    case C_OUTPUT:
    case C_Q8:
        return HALO_TYPE_Q8_0;
    case C_VEC:
        return HALO_TYPE_F32;
    case C_HASH:
        return HALO_TYPE_I32;
    case C_GATE_UP:
    case C_DOWN:
        if (s->mix == HALO_SYNTH_MXFP4) return HALO_TYPE_MXFP4;
        if (s->mix == HALO_SYNTH_Q2Q4 && il >= 37 && il <= 42) return HALO_TYPE_Q4_K;
        return c == C_GATE_UP ? HALO_TYPE_IQ2_XXS : HALO_TYPE_Q2_K;
    }
    return HALO_TYPE_F32;
}

static void emit(walker *wk, tclass c, int il, const char *suffix, uint32_t n_dims, int64_t ne0,
                 int64_t ne1, int64_t ne2) {
    if (wk->stop) return;
    halo_synth_tensor t;
    memset(&t, 0, sizeof t);
    if (il >= 0)
        snprintf(t.name, sizeof t.name, "blk.%d.%s", il, suffix);
    else
        snprintf(t.name, sizeof t.name, "%s", suffix);
    t.type = class_type(wk->s, c, il);
    t.n_dims = n_dims;
    t.ne[0] = ne0;
    t.ne[1] = n_dims > 1 ? ne1 : 1;
    t.ne[2] = n_dims > 2 ? ne2 : 1;
    t.ne[3] = 1;
    if (!halo_type_bytes(t.type, (uint64_t)(t.ne[0] * t.ne[1] * t.ne[2]), &t.n_bytes))
        t.n_bytes = 0; /* cannot happen: every shape is whole blocks */
    wk->visited++;
    if (wk->fn && wk->fn(&t, wk->user)) wk->stop = true;
}

static void emit_layer(walker *wk, int il) {
    const int64_t hc_dim = (int64_t)HC * N_EMBD, hc_mix = (2 + HC) * HC;
    const int64_t o_in = (int64_t)N_HEAD * HEAD_DIM / O_GROUPS, o_low = (int64_t)O_GROUPS * O_RANK;
    emit(wk, C_VEC, il, "attn_norm.weight", 1, N_EMBD, 0, 0);
    emit(wk, C_VEC, il, "attn_sinks.weight", 1, N_HEAD, 0, 0);
    emit(wk, C_Q8, il, "attn_q_a.weight", 2, N_EMBD, Q_RANK, 0);
    emit(wk, C_VEC, il, "attn_q_a_norm.weight", 1, Q_RANK, 0, 0);
    emit(wk, C_Q8, il, "attn_q_b.weight", 2, Q_RANK, (int64_t)N_HEAD * HEAD_DIM, 0);
    emit(wk, C_Q8, il, "attn_kv.weight", 2, N_EMBD, HEAD_DIM, 0);
    emit(wk, C_VEC, il, "attn_kv_a_norm.weight", 1, HEAD_DIM, 0, 0);
    /* grouped low-rank output: stored 2-D, viewed 3-D by the forward */
    emit(wk, C_Q8, il, "attn_output_a.weight", 2, o_in, o_low, 0);
    emit(wk, C_Q8, il, "attn_output_b.weight", 2, o_low, N_EMBD, 0);
    emit(wk, C_F16, il, "hc_attn_fn.weight", 2, hc_dim, hc_mix, 0);
    emit(wk, C_VEC, il, "hc_attn_base.weight", 1, hc_mix, 0, 0);
    emit(wk, C_VEC, il, "hc_attn_scale.weight", 1, 3, 0, 0);
    emit(wk, C_F16, il, "hc_ffn_fn.weight", 2, hc_dim, hc_mix, 0);
    emit(wk, C_VEC, il, "hc_ffn_base.weight", 1, hc_mix, 0, 0);
    emit(wk, C_VEC, il, "hc_ffn_scale.weight", 1, 3, 0, 0);
    uint32_t ratio = layer_ratio((uint32_t)il);
    if (ratio) {
        /* ratio-4 compressors pool two overlapping windows: twice the width */
        int64_t width = (ratio == 4 ? 2 : 1) * HEAD_DIM;
        emit(wk, C_F16, il, "attn_compressor_kv.weight", 2, N_EMBD, width, 0);
        emit(wk, C_F16, il, "attn_compressor_gate.weight", 2, N_EMBD, width, 0);
        emit(wk, C_F16, il, "attn_compressor_ape.weight", 2, width, ratio, 0);
        emit(wk, C_VEC, il, "attn_compressor_norm.weight", 1, HEAD_DIM, 0, 0);
    }
    if (ratio == 4) {
        emit(wk, C_F16, il, "indexer.proj.weight", 2, N_EMBD, IDX_HEADS, 0);
        emit(wk, C_F16, il, "indexer.attn_q_b.weight", 2, Q_RANK, (int64_t)IDX_HEADS * IDX_DIM, 0);
        emit(wk, C_F16, il, "indexer_compressor_kv.weight", 2, N_EMBD, 2 * IDX_DIM, 0);
        emit(wk, C_F16, il, "indexer_compressor_gate.weight", 2, N_EMBD, 2 * IDX_DIM, 0);
        emit(wk, C_F16, il, "indexer_compressor_ape.weight", 2, 2 * IDX_DIM, ratio, 0);
        emit(wk, C_VEC, il, "indexer_compressor_norm.weight", 1, IDX_DIM, 0, 0);
    }
    const int64_t n_exp = halo_synth_n_expert(wk->s), n_vocab = halo_synth_n_vocab(wk->s);
    emit(wk, C_F16, il, "ffn_gate_inp.weight", 2, N_EMBD, n_exp, 0);
    /* hash-routed layers pick experts by token id and have no score bias */
    if (il < N_HASH_LAYER)
        emit(wk, C_HASH, il, "ffn_gate_tid2eid.weight", 2, N_EXPERT_USED, n_vocab, 0);
    else
        emit(wk, C_VEC, il, "exp_probs_b.bias", 1, n_exp, 0, 0);
    emit(wk, C_VEC, il, "ffn_norm.weight", 1, N_EMBD, 0, 0);
    emit(wk, C_GATE_UP, il, "ffn_gate_exps.weight", 3, N_EMBD, N_FF_EXP, n_exp);
    emit(wk, C_DOWN, il, "ffn_down_exps.weight", 3, N_FF_EXP, N_EMBD, n_exp);
    emit(wk, C_GATE_UP, il, "ffn_up_exps.weight", 3, N_EMBD, N_FF_EXP, n_exp);
    emit(wk, C_Q8, il, "ffn_gate_shexp.weight", 2, N_EMBD, N_FF_EXP, 0);
    emit(wk, C_Q8, il, "ffn_down_shexp.weight", 2, N_FF_EXP, N_EMBD, 0);
    emit(wk, C_Q8, il, "ffn_up_shexp.weight", 2, N_EMBD, N_FF_EXP, 0);
}

uint64_t halo_synth_for_each_tensor(const halo_synth_spec *s, halo_synth_tensor_fn fn, void *user) {
    walker wk = {s, fn, user, 0, false};
    const int64_t n_vocab = halo_synth_n_vocab(s);
    emit(&wk, C_EMBD, -1, "token_embd.weight", 2, N_EMBD, n_vocab, 0);
    for (uint32_t il = 0; il < s->n_layer && !wk.stop; il++)
        emit_layer(&wk, (int)il);
    emit(&wk, C_VEC, -1, "output_norm.weight", 1, N_EMBD, 0, 0);
    emit(&wk, C_OUTPUT, -1, "output.weight", 2, N_EMBD, n_vocab, 0);
    emit(&wk, C_F16, -1, "output_hc_fn.weight", 2, (int64_t)HC * N_EMBD, HC, 0);
    emit(&wk, C_VEC, -1, "output_hc_base.weight", 1, HC, 0, 0);
    emit(&wk, C_VEC, -1, "output_hc_scale.weight", 1, 1, 0, 0);
    return wk.visited;
}

static int add_bytes(const halo_synth_tensor *t, void *user) {
    *(uint64_t *)user += t->n_bytes;
    return 0;
}

uint64_t halo_synth_tensor_bytes(const halo_synth_spec *s) {
    uint64_t total = 0;
    halo_synth_for_each_tensor(s, add_bytes, &total);
    return total;
}

/* ---- metadata ------------------------------------------------------------------------------ */

#define KEY(k) "deepseek4." k

static halo_status add_metadata(const halo_synth_spec *s, halo_gguf_writer *w) {
    /* Per-layer arrays: llama.cpp wants block_count entries; the released file's
     * compress_ratios has one more, for the MTP layer (ratio 0), kept at 43 layers. */
    uint32_t n = s->n_layer, n_ratios = n == HALO_SYNTH_MAX_LAYER ? n + 1 : n;
    float clamp[HALO_SYNTH_MAX_LAYER];
    int32_t ratios[HALO_SYNTH_MAX_LAYER + 1];
    for (uint32_t i = 0; i < n; i++)
        clamp[i] = 10.0f; /* swiglu_limit */
    for (uint32_t i = 0; i < n_ratios; i++)
        ratios[i] = i < n ? (int32_t)layer_ratio(i) : 0;
    char name[96];
    snprintf(name, sizeof name,
             "DeepSeek V4 Flash (synthetic %s, %u layers, %u experts, %u "
             "vocab, seed %llu)",
             halo_synth_mix_name(s->mix), n, halo_synth_n_expert(s), halo_synth_n_vocab(s),
             (unsigned long long)s->seed);

    /* Setters record the first failure in the writer, reported once by the caller. */
    halo_gguf_writer_set_str(w, "general.architecture", "deepseek4");
    halo_gguf_writer_set_str(w, "general.name", name);
    /* llama.cpp's numbering: 19 MOSTLY_IQ2_XXS, 38 MOSTLY_MXFP4_MOE */
    halo_gguf_writer_set_u32(w, "general.file_type", s->mix == HALO_SYNTH_MXFP4 ? 38 : 19);
    halo_gguf_writer_set_u32(w, "general.quantization_version", 2);
    halo_gguf_writer_set_u32(w, KEY("context_length"), 1048576);
    halo_gguf_writer_set_u32(w, KEY("embedding_length"), N_EMBD);
    halo_gguf_writer_set_u32(w, KEY("embedding_length_out"), N_EMBD * HC);
    halo_gguf_writer_set_u32(w, KEY("block_count"), n);
    halo_gguf_writer_set_u32(w, KEY("vocab_size"), halo_synth_n_vocab(s));
    halo_gguf_writer_set_u32(w, KEY("attention.head_count"), N_HEAD);
    halo_gguf_writer_set_u32(w, KEY("attention.head_count_kv"), 1);
    halo_gguf_writer_set_u32(w, KEY("attention.key_length"), HEAD_DIM);
    halo_gguf_writer_set_u32(w, KEY("attention.value_length"), HEAD_DIM);
    halo_gguf_writer_set_f32(w, KEY("attention.layer_norm_rms_epsilon"), 1e-6f);
    halo_gguf_writer_set_u32(w, KEY("attention.q_lora_rank"), Q_RANK);
    halo_gguf_writer_set_u32(w, KEY("attention.sliding_window"), WINDOW);
    halo_gguf_writer_set_u32(w, KEY("attention.output_group_count"), O_GROUPS);
    halo_gguf_writer_set_u32(w, KEY("attention.output_lora_rank"), O_RANK);
    halo_gguf_writer_set_array(w, KEY("attention.compress_ratios"), HALO_GGUF_I32, ratios,
                               n_ratios);
    halo_gguf_writer_set_f32(w, KEY("attention.compress_rope_freq_base"), 160000.0f);
    halo_gguf_writer_set_u32(w, KEY("attention.indexer.head_count"), IDX_HEADS);
    halo_gguf_writer_set_u32(w, KEY("attention.indexer.key_length"), IDX_DIM);
    halo_gguf_writer_set_u32(w, KEY("attention.indexer.top_k"), IDX_TOP_K);
    halo_gguf_writer_set_u32(w, KEY("rope.dimension_count"), ROPE_DIM);
    halo_gguf_writer_set_f32(w, KEY("rope.freq_base"), 10000.0f);
    halo_gguf_writer_set_str(w, KEY("rope.scaling.type"), "yarn");
    halo_gguf_writer_set_f32(w, KEY("rope.scaling.factor"), 16.0f);
    halo_gguf_writer_set_u32(w, KEY("rope.scaling.original_context_length"), 65536);
    halo_gguf_writer_set_f32(w, KEY("rope.scaling.yarn_beta_fast"), 32.0f);
    halo_gguf_writer_set_f32(w, KEY("rope.scaling.yarn_beta_slow"), 1.0f);
    halo_gguf_writer_set_u32(w, KEY("expert_count"), halo_synth_n_expert(s));
    halo_gguf_writer_set_u32(w, KEY("expert_used_count"), N_EXPERT_USED);
    halo_gguf_writer_set_u32(w, KEY("expert_shared_count"), 1);
    halo_gguf_writer_set_u32(w, KEY("expert_feed_forward_length"), N_FF_EXP);
    halo_gguf_writer_set_u32(w, KEY("expert_gating_func"), 4); /* sqrtsoftplus */
    halo_gguf_writer_set_f32(w, KEY("expert_weights_scale"), 1.5f);
    halo_gguf_writer_set_bool(w, KEY("expert_weights_norm"), true);
    halo_gguf_writer_set_array(w, KEY("swiglu_clamp_exp"), HALO_GGUF_F32, clamp, n);
    halo_gguf_writer_set_array(w, KEY("swiglu_clamp_shexp"), HALO_GGUF_F32, clamp, n);
    halo_gguf_writer_set_u32(w, KEY("hash_layer_count"), n < N_HASH_LAYER ? n : N_HASH_LAYER);
    halo_gguf_writer_set_u32(w, KEY("hyper_connection.count"), HC);
    halo_gguf_writer_set_u32(w, KEY("hyper_connection.sinkhorn_iterations"), 20);
    halo_gguf_writer_set_f32(w, KEY("hyper_connection.epsilon"), 1e-6f);
    /* token ids only: llama.cpp makes vocab_size dummy tokens for "no_vocab" */
    halo_gguf_writer_set_str(w, "tokenizer.ggml.model", "no_vocab");
    halo_gguf_writer_set_u64(w, "halo.synthetic.seed", s->seed);
    return HALO_OK;
}

static int add_tensor(const halo_synth_tensor *t, void *user) {
    return halo_gguf_writer_add_tensor(user, t->name, t->type, t->n_dims, t->ne, NULL) != HALO_OK;
}

halo_status halo_synth_add_to_writer(const halo_synth_spec *s, halo_gguf_writer *w,
                                     halo_error *err) {
    add_metadata(s, w);
    halo_synth_for_each_tensor(s, add_tensor, w);
    const halo_error *we = halo_gguf_writer_error(w);
    if (we && we->status != HALO_OK) {
        if (err) *err = *we;
        return we->status;
    }
    return HALO_OK;
}

/* ---- the model in place -------------------------------------------------------------------- */

/* The GGUF header image: written through the writer into an anonymous memory file (the data
 * section stays a hole there), then copied to the front of a mapping of the file's full size,
 * whose data section is where the weights will be generated. */
static halo_status make_image(const halo_synth_spec *s, uint8_t **base, size_t *size,
                              halo_error *err) {
    halo_gguf_writer *w = halo_gguf_writer_create();
    if (!w) return halo_fail(err, HALO_E_NOMEM, "out of memory");
    halo_status st = halo_synth_add_to_writer(s, w, err);
    int fd = st ? -1 : memfd_create("halo-synthetic-header", MFD_CLOEXEC);
    if (!st && fd < 0) st = halo_fail(err, HALO_E_IO, "memfd_create: %s", strerror(errno));
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    if (!st) st = halo_gguf_writer_write_file(w, path, err);
    halo_gguf_writer_free(w);
    halo_gguf *hdr = NULL;
    if (!st) st = halo_gguf_open(path, &hdr, err);
    uint64_t total = st ? 0 : halo_gguf_shard_size(hdr, 0);
    uint64_t head = st ? 0 : halo_gguf_shard_data_offset(hdr, 0);
    halo_gguf_close(hdr);
    uint8_t *img = NULL;
    if (!st) {
        /* NORESERVE: untouched pages cost nothing, so admission can refuse before any is. */
        img = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
        if (img == MAP_FAILED) {
            img = NULL;
            st = halo_fail(err, HALO_E_NOMEM, "cannot map %llu bytes for the synthetic model: %s",
                           (unsigned long long)total, strerror(errno));
        } else {
            madvise(img, total, MADV_HUGEPAGE); /* fewer TLB misses; a hint only */
        }
    }
    for (uint64_t got = 0; !st && got < head;) {
        ssize_t n = pread(fd, img + got, head - got, (off_t)got);
        if (n <= 0) st = halo_fail(err, HALO_E_IO, "reading the synthetic header back failed");
        got += n > 0 ? (uint64_t)n : 0;
    }
    if (fd >= 0) close(fd);
    if (st) {
        if (img) munmap(img, total);
        return st;
    }
    *base = img;
    *size = total;
    return HALO_OK;
}

static void *hash_dst(uint64_t index, const halo_gguf_tensor *t, void *user) {
    return t->type == HALO_TYPE_I32 ? (void *)halo_mem_arena_tensor(user, index) : NULL;
}

halo_status halo_synth_open(const char *path, halo_gguf **g, halo_mem_arena **arena,
                            halo_error *err) {
    *g = NULL;
    *arena = NULL;
    halo_synth_spec s;
    halo_status st = halo_synth_parse(path, &s, err);
    uint8_t *img = NULL;
    size_t size = 0;
    if (!st) st = make_image(&s, &img, &size, err);
    if (st) return st;
    st = halo_gguf_open_memory(img, size, g, err);
    if (!st) st = halo_mem_arena_adopt(*g, img, size, arena, err);
    /* The hash-routing tables now (a few MB): opening a model checks them before loading. */
    if (!st) st = halo_synth_fill_all(&s, *g, hash_dst, *arena, 0, NULL, NULL, err);
    if (st) {
        halo_gguf_close(*g);
        *g = NULL;
        if (*arena)
            halo_mem_arena_free(*arena);
        else
            munmap(img, size);
        *arena = NULL;
        return st;
    }
    return HALO_OK;
}

typedef struct arena_pick {
    halo_mem_arena *arena;
    const bool *only; /* NULL: every tensor */
} arena_pick;

static void *arena_dst(uint64_t index, const halo_gguf_tensor *t, void *user) {
    (void)t;
    const arena_pick *a = user;
    if (a->only && !a->only[index]) return NULL;
    return (void *)halo_mem_arena_tensor(a->arena, index);
}

halo_status halo_synth_fill_arena(const char *path, const halo_gguf *g, halo_mem_arena *arena,
                                  const bool *only, uint32_t threads,
                                  halo_load_progress_fn progress, void *user, halo_error *err) {
    halo_synth_spec s;
    halo_status st = halo_synth_parse(path, &s, err);
    if (st) return st;
    arena_pick a = {arena, only};
    return halo_synth_fill_all(&s, g, arena_dst, &a, threads, progress, user, err);
}

/* ---- writing a GGUF ------------------------------------------------------------------------ */

typedef struct one_tensor {
    uint64_t index;
    void *buf;
} one_tensor;

static void *only_one(uint64_t index, const halo_gguf_tensor *t, void *user) {
    (void)t;
    one_tensor *o = user;
    return index == o->index ? o->buf : NULL;
}

typedef struct write_progress {
    halo_load_progress_fn fn;
    void *user;
    uint64_t before, total;
} write_progress;

static void tensor_progress(const halo_load_progress *p, void *user) {
    write_progress *wp = user;
    halo_load_progress q = {wp->before + p->done, wp->total, p->seconds};
    if (wp->fn) wp->fn(&q, wp->user);
}

/* The header first (the data a sparse hole), then each tensor generated into a buffer by every
 * thread and written at its offset: memory stays at one tensor (1 GiB at most, the embedding). */
halo_status halo_synth_write_gguf(const halo_synth_spec *s, const char *path, uint32_t threads,
                                  halo_load_progress_fn progress, void *user, halo_error *err) {
    halo_gguf_writer *w = halo_gguf_writer_create();
    if (!w) return halo_fail(err, HALO_E_NOMEM, "out of memory");
    halo_status st = halo_synth_add_to_writer(s, w, err);
    if (!st) st = halo_gguf_writer_write_file(w, path, err);
    halo_gguf_writer_free(w);
    halo_gguf *g = NULL;
    if (!st) st = halo_gguf_open(path, &g, err);
    int fd = st ? -1 : open(path, O_WRONLY | O_CLOEXEC);
    if (!st && fd < 0) st = halo_fail(err, HALO_E_IO, "%s: %s", path, strerror(errno));
    write_progress wp = {progress, user, 0, halo_synth_tensor_bytes(s)};
    for (uint64_t i = 0; !st && i < halo_gguf_tensor_count(g); i++) {
        const halo_gguf_tensor *t = halo_gguf_tensor_at(g, i);
        one_tensor o = {i, malloc(t->n_bytes ? t->n_bytes : 1)};
        if (!o.buf) st = halo_fail(err, HALO_E_NOMEM, "out of memory for tensor %s", t->name);
        if (!st) st = halo_synth_fill_all(s, g, only_one, &o, threads, tensor_progress, &wp, err);
        for (uint64_t done = 0; !st && done < t->n_bytes;) {
            ssize_t n = pwrite(fd, (uint8_t *)o.buf + done, t->n_bytes - done,
                               (off_t)(t->file_offset + done));
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0)
                st = halo_fail(err, HALO_E_IO, "%s: writing tensor %s: %s", path, t->name,
                               strerror(errno));
            done += n > 0 ? (uint64_t)n : 0;
        }
        free(o.buf);
        wp.before += t->n_bytes;
    }
    if (fd >= 0 && close(fd) != 0 && !st)
        st = halo_fail(err, HALO_E_IO, "%s: close: %s", path, strerror(errno));
    halo_gguf_close(g);
    return st;
}
