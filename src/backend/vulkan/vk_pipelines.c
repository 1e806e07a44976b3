/* Vulkan backend: the shared descriptor layout and one compute pipeline per shader, from the
 * SPIR-V that glslc compiled at build time (shaders/NAME.comp -> NAME.spv.h, a C initializer). */
#include <stdlib.h>

#include "backend/vulkan/vk.h"
#include "core/error.h"

static const uint32_t spv_embed[] =
#include "embed.spv.h"
    ;
static const uint32_t spv_matmul[] =
#include "matmul.spv.h"
    ;
static const uint32_t spv_rms_norm[] =
#include "rms_norm.spv.h"
    ;
static const uint32_t spv_rope[] =
#include "rope.spv.h"
    ;
static const uint32_t spv_hc_pre[] =
#include "hc_pre.spv.h"
    ;
static const uint32_t spv_hc_post[] =
#include "hc_post.spv.h"
    ;
static const uint32_t spv_attention[] =
#include "attention.spv.h"
    ;
static const uint32_t spv_pool[] =
#include "pool.spv.h"
    ;
static const uint32_t spv_pool_save[] =
#include "pool_save.spv.h"
    ;
static const uint32_t spv_topk_score[] =
#include "topk_score.spv.h"
    ;
static const uint32_t spv_topk_select[] =
#include "topk_select.spv.h"
    ;
static const uint32_t spv_topk_score_row[] =
#include "topk_score_row.spv.h"
    ;
static const uint32_t spv_moe_bucket[] =
#include "moe_bucket.spv.h"
    ;
static const uint32_t spv_moe_mm[] =
#include "moe_mm.spv.h"
    ;
static const uint32_t spv_matmul_q8t[] =
#include "matmul_q8t.spv.h"
    ;
static const uint32_t spv_moe_route[] =
#include "moe_route.spv.h"
    ;
static const uint32_t spv_moe_swiglu[] =
#include "moe_swiglu.spv.h"
    ;
static const uint32_t spv_moe_sum[] =
#include "moe_sum.spv.h"
    ;
static const uint32_t spv_quant_q8[] =
#include "quant_q8.spv.h"
    ;
static const uint32_t spv_matmul_q8[] =
#include "matmul_q8.spv.h"
    ;

static const uint32_t spv_matvec[] =
#include "matvec.spv.h"
    ;

static const uint32_t spv_matvec_wide[] =
#include "matvec_wide.spv.h"
    ;
static const uint32_t spv_hc_mix[] =
#include "hc_mix.spv.h"
    ;
static const uint32_t spv_matvec_q8[] =
#include "matvec_q8.spv.h"
    ;
static const uint32_t spv_matvec_moe[] =
#include "matvec_moe.spv.h"
    ;
static const uint32_t spv_norm_rope[] =
#include "norm_rope.spv.h"
    ;
static const uint32_t spv_matvec_q8s[] =
#include "matvec_q8s.spv.h"
    ;
static const uint32_t spv_copy[] =
#include "copy.spv.h"
    ;
static const uint32_t spv_moeq[] =
#include "moeq.spv.h"
    ;
static const uint32_t spv_attn_part[] =
#include "attn_part.spv.h"
    ;
static const uint32_t spv_attn_comb[] =
#include "attn_comb.spv.h"
    ;

static const struct {
    const uint32_t *code;
    size_t bytes;
    const char *name;
} shaders[VK_K_COUNT] = {
#define S(k, a) [k] = {a, sizeof a, #a}
    S(VK_K_EMBED, spv_embed),
    S(VK_K_MATMUL, spv_matmul),
    S(VK_K_RMS_NORM, spv_rms_norm),
    S(VK_K_ROPE, spv_rope),
    S(VK_K_HC_PRE, spv_hc_pre),
    S(VK_K_HC_POST, spv_hc_post),
    S(VK_K_ATTENTION, spv_attention),
    S(VK_K_POOL, spv_pool),
    S(VK_K_POOL_SAVE, spv_pool_save),
    S(VK_K_TOPK_SCORE, spv_topk_score),
    S(VK_K_TOPK_SELECT, spv_topk_select),
    S(VK_K_MOE_ROUTE, spv_moe_route),
    S(VK_K_MOE_SWIGLU, spv_moe_swiglu),
    S(VK_K_MOE_SUM, spv_moe_sum),
    S(VK_K_QUANT_Q8, spv_quant_q8),
    S(VK_K_MATMUL_Q8, spv_matmul_q8),
    S(VK_K_MATVEC, spv_matvec),
    S(VK_K_HC_MIX, spv_hc_mix),
    S(VK_K_MATVEC_WIDE, spv_matvec_wide),
    S(VK_K_MATVEC_Q8, spv_matvec_q8),
    S(VK_K_MATVEC_MOE, spv_matvec_moe),
    S(VK_K_NORM_ROPE, spv_norm_rope),
    S(VK_K_MATVEC_Q8S, spv_matvec_q8s),
    S(VK_K_COPY, spv_copy),
    S(VK_K_MOEQ, spv_moeq),
    S(VK_K_TOPK_SCORE_ROW, spv_topk_score_row),
    S(VK_K_MOE_BUCKET, spv_moe_bucket),
    S(VK_K_MOE_MM, spv_moe_mm),
    S(VK_K_ATTN_PART, spv_attn_part),
    S(VK_K_ATTN_COMB, spv_attn_comb),
    S(VK_K_MATMUL_Q8T, spv_matmul_q8t),
#undef S
};

const char *vk_kernel_name(vk_kernel k) {
    return k < VK_K_COUNT ? shaders[k].name + 4 : "?";
}

static VkResult make_pipeline(vk_backend *vb, int k, const VkSpecializationInfo *spec,
                              VkPipeline *out) {
    VkShaderModuleCreateInfo mi = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                   .codeSize = shaders[k].bytes,
                                   .pCode = shaders[k].code};
    VkShaderModule mod = VK_NULL_HANDLE;
    VkResult r = vb->fn.vkCreateShaderModule(vb->device, &mi, NULL, &mod);
    if (r != VK_SUCCESS) return r;
    VkComputePipelineCreateInfo ci = {
        .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
        .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                  .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                  .module = mod,
                  .pName = "main",
                  .pSpecializationInfo = spec},
        .layout = vb->pipe_layout};
    r = vb->fn.vkCreateComputePipelines(vb->device, VK_NULL_HANDLE, 1, &ci, NULL, out);
    vb->fn.vkDestroyShaderModule(vb->device, mod, NULL);
    return r;
}

static bool is_typed(int k) {
    return k == VK_K_MATMUL || k == VK_K_EMBED || k == VK_K_MATVEC || k == VK_K_HC_MIX ||
           k == VK_K_MATVEC_WIDE || k == VK_K_MATVEC_Q8 || k == VK_K_MATVEC_MOE ||
           k == VK_K_MATVEC_Q8S || k == VK_K_MOEQ ||
           k == VK_K_MOE_MM || k == VK_K_ATTN_PART; /* attn_part: by heads a workgroup */
}

VkPipeline vk_typed_pipeline(vk_backend *vb, vk_kernel k, uint32_t type) {
    if (type >= VK_TYPED_KEYS) return VK_NULL_HANDLE;
    if (vb->typed[k][type]) return vb->typed[k][type];
    /* constant 0: the type (or variant); constant 1: the fused norm; constant 2: the byte
     * conversion (HALO_VK_CVT), matvec_moe's unroll, rows and early loads (HALO_VK_MOE_UNROLL,
     * _R, _PRE); each ignored by shaders that do not declare it */
    uint32_t data[3] = {type & (VK_KEY_NORM - 1), type / VK_KEY_NORM,
                        vb->cvt | vb->moe_unroll << 4 | vb->moe_r << 8 | vb->moe_pre << 12 |
                            vb->moeq_var << 16};
    VkSpecializationMapEntry e[3] = {
        {0, 0, sizeof(uint32_t)}, {1, 4, sizeof(uint32_t)}, {2, 8, sizeof(uint32_t)}};
    VkSpecializationInfo spec = {3, e, sizeof data, data};
    VkResult r = make_pipeline(vb, (int)k, &spec, &vb->typed[k][type]);
    if (r != VK_SUCCESS) {
        vk_fail(vb, HALO_E_UNSUPPORTED,
                "cannot create the pipeline of shader %s for type %u "
                "(error %d)",
                shaders[k].name + 4, type, (int)r);
        return VK_NULL_HANDLE;
    }
    return vb->typed[k][type];
}

halo_status vk_pipelines_create(vk_backend *vb, halo_error *err) {
    VkDescriptorSetLayoutBinding lb[VK_MAX_BINDINGS + 1];
    for (uint32_t i = 0; i <= VK_MAX_BINDINGS; i++)
        lb[i] = (VkDescriptorSetLayoutBinding){.binding = i,
                                               .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                               .descriptorCount = i == 0 ? VK_CHUNKS : 1,
                                               .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT};
    VkDescriptorSetLayoutCreateInfo li = {.sType =
                                              VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
                                          .bindingCount = VK_MAX_BINDINGS + 1,
                                          .pBindings = lb};
    VkResult r = vb->fn.vkCreateDescriptorSetLayout(vb->device, &li, NULL, &vb->set_layout);
    VkPushConstantRange pr = {VK_SHADER_STAGE_COMPUTE_BIT, 0, VK_PUSH_BYTES};
    VkPipelineLayoutCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                                     .setLayoutCount = 1,
                                     .pSetLayouts = &vb->set_layout,
                                     .pushConstantRangeCount = 1,
                                     .pPushConstantRanges = &pr};
    if (r == VK_SUCCESS) r = vb->fn.vkCreatePipelineLayout(vb->device, &pi, NULL, &vb->pipe_layout);
    if (r != VK_SUCCESS)
        return halo_fail(err, HALO_E_UNSUPPORTED,
                         "vulkan backend: cannot create the pipeline "
                         "layout (error %d)",
                         (int)r);
    for (int k = 0; k < VK_K_COUNT; k++) {
        /* A shader the hazard table says writes nothing would get no barrier before its
         * readers (vk_hazard.c): a missing entry, never a real shader. */
        if (!vk_kernel_writes((vk_kernel)k))
            return halo_fail(err, HALO_E_UNSUPPORTED, "vulkan backend: shader %s has no written "
                             "binding in vk_hazard.c's table", shaders[k].name + 4);
        if (is_typed(k)) continue; /* specialised per type, on first use */
        /* integer dot products: only where the device has them and fast mode asks for them */
        if ((k == VK_K_QUANT_Q8 || k == VK_K_MATMUL_Q8 || k == VK_K_MATMUL_Q8T) && !vb->int_dot)
            continue;
        r = make_pipeline(vb, k, NULL, &vb->pipes[k]);
        if (r != VK_SUCCESS)
            return halo_fail(err, HALO_E_UNSUPPORTED,
                             "vulkan backend: cannot create the "
                             "pipeline of shader %s (error %d)",
                             shaders[k].name + 4, (int)r);
    }
    return HALO_OK;
}

void vk_pipelines_destroy(vk_backend *vb) {
    for (int k = 0; k < VK_K_COUNT; k++)
        if (vb->pipes[k]) vb->fn.vkDestroyPipeline(vb->device, vb->pipes[k], NULL);
    for (int k = 0; k < VK_K_COUNT; k++)
        for (int t = 0; t < VK_TYPED_KEYS; t++)
            if (vb->typed[k][t]) vb->fn.vkDestroyPipeline(vb->device, vb->typed[k][t], NULL);
    for (uint32_t i = 0; i < vb->n_pools; i++)
        vb->fn.vkDestroyDescriptorPool(vb->device, vb->pools[i], NULL);
    free(vb->pools);
    if (vb->pipe_layout) vb->fn.vkDestroyPipelineLayout(vb->device, vb->pipe_layout, NULL);
    if (vb->set_layout) vb->fn.vkDestroyDescriptorSetLayout(vb->device, vb->set_layout, NULL);
}
