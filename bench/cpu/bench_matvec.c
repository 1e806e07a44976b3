/* One token's matrix-vector product over weights far larger than the caches (a decode step's
 * output head: 129,280 rows of 4,096 Q8_0 weights, 563 MB), split across a thread pool the way
 * the CPU backend splits a projection (16-row tasks), against plain reads of the same bytes
 * with the same threads and split: one sequential stream, and two rows read side by side. They
 * run alternately in one process, so a busy machine slows all alike and the ratios (the
 * kernel's share of the read bandwidth) stay comparable between runs where the absolute
 * numbers do not.
 *   usage: bench_matvec [THREADS (default 2)] [ROWS (129280)] [N (4096)] [PASSES (9)]
 *                       [ROWS_PER_TASK (16; the backend takes up to 64 for one token)]
 * HALO_Q8_ROW1 / HALO_Q8_PREFETCH pick the one-token kernel (src/quant/kernels.h);
 * MATVEC_VARIANTS="row256:0,row256:4096" alternates several (kernel:prefetch bytes) per pass.
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

/* Each row's blocks read as the one-token kernel reads them (32 quant bytes at 34k + 2 and the
 * 2-byte scale), no arithmetic: the Q8_0 layout's access pattern alone. */
__attribute__((target("avx2"))) static void read_blocks_task(void *p, int64_t i) {
    ctx *c = p;
    int64_t r0 = i * rows_per_task,
            nr = c->rows - r0 < rows_per_task ? c->rows - r0 : rows_per_task;
    __m256i a = _mm256_setzero_si256(), b = a;
    uint32_t d = 0;
    int64_t nb = (int64_t)nr * (c->n / 32);
    const unsigned char *x = c->w + (uint64_t)r0 * c->row_bytes;
    for (int64_t k = 0; k + 1 < nb; k += 2) {
        uint16_t d0, d1;
        memcpy(&d0, x + 34 * k, 2);
        memcpy(&d1, x + 34 * k + 34, 2);
        d ^= d0 ^ d1;
        a = _mm256_xor_si256(a, _mm256_loadu_si256((const __m256i *)(x + 34 * k + 2)));
        b = _mm256_xor_si256(b, _mm256_loadu_si256((const __m256i *)(x + 34 * k + 36)));
    }
    c->sums[i] = _mm256_xor_si256(_mm256_xor_si256(a, b), _mm256_set1_epi32((int)d));
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
    /* Kernel variants to alternate (MATVEC_VARIANTS="row256:0,row256:4096,row512:2048": the
     * one-token kernel and its Q8_0 prefetch distance); default: the process's setting. */
    enum { NREAD = 3, MAXV = 8 };
    static const char *const modes[] = {"row256", "row512", "tile2"};
    halo_q8_row1_mode vmode[MAXV];
    int vpf[MAXV], nv = 0;
    const char *vs = getenv("MATVEC_VARIANTS");
    for (const char *q = vs; q && *q && nv < MAXV;) {
        int m = !strncmp(q, "row512", 6) ? 1 : !strncmp(q, "tile2", 5) ? 2 : 0;
        const char *colon = strchr(q, ':');
        vmode[nv] = (halo_q8_row1_mode)m;
        vpf[nv++] = colon ? atoi(colon + 1) : 0;
        q = strchr(q, ',');
        q = q ? q + 1 : NULL;
    }
    if (nv == 0) {
        vmode[0] = halo_quant_q8_row1_mode();
        vpf[0] = halo_quant_q8_prefetch();
        nv = 1;
    }
    int rpf = halo_quant_row_prefetch();
    static const char *const names[NREAD] = {"read, one stream", "read, rows in pairs",
                                             "read, q8_0 blocks"};
    halo_task_fn fns[NREAD] = {read_task, read2_task, read_blocks_task};
    double gbs[NREAD + MAXV][MAX_PASSES];
    halo_threadpool_run(pool, tasks, gemm_task, &c); /* warm up */
    for (int p = 0; p < passes; p++)
        for (int k = 0; k < NREAD + nv; k++) {
            if (k >= NREAD) halo_quant_set_one_token(vmode[k - NREAD], vpf[k - NREAD], rpf);
            double t0 = now();
            halo_threadpool_run(pool, tasks, k < NREAD ? fns[k] : gemm_task, &c);
            gbs[k][p] = (double)total / (now() - t0) / 1e9;
        }
    printf("q8_0 matvec, %lld rows x %lld, %.0f MB, %u threads, %lld rows a task, level %s\n",
           (long long)rows, (long long)n, (double)total / 1e6, threads, (long long)rows_per_task,
           halo_quant_level_name(halo_quant_level_best()));
    double med[NREAD + MAXV];
    for (int k = 0; k < NREAD + nv; k++) {
        qsort(gbs[k], (size_t)passes, sizeof gbs[k][0], cmp);
        med[k] = gbs[k][passes / 2];
        char name[64];
        if (k < NREAD)
            snprintf(name, sizeof name, "%s", names[k]);
        else
            snprintf(name, sizeof name, "q8_0 matvec %s pf %d", modes[vmode[k - NREAD]],
                     vpf[k - NREAD]);
        printf("%-26s GB/s median %5.1f best %5.1f  (%.2f of the plain read)\n", name, med[k],
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
