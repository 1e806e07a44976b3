/* A fixed pool of worker threads running parallel-for loops: halo_threadpool_run(p, n, fn, ctx)
 * calls fn(ctx, i) for i in [0, n) across the workers and the caller, and returns when all are
 * done. One loop at a time per pool. */
#ifndef HALO_CORE_THREADPOOL_H
#define HALO_CORE_THREADPOOL_H

#include <stdbool.h>
#include <stdint.h>

typedef struct halo_threadpool halo_threadpool;
typedef void (*halo_task_fn)(void *ctx, int64_t i);

/* threads = total threads including the caller; 0 = halo_threadpool_cores(). NULL when out of
 * memory or threads cannot be started. */
halo_threadpool *halo_threadpool_create(uint32_t threads);
void halo_threadpool_free(halo_threadpool *p);
uint32_t halo_threadpool_size(const halo_threadpool *p);
/* Cores this process may run on (its CPU affinity, which taskset and cgroup cpusets narrow;
 * else the online cores). More threads than this only slow a pool down: its threads spin
 * while they wait, taking cores from the ones with work (1,000 threads on 2 cores decoded 300x
 * slower); front ends cap --threads here. */
uint32_t halo_threadpool_cores(void);

/* Pins the caller to the first CPU of the process's affinity set and worker i to the i-th
 * (HALO_CPU_PIN=1 in the CPU backend, for A/B runs). Returns how many threads were pinned. */
uint32_t halo_threadpool_pin(halo_threadpool *p);

/* Counting for profiles (off by default): loops run and the time the caller spent after its
 * own share waiting for the other threads to finish theirs (imbalance, late wake-ups). */
void halo_threadpool_set_stats(halo_threadpool *p, bool on);
void halo_threadpool_stats(const halo_threadpool *p, uint64_t *runs, double *wait_ns);

void halo_threadpool_run(halo_threadpool *p, int64_t n, halo_task_fn fn, void *ctx);

#endif
