/* Expert streaming: what an engine opened with weights "stream" (or "auto" on a machine where
 * the model does not fit) does with its routed experts, for the CLI's --verbose and speed line.
 * docs/streaming.md explains the mechanism and how to size the cache. */
#ifndef HALO_STREAM_H
#define HALO_STREAM_H

#include <stdbool.h>
#include <stdint.h>

#include "halo/halo.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct halo_stream_stats {
    uint64_t cache_requested;        /* bytes asked for (0: as large as fits) */
    uint64_t cache_admitted;         /* bytes the plan admitted: exactly what is allocated */
    uint64_t cache_allocated;        /* bytes mapped for the cache (measured) */
    uint64_t expert_bytes;           /* all routed experts in the file */
    uint32_t slots;                  /* experts the cache holds at once */
    const char *policy;              /* "lru", ... */
    const char *note;                /* the plan's loud line about the cache, or "" */
    uint64_t requests, hits, misses; /* experts the router chose (per batch and layer) */
    uint64_t bytes_read;
    double read_seconds; /* time waiting for reads */
    bool direct;         /* O_DIRECT reads (the page cache is bypassed) */
    const char *reader;  /* "io_uring" or "threads" */
    /* Prefetch (docs/streaming.md): misses whose reads had not ended when their layer needed
     * them (the rest were read while something else computed), experts read ahead of their
     * layer, and of those the ones their layer then asked for. */
    uint64_t waited, prefetched, prefetch_used;
    uint64_t predicted, predicted_used; /* of the prefetched, those read on a guess (predict) */
} halo_stream_stats;

/* False when the engine's experts are resident (nothing streams). */
bool halo_engine_stream_stats(const halo_engine *e, halo_stream_stats *out);

#ifdef __cplusplus
}
#endif
#endif
