/* AVX2 dot kernels for the formats unsloth's dynamic quants add (Q3_K, Q5_K, IQ4_XS, the other
 * i-quants) and the older 32-element ones (Q4_1, Q5_0, Q5_1). Same rules as simd_avx2.c:
 * integer products summed exactly, f32 accumulation; each agrees with its scalar reference.
 * Levels that carry an offset (Q3_K's -4, i-quants' odd scales) are handled by summing unsigned
 * levels and correcting with activation sums (Q8_K bsums), which keeps vpmaddubsw usable. */
#include "quant/blocks.h"
#include "quant/fp.h"
#include "quant/grids.h"
#include "quant/kernels.h"

#include <immintrin.h>
#include <string.h>

#define AVX2 __attribute__((target("avx2,fma,f16c")))

AVX2 static inline float f16(uint16_t h) {
    return _cvtsh_ss(h);
}

AVX2 static inline float hsum_ps(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

AVX2 static inline int32_t hsum_epi32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

/* int16 pair products of signed x signed bytes (the weight's sign moved onto the activation). */
AVX2 static inline __m256i mul_s8(__m256i x, __m256i y) {
    return _mm256_maddubs_epi16(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
}

AVX2 static inline __m256i unpack_nibbles(const uint8_t *qs) {
    __m128i b = _mm_loadu_si128((const __m128i *)qs);
    __m128i m = _mm_set1_epi8(0xf);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(b, 4), m), _mm_and_si128(b, m));
}

/* Q5's fifth bits: byte j = 0x10 where bit j of the 32-bit qh is set. */
AVX2 static inline __m256i bits5(const uint8_t qh4[4]) {
    uint32_t h;
    memcpy(&h, qh4, 4);
    const __m256i spread = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202,
                                             0x0101010101010101, 0x0000000000000000);
    const __m256i bit = _mm256_set1_epi64x((int64_t)0x8040201008040201);
    __m256i b = _mm256_shuffle_epi8(_mm256_set1_epi32((int)h), spread);
    return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(b, bit), bit),
                            _mm256_set1_epi8(0x10));
}

/* 32 bytes of +1 / -1 from 4 explicit sign bytes (bit j of byte l: element 8l + j negative). */
AVX2 static inline __m256i signs_from_bytes(uint32_t s4) {
    const __m256i spread = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202,
                                             0x0101010101010101, 0x0000000000000000);
    const __m256i bit = _mm256_set1_epi64x((int64_t)0x8040201008040201);
    __m256i b = _mm256_shuffle_epi8(_mm256_set1_epi32((int)s4), spread);
    return _mm256_or_si256(_mm256_cmpeq_epi8(_mm256_and_si256(b, bit), bit), _mm256_set1_epi8(1));
}

/* 32 bytes of +1 / -1 from four 7-bit sign indices packed in the low 28 bits of aux. */
AVX2 static inline __m256i signs_from_index(uint32_t aux) {
    return _mm256_set_epi64x(
        (int64_t)halo_iq_sign64[(aux >> 21) & 127], (int64_t)halo_iq_sign64[(aux >> 14) & 127],
        (int64_t)halo_iq_sign64[(aux >> 7) & 127], (int64_t)halo_iq_sign64[aux & 127]);
}

/* int16 lanes 0-7 = s0, 8-15 = s1: two 16-weight scales over one 32-weight product vector. */
AVX2 static inline __m256i pair16(int s0, int s1) {
    return _mm256_set_m128i(_mm_set1_epi16((short)s1), _mm_set1_epi16((short)s0));
}

static inline int32_t dot_bsums(const int16_t *s, const int16_t *bsums, int n) {
    int32_t t = 0;
    for (int g = 0; g < n; g++)
        t += s[g] * bsums[g];
    return t;
}

/* ---- Q4_1, Q5_0, Q5_1 (Q8_0 activations) ------------------------------------------------- */

AVX2 float halo_dot_q4_1_avx2(int64_t n, const void *w, const void *act) {
    const block_q4_1 *x = w;
    const block_q8_0 *a = act;
    const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
    __m256 acc = _mm256_setzero_ps(), accm = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK32; i++) {
        __m256i y = _mm256_loadu_si256((const __m256i *)a[i].qs);
        __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(unpack_nibbles(x[i].qs), y), ones16);
        __m256i sy = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, y), ones16);
        float da = f16(a[i].d);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(f16(x[i].d) * da), _mm256_cvtepi32_ps(p), acc);
        accm = _mm256_fmadd_ps(_mm256_set1_ps(f16(x[i].m) * da), _mm256_cvtepi32_ps(sy), accm);
    }
    return hsum_ps(_mm256_add_ps(acc, accm));
}

AVX2 float halo_dot_q5_0_avx2(int64_t n, const void *w, const void *act) {
    const block_q5_0 *x = w;
    const block_q8_0 *a = act;
    const __m256i ones16 = _mm256_set1_epi16(1);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK32; i++) {
        __m256i q = _mm256_sub_epi8(_mm256_or_si256(unpack_nibbles(x[i].qs), bits5(x[i].qh)),
                                    _mm256_set1_epi8(16));
        __m256i p =
            _mm256_madd_epi16(mul_s8(q, _mm256_loadu_si256((const __m256i *)a[i].qs)), ones16);
        acc =
            _mm256_fmadd_ps(_mm256_set1_ps(f16(x[i].d) * f16(a[i].d)), _mm256_cvtepi32_ps(p), acc);
    }
    return hsum_ps(acc);
}

AVX2 float halo_dot_q5_1_avx2(int64_t n, const void *w, const void *act) {
    const block_q5_1 *x = w;
    const block_q8_0 *a = act;
    const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
    __m256 acc = _mm256_setzero_ps(), accm = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK32; i++) {
        __m256i y = _mm256_loadu_si256((const __m256i *)a[i].qs);
        __m256i q = _mm256_or_si256(unpack_nibbles(x[i].qs), bits5(x[i].qh));
        __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(q, y), ones16);
        __m256i sy = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, y), ones16);
        float da = f16(a[i].d);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(f16(x[i].d) * da), _mm256_cvtepi32_ps(p), acc);
        accm = _mm256_fmadd_ps(_mm256_set1_ps(f16(x[i].m) * da), _mm256_cvtepi32_ps(sy), accm);
    }
    return hsum_ps(_mm256_add_ps(acc, accm));
}

/* ---- Q3_K, Q5_K --------------------------------------------------------------------------- */

/* Q3_K's 16 signed 6-bit scales, unpacked in 32-bit lanes (the layout of halo_q3k_scales). */
AVX2 static inline __m128i q3k_scales_vec(const uint8_t *s) {
    uint32_t u[3];
    memcpy(u, s, 12);
    const uint32_t m4 = 0x0f0f0f0f, m2 = 0x03030303;
    __m128i v = _mm_set_epi32((int)(((u[1] >> 4) & m4) | (((u[2] >> 6) & m2) << 4)),
                              (int)(((u[0] >> 4) & m4) | (((u[2] >> 4) & m2) << 4)),
                              (int)((u[1] & m4) | (((u[2] >> 2) & m2) << 4)),
                              (int)((u[0] & m4) | ((u[2] & m2) << 4)));
    return _mm_sub_epi8(v, _mm_set1_epi8(32));
}

/* Q3_K level = lo + 4*hi - 4: the unsigned part lo | hi << 2 goes through vpmaddubsw, the -4
 * through bsums. */
AVX2 float halo_dot_q3_K_avx2(int64_t n, const void *w, const void *act) {
    const block_q3_K *x = w;
    const block_q8_K *a = act;
    const __m256i m3 = _mm256_set1_epi8(3), m1 = _mm256_set1_epi8(1);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        __m128i sc8 = q3k_scales_vec(x[i].scales);
        /* the -4 of every level: 4 * sum over groups of scale * sum(y) */
        __m256i bias = _mm256_madd_epi16(_mm256_cvtepi8_epi16(sc8),
                                         _mm256_loadu_si256((const __m256i *)a[i].bsums));
        __m256i sumi = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(bias, 2));
        __m256i hm = _mm256_loadu_si256((const __m256i *)x[i].hmask);
#pragma GCC unroll 2
        for (int c = 0; c < 2; c++) {
            __m256i bits = _mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * c));
            __m256i scales =
                _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(c ? _mm_srli_si128(sc8, 8) : sc8));
#pragma GCC unroll 4
            for (int p = 0; p < 4; p++) {
                __m256i lo = _mm256_and_si256(_mm256_srli_epi16(bits, 2 * p), m3);
                __m256i hi = _mm256_and_si256(_mm256_srli_epi16(hm, 4 * c + p), m1);
                __m256i q = _mm256_or_si256(lo, _mm256_slli_epi16(hi, 2));
                __m256i y = _mm256_loadu_si256((const __m256i *)(a[i].qs + 128 * c + 32 * p));
                __m256i s = _mm256_shuffle_epi8(
                    scales,
                    _mm256_set_m128i(_mm_set1_epi16((short)((4 * p + 3) << 8 | (4 * p + 2))),
                                     _mm_set1_epi16((short)((4 * p + 1) << 8 | (4 * p)))));
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(_mm256_maddubs_epi16(q, y), s));
            }
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(a[i].d * f16(x[i].d)), _mm256_cvtepi32_ps(sumi), acc);
    }
    return hsum_ps(acc);
}

AVX2 float halo_dot_q5_K_avx2(int64_t n, const void *w, const void *act) {
    const block_q5_K *x = w;
    const block_q8_K *a = act;
    const __m256i m4 = _mm256_set1_epi8(0xf), m1 = _mm256_set1_epi8(1);
    __m256 acc = _mm256_setzero_ps();
    float summ = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        uint8_t sc[8], m[8];
        for (int g = 0; g < 8; g++)
            halo_k4_scale_min(g, x[i].scales, &sc[g], &m[g]);
        int32_t ms = 0;
        for (int g = 0; g < 8; g++)
            ms += m[g] * (a[i].bsums[2 * g] + a[i].bsums[2 * g + 1]);
        summ += a[i].d * f16(x[i].dmin) * (float)ms;
        __m256i qh = _mm256_loadu_si256((const __m256i *)x[i].qh);
        __m256i sumi = _mm256_setzero_si256();
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            __m256i bits = _mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * c));
            __m256i hlo = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * c), m1), 4);
            __m256i hhi =
                _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * c + 1), m1), 4);
            __m256i qlo = _mm256_or_si256(_mm256_and_si256(bits, m4), hlo);
            __m256i qhi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(bits, 4), m4), hhi);
            __m256i ylo = _mm256_loadu_si256((const __m256i *)(a[i].qs + 64 * c));
            __m256i yhi = _mm256_loadu_si256((const __m256i *)(a[i].qs + 64 * c + 32));
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(_mm256_maddubs_epi16(qlo, ylo),
                                                            _mm256_set1_epi16(sc[2 * c])));
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(_mm256_maddubs_epi16(qhi, yhi),
                                                            _mm256_set1_epi16(sc[2 * c + 1])));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(a[i].d * f16(x[i].d)), _mm256_cvtepi32_ps(sumi), acc);
    }
    return hsum_ps(acc) - summ;
}

/* ---- IQ4_XS ------------------------------------------------------------------------------- */

AVX2 float halo_dot_iq4_xs_avx2(int64_t n, const void *w, const void *act) {
    const block_iq4_xs *x = w;
    const block_q8_K *a = act;
    const __m256i table =
        _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)halo_kvalues_iq4nl));
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        __m256i sumi = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int ib = 0; ib < 8; ib++) {
            int ls = (((x[i].scales_l[ib / 2] >> (4 * (ib % 2))) & 0xf) |
                      (((x[i].scales_h >> (2 * ib)) & 3) << 4)) -
                     32;
            __m256i q = _mm256_shuffle_epi8(table, unpack_nibbles(x[i].qs + 16 * ib));
            __m256i y = _mm256_loadu_si256((const __m256i *)(a[i].qs + 32 * ib));
            sumi = _mm256_add_epi32(sumi,
                                    _mm256_madd_epi16(mul_s8(q, y), _mm256_set1_epi16((short)ls)));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(a[i].d * f16(x[i].d)), _mm256_cvtepi32_ps(sumi), acc);
    }
    return hsum_ps(acc);
}

/* ---- IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S: unsigned grid bytes times sign-applied activations ----- */

AVX2 float halo_dot_iq2_xs_avx2(int64_t n, const void *w, const void *act) {
    const block_iq2_xs *x = w;
    const block_q8_K *a = act;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        __m256i sumi = _mm256_setzero_si256();
#pragma GCC unroll 4
        for (int ib = 0; ib < 8; ib++) {
            const uint16_t *q = x[i].qs + 4 * ib;
            __m256i grid = _mm256_set_epi64x(
                (int64_t)halo_iq2xs_grid[q[3] & 511], (int64_t)halo_iq2xs_grid[q[2] & 511],
                (int64_t)halo_iq2xs_grid[q[1] & 511], (int64_t)halo_iq2xs_grid[q[0] & 511]);
            __m256i sg = _mm256_set_epi64x(
                (int64_t)halo_iq_sign64[q[3] >> 9], (int64_t)halo_iq_sign64[q[2] >> 9],
                (int64_t)halo_iq_sign64[q[1] >> 9], (int64_t)halo_iq_sign64[q[0] >> 9]);
            __m256i y =
                _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)(a[i].qs + 32 * ib)), sg);
            uint8_t s = x[i].scales[ib];
            sumi = _mm256_add_epi32(sumi,
                                    _mm256_madd_epi16(_mm256_maddubs_epi16(grid, y),
                                                      pair16(2 * (s & 0xf) + 1, 2 * (s >> 4) + 1)));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(a[i].d * (f16(x[i].d) * 0.125f)),
                              _mm256_cvtepi32_ps(sumi), acc);
    }
    return hsum_ps(acc);
}

AVX2 float halo_dot_iq2_s_avx2(int64_t n, const void *w, const void *act) {
    const block_iq2_s *x = w;
    const block_q8_K *a = act;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        const uint8_t *qs = x[i].qs, *signs = x[i].qs + QK_K / 8;
        __m256i sumi = _mm256_setzero_si256();
#pragma GCC unroll 4
        for (int ib = 0; ib < 8; ib++) {
            int h = x[i].qh[ib];
            __m256i grid =
                _mm256_set_epi64x((int64_t)halo_iq2s_grid[qs[4 * ib + 3] | ((h << 2) & 0x300)],
                                  (int64_t)halo_iq2s_grid[qs[4 * ib + 2] | ((h << 4) & 0x300)],
                                  (int64_t)halo_iq2s_grid[qs[4 * ib + 1] | ((h << 6) & 0x300)],
                                  (int64_t)halo_iq2s_grid[qs[4 * ib + 0] | ((h << 8) & 0x300)]);
            uint32_t s4;
            memcpy(&s4, signs + 4 * ib, 4);
            __m256i y = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)(a[i].qs + 32 * ib)),
                                         signs_from_bytes(s4));
            uint8_t s = x[i].scales[ib];
            sumi = _mm256_add_epi32(sumi,
                                    _mm256_madd_epi16(_mm256_maddubs_epi16(grid, y),
                                                      pair16(2 * (s & 0xf) + 1, 2 * (s >> 4) + 1)));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(a[i].d * (f16(x[i].d) * 0.125f)),
                              _mm256_cvtepi32_ps(sumi), acc);
    }
    return hsum_ps(acc);
}

AVX2 float halo_dot_iq3_xxs_avx2(int64_t n, const void *w, const void *act) {
    const block_iq3_xxs *x = w;
    const block_q8_K *a = act;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        const uint8_t *qs = x[i].qs;
        __m256i sumi = _mm256_setzero_si256();
#pragma GCC unroll 4
        for (int ib = 0; ib < 8; ib++) {
            const uint8_t *g = qs + 8 * ib;
            __m256i grid =
                _mm256_set_epi32((int)halo_iq3xxs_grid[g[7]], (int)halo_iq3xxs_grid[g[6]],
                                 (int)halo_iq3xxs_grid[g[5]], (int)halo_iq3xxs_grid[g[4]],
                                 (int)halo_iq3xxs_grid[g[3]], (int)halo_iq3xxs_grid[g[2]],
                                 (int)halo_iq3xxs_grid[g[1]], (int)halo_iq3xxs_grid[g[0]]);
            uint32_t aux;
            memcpy(&aux, qs + QK_K / 4 + 4 * ib, 4);
            __m256i y = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)(a[i].qs + 32 * ib)),
                                         signs_from_index(aux));
            sumi = _mm256_add_epi32(
                sumi, _mm256_madd_epi16(_mm256_maddubs_epi16(grid, y),
                                        _mm256_set1_epi16((short)(2 * (aux >> 28) + 1))));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(a[i].d * (f16(x[i].d) * 0.25f)),
                              _mm256_cvtepi32_ps(sumi), acc);
    }
    return hsum_ps(acc);
}

AVX2 float halo_dot_iq3_s_avx2(int64_t n, const void *w, const void *act) {
    const block_iq3_s *x = w;
    const block_q8_K *a = act;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        __m256i sumi = _mm256_setzero_si256();
#pragma GCC unroll 4
        for (int ib = 0; ib < 8; ib++) {
            const uint8_t *g = x[i].qs + 8 * ib;
            int h = x[i].qh[ib];
#define IQ3S(m) (int)halo_iq3s_grid[g[m] | (((h >> (m)) & 1) << 8)]
            __m256i grid = _mm256_set_epi32(IQ3S(7), IQ3S(6), IQ3S(5), IQ3S(4), IQ3S(3), IQ3S(2),
                                            IQ3S(1), IQ3S(0));
#undef IQ3S
            uint32_t s4;
            memcpy(&s4, x[i].signs + 4 * ib, 4);
            __m256i y = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)(a[i].qs + 32 * ib)),
                                         signs_from_bytes(s4));
            int ls = 1 + 2 * ((x[i].scales[ib / 2] >> (4 * (ib % 2))) & 0xf);
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(_mm256_maddubs_epi16(grid, y),
                                                            _mm256_set1_epi16((short)ls)));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(a[i].d * f16(x[i].d)), _mm256_cvtepi32_ps(sumi), acc);
    }
    return hsum_ps(acc);
}

/* ---- IQ1_S, IQ1_M: levels 8 * grid +- 1 (grid in -1, 0, 1) ------------------------------------
 */

/* 32 levels from four grid rows and four +-1 shifts (one per 8 weights). */
AVX2 static inline __m256i iq1_levels(uint64_t r0, uint64_t r1, uint64_t r2, uint64_t r3, int d0,
                                      int d1, int d2, int d3) {
    __m256i g = _mm256_set_epi64x((int64_t)r3, (int64_t)r2, (int64_t)r1, (int64_t)r0);
    __m256i delta = _mm256_set_epi64x((int64_t)(0x0101010101010101ull * (uint8_t)d3),
                                      (int64_t)(0x0101010101010101ull * (uint8_t)d2),
                                      (int64_t)(0x0101010101010101ull * (uint8_t)d1),
                                      (int64_t)(0x0101010101010101ull * (uint8_t)d0));
    return _mm256_add_epi8(_mm256_sign_epi8(_mm256_set1_epi8(8), g), delta);
}

AVX2 float halo_dot_iq1_s_avx2(int64_t n, const void *w, const void *act) {
    const block_iq1_s *x = w;
    const block_q8_K *a = act;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        __m256i sumi = _mm256_setzero_si256();
        for (int ib = 0; ib < 8; ib++) {
            uint16_t h = x[i].qh[ib];
            const uint8_t *q = x[i].qs + 4 * ib;
            int d = h & 0x8000 ? -1 : 1;
            __m256i lv = iq1_levels(halo_iq1s_grid[q[0] | ((h << 8) & 0x700)],
                                    halo_iq1s_grid[q[1] | ((h << 5) & 0x700)],
                                    halo_iq1s_grid[q[2] | ((h << 2) & 0x700)],
                                    halo_iq1s_grid[q[3] | ((h >> 1) & 0x700)], d, d, d, d);
            __m256i y = _mm256_loadu_si256((const __m256i *)(a[i].qs + 32 * ib));
            sumi = _mm256_add_epi32(
                sumi, _mm256_madd_epi16(mul_s8(lv, y),
                                        _mm256_set1_epi16((short)(2 * ((h >> 12) & 7) + 1))));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(a[i].d * (f16(x[i].d) * 0.125f)),
                              _mm256_cvtepi32_ps(sumi), acc);
    }
    return hsum_ps(acc);
}

AVX2 float halo_dot_iq1_m_avx2(int64_t n, const void *w, const void *act) {
    const block_iq1_m *x = w;
    const block_q8_K *a = act;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        uint16_t sc[4];
        memcpy(sc, x[i].scales, 8);
        float d = f16((uint16_t)((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) |
                                 (sc[3] & 0xf000)));
        __m256i sumi = _mm256_setzero_si256();
        for (int ib = 0; ib < 8; ib++) {
            const uint8_t *q = x[i].qs + 4 * ib, *qh = x[i].qh + 2 * ib;
            __m256i lv =
                iq1_levels(halo_iq1s_grid[q[0] | ((qh[0] << 8) & 0x700)],
                           halo_iq1s_grid[q[1] | ((qh[0] << 4) & 0x700)],
                           halo_iq1s_grid[q[2] | ((qh[1] << 8) & 0x700)],
                           halo_iq1s_grid[q[3] | ((qh[1] << 4) & 0x700)], qh[0] & 0x08 ? -1 : 1,
                           qh[0] & 0x80 ? -1 : 1, qh[1] & 0x08 ? -1 : 1, qh[1] & 0x80 ? -1 : 1);
            __m256i y = _mm256_loadu_si256((const __m256i *)(a[i].qs + 32 * ib));
            int s0 = 2 * ((sc[ib / 2] >> (6 * (ib % 2))) & 7) + 1,
                s1 = 2 * ((sc[ib / 2] >> (6 * (ib % 2) + 3)) & 7) + 1;
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(mul_s8(lv, y), pair16(s0, s1)));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(a[i].d * (d * 0.125f)), _mm256_cvtepi32_ps(sumi), acc);
    }
    return hsum_ps(acc);
}
