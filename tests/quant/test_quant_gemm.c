/* Tiled matrix products (src/quant/gemm.h): every (row, token) pair of a tile, at every level,
 * bit-identical to that level's single-row dot product, which test_quant_dot holds to the
 * double-precision reference. Row and token counts cover whole tiles and remainders; lengths
 * cover rows whose block count is a multiple of the kernels' 4-block step and rows that leave
 * the AVX-512 kernels' AVX2 tail. */
#include "check.h"
#include "quant/fp.h"
#include "quant/gemm.h"
#include "quant_testutil.h"

#include <stdlib.h>
#include <string.h>

enum { ROWS = 5, MAXT = HALO_GEMM_MAX_TOK };

static void gemm_pairs_match_the_single_row_dot_bitwise(void) {
    halo_quant_level best = halo_quant_level_best();
    for (size_t k = 0; k < 2 * N_QUANT_TEST_TYPES; k++) {
        uint32_t t = quant_test_types[k / 2];
        const halo_type_info *info = halo_type_info_get(t);
        int64_t n = info->block_size * (k % 2 ? (info->block_size == 256 ? 17 : 131) : 256);
        uint64_t row_bytes = 0, act_bytes = 0;
        halo_type_bytes(t, (uint64_t)n, &row_bytes);
        uint32_t at = (uint32_t)halo_quant_act_type(t);
        halo_type_bytes(at, (uint64_t)n, &act_bytes);
        uint8_t *w = malloc(row_bytes * ROWS), *acts = malloc(act_bytes * MAXT);
        float *x = malloc((size_t)n * 4), out[MAXT][ROWS];
        for (int r = 0; r < ROWS; r++)
            for (int64_t b = 0; b < n / info->block_size; b++)
                random_block(t, w + r * row_bytes + b * info->block_bytes, SCALE_TYPICAL);
        const void *act[MAXT];
        float *y[MAXT];
        for (int j = 0; j < MAXT; j++) {
            for (int64_t i = 0; i < n; i++)
                x[i] = rng_normal() * (j % 2 ? 1.0f : 30.0f);
            halo_error err = {0};
            CHECK_INT(halo_quant_quantize_row(at, x, acts + j * act_bytes, n, &err), HALO_OK);
            act[j] = acts + j * act_bytes;
            y[j] = out[j];
        }
        int mismatches = 0;
        for (int lvl = 0; lvl <= (int)best; lvl++)
            for (int nt = 1; nt <= MAXT; nt++)
                for (int nr = 1; nr <= ROWS; nr += 2) {
                    memset(out, 0xff, sizeof out);
                    halo_quant_gemm_at((halo_quant_level)lvl, t, n, w, row_bytes, nr, act, nt, y);
                    for (int j = 0; j < nt; j++)
                        for (int r = 0; r < nr; r++) {
                            float want = halo_quant_vec_dot_at((halo_quant_level)lvl, t, n,
                                                               w + r * row_bytes, act[j]);
                            if (memcmp(&want, &out[j][r], 4) != 0 && mismatches++ < 3)
                                fprintf(stderr, "%s %s nt %d: row %d token %d: %.9g, dot %.9g\n",
                                        info->name, halo_quant_level_name((halo_quant_level)lvl),
                                        nt, r, j, out[j][r], want);
                        }
                }
        CHECK_INT(mismatches, 0);
        free(w);
        free(acts);
        free(x);
    }
}

/* Q8_0 rows take their own kernels by token count: one token its one-row kernel (16 blocks'
 * scales converted together, the main loop's 4-block steps in 16-block groups, then single
 * blocks, then the AVX2 tail), several tokens prepared 4-row x 2-token tiles (16 blocks'
 * scales at a time, then 4-block steps, then the tail) or, for fewer than 4 rows or rows too
 * long to prepare, unprepared 2 x 4 tiles. Every (row, token) pair bitwise equal to the row
 * dot at lengths that end in each of those parts, for row and token counts that leave every
 * kind of remainder tile. */
static void gemm_q8_0_matches_the_row_dot_at_every_length(void) {
    enum { NR = 8, NT = 5 };
    static const int64_t blocks[] = {1, 4, 8, 12, 16, 17, 20, 36, 100, 128, 129, 131, 256, 260};
    static const int nts[] = {1, 2, 3, 5}, nrs[] = {NR, 7, 5, 3};
    int mismatches = 0;
    for (size_t k = 0; k < sizeof blocks / sizeof blocks[0]; k++) {
        int64_t n = 32 * blocks[k];
        uint64_t rb = (uint64_t)blocks[k] * 34; /* a Q8_0 block: f16 scale, 32 int8 */
        uint8_t *w = malloc(rb * NR), *a = malloc(rb * NT);
        float *x = malloc((size_t)n * 4), out[NT][NR];
        for (int r = 0; r < NR; r++)
            for (int64_t b = 0; b < blocks[k]; b++)
                random_block(HALO_TYPE_Q8_0, w + r * rb + b * 34,
                             (r + b) % 5 ? SCALE_TYPICAL
                             : b % 2     ? SCALE_SUBNORMAL
                                         : SCALE_ZERO);
        const void *act[NT];
        float *y[NT];
        for (int j = 0; j < NT; j++) {
            for (int64_t i = 0; i < n; i++)
                x[i] = rng_normal() * 10.0f;
            halo_error err = {0};
            CHECK_INT(halo_quant_quantize_row(HALO_TYPE_Q8_0, x, a + j * rb, n, &err), HALO_OK);
            act[j] = a + j * rb;
            y[j] = out[j];
        }
        for (size_t ti = 0; ti < sizeof nts / sizeof nts[0]; ti++)
            for (size_t ri = 0; ri < sizeof nrs / sizeof nrs[0]; ri++) {
                int nt = nts[ti], nr = nrs[ri];
                halo_quant_gemm(HALO_TYPE_Q8_0, n, w, rb, nr, act, nt, y);
                for (int j = 0; j < nt; j++)
                    for (int r = 0; r < nr; r++) {
                        float want = halo_quant_vec_dot(HALO_TYPE_Q8_0, n, w + r * rb, act[j]);
                        if (memcmp(&want, &out[j][r], 4) != 0 && mismatches++ < 3)
                            fprintf(stderr,
                                    "q8_0 %lld blocks, %d rows, %d tokens: row %d token "
                                    "%d: %.9g, dot %.9g\n",
                                    (long long)blocks[k], nr, nt, r, j, out[j][r], want);
                    }
            }
        free(w);
        free(a);
        free(x);
    }
    CHECK_INT(mismatches, 0);
}

/* F16 rows take tiles of as many tokens as keep their f32 activations within 32 KiB (4 up to
 * 2048-wide rows, 2 up to 4096, then 1): lengths on each side of those steps, every token count,
 * bitwise equal to the row dot. */
static void gemm_f16_matches_the_row_dot_for_every_tile_width(void) {
    enum { NR = 3, NT = HALO_GEMM_MAX_TOK };
    static const int64_t lengths[] = {2048, 2050, 4096, 4100, 8192, 9000};
    int mismatches = 0;
    for (size_t k = 0; k < sizeof lengths / sizeof lengths[0]; k++) {
        int64_t n = lengths[k];
        uint16_t *w = malloc((size_t)(n * NR) * 2);
        float *x = malloc((size_t)(n * NT) * 4), out[NT][NR];
        for (int64_t i = 0; i < n * NR; i++)
            w[i] = halo_f32_to_f16(rng_normal());
        const void *act[NT];
        float *y[NT];
        for (int j = 0; j < NT; j++) {
            for (int64_t i = 0; i < n; i++)
                x[j * n + i] = rng_normal();
            act[j] = x + j * n;
            y[j] = out[j];
        }
        for (int nt = 1; nt <= NT; nt++) {
            halo_quant_gemm(HALO_TYPE_F16, n, w, (size_t)n * 2, NR, act, nt, y);
            for (int j = 0; j < nt; j++)
                for (int r = 0; r < NR; r++) {
                    float want = halo_quant_vec_dot(HALO_TYPE_F16, n, w + r * n, act[j]);
                    if (memcmp(&want, &out[j][r], 4) != 0 && mismatches++ < 3)
                        fprintf(stderr, "f16 %lld wide, %d tokens: row %d token %d: %.9g, %.9g\n",
                                (long long)n, nt, r, j, out[j][r], want);
                }
        }
        free(w);
        free(x);
    }
    CHECK_INT(mismatches, 0);
}

/* The types of DeepSeek V4's mixes (q2: Q8_0, IQ2_XXS, Q2_K, F16; q2q4: Q4_K; mxfp4) have
 * tiled kernels where the CPU has AVX-512, so the test above compares them (not only the
 * per-pair fallback). */
static void gemm_has_tiled_kernels_for_the_dsv4_mixes(void) {
    int want = halo_quant_level_best() == HALO_QUANT_AVX512;
    CHECK_INT(halo_quant_gemm_tiled(HALO_TYPE_Q8_0), want);
    CHECK_INT(halo_quant_gemm_tiled(HALO_TYPE_Q2_K), want);
    CHECK_INT(halo_quant_gemm_tiled(HALO_TYPE_IQ2_XXS), want);
    CHECK_INT(halo_quant_gemm_tiled(HALO_TYPE_Q4_K), want);
    CHECK_INT(halo_quant_gemm_tiled(HALO_TYPE_MXFP4), want);
    CHECK_INT(halo_quant_gemm_tiled(HALO_TYPE_F16), want);
}

int main(void) {
    RUN(gemm_pairs_match_the_single_row_dot_bitwise);
    RUN(gemm_q8_0_matches_the_row_dot_at_every_length);
    RUN(gemm_f16_matches_the_row_dot_for_every_tile_width);
    RUN(gemm_has_tiled_kernels_for_the_dsv4_mixes);
    return check_report();
}
