/* The GPU side of bench_bw.h: a CUDA or HIP build links src/backend/cuda/bench_bw.cu into the
 * halo binary (src/cli/CMakeLists.txt) and asks it; any other build, or a Vulkan backend, says
 * why the column is empty. The engine runs the CUDA backend on device 0 (src/model/engine.c). */
#include <stdio.h>
#include <string.h>

#include "cli/bench_bw.h"

#if defined(HALO_CUDA) || defined(HALO_HIP)
int halo_bench_gpu_read_bandwidth(int device, int host_mapped, unsigned passes, double *best_gbs,
                                  double *worst_gbs, unsigned long long *buffer,
                                  unsigned long long *l2, char *why, unsigned size);
int halo_bench_gpu_mem_used(int device, unsigned long long *used);
#define HAVE_GPU_BW 1
#else
#define HAVE_GPU_BW 0
#endif

static bool is_cuda(const char *backend) {
    return !strcmp(backend, "cuda") || !strcmp(backend, "hip");
}

bool bench_gpu_bandwidth(const char *backend, bool host_mapped, bench_bw *out, char *why,
                         unsigned why_size) {
    memset(out, 0, sizeof *out);
    if (!is_cuda(backend)) {
        snprintf(why, why_size, "device bandwidth is measured for cuda and hip only (not %s)",
                 backend);
        return false;
    }
#if HAVE_GPU_BW
    unsigned long long buffer = 0, l2 = 0;
    const unsigned passes = 10;
    if (!halo_bench_gpu_read_bandwidth(0, host_mapped, passes, &out->read_gbs, &out->worst_gbs, &buffer, &l2,
                                       why, why_size))
        return false;
    out->buffer = buffer;
    out->llc = l2;
    out->passes = passes;
    return true;
#else
    (void)host_mapped;
    snprintf(why, why_size, "this halo was built without a GPU backend");
    return false;
#endif
}

bool bench_gpu_mem_used(const char *backend, uint64_t *used) {
    *used = 0;
#if HAVE_GPU_BW
    unsigned long long u = 0;
    if (!is_cuda(backend) || !halo_bench_gpu_mem_used(0, &u)) return false;
    *used = u;
    return true;
#else
    (void)backend;
    return false;
#endif
}
