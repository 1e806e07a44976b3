/* The expert cache: routed experts streamed from the model file on demand into a fixed set of
 * slots, for models whose weights do not fit in memory (docs/streaming.md).
 *
 * Each slot holds one expert of one layer: its gate, up and down matrices, each read with one
 * O_DIRECT read of the expert's contiguous bytes in the stacked [.., .., n_expert] tensor
 * (widened to 4 KiB blocks, in 1 MiB pieces). The misses of a batch are read together, many
 * reads in flight (an NVMe needs queue depth to reach its bandwidth): through io_uring when
 * halo is built with liburing and the kernel allows it, else by a pool of reader threads.
 * When the filesystem refuses O_DIRECT, reads are buffered and their pages dropped right after
 * (POSIX_FADV_DONTNEED), so the page cache never holds the model twice.
 *
 * The cache's memory is a host mapping of exactly the size the plan admitted, committed when the
 * cache is created (not under the first reads); the caller wraps
 * it in a backend buffer (halo_expert_cache_bind) so views are ordinary tensors. A GPU backend
 * will give device or GPU-visible host memory instead (a staging copy for device memory). */
#ifndef HALO_MEM_EXPERT_CACHE_H
#define HALO_MEM_EXPERT_CACHE_H

#include "backend/backend.h"
#include "halo/gguf.h"
#include "mem/expert_slots.h"

typedef struct halo_expert_cache halo_expert_cache;

/* One layer's routed expert tensors: gate and up [n_embd, n_ff, n_expert], down [n_ff, n_embd,
 * n_expert]; a layer without routed experts has NULLs. */
typedef struct halo_expert_layer {
    const halo_gguf_tensor *gate, *up, *down;
} halo_expert_layer;

typedef struct halo_expert_cache_options {
    uint64_t bytes;   /* memory for the cache: the plan's admitted size, allocated as is */
    uint32_t readers; /* reader threads; 0 = 8 */
    bool no_direct;   /* never O_DIRECT */
    bool no_overlap;  /* resolve waits for all of a batch's misses before handing any out */
    halo_expert_policy policy;
} halo_expert_cache_options;

typedef struct halo_expert_stats {
    uint64_t requests, hits, misses; /* experts asked for, found, read */
    uint64_t reads, bytes_read;      /* file reads (3 per miss) and their bytes */
    double read_seconds;             /* wall time spent waiting for reads */
    uint64_t waited;                 /* experts handed out after waiting for their reads */
    uint64_t prefetched;             /* experts read by a prefetch */
    uint64_t prefetch_used;          /* of those, asked for by their layer */
    uint64_t prefetch_unused;        /* of those, not asked for in their step */
    uint64_t predicted;              /* of the prefetched, read on a prediction */
    uint64_t predicted_used;         /* of those, asked for by their layer */
    uint64_t bytes_allocated;        /* the cache's memory (the plan's admitted size) */
    uint64_t slot_bytes;
    uint32_t slots;
    bool direct;        /* every read so far used O_DIRECT */
    const char *reader; /* "io_uring" or "threads" (a pool of reader threads) */
    halo_expert_policy policy;
} halo_expert_stats;

/* Sets up the cache for the layers of g (n_layer entries of `layers`), its memory mapped and
 * committed; errors: a cache too small for one expert, a shard that cannot be opened. */
halo_status halo_expert_cache_create(const halo_gguf *g, const halo_expert_layer *layers,
                                     uint32_t n_layer, const halo_expert_cache_options *o,
                                     halo_expert_cache **out, halo_error *err);
void halo_expert_cache_free(halo_expert_cache *c);

/* The cache's memory, to wrap in a backend buffer, and that buffer (views point into it). */
void *halo_expert_cache_memory(const halo_expert_cache *c, uint64_t *bytes);
void halo_expert_cache_bind(halo_expert_cache *c, halo_buf *buf);

/* The expert source of one layer, for halo_moe_args.experts (valid while the cache lives). */
const halo_expert_source *halo_expert_cache_source(const halo_expert_cache *c, uint32_t layer);

/* Prefetch. A step (one forward pass) begins: prefetch reservations of the last step that were
 * not asked for are let go, and slots whose reads failed unasked are emptied. Call it before
 * the step's prefetches, never while a backend holds views of the last resolve. */
void halo_expert_cache_step(halo_expert_cache *c);
/* Starts reading the experts ids[0..n) of layer that the cache does not hold, without waiting,
 * and keeps them (and the ones it holds) from eviction until the layer's resolve asks for them
 * or the next step begins. At most the layer's share of the slots; ids out of range are
 * skipped. Returns how many reads it started. Read errors surface in the resolve that asks for
 * the expert (an expert never asked for is read again when it is). */
uint32_t halo_expert_cache_prefetch(halo_expert_cache *c, uint32_t layer, const int32_t *ids,
                                    uint32_t n);
/* The same for experts a prediction names (they may not be asked for): counted apart, as
 * predicted and predicted_used. */
uint32_t halo_expert_cache_predict(halo_expert_cache *c, uint32_t layer, const int32_t *ids,
                                   uint32_t n);
/* Waits until no read is in flight (counted as time waiting for reads). */
void halo_expert_cache_drain(halo_expert_cache *c);

void halo_expert_cache_stats(const halo_expert_cache *c, halo_expert_stats *out);

/* Fault injection for tests: the n-th read from now (1 = the next) fails with EIO; 0 = off.
 * HALO_TEST_FAIL_READ=n in the environment sets it at creation. */
void halo_expert_cache_fail_read(halo_expert_cache *c, uint64_t n);

/* Appends each resolve's layer and expert ids to a text file ("layer id id ...\n"), for the
 * policy replay in bench/stream. HALO_STREAM_TRACE=path sets it at creation. */
void halo_expert_cache_trace(halo_expert_cache *c, const char *path);

#endif
