/* The Vulkan backend's constructor (the rest of its interface is backend.h's ops table). */
#ifndef HALO_BACKEND_VULKAN_H
#define HALO_BACKEND_VULKAN_H

#include "backend/backend.h"
#include "halo/plan.h"

/* Creates the Vulkan backend on physical device `device` (in the loader's order; -1: the
 * HALO_VK_DEVICE environment variable, else the first suitable GPU, and a CPU implementation such
 * as lavapipe only when no GPU suits). Fails with
 * a message naming what is missing: the loader library, a device, Vulkan 1.2, 16-bit storage,
 * subgroup arithmetic, or a buffer feature the shaders need. */
halo_status halo_backend_vulkan_create(int device, halo_backend **out, halo_error *err);

/* Precise or fast, as the engine's `precise` parameter (halo_engine_params) says. */
typedef enum halo_vk_mode {
    HALO_VK_PRECISE = 0, /* activations f32 for every weight type: the reference */
    HALO_VK_FAST,        /* Q8_0 projections by integer dot products over Q8_0-quantized
                          * activations where the device has them (else as precise) */
    HALO_VK_FAST_ONLY,   /* as FAST, but a device without integer dot products is an error */
} halo_vk_mode;
/* As halo_backend_vulkan_create, in `mode`. HALO_VK_FAST=1 in the environment makes any mode
 * FAST_ONLY and HALO_VK_FAST=0 makes it PRECISE (tests); halo_backend_vulkan_create is this with
 * HALO_VK_PRECISE. */
halo_status halo_backend_vulkan_create_mode(int device, halo_vk_mode mode, halo_backend **out,
                                            halo_error *err);
/* As halo_backend_vulkan_create_mode on the device it would pick, but only when that is a GPU:
 * for "auto" (a CPU implementation such as lavapipe is far slower than the CPU backend). */
halo_status halo_backend_vulkan_create_gpu(halo_vk_mode mode, halo_backend **out, halo_error *err);
/* Whether a Vulkan backend runs Q8_0 projections by integer dot products (fast mode on a device
 * that has them); false for any other backend. */
bool halo_backend_vulkan_fast(const halo_backend *be);

/* The largest buffer a Vulkan backend can allocate or import in one piece
 * (maxMemoryAllocationSize, capped at 8 GiB), lowered by HALO_VK_MAX_BUFFER=N (bytes: tests
 * split the weights with it); 0 for any other backend (no limit). The engine splits a pool of
 * weights into buffers of at most this size, no tensor straddling two. */
uint64_t halo_backend_vulkan_max_buffer(const halo_backend *be);

/* What the planner needs from a Vulkan device, read without creating it (no pipelines, no
 * memory): its memory heaps as this backend would use them. For `halo plan --backend vulkan`
 * and the machine probe (lavapipe and GPUs the sysfs probe does not know). */
typedef struct halo_vk_probe {
    char name[256];
    bool discrete;         /* a discrete GPU: device memory is not the host's */
    uint64_t device_local; /* the heap the device pool is allocated from */
    bool device_mapped;    /* that heap is host-visible too (APU, resizable BAR, lavapipe) */
    uint64_t host_visible; /* the gpu-host pool's heap when it is system RAM (0: none apart) */
    uint64_t max_alloc;    /* largest buffer (maxMemoryAllocationSize, capped at 8 GiB) */
    bool host_import;      /* VK_EXT_external_memory_host: the loader's arena used in place */
    bool int_dot;          /* VK_KHR_shader_integer_dot_product offered */
    bool cpu;              /* a CPU implementation (lavapipe), not a GPU */
    uint32_t vendor_id;    /* PCI vendor (0x1002 AMD, 0x10de NVIDIA, 0x8086 Intel, ...) */
} halo_vk_probe;
halo_status halo_backend_vulkan_probe(int device, halo_vk_probe *out, halo_error *err);

/* The machine as the Vulkan backend will use it, for the planner: m (probed or a profile) keeps
 * its GPU when that is the Vulkan device's vendor (the sysfs and CUDA probes know more: memory in
 * use, GTT); otherwise its GPU becomes the Vulkan device (lavapipe, Intel, a GPU the probes did
 * not see): its device-local heap as the device pool, integrated unless discrete. Fails as
 * halo_backend_vulkan_probe does (no loader, no device). */
halo_status halo_backend_vulkan_machine(int device, halo_machine *m, halo_error *err);

/* The device's name (a Vulkan backend only). */
const char *halo_backend_vulkan_device_name(const halo_backend *be);

/* Where a Vulkan backend buffer's bytes live (for tests and diagnostics); *host (if not NULL)
 * is the host address of the buffer's byte 0, NULL when the host cannot map it. */
typedef enum halo_vk_memory {
    HALO_VK_MEM_NONE = 0,
    HALO_VK_MEM_DEVICE_MAPPED, /* device-local, host-visible (APU, resizable BAR, lavapipe) */
    HALO_VK_MEM_DEVICE_STAGED, /* device-local, reached through a staging buffer */
    HALO_VK_MEM_HOST,          /* host-visible memory the backend allocated (gpu-host) */
    HALO_VK_MEM_IMPORTED,      /* the caller's memory, imported: no copy */
} halo_vk_memory;
halo_vk_memory halo_backend_vulkan_buf_memory(const halo_buf *b, const void **host);

/* Submissions made so far (tests of the time-bounded splitting). */
uint64_t halo_backend_vulkan_submissions(const halo_backend *be);
/* Pipeline barriers recorded so far (tests of the barriers between dependent commands only). */
uint64_t halo_backend_vulkan_barriers(const halo_backend *be);
/* Of the barriers recorded (those counted above and the uncounted ones that end a submission
 * for the host), the ones naming the host (tests: only the submissions' last ones do). */
uint64_t halo_backend_vulkan_host_barriers(const halo_backend *be);
/* Of the same, the ones whose first scope has the transfer stage (tests: only those after a
 * copy or fill, and the submissions' last ones; all with HALO_VK_BARRIER_XFER=1). */
uint64_t halo_backend_vulkan_xfer_barriers(const halo_backend *be);

/* Dispatches recorded so far (tests: which shaders an op took). */
uint64_t halo_backend_vulkan_dispatches(const halo_backend *be);
/* Bytes written into staged device memory by one GPU copy straight from imported host memory
 * (the loader's pinned buffers), not through the staging buffer (tests). */
uint64_t halo_backend_vulkan_pinned_bytes(const halo_backend *be);

/* Whether this build has the Vulkan backend (false: halo_backend_vulkan_create only fails). */
bool halo_backend_vulkan_built(void);

#endif
