/* Tiled matrix-product kernels (src/quant/gemm.h) on cache-resident data: nanoseconds per
 * (row, token) pair and weight GB/s for one token (a decode step's matrix-vector product) and
 * for 8 (a prefill tile), per type of DeepSeek V4's q2 mix. Thread CPU time, best of 7, so a
 * busy machine's time slicing does not count; HALO_QUANT_NO_VBMI=1 measures the kernels without
 * AVX-512 VBMI for an A/B on the same machine.
 *   usage: bench_gemm [N (row length, default 4096)] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../bench_util.h"
#include "halo/quant.h"
#include "halo/types.h"
#include "quant/gemm.h"
#include "quant/kernels.h"

enum { ROWS = 64, REPS = 200, BEST_OF = 7 };

static double cpu_now(void) {
    return bench_seconds(CLOCK_THREAD_CPUTIME_ID);
}
static uint32_t next(void) {
    return (uint32_t)bench_rand();
}

/* Random weight rows: random bits, then each block's f16 scale fields set small and finite. */
static unsigned char *random_rows(uint32_t type, int64_t n, uint64_t *row_bytes) {
    const halo_type_info *info = halo_type_info_get(type);
    halo_type_bytes(type, (uint64_t)n, row_bytes);
    unsigned char *w = malloc(*row_bytes * ROWS);
    for (uint64_t i = 0; i < *row_bytes * ROWS; i++)
        w[i] = (unsigned char)next();
    uint16_t d = 0x1400; /* 2^-10 */
    if (type == HALO_TYPE_F16) {
        for (uint64_t i = 0; i < (uint64_t)n * ROWS; i++) {
            uint16_t h = (uint16_t)(d + next() % 256);
            memcpy(w + 2 * i, &h, 2);
        }
        return w;
    }
    for (uint64_t b = 0; b < (uint64_t)(n / info->block_size) * ROWS; b++) {
        unsigned char *p = w + b * info->block_bytes;
        if (type == HALO_TYPE_Q2_K) {
            memcpy(p + 80, &d, 2); /* d, dmin */
            memcpy(p + 82, &d, 2);
        } else {
            memcpy(p, &d, 2);
        }
    }
    return w;
}

typedef void (*gemm_fn)(int64_t, const void *, size_t, int64_t, const void *const *, int,
                        float *const *);

/* GEMM_AB=1: IQ2_XXS's two AVX-512 kernels (with and without VBMI) alternated within this
 * process, best of BEST_OF rounds each: processes on this VM run at one of two speeds (the
 * same kernel 98-108 or 131-160 ns a row), so only an A/B within one process compares them. */
static void iq2_ab(int64_t n, const unsigned char *w, uint64_t rb, const void *const *act,
                   float *const *y) {
    gemm_fn fn[2] = {halo_gemm_iq2_xxs_vbmi, halo_gemm_iq2_xxs_avx512};
    static const char *const name[2] = {"vbmi", "plain"};
    for (int nt = 1; nt <= HALO_GEMM_MAX_TOK; nt++) {
        double best[2] = {1e30, 1e30};
        for (int b = 0; b < BEST_OF; b++)
            for (int k = 0; k < 2; k++) {
                double t0 = cpu_now();
                for (int r = 0; r < REPS; r++)
                    fn[k](n, w, rb, ROWS, act, nt, y);
                double dt = (cpu_now() - t0) / REPS;
                best[k] = dt < best[k] ? dt : best[k];
            }
        printf("| iq2_xxs A/B | %d | %s %.1f | %s %.1f |\n", nt, name[0], best[0] * 1e9 / ROWS / nt,
               name[1], best[1] * 1e9 / ROWS / nt);
    }
}

int main(int argc, char **argv) {
    int64_t n = argc > 1 ? atoll(argv[1]) : 4096;
    if (n <= 0 || n % 256 != 0) {
        fprintf(stderr, "bench_gemm: N must be a positive multiple of 256\n");
        return 2;
    }
    const uint32_t types[] = {HALO_TYPE_IQ2_XXS, HALO_TYPE_Q2_K, HALO_TYPE_Q8_0, HALO_TYPE_F16};
    printf("level %s, row length %lld, %d rows\n", halo_quant_level_name(halo_quant_level_best()),
           (long long)n, ROWS);
    printf("| type | tokens | ns per (row, token) | weight GB/s |\n|---|---:|---:|---:|\n");
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        uint32_t type = types[k];
        uint64_t rb = 0, ab = 0;
        unsigned char *w = random_rows(type, n, &rb);
        uint32_t at = (uint32_t)halo_quant_act_type(type);
        halo_type_bytes(at, (uint64_t)n, &ab);
        float *x = malloc((size_t)n * sizeof *x), out[HALO_GEMM_MAX_TOK][ROWS];
        unsigned char *acts = malloc(ab * HALO_GEMM_MAX_TOK);
        const void *act[HALO_GEMM_MAX_TOK];
        float *y[HALO_GEMM_MAX_TOK];
        for (int j = 0; j < HALO_GEMM_MAX_TOK; j++) {
            for (int64_t i = 0; i < n; i++)
                x[i] = (float)(next() % 2001) / 1000.0f - 1.0f;
            halo_quant_quantize_row(at, x, acts + j * ab, n, NULL);
            act[j] = acts + j * ab;
            y[j] = out[j];
        }
        const char *ab_env = getenv("GEMM_AB");
        if (ab_env && *ab_env == '1' && type == HALO_TYPE_IQ2_XXS && halo_quant_vbmi())
            iq2_ab(n, w, rb, act, y);
        const char *all_env = getenv("GEMM_ALL_T"); /* every token count, not just 1 and 8 */
        int all_t = all_env && *all_env == '1';
        for (int nt = 1; nt <= HALO_GEMM_MAX_TOK; nt = all_t ? nt + 1 : nt * HALO_GEMM_MAX_TOK) {
            double best = 1e30;
            for (int b = 0; b < BEST_OF; b++) {
                double t0 = cpu_now();
                for (int r = 0; r < REPS; r++)
                    halo_quant_gemm(type, n, w, rb, ROWS, act, nt, y);
                double dt = (cpu_now() - t0) / REPS;
                best = dt < best ? dt : best;
            }
            printf("| %s | %d | %.1f | %.2f |\n", halo_type_name(type), nt, best * 1e9 / ROWS / nt,
                   (double)(rb * ROWS) / best / 1e9);
        }
        free(w);
        free(x);
        free(acts);
    }
    return 0;
}
