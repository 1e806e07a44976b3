/* Device memory read bandwidth for `halo bench`'s roofline column on a GPU backend, and the
 * device memory in use, outside the backend interface (the bench calls these directly; they are
 * linked into the halo binary only, src/cli/CMakeLists.txt). A GPU decode streams its weights
 * from device memory once per token, so the ceiling is a kernel that only reads: every thread
 * loads 16-byte vectors in a grid-stride loop, four in flight, from a buffer at least 8 times
 * the L2 (H200: 50 MiB L2, so no pass is served from it), best of several passes timed with
 * events. cudaMemcpy D2D would read and write, and its rate depends on how the copy engine is
 * counted; a read-only kernel measures what a decode needs. The same kernel over pinned, mapped
 * host memory gives the ceiling for weights the plan puts in the gpu-host pool (read across
 * PCIe, or NVLink-C2C on a Grace machine). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "backend/cuda/gpu.h"

#ifdef HALO_HIP
#define cudaEvent_t hipEvent_t
#define cudaEventCreate hipEventCreate
#define cudaEventDestroy hipEventDestroy
#define cudaEventRecord hipEventRecord
#define cudaEventSynchronize hipEventSynchronize
#define cudaEventElapsedTime hipEventElapsedTime
#define cudaMemset hipMemset
#define cudaDevAttrL2CacheSize hipDeviceAttributeL2CacheSize
#endif

namespace {

__global__ void read_kernel(const uint4 *p, size_t n, unsigned *out) {
    size_t stride = (size_t)gridDim.x * blockDim.x;
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    unsigned acc = 0;
    for (; i + 3 * stride < n; i += 4 * stride) {
        uint4 a = p[i], b = p[i + stride], c = p[i + 2 * stride], d = p[i + 3 * stride];
        acc ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w;
        acc ^= c.x ^ c.y ^ c.z ^ c.w ^ d.x ^ d.y ^ d.z ^ d.w;
    }
    for (; i < n; i += stride) {
        uint4 a = p[i];
        acc ^= a.x ^ a.y ^ a.z ^ a.w;
    }
    /* never true for the fill below, but the compiler cannot know: the loads stay */
    if (acc == 0x9e3779b9u) out[0] = acc;
}

bool check(cudaError_t e, const char *call, char *why, unsigned size) {
    if (e == cudaSuccess) return true;
    snprintf(why, size, "%s: %s (%s)", call, cudaGetErrorString(e), cudaGetErrorName(e));
    (void)cudaGetLastError();
    return false;
}

} // namespace

/* host_mapped 0: device memory; 1: pinned host memory mapped into the device's address space. */
extern "C" int halo_bench_gpu_read_bandwidth(int device, int host_mapped, unsigned passes,
                                             double *best_gbs, double *worst_gbs,
                                             unsigned long long *buffer, unsigned long long *l2,
                                             char *why, unsigned size) {
    *best_gbs = *worst_gbs = 0;
    *buffer = *l2 = 0;
    if (!check(cudaSetDevice(device), "cudaSetDevice", why, size)) return 0;
    int sms = 0, l2_bytes = 0;
    size_t free_b = 0, total_b = 0;
    if (!check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device),
               "cudaDeviceGetAttribute(multiprocessors)", why, size) ||
        !check(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, device),
               "cudaDeviceGetAttribute(L2 size)", why, size) ||
        !check(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo", why, size))
        return 0;
    /* 8x the L2 and at least 1 GiB, but no more than half of what is free */
    size_t bytes = (size_t)8 * (size_t)l2_bytes;
    if (bytes < ((size_t)1 << 30)) bytes = (size_t)1 << 30;
    if (!host_mapped && bytes > free_b / 2) bytes = free_b / 2 / 4096 * 4096;
    if (bytes < ((size_t)64 << 20)) {
        snprintf(why, size, "only %zu MiB of device memory free", free_b >> 20);
        return 0;
    }
    uint4 *buf = NULL, *dev = NULL;
    void *host = NULL;
    unsigned *out = NULL;
    cudaEvent_t t0 = NULL, t1 = NULL;
    bool ok;
    if (host_mapped) {
        ok = check(cudaHostAlloc(&host, bytes, cudaHostAllocMapped), "cudaHostAlloc", why, size);
        if (ok) memset(host, 0x5a, bytes);
        ok = ok && check(cudaHostGetDevicePointer((void **)&dev, host, 0),
                         "cudaHostGetDevicePointer", why, size);
    } else {
        ok = check(cudaMalloc((void **)&buf, bytes), "cudaMalloc", why, size) &&
             check(cudaMemset(buf, 0x5a, bytes), "cudaMemset", why, size);
        dev = buf;
    }
    ok = ok && check(cudaMalloc((void **)&out, sizeof *out), "cudaMalloc", why, size) &&
         check(cudaEventCreate(&t0), "cudaEventCreate", why, size) &&
         check(cudaEventCreate(&t1), "cudaEventCreate", why, size);
    size_t n = bytes / sizeof(uint4);
    unsigned blocks = (unsigned)(sms > 0 ? sms : 1) * 8, threads = 256;
    float best = 1e30f, worst = 0;
    /* pass 0 is a warm-up (clocks, first-touch of the mapping); the rest are timed */
    for (unsigned pass = 0; ok && pass <= passes; pass++) {
        ok = check(cudaEventRecord(t0, 0), "cudaEventRecord", why, size);
        if (ok) read_kernel<<<blocks, threads>>>(dev, n, out);
        ok = ok && check(cudaGetLastError(), "read kernel launch", why, size) &&
             check(cudaEventRecord(t1, 0), "cudaEventRecord", why, size) &&
             check(cudaEventSynchronize(t1), "cudaEventSynchronize", why, size);
        float ms = 0;
        ok = ok && check(cudaEventElapsedTime(&ms, t0, t1), "cudaEventElapsedTime", why, size);
        if (ok && pass > 0 && ms > 0) {
            best = ms < best ? ms : best;
            worst = ms > worst ? ms : worst;
        }
    }
    if (t0) (void)cudaEventDestroy(t0);
    if (t1) (void)cudaEventDestroy(t1);
    if (out) (void)cudaFree(out);
    if (buf) (void)cudaFree(buf);
    if (host) (void)cudaFreeHost(host);
    if (!ok) return 0;
    if (worst <= 0) {
        snprintf(why, size, "no timed pass");
        return 0;
    }
    *best_gbs = (double)bytes / (best * 1e-3) / 1e9;
    *worst_gbs = (double)bytes / (worst * 1e-3) / 1e9;
    *buffer = bytes;
    *l2 = (unsigned long long)l2_bytes;
    return 1;
}

extern "C" int halo_bench_gpu_mem_used(int device, unsigned long long *used) {
    size_t free_b = 0, total_b = 0;
    *used = 0;
    if (cudaSetDevice(device) != cudaSuccess || cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    *used = total_b - free_b;
    return 1;
}
