/* Prefill projections on tensor cores (gemm_mma.cu): a tile of 128 weight rows x 64 tokens,
 * the weights decoded from their block format to f16 in shared memory once per tile and the f32
 * activations rounded to f16 beside them, multiplied by mma.sync m16n8k16 with f32
 * accumulation. Used for batches of many tokens (prefill); decode keeps the f32 matvec kernels
 * (mv.cuh). Only in the backend's fast mode (halo_backend_cuda_set_precise). Each returns false,
 * launching nothing, when it does not take the case (precise mode, a type or shape it was not built
 * for, too few tokens, HIP): the caller then runs its own kernels. */
#ifndef HALO_BACKEND_CUDA_GEMM_MMA_H
#define HALO_BACKEND_CUDA_GEMM_MMA_H

#include "backend/cuda/cuda.cuh"

/* out[t][o] = Σ_i w[o][i] · x[t][g·n_in + i] for o in group g (the matmul op's contract). */
bool cu_mma_matmul(cu_backend *be, uint32_t type, const char *w, int64_t n_in, int64_t n_out,
                   uint32_t groups, const float *x, int64_t x_stride, int64_t n_tok, float *out,
                   const char *op);

/* The experts of a moe op, grouped by expert on the device (moe.cu's group_kernel): act[0] is
 * the number of work items, then (group, first pair, end pair) per item, at most 64 pairs each;
 * group n_expert is the shared expert; pairs[i] is a (token · slots + slot) index. */
typedef struct cu_mma_experts {
    const char *gate, *up, *down;                   /* routed, stacked over experts */
    const char *gate_sh, *up_sh, *down_sh;          /* the shared expert, or NULL */
    uint32_t tr_up, tr_down, ts_up, ts_down;        /* types: routed / shared, gate+up / down */
    uint64_t grb, urb, drb, grb_sh, urb_sh, drb_sh; /* bytes per row */
    int64_t n_embd, n_ff, n_ff_sh, n_expert, n_h;
    uint32_t slots;
    const int32_t *pairs, *act;
    int64_t max_items; /* a bound on act[0] (the grid) */
} cu_mma_experts;

/* Whether the expert projections of a moe op over n_tok tokens go to the kernels below. */
bool cu_mma_moe_ok(cu_backend *be, const cu_mma_experts *m, int64_t n_tok);
/* hg[pair][r] = gate_r · x[token], hu[pair][r] = up_r · x[token] (rows of n_h floats). */
bool cu_mma_moe_up(cu_backend *be, const cu_mma_experts *m, const float *x, float *hg, float *hu,
                   const char *op);
/* y[pair][r] = down_r · h[pair] (rows of n_embd floats; h rows of n_h floats). */
bool cu_mma_moe_down(cu_backend *be, const cu_mma_experts *m, const float *h, float *y,
                     const char *op);

#endif
