/* The expert cache's state, shared by its two halves: expert_cache.c (setup, resolve, prefetch)
 * and expert_reads.c (the reads in flight). Not for use outside src/mem.
 *
 * Reads are asynchronous: a load queues the pieces of one expert (its slot's jobs) and returns;
 * they complete while the backend computes (io_uring: the kernel reads while the calling thread
 * is elsewhere; threads: the reader pool). Everything about slots and the policy is touched by
 * the calling thread only; a reader thread touches only its job and the slot's pending count. */
#ifndef HALO_MEM_EXPERT_CACHE_INTERNAL_H
#define HALO_MEM_EXPERT_CACHE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

#include "mem/expert_cache.h"

#ifdef HALO_HAVE_URING
#include <liburing.h>
/* Reads in flight at once: 256 pieces of up to 1 MiB, ~37 of DeepSeek V4 Flash's experts, so a
 * prefill's misses or three hash-routed layers' prefetches are all queued in the kernel while
 * the calling thread computes (it refills the ring only when it comes back). */
#define RING_DEPTH 256
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

/* One slot's load: its jobs are jobs[slot·pps .. slot·pps + n_jobs). */
typedef struct slot_load {
    atomic_uint pending; /* jobs not finished (readers decrement it) */
    uint32_t n_jobs;
    bool loading;  /* a load started and not yet settled by the calling thread */
    bool reserved; /* a prefetch asked for it this step and no resolve has yet */
    bool miss;     /* read for a request or a prefetch; counted as a miss when resolved */
    bool prefetch; /* read by a prefetch (counted as used when resolved) */
    bool spec;     /* read on a prediction (halo_expert_cache_predict) */
    bool waited;   /* a resolve blocked on its reads */
    int32_t bad;   /* the first failed job once settled, or -1 */
} slot_load;

struct halo_expert_cache {
    const halo_gguf *g;
    halo_expert_layer *layers;
    uint32_t n_layer, n_expert, n_streamed; /* n_streamed: layers with routed experts */
    uint64_t region[3];                     /* byte offset of gate, up, down inside a slot */
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
    bool overlap; /* resolve hands out what is ready before the rest of a batch's reads end */

    slot_load *ld;    /* [n_slots] */
    int32_t *loading; /* slots with loading set, n_loading of them */
    uint32_t n_loading;
    int32_t *scratch;               /* [2·n_expert] resolve's partition */
    uint8_t *mark;                  /* [n_expert] */
    uint32_t cont_layer, cont_left; /* the rest of a batch resolve still owes (trace) */

    /* Jobs: one fixed set per slot. The queue holds jobs waiting to be read (a ring of job
     * indices); reader threads take them under mu, io_uring takes them in the calling thread. */
    read_job *jobs;
    uint32_t pps;   /* jobs per slot at most */
    uint64_t piece; /* largest single read */
    uint32_t *queue;
    uint64_t q_cap, q_head, q_tail;
    pthread_t threads[MAX_READERS];
    uint32_t n_threads;
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_done;
    bool stop;

    atomic_uint_fast64_t reads_issued, fail_at;
#ifdef HALO_HAVE_URING
    struct io_uring ring;
    bool have_ring;
    uint32_t in_flight;
#endif
    halo_expert_stats st;
    FILE *trace;
};

/* expert_reads.c ----------------------------------------------------------------------------- */

/* Queues the jobs of slot's load (ld[slot] set up) and hands them to the readers. */
void halo_xc_queue_slot(halo_expert_cache *c, int32_t slot);
/* Moves what finished since the last call forward: refills the ring, reaps completions, and
 * settles every slot whose reads all ended (statistics, ld.bad, the hold released unless the
 * slot is reserved). Never blocks. */
void halo_xc_settle(halo_expert_cache *c);
/* Blocks until at least one of slots[0..n) has no reads pending (all of them when all is
 * set), then settles. Each slot still pending when it first blocks gets ld.waited. */
void halo_xc_wait(halo_expert_cache *c, const int32_t *slots, uint32_t n, bool all);
/* Blocks until no read is in flight (before the memory goes, or to free every slot). */
void halo_xc_drain(halo_expert_cache *c);
/* Starts the readers (io_uring, else threads); the reader's name goes to c->st.reader. */
void halo_xc_readers_start(halo_expert_cache *c, uint32_t readers);
void halo_xc_readers_stop(halo_expert_cache *c);

#endif
