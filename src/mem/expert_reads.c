/* The expert cache's reads in flight (see expert_cache_internal.h): a queue of jobs, taken by
 * io_uring in the calling thread or by a pool of reader threads, completing while the backend
 * computes; the calling thread settles finished loads when it comes back. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mem/expert_cache_internal.h"

/* Counts a read and applies the test fault: true when this read is to fail. */
static bool injected_fault(halo_expert_cache *c, read_job *j) {
    uint64_t idx = atomic_fetch_add(&c->reads_issued, 1) + 1;
    if (idx != atomic_load(&c->fail_at)) return false;
    j->error = EIO;
    return true;
}

static int job_fd(halo_expert_cache *c, const read_job *j) {
    return c->fd_direct[j->shard] >= 0 && !atomic_load(&c->direct_failed) ? c->fd_direct[j->shard]
                                                                          : c->fd_buf[j->shard];
}

/* A read's end: short reads past the expert's bytes are errors; buffered reads drop their
 * pages (keeps the page cache from holding streamed experts). Then the slot has one job less
 * to wait for. */
static void finish_job(halo_expert_cache *c, read_job *j, int fd) {
    j->done = true;
    if (!j->error && j->off + j->got < j->need) j->error = -1;
    if (fd >= 0 && fd == c->fd_buf[j->shard])
        posix_fadvise(fd, (off_t)j->off, (off_t)j->len, POSIX_FADV_DONTNEED);
    atomic_fetch_sub(&c->ld[j->slot].pending, 1);
}

/* Reads the rest of a job here with pread (reader threads, or io_uring's fallback). */
static void read_here(halo_expert_cache *c, read_job *j) {
    int fd = job_fd(c, j);
    while (j->got < j->len) {
        ssize_t n = pread(fd, j->dst + j->got, j->len - j->got, (off_t)(j->off + j->got));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EINVAL && fd == c->fd_direct[j->shard]) {
            atomic_store(&c->direct_failed, true); /* O_DIRECT taken at open, not for reads */
            fd = c->fd_buf[j->shard];
            continue;
        }
        if (n < 0) {
            j->error = errno;
            break;
        }
        if (n == 0) break;
        j->got += (uint64_t)n;
    }
    finish_job(c, j, fd);
}

static void run_job(halo_expert_cache *c, read_job *j) {
    if (injected_fault(c, j))
        finish_job(c, j, -1);
    else
        read_here(c, j);
}

static uint64_t queued(const halo_expert_cache *c) {
    return c->q_tail - c->q_head;
}

static void push(halo_expert_cache *c, uint32_t job) {
    c->queue[c->q_tail++ % c->q_cap] = job;
}

/* ---- reader threads ----------------------------------------------------------------------- */

/* Takes one queued job and runs it; the caller holds c->mu and keeps it on return. */
static void take_one(halo_expert_cache *c) {
    read_job *j = &c->jobs[c->queue[c->q_head++ % c->q_cap]];
    pthread_mutex_unlock(&c->mu);
    run_job(c, j);
    pthread_mutex_lock(&c->mu);
    pthread_cond_broadcast(&c->cv_done);
}

static void *reader(void *arg) {
    halo_expert_cache *c = arg;
    pthread_mutex_lock(&c->mu);
    while (!c->stop) {
        if (queued(c))
            take_one(c);
        else
            pthread_cond_wait(&c->cv_work, &c->mu);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

/* ---- io_uring ----------------------------------------------------------------------------- */

#ifdef HALO_HAVE_URING
/* io_uring: the calling thread queues reads (up to RING_DEPTH in flight) and reaps completions,
 * with no thread to wake: on a busy machine, waking reader threads cost tens of milliseconds
 * per round (bench/stream/RESULTS.md). */
static bool ring_queue(halo_expert_cache *c, uint32_t index) {
    read_job *j = &c->jobs[index];
    struct io_uring_sqe *sqe = io_uring_get_sqe(&c->ring);
    if (!sqe) return false;
    io_uring_prep_read(sqe, job_fd(c, j), j->dst + j->got, (unsigned)(j->len - j->got),
                       j->off + j->got);
    io_uring_sqe_set_data64(sqe, index);
    c->in_flight++;
    return true;
}

/* Moves queued jobs into the ring and submits them. */
static void ring_fill(halo_expert_cache *c) {
    bool any = false;
    while (queued(c) && c->in_flight < RING_DEPTH) {
        uint32_t index = c->queue[c->q_head % c->q_cap];
        read_job *j = &c->jobs[index];
        if (j->got == 0 && injected_fault(c, j)) {
            c->q_head++;
            finish_job(c, j, -1);
            continue;
        }
        if (!ring_queue(c, index)) break;
        c->q_head++;
        any = true;
    }
    if (any) io_uring_submit(&c->ring); /* a failed submit leaves them queued for the next */
}

/* The ring broke (never seen; a kernel refusing mid-run): every unfinished job fails, so
 * its slot is dropped and the eval ends with the error. */
static void ring_broken(halo_expert_cache *c, int error) {
    c->have_ring = false;
    c->q_head = c->q_tail;
    c->in_flight = 0;
    for (uint32_t i = 0; i < c->n_loading; i++) {
        int32_t slot = c->loading[i];
        for (uint32_t k = 0; k < c->ld[slot].n_jobs; k++) {
            read_job *j = &c->jobs[(uint64_t)slot * c->pps + k];
            if (j->done) continue;
            j->error = error;
            finish_job(c, j, -1);
        }
    }
}

static void ring_complete(halo_expert_cache *c, struct io_uring_cqe *cqe) {
    uint32_t index = (uint32_t)io_uring_cqe_get_data64(cqe);
    read_job *j = &c->jobs[index];
    int res = cqe->res;
    io_uring_cqe_seen(&c->ring, cqe);
    c->in_flight--;
    int fd = job_fd(c, j);
    if (res == -EINVAL && fd == c->fd_direct[j->shard]) {
        atomic_store(&c->direct_failed, true); /* O_DIRECT refused: buffered from now */
        res = -EAGAIN;
    }
    if (res == -EAGAIN || res == -EINTR || (res > 0 && j->got + (uint64_t)res < j->len)) {
        if (res > 0) j->got += (uint64_t)res;
        push(c, index); /* the rest goes round again */
        return;
    }
    if (res < 0)
        j->error = -res;
    else
        j->got += (uint64_t)res; /* res == 0: end of file */
    finish_job(c, j, fd);
}

/* Reaps completions; with block, waits for at least one first when reads are in flight. */
static void ring_reap(halo_expert_cache *c, bool block) {
    ring_fill(c);
    struct io_uring_cqe *cqe;
    if (block && c->in_flight) {
        int r = io_uring_wait_cqe(&c->ring, &cqe);
        if (r < 0 && r != -EINTR && r != -EAGAIN) {
            ring_broken(c, -r);
            return;
        }
    }
    while (c->in_flight && io_uring_peek_cqe(&c->ring, &cqe) == 0)
        ring_complete(c, cqe);
    ring_fill(c);
}
#endif

/* ---- the calling thread's side ------------------------------------------------------------ */

void halo_xc_queue_slot(halo_expert_cache *c, int32_t slot) {
    uint32_t first = (uint32_t)slot * c->pps, n = c->ld[slot].n_jobs;
#ifdef HALO_HAVE_URING
    if (c->have_ring) {
        for (uint32_t k = 0; k < n; k++)
            push(c, first + k);
        ring_fill(c);
        return;
    }
#endif
    pthread_mutex_lock(&c->mu);
    for (uint32_t k = 0; k < n; k++)
        push(c, first + k);
    pthread_cond_broadcast(&c->cv_work);
    pthread_mutex_unlock(&c->mu);
}

/* A load whose reads all ended: its statistics, its first error, and its hold released
 * (kept while a prefetch reserves it). */
static void settle_slot(halo_expert_cache *c, int32_t slot) {
    slot_load *L = &c->ld[slot];
    L->loading = false;
    L->bad = -1;
    for (uint32_t k = 0; k < L->n_jobs; k++) {
        const read_job *j = &c->jobs[(uint64_t)slot * c->pps + k];
        c->st.reads++;
        c->st.bytes_read += j->got;
        if (j->error && L->bad < 0) L->bad = (int32_t)k;
    }
    halo_expert_slots_hold(&c->slots, slot, L->reserved);
}

static void settle(halo_expert_cache *c) {
    for (uint32_t i = 0; i < c->n_loading;) {
        int32_t slot = c->loading[i];
        if (atomic_load(&c->ld[slot].pending)) {
            i++;
            continue;
        }
        settle_slot(c, slot);
        c->loading[i] = c->loading[--c->n_loading];
    }
}

void halo_xc_settle(halo_expert_cache *c) {
#ifdef HALO_HAVE_URING
    if (c->have_ring) ring_reap(c, false);
#endif
    settle(c);
}

static bool ended(const halo_expert_cache *c, const int32_t *slots, uint32_t n, bool all) {
    uint32_t done = 0;
    for (uint32_t i = 0; i < n; i++)
        done += atomic_load(&c->ld[slots[i]].pending) == 0;
    return all ? done == n : done > 0 || n == 0;
}

void halo_xc_wait(halo_expert_cache *c, const int32_t *slots, uint32_t n, bool all) {
    for (uint32_t i = 0; i < n; i++)
        if (atomic_load(&c->ld[slots[i]].pending)) c->ld[slots[i]].waited = true;
#ifdef HALO_HAVE_URING
    if (c->have_ring) {
        while (!ended(c, slots, n, all) && c->have_ring)
            ring_reap(c, true);
        bool done = ended(c, slots, n, all); /* before settle reorders c->loading (drain) */
        settle(c);
        if (done) return;
        /* the ring broke: what it had has failed; anything queued since is read below */
    }
#endif
    pthread_mutex_lock(&c->mu);
    while (!ended(c, slots, n, all)) {
        if (queued(c))
            take_one(c); /* the calling thread reads too rather than sleep */
        else
            pthread_cond_wait(&c->cv_done, &c->mu);
    }
    pthread_mutex_unlock(&c->mu);
    settle(c);
}

void halo_xc_drain(halo_expert_cache *c) {
    if (c->n_loading) halo_xc_wait(c, c->loading, c->n_loading, true);
}

void halo_xc_readers_start(halo_expert_cache *c, uint32_t readers) {
#ifdef HALO_HAVE_URING
    /* io_uring unless refused (a seccomp filter, an old kernel) or HALO_STREAM_READER=threads.
     * With the ring no reader thread runs (the queue is then the calling thread's alone); if
     * the ring ever breaks, the calling thread reads what is left itself. */
    const char *rd = getenv("HALO_STREAM_READER");
    if (!(rd && !strcmp(rd, "threads")))
        c->have_ring = io_uring_queue_init(RING_DEPTH, &c->ring, 0) == 0;
    c->st.reader = c->have_ring ? "io_uring" : "threads";
    if (c->have_ring) return;
#else
    c->st.reader = "threads";
#endif
    /* Reader threads read while the calling thread computes; it joins them when it waits. */
    if (!readers) readers = 8;
    if (readers > MAX_READERS) readers = MAX_READERS;
    for (uint32_t i = 0; i < readers; i++)
        if (pthread_create(&c->threads[c->n_threads], NULL, reader, c) == 0) c->n_threads++;
}

void halo_xc_readers_stop(halo_expert_cache *c) {
    halo_xc_drain(c);
    pthread_mutex_lock(&c->mu);
    c->stop = true;
    pthread_cond_broadcast(&c->cv_work);
    pthread_mutex_unlock(&c->mu);
    for (uint32_t i = 0; i < c->n_threads; i++)
        pthread_join(c->threads[i], NULL);
    c->n_threads = 0;
#ifdef HALO_HAVE_URING
    if (c->have_ring) io_uring_queue_exit(&c->ring);
    c->have_ring = false;
#endif
}
