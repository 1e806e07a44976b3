/* The Vulkan backend's constructor in a build without it (-DHALO_VULKAN=OFF). */
#include <string.h>

#include "backend/vulkan/vulkan.h"
#include "core/error.h"

bool halo_backend_vulkan_built(void) {
    return false;
}

halo_status halo_backend_vulkan_create(int device, halo_backend **out, halo_error *err) {
    (void)device;
    *out = NULL;
    return halo_fail(err, HALO_E_UNSUPPORTED,
                     "backend 'vulkan' is not built (configure with "
                     "-DHALO_VULKAN=ON)");
}

const char *halo_backend_vulkan_device_name(const halo_backend *be) {
    (void)be;
    return "";
}

halo_vk_memory halo_backend_vulkan_buf_memory(const halo_buf *b, const void **host) {
    (void)b;
    if (host) *host = NULL;
    return HALO_VK_MEM_NONE;
}

uint64_t halo_backend_vulkan_submissions(const halo_backend *be) {
    (void)be;
    return 0;
}

uint64_t halo_backend_vulkan_dispatches(const halo_backend *be) {
    (void)be;
    return 0;
}

uint64_t halo_backend_vulkan_pinned_bytes(const halo_backend *be) {
    (void)be;
    return 0;
}

uint64_t halo_backend_vulkan_barriers(const halo_backend *be) {
    (void)be;
    return 0;
}

uint64_t halo_backend_vulkan_host_barriers(const halo_backend *be) {
    (void)be;
    return 0;
}

uint64_t halo_backend_vulkan_xfer_barriers(const halo_backend *be) {
    (void)be;
    return 0;
}

halo_status halo_backend_vulkan_probe(int device, halo_vk_probe *out, halo_error *err) {
    (void)device;
    memset(out, 0, sizeof *out);
    return halo_fail(err, HALO_E_UNSUPPORTED,
                     "backend 'vulkan' is not built (configure with -DHALO_VULKAN=ON)");
}

halo_status halo_backend_vulkan_create_mode(int device, halo_vk_mode mode, halo_backend **out,
                                            halo_error *err) {
    (void)mode;
    return halo_backend_vulkan_create(device, out, err);
}

bool halo_backend_vulkan_fast(const halo_backend *be) {
    (void)be;
    return false;
}

uint64_t halo_backend_vulkan_max_buffer(const halo_backend *be) {
    (void)be;
    return 0;
}

halo_status halo_backend_vulkan_create_gpu(halo_vk_mode mode, halo_backend **out, halo_error *err) {
    return halo_backend_vulkan_create_mode(-1, mode, out, err);
}
