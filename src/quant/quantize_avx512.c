/* AVX-512 quantizers for activation rows (Q8_0, Q8_K), bit-identical to quantize.c's: a decode
 * step quantizes each matmul's input on one thread, and the scalar forms (roundf and fmaxf
 * calls per element) took ~15 ns an element, ~60 us for a 4096-wide row. The same float
 * operations per element: |x|'s maximum, x times the block's inverse scale (one rounding), then
 * roundf's half-away-from-zero (Q8_0) or round-half-even (Q8_K, halo_nearest_int) done exactly
 * in vector lanes. A block whose inverse scale is not finite (a subnormal maximum) takes the
 * scalar path, so the clamps for NaN and infinity stay the reference's. Callers pass finite
 * inputs (halo_quant_quantize_row checks). */
#include "quant/blocks.h"
#include "quant/fp.h"
#include "quant/kernels.h"

#include <math.h>
#include <immintrin.h>
#include <string.h>

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))

/* roundf for finite lanes: truncate, then step away from zero when the dropped part is >= 1/2
 * (v - trunc(v) is exact). */
AVX512 static inline __m512 round_half_away(__m512 v) {
    __m512 t = _mm512_roundscale_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    __m512 frac = _mm512_abs_ps(_mm512_sub_ps(v, t));
    __mmask16 up = _mm512_cmp_ps_mask(frac, _mm512_set1_ps(0.5f), _CMP_GE_OQ);
    /* +-1 with v's sign (integer ops: AVX-512F has no float and/or) */
    __m512 one = _mm512_castsi512_ps(
        _mm512_or_si512(_mm512_castps_si512(_mm512_set1_ps(1.0f)),
                        _mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32(INT32_MIN))));
    return _mm512_mask_add_ps(t, up, t, one);
}

AVX512 void halo_quantize_q8_0_avx512(const float *x, void *dst, int64_t n) {
    block_q8_0 *y = dst;
    for (int64_t i = 0; i < n / QK32; i++, x += QK32) {
        __m512 x0 = _mm512_loadu_ps(x), x1 = _mm512_loadu_ps(x + 16);
        float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(x0), _mm512_abs_ps(x1)));
        float d = amax / 127.0f;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        if (!isfinite(id)) {
            halo_quantize_q8_0(x, y + i, QK32);
            continue;
        }
        y[i].d = halo_f32_to_f16(d);
        __m512 vid = _mm512_set1_ps(id);
        __m512i q0 = _mm512_cvtps_epi32(round_half_away(_mm512_mul_ps(x0, vid)));
        __m512i q1 = _mm512_cvtps_epi32(round_half_away(_mm512_mul_ps(x1, vid)));
        /* |x * id| <= 127 up to one rounding, which roundf cannot carry past 127 */
        const __m512i lo = _mm512_set1_epi32(-127), hi = _mm512_set1_epi32(127);
        q0 = _mm512_min_epi32(_mm512_max_epi32(q0, lo), hi);
        q1 = _mm512_min_epi32(_mm512_max_epi32(q1, lo), hi);
        _mm_storeu_si128((__m128i *)y[i].qs, _mm512_cvtepi32_epi8(q0));
        _mm_storeu_si128((__m128i *)(y[i].qs + 16), _mm512_cvtepi32_epi8(q1));
    }
}

AVX512 void halo_quantize_q8_K_avx512(const float *x, void *dst, int64_t n) {
    block_q8_K *y = dst;
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        __m512 m = _mm512_setzero_ps();
        for (int j = 0; j < QK_K; j += 16)
            m = _mm512_max_ps(m, _mm512_abs_ps(_mm512_loadu_ps(x + j)));
        float amax = _mm512_reduce_max_ps(m);
        if (amax == 0.0f) {
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        /* the reference keeps the first element whose |x| is the maximum */
        float max = 0.0f;
        for (int j = 0; j < QK_K; j += 16) {
            __mmask16 hit = _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_loadu_ps(x + j)),
                                               _mm512_set1_ps(amax), _CMP_EQ_OQ);
            if (hit) {
                max = x[j + __builtin_ctz(hit)];
                break;
            }
        }
        float iscale = -127.0f / max;
        if (!isfinite(iscale)) {
            halo_quantize_q8_K(x, y + i, QK_K);
            continue;
        }
        __m512 vs = _mm512_set1_ps(iscale);
        for (int g = 0; g < QK_K / 16; g++) {
            /* round half to even (the MXCSR default), as halo_nearest_int does below 2^22 */
            __m512i q = _mm512_cvtps_epi32(_mm512_mul_ps(vs, _mm512_loadu_ps(x + 16 * g)));
            q = _mm512_min_epi32(q, _mm512_set1_epi32(127));
            _mm_storeu_si128((__m128i *)(y[i].qs + 16 * g), _mm512_cvtepi32_epi8(q));
            y[i].bsums[g] = (int16_t)_mm512_reduce_add_epi32(q);
        }
        y[i].d = 1.0f / iscale;
    }
}

/* Whether every one of n floats is finite (no NaN or infinity). */
AVX512 int halo_all_finite_avx512(const float *x, int64_t n) {
    const __m512i exp = _mm512_set1_epi32(0x7f800000);
    __mmask16 bad = 0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512i v = _mm512_and_si512(_mm512_loadu_si512((const void *)(x + i)), exp);
        bad |= _mm512_cmpeq_epi32_mask(v, exp);
    }
    if (bad) return 0;
    for (; i < n; i++)
        if (!isfinite(x[i])) return 0;
    return 1;
}
