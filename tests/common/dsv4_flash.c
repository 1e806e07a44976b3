/* DeepSeek V4 Flash's tensor table and metadata. Shapes follow llama.cpp v0.5.0's
 * llama_model_deepseek4::load_arch_tensors (ggml order, ne[0] contiguous); names follow
 * llama-arch.cpp, which ds4's files share; types follow the two mixes described in the header.
 * docs/dsv4-flash-table.md gives the source of every number. */
#include "common/dsv4_flash.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* Tensor classes whose type depends on the mix. */
typedef enum tclass {
    C_TOKEN_EMBD, /* HF embed.weight, BF16 */
    C_OUTPUT,     /* HF head.weight */
    C_VEC_F32,    /* every 1-D tensor: norms, sinks, HC base/scale, routing bias */
    C_HC_FN,      /* HC mixers hc_{attn,ffn,head}_fn, F32 in the checkpoint */
    C_ATTN_PROJ,  /* attn_q_a, attn_q_b, attn_kv, attn_output_a/b, FP8 in the checkpoint */
    C_SHEXP,      /* shared expert, FP8 in the checkpoint */
    C_ROUTER,     /* ffn_gate_inp, BF16 */
    C_HASH,       /* ffn_gate_tid2eid, I64 in the checkpoint */
    C_COMP_PROJ,  /* attn/indexer compressor kv and gate, BF16 */
    C_COMP_APE,   /* compressor position bias, F32 */
    C_IDX_Q_B,    /* indexer.attn_q_b, FP8 */
    C_IDX_PROJ,   /* indexer.proj (head weights), BF16 */
    C_EXP_GATE_UP,
    C_EXP_DOWN,
    C_COUNT
} tclass;

static const uint32_t mix_types[2][C_COUNT] = {
    [DSV4_MIX_DS4_Q2] =
        {
            [C_TOKEN_EMBD] = HALO_TYPE_F16,
            [C_OUTPUT] = HALO_TYPE_Q8_0,
            [C_VEC_F32] = HALO_TYPE_F32,
            [C_HC_FN] = HALO_TYPE_F16,
            [C_ATTN_PROJ] = HALO_TYPE_Q8_0,
            [C_SHEXP] = HALO_TYPE_Q8_0,
            [C_ROUTER] = HALO_TYPE_F16,
            [C_HASH] = HALO_TYPE_I32,
            [C_COMP_PROJ] = HALO_TYPE_F16,
            [C_COMP_APE] = HALO_TYPE_F16,
            [C_IDX_Q_B] = HALO_TYPE_F16,
            [C_IDX_PROJ] = HALO_TYPE_F16,
            [C_EXP_GATE_UP] = HALO_TYPE_IQ2_XXS,
            [C_EXP_DOWN] = HALO_TYPE_Q2_K,
        },
    /* conversion/deepseek.py tensor_force_quant: FP8-dequantized matrices -> Q8_0, F32 source
     * -> F32, BF16 source matrices -> BF16; base.py stores every 1-D tensor as F32. */
    [DSV4_MIX_LLAMA_CPP] =
        {
            [C_TOKEN_EMBD] = HALO_TYPE_BF16,
            [C_OUTPUT] = HALO_TYPE_BF16,
            [C_VEC_F32] = HALO_TYPE_F32,
            [C_HC_FN] = HALO_TYPE_F32,
            [C_ATTN_PROJ] = HALO_TYPE_Q8_0,
            [C_SHEXP] = HALO_TYPE_Q8_0,
            [C_ROUTER] = HALO_TYPE_BF16,
            [C_HASH] = HALO_TYPE_I32,
            [C_COMP_PROJ] = HALO_TYPE_BF16,
            [C_COMP_APE] = HALO_TYPE_F32,
            [C_IDX_Q_B] = HALO_TYPE_Q8_0,
            [C_IDX_PROJ] = HALO_TYPE_BF16,
            [C_EXP_GATE_UP] = HALO_TYPE_MXFP4,
            [C_EXP_DOWN] = HALO_TYPE_MXFP4,
        },
};

/* config.json: two sliding-window-only layers, then ratio 4 (CSA, with indexer) and 128 (HCA)
 * alternating; the 44th entry belongs to the MTP layer. */
uint32_t dsv4_flash_compress_ratio(uint32_t il) {
    if (il < 2 || il >= DSV4_FLASH_N_COMPRESS_RATIOS - 1) return 0;
    return il % 2 == 0 ? 4 : 128;
}

uint32_t dsv4_flash_file_type(dsv4_mix mix) {
    return mix == DSV4_MIX_LLAMA_CPP ? 38 : 19;
}

/* ---- tensor enumeration ------------------------------------------------------------------- */

typedef struct walker {
    dsv4_mix mix;
    dsv4_tensor_fn fn;
    void *user;
    uint64_t visited;
    bool stop;
} walker;

static void emit(walker *wk, tclass cls, const char *name, uint32_t n_dims, int64_t ne0,
                 int64_t ne1, int64_t ne2) {
    if (wk->stop) return;
    dsv4_tensor t;
    memset(&t, 0, sizeof(t));
    snprintf(t.name, sizeof(t.name), "%s", name);
    t.type = mix_types[wk->mix][cls];
    t.n_dims = n_dims;
    t.ne[0] = ne0;
    t.ne[1] = n_dims > 1 ? ne1 : 1;
    t.ne[2] = n_dims > 2 ? ne2 : 1;
    t.ne[3] = 1;
    uint64_t n = (uint64_t)t.ne[0] * (uint64_t)t.ne[1] * (uint64_t)t.ne[2];
    if (!halo_type_bytes(t.type, n, &t.n_bytes)) t.n_bytes = 0; /* cannot happen: shapes fit */
    wk->visited++;
    if (wk->fn && wk->fn(&t, wk->user)) wk->stop = true;
}

static void emit_blk(walker *wk, tclass cls, uint32_t il, const char *suffix, uint32_t n_dims,
                     int64_t ne0, int64_t ne1, int64_t ne2) {
    char name[64];
    snprintf(name, sizeof(name), "blk.%u.%s", il, suffix);
    emit(wk, cls, name, n_dims, ne0, ne1, ne2);
}

static void emit_layer(walker *wk, uint32_t il) {
    const int64_t n_embd = DSV4_FLASH_N_EMBD;
    const int64_t head_dim = DSV4_FLASH_HEAD_DIM;
    const int64_t q_rank = DSV4_FLASH_Q_LORA_RANK;
    const int64_t hc_dim = (int64_t)DSV4_FLASH_HC * n_embd;
    const int64_t hc_mix = (2 + DSV4_FLASH_HC) * DSV4_FLASH_HC; /* pre, post, 4x4 comb */
    const int64_t o_in = (int64_t)DSV4_FLASH_N_HEAD * head_dim / DSV4_FLASH_O_GROUPS;
    const int64_t o_low = (int64_t)DSV4_FLASH_O_GROUPS * DSV4_FLASH_O_LORA_RANK;
    const int64_t n_ff = DSV4_FLASH_N_FF_EXP;
    const int64_t n_exp = DSV4_FLASH_N_EXPERT;
    const int64_t n_ff_sh = n_ff * DSV4_FLASH_N_EXPERT_SHARED;

    emit_blk(wk, C_VEC_F32, il, "attn_norm.weight", 1, n_embd, 0, 0);
    emit_blk(wk, C_VEC_F32, il, "attn_sinks.weight", 1, DSV4_FLASH_N_HEAD, 0, 0);
    emit_blk(wk, C_ATTN_PROJ, il, "attn_q_a.weight", 2, n_embd, q_rank, 0);
    emit_blk(wk, C_VEC_F32, il, "attn_q_a_norm.weight", 1, q_rank, 0, 0);
    emit_blk(wk, C_ATTN_PROJ, il, "attn_q_b.weight", 2, q_rank, DSV4_FLASH_N_HEAD * head_dim, 0);
    emit_blk(wk, C_ATTN_PROJ, il, "attn_kv.weight", 2, n_embd, head_dim, 0);
    emit_blk(wk, C_VEC_F32, il, "attn_kv_a_norm.weight", 1, head_dim, 0, 0);
    /* Stored 2-D (per-group input width x all groups' ranks); llama.cpp views it 3-D. */
    emit_blk(wk, C_ATTN_PROJ, il, "attn_output_a.weight", 2, o_in, o_low, 0);
    emit_blk(wk, C_ATTN_PROJ, il, "attn_output_b.weight", 2, o_low, n_embd, 0);

    emit_blk(wk, C_HC_FN, il, "hc_attn_fn.weight", 2, hc_dim, hc_mix, 0);
    emit_blk(wk, C_VEC_F32, il, "hc_attn_base.weight", 1, hc_mix, 0, 0);
    emit_blk(wk, C_VEC_F32, il, "hc_attn_scale.weight", 1, 3, 0, 0);
    emit_blk(wk, C_HC_FN, il, "hc_ffn_fn.weight", 2, hc_dim, hc_mix, 0);
    emit_blk(wk, C_VEC_F32, il, "hc_ffn_base.weight", 1, hc_mix, 0, 0);
    emit_blk(wk, C_VEC_F32, il, "hc_ffn_scale.weight", 1, 3, 0, 0);

    const uint32_t ratio = dsv4_flash_compress_ratio(il);
    if (ratio != 0) {
        /* Ratio-4 compressors overlap two windows, so they produce twice the width. */
        const int64_t width = (ratio == 4 ? 2 : 1) * head_dim;
        emit_blk(wk, C_COMP_PROJ, il, "attn_compressor_kv.weight", 2, n_embd, width, 0);
        emit_blk(wk, C_COMP_PROJ, il, "attn_compressor_gate.weight", 2, n_embd, width, 0);
        emit_blk(wk, C_COMP_APE, il, "attn_compressor_ape.weight", 2, width, ratio, 0);
        emit_blk(wk, C_VEC_F32, il, "attn_compressor_norm.weight", 1, head_dim, 0, 0);
    }
    if (ratio == 4) {
        const int64_t idx_dim = DSV4_FLASH_INDEXER_HEAD_DIM;
        const int64_t idx_heads = DSV4_FLASH_INDEXER_N_HEAD;
        emit_blk(wk, C_IDX_PROJ, il, "indexer.proj.weight", 2, n_embd, idx_heads, 0);
        emit_blk(wk, C_IDX_Q_B, il, "indexer.attn_q_b.weight", 2, q_rank, idx_heads * idx_dim, 0);
        emit_blk(wk, C_COMP_PROJ, il, "indexer_compressor_kv.weight", 2, n_embd, 2 * idx_dim, 0);
        emit_blk(wk, C_COMP_PROJ, il, "indexer_compressor_gate.weight", 2, n_embd, 2 * idx_dim, 0);
        emit_blk(wk, C_COMP_APE, il, "indexer_compressor_ape.weight", 2, 2 * idx_dim, ratio, 0);
        emit_blk(wk, C_VEC_F32, il, "indexer_compressor_norm.weight", 1, idx_dim, 0, 0);
    }

    emit_blk(wk, C_ROUTER, il, "ffn_gate_inp.weight", 2, n_embd, n_exp, 0);
    /* Hash layers route by token id and have no score bias (the checkpoint has
     * ffn.gate.bias only from layer 3 on). */
    if (il < DSV4_FLASH_N_HASH_LAYER)
        emit_blk(wk, C_HASH, il, "ffn_gate_tid2eid.weight", 2, DSV4_FLASH_N_EXPERT_USED,
                 DSV4_FLASH_N_VOCAB, 0);
    else
        emit_blk(wk, C_VEC_F32, il, "exp_probs_b.bias", 1, n_exp, 0, 0);
    emit_blk(wk, C_VEC_F32, il, "ffn_norm.weight", 1, n_embd, 0, 0);

    emit_blk(wk, C_EXP_GATE_UP, il, "ffn_gate_exps.weight", 3, n_embd, n_ff, n_exp);
    emit_blk(wk, C_EXP_DOWN, il, "ffn_down_exps.weight", 3, n_ff, n_embd, n_exp);
    emit_blk(wk, C_EXP_GATE_UP, il, "ffn_up_exps.weight", 3, n_embd, n_ff, n_exp);

    emit_blk(wk, C_SHEXP, il, "ffn_gate_shexp.weight", 2, n_embd, n_ff_sh, 0);
    emit_blk(wk, C_SHEXP, il, "ffn_down_shexp.weight", 2, n_ff_sh, n_embd, 0);
    emit_blk(wk, C_SHEXP, il, "ffn_up_shexp.weight", 2, n_embd, n_ff_sh, 0);
}

uint64_t dsv4_flash_for_each_tensor(dsv4_mix mix, dsv4_tensor_fn fn, void *user) {
    walker wk = {mix == DSV4_MIX_LLAMA_CPP ? DSV4_MIX_LLAMA_CPP : DSV4_MIX_DS4_Q2, fn, user, 0,
                 false};
    const int64_t n_embd = DSV4_FLASH_N_EMBD;

    emit(&wk, C_TOKEN_EMBD, "token_embd.weight", 2, n_embd, DSV4_FLASH_N_VOCAB, 0);
    for (uint32_t il = 0; il < DSV4_FLASH_N_LAYER && !wk.stop; il++)
        emit_layer(&wk, il);
    emit(&wk, C_VEC_F32, "output_norm.weight", 1, n_embd, 0, 0);
    emit(&wk, C_OUTPUT, "output.weight", 2, n_embd, DSV4_FLASH_N_VOCAB, 0);
    emit(&wk, C_HC_FN, "output_hc_fn.weight", 2, (int64_t)DSV4_FLASH_HC * n_embd, DSV4_FLASH_HC, 0);
    emit(&wk, C_VEC_F32, "output_hc_base.weight", 1, DSV4_FLASH_HC, 0, 0);
    emit(&wk, C_VEC_F32, "output_hc_scale.weight", 1, 1, 0, 0);
    return wk.visited;
}

static int add_bytes(const dsv4_tensor *t, void *user) {
    *(uint64_t *)user += t->n_bytes;
    return 0;
}

uint64_t dsv4_flash_tensor_bytes(dsv4_mix mix) {
    uint64_t total = 0;
    dsv4_flash_for_each_tensor(mix, add_bytes, &total);
    return total;
}

/* ---- writer ------------------------------------------------------------------------------- */

static halo_status writer_status(halo_gguf_writer *w, halo_error *err) {
    const halo_error *we = halo_gguf_writer_error(w);
    if (!we || we->status == HALO_OK) return HALO_OK;
    if (err) *err = *we;
    return we->status;
}

#define KEY(k) "deepseek4." k

halo_status dsv4_flash_add_metadata(halo_gguf_writer *w, dsv4_mix mix, halo_error *err) {
    float clamp[DSV4_FLASH_N_LAYER];
    int32_t ratios[DSV4_FLASH_N_COMPRESS_RATIOS];
    for (uint32_t i = 0; i < DSV4_FLASH_N_LAYER; i++)
        clamp[i] = 10.0f; /* swiglu_limit */
    for (uint32_t i = 0; i < DSV4_FLASH_N_COMPRESS_RATIOS; i++)
        ratios[i] = (int32_t)dsv4_flash_compress_ratio(i);

    /* Setters record the first failure in the writer; it is reported once at the end. */
    halo_gguf_writer_set_str(w, "general.architecture", "deepseek4");
    halo_gguf_writer_set_str(w, "general.name", "DeepSeek V4 Flash");
    halo_gguf_writer_set_u32(w, "general.file_type", dsv4_flash_file_type(mix));
    halo_gguf_writer_set_u32(w, "general.quantization_version", 2);

    halo_gguf_writer_set_u32(w, KEY("context_length"), 1048576);
    halo_gguf_writer_set_u32(w, KEY("embedding_length"), DSV4_FLASH_N_EMBD);
    halo_gguf_writer_set_u32(w, KEY("embedding_length_out"), DSV4_FLASH_N_EMBD * DSV4_FLASH_HC);
    halo_gguf_writer_set_u32(w, KEY("block_count"), DSV4_FLASH_N_LAYER);
    halo_gguf_writer_set_u32(w, KEY("vocab_size"), DSV4_FLASH_N_VOCAB);

    halo_gguf_writer_set_u32(w, KEY("attention.head_count"), DSV4_FLASH_N_HEAD);
    halo_gguf_writer_set_u32(w, KEY("attention.head_count_kv"), 1);
    halo_gguf_writer_set_u32(w, KEY("attention.key_length"), DSV4_FLASH_HEAD_DIM);
    halo_gguf_writer_set_u32(w, KEY("attention.value_length"), DSV4_FLASH_HEAD_DIM);
    halo_gguf_writer_set_f32(w, KEY("attention.layer_norm_rms_epsilon"), 1e-6f);
    halo_gguf_writer_set_u32(w, KEY("attention.q_lora_rank"), DSV4_FLASH_Q_LORA_RANK);
    halo_gguf_writer_set_u32(w, KEY("attention.sliding_window"), DSV4_FLASH_SLIDING_WINDOW);
    halo_gguf_writer_set_u32(w, KEY("attention.output_group_count"), DSV4_FLASH_O_GROUPS);
    halo_gguf_writer_set_u32(w, KEY("attention.output_lora_rank"), DSV4_FLASH_O_LORA_RANK);
    halo_gguf_writer_set_array(w, KEY("attention.compress_ratios"), HALO_GGUF_I32, ratios,
                               DSV4_FLASH_N_COMPRESS_RATIOS);
    halo_gguf_writer_set_f32(w, KEY("attention.compress_rope_freq_base"), 160000.0f);
    halo_gguf_writer_set_u32(w, KEY("attention.indexer.head_count"), DSV4_FLASH_INDEXER_N_HEAD);
    halo_gguf_writer_set_u32(w, KEY("attention.indexer.key_length"), DSV4_FLASH_INDEXER_HEAD_DIM);
    halo_gguf_writer_set_u32(w, KEY("attention.indexer.top_k"), DSV4_FLASH_INDEXER_TOP_K);

    halo_gguf_writer_set_u32(w, KEY("rope.dimension_count"), DSV4_FLASH_ROPE_DIM);
    halo_gguf_writer_set_f32(w, KEY("rope.freq_base"), 10000.0f);
    halo_gguf_writer_set_str(w, KEY("rope.scaling.type"), "yarn");
    halo_gguf_writer_set_f32(w, KEY("rope.scaling.factor"), 16.0f);
    halo_gguf_writer_set_u32(w, KEY("rope.scaling.original_context_length"), 65536);
    halo_gguf_writer_set_f32(w, KEY("rope.scaling.yarn_beta_fast"), 32.0f);
    halo_gguf_writer_set_f32(w, KEY("rope.scaling.yarn_beta_slow"), 1.0f);

    halo_gguf_writer_set_u32(w, KEY("expert_count"), DSV4_FLASH_N_EXPERT);
    halo_gguf_writer_set_u32(w, KEY("expert_used_count"), DSV4_FLASH_N_EXPERT_USED);
    halo_gguf_writer_set_u32(w, KEY("expert_shared_count"), DSV4_FLASH_N_EXPERT_SHARED);
    halo_gguf_writer_set_u32(w, KEY("expert_feed_forward_length"), DSV4_FLASH_N_FF_EXP);
    halo_gguf_writer_set_u32(w, KEY("expert_gating_func"), 4); /* sqrtsoftplus */
    halo_gguf_writer_set_f32(w, KEY("expert_weights_scale"), 1.5f);
    halo_gguf_writer_set_bool(w, KEY("expert_weights_norm"), true);
    halo_gguf_writer_set_array(w, KEY("swiglu_clamp_exp"), HALO_GGUF_F32, clamp,
                               DSV4_FLASH_N_LAYER);
    halo_gguf_writer_set_array(w, KEY("swiglu_clamp_shexp"), HALO_GGUF_F32, clamp,
                               DSV4_FLASH_N_LAYER);
    halo_gguf_writer_set_u32(w, KEY("hash_layer_count"), DSV4_FLASH_N_HASH_LAYER);

    halo_gguf_writer_set_u32(w, KEY("hyper_connection.count"), DSV4_FLASH_HC);
    halo_gguf_writer_set_u32(w, KEY("hyper_connection.sinkhorn_iterations"), 20);
    halo_gguf_writer_set_f32(w, KEY("hyper_connection.epsilon"), 1e-6f);

    /* The table is about tensors: llama.cpp accepts "no_vocab" and makes vocab_size dummies. */
    halo_gguf_writer_set_str(w, "tokenizer.ggml.model", "no_vocab");
    return writer_status(w, err);
}

static int add_one(const dsv4_tensor *t, void *user) {
    halo_gguf_writer *w = user;
    return halo_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, NULL) != HALO_OK;
}

halo_status dsv4_flash_add_tensors(halo_gguf_writer *w, dsv4_mix mix, halo_error *err) {
    dsv4_flash_for_each_tensor(mix, add_one, w);
    return writer_status(w, err);
}

halo_status dsv4_flash_add_to_writer(halo_gguf_writer *w, dsv4_mix mix, halo_error *err) {
    halo_status st = dsv4_flash_add_metadata(w, mix, err);
    if (st != HALO_OK) return st;
    return dsv4_flash_add_tensors(w, mix, err);
}

/* ---- size variants ------------------------------------------------------------------------ */

typedef struct variant_walk {
    dsv4_variant v;
    dsv4_tensor_fn fn;
    void *user;
} variant_walk;

static uint32_t variant_type(dsv4_variant v, const dsv4_tensor *t) {
    int il = -1;
    if (sscanf(t->name, "blk.%d.", &il) != 1 || !strstr(t->name, "_exps.")) return t->type;
    bool late = il >= 37 && il <= 42, down = strstr(t->name, "ffn_down_exps") != NULL;
    switch (v) {
    case DSV4_VARIANT_Q2_Q4K_L37_42: return late ? HALO_TYPE_Q4_K : t->type;
    case DSV4_VARIANT_IQ3_XXS:
        if (!down) return HALO_TYPE_IQ3_XXS;
        return late ? HALO_TYPE_Q2_K : HALO_TYPE_IQ2_XXS;
    default: return t->type;
    }
}

static int variant_one(const dsv4_tensor *t, void *user) {
    variant_walk *vw = user;
    dsv4_tensor c = *t;
    c.type = variant_type(vw->v, t);
    uint64_t n = (uint64_t)c.ne[0] * (uint64_t)c.ne[1] * (uint64_t)c.ne[2] * (uint64_t)c.ne[3];
    if (!halo_type_bytes(c.type, n, &c.n_bytes)) c.n_bytes = 0;
    return vw->fn ? vw->fn(&c, vw->user) : 0;
}

uint64_t dsv4_flash_variant_for_each_tensor(dsv4_variant v, dsv4_tensor_fn fn, void *user) {
    variant_walk vw = {v, fn, user};
    return dsv4_flash_for_each_tensor(DSV4_MIX_DS4_Q2, variant_one, &vw);
}

uint64_t dsv4_flash_variant_tensor_bytes(dsv4_variant v) {
    uint64_t total = 0;
    dsv4_flash_variant_for_each_tensor(v, add_bytes, &total);
    return total;
}

halo_status dsv4_flash_add_variant_to_writer(halo_gguf_writer *w, dsv4_variant v,
                                             halo_error *err) {
    halo_status st = dsv4_flash_add_metadata(w, DSV4_MIX_DS4_Q2, err);
    if (st != HALO_OK) return st;
    dsv4_flash_variant_for_each_tensor(v, add_one, w);
    return writer_status(w, err);
}
