/* f32 row kernels (src/quant/f32rows.h), which attention uses: at every level each dot is
 * bit-identical to that level's f32 dot product of the query and the row, and the weighted sum
 * of rows is bit-identical to the plain loop (product rounded, then added, row by row). Lengths
 * cover attention's head width (512), the indexer's (128) and lengths that leave the SIMD
 * kernels' 64-, 16- and 1-element tails; row counts cover whole groups of four and remainders. */
#include "check.h"
#include "quant/f32rows.h"
#include "quant_testutil.h"

#include <stdlib.h>

enum { MAX_ROWS = 11 };
static const int64_t lengths[] = {512, 128, 200, 77, 7};

static void f32_dots_match_the_level_dot_bitwise(void) {
    int mismatches = 0;
    for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; li++) {
        int64_t n = lengths[li];
        float *q = malloc((size_t)n * 4), *buf = malloc((size_t)n * 4 * MAX_ROWS);
        const float *rows[MAX_ROWS];
        for (int64_t i = 0; i < n; i++)
            q[i] = rng_normal();
        for (int r = 0; r < MAX_ROWS; r++) {
            /* rows in reverse memory order: the kernels take pointers, not a stride */
            rows[r] = buf + (size_t)(MAX_ROWS - 1 - r) * (size_t)n;
            for (int64_t i = 0; i < n; i++)
                buf[(size_t)r * (size_t)n + (size_t)i] = rng_normal();
        }
        for (int lvl = 0; lvl <= (int)halo_quant_level_best(); lvl++)
            for (int nr = 0; nr <= MAX_ROWS; nr++) {
                float out[MAX_ROWS];
                halo_quant_f32_dots_at((halo_quant_level)lvl, n, q, rows, nr, out);
                for (int r = 0; r < nr; r++) {
                    float want =
                        halo_quant_vec_dot_at((halo_quant_level)lvl, HALO_TYPE_F32, n, q, rows[r]);
                    if (memcmp(&want, &out[r], 4) != 0 && mismatches++ < 3)
                        fprintf(stderr, "%s n %lld nr %d row %d: %.9g, dot %.9g\n",
                                halo_quant_level_name((halo_quant_level)lvl), (long long)n, nr, r,
                                out[r], want);
                }
            }
        free(q);
        free(buf);
    }
    CHECK_INT(mismatches, 0);
}

static void f32_axpys_match_the_plain_loop_bitwise(void) {
    int mismatches = 0;
    for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; li++) {
        int64_t n = lengths[li];
        float *buf = malloc((size_t)n * 4 * MAX_ROWS), *y0 = malloc((size_t)n * 4);
        float *want = malloc((size_t)n * 4), *got = malloc((size_t)n * 4), w[MAX_ROWS];
        const float *rows[MAX_ROWS];
        for (int r = 0; r < MAX_ROWS; r++) {
            rows[r] = buf + (size_t)r * (size_t)n;
            w[r] = rng_uniform();
            for (int64_t i = 0; i < n; i++)
                buf[(size_t)r * (size_t)n + (size_t)i] = rng_normal();
        }
        for (int64_t i = 0; i < n; i++)
            y0[i] = rng_normal();
        for (int lvl = 0; lvl <= (int)halo_quant_level_best(); lvl++)
            for (int nr = 0; nr <= MAX_ROWS; nr++) {
                memcpy(want, y0, (size_t)n * 4);
                for (int r = 0; r < nr; r++)
                    for (int64_t d = 0; d < n; d++) {
                        volatile float p = w[r] * rows[r][d]; /* rounded: no fused multiply-add */
                        want[d] += p;
                    }
                memcpy(got, y0, (size_t)n * 4);
                halo_quant_f32_axpys_at((halo_quant_level)lvl, n, got, rows, w, nr);
                for (int64_t d = 0; d < n; d++)
                    if (memcmp(&want[d], &got[d], 4) != 0 && mismatches++ < 3)
                        fprintf(stderr, "%s n %lld nr %d d %lld: %.9g, loop %.9g\n",
                                halo_quant_level_name((halo_quant_level)lvl), (long long)n, nr,
                                (long long)d, got[d], want[d]);
            }
        free(buf);
        free(y0);
        free(want);
        free(got);
    }
    CHECK_INT(mismatches, 0);
}

int main(void) {
    RUN(f32_dots_match_the_level_dot_bitwise);
    RUN(f32_axpys_match_the_plain_loop_bitwise);
    return check_report();
}
