/* The expert cache (see expert_cache.h): slots in one host mapping, a policy from
 * expert_slots.c, and a pool of reader threads that reads a round's misses together. */
#include "mem/expert_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"

#ifdef HALO_HAVE_URING
#include <liburing.h>
#define RING_DEPTH 64
#endif

#define BLOCK 4096u
#define MAX_READERS 64

typedef struct read_job {
    int32_t slot;
    uint32_t layer, expert, shard;
    const char *tensor;
    uint8_t *dst;
    uint64_t off, len; /* block-aligned file range */
    uint64_t need;     /* the expert's bytes end here (file offset) */
    int error;         /* errno, or -1 for a short read */
    bool done;
    uint64_t got;
} read_job;

struct halo_expert_cache {
    const halo_gguf *g;
    halo_expert_layer *layers;
    uint32_t n_layer, n_expert;
    uint64_t region[3]; /* byte offset of gate, up, down inside a slot */
    uint64_t slot_bytes;
    uint8_t *mem;
    uint64_t mem_bytes;
    halo_buf *buf;
    halo_expert_slots slots;
    halo_expert_source *sources;
    uint32_t n_shards;
    int *fd_direct, *fd_buf;
    atomic_bool direct_failed;
    bool direct;

    /* reader pool: jobs[next..n_jobs) are waiting; the caller waits for n_done == n_jobs */
    pthread_t threads[MAX_READERS];
    uint32_t n_threads;
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_done;
    read_job *jobs;
    uint64_t max_jobs;
    uint64_t piece; /* largest single read */
    uint32_t n_jobs, next, n_done;
    bool stop;

    atomic_uint_fast64_t reads_issued, fail_at;
#ifdef HALO_HAVE_URING
    struct io_uring ring;
    bool have_ring;
#endif
    halo_expert_stats st;
    FILE *trace;
};

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static uint64_t align_up(uint64_t v) {
    return (v + BLOCK - 1) / BLOCK * BLOCK;
}

/* ---- reads -------------------------------------------------------------------------------- */

/* Counts a read and applies the test fault: true when this read is to fail. */
static bool injected_fault(halo_expert_cache *c, read_job *j) {
    uint64_t idx = atomic_fetch_add(&c->reads_issued, 1) + 1;
    if (idx != atomic_load(&c->fail_at)) return false;
    j->error = EIO;
    j->done = true;
    return true;
}

/* A read's end: short reads past the expert's bytes are errors; buffered reads drop their
 * pages (keeps the page cache from holding streamed experts). */
static void finish_read(halo_expert_cache *c, read_job *j, int fd) {
    j->done = true;
    if (!j->error && j->off + j->got < j->need) j->error = -1;
    if (fd == c->fd_buf[j->shard])
        posix_fadvise(fd, (off_t)j->off, (off_t)j->len, POSIX_FADV_DONTNEED);
}

static void do_read(halo_expert_cache *c, read_job *j) {
    if (injected_fault(c, j)) return;
    int fd = c->fd_direct[j->shard] >= 0 && !atomic_load(&c->direct_failed) ? c->fd_direct[j->shard]
                                                                            : c->fd_buf[j->shard];
    uint64_t got = 0;
    while (got < j->len) {
        ssize_t n = pread(fd, j->dst + got, j->len - got, (off_t)(j->off + got));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EINVAL && fd == c->fd_direct[j->shard]) {
            atomic_store(&c->direct_failed, true); /* O_DIRECT taken at open, not for reads */
            fd = c->fd_buf[j->shard];
            continue;
        }
        if (n < 0) {
            j->error = errno;
            return;
        }
        if (n == 0) break;
        got += (uint64_t)n;
    }
    j->got = got;
    finish_read(c, j, fd);
}

/* Takes and runs waiting jobs; the caller holds c->mu and keeps it on return. */
static void drain(halo_expert_cache *c) {
    while (c->next < c->n_jobs) {
        read_job *j = &c->jobs[c->next++];
        pthread_mutex_unlock(&c->mu);
        do_read(c, j);
        pthread_mutex_lock(&c->mu);
        if (++c->n_done == c->n_jobs) pthread_cond_broadcast(&c->cv_done);
    }
}

static void *reader(void *arg) {
    halo_expert_cache *c = arg;
    pthread_mutex_lock(&c->mu);
    while (!c->stop) {
        drain(c);
        if (!c->stop) pthread_cond_wait(&c->cv_work, &c->mu);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

#ifdef HALO_HAVE_URING
/* io_uring: the calling thread queues every read of the round (up to RING_DEPTH in flight) and
 * reaps completions, with no thread to wake: on a busy machine, waking reader threads cost tens
 * of milliseconds per round (bench/stream/RESULTS.md). */
static int job_fd(halo_expert_cache *c, const read_job *j) {
    return c->fd_direct[j->shard] >= 0 && !atomic_load(&c->direct_failed) ? c->fd_direct[j->shard]
                                                                          : c->fd_buf[j->shard];
}

static bool queue_read(halo_expert_cache *c, read_job *j, uint32_t index) {
    struct io_uring_sqe *sqe = io_uring_get_sqe(&c->ring);
    if (!sqe) return false;
    io_uring_prep_read(sqe, job_fd(c, j), j->dst + j->got, (unsigned)(j->len - j->got),
                       j->off + j->got);
    io_uring_sqe_set_data64(sqe, index);
    return true;
}

static void run_jobs_ring(halo_expert_cache *c, uint32_t n) {
    uint32_t next = 0, in_flight = 0;
    while (next < n || in_flight) {
        while (next < n && in_flight < RING_DEPTH) {
            read_job *j = &c->jobs[next];
            if (injected_fault(c, j)) {
                next++;
                continue;
            }
            if (!queue_read(c, j, next)) break;
            next++;
            in_flight++;
        }
        if (io_uring_submit(&c->ring) < 0 && !in_flight) break;
        if (!in_flight) continue;
        struct io_uring_cqe *cqe;
        int r = io_uring_wait_cqe(&c->ring, &cqe);
        if (r == -EINTR) continue;
        if (r < 0) { /* the ring broke: every unfinished read fails (its slot is dropped) */
            for (uint32_t i = 0; i < n; i++)
                if (!c->jobs[i].done) c->jobs[i].error = -r;
            return;
        }
        read_job *j = &c->jobs[io_uring_cqe_get_data64(cqe)];
        int res = cqe->res;
        io_uring_cqe_seen(&c->ring, cqe);
        in_flight--;
        int fd = job_fd(c, j);
        if (res == -EINVAL && fd == c->fd_direct[j->shard]) {
            atomic_store(&c->direct_failed, true); /* O_DIRECT refused: buffered from now */
            res = -EAGAIN;
        }
        if (res == -EAGAIN || res == -EINTR || (res > 0 && j->got + (uint64_t)res < j->len)) {
            if (res > 0) j->got += (uint64_t)res;
            if (queue_read(c, j, (uint32_t)(j - c->jobs))) {
                in_flight++;
                continue;
            }
            do_read(c, j); /* no queue entry free: read the rest here */
            continue;
        }
        if (res < 0)
            j->error = -res;
        else
            j->got += (uint64_t)res; /* res == 0: end of file */
        finish_read(c, j, job_fd(c, j));
    }
}
#endif

static void run_jobs(halo_expert_cache *c, uint32_t n) {
#ifdef HALO_HAVE_URING
    if (c->have_ring) {
        run_jobs_ring(c, n);
        return;
    }
#endif
    pthread_mutex_lock(&c->mu);
    c->n_jobs = n;
    c->next = c->n_done = 0;
    pthread_cond_broadcast(&c->cv_work);
    drain(c);
    while (c->n_done < c->n_jobs)
        pthread_cond_wait(&c->cv_done, &c->mu);
    c->n_jobs = c->next = c->n_done = 0;
    pthread_mutex_unlock(&c->mu);
}

/* ---- resolve ------------------------------------------------------------------------------ */

/* One expert matrix's read, split into pieces of at most c->piece bytes (1 MiB) so that even a
 * single miss keeps several reads in flight (an NVMe reaches its bandwidth only with queue depth).
 */
static void add_job(halo_expert_cache *c, uint32_t *n, int32_t slot, uint32_t layer,
                    uint32_t expert, int mat) {
    const halo_expert_layer *L = &c->layers[layer];
    const halo_gguf_tensor *t = mat == 0 ? L->gate : mat == 1 ? L->up : L->down;
    uint64_t per = t->n_bytes / (uint64_t)t->ne[2];
    uint64_t off = t->file_offset + (uint64_t)expert * per;
    uint64_t start = off / BLOCK * BLOCK, end = align_up(off + per);
    uint8_t *dst = c->mem + (uint64_t)slot * c->slot_bytes + c->region[mat];
    for (uint64_t at = start; at < end; at += c->piece) {
        read_job *j = &c->jobs[(*n)++];
        memset(j, 0, sizeof *j);
        j->slot = slot;
        j->layer = layer;
        j->expert = expert;
        j->shard = t->shard;
        j->tensor = t->name;
        j->off = at;
        j->len = end - at < c->piece ? end - at : c->piece;
        j->need = off + per < at + j->len ? off + per : at + j->len;
        j->dst = dst + (at - start);
    }
}

static halo_tensor view_of(const halo_expert_cache *c, int32_t slot, uint32_t layer,
                           uint32_t expert, int mat) {
    const halo_expert_layer *L = &c->layers[layer];
    const halo_gguf_tensor *t = mat == 0 ? L->gate : mat == 1 ? L->up : L->down;
    uint64_t off = t->file_offset + (uint64_t)expert * (t->n_bytes / (uint64_t)t->ne[2]);
    halo_tensor v = {.buf = c->buf,
                     .offset = (uint64_t)slot * c->slot_bytes + c->region[mat] + off % BLOCK,
                     .type = t->type,
                     .ne = {t->ne[0], t->ne[1], 1, 1}};
    return v;
}

static halo_status resolve(const halo_expert_source *src, int32_t *ids, uint32_t n,
                           halo_expert_view *views, uint32_t *n_ready, halo_error *err) {
    halo_expert_cache *c = src->impl;
    uint32_t layer = src->layer;
    *n_ready = 0;
    if (!c->layers[layer].gate)
        return halo_fail(err, HALO_E_BAD_VALUE, "expert cache: blk.%u has no routed experts",
                         layer);
    for (uint32_t i = 0; i < n; i++)
        if (ids[i] < 0 || (uint32_t)ids[i] >= c->n_expert)
            return halo_fail(err, HALO_E_BAD_VALUE, "%s: routing chose expert %d of %u",
                             c->layers[layer].gate->name, ids[i], c->n_expert);
    if (c->trace) {
        fprintf(c->trace, "%u", layer);
        for (uint32_t i = 0; i < n; i++)
            fprintf(c->trace, " %d", ids[i]);
        fputc('\n', c->trace);
    }
    halo_expert_slots *s = &c->slots;
    halo_expert_slots_new_round(s);
    /* Hits first, so a round never evicts an expert this batch still needs. */
    uint32_t ready = 0;
    for (uint32_t i = 0; i < n; i++) {
        int32_t slot = halo_expert_slots_find(s, layer, (uint32_t)ids[i]);
        if (slot < 0) continue;
        int32_t tmp = ids[ready];
        ids[ready++] = ids[i];
        ids[i] = tmp;
        halo_expert_slots_use(s, slot);
    }
    c->st.hits += ready;
    uint32_t hits = ready, n_jobs = 0;
    for (; ready < n; ready++) {
        int32_t slot = halo_expert_slots_victim(s, layer);
        if (slot < 0) break;
        halo_expert_slots_assign(s, slot, layer, (uint32_t)ids[ready]);
        for (int mat = 0; mat < 3; mat++)
            add_job(c, &n_jobs, slot, layer, (uint32_t)ids[ready], mat);
    }
    c->st.requests += ready;
    c->st.misses += ready - hits;
    if (n_jobs) {
        double t0 = now();
        run_jobs(c, n_jobs);
        c->st.read_seconds += now() - t0;
        c->st.reads += n_jobs;
        const read_job *bad = NULL;
        for (uint32_t i = 0; i < n_jobs; i++) {
            c->st.bytes_read += c->jobs[i].got;
            if (c->jobs[i].error && !bad) bad = &c->jobs[i];
        }
        if (bad) {
            /* Nothing half-read stays in the cache: every slot of this round's misses is
             * emptied, so a retry reads them again. */
            for (uint32_t i = 0; i < n_jobs; i++)
                halo_expert_slots_drop(s, c->jobs[i].slot);
            const char *path = halo_gguf_shard_path(c->g, bad->shard);
            if (bad->error < 0)
                return halo_fail(err, HALO_E_TRUNCATED,
                                 "%s: tensor %s, expert %u: the file ends at %llu but the "
                                 "expert's bytes run to %llu (file changed or truncated)",
                                 path, bad->tensor, bad->expert,
                                 (unsigned long long)(bad->off + bad->got),
                                 (unsigned long long)bad->need);
            return halo_fail(err, HALO_E_IO, "%s: reading tensor %s, expert %u at offset %llu: %s",
                             path, bad->tensor, bad->expert, (unsigned long long)bad->off,
                             strerror(bad->error));
        }
    }
    for (uint32_t i = 0; i < ready; i++) {
        int32_t slot = halo_expert_slots_find(s, layer, (uint32_t)ids[i]);
        views[i].gate = view_of(c, slot, layer, (uint32_t)ids[i], 0);
        views[i].up = view_of(c, slot, layer, (uint32_t)ids[i], 1);
        views[i].down = view_of(c, slot, layer, (uint32_t)ids[i], 2);
    }
    *n_ready = ready;
    return HALO_OK;
}

/* ---- setup -------------------------------------------------------------------------------- */

/* Commits the cache's memory now. Left to fault in under the reads, slots filled for the first
 * time on a machine short of free memory read at 0.16 GB/s, against 0.41 GB/s once committed
 * (bench/stream/RESULTS.md: the commit then took most of a 157 s load there, paid once). An
 * admitted size that cannot be had fails at open, not in the middle of a reply. */
static halo_status populate(halo_expert_cache *c, halo_error *err) {
#ifdef MADV_POPULATE_WRITE
    if (madvise(c->mem, c->mem_bytes, MADV_POPULATE_WRITE) == 0) return HALO_OK;
    if (errno == ENOMEM || errno == EFAULT || errno == EHWPOISON)
        return halo_fail(err, HALO_E_NOMEM, "expert cache: cannot commit %llu bytes: %s",
                         (unsigned long long)c->mem_bytes, strerror(errno));
#endif
    long page = sysconf(_SC_PAGESIZE); /* older kernels: touch every page */
    for (uint64_t at = 0; at < c->mem_bytes; at += (uint64_t)page)
        c->mem[at] = 0;
    return HALO_OK;
}

halo_status halo_expert_cache_create(const halo_gguf *g, const halo_expert_layer *layers,
                                     uint32_t n_layer, const halo_expert_cache_options *o,
                                     halo_expert_cache **out, halo_error *err) {
    *out = NULL;
    halo_expert_cache *c = calloc(1, sizeof *c);
    if (!c) return halo_fail(err, HALO_E_NOMEM, "expert cache: out of memory");
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv_work, NULL);
    pthread_cond_init(&c->cv_done, NULL);
    c->g = g;
    c->n_layer = n_layer;
    c->layers = calloc(n_layer ? n_layer : 1, sizeof *c->layers);
    c->sources = calloc(n_layer ? n_layer : 1, sizeof *c->sources);
    c->n_shards = halo_gguf_shard_count(g);
    c->fd_direct = malloc(c->n_shards * sizeof(int));
    c->fd_buf = malloc(c->n_shards * sizeof(int));
    c->st.policy = o->policy;
    halo_status st = HALO_OK;
    if (!c->layers || !c->sources || !c->fd_direct || !c->fd_buf)
        st = halo_fail(err, HALO_E_NOMEM, "expert cache: out of memory");
    for (uint32_t s = 0; !st && s < c->n_shards; s++)
        c->fd_direct[s] = c->fd_buf[s] = -1;
    /* A slot fits the largest expert of any layer: each matrix the blocks its bytes touch
     * (O_DIRECT reads whole blocks into the slot), so a slot is a little larger than the
     * expert — by at most one block per matrix, 0.2 % of DeepSeek V4 Flash's 6.75 MiB
     * experts, more for tiny test models. */
    uint64_t cap[3] = {0, 0, 0};
    for (uint32_t l = 0; !st && l < n_layer; l++) {
        c->layers[l] = layers[l];
        c->sources[l] = (halo_expert_source){.resolve = resolve, .impl = c, .layer = l};
        const halo_gguf_tensor *m[3] = {layers[l].gate, layers[l].up, layers[l].down};
        if (!m[0] || !m[1] || !m[2]) continue;
        for (int k = 0; k < 3; k++) {
            uint64_t per = m[k]->n_bytes / (uint64_t)m[k]->ne[2];
            if (m[k]->ne[2] != m[0]->ne[2] || per * (uint64_t)m[k]->ne[2] != m[k]->n_bytes)
                st = halo_fail(err, HALO_E_BAD_VALUE,
                               "expert cache: tensor %s does not split "
                               "into %lld experts",
                               m[k]->name, (long long)m[0]->ne[2]);
            for (int64_t e = 0; e < m[k]->ne[2]; e++) {
                uint64_t off = m[k]->file_offset + (uint64_t)e * per;
                uint64_t span = align_up(off + per) - off / BLOCK * BLOCK;
                cap[k] = span > cap[k] ? span : cap[k];
            }
        }
        if (c->n_expert && (uint32_t)m[0]->ne[2] != c->n_expert)
            st = halo_fail(err, HALO_E_BAD_VALUE, "expert cache: layers differ in expert count");
        c->n_expert = (uint32_t)m[0]->ne[2];
    }
    /* HALO_TEST_READ_PIECE (a multiple of 4 KiB) makes tests split tiny experts too. */
    const char *piece = getenv("HALO_TEST_READ_PIECE");
    c->piece = piece && *piece ? strtoull(piece, NULL, 10) / BLOCK * BLOCK : 0;
    if (!c->piece) c->piece = (uint64_t)1 << 20;
    c->region[0] = 0;
    c->region[1] = cap[0];
    c->region[2] = cap[0] + cap[1];
    c->slot_bytes = cap[0] + cap[1] + cap[2];
    uint64_t n_slots = c->slot_bytes ? o->bytes / c->slot_bytes : 0;
    if (!st && n_slots == 0)
        st = halo_fail(err, HALO_E_BAD_VALUE,
                       "expert cache of %llu bytes cannot hold one expert (%llu bytes)",
                       (unsigned long long)o->bytes, (unsigned long long)c->slot_bytes);
    uint64_t all = (uint64_t)n_layer * c->n_expert;
    if (n_slots > all) n_slots = all;
    if (!st &&
        !halo_expert_slots_init(&c->slots, n_layer, c->n_expert, (uint32_t)n_slots, o->policy))
        st = halo_fail(err, HALO_E_NOMEM, "expert cache: out of memory");
    if (!st) {
        uint64_t pieces = 0;
        for (int k = 0; k < 3; k++)
            pieces += (cap[k] + c->piece - 1) / c->piece;
        c->max_jobs = n_slots * pieces;
        c->jobs = malloc((size_t)c->max_jobs * sizeof *c->jobs);
        if (!c->jobs) st = halo_fail(err, HALO_E_NOMEM, "expert cache: out of memory");
    }
    if (!st) {
        /* Exactly the admitted bytes: what the plan printed is what is mapped. */
        c->mem_bytes = o->bytes;
        void *m =
            mmap(NULL, c->mem_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED)
            st = halo_fail(err, HALO_E_NOMEM, "expert cache: cannot map %llu bytes: %s",
                           (unsigned long long)c->mem_bytes, strerror(errno));
        else {
            c->mem = m;
            madvise(m, c->mem_bytes, MADV_HUGEPAGE);
            st = populate(c, err);
        }
    }
    c->direct = !o->no_direct;
    for (uint32_t s = 0; !st && s < c->n_shards; s++) {
        const char *path = halo_gguf_shard_path(g, s);
        c->fd_buf[s] = open(path, O_RDONLY | O_CLOEXEC);
        if (c->fd_buf[s] < 0) {
            st = halo_fail(err, HALO_E_IO, "%s: cannot open for streaming: %s", path,
                           strerror(errno));
            break;
        }
        if (!o->no_direct) c->fd_direct[s] = open(path, O_RDONLY | O_CLOEXEC | O_DIRECT);
        if (c->fd_direct[s] < 0) c->direct = false;
        posix_fadvise(c->fd_buf[s], 0, 0, POSIX_FADV_RANDOM);
    }
#ifdef HALO_HAVE_URING
    /* io_uring unless refused (a seccomp filter, an old kernel) or HALO_STREAM_READER=threads. */
    const char *rd = getenv("HALO_STREAM_READER");
    if (!st && !(rd && !strcmp(rd, "threads")))
        c->have_ring = io_uring_queue_init(RING_DEPTH, &c->ring, 0) == 0;
    c->st.reader = c->have_ring ? "io_uring" : "threads";
    uint32_t readers = c->have_ring ? 1 : o->readers ? o->readers : 8;
#else
    c->st.reader = "threads";
    uint32_t readers = o->readers ? o->readers : 8;
#endif
    if (readers > MAX_READERS) readers = MAX_READERS;
    /* The calling thread reads too: readers - 1 helpers. */
    for (uint32_t i = 1; !st && i < readers; i++)
        if (pthread_create(&c->threads[c->n_threads], NULL, reader, c) == 0) c->n_threads++;
    const char *fail = getenv("HALO_TEST_FAIL_READ");
    atomic_init(&c->reads_issued, 0);
    atomic_init(&c->fail_at, fail && *fail ? strtoull(fail, NULL, 10) : 0);
    const char *trace = getenv("HALO_STREAM_TRACE");
    if (!st && trace && *trace) halo_expert_cache_trace(c, trace);
    c->st.bytes_allocated = c->mem_bytes;
    c->st.slot_bytes = c->slot_bytes;
    c->st.slots = (uint32_t)n_slots;
    if (st) {
        halo_expert_cache_free(c);
        return st;
    }
    *out = c;
    return HALO_OK;
}

void halo_expert_cache_free(halo_expert_cache *c) {
    if (!c) return;
    pthread_mutex_lock(&c->mu);
    c->stop = true;
    pthread_cond_broadcast(&c->cv_work);
    pthread_mutex_unlock(&c->mu);
    for (uint32_t i = 0; i < c->n_threads; i++)
        pthread_join(c->threads[i], NULL);
    for (uint32_t s = 0; c->fd_buf && c->fd_direct && s < c->n_shards; s++) {
        if (c->fd_buf[s] >= 0) close(c->fd_buf[s]);
        if (c->fd_direct[s] >= 0) close(c->fd_direct[s]);
    }
    if (c->trace) fclose(c->trace);
#ifdef HALO_HAVE_URING
    if (c->have_ring) io_uring_queue_exit(&c->ring);
#endif
    if (c->mem) munmap(c->mem, c->mem_bytes);
    halo_expert_slots_free(&c->slots);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv_work);
    pthread_cond_destroy(&c->cv_done);
    free(c->fd_buf);
    free(c->fd_direct);
    free(c->jobs);
    free(c->layers);
    free(c->sources);
    free(c);
}

void *halo_expert_cache_memory(const halo_expert_cache *c, uint64_t *bytes) {
    *bytes = c->mem_bytes;
    return c->mem;
}

void halo_expert_cache_bind(halo_expert_cache *c, halo_buf *buf) {
    c->buf = buf;
}

const halo_expert_source *halo_expert_cache_source(const halo_expert_cache *c, uint32_t layer) {
    return layer < c->n_layer && c->layers[layer].gate ? &c->sources[layer] : NULL;
}

void halo_expert_cache_stats(const halo_expert_cache *c, halo_expert_stats *out) {
    *out = c->st;
    out->direct = c->direct && !atomic_load(&c->direct_failed);
}

void halo_expert_cache_fail_read(halo_expert_cache *c, uint64_t n) {
    atomic_store(&c->fail_at, n ? atomic_load(&c->reads_issued) + n : 0);
}

void halo_expert_cache_trace(halo_expert_cache *c, const char *path) {
    if (c->trace) fclose(c->trace);
    c->trace = fopen(path, "a");
}
