/* IQ2_XXS tiled products with AVX-512 VBMI: the codebook looked up in registers instead of
 * memory. Each of IQ2_XXS's 256 grid rows holds 8 magnitudes from {8, 25, 43}, so it packs into
 * a 16-bit code (2 bits a weight); the 256 codes fill 8 registers, and one super-block's 32 grid
 * indices become its 32 codes with four two-table permutes (vpermi2w) and three blends. Each
 * code is then spread over 8 bytes (vpermw), its 2-bit fields cut out (vpmultishiftqb) and
 * mapped to magnitudes (vpermb, whose 64-entry table ignores the neighbouring fields above
 * them). The scalar path does 32 table loads and ~24 inserts a super-block; this one has no
 * loads and ~20 vector operations. The 8 sub-block scales are cut out of the super-block in
 * one register and spread with one vpermw per pair; scaled pair sums are added with vpdpwssd.
 * On 2 Zen 4 cores (512-bit operations take two passes) the vector pipes bound this kernel:
 * those three changes took a 4096-wide row against one token from 188 to 158 ns
 * (bench/cpu/bench_gemm), while the sign masks stay scalar (pdep) on the integer pipes: done
 * in vectors (vpmultishiftqb, a GF(2) parity, vpermb and vptestmb per pair) they cost 19 ns
 * more.
 *
 * The weights land in the same byte lanes as gemm_avx512.c's iq2_xxs_tiled_row, and the tokens'
 * side is that kernel's, so every result is bit-identical to halo_dot_iq2_xxs_avx2 (the dot of
 * the AVX-512 level for IQ2_XXS), which tests/quant/test_quant_gemm checks. */
#include "quant/blocks.h"
#include "quant/gemm.h"
#include "quant/grids.h"
#include "quant/kernels.h"

#include <immintrin.h>
#include <stdbool.h>
#include <string.h>

#define VBMI                                                                                       \
    __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi,avx2,fma,f16c,bmi2")))
#define INLINE VBMI static inline __attribute__((always_inline))

static uint16_t codes[256]; /* grid row e as 2-bit level indices, weight j at bits 2j..2j+1 */
static const uint8_t levels[3] = {8, 25, 43};

bool halo_iq2_xxs_vbmi_init(void) {
    for (int e = 0; e < 256; e++) {
        uint16_t c = 0;
        for (int j = 0; j < 8; j++) {
            uint8_t v = (uint8_t)(halo_iq2xxs_grid[e] >> (8 * j));
            int l = v == levels[0] ? 0 : v == levels[1] ? 1 : v == levels[2] ? 2 : -1;
            if (l < 0) return false; /* not the codebook this packing assumes */
            c |= (uint16_t)(l << (2 * j));
        }
        codes[e] = c;
    }
    return true;
}

INLINE float f16(uint16_t h) {
    return _cvtsh_ss(h);
}

INLINE float hsum256_ps(__m256 v) { /* simd_avx2.c's, the same adds in the same order */
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* gemm_avx512.c's iq_sign_mask: the byte mask of negative weights of two sub-blocks. */
INLINE __mmask64 sign_mask(uint32_t lo, uint32_t hi) {
    uint64_t bits = (uint64_t)(lo & 0x0fffffff) | (uint64_t)(hi & 0x0fffffff) << 28;
    uint64_t b = _pdep_u64(bits, 0x7f7f7f7f7f7f7f7full), p = b ^ (b >> 4);
    p ^= p >> 2;
    p ^= p >> 1;
    return (__mmask64)(b | (p & 0x0101010101010101ull) << 7);
}

typedef struct decoder {
    __m512i table[8];      /* codes 32k .. 32k+31 */
    __m512i pick;          /* word m <- index byte 8 (m / 4) + m % 4 */
    __m512i spread[4];     /* register z: qword g <- code 8z + g */
    __m512i shifts;        /* byte j of a qword <- bits 2j.. */
    __m512i lut;           /* level index -> magnitude */
    __m512i scale_pick[4]; /* words 0-15 <- word 8j + 2, 16-31 <- word 8j + 6 */
} decoder;

INLINE void decoder_init(decoder *d) {
    for (int k = 0; k < 8; k++)
        d->table[k] = _mm512_loadu_si512((const void *)(codes + 32 * k));
    uint8_t pick[64] = {0}, shifts[64], lut[64] = {0};
    uint16_t spread[4][32] = {{0}};
    for (int m = 0; m < 32; m++)
        pick[2 * m] = (uint8_t)(8 * (m / 4) + m % 4);
    for (int z = 0; z < 4; z++)
        for (int g = 0; g < 8; g++)
            spread[z][4 * g] = (uint16_t)(8 * z + g);
    for (int i = 0; i < 64; i++) {
        shifts[i] = (uint8_t)(2 * (i % 8));
        lut[i] = i % 4 < 3 ? levels[i % 4] : 0; /* bits 2-5 of an index: the next fields */
    }
    d->pick = _mm512_loadu_si512((const void *)pick);
    for (int z = 0; z < 4; z++)
        d->spread[z] = _mm512_loadu_si512((const void *)spread[z]);
    d->shifts = _mm512_loadu_si512((const void *)shifts);
    d->lut = _mm512_loadu_si512((const void *)lut);
    for (int j = 0; j < 4; j++)
        d->scale_pick[j] =
            _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi16((short)(8 * j + 2))),
                               _mm256_set1_epi16((short)(8 * j + 6)), 1);
}

/* One super-block's 256 magnitudes: g[z] = sub-blocks 2z (low half) and 2z + 1. */
INLINE void decode(const decoder *d, const uint8_t *q, __m512i g[4]) {
    __m512i idx = _mm512_maskz_permutexvar_epi8(0x5555555555555555ull, d->pick,
                                                _mm512_loadu_si512((const void *)q));
    __m512i c0 = _mm512_permutex2var_epi16(d->table[0], idx, d->table[1]);
    __m512i c1 = _mm512_permutex2var_epi16(d->table[2], idx, d->table[3]);
    __m512i c2 = _mm512_permutex2var_epi16(d->table[4], idx, d->table[5]);
    __m512i c3 = _mm512_permutex2var_epi16(d->table[6], idx, d->table[7]);
    __mmask32 b6 = _mm512_test_epi16_mask(idx, _mm512_set1_epi16(64));
    __mmask32 b7 = _mm512_test_epi16_mask(idx, _mm512_set1_epi16(128));
    __m512i code = _mm512_mask_mov_epi16(_mm512_mask_mov_epi16(c0, b6, c1), b7,
                                         _mm512_mask_mov_epi16(c2, b6, c3));
    for (int z = 0; z < 4; z++) {
        __m512i f =
            _mm512_multishift_epi64_epi8(d->shifts, _mm512_permutexvar_epi16(d->spread[z], code));
        g[z] = _mm512_permutexvar_epi8(f, d->lut);
    }
}

/* gemm_avx512.c's iq2_xxs_tiled_row with the magnitudes from decode(). */
INLINE void row(const int T, const decoder *d, int64_t nsb, const block_iq2_xxs *x,
                const block_q8_K *const *a, float *const *y, int64_t r) {
    __m256 acc[HALO_GEMM_MAX_TOK];
    for (int t = 0; t < T; t++)
        acc[t] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nsb; i++) {
        const uint8_t *q = (const uint8_t *)x[i].qs;
        __m512i g[4], sc[4];
        __mmask64 neg[4];
        decode(d, q, g);
        /* 2s + 1 of sub-block k in word 4k + 2 (s: the top 4 bits of its second dword) */
        __m512i s4 = _mm512_srli_epi32(_mm512_loadu_si512((const void *)q), 28);
        __m512i s21 = _mm512_add_epi32(_mm512_add_epi32(s4, s4), _mm512_set1_epi32(1));
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) {
            uint32_t s0, s1;
            memcpy(&s0, q + 16 * j + 4, 4);
            memcpy(&s1, q + 16 * j + 12, 4);
            neg[j] = sign_mask(s0, s1);
            sc[j] = _mm512_permutexvar_epi16(d->scale_pick[j], s21);
        }
        float dw = f16(x[i].d) * 0.125f;
        for (int t = 0; t < T; t++) {
            __m512i sum = _mm512_setzero_si512();
#pragma GCC unroll 4
            for (int j = 0; j < 4; j++) {
                __m512i v = _mm512_loadu_si512((const void *)(a[t][i].qs + 64 * j));
                v = _mm512_mask_sub_epi8(v, neg[j], _mm512_setzero_si512(), v);
                sum = _mm512_dpwssd_epi32(sum, _mm512_maddubs_epi16(g[j], v), sc[j]);
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

#define ROWS(T)                                                                                    \
    VBMI static void rows_##T(const decoder *d, int64_t nsb, const unsigned char *w,               \
                              size_t w_stride, int64_t nr, const block_q8_K *const *a,             \
                              float *const *y) {                                                   \
        for (int64_t r = 0; r < nr; r++)                                                           \
            row(T, d, nsb, (const block_iq2_xxs *)(w + (size_t)r * w_stride), a, y, r);            \
    }
ROWS(1)
ROWS(2)
ROWS(3)
ROWS(4)
ROWS(5)
ROWS(6)
ROWS(7)
ROWS(8)

/* One token, each row's successor prefetched pf bytes ahead (halo_quant_row_prefetch). */
VBMI static void rows_1_prefetch(const decoder *d, int64_t nsb, const unsigned char *w,
                                 size_t w_stride, int64_t nr, const block_q8_K *const *a,
                                 float *const *y, int pf) {
    for (int64_t r = 0; r < nr; r++) {
        halo_prefetch_span(w + (size_t)r * w_stride + pf, w_stride);
        row(1, d, nsb, (const block_iq2_xxs *)(w + (size_t)r * w_stride), a, y, r);
    }
}

VBMI void halo_gemm_iq2_xxs_vbmi(int64_t n, const void *w, size_t w_stride, int64_t nr,
                                 const void *const *act, int nt, float *const *y) {
    static void (*const fn[8])(const decoder *, int64_t, const unsigned char *, size_t, int64_t,
                               const block_q8_K *const *, float *const *) = {
        rows_1, rows_2, rows_3, rows_4, rows_5, rows_6, rows_7, rows_8};
    decoder d;
    decoder_init(&d);
    int pf = nt == 1 ? halo_quant_row_prefetch() : 0;
    if (pf) {
        rows_1_prefetch(&d, n / QK_K, w, w_stride, nr, (const block_q8_K *const *)act, y, pf);
        return;
    }
    fn[nt - 1](&d, n / QK_K, w, w_stride, nr, (const block_q8_K *const *)act, y);
}
