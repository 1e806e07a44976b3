/* Prefill attention on tensor cores (attention_mma.cu): the same mixed attention as
 * attention.cu's kernels (sliding-window raw rows, then every visible compressed row or the
 * indexer's selection, a per-head sink, K = V), with q and the rows rounded to f16 and f32
 * sums. Fast mode only (the backend's mma flag), HALO_CUDA_ATTMMA=0 turns it off. */
#ifndef HALO_BACKEND_CUDA_ATTENTION_MMA_H
#define HALO_BACKEND_CUDA_ATTENTION_MMA_H

#include "backend/cuda/cuda.cuh"

typedef struct cu_attn_mma_args {
    const float *q, *window, *comp; /* q [n_tok][n_head][head_dim]; rows of head_dim floats */
    const int32_t *pos;             /* device positions, or NULL: pos_small */
    cu_ints pos_small;
    const int32_t *select; /* [n_tok][k_sel] indexer entries (-1: none), or NULL: every row */
    const char *sinks;
    uint32_t sinks_type;
    int64_t head_dim, n_head, n_win, n_comp, k_sel, win_pos0;
    uint32_t sliding_window, ratio;
    float scale;
    float *out; /* [n_tok][n_head][head_dim] */
} cu_attn_mma_args;

/* Launches the kernel and returns true when it takes the case (fast mode, head_dim 512, heads
 * in groups of 32, 16-byte aligned rows, at least 16 tokens); false launches nothing. */
bool cu_attention_mma(cu_backend *be, const cu_attn_mma_args *a, int64_t n_tok);

#endif
