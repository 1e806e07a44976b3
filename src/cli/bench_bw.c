/* Host memory read bandwidth for `halo bench`'s roofline column. A decode on the CPU streams its
 * weights once per token from DRAM with every thread of the run, so the ceiling is measured the
 * same way: the run's thread count, each streaming its own slice of a buffer far larger than the
 * last-level cache, timed between two barriers so every thread is already running when the clock
 * starts (creating threads inside the timed region made an earlier version of this loop read
 * 52.9 GB/s on the H200 machine's Xeon, where the decode itself moved 60 GB/s: a roofline of
 * 116.7 %, bench/h200/bench-cpu-cuda.md). */
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "cli/bench_bw.h"

#define MAX_THREADS 512

/* ---- the last-level cache from sysfs ------------------------------------------------------ */

static bool read_line(const char *path, char *buf, size_t size) {
    FILE *f = fopen(path, "r");
    if (!f) return false;
    bool ok = fgets(buf, (int)size, f) != NULL;
    fclose(f);
    if (ok) buf[strcspn(buf, "\n")] = 0;
    return ok;
}

/* "32768K", "1M", "64" (bytes) as sysfs writes cache sizes. */
static uint64_t parse_size(const char *s) {
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end == 'K') v <<= 10;
    if (*end == 'M') v <<= 20;
    if (*end == 'G') v <<= 30;
    return v;
}

uint64_t bench_llc_bytes(const char *root) {
    char dir[600], path[900], buf[256];
    snprintf(dir, sizeof dir, "%s/sys/devices/system/cpu", root && strcmp(root, "/") ? root : "");
    DIR *d = opendir(dir);
    if (!d) return 0;
    /* the highest cache level of any CPU, then each distinct cache of that level once (CPUs
     * sharing a cache list the same shared_cpu_list) */
    enum { MAX_CACHES = 256 };
    static char shared[MAX_CACHES][128];
    uint64_t sizes[MAX_CACHES];
    int levels[MAX_CACHES];
    unsigned n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        unsigned cpu;
        char tail;
        if (sscanf(e->d_name, "cpu%u%c", &cpu, &tail) != 1) continue;
        for (unsigned idx = 0; idx < 16; idx++) {
            int level = 0;
            snprintf(path, sizeof path, "%s/%s/cache/index%u/level", dir, e->d_name, idx);
            if (!read_line(path, buf, sizeof buf)) break;
            level = atoi(buf);
            snprintf(path, sizeof path, "%s/%s/cache/index%u/type", dir, e->d_name, idx);
            if (read_line(path, buf, sizeof buf) && !strcmp(buf, "Instruction")) continue;
            snprintf(path, sizeof path, "%s/%s/cache/index%u/size", dir, e->d_name, idx);
            if (!read_line(path, buf, sizeof buf)) continue;
            uint64_t size = parse_size(buf);
            snprintf(path, sizeof path, "%s/%s/cache/index%u/shared_cpu_list", dir, e->d_name, idx);
            if (!read_line(path, buf, sizeof buf)) snprintf(buf, sizeof buf, "cpu%u", cpu);
            bool seen = false;
            for (unsigned k = 0; k < n && !seen; k++)
                seen = levels[k] == level && !strcmp(shared[k], buf);
            if (seen || n == MAX_CACHES) continue;
            snprintf(shared[n], sizeof shared[n], "%.127s", buf);
            sizes[n] = size;
            levels[n++] = level;
        }
    }
    closedir(d);
    int top = 0;
    for (unsigned k = 0; k < n; k++)
        top = levels[k] > top ? levels[k] : top;
    uint64_t total = 0;
    for (unsigned k = 0; k < n; k++)
        if (levels[k] == top) total += sizes[k];
    return total;
}

uint64_t bench_bw_buffer_bytes(uint64_t llc) {
    uint64_t floor = (uint64_t)1 << 30;
    return 8 * llc > floor ? 8 * llc : floor;
}

uint64_t bench_mem_available(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    unsigned long long kb = 0;
    bool found = false;
    while (f && !found && fgets(line, sizeof line, f))
        found = sscanf(line, "MemAvailable: %llu kB", &kb) == 1;
    if (f) fclose(f);
    if (found) return (uint64_t)kb * 1024;
    long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
}

/* ---- the measurement ---------------------------------------------------------------------- */

typedef uint64_t v2u64 __attribute__((vector_size(16)));

typedef struct shared_state {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int go; /* 0 wait, 1 measure, -1 leave (a thread could not be started) */
    pthread_barrier_t start, stop;
    char *buf;
    uint64_t slice;
    uint32_t threads, repeat, passes;
    double *seconds; /* per pass, written by thread 0 */
} shared_state;

typedef struct worker {
    shared_state *s;
    uint32_t index;
    uint64_t sink;
} worker;

static volatile uint64_t bench_bw_sink;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Eight independent accumulators so the loop is bound by loads, not by an add chain. Not
 * instrumented by ASan or UBSan (make asan): a check per load would make it bound by compute, and
 * the slice bounds are fixed by construction. Optimised in every build type: at -O0 (make asan's
 * Debug build) it read 2.4 GB/s from cache and from memory alike, so the figure would depend on
 * how halo was built. */
#if defined(__GNUC__) && !defined(__clang__)
#define BW_OPTIMIZE __attribute__((optimize("O2")))
#else
#define BW_OPTIMIZE
#endif
BW_OPTIMIZE __attribute__((no_sanitize("address", "undefined"))) static uint64_t
read_slice(const v2u64 *p, uint64_t n) {
    v2u64 a = {0}, b = {0}, c = {0}, d = {0}, e = {0}, f = {0}, g = {0}, h = {0};
    for (uint64_t i = 0; i + 8 <= n; i += 8) {
        a += p[i];
        b += p[i + 1];
        c += p[i + 2];
        d += p[i + 3];
        e += p[i + 4];
        f += p[i + 5];
        g += p[i + 6];
        h += p[i + 7];
    }
    v2u64 s = a ^ b ^ c ^ d ^ e ^ f ^ g ^ h;
    return s[0] ^ s[1];
}

static void *work(void *arg) {
    worker *w = arg;
    shared_state *s = w->s;
    pthread_mutex_lock(&s->lock);
    while (!s->go)
        pthread_cond_wait(&s->cond, &s->lock);
    int go = s->go;
    pthread_mutex_unlock(&s->lock);
    if (go < 0) return NULL;
    char *mine = s->buf + (uint64_t)w->index * s->slice;
    memset(mine, (int)w->index + 1, s->slice); /* first touch: the page lands near this thread */
    for (uint32_t pass = 0; pass < s->passes; pass++) {
        pthread_barrier_wait(&s->start);
        double t0 = now();
        for (uint32_t r = 0; r < s->repeat; r++)
            w->sink += read_slice((const v2u64 *)mine, s->slice / sizeof(v2u64));
        pthread_barrier_wait(&s->stop);
        if (w->index == 0) s->seconds[pass] = now() - t0;
    }
    return NULL;
}

/* Starts threads 1..n-1, measures on this thread as thread 0, joins. Every thread waits for
 * `go` until all exist: the barriers count all of them, so when one cannot be started the others
 * are told to leave instead of being left at a barrier. */
static bool run_threads(shared_state *s, worker *w, pthread_t *tid, bench_bw *out) {
    uint32_t started = 1;
    bool ok = true;
    for (; started < s->threads; started++) {
        w[started] = (worker){s, started, 0};
        if (pthread_create(&tid[started], NULL, work, &w[started])) {
            ok = false;
            break;
        }
    }
    pthread_mutex_lock(&s->lock);
    s->go = ok ? 1 : -1;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
    if (ok) {
        w[0] = (worker){s, 0, 0};
        work(&w[0]);
    }
    for (uint32_t i = 1; i < started; i++)
        pthread_join(tid[i], NULL);
    if (!ok) return false;
    double best = 1e30, worst = 0;
    for (uint32_t p = 0; p < s->passes; p++) {
        best = s->seconds[p] < best ? s->seconds[p] : best;
        worst = s->seconds[p] > worst ? s->seconds[p] : worst;
    }
    double moved = (double)s->slice * s->threads * s->repeat;
    out->read_gbs = best > 0 ? moved / best / 1e9 : 0;
    out->worst_gbs = worst > 0 ? moved / worst / 1e9 : 0;
    out->buffer = s->slice * s->threads;
    out->threads = s->threads;
    out->passes = s->passes;
    uint64_t sink = 0;
    for (uint32_t i = 0; i < s->threads; i++)
        sink ^= w[i].sink;
    bench_bw_sink = sink; /* the sums are stored, so the compiler cannot drop the reads */
    return out->read_gbs > 0;
}

bool bench_host_bandwidth(uint32_t threads, uint64_t buffer, uint32_t repeat, uint32_t passes,
                          bench_bw *out) {
    memset(out, 0, sizeof *out);
    if (threads < 1) threads = 1;
    if (threads > MAX_THREADS) threads = MAX_THREADS;
    if (repeat < 1) repeat = 1;
    if (passes < 1) passes = 1;
    shared_state s = {.threads = threads, .repeat = repeat, .passes = passes};
    s.slice = buffer / threads / 128 * 128; /* whole read-loop iterations per slice */
    if (!s.slice) return false;
    size_t bytes = (size_t)(s.slice * threads);
    s.buf = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (s.buf == MAP_FAILED) return false;
    /* huge pages where the kernel allows them: fewer TLB misses, a ceiling rather than a floor */
    madvise(s.buf, bytes, MADV_HUGEPAGE);
    s.seconds = calloc(passes, sizeof *s.seconds);
    worker *w = calloc(threads, sizeof *w);
    pthread_t *tid = calloc(threads, sizeof *tid);
    bool ok = false;
    if (s.seconds && w && tid && !pthread_mutex_init(&s.lock, NULL)) {
        if (!pthread_cond_init(&s.cond, NULL)) {
            if (!pthread_barrier_init(&s.start, NULL, threads)) {
                if (!pthread_barrier_init(&s.stop, NULL, threads)) {
                    ok = run_threads(&s, w, tid, out);
                    pthread_barrier_destroy(&s.stop);
                }
                pthread_barrier_destroy(&s.start);
            }
            pthread_cond_destroy(&s.cond);
        }
        pthread_mutex_destroy(&s.lock);
    }
    free(tid);
    free(w);
    free(s.seconds);
    munmap(s.buf, bytes);
    return ok;
}
