/* The GPU side of bench_bw.h: a CUDA or HIP build links src/backend/cuda/bench_bw.cu into the
 * halo binary (src/cli/CMakeLists.txt) and asks it; Vulkan is measured through its backend's
 * copy op; anything else says why the column is empty. The engine runs the CUDA backend on
 * device 0 and Vulkan on its default device (src/model/engine.c), so these measure those. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "backend/backend.h"
#include "backend/vulkan/vulkan.h"
#include "cli/bench_bw.h"
#include "core/error.h"
#include "halo/types.h"

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
    if (!halo_bench_gpu_read_bandwidth(0, host_mapped, passes, &out->read_gbs, &out->worst_gbs,
                                       &buffer, &l2, why, why_size))
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

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

bool bench_backend_copy_bandwidth(const char *backend, bench_bw *out, char *why,
                                  unsigned why_size) {
    memset(out, 0, sizeof *out);
    halo_backend *be = NULL;
    halo_error err = {0};
    halo_status st;
    if (!strcmp(backend, "vulkan"))
        st = halo_backend_vulkan_create(-1, &be, &err);
    else if (is_cuda(backend))
        st = halo_backend_cuda_create(0, &be, &err);
    else
        st = halo_fail(&err, HALO_E_UNSUPPORTED, "no copy measurement for backend %s", backend);
    if (st) {
        snprintf(why, why_size, "%s", err.message);
        return false;
    }
    const uint64_t bytes = (uint64_t)256 << 20;
    const uint32_t copies = 8, passes = 3;
    halo_buf *a = NULL, *b = NULL;
    st = be->ops->buf_alloc(be, bytes, &a, &err);
    if (!st) st = be->ops->buf_alloc(be, bytes, &b, &err);
    halo_tensor ta = {.buf = a, .type = HALO_TYPE_F32, .ne = {(int64_t)(bytes / 4), 1, 1, 1}};
    halo_tensor tb = ta;
    tb.buf = b;
    double best = 1e30, worst = 0;
    /* pass 0 warms up (first touch of the pages, clocks); the others are timed */
    for (uint32_t pass = 0; !st && pass <= passes; pass++) {
        double t0 = now();
        for (uint32_t k = 0; k < copies; k++)
            be->ops->copy(be, k % 2 ? &ta : &tb, k % 2 ? &tb : &ta);
        st = be->ops->sync(be, &err);
        double t = now() - t0;
        if (!st && pass > 0) {
            best = t < best ? t : best;
            worst = t > worst ? t : worst;
        }
    }
    if (a) be->ops->buf_free(be, a);
    if (b) be->ops->buf_free(be, b);
    be->ops->destroy(be);
    if (st) {
        snprintf(why, why_size, "%s", err.message);
        return false;
    }
    double moved = 2.0 * (double)bytes * copies;
    out->read_gbs = best > 0 ? moved / best / 1e9 : 0;
    out->worst_gbs = worst > 0 ? moved / worst / 1e9 : 0;
    out->buffer = bytes;
    out->passes = passes;
    return out->read_gbs > 0;
}
