/* Vulkan backend: memory. The plan picks the pool of every weight (docs/vulkan.md); this file
 * turns a pool into a memory type and carries bytes in and out:
 *
 *   device   device-local memory. Where the device's main device-local heap is host-visible
 *            too (integrated GPUs, resizable BAR, lavapipe) it is mapped and the host copies
 *            directly; otherwise (a discrete GPU without resizable BAR) it is filled and read
 *            through a host-visible staging buffer with transfer commands.
 *   gpu-host host-visible memory, system RAM where the device has such a type, which shaders
 *            read over the bus (also the CPU-compute "host" pool: lavapipe computes there).
 *   wrapped  host memory the caller owns (the loader's arena) imported with
 *            VK_EXT_external_memory_host: the GPU reads it where it lies, nothing is copied.
 *            Without the extension, or when the driver refuses the range, it is copied once
 *            into gpu-host memory. This is the plan's gpu-host pool on every device, a
 *            discrete GPU included: the engine places device-pool weights with
 *            buf_alloc_pool, and what it wraps is what the plan put in host memory.
 *
 * HALO_VK_STAGING=1 stages device memory even where it is host-visible (to test the discrete
 * path on lavapipe); HALO_VK_DEVICE_MEM=staged also takes a device-local type that is not
 * host-visible where there is one (VRAM outside a BAR window); HALO_VK_IMPORT=0 turns the import
 * off (the copy fallback), =device copies wrapped memory into device memory instead (tests). Reads
 * of 16 KiB or more from device memory that is mapped but uncached (a discrete GPU's BAR) go
 * through the staging buffer; HALO_VK_STAGED_READ=0 reads it directly, =1 stages such reads from
 * any mapped device memory (tests). A write into staged memory from imported host memory (the
 * loader's pinned buffers) is one GPU copy from those pages, not through the staging buffer
 * (HALO_VK_PINNED_COPY=0: through it). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/vulkan/vk.h"
#include "backend/vulkan/vulkan.h"
#include "core/error.h"
#include "halo/plan.h"

/* Bytes per staging copy: the bounce buffer is at most this large. */
#define VK_STAGING_BYTES (32ull << 20)
/* Reads of uncached device memory at least this large go through the staging buffer. */
#define VK_UNCACHED_READ (16u << 10)

static bool env_is(const char *name, const char *value) {
    const char *v = getenv(name);
    return v && !strcmp(v, value);
}

/* A type with all of `want` and none of `avoid` in the largest heap; -1 when none. */
static int pick_type(const VkPhysicalDeviceMemoryProperties *mp, uint32_t want, uint32_t avoid,
                     uint32_t allowed) {
    int best = -1;
    for (uint32_t i = 0; i < mp->memoryTypeCount; i++) {
        VkMemoryType t = mp->memoryTypes[i];
        if (!(allowed & (1u << i)) || (t.propertyFlags & want) != want || (t.propertyFlags & avoid))
            continue;
        if (best < 0 || mp->memoryHeaps[t.heapIndex].size >
                            mp->memoryHeaps[mp->memoryTypes[best].heapIndex].size)
            best = (int)i;
    }
    return best;
}

void vk_memory_choose(vk_backend *vb) {
    const VkPhysicalDeviceMemoryProperties *mp = &vb->mem_props;
    const uint32_t DL = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
    const uint32_t HV = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    const uint32_t CACHED = VK_MEMORY_PROPERTY_HOST_CACHED_BIT;
    /* Device: the largest device-local heap. Mapped when a host-visible type lives in that
     * heap (not a 256 MiB BAR window beside a larger VRAM heap). */
    int dev = pick_type(mp, DL, 0, ~0u), dev_hv = pick_type(mp, DL | HV, 0, ~0u);
    uint64_t dev_heap = dev >= 0 ? mp->memoryHeaps[mp->memoryTypes[dev].heapIndex].size : 0;
    vb->device_mapped =
        dev_hv >= 0 && mp->memoryHeaps[mp->memoryTypes[dev_hv].heapIndex].size >= dev_heap;
    /* Device-local but not host-visible: where a mapped allocation is refused (a BAR window
     * smaller than VRAM), device memory is staged instead. */
    int dev_only = pick_type(mp, DL, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT, ~0u);
    if (vb->device_mapped) dev = dev_hv;
    /* Host: coherent host-visible, system RAM (not device-local) where offered, cached first
     * (the host reads logits back). */
    int host = pick_type(mp, HV | CACHED, DL, ~0u);
    if (host < 0) host = pick_type(mp, HV, DL, ~0u);
    if (host < 0) host = pick_type(mp, HV, 0, ~0u);
    vb->type_host = host < 0 ? 0 : (uint32_t)host;
    vb->type_device = dev < 0 ? vb->type_host : (uint32_t)dev;
    if (dev < 0) vb->device_mapped = true; /* no device-local type: device memory is host's */
    vb->type_device_staged = dev_only < 0 ? vb->type_device : (uint32_t)dev_only;
    if (env_is("HALO_VK_STAGING", "1")) vb->device_mapped = false;
    /* device memory in the device-local type that is not host-visible, staged (on a discrete
     * GPU: VRAM outside the BAR window, to compare the two) */
    if (env_is("HALO_VK_DEVICE_MEM", "staged")) {
        vb->device_mapped = false;
        vb->type_device = vb->type_device_staged;
    }
    /* The weights outside the BAR window on a discrete GPU that has device-local memory the
     * host cannot map. On the H200 (session 8, bench/vulkan/RESULTS.md) a decode projection
     * reading 9 GB of copies in turn took 137 us from host-visible VRAM and 34 us from the
     * other type (the same 35.65 MB kernel: 24 us when it stays in L2), and every kernel of
     * a decode step ran ~1.6x faster with per-dispatch stamps; the whole 24-layer step did
     * not move (session 8's final call: 76.27 mapped against 74.28 / 81.64): host-visible VRAM
     * is slow to stream GiBs through, as llama.cpp's Vulkan backend also found on NVIDIA,
     * but it is not what bounds decode here. HALO_VK_WEIGHT_MEM=mapped keeps them
     * host-visible (faster to load: no staging), =staged stages them on any device. */
    bool discrete = vb->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU;
    vb->weights_staged = env_is("HALO_VK_WEIGHT_MEM", "staged") ||
                         (!env_is("HALO_VK_WEIGHT_MEM", "mapped") && discrete &&
                          vb->device_mapped && vb->type_device_staged != vb->type_device);
    if (env_is("HALO_VK_IMPORT", "0")) vb->has_host_import = false;
    vb->wrap_to_device = env_is("HALO_VK_IMPORT", "device");
    vb->stage_uncached_reads = !env_is("HALO_VK_STAGED_READ", "0");
    vb->stage_all_reads = env_is("HALO_VK_STAGED_READ", "1");
    vb->pinned_copy = !env_is("HALO_VK_PINNED_COPY", "0");
}

/* ---- creation ----------------------------------------------------------------------------- */

static VkBufferCreateInfo buffer_info(uint64_t size, const void *next) {
    return (VkBufferCreateInfo){.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
                                .pNext = next,
                                .size = size,
                                .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT |
                                         VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                         VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                                .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
}

/* Records a fill of b with zeros (staged memory cannot be memset). */
static bool record_zero(vk_backend *vb, halo_buf *b) {
    if (!vk_begin_recording(vb)) return false;
    vk_copy_flush(vb);
    vk_barrier_if_pending(vb);
    vb->fn.vkCmdFillBuffer(vb->cmd, b->buffer, 0, VK_WHOLE_SIZE, 0);
    vk_note_transfer(vb);
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                          .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
                          .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                                           VK_ACCESS_TRANSFER_READ_BIT |
                                           VK_ACCESS_TRANSFER_WRITE_BIT};
    vb->fn.vkCmdPipelineBarrier(vb->cmd, VK_PIPELINE_STAGE_TRANSFER_BIT,
                                VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT |
                                    VK_PIPELINE_STAGE_TRANSFER_BIT,
                                0, 1, &mb, 0, NULL, 0, NULL);
    return true;
}

/* Releases b's Vulkan objects, keeping b. */
static void vk_buf_destroy_vk(vk_backend *vb, halo_buf *b) {
    /* Cached descriptor sets may name it; a later buffer may get the same handle. */
    if (b->buffer) vb->dsc_stale = true;
    if (b->buffer) vb->fn.vkDestroyBuffer(vb->device, b->buffer, NULL);
    if (b->memory) vb->fn.vkFreeMemory(vb->device, b->memory, NULL);
    b->buffer = VK_NULL_HANDLE;
    b->memory = VK_NULL_HANDLE;
    b->map = NULL;
}

/* b's buffer of `size` bytes in memory type `type`, mapped when asked. */
static VkResult alloc_buffer(vk_backend *vb, halo_buf *b, uint64_t size, uint32_t type, bool map) {
    VkBufferCreateInfo bi = buffer_info(size, NULL);
    VkResult r = vb->fn.vkCreateBuffer(vb->device, &bi, NULL, &b->buffer);
    VkMemoryRequirements req = {0};
    if (r == VK_SUCCESS) {
        vb->fn.vkGetBufferMemoryRequirements(vb->device, b->buffer, &req);
        VkMemoryAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                                   .allocationSize = req.size,
                                   .memoryTypeIndex = type};
        if (!(req.memoryTypeBits & (1u << type)))
            r = VK_ERROR_FEATURE_NOT_PRESENT;
        else
            r = vb->fn.vkAllocateMemory(vb->device, &ai, NULL, &b->memory);
    }
    if (r == VK_SUCCESS) r = vb->fn.vkBindBufferMemory(vb->device, b->buffer, b->memory, 0);
    if (r == VK_SUCCESS && map)
        r = vb->fn.vkMapMemory(vb->device, b->memory, 0, VK_WHOLE_SIZE, 0, (void **)&b->map);
    return r;
}

halo_status vk_buf_create_in(vk_backend *vb, vk_mem mem, uint64_t bytes, halo_buf **out,
                             halo_error *err) {
    *out = NULL;
    if (bytes > vb->max_alloc || bytes > vb->max_buffer)
        return halo_fail(
            err, HALO_E_NOMEM,
            "vulkan backend: a buffer of %llu bytes exceeds the device's largest "
            "%s (%llu bytes)",
            (unsigned long long)bytes,
            bytes > vb->max_alloc ? "allocation (maxMemoryAllocationSize)"
                                  : "buffer (maxBufferSize)",
            (unsigned long long)(bytes > vb->max_alloc ? vb->max_alloc : vb->max_buffer));
    /* Asked for staged (the weights with HALO_VK_WEIGHT_MEM=staged): the device-local type
     * that is not host-visible; otherwise the device type, mapped where it can be. */
    bool want_staged = mem == VK_MEM_DEVICE_STAGED;
    if (mem == VK_MEM_DEVICE_MAPPED || mem == VK_MEM_DEVICE_STAGED)
        mem = vb->device_mapped && !want_staged ? VK_MEM_DEVICE_MAPPED : VK_MEM_DEVICE_STAGED;
    uint32_t type = mem == VK_MEM_HOST ? vb->type_host
                    : want_staged      ? vb->type_device_staged
                                       : vb->type_device;
    halo_buf *b = calloc(1, sizeof *b);
    if (!b) return halo_fail(err, HALO_E_NOMEM, "out of memory");
    /* Round up so word-wise shader reads of the last bytes stay inside the buffer. */
    uint64_t size = (bytes + 15) & ~15ull;
    if (size == 0) size = 16;
    VkResult r = alloc_buffer(vb, b, size, type, mem != VK_MEM_DEVICE_STAGED);
    /* A discrete GPU with resizable BAR offers its VRAM host-visible, but only as much as the
     * BAR window holds (the H200 refused past ~66 GiB of 141): the rest is device-local memory
     * that is not host-visible, reached through the staging buffer. */
    if (r != VK_SUCCESS && mem == VK_MEM_DEVICE_MAPPED && vb->type_device_staged != type) {
        vk_buf_destroy_vk(vb, b);
        mem = VK_MEM_DEVICE_STAGED;
        r = alloc_buffer(vb, b, size, vb->type_device_staged, false);
    }
    if (r != VK_SUCCESS) {
        vk_buf_destroy(vb, b);
        return halo_fail(err, HALO_E_NOMEM,
                         "vulkan backend: cannot allocate %llu bytes of %s memory (%s)",
                         (unsigned long long)bytes, mem == VK_MEM_HOST ? "host-visible" : "device",
                         vk_result_name(r));
    }
    b->size = bytes;
    b->vk_size = size;
    b->mem = mem;
    if (b->map)
        memset(b->map, 0, (size_t)size);
    else if (!record_zero(vb, b)) {
        vk_buf_destroy(vb, b);
        return halo_fail(err, HALO_E_NOMEM, "vulkan backend: cannot record a buffer fill");
    }
    *out = b;
    return HALO_OK;
}

halo_status vk_buf_create(vk_backend *vb, uint64_t bytes, halo_buf **out, halo_error *err) {
    return vk_buf_create_in(vb, VK_MEM_DEVICE_MAPPED, bytes, out, err);
}

/* b leaves the list of imported ranges (once its owner frees it, its pages are no source). */
static void unlist_import(vk_backend *vb, halo_buf *b) {
    for (halo_buf **p = &vb->imports; *p; p = &(*p)->next_import)
        if (*p == b) {
            *p = b->next_import;
            return;
        }
}

void vk_buf_destroy(vk_backend *vb, halo_buf *b) {
    if (!b) return;
    unlist_import(vb, b);
    vk_buf_destroy_vk(vb, b);
    free(b);
}

halo_status vk_buf_alloc(halo_backend *be, uint64_t bytes, halo_buf **out, halo_error *err) {
    return vk_buf_create(vk_of(be), bytes, out, err);
}

/* Weights in a pool of the plan: device → device-local, gpu-host and host → host-visible
 * memory (lavapipe computes on the host, so the CPU pool is its gpu-host). Managed memory has
 * no Vulkan counterpart. On a discrete GPU the device pool takes the device-local type that is
 * not host-visible (reached through the staging buffer; vk_memory_choose says why), the rest
 * (activations, KV, scratch) stays host-visible where it can. */
halo_status vk_buf_alloc_pool(halo_backend *be, uint32_t pool, uint64_t bytes, halo_buf **out,
                              halo_error *err) {
    *out = NULL;
    if (pool == HALO_POOL_MANAGED || pool >= HALO_POOL_DISK)
        return halo_fail(err, HALO_E_UNSUPPORTED, "vulkan backend: no %s pool",
                         halo_pool_name((halo_pool_kind)pool));
    vk_backend *vb = vk_of(be);
    vk_mem dev = vb->weights_staged ? VK_MEM_DEVICE_STAGED : VK_MEM_DEVICE_MAPPED;
    return vk_buf_create_in(vb, pool == HALO_POOL_DEVICE ? dev : VK_MEM_HOST, bytes, out, err);
}

/* Recorded work may still use the buffer: release it after the next wait. */
void vk_buf_free(halo_backend *be, halo_buf *b) {
    if (!b) return;
    vk_backend *vb = vk_of(be);
    unlist_import(vb, b);
    if (vk_defer_uses(vb, b)) vk_defer_flush(vb);
    if (vb->recording || vk_in_flight(vb)) {
        b->next_free = vb->deferred;
        vb->deferred = b;
        return;
    }
    vk_buf_destroy(vb, b);
}

/* The caller's pages [data, data+bytes) as device memory, page-aligned outward; false (and
 * nothing held) when the driver refuses them. */
static bool import_host(vk_backend *vb, void *data, uint64_t bytes, halo_buf *b) {
    uint64_t a = vb->import_align ? vb->import_align : 4096;
    uintptr_t p0 = (uintptr_t)data / a * a;
    uintptr_t p1 = ((uintptr_t)data + (bytes ? bytes : 1) + a - 1) / a * a;
    uint64_t size = (uint64_t)(p1 - p0);
    if (size > vb->max_alloc || size > vb->max_buffer) return false;
    const VkExternalMemoryHandleTypeFlagBits ht =
        VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT;
    VkMemoryHostPointerPropertiesEXT hp = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_HOST_POINTER_PROPERTIES_EXT};
    if (vb->fn.vkGetMemoryHostPointerPropertiesEXT(vb->device, ht, (void *)p0, &hp) != VK_SUCCESS)
        return false;
    VkExternalMemoryBufferCreateInfo eb = {
        .sType = VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_BUFFER_CREATE_INFO, .handleTypes = ht};
    VkBufferCreateInfo bi = buffer_info(size, &eb);
    if (vb->fn.vkCreateBuffer(vb->device, &bi, NULL, &b->buffer) != VK_SUCCESS) {
        b->buffer = VK_NULL_HANDLE;
        return false;
    }
    VkMemoryRequirements req = {0};
    vb->fn.vkGetBufferMemoryRequirements(vb->device, b->buffer, &req);
    const uint32_t HV = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    uint32_t allowed = hp.memoryTypeBits & req.memoryTypeBits;
    int type = pick_type(&vb->mem_props, HV, 0, allowed);
    if (type < 0) type = pick_type(&vb->mem_props, 0, 0, allowed);
    VkImportMemoryHostPointerInfoEXT imp = {
        .sType = VK_STRUCTURE_TYPE_IMPORT_MEMORY_HOST_POINTER_INFO_EXT,
        .handleType = ht,
        .pHostPointer = (void *)p0};
    VkMemoryAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                               .pNext = &imp,
                               .allocationSize = size,
                               .memoryTypeIndex = type < 0 ? 0 : (uint32_t)type};
    if (type < 0 || req.size > size ||
        vb->fn.vkAllocateMemory(vb->device, &ai, NULL, &b->memory) != VK_SUCCESS) {
        b->memory = VK_NULL_HANDLE;
        vb->fn.vkDestroyBuffer(vb->device, b->buffer, NULL);
        b->buffer = VK_NULL_HANDLE;
        return false;
    }
    if (vb->fn.vkBindBufferMemory(vb->device, b->buffer, b->memory, 0) != VK_SUCCESS) {
        vb->fn.vkDestroyBuffer(vb->device, b->buffer, NULL);
        vb->fn.vkFreeMemory(vb->device, b->memory, NULL);
        b->buffer = VK_NULL_HANDLE;
        b->memory = VK_NULL_HANDLE;
        return false;
    }
    /* The host keeps using its own pointer: the imported pages are the same memory. */
    b->map = data;
    b->base = (uint64_t)((uintptr_t)data - p0);
    b->vk_size = size;
    b->size = bytes;
    b->mem = VK_MEM_IMPORTED;
    return true;
}

/* Weights read once into the loader's arena are used there: imported when the device can
 * (each byte once in host memory), else copied once into gpu-host memory (see the top of this
 * file). */
halo_status vk_buf_wrap_host(halo_backend *be, void *data, uint64_t bytes, halo_buf **out,
                             halo_error *err) {
    vk_backend *vb = vk_of(be);
    *out = NULL;
    if (vb->wrap_to_device) {
        halo_status st = vk_buf_create(vb, bytes, out, err);
        if (!st && bytes) st = vk_buf_write(be, *out, 0, data, bytes, err);
        if (st) {
            vk_buf_destroy(vb, *out);
            *out = NULL;
            return halo_error_prefix(
                err, "copying %llu bytes of weights to the device: ", (unsigned long long)bytes);
        }
        return HALO_OK;
    }
    if (vb->has_host_import) {
        halo_buf *b = calloc(1, sizeof *b);
        if (!b) return halo_fail(err, HALO_E_NOMEM, "out of memory");
        if (import_host(vb, data, bytes, b)) {
            b->next_import = vb->imports;
            vb->imports = b;
            *out = b;
            return HALO_OK;
        }
        free(b);
    }
    halo_status st = vk_buf_create_in(vb, VK_MEM_HOST, bytes, out, err);
    if (st)
        return halo_error_prefix(err,
                                 "wrapping %llu bytes of host memory: ", (unsigned long long)bytes);
    if (bytes) memcpy((*out)->map, data, (size_t)bytes);
    return HALO_OK;
}

/* ---- host access -------------------------------------------------------------------------- */

/* One transfer of n bytes from (from, at byte from_off of the halo buffer) to (to, to_off),
 * submitted and waited for. */
static halo_status copy_now(vk_backend *vb, const halo_buf *from, uint64_t from_off,
                            const halo_buf *to, uint64_t to_off, uint64_t n, halo_error *err) {
    if (!vk_begin_recording(vb))
        return halo_fail(err, vb->failed, "vulkan backend: %s", vb->failed_msg);
    vk_copy_flush(vb);
    vk_barrier_if_pending(vb);
    VkBufferCopy c = {from->base + from_off, to->base + to_off, n};
    vb->fn.vkCmdCopyBuffer(vb->cmd, from->buffer, to->buffer, 1, &c);
    vk_note_transfer(vb);
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                          .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
                          .dstAccessMask = VK_ACCESS_HOST_READ_BIT | VK_ACCESS_SHADER_READ_BIT};
    vb->fn.vkCmdPipelineBarrier(vb->cmd, VK_PIPELINE_STAGE_TRANSFER_BIT,
                                VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                                0, 1, &mb, 0, NULL, 0, NULL);
    return vk_flush(vb, err);
}

/* One transfer between b (at `offset`) and the staging buffer, submitted and waited for. */
static halo_status staged_copy(vk_backend *vb, halo_buf *b, uint64_t offset, uint64_t n,
                               bool to_device, halo_error *err) {
    return to_device ? copy_now(vb, vb->staging, 0, b, offset, n, err)
                     : copy_now(vb, b, offset, vb->staging, 0, n, err);
}

/* The imported host range holding [p, p + n), or NULL. */
static const halo_buf *import_holding(const vk_backend *vb, const void *p, uint64_t n) {
    const unsigned char *c = p;
    for (const halo_buf *b = vb->imports; b; b = b->next_import)
        if (c >= b->map && n <= b->size && (uint64_t)(c - b->map) <= b->size - n) return b;
    return NULL;
}

static halo_status staging_ready(vk_backend *vb, halo_error *err) {
    if (vb->staging) return HALO_OK;
    return vk_buf_create_in(vb, VK_MEM_HOST, VK_STAGING_BYTES, &vb->staging, err);
}

halo_status vk_buf_write(halo_backend *be, halo_buf *b, uint64_t offset, const void *src,
                         uint64_t n, halo_error *err) {
    vk_backend *vb = vk_of(be);
    if (offset > b->size || n > b->size - offset)
        return halo_fail(err, HALO_E_OUT_OF_BOUNDS, "vulkan backend: write past a buffer's end");
    halo_status st = vk_flush(vb, err);
    if (st) return st;
    if (b->map) {
        memcpy(b->map + offset, src, (size_t)n);
        return HALO_OK;
    }
    /* From imported memory (the direct loader's pinned staging buffers: buf_wrap_host), the
     * GPU copies straight out of the caller's pages, one transfer with no bounce: the loader
     * fills its next buffer meanwhile, as CUDA's copies from registered memory. */
    const halo_buf *from = vb->pinned_copy ? import_holding(vb, src, n) : NULL;
    if (from) {
        st = copy_now(vb, from, (uint64_t)((const unsigned char *)src - from->map), b, offset, n,
                      err);
        if (!st) vb->pinned_bytes += n;
        return st;
    }
    if ((st = staging_ready(vb, err))) return st;
    for (uint64_t done = 0; !st && done < n; done += VK_STAGING_BYTES) {
        uint64_t k = n - done < VK_STAGING_BYTES ? n - done : VK_STAGING_BYTES;
        memcpy(vb->staging->map, (const unsigned char *)src + done, (size_t)k);
        st = staged_copy(vb, b, offset + done, k, true, err);
    }
    return st;
}

halo_status vk_buf_read(halo_backend *be, const halo_buf *b, uint64_t offset, void *dst, uint64_t n,
                        halo_error *err) {
    vk_backend *vb = vk_of(be);
    if (offset > b->size || n > b->size - offset)
        return halo_fail(err, HALO_E_OUT_OF_BOUNDS, "vulkan backend: read past a buffer's end");
    halo_status st = vk_flush(vb, err);
    if (st) return st;
    /* Device memory the host sees through a BAR is uncached there: the CPU reads it a few
     * bytes per bus transaction (reading a 0.5 MB logits row took milliseconds), so a larger read
     * goes through a GPU copy into the cached staging buffer instead. */
    bool uncached =
        b->mem == VK_MEM_DEVICE_MAPPED &&
        (vb->stage_all_reads || !(vb->mem_props.memoryTypes[vb->type_device].propertyFlags &
                                  VK_MEMORY_PROPERTY_HOST_CACHED_BIT));
    if (b->map && (!uncached || n < VK_UNCACHED_READ || !vb->stage_uncached_reads)) {
        memcpy(dst, b->map + offset, (size_t)n);
        return HALO_OK;
    }
    if ((st = staging_ready(vb, err))) return st;
    for (uint64_t done = 0; !st && done < n; done += VK_STAGING_BYTES) {
        uint64_t k = n - done < VK_STAGING_BYTES ? n - done : VK_STAGING_BYTES;
        st = staged_copy(vb, (halo_buf *)b, offset + done, k, false, err);
        if (!st) memcpy((unsigned char *)dst + done, vb->staging->map, (size_t)k);
    }
    return st;
}

/* ---- for tests ---------------------------------------------------------------------------- */

uint64_t halo_backend_vulkan_pinned_bytes(const halo_backend *be) {
    return ((const vk_backend *)be)->pinned_bytes;
}

halo_vk_memory halo_backend_vulkan_buf_memory(const halo_buf *b, const void **host) {
    if (host) *host = b ? b->map : NULL;
    if (!b) return HALO_VK_MEM_NONE;
    switch (b->mem) {
    case VK_MEM_DEVICE_MAPPED:
        return HALO_VK_MEM_DEVICE_MAPPED;
    case VK_MEM_DEVICE_STAGED:
        return HALO_VK_MEM_DEVICE_STAGED;
    case VK_MEM_HOST:
        return HALO_VK_MEM_HOST;
    case VK_MEM_IMPORTED:
        return HALO_VK_MEM_IMPORTED;
    }
    return HALO_VK_MEM_NONE;
}
