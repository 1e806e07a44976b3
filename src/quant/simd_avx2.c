/* AVX2 kernels (with FMA and F16C), compiled per function via target attributes and chosen at
 * run time by quant.c. They must agree with the scalar references: dequantizers bit for bit
 * (each element is one f32 multiply, or multiply then subtract, exactly as in the reference --
 * never a fused multiply-add, which rounds once instead of twice), dots to f32 rounding (they
 * sum the same integer products, only the float accumulation order differs).
 *
 * Integer dots use the u8 x s8 pair-multiply (vpmaddubsw): for signed x signed the weight's sign
 * moves onto the activation (vpsignb). Activations never hold -128 (Q8_0 and Q8_K quantizers
 * stay within +-127), so no pair sum saturates. */
#include "quant/blocks.h"
#include "quant/fp.h"
#include "quant/grids.h"
#include "quant/kernels.h"

#include <immintrin.h>
#include <string.h>

#define AVX2 __attribute__((target("avx2,fma,f16c,popcnt")))

AVX2 static inline float f16(uint16_t h) {
    return _cvtsh_ss(h);
}

AVX2 static inline float hsum_ps(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* 8 int32 lanes of sum(x * y) over 32 signed bytes, pairs summed. */
AVX2 static inline __m256i dot_s8(__m256i x, __m256i y) {
    __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

/* 16 bytes of nibbles -> 32 bytes: low nibbles (elements 0-15) then high (16-31). */
AVX2 static inline __m256i unpack_nibbles(const uint8_t *qs) {
    __m128i b = _mm_loadu_si128((const __m128i *)qs);
    __m128i m = _mm_set1_epi8(0xf);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(b, 4), m), _mm_and_si128(b, m));
}

AVX2 static inline __m256i lut16(const int8_t table[16], __m256i idx) {
    __m256i t = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)table));
    return _mm256_shuffle_epi8(t, idx);
}

/* Stores 32 int8 levels as f32 times d (one rounding each, as the reference). */
AVX2 static inline void store_scaled32(float *dst, __m256i q, __m256 d) {
    __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
    __m128i parts[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
    for (int k = 0; k < 4; k++)
        _mm256_storeu_ps(dst + 8 * k,
                         _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(parts[k])), d));
}

/* ---- float formats ---------------------------------------------------------------------- */

void halo_dequant_f32_avx2(const void *src, float *dst, int64_t n) {
    halo_dequant_f32(src, dst, n);
}

AVX2 float halo_dot_f32_avx2(int64_t n, const void *w, const void *act) {
    const float *x = w, *a = act;
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                     _mm256_setzero_ps()};
    int64_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int k = 0; k < 4; k++)
            acc[k] = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8 * k), _mm256_loadu_ps(a + i + 8 * k),
                                     acc[k]);
    float sum =
        hsum_ps(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
    for (; i < n; i++)
        sum += x[i] * a[i];
    return sum;
}

AVX2 void halo_dequant_f16_avx2(const void *src, float *dst, int64_t n) {
    const uint16_t *x = src;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i))));
    for (; i < n; i++)
        dst[i] = halo_f16_to_f32(x[i]);
}

AVX2 float halo_dot_f16_avx2(int64_t n, const void *w, const void *act) {
    const uint16_t *x = w;
    const float *a = act;
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                     _mm256_setzero_ps()};
    int64_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int k = 0; k < 4; k++) {
            __m256 v = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i + 8 * k)));
            acc[k] = _mm256_fmadd_ps(v, _mm256_loadu_ps(a + i + 8 * k), acc[k]);
        }
    float sum =
        hsum_ps(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
    for (; i < n; i++)
        sum += halo_f16_to_f32(x[i]) * a[i];
    return sum;
}

AVX2 static inline __m256 bf16x8(const uint16_t *p) {
    return _mm256_castsi256_ps(
        _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)), 16));
}

AVX2 void halo_dequant_bf16_avx2(const void *src, float *dst, int64_t n) {
    const uint16_t *x = src;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, bf16x8(x + i));
    for (; i < n; i++)
        dst[i] = halo_bf16_to_f32(x[i]);
}

AVX2 float halo_dot_bf16_avx2(int64_t n, const void *w, const void *act) {
    const uint16_t *x = w;
    const float *a = act;
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                     _mm256_setzero_ps()};
    int64_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int k = 0; k < 4; k++)
            acc[k] = _mm256_fmadd_ps(bf16x8(x + i + 8 * k), _mm256_loadu_ps(a + i + 8 * k), acc[k]);
    float sum =
        hsum_ps(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
    for (; i < n; i++)
        sum += halo_bf16_to_f32(x[i]) * a[i];
    return sum;
}

/* ---- 32-element blocks with Q8_0 activations --------------------------------------------- */

AVX2 void halo_dequant_q8_0_avx2(const void *src, float *dst, int64_t n) {
    const block_q8_0 *x = src;
    for (int64_t i = 0; i < n / QK32; i++)
        store_scaled32(dst + QK32 * i, _mm256_loadu_si256((const __m256i *)x[i].qs),
                       _mm256_set1_ps(f16(x[i].d)));
}

AVX2 float halo_dot_q8_0_avx2(int64_t n, const void *w, const void *act) {
    const block_q8_0 *x = w;
    const block_q8_0 *a = act;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t nb = n / QK32, i = 0;
    for (; i + 2 <= nb; i += 2) {
        __m256i p0 = dot_s8(_mm256_loadu_si256((const __m256i *)x[i].qs),
                            _mm256_loadu_si256((const __m256i *)a[i].qs));
        __m256i p1 = dot_s8(_mm256_loadu_si256((const __m256i *)x[i + 1].qs),
                            _mm256_loadu_si256((const __m256i *)a[i + 1].qs));
        acc0 = _mm256_fmadd_ps(_mm256_set1_ps(f16(x[i].d) * f16(a[i].d)), _mm256_cvtepi32_ps(p0),
                               acc0);
        acc1 = _mm256_fmadd_ps(_mm256_set1_ps(f16(x[i + 1].d) * f16(a[i + 1].d)),
                               _mm256_cvtepi32_ps(p1), acc1);
    }
    for (; i < nb; i++) {
        __m256i p = dot_s8(_mm256_loadu_si256((const __m256i *)x[i].qs),
                           _mm256_loadu_si256((const __m256i *)a[i].qs));
        acc0 =
            _mm256_fmadd_ps(_mm256_set1_ps(f16(x[i].d) * f16(a[i].d)), _mm256_cvtepi32_ps(p), acc0);
    }
    return hsum_ps(_mm256_add_ps(acc0, acc1));
}

AVX2 void halo_dequant_q4_0_avx2(const void *src, float *dst, int64_t n) {
    const block_q4_0 *x = src;
    for (int64_t i = 0; i < n / QK32; i++) {
        __m256i q = _mm256_sub_epi8(unpack_nibbles(x[i].qs), _mm256_set1_epi8(8));
        store_scaled32(dst + QK32 * i, q, _mm256_set1_ps(f16(x[i].d)));
    }
}

/* Shared by the 4-bit formats whose levels come from a 16-entry table: Q4_0 (q - 8), IQ4_NL,
 * MXFP4. scale(i) is the weight block's f32 scale. */
#define DOT_LUT4(name, block_t, table, scale)                                                      \
    AVX2 float halo_dot_##name##_avx2(int64_t n, const void *w, const void *act) {                 \
        const block_t *x = w;                                                                      \
        const block_q8_0 *a = act;                                                                 \
        __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();                             \
        int64_t nb = n / QK32, i = 0;                                                              \
        for (; i + 2 <= nb; i += 2) {                                                              \
            __m256i p0 = dot_s8(lut16(table, unpack_nibbles(x[i].qs)),                             \
                                _mm256_loadu_si256((const __m256i *)a[i].qs));                     \
            __m256i p1 = dot_s8(lut16(table, unpack_nibbles(x[i + 1].qs)),                         \
                                _mm256_loadu_si256((const __m256i *)a[i + 1].qs));                 \
            acc0 = _mm256_fmadd_ps(_mm256_set1_ps(scale(i) * f16(a[i].d)), _mm256_cvtepi32_ps(p0), \
                                   acc0);                                                          \
            acc1 = _mm256_fmadd_ps(_mm256_set1_ps(scale(i + 1) * f16(a[i + 1].d)),                 \
                                   _mm256_cvtepi32_ps(p1), acc1);                                  \
        }                                                                                          \
        for (; i < nb; i++) {                                                                      \
            __m256i p = dot_s8(lut16(table, unpack_nibbles(x[i].qs)),                              \
                               _mm256_loadu_si256((const __m256i *)a[i].qs));                      \
            acc0 = _mm256_fmadd_ps(_mm256_set1_ps(scale(i) * f16(a[i].d)), _mm256_cvtepi32_ps(p),  \
                                   acc0);                                                          \
        }                                                                                          \
        return hsum_ps(_mm256_add_ps(acc0, acc1));                                                 \
    }

static const int8_t q4_0_levels[16] = {-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7};
#define SCALE_F16(i) f16(x[i].d)
#define SCALE_E8M0(i) halo_e8m0_half_to_f32(x[i].e)
DOT_LUT4(q4_0, block_q4_0, q4_0_levels, SCALE_F16)
DOT_LUT4(iq4_nl, block_iq4_nl, halo_kvalues_iq4nl, SCALE_F16)
DOT_LUT4(mxfp4, block_mxfp4, halo_kvalues_mxfp4, SCALE_E8M0)

AVX2 void halo_dequant_iq4_nl_avx2(const void *src, float *dst, int64_t n) {
    const block_iq4_nl *x = src;
    for (int64_t i = 0; i < n / QK32; i++)
        store_scaled32(dst + QK32 * i, lut16(halo_kvalues_iq4nl, unpack_nibbles(x[i].qs)),
                       _mm256_set1_ps(f16(x[i].d)));
}

AVX2 void halo_dequant_mxfp4_avx2(const void *src, float *dst, int64_t n) {
    const block_mxfp4 *x = src;
    for (int64_t i = 0; i < n / QK32; i++)
        store_scaled32(dst + QK32 * i, lut16(halo_kvalues_mxfp4, unpack_nibbles(x[i].qs)),
                       _mm256_set1_ps(halo_e8m0_half_to_f32(x[i].e)));
}

/* ---- k-quants with Q8_K activations ------------------------------------------------------ */

/* Stores 32 levels as (f32)q * dl - ml: halves use (dl0, ml0) and (dl1, ml1). */
AVX2 static inline void store_affine32(float *dst, __m256i q, __m256 dl0, __m256 ml0, __m256 dl1,
                                       __m256 ml1) {
    __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
    __m128i parts[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
    for (int k = 0; k < 4; k++) {
        __m256 v = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(parts[k]));
        __m256 dl = k < 2 ? dl0 : dl1, ml = k < 2 ? ml0 : ml1;
        _mm256_storeu_ps(dst + 8 * k, _mm256_sub_ps(_mm256_mul_ps(v, dl), ml));
    }
}

AVX2 void halo_dequant_q2_K_avx2(const void *src, float *dst, int64_t n) {
    const block_q2_K *x = src;
    const __m256i m3 = _mm256_set1_epi8(3);
    for (int64_t i = 0; i < n / QK_K; i++) {
        float d = f16(x[i].d), dmin = f16(x[i].dmin);
        for (int c = 0; c < 2; c++) {
            __m256i bits = _mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * c));
            for (int p = 0; p < 4; p++) {
                __m256i q = _mm256_and_si256(_mm256_srli_epi16(bits, 2 * p), m3);
                int g = 8 * c + 2 * p;
                uint8_t s0 = x[i].scales[g], s1 = x[i].scales[g + 1];
                store_affine32(dst + 16 * g, q, _mm256_set1_ps(d * (float)(s0 & 0xf)),
                               _mm256_set1_ps(dmin * (float)(s0 >> 4)),
                               _mm256_set1_ps(d * (float)(s1 & 0xf)),
                               _mm256_set1_ps(dmin * (float)(s1 >> 4)));
            }
        }
        dst += QK_K;
    }
}

/* int16 lanes 0-7 = byte g, lanes 8-15 = byte g + 1 of a 16-byte table broadcast to both
 * 128-bit halves (vpshufb indexes within each half; 0x80 zeroes the high byte). */
AVX2 static inline __m256i pick_pair_u8(__m256i table, int g) {
    return _mm256_shuffle_epi8(table, _mm256_set_m128i(_mm_set1_epi16((short)(0x8000 | (g + 1))),
                                                       _mm_set1_epi16((short)(0x8000 | g))));
}

AVX2 float halo_dot_q2_K_avx2(int64_t n, const void *w, const void *act) {
    const block_q2_K *x = w;
    const block_q8_K *a = act;
    const __m256i m3 = _mm256_set1_epi8(3);
    const __m128i m4 = _mm_set1_epi8(0xf);
    __m256 acc = _mm256_setzero_ps(), accm = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        __m128i sc8 = _mm_loadu_si128((const __m128i *)x[i].scales);
        __m256i mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sc8, 4), m4));
        __m256i msum = _mm256_madd_epi16(mins, _mm256_loadu_si256((const __m256i *)a[i].bsums));
        accm = _mm256_fmadd_ps(_mm256_set1_ps(a[i].d * f16(x[i].dmin)), _mm256_cvtepi32_ps(msum),
                               accm);
        __m256i scales = _mm256_broadcastsi128_si256(_mm_and_si128(sc8, m4));
        __m256i sumi0 = _mm256_setzero_si256(), sumi1 = _mm256_setzero_si256();
#pragma GCC unroll 2
        for (int c = 0; c < 2; c++) {
            __m256i bits = _mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * c));
            const int8_t *y = a[i].qs + 128 * c;
            __m256i p0 = _mm256_maddubs_epi16(_mm256_and_si256(bits, m3),
                                              _mm256_loadu_si256((const __m256i *)y));
            __m256i p1 = _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(bits, 2), m3),
                                              _mm256_loadu_si256((const __m256i *)(y + 32)));
            __m256i p2 = _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(bits, 4), m3),
                                              _mm256_loadu_si256((const __m256i *)(y + 64)));
            __m256i p3 = _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(bits, 6), m3),
                                              _mm256_loadu_si256((const __m256i *)(y + 96)));
            int g = 8 * c;
            sumi0 = _mm256_add_epi32(sumi0, _mm256_madd_epi16(p0, pick_pair_u8(scales, g)));
            sumi1 = _mm256_add_epi32(sumi1, _mm256_madd_epi16(p1, pick_pair_u8(scales, g + 2)));
            sumi0 = _mm256_add_epi32(sumi0, _mm256_madd_epi16(p2, pick_pair_u8(scales, g + 4)));
            sumi1 = _mm256_add_epi32(sumi1, _mm256_madd_epi16(p3, pick_pair_u8(scales, g + 6)));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(a[i].d * f16(x[i].d)),
                              _mm256_cvtepi32_ps(_mm256_add_epi32(sumi0, sumi1)), acc);
    }
    return hsum_ps(_mm256_sub_ps(acc, accm));
}

/* Q4_K scales and mins: 8 6-bit pairs from 12 bytes. */
static inline void q4k_unpack(const uint8_t *s, uint8_t sc[8], uint8_t m[8]) {
    for (int g = 0; g < 8; g++)
        halo_k4_scale_min(g, s, &sc[g], &m[g]);
}

AVX2 void halo_dequant_q4_K_avx2(const void *src, float *dst, int64_t n) {
    const block_q4_K *x = src;
    const __m256i m4 = _mm256_set1_epi8(0xf);
    for (int64_t i = 0; i < n / QK_K; i++) {
        float d = f16(x[i].d), dmin = f16(x[i].dmin);
        uint8_t sc[8], m[8];
        q4k_unpack(x[i].scales, sc, m);
        for (int c = 0; c < 4; c++) {
            __m256i bits = _mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * c));
            for (int h = 0; h < 2; h++) {
                __m256i q = _mm256_and_si256(_mm256_srli_epi16(bits, 4 * h), m4);
                int g = 2 * c + h;
                __m256 dl = _mm256_set1_ps(d * (float)sc[g]),
                       ml = _mm256_set1_ps(dmin * (float)m[g]);
                store_affine32(dst + 32 * g, q, dl, ml, dl, ml);
            }
        }
        dst += QK_K;
    }
}

/* Q4_K's 12 scale bytes -> 16 bytes: the 8 scales, then the 8 mins (6 bits each). */
static inline __m128i q4k_scales_mins(const uint8_t *s) {
    uint32_t u[4];
    memcpy(u, s, 12);
    const uint32_t m6 = 0x3f3f3f3f, m4 = 0x0f0f0f0f, m2 = 0x03030303;
    u[3] = ((u[2] >> 4) & m4) | (((u[1] >> 6) & m2) << 4); /* mins 4-7 */
    uint32_t mins03 = u[1] & m6;
    u[1] = (u[2] & m4) | (((u[0] >> 6) & m2) << 4); /* scales 4-7 */
    u[2] = mins03;
    u[0] &= m6; /* scales 0-3 */
    return _mm_set_epi32((int)u[3], (int)u[2], (int)u[1], (int)u[0]);
}

AVX2 float halo_dot_q4_K_avx2(int64_t n, const void *w, const void *act) {
    const block_q4_K *x = w;
    const block_q8_K *a = act;
    const __m256i m4 = _mm256_set1_epi8(0xf);
    __m256 acc = _mm256_setzero_ps();
    __m128 accm = _mm_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        __m256i sm = _mm256_cvtepu8_epi16(q4k_scales_mins(x[i].scales));
        /* mins . (bsums summed in pairs = sums over 32) */
        __m256i bs = _mm256_loadu_si256((const __m256i *)a[i].bsums);
        __m128i s32 = _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));
        __m128i pm = _mm_madd_epi16(_mm256_extracti128_si256(sm, 1), s32);
        accm = _mm_fmadd_ps(_mm_set1_ps(a[i].d * f16(x[i].dmin)), _mm_cvtepi32_ps(pm), accm);
        __m256i scales = _mm256_broadcastsi128_si256(_mm256_castsi256_si128(sm));
        __m256i sumi0 = _mm256_setzero_si256(), sumi1 = _mm256_setzero_si256();
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            __m256i bits = _mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * c));
            __m256i ylo = _mm256_loadu_si256((const __m256i *)(a[i].qs + 64 * c));
            __m256i yhi = _mm256_loadu_si256((const __m256i *)(a[i].qs + 64 * c + 32));
            __m256i plo = _mm256_maddubs_epi16(_mm256_and_si256(bits, m4), ylo);
            __m256i phi =
                _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(bits, 4), m4), yhi);
            /* broadcast int16 scale 2c / 2c+1 */
            __m256i slo =
                _mm256_shuffle_epi8(scales, _mm256_set1_epi16((short)((4 * c + 1) << 8 | (4 * c))));
            __m256i shi = _mm256_shuffle_epi8(
                scales, _mm256_set1_epi16((short)((4 * c + 3) << 8 | (4 * c + 2))));
            sumi0 = _mm256_add_epi32(sumi0, _mm256_madd_epi16(plo, slo));
            sumi1 = _mm256_add_epi32(sumi1, _mm256_madd_epi16(phi, shi));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(a[i].d * f16(x[i].d)),
                              _mm256_cvtepi32_ps(_mm256_add_epi32(sumi0, sumi1)), acc);
    }
    __m128 m = accm;
    m = _mm_add_ps(m, _mm_movehl_ps(m, m));
    m = _mm_add_ss(m, _mm_movehdup_ps(m));
    return hsum_ps(acc) - _mm_cvtss_f32(m);
}

/* Q6_K: 32 levels of part p (0..3) of 128-element chunk c, stored +32 (0..63). */
AVX2 static inline __m256i q6k_part(const block_q6_K *b, int c, int p) {
    const __m256i m4 = _mm256_set1_epi8(0xf), m3 = _mm256_set1_epi8(3);
    __m256i ql = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * c + 32 * (p & 1)));
    __m256i qh = _mm256_loadu_si256((const __m256i *)(b->qh + 32 * c));
    __m256i lo = _mm256_and_si256(_mm256_srli_epi16(ql, 4 * (p >> 1)), m4);
    __m256i hi = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * p), m3);
    return _mm256_or_si256(lo, _mm256_slli_epi16(hi, 4));
}

AVX2 void halo_dequant_q6_K_avx2(const void *src, float *dst, int64_t n) {
    const block_q6_K *x = src;
    for (int64_t i = 0; i < n / QK_K; i++) {
        float d = f16(x[i].d);
        for (int c = 0; c < 2; c++)
            for (int p = 0; p < 4; p++) {
                __m256i q = _mm256_sub_epi8(q6k_part(&x[i], c, p), _mm256_set1_epi8(32));
                int g = 8 * c + 2 * p;
                /* reference: (d * scale) * level */
                __m256 d0 = _mm256_set1_ps(d * (float)x[i].scales[g]);
                __m256 d1 = _mm256_set1_ps(d * (float)x[i].scales[g + 1]);
                __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
                __m128i parts[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
                float *o = dst + 16 * g;
                for (int k = 0; k < 4; k++)
                    _mm256_storeu_ps(o + 8 * k, _mm256_mul_ps(k < 2 ? d0 : d1,
                                                              _mm256_cvtepi32_ps(
                                                                  _mm256_cvtepi8_epi32(parts[k]))));
            }
        dst += QK_K;
    }
}

AVX2 float halo_dot_q6_K_avx2(int64_t n, const void *w, const void *act) {
    const block_q6_K *x = w;
    const block_q8_K *a = act;
    __m256 acc = _mm256_setzero_ps();
    const __m256i k32 = _mm256_set1_epi8(32), m4 = _mm256_set1_epi8(0xf), m3 = _mm256_set1_epi8(3);
    for (int64_t i = 0; i < n / QK_K; i++) {
        __m128i sc8 = _mm_loadu_si128((const __m128i *)x[i].scales);
        __m256i sumi0 = _mm256_setzero_si256(), sumi1 = _mm256_setzero_si256();
#pragma GCC unroll 2
        for (int c = 0; c < 2; c++) {
            /* this chunk's 8 scales as int16, in both halves */
            __m256i scales =
                _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(c ? _mm_srli_si128(sc8, 8) : sc8));
            __m256i ql0 = _mm256_loadu_si256((const __m256i *)(x[i].ql + 64 * c));
            __m256i ql1 = _mm256_loadu_si256((const __m256i *)(x[i].ql + 64 * c + 32));
            __m256i qh = _mm256_loadu_si256((const __m256i *)(x[i].qh + 32 * c));
            __m256i q[4] = {
                _mm256_or_si256(_mm256_and_si256(ql0, m4),
                                _mm256_slli_epi16(_mm256_and_si256(qh, m3), 4)),
                _mm256_or_si256(
                    _mm256_and_si256(ql1, m4),
                    _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), m3), 4)),
                _mm256_or_si256(
                    _mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4),
                    _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), m3), 4)),
                _mm256_or_si256(
                    _mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4),
                    _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), m3), 4)),
            };
#pragma GCC unroll 4
            for (int p = 0; p < 4; p++) {
                __m256i y = _mm256_loadu_si256((const __m256i *)(a[i].qs + 128 * c + 32 * p));
                /* (q - 32) . y = q . y - 32 * sum(y), both within int16 */
                __m256i prod =
                    _mm256_sub_epi16(_mm256_maddubs_epi16(q[p], y), _mm256_maddubs_epi16(k32, y));
                __m256i s = _mm256_shuffle_epi8(
                    scales,
                    _mm256_set_m128i(_mm_set1_epi16((short)((4 * p + 3) << 8 | (4 * p + 2))),
                                     _mm_set1_epi16((short)((4 * p + 1) << 8 | (4 * p)))));
                if (p & 1)
                    sumi1 = _mm256_add_epi32(sumi1, _mm256_madd_epi16(prod, s));
                else
                    sumi0 = _mm256_add_epi32(sumi0, _mm256_madd_epi16(prod, s));
            }
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(a[i].d * f16(x[i].d)),
                              _mm256_cvtepi32_ps(_mm256_add_epi32(sumi0, sumi1)), acc);
    }
    return hsum_ps(acc);
}

/* ---- IQ2_XXS ------------------------------------------------------------------------------ */

/* 32 bytes: +1 where the sign bit of the element is clear, -1 where set; sign bytes s[0..3]
 * cover elements 0-7, 8-15, 16-23, 24-31. */
AVX2 static inline __m256i sign_mask32(uint32_t s4) {
    const __m256i spread = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202,
                                             0x0101010101010101, 0x0000000000000000);
    const __m256i bit = _mm256_set1_epi64x((int64_t)0x8040201008040201);
    __m256i b = _mm256_shuffle_epi8(_mm256_set1_epi32((int)s4), spread);
    __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(b, bit), bit);
    return _mm256_or_si256(set, _mm256_set1_epi8(1));
}

AVX2 static inline void iq2xxs_sub(const block_iq2_xxs *b, int ib, __m256i *grid, uint32_t *s4,
                                   int *ls) {
    const uint8_t *p = (const uint8_t *)b->qs + 8 * ib;
    uint32_t aux;
    memcpy(&aux, p + 4, 4);
    *grid = _mm256_set_epi64x((int64_t)halo_iq2xxs_grid[p[3]], (int64_t)halo_iq2xxs_grid[p[2]],
                              (int64_t)halo_iq2xxs_grid[p[1]], (int64_t)halo_iq2xxs_grid[p[0]]);
    *s4 = (uint32_t)halo_iq_signs(aux & 127) | (uint32_t)halo_iq_signs((aux >> 7) & 127) << 8 |
          (uint32_t)halo_iq_signs((aux >> 14) & 127) << 16 |
          (uint32_t)halo_iq_signs((aux >> 21) & 127) << 24;
    *ls = (int)(aux >> 28);
}

AVX2 void halo_dequant_iq2_xxs_avx2(const void *src, float *dst, int64_t n) {
    const block_iq2_xxs *x = src;
    for (int64_t i = 0; i < n / QK_K; i++) {
        float d = f16(x[i].d);
        for (int ib = 0; ib < 8; ib++, dst += 32) {
            __m256i grid;
            uint32_t s4;
            int ls;
            iq2xxs_sub(&x[i], ib, &grid, &s4, &ls);
            __m256 db = _mm256_set1_ps(d * (0.5f + (float)ls) * 0.25f);
            __m256i neg = _mm256_cmpeq_epi8(sign_mask32(s4), _mm256_set1_epi8(-1));
            __m128i g[2] = {_mm256_castsi256_si128(grid), _mm256_extracti128_si256(grid, 1)};
            __m128i ng[2] = {_mm256_castsi256_si128(neg), _mm256_extracti128_si256(neg, 1)};
            for (int k = 0; k < 4; k++) {
                __m128i gk = k & 1 ? _mm_srli_si128(g[k >> 1], 8) : g[k >> 1];
                __m128i nk = k & 1 ? _mm_srli_si128(ng[k >> 1], 8) : ng[k >> 1];
                __m256 v = _mm256_mul_ps(db, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(gk)));
                __m256 sbit = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepi8_epi32(nk), 31));
                _mm256_storeu_ps(dst + 8 * k, _mm256_xor_ps(v, sbit));
            }
        }
    }
}

AVX2 float halo_dot_iq2_xxs_avx2(int64_t n, const void *w, const void *act) {
    const block_iq2_xxs *x = w;
    const block_q8_K *a = act;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        const uint8_t *q = (const uint8_t *)x[i].qs;
        __m256i sumi0 = _mm256_setzero_si256(), sumi1 = _mm256_setzero_si256();
#pragma GCC unroll 4
        for (int ib = 0; ib < 8; ib += 2) {
            uint32_t aux[4];
            memcpy(aux, q + 8 * ib, 16);
            const uint8_t *i0 = (const uint8_t *)&aux[0], *i1 = (const uint8_t *)&aux[2];
            __m256i g0 = _mm256_set_epi64x(
                (int64_t)halo_iq2xxs_grid[i0[3]], (int64_t)halo_iq2xxs_grid[i0[2]],
                (int64_t)halo_iq2xxs_grid[i0[1]], (int64_t)halo_iq2xxs_grid[i0[0]]);
            __m256i g1 = _mm256_set_epi64x(
                (int64_t)halo_iq2xxs_grid[i1[3]], (int64_t)halo_iq2xxs_grid[i1[2]],
                (int64_t)halo_iq2xxs_grid[i1[1]], (int64_t)halo_iq2xxs_grid[i1[0]]);
            __m256i s0 = _mm256_set_epi64x((int64_t)halo_iq_sign64[(aux[1] >> 21) & 127],
                                           (int64_t)halo_iq_sign64[(aux[1] >> 14) & 127],
                                           (int64_t)halo_iq_sign64[(aux[1] >> 7) & 127],
                                           (int64_t)halo_iq_sign64[aux[1] & 127]);
            __m256i s1 = _mm256_set_epi64x((int64_t)halo_iq_sign64[(aux[3] >> 21) & 127],
                                           (int64_t)halo_iq_sign64[(aux[3] >> 14) & 127],
                                           (int64_t)halo_iq_sign64[(aux[3] >> 7) & 127],
                                           (int64_t)halo_iq_sign64[aux[3] & 127]);
            __m256i y0 =
                _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)(a[i].qs + 32 * ib)), s0);
            __m256i y1 =
                _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)(a[i].qs + 32 * ib + 32)), s1);
            __m256i p0 = _mm256_maddubs_epi16(g0, y0), p1 = _mm256_maddubs_epi16(g1, y1);
            sumi0 = _mm256_add_epi32(
                sumi0, _mm256_madd_epi16(p0, _mm256_set1_epi16((short)(2 * (aux[1] >> 28) + 1))));
            sumi1 = _mm256_add_epi32(
                sumi1, _mm256_madd_epi16(p1, _mm256_set1_epi16((short)(2 * (aux[3] >> 28) + 1))));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(a[i].d * (f16(x[i].d) * 0.125f)),
                              _mm256_cvtepi32_ps(_mm256_add_epi32(sumi0, sumi1)), acc);
    }
    return hsum_ps(acc);
}

/* ---- Q3_K, Q5_K dequantizers ---------------------------------------------------------------- */

AVX2 void halo_dequant_q5_K_avx2(const void *src, float *dst, int64_t n) {
    const block_q5_K *x = src;
    const __m256i m4 = _mm256_set1_epi8(0xf), m1 = _mm256_set1_epi8(1);
    for (int64_t i = 0; i < n / QK_K; i++) {
        float d = f16(x[i].d), dmin = f16(x[i].dmin);
        uint8_t sc[8], m[8];
        q4k_unpack(x[i].scales, sc, m);
        __m256i qh = _mm256_loadu_si256((const __m256i *)x[i].qh);
        for (int c = 0; c < 4; c++) {
            __m256i bits = _mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * c));
            for (int h = 0; h < 2; h++) {
                int g = 2 * c + h;
                __m256i hb = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, g), m1), 4);
                __m256i q =
                    _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(bits, 4 * h), m4), hb);
                __m256 dl = _mm256_set1_ps(d * (float)sc[g]),
                       ml = _mm256_set1_ps(dmin * (float)m[g]);
                store_affine32(dst + 32 * g, q, dl, ml, dl, ml);
            }
        }
        dst += QK_K;
    }
}

AVX2 void halo_dequant_q3_K_avx2(const void *src, float *dst, int64_t n) {
    const block_q3_K *x = src;
    const __m256i m3 = _mm256_set1_epi8(3), m1 = _mm256_set1_epi8(1), k4 = _mm256_set1_epi8(4);
    for (int64_t i = 0; i < n / QK_K; i++) {
        float d = f16(x[i].d);
        int8_t sc[16];
        halo_q3k_scales(x[i].scales, sc);
        __m256i hm = _mm256_loadu_si256((const __m256i *)x[i].hmask);
        for (int c = 0; c < 2; c++) {
            __m256i bits = _mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * c));
            for (int p = 0; p < 4; p++) {
                __m256i lo = _mm256_and_si256(_mm256_srli_epi16(bits, 2 * p), m3);
                __m256i hi = _mm256_and_si256(_mm256_srli_epi16(hm, 4 * c + p), m1);
                /* level = lo - 4 where the high bit is clear */
                __m256i q = _mm256_sub_epi8(lo, _mm256_andnot_si256(_mm256_slli_epi16(hi, 2), k4));
                int g = 8 * c + 2 * p;
                __m128i q0 = _mm256_castsi256_si128(q), q1 = _mm256_extracti128_si256(q, 1);
                __m128i parts[4] = {q0, _mm_srli_si128(q0, 8), q1, _mm_srli_si128(q1, 8)};
                __m256 d0 = _mm256_set1_ps(d * (float)sc[g]),
                       d1 = _mm256_set1_ps(d * (float)sc[g + 1]);
                float *o = dst + 16 * g;
                for (int k = 0; k < 4; k++)
                    _mm256_storeu_ps(o + 8 * k, _mm256_mul_ps(k < 2 ? d0 : d1,
                                                              _mm256_cvtepi32_ps(
                                                                  _mm256_cvtepi8_epi32(parts[k]))));
            }
        }
        dst += QK_K;
    }
}
