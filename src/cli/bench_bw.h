/* The memory bandwidth `halo bench` divides by: host read bandwidth measured in the same run
 * (bench_bw.c) and, for a GPU backend, the device's (bench_bw_gpu.c over
 * src/backend/cuda/bench_bw.cu). docs/bench.md says how each is measured and why. */
#ifndef HALO_CLI_BENCH_BW_H
#define HALO_CLI_BENCH_BW_H

#include <stdbool.h>
#include <stdint.h>

typedef struct bench_bw {
    double read_gbs;  /* the best pass: bytes read / seconds, 1e9 bytes per GB */
    double worst_gbs; /* the slowest pass, to judge the spread */
    uint64_t buffer;  /* bytes read per pass */
    uint64_t llc;     /* the machine's last-level cache in bytes, 0 = unknown */
    uint32_t threads; /* threads that read */
    uint32_t passes;  /* timed passes */
} bench_bw;

/* The machine's last-level cache: the sum of the distinct highest-level caches that sysfs lists
 * under root/sys/devices/system/cpu/cpu N/cache (several L3 slices on a many-CCX or two-socket
 * machine). 0 when sysfs says nothing (then the buffer's floor alone keeps it out of cache). */
uint64_t bench_llc_bytes(const char *root);

/* The buffer the host measurement reads: at least 8 times the LLC and at least 1 GiB, so that
 * no pass is served from cache (the decode reads weights far larger than any cache). */
uint64_t bench_bw_buffer_bytes(uint64_t llc);

/* MemAvailable from /proc/meminfo in bytes (free memory plus what the kernel can reclaim, such
 * as page cache), else the free pages; 0 when neither is known. */
uint64_t bench_mem_available(void);

/* Streams `buffer` bytes with `threads` threads, each reading its own slice (first touched by
 * the thread that reads it, so pages sit on its NUMA node), `repeat` times per pass, for `passes`
 * timed passes started and stopped at a barrier. Fills out; false when the buffer or a thread
 * cannot be had. */
bool bench_host_bandwidth(uint32_t threads, uint64_t buffer, uint32_t repeat, uint32_t passes,
                          bench_bw *out);

/* The read bandwidth a GPU backend ("cuda", "hip") gets: a kernel that reads a buffer far larger
 * than the GPU's L2 (llc holds the L2 size), best of several passes timed with events; from
 * device memory, or with host_mapped from pinned host memory mapped for the GPU (the gpu-host
 * pool). False, with a reason in why, when this build or machine has no such GPU. */
bool bench_gpu_bandwidth(const char *backend, bool host_mapped, bench_bw *out, char *why,
                         unsigned why_size);

/* Copy bandwidth through the backend's own copy op (vkCmdCopyBuffer for Vulkan) between two
 * buffers of its working memory, 256 MiB each, 8 copies per pass, best of 3 passes after a
 * warm-up: read_gbs is bytes read plus bytes written per second, which a read-only stream
 * approaches on GPU memory. For a backend with no read kernel of its own here (Vulkan). */
bool bench_backend_copy_bandwidth(const char *backend, bench_bw *out, char *why, unsigned why_size);

/* Device memory in use on the GPU the backend runs on, in bytes (all processes: the bench
 * subtracts what was in use before its engine opened). False when unknown. */
bool bench_gpu_mem_used(const char *backend, uint64_t *used);

#endif
