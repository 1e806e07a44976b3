/* Streamed experts for a GPU backend: a cache of expert slots in the GPU's memory (the pool the
 * plan put the expert cache in: device memory on a discrete GPU) over the host expert cache
 * (src/mem/expert_cache.h), which becomes the pinned staging between the file and the GPU.
 *
 * It stands in for each layer's expert source: resolve returns the experts found in its slots
 * first; the rest it asks of the host cache (which reads what it lacks from the file) and copies
 * into slots it frees by LRU, as many as are unpinned this round. The views it returns are
 * tensors of one backend buffer, so a GPU's kernels read experts from its own memory and each
 * expert crosses the bus once per time it enters the GPU cache, not per token. */
#ifndef HALO_MEM_EXPERT_DEVICE_H
#define HALO_MEM_EXPERT_DEVICE_H

#include "backend/backend.h"
#include "model/weights.h"

typedef struct halo_expert_device halo_expert_device;

/* Allocates `bytes` in `pool` (a halo_pool_kind) on be, cut into slots of one expert each (at
 * least n_used of them), and replaces every layer's w->layer[l].experts (host expert cache
 * sources) by its own. *buf is the slots' buffer: the caller frees it with the backend, after
 * halo_expert_device_free. Caller frees *out. */
halo_status halo_expert_device_create(halo_backend *be, halo_weights *w, uint32_t pool,
                                      uint64_t bytes, uint32_t n_used, halo_buf **buf,
                                      halo_expert_device **out, halo_error *err);
void halo_expert_device_free(halo_expert_device *d);

/* The device cache installed in w's sources, or NULL. */
halo_expert_device *halo_expert_device_of(const halo_weights *w);

/* Bytes of one expert slot (gate, up and down of the largest layer, each 256-aligned). */
uint64_t halo_expert_device_slot_bytes(const halo_weights *w);

typedef struct halo_expert_device_stats {
    uint64_t requests, hits, uploads, upload_bytes;
    uint32_t slots;
} halo_expert_device_stats;
void halo_expert_device_stats_get(const halo_expert_device *d, halo_expert_device_stats *out);

#endif
