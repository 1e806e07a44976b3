/* AVX-512 f32 row kernels (f32rows.h). */
#include "quant/kernels.h"

#include <immintrin.h>

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))

/* R rows at once, each with halo_dot_f32_avx512's arithmetic: 64 products per step into four
 * accumulators, ((a0 + a1) + (a2 + a3)) reduced, the AVX2 kernel for a tail; the query's four
 * vectors are loaded once per step for all R rows. */
AVX512 static inline __attribute__((always_inline)) void
dots_tile(const int R, int64_t n, const float *q, const float *const *rows, float *out) {
    __m512 acc[4][4];
    for (int r = 0; r < R; r++)
        for (int k = 0; k < 4; k++)
            acc[r][k] = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        __m512 qv[4];
        for (int k = 0; k < 4; k++)
            qv[k] = _mm512_loadu_ps(q + i + 16 * k);
        for (int r = 0; r < R; r++)
            for (int k = 0; k < 4; k++)
                acc[r][k] =
                    _mm512_fmadd_ps(qv[k], _mm512_loadu_ps(rows[r] + i + 16 * k), acc[r][k]);
    }
    for (int r = 0; r < R; r++) {
        float sum = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc[r][0], acc[r][1]),
                                                       _mm512_add_ps(acc[r][2], acc[r][3])));
        if (i < n) sum += halo_dot_f32_avx2(n - i, q + i, rows[r] + i);
        out[r] = sum;
    }
}

AVX512 void halo_f32_dots_avx512(int64_t n, const float *q, const float *const *rows, int64_t nr,
                                 float *out) {
    int64_t r = 0;
    for (; r + 4 <= nr; r += 4)
        dots_tile(4, n, q, rows + r, out + r);
    for (; r < nr; r++)
        dots_tile(1, n, q, rows + r, out + r);
}

/* 128 outputs in eight registers across all the rows, then 16 at a time, then one: every
 * element gets the same mul-then-add sequence in row order. */
AVX512 void halo_f32_axpys_avx512(int64_t n, float *y, const float *const *rows, const float *w,
                                  int64_t nr) {
    int64_t d = 0;
    for (; d + 128 <= n; d += 128) {
        __m512 acc[8];
        for (int k = 0; k < 8; k++)
            acc[k] = _mm512_loadu_ps(y + d + 16 * k);
        for (int64_t r = 0; r < nr; r++) {
            __m512 wr = _mm512_set1_ps(w[r]);
            const float *row = rows[r] + d;
            for (int k = 0; k < 8; k++)
                acc[k] = _mm512_add_ps(acc[k], _mm512_mul_ps(wr, _mm512_loadu_ps(row + 16 * k)));
        }
        for (int k = 0; k < 8; k++)
            _mm512_storeu_ps(y + d + 16 * k, acc[k]);
    }
    for (; d + 16 <= n; d += 16) {
        __m512 acc = _mm512_loadu_ps(y + d);
        for (int64_t r = 0; r < nr; r++)
            acc = _mm512_add_ps(acc,
                                _mm512_mul_ps(_mm512_set1_ps(w[r]), _mm512_loadu_ps(rows[r] + d)));
        _mm512_storeu_ps(y + d, acc);
    }
    for (; d < n; d++)
        for (int64_t r = 0; r < nr; r++)
            y[d] += w[r] * rows[r][d];
}
