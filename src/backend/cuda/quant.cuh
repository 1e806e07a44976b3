/* Device decoding of weight blocks, 32 elements at a time (every block format halo runs on the
 * GPU has blocks of 32 or super-blocks of 8 x 32). The expressions and their order are those of
 * src/quant's scalar reference dequantizers (which are ggml's), with multiplies and adds kept
 * apart (__fmul_rn / __fsub_rn: no fused multiply-add), so a decoded weight is bit-identical to
 * the CPU's. Float formats (F32, F16, BF16) are read element by element instead (load_float).
 * Codebooks of the i-quants live in device memory and come in through cu_grids. */
#ifndef HALO_BACKEND_CUDA_QUANT_CUH
#define HALO_BACKEND_CUDA_QUANT_CUH

#include "backend/cuda/cuda.cuh"

typedef struct cu_grids {
    const uint64_t *iq2xxs;              /* 256 rows of 8 magnitudes */
    const uint32_t *iq3xxs;              /* 256 rows of 4 magnitudes */
    const uint64_t *iq2xs, *iq2s, *iq1s; /* 512, 1024, 2048 rows of 8 */
    const uint32_t *iq3s;                /* 512 rows of 4 */
    int iq2xxs_rep; /* log2 of the IQ2_XXS grid's copies in shared memory (mvq.cuh) */
} cu_grids;

/* The grids in device memory (copied once per backend). */
cu_grids cu_grids_get(halo_backend *be);

static __device__ __forceinline__ bool is_float_type(uint32_t t) {
    return t == HALO_TYPE_F32 || t == HALO_TYPE_F16 || t == HALO_TYPE_BF16;
}

static __device__ __forceinline__ uint16_t ld16(const uint8_t *p) {
    return (uint16_t)(p[0] | (p[1] << 8));
}
static __device__ __forceinline__ uint32_t ld32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static __device__ __forceinline__ float h16(const uint8_t *p) {
    return f16_to_f32(ld16(p));
}

static __device__ __forceinline__ float e8m0_half(uint8_t e) {
    uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    return __uint_as_float(bits);
}

static __device__ __forceinline__ uint8_t iq_signs(uint32_t idx7) {
    return (uint8_t)(idx7 | ((uint32_t)(__popc(idx7) & 1) << 7));
}

static __device__ __forceinline__ void k4_scale_min(int j, const uint8_t *q, int *sc, int *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

static __device__ __forceinline__ int block_bytes_more(uint32_t t); /* iquant_more.cuh */

/* Bytes and element count of one block of a block format. */
static __device__ __forceinline__ void block_shape(uint32_t t, int *bytes, int *elems) {
    switch (t) {
    case HALO_TYPE_Q4_0:
        *bytes = 18, *elems = 32;
        return;
    case HALO_TYPE_Q4_1:
        *bytes = 20, *elems = 32;
        return;
    case HALO_TYPE_Q5_0:
        *bytes = 22, *elems = 32;
        return;
    case HALO_TYPE_Q5_1:
        *bytes = 24, *elems = 32;
        return;
    case HALO_TYPE_Q8_0:
        *bytes = 34, *elems = 32;
        return;
    case HALO_TYPE_IQ4_NL:
        *bytes = 18, *elems = 32;
        return;
    case HALO_TYPE_MXFP4:
        *bytes = 17, *elems = 32;
        return;
    case HALO_TYPE_Q2_K:
        *bytes = 84, *elems = 256;
        return;
    case HALO_TYPE_Q3_K:
        *bytes = 110, *elems = 256;
        return;
    case HALO_TYPE_Q4_K:
        *bytes = 144, *elems = 256;
        return;
    case HALO_TYPE_Q5_K:
        *bytes = 176, *elems = 256;
        return;
    case HALO_TYPE_Q6_K:
        *bytes = 210, *elems = 256;
        return;
    case HALO_TYPE_IQ2_XXS:
        *bytes = 66, *elems = 256;
        return;
    case HALO_TYPE_IQ3_XXS:
        *bytes = 98, *elems = 256;
        return;
    default: /* iquant_more.cuh's types: super-blocks of 256 */
        *bytes = block_bytes_more(t), *elems = *bytes ? 256 : 32;
        return;
    }
}

static __constant__ const signed char cu_kvalues_iq4nl[16] = {
    -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
static __constant__ const signed char cu_kvalues_mxfp4[16] = {0, 1,  2,  3,  4,  6,  8,  12,
                                                              0, -1, -2, -3, -4, -6, -8, -12};

#include "backend/cuda/iquant_more.cuh"

/* Decodes elements [32c, 32c + 32) of a row of block format t into v. Inlined where t is a
 * constant (the fast kernels, mv.cuh): the switch folds away. */
static __device__ __forceinline__ void deq32_body(uint32_t t, const uint8_t *row, int64_t c,
                                                  float v[32], cu_grids g) {
    int bytes, elems;
    block_shape(t, &bytes, &elems);
    const int per = elems / 32;
    const uint8_t *b = row + (c / per) * bytes;
    const int sub = (int)(c % per); /* 32-element part of a super-block */
    switch (t) {
    case HALO_TYPE_Q4_0: {
        float d = h16(b);
        for (int j = 0; j < 16; j++) {
            v[j] = __fmul_rn((float)((b[2 + j] & 0xf) - 8), d);
            v[j + 16] = __fmul_rn((float)((b[2 + j] >> 4) - 8), d);
        }
        return;
    }
    case HALO_TYPE_Q4_1: {
        float d = h16(b), m = h16(b + 2);
        for (int j = 0; j < 16; j++) {
            v[j] = __fadd_rn(__fmul_rn((float)(b[4 + j] & 0xf), d), m);
            v[j + 16] = __fadd_rn(__fmul_rn((float)(b[4 + j] >> 4), d), m);
        }
        return;
    }
    case HALO_TYPE_Q5_0: {
        float d = h16(b);
        uint32_t h = ld32(b + 2);
        for (int j = 0; j < 16; j++) {
            int lo = (b[6 + j] & 0xf) | (int)((h >> j) & 1) << 4;
            int hi = (b[6 + j] >> 4) | (int)((h >> (j + 16)) & 1) << 4;
            v[j] = __fmul_rn((float)(lo - 16), d);
            v[j + 16] = __fmul_rn((float)(hi - 16), d);
        }
        return;
    }
    case HALO_TYPE_Q5_1: {
        float d = h16(b), m = h16(b + 2);
        uint32_t h = ld32(b + 4);
        for (int j = 0; j < 16; j++) {
            int lo = (b[8 + j] & 0xf) | (int)((h >> j) & 1) << 4;
            int hi = (b[8 + j] >> 4) | (int)((h >> (j + 16)) & 1) << 4;
            v[j] = __fadd_rn(__fmul_rn((float)lo, d), m);
            v[j + 16] = __fadd_rn(__fmul_rn((float)hi, d), m);
        }
        return;
    }
    case HALO_TYPE_Q8_0: {
        float d = h16(b);
        for (int j = 0; j < 32; j++)
            v[j] = __fmul_rn((float)(int8_t)b[2 + j], d);
        return;
    }
    case HALO_TYPE_IQ4_NL: {
        float d = h16(b);
        for (int j = 0; j < 16; j++) {
            v[j] = __fmul_rn(d, (float)cu_kvalues_iq4nl[b[2 + j] & 0xf]);
            v[j + 16] = __fmul_rn(d, (float)cu_kvalues_iq4nl[b[2 + j] >> 4]);
        }
        return;
    }
    case HALO_TYPE_MXFP4: {
        float d = e8m0_half(b[0]);
        for (int j = 0; j < 16; j++) {
            v[j] = __fmul_rn((float)cu_kvalues_mxfp4[b[1 + j] & 0xf], d);
            v[j + 16] = __fmul_rn((float)cu_kvalues_mxfp4[b[1 + j] >> 4], d);
        }
        return;
    }
    case HALO_TYPE_Q2_K: { /* scales[16] qs[64] d dmin */
        float d = h16(b + 80), dmin = h16(b + 82);
        for (int j = 0; j < 32; j++) {
            int e = 32 * sub + j, gi = e / 16;
            float dl = __fmul_rn(d, (float)(b[gi] & 0xf));
            float ml = __fmul_rn(dmin, (float)(b[gi] >> 4));
            int q = (b[16 + 32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
            v[j] = __fsub_rn(__fmul_rn(dl, (float)q), ml);
        }
        return;
    }
    case HALO_TYPE_Q3_K: { /* hmask[32] qs[64] scales[12] d */
        float d = h16(b + 108);
        const uint8_t *s = b + 96;
        for (int j = 0; j < 32; j++) {
            int e = 32 * sub + j, gi = e / 16;
            int lo = gi < 8 ? s[gi] & 0xf : s[gi - 8] >> 4;
            int hi = (s[8 + (gi & 3)] >> (2 * (gi >> 2))) & 3;
            int sc = (lo | (hi << 4)) - 32;
            int ql = (b[32 + 32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
            int qh = (b[e % 32] >> (e / 32)) & 1;
            v[j] = __fmul_rn(__fmul_rn(d, (float)sc), (float)(ql - (qh ? 0 : 4)));
        }
        return;
    }
    case HALO_TYPE_Q4_K:
    case HALO_TYPE_Q5_K: { /* d dmin scales[12] [qh[32]] qs[128] */
        float d = h16(b), dmin = h16(b + 2);
        int sc, m;
        k4_scale_min(sub, b + 4, &sc, &m);
        float dl = __fmul_rn(d, (float)sc), ml = __fmul_rn(dmin, (float)m);
        bool five = t == HALO_TYPE_Q5_K;
        const uint8_t *qs = b + (five ? 48 : 16);
        for (int j = 0; j < 32; j++) {
            int e = 32 * sub + j;
            int q = (qs[32 * (e / 64) + e % 32] >> (4 * ((e % 64) / 32))) & 0xf;
            if (five) q |= ((b[16 + e % 32] >> (e / 32)) & 1) << 4;
            v[j] = __fsub_rn(__fmul_rn(dl, (float)q), ml);
        }
        return;
    }
    case HALO_TYPE_Q6_K: { /* ql[128] qh[64] scales[16] d */
        float d = h16(b + 208);
        for (int j = 0; j < 32; j++) {
            int e = 32 * sub + j;
            int cc = e / 128, r = e % 128, l = r % 32, part = r / 32;
            int lo = (b[64 * cc + l + 32 * (part & 1)] >> (4 * (part >> 1))) & 0xf;
            int hi = (b[128 + 32 * cc + l] >> (2 * part)) & 3;
            int q = (lo | (hi << 4)) - 32;
            v[j] = __fmul_rn(__fmul_rn(d, (float)(int8_t)b[192 + e / 16]), (float)q);
        }
        return;
    }
    case HALO_TYPE_IQ2_XXS: { /* d qs[32 x u16] */
        float d = h16(b);
        const uint8_t *q = b + 2 + 8 * sub;
        uint32_t aux = ld32(q + 4);
        float db = __fmul_rn(__fmul_rn(d, __fadd_rn(0.5f, (float)(aux >> 28))), 0.25f);
        for (int l = 0; l < 4; l++) {
            uint64_t grid = g.iq2xxs[q[l]];
            uint8_t signs = iq_signs((aux >> (7 * l)) & 127);
            for (int j = 0; j < 8; j++) {
                float x = __fmul_rn(db, (float)((grid >> (8 * j)) & 0xff));
                v[8 * l + j] = (signs >> j) & 1 ? -x : x;
            }
        }
        return;
    }
    case HALO_TYPE_IQ3_XXS: { /* d qs[64 grid bytes + 32 sign/scale bytes] */
        float d = h16(b);
        const uint8_t *qs = b + 2;
        uint32_t aux = ld32(qs + 64 + 4 * sub);
        float db = __fmul_rn(__fmul_rn(d, __fadd_rn(0.5f, (float)(aux >> 28))), 0.5f);
        for (int l = 0; l < 4; l++) {
            uint8_t signs = iq_signs((aux >> (7 * l)) & 127);
            uint64_t row = (uint64_t)g.iq3xxs[qs[8 * sub + 2 * l]] |
                           (uint64_t)g.iq3xxs[qs[8 * sub + 2 * l + 1]] << 32;
            for (int j = 0; j < 8; j++) {
                float x = __fmul_rn(db, (float)((row >> (8 * j)) & 0xff));
                v[8 * l + j] = (signs >> j) & 1 ? -x : x;
            }
        }
        return;
    }
    default:
        deq32_more(t, b, sub, v, g);
        return;
    }
}

/* The generic decoder (one copy of the code, the type switched at run time). */
static inline __device__ __noinline__ void deq32(uint32_t t, const uint8_t *row, int64_t c,
                                                 float v[32], cu_grids g) {
    deq32_body(t, row, c, v, g);
}

/* Σ_i w[i] · x[i] over one row (n elements of type t) by one warp, for `nt` activation rows at
 * once (x + k·x_stride for k < nt): block formats one 32-element chunk per lane at a time, float
 * formats one element per lane (coalesced). Returns the sums in every lane. */
template <int NT>
static __device__ __forceinline__ void warp_dot_rows(uint32_t t, const char *wrow, int64_t n,
                                                     const float *x, int64_t x_stride, int nt,
                                                     float acc[NT], cu_grids g) {
    const int lane = threadIdx.x % WARP;
    for (int k = 0; k < NT; k++)
        acc[k] = 0.0f;
    if (is_float_type(t)) {
        for (int64_t i = lane; i < n; i += WARP) {
            float w = load_float(t, wrow, i);
#pragma unroll
            for (int k = 0; k < NT; k++)
                if (k < nt) acc[k] += w * x[k * x_stride + i];
        }
    } else {
        float v[32];
        for (int64_t c = lane; c < n / 32; c += WARP) {
            deq32(t, (const uint8_t *)wrow, c, v, g);
#pragma unroll
            for (int k = 0; k < NT; k++) {
                if (k < nt) {
                    const float *xx = x + k * x_stride + 32 * c;
                    float s = 0.0f;
#pragma unroll
                    for (int j = 0; j < 32; j++)
                        s += v[j] * xx[j];
                    acc[k] += s;
                }
            }
        }
    }
#pragma unroll
    for (int k = 0; k < NT; k++)
        acc[k] = warp_sum(acc[k]);
}

/* As warp_dot_rows, with the activation rows given by pointers (gathered tokens). */
template <int NT>
static __device__ __forceinline__ void warp_dot_gather(uint32_t t, const char *wrow, int64_t n,
                                                       const float *const *x, int nt, float acc[NT],
                                                       cu_grids g) {
    const int lane = threadIdx.x % WARP;
    for (int k = 0; k < NT; k++)
        acc[k] = 0.0f;
    if (is_float_type(t)) {
        for (int64_t i = lane; i < n; i += WARP) {
            float w = load_float(t, wrow, i);
#pragma unroll
            for (int k = 0; k < NT; k++)
                if (k < nt) acc[k] += w * x[k][i];
        }
    } else {
        float v[32];
        for (int64_t c = lane; c < n / 32; c += WARP) {
            deq32(t, (const uint8_t *)wrow, c, v, g);
#pragma unroll
            for (int k = 0; k < NT; k++) {
                if (k < nt) {
                    const float *xx = x[k] + 32 * c;
                    float s = 0.0f;
#pragma unroll
                    for (int j = 0; j < 32; j++)
                        s += v[j] * xx[j];
                    acc[k] += s;
                }
            }
        }
    }
#pragma unroll
    for (int k = 0; k < NT; k++)
        acc[k] = warp_sum(acc[k]);
}

#endif
