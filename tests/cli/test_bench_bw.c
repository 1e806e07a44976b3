/* halo bench's host bandwidth measurement (src/cli/bench_bw.c): the last-level cache read from
 * sysfs trees (tests/data/bench/), a buffer that cannot be cache-resident, and a measurement that
 * is positive, repeatable, and slower than the same reads served from cache, i.e. that it
 * measures memory, the decode's ceiling, and not the cache. */
#include <stdio.h>
#include <unistd.h>

#include "check.h"
#include "cli/bench_bw.h"

#define MIB ((uint64_t)1 << 20)

static void llc_is_the_sum_of_distinct_last_level_caches(void) {
    CHECK(bench_llc_bytes("tests/data/bench/two-l3") == 64 * MIB);
    CHECK(bench_llc_bytes("tests/data/bench/l2-only") == 2 * MIB);
    CHECK(bench_llc_bytes("tests/data/bench/no-such-machine") == 0);
}

static void buffer_is_far_larger_than_the_cache(void) {
    static const uint64_t llcs[] = {0, 2 * MIB, 32 * MIB, 64 * MIB, 256 * MIB, 1536 * MIB};
    for (size_t i = 0; i < sizeof llcs / sizeof llcs[0]; i++) {
        uint64_t b = bench_bw_buffer_bytes(llcs[i]);
        CHECK(b >= 4 * llcs[i]);
        CHECK(b >= 1024 * MIB);
    }
}

static void host_bandwidth_measures_memory_not_cache(void) {
    uint64_t llc = bench_llc_bytes("/");
    printf("this machine's last-level cache: %llu MiB\n", (unsigned long long)(llc / MIB));
    uint32_t threads = (uint32_t)sysconf(_SC_NPROCESSORS_ONLN);
    if (threads > 4) threads = 4;
    /* the buffer halo bench reads. Not 4x the LLC that sysfs gives: in this VM sysfs says 32 MiB,
     * yet 128 MiB read at 50 GB/s and 512 MiB or more at 9-10 GB/s (the host's cache is larger
     * than the guest is told), which is why the buffer has a 1 GiB floor */
    uint64_t buffer = bench_bw_buffer_bytes(llc);
    bench_bw a, b, cached;
    CHECK(bench_host_bandwidth(threads, buffer, 1, 5, &a));
    CHECK(bench_host_bandwidth(threads, buffer, 1, 5, &b));
    /* the same bytes again from 4 MiB: each thread's slice stays in its cache */
    CHECK(bench_host_bandwidth(threads, 4 * MIB, (uint32_t)(buffer / (4 * MIB)), 5, &cached));
    printf("memory %.1f and %.1f GB/s (slowest passes %.1f, %.1f), cache %.1f GB/s, %u threads\n",
           a.read_gbs, b.read_gbs, a.worst_gbs, b.worst_gbs, cached.read_gbs, threads);
    CHECK(a.read_gbs > 0 && b.read_gbs > 0 && cached.read_gbs > 0);
    CHECK(a.worst_gbs > 0 && a.worst_gbs <= a.read_gbs);
    CHECK(a.buffer >= buffer - 128 * threads && a.threads == threads && a.passes == 5);
    /* best of 5 on a machine shared with others' builds: within a factor of 2 of each other */
    CHECK(a.read_gbs < 2 * b.read_gbs && b.read_gbs < 2 * a.read_gbs);
    /* a cache-resident read is faster; if this fails the "memory" figure came from a cache. On a
     * shared machine a neighbour can slow one whole measurement (make asan on the 2-core CI VM
     * once read 30.7 GB/s from cache against 20.6 from memory, where 75-94 against 20-24 is
     * usual), so the pair is measured again up to twice: a memory figure that really came from a
     * cache fails every time. */
    double mem = a.read_gbs > b.read_gbs ? a.read_gbs : b.read_gbs;
    for (int again = 0; again < 2 && !(cached.read_gbs > 1.5 * mem); again++) {
        CHECK(bench_host_bandwidth(threads, buffer, 1, 5, &a));
        CHECK(bench_host_bandwidth(threads, 4 * MIB, (uint32_t)(buffer / (4 * MIB)), 5, &cached));
        mem = a.read_gbs;
        printf("again: memory %.1f GB/s, cache %.1f GB/s\n", a.read_gbs, cached.read_gbs);
    }
    CHECK(cached.read_gbs > 1.5 * mem);
}

int main(void) {
    RUN(llc_is_the_sum_of_distinct_last_level_caches);
    RUN(buffer_is_far_larger_than_the_cache);
    RUN(host_bandwidth_measures_memory_not_cache);
    return check_report();
}
