/* The indexer's scores of a prefill batch on tensor cores (topk_mma.cu). */
#ifndef HALO_BACKEND_CUDA_TOPK_MMA_H
#define HALO_BACKEND_CUDA_TOPK_MMA_H

#include "backend/cuda/cuda.cuh"

/* score[t][s] for s < min((pos_t + 1) / ratio, n_rows), as topk.cu's score_kernel, when it
 * takes the case (fast mode, 64 heads of 128, 16-byte aligned q and keys, 16 tokens or more):
 * then true; false launches nothing. */
bool cu_topk_score_mma(cu_backend *be, const float *q, const float *w, const float *keys,
                       int64_t head_dim, int64_t n_head, int64_t n_rows, int64_t n_tok,
                       const int32_t *pos, cu_ints pos_small, uint32_t ratio, float *score);

#endif
