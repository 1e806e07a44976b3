/* Vulkan backend: barriers only where one command needs another's results.
 *
 * A pipeline barrier between two dispatches makes the GPU finish the first before starting the
 * second; on a discrete GPU each costs a few microseconds of an idle machine, and a decode step
 * records ~40 dispatches a layer, many of them independent (the attention's projections all
 * read the same normalised input). So every command declares what it reads and writes (a
 * shader's bindings: the view each covers, written where the shader's binding is not
 * readonly; a copy's regions), the ranges accessed since the last barrier are kept, and a
 * barrier goes in before a command only when it reads or writes bytes one of them wrote, or
 * writes bytes one of them read. The end of a submission gets one too (the host reads after the
 * fence). HALO_VK_BARRIERS=all puts one before every command (the old behaviour, to compare). */
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "backend/vulkan/vk.h"
#include "backend/vulkan/vulkan.h"

/* The bindings each shader writes (the others are readonly in its GLSL). */
static const uint32_t writes[VK_K_COUNT] = {
    [VK_K_EMBED] = 1u << 2,
    [VK_K_MATMUL] = 1u << 2,
    [VK_K_RMS_NORM] = 1u << 1,
    [VK_K_ROPE] = 1u << 1,
    [VK_K_HC_PRE] = (1u << 1) | (1u << 4) | (1u << 5) | (1u << 6), /* 1: a folded hc_post */
    [VK_K_HC_POST] = 1u << 1,
    [VK_K_ATTENTION] = 1u << 7,
    [VK_K_POOL] = 1u << 7,
    [VK_K_POOL_SAVE] = (1u << 4) | (1u << 5),
    [VK_K_TOPK_SCORE] = 1u << 4,
    [VK_K_TOPK_SELECT] = 1u << 6,
    [VK_K_MOE_ROUTE] = (1u << 1) | (1u << 5) | (1u << 6),
    [VK_K_MOE_SWIGLU] = 1u << 1,
    [VK_K_MOE_SUM] = 1u << 4,
    [VK_K_QUANT_Q8] = (1u << 2) | (1u << 3),
    [VK_K_MATMUL_Q8] = 1u << 2,
    [VK_K_MATVEC] = 1u << 2,
    [VK_K_HC_MIX] = 1u << 2,
    [VK_K_MATVEC_WIDE] = 1u << 2,
    [VK_K_MATVEC_Q8] = 1u << 2,
    [VK_K_MATVEC_MOE] = 1u << 2,
    [VK_K_NORM_ROPE] = 1u << 1,
    [VK_K_MATVEC_Q8S] = 1u << 2,
    [VK_K_COPY] = 1u << 2,
    [VK_K_MOEQ] = 1u << 2,
    [VK_K_TOPK_SCORE_ROW] = 1u << 4,
    [VK_K_MOE_BUCKET] = (1u << 4) | (1u << 5),
    [VK_K_MOE_MM] = 1u << 2,
    [VK_K_ATTN_PART] = 1u << 7,
    [VK_K_ATTN_COMB] = 1u << 3,
    [VK_K_MATMUL_Q8T] = 1u << 2,
};

uint32_t vk_kernel_writes(vk_kernel k) {
    return k < VK_K_COUNT ? writes[k] : ~0u;
}

void vk_hazard_init(vk_backend *vb) {
    const char *b = getenv("HALO_VK_BARRIERS");
    vb->barrier_all = b && !strcmp(b, "all");
    vb->barrier_none = b && !strcmp(b, "none");
    b = getenv("HALO_VK_BARRIER_LOG");
    vb->barrier_log = b && !strcmp(b, "1");
    b = getenv("HALO_VK_NO_BARRIER");
    vb->no_barrier = b && *b ? b : NULL;
    b = getenv("HALO_VK_BARRIER_HOST");
    vb->barrier_host = b && !strcmp(b, "1");
    b = getenv("HALO_VK_BARRIER_XFER");
    vb->barrier_xfer = b && !strcmp(b, "1");
}

/* A barrier between dependent commands. Only the host reads after a fence need the host in
 * its second scope, so the barriers inside a command buffer leave it out and the submission
 * ends with one that has it (vk_barrier_end). Until session 7 every barrier named the host
 * (HALO_VK_BARRIER_HOST=1 keeps that), which may make a driver flush more than the GPU's own
 * caches at each of a decode step's ~270 barriers. Likewise the first scope has the transfer
 * stage only where a copy or fill was recorded since the last barrier (a decode layer records a
 * few copies against ~16 barriers): a driver that runs copies on a copy engine need not wait for
 * it at the others (HALO_VK_BARRIER_XFER=1: always, as before session 8). The second scope
 * keeps the transfer stage: a copy after the barrier may read what a shader wrote, and an
 * execution dependency chain through the compute stage covers transfers before earlier
 * barriers. The one that ends a submission waits for everything. */
static void record_barrier(vk_backend *vb, bool host) {
    bool xfer = host || vb->barrier_xfer || vb->xfer_pending;
    VkAccessFlags dst = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                        VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
    VkPipelineStageFlags stages =
        VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
    VkPipelineStageFlags src =
        VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | (xfer ? VK_PIPELINE_STAGE_TRANSFER_BIT : 0);
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                          .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT |
                                           (xfer ? VK_ACCESS_TRANSFER_WRITE_BIT : 0),
                          .dstAccessMask = dst | (host ? VK_ACCESS_HOST_READ_BIT : 0)};
    vb->fn.vkCmdPipelineBarrier(vb->cmd, src, stages | (host ? VK_PIPELINE_STAGE_HOST_BIT : 0), 0,
                                1, &mb, 0, NULL, 0, NULL);
    vb->host_pending = !host;
    vb->n_host_barriers += host;
    vb->n_xfer_barriers += xfer;
    vb->xfer_pending = false;
}

void vk_barrier(vk_backend *vb) {
    vb->n_access = 0;
    if (!vb->recording) return;
    vb->n_barriers++;
    /* HALO_VK_BARRIERS=none: measurement only, wrong results (dependent commands overlap);
     * what the step's barriers cost, against the default and `all` */
    if (vb->barrier_none) return;
    record_barrier(vb, vb->barrier_host);
}

void vk_barrier_if_pending(vk_backend *vb) {
    if (vb->n_access) vk_barrier(vb);
}

void vk_barrier_end(vk_backend *vb) {
    if (!vb->recording) return;
    if (vb->n_access) { /* counted as the hazard barrier it also is */
        vb->n_access = 0;
        record_barrier(vb, true);
        vb->n_barriers++;
    } else if (vb->host_pending) {
        record_barrier(vb, true); /* only for the host: not counted */
    }
}

static bool meets(const vk_access *a, const vk_access *b) {
    return a->buf == b->buf && (a->write || b->write) && a->off < b->end && b->off < a->end;
}

/* HALO_VK_BARRIER_LOG=1: why a barrier goes before the command being checked (diagnosis of a
 * step's barriers): the first earlier access (b) that its access a meets, as RAW (reads what was
 * written: a real dependency), WAR (writes what was read) or WAW (writes what was written). */
static void log_barrier(const vk_backend *vb, const vk_access *a, const vk_access *b) {
    if (!vb->hazard_op) return;
    const char *kind = b->write && !a->write ? "RAW" : !b->write ? "WAR" : "WAW";
    fprintf(stderr, "vulkan barrier: %s before %s/%s, after %s/%s (%llu bytes at %llu)\n", kind,
            vb->hazard_op, vb->hazard_kernel, b->op ? b->op : "?", b->kernel ? b->kernel : "?",
            (unsigned long long)(a->end - a->off), (unsigned long long)a->off);
}

void vk_hazard(vk_backend *vb, const vk_access *acc, uint32_t n) {
    bool need = vb->barrier_all || vb->n_access + n > VK_MAX_ACCESS;
    for (uint32_t i = 0; !need && i < n; i++)
        for (uint32_t j = 0; !need && j < vb->n_access; j++)
            if ((need = meets(&acc[i], &vb->access[j])) && vb->barrier_log)
                log_barrier(vb, &acc[i], &vb->access[j]);
    /* HALO_VK_NO_BARRIER=op/kernel,...: measurement only, wrong results: the barrier before a
     * command so labelled is left out (the command overlaps what it depends on), so a run shows
     * what one step of the chain's wait costs, as taking that step out would save */
    if (need && vb->no_barrier && vb->hazard_op &&
        vk_label_in(vb->no_barrier, vb->hazard_op, vb->hazard_kernel)) {
        vb->n_access = 0;
        vb->n_barriers++;
    } else if (need) {
        vk_barrier(vb);
    }
    for (uint32_t i = 0; i < n && vb->n_access < VK_MAX_ACCESS; i++)
        if (acc[i].end > acc[i].off) {
            vk_access *r = &vb->access[vb->n_access++];
            *r = acc[i];
            r->op = vb->hazard_op;
            r->kernel = vb->hazard_kernel;
        }
}

uint64_t halo_backend_vulkan_barriers(const halo_backend *be) {
    return ((const vk_backend *)be)->n_barriers;
}

uint64_t halo_backend_vulkan_host_barriers(const halo_backend *be) {
    return ((const vk_backend *)be)->n_host_barriers;
}

uint64_t halo_backend_vulkan_xfer_barriers(const halo_backend *be) {
    return ((const vk_backend *)be)->n_xfer_barriers;
}
