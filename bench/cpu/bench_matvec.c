/* One token's matrix-vector product over weights far larger than the caches (a decode step's
 * output head: 129,280 rows of 4,096 Q8_0 weights, 563 MB), split across a thread pool the way
 * the CPU backend splits a projection (16-row tasks), against plain reads of the same bytes
 * with the same threads and split: one sequential stream, and two rows read side by side. They
 * run alternately in one process, so a busy machine slows all alike and the ratios (the
 * kernel's share of the read bandwidth) stay comparable between runs where the absolute
 * numbers do not.
 *   usage: bench_matvec [THREADS (default 2)] [ROWS (129280)] [N (4096)] [PASSES (9)]
 *                       [ROWS_PER_TASK (16; the backend takes up to 64 for one token)]
 * HALO_Q8_ROW1 / HALO_Q8_PREFETCH pick the one-token kernel (src/quant/kernels.h).
 * Prints the median and best GB/s of each and the ratio of the medians to the plain read's. */
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "../bench_util.h"
#include "core/threadpool.h"
#include "halo/quant.h"
#include "halo/types.h"
#include "quant/gemm.h"
#include "quant/kernels.h"

enum { MAX_PASSES = 64 };
static int64_t rows_per_task = 16;

static double now(void) {
    return bench_seconds(CLOCK_MONOTONIC);
}
static uint32_t next(void) {
    return (uint32_t)bench_rand();
}

typedef struct ctx {
    const unsigned char *w;
    uint64_t row_bytes;
    int64_t n, rows;
    const void *act;
    float *y;
    __m256i *sums; /* one per task: keeps the reads */
} ctx;

static void gemm_task(void *p, int64_t i) {
    ctx *c = p;
    int64_t r0 = i * rows_per_task,
            nr = c->rows - r0 < rows_per_task ? c->rows - r0 : rows_per_task;
    float *y = c->y + r0;
    halo_quant_gemm(HALO_TYPE_Q8_0, c->n, c->w + (uint64_t)r0 * c->row_bytes, c->row_bytes, nr,
                    &c->act, 1, &y);
}

__attribute__((target("avx2"))) static void read_task(void *p, int64_t i) {
    ctx *c = p;
    int64_t r0 = i * rows_per_task,
            nr = c->rows - r0 < rows_per_task ? c->rows - r0 : rows_per_task;
    const unsigned char *s = c->w + (uint64_t)r0 * c->row_bytes;
    uint64_t bytes = (uint64_t)nr * c->row_bytes;
    __m256i a = _mm256_setzero_si256(), b = a;
    uint64_t k = 0;
    for (; k + 64 <= bytes; k += 64) {
        a = _mm256_xor_si256(a, _mm256_loadu_si256((const __m256i *)(s + k)));
        b = _mm256_xor_si256(b, _mm256_loadu_si256((const __m256i *)(s + k + 32)));
    }
    c->sums[i] = _mm256_xor_si256(a, b);
}

/* Rows r and r + 1 read together, block by block, as q8_0_tile_2_1 reads them. */
__attribute__((target("avx2"))) static void read2_task(void *p, int64_t i) {
    ctx *c = p;
    int64_t r0 = i * rows_per_task,
            nr = c->rows - r0 < rows_per_task ? c->rows - r0 : rows_per_task;
    __m256i a = _mm256_setzero_si256(), b = a;
    int64_t nb = c->n / 32;
    for (int64_t r = r0; r < r0 + nr; r += 2) {
        const unsigned char *x0 = c->w + (uint64_t)r * c->row_bytes, *x1 = x0 + c->row_bytes;
        for (int64_t k = 0; k < nb; k++) {
            a = _mm256_xor_si256(a, _mm256_loadu_si256((const __m256i *)(x0 + 34 * k + 2)));
            b = _mm256_xor_si256(b, _mm256_loadu_si256((const __m256i *)(x1 + 34 * k + 2)));
        }
    }
    c->sums[i] = _mm256_xor_si256(a, b);
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    uint32_t threads = argc > 1 ? (uint32_t)atoi(argv[1]) : 2;
    int64_t rows = argc > 2 ? atoll(argv[2]) : 129280, n = argc > 3 ? atoll(argv[3]) : 4096;
    int passes = argc > 4 ? atoi(argv[4]) : 9;
    if (argc > 5) rows_per_task = atoll(argv[5]);
    if (threads < 1 || rows < 1 || n < 32 || n % 32 || passes < 1 || passes > MAX_PASSES ||
        rows_per_task < 2 || rows_per_task % 2) {
        fprintf(stderr,
                "usage: %s [THREADS] [ROWS] [N, a multiple of 32] [PASSES <= 64] [ROWS_PER_TASK]\n",
                argv[0]);
        return 2;
    }
    uint64_t rb = 0, ab = 0;
    halo_type_bytes(HALO_TYPE_Q8_0, (uint64_t)n, &rb);
    halo_type_bytes(HALO_TYPE_Q8_0, (uint64_t)n, &ab);
    size_t total = (size_t)(rb * (uint64_t)rows);
    unsigned char *w =
        mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    int64_t tasks = (rows + rows_per_task - 1) / rows_per_task;
    float *x = malloc((size_t)n * sizeof *x), *y = malloc((size_t)rows * sizeof *y);
    void *act = malloc(ab);
    __m256i *sums = aligned_alloc(32, (size_t)tasks * sizeof *sums);
    halo_threadpool *pool = halo_threadpool_create(threads);
    if (w == MAP_FAILED || !x || !y || !act || !sums || !pool) {
        fprintf(stderr, "bench_matvec: out of memory\n");
        return 1;
    }
    madvise(w, total, MADV_HUGEPAGE); /* as the loader's arena */
    for (size_t i = 0; i < total; i += 4) {
        uint32_t v = next();
        memcpy(w + i, &v, total - i < 4 ? total - i : 4);
    }
    for (size_t b = 0; b < total / 34; b++) {
        uint16_t d = (uint16_t)(0x1400 + next() % 256); /* small finite f16 scales */
        memcpy(w + 34 * b, &d, 2);
    }
    for (int64_t i = 0; i < n; i++)
        x[i] = (float)(next() % 2001) / 1000.0f - 1.0f;
    halo_quant_quantize_row(HALO_TYPE_Q8_0, x, act, n, NULL);
    ctx c = {w, rb, n, rows, act, y, sums};
    /* Per pass: a plain read, the same bytes read as two rows side by side (the 2-row
     * tile's access pattern, no arithmetic), the matvec. */
    static const char *const names[3] = {"read, one stream", "read, rows in pairs", "q8_0 matvec"};
    halo_task_fn fns[3] = {read_task, read2_task, gemm_task};
    double gbs[3][MAX_PASSES];
    halo_threadpool_run(pool, tasks, gemm_task, &c); /* warm up */
    for (int p = 0; p < passes; p++)
        for (int k = 0; k < 3; k++) {
            double t0 = now();
            halo_threadpool_run(pool, tasks, fns[k], &c);
            gbs[k][p] = (double)total / (now() - t0) / 1e9;
        }
    static const char *const modes[] = {"row256", "row512", "tile2"};
    printf("q8_0 matvec, %lld rows x %lld, %.0f MB, %u threads, %lld rows a task, level %s, "
           "one-token kernel %s, prefetch %d\n",
           (long long)rows, (long long)n, (double)total / 1e6, threads, (long long)rows_per_task,
           halo_quant_level_name(halo_quant_level_best()), modes[halo_quant_q8_row1_mode()],
           halo_quant_q8_prefetch());
    double med[3];
    for (int k = 0; k < 3; k++) {
        qsort(gbs[k], (size_t)passes, sizeof gbs[k][0], cmp);
        med[k] = gbs[k][passes / 2];
        printf("%-20s GB/s median %5.1f best %5.1f  (%.2f of the plain read)\n", names[k], med[k],
               gbs[k][passes - 1], med[k] / med[0]);
    }
    halo_threadpool_free(pool);
    munmap(w, total);
    free(x);
    free(y);
    free(act);
    free(sums);
    return 0;
}
