/* Parallel-for pool.
 *
 * A decode step runs a few hundred short loops, so two costs matter: waking sleeping threads
 * (tens of microseconds through a condition variable) and waiting for threads the OS has not
 * scheduled (a whole time slice on a busy machine: with two such processes on two cores, decode
 * fell from 1,800 to 14 tokens/s when every loop waited for every worker). So:
 *   - threads spin briefly on an atomic generation counter before they sleep;
 *   - a loop is over when all its indices are done, not when every worker has checked in: the
 *     caller runs whatever no worker claimed, and a worker that arrives late finds nothing;
 *   - a gate keeps late workers out while the caller publishes the next loop: the caller closes
 *     it and waits until no worker is inside (`active`), a worker enters only by raising
 *     `active` and then finding the gate open (Dekker-style, on sequentially consistent
 *     atomics), so no index of one loop can be claimed with another loop's fields;
 *   - indices are claimed in shrinking runs (guided scheduling: an eighth of a thread's share
 *     of what is left, at least one), and `next` and `done` sit on cache lines of their own:
 *     a decode step's matrix-vector products are thousands of short tasks, and with 16 threads
 *     claiming and counting them one at a time on one shared line, the line's transfers
 *     between cores became a cost of their own. A run is at most 1/(8 x threads) of a loop,
 *     so a worker the OS stops mid-run holds back little. */
#include "core/threadpool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Spin iterations before sleeping: about 50-100 microseconds on current x86. */
enum { SPIN = 20000 };

struct halo_threadpool {
    uint32_t n_threads; /* including the caller */
    pthread_t *workers;
    pthread_mutex_t lock;
    pthread_cond_t start, finished;
    atomic_uint_fast64_t generation; /* bumped per loop so workers know there is new work */
    atomic_bool stop;
    atomic_bool open; /* workers may claim indices */
    /* The current loop: written only while the gate is closed and nobody is active. */
    halo_task_fn fn;
    void *ctx;
    int64_t n;
    bool stats; /* count runs and the caller's wait (halo_threadpool_set_stats) */
    uint64_t runs;
    double wait_ns;
    /* Each worker raises and lowers `active` once a loop: on its own line, so those writes do
     * not take the line the spinning workers read (generation) and the loop's fields from
     * them. */
    _Alignas(64) atomic_int active;        /* workers between raising it and leaving drain() */
    _Alignas(64) atomic_int_fast64_t next; /* next index to claim */
    _Alignas(64) atomic_int_fast64_t done; /* indices finished */
    char pad[64 - sizeof(atomic_int_fast64_t)];
};

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Runs indices until none is left; whoever finishes the last one wakes the caller. */
static void drain(halo_threadpool *p) {
    int64_t n = p->n, share = 8 * (int64_t)p->n_threads;
    for (;;) {
        int64_t i = atomic_load(&p->next), k;
        do {
            if (i >= n) return;
            k = (n - i) / share;
            if (k < 1) k = 1;
        } while (!atomic_compare_exchange_weak(&p->next, &i, i + k));
        for (int64_t j = i; j < i + k; j++)
            p->fn(p->ctx, j);
        if (atomic_fetch_add(&p->done, k) + k == n) {
            pthread_mutex_lock(&p->lock);
            pthread_cond_signal(&p->finished);
            pthread_mutex_unlock(&p->lock);
        }
    }
}

static void *worker(void *arg) {
    halo_threadpool *p = arg;
    uint64_t seen = 0;
    for (;;) {
        for (int s = 0; s < SPIN && atomic_load(&p->generation) == seen && !atomic_load(&p->stop);
             s++)
            cpu_relax();
        if (atomic_load(&p->generation) == seen && !atomic_load(&p->stop)) {
            pthread_mutex_lock(&p->lock);
            while (atomic_load(&p->generation) == seen && !atomic_load(&p->stop))
                pthread_cond_wait(&p->start, &p->lock);
            pthread_mutex_unlock(&p->lock);
        }
        if (atomic_load(&p->stop)) break;
        seen = atomic_load(&p->generation);
        atomic_fetch_add(&p->active, 1);
        if (atomic_load(&p->open)) drain(p);
        atomic_fetch_sub(&p->active, 1);
    }
    return NULL;
}

uint32_t halo_threadpool_cores(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return (uint32_t)CPU_COUNT(&set);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    return cores > 0 ? (uint32_t)cores : 1;
}

halo_threadpool *halo_threadpool_create(uint32_t threads) {
    if (threads == 0) threads = halo_threadpool_cores();
    halo_threadpool *p = aligned_alloc(64, sizeof *p); /* sizeof is a multiple of 64 */
    if (!p) return NULL;
    memset(p, 0, sizeof *p);
    p->n_threads = threads;
    p->workers = calloc(threads, sizeof *p->workers);
    if (!p->workers) {
        free(p);
        return NULL;
    }
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->start, NULL);
    pthread_cond_init(&p->finished, NULL);
    atomic_init(&p->generation, 0);
    atomic_init(&p->stop, false);
    atomic_init(&p->open, false);
    atomic_init(&p->active, 0);
    atomic_init(&p->next, 0);
    atomic_init(&p->done, 0);
    for (uint32_t i = 1; i < threads; i++) {
        if (pthread_create(&p->workers[i], NULL, worker, p) != 0) {
            p->n_threads = i; /* run with the threads that did start */
            break;
        }
    }
    return p;
}

void halo_threadpool_free(halo_threadpool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->lock);
    atomic_store(&p->stop, true);
    pthread_cond_broadcast(&p->start);
    pthread_mutex_unlock(&p->lock);
    for (uint32_t i = 1; i < p->n_threads; i++)
        pthread_join(p->workers[i], NULL);
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->start);
    pthread_cond_destroy(&p->finished);
    free(p->workers);
    free(p);
}

uint32_t halo_threadpool_size(const halo_threadpool *p) {
    return p->n_threads;
}

uint32_t halo_threadpool_pin(halo_threadpool *p) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0) return 0;
    int cpus[CPU_SETSIZE], n = 0;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &set)) cpus[n++] = c;
    if (n == 0) return 0;
    uint32_t pinned = 0;
    for (uint32_t i = 0; i < p->n_threads; i++) {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpus[i % (uint32_t)n], &one);
        pthread_t t = i == 0 ? pthread_self() : p->workers[i];
        pinned += pthread_setaffinity_np(t, sizeof one, &one) == 0;
    }
    return pinned;
}

void halo_threadpool_set_stats(halo_threadpool *p, bool on) {
    p->stats = on;
}

void halo_threadpool_stats(const halo_threadpool *p, uint64_t *runs, double *wait_ns) {
    *runs = p->runs;
    *wait_ns = p->wait_ns;
}

void halo_threadpool_run(halo_threadpool *p, int64_t n, halo_task_fn fn, void *ctx) {
    if (n <= 0) return;
    if (p->n_threads == 1 || n == 1) {
        for (int64_t i = 0; i < n; i++)
            fn(ctx, i);
        return;
    }
    /* The gate is closed and no worker is active (the previous run ended so): publish. */
    p->fn = fn;
    p->ctx = ctx;
    p->n = n;
    atomic_store(&p->done, 0);
    atomic_store(&p->next, 0);
    atomic_store(&p->open, true);
    pthread_mutex_lock(&p->lock);
    atomic_fetch_add(&p->generation, 1);
    pthread_cond_broadcast(&p->start);
    pthread_mutex_unlock(&p->lock);

    drain(p);
    struct timespec t0, t1;
    if (p->stats) clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int s = 0; s < SPIN && atomic_load(&p->done) < n; s++)
        cpu_relax();
    if (atomic_load(&p->done) < n) {
        pthread_mutex_lock(&p->lock);
        while (atomic_load(&p->done) < n)
            pthread_cond_wait(&p->finished, &p->lock);
        pthread_mutex_unlock(&p->lock);
    }
    if (p->stats) {
        clock_gettime(CLOCK_MONOTONIC, &t1);
        p->runs++;
        p->wait_ns += (double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec);
    }
    /* Every index is done; workers still inside are only finding that out. */
    atomic_store(&p->open, false);
    for (int s = 0; atomic_load(&p->active) > 0; s++) {
        if (s < SPIN)
            cpu_relax();
        else
            sched_yield();
    }
}
