/* The arena and the loader: one anonymous mapping for the host pool, and every resident tensor's
 * bytes read once, straight into its final place. No mmap-of-the-file plus copy, so nothing is
 * resident twice: the seeds' "with mmap the page cache is counted against GTT on top of the
 * weights" cannot happen.
 *
 * Layout: resident tensors are sorted by (shard, file offset) and merged into runs of nearby
 * tensors (gaps up to 1 MiB: GGUF pads tensors to 32 bytes, so a whole model is usually one run
 * per shard). Each run maps its file range, widened to 4 KiB boundaries, to a 4 KiB-aligned
 * place in the arena, so a tensor lives at run base + (file offset - run file start) and a run
 * can be read with O_DIRECT (offset, length and buffer all block-aligned) in large chunks. The
 * few padding bytes between tensors are read too; that is the price of aligned reads. */
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "halo/plan.h"
#include "mem/shard_files.h"

#define BLOCK 4096u
#define CHUNK ((uint64_t)64 << 20) /* per read: large enough for NVMe queue depth */
#define RUN_GAP ((uint64_t)1 << 20)
#define MAX_THREADS 16

struct halo_mem_arena {
    uint8_t *base;
    size_t size;
    uint64_t n_tensors;
    uint8_t **ptr; /* per tensor; NULL when not loaded */
};

typedef struct run {
    uint32_t shard;
    uint64_t file_start, file_end; /* block-aligned range to read */
    uint64_t need_end;             /* end of the last tensor's bytes (must be read) */
    uint64_t arena_off;
    uint64_t first, last; /* indices into the sorted tensor order */
} run;

typedef struct chunk {
    uint32_t run;
    uint64_t off, len; /* file range */
} chunk;

typedef struct loader {
    const halo_gguf *g;
    halo_mem_arena *a;
    run *runs;
    size_t n_runs;
    uint64_t *order; /* tensor indices sorted by (shard, offset) */
    chunk *chunks;
    size_t n_chunks;
    halo_shard_files files;
    atomic_size_t next;
    atomic_uint_fast64_t done;
    pthread_mutex_t lock;
    halo_status st;
    halo_error err;
    uint64_t total;
    struct timespec t0;
    const halo_load_options *o;
    double last_report;
} loader;

static double now_since(const struct timespec *t0) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) + (double)(t.tv_nsec - t0->tv_nsec) * 1e-9;
}

static uint64_t align_down(uint64_t v) {
    return v / BLOCK * BLOCK;
}
static uint64_t align_up(uint64_t v) {
    return (v + BLOCK - 1) / BLOCK * BLOCK;
}

static const halo_gguf *sort_g;
static int by_position(const void *x, const void *y) {
    const halo_gguf_tensor *a = halo_gguf_tensor_at(sort_g, *(const uint64_t *)x);
    const halo_gguf_tensor *b = halo_gguf_tensor_at(sort_g, *(const uint64_t *)y);
    if (a->shard != b->shard) return a->shard < b->shard ? -1 : 1;
    return a->file_offset < b->file_offset ? -1 : a->file_offset > b->file_offset;
}

/* The tensor whose bytes end past `at` first, in run r: the one a short read cut off. */
static const char *tensor_cut_at(const loader *L, const run *r, uint64_t at) {
    for (uint64_t k = r->first; k <= r->last; k++) {
        const halo_gguf_tensor *t = halo_gguf_tensor_at(L->g, L->order[k]);
        if (t->file_offset + t->n_bytes > at) return t->name;
    }
    return halo_gguf_tensor_at(L->g, L->order[r->last])->name;
}

static void fail(loader *L, halo_status st, const char *fmt, ...) HALO_PRINTF(3, 4);
static void fail(loader *L, halo_status st, const char *fmt, ...) {
    pthread_mutex_lock(&L->lock);
    if (L->st == HALO_OK) {
        va_list ap;
        va_start(ap, fmt);
        halo_failv(&L->err, st, fmt, ap);
        va_end(ap);
        L->st = st;
    }
    pthread_mutex_unlock(&L->lock);
}

static bool failed(loader *L) {
    pthread_mutex_lock(&L->lock);
    bool f = L->st != HALO_OK;
    pthread_mutex_unlock(&L->lock);
    return f;
}

/* Reads one chunk into the arena; O_DIRECT first, buffered if the filesystem refuses it. */
static void read_chunk(loader *L, const chunk *c) {
    const run *r = &L->runs[c->run];
    uint8_t *dst = L->a->base + r->arena_off + (c->off - r->file_start);
    const char *path = halo_gguf_shard_path(L->g, r->shard);
    uint64_t got = 0;
    int e = halo_shard_files_read(&L->files, r->shard, c->off, c->len, dst, &got);
    if (e) {
        fail(L, HALO_E_IO, "%s: reading tensor %s at offset %llu: %s", path,
             tensor_cut_at(L, r, c->off + got), (unsigned long long)(c->off + got), strerror(e));
        return;
    }
    uint64_t need = c->off + c->len < r->need_end ? c->off + c->len : r->need_end;
    if (c->off + got < need) {
        fail(L, HALO_E_TRUNCATED,
             "%s: tensor %s: the file ends at %llu but its bytes run to %llu (file changed "
             "or truncated after it was opened)",
             path, tensor_cut_at(L, r, c->off + got), (unsigned long long)(c->off + got),
             (unsigned long long)r->need_end);
        return;
    }
    atomic_fetch_add(&L->done, got < c->len ? got : c->len);
}

static void report(loader *L, bool final) {
    if (!L->o || !L->o->progress) return;
    double t = now_since(&L->t0);
    if (!final && t - L->last_report < 0.1) return;
    L->last_report = t;
    halo_load_progress p = {final ? L->total : atomic_load(&L->done), L->total, t};
    L->o->progress(&p, L->o->user);
}

static void work(loader *L, bool main_thread) {
    for (;;) {
        size_t i = atomic_fetch_add(&L->next, 1);
        if (i >= L->n_chunks || failed(L)) return;
        read_chunk(L, &L->chunks[i]);
        if (main_thread) report(L, false);
    }
}

static void *worker(void *arg) {
    work(arg, false);
    return NULL;
}

/* ---- setup -------------------------------------------------------------------------------- */

static halo_status plan_runs(loader *L, const uint8_t *tensor_pool, uint64_t *n_resident,
                             halo_error *err) {
    const halo_gguf *g = L->g;
    uint64_t n = halo_gguf_tensor_count(g), m = 0;
    L->order = malloc((n ? n : 1) * sizeof *L->order);
    L->runs = malloc((n ? n : 1) * sizeof *L->runs);
    if (!L->order || !L->runs) return halo_fail(err, HALO_E_NOMEM, "loader: out of memory");
    for (uint64_t i = 0; i < n; i++) {
        uint8_t pool = tensor_pool ? tensor_pool[i] : HALO_POOL_HOST;
        const halo_gguf_tensor *t = halo_gguf_tensor_at(g, i);
        if (pool == HALO_POOL_HOST) {
            if (t->n_bytes) L->order[m++] = i;
        } else if (pool != HALO_POOL_DISK) {
            return halo_fail(err, HALO_E_UNSUPPORTED,
                             "loader: tensor %s is planned for the %s pool; only host (CPU) "
                             "pools can be loaded until a GPU backend exists",
                             t->name, halo_pool_name((halo_pool_kind)pool));
        }
    }
    *n_resident = m;
    sort_g = g; /* qsort has no context argument in C11; loading is not reentrant here */
    qsort(L->order, m, sizeof *L->order, by_position);
    uint64_t arena = 0;
    for (uint64_t k = 0; k < m; k++) {
        const halo_gguf_tensor *t = halo_gguf_tensor_at(g, L->order[k]);
        uint64_t end = t->file_offset + t->n_bytes;
        run *r = L->n_runs ? &L->runs[L->n_runs - 1] : NULL;
        if (r && r->shard == t->shard && t->file_offset <= r->need_end + RUN_GAP) {
            if (end > r->need_end) r->need_end = end;
            r->file_end = align_up(r->need_end);
            r->last = k;
            continue;
        }
        if (r) arena += r->file_end - r->file_start;
        r = &L->runs[L->n_runs++];
        r->shard = t->shard;
        r->file_start = align_down(t->file_offset);
        r->need_end = end;
        r->file_end = align_up(end);
        r->arena_off = arena;
        r->first = r->last = k;
    }
    if (L->n_runs) arena += L->runs[L->n_runs - 1].file_end - L->runs[L->n_runs - 1].file_start;
    L->a->size = arena;

    size_t n_chunks = 0;
    for (size_t i = 0; i < L->n_runs; i++)
        n_chunks += (L->runs[i].file_end - L->runs[i].file_start + CHUNK - 1) / CHUNK;
    L->chunks = malloc((n_chunks ? n_chunks : 1) * sizeof *L->chunks);
    if (!L->chunks) return halo_fail(err, HALO_E_NOMEM, "loader: out of memory");
    for (size_t i = 0; i < L->n_runs; i++)
        for (uint64_t off = L->runs[i].file_start; off < L->runs[i].file_end; off += CHUNK) {
            uint64_t len = L->runs[i].file_end - off < CHUNK ? L->runs[i].file_end - off : CHUNK;
            L->chunks[L->n_chunks++] = (chunk){(uint32_t)i, off, len};
            L->total += len;
        }
    return HALO_OK;
}

static void loader_free(loader *L) {
    halo_shard_files_close(&L->files, false);
    free(L->order);
    free(L->runs);
    free(L->chunks);
    pthread_mutex_destroy(&L->lock);
}

halo_status halo_mem_arena_load(const halo_gguf *g, const uint8_t *tensor_pool,
                                const halo_load_options *o, halo_mem_arena **out,
                                halo_load_stats *stats, halo_error *err) {
    *out = NULL;
    halo_load_stats st_local;
    if (!stats) stats = &st_local;
    memset(stats, 0, sizeof *stats);
    loader L;
    memset(&L, 0, sizeof L);
    pthread_mutex_init(&L.lock, NULL);
    L.g = g;
    L.o = o;
    halo_mem_arena *a = calloc(1, sizeof *a);
    uint64_t n = halo_gguf_tensor_count(g), resident = 0;
    if (a) a->ptr = calloc(n ? n : 1, sizeof *a->ptr);
    if (!a || !a->ptr) {
        if (a) free(a->ptr);
        free(a);
        loader_free(&L);
        return halo_fail(err, HALO_E_NOMEM, "loader: out of memory");
    }
    a->n_tensors = n;
    L.a = a;
    halo_status st = plan_runs(&L, tensor_pool, &resident, err);
    if (st == HALO_OK) st = halo_shard_files_open(&L.files, g, o && o->no_direct, err);
    if (st == HALO_OK && a->size) {
        a->base = mmap(NULL, a->size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (a->base == MAP_FAILED) {
            a->base = NULL;
            st = halo_fail(err, HALO_E_NOMEM, "loader: cannot map %llu bytes for the host pool: %s",
                           (unsigned long long)a->size, strerror(errno));
        } else {
            madvise(a->base, a->size, MADV_HUGEPAGE); /* fewer TLB misses; a hint only */
        }
    }
    uint32_t threads = o && o->threads ? o->threads : 0;
    if (!threads) {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        threads = cpus > 4 ? 4 : cpus < 1 ? 1 : (uint32_t)cpus;
    }
    if (threads > MAX_THREADS) threads = MAX_THREADS;
    if (st == HALO_OK) {
        clock_gettime(CLOCK_MONOTONIC, &L.t0);
        pthread_t tid[MAX_THREADS];
        uint32_t started = 0;
        for (uint32_t i = 1; i < threads; i++)
            if (pthread_create(&tid[started], NULL, worker, &L) == 0) started++;
        work(&L, true);
        for (uint32_t i = 0; i < started; i++)
            pthread_join(tid[i], NULL);
        st = L.st;
        if (st != HALO_OK && err) *err = L.err;
        if (st == HALO_OK) report(&L, true);
        stats->seconds = now_since(&L.t0);
        stats->threads = started + 1;
    }
    if (st != HALO_OK) {
        loader_free(&L);
        halo_mem_arena_free(a);
        return st;
    }
    for (size_t r = 0; r < L.n_runs; r++)
        for (uint64_t k = L.runs[r].first; k <= L.runs[r].last; k++) {
            const halo_gguf_tensor *t = halo_gguf_tensor_at(g, L.order[k]);
            a->ptr[L.order[k]] =
                a->base + L.runs[r].arena_off + (t->file_offset - L.runs[r].file_start);
        }
    stats->bytes_read = L.total;
    stats->arena_bytes = a->size;
    stats->direct = halo_shard_files_all_direct(&L.files);
    for (uint32_t s = 0; s < halo_gguf_shard_count(g); s++) {
        uint64_t size = 0;
        stats->cached_after += halo_file_cached_bytes(halo_gguf_shard_path(g, s), &size);
        stats->file_bytes += size;
    }
    (void)resident;
    loader_free(&L);
    *out = a;
    return HALO_OK;
}

halo_status halo_mem_arena_adopt(const halo_gguf *g, void *base, size_t size,
                                 halo_mem_arena **out, halo_error *err) {
    *out = NULL;
    uint64_t n = halo_gguf_tensor_count(g);
    if (halo_gguf_shard_count(g) != 1)
        return halo_fail(err, HALO_E_INVALID_ARG, "arena: an adopted image is one shard");
    for (uint64_t i = 0; i < n; i++) {
        const halo_gguf_tensor *t = halo_gguf_tensor_at(g, i);
        if (t->file_offset > size || t->n_bytes > size - t->file_offset)
            return halo_fail(err, HALO_E_INVALID_ARG, "arena: tensor %s lies outside the image",
                             t->name);
    }
    halo_mem_arena *a = calloc(1, sizeof *a);
    if (a) a->ptr = calloc(n ? n : 1, sizeof *a->ptr);
    if (!a || !a->ptr) {
        if (a) free(a->ptr);
        free(a);
        return halo_fail(err, HALO_E_NOMEM, "arena: out of memory");
    }
    a->base = base;
    a->size = size;
    a->n_tensors = n;
    for (uint64_t i = 0; i < n; i++)
        a->ptr[i] = a->base + halo_gguf_tensor_at(g, i)->file_offset;
    *out = a;
    return HALO_OK;
}

const void *halo_mem_arena_tensor(const halo_mem_arena *a, uint64_t i) {
    return a && i < a->n_tensors ? a->ptr[i] : NULL;
}

void halo_mem_arena_free(halo_mem_arena *a) {
    if (!a) return;
    if (a->base) munmap(a->base, a->size);
    free(a->ptr);
    free(a);
}
