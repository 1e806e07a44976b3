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

const char *vk_result_name(VkResult r) {
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

/* ---- submission --------------------------------------------------------------------------- */

static halo_status sync(halo_backend *be, halo_error *err) {
    vk_backend *vb = vk_of(be);
    halo_status st = vk_flush(vb, err);
    if (st) return st;
    if (vb->failed) {
        bool named = !strncmp(vb->failed_msg, "vulkan backend: ", 16); /* from vk_flush */
        st = halo_fail(err, vb->failed, "%s%s", named ? "" : "vulkan backend: ", vb->failed_msg);
        vb->failed = HALO_OK;
        vb->failed_msg[0] = 0;
    }
    return st;
}

/* After each layer: a failure already recorded is reported (submitting what was recorded, as
 * sync does); otherwise nothing waits. Submissions are bounded in time by vk_submit.c, so the
 * queue need not drain 43 times a token. */
static halo_status check(halo_backend *be, halo_error *err) {
    return vk_of(be)->failed ? sync(be, err) : HALO_OK;
}

static void destroy(halo_backend *be) {
    if (!be) return;
    vk_backend *vb = vk_of(be);
    if (vb->device) {
        halo_error err;
        vk_flush(vb, &err);
        vk_profile_print(vb);
        vb->fn.vkDeviceWaitIdle(vb->device);
        vk_release_deferred(vb);
        vk_buf_destroy(vb, vb->upload.buf);
        vk_buf_destroy(vb, vb->scratch);
        vk_buf_destroy(vb, vb->grid);
        vk_buf_destroy(vb, vb->staging);
        vk_buf_destroy(vb, vb->qact);
        vk_submit_destroy(vb);
        vk_dsc_destroy(vb);
        vk_pipelines_destroy(vb);
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
    .buf_alloc = vk_buf_alloc,
    .buf_alloc_pool = vk_buf_alloc_pool,
    .buf_free = vk_buf_free,
    .buf_wrap_host = vk_buf_wrap_host,
    .buf_write = vk_buf_write,
    .buf_read = vk_buf_read,
    .embed = vk_embed,
    .matmul = vk_matmul,
    .matmul_multi = vk_matmul_multi,
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
    .check = check,
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

static bool is_cpu(vk_backend *vb, VkPhysicalDevice pd) {
    VkPhysicalDeviceProperties p;
    vb->fn.vkGetPhysicalDeviceProperties(pd, &p);
    return p.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
}

/* Device `want`, or (want < 0) the first suitable GPU, else the first suitable device: with a
 * GPU's driver and lavapipe both installed, the loader's order must not put halo on the CPU. */
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
    for (int pass = want >= 0 ? 1 : 0; pass < 2; pass++)
        for (uint32_t i = 0; i < n; i++) {
            if (want >= 0 && (int)i != want) continue;
            if (pass == 0 && is_cpu(vb, devs[i])) continue;
            char w[512];
            if (device_suits(vb, devs[i], w, sizeof w, &vb->queue_family)) {
                vb->phys = devs[i];
                return HALO_OK;
            }
            if (!why[0]) snprintf(why, sizeof why, "%s", w);
        }
    return halo_fail(err, HALO_E_UNSUPPORTED, "vulkan backend: no usable device: %s", why);
}

/* Properties, limits, extensions and memory types of the chosen physical device. */
static halo_status read_device(vk_backend *vb, halo_error *err) {
    vb->fn.vkGetPhysicalDeviceProperties(vb->phys, &vb->props);
    vb->fn.vkGetPhysicalDeviceMemoryProperties(vb->phys, &vb->mem_props);
    /* hc_pre's slices: a GPU would run one workgroup per token on one of its cores; a CPU
     * implementation (lavapipe) gains nothing from repeating the per-token part */
    if (!vb->hc_slices)
        vb->hc_slices = vb->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU ? 1 : 16;
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
    vb->max_buffer = vb->max_alloc; /* maxBufferSize is Vulkan 1.3; allocations bound it */
    vb->align = vb->props.limits.minStorageBufferOffsetAlignment;
    if (vb->align < 16) vb->align = 16;

    uint32_t n_ext = 0;
    vb->fn.vkEnumerateDeviceExtensionProperties(vb->phys, NULL, &n_ext, NULL);
    VkExtensionProperties *ext = calloc(n_ext + 1, sizeof *ext);
    if (!ext) return halo_fail(err, HALO_E_NOMEM, "out of memory");
    vb->fn.vkEnumerateDeviceExtensionProperties(vb->phys, NULL, &n_ext, ext);
    vb->has_int_dot = has_ext(ext, n_ext, "VK_KHR_shader_integer_dot_product");
    /* Host-memory import: the loader's arena used in place (buf_wrap_host). */
    vb->has_host_import =
        has_ext(ext, n_ext, "VK_EXT_external_memory_host") && !vk_test_hides("import");
    free(ext);
    if (vb->has_host_import) {
        VkPhysicalDeviceExternalMemoryHostPropertiesEXT hp = {
            .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_MEMORY_HOST_PROPERTIES_EXT};
        VkPhysicalDeviceProperties2 hp2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
                                           .pNext = &hp};
        vb->fn.vkGetPhysicalDeviceProperties2(vb->phys, &hp2);
        vb->import_align = hp.minImportedHostPointerAlignment;
    }

    /* Memory types per pool (vk_memory.c); the host-visible one is required (uploads). */
    bool host_ok = false;
    for (uint32_t i = 0; i < vb->mem_props.memoryTypeCount; i++) {
        uint32_t want = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
        host_ok |= (vb->mem_props.memoryTypes[i].propertyFlags & want) == want;
    }
    if (!host_ok)
        return halo_fail(err, HALO_E_UNSUPPORTED,
                         "vulkan backend: %s has no host-visible coherent memory",
                         vb->props.deviceName);
    vk_memory_choose(vb);

    return HALO_OK;
}

static halo_status make_device(vk_backend *vb, halo_vk_mode mode, halo_error *err) {
    halo_status st = read_device(vb, err);
    if (st) return st;
    float prio = 1.0f;
    VkDeviceQueueCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                  .queueFamilyIndex = vb->queue_family,
                                  .queueCount = 1,
                                  .pQueuePriorities = &prio};
    /* Fast mode: Q8_0 projections by packed 4x8-bit integer dot products. */
    VkPhysicalDeviceShaderIntegerDotProductFeaturesKHR idf = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES_KHR};
    if (mode != HALO_VK_PRECISE) {
        VkPhysicalDeviceFeatures2 qf = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                        .pNext = &idf};
        if (vb->has_int_dot) vb->fn.vkGetPhysicalDeviceFeatures2(vb->phys, &qf);
        bool have = vb->has_int_dot && idf.shaderIntegerDotProduct && !vk_test_hides("intdot");
        if (!have && mode == HALO_VK_FAST_ONLY)
            return halo_fail(err, HALO_E_UNSUPPORTED,
                             "vulkan backend: fast mode (HALO_VK_FAST=1) needs integer dot "
                             "products (VK_KHR_shader_integer_dot_product), which %s lacks",
                             vb->props.deviceName);
        vb->int_dot = have;
        idf.pNext = NULL;
    }
    VkPhysicalDeviceVulkan11Features f11 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES,
        .pNext = vb->int_dot ? &idf : NULL,
        .storageBuffer16BitAccess = VK_TRUE};
    VkPhysicalDeviceFeatures2 f = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                   .pNext = &f11};
    f.features.shaderStorageBufferArrayDynamicIndexing = VK_TRUE;
    const char *exts[2];
    uint32_t n_exts = 0;
    if (vb->has_host_import) exts[n_exts++] = "VK_EXT_external_memory_host";
    if (vb->int_dot) exts[n_exts++] = "VK_KHR_shader_integer_dot_product";
    VkDeviceCreateInfo di = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                             .pNext = &f,
                             .queueCreateInfoCount = 1,
                             .pQueueCreateInfos = &qi,
                             .enabledExtensionCount = n_exts,
                             .ppEnabledExtensionNames = exts};
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
#define X(name) vb->fn.name = (PFN_##name)vb->fn.vkGetDeviceProcAddr(vb->device, #name);
    HALO_VK_OPTIONAL_FNS(X)
#undef X
    if (!vb->fn.vkGetMemoryHostPointerPropertiesEXT) vb->has_host_import = false;
    vb->fn.vkGetDeviceQueue(vb->device, vb->queue_family, 0, &vb->queue);

    VkCommandPoolCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                  .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                  .queueFamilyIndex = vb->queue_family};
    r = vb->fn.vkCreateCommandPool(vb->device, &pi, NULL, &vb->cmd_pool);
    if (r != VK_SUCCESS)
        return halo_fail(err, HALO_E_NOMEM, "vulkan backend: cannot create a command pool: %s",
                         vk_result_name(r));
    return vk_submit_create(vb, err);
}

halo_status halo_backend_vulkan_create(int device, halo_backend **out, halo_error *err) {
    return halo_backend_vulkan_create_mode(device, HALO_VK_PRECISE, out, err);
}

halo_status halo_backend_vulkan_create_mode(int device, halo_vk_mode mode, halo_backend **out,
                                            halo_error *err) {
    *out = NULL;
    const char *fast = getenv("HALO_VK_FAST");
    if (fast && !strcmp(fast, "1")) mode = HALO_VK_FAST_ONLY;
    if (fast && !strcmp(fast, "0")) mode = HALO_VK_PRECISE;
    vk_backend *vb = calloc(1, sizeof *vb);
    if (!vb) return halo_fail(err, HALO_E_NOMEM, "out of memory");
    vb->base.ops = &vk_ops;
    const char *env = getenv("HALO_VK_DEVICE");
    if (device < 0 && env && *env) device = atoi(env);
    vk_submit_init(vb);
    vk_dsc_init(vb);
    vk_hazard_init(vb);
    const char *prof = getenv("HALO_VK_PROFILE");
    vb->profile = prof && (atoi(prof) == 1 || atoi(prof) == 3);
    vb->prof_tag = prof && atoi(prof) == 3;
    vb->stats = prof && atoi(prof) > 0;
    vb->skip = getenv("HALO_VK_SKIP");
    if (vb->skip && !*vb->skip) vb->skip = NULL;
    vb->matvec = !(getenv("HALO_VK_MATVEC") && !strcmp(getenv("HALO_VK_MATVEC"), "0"));
    vb->matvec_rows =
        getenv("HALO_VK_MATVEC_ROWS") ? (uint32_t)atoi(getenv("HALO_VK_MATVEC_ROWS")) : 0;
    vb->mvq8 = vk_mvq8_parse(getenv("HALO_VK_MVQ8"));
    /* off unless asked: on the H200 the 8-layer step ran 300.7 / 299.7 tok/s with every Q8_0
     * decode projection on it against 309.5 without (session 10 call 3, medians of -r 6) */
    const char *q8s = getenv("HALO_VK_MVQ8S");
    vb->mvq8s = !q8s || !*q8s ? 0 : !strcmp(q8s, "auto") ? -1 : atoi(q8s);
    vb->fuse_norm = !(getenv("HALO_VK_FUSE_NORM") && !strcmp(getenv("HALO_VK_FUSE_NORM"), "0"));
    /* matvec_moe.comp walks rows in pairs: an even count; 8 unless asked (bench_vk_matvec on
     * the H200: one MoE call 154 us with 8, 159 with 16, 162 with 32) */
    vb->mvmoe = getenv("HALO_VK_MVMOE") ? (uint32_t)atoi(getenv("HALO_VK_MVMOE")) & ~1u : 8;
    const char *cvt = getenv("HALO_VK_CVT");
    vb->cvt = !(cvt && !strcmp(cvt, "0"));
    /* matvec_moe.comp's pieces in flight a lane and rows a subgroup (bench_vk_matvec on the
     * H200, session 7, one IQ2_XXS expert: 14.4 us with 2 pieces, 15.0 with 1, 14.9 with 4;
     * 17.9 with four rows a subgroup, fewer workgroups) */
    const char *unr = getenv("HALO_VK_MOE_UNROLL");
    vb->moe_unroll = unr && atoi(unr) >= 1 && atoi(unr) <= 4 ? (uint32_t)atoi(unr) : 2;
    const char *mr = getenv("HALO_VK_MOE_R");
    vb->moe_r = mr && atoi(mr) == 4 ? 4 : 2;
    /* first pieces loaded ahead of the barriers (bench_vk_matvec on the H200, session 8: one
     * MoE call 149 -> 144 us in every pass, warm and cold) */
    const char *pre = getenv("HALO_VK_MOE_PRE");
    vb->moe_pre = !(pre && !strcmp(pre, "0"));
    vb->fuse_moe = getenv("HALO_VK_FUSE_MOE") ? (uint32_t)atoi(getenv("HALO_VK_FUSE_MOE")) : 2;
    vk_moeq_init(vb);
    vk_attn_split_init(vb);
    const char *defer = getenv("HALO_VK_DEFER_NORM");
    vb->defer_norm = !(defer && !strcmp(defer, "0"));
    defer = getenv("HALO_VK_DEFER_POST");
    vb->defer_post = !(defer && !strcmp(defer, "0"));
    defer = getenv("HALO_VK_COPY_FWD");
    vb->copy_fwd = !(defer && !strcmp(defer, "0"));
    defer = getenv("HALO_VK_COPY_SHADER");
    vb->copy_shader = !(defer && !strcmp(defer, "0"));
    defer = getenv("HALO_VK_HC_VEC");
    vb->hc_vec = !(defer && !strcmp(defer, "0"));
    defer = getenv("HALO_VK_SCORE_ROW");
    vb->score_row = !(defer && !strcmp(defer, "0"));
    defer = getenv("HALO_VK_MMQ8T");
    vb->mm_q8t = !(defer && !strcmp(defer, "0"));
    defer = getenv("HALO_VK_MOE_MM");
    vb->moe_mm = !(defer && !strcmp(defer, "0"));
    defer = getenv("HALO_VK_HC_SLICES");
    vb->hc_slices = defer && atoi(defer) > 0 ? (uint32_t)atoi(defer) : 0; /* 0: by device */
    defer = getenv("HALO_VK_DEFER_ROPE");
    vb->defer_rope = !(defer && !strcmp(defer, "0"));
    if (vb->mvmoe > 4096) vb->mvmoe = 8;
    halo_status st = open_instance(vb, err);
    if (!st) st = pick_device(vb, device, err);
    if (!st) st = make_device(vb, mode, err);
    if (!st) st = vk_pipelines_create(vb, err);
    if (!st) st = vk_buf_create_in(vb, VK_MEM_HOST, 1u << 20, &vb->upload.buf, err);
    if (!st) st = vk_buf_create(vb, sizeof halo_iq2xxs_grid, &vb->grid, err);
    if (!st)
        st = vk_buf_write(&vb->base, vb->grid, 0, halo_iq2xxs_grid, sizeof halo_iq2xxs_grid, err);
    if (st) {
        destroy(&vb->base);
        return st;
    }
    *out = &vb->base;
    return HALO_OK;
}

halo_status halo_backend_vulkan_probe(int device, halo_vk_probe *out, halo_error *err) {
    memset(out, 0, sizeof *out);
    vk_backend *vb = calloc(1, sizeof *vb);
    if (!vb) return halo_fail(err, HALO_E_NOMEM, "out of memory");
    vb->base.ops = &vk_ops;
    const char *env = getenv("HALO_VK_DEVICE");
    if (device < 0 && env && *env) device = atoi(env);
    halo_status st = open_instance(vb, err);
    if (!st) st = pick_device(vb, device, err);
    if (!st) st = read_device(vb, err);
    if (!st) {
        const VkPhysicalDeviceMemoryProperties *mp = &vb->mem_props;
        snprintf(out->name, sizeof out->name, "%s", vb->props.deviceName);
        out->discrete = vb->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU;
        out->device_local = mp->memoryHeaps[mp->memoryTypes[vb->type_device].heapIndex].size;
        out->device_mapped = vb->device_mapped;
        uint32_t host_heap = mp->memoryTypes[vb->type_host].heapIndex;
        if (!(mp->memoryHeaps[host_heap].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT))
            out->host_visible = mp->memoryHeaps[host_heap].size;
        out->max_alloc = vb->max_alloc;
        out->host_import = vb->has_host_import;
        out->int_dot = vb->has_int_dot;
        out->cpu = vb->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
        out->vendor_id = vb->props.vendorID;
    }
    destroy(&vb->base);
    return st;
}

const char *halo_backend_vulkan_device_name(const halo_backend *be) {
    return ((const vk_backend *)be)->props.deviceName;
}

bool halo_backend_vulkan_fast(const halo_backend *be) {
    return be && be->ops == &vk_ops && ((const vk_backend *)be)->int_dot;
}

uint64_t halo_backend_vulkan_max_buffer(const halo_backend *be) {
    if (!be || be->ops != &vk_ops) return 0;
    const vk_backend *vb = (const vk_backend *)be;
    uint64_t cap = vb->max_alloc < vb->max_buffer ? vb->max_alloc : vb->max_buffer;
    const char *env = getenv("HALO_VK_MAX_BUFFER");
    uint64_t forced = env && *env ? strtoull(env, NULL, 0) : 0;
    return forced && forced < cap ? forced : cap;
}

/* HALO_VK_TEST_HIDE=a,b,...: the backend acts as if the device lacked these (tests of the
 * errors on devices without a feature, on lavapipe which has them all): "intdot" (integer dot
 * products), "import" (VK_EXT_external_memory_host). */
bool vk_test_hides(const char *feature) {
    const char *env = getenv("HALO_VK_TEST_HIDE");
    if (!env) return false;
    size_t n = strlen(feature);
    for (const char *p = strstr(env, feature); p; p = strstr(p + 1, feature))
        if ((p == env || p[-1] == ',') && (p[n] == 0 || p[n] == ',')) return true;
    return false;
}

halo_status halo_backend_vulkan_create_gpu(halo_vk_mode mode, halo_backend **out, halo_error *err) {
    *out = NULL;
    halo_vk_probe p;
    halo_status st = halo_backend_vulkan_probe(-1, &p, err);
    if (st) return st;
    if (p.cpu)
        return halo_fail(err, HALO_E_UNSUPPORTED,
                         "vulkan backend: %s is a CPU implementation, not a GPU (--backend vulkan "
                         "uses it anyway)",
                         p.name);
    return halo_backend_vulkan_create_mode(-1, mode, out, err);
}
