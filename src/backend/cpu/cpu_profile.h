/* Where a CPU backend's time goes, op by op (HALO_CPU_PROFILE=1): wall time of each backend op
 * (split further for projections and the experts' phases), the thread pool's loop count and
 * the time its caller waited for the other threads after running out of work. Printed to
 * stderr when the backend is destroyed. A diagnostic for benchmarks (bench/cpu/device.sh):
 * off, it costs one branch per op. */
#ifndef HALO_BACKEND_CPU_PROFILE_H
#define HALO_BACKEND_CPU_PROFILE_H

#include <stdint.h>
#include <time.h>

typedef enum cpu_prof_slot {
    PROF_EMBED,
    PROF_MATMUL_HEAD, /* one token, more than 65,536 output rows: the output head */
    PROF_MATMUL_Q8_1, /* one token, other Q8_0 projections */
    PROF_MATMUL_1,    /* one token, other weight types */
    PROF_MATMUL_N,    /* several tokens */
    PROF_ACT,         /* a projection's activation rows (inside the matmul slots too) */
    PROF_RMS_NORM,
    PROF_ROPE,
    PROF_HC_PRE,
    PROF_HC_POST,
    PROF_ATTENTION,
    PROF_POOL,
    PROF_TOPK,
    PROF_MOE,
    PROF_MOE_ROUTE, /* inside PROF_MOE: activations, router logits, choice */
    PROF_MOE_GATE_UP,
    PROF_MOE_DOWN,
    PROF_MOE_SUM,
    PROF_COPY,
    PROF_SLOTS
} cpu_prof_slot;

enum { PROF_SHAPES = 32 };

/* One-token projections by weight (type, width, rows): their bytes per second. */
typedef struct cpu_prof_shape {
    uint32_t type;
    int64_t in, out;
    uint64_t bytes;
    double ns;
    int64_t calls;
} cpu_prof_shape;

typedef struct cpu_profile {
    double ns[PROF_SLOTS];
    int64_t calls[PROF_SLOTS];
    cpu_prof_shape shape[PROF_SHAPES];
    int n_shapes;
} cpu_profile;

static inline double cpu_prof_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static inline void cpu_prof_add(cpu_profile *p, cpu_prof_slot s, double t0) {
    if (!p) return;
    p->ns[s] += cpu_prof_now() - t0;
    p->calls[s]++;
}

#endif
