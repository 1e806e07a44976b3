/* AVX-512 tiled matrix products (gemm.h): each pair's arithmetic is the single-row kernel's
 * (simd_avx512.c, or simd_avx2.c where AVX-512 has none), the weight decoding and scales are
 * shared between the tokens of a tile.
 *
 * Q8_0 takes 4 rows x 2 tokens per tile (2 x 4 unprepared) and multiplies unsigned bytes:
 * w + 128 (the sign bit flipped) times the activation, with the accumulator started at -128 *
 * (sum of the lane's four activation bytes), gives the lane's exact sum of w * a in one
 * vpdpbusd per pair; the single-row kernel's sign trick (|w| times a with w's sign) needs two
 * instructions per pair.
 * The k/i-quants (Q2_K, Q4_K, IQ2_XXS) and MXFP4 decode a row's block once (levels, signs,
 * scales) into registers and dot it with up to 8 tokens. */
#include "quant/blocks.h"
#include "quant/fp.h"
#include "quant/gemm.h"
#include "quant/grids.h"
#include "quant/kernels.h"

#include <immintrin.h>
#include <stdbool.h>
#include <string.h>

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c,bmi2")))
#define INLINE AVX512 static inline __attribute__((always_inline))

INLINE float f16(uint16_t h) {
    return _cvtsh_ss(h);
}

INLINE __m512i load2x32(const void *p0, const void *p1) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)p0)),
                              _mm256_loadu_si256((const __m256i *)p1), 1);
}

/* f32 lanes 0-7 = s0, 8-15 = s1. */
INLINE __m512 scale2(float s0, float s1) {
    return _mm512_castsi512_ps(_mm512_inserti64x4(_mm512_castps_si512(_mm512_set1_ps(s0)),
                                                  _mm256_castps_si256(_mm256_set1_ps(s1)), 1));
}

INLINE __m512 join2(__m256 lo, __m256 hi) {
    return _mm512_castpd_ps(
        _mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(lo)), _mm256_castps_pd(hi), 1));
}

INLINE float hsum128_ps(__m128 m) {
    m = _mm_add_ps(m, _mm_movehl_ps(m, m));
    m = _mm_add_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

/* simd_avx2.c's horizontal sum, the same adds in the same order. */
INLINE float hsum256_ps(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* ---- Q8_0 x Q8_0: R rows x T tokens ----------------------------------------------------- */

/* res[r * T + t] = halo_dot_q8_0_avx512(row r, token t): its two accumulators (blocks 4k, 4k+1
 * and 4k+2, 4k+3), its reduction and its AVX2 tail. */
INLINE void q8_0_tile(const int R, const int T, int64_t nb, const block_q8_0 *const *x,
                      const block_q8_0 *const *a, float *res) {
    __m512 acc[2][4][4];
    for (int h = 0; h < 2; h++)
        for (int r = 0; r < R; r++)
            for (int t = 0; t < T; t++)
                acc[h][r][t] = _mm512_setzero_ps();
    const __m512i bias = _mm512_set1_epi8((char)0x80);
    int64_t i = 0;
    for (; i + 4 <= nb; i += 4) {
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            int64_t b = i + 2 * h;
            __m512i wu[4];
            __m512 wd[4];
            for (int r = 0; r < R; r++) {
                wu[r] = _mm512_xor_si512(load2x32(x[r][b].qs, x[r][b + 1].qs), bias);
                wd[r] = scale2(f16(x[r][b].d), f16(x[r][b + 1].d));
            }
            for (int t = 0; t < T; t++) {
                __m512i av = load2x32(a[t][b].qs, a[t][b + 1].qs);
                __m512i neg = _mm512_sub_epi32(
                    _mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), bias, av));
                __m512 ad = scale2(f16(a[t][b].d), f16(a[t][b + 1].d));
                for (int r = 0; r < R; r++) {
                    __m512i p = _mm512_dpbusd_epi32(neg, wu[r], av);
                    acc[h][r][t] = _mm512_fmadd_ps(_mm512_mul_ps(wd[r], ad), _mm512_cvtepi32_ps(p),
                                                   acc[h][r][t]);
                }
            }
        }
    }
    for (int r = 0; r < R; r++)
        for (int t = 0; t < T; t++) {
            float sum = _mm512_reduce_add_ps(_mm512_add_ps(acc[0][r][t], acc[1][r][t]));
            if (i < nb) sum += halo_dot_q8_0_avx2(QK32 * (nb - i), x[r] + i, a[t] + i);
            res[r * T + t] = sum;
        }
}

/* A token's activation row prepared for q8_0_tile_prep, per 64-byte chunk of the main loop:
 * the bytes of its two blocks, -128 * (each lane's four bytes summed), the two scales. */
typedef struct q8_0_prep {
    __m512i av, neg;
    __m512 ad;
} q8_0_prep;

AVX512 static void q8_0_prepare(int64_t nb, const block_q8_0 *a, q8_0_prep *p) {
    const __m512i bias = _mm512_set1_epi8((char)0x80);
    for (int64_t b = 0; b / 4 * 4 + 4 <= nb; b += 2, p++) { /* the main loop's blocks */
        p->av = load2x32(a[b].qs, a[b + 1].qs);
        p->neg = _mm512_sub_epi32(_mm512_setzero_si512(),
                                  _mm512_dpbusd_epi32(_mm512_setzero_si512(), bias, p->av));
        p->ad = scale2(f16(a[b].d), f16(a[b + 1].d));
    }
}

/* The f16 scales of 16 blocks as f32 (16 loads and one conversion). */
INLINE __m512 wscales16(const block_q8_0 *x) {
    __m256i h = _mm256_set_epi16((short)x[15].d, (short)x[14].d, (short)x[13].d, (short)x[12].d,
                                 (short)x[11].d, (short)x[10].d, (short)x[9].d, (short)x[8].d,
                                 (short)x[7].d, (short)x[6].d, (short)x[5].d, (short)x[4].d,
                                 (short)x[3].d, (short)x[2].d, (short)x[1].d, (short)x[0].d);
    return _mm512_cvtph_ps(h);
}

/* One step of q8_0_tile_prep: blocks b, b + 1 of R rows (bytes wu, scales wd as scale2 gives
 * them) against T prepared tokens. */
INLINE void q8_0_prep_step(const int R, const int T, int64_t b, const __m512i *wu, const __m512 *wd,
                           const q8_0_prep *const *pt, int h, __m512 acc[2][4][4]) {
    for (int t = 0; t < T; t++) {
        const q8_0_prep *p = pt[t] + b / 2;
        for (int r = 0; r < R; r++) {
            __m512i d = _mm512_dpbusd_epi32(p->neg, wu[r], p->av);
            acc[h][r][t] =
                _mm512_fmadd_ps(_mm512_mul_ps(wd[r], p->ad), _mm512_cvtepi32_ps(d), acc[h][r][t]);
        }
    }
}

/* q8_0_tile with the tokens' side prepared once per call (q8_0_prepare) and shared by every
 * group of rows: the same values, so the same results. The rows' scales are converted 16 blocks
 * at a time and each pair's spread to its two halves by one permute (the per-pair conversions
 * and broadcasts were most of a row's share of the work). */
INLINE void q8_0_tile_prep(const int R, const int T, int64_t nb, const block_q8_0 *const *x,
                           const block_q8_0 *const *a, const q8_0_prep *const *pt, float *res) {
    __m512 acc[2][4][4];
    for (int h = 0; h < 2; h++)
        for (int r = 0; r < R; r++)
            for (int t = 0; t < T; t++)
                acc[h][r][t] = _mm512_setzero_ps();
    const __m512i bias = _mm512_set1_epi8((char)0x80);
    int64_t i = 0, main = nb / 4 * 4;
    for (; i + 16 <= main; i += 16) {
        __m512 ws[4];
        for (int r = 0; r < R; r++)
            ws[r] = wscales16(x[r] + i);
#pragma GCC unroll 8
        for (int k = 0; k < 8; k++) { /* blocks i + 2k, i + 2k + 1 */
            int64_t b = i + 2 * k;
            __m512i idx =
                _mm512_inserti64x4(_mm512_set1_epi32(2 * k), _mm256_set1_epi32(2 * k + 1), 1);
            __m512i wu[4];
            __m512 wd[4];
            for (int r = 0; r < R; r++) {
                wu[r] = _mm512_xor_si512(load2x32(x[r][b].qs, x[r][b + 1].qs), bias);
                wd[r] = _mm512_permutexvar_ps(idx, ws[r]);
            }
            q8_0_prep_step(R, T, b, wu, wd, pt, k & 1, acc);
        }
    }
    for (; i < main; i += 4) {
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            int64_t b = i + 2 * h;
            __m512i wu[4];
            __m512 wd[4];
            for (int r = 0; r < R; r++) {
                wu[r] = _mm512_xor_si512(load2x32(x[r][b].qs, x[r][b + 1].qs), bias);
                wd[r] = scale2(f16(x[r][b].d), f16(x[r][b + 1].d));
            }
            q8_0_prep_step(R, T, b, wu, wd, pt, h, acc);
        }
    }
    for (int r = 0; r < R; r++)
        for (int t = 0; t < T; t++) {
            float sum = _mm512_reduce_add_ps(_mm512_add_ps(acc[0][r][t], acc[1][r][t]));
            if (i < nb) sum += halo_dot_q8_0_avx2(QK32 * (nb - i), x[r] + i, a[t] + i);
            res[r * T + t] = sum;
        }
}

#define Q8_0_TILE(R, T)                                                                            \
    AVX512 static void q8_0_tile_##R##_##T(int64_t nb, const block_q8_0 *const *x,                 \
                                           const block_q8_0 *const *a, const q8_0_prep *const *p,  \
                                           float *res) {                                           \
        if (p)                                                                                     \
            q8_0_tile_prep(R, T, nb, x, a, p, res);                                                \
        else                                                                                       \
            q8_0_tile(R, T, nb, x, a, res);                                                        \
    }
Q8_0_TILE(1, 1)
Q8_0_TILE(1, 2)
Q8_0_TILE(1, 3)
Q8_0_TILE(1, 4)
Q8_0_TILE(2, 1)
Q8_0_TILE(2, 2)
Q8_0_TILE(2, 3)
Q8_0_TILE(2, 4)
Q8_0_TILE(3, 1)
Q8_0_TILE(3, 2)
Q8_0_TILE(4, 1)
Q8_0_TILE(4, 2)

typedef void (*q8_0_tile_fn)(int64_t, const block_q8_0 *const *, const block_q8_0 *const *,
                             const q8_0_prep *const *, float *);
/* [R - 1][T - 1]; the prepared path's 4 x 2 tiles and their edges (R x T <= 8). */
static const q8_0_tile_fn q8_0_tiles[4][4] = {
    {q8_0_tile_1_1, q8_0_tile_1_2, q8_0_tile_1_3, q8_0_tile_1_4},
    {q8_0_tile_2_1, q8_0_tile_2_2, q8_0_tile_2_3, q8_0_tile_2_4},
    {q8_0_tile_3_1, q8_0_tile_3_2, NULL, NULL},
    {q8_0_tile_4_1, q8_0_tile_4_2, NULL, NULL},
};

/* Rows up to this length prepare the tokens' side on the stack (8 tokens: 192 KiB). */
enum { PREP_MAX_CHUNKS = 128 };

/* Prefetches the 544 bytes of 16 blocks pf bytes ahead of x (9 lines cover them at any
 * alignment). */
INLINE void prefetch_blocks16(const block_q8_0 *x, int pf) {
    const char *c = (const char *)x + pf;
    for (int k = 0; k < 9; k++)
        _mm_prefetch(c + 64 * k, _MM_HINT_T0);
}

/* The weight scales of 16 blocks times the token's, converted together (a gather of the 16
 * scales cost more than these 16 loads). */
INLINE __m512 scale_products16(const block_q8_0 *x, const float *as) {
    __m256i h = _mm256_set_epi16((short)x[15].d, (short)x[14].d, (short)x[13].d, (short)x[12].d,
                                 (short)x[11].d, (short)x[10].d, (short)x[9].d, (short)x[8].d,
                                 (short)x[7].d, (short)x[6].d, (short)x[5].d, (short)x[4].d,
                                 (short)x[3].d, (short)x[2].d, (short)x[1].d, (short)x[0].d);
    return _mm512_mul_ps(_mm512_cvtph_ps(h), _mm512_loadu_ps(as));
}

/* One token's side of a row of Q8_0 blocks for q8_0_row1, per block of the main loop: its 32
 * bytes, -128 x (each lane's four bytes summed), and its scale as f32. */
typedef struct q8_0_prep1 {
    __m256i av, neg;
} q8_0_prep1;

AVX512 static void q8_0_prepare1(int64_t nb, const block_q8_0 *a, q8_0_prep1 *p, float *as) {
    const __m256i bias = _mm256_set1_epi8((char)0x80);
    for (int64_t b = 0; b < nb / 4 * 4; b++) {
        p[b].av = _mm256_loadu_si256((const __m256i *)a[b].qs);
        p[b].neg = _mm256_sub_epi32(_mm256_setzero_si256(),
                                    _mm256_dpbusd_epi32(_mm256_setzero_si256(), bias, p[b].av));
        as[b] = f16(a[b].d);
    }
}

/* One row against one prepared token: the row dot's arithmetic (halo_dot_q8_0_avx512: lanes
 * 0-7 and 8-15 of its two accumulators hold blocks 4k, 4k+1 and 4k+2, 4k+3) in four 256-bit
 * accumulators, one per block of the four, reduced as it reduces: the same results with fewer
 * instructions (in cache 95 ns a 4096-wide row against the 2-row tile's 115 on this Zen 4,
 * where 512-bit operations take two passes). 16 blocks' weight scales are converted together
 * and multiplied by the token's (the same wd * ad products), and each block takes its product
 * with one permute. A gather of the 16 scales cost more than the 16 loads (126 ns), and the
 * products stored and broadcast back from memory waited on store forwarding (114 ns). */
INLINE float q8_0_row1(int64_t nb, const block_q8_0 *x, const block_q8_0 *a, const q8_0_prep1 *p,
                       const float *as, const int pf) {
    const __m256i bias = _mm256_set1_epi8((char)0x80);
    __m256 acc[4];
    for (int k = 0; k < 4; k++)
        acc[k] = _mm256_setzero_ps();
    int64_t main = nb / 4 * 4, i = 0;
    for (; i + 16 <= main; i += 16) {
        if (pf) prefetch_blocks16(x + i, pf);
        __m512 pr = scale_products16(x + i, as + i);
        __m256 ph[2] = {_mm512_castps512_ps256(pr),
                        _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(pr), 1))};
#pragma GCC unroll 16
        for (int k = 0; k < 16; k++) {
            __m256i wu = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)x[i + k].qs), bias);
            __m256i d = _mm256_dpbusd_epi32(p[i + k].neg, wu, p[i + k].av);
            __m256 sc = _mm256_permutevar8x32_ps(ph[k / 8], _mm256_set1_epi32(k % 8));
            acc[k & 3] = _mm256_fmadd_ps(sc, _mm256_cvtepi32_ps(d), acc[k & 3]);
        }
    }
    for (; i < main; i++) {
        __m256i wu = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)x[i].qs), bias);
        __m256i d = _mm256_dpbusd_epi32(p[i].neg, wu, p[i].av);
        acc[i & 3] =
            _mm256_fmadd_ps(_mm256_set1_ps(f16(x[i].d) * as[i]), _mm256_cvtepi32_ps(d), acc[i & 3]);
    }
    __m512 acc0 = join2(acc[0], acc[1]), acc1 = join2(acc[2], acc[3]);
    float sum = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
    if (i < nb) sum += halo_dot_q8_0_avx2(QK32 * (nb - i), x + i, a + i);
    return sum;
}

AVX512 static void q8_0_rows1(int64_t nb, const unsigned char *w, size_t w_stride, int64_t nr,
                              const block_q8_0 *a, float *y, int pf) {
    _Alignas(64) q8_0_prep1 p[PREP_MAX_CHUNKS * 2];
    _Alignas(64) float as[PREP_MAX_CHUNKS * 2];
    q8_0_prepare1(nb, a, p, as);
    for (int64_t r = 0; r < nr; r++)
        y[r] = q8_0_row1(nb, (const block_q8_0 *)(w + (size_t)r * w_stride), a, p, as, pf);
}

/* One row against one prepared token in 512-bit operations (HALO_Q8_ROW1=row512, kept for
 * A/B runs): the row dot's two accumulators as they are, a pair of blocks per step; 16 blocks'
 * scale products made together as in q8_0_row1, each pair's spread to its two halves by one
 * permute. The same operations on the same values as the row dot. Slower than q8_0_row1 even
 * on the H200 machine's Xeon, which runs 512-bit operations in one pass (201 against 169 ns a
 * 4096-wide row in cache; matvec 0.77 against 0.81 of a plain read at 16 threads). */
INLINE float q8_0_row512(int64_t nb, const block_q8_0 *x, const block_q8_0 *a, const q8_0_prep *p,
                         const float *as, const int pf) {
    const __m512i bias = _mm512_set1_epi8((char)0x80);
    __m512 acc[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
    int64_t main = nb / 4 * 4, i = 0;
    for (; i + 16 <= main; i += 16) {
        if (pf) prefetch_blocks16(x + i, pf);
        __m512 pr = scale_products16(x + i, as + i);
#pragma GCC unroll 8
        for (int k = 0; k < 8; k++) {
            int64_t b = i + 2 * k;
            __m512i wu = _mm512_xor_si512(load2x32(x[b].qs, x[b + 1].qs), bias);
            __m512i d = _mm512_dpbusd_epi32(p[b / 2].neg, wu, p[b / 2].av);
            __m512i idx =
                _mm512_inserti64x4(_mm512_set1_epi32(2 * k), _mm256_set1_epi32(2 * k + 1), 1);
            __m512 sc = _mm512_permutexvar_ps(idx, pr);
            acc[k & 1] = _mm512_fmadd_ps(sc, _mm512_cvtepi32_ps(d), acc[k & 1]);
        }
    }
    for (; i < main; i += 2) {
        __m512i wu = _mm512_xor_si512(load2x32(x[i].qs, x[i + 1].qs), bias);
        __m512i d = _mm512_dpbusd_epi32(p[i / 2].neg, wu, p[i / 2].av);
        __m512 sc = scale2(f16(x[i].d) * as[i], f16(x[i + 1].d) * as[i + 1]);
        acc[(i / 2) & 1] = _mm512_fmadd_ps(sc, _mm512_cvtepi32_ps(d), acc[(i / 2) & 1]);
    }
    float sum = _mm512_reduce_add_ps(_mm512_add_ps(acc[0], acc[1]));
    if (i < nb) sum += halo_dot_q8_0_avx2(QK32 * (nb - i), x + i, a + i);
    return sum;
}

AVX512 static void q8_0_rows512(int64_t nb, const unsigned char *w, size_t w_stride, int64_t nr,
                                const block_q8_0 *a, float *y, int pf) {
    q8_0_prep p[PREP_MAX_CHUNKS];
    float as[PREP_MAX_CHUNKS * 2];
    q8_0_prepare(nb, a, p);
    for (int64_t b = 0; b < nb / 4 * 4; b++)
        as[b] = f16(a[b].d);
    if (pf) {
        for (int64_t r = 0; r < nr; r++)
            y[r] = q8_0_row512(nb, (const block_q8_0 *)(w + (size_t)r * w_stride), a, p, as, pf);
    } else {
        for (int64_t r = 0; r < nr; r++)
            y[r] = q8_0_row512(nb, (const block_q8_0 *)(w + (size_t)r * w_stride), a, p, as, 0);
    }
}

AVX512 void halo_gemm_q8_0_avx512(int64_t n, const void *w, size_t w_stride, int64_t nr,
                                  const void *const *act, int nt, float *const *y) {
    int64_t nb = n / QK32, chunks = nb / 4 * 2;
    /* Preparing pays when the tokens meet several pairs of rows. */
    bool prep = nr >= 4 && chunks <= PREP_MAX_CHUNKS;
    halo_q8_row1_mode mode = halo_quant_q8_row1_mode();
    if (nt == 1 && prep && mode != HALO_Q8_TILE2) {
        if (mode == HALO_Q8_ROW512)
            q8_0_rows512(nb, w, w_stride, nr, act[0], y[0], halo_quant_q8_prefetch());
        else
            q8_0_rows1(nb, w, w_stride, nr, act[0], y[0], halo_quant_q8_prefetch());
        return;
    }
    q8_0_prep buf[prep ? HALO_GEMM_MAX_TOK * PREP_MAX_CHUNKS : 1];
    const q8_0_prep *pt[HALO_GEMM_MAX_TOK];
    for (int t = 0; t < nt; t++) {
        pt[t] = prep ? buf + t * PREP_MAX_CHUNKS : NULL;
        if (prep) q8_0_prepare(nb, act[t], buf + t * PREP_MAX_CHUNKS);
    }
    /* One token takes one row at a time: a single sequential stream per thread. Two rows read
     * side by side are two streams 4 KiB apart, and on the 2-core Zen 4 VM a 563 MB matvec
     * from DRAM fell to half the read bandwidth that way (10 GB/s against 28 for a plain read;
     * one row at a time 19; bench/cpu/bench_matvec). With several tokens the tile is bound by
     * the loads of the tokens' prepared side (2.8x the bytes of their Q8_0 blocks: 24 KiB a
     * 4096-wide token, beyond L1 for 8 tokens), so prepared tiles are 4 rows x 2 tokens: each
     * prepared chunk feeds 4 rows instead of 2 (2 rows x 4 tokens: 42-44 ns a 4096-wide
     * (row, token) pair on the Zen 5 VM, bench_gemm). Unprepared tiles stay 2 x 4. */
    int rstep = nt == 1 ? (mode != HALO_Q8_TILE2 ? 1 : 2) : prep ? 4 : 2, tstep = prep ? 2 : 4;
    for (int t0 = 0; t0 < nt; t0 += tstep) {
        int T = nt - t0 < tstep ? nt - t0 : tstep;
        const block_q8_0 *a[4];
        for (int t = 0; t < T; t++)
            a[t] = act[t0 + t];
        for (int64_t r0 = 0; r0 < nr; r0 += rstep) {
            int R = nr - r0 < rstep ? (int)(nr - r0) : rstep;
            const block_q8_0 *x[4];
            for (int r = 0; r < R; r++)
                x[r] = (const block_q8_0 *)((const unsigned char *)w + (size_t)(r0 + r) * w_stride);
            float res[8];
            q8_0_tiles[R - 1][T - 1](nb, x, a, prep ? pt + t0 : NULL, res);
            for (int r = 0; r < R; r++)
                for (int t = 0; t < T; t++)
                    y[t0 + t][r0 + r] = res[r * T + t];
        }
    }
}

/* ---- k/i-quants x Q8_K: one row's super-block decoded once for T tokens ------------------ */

/* The byte mask of negative weights of two 32-weight sub-blocks: 4 x 7 sign bits in the low 28
 * bits of each word, each group's eighth sign the parity of its seven (halo_iq_sign64's rows),
 * computed instead of looked up. */
INLINE __mmask64 iq_sign_mask(uint32_t lo, uint32_t hi) {
    uint64_t bits = (uint64_t)(lo & 0x0fffffff) | (uint64_t)(hi & 0x0fffffff) << 28;
    uint64_t b = _pdep_u64(bits, 0x7f7f7f7f7f7f7f7full), p = b ^ (b >> 4);
    p ^= p >> 2;
    p ^= p >> 1; /* bit 0 of each byte: the parity of its bits 0-6 (bit 7 is clear) */
    return (__mmask64)(b | (p & 0x0101010101010101ull) << 7);
}

/* halo_dot_iq2_xxs_avx2's arithmetic: per 32-weight sub-block, byte pairs summed (maddubs) and
 * scaled by 2s+1 (madd) into the 8 int32 lanes of a 32-byte register; here two sub-blocks fill
 * one 64-byte register and its halves are added at the end (exact integers: the same lanes). */
INLINE void iq2_xxs_tiled_row(const int T, int64_t nsb, const block_iq2_xxs *x,
                              const block_q8_K *const *a, float *const *y, int64_t r) {
    __m256 acc[HALO_GEMM_MAX_TOK];
    for (int t = 0; t < T; t++)
        acc[t] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nsb; i++) {
        const uint8_t *q = (const uint8_t *)x[i].qs;
        __m512i g[4], sc[4];
        __mmask64 neg[4];
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) {
            uint32_t aux[4];
            memcpy(aux, q + 16 * j, 16);
            const uint8_t *i0 = (const uint8_t *)&aux[0], *i1 = (const uint8_t *)&aux[2];
            g[j] = _mm512_set_epi64(
                (int64_t)halo_iq2xxs_grid[i1[3]], (int64_t)halo_iq2xxs_grid[i1[2]],
                (int64_t)halo_iq2xxs_grid[i1[1]], (int64_t)halo_iq2xxs_grid[i1[0]],
                (int64_t)halo_iq2xxs_grid[i0[3]], (int64_t)halo_iq2xxs_grid[i0[2]],
                (int64_t)halo_iq2xxs_grid[i0[1]], (int64_t)halo_iq2xxs_grid[i0[0]]);
            neg[j] = iq_sign_mask(aux[1], aux[3]);
            sc[j] = _mm512_inserti64x4(
                _mm512_castsi256_si512(_mm256_set1_epi16((short)(2 * (aux[1] >> 28) + 1))),
                _mm256_set1_epi16((short)(2 * (aux[3] >> 28) + 1)), 1);
        }
        float dw = f16(x[i].d) * 0.125f;
        for (int t = 0; t < T; t++) {
            __m512i sum = _mm512_setzero_si512();
#pragma GCC unroll 4
            for (int j = 0; j < 4; j++) {
                __m512i v = _mm512_loadu_si512((const void *)(a[t][i].qs + 64 * j));
                v = _mm512_mask_sub_epi8(v, neg[j], _mm512_setzero_si512(), v);
                sum =
                    _mm512_add_epi32(sum, _mm512_madd_epi16(_mm512_maddubs_epi16(g[j], v), sc[j]));
            }
            __m256i s8 =
                _mm256_add_epi32(_mm512_castsi512_si256(sum), _mm512_extracti64x4_epi64(sum, 1));
            acc[t] =
                _mm256_fmadd_ps(_mm256_set1_ps(a[t][i].d * dw), _mm256_cvtepi32_ps(s8), acc[t]);
        }
    }
    for (int t = 0; t < T; t++)
        y[t][r] = hsum256_ps(acc[t]);
}

/* halo_dot_q2_K_avx512's arithmetic: mins against the activation's block sums, levels times
 * activations scaled per 16-weight group. */
INLINE void q2_K_row(const int T, int64_t nsb, const block_q2_K *x, const block_q8_K *const *a,
                     float *const *y, int64_t r) {
    const __m512i m3 = _mm512_set1_epi8(3);
    const __m128i m4 = _mm_set1_epi8(0xf);
    __m512 acc[HALO_GEMM_MAX_TOK];
    __m256 accm[HALO_GEMM_MAX_TOK];
    for (int t = 0; t < T; t++) {
        acc[t] = _mm512_setzero_ps();
        accm[t] = _mm256_setzero_ps();
    }
    for (int64_t i = 0; i < nsb; i++) {
        __m128i sc8 = _mm_loadu_si128((const __m128i *)x[i].scales);
        __m256i mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sc8, 4), m4));
        __m512i scales = _mm512_castsi256_si512(_mm256_cvtepu8_epi16(_mm_and_si128(sc8, m4)));
        __m512i q01[2], q23[2], s01[2], s23[2];
#pragma GCC unroll 2
        for (int c = 0; c < 2; c++) {
            __m256i bits = _mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * c));
            __m512i b01 =
                _mm512_inserti64x4(_mm512_castsi256_si512(bits), _mm256_srli_epi16(bits, 2), 1);
            q01[c] = _mm512_and_si512(b01, m3);
            q23[c] = _mm512_and_si512(_mm512_srli_epi16(b01, 4), m3);
            /* spread4_epi16 of simd_avx512.c: lanes 8q..8q+7 = scale idx + q */
            for (int h = 0; h < 2; h++) {
                int idx = 8 * c + 4 * h;
                __m512i sel = _mm512_inserti64x4(
                    _mm512_castsi256_si512(_mm256_set_m128i(_mm_set1_epi16((short)(idx + 1)),
                                                            _mm_set1_epi16((short)idx))),
                    _mm256_set_m128i(_mm_set1_epi16((short)(idx + 3)),
                                     _mm_set1_epi16((short)(idx + 2))),
                    1);
                (h ? s23 : s01)[c] = _mm512_permutexvar_epi16(sel, scales);
            }
        }
        float d = f16(x[i].d), dmin = f16(x[i].dmin);
        for (int t = 0; t < T; t++) {
            const block_q8_K *b = a[t] + i;
            __m256i msum = _mm256_madd_epi16(mins, _mm256_loadu_si256((const __m256i *)b->bsums));
            accm[t] =
                _mm256_fmadd_ps(_mm256_set1_ps(b->d * dmin), _mm256_cvtepi32_ps(msum), accm[t]);
            __m512i sumi0 = _mm512_setzero_si512(), sumi1 = _mm512_setzero_si512();
#pragma GCC unroll 2
            for (int c = 0; c < 2; c++) {
                __m512i y01 = _mm512_loadu_si512((const void *)(b->qs + 128 * c));
                __m512i y23 = _mm512_loadu_si512((const void *)(b->qs + 128 * c + 64));
                /* vpdpwssd: madd and add in one (exact integers: the same sums) */
                sumi0 = _mm512_dpwssd_epi32(sumi0, _mm512_maddubs_epi16(q01[c], y01), s01[c]);
                sumi1 = _mm512_dpwssd_epi32(sumi1, _mm512_maddubs_epi16(q23[c], y23), s23[c]);
            }
            acc[t] = _mm512_fmadd_ps(_mm512_set1_ps(b->d * d),
                                     _mm512_cvtepi32_ps(_mm512_add_epi32(sumi0, sumi1)), acc[t]);
        }
    }
    for (int t = 0; t < T; t++) {
        __m128 m = _mm_add_ps(_mm256_castps256_ps128(accm[t]), _mm256_extractf128_ps(accm[t], 1));
        y[t][r] = _mm512_reduce_add_ps(acc[t]) - hsum128_ps(m);
    }
}

AVX512 void halo_gemm_iq2_xxs_tiled_avx512(int64_t n, const void *w, size_t w_stride, int64_t nr,
                                           const void *const *act, int nt, float *const *y);

/* ---- MXFP4 x Q8_0: one row's blocks looked up once for T tokens ------------------------- */

/* 2 blocks of 16 nibble bytes -> 64 table values, block b's 32 in the low half (simd_avx512.c's
 * lut_2blocks). */
INLINE __m512i lut_2blocks(__m512i table, const uint8_t *q0, const uint8_t *q1) {
    __m256i b =
        _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)q0)),
                                _mm_loadu_si128((const __m128i *)q1), 1);
    const __m256i m4 = _mm256_set1_epi8(0xf);
    __m256i lo = _mm256_and_si256(b, m4), hi = _mm256_and_si256(_mm256_srli_epi16(b, 4), m4);
    __m512i idx =
        _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_permute2x128_si256(lo, hi, 0x20)),
                           _mm256_permute2x128_si256(lo, hi, 0x31), 1);
    return _mm512_shuffle_epi8(table, idx);
}

/* halo_dot_mxfp4_avx512's arithmetic: |w| times the activation carrying w's sign (dot_s8x64),
 * two accumulators, its reduction and AVX2 tail; the weight's magnitudes, sign mask and scales
 * are shared by the tokens. */
INLINE void mxfp4_row(const int T, int64_t nb, const block_mxfp4 *x, const block_q8_0 *const *a,
                      float *const *y, int64_t r) {
    const __m512i table =
        _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)halo_kvalues_mxfp4));
    __m512 acc[2][HALO_GEMM_MAX_TOK];
    for (int t = 0; t < T; t++)
        acc[0][t] = acc[1][t] = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 4 <= nb; i += 4) {
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            int64_t b = i + 2 * h;
            __m512i wq = lut_2blocks(table, x[b].qs, x[b + 1].qs);
            __mmask64 neg = _mm512_movepi8_mask(wq);
            __m512i wabs = _mm512_abs_epi8(wq);
            float s0 = halo_e8m0_half_to_f32(x[b].e), s1 = halo_e8m0_half_to_f32(x[b + 1].e);
            for (int t = 0; t < T; t++) {
                __m512i v = load2x32(a[t][b].qs, a[t][b + 1].qs);
                v = _mm512_mask_sub_epi8(v, neg, _mm512_setzero_si512(), v);
                __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wabs, v);
                acc[h][t] = _mm512_fmadd_ps(scale2(s0 * f16(a[t][b].d), s1 * f16(a[t][b + 1].d)),
                                            _mm512_cvtepi32_ps(p), acc[h][t]);
            }
        }
    }
    for (int t = 0; t < T; t++) {
        float sum = _mm512_reduce_add_ps(_mm512_add_ps(acc[0][t], acc[1][t]));
        if (i < nb) sum += halo_dot_mxfp4_avx2(QK32 * (nb - i), x + i, a[t] + i);
        y[t][r] = sum;
    }
}

/* ---- Q4_K x Q8_K ---------------------------------------------------------------------- */

/* Q4_K's 12 scale bytes -> 16 bytes: the 8 scales, then the 8 mins (simd_avx512.c's). */
static inline __m128i q4k_scales_mins(const uint8_t *s) {
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

/* halo_dot_q4_K_avx512's arithmetic, levels and scales decoded once for T tokens. */
INLINE void q4_K_row(const int T, int64_t nsb, const block_q4_K *x, const block_q8_K *const *a,
                     float *const *y, int64_t r) {
    const __m512i m4 = _mm512_set1_epi8(0xf);
    __m512 acc[HALO_GEMM_MAX_TOK];
    __m128 accm[HALO_GEMM_MAX_TOK];
    for (int t = 0; t < T; t++) {
        acc[t] = _mm512_setzero_ps();
        accm[t] = _mm_setzero_ps();
    }
    for (int64_t i = 0; i < nsb; i++) {
        __m256i sm = _mm256_cvtepu8_epi16(q4k_scales_mins(x[i].scales));
        __m128i mins = _mm256_extracti128_si256(sm, 1);
        __m512i scales = _mm512_castsi256_si512(sm), q[4], sc[4];
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            __m256i bits = _mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * c));
            q[c] = _mm512_and_si512(
                _mm512_inserti64x4(_mm512_castsi256_si512(bits), _mm256_srli_epi16(bits, 4), 1),
                m4);
            /* spread2_epi16: lanes 16h..16h+15 = scale 2c + h */
            __m512i sel =
                _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi16((short)(2 * c))),
                                   _mm256_set1_epi16((short)(2 * c + 1)), 1);
            sc[c] = _mm512_permutexvar_epi16(sel, scales);
        }
        float d = f16(x[i].d), dmin = f16(x[i].dmin);
        for (int t = 0; t < T; t++) {
            const block_q8_K *b = a[t] + i;
            __m256i bs = _mm256_loadu_si256((const __m256i *)b->bsums);
            __m128i s32 =
                _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));
            __m128i pm = _mm_madd_epi16(mins, s32);
            accm[t] = _mm_fmadd_ps(_mm_set1_ps(b->d * dmin), _mm_cvtepi32_ps(pm), accm[t]);
            __m512i sumi0 = _mm512_setzero_si512(), sumi1 = _mm512_setzero_si512();
#pragma GCC unroll 4
            for (int c = 0; c < 4; c++) {
                __m512i v = _mm512_loadu_si512((const void *)(b->qs + 64 * c));
                __m512i p = _mm512_maddubs_epi16(q[c], v); /* vpdpwssd: madd and add in one */
                if (c & 1)
                    sumi1 = _mm512_dpwssd_epi32(sumi1, p, sc[c]);
                else
                    sumi0 = _mm512_dpwssd_epi32(sumi0, p, sc[c]);
            }
            acc[t] = _mm512_fmadd_ps(_mm512_set1_ps(b->d * d),
                                     _mm512_cvtepi32_ps(_mm512_add_epi32(sumi0, sumi1)), acc[t]);
        }
    }
    for (int t = 0; t < T; t++)
        y[t][r] = _mm512_reduce_add_ps(acc[t]) - hsum128_ps(accm[t]);
}

/* One function per token count so each row kernel keeps its accumulators in registers. */
#define ROW_KERNEL(name, block_t, act_t, qk)                                                       \
    AVX512 static void name##_rows(int T, int64_t nsb, const void *w, size_t w_stride, int64_t nr, \
                                   const act_t *const *a, float *const *y) {                       \
        int pf = T == 1 ? halo_quant_row_prefetch() : 0; /* one token streams its rows */          \
        for (int64_t r = 0; r < nr; r++) {                                                         \
            const block_t *x = (const block_t *)((const unsigned char *)w + (size_t)r * w_stride); \
            if (pf) halo_prefetch_span((const unsigned char *)x + pf, w_stride);                   \
            switch (T) {                                                                           \
            case 1:                                                                                \
                name##_row(1, nsb, x, a, y, r);                                                    \
                break;                                                                             \
            case 2:                                                                                \
                name##_row(2, nsb, x, a, y, r);                                                    \
                break;                                                                             \
            case 3:                                                                                \
                name##_row(3, nsb, x, a, y, r);                                                    \
                break;                                                                             \
            case 4:                                                                                \
                name##_row(4, nsb, x, a, y, r);                                                    \
                break;                                                                             \
            case 5:                                                                                \
                name##_row(5, nsb, x, a, y, r);                                                    \
                break;                                                                             \
            case 6:                                                                                \
                name##_row(6, nsb, x, a, y, r);                                                    \
                break;                                                                             \
            case 7:                                                                                \
                name##_row(7, nsb, x, a, y, r);                                                    \
                break;                                                                             \
            default:                                                                               \
                name##_row(8, nsb, x, a, y, r);                                                    \
                break;                                                                             \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
    AVX512 void halo_gemm_##name##_avx512(int64_t n, const void *w, size_t w_stride, int64_t nr,   \
                                          const void *const *act, int nt, float *const *y) {       \
        name##_rows(nt, n / (qk), w, w_stride, nr, (const act_t *const *)act, y);                  \
    }

ROW_KERNEL(iq2_xxs_tiled, block_iq2_xxs, block_q8_K, QK_K)

/* One token: halo_dot_iq2_xxs_avx2 step for step (256-bit halves, which cost less to build
 * than 512-bit ones when no other token shares them), its sign lookups replaced by the
 * computed masks. */
AVX512 static float iq2_xxs_dot1(int64_t nsb, const block_iq2_xxs *x, const block_q8_K *a) {
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < nsb; i++) {
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
            __mmask64 neg = iq_sign_mask(aux[1], aux[3]);
            __m256i y0 = _mm256_loadu_si256((const __m256i *)(a[i].qs + 32 * ib));
            __m256i y1 = _mm256_loadu_si256((const __m256i *)(a[i].qs + 32 * ib + 32));
            y0 = _mm256_mask_sub_epi8(y0, (__mmask32)neg, _mm256_setzero_si256(), y0);
            y1 = _mm256_mask_sub_epi8(y1, (__mmask32)(neg >> 32), _mm256_setzero_si256(), y1);
            __m256i p0 = _mm256_maddubs_epi16(g0, y0), p1 = _mm256_maddubs_epi16(g1, y1);
            sumi0 = _mm256_add_epi32(
                sumi0, _mm256_madd_epi16(p0, _mm256_set1_epi16((short)(2 * (aux[1] >> 28) + 1))));
            sumi1 = _mm256_add_epi32(
                sumi1, _mm256_madd_epi16(p1, _mm256_set1_epi16((short)(2 * (aux[3] >> 28) + 1))));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(a[i].d * (f16(x[i].d) * 0.125f)),
                              _mm256_cvtepi32_ps(_mm256_add_epi32(sumi0, sumi1)), acc);
    }
    return hsum256_ps(acc);
}

AVX512 void halo_gemm_iq2_xxs_avx512(int64_t n, const void *w, size_t w_stride, int64_t nr,
                                     const void *const *act, int nt, float *const *y) {
    if (nt > 1) {
        halo_gemm_iq2_xxs_tiled_avx512(n, w, w_stride, nr, act, nt, y);
        return;
    }
    int pf = halo_quant_row_prefetch();
    for (int64_t r = 0; r < nr; r++) {
        const unsigned char *x = (const unsigned char *)w + (size_t)r * w_stride;
        if (pf) halo_prefetch_span(x + pf, w_stride);
        y[0][r] = iq2_xxs_dot1(n / QK_K, (const block_iq2_xxs *)x, act[0]);
    }
}
ROW_KERNEL(q2_K, block_q2_K, block_q8_K, QK_K)
ROW_KERNEL(q4_K, block_q4_K, block_q8_K, QK_K)
ROW_KERNEL(mxfp4, block_mxfp4, block_q8_0, QK32)

/* ---- F16 x F32: one row's halves converted once for up to 4 tokens ---------------------- */

/* halo_dot_f16_avx512's arithmetic per pair: 64 products a step into four accumulators,
 * ((a0 + a1) + (a2 + a3)) reduced, the AVX2 kernel for a tail. */
INLINE void f16_tile(const int T, int64_t n, const uint16_t *x, const float *const *a, float *out) {
    __m512 acc[4][4];
    for (int t = 0; t < T; t++)
        for (int k = 0; k < 4; k++)
            acc[t][k] = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        __m512 wv[4];
        for (int k = 0; k < 4; k++)
            wv[k] = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(x + i + 16 * k)));
        for (int t = 0; t < T; t++)
            for (int k = 0; k < 4; k++)
                acc[t][k] = _mm512_fmadd_ps(wv[k], _mm512_loadu_ps(a[t] + i + 16 * k), acc[t][k]);
    }
    for (int t = 0; t < T; t++) {
        float sum = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc[t][0], acc[t][1]),
                                                       _mm512_add_ps(acc[t][2], acc[t][3])));
        if (i < n) sum += halo_dot_f16_avx2(n - i, x + i, a[t] + i);
        out[t] = sum;
    }
}

#define F16_TILE(T)                                                                                \
    AVX512 static void f16_tile_##T(int64_t n, const uint16_t *x, const float *const *a,           \
                                    float *out) {                                                  \
        f16_tile(T, n, x, a, out);                                                                 \
    }
F16_TILE(1)
F16_TILE(2)
F16_TILE(3)
F16_TILE(4)

/* Tokens per tile, and tiles outside the loop over rows: a tile's f32 activation rows are
 * read once per weight row, so they should stay in L1 (48 KiB on Zen 4/5 and on the H200
 * machine's Xeon) while the rows go by (from L2, reread once per tile). At 4096-wide rows, 4
 * tokens' 64 KiB took 98-103 ns a (row, token) pair and 2 tokens' 32 KiB 58 on the Zen 5 VM
 * (bench_gemm GEMM_ALL_T=1, before this order). */
static int f16_tokens(int64_t n) {
    int64_t t = (32 * 1024) / (n * (int64_t)sizeof(float));
    return t < 1 ? 1 : t > 4 ? 4 : (int)t;
}

AVX512 void halo_gemm_f16_avx512(int64_t n, const void *w, size_t w_stride, int64_t nr,
                                 const void *const *act, int nt, float *const *y) {
    static void (*const tile[4])(int64_t, const uint16_t *, const float *const *,
                                 float *) = {f16_tile_1, f16_tile_2, f16_tile_3, f16_tile_4};
    int tstep = f16_tokens(n);
    for (int t0 = 0; t0 < nt; t0 += tstep) {
        int T = nt - t0 < tstep ? nt - t0 : tstep;
        for (int64_t r = 0; r < nr; r++) {
            const uint16_t *x = (const uint16_t *)((const unsigned char *)w + (size_t)r * w_stride);
            float res[4];
            tile[T - 1](n, x, (const float *const *)act + t0, res);
            for (int t = 0; t < T; t++)
                y[t0 + t][r] = res[t];
        }
    }
}
