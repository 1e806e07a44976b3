/* Vulkan backend: binding views to descriptors (splitting large weights into chunks),
 * uploads of host data, the shared scratch buffer, and recording dispatches. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/vulkan/vk.h"
#include "core/error.h"
#include "halo/types.h"

vk_binding vk_bind_tensor(const halo_tensor *t) {
    return (vk_binding){.buf = t->buf, .offset = t->offset, .bytes = halo_tensor_nbytes(t)};
}

vk_binding vk_bind_weight(const halo_tensor *t, uint64_t granule) {
    uint64_t rb = 0;
    halo_type_bytes(t->type, (uint64_t)t->ne[0], &rb);
    return (vk_binding){.buf = t->buf,
                        .offset = t->offset,
                        .bytes = halo_tensor_nbytes(t),
                        .row_bytes = rb,
                        .granule = granule ? granule : 1};
}

vk_binding vk_upload_data(vk_backend *vb, const void *data, uint64_t bytes) {
    uint64_t need = (bytes + 255) & ~255ull;
    if (vb->upload.used + need > vb->upload.buf->size) {
        vk_fail(vb, HALO_E_NOMEM, "upload buffer overflow (%llu bytes)", (unsigned long long)bytes);
        return (vk_binding){0};
    }
    vk_binding b = {.buf = vb->upload.buf, .offset = vb->upload.used, .bytes = bytes};
    if (bytes) memcpy(vb->upload.buf->map + vb->upload.used, data, (size_t)bytes);
    vb->upload.used += need;
    return b;
}

bool vk_reserve(vk_backend *vb, halo_buf **slot, uint64_t bytes, const char *op) {
    if (*slot && (*slot)->size >= bytes) return true;
    halo_buf *nb = NULL;
    halo_error err;
    uint64_t want = bytes + bytes / 2;
    if (want > vb->max_alloc) want = bytes;
    if (vk_buf_create(vb, want, &nb, &err)) {
        vk_fail(vb, HALO_E_NOMEM, "%s: cannot get %llu bytes of scratch: %s", op,
                (unsigned long long)bytes, err.message);
        return false;
    }
    if (*slot) { /* recorded work may still use the old one */
        (*slot)->next_free = vb->deferred;
        vb->deferred = *slot;
    }
    *slot = nb;
    return true;
}

bool vk_scratch_reserve(vk_backend *vb, uint64_t bytes, const char *op) {
    return vk_reserve(vb, &vb->scratch, bytes, op);
}

vk_binding vk_scratch_at(vk_backend *vb, uint64_t off, uint64_t bytes) {
    return (vk_binding){.buf = vb->scratch, .offset = off, .bytes = bytes};
}

/* The descriptors of one binding: n ranges of buf. */
typedef struct resolved {
    VkDescriptorBufferInfo info[VK_CHUNKS];
} resolved;

static bool resolve_one(vk_backend *vb, const char *op, uint32_t i, const vk_binding *b,
                        vk_bound *out, resolved *r) {
    if (!b->buf) {
        vk_fail(vb, HALO_E_INVALID_ARG, "%s: binding %u has no buffer", op, i);
        return false;
    }
    /* Offsets below are in the VkBuffer, which starts `base` bytes before the halo buffer. */
    uint64_t cap = b->buf->vk_size, align = vb->align;
    if (b->offset > b->buf->size || b->bytes > b->buf->size - b->offset) {
        vk_fail(vb, HALO_E_OUT_OF_BOUNDS, "%s: binding %u reaches past its buffer's end", op, i);
        return false;
    }
    uint64_t voff = b->buf->base + b->offset;
    uint64_t off = voff / align * align, rel = voff - off;
    uint64_t range = cap - off < vb->max_range ? cap - off : vb->max_range;
    if (rel + b->bytes <= range) {
        out->rel = (uint32_t)rel;
        out->chunk_rows = 0xffffffffu;
        for (int c = 0; c < VK_CHUNKS; c++)
            r->info[c] = (VkDescriptorBufferInfo){b->buf->buffer, off, range};
        return true;
    }
    if (!b->row_bytes || i != 0) {
        vk_fail(vb, HALO_E_UNSUPPORTED,
                "%s: a view of %llu bytes exceeds the device's "
                "maxStorageBufferRange (%llu bytes)",
                op, (unsigned long long)b->bytes, (unsigned long long)vb->max_range);
        return false;
    }
    /* Chunks of whole granules whose byte size is a multiple of the descriptor alignment, so
     * the view starts at the same place `rel` inside every chunk's descriptor. */
    uint64_t g_bytes = b->row_bytes * b->granule;
    uint64_t per = (vb->max_range - align) / g_bytes;
    while (per > 0 && (per * g_bytes) % align)
        per--;
    uint64_t rows = b->bytes / b->row_bytes, per_rows = per * b->granule;
    uint64_t n = per_rows ? (rows + per_rows - 1) / per_rows : 0;
    if (per == 0 || n > VK_CHUNKS || per_rows > 0xfffffffeu) {
        vk_fail(vb, HALO_E_UNSUPPORTED,
                "%s: a weight of %llu bytes cannot be bound in %d "
                "ranges of at most %llu bytes (maxStorageBufferRange)",
                op, (unsigned long long)b->bytes, VK_CHUNKS, (unsigned long long)vb->max_range);
        return false;
    }
    out->rel = (uint32_t)rel;
    out->chunk_rows = (uint32_t)per_rows;
    for (uint64_t c = 0; c < VK_CHUNKS; c++) {
        uint64_t cc = c < n ? c : n - 1;
        uint64_t start = off + cc * per * g_bytes;
        uint64_t len = cap - start < vb->max_range ? cap - start : vb->max_range;
        r->info[c] = (VkDescriptorBufferInfo){b->buf->buffer, start, len};
    }
    return true;
}

bool vk_resolve(vk_backend *vb, const char *op, const vk_binding *b, uint32_t n, vk_bound *bound) {
    resolved r;
    if (n > VK_MAX_BINDINGS) n = VK_MAX_BINDINGS;
    for (uint32_t i = 0; i < n; i++) {
        bound[i] = (vk_bound){0, 0xffffffffu};
        if (b[i].buf && !resolve_one(vb, op, i, &b[i], &bound[i], &r)) return false;
    }
    return true;
}

/* A descriptor set from the current pool; a full pool moves on to the next (pools are reset
 * after each wait, and a new one is made when all are full). */
static VkDescriptorSet alloc_set(vk_backend *vb) {
    enum { SETS = 128 };
    for (int tries = 0; tries < 1000; tries++) {
        if (vb->cur_pool < vb->n_pools) {
            VkDescriptorSetAllocateInfo ai = {.sType =
                                                  VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
                                              .descriptorPool = vb->pools[vb->cur_pool],
                                              .descriptorSetCount = 1,
                                              .pSetLayouts = &vb->set_layout};
            VkDescriptorSet set = VK_NULL_HANDLE;
            if (vb->fn.vkAllocateDescriptorSets(vb->device, &ai, &set) == VK_SUCCESS) return set;
            vb->cur_pool++;
            continue;
        }
        VkDescriptorPoolSize ps = {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                   SETS * (VK_CHUNKS + VK_MAX_BINDINGS)};
        VkDescriptorPoolCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
                                         .maxSets = SETS,
                                         .poolSizeCount = 1,
                                         .pPoolSizes = &ps};
        VkDescriptorPool *np = realloc(vb->pools, (vb->n_pools + 1) * sizeof *np);
        if (!np) return VK_NULL_HANDLE;
        vb->pools = np;
        if (vb->fn.vkCreateDescriptorPool(vb->device, &pi, NULL, &vb->pools[vb->n_pools]) !=
            VK_SUCCESS)
            return VK_NULL_HANDLE;
        vb->cur_pool = vb->n_pools++;
    }
    return VK_NULL_HANDLE;
}

/* ---- descriptor sets kept across submissions ---------------------------------------------- */

enum { VK_DSC_INFOS = VK_CHUNKS + VK_MAX_BINDINGS, VK_DSC_POOL_SETS = 512 };

struct vk_dsc_entry {
    uint64_t hash; /* 0: empty */
    VkDescriptorSet set;
    VkDescriptorBufferInfo key[VK_DSC_INFOS];
};

void vk_dsc_init(vk_backend *vb) {
    const char *e = getenv("HALO_VK_DSCACHE");
    vb->dsc_on = !(e && !strcmp(e, "0"));
    vb->dsc_cap = e && atoi(e) > 1 ? (uint32_t)atoi(e) : 16384;
    uint32_t cap = 1;
    while (cap < vb->dsc_cap)
        cap <<= 1;
    vb->dsc_cap = cap;
}

static void dsc_clear(vk_backend *vb) {
    for (uint32_t i = 0; i < vb->dsc_n_pools; i++)
        vb->fn.vkResetDescriptorPool(vb->device, vb->dsc_pools[i], 0);
    vb->dsc_cur_pool = 0;
    if (vb->dsc) memset(vb->dsc, 0, (size_t)vb->dsc_cap * sizeof *vb->dsc);
    vb->dsc_n = 0;
    vb->dsc_stale = false;
}

void vk_dsc_drained(vk_backend *vb) {
    if (vb->dsc_stale || vb->dsc_n >= vb->dsc_cap / 2) dsc_clear(vb);
}

void vk_dsc_destroy(vk_backend *vb) {
    for (uint32_t i = 0; i < vb->dsc_n_pools; i++)
        vb->fn.vkDestroyDescriptorPool(vb->device, vb->dsc_pools[i], NULL);
    free(vb->dsc_pools);
    free(vb->dsc);
    vb->dsc_pools = NULL;
    vb->dsc = NULL;
    vb->dsc_n_pools = vb->dsc_n = 0;
}

static uint64_t dsc_hash(const VkDescriptorBufferInfo *k) {
    uint64_t h = 0x9e3779b97f4a7c15ull;
    for (uint32_t i = 0; i < VK_DSC_INFOS; i++) {
        uint64_t v[3] = {(uint64_t)(uintptr_t)k[i].buffer, k[i].offset, k[i].range};
        for (int j = 0; j < 3; j++) {
            h ^= v[j] + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
            h *= 0xff51afd7ed558ccdull;
        }
    }
    return h ? h : 1;
}

/* A set from the cache's own pools (never reset while recorded work may use them). */
static VkDescriptorSet dsc_alloc(vk_backend *vb) {
    for (;;) {
        if (vb->dsc_cur_pool < vb->dsc_n_pools) {
            VkDescriptorSetAllocateInfo ai = {.sType =
                                                  VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
                                              .descriptorPool = vb->dsc_pools[vb->dsc_cur_pool],
                                              .descriptorSetCount = 1,
                                              .pSetLayouts = &vb->set_layout};
            VkDescriptorSet set = VK_NULL_HANDLE;
            if (vb->fn.vkAllocateDescriptorSets(vb->device, &ai, &set) == VK_SUCCESS) return set;
            vb->dsc_cur_pool++;
            continue;
        }
        if (vb->dsc_n_pools * (uint64_t)VK_DSC_POOL_SETS > vb->dsc_cap) return VK_NULL_HANDLE;
        VkDescriptorPoolSize ps = {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                   VK_DSC_POOL_SETS * (VK_CHUNKS + VK_MAX_BINDINGS)};
        VkDescriptorPoolCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
                                         .maxSets = VK_DSC_POOL_SETS,
                                         .poolSizeCount = 1,
                                         .pPoolSizes = &ps};
        VkDescriptorPool *np = realloc(vb->dsc_pools, (vb->dsc_n_pools + 1) * sizeof *np);
        if (!np) return VK_NULL_HANDLE;
        vb->dsc_pools = np;
        if (vb->fn.vkCreateDescriptorPool(vb->device, &pi, NULL, &np[vb->dsc_n_pools]) !=
            VK_SUCCESS)
            return VK_NULL_HANDLE;
        vb->dsc_cur_pool = vb->dsc_n_pools++;
    }
}

/* The cached set holding these descriptors (written on a miss), or VK_NULL_HANDLE when the
 * cache is off, stale or full (the caller then writes a set of the submission's own). */
static VkDescriptorSet dsc_lookup(vk_backend *vb, const VkDescriptorBufferInfo *key) {
    if (!vb->dsc_on || vb->dsc_stale) return VK_NULL_HANDLE;
    if (!vb->dsc) {
        vb->dsc = calloc(vb->dsc_cap, sizeof *vb->dsc);
        if (!vb->dsc) {
            vb->dsc_on = false;
            return VK_NULL_HANDLE;
        }
    }
    uint64_t h = dsc_hash(key);
    uint32_t mask = vb->dsc_cap - 1;
    for (uint32_t i = (uint32_t)h & mask;; i = (i + 1) & mask) {
        struct vk_dsc_entry *e = &vb->dsc[i];
        if (e->hash == h && !memcmp(e->key, key, sizeof e->key)) {
            vb->dsc_hits++;
            return e->set;
        }
        if (e->hash) continue;
        /* Empty: not cached. Kept at most half full, so probes stay short. */
        if (vb->dsc_n >= vb->dsc_cap / 2) return VK_NULL_HANDLE;
        VkDescriptorSet set = dsc_alloc(vb);
        if (!set) return VK_NULL_HANDLE;
        VkWriteDescriptorSet w[VK_MAX_BINDINGS + 1];
        for (uint32_t b = 0; b <= VK_MAX_BINDINGS; b++)
            w[b] = (VkWriteDescriptorSet){.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
                                          .dstSet = set,
                                          .dstBinding = b,
                                          .descriptorCount = b == 0 ? VK_CHUNKS : 1,
                                          .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                          .pBufferInfo = b == 0 ? key : key + VK_CHUNKS + b - 1};
        vb->fn.vkUpdateDescriptorSets(vb->device, VK_MAX_BINDINGS + 1, w, 0, NULL);
        e->hash = h;
        e->set = set;
        memcpy(e->key, key, sizeof e->key);
        vb->dsc_n++;
        vb->dsc_misses++;
        return set;
    }
}

/* Whether HALO_VK_SKIP names this dispatch ("op/kernel" starts with one of its entries). */
bool vk_label_in(const char *list, const char *op, const char *kernel) {
    char name[96];
    snprintf(name, sizeof name, "%s/%s", op, kernel);
    for (const char *e = list; e && *e;) {
        size_t n = strcspn(e, ",");
        if (n && !strncmp(name, e, n)) return true;
        e += n + (e[n] == ',');
    }
    return false;
}

static bool skipped(const vk_backend *vb, const char *op, const char *kernel) {
    return vk_label_in(vb->skip, op, kernel);
}

bool vk_dispatch(vk_backend *vb, vk_kernel k, const char *op, const vk_binding *b, uint32_t n,
                 vk_bound *bound, const void *push, uint32_t push_bytes, uint32_t gx, uint32_t gy,
                 uint32_t gz) {
    return vk_dispatch_pipe(vb, k, vb->pipes[k], op, b, n, bound, push, push_bytes, gx, gy, gz);
}

/* Binds pipe, the descriptors of bindings b[0, n) (the codebook in the empty ones) and the push
 * constants, ready for a vkCmdDispatch (recording must be on). */
static bool bind_for_dispatch(vk_backend *vb, VkPipeline pipe, const char *op, const vk_binding *b,
                              uint32_t n, vk_bound *bound, const void *push, uint32_t push_bytes) {
    resolved r[VK_MAX_BINDINGS + 1];
    vk_bound tmp[VK_MAX_BINDINGS + 1];
    if (!bound) bound = tmp;
    if (n > VK_MAX_BINDINGS) n = VK_MAX_BINDINGS;
    /* Bindings an op leaves empty get the codebook as a harmless valid descriptor. */
    vk_binding all[VK_MAX_BINDINGS + 1];
    vk_binding dummy = {.buf = vb->grid, .offset = 0, .bytes = vb->grid->size};
    for (uint32_t i = 0; i <= VK_MAX_BINDINGS; i++)
        all[i] = i < n && b[i].buf ? b[i] : dummy;
    for (uint32_t i = 0; i <= VK_MAX_BINDINGS; i++)
        if (!resolve_one(vb, op, i, &all[i], i < n ? &bound[i] : &tmp[i], &r[i])) return false;
    VkDescriptorBufferInfo key[VK_DSC_INFOS];
    memcpy(key, r[0].info, sizeof r[0].info);
    for (uint32_t i = 1; i <= VK_MAX_BINDINGS; i++)
        key[VK_CHUNKS + i - 1] = r[i].info[0];
    VkDescriptorSet set = dsc_lookup(vb, key);
    if (!set) {
        set = alloc_set(vb);
        if (!set) {
            vk_fail(vb, HALO_E_NOMEM, "%s: cannot allocate a descriptor set", op);
            return false;
        }
        VkWriteDescriptorSet w[VK_MAX_BINDINGS + 1];
        for (uint32_t i = 0; i <= VK_MAX_BINDINGS; i++)
            w[i] = (VkWriteDescriptorSet){.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
                                          .dstSet = set,
                                          .dstBinding = i,
                                          .descriptorCount = i == 0 ? VK_CHUNKS : 1,
                                          .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                          .pBufferInfo = r[i].info};
        vb->fn.vkUpdateDescriptorSets(vb->device, VK_MAX_BINDINGS + 1, w, 0, NULL);
    }
    vb->fn.vkCmdBindPipeline(vb->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipe);
    vb->fn.vkCmdBindDescriptorSets(vb->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, vb->pipe_layout, 0, 1,
                                   &set, 0, NULL);
    unsigned char pc[VK_PUSH_BYTES] = {0};
    memcpy(pc, push, push_bytes < VK_PUSH_BYTES ? push_bytes : VK_PUSH_BYTES);
    vb->fn.vkCmdPushConstants(vb->cmd, vb->pipe_layout, VK_SHADER_STAGE_COMPUTE_BIT, 0,
                              VK_PUSH_BYTES, pc);
    return true;
}

bool vk_dispatch_pipe(vk_backend *vb, vk_kernel k, VkPipeline pipe, const char *op,
                      const vk_binding *b, uint32_t n, vk_bound *bound, const void *push,
                      uint32_t push_bytes, uint32_t gx, uint32_t gy, uint32_t gz) {
    if (vb->failed || !pipe) { /* outputs after a failure are not to be used anyway */
        vb->next_work = 0;
        return false;
    }
    if (gx == 0 || gy == 0 || gz == 0 || (vb->skip && skipped(vb, op, vk_kernel_name(k)))) {
        vb->next_work = 0;
        return true;
    }
    if (gx > vb->props.limits.maxComputeWorkGroupCount[0] ||
        gy > vb->props.limits.maxComputeWorkGroupCount[1] ||
        gz > vb->props.limits.maxComputeWorkGroupCount[2]) {
        vk_fail(vb, HALO_E_UNSUPPORTED, "%s: %u x %u x %u workgroups exceed the device's limit", op,
                gx, gy, gz);
        return false;
    }
    double work = vb->next_work > 0 ? vb->next_work : (double)gx * gy * gz * 64;
    vb->next_work = 0;
    if (!vk_submit_bound(vb, work) || !vk_begin_recording(vb)) return false;
    vk_copy_flush(vb);
    if (n > VK_MAX_BINDINGS) n = VK_MAX_BINDINGS;
    if (!bind_for_dispatch(vb, pipe, op, b, n, bound, push, push_bytes)) return false;
    /* A barrier first where this dispatch reads or writes what earlier work touches (the
     * weights, binding 0, are never written by a shader; empty bindings hold the codebook). */
    vk_access acc[VK_MAX_BINDINGS];
    uint32_t na = 0, wmask = vk_kernel_writes(k);
    for (uint32_t i = 1; i < n; i++)
        if (b[i].buf && b[i].buf != vb->grid) {
            uint64_t o = b[i].buf->base + b[i].offset;
            acc[na++] = (vk_access){.buf = b[i].buf->buffer,
                                    .off = o,
                                    .end = o + b[i].bytes,
                                    .write = (wmask >> i) & 1u};
        }
    vb->hazard_op = op; /* labels for HALO_VK_BARRIER_LOG (op names are string literals) */
    vb->hazard_kernel = vk_kernel_name(k);
    vk_hazard(vb, acc, na);
    for (uint32_t i = 0; i < na; i++)
        if (acc[i].write) vk_fwd_written(vb, acc[i].buf, acc[i].off, acc[i].end);
    vb->fn.vkCmdDispatch(vb->cmd, gx, gy, gz);
    vb->n_dispatch++;
    if (vb->profile) {
        uint32_t type = 64;
        for (uint32_t t = 0; t < VK_TYPED_KEYS && pipe != vb->pipes[k]; t++)
            if (vb->typed[k][t] == pipe) type = t % VK_KEY_NORM;
        /* specialised by variant, not type */
        if (k == VK_K_MATVEC_Q8 || k == VK_K_MATVEC_Q8S)
            type = HALO_TYPE_Q8_0;
        if (k == VK_K_ATTN_PART) type = 64; /* by heads a workgroup, not a type */
        vk_profile_stamp(vb, op, vk_kernel_name(k), type);
    }
    return true;
}

static bool ranges_meet(uint64_t a, uint64_t an, uint64_t b, uint64_t bn) {
    return a < b + bn && b < a + an;
}

/* The span [lo, hi) of regions r[0, n) on one side (src: source offsets, else destination). */
static void span(const VkBufferCopy *r, uint32_t n, bool src, uint64_t *lo, uint64_t *hi) {
    *lo = UINT64_MAX, *hi = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t o = src ? r[i].srcOffset : r[i].dstOffset;
        if (o < *lo) *lo = o;
        if (o + r[i].size > *hi) *hi = o + r[i].size;
    }
}

/* Regions r[0, n) between src and dst as copy.comp dispatches, VK_COPY_PC_REGIONS a dispatch
 * (their hazards are taken care of by the caller; the regions do not touch each other, so the
 * dispatches need no barrier between them). False, with nothing recorded, where a region is not
 * word-aligned or a side's span does not fit one descriptor: vkCmdCopyBuffer takes them. */
enum { VK_COPY_PC_REGIONS = 10 };
static bool copy_by_shader(vk_backend *vb, halo_buf *src, halo_buf *dst, const VkBufferCopy *r,
                           uint32_t n) {
    uint64_t slo, shi, dlo, dhi;
    for (uint32_t i = 0; i < n; i++)
        if ((r[i].srcOffset | r[i].dstOffset | r[i].size) % 4) return false;
    span(r, n, true, &slo, &shi);
    span(r, n, false, &dlo, &dhi);
    if (shi - slo + vb->align > vb->max_range || dhi - dlo + vb->align > vb->max_range ||
        shi - slo > 0xffffffffu || dhi - dlo > 0xffffffffu)
        return false;
    /* bindings 1 (source) and 2 (destination) over the spans; offsets in the halo buffers */
    vk_binding b[3] = {{0},
                       {.buf = src, .offset = slo - src->base, .bytes = shi - slo},
                       {.buf = dst, .offset = dlo - dst->base, .bytes = dhi - dlo}};
    /* where each span starts inside its descriptor (resolve_one's rel) */
    uint64_t srel = slo % vb->align, drel = dlo % vb->align;
    for (uint32_t i0 = 0; i0 < n; i0 += VK_COPY_PC_REGIONS) {
        uint32_t m = n - i0 < VK_COPY_PC_REGIONS ? n - i0 : VK_COPY_PC_REGIONS, most = 0;
        uint32_t pc[1 + 3 * VK_COPY_PC_REGIONS] = {m};
        for (uint32_t j = 0; j < m; j++) {
            const VkBufferCopy *q = &r[i0 + j];
            pc[1 + 3 * j] = (uint32_t)((q->srcOffset - slo + srel) / 4);
            pc[2 + 3 * j] = (uint32_t)((q->dstOffset - dlo + drel) / 4);
            pc[3 + 3 * j] = (uint32_t)(q->size / 4);
            if (q->size / 4 > most) most = (uint32_t)(q->size / 4);
        }
        vk_bound bd[3] = {{0}};
        if (!bind_for_dispatch(vb, vb->pipes[VK_K_COPY], "copy", b, 3, bd, pc, sizeof pc))
            return true; /* failed, said so */
        if (bd[1].rel != srel || bd[2].rel != drel) {
            vk_fail(vb, HALO_E_INVALID_ARG, "copy: a span bound at an unexpected offset");
            return true;
        }
        uint32_t gx = (most + 255) / 256;
        vb->fn.vkCmdDispatch(vb->cmd, gx < 64 ? gx : 64, m, 1);
        vb->n_dispatch++;
        vk_profile_stamp(vb, "copy", "copy", 64);
    }
    return true;
}

/* Records the copies gathered so far, after one barrier where they touch earlier work: as
 * copy.comp dispatches where it can take them (HALO_VK_COPY_SHADER=0: never), else one
 * vkCmdCopyBuffer with their regions. */
void vk_copy_flush(vk_backend *vb) {
    vk_copies *p = &vb->copies;
    if (!p->n || !vb->recording) {
        p->n = 0;
        return;
    }
    /* Its regions do not touch each other (copy_joins); a barrier first where they touch
     * earlier work. */
    vk_access acc[2 * VK_COPY_REGIONS];
    for (uint32_t i = 0; i < p->n; i++) {
        const VkBufferCopy *r = &p->r[i];
        acc[2 * i] = (vk_access){
            .buf = p->src->buffer, .off = r->srcOffset, .end = r->srcOffset + r->size};
        acc[2 * i + 1] = (vk_access){.buf = p->dst->buffer,
                                     .off = r->dstOffset,
                                     .end = r->dstOffset + r->size,
                                     .write = true};
    }
    vb->hazard_op = "copy";
    vb->hazard_kernel = "copy";
    vk_hazard(vb, acc, 2 * p->n);
    uint32_t n = p->n;
    p->n = 0;
    if (vb->copy_shader && vb->pipes[VK_K_COPY] && copy_by_shader(vb, p->src, p->dst, p->r, n))
        return;
    vb->fn.vkCmdCopyBuffer(vb->cmd, p->src->buffer, p->dst->buffer, n, p->r);
    vk_note_transfer(vb);
    vb->n_dispatch++;
    vk_profile_stamp(vb, "copy", "transfer", 64);
}

/* Whether a copy of n bytes src_off -> dst_off may join the gathered ones: the same two
 * buffers, room, and no byte it reads or writes written by one of them (nor one of theirs
 * read), so their order does not matter and no barrier is needed between them. */
static bool copy_joins(const vk_copies *p, const halo_buf *src, uint64_t src_off,
                       const halo_buf *dst, uint64_t dst_off, uint64_t n) {
    if (p->src != src || p->dst != dst || p->n == VK_COPY_REGIONS) return false;
    for (uint32_t i = 0; i < p->n; i++) {
        const VkBufferCopy *r = &p->r[i];
        if (ranges_meet(r->dstOffset, r->size, dst_off, n)) return false;
        if (src == dst && (ranges_meet(r->srcOffset, r->size, dst_off, n) ||
                           ranges_meet(r->dstOffset, r->size, src_off, n)))
            return false;
    }
    return true;
}

/* One copy region into the gathered ones (a new command first where it cannot join them). */
static void gather(vk_backend *vb, halo_buf *src, uint64_t so, halo_buf *dst, uint64_t d,
                   uint64_t n) {
    vk_copies *p = &vb->copies;
    if (p->n && !copy_joins(p, src, so, dst, d, n)) vk_copy_flush(vb);
    VkBufferCopy *last = p->n ? &p->r[p->n - 1] : NULL;
    if (last && last->srcOffset + last->size == so && last->dstOffset + last->size == d) {
        last->size += n; /* the next row of a run: one region */
    } else {
        p->src = src;
        p->dst = dst;
        p->r[p->n++] = (VkBufferCopy){so, d, n};
    }
}

/* dst = src: a buffer copy (through scratch when the two ranges overlap in one buffer).
 * Copies between the same two buffers that do not touch each other's bytes are gathered and
 * recorded as one command with one barrier (vk_copy_flush, before the next dispatch or
 * submission): the forward copies a sliding window's rows one at a time, up to 128 a layer. */
void vk_copy(halo_backend *be, halo_tensor *dst, const halo_tensor *src) {
    vk_backend *vb = vk_of(be);
    uint64_t n = halo_tensor_nbytes(src);
    if (n == 0 || vb->failed || !vk_op_begin(vb, 0)) return;
    if (vb->skip && skipped(vb, "copy", "transfer")) return;
    if (dst->offset + n > dst->buf->size || src->offset + n > src->buf->size) {
        vk_fail(vb, HALO_E_OUT_OF_BOUNDS, "copy: a view reaches past its buffer's end");
        return;
    }
    bool overlap =
        dst->buf == src->buf && dst->offset < src->offset + n && src->offset < dst->offset + n;
    if (overlap && !vk_scratch_reserve(vb, n, "copy")) return;
    if (!vk_submit_bound(vb, (double)n / 4) || !vk_begin_recording(vb)) return;
    uint64_t so = src->buf->base + src->offset, d = dst->buf->base + dst->offset;
    if (!overlap) {
        /* From where the bytes came, if recent copies wrote them (vk_copy_fwd.c); a piece
         * already in place is skipped, one that would overlap its destination is not taken. */
        vk_fwd_piece pc[8];
        uint32_t np = vk_fwd_resolve(vb, src->buf, so, n, pc, 8);
        for (uint32_t i = 0; i < np; i++) {
            const vk_fwd_piece *q = &pc[i];
            if (q->src == dst->buf && q->s != d + q->at && ranges_meet(q->s, q->n, d, n)) np = 0;
        }
        if (np == 0) pc[np++] = (vk_fwd_piece){src->buf, so, 0, n};
        vk_fwd_written(vb, dst->buf->buffer, d, d + n);
        for (uint32_t i = 0; i < np; i++) {
            const vk_fwd_piece *q = &pc[i];
            if (q->src == dst->buf && q->s == d + q->at) continue; /* already there */
            gather(vb, q->src, q->s, dst->buf, d + q->at, q->n);
            vk_fwd_add(vb, dst->buf, d + q->at, q->src, q->s, q->n);
        }
        return;
    }
    vk_fwd_written(vb, dst->buf->buffer, d, d + n);
    vk_fwd_written(vb, vb->scratch->buffer, 0, n);
    vk_copy_flush(vb);
    vk_barrier_if_pending(vb); /* this path orders its copies by full barriers */
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                          .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
                          .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                                           VK_ACCESS_TRANSFER_READ_BIT |
                                           VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_HOST_READ_BIT};
    VkPipelineStageFlags dst_stages = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT |
                                      VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_HOST_BIT;
    if (overlap) {
        VkBufferCopy c1 = {src->buf->base + src->offset, 0, n};
        vb->fn.vkCmdCopyBuffer(vb->cmd, src->buf->buffer, vb->scratch->buffer, 1, &c1);
        vk_note_transfer(vb);
        vb->fn.vkCmdPipelineBarrier(vb->cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, dst_stages, 0, 1, &mb,
                                    0, NULL, 0, NULL);
        VkBufferCopy c2 = {0, dst->buf->base + dst->offset, n};
        vb->fn.vkCmdCopyBuffer(vb->cmd, vb->scratch->buffer, dst->buf->buffer, 1, &c2);
        vk_note_transfer(vb);
    } else {
        VkBufferCopy c = {src->buf->base + src->offset, dst->buf->base + dst->offset, n};
        vb->fn.vkCmdCopyBuffer(vb->cmd, src->buf->buffer, dst->buf->buffer, 1, &c);
        vk_note_transfer(vb);
    }
    vb->fn.vkCmdPipelineBarrier(vb->cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, dst_stages, 0, 1, &mb, 0,
                                NULL, 0, NULL);
    vb->n_dispatch++;
    vk_profile_stamp(vb, "copy", "transfer", 64);
}
