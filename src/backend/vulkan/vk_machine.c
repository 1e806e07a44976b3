/* The machine as the Vulkan backend sees it, for the planner (halo plan --backend vulkan and the
 * engine's admission). The memory probe (src/mem/probe.c) knows GPUs through sysfs (amdgpu) and
 * the CUDA driver; a Vulkan device may be none of those: lavapipe in CI, an Intel GPU, an NVIDIA
 * GPU on a machine without libcuda. Then the Vulkan device's own heaps describe the GPU. Built in
 * every configuration: without the Vulkan backend the probe fails and so does this. */
#include <stdio.h>

#include "backend/vulkan/vulkan.h"
#include "core/error.h"

static halo_gpu_vendor vendor_of(uint32_t id) {
    switch (id) {
    case 0x1002:
        return HALO_GPU_AMD;
    case 0x10de:
        return HALO_GPU_NVIDIA;
    default:
        return HALO_GPU_OTHER;
    }
}

halo_status halo_backend_vulkan_machine(int device, halo_machine *m, halo_error *err) {
    halo_vk_probe p;
    halo_status st = halo_backend_vulkan_probe(device, &p, err);
    if (st) return st;
    halo_gpu_vendor v = p.cpu ? HALO_GPU_OTHER : vendor_of(p.vendor_id);
    /* The probes' GPU is this device: they know what is in use and AMD's GTT. */
    if (m->gpu_vendor == v && v != HALO_GPU_OTHER) return HALO_OK;
    m->gpu_vendor = v;
    snprintf(m->gpu_name, sizeof m->gpu_name, "%.44s (Vulkan)", p.name);
    /* A CPU implementation computes in host memory: an integrated GPU whose device pool is the
     * heap it reports (lavapipe: 2 GiB here) and whose gpu-host pool is the host's RAM. */
    m->gpu_integrated = !p.discrete;
    m->gpu_pci_device = 0;
    m->vram_total = p.device_local;
    m->vram_used = 0;
    m->gtt_total = m->gtt_used = m->ttm_pages_limit = 0;
    m->gpu_host_limit = 0;
    m->has_managed = false; /* Vulkan has no managed memory */
    m->device_bandwidth_gbs = 0;
    snprintf(m->description, sizeof m->description, "%.1f GiB RAM, %.100s (Vulkan, %.2f GiB heap)",
             (double)m->host_total / (double)HALO_GIB, p.name,
             (double)p.device_local / (double)HALO_GIB);
    return HALO_OK;
}
