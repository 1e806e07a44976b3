/* AVX-512 kernels (F, BW, VL and VNNI), chosen at run time by quant.c where they beat AVX2;
 * other types fall back to the AVX2 kernels at this level. Same rules as simd_avx2.c: integer
 * products summed exactly (vpdpbusd adds four u8 x s8 products into an int32 lane, without the
 * int16 saturation of vpmaddubsw), f32 accumulation. */
#include "quant/blocks.h"
#include "quant/fp.h"
#include "quant/kernels.h"

#include <immintrin.h>

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))

AVX512 static inline float f16(uint16_t h) { return _cvtsh_ss(h); }

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
        __m512i p1 = dot_s8x64(load2x32(x[i + 2].qs, x[i + 3].qs), load2x32(a[i + 2].qs, a[i + 3].qs));
        acc0 = _mm512_fmadd_ps(scale2(f16(x[i].d) * f16(a[i].d), f16(x[i + 1].d) * f16(a[i + 1].d)),
                               _mm512_cvtepi32_ps(p0), acc0);
        acc1 = _mm512_fmadd_ps(scale2(f16(x[i + 2].d) * f16(a[i + 2].d), f16(x[i + 3].d) * f16(a[i + 3].d)),
                               _mm512_cvtepi32_ps(p1), acc1);
    }
    float sum = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
    if (i < nb) sum += halo_dot_q8_0_avx2(QK32 * (nb - i), x + i, a + i);
    return sum;
}

/* 2 blocks of 16 nibble bytes -> 64 table values: block i's 32 in the low half. */
AVX512 static inline __m512i lut_2blocks(__m512i table, const uint8_t *q0, const uint8_t *q1) {
    __m256i b = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)q0)),
                                        _mm_loadu_si128((const __m128i *)q1), 1);
    const __m256i m4 = _mm256_set1_epi8(0xf);
    __m256i lo = _mm256_and_si256(b, m4), hi = _mm256_and_si256(_mm256_srli_epi16(b, 4), m4);
    /* per block: low nibbles (elements 0-15) then high (16-31) */
    __m512i idx = _mm512_inserti64x4(
        _mm512_castsi256_si512(_mm256_permute2x128_si256(lo, hi, 0x20)), _mm256_permute2x128_si256(lo, hi, 0x31), 1);
    return _mm512_shuffle_epi8(table, idx);
}

#define DOT_LUT4_512(name, block_t, table_values, scale)                                         \
    AVX512 float halo_dot_##name##_avx512(int64_t n, const void *w, const void *act) {          \
        const block_t *x = w;                                                                    \
        const block_q8_0 *a = act;                                                               \
        const __m512i table = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)table_values)); \
        __m512 acc = _mm512_setzero_ps();                                                        \
        int64_t nb = n / QK32, i = 0;                                                            \
        for (; i + 2 <= nb; i += 2) {                                                            \
            __m512i p = dot_s8x64(lut_2blocks(table, x[i].qs, x[i + 1].qs),                      \
                                  load2x32(a[i].qs, a[i + 1].qs));                               \
            acc = _mm512_fmadd_ps(scale2(scale(i) * f16(a[i].d), scale(i + 1) * f16(a[i + 1].d)), \
                                  _mm512_cvtepi32_ps(p), acc);                                   \
        }                                                                                        \
        float sum = _mm512_reduce_add_ps(acc);                                                   \
        if (i < nb) sum += halo_dot_##name##_avx2(QK32 * (nb - i), x + i, a + i);               \
        return sum;                                                                              \
    }

static const int8_t q4_0_levels[16] = {-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7};
#define SCALE_F16(i) f16(x[i].d)
#define SCALE_E8M0(i) halo_e8m0_half_to_f32(x[i].e)
DOT_LUT4_512(q4_0, block_q4_0, q4_0_levels, SCALE_F16)
DOT_LUT4_512(iq4_nl, block_iq4_nl, halo_kvalues_iq4nl, SCALE_F16)
DOT_LUT4_512(mxfp4, block_mxfp4, halo_kvalues_mxfp4, SCALE_E8M0)
