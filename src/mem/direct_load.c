/* The direct loader (see direct_load.h): reader threads fill aligned staging buffers from the
 * file, the calling thread drains each filled buffer into the sink. */
#include "mem/direct_load.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "mem/shard_files.h"

#define BLOCK 4096u
#define DEFAULT_STAGING ((uint64_t)64 << 20) /* large reads keep an NVMe's queue busy */
#define DEFAULT_BUFFERS 4u
#define MAX_BUFFERS 16u
#define RUN_GAP ((uint64_t)1 << 20)

static uint64_t align_down(uint64_t v) {
    return v / BLOCK * BLOCK;
}
static uint64_t align_up(uint64_t v) {
    return (v + BLOCK - 1) / BLOCK * BLOCK;
}

/* ---- the plan of reads ------------------------------------------------------------------- */

static const halo_gguf *sort_g; /* qsort has no context argument in C11 (loading: one thread) */
static int by_position(const void *x, const void *y) {
    const halo_gguf_tensor *a = halo_gguf_tensor_at(sort_g, *(const uint64_t *)x);
    const halo_gguf_tensor *b = halo_gguf_tensor_at(sort_g, *(const uint64_t *)y);
    if (a->shard != b->shard) return a->shard < b->shard ? -1 : 1;
    return a->file_offset < b->file_offset ? -1 : a->file_offset > b->file_offset;
}

halo_status halo_direct_plan_make(const halo_gguf *g, const bool *want, uint64_t chunk_bytes,
                                  halo_direct_plan *p, halo_error *err) {
    memset(p, 0, sizeof *p);
    if (!chunk_bytes || chunk_bytes % BLOCK)
        return halo_fail(err, HALO_E_INVALID_ARG,
                         "direct loader: chunk size %llu is not a multiple of %u",
                         (unsigned long long)chunk_bytes, BLOCK);
    uint64_t n = halo_gguf_tensor_count(g);
    p->order = malloc((n ? n : 1) * sizeof *p->order);
    if (!p->order) return halo_fail(err, HALO_E_NOMEM, "direct loader: out of memory");
    for (uint64_t i = 0; i < n; i++)
        if ((!want || want[i]) && halo_gguf_tensor_at(g, i)->n_bytes) p->order[p->n_order++] = i;
    sort_g = g;
    qsort(p->order, p->n_order, sizeof *p->order, by_position);

    /* Two passes over the runs: count the chunks, then fill them. */
    for (int pass = 0; pass < 2; pass++) {
        uint64_t n_chunks = 0;
        for (uint64_t k = 0; k < p->n_order;) {
            const halo_gguf_tensor *t = halo_gguf_tensor_at(g, p->order[k]);
            uint32_t shard = t->shard;
            uint64_t start = align_down(t->file_offset), need = t->file_offset + t->n_bytes;
            uint64_t k1 = k + 1;
            for (; k1 < p->n_order; k1++) {
                const halo_gguf_tensor *u = halo_gguf_tensor_at(g, p->order[k1]);
                if (u->shard != shard || u->file_offset > need + RUN_GAP) break;
                if (u->file_offset + u->n_bytes > need) need = u->file_offset + u->n_bytes;
            }
            uint64_t end = align_up(need), first = k;
            for (uint64_t off = start; off < end; off += chunk_bytes) {
                uint64_t len = end - off < chunk_bytes ? end - off : chunk_bytes;
                if (pass) {
                    /* The first tensor of the run still running at off (sorted by start, and
                     * tensors do not overlap, so they also end in order). */
                    while (first < k1) {
                        const halo_gguf_tensor *u = halo_gguf_tensor_at(g, p->order[first]);
                        if (u->file_offset + u->n_bytes > off) break;
                        first++;
                    }
                    p->chunks[n_chunks] = (halo_direct_chunk){
                        shard, off, len, off + len < need ? off + len : need, first};
                    p->read_bytes += len;
                }
                n_chunks++;
            }
            k = k1;
        }
        if (!pass) {
            p->chunks = malloc((n_chunks ? n_chunks : 1) * sizeof *p->chunks);
            if (!p->chunks) {
                halo_direct_plan_free(p);
                return halo_fail(err, HALO_E_NOMEM, "direct loader: out of memory");
            }
        }
        p->n_chunks = n_chunks;
    }
    for (uint64_t k = 0; k < p->n_order; k++)
        p->tensor_bytes += halo_gguf_tensor_at(g, p->order[k])->n_bytes;
    return HALO_OK;
}

void halo_direct_plan_free(halo_direct_plan *p) {
    if (!p) return;
    free(p->order);
    free(p->chunks);
    memset(p, 0, sizeof *p);
}

/* ---- loading ------------------------------------------------------------------------------ */

enum { BUF_FREE, BUF_READING, BUF_FULL };

typedef struct staging {
    uint8_t *mem;
    void *pin_handle;
    int state;
    uint64_t chunk;
} staging;

typedef struct loader {
    const halo_gguf *g;
    const halo_direct_plan *plan;
    const halo_direct_sink *sink;
    const halo_direct_options *o;
    staging buf[MAX_BUFFERS];
    uint32_t n_buf;
    uint64_t staging_bytes;
    halo_shard_files files;
    pthread_mutex_t lock;
    pthread_cond_t changed; /* a buffer changed state, or the load failed */
    uint64_t next_chunk;    /* the next chunk a reader takes */
    bool failed;
    halo_status st;
    halo_error err;
    struct timespec t0;
    double last_report;
    uint64_t done;
} loader;

static double seconds_since(const struct timespec *t0) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) + (double)(t.tv_nsec - t0->tv_nsec) * 1e-9;
}

/* Records the first failure (under the lock) and wakes everyone. */
static void fail_locked(loader *L, halo_status st, const halo_error *e) {
    if (!L->failed) {
        L->failed = true;
        L->st = st;
        L->err = *e;
    }
    pthread_cond_broadcast(&L->changed);
}

static void fail(loader *L, halo_status st, const char *fmt, ...) HALO_PRINTF(3, 4);
static void fail(loader *L, halo_status st, const char *fmt, ...) {
    halo_error e = {0};
    va_list ap;
    va_start(ap, fmt);
    halo_failv(&e, st, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&L->lock);
    fail_locked(L, st, &e);
    pthread_mutex_unlock(&L->lock);
}

/* The tensor whose bytes run past `at` first, from chunk c on: the one a short read cut off. */
static const char *tensor_at(const loader *L, const halo_direct_chunk *c, uint64_t at) {
    for (uint64_t k = c->first; k < L->plan->n_order; k++) {
        const halo_gguf_tensor *t = halo_gguf_tensor_at(L->g, L->plan->order[k]);
        if (t->file_offset + t->n_bytes > at) return t->name;
    }
    return "?";
}

/* One chunk into one staging buffer: O_DIRECT, buffered if the filesystem refuses it. */
static bool read_chunk(loader *L, const halo_direct_chunk *c, uint8_t *dst) {
    const char *path = halo_gguf_shard_path(L->g, c->shard);
    uint64_t got = 0;
    int e = halo_shard_files_read(&L->files, c->shard, c->off, c->len, dst, &got);
    if (e) {
        fail(L, HALO_E_IO, "%s: reading tensor %s at offset %llu: %s", path,
             tensor_at(L, c, c->off + got), (unsigned long long)(c->off + got), strerror(e));
        return false;
    }
    if (c->off + got < c->need) {
        fail(L, HALO_E_TRUNCATED,
             "%s: tensor %s: the file ends at %llu but its bytes run to %llu (file changed or "
             "truncated after it was opened)",
             path, tensor_at(L, c, c->off + got), (unsigned long long)(c->off + got),
             (unsigned long long)c->need);
        return false;
    }
    return true;
}

static void *reader(void *arg) {
    loader *L = arg;
    pthread_mutex_lock(&L->lock);
    for (;;) {
        if (L->failed || L->next_chunk >= L->plan->n_chunks) break;
        uint32_t b = 0;
        while (b < L->n_buf && L->buf[b].state != BUF_FREE)
            b++;
        if (b == L->n_buf) {
            pthread_cond_wait(&L->changed, &L->lock);
            continue;
        }
        uint64_t c = L->next_chunk++;
        L->buf[b].state = BUF_READING;
        L->buf[b].chunk = c;
        pthread_mutex_unlock(&L->lock);
        bool ok = read_chunk(L, &L->plan->chunks[c], L->buf[b].mem);
        pthread_mutex_lock(&L->lock);
        if (!ok) break;
        L->buf[b].state = BUF_FULL;
        pthread_cond_broadcast(&L->changed);
    }
    pthread_mutex_unlock(&L->lock);
    return NULL;
}

/* Hands the tensors' bytes in one filled chunk to the sink. */
static halo_status drain(loader *L, const halo_direct_chunk *c, const uint8_t *mem,
                         halo_error *err) {
    const uint64_t end = c->off + c->len;
    for (uint64_t k = c->first; k < L->plan->n_order; k++) {
        uint64_t i = L->plan->order[k];
        const halo_gguf_tensor *t = halo_gguf_tensor_at(L->g, i);
        if (t->shard != c->shard || t->file_offset >= end) break;
        uint64_t a = t->file_offset > c->off ? t->file_offset : c->off;
        uint64_t b = t->file_offset + t->n_bytes < end ? t->file_offset + t->n_bytes : end;
        if (a >= b) continue;
        halo_status st =
            L->sink->write(L->sink->user, i, a - t->file_offset, mem + (a - c->off), b - a, err);
        if (st) return halo_error_prefix(err, "tensor %s: ", t->name);
        L->done += b - a;
    }
    return HALO_OK;
}

static void report(loader *L, bool final) {
    if (!L->o || !L->o->progress) return;
    double t = seconds_since(&L->t0);
    if (!final && t - L->last_report < 0.1) return;
    L->last_report = t;
    halo_load_progress pr = {L->done, L->plan->tensor_bytes, t};
    L->o->progress(&pr, L->o->user);
}

/* The calling thread's part: drain filled buffers in whatever order they fill. */
static void consume(loader *L) {
    for (uint64_t drained = 0; drained < L->plan->n_chunks;) {
        pthread_mutex_lock(&L->lock);
        uint32_t b = 0;
        for (;;) {
            if (L->failed) break;
            for (b = 0; b < L->n_buf && L->buf[b].state != BUF_FULL; b++) {
            }
            if (b < L->n_buf) break;
            pthread_cond_wait(&L->changed, &L->lock);
        }
        bool stop = L->failed;
        pthread_mutex_unlock(&L->lock);
        if (stop) return;
        halo_error e = {0};
        halo_status st = drain(L, &L->plan->chunks[L->buf[b].chunk], L->buf[b].mem, &e);
        pthread_mutex_lock(&L->lock);
        if (st) fail_locked(L, st, &e);
        L->buf[b].state = BUF_FREE;
        pthread_cond_broadcast(&L->changed);
        pthread_mutex_unlock(&L->lock);
        if (st) return;
        drained++;
        report(L, false);
    }
}

static void loader_free(loader *L) {
    halo_shard_files_close(&L->files, true);
    for (uint32_t b = 0; b < L->n_buf; b++) {
        if (L->buf[b].pin_handle && L->sink->unpin)
            L->sink->unpin(L->sink->user, L->buf[b].pin_handle);
        free(L->buf[b].mem);
    }
    pthread_cond_destroy(&L->changed);
    pthread_mutex_destroy(&L->lock);
}

halo_status halo_direct_load(const halo_gguf *g, const bool *want, const halo_direct_sink *sink,
                             const halo_direct_options *o, halo_direct_stats *stats,
                             halo_error *err) {
    halo_direct_stats local;
    if (!stats) stats = &local;
    memset(stats, 0, sizeof *stats);
    loader L;
    memset(&L, 0, sizeof L);
    L.g = g;
    L.sink = sink;
    L.o = o;
    pthread_mutex_init(&L.lock, NULL);
    pthread_cond_init(&L.changed, NULL);
    L.staging_bytes = align_up(o && o->staging_bytes ? o->staging_bytes : DEFAULT_STAGING);
    uint32_t n_buf = o && o->buffers ? o->buffers : DEFAULT_BUFFERS;
    n_buf = n_buf < 2 ? 2 : n_buf > MAX_BUFFERS ? MAX_BUFFERS : n_buf;

    halo_direct_plan plan;
    halo_status st = halo_direct_plan_make(g, want, L.staging_bytes, &plan, err);
    if (st) {
        loader_free(&L);
        return st;
    }
    L.plan = &plan;
    /* No more buffers than chunks: a small load pins little. */
    if (plan.n_chunks < n_buf) n_buf = plan.n_chunks < 2 ? 2 : (uint32_t)plan.n_chunks;
    uint64_t buf_bytes = plan.n_chunks == 1 ? plan.chunks[0].len : L.staging_bytes;
    st = halo_shard_files_open(&L.files, g, o && o->no_direct, err);
    for (uint32_t b = 0; !st && plan.n_chunks && b < n_buf; b++) {
        void *mem = NULL;
        if (posix_memalign(&mem, BLOCK, buf_bytes)) {
            st =
                halo_fail(err, HALO_E_NOMEM, "direct loader: cannot allocate %llu bytes of staging",
                          (unsigned long long)buf_bytes);
            break;
        }
        L.buf[L.n_buf++].mem = mem;
        stats->staging_bytes += buf_bytes;
        if (sink->pin) st = sink->pin(sink->user, mem, buf_bytes, &L.buf[b].pin_handle, err);
        if (st) halo_error_prefix(err, "direct loader: staging buffer: ");
    }
    if (!st && plan.n_chunks) {
        clock_gettime(CLOCK_MONOTONIC, &L.t0);
        pthread_t tid[MAX_BUFFERS];
        uint32_t started = 0;
        /* One reader per buffer but one: that one is being drained. */
        for (uint32_t i = 0; i + 1 < L.n_buf; i++)
            if (pthread_create(&tid[started], NULL, reader, &L) == 0) started++;
        if (!started)
            fail(&L, HALO_E_NOMEM, "direct loader: cannot start a reader thread");
        else
            consume(&L);
        /* Done or failed: readers waiting for a buffer wake up and see there is nothing left. */
        pthread_mutex_lock(&L.lock);
        pthread_cond_broadcast(&L.changed);
        pthread_mutex_unlock(&L.lock);
        for (uint32_t i = 0; i < started; i++)
            pthread_join(tid[i], NULL);
        if (L.failed) {
            st = L.st;
            if (err) *err = L.err;
        }
        if (!st) report(&L, true);
        stats->seconds = seconds_since(&L.t0);
    }
    stats->bytes_read = plan.read_bytes;
    stats->tensor_bytes = L.done;
    stats->chunks = plan.n_chunks;
    stats->direct = plan.n_chunks && halo_shard_files_all_direct(&L.files);
    loader_free(&L);
    halo_direct_plan_free(&plan);
    return st;
}
