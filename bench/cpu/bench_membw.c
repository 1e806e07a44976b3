/* Memory read bandwidth with N threads, and the weight bytes one decode token of a model reads:
 * the ceiling decode speed is measured against (bench/cpu/run.sh).
 *   usage: bench_membw THREADS [MODEL.gguf]
 * Prints "membw_gbs <GB/s>" (best of 5 passes of every thread reading its own slice of a 2 GiB
 * buffer with 256-bit loads where the CPU has AVX2, in huge pages where the kernel gives them,
 * as for the weights, pages touched first)
 * and, with a model, "decode_bytes <bytes>": every tensor but the token embedding (one row is
 * read), routed experts (`*_exps`) scaled by used / count. */
#include <immintrin.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "halo/gguf.h"

enum { PASSES = 5 };
static const size_t TOTAL = (size_t)2 << 30;

typedef struct slice {
    const uint64_t *p;
    size_t n;
    uint64_t sum;
} slice;

/* 256-bit loads in two chains, as bench_matvec's plain read: the scalar loop below read
 * less than that on the H200 machine's Xeon (its 16 threads 64.7 GB/s against 115.8, before
 * the huge pages), so a decode's fraction of it could exceed 100 %. */
__attribute__((target("avx2"))) static void *read_slice_avx2(void *arg) {
    slice *s = arg;
    __m256i a = _mm256_setzero_si256(), b = a;
    for (size_t i = 0; i + 8 <= s->n; i += 8) {
        a = _mm256_xor_si256(a, _mm256_loadu_si256((const __m256i *)(s->p + i)));
        b = _mm256_xor_si256(b, _mm256_loadu_si256((const __m256i *)(s->p + i + 4)));
    }
    uint64_t w[4];
    _mm256_storeu_si256((__m256i *)w, _mm256_xor_si256(a, b));
    s->sum = w[0] + w[1] + w[2] + w[3];
    return NULL;
}

static void *read_slice(void *arg) {
    slice *s = arg;
    uint64_t a = 0, b = 0, c = 0, d = 0;
    for (size_t i = 0; i + 4 <= s->n; i += 4) {
        a += s->p[i];
        b ^= s->p[i + 1];
        c += s->p[i + 2];
        d ^= s->p[i + 3];
    }
    s->sum = a + b + c + d;
    return NULL;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int decode_bytes(const char *path) {
    halo_gguf *g = NULL;
    halo_error err;
    if (halo_gguf_open(path, &g, &err)) {
        fprintf(stderr, "bench_membw: %s\n", err.message);
        return 1;
    }
    const char *arch = NULL;
    uint32_t used = 0, count = 0;
    char key[128];
    if (halo_gguf_get_str(g, "general.architecture", &arch, &err) == HALO_OK) {
        snprintf(key, sizeof key, "%s.expert_used_count", arch);
        halo_gguf_get_u32(g, key, &used, &err);
        snprintf(key, sizeof key, "%s.expert_count", arch);
        halo_gguf_get_u32(g, key, &count, &err);
    }
    double bytes = 0;
    for (uint64_t i = 0; i < halo_gguf_tensor_count(g); i++) {
        const halo_gguf_tensor *t = halo_gguf_tensor_at(g, i);
        if (strcmp(t->name, "token_embd.weight") == 0) continue;
        bool routed = strstr(t->name, "_exps") != NULL;
        bytes += routed && count ? (double)t->n_bytes * used / count : (double)t->n_bytes;
    }
    printf("decode_bytes %.0f\n", bytes);
    halo_gguf_close(g);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s THREADS [MODEL.gguf]\n", argv[0]);
        return 2;
    }
    int threads = atoi(argv[1]);
    if (threads < 1 || threads > 1024) threads = 1;
    uint64_t *buf = aligned_alloc(4096, TOTAL);
    pthread_t *tid = calloc((size_t)threads, sizeof *tid);
    slice *s = calloc((size_t)threads, sizeof *s);
    if (!buf || !tid || !s) {
        fprintf(stderr, "bench_membw: out of memory\n");
        return 1;
    }
    /* Huge pages as the loader's arena asks for them (THP is on madvise on the H200 machine and
     * this VM). Without, the Xeon's 16 threads read 64.7 GB/s here against 115.8 for
     * bench_matvec's plain read (huge pages) in the same call: not the weights' ceiling. */
    madvise(buf, TOTAL, MADV_HUGEPAGE);
    memset(buf, 1, TOTAL);
    size_t words = TOTAL / 8, per = words / (size_t)threads / 8 * 8;
    bool avx2 = __builtin_cpu_supports("avx2");
    double best = 0;
    for (int pass = 0; pass < PASSES; pass++) {
        double t0 = now();
        for (int i = 0; i < threads; i++) {
            s[i] = (slice){buf + (size_t)i * per, per, 0};
            pthread_create(&tid[i], NULL, avx2 ? read_slice_avx2 : read_slice, &s[i]);
        }
        uint64_t sum = 0;
        for (int i = 0; i < threads; i++) {
            pthread_join(tid[i], NULL);
            sum += s[i].sum;
        }
        double gbs = (double)per * 8 * threads / (now() - t0) / 1e9;
        if (gbs > best && sum != 1) best = gbs; /* sum keeps the reads */
    }
    printf("membw_gbs %.1f\n", best);
    free(buf);
    free(tid);
    free(s);
    return argc > 2 ? decode_bytes(argv[2]) : 0;
}
