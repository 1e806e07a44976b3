/* The clock and random stream the microbenchmarks share. */
#ifndef HALO_BENCH_UTIL_H
#define HALO_BENCH_UTIL_H

#include <stdint.h>
#include <time.h>

/* Seconds on `clock`: CLOCK_THREAD_CPUTIME_ID for kernels timed on one busy core (time slicing
 * does not count), CLOCK_MONOTONIC for work spread over threads. */
static inline double bench_seconds(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* xorshift64: reproducible data, not statistics. */
static inline uint64_t bench_rand(void) {
    static uint64_t s = 88172645463325252ull;
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return s;
}

#endif
