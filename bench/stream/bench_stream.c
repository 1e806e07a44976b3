/* Decode speed with routed experts streamed from disk through an expert cache of a given share
 * of the experts (bench/stream/run.sh). usage:
 *   bench_stream MODEL CACHE_PERCENT [PROMPT_TOKENS] [DECODE_TOKENS] [THREADS]
 * CACHE_PERCENT 0 opens the model resident (the compute-only reference). The prompt warms the
 * cache; the decode is measured. Token ids follow a Zipf law (text-like repetition). Prints
 * tok/s, the decode's expert hit rate, bytes read per token and the read rate, the misses
 * waited on per token (HALO_STREAM_PREFETCH picks the prefetch), the disk's own O_DIRECT read
 * rate (io_uring, 64 reads in flight) measured in the same process right after the decode, the disk
 * bound it sets (bytes streamed per token / that rate) and the share of it reached, and how much of
 * the file the page cache holds afterwards. */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "halo/halo.h"
#include "halo/stream.h"

/* CPU time of the process (every thread, user + system): on a shared machine wall time follows
 * the scheduler's share, CPU time the work done. */
static double cpu_seconds(void) {
    struct rusage r;
    getrusage(RUSAGE_SELF, &r);
    return (double)r.ru_utime.tv_sec + (double)r.ru_utime.tv_usec * 1e-6 +
           (double)r.ru_stime.tv_sec + (double)r.ru_stime.tv_usec * 1e-6;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Bytes of path in the page cache (mincore over 1 GiB windows). */
static uint64_t cached(const char *path, uint64_t *size) {
    int fd = open(path, O_RDONLY);
    struct stat st;
    uint64_t n = 0;
    *size = 0;
    if (fd < 0 || fstat(fd, &st)) return 0;
    *size = (uint64_t)st.st_size;
    long page = sysconf(_SC_PAGESIZE);
    unsigned char *vec = malloc(((size_t)1 << 30) / (size_t)page);
    for (uint64_t off = 0; vec && off < *size; off += (uint64_t)1 << 30) {
        size_t len = (size_t)(*size - off < (1ull << 30) ? *size - off : 1ull << 30);
        void *m = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, (off_t)off);
        if (m == MAP_FAILED) break;
        if (!mincore(m, len, vec))
            for (size_t i = 0; i < (len + (size_t)page - 1) / (size_t)page; i++)
                n += vec[i] & 1;
        munmap(m, len);
    }
    free(vec);
    close(fd);
    return n * (uint64_t)page;
}

/* The disk's O_DIRECT read rate as the cache reads: 1 MiB reads at random block-aligned offsets
 * of the file, 64 in flight through io_uring (16 reader threads without liburing), 1 GiB. */
enum { DISK_DEPTH = 64, DISK_TOTAL = 1024, DISK_PIECE = 1 << 20 };

static uint64_t disk_offset(uint64_t *seed, uint64_t size) {
    *seed = *seed * 6364136223846793005ull + 1442695040888963407ull;
    return (*seed >> 20) % ((size - DISK_PIECE) / 4096) * 4096;
}

#if __has_include(<liburing.h>)
#include <liburing.h>
static double disk_rate(const char *path, uint64_t size) {
    int fd = open(path, O_RDONLY | O_DIRECT);
    struct io_uring ring;
    unsigned char *buf = NULL;
    if (fd < 0) return 0;
    if (io_uring_queue_init(DISK_DEPTH, &ring, 0) ||
        posix_memalign((void **)&buf, 4096, (size_t)DISK_DEPTH * DISK_PIECE)) {
        close(fd);
        return 0;
    }
    uint64_t seed = 1, bytes = 0;
    int issued = 0, in_flight = 0;
    double t0 = now();
    while (issued < DISK_TOTAL || in_flight) {
        for (; issued < DISK_TOTAL && in_flight < DISK_DEPTH; issued++, in_flight++) {
            struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
            int slot = issued % DISK_DEPTH; /* the bytes are not looked at */
            io_uring_prep_read(sqe, fd, buf + (size_t)slot * DISK_PIECE, DISK_PIECE,
                               disk_offset(&seed, size));
        }
        io_uring_submit(&ring);
        struct io_uring_cqe *cqe;
        if (io_uring_wait_cqe(&ring, &cqe)) break;
        if (cqe->res > 0) bytes += (uint64_t)cqe->res;
        io_uring_cqe_seen(&ring, cqe);
        in_flight--;
    }
    double rate = (double)bytes / (now() - t0) / 1e9;
    io_uring_queue_exit(&ring);
    free(buf);
    close(fd);
    return rate;
}
#else
typedef struct disk_job {
    const char *path;
    uint64_t size, seed, bytes;
} disk_job;

static void *disk_reader(void *arg) {
    disk_job *j = arg;
    int fd = open(j->path, O_RDONLY | O_DIRECT);
    void *buf = NULL;
    if (fd < 0 || posix_memalign(&buf, 4096, DISK_PIECE)) {
        if (fd >= 0) close(fd);
        return NULL;
    }
    for (int i = 0; i < DISK_TOTAL / 16; i++) {
        ssize_t n = pread(fd, buf, DISK_PIECE, (off_t)disk_offset(&j->seed, j->size));
        if (n > 0) j->bytes += (uint64_t)n;
    }
    free(buf);
    close(fd);
    return NULL;
}

static double disk_rate(const char *path, uint64_t size) {
    pthread_t t[16];
    disk_job j[16];
    double t0 = now();
    for (int i = 0; i < 16; i++) {
        j[i] = (disk_job){.path = path, .size = size, .seed = 977u * (uint64_t)i + 1};
        pthread_create(&t[i], NULL, disk_reader, &j[i]);
    }
    uint64_t bytes = 0;
    for (int i = 0; i < 16; i++) {
        pthread_join(t[i], NULL);
        bytes += j[i].bytes;
    }
    return (double)bytes / (now() - t0) / 1e9;
}
#endif

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODEL CACHE_PERCENT [PROMPT] [DECODE] [THREADS]\n", argv[0]);
        return 2;
    }
    double pct = atof(argv[2]);
    uint32_t pp = argc > 3 ? (uint32_t)atoi(argv[3]) : 16;
    uint32_t tg = argc > 4 ? (uint32_t)atoi(argv[4]) : 16;
    uint32_t threads = argc > 5 ? (uint32_t)atoi(argv[5]) : 0;
    halo_engine_params p = {.model_path = argv[1], .threads = threads, .n_ctx = pp + tg};
    halo_engine *e = NULL;
    halo_session *s = NULL;
    halo_error err;
    halo_stream_stats a, b;
    if (pct > 0) {
        /* The experts' size first (with a small cache: the cache is committed at open). */
        p.weights = "stream";
        p.expert_cache_bytes = (uint64_t)256 << 20;
        if (halo_engine_open(&p, &e, &err)) goto fail;
        halo_engine_stream_stats(e, &a);
        halo_engine_close(e);
        p.expert_cache_bytes = (uint64_t)((double)a.expert_bytes * pct / 100.0);
    }
    double t0 = now();
    if (halo_engine_open(&p, &e, &err) || halo_session_create(e, pp + tg, &s, &err)) goto fail;
    double t_load = now() - t0;
    uint32_t V = halo_engine_n_vocab(e);
    int32_t *tok = malloc((pp + tg) * sizeof *tok);
    /* Text-like token ids: ranks drawn from a Zipf law (s = 1 over 32,768 ranks), as words
     * repeat in text, so the hash-routed layers see repeated tokens as they would in use. */
    uint64_t x = 42;
    double h = 0;
    for (uint32_t r = 1; r <= 32768; r++)
        h += 1.0 / r;
    for (uint32_t i = 0; i < pp + tg; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        double u = (double)(x >> 11) / 9007199254740992.0 * h, acc = 0;
        uint32_t r = 1;
        for (; r < 32768 && (acc += 1.0 / r) < u; r++) {
        }
        tok[i] = (int32_t)(((uint64_t)r * 2654435761u) % V);
    }
    t0 = now();
    if (halo_session_eval(s, tok, pp, false, &err)) goto fail;
    double t_pp = now() - t0;
    halo_engine_stream_stats(e, &a);
    t0 = now();
    double c0 = cpu_seconds();
    for (uint32_t i = 0; i < tg; i++)
        if (halo_session_eval(s, tok + pp + i, 1, false, &err)) goto fail;
    double t_tg = now() - t0, c_tg = cpu_seconds() - c0;
    halo_engine_stream_stats(e, &b);
    printf("load %.2f s\npp%u %.2f tok/s\ntg%u %.3f tok/s (%.0f ms CPU time per token)\n", t_load,
           pp, pp / t_pp, tg, tg / t_tg, 1e3 * c_tg / tg);
    if (pct > 0) {
        uint64_t req = b.requests - a.requests, hits = b.hits - a.hits;
        uint64_t bytes = b.bytes_read - a.bytes_read;
        double rs = b.read_seconds - a.read_seconds;
        const char *pf = getenv("HALO_STREAM_PREFETCH");
        double misses = (double)(b.misses - a.misses) / tg,
               waited = (double)(b.waited - a.waited) / tg;
        printf("prefetch %s: misses %.2f per token, waited on %.2f per token (%.0f%%), "
               "%.1f ms waiting per token; prefetched %llu, used %llu; of those predicted %llu, "
               "used %llu\n",
               pf && *pf ? pf : "all", misses, waited, misses > 0 ? 100.0 * waited / misses : 0,
               1e3 * rs / tg, (unsigned long long)(b.prefetched - a.prefetched),
               (unsigned long long)(b.prefetch_used - a.prefetch_used),
               (unsigned long long)(b.predicted - a.predicted),
               (unsigned long long)(b.predicted_used - a.predicted_used));
        struct stat fs;
        double bw = stat(argv[1], &fs) ? 0 : disk_rate(argv[1], (uint64_t)fs.st_size),
               per_tok = (double)bytes / tg;
        double bound = per_tok > 0 ? bw * 1e9 / per_tok : 0;
        double compute = (t_tg - rs) / tg; /* time per token not spent waiting for reads */
        double both = 1.0 / (compute > per_tok / (bw * 1e9) ? compute : per_tok / (bw * 1e9));
        printf("disk O_DIRECT (1 MiB random reads, 64 in flight) %.3f GB/s: disk bound %.2f "
               "tok/s, reached %.1f%%; bound with this run's compute (%.0f ms/token) "
               "1/max(compute, reads) = %.2f tok/s, reached %.1f%%\n",
               bw, bound, bound > 0 ? 100.0 * tg / t_tg / bound : 0, 1e3 * compute, both,
               100.0 * tg / t_tg / both);
        printf("cache %.2f GiB = %.1f%% of %.2f GiB experts, %u experts, policy %s, %s, %s\n",
               (double)b.cache_admitted / (1 << 30),
               100.0 * (double)b.cache_admitted / (double)b.expert_bytes,
               (double)b.expert_bytes / (1 << 30), b.slots, b.policy,
               b.direct ? "O_DIRECT" : "buffered", b.reader);
        printf(
            "decode hit %.1f%% (%llu of %llu)\nread per token %.1f MiB\nread / waiting %.3f GB/s "
            "(%.2f s of %.2f s waiting for reads)\n",
            req ? 100.0 * (double)hits / (double)req : 0, (unsigned long long)hits,
            (unsigned long long)req, (double)bytes / tg / (1 << 20),
            rs > 0 ? (double)bytes / rs / 1e9 : 0, rs, t_tg);
    }
    uint64_t size, c = cached(argv[1], &size);
    printf("page cache %.2f%% of the file (%.1f MiB)\n", 100.0 * (double)c / (double)size,
           (double)c / (1 << 20));
    halo_session_free(s);
    halo_engine_close(e);
    free(tok);
    return 0;
fail:
    fprintf(stderr, "bench_stream: %s\n", err.message);
    return 1;
}
