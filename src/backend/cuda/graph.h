/* What the CUDA backend's graph execution did (src/backend/cuda/graph.cu), for tests and
 * benchmarks: a plain C header, usable from C in a CUDA or HIP build (HALO_CUDA / HALO_HIP). */
#ifndef HALO_BACKEND_CUDA_GRAPH_H
#define HALO_BACKEND_CUDA_GRAPH_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "backend/backend.h"

typedef struct halo_cuda_graph_stats {
    /* Graphs are on for this backend: a CUDA build (not HIP), HALO_CUDA_GRAPHS not 0, and
     * neither HALO_CUDA_PROFILE nor HALO_CUDA_NAIVE set. Off, every count below stays 0. */
    bool enabled;
    uint64_t steps;        /* steps (sync to sync) that began with an embed of at most 16 tokens */
    uint64_t graph_steps;  /* of those, run entirely as replayed graphs */
    uint64_t graphs;       /* graphs launched: one per layer (the forward's check) and the head */
    uint64_t instantiated; /* executable graphs made: a new shape, or an update refused */
    uint64_t updated;      /* executable graphs updated in place with a new capture */
    uint64_t refused;      /* updates the runtime refused (then re-instantiated) */
    uint64_t early;        /* pieces ended before the step's first check (HALO_CUDA_GRAPH_FIRST) */
    uint64_t breaks;       /* captures ended early because the host needed the stream (scratch
                              growth, a full upload ring, streamed experts, a buffer call): the
                              rest of that step ran eagerly */
    uint64_t kernel_nodes; /* kernel nodes launched by graph steps, all together */
    uint64_t last_step_kernels; /* kernel nodes of the last graph step (its kernel launches) */
    /* Not about graphs: op scratch requests so far, counted only while HALO_TEST_FAIL_SCRATCH
     * is set (its N-th request fails), so a test can aim a failure at a given step. */
    uint64_t scratch_requests;
    /* Not about graphs either: kernels launched (or captured) so far, for tests that check a
     * fused path ran. */
    uint64_t launches;
} halo_cuda_graph_stats;

/* The counters of a backend made by halo_backend_cuda_create; false (and *out zeroed) for any
 * other backend. */
bool halo_backend_cuda_graph_stats(halo_backend *be, halo_cuda_graph_stats *out);

#ifdef __cplusplus
}
#endif

#endif
