/* AVX-512 kernels (F, BW, VL and VNNI), chosen at run time by quant.c where they beat AVX2;
 * other types fall back to the AVX2 kernels at this level. Same rules as simd_avx2.c: integer
 * products summed exactly (vpdpbusd adds four u8 x s8 products into an int32 lane, without the
 * int16 saturation of vpmaddubsw), f32 accumulation. */
#include "quant/blocks.h"
#include "quant/fp.h"
#include "quant/kernels.h"

#include <immintrin.h>
#include <string.h>

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))

AVX512 static inline float f16(uint16_t h) {
    return _cvtsh_ss(h);
}

/* 16 int32 lanes of signed x signed byte products: the weight's sign moves to the activation. */
AVX512 static inline __m512i dot_s8x64(__m512i x, __m512i y) {
    __mmask64 neg = _mm512_movepi8_mask(x);
    __m512i sy = _mm512_mask_sub_epi8(y, neg, _mm512_setzero_si512(), y);
    return _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_abs_epi8(x), sy);
}

AVX512 static inline __m512i load2x32(const void *p0, const void *p1) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)p0)),
                              _mm256_loadu_si256((const __m256i *)p1), 1);
}

/* f32 lanes 0-7 = s0, 8-15 = s1. */
AVX512 static inline __m512 scale2(float s0, float s1) {
    return _mm512_castsi512_ps(_mm512_inserti64x4(_mm512_castps_si512(_mm512_set1_ps(s0)),
                                                  _mm256_castps_si256(_mm256_set1_ps(s1)), 1));
}

/* Two Q8_0 blocks per step. */
AVX512 float halo_dot_q8_0_avx512(int64_t n, const void *w, const void *act) {
    const block_q8_0 *x = w;
    const block_q8_0 *a = act;
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    int64_t nb = n / QK32, i = 0;
    for (; i + 4 <= nb; i += 4) {
        __m512i p0 = dot_s8x64(load2x32(x[i].qs, x[i + 1].qs), load2x32(a[i].qs, a[i + 1].qs));
        __m512i p1 =
            dot_s8x64(load2x32(x[i + 2].qs, x[i + 3].qs), load2x32(a[i + 2].qs, a[i + 3].qs));
        acc0 = _mm512_fmadd_ps(scale2(f16(x[i].d) * f16(a[i].d), f16(x[i + 1].d) * f16(a[i + 1].d)),
                               _mm512_cvtepi32_ps(p0), acc0);
        acc1 = _mm512_fmadd_ps(
            scale2(f16(x[i + 2].d) * f16(a[i + 2].d), f16(x[i + 3].d) * f16(a[i + 3].d)),
            _mm512_cvtepi32_ps(p1), acc1);
    }
    float sum = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
    if (i < nb) sum += halo_dot_q8_0_avx2(QK32 * (nb - i), x + i, a + i);
    return sum;
}

/* 2 blocks of 16 nibble bytes -> 64 table values: block i's 32 in the low half. */
AVX512 static inline __m512i lut_2blocks(__m512i table, const uint8_t *q0, const uint8_t *q1) {
    __m256i b =
        _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)q0)),
                                _mm_loadu_si128((const __m128i *)q1), 1);
    const __m256i m4 = _mm256_set1_epi8(0xf);
    __m256i lo = _mm256_and_si256(b, m4), hi = _mm256_and_si256(_mm256_srli_epi16(b, 4), m4);
    /* per block: low nibbles (elements 0-15) then high (16-31) */
    __m512i idx =
        _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_permute2x128_si256(lo, hi, 0x20)),
                           _mm256_permute2x128_si256(lo, hi, 0x31), 1);
    return _mm512_shuffle_epi8(table, idx);
}

#define DOT_LUT4_512(name, block_t, table_values, scale)                                           \
    AVX512 float halo_dot_##name##_avx512(int64_t n, const void *w, const void *act) {             \
        const block_t *x = w;                                                                      \
        const block_q8_0 *a = act;                                                                 \
        const __m512i table =                                                                      \
            _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)table_values));                \
        __m512 acc = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();                              \
        int64_t nb = n / QK32, i = 0;                                                              \
        for (; i + 4 <= nb; i += 4) {                                                              \
            __m512i p = dot_s8x64(lut_2blocks(table, x[i].qs, x[i + 1].qs),                        \
                                  load2x32(a[i].qs, a[i + 1].qs));                                 \
            __m512i p1 = dot_s8x64(lut_2blocks(table, x[i + 2].qs, x[i + 3].qs),                   \
                                   load2x32(a[i + 2].qs, a[i + 3].qs));                            \
            acc = _mm512_fmadd_ps(scale2(scale(i) * f16(a[i].d), scale(i + 1) * f16(a[i + 1].d)),  \
                                  _mm512_cvtepi32_ps(p), acc);                                     \
            acc1 = _mm512_fmadd_ps(                                                                \
                scale2(scale(i + 2) * f16(a[i + 2].d), scale(i + 3) * f16(a[i + 3].d)),            \
                _mm512_cvtepi32_ps(p1), acc1);                                                     \
        }                                                                                          \
        float sum = _mm512_reduce_add_ps(_mm512_add_ps(acc, acc1));                                \
        if (i < nb) sum += halo_dot_##name##_avx2(QK32 * (nb - i), x + i, a + i);                  \
        return sum;                                                                                \
    }

static const int8_t q4_0_levels[16] = {-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7};
#define SCALE_F16(i) f16(x[i].d)
#define SCALE_E8M0(i) halo_e8m0_half_to_f32(x[i].e)
DOT_LUT4_512(q4_0, block_q4_0, q4_0_levels, SCALE_F16)
DOT_LUT4_512(iq4_nl, block_iq4_nl, halo_kvalues_iq4nl, SCALE_F16)
DOT_LUT4_512(mxfp4, block_mxfp4, halo_kvalues_mxfp4, SCALE_E8M0)

/* ---- k-quants: 64 weights per 512-bit step ----------------------------------------------- */

/* int16 lanes 16h..16h+15 = table[idx + h] (h = 0, 1): a pair of sub-block scales, each spread
 * over the 16 products of its 32 weights. */
AVX512 static inline __m512i spread2_epi16(__m512i table, int idx) {
    __m512i sel = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi16((short)idx)),
                                     _mm256_set1_epi16((short)(idx + 1)), 1);
    return _mm512_permutexvar_epi16(sel, table);
}

/* int16 lanes 8q..8q+7 = table[idx + q] (q = 0..3): four 16-weight sub-block scales. */
AVX512 static inline __m512i spread4_epi16(__m512i table, int idx) {
    __m512i sel = _mm512_inserti64x4(
        _mm512_castsi256_si512(
            _mm256_set_m128i(_mm_set1_epi16((short)(idx + 1)), _mm_set1_epi16((short)idx))),
        _mm256_set_m128i(_mm_set1_epi16((short)(idx + 3)), _mm_set1_epi16((short)(idx + 2))), 1);
    return _mm512_permutexvar_epi16(sel, table);
}

AVX512 static inline float hsum128_ps(__m128 m) {
    m = _mm_add_ps(m, _mm_movehl_ps(m, m));
    m = _mm_add_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

/* Q4_K's 12 scale bytes -> 16 bytes: the 8 scales, then the 8 mins. */
static inline __m128i q4k_scales_mins512(const uint8_t *s) {
    uint32_t u[4];
    memcpy(u, s, 12);
    const uint32_t m6 = 0x3f3f3f3f, m4 = 0x0f0f0f0f, m2 = 0x03030303;
    u[3] = ((u[2] >> 4) & m4) | (((u[1] >> 6) & m2) << 4);
    uint32_t mins03 = u[1] & m6;
    u[1] = (u[2] & m4) | (((u[0] >> 6) & m2) << 4);
    u[2] = mins03;
    u[0] &= m6;
    return _mm_set_epi32((int)u[3], (int)u[2], (int)u[1], (int)u[0]);
}

AVX512 float halo_dot_q4_K_avx512(int64_t n, const void *w, const void *act) {
    const block_q4_K *x = w;
    const block_q8_K *a = act;
    const __m512i m4 = _mm512_set1_epi8(0xf);
    __m512 acc = _mm512_setzero_ps();
    __m128 accm = _mm_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        __m256i sm = _mm256_cvtepu8_epi16(q4k_scales_mins512(x[i].scales));
        __m256i bs = _mm256_loadu_si256((const __m256i *)a[i].bsums);
        __m128i s32 = _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));
        __m128i pm = _mm_madd_epi16(_mm256_extracti128_si256(sm, 1), s32);
        accm = _mm_fmadd_ps(_mm_set1_ps(a[i].d * f16(x[i].dmin)), _mm_cvtepi32_ps(pm), accm);
        __m512i scales = _mm512_castsi256_si512(sm);
        __m512i sumi0 = _mm512_setzero_si512(), sumi1 = _mm512_setzero_si512();
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            __m256i bits = _mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * c));
            __m512i q = _mm512_and_si512(
                _mm512_inserti64x4(_mm512_castsi256_si512(bits), _mm256_srli_epi16(bits, 4), 1),
                m4);
            __m512i y = _mm512_loadu_si512((const void *)(a[i].qs + 64 * c));
            __m512i p = _mm512_madd_epi16(_mm512_maddubs_epi16(q, y), spread2_epi16(scales, 2 * c));
            if (c & 1)
                sumi1 = _mm512_add_epi32(sumi1, p);
            else
                sumi0 = _mm512_add_epi32(sumi0, p);
        }
        acc = _mm512_fmadd_ps(_mm512_set1_ps(a[i].d * f16(x[i].d)),
                              _mm512_cvtepi32_ps(_mm512_add_epi32(sumi0, sumi1)), acc);
    }
    return _mm512_reduce_add_ps(acc) - hsum128_ps(accm);
}

AVX512 float halo_dot_q2_K_avx512(int64_t n, const void *w, const void *act) {
    const block_q2_K *x = w;
    const block_q8_K *a = act;
    const __m512i m3 = _mm512_set1_epi8(3);
    const __m128i m4 = _mm_set1_epi8(0xf);
    __m512 acc = _mm512_setzero_ps();
    __m256 accm = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        __m128i sc8 = _mm_loadu_si128((const __m128i *)x[i].scales);
        __m256i mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sc8, 4), m4));
        __m256i msum = _mm256_madd_epi16(mins, _mm256_loadu_si256((const __m256i *)a[i].bsums));
        accm = _mm256_fmadd_ps(_mm256_set1_ps(a[i].d * f16(x[i].dmin)), _mm256_cvtepi32_ps(msum),
                               accm);
        __m512i scales = _mm512_castsi256_si512(_mm256_cvtepu8_epi16(_mm_and_si128(sc8, m4)));
        __m512i sumi0 = _mm512_setzero_si512(), sumi1 = _mm512_setzero_si512();
#pragma GCC unroll 2
        for (int c = 0; c < 2; c++) {
            __m256i bits = _mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * c));
            __m512i b01 =
                _mm512_inserti64x4(_mm512_castsi256_si512(bits), _mm256_srli_epi16(bits, 2), 1);
            __m512i q01 = _mm512_and_si512(b01, m3);
            __m512i q23 = _mm512_and_si512(_mm512_srli_epi16(b01, 4), m3);
            __m512i y01 = _mm512_loadu_si512((const void *)(a[i].qs + 128 * c));
            __m512i y23 = _mm512_loadu_si512((const void *)(a[i].qs + 128 * c + 64));
            sumi0 = _mm512_add_epi32(sumi0, _mm512_madd_epi16(_mm512_maddubs_epi16(q01, y01),
                                                              spread4_epi16(scales, 8 * c)));
            sumi1 = _mm512_add_epi32(sumi1, _mm512_madd_epi16(_mm512_maddubs_epi16(q23, y23),
                                                              spread4_epi16(scales, 8 * c + 4)));
        }
        acc = _mm512_fmadd_ps(_mm512_set1_ps(a[i].d * f16(x[i].d)),
                              _mm512_cvtepi32_ps(_mm512_add_epi32(sumi0, sumi1)), acc);
    }
    __m128 m = _mm_add_ps(_mm256_castps256_ps128(accm), _mm256_extractf128_ps(accm, 1));
    return _mm512_reduce_add_ps(acc) - hsum128_ps(m);
}

/* Q6_K: levels are stored +32; the -32 is applied once per block through the activation sums
 * (bsums), so the inner loop multiplies unsigned levels directly. */
AVX512 float halo_dot_q6_K_avx512(int64_t n, const void *w, const void *act) {
    const block_q6_K *x = w;
    const block_q8_K *a = act;
    const __m512i m4 = _mm512_set1_epi8(0xf), m3 = _mm512_set1_epi8(3);
    __m512 acc = _mm512_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)x[i].scales));
        int32_t bias = 0; /* sum over groups of scale * 32 * sum(y) */
        {
            __m256i p = _mm256_madd_epi16(sc16, _mm256_loadu_si256((const __m256i *)a[i].bsums));
            __m128i s = _mm_add_epi32(_mm256_castsi256_si128(p), _mm256_extracti128_si256(p, 1));
            s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
            s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
            bias = 32 * _mm_cvtsi128_si32(s);
        }
        __m512i scales = _mm512_castsi256_si512(sc16);
        __m512i sumi0 = _mm512_setzero_si512(), sumi1 = _mm512_setzero_si512();
#pragma GCC unroll 2
        for (int c = 0; c < 2; c++) {
            __m512i ql = _mm512_loadu_si512((const void *)(x[i].ql + 64 * c));
            __m256i qh = _mm256_loadu_si256((const __m256i *)(x[i].qh + 32 * c));
            __m512i qh2 =
                _mm512_inserti64x4(_mm512_castsi256_si512(qh), _mm256_srli_epi16(qh, 2), 1);
            __m512i q01 = _mm512_or_si512(_mm512_and_si512(ql, m4),
                                          _mm512_slli_epi16(_mm512_and_si512(qh2, m3), 4));
            __m512i q23 = _mm512_or_si512(
                _mm512_and_si512(_mm512_srli_epi16(ql, 4), m4),
                _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(qh2, 4), m3), 4));
            __m512i y01 = _mm512_loadu_si512((const void *)(a[i].qs + 128 * c));
            __m512i y23 = _mm512_loadu_si512((const void *)(a[i].qs + 128 * c + 64));
            sumi0 = _mm512_add_epi32(sumi0, _mm512_madd_epi16(_mm512_maddubs_epi16(q01, y01),
                                                              spread4_epi16(scales, 8 * c)));
            sumi1 = _mm512_add_epi32(sumi1, _mm512_madd_epi16(_mm512_maddubs_epi16(q23, y23),
                                                              spread4_epi16(scales, 8 * c + 4)));
        }
        __m512i sumi = _mm512_add_epi32(sumi0, sumi1);
        /* fold the bias into lane 0 so one convert covers the block */
        sumi = _mm512_sub_epi32(sumi, _mm512_castsi128_si512(_mm_cvtsi32_si128(bias)));
        acc = _mm512_fmadd_ps(_mm512_set1_ps(a[i].d * f16(x[i].d)), _mm512_cvtepi32_ps(sumi), acc);
    }
    return _mm512_reduce_add_ps(acc);
}

/* ---- float weights with f32 activations: 64 products per step, four accumulators ---------- */

AVX512 static inline __m512 load_f32x16(const float *p) {
    return _mm512_loadu_ps(p);
}
AVX512 static inline __m512 load_f16x16(const uint16_t *p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
}
AVX512 static inline __m512 load_bf16x16(const uint16_t *p) {
    return _mm512_castsi512_ps(
        _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p)), 16));
}

#define DOT_FLOAT_512(name, elem_t, load)                                                          \
    AVX512 float halo_dot_##name##_avx512(int64_t n, const void *w, const void *act) {             \
        const elem_t *x = w;                                                                       \
        const float *a = act;                                                                      \
        __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),            \
                         _mm512_setzero_ps()};                                                     \
        int64_t i = 0;                                                                             \
        for (; i + 64 <= n; i += 64)                                                               \
            for (int k = 0; k < 4; k++)                                                            \
                acc[k] = _mm512_fmadd_ps(load(x + i + 16 * k), _mm512_loadu_ps(a + i + 16 * k),    \
                                         acc[k]);                                                  \
        float sum = _mm512_reduce_add_ps(                                                          \
            _mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3])));          \
        if (i < n) sum += halo_dot_##name##_avx2(n - i, x + i, a + i);                             \
        return sum;                                                                                \
    }

DOT_FLOAT_512(f32, float, load_f32x16)
DOT_FLOAT_512(f16, uint16_t, load_f16x16)
DOT_FLOAT_512(bf16, uint16_t, load_bf16x16)
