/* DeepSeek V4 hyperparameters, read from GGUF metadata (never from constants): the same code
 * opens a 2 MB test model and the 81 GiB real one. Key names are llama.cpp's `deepseek4.*`
 * keys, which ds4's files share (docs/dsv4-flash-table.md lists them with the real values). */
#ifndef HALO_MODEL_HPARAMS_H
#define HALO_MODEL_HPARAMS_H

#include <stdbool.h>
#include <stdint.h>

#include "backend/backend.h"
#include "halo/gguf.h"

#define HALO_MAX_LAYERS 256
#define HALO_MAX_EXPERTS_USED 64


typedef struct halo_hparams {
    uint32_t n_layer;         /* block_count */
    uint32_t n_embd;          /* embedding_length */
    uint32_t n_vocab;         /* vocab_size, else the tokenizer's token count */
    uint32_t n_ctx_train;     /* context_length */

    /* attention: n_head query heads, one shared KV head of head_dim (key = value length) */
    uint32_t n_head, n_head_kv, head_dim, rope_dim;
    uint32_t q_lora_rank;
    uint32_t o_groups, o_lora_rank; /* grouped output projection */
    uint32_t sliding_window;
    float norm_eps;

    /* compressed attention: per-layer ratio 0 (window only), 4 (with indexer) or 128 */
    uint32_t compress_ratio[HALO_MAX_LAYERS];
    float compress_rope_base;
    uint32_t indexer_n_head, indexer_head_dim, indexer_top_k;

    /* RoPE, with YaRN when rope_yarn is set */
    float rope_base;
    bool rope_yarn;
    float yarn_factor, yarn_beta_fast, yarn_beta_slow;
    uint32_t yarn_orig_ctx;

    /* mixture of experts */
    uint32_t n_expert, n_expert_used, n_expert_shared, n_ff_exp;
    uint32_t gating_func;     /* HALO_GATING_* */
    float expert_weights_scale;
    bool expert_weights_norm;
    uint32_t n_hash_layer;    /* the first n_hash_layer layers route by token id */
    float swiglu_clamp_exp[HALO_MAX_LAYERS];   /* 0 = no clamp */
    float swiglu_clamp_shexp[HALO_MAX_LAYERS];

    /* hyper-connections */
    uint32_t hc;              /* hyper_connection.count */
    uint32_t hc_sinkhorn_iters;
    float hc_eps;
} halo_hparams;

/* Reads and checks every hyperparameter. Missing or inconsistent keys give a clear error that
 * names the key (HALO_E_NOT_FOUND, HALO_E_TYPE_MISMATCH, HALO_E_BAD_VALUE). */
halo_status halo_hparams_load(const halo_gguf *g, halo_hparams *hp, halo_error *err);

#endif
