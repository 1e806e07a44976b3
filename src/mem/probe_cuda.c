/* NVIDIA GPUs in the memory probe, from the CUDA driver (libcuda.so.1) loaded with dlopen, so
 * a halo built with or without CUDA probes the same way and a machine without a driver simply
 * has no NVIDIA GPU here. sysfs says nothing about an NVIDIA GPU's memory (unlike amdgpu's
 * mem_info_* files), and in a VM /sys/class/drm may not list it at all: the driver is the
 * source. Read once per process (cuInit and a context cost ~0.1-0.5 s). Reported: the first
 * device's name, total memory and what is in use (free memory needs a context: the primary one
 * is retained for the query and released), whether it is integrated (GB10, Jetson: unified
 * memory), managed-memory support, and a bandwidth estimate from the memory clock and bus. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "mem/mem.h"

typedef int (*cu_fn_int)(int);
typedef int (*cu_fn_pint)(int *);
typedef int (*cu_fn_get)(int *, int);
typedef int (*cu_fn_name)(char *, int, int);
typedef int (*cu_fn_total)(size_t *, int);
typedef int (*cu_fn_attr)(int *, int, int);
typedef int (*cu_fn_retain)(void **, int);
typedef int (*cu_fn_ctx)(void *);
typedef int (*cu_fn_pop)(void **);
typedef int (*cu_fn_info)(size_t *, size_t *);

enum { /* CUdevice_attribute values (cuda.h) */
       ATTR_INTEGRATED = 18,
       ATTR_MEMORY_CLOCK_KHZ = 36,
       ATTR_BUS_WIDTH_BITS = 37,
       ATTR_CC_MAJOR = 75,
       ATTR_CC_MINOR = 76,
       ATTR_MANAGED_MEMORY = 83,
};

typedef struct cuda_info {
    bool found;
    char name[64];
    uint64_t total, used;
    bool integrated, managed;
    int cc_major, cc_minor;
    double bandwidth_gbs;
} cuda_info;

static cuda_info info;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void query(void) {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return;
    cu_fn_int init = (cu_fn_int)dlsym(lib, "cuInit");
    cu_fn_pint count = (cu_fn_pint)dlsym(lib, "cuDeviceGetCount");
    cu_fn_get get = (cu_fn_get)dlsym(lib, "cuDeviceGet");
    cu_fn_name name = (cu_fn_name)dlsym(lib, "cuDeviceGetName");
    cu_fn_total total = (cu_fn_total)dlsym(lib, "cuDeviceTotalMem_v2");
    cu_fn_attr attr = (cu_fn_attr)dlsym(lib, "cuDeviceGetAttribute");
    cu_fn_retain retain = (cu_fn_retain)dlsym(lib, "cuDevicePrimaryCtxRetain");
    cu_fn_int release = (cu_fn_int)dlsym(lib, "cuDevicePrimaryCtxRelease_v2");
    cu_fn_ctx push = (cu_fn_ctx)dlsym(lib, "cuCtxPushCurrent_v2");
    cu_fn_pop pop = (cu_fn_pop)dlsym(lib, "cuCtxPopCurrent_v2");
    cu_fn_info meminfo = (cu_fn_info)dlsym(lib, "cuMemGetInfo_v2");
    int n = 0, dev = 0;
    size_t bytes = 0;
    if (!init || !count || !get || !name || !total || !attr || init(0) != 0 || count(&n) != 0 ||
        n < 1 || get(&dev, 0) != 0 || total(&bytes, dev) != 0) {
        dlclose(lib);
        return;
    }
    info.found = true;
    info.total = bytes;
    if (name(info.name, (int)sizeof info.name, dev) != 0)
        snprintf(info.name, sizeof info.name, "NVIDIA GPU");
    int v = 0;
    info.integrated = attr(&v, ATTR_INTEGRATED, dev) == 0 && v;
    info.managed = attr(&v, ATTR_MANAGED_MEMORY, dev) == 0 && v;
    attr(&info.cc_major, ATTR_CC_MAJOR, dev);
    attr(&info.cc_minor, ATTR_CC_MINOR, dev);
    int clock_khz = 0, bus = 0;
    if (attr(&clock_khz, ATTR_MEMORY_CLOCK_KHZ, dev) == 0 &&
        attr(&bus, ATTR_BUS_WIDTH_BITS, dev) == 0)
        info.bandwidth_gbs = 2.0 * clock_khz * 1e3 * (bus / 8.0) / 1e9; /* double data rate */
    void *ctx = NULL;
    if (retain && release && push && pop && meminfo && retain(&ctx, dev) == 0) {
        size_t free_b = 0, total_b = 0;
        if (push(ctx) == 0) {
            if (meminfo(&free_b, &total_b) == 0 && total_b >= free_b) info.used = total_b - free_b;
            void *popped = NULL;
            pop(&popped);
        }
        release(dev);
    }
    /* The library stays loaded: the CUDA runtime would load it again anyway. */
}

bool halo_mem_probe_cuda(halo_machine *m) {
    pthread_once(&once, query);
    if (!info.found) return false;
    m->gpu_vendor = HALO_GPU_NVIDIA;
    snprintf(m->gpu_name, sizeof m->gpu_name, "%.48s (sm_%d%d)", info.name, info.cc_major % 100,
             info.cc_minor % 10);
    m->gpu_integrated = info.integrated;
    m->vram_total = info.total;
    m->vram_used = info.used;
    m->has_managed = info.managed;
    if (info.bandwidth_gbs > 0) m->device_bandwidth_gbs = info.bandwidth_gbs;
    return true;
}
