/* Fast dot products of one weight row with up to NT activation rows, for a weight type fixed at
 * compile time (the projections in linear.cu and the experts in moe.cu). One warp per row (or
 * per slice of a row, split-K), f32 activations and accumulation as the generic kernels:
 * - float weights (F32, F16, BF16): 16-byte loads, 8 weights per lane, 4 loads in flight;
 * - block formats: the row is staged through shared memory 2048 weights at a time with 16-byte
 *   loads (the next chunk's loads in flight while this one is computed), then each lane decodes
 *   32-weight units of it (Q8_0 by integer tricks without conversions, the others by the generic
 *   decoder with the type constant, so its switch folds away).
 * Sums are reordered against the generic kernels (scale applied per block, not per weight): the
 * results agree to f32 rounding. Preconditions (checked by mv_shape_ok): rows start 16-byte
 * aligned and the K range is whole 2048-weight chunks except at the row's end. */
#ifndef HALO_BACKEND_CUDA_MV_CUH
#define HALO_BACKEND_CUDA_MV_CUH

#include "backend/cuda/quant.cuh"

enum { MV_CH = 2048, MV_STAGE = 2176 /* bytes of 2048 Q8_0 weights: the largest chunk */ };

static __host__ __device__ constexpr bool cx_float(int t) {
    return t == HALO_TYPE_F32 || t == HALO_TYPE_F16 || t == HALO_TYPE_BF16;
}
static __host__ __device__ constexpr int cx_block_bytes(int t) {
    return t == HALO_TYPE_Q8_0      ? 34
           : t == HALO_TYPE_Q4_0    ? 18
           : t == HALO_TYPE_Q5_0    ? 22
           : t == HALO_TYPE_MXFP4   ? 17
           : t == HALO_TYPE_Q2_K    ? 84
           : t == HALO_TYPE_Q4_K    ? 144
           : t == HALO_TYPE_Q6_K    ? 210
           : t == HALO_TYPE_IQ2_XXS ? 66
           : t == HALO_TYPE_F32     ? 4
                                    : 2;
}
static __host__ __device__ constexpr int cx_block_elems(int t) {
    return t == HALO_TYPE_Q2_K || t == HALO_TYPE_Q4_K || t == HALO_TYPE_Q6_K ||
                   t == HALO_TYPE_IQ2_XXS
               ? 256
           : cx_float(t) ? 1
                         : 32;
}

/* The types with a fast kernel (every other supported type takes the generic kernels). */
static inline bool mv_fast_type(uint32_t t) {
    switch (t) {
    case HALO_TYPE_F32:
    case HALO_TYPE_F16:
    case HALO_TYPE_BF16:
    case HALO_TYPE_Q8_0:
    case HALO_TYPE_Q4_0:
    case HALO_TYPE_Q5_0:
    case HALO_TYPE_MXFP4:
    case HALO_TYPE_Q2_K:
    case HALO_TYPE_Q4_K:
    case HALO_TYPE_Q6_K:
    case HALO_TYPE_IQ2_XXS:
        return true;
    default:
        return false;
    }
}

/* Whether rows of n_in weights of type t at w (row_bytes apart) suit the fast kernels. */
static inline bool mv_shape_ok(uint32_t t, const void *w, uint64_t row_bytes, int64_t n_in) {
    if (!mv_fast_type(t) || ((uintptr_t)w & 15) || (row_bytes & 15)) return false;
    if (t == HALO_TYPE_F32 || t == HALO_TYPE_F16 || t == HALO_TYPE_BF16) return n_in % 8 == 0;
    /* The last chunk of a row must be whole 16-byte loads too. */
    const int e = cx_block_elems((int)t), b = cx_block_bytes((int)t);
    return n_in % 32 == 0 && n_in % e == 0 && (n_in % MV_CH) / e * b % 16 == 0;
}

/* Issues the 16-byte loads of a chunk (n16 of them) into registers. */
template <int NV>
static __device__ __forceinline__ void mv_fetch(uint4 pre[NV], const uint4 *src, int n16,
                                                int lane) {
#pragma unroll
    for (int i = 0; i < NV; i++) {
        int idx = lane + WARP * i;
        if (idx < n16) pre[i] = __ldg(src + idx);
    }
}

/* acc[k] += Σ_j v[j] · x_k[j] for the 32 activations of each row k at xs[k] + e. */
template <int NT>
static __device__ __forceinline__ void mv_dot32(const float v[32], const float *const *xs,
                                                int64_t e, int nt, float scale, float acc[NT]) {
#pragma unroll
    for (int k = 0; k < NT; k++) {
        if (k < nt) {
            const float4 *xp = (const float4 *)(xs[k] + e);
            float s = 0.0f;
#pragma unroll
            for (int q = 0; q < 8; q++) {
                float4 a = __ldg(xp + q);
                s += v[4 * q] * a.x + v[4 * q + 1] * a.y + v[4 * q + 2] * a.z + v[4 * q + 3] * a.w;
            }
            acc[k] += s * scale;
        }
    }
}

/* Unit u (32 weights) of a staged chunk, dotted into acc. */
template <int T, int NT>
static __device__ __forceinline__ void mv_unit(const uint8_t *stage, int u, const float *const *xs,
                                               int64_t e, int nt, float acc[NT], cu_grids g) {
    float v[32];
    if constexpr (T == HALO_TYPE_Q8_0) {
        /* q + 128 as the low byte of the float 2^23 + q + 128: no int-to-float conversion. */
        const uint8_t *b = stage + 34 * u;
        const float d = __half2float(*(const __half *)b);
        const uint16_t *q16 = (const uint16_t *)(b + 2);
#pragma unroll
        for (int i = 0; i < 8; i++) {
            uint32_t w = ((uint32_t)q16[2 * i] | ((uint32_t)q16[2 * i + 1] << 16)) ^ 0x80808080u;
            v[4 * i] = __uint_as_float(__byte_perm(w, 0x4B000000u, 0x7540)) - 8388736.0f;
            v[4 * i + 1] = __uint_as_float(__byte_perm(w, 0x4B000000u, 0x7541)) - 8388736.0f;
            v[4 * i + 2] = __uint_as_float(__byte_perm(w, 0x4B000000u, 0x7542)) - 8388736.0f;
            v[4 * i + 3] = __uint_as_float(__byte_perm(w, 0x4B000000u, 0x7543)) - 8388736.0f;
        }
        mv_dot32<NT>(v, xs, e, nt, d, acc);
    } else {
        deq32_body((uint32_t)T, stage, u, v, g);
        mv_dot32<NT>(v, xs, e, nt, 1.0f, acc);
    }
}

/* Eight float weights from one or two 16-byte loads. */
template <int T>
static __device__ __forceinline__ void mv_float8(const uint4 *r, float w[8]) {
    if constexpr (T == HALO_TYPE_F32) {
        w[0] = __uint_as_float(r[0].x), w[1] = __uint_as_float(r[0].y);
        w[2] = __uint_as_float(r[0].z), w[3] = __uint_as_float(r[0].w);
        w[4] = __uint_as_float(r[1].x), w[5] = __uint_as_float(r[1].y);
        w[6] = __uint_as_float(r[1].z), w[7] = __uint_as_float(r[1].w);
    } else {
        const uint32_t u[4] = {r[0].x, r[0].y, r[0].z, r[0].w};
#pragma unroll
        for (int i = 0; i < 4; i++) {
            if (T == HALO_TYPE_BF16) {
                w[2 * i] = __uint_as_float(u[i] << 16);
                w[2 * i + 1] = __uint_as_float(u[i] & 0xffff0000u);
            } else {
                __half2 h = *(const __half2 *)&u[i];
                float2 f = __half22float2(h);
                w[2 * i] = f.x;
                w[2 * i + 1] = f.y;
            }
        }
    }
}

/* acc[k] = Σ_{i in [k0, k1)} w[i] · xs[k][i] for k < nt, summed over the warp (every lane gets
 * the sums). stage: this warp's MV_STAGE bytes of shared memory (block formats). */
template <int T, int NT>
static __device__ __forceinline__ void mv_row(const char *wrow, int64_t k0, int64_t k1,
                                              const float *const *xs, int nt, float acc[NT],
                                              uint8_t *stage, cu_grids g) {
    const int lane = threadIdx.x % WARP;
#pragma unroll
    for (int k = 0; k < NT; k++)
        acc[k] = 0.0f;
    if constexpr (cx_float(T)) {
        constexpr int W = T == HALO_TYPE_F32 ? 2 : 1; /* 16-byte loads per 8 weights */
        constexpr int U = 4;
        for (int64_t base = k0 + 8 * lane; base < k1; base += 8 * WARP * U) {
            uint4 r[U][W];
#pragma unroll
            for (int u = 0; u < U; u++) {
                int64_t i = base + (int64_t)u * 8 * WARP;
                if (i < k1) {
                    const uint4 *p = (const uint4 *)(wrow + i * (T == HALO_TYPE_F32 ? 4 : 2));
#pragma unroll
                    for (int h = 0; h < W; h++)
                        r[u][h] = __ldg(p + h);
                }
            }
#pragma unroll
            for (int u = 0; u < U; u++) {
                int64_t i = base + (int64_t)u * 8 * WARP;
                if (i < k1) {
                    float w[8];
                    mv_float8<T>(r[u], w);
#pragma unroll
                    for (int k = 0; k < NT; k++) {
                        if (k < nt) {
                            const float4 *xp = (const float4 *)(xs[k] + i);
                            float4 a = __ldg(xp), b = __ldg(xp + 1);
                            acc[k] += w[0] * a.x + w[1] * a.y + w[2] * a.z + w[3] * a.w +
                                      w[4] * b.x + w[5] * b.y + w[6] * b.z + w[7] * b.w;
                        }
                    }
                }
            }
        }
    } else {
        constexpr int E = cx_block_elems(T), B = cx_block_bytes(T);
        constexpr int CB = MV_CH / E * B;          /* bytes of a whole chunk */
        constexpr int NV = (CB / 16 + WARP - 1) / WARP;
        static_assert(CB % 16 == 0 && CB <= MV_STAGE, "chunk");
        uint4 pre[NV];
        int64_t kc = k0;
        int n16 = (int)((k1 - kc < MV_CH ? k1 - kc : MV_CH) / E * B / 16);
        mv_fetch<NV>(pre, (const uint4 *)(wrow + kc / E * B), n16, lane);
        for (; kc < k1; kc += MV_CH) {
            __syncwarp();
#pragma unroll
            for (int i = 0; i < NV; i++) {
                int idx = lane + WARP * i;
                if (idx < n16) ((uint4 *)stage)[idx] = pre[i];
            }
            __syncwarp();
            const int64_t kn = kc + MV_CH;
            const int units = (int)((k1 - kc < MV_CH ? k1 - kc : MV_CH) / 32);
            if (kn < k1) {
                n16 = (int)((k1 - kn < MV_CH ? k1 - kn : MV_CH) / E * B / 16);
                mv_fetch<NV>(pre, (const uint4 *)(wrow + kn / E * B), n16, lane);
            }
            for (int u = lane; u < units; u += WARP)
                mv_unit<T, NT>(stage, u, xs, kc + 32 * u, nt, acc, g);
        }
    }
#pragma unroll
    for (int k = 0; k < NT; k++)
        acc[k] = warp_sum(acc[k]);
}

#endif
