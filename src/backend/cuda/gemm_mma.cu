/* Prefill projections on tensor cores (see gemm_mma.h).
 *
 * The matvec kernels of decode (mv.cuh) decode every weight on CUDA cores once per group of 8
 * tokens and multiply in f32: at 2048 tokens that is ~4 TFLOP/s on an H200, the prefill's bound.
 * Here a block of 8 warps owns a tile of GM_BM weight rows x GM_BN tokens: per GM_BK-wide slice
 * of the inputs each thread decodes one 32-weight unit to f16 in shared memory, the block
 * rounds its tokens' f32 activations to f16 beside them, and each warp multiplies a 32 x 32 part
 * of the tile with mma.sync m16n8k16 (f16 x f16 -> f32). A weight is decoded once per 64
 * tokens, and the multiply-adds run on tensor cores. Measured on the H200 (bench/cuda/RESULTS.md
 * runs 22-24): 43-layer q2 prefill 122 -> 828 tok/s at pp2048; the experts' tiles, which decode
 * every expert once per 512-token ubatch, are most of what is left (bench/cuda/NOTES.md).
 *
 * Numerics: weights rounded to f16 (Q8_0's d·q once, as quant.cuh's f32 value rounded; IQ2_XXS
 * and Q2_K with their scales rounded to f16 first: at most one more rounding, 2^-11 relative
 * each), activations rounded to f16 with saturation at ±65504, products and sums in f32; split-K
 * sums its parts in a fixed order, so results are the same run to run. That is the precision
 * class of ggml's CUDA
 * prefill (cuBLAS on f16 activations for float weights; q8_1 activations, a 1/254 step of the
 * block's largest value, for its quantized MMQ kernels), not the CPU's precise mode: the op
 * tests hold these kernels to 2e-3 of the output's range, not 1e-5. They run in the backend's
 * fast mode only (halo_backend_cuda_set_precise): precise mode keeps f32 activations at every batch
 * size. */
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/gemm_mma.h"
#include "backend/cuda/quant.cuh"

#ifndef HALO_HIP
#include <cuda_fp16.h>

enum {
    GM_BM = 128,       /* weight rows of a tile */
    GM_BN = 64,        /* tokens (or expert pairs) of a tile: moe.cu's MOE_ITEM */
    GM_BN16 = 16,      /* pairs of gm_moe16's tiles (a routed expert's item of at most 16) */
    GM_BK = 64,        /* inputs per step: one 32-weight unit per thread */
    GM_THREADS = 256,  /* 8 warps: 4 along the rows x 2 along the tokens, 32 x 32 each */
    GM_LD = GM_BK + 8, /* f16 per smem row: +16 bytes, so ldmatrix's 8 rows hit 8 bank groups */
};

/* A tile of BN tokens (64, or 16 for gm_moe16): its 8 warps are WM along the rows x WN along
 * the tokens, each with MI x NI fragments of 16 rows x 8 tokens (BN 64: 4 x 2 warps of 32 x 32;
 * BN 16: 8 x 1 warps of 16 x 16, a quarter of the accumulators); a step's activations are
 * loaded by XQ threads a token, NX float4s each. */
template <int BN> struct gm_shape {
    static constexpr int WN = BN == GM_BN ? 2 : 1, WM = 8 / WN;
    static constexpr int MI = GM_BM / WM / 16, NI = BN / WN / 8;
    static constexpr int XQ = GM_THREADS / BN, XQL = BN == GM_BN ? 2 : 4, NX = GM_BK / 4 / XQ;
    static_assert(1 << XQL == XQ, "XQL: log2 of XQ");
    static_assert(BN == GM_BN || BN == GM_BN16, "tiles of 64 or 16 tokens");
};

/* The tile's shared memory: decoded weights, f16 activations, and where each token's
 * activation row and output row are (NULL past the batch). */
template <int BN> struct gm_smem {
    __half a[GM_BM][GM_LD];
    __half b[BN][GM_LD];
    const float *xrow[BN];
    float *orow[BN];
    uint64_t iq2xxs[256]; /* IQ2_XXS's grid, read four times per 32 weights decoded */
};

static __device__ __forceinline__ void ldm_x4(uint32_t r[4], const __half *p) {
    const uint32_t a = (uint32_t)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}

static __device__ __forceinline__ void mma_16816(float c[4], const uint32_t a[4], const uint32_t b0,
                                                 const uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
                 "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* f32 to f16 with saturation: an activation past f16's range becomes ±65504, not infinity. */
static __device__ __forceinline__ __half2 sat_h2(float x, float y) {
    x = fminf(fmaxf(x, -65504.0f), 65504.0f);
    y = fminf(fmaxf(y, -65504.0f), 65504.0f);
    return __floats2half2_rn(x, y);
}

static __device__ __forceinline__ void store32(__half *dst, const float v[32]) {
    uint4 *d = (uint4 *)dst;
#pragma unroll
    for (int i = 0; i < 4; i++) {
        __half2 h[4];
#pragma unroll
        for (int j = 0; j < 4; j++)
            h[j] = __floats2half2_rn(v[8 * i + 2 * j], v[8 * i + 2 * j + 1]);
        d[i] = *(const uint4 *)h;
    }
}

/* One thread's 32-weight unit of a step, in two halves so the loads of step k + 1 are in flight
 * while the tensor cores work on step k: fetch (global memory to registers; the 2-bit formats'
 * unit is 10 bytes or 38, not the whole super-block) and put (decode to f16 in shared memory).
 * Types without a fetch here decode straight from global memory in put (quant.cuh). */
template <int T> struct gm_raw {
    const char *row;
    int64_t c;
    __device__ void fetch(const char *r, int64_t u) {
        row = r, c = u;
    }
    __device__ void put(__half *dst, cu_grids g, const uint64_t *) const {
        float v[32];
        deq32_body((uint32_t)T, (const uint8_t *)row, c, v, g);
        store32(dst, v);
    }
};

template <> struct gm_raw<HALO_TYPE_F16> {
    uint4 q[4];
    __device__ void fetch(const char *r, int64_t c) {
#pragma unroll
        for (int i = 0; i < 4; i++)
            q[i] = __ldg((const uint4 *)(r + 64 * c) + i);
    }
    __device__ void put(__half *dst, cu_grids, const uint64_t *) const {
#pragma unroll
        for (int i = 0; i < 4; i++)
            ((uint4 *)dst)[i] = q[i];
    }
};

template <> struct gm_raw<HALO_TYPE_BF16> {
    uint4 q[4];
    __device__ void fetch(const char *r, int64_t c) {
#pragma unroll
        for (int i = 0; i < 4; i++)
            q[i] = __ldg((const uint4 *)(r + 64 * c) + i);
    }
    __device__ void put(__half *dst, cu_grids, const uint64_t *) const {
        float v[32];
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const uint32_t w[4] = {q[i].x, q[i].y, q[i].z, q[i].w};
#pragma unroll
            for (int j = 0; j < 4; j++) {
                v[8 * i + 2 * j] = __uint_as_float(w[j] << 16);
                v[8 * i + 2 * j + 1] = __uint_as_float(w[j] & 0xffff0000u);
            }
        }
        store32(dst, v);
    }
};

/* The block formats below are decoded in f16 arithmetic: a byte b becomes the f16 1024 + b by
 * placing it under the exponent bits 0x64 (__byte_perm, two weights a word), an exact
 * subtraction leaves the integer, and one f16 multiply (or fma) applies the scale, so a weight
 * costs about two full-rate instructions instead of an int-to-float and a float-to-f16
 * conversion (quarter-rate each). */
static __device__ __forceinline__ __half2 u8x2_h2(uint32_t x, uint32_t sel) {
    const uint32_t w = __byte_perm(x, 0x64u, sel);
    return *(const __half2 *)&w;
}
enum { GM_LO = 0x4140, GM_HI = 0x4342 }; /* bytes 0, 1 / 2, 3 of x, each under 0x64 */

static __device__ __forceinline__ void store16h2(__half *dst, const __half2 h[16]) {
    uint4 *d = (uint4 *)dst;
#pragma unroll
    for (int i = 0; i < 4; i++)
        d[i] = *(const uint4 *)(h + 4 * i);
}

/* Q8_0: d (f16) then 32 int8; blocks of 34 bytes are 2-byte aligned: 17 2-byte loads. q + 128
 * (the sign bit flipped) is a byte; (1024 + q + 128) - 1152 = q exactly, and d·q is rounded
 * once, as the f32 product rounded to f16 would be. */
template <> struct gm_raw<HALO_TYPE_Q8_0> {
    uint16_t q[17];
    __device__ void fetch(const char *r, int64_t c) {
        const uint16_t *b = (const uint16_t *)(r + 34 * c);
#pragma unroll
        for (int i = 0; i < 17; i++)
            q[i] = __ldg(b + i);
    }
    __device__ void load_sb(const unsigned char *p, int u) {
        const uint16_t *b = (const uint16_t *)(p + 34 * u);
#pragma unroll
        for (int i = 0; i < 17; i++)
            q[i] = b[i];
    }
    __device__ void put(__half *dst, cu_grids, const uint64_t *) const {
        const __half2 d2 = __half2half2(__ushort_as_half(q[0]));
        const __half2 off = __float2half2_rn(1152.0f);
        __half2 h[16];
#pragma unroll
        for (int i = 0; i < 8; i++) {
            const uint32_t w =
                ((uint32_t)q[1 + 2 * i] | ((uint32_t)q[2 + 2 * i] << 16)) ^ 0x80808080u;
            h[2 * i] = __hmul2(__hsub2(u8x2_h2(w, GM_LO), off), d2);
            h[2 * i + 1] = __hmul2(__hsub2(u8x2_h2(w, GM_HI), off), d2);
        }
        store16h2(dst, h);
    }
};

/* IQ2_XXS's signs of weights 2k and 2k + 1 (bits 2k, 2k + 1 of the 8 sign bits sg) as the sign
 * bits of an f16 pair: bits 15 and 31 of sg · gm_neg_mul(k), masked. The product puts bit i of
 * sg at bits i + 15 - 2k and i + 30 - 2k, positions that never coincide (no carries), so one
 * multiply-add and one 3-input logic op (with the xor into the pair) take the place of the two
 * shifts, two ands and an or a pair took; the same bits, checked for every sg and k when this
 * file compiles (gm_neg_ok). */
static constexpr __host__ __device__ uint32_t gm_neg_mul(int k) {
    return (1u << (15 - 2 * k)) | (1u << (30 - 2 * k));
}
static constexpr uint32_t gm_neg_shifts(uint32_t sg, int k) { /* the former way */
    return (((sg >> (2 * k)) & 1u) << 15) | (((sg >> (2 * k)) & 2u) << 30);
}
static constexpr bool gm_neg_ok() {
    for (uint32_t sg = 0; sg < 256; sg++)
        for (int k = 0; k < 4; k++)
            if (((sg * gm_neg_mul(k)) & 0x80008000u) != gm_neg_shifts(sg, k)) return false;
    return true;
}
static_assert(gm_neg_ok(), "IQ2_XXS sign masks: the product differs from the shifts");

/* IQ2_XXS: super-block d (f16), then 8 bytes per 32 weights: four grid indices and a word of
 * four 7-bit sign indices and the 4-bit scale (quant.cuh's decoder, ggml's). The scale db is
 * rounded to f16 before its product with the grid value (one more f16 rounding than the f32
 * product rounded once). */
template <> struct gm_raw<HALO_TYPE_IQ2_XXS> {
    uint16_t d, q[4];
    __device__ void fetch(const char *r, int64_t c) {
        const uint16_t *b = (const uint16_t *)(r + 66 * (c >> 3));
        d = __ldg(b);
#pragma unroll
        for (int i = 0; i < 4; i++)
            q[i] = __ldg(b + 1 + 4 * (c & 7) + i);
    }
    /* unit u of the super-block at p (shared memory, gm_tile_sb) */
    __device__ void load_sb(const unsigned char *p, int u) {
        const uint16_t *b = (const uint16_t *)p;
        d = b[0];
#pragma unroll
        for (int i = 0; i < 4; i++)
            q[i] = b[1 + 4 * u + i];
    }
    __device__ void put(__half *dst, cu_grids, const uint64_t *grid) const {
        const uint32_t aux = (uint32_t)q[2] | ((uint32_t)q[3] << 16);
        const float db = __fmul_rn(
            __fmul_rn(__half2float(__ushort_as_half(d)), __fadd_rn(0.5f, (float)(aux >> 28))),
            0.25f);
        const __half2 db2 = __float2half2_rn(db), off = __float2half2_rn(1024.0f);
        __half2 h[16];
#pragma unroll
        for (int l = 0; l < 4; l++) {
            const uint64_t gv = grid[(q[l >> 1] >> (8 * (l & 1))) & 0xff];
            const uint32_t sg = iq_signs((aux >> (7 * l)) & 127); /* 8 bits */
            const uint32_t word[2] = {(uint32_t)gv, (uint32_t)(gv >> 32)};
#pragma unroll
            for (int k = 0; k < 4; k++) {
                const uint32_t neg = (sg * gm_neg_mul(k)) & 0x80008000u; /* weights 2k, 2k + 1 */
                const __half2 m = __hsub2(u8x2_h2(word[k >> 1], k & 1 ? GM_HI : GM_LO), off);
                const uint32_t mb = *(const uint32_t *)&m ^ neg;
                h[4 * l + k] = __hmul2(*(const __half2 *)&mb, db2);
            }
        }
        store16h2(dst, h);
    }
};

/* Q2_K: scales[16] qs[64] d dmin per 256; unit sub takes 32 qs bytes at one shift and two
 * 16-weight groups with their own 4-bit scale and min: weight = dl·q - ml, dl = d·sc and
 * ml = dmin·m computed in f32 and rounded to f16, then one f16 fma per weight. */
template <> struct gm_raw<HALO_TYPE_Q2_K> {
    uint32_t qs[8], dd;
    uint16_t sc;
    int sub;
    __device__ void fetch(const char *r, int64_t c) {
        const char *b = r + 84 * (c >> 3);
        sub = (int)(c & 7);
        sc = __ldg((const uint16_t *)(b + 2 * sub));
        dd = __ldg((const uint32_t *)(b + 80));
        const uint32_t *q = (const uint32_t *)(b + 16 + 32 * (sub >> 2));
#pragma unroll
        for (int i = 0; i < 8; i++)
            qs[i] = __ldg(q + i);
    }
    __device__ void load_sb(const unsigned char *p, int u) {
        sub = u;
        sc = *(const uint16_t *)(p + 2 * sub);
        dd = *(const uint32_t *)(p + 80);
        const uint32_t *q = (const uint32_t *)(p + 16 + 32 * (sub >> 2));
#pragma unroll
        for (int i = 0; i < 8; i++)
            qs[i] = q[i];
    }
    __device__ void put(__half *dst, cu_grids, const uint64_t *) const {
        const float d = __half2float(__ushort_as_half((uint16_t)(dd & 0xffff)));
        const float dmin = __half2float(__ushort_as_half((uint16_t)(dd >> 16)));
        const int shift = 2 * (sub & 3);
        const __half2 off = __float2half2_rn(1024.0f);
        __half2 h[16];
#pragma unroll
        for (int g = 0; g < 2; g++) {
            const uint32_t s = (sc >> (8 * g)) & 0xff;
            const __half2 dl = __float2half2_rn(__fmul_rn(d, (float)(s & 0xf)));
            const __half2 nml = __float2half2_rn(-__fmul_rn(dmin, (float)(s >> 4)));
#pragma unroll
            for (int w4 = 0; w4 < 4; w4++) {
                const uint32_t q4 = (qs[4 * g + w4] >> shift) & 0x03030303u;
                h[8 * g + 2 * w4] = __hfma2(__hsub2(u8x2_h2(q4, GM_LO), off), dl, nml);
                h[8 * g + 2 * w4 + 1] = __hfma2(__hsub2(u8x2_h2(q4, GM_HI), off), dl, nml);
            }
        }
        store16h2(dst, h);
    }
};

/* A step's activations: token bj's f32 at inputs bq + 4·XQ·i .. + 3 (xf[i], or zeros past the
 * batch) to f16 in s.b. The XQ threads of a token take consecutive float4s, so a warp's load
 * reads 64 contiguous bytes a token or more (8 L1 wavefronts, not 16 as 64-byte pieces a thread
 * did). */
template <int BN>
static __device__ __forceinline__ void gm_put_x(gm_smem<BN> &s, bool have, const float4 *xf, int bj,
                                                int bq) {
    constexpr int XQ = gm_shape<BN>::XQ, NX = gm_shape<BN>::NX;
#pragma unroll
    for (int i = 0; i < NX; i++) {
        uint2 hv = make_uint2(0, 0);
        if (have) {
            const __half2 h[2] = {sat_h2(xf[i].x, xf[i].y), sat_h2(xf[i].z, xf[i].w)};
            hv = *(const uint2 *)h;
        }
        *(uint2 *)&s.b[bj][bq + 4 * XQ * i] = hv;
    }
}

/* A step's multiplies: this warp's 16·MI rows x 8·NI tokens of s.a x s.b over GM_BK inputs, the
 * fragments past the warp's live tokens skipped. A (row, token) sum takes the same mma.sync
 * steps in the same order in a tile of 64 tokens or of 16, from the same f16 values. */
template <int BN>
static __device__ __forceinline__ void gm_mma_step(const gm_smem<BN> &s,
                                                   float acc[gm_shape<BN>::MI][gm_shape<BN>::NI][4],
                                                   int live, int wm, int wn, int lane) {
    constexpr int MI = gm_shape<BN>::MI, NI = gm_shape<BN>::NI;
#pragma unroll
    for (int kk = 0; kk < GM_BK && live > 0; kk += 16) {
        uint32_t af[MI][4], bf[NI][2];
#pragma unroll
        for (int mi = 0; mi < MI; mi++)
            ldm_x4(af[mi], &s.a[16 * MI * wm + 16 * mi + (lane & 15)][kk + 8 * (lane >> 4)]);
#pragma unroll
        for (int nj = 0; nj < NI / 2; nj++) {
            if (16 * nj >= live) break;
            uint32_t r[4];
            ldm_x4(r, &s.b[8 * NI * wn + 16 * nj + (lane & 7) + 8 * (lane >> 4)]
                          [kk + 8 * ((lane >> 3) & 1)]);
            bf[2 * nj][0] = r[0], bf[2 * nj][1] = r[1];
            bf[2 * nj + 1][0] = r[2], bf[2 * nj + 1][1] = r[3];
        }
#pragma unroll
        for (int mi = 0; mi < MI; mi++)
#pragma unroll
            for (int ni = 0; ni < NI; ni++)
                if (8 * ni < live) mma_16816(acc[mi][ni], af[mi], bf[ni][0], bf[ni][1]);
    }
}

/* The tile's product: acc[mi][ni] (this warp's 2 x 4 fragments of 16 x 8) = Σ over the K
 * inputs [k_begin, k_end) of w rows [0, n_rows) (row_bytes apart, type T) times s.xrow's
 * activations; tokens from n_live on are padding. One barrier pair per step; the next step's
 * weights and activations are loaded into registers before this step's multiplies (the 2-bit
 * weights two steps ahead), so their latency hides behind the tensor cores. */
template <int T, int BN>
static __device__ __forceinline__ void
gm_tile(gm_smem<BN> &s, const char *w, uint64_t row_bytes, int n_rows, int64_t k_begin,
        int64_t k_end, int n_live, float acc[gm_shape<BN>::MI][gm_shape<BN>::NI][4], cu_grids g) {
    using SH = gm_shape<BN>;
    const int tid = threadIdx.x, lane = tid % WARP, warp = tid / WARP;
    const int wm = warp % SH::WM, wn = warp / SH::WM;
    /* This thread's decoding: row ar, unit au of each step; activations: token bj, inputs
     * bq + 4·XQ·i .. + 3 (i < NX). */
    const int ar = tid >> 1, au = tid & 1, bj = tid >> SH::XQL, bq = 4 * (tid & (SH::XQ - 1));
    const char *arow = ar < n_rows ? w + (uint64_t)ar * row_bytes : NULL;
    const float *xr = s.xrow[bj];
#pragma unroll
    for (int mi = 0; mi < SH::MI; mi++)
#pragma unroll
        for (int ni = 0; ni < SH::NI; ni++)
#pragma unroll
            for (int k = 0; k < 4; k++)
                acc[mi][ni][k] = 0.0f;
    /* Weights fetched one step ahead, or two for the 2-bit formats (a few registers each; the
     * experts' tiles are mostly decoding, with little multiply work to cover a load). */
    constexpr int PF = T == HALO_TYPE_IQ2_XXS || T == HALO_TYPE_Q2_K ? 2 : 1;
    gm_raw<T> r0, r1;
    float4 xf[SH::NX];
    auto fetch_x = [&](int64_t k0) {
        if (xr) {
#pragma unroll
            for (int i = 0; i < SH::NX; i++)
                xf[i] = __ldg((const float4 *)(xr + k0 + bq + 4 * SH::XQ * i));
        }
    };
    /* Tokens of this warp's part of the tile that exist: fragments past them are skipped
     * (an expert's item often has a dozen pairs, not 64). */
    const int live = n_live - 8 * SH::NI * wn;
    fetch_x(k_begin);
    if (arow) r0.fetch(arow, k_begin / 32 + au);
    if (PF == 2 && arow && k_begin + GM_BK < k_end) r1.fetch(arow, (k_begin + GM_BK) / 32 + au);
    /* Step k0: cur holds its weights; other gets step k0 + 1's (PF 1), or cur step k0 + 2's. */
    auto step = [&](gm_raw<T> &cur, gm_raw<T> &other, int64_t k0) {
        uint4 *da = (uint4 *)&s.a[ar][32 * au];
        if (arow) {
            cur.put(&s.a[ar][32 * au], g, s.iq2xxs);
        } else {
#pragma unroll
            for (int i = 0; i < 4; i++)
                da[i] = make_uint4(0, 0, 0, 0);
        }
        gm_put_x(s, xr != NULL, xf, bj, bq);
        __syncthreads();
        if (k0 + GM_BK < k_end) {
            fetch_x(k0 + GM_BK);
            if (PF == 1 && arow) other.fetch(arow, (k0 + GM_BK) / 32 + au);
        }
        if (PF == 2 && arow && k0 + 2 * GM_BK < k_end) cur.fetch(arow, (k0 + 2 * GM_BK) / 32 + au);
        gm_mma_step(s, acc, live, wm, wn, lane);
        __syncthreads();
    };
    for (int64_t k0 = k_begin; k0 < k_end; k0 += 2 * GM_BK) {
        step(r0, r1, k0);
        if (k0 + GM_BK < k_end) step(r1, r0, k0 + GM_BK);
    }
}

/* Tiles of IQ2_XXS, Q2_K and Q8_0 with their weights through shared memory: groups of GK
 * inputs (a 256-weight super-block; four Q8_0 blocks) of all the tile's rows are copied by
 * cp.async into a ring of GM_NSB slots, GM_NSB - 1 groups (4-8 steps) ahead, in 4-byte pieces
 * that consecutive threads take along a row. gm_tile's register fetch makes each thread load
 * 2-byte pieces of one row, 16 rows a warp instruction (16 L1 wavefronts each: 17 such loads a
 * Q8_0 step), one or two steps ahead; the base run's 4-layer prefill profile puts both the
 * experts' tiles and the dense Q8_0 tiles at ~2,400 cycles a step a multiprocessor, ~5x their
 * decode and multiply instructions. Each step decodes from the slot with the same decoders
 * (the same f16 values). The K range is whole groups (checked on the host);
 * HALO_CUDA_MMA_SB=0 keeps gm_tile. */
enum { GM_NSB = 3 };
/* A group of GK inputs (one slot): SB bytes a row, NW 4-byte words of it in the slot, copied
 * CW bytes at a time (Q8_0's 8: its rows are 8-byte aligned, checked on the host). */
template <int T> struct gm_sb_bytes;
template <> struct gm_sb_bytes<HALO_TYPE_IQ2_XXS> {
    enum { GK = 256, SB = 66, NW = 17, CW = 4 };
};
template <> struct gm_sb_bytes<HALO_TYPE_Q2_K> {
    enum { GK = 256, SB = 84, NW = 21, CW = 4 };
};
template <> struct gm_sb_bytes<HALO_TYPE_Q8_0> { /* four 34-byte blocks */
    enum { GK = 128, SB = 136, NW = 34, CW = 8 };
};
enum { GM_RING_WORDS = GM_NSB * GM_BM * 34 }; /* the ring's size for the largest type */
static bool gm_sb_type(uint32_t t) {
    return t == HALO_TYPE_IQ2_XXS || t == HALO_TYPE_Q2_K || t == HALO_TYPE_Q8_0;
}

template <int CW> static __device__ __forceinline__ void gm_cp(uint32_t *smem, const char *gmem) {
    const unsigned sa = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(sa), "l"(gmem), "n"(CW));
}

template <int T, int BN>
static __device__ __forceinline__ void
gm_tile_sb(gm_smem<BN> &s, uint32_t *ring, const char *w, uint64_t row_bytes, int n_rows,
           int64_t k_begin, int64_t k_end, int n_live,
           float acc[gm_shape<BN>::MI][gm_shape<BN>::NI][4], cu_grids g) {
    using SH = gm_shape<BN>;
    constexpr int GK = gm_sb_bytes<T>::GK, SB = gm_sb_bytes<T>::SB, NW = gm_sb_bytes<T>::NW;
    constexpr int CW = gm_sb_bytes<T>::CW, NC = NW * 4 / CW; /* copies a row */
    constexpr int RPP = GM_THREADS / NC;                     /* rows a pass of the block */
    const int tid = threadIdx.x, lane = tid % WARP, warp = tid / WARP;
    const int wm = warp % SH::WM, wn = warp / SH::WM;
    const int ar = tid >> 1, au = tid & 1, bj = tid >> SH::XQL, bq = 4 * (tid & (SH::XQ - 1));
    const float *xr = s.xrow[bj];
#pragma unroll
    for (int mi = 0; mi < SH::MI; mi++)
#pragma unroll
        for (int ni = 0; ni < SH::NI; ni++)
#pragma unroll
            for (int k = 0; k < 4; k++)
                acc[mi][ni][k] = 0.0f;
    const int n_sb = (int)((k_end - k_begin) / GK), live = n_live - 8 * SH::NI * wn;
    const uint64_t g0 = (uint64_t)(k_begin / GK) * SB; /* the first group's byte offset */
    /* Group j of every row into slot j % GM_NSB: CW-byte pieces from its byte offset rounded
     * down to CW (IQ2_XXS's 66-byte blocks start 2-byte aligned; row starts are 4-aligned, 8 for
     * Q8_0), none past the row's end. Thread tid copies piece cc of rows cr, cr + RPP, ...
     * (consecutive threads along a row). Always one commit group, so the waits count groups. */
    const int cr = tid / NC, cc = tid % NC;
    auto issue = [&](int j) {
        const uint64_t a0 = (g0 + (uint64_t)SB * j) & ~(uint64_t)(CW - 1);
        if (j < n_sb && cr < RPP && a0 + (uint64_t)CW * (cc + 1) <= row_bytes) {
            uint32_t *dst = ring + (j % GM_NSB) * GM_BM * NW + cr * NW + cc * (CW / 4);
            const char *src = w + (uint64_t)cr * row_bytes + a0 + CW * cc;
            for (int r = cr; r < n_rows; r += RPP, dst += RPP * NW, src += RPP * row_bytes)
                gm_cp<CW>(dst, src);
        }
        asm volatile("cp.async.commit_group;\n" ::);
    };
    float4 xf[SH::NX];
    auto fetch_x = [&](int64_t k0) {
        if (xr) {
#pragma unroll
            for (int i = 0; i < SH::NX; i++)
                xf[i] = __ldg((const float4 *)(xr + k0 + bq + 4 * SH::XQ * i));
        }
    };
    for (int j = 0; j < GM_NSB - 1; j++)
        issue(j);
    fetch_x(k_begin);
    for (int j = 0; j < n_sb; j++) {
        issue(j + GM_NSB - 1); /* into the slot super-block j - 1 used: every step of it is done */
        asm volatile("cp.async.wait_group %0;\n" ::"n"(GM_NSB - 1));
        __syncthreads();
        const unsigned char *mine =
            (const unsigned char *)(ring + (j % GM_NSB) * GM_BM * NW + ar * NW) +
            ((g0 + (uint64_t)SB * j) & (CW - 1));
#pragma unroll 1
        for (int st = 0; st < GK / GM_BK; st++) {
            const int64_t k0 = k_begin + (int64_t)GK * j + GM_BK * st;
            uint4 *da = (uint4 *)&s.a[ar][32 * au];
            if (ar < n_rows) {
                gm_raw<T> cur;
                cur.load_sb(mine, 2 * st + au);
                cur.put(&s.a[ar][32 * au], g, s.iq2xxs);
            } else {
#pragma unroll
                for (int i = 0; i < 4; i++)
                    da[i] = make_uint4(0, 0, 0, 0);
            }
            gm_put_x(s, xr != NULL, xf, bj, bq);
            __syncthreads();
            if (k0 + GM_BK < k_end) fetch_x(k0 + GM_BK);
            gm_mma_step(s, acc, live, wm, wn, lane);
            __syncthreads();
        }
    }
    asm volatile("cp.async.wait_group 0;\n" ::);
}

/* A tile through gm_tile_sb for the types it takes when sb, else gm_tile. */
template <int T, int BN>
static __device__ __forceinline__ void
gm_tile_auto(gm_smem<BN> &s, uint32_t *ring, int sb, const char *w, uint64_t rb, int n_rows,
             int64_t k_begin, int64_t k_end, int n_live,
             float acc[gm_shape<BN>::MI][gm_shape<BN>::NI][4], cu_grids g) {
    if constexpr (T == HALO_TYPE_IQ2_XXS || T == HALO_TYPE_Q2_K || T == HALO_TYPE_Q8_0) {
        if (sb) {
            gm_tile_sb<T, BN>(s, ring, w, rb, n_rows, k_begin, k_end, n_live, acc, g);
            return;
        }
    }
    gm_tile<T, BN>(s, w, rb, n_rows, k_begin, k_end, n_live, acc, g);
}

/* Writes the tile: row r (< n_rows) of token j goes to s.orow[j][o0 + r]. */
template <int BN>
static __device__ __forceinline__ void
gm_store(const gm_smem<BN> &s, const float acc[gm_shape<BN>::MI][gm_shape<BN>::NI][4], int64_t o0,
         int n_rows) {
    using SH = gm_shape<BN>;
    const int lane = threadIdx.x % WARP, warp = threadIdx.x / WARP;
    const int wm = warp % SH::WM, wn = warp / SH::WM;
#pragma unroll
    for (int mi = 0; mi < SH::MI; mi++)
#pragma unroll
        for (int ni = 0; ni < SH::NI; ni++)
#pragma unroll
            for (int k = 0; k < 4; k++) {
                const int r = 16 * SH::MI * wm + 16 * mi + lane / 4 + 8 * (k >> 1);
                const int j = 8 * SH::NI * wn + 8 * ni + 2 * (lane % 4) + (k & 1);
                float *o = s.orow[j];
                if (o && r < n_rows) o[o0 + r] = acc[mi][ni][k];
            }
}

typedef struct gm_dense_args {
    const char *w;
    uint64_t row_bytes;
    int64_t n_in, n_out, out_per_group;
    const float *x;
    int64_t x_stride, n_tok;
    float *out;    /* the result, or with split-K the partial sums [ks][n_tok][n_out] */
    int64_t k_per; /* inputs per split (a multiple of 256), n_in without split-K */
    cu_grids g;
    int sb; /* through gm_tile_sb (dynamic shared memory: the ring) */
} gm_dense_args;

/* grid.x: token tiles (the fast index: the blocks reading the same weight rows run together
 * and find them in L2), grid.y: row tiles, each inside one group (checked on the host), grid.z:
 * the splits of K when the tiles alone would leave most of the GPU idle (a 512-row projection
 * of 512 tokens is 32 tiles for 132 multiprocessors). */
template <int T> __global__ void __launch_bounds__(GM_THREADS, 2) gm_dense(const gm_dense_args a) {
    __shared__ __align__(16) gm_smem<GM_BN> s;
    extern __shared__ __align__(16) uint32_t gm_ring[];
    const int64_t o0 = (int64_t)blockIdx.y * GM_BM, t0 = (int64_t)blockIdx.x * GM_BN;
    const int64_t grp = o0 / a.out_per_group;
    float *out = a.out + (int64_t)blockIdx.z * a.n_tok * a.n_out;
    if (threadIdx.x < GM_BN) {
        const int64_t t = t0 + threadIdx.x;
        const bool live = t < a.n_tok;
        s.xrow[threadIdx.x] = live ? a.x + t * a.x_stride + grp * a.n_in : NULL;
        s.orow[threadIdx.x] = live ? out + t * a.n_out : NULL;
    }
    if constexpr (T == HALO_TYPE_IQ2_XXS)
        for (int i = threadIdx.x; i < 256; i += GM_THREADS)
            s.iq2xxs[i] = a.g.iq2xxs[i];
    __syncthreads();
    const int n_rows = a.n_out - o0 < GM_BM ? (int)(a.n_out - o0) : GM_BM;
    const int n_live = a.n_tok - t0 < GM_BN ? (int)(a.n_tok - t0) : GM_BN;
    const int64_t k0 = (int64_t)blockIdx.z * a.k_per;
    const int64_t k1 = k0 + a.k_per < a.n_in ? k0 + a.k_per : a.n_in;
    float acc[2][4][4];
    gm_tile_auto<T, GM_BN>(s, gm_ring, a.sb, a.w + (uint64_t)o0 * a.row_bytes, a.row_bytes, n_rows,
                           k0, k1, n_live, acc, a.g);
    gm_store<GM_BN>(s, acc, o0, n_rows);
}

/* out[i] = Σ_z part[z][i], in order of z (the same sums whatever the launch). */
__global__ void gm_split_sum(const float *part, int ks, int64_t n, float *out) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = part[i];
    for (int z = 1; z < ks; z++)
        v += part[(int64_t)z * n + i];
    out[i] = v;
}

/* The expert projections: grid.y the work items (found on the device; past act[0] a block
 * leaves), grid.x the row tiles (for gate+up: the gate's tiles then the up's). */
typedef struct gm_moe_args {
    cu_mma_experts m;
    const float *x; /* up: the moe input [n_tok][n_embd]; down: h [pairs][n_h] */
    float *o1, *o2; /* up: hg, hu; down: y, unused */
    int up;
    int tiles; /* row tiles per matrix */
    cu_grids g;
    int sb, sb_sh; /* routed / shared tiles through gm_tile_sb (dynamic shared memory: the
                      ring) */
    int n16;       /* routed items of at most GM_BN16 pairs are gm_moe16's: gm_moe leaves them */
} gm_moe_args;

/* One block's tile of an item: BN 64 (gm_moe: every item but gm_moe16's) or BN 16 (gm_moe16:
 * only routed items of at most 16 pairs, type TR). */
template <int BN, int TR, int TS>
static __device__ __forceinline__ void gm_moe_tile(const gm_moe_args &a, gm_smem<BN> &s,
                                                   uint32_t *ring) {
    const cu_mma_experts &m = a.m;
    if ((int32_t)blockIdx.y >= m.act[0]) return;
    const int32_t *item = m.act + 1 + 3 * blockIdx.y;
    const int64_t e = item[0];
    const int32_t p0 = item[1], p1 = item[2];
    const bool shared = e == m.n_expert, small = !shared && p1 - p0 <= GM_BN16;
    if (BN == GM_BN16 ? !small : a.n16 && small) return; /* the other kernel's item */
    const int mat = a.up ? (int)(blockIdx.x / a.tiles) : 0;
    const int64_t o0 = (int64_t)(blockIdx.x % a.tiles) * GM_BM;
    const int64_t rows = a.up ? (shared ? m.n_ff_sh : m.n_ff) : m.n_embd;
    if (o0 >= rows) return; /* the whole block */
    const int64_t K = a.up ? m.n_embd : (shared ? m.n_ff_sh : m.n_ff);
    const char *w;
    uint64_t rb;
    if (a.up) {
        rb = shared ? (mat ? m.urb_sh : m.grb_sh) : (mat ? m.urb : m.grb);
        const char *base = shared ? (mat ? m.up_sh : m.gate_sh) : (mat ? m.up : m.gate);
        w = base + ((uint64_t)(shared ? 0 : e) * m.n_ff + o0) * rb;
    } else {
        rb = shared ? m.drb_sh : m.drb;
        w = (shared ? m.down_sh : m.down) + ((uint64_t)(shared ? 0 : e) * m.n_embd + o0) * rb;
    }
    if (threadIdx.x < BN) {
        const int32_t i = p0 + (int32_t)threadIdx.x;
        const bool live = i < p1;
        const int64_t pair = live ? m.pairs[i] : 0;
        if (a.up) {
            s.xrow[threadIdx.x] = live ? a.x + (pair / m.slots) * m.n_embd : NULL;
            s.orow[threadIdx.x] = live ? (mat ? a.o2 : a.o1) + pair * m.n_h : NULL;
        } else {
            s.xrow[threadIdx.x] = live ? a.x + pair * m.n_h : NULL;
            s.orow[threadIdx.x] = live ? a.o1 + pair * m.n_embd : NULL;
        }
    }
    if constexpr (TR == HALO_TYPE_IQ2_XXS || TS == HALO_TYPE_IQ2_XXS)
        for (int i = threadIdx.x; i < 256; i += GM_THREADS)
            s.iq2xxs[i] = a.g.iq2xxs[i];
    __syncthreads();
    const int n_rows = rows - o0 < GM_BM ? (int)(rows - o0) : GM_BM;
    const int n_live = p1 - p0 < BN ? p1 - p0 : BN;
    float acc[gm_shape<BN>::MI][gm_shape<BN>::NI][4];
    if (BN == GM_BN && shared) {
        if constexpr (BN == GM_BN)
            gm_tile_auto<TS, BN>(s, ring, a.sb_sh, w, rb, n_rows, 0, K, n_live, acc, a.g);
    } else {
        gm_tile_auto<TR, BN>(s, ring, a.sb, w, rb, n_rows, 0, K, n_live, acc, a.g);
    }
    gm_store<BN>(s, acc, o0, n_rows);
}

template <int TR, int TS>
__global__ void __launch_bounds__(GM_THREADS, 2) gm_moe(const gm_moe_args a) {
    __shared__ __align__(16) gm_smem<GM_BN> s;
    extern __shared__ __align__(16) uint32_t gm_ring[]; /* a.sb: gm_tile_sb's ring */
    gm_moe_tile<GM_BN, TR, TS>(a, s, gm_ring);
}

/* Routed items of at most 16 pairs (ubatch 512 of the 43-layer q2 model: ~12 pairs an expert,
 * bench/cuda/NOTES.md) in tiles of 16: a quarter of the accumulators and a quarter of the
 * shared activations, so NB blocks fit a multiprocessor where gm_moe fits 2 (by registers, and
 * with the ring by shared memory: gm_moe16's ring holds TR's slots alone). ptxas (sm_90, -O2):
 * NB 4: 64 registers IQ2_XXS, 63 Q2_K; NB 3: 80 and 72; no spills; gm_moe: 121-128. NB 4 is
 * the default, HALO_CUDA_MMA_N16=3 the other (neither measured yet). The same decoders and
 * mma.sync steps as gm_moe's tiles: the same sums bit for bit (test_backend_cuda_ops). */
template <int TR, int NB>
__global__ void __launch_bounds__(GM_THREADS, NB) gm_moe16(const gm_moe_args a) {
    __shared__ __align__(16) gm_smem<GM_BN16> s;
    extern __shared__ __align__(16) uint32_t gm_ring[];
    gm_moe_tile<GM_BN16, TR, TR>(a, s, gm_ring);
}

/* ---- host side ----------------------------------------------------------------------------- */

/* The fewest tokens of a batch that take these kernels (HALO_CUDA_MMA_MIN for projections,
 * HALO_CUDA_MMA_MOE_MIN for the experts; the op tests' 37-token batches stay below). */
static int64_t env_int(const char *name, int64_t dflt) {
    const char *v = getenv(name);
    return v && *v ? strtoll(v, NULL, 10) : dflt;
}
static int64_t mma_min_dense(void) {
    static const int64_t v = env_int("HALO_CUDA_MMA_MIN", 64);
    return v;
}
static int64_t mma_min_moe(void) {
    static const int64_t v = env_int("HALO_CUDA_MMA_MOE_MIN", 64);
    return v;
}

/* Types with a tile decoder here (block formats through quant.cuh's deq32_body). */
static bool gm_type(uint32_t t) {
    return t == HALO_TYPE_Q8_0 || t == HALO_TYPE_F16 || t == HALO_TYPE_BF16 ||
           t == HALO_TYPE_IQ2_XXS || t == HALO_TYPE_Q2_K || t == HALO_TYPE_Q4_K ||
           t == HALO_TYPE_MXFP4;
}

/* Rows the 16-byte (float types) or 2-byte (Q8_0) loads can read: every row start aligned. */
static bool gm_rows_ok(uint32_t t, const char *w, uint64_t row_bytes) {
    const uint64_t al = t == HALO_TYPE_F16 || t == HALO_TYPE_BF16 ? 16 : 4;
    return ((uintptr_t)w % al) == 0 && row_bytes % al == 0;
}

/* Whether tiles of type t over k inputs go through gm_tile_sb (HALO_CUDA_MMA_SB=0: never). */
static int gm_sb_on(uint32_t t, int64_t k, const char *w, uint64_t row_bytes) {
    const char *e = getenv("HALO_CUDA_MMA_SB");      /* read per launch: the op test flips it */
    const uint64_t al = t == HALO_TYPE_Q8_0 ? 8 : 4; /* gm_sb_bytes' CW */
    return !(e && strcmp(e, "0") == 0) && gm_sb_type(t) && k % 256 == 0 &&
           ((uintptr_t)w | row_bytes) % al == 0;
}

bool cu_mma_matmul(cu_backend *be, uint32_t type, const char *w, int64_t n_in, int64_t n_out,
                   uint32_t groups, const float *x, int64_t x_stride, int64_t n_tok, float *out,
                   const char *op) {
    if (be->naive || !be->mma || n_tok < mma_min_dense() || !gm_type(type) || n_in % GM_BK ||
        n_out % groups || (n_out / groups) % GM_BM || ((uintptr_t)x & 15) || (x_stride & 3))
        return false;
    const uint64_t rb = cu_row_bytes(type, n_in);
    if (!gm_rows_ok(type, w, rb)) return false;
    const int64_t tt = (n_tok + GM_BN - 1) / GM_BN, rt = n_out / GM_BM;
    if (tt > 0x7fffffff || rt > 65535) return false;
    /* Split-K while the tiles fill less than one resident round (two blocks a multiprocessor),
     * each split at least 512 inputs and whole 256-weight super-blocks. */
    const int64_t slots = 2 * (int64_t)(be->sm_count > 0 ? be->sm_count : 132);
    int64_t ks = 1, k_per = n_in;
    while (ks < 16 && tt * rt * ks * 2 <= slots && n_in / (ks * 2) >= 512)
        ks *= 2;
    if (ks > 1) {
        k_per = (n_in / ks + 255) / 256 * 256;
        ks = (n_in + k_per - 1) / k_per;
    }
    float *dst = out;
    if (ks > 1) {
        dst = (float *)cu_scratch(be, (uint64_t)(ks * n_tok * n_out) * sizeof(float), op);
        if (!dst) return true; /* recorded: the op fails at sync */
    }
    gm_dense_args a = {
        w,        rb,    n_in, n_out, n_out / groups,          x,
        x_stride, n_tok, dst,  k_per, cu_grids_get(&be->base), gm_sb_on(type, n_in, w, rb)};
    dim3 grid((unsigned)tt, (unsigned)rt, (unsigned)ks);
    const int smem = a.sb ? GM_RING_WORDS * 4 : 0;
    switch (type) {
#define GM_CASE(t)                                                                                 \
    case t:                                                                                        \
        if (smem && !CU_OK(be, op,                                                                 \
                           cudaFuncSetAttribute(                                                   \
                               gm_dense<t>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem)))   \
            return true;                                                                           \
        gm_dense<t><<<grid, GM_THREADS, smem, be->stream>>>(a);                                    \
        break;
        GM_CASE(HALO_TYPE_Q8_0)
        GM_CASE(HALO_TYPE_F16)
        GM_CASE(HALO_TYPE_BF16)
        GM_CASE(HALO_TYPE_Q2_K)
        GM_CASE(HALO_TYPE_IQ2_XXS)
        GM_CASE(HALO_TYPE_Q4_K)
        GM_CASE(HALO_TYPE_MXFP4)
#undef GM_CASE
    default:
        return false;
    }
    if (!CU_LAUNCHED(be, op, "gm_dense") || ks == 1) return true;
    gm_split_sum<<<cu_blocks(n_tok * n_out, 256), 256, 0, be->stream>>>(dst, (int)ks, n_tok * n_out,
                                                                        out);
    CU_LAUNCHED(be, op, "gm_split_sum");
    return true;
}

/* (routed, shared) type pairs with a grouped kernel: ds4's q2 mix (IQ2_XXS gate/up, Q2_K
 * down), its q4 layers (Q4_K) and the MXFP4 mix, each with a Q8_0 shared expert. */
#define GM_UP_PAIRS(X)                                                                             \
    X(HALO_TYPE_IQ2_XXS, HALO_TYPE_Q8_0)                                                           \
    X(HALO_TYPE_Q4_K, HALO_TYPE_Q8_0) X(HALO_TYPE_MXFP4, HALO_TYPE_Q8_0)
#define GM_DOWN_PAIRS(X)                                                                           \
    X(HALO_TYPE_Q2_K, HALO_TYPE_Q8_0)                                                              \
    X(HALO_TYPE_Q4_K, HALO_TYPE_Q8_0) X(HALO_TYPE_MXFP4, HALO_TYPE_Q8_0)

static bool gm_pair(uint32_t tr, uint32_t ts, bool up) {
#define GM_IS(a, b)                                                                                \
    if (tr == (a) && ts == (b)) return true;
    if (up) {
        GM_UP_PAIRS(GM_IS)
    } else {
        GM_DOWN_PAIRS(GM_IS)
    }
#undef GM_IS
    return false;
}

bool cu_mma_moe_ok(cu_backend *be, const cu_mma_experts *m, int64_t n_tok) {
    const bool sh = m->gate_sh != NULL;
    const uint32_t ts_up = sh ? m->ts_up : m->tr_up, ts_down = sh ? m->ts_down : m->tr_down;
    if (be->naive || !be->mma || n_tok < mma_min_moe() || !gm_pair(m->tr_up, ts_up, true) ||
        !gm_pair(m->tr_down, ts_down, false) || m->n_embd % GM_BM || m->n_embd % GM_BK ||
        m->n_ff % GM_BK || (sh && m->n_ff_sh % GM_BK) || m->n_h % 4 || m->max_items > 65535)
        return false;
    if (!gm_rows_ok(m->tr_up, m->gate, m->grb) || !gm_rows_ok(m->tr_up, m->up, m->urb) ||
        !gm_rows_ok(m->tr_down, m->down, m->drb))
        return false;
    if (sh &&
        (!gm_rows_ok(ts_up, m->gate_sh, m->grb_sh) || !gm_rows_ok(ts_up, m->up_sh, m->urb_sh) ||
         !gm_rows_ok(ts_down, m->down_sh, m->drb_sh)))
        return false;
    return true;
}

/* Whether the routed items of at most 16 pairs go to gm_moe16, and with how many blocks a
 * multiprocessor (4, or 3 with HALO_CUDA_MMA_N16=3), for the q2 mix's routed types (IQ2_XXS
 * gate/up, Q2_K down); 0, and HALO_CUDA_MMA_N16=0: gm_moe takes every item. */
static int gm_n16_on(uint32_t tr, bool up) {
    const char *e = getenv("HALO_CUDA_MMA_N16"); /* read per launch: the op test flips it */
    if (tr != (up ? HALO_TYPE_IQ2_XXS : HALO_TYPE_Q2_K) || (e && strcmp(e, "0") == 0)) return 0;
    return e && strcmp(e, "3") == 0 ? 3 : 4;
}

/* gm_moe16 over the items (those it does not take leave at once). Its ring holds TR's slots
 * alone (IQ2_XXS 26 KB, Q2_K 32 KB, gm_moe's 52 KB for Q8_0): 4 blocks take 196 KB or 220 KB
 * of a multiprocessor's 228, so the carveout is asked for the most shared memory (a hint). */
template <int TR, int NB>
static bool gm_moe16_launch(cu_backend *be, const gm_moe_args &a, const char *op) {
    dim3 grid((unsigned)(a.tiles * (a.up ? 2 : 1)), (unsigned)a.m.max_items);
    const int smem = a.sb ? GM_NSB * GM_BM * gm_sb_bytes<TR>::NW * 4 : 0;
    const int carve = a.sb ? (int)cudaSharedmemCarveoutMaxShared : -1; /* -1: no preference */
    if (!CU_OK(be, op,
               cudaFuncSetAttribute(gm_moe16<TR, NB>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    smem)) ||
        !CU_OK(be, op,
               cudaFuncSetAttribute(gm_moe16<TR, NB>,
                                    cudaFuncAttributePreferredSharedMemoryCarveout, carve)))
        return false;
    gm_moe16<TR, NB><<<grid, GM_THREADS, smem, be->stream>>>(a);
    return CU_LAUNCHED(be, op, "gm_moe16");
}

static bool gm_moe_launch(cu_backend *be, const gm_moe_args &a, uint32_t tr, uint32_t ts,
                          const char *op) {
    const int64_t mats = a.up ? 2 : 1;
    dim3 grid((unsigned)(a.tiles * mats), (unsigned)a.m.max_items);
    if (a.n16) {
        const bool x = tr == HALO_TYPE_IQ2_XXS, four = a.n16 == 4;
        const bool ok = x ? (four ? gm_moe16_launch<HALO_TYPE_IQ2_XXS, 4>(be, a, op)
                                  : gm_moe16_launch<HALO_TYPE_IQ2_XXS, 3>(be, a, op))
                          : (four ? gm_moe16_launch<HALO_TYPE_Q2_K, 4>(be, a, op)
                                  : gm_moe16_launch<HALO_TYPE_Q2_K, 3>(be, a, op));
        if (!ok) return false; /* recorded: the op fails at sync */
    }
    const int smem = a.sb || a.sb_sh ? GM_RING_WORDS * 4 : 0;
#define GM_LAUNCH(x, y)                                                                            \
    if (tr == (x) && ts == (y)) {                                                                  \
        if (smem && !CU_OK(be, op,                                                                 \
                           cudaFuncSetAttribute(                                                   \
                               gm_moe<x, y>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem)))  \
            return true;                                                                           \
        gm_moe<x, y><<<grid, GM_THREADS, smem, be->stream>>>(a);                                   \
        return CU_LAUNCHED(be, op, "gm_moe");                                                      \
    }
    if (a.up) {
        GM_UP_PAIRS(GM_LAUNCH)
    } else {
        GM_DOWN_PAIRS(GM_LAUNCH)
    }
#undef GM_LAUNCH
    return false;
}

bool cu_mma_moe_up(cu_backend *be, const cu_mma_experts *m, const float *x, float *hg, float *hu,
                   const char *op) {
    const int64_t rows = m->n_ff > m->n_ff_sh ? m->n_ff : m->n_ff_sh;
    gm_moe_args a = {*m,
                     x,
                     hg,
                     hu,
                     1,
                     (int)((rows + GM_BM - 1) / GM_BM),
                     cu_grids_get(&be->base),
                     gm_sb_on(m->tr_up, m->n_embd, m->gate, m->grb) &&
                         gm_sb_on(m->tr_up, m->n_embd, m->up, m->urb),
                     m->gate_sh && gm_sb_on(m->ts_up, m->n_embd, m->gate_sh, m->grb_sh) &&
                         gm_sb_on(m->ts_up, m->n_embd, m->up_sh, m->urb_sh),
                     gm_n16_on(m->tr_up, true)};
    return gm_moe_launch(be, a, m->tr_up, m->gate_sh ? m->ts_up : m->tr_up, op);
}

bool cu_mma_moe_down(cu_backend *be, const cu_mma_experts *m, const float *h, float *y,
                     const char *op) {
    gm_moe_args a = {*m,
                     h,
                     y,
                     NULL,
                     0,
                     (int)(m->n_embd / GM_BM),
                     cu_grids_get(&be->base),
                     gm_sb_on(m->tr_down, m->n_ff, m->down, m->drb),
                     m->gate_sh && gm_sb_on(m->ts_down, m->n_ff_sh, m->down_sh, m->drb_sh),
                     gm_n16_on(m->tr_down, false)};
    return gm_moe_launch(be, a, m->tr_down, m->gate_sh ? m->ts_down : m->tr_down, op);
}

#else /* HIP: no mma.sync; the matvec kernels run every batch. */

bool cu_mma_matmul(cu_backend *, uint32_t, const char *, int64_t, int64_t, uint32_t, const float *,
                   int64_t, int64_t, float *, const char *) {
    return false;
}
bool cu_mma_moe_ok(cu_backend *, const cu_mma_experts *, int64_t) {
    return false;
}
bool cu_mma_moe_up(cu_backend *, const cu_mma_experts *, const float *, float *, float *,
                   const char *) {
    return false;
}
bool cu_mma_moe_down(cu_backend *, const cu_mma_experts *, const float *, float *, const char *) {
    return false;
}

#endif
