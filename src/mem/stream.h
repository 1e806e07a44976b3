/* Expert streaming for an engine: the expert cache set up from the plan, its memory wrapped
 * as a backend buffer, and each layer's expert source installed in the weights. Kept here so
 * the engine (src/model/engine.c) needs only a few calls. */
#ifndef HALO_MEM_STREAM_H
#define HALO_MEM_STREAM_H

#include "halo/plan.h"
#include "model/weights.h"

typedef struct halo_engine_stream halo_engine_stream;

/* True when the plan streams routed experts (some tensor is in HALO_POOL_DISK). */
bool halo_stream_planned(const halo_plan *plan);

/* Creates the cache with the plan's admitted size (HALO_EXPERT_POLICY=lru|lfu|lru-per-layer
 * picks the policy; default lru-per-layer, see bench/stream/RESULTS.md) and points w's layers at
 * it. Caller frees with halo_stream_free before the backend is destroyed. */
halo_status halo_stream_create(const halo_gguf *g, halo_weights *w, const halo_plan *plan,
                               halo_backend *be, halo_engine_stream **out, halo_error *err);
void halo_stream_free(halo_engine_stream *s, halo_backend *be);

#endif
