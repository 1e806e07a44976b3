/* The direct loader: tensors of a GGUF read once, straight to where they will live, through a
 * few aligned staging buffers, never through a host copy of the model. For weights a GPU keeps
 * in its own memory: reader threads fill the staging buffers with O_DIRECT reads (so the page
 * cache stays empty) while the calling thread hands each filled buffer to a sink (the engine's
 * sink copies it into device memory; the buffers are pinned first so those copies are DMA at
 * full bus speed). Disk reads and copies overlap; host memory used is the staging buffers only.
 *
 * Layout (as the arena loader's, src/mem/loader.c): the wanted tensors are sorted by (shard,
 * file offset) and merged into runs (gaps up to 1 MiB are read through); each run's range,
 * widened to 4 KiB blocks, is cut into chunks of the staging size, so every read has a
 * block-aligned offset, length and buffer. A tensor may span chunks: the sink gets it in
 * pieces, each with its offset inside the tensor. */
#ifndef HALO_MEM_DIRECT_LOAD_H
#define HALO_MEM_DIRECT_LOAD_H

#include <stdbool.h>
#include <stdint.h>

#include "halo/gguf.h"
#include "halo/plan.h"
#include "halo/status.h"

typedef struct halo_direct_sink {
    /* Stores bytes [offset, offset + n) of tensor `index` (gguf order) from src, which stays
     * valid only during the call. Called on the loading thread only, one call at a time. */
    halo_status (*write)(void *user, uint64_t index, uint64_t offset, const void *src, uint64_t n,
                         halo_error *err);
    /* Optional: prepares a staging buffer for the sink's copies (a GPU backend pins it) before
     * the first read into it; *handle is given back to unpin when loading ends. */
    halo_status (*pin)(void *user, void *mem, uint64_t bytes, void **handle, halo_error *err);
    void (*unpin)(void *user, void *handle);
    void *user;
} halo_direct_sink;

typedef struct halo_direct_options {
    uint64_t staging_bytes; /* per buffer; 0 = 64 MiB; rounded up to 4 KiB */
    uint32_t buffers;       /* staging buffers; 0 = 4 (at least 2: one filled while one drains) */
    bool no_direct;         /* never O_DIRECT */
    halo_load_progress_fn progress;
    void *user;
} halo_direct_options;

typedef struct halo_direct_stats {
    uint64_t bytes_read;    /* file bytes read (tensor bytes + alignment and gaps) */
    uint64_t tensor_bytes;  /* bytes handed to the sink */
    uint64_t chunks;        /* reads (one per staging buffer fill) */
    uint64_t staging_bytes; /* host memory used for staging, in all */
    double seconds;
    bool direct; /* every read used O_DIRECT */
} halo_direct_stats;

/* Reads every tensor i with want[i] (want NULL: every tensor) into the sink. Errors name the file
 * and the tensor (a short read, an I/O error, a failed sink write); a failure stops the load. */
halo_status halo_direct_load(const halo_gguf *g, const bool *want, const halo_direct_sink *sink,
                             const halo_direct_options *o, halo_direct_stats *stats,
                             halo_error *err);

/* One read of the plan: `len` bytes at `off` in `shard` (both multiples of 4 KiB), of which the
 * bytes before `need` must be there (past the last tensor the file may end). */
typedef struct halo_direct_chunk {
    uint32_t shard;
    uint64_t off, len, need;
    uint64_t first; /* position in order[] of the first tensor that ends past off */
} halo_direct_chunk;

typedef struct halo_direct_plan {
    uint64_t *order; /* wanted tensor indices sorted by (shard, offset) */
    uint64_t n_order;
    halo_direct_chunk *chunks;
    uint64_t n_chunks;
    uint64_t read_bytes, tensor_bytes;
} halo_direct_plan;

/* The reads halo_direct_load makes for want with chunks of at most chunk_bytes (a multiple of
 * 4 KiB). Exposed for tests of the alignment logic. Caller frees with halo_direct_plan_free. */
halo_status halo_direct_plan_make(const halo_gguf *g, const bool *want, uint64_t chunk_bytes,
                                  halo_direct_plan *out, halo_error *err);
void halo_direct_plan_free(halo_direct_plan *p);

#endif
