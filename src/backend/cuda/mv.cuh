/* Fast dot products of one weight row with up to NT activation rows, for a weight type fixed at
 * compile time (the projections in linear.cu and the experts in moe.cu). One warp per row (or
 * per slice of a row, split-K), f32 activations and accumulation as the generic kernels:
 * - float weights (F32, F16, BF16): 16-byte loads, 8 weights per lane, 4 loads in flight;
 * - block formats: the row is staged through shared memory 2048 weights at a time with 16-byte
 *   copies (cp.async, MV_STAGES - 1 chunks in flight while one is computed), then each lane
 *   decodes 32-weight units of it (Q8_0, IQ2_XXS and Q2_K by integer tricks without int-to-float
 *   conversions, the others by the generic decoder with the type constant, so its switch folds
 *   away).
 * Sums are reordered against the generic kernels (scale applied per block, not per weight): the
 * results agree to f32 rounding. Preconditions (checked by mv_shape_ok): rows start 16-byte
 * aligned and the K range is whole 2048-weight chunks except at the row's end. */
#ifndef HALO_BACKEND_CUDA_MV_CUH
#define HALO_BACKEND_CUDA_MV_CUH

#include "backend/cuda/quant.cuh"

enum { MV_CH = 2048, MV_STAGE = 2176 /* bytes of 2048 Q8_0 weights: the largest chunk */ };
/* Chunks of a row in flight per warp: on CUDA the chunks go to shared memory by cp.async (no
 * registers held), MV_STAGES - 1 of them ahead of the one computed; on HIP one chunk is
 * prefetched into registers. */
#ifdef HALO_HIP
enum { MV_STAGES = 1 };
#else
enum { MV_STAGES = 3 };
#endif
/* Dynamic shared memory of a block of `warps` warps for weights of type t. */
static __host__ __device__ constexpr int mv_smem_bytes(int t, int warps) {
    return warps * MV_STAGES * MV_STAGE;
}

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

/* Weights per staged chunk: MV_STAGE bytes at most (2048 for the block formats). */
static __host__ __device__ constexpr int cx_chunk(int t) {
    return t == HALO_TYPE_F32 ? 512 : (t == HALO_TYPE_F16 || t == HALO_TYPE_BF16) ? 1024 : MV_CH;
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

#ifndef HALO_HIP
static __device__ __forceinline__ void cp_async16(void *smem, const void *gmem) {
    unsigned sa = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(sa), "l"(gmem));
}
static __device__ __forceinline__ void cp_async_commit() {
    asm volatile("cp.async.commit_group;\n" ::);
}
template <int N> static __device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}
#endif

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

/* Eight float weights from one or two 16-byte loads. */
template <int T> static __device__ __forceinline__ void mv_float8(const uint4 *r, float w[8]) {
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
    } else if constexpr (T == HALO_TYPE_IQ2_XXS) {
        /* d qs[32 x u16]: unit = 4 grid indices + 32 bits of signs and scale. Grid magnitudes
         * become floats as the low byte of 2^23 + m; signs flip the float's sign bit. */
        const uint8_t *b = stage + 66 * (u >> 3);
        const uint16_t *q16 = (const uint16_t *)(b + 2 + 8 * (u & 7));
        const uint32_t qi = (uint32_t)q16[0] | ((uint32_t)q16[1] << 16);
        const uint32_t aux = (uint32_t)q16[2] | ((uint32_t)q16[3] << 16);
        const float d = __half2float(*(const __half *)b);
        const float db = __fmul_rn(__fmul_rn(d, __fadd_rn(0.5f, (float)(aux >> 28))), 0.25f);
#pragma unroll
        for (int l = 0; l < 4; l++) {
            const uint64_t grid = g.iq2xxs[(qi >> (8 * l)) & 0xff];
            const uint32_t sg = iq_signs((aux >> (7 * l)) & 127);
            const uint32_t half[2] = {(uint32_t)grid, (uint32_t)(grid >> 32)};
#pragma unroll
            for (int j = 0; j < 8; j++) {
                float f =
                    __uint_as_float(__byte_perm(half[j >> 2], 0x4B000000u, 0x7540 + (j & 3))) -
                    8388608.0f;
                v[8 * l + j] =
                    __uint_as_float(__float_as_uint(f) ^ ((sg << (31 - j)) & 0x80000000u));
            }
        }
        mv_dot32<NT>(v, xs, e, nt, db, acc);
    } else if constexpr (T == HALO_TYPE_Q2_K) {
        /* scales[16] qs[64] d dmin: unit sub of a super-block takes 32 consecutive qs bytes at
         * one shift, two 16-weight groups with their own scale and min: weight = dl·q - ml. */
        const uint8_t *b = stage + 84 * (u >> 3);
        const int sub = u & 7;
        const float d = __half2float(*(const __half *)(b + 80));
        const float dmin = __half2float(*(const __half *)(b + 82));
        const uint32_t *qs = (const uint32_t *)(b + 16 + 32 * (sub >> 2));
        const int shift = 2 * (sub & 3);
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const uint8_t sc = b[2 * sub + h];
            const float dl = __fmul_rn(d, (float)(sc & 0xf)),
                        ml = __fmul_rn(dmin, (float)(sc >> 4));
#pragma unroll
            for (int w4 = 0; w4 < 4; w4++) {
                const uint32_t q4 = (qs[4 * h + w4] >> shift) & 0x03030303u;
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    float q =
                        __uint_as_float(__byte_perm(q4, 0x4B000000u, 0x7540 + j)) - 8388608.0f;
                    v[16 * h + 4 * w4 + j] = fmaf(dl, q, -ml);
                }
            }
        }
        mv_dot32<NT>(v, xs, e, nt, 1.0f, acc);
    } else if constexpr (T == HALO_TYPE_F32 || T == HALO_TYPE_F16 || T == HALO_TYPE_BF16) {
        constexpr int W = T == HALO_TYPE_F32 ? 8 : 4; /* 16-byte words per 32 weights */
        const uint4 *q = (const uint4 *)(stage + 16 * W * u);
#pragma unroll
        for (int i = 0; i < W; i++) {
            uint4 r[2] = {q[i], q[i]};
            if constexpr (T == HALO_TYPE_F32) {
                v[4 * i] = __uint_as_float(r[0].x), v[4 * i + 1] = __uint_as_float(r[0].y);
                v[4 * i + 2] = __uint_as_float(r[0].z), v[4 * i + 3] = __uint_as_float(r[0].w);
            } else {
                mv_float8<T>(r, v + 8 * i);
            }
        }
        mv_dot32<NT>(v, xs, e, nt, 1.0f, acc);
    } else {
        deq32_body((uint32_t)T, stage, u, v, g);
        mv_dot32<NT>(v, xs, e, nt, 1.0f, acc);
    }
}

/* Types decoded 8 weights per lane (lane l of a chunk takes weights 8l + 256i): neighbouring
 * lanes read neighbouring activations, so a warp's 16-byte activation loads touch 8 cache lines
 * rather than 32 (one lane per 32-weight unit strides the activations by 128 bytes). */
static __host__ __device__ constexpr bool cx_g8(int t) {
    return t == HALO_TYPE_Q8_0 || t == HALO_TYPE_IQ2_XXS || t == HALO_TYPE_Q2_K ||
           t == HALO_TYPE_F32 || t == HALO_TYPE_F16 || t == HALO_TYPE_BF16;
}

/* acc[k] += scale · Σ_j v[j] · x_k[e + j] over 8 weights. */
template <int NT>
static __device__ __forceinline__ void mv_dot8(const float v[8], const float *const *xs, int64_t e,
                                               int nt, float scale, float acc[NT]) {
#pragma unroll
    for (int k = 0; k < NT; k++) {
        if (k < nt) {
            const float4 *xp = (const float4 *)(xs[k] + e);
            const float4 a = __ldg(xp), b = __ldg(xp + 1);
            float s = v[0] * a.x + v[1] * a.y + v[2] * a.z + v[3] * a.w + v[4] * b.x + v[5] * b.y +
                      v[6] * b.z + v[7] * b.w;
            acc[k] += s * scale;
        }
    }
}

/* The 8 weights at element w of a staged chunk (w a multiple of 8), dotted into acc. */
template <int T, int NT>
static __device__ __forceinline__ void mv_g8(const uint8_t *stage, int w, const float *const *xs,
                                             int64_t e, int nt, float acc[NT], cu_grids g) {
    float v[8];
    if constexpr (T == HALO_TYPE_Q8_0) {
        const uint8_t *b = stage + 34 * (w >> 5);
        const float d = __half2float(*(const __half *)b);
        const uint16_t *q16 = (const uint16_t *)(b + 2 + (w & 31));
#pragma unroll
        for (int i = 0; i < 2; i++) {
            uint32_t q = ((uint32_t)q16[2 * i] | ((uint32_t)q16[2 * i + 1] << 16)) ^ 0x80808080u;
#pragma unroll
            for (int j = 0; j < 4; j++)
                v[4 * i + j] =
                    __uint_as_float(__byte_perm(q, 0x4B000000u, 0x7540 + j)) - 8388736.0f;
        }
        mv_dot8<NT>(v, xs, e, nt, d, acc);
    } else if constexpr (T == HALO_TYPE_IQ2_XXS) {
        const uint8_t *b = stage + 66 * (w >> 8);
        const int sub = (w >> 5) & 7, l = (w >> 3) & 3;
        const uint8_t *q = b + 2 + 8 * sub;
        const uint16_t *a16 = (const uint16_t *)(q + 4);
        const uint32_t aux = (uint32_t)a16[0] | ((uint32_t)a16[1] << 16);
        const float d = __half2float(*(const __half *)b);
        const float db = __fmul_rn(__fmul_rn(d, __fadd_rn(0.5f, (float)(aux >> 28))), 0.25f);
        const uint64_t grid = g.iq2xxs[q[l]];
        const uint32_t sg = iq_signs((aux >> (7 * l)) & 127);
        const uint32_t half[2] = {(uint32_t)grid, (uint32_t)(grid >> 32)};
#pragma unroll
        for (int j = 0; j < 8; j++) {
            float f = __uint_as_float(__byte_perm(half[j >> 2], 0x4B000000u, 0x7540 + (j & 3))) -
                      8388608.0f;
            v[j] = __uint_as_float(__float_as_uint(f) ^ ((sg << (31 - j)) & 0x80000000u));
        }
        mv_dot8<NT>(v, xs, e, nt, db, acc);
    } else if constexpr (T == HALO_TYPE_Q2_K) {
        const uint8_t *b = stage + 84 * (w >> 8);
        const int in = w & 255, sub = in >> 5, j0 = in & 31;
        const float d = __half2float(*(const __half *)(b + 80));
        const float dmin = __half2float(*(const __half *)(b + 82));
        const uint8_t sc = b[2 * sub + (j0 >> 4)];
        const float dl = __fmul_rn(d, (float)(sc & 0xf)), ml = __fmul_rn(dmin, (float)(sc >> 4));
        const uint32_t *qs = (const uint32_t *)(b + 16 + 32 * (sub >> 2) + j0);
        const int shift = 2 * (sub & 3);
#pragma unroll
        for (int i = 0; i < 2; i++) {
            const uint32_t q4 = (qs[i] >> shift) & 0x03030303u;
#pragma unroll
            for (int j = 0; j < 4; j++) {
                float qf = __uint_as_float(__byte_perm(q4, 0x4B000000u, 0x7540 + j)) - 8388608.0f;
                v[4 * i + j] = fmaf(dl, qf, -ml);
            }
        }
        mv_dot8<NT>(v, xs, e, nt, 1.0f, acc);
    } else {
        uint4 r[2];
        if constexpr (T == HALO_TYPE_F32) {
            r[0] = *(const uint4 *)(stage + 4 * w);
            r[1] = *(const uint4 *)(stage + 4 * w + 16);
        } else {
            r[0] = *(const uint4 *)(stage + 2 * w);
        }
        mv_float8<T>(r, v);
        mv_dot8<NT>(v, xs, e, nt, 1.0f, acc);
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
        constexpr int U = W == 1 ? 8 : 4;             /* 16-byte loads in flight per lane */
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
        constexpr int CB = MV_CH / E * B; /* bytes of a whole chunk */
        constexpr int NV = (CB / 16 + WARP - 1) / WARP;
        static_assert(CB % 16 == 0 && CB <= MV_STAGE, "chunk");
#ifndef HALO_HIP
        /* stage holds MV_STAGES chunk slots; chunk c lives in slot c % MV_STAGES. */
        const int64_t nch = (k1 - k0 + MV_CH - 1) / MV_CH;
        auto issue = [&](int64_t c) {
            const int64_t kc = k0 + c * MV_CH;
            const int n16 = (int)((k1 - kc < MV_CH ? k1 - kc : MV_CH) / E * B / 16);
            uint8_t *dst = stage + (c % MV_STAGES) * MV_STAGE;
            const uint4 *src = (const uint4 *)(wrow + kc / E * B);
            for (int idx = lane; idx < n16; idx += WARP)
                cp_async16(dst + 16 * idx, src + idx);
        };
#pragma unroll
        for (int c = 0; c < MV_STAGES - 1; c++) {
            if (c < nch) issue(c);
            cp_async_commit();
        }
        for (int64_t c = 0; c < nch; c++) {
            cp_async_wait<MV_STAGES - 2>(); /* this lane's copies of chunk c have landed */
            __syncwarp();                   /* and every lane's */
            if (c + MV_STAGES - 1 < nch) issue(c + MV_STAGES - 1); /* the slot read at c - 1 */
            cp_async_commit();
            const int64_t kc = k0 + c * MV_CH;
            const uint8_t *slot = stage + (c % MV_STAGES) * MV_STAGE;
            const int n = (int)(k1 - kc < MV_CH ? k1 - kc : MV_CH);
            if constexpr (cx_g8(T)) {
                for (int w = 8 * lane; w < n; w += 8 * WARP)
                    mv_g8<T, NT>(slot, w, xs, kc + w, nt, acc, g);
            } else {
                for (int u = lane; u < n / 32; u += WARP)
                    mv_unit<T, NT>(slot, u, xs, kc + 32 * u, nt, acc, g);
            }
            __syncwarp(); /* slot c is free for the copies issued at c + 1 */
        }
        (void)NV;
#else
        uint4 pre[NV];
        int64_t kc = k0;
        int n16 = (int)((k1 - kc < MV_CH ? k1 - kc : MV_CH) / E * B / 16);
        mv_fetch<NV>(pre, (const uint4 *)(wrow + kc / E * B), n16, lane);
        for (; kc < k1; kc += MV_CH) {
            gpu_syncwarp();
#pragma unroll
            for (int i = 0; i < NV; i++) {
                int idx = lane + WARP * i;
                if (idx < n16) ((uint4 *)stage)[idx] = pre[i];
            }
            gpu_syncwarp();
            const int64_t kn = kc + MV_CH;
            const int units = (int)((k1 - kc < MV_CH ? k1 - kc : MV_CH) / 32);
            if (kn < k1) {
                n16 = (int)((k1 - kn < MV_CH ? k1 - kn : MV_CH) / E * B / 16);
                mv_fetch<NV>(pre, (const uint4 *)(wrow + kn / E * B), n16, lane);
            }
            for (int u = lane; u < units; u += WARP)
                mv_unit<T, NT>(stage, u, xs, kc + 32 * u, nt, acc, g);
        }
#endif
    }
#pragma unroll
    for (int k = 0; k < NT; k++)
        acc[k] = warp_sum(acc[k]);
}

#ifndef HALO_HIP
/* A warp's stream of rows: items first, first + stride, ... < n_items, each the dot of one
 * weight row (p.row(i, &row) returns its width, 0 for an item to skip) with the activations
 * p.begin sets (returning the same width); p.end gets the sums (in every lane). The row chunks go
 * through the warp's MV_STAGES shared-memory slots by cp.async as one stream across rows, so the
 * copies of the next rows are in flight while this one is computed (rows of one or two chunks are
 * the rule in decode: per-row pipelines never fill). */
template <int T, int NT, class P>
static __device__ __forceinline__ void mv_stream(P &p, int64_t first, int64_t stride,
                                                 int64_t n_items, uint8_t *stage, cu_grids g) {
    constexpr int E = cx_block_elems(T), B = cx_block_bytes(T), CH = cx_chunk(T);
    static_assert(CH / E * B <= MV_STAGE && (CH / E * B) % 16 == 0, "chunk");
    const int lane = threadIdx.x % WARP;
    /* The issue cursor: item, its row and width (looked up once per item), chunk start. */
    int64_t ii = first, ik1 = 0, ikc = 0;
    int jn = 0;
    const char *irow = NULL;
    auto issue = [&]() {
        while (ik1 == 0 && ii < n_items) {
            ik1 = p.row(ii, &irow);
            if (ik1 == 0) ii += stride;
        }
        if (ii < n_items) {
            const int n16 = (int)((ik1 - ikc < CH ? ik1 - ikc : CH) / E * B / 16);
            const uint4 *src = (const uint4 *)(irow + ikc / E * B);
            uint8_t *dst = stage + (jn % MV_STAGES) * MV_STAGE;
            for (int idx = lane; idx < n16; idx += WARP)
                cp_async16(dst + 16 * idx, src + idx);
            jn++;
            ikc += CH;
            if (ikc >= ik1) {
                ikc = ik1 = 0;
                ii += stride;
            }
        }
        cp_async_commit();
    };
#pragma unroll
    for (int st = 0; st < MV_STAGES - 1; st++)
        issue();
    int j = 0;
    for (int64_t it = first; it < n_items; it += stride) {
        const float *xs[NT];
        int nt = 1;
        const int64_t k1 = p.begin(it, xs, nt); /* 0: an item to skip */
        if (k1 == 0) continue;
        float acc[NT];
#pragma unroll
        for (int k = 0; k < NT; k++)
            acc[k] = 0.0f;
        for (int64_t kc = 0; kc < k1; kc += CH, j++) {
            cp_async_wait<MV_STAGES - 2>();
            __syncwarp();
            issue(); /* into the slot read one step ago */
            const uint8_t *slot = stage + (j % MV_STAGES) * MV_STAGE;
            const int n = (int)(k1 - kc < CH ? k1 - kc : CH);
            if constexpr (cx_g8(T)) {
                for (int w = 8 * lane; w < n; w += 8 * WARP)
                    mv_g8<T, NT>(slot, w, xs, kc + w, nt, acc, g);
            } else {
                for (int u = lane; u < n / 32; u += WARP)
                    mv_unit<T, NT>(slot, u, xs, kc + 32 * u, nt, acc, g);
            }
            __syncwarp();
        }
#pragma unroll
        for (int k = 0; k < NT; k++)
            acc[k] = warp_sum(acc[k]);
        p.end(it, acc, nt);
    }
    cp_async_wait<0>();
}
#endif

#endif
