/* AVX-512 kernels (F + BW + VL), chosen at run time by quant.c where they beat AVX2. Same rules
 * as simd_avx2.c: integer products summed exactly, f32 accumulation. */
#include "quant/blocks.h"
#include "quant/kernels.h"

#include <immintrin.h>

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))

AVX512 static inline float f16(uint16_t h) { return _cvtsh_ss(h); }

/* Two Q8_0 blocks per 512-bit step: 16 int32 lanes, low 8 for block i, high 8 for block i+1. */
AVX512 float halo_dot_q8_0_avx512(int64_t n, const void *w, const void *act) {
    const block_q8_0 *x = w;
    const block_q8_0 *a = act;
    __m512 acc = _mm512_setzero_ps();
    int64_t nb = n / QK32, i = 0;
    const __m512i ones = _mm512_set1_epi16(1);
    for (; i + 2 <= nb; i += 2) {
        __m512i qx = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)x[i].qs)),
                                        _mm256_loadu_si256((const __m256i *)x[i + 1].qs), 1);
        __m512i qy = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)a[i].qs)),
                                        _mm256_loadu_si256((const __m256i *)a[i + 1].qs), 1);
        __mmask64 neg = _mm512_movepi8_mask(qx);
        __m512i ax = _mm512_abs_epi8(qx);
        __m512i sy = _mm512_mask_sub_epi8(qy, neg, _mm512_setzero_si512(), qy);
        __m512i p = _mm512_madd_epi16(_mm512_maddubs_epi16(ax, sy), ones);
        __m512 d = _mm512_castsi512_ps(_mm512_inserti64x4(
            _mm512_castps_si512(_mm512_set1_ps(f16(x[i].d) * f16(a[i].d))),
            _mm256_castps_si256(_mm256_set1_ps(f16(x[i + 1].d) * f16(a[i + 1].d))), 1));
        acc = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(p), acc);
    }
    float sum = _mm512_reduce_add_ps(acc);
    if (i < nb) sum += halo_dot_q8_0_avx2(QK32 * (nb - i), x + i, a + i);
    return sum;
}

/* Q4_K: a 64-element chunk per step (both nibbles of 32 bytes against 64 activations). */
AVX512 float halo_dot_q4_K_avx512(int64_t n, const void *w, const void *act) {
    const block_q4_K *x = w;
    const block_q8_K *a = act;
    const __m512i m4 = _mm512_set1_epi8(0xf);
    __m512 acc = _mm512_setzero_ps();
    float summ = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        uint8_t sc[8], m[8];
        for (int g = 0; g < 8; g++) halo_k4_scale_min(g, x[i].scales, &sc[g], &m[g]);
        int32_t ms = 0;
        for (int g = 0; g < 8; g++) ms += m[g] * (a[i].bsums[2 * g] + a[i].bsums[2 * g + 1]);
        summ += a[i].d * f16(x[i].dmin) * (float)ms;
        __m512i sumi = _mm512_setzero_si512();
        for (int c = 0; c < 4; c++) {
            __m256i bits = _mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * c));
            __m512i b2 = _mm512_inserti64x4(_mm512_castsi256_si512(bits), _mm256_srli_epi16(bits, 4), 1);
            __m512i q = _mm512_and_si512(b2, m4);
            __m512i y = _mm512_loadu_si512((const void *)(a[i].qs + 64 * c));
            __m512i s = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi16(sc[2 * c])),
                                           _mm256_set1_epi16(sc[2 * c + 1]), 1);
            sumi = _mm512_add_epi32(sumi, _mm512_madd_epi16(_mm512_maddubs_epi16(q, y), s));
        }
        acc = _mm512_fmadd_ps(_mm512_set1_ps(a[i].d * f16(x[i].d)), _mm512_cvtepi32_ps(sumi), acc);
    }
    return _mm512_reduce_add_ps(acc) - summ;
}
