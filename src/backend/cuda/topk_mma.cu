/* The lightning indexer's scores for a prefill batch on tensor cores.
 *
 * topk.cu's score kernel gives each (token, row) a warp that reads the token's 64 x 128 query
 * (32 KB) from L1 and reduces 64 dots with shuffles: ~600 cycles a row, so at depth 24,576 a
 * ratio-4 layer's 512 tokens x 6,144 rows are ~8 ms a layer by that count, and at 131,072
 * (32,768 rows) ~40 ms a launch. Here a block is one token and up to TM_ROWS rows: the query
 * goes to shared memory as f16 once, chunks of 64 rows (the next chunk's f32 in registers
 * while one is used) as f16, and S = Q K^T (64 heads x 64 rows, mma.sync m16n8k16, f32 sums)
 * is reduced in registers: relu, the head weight, the sum over heads (shuffles within a warp's
 * 16 heads, then the four warps' parts in order). Fast mode only (the backend's mma flag),
 * batches of 16 tokens and more; HALO_CUDA_TOPKMMA=0 turns it off. The select kernel is the
 * same. Numerics: q and keys rounded to f16 (saturated), products and sums in f32; the op test
 * holds the chosen rows to 2e-3 of the scores' range from the best choice. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/topk_mma.h"

#ifndef HALO_HIP
#include <cuda_fp16.h>

enum {
    TM_HD = 128,       /* indexer head_dim */
    TM_H = 64,         /* indexer heads */
    TM_N = 64,         /* rows of a chunk */
    TM_ROWS = 1024,    /* rows of a block */
    TM_THREADS = 256,  /* 8 warps: 4 along the heads x 2 along the rows */
    TM_LD = TM_HD + 8, /* f16 per line: ldmatrix's 8 lines hit 8 bank groups */
};

static __device__ __forceinline__ void tm_ldm_x4(uint32_t r[4], const __half *p) {
    const uint32_t a = (uint32_t)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}
static __device__ __forceinline__ void tm_mma(float c[4], const uint32_t a[4], uint32_t b0,
                                              uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
                 "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
static __device__ __forceinline__ void tm_put4(__half *dst, float4 v) {
    __half2 h[2];
    h[0] = __floats2half2_rn(fminf(fmaxf(v.x, -65504.0f), 65504.0f),
                             fminf(fmaxf(v.y, -65504.0f), 65504.0f));
    h[1] = __floats2half2_rn(fminf(fmaxf(v.z, -65504.0f), 65504.0f),
                             fminf(fmaxf(v.w, -65504.0f), 65504.0f));
    *(uint2 *)dst = *(const uint2 *)h;
}

__global__ void __launch_bounds__(TM_THREADS, 2)
    topk_score_mma_kernel(const float *q, const float *w, const float *keys, int64_t n_rows,
                          const int32_t *pos, cu_ints pos_small, uint32_t ratio, float *score) {
    cu_pdl_entry();
    __shared__ __align__(16) __half qs[TM_H][TM_LD];
    __shared__ __align__(16) __half ks[TM_N][TM_LD];
    __shared__ float wh[TM_H], red[4][TM_N];
    const int tid = threadIdx.x, lane = tid % WARP, warp = tid / WARP;
    const int64_t t = blockIdx.y, r0 = (int64_t)blockIdx.x * TM_ROWS;
    int64_t visible = (cu_int_at(pos, pos_small, t) + 1) / ratio;
    if (visible > n_rows) visible = n_rows;
    if (r0 >= visible) return; /* the whole block: the select kernel reads rows < visible */
    const int64_t r1 = r0 + TM_ROWS < visible ? r0 + TM_ROWS : visible;

    const float *qt = q + t * TM_H * TM_HD;
    for (int idx = tid; idx < TM_H * TM_HD / 4; idx += TM_THREADS) {
        const int r = idx / (TM_HD / 4), c4 = idx % (TM_HD / 4);
        tm_put4(&qs[r][4 * c4], __ldg((const float4 *)(qt + r * TM_HD) + c4));
    }
    /* relu(d)·head_dim^-½ · w·n_head^-½, as the f32 kernel (the scales folded into wh) */
    if (tid < TM_H)
        wh[tid] = (w[t * TM_H + tid] * (1.0f / sqrtf((float)TM_H))) * (1.0f / sqrtf((float)TM_HD));

    /* Loader: row lr of a chunk, float4s lj + 4k (k < 8). */
    const int lr = tid >> 2, lj = tid & 3;
    float4 pre[TM_HD / 16];
    auto fetch = [&](int64_t c0) {
        const int64_t r = c0 + lr;
        const float *src = r < r1 ? keys + r * TM_HD : NULL;
#pragma unroll
        for (int k = 0; k < TM_HD / 16; k++)
            pre[k] = src ? __ldg((const float4 *)src + lj + 4 * k) : make_float4(0, 0, 0, 0);
    };
    fetch(r0);
    const int g = lane >> 2, tq = lane & 3, mt = warp & 3, nh = warp >> 2;
    for (int64_t c0 = r0; c0 < r1; c0 += TM_N) {
        __syncthreads(); /* the previous chunk's ks and red are read */
#pragma unroll
        for (int k = 0; k < TM_HD / 16; k++)
            tm_put4(&ks[lr][4 * (lj + 4 * k)], pre[k]);
        __syncthreads();
        if (c0 + TM_N < r1) fetch(c0 + TM_N);
        float acc[4][4];
#pragma unroll
        for (int j = 0; j < 4; j++)
            acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < TM_HD; kk += 32) {
            uint32_t a0[4], a1[4];
            tm_ldm_x4(a0, &qs[16 * mt + (lane & 15)][kk + 8 * (lane >> 4)]);
            tm_ldm_x4(a1, &qs[16 * mt + (lane & 15)][kk + 16 + 8 * (lane >> 4)]);
#pragma unroll
            for (int j = 0; j < 4; j++) {
                uint32_t b[4];
                tm_ldm_x4(b, &ks[32 * nh + 8 * j + (lane & 7)][kk + 8 * (lane >> 3)]);
                tm_mma(acc[j], a0, b[0], b[1]);
                tm_mma(acc[j], a1, b[2], b[3]);
            }
        }
        /* relu · weight, summed over this warp's 16 heads (lanes of one tq hold one column) */
        const float w0 = wh[16 * mt + g], w1 = wh[16 * mt + g + 8];
#pragma unroll
        for (int j = 0; j < 4; j++) {
            float s0 = fmaxf(acc[j][0], 0.0f) * w0 + fmaxf(acc[j][2], 0.0f) * w1;
            float s1 = fmaxf(acc[j][1], 0.0f) * w0 + fmaxf(acc[j][3], 0.0f) * w1;
#pragma unroll
            for (int m = 4; m < WARP; m <<= 1) {
                s0 += gpu_shfl_xor(s0, m);
                s1 += gpu_shfl_xor(s1, m);
            }
            if (g == 0) {
                red[mt][32 * nh + 8 * j + 2 * tq] = s0;
                red[mt][32 * nh + 8 * j + 2 * tq + 1] = s1;
            }
        }
        __syncthreads();
        if (tid < TM_N && c0 + tid < r1)
            score[t * n_rows + c0 + tid] =
                ((red[0][tid] + red[1][tid]) + red[2][tid]) + red[3][tid];
    }
}

bool cu_topk_score_mma(cu_backend *be, const float *q, const float *w, const float *keys,
                       int64_t head_dim, int64_t n_head, int64_t n_rows, int64_t n_tok,
                       const int32_t *pos, cu_ints pos_small, uint32_t ratio, float *score) {
    static int off = -1;
    if (off < 0) {
        const char *e = getenv("HALO_CUDA_TOPKMMA");
        off = e && strcmp(e, "0") == 0;
    }
    const uintptr_t al = (uintptr_t)q | (uintptr_t)keys;
    if (off || be->naive || !be->mma || n_tok < 16 || head_dim != TM_HD || n_head != TM_H ||
        (al & 15) || n_tok > 65535 || n_rows <= 0)
        return false;
    dim3 grid(cu_blocks(n_rows, TM_ROWS), (unsigned)n_tok);
    cu_launch(be, topk_score_mma_kernel, grid, TM_THREADS, 0, q, w, keys, n_rows, pos, pos_small,
              ratio, score);
    CU_LAUNCHED(be, "topk", "topk_score_mma_kernel");
    return true;
}

#else /* HIP: no mma.sync */

bool cu_topk_score_mma(cu_backend *, const float *, const float *, const float *, int64_t, int64_t,
                       int64_t, int64_t, const int32_t *, cu_ints, uint32_t, float *) {
    return false;
}

#endif
