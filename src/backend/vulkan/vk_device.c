/* Vulkan backend: loading the loader, choosing and checking the device, buffers, submission,
 * and the ops table. */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/vulkan/vk.h"
#include "backend/vulkan/vulkan.h"
#include "core/error.h"
#include "halo/plan.h"
#include "quant/grids.h"

bool halo_backend_vulkan_built(void) {
    return true;
}

static const char *vk_result_name(VkResult r) {
    switch (r) {
    case VK_SUCCESS:
        return "VK_SUCCESS";
    case VK_ERROR_OUT_OF_HOST_MEMORY:
        return "VK_ERROR_OUT_OF_HOST_MEMORY";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY:
        return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
    case VK_ERROR_INITIALIZATION_FAILED:
        return "VK_ERROR_INITIALIZATION_FAILED";
    case VK_ERROR_DEVICE_LOST:
        return "VK_ERROR_DEVICE_LOST";
    case VK_ERROR_MEMORY_MAP_FAILED:
        return "VK_ERROR_MEMORY_MAP_FAILED";
    case VK_ERROR_EXTENSION_NOT_PRESENT:
        return "VK_ERROR_EXTENSION_NOT_PRESENT";
    case VK_ERROR_FEATURE_NOT_PRESENT:
        return "VK_ERROR_FEATURE_NOT_PRESENT";
    case VK_ERROR_INCOMPATIBLE_DRIVER:
        return "VK_ERROR_INCOMPATIBLE_DRIVER";
    case VK_ERROR_TOO_MANY_OBJECTS:
        return "VK_ERROR_TOO_MANY_OBJECTS";
    case VK_TIMEOUT:
        return "VK_TIMEOUT";
    default:
        return "a Vulkan error";
    }
}

void vk_fail(vk_backend *vb, halo_status st, const char *fmt, ...) {
    if (vb->failed) return;
    vb->failed = st;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(vb->failed_msg, sizeof vb->failed_msg, fmt, ap);
    va_end(ap);
}

/* ---- buffers ------------------------------------------------------------------------------ */

halo_status vk_buf_create(vk_backend *vb, uint64_t bytes, halo_buf **out, halo_error *err) {
    *out = NULL;
    if (bytes > vb->max_alloc)
        return halo_fail(err, HALO_E_NOMEM,
                         "vulkan backend: a buffer of %llu bytes exceeds the device's largest "
                         "allocation (maxMemoryAllocationSize %llu)",
                         (unsigned long long)bytes, (unsigned long long)vb->max_alloc);
    halo_buf *b = calloc(1, sizeof *b);
    if (!b) return halo_fail(err, HALO_E_NOMEM, "out of memory");
    /* Round up so word-wise shader reads of the last bytes stay inside the buffer. */
    uint64_t size = (bytes + 15) & ~15ull;
    if (size == 0) size = 16;
    VkBufferCreateInfo bi = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
                             .size = size,
                             .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT |
                                      VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                      VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                             .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
    VkResult r = vb->fn.vkCreateBuffer(vb->device, &bi, NULL, &b->buffer);
    VkMemoryRequirements req = {0};
    if (r == VK_SUCCESS) {
        vb->fn.vkGetBufferMemoryRequirements(vb->device, b->buffer, &req);
        VkMemoryAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                                   .allocationSize = req.size,
                                   .memoryTypeIndex = vb->mem_type};
        if (!(req.memoryTypeBits & (1u << vb->mem_type)))
            r = VK_ERROR_FEATURE_NOT_PRESENT;
        else
            r = vb->fn.vkAllocateMemory(vb->device, &ai, NULL, &b->memory);
    }
    if (r == VK_SUCCESS) r = vb->fn.vkBindBufferMemory(vb->device, b->buffer, b->memory, 0);
    if (r == VK_SUCCESS)
        r = vb->fn.vkMapMemory(vb->device, b->memory, 0, VK_WHOLE_SIZE, 0, (void **)&b->map);
    if (r != VK_SUCCESS) {
        vk_buf_destroy(vb, b);
        return halo_fail(err, HALO_E_NOMEM,
                         "vulkan backend: cannot allocate a buffer of %llu "
                         "bytes (%s)",
                         (unsigned long long)bytes, vk_result_name(r));
    }
    memset(b->map, 0, (size_t)size);
    b->size = bytes;
    *out = b;
    return HALO_OK;
}

void vk_buf_destroy(vk_backend *vb, halo_buf *b) {
    if (!b) return;
    if (b->buffer) vb->fn.vkDestroyBuffer(vb->device, b->buffer, NULL);
    if (b->memory) vb->fn.vkFreeMemory(vb->device, b->memory, NULL);
    free(b);
}

static halo_status buf_alloc(halo_backend *be, uint64_t bytes, halo_buf **out, halo_error *err) {
    return vk_buf_create(vk_of(be), bytes, out, err);
}

/* Weights in a pool of the plan. Every buffer of this backend is host-visible memory, device-
 * local where the device has a large such heap, so the device, gpu-host and host pools are the
 * same memory here; managed memory has no Vulkan counterpart. */
static halo_status buf_alloc_pool(halo_backend *be, uint32_t pool, uint64_t bytes, halo_buf **out,
                                  halo_error *err) {
    *out = NULL;
    if (pool == HALO_POOL_MANAGED || pool >= HALO_POOL_DISK)
        return halo_fail(err, HALO_E_UNSUPPORTED, "vulkan backend: no %s pool",
                         halo_pool_name((halo_pool_kind)pool));
    return vk_buf_create(vk_of(be), bytes, out, err);
}

/* Recorded work may still use the buffer: release it after the next wait. */
static void buf_free(halo_backend *be, halo_buf *b) {
    if (!b) return;
    vk_backend *vb = vk_of(be);
    if (vb->recording) {
        b->next_free = vb->deferred;
        vb->deferred = b;
        return;
    }
    vk_buf_destroy(vb, b);
}

/* Weights wrapped from the loader's arena are copied into a buffer the device can read: the
 * mapping is host memory, so this is one memcpy per tensor (see docs/vulkan.md: importing the
 * arena with VK_EXT_external_memory_host would save it). */
static halo_status buf_wrap_host(halo_backend *be, void *data, uint64_t bytes, halo_buf **out,
                                 halo_error *err) {
    halo_status st = vk_buf_create(vk_of(be), bytes, out, err);
    if (!st && bytes) memcpy((*out)->map, data, (size_t)bytes);
    return st;
}

static halo_status buf_write(halo_backend *be, halo_buf *b, uint64_t offset, const void *src,
                             uint64_t n, halo_error *err) {
    if (offset > b->size || n > b->size - offset)
        return halo_fail(err, HALO_E_OUT_OF_BOUNDS, "vulkan backend: write past a buffer's end");
    halo_status st = vk_flush(vk_of(be), err);
    if (st) return st;
    memcpy(b->map + offset, src, (size_t)n);
    return HALO_OK;
}

static halo_status buf_read(halo_backend *be, const halo_buf *b, uint64_t offset, void *dst,
                            uint64_t n, halo_error *err) {
    if (offset > b->size || n > b->size - offset)
        return halo_fail(err, HALO_E_OUT_OF_BOUNDS, "vulkan backend: read past a buffer's end");
    halo_status st = vk_flush(vk_of(be), err);
    if (st) return st;
    memcpy(dst, b->map + offset, (size_t)n);
    return HALO_OK;
}

/* ---- submission --------------------------------------------------------------------------- */

static void release_deferred(vk_backend *vb) {
    while (vb->deferred) {
        halo_buf *b = vb->deferred;
        vb->deferred = b->next_free;
        vk_buf_destroy(vb, b);
    }
}

halo_status vk_flush(vk_backend *vb, halo_error *err) {
    if (!vb->recording) return HALO_OK;
    vb->recording = false;
    vb->n_dispatch = 0;
    VkResult r = vb->fn.vkEndCommandBuffer(vb->cmd);
    const char *what = "vkEndCommandBuffer";
    if (r == VK_SUCCESS) {
        VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
                           .commandBufferCount = 1,
                           .pCommandBuffers = &vb->cmd};
        what = "vkQueueSubmit";
        r = vb->fn.vkQueueSubmit(vb->queue, 1, &si, vb->fence);
        if (r == VK_SUCCESS) {
            what = "vkWaitForFences";
            r = vb->fn.vkWaitForFences(vb->device, 1, &vb->fence, VK_TRUE, UINT64_MAX);
        }
        if (r == VK_SUCCESS) vb->fn.vkResetFences(vb->device, 1, &vb->fence);
    }
    for (uint32_t i = 0; i < vb->n_pools; i++)
        vb->fn.vkResetDescriptorPool(vb->device, vb->pools[i], 0);
    vb->cur_pool = 0;
    vb->upload.used = 0;
    if (r != VK_SUCCESS) {
        /* A lost device stays lost; later calls fail here again rather than crash. */
        vb->recording = false;
        return halo_fail(err, r == VK_ERROR_DEVICE_LOST ? HALO_E_IO : HALO_E_NOMEM,
                         "vulkan backend: %s failed: %s%s", what, vk_result_name(r),
                         r == VK_ERROR_DEVICE_LOST ? " (the device was lost: a driver reset or "
                                                     "a submission that ran too long)"
                                                   : "");
    }
    release_deferred(vb);
    return HALO_OK;
}

static halo_status sync(halo_backend *be, halo_error *err) {
    vk_backend *vb = vk_of(be);
    halo_status st = vk_flush(vb, err);
    if (st) return st;
    if (vb->failed) {
        st = halo_fail(err, vb->failed, "vulkan backend: %s", vb->failed_msg);
        vb->failed = HALO_OK;
        vb->failed_msg[0] = 0;
    }
    return st;
}

static void destroy(halo_backend *be) {
    if (!be) return;
    vk_backend *vb = vk_of(be);
    for (int k = 0; vb->profile && k < VK_K_COUNT; k++)
        if (vb->prof_n[k])
            fprintf(stderr, "vulkan profile: kernel %2d: %8llu dispatches %9.3f s\n", k,
                    (unsigned long long)vb->prof_n[k], vb->prof_s[k]);
    if (vb->device) {
        halo_error err;
        vk_flush(vb, &err);
        vb->fn.vkDeviceWaitIdle(vb->device);
        release_deferred(vb);
        vk_buf_destroy(vb, vb->upload.buf);
        vk_buf_destroy(vb, vb->scratch);
        vk_buf_destroy(vb, vb->grid);
        vk_pipelines_destroy(vb);
        if (vb->fence) vb->fn.vkDestroyFence(vb->device, vb->fence, NULL);
        if (vb->cmd_pool) vb->fn.vkDestroyCommandPool(vb->device, vb->cmd_pool, NULL);
        vb->fn.vkDestroyDevice(vb->device, NULL);
    }
    if (vb->instance) vb->fn.vkDestroyInstance(vb->instance, NULL);
    if (vb->lib) dlclose(vb->lib);
    free(vb);
}

static const halo_backend_ops vk_ops = {
    .name = "vulkan",
    .destroy = destroy,
    .buf_alloc = buf_alloc,
    .buf_alloc_pool = buf_alloc_pool,
    .buf_free = buf_free,
    .buf_wrap_host = buf_wrap_host,
    .buf_write = buf_write,
    .buf_read = buf_read,
    .embed = vk_embed,
    .matmul = vk_matmul,
    .rms_norm = vk_rms_norm,
    .rope = vk_rope,
    .hc_pre = vk_hc_pre,
    .hc_post = vk_hc_post,
    .attention = vk_attention,
    .pool = vk_pool,
    .topk = vk_topk,
    .moe = vk_moe,
    .copy = vk_copy,
    .sync = sync,
    .check = sync, /* submits the recorded layer: keeps each submission short */
};

/* ---- creation ----------------------------------------------------------------------------- */

static bool has_ext(const VkExtensionProperties *e, uint32_t n, const char *name) {
    for (uint32_t i = 0; i < n; i++)
        if (!strcmp(e[i].extensionName, name)) return true;
    return false;
}

static halo_status open_instance(vk_backend *vb, halo_error *err) {
    const char *names[] = {"libvulkan.so.1", "libvulkan.so"};
    for (size_t i = 0; i < 2 && !vb->lib; i++)
        vb->lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!vb->lib)
        return halo_fail(err, HALO_E_UNSUPPORTED,
                         "vulkan backend: no Vulkan loader "
                         "(libvulkan.so.1) on this machine: install libvulkan1 and a driver");
    PFN_vkGetInstanceProcAddr gipa =
        (PFN_vkGetInstanceProcAddr)dlsym(vb->lib, "vkGetInstanceProcAddr");
    PFN_vkCreateInstance create =
        gipa ? (PFN_vkCreateInstance)gipa(NULL, "vkCreateInstance") : NULL;
    PFN_vkEnumerateInstanceVersion version =
        gipa ? (PFN_vkEnumerateInstanceVersion)gipa(NULL, "vkEnumerateInstanceVersion") : NULL;
    if (!create)
        return halo_fail(err, HALO_E_UNSUPPORTED,
                         "vulkan backend: the loader has no "
                         "vkCreateInstance");
    uint32_t api = VK_API_VERSION_1_0;
    if (version) version(&api);
    if (api < VK_API_VERSION_1_2)
        return halo_fail(err, HALO_E_UNSUPPORTED,
                         "vulkan backend: the Vulkan loader is %u.%u; "
                         "halo needs Vulkan 1.2",
                         VK_API_VERSION_MAJOR(api), VK_API_VERSION_MINOR(api));
    VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                             .pApplicationName = "halo",
                             .apiVersion = VK_API_VERSION_1_2};
    VkInstanceCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                               .pApplicationInfo = &app};
    VkResult r = create(&ci, NULL, &vb->instance);
    if (r != VK_SUCCESS)
        return halo_fail(err, HALO_E_UNSUPPORTED,
                         "vulkan backend: vkCreateInstance failed: %s "
                         "(no driver? VK_DRIVER_FILES names the ICD to use)",
                         vk_result_name(r));
#define X(name) vb->fn.name = (PFN_##name)gipa(vb->instance, #name);
    HALO_VK_INSTANCE_FNS(X)
#undef X
#define X(name)                                                                                    \
    if (!vb->fn.name)                                                                              \
        return halo_fail(err, HALO_E_UNSUPPORTED, "vulkan backend: the loader lacks %s", #name);
    HALO_VK_INSTANCE_FNS(X)
#undef X
    return HALO_OK;
}

/* Checks what the shaders need on one physical device; fills why on failure. */
static bool device_suits(vk_backend *vb, VkPhysicalDevice pd, char *why, size_t why_n,
                         uint32_t *family) {
    VkPhysicalDeviceProperties p;
    vb->fn.vkGetPhysicalDeviceProperties(pd, &p);
    if (p.apiVersion < VK_API_VERSION_1_2) {
        snprintf(why, why_n, "%.200s supports Vulkan %u.%u; halo needs 1.2", p.deviceName,
                 VK_API_VERSION_MAJOR(p.apiVersion), VK_API_VERSION_MINOR(p.apiVersion));
        return false;
    }
    VkPhysicalDeviceVulkan11Features f11 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
    VkPhysicalDeviceVulkan12Features f12 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES, .pNext = &f11};
    VkPhysicalDeviceFeatures2 f = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                   .pNext = &f12};
    vb->fn.vkGetPhysicalDeviceFeatures2(pd, &f);
    VkPhysicalDeviceSubgroupProperties sg = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
    VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
                                      .pNext = &sg};
    vb->fn.vkGetPhysicalDeviceProperties2(pd, &p2);
    const char *missing = NULL;
    if (!f11.storageBuffer16BitAccess)
        missing = "16-bit storage (storageBuffer16BitAccess)";
    else if (!f.features.shaderStorageBufferArrayDynamicIndexing)
        missing = "shaderStorageBufferArrayDynamicIndexing";
    else if (!(sg.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) ||
             !(sg.supportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT))
        missing = "subgroup arithmetic in compute shaders";
    if (missing) {
        snprintf(why, why_n, "%.200s lacks %.100s", p.deviceName, missing);
        return false;
    }
    uint32_t nq = 0;
    vb->fn.vkGetPhysicalDeviceQueueFamilyProperties(pd, &nq, NULL);
    VkQueueFamilyProperties q[32];
    if (nq > 32) nq = 32;
    vb->fn.vkGetPhysicalDeviceQueueFamilyProperties(pd, &nq, q);
    for (uint32_t i = 0; i < nq; i++)
        if (q[i].queueFlags & VK_QUEUE_COMPUTE_BIT) {
            *family = i;
            return true;
        }
    snprintf(why, why_n, "%.200s has no compute queue", p.deviceName);
    return false;
}

static halo_status pick_device(vk_backend *vb, int want, halo_error *err) {
    uint32_t n = 0;
    vb->fn.vkEnumeratePhysicalDevices(vb->instance, &n, NULL);
    if (n == 0)
        return halo_fail(err, HALO_E_UNSUPPORTED,
                         "vulkan backend: no Vulkan device (is a "
                         "driver installed? lavapipe: mesa-vulkan-drivers)");
    VkPhysicalDevice devs[16];
    if (n > 16) n = 16;
    vb->fn.vkEnumeratePhysicalDevices(vb->instance, &n, devs);
    if (want >= (int)n)
        return halo_fail(err, HALO_E_INVALID_ARG,
                         "vulkan backend: device %d asked for, %u "
                         "present",
                         want, n);
    char why[512] = "";
    for (uint32_t i = 0; i < n; i++) {
        if (want >= 0 && (int)i != want) continue;
        if (device_suits(vb, devs[i], why, sizeof why, &vb->queue_family)) {
            vb->phys = devs[i];
            return HALO_OK;
        }
    }
    return halo_fail(err, HALO_E_UNSUPPORTED, "vulkan backend: no usable device: %s", why);
}

static halo_status make_device(vk_backend *vb, halo_error *err) {
    vb->fn.vkGetPhysicalDeviceProperties(vb->phys, &vb->props);
    vb->fn.vkGetPhysicalDeviceMemoryProperties(vb->phys, &vb->mem_props);
    VkPhysicalDeviceMaintenance3Properties m3 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES};
    VkPhysicalDeviceSubgroupProperties sg = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES, .pNext = &m3};
    VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
                                      .pNext = &sg};
    vb->fn.vkGetPhysicalDeviceProperties2(vb->phys, &p2);
    vb->subgroup_size = sg.subgroupSize;
    /* At most 2 GiB per descriptor and per allocation: an APU was seen returning zeros past
     * 2^32, and offsets inside a descriptor are 32-bit in the shaders. */
    const uint64_t cap = 1ull << 31;
    vb->max_range = vb->props.limits.maxStorageBufferRange;
    if (vb->max_range > cap) vb->max_range = cap;
    vb->max_alloc = m3.maxMemoryAllocationSize ? m3.maxMemoryAllocationSize : cap;
    if (vb->max_alloc > 4 * cap) vb->max_alloc = 4 * cap;
    vb->align = vb->props.limits.minStorageBufferOffsetAlignment;
    if (vb->align < 16) vb->align = 16;

    uint32_t n_ext = 0;
    vb->fn.vkEnumerateDeviceExtensionProperties(vb->phys, NULL, &n_ext, NULL);
    VkExtensionProperties *ext = calloc(n_ext + 1, sizeof *ext);
    if (!ext) return halo_fail(err, HALO_E_NOMEM, "out of memory");
    vb->fn.vkEnumerateDeviceExtensionProperties(vb->phys, NULL, &n_ext, ext);
    vb->has_int_dot = has_ext(ext, n_ext, "VK_KHR_shader_integer_dot_product");
    free(ext);

    /* Memory: host-visible and coherent (the backend maps every buffer), device-local too where
     * the device offers it (integrated GPUs, resizable BAR). */
    uint32_t want = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    int best = -1;
    for (int pass = 0; pass < 2 && best < 0; pass++)
        for (uint32_t i = 0; i < vb->mem_props.memoryTypeCount && best < 0; i++) {
            VkMemoryType t = vb->mem_props.memoryTypes[i];
            if ((t.propertyFlags & want) != want) continue;
            /* pass 0: device-local, when its heap is large (not a 256 MiB BAR window) */
            bool local = t.propertyFlags & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
            if (pass == 0 && (!local || vb->mem_props.memoryHeaps[t.heapIndex].size < (8ull << 30)))
                continue;
            best = (int)i;
        }
    if (best < 0)
        return halo_fail(err, HALO_E_UNSUPPORTED,
                         "vulkan backend: %s has no host-visible "
                         "coherent memory",
                         vb->props.deviceName);
    vb->mem_type = (uint32_t)best;

    float prio = 1.0f;
    VkDeviceQueueCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                  .queueFamilyIndex = vb->queue_family,
                                  .queueCount = 1,
                                  .pQueuePriorities = &prio};
    VkPhysicalDeviceVulkan11Features f11 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES,
        .storageBuffer16BitAccess = VK_TRUE};
    VkPhysicalDeviceFeatures2 f = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                   .pNext = &f11};
    f.features.shaderStorageBufferArrayDynamicIndexing = VK_TRUE;
    VkDeviceCreateInfo di = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                             .pNext = &f,
                             .queueCreateInfoCount = 1,
                             .pQueueCreateInfos = &qi};
    VkResult r = vb->fn.vkCreateDevice(vb->phys, &di, NULL, &vb->device);
    if (r != VK_SUCCESS)
        return halo_fail(err, HALO_E_UNSUPPORTED,
                         "vulkan backend: vkCreateDevice on %s failed: "
                         "%s",
                         vb->props.deviceName, vk_result_name(r));
#define X(name) vb->fn.name = (PFN_##name)vb->fn.vkGetDeviceProcAddr(vb->device, #name);
    HALO_VK_DEVICE_FNS(X)
#undef X
#define X(name)                                                                                    \
    if (!vb->fn.name)                                                                              \
        return halo_fail(err, HALO_E_UNSUPPORTED, "vulkan backend: the driver lacks %s", #name);
    HALO_VK_DEVICE_FNS(X)
#undef X
    vb->fn.vkGetDeviceQueue(vb->device, vb->queue_family, 0, &vb->queue);

    VkCommandPoolCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                  .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                  .queueFamilyIndex = vb->queue_family};
    r = vb->fn.vkCreateCommandPool(vb->device, &pi, NULL, &vb->cmd_pool);
    if (r == VK_SUCCESS) {
        VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                          .commandPool = vb->cmd_pool,
                                          .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                          .commandBufferCount = 1};
        r = vb->fn.vkAllocateCommandBuffers(vb->device, &ai, &vb->cmd);
    }
    if (r == VK_SUCCESS) {
        VkFenceCreateInfo fi = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
        r = vb->fn.vkCreateFence(vb->device, &fi, NULL, &vb->fence);
    }
    if (r != VK_SUCCESS)
        return halo_fail(err, HALO_E_NOMEM, "vulkan backend: cannot create a command buffer: %s",
                         vk_result_name(r));
    return HALO_OK;
}

halo_status halo_backend_vulkan_create(int device, halo_backend **out, halo_error *err) {
    *out = NULL;
    vk_backend *vb = calloc(1, sizeof *vb);
    if (!vb) return halo_fail(err, HALO_E_NOMEM, "out of memory");
    vb->base.ops = &vk_ops;
    const char *env = getenv("HALO_VK_DEVICE");
    if (device < 0 && env && *env) device = atoi(env);
    /* Submissions are split after this many dispatches so none runs long (docs/vulkan.md). */
    const char *md = getenv("HALO_VK_MAX_DISPATCH");
    vb->max_dispatch = md && atoi(md) > 0 ? (uint32_t)atoi(md) : 256;
    vb->profile = getenv("HALO_VK_PROFILE") && atoi(getenv("HALO_VK_PROFILE")) > 0;
    halo_status st = open_instance(vb, err);
    if (!st) st = pick_device(vb, device, err);
    if (!st) st = make_device(vb, err);
    if (!st) st = vk_pipelines_create(vb, err);
    if (!st) st = vk_buf_create(vb, 1u << 20, &vb->upload.buf, err);
    if (!st) st = vk_buf_create(vb, sizeof halo_iq2xxs_grid, &vb->grid, err);
    if (st) {
        destroy(&vb->base);
        return st;
    }
    memcpy(vb->grid->map, halo_iq2xxs_grid, sizeof halo_iq2xxs_grid);
    *out = &vb->base;
    return HALO_OK;
}

const char *halo_backend_vulkan_device_name(const halo_backend *be) {
    return ((const vk_backend *)be)->props.deviceName;
}
