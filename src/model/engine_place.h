/* Carrying out the plan's pools on a GPU backend (engine_place_gpu.c), and the load progress the
 * engine reports over its phases. Not part of the public API. */
#ifndef HALO_MODEL_ENGINE_PLACE_H
#define HALO_MODEL_ENGINE_PLACE_H

#include <time.h>

#include "halo/plan.h"
#include "model/engine_internal.h"

/* One running total over the phases of a load (host arena reads, direct reads into GPU memory,
 * a synthetic model's fill): each phase reports its own bytes; the caller sees one bar. */
typedef struct halo_load_meter {
    halo_load_progress_fn fn; /* NULL: no reports */
    void *user;
    uint64_t base;      /* tensor bytes of the phases already done */
    uint64_t phase;     /* tensor bytes of the running phase */
    uint64_t total;     /* tensor bytes of the whole load */
    struct timespec t0; /* when loading started */
    bool finished;      /* done == total was reported */
} halo_load_meter;

/* A phase's progress (user: the meter), rescaled to tensor bytes of the whole load. */
void halo_load_meter_report(const halo_load_progress *p, void *user);
/* Ends the running phase; the next one has `next` tensor bytes. */
void halo_load_meter_next(halo_load_meter *m, uint64_t next);

/* The pools the host arena loader reads for a GPU backend: tensors the GPU reads from host memory
 * (gpu-host, host) go to the arena; device and managed ones are left on the file (HALO_POOL_DISK
 * for the arena loader: the direct loader reads them into their buffers); streamed ones too.
 * NULL when out of memory; caller frees. *arena_bytes: the tensor bytes the arena gets. */
uint8_t *halo_engine_arena_pools(const halo_gguf *g, const halo_plan *plan, uint64_t *arena_bytes);

/* Tensor bytes the plan puts in device or managed memory. */
uint64_t halo_engine_gpu_bytes(const halo_gguf *g, const halo_plan *plan);
/* Per tensor: true unless the plan puts it in device or managed memory. NULL when out of memory;
 * caller frees. */
bool *halo_engine_host_tensors(const halo_gguf *g, const halo_plan *plan);

/* A GPU backend's weight buffers: each pool's tensors, in file order, in buffers of at most the
 * backend's largest (Vulkan: maxMemoryAllocationSize), no tensor straddling two. */
typedef struct halo_gpu_layout {
    uint32_t n_bufs;
    uint32_t *buf_of; /* per tensor: its buffer (UINT32_MAX: none) */
    uint64_t *off;    /* per tensor: its offset in that buffer (256-byte aligned) */
    uint64_t *size;   /* per buffer: its bytes (at most cap) */
    uint8_t *pool;    /* per buffer: its pool */
} halo_gpu_layout;
/* Lays out n tensors of bytes[i] (0: not placed) in pool[i] in buffers of at most cap bytes (0:
 * no limit); the caller's arrays hold n entries each. HALO_E_NOMEM with *too_big set when a
 * tensor is larger than cap. */
halo_status halo_engine_layout(const uint64_t *bytes, const uint8_t *pool, uint64_t n, uint64_t cap,
                               halo_gpu_layout *l, uint64_t *too_big);

/* Allocates the device and managed pools' buffers (split at the backend's largest buffer), reads
 * their tensors straight from the file into them (the direct loader: pinned staging, no host copy)
 * or, for a synthetic model (synth: its open parameters; NULL for a file), makes them in the
 * arena a batch at a time and copies them up, maps the arena for the gpu-host tensors, binds
 * every weight, and frees the arena when nothing stays in host memory. */
halo_status halo_engine_place_gpu(halo_engine *e, const halo_plan *plan,
                                  const halo_engine_params *synth, halo_load_meter *meter,
                                  halo_error *err);

/* Streamed experts on a GPU backend: the host expert cache (src/mem/stream.c) as staging, sized
 * small, under the GPU's own expert cache of the plan's admitted size in the plan's pool
 * (src/mem/expert_device.c), installed in every layer's expert source. Needs e->tensor_bufs. */
halo_status halo_engine_stream_gpu(halo_engine *e, const halo_plan *plan, halo_error *err);
/* Frees what halo_engine_stream_gpu made (its buffer is in e->tensor_bufs); NULL-safe. */
void halo_engine_stream_gpu_free(halo_engine *e);

#endif
