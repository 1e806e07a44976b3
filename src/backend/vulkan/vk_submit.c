/* Vulkan backend: submissions bounded in time. A GPU driver kills a submission that runs too
 * long (amdgpu's job timeout is 10 s; users lost the device 16k tokens into long prefills), so
 * no submission may hold the queue for long at any depth:
 *
 *   - every dispatch carries an estimate of its work (multiply-adds, from the op's shapes);
 *   - each submission's wall time (submit to fence) over its work gives seconds per unit of
 *     work, kept as a running estimate that rises at once and decays slowly;
 *   - a dispatch that would take the recorded work past the bound (HALO_VK_SUBMIT_MS, default
 *     500 ms: half the ~1 s the issue allows, the estimate being rough) submits what was
 *     recorded first; until a submission has been timed, at most 32 dispatches go together;
 *   - an op whose single dispatch would be long (attention, projections and indexer scores
 *     over many tokens at depth) is split along its tokens or columns into dispatches of at
 *     most half the bound each (vk_chunk), so a submission boundary can fall between them.
 *
 * Splitting changes no result: every output element is computed by the same invocation, with
 * the same summation order, whichever dispatch it falls in (test_backend_vulkan_split).
 * HALO_VK_SUBMIT_MS=0 submits before every dispatch and HALO_VK_SPLIT_WORK=N caps a chunk at N
 * units of work (1: the smallest chunks), to test that. HALO_VK_MAX_DISPATCH caps dispatches per
 * submission (default 256) whatever their time.
 *
 * Submissions go out without waiting: a ring of VK_RING command buffers, each with its fence,
 * descriptor pools and timestamp queries, so the host records the next one while the GPU runs
 * the last. A slot is waited for when the ring comes back to it, and everything when the queue
 * must drain (sync, host access to a buffer, an upload buffer that is full). Each submission's
 * GPU time comes from the timestamps around it (its wall time where the queue writes none, an
 * upper bound). Order between submissions needs nothing more: every dispatch is followed by a
 * barrier, and a barrier orders everything earlier in submission order on the queue. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/vulkan/vk.h"
#include "backend/vulkan/vulkan.h"
#include "core/error.h"
#include "halo/types.h"

/* Until a submission has been timed: dispatches per submission, and work per chunk. */
#define VK_UNTIMED_DISPATCHES 32
#define VK_UNTIMED_CHUNK_WORK 4e9

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

void vk_submit_init(vk_backend *vb) {
    const char *md = getenv("HALO_VK_MAX_DISPATCH");
    vb->max_dispatch = md && atoi(md) > 0 ? (uint32_t)atoi(md) : 256;
    const char *fd = getenv("HALO_VK_FIRST");
    vb->first_dispatch = fd && atoi(fd) > 0 ? (uint32_t)atoi(fd) : vb->max_dispatch / 8;
    const char *ms = getenv("HALO_VK_SUBMIT_MS");
    vb->submit_s = ms && *ms ? atof(ms) / 1e3 : 0.5;
    if (vb->submit_s < 0) vb->submit_s = 0;
    const char *sw = getenv("HALO_VK_SPLIT_WORK");
    vb->split_work = sw && *sw ? atof(sw) : 0;
    const char *lose = getenv("HALO_VK_TEST_LOSE");
    vb->lose_at = lose && *lose ? strtoull(lose, NULL, 10) : 0;
    const char *as = getenv("HALO_VK_ASYNC");
    vb->async = !(as && !strcmp(as, "0"));
}

halo_status vk_submit_create(vk_backend *vb, halo_error *err) {
    uint32_t nq = 0;
    VkQueueFamilyProperties q[32];
    vb->fn.vkGetPhysicalDeviceQueueFamilyProperties(vb->phys, &nq, NULL);
    if (nq > 32) nq = 32;
    vb->fn.vkGetPhysicalDeviceQueueFamilyProperties(vb->phys, &nq, q);
    uint32_t bits = vb->queue_family < nq ? q[vb->queue_family].timestampValidBits : 0;
    vb->has_stamps = bits > 0 && vb->props.limits.timestampPeriod > 0;
    vb->stamp_mask = bits >= 64 ? ~0ull : (1ull << bits) - 1;
    vb->stamp_s = 1e-9 * vb->props.limits.timestampPeriod;
    vb->stamp_cap = vb->profile ? vb->max_dispatch + 8 : 0;
    VkCommandBuffer cmds[VK_RING];
    VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                      .commandPool = vb->cmd_pool,
                                      .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                      .commandBufferCount = VK_RING};
    VkResult r = vb->fn.vkAllocateCommandBuffers(vb->device, &ai, cmds);
    for (uint32_t i = 0; r == VK_SUCCESS && i < VK_RING; i++) {
        vk_slot *s = &vb->ring[i];
        s->cmd = cmds[i];
        VkFenceCreateInfo fi = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
        r = vb->fn.vkCreateFence(vb->device, &fi, NULL, &s->fence);
        if (r == VK_SUCCESS && vb->has_stamps) {
            VkQueryPoolCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
                                        .queryType = VK_QUERY_TYPE_TIMESTAMP,
                                        .queryCount = vb->stamp_cap + 2};
            r = vb->fn.vkCreateQueryPool(vb->device, &qi, NULL, &s->stamps);
        }
        if (r == VK_SUCCESS && vb->stamp_cap) {
            s->stamp_label = calloc(vb->stamp_cap, sizeof *s->stamp_label);
            if (!s->stamp_label) r = VK_ERROR_OUT_OF_HOST_MEMORY;
        }
    }
    if (r != VK_SUCCESS)
        return halo_fail(err, HALO_E_NOMEM, "vulkan backend: cannot create a command buffer: %s",
                         vk_result_name(r));
    vb->slot = 0;
    vb->cmd = vb->ring[0].cmd;
    vb->fence = vb->ring[0].fence;
    return HALO_OK;
}

void vk_submit_destroy(vk_backend *vb) {
    for (uint32_t l = 0; l < VK_PROF_LABELS; l++)
        free(vb->prof_samp[l]);
    vb->ring[vb->slot].pools = vb->pools;
    vb->ring[vb->slot].n_pools = vb->n_pools;
    vb->pools = NULL;
    vb->n_pools = 0;
    for (uint32_t i = 0; i < VK_RING; i++) {
        vk_slot *s = &vb->ring[i];
        for (uint32_t j = 0; j < s->n_pools; j++)
            vb->fn.vkDestroyDescriptorPool(vb->device, s->pools[j], NULL);
        free(s->pools);
        if (s->fence) vb->fn.vkDestroyFence(vb->device, s->fence, NULL);
        if (s->stamps) vb->fn.vkDestroyQueryPool(vb->device, s->stamps, NULL);
        free(s->stamp_label);
        memset(s, 0, sizeof *s);
    }
}

void vk_release_deferred(vk_backend *vb) {
    while (vb->deferred) {
        halo_buf *b = vb->deferred;
        vb->deferred = b->next_free;
        vk_buf_destroy(vb, b);
    }
}

bool vk_in_flight(const vk_backend *vb) {
    for (uint32_t i = 0; i < VK_RING; i++)
        if (vb->ring[i].pending) return true;
    return false;
}

/* Seconds per unit of work from one timed submission: a slower sample is taken at once (the
 * bound must hold), a faster one only slowly (one fast submission does not undo it). */
static void learn_rate(vk_backend *vb, double seconds, double work) {
    if (work <= 0 || seconds <= 0) return;
    double r = seconds / work;
    vb->rate = r > vb->rate ? r : 0.9 * vb->rate + 0.1 * r;
}

static halo_status device_error(vk_backend *vb, VkResult r, const char *what, halo_error *err) {
    if (r == VK_ERROR_DEVICE_LOST) vb->lost = true;
    /* A lost device stays lost; later calls fail here again rather than crash. */
    return halo_fail(err, r == VK_ERROR_DEVICE_LOST ? HALO_E_IO : HALO_E_NOMEM,
                     "vulkan backend: %s failed: %s%s", what, vk_result_name(r),
                     r == VK_ERROR_DEVICE_LOST ? " (the device was lost: a driver reset or "
                                                 "a submission that ran too long)"
                                               : "");
}

/* One dispatch's time under its label; its sample kept (up to 2^20 a label) for percentiles. */
static void prof_add(vk_backend *vb, uint32_t l, double d) {
    vb->prof_s[l] += d;
    vb->prof_n[l]++;
    uint32_t n = vb->prof_kept[l];
    if (n >= (1u << 20)) return;
    if (n == vb->prof_cap[l]) {
        uint32_t cap = vb->prof_cap[l] ? 2 * vb->prof_cap[l] : 256;
        float *p = realloc(vb->prof_samp[l], cap * sizeof *p);
        if (!p) return;
        vb->prof_samp[l] = p;
        vb->prof_cap[l] = cap;
    }
    vb->prof_samp[l][n] = (float)(1e6 * d);
    vb->prof_kept[l] = n + 1;
}

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* The p-th percentile of label l's kept samples (sorted by the caller). */
static double prof_pct(const vk_backend *vb, uint32_t l, double p) {
    uint32_t n = vb->prof_kept[l];
    if (!n) return 0;
    uint32_t i = (uint32_t)(p * (double)(n - 1) + 0.5);
    return vb->prof_samp[l][i];
}

/* The slot's timestamps: its GPU time, and (profile) each dispatch's. */
static double read_stamps(vk_backend *vb, vk_slot *s) {
    uint32_t n = s->n_stamps + 2;
    uint64_t small[2], *t = n <= 2 ? small : malloc(n * sizeof *t);
    if (!t) return 0;
    double gpu = 0;
    if (vb->fn.vkGetQueryPoolResults(vb->device, s->stamps, 0, n, n * sizeof *t, t, sizeof *t,
                                     VK_QUERY_RESULT_64_BIT) == VK_SUCCESS) {
        for (uint32_t i = 1; i < n; i++) {
            double d = (double)((t[i] - t[i - 1]) & vb->stamp_mask) * vb->stamp_s;
            gpu += d;
            if (i <= s->n_stamps) prof_add(vb, s->stamp_label[i - 1], d);
        }
    }
    if (t != small) free(t);
    return gpu;
}

/* Waits for slot s and takes what it measured; its descriptor pools are free again. */
static halo_status retire(vk_backend *vb, vk_slot *s, halo_error *err) {
    if (!s->pending) return HALO_OK;
    s->pending = false;
    double w0 = vb->stats ? now_s() : 0;
    VkResult r = vb->fn.vkWaitForFences(vb->device, 1, &s->fence, VK_TRUE, UINT64_MAX);
    if (vb->stats) vb->wait_s += now_s() - w0;
    if (r == VK_SUCCESS) vb->fn.vkResetFences(vb->device, 1, &s->fence);
    if (r == VK_SUCCESS && s->seq == vb->lose_at) r = VK_ERROR_DEVICE_LOST;
    for (uint32_t i = 0; i < s->n_pools; i++)
        vb->fn.vkResetDescriptorPool(vb->device, s->pools[i], 0);
    if (r != VK_SUCCESS) return device_error(vb, r, "vkWaitForFences", err);
    double t = vb->has_stamps ? read_stamps(vb, s) : now_s() - s->t_submit;
    if (vb->stats) {
        vb->prof_gpu_s += t;
        vb->prof_wall1 = now_s();
    }
    learn_rate(vb, t, s->work);
    s->n_stamps = 0;
    return HALO_OK;
}

/* Ends and submits the slot being recorded, without waiting; the ring moves on. */
static halo_status submit_current(vk_backend *vb, halo_error *err) {
    if (!vb->recording) return HALO_OK;
    vk_copy_flush(vb);
    vk_barrier_end(vb); /* the host reads after the fence */
    vk_slot *s = &vb->ring[vb->slot];
    vb->recording = false;
    vb->n_dispatch_total += vb->n_dispatch;
    vb->n_dispatch = 0;
    s->work = vb->queued_work;
    vb->queued_work = 0;
    if (s->stamps)
        vb->fn.vkCmdWriteTimestamp(vb->cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, s->stamps,
                                   s->n_stamps + 1);
    VkResult r = vb->fn.vkEndCommandBuffer(vb->cmd);
    const char *what = "vkEndCommandBuffer";
    if (r == VK_SUCCESS) {
        VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
                           .commandBufferCount = 1,
                           .pCommandBuffers = &vb->cmd};
        what = "vkQueueSubmit";
        s->t_submit = now_s();
        if (vb->stats && vb->prof_wall0 == 0) vb->prof_wall0 = s->t_submit;
        r = vb->lost ? VK_ERROR_DEVICE_LOST : vb->fn.vkQueueSubmit(vb->queue, 1, &si, s->fence);
    }
    s->seq = ++vb->n_submits;
    s->pools = vb->pools;
    s->n_pools = vb->n_pools;
    if (r != VK_SUCCESS) {
        for (uint32_t i = 0; i < s->n_pools; i++)
            vb->fn.vkResetDescriptorPool(vb->device, s->pools[i], 0);
        s->n_stamps = 0;
        vb->cur_pool = 0;
        return device_error(vb, r, what, err);
    }
    s->pending = true;
    vb->since_drain++;
    vb->slot = (vb->slot + 1) % VK_RING;
    vk_slot *n = &vb->ring[vb->slot];
    vb->cmd = n->cmd;
    vb->fence = n->fence;
    vb->pools = n->pools;
    vb->n_pools = n->n_pools;
    vb->cur_pool = 0;
    return HALO_OK;
}

halo_status vk_flush(vk_backend *vb, halo_error *err) {
    vk_defer_flush(vb);
    vk_fwd_clear(vb); /* the host may write anything once the queue drains */
    halo_status st = submit_current(vb, err);
    /* Oldest first: the current slot (the ring has moved past the newest), then on. */
    for (uint32_t i = 0; i < VK_RING; i++) {
        halo_error e2;
        halo_status s2 = retire(vb, &vb->ring[(vb->slot + i) % VK_RING], st ? &e2 : err);
        if (!st) st = s2;
    }
    vb->cur_pool = 0;
    vb->since_drain = 0;
    if (!st) vk_release_deferred(vb);
    if (!st) vk_dsc_drained(vb); /* nothing recorded or in flight uses a cached set now */
    return st;
}

bool vk_begin_recording(vk_backend *vb) {
    if (vb->recording) return true;
    vk_slot *s = &vb->ring[vb->slot];
    halo_error err;
    if (retire(vb, s, &err)) { /* the ring came back to a slot still running */
        vk_fail(vb, err.status, "%s", err.message);
        return false;
    }
    vb->cur_pool = 0;
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                   .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    vb->fn.vkResetCommandBuffer(vb->cmd, 0);
    if (vb->fn.vkBeginCommandBuffer(vb->cmd, &bi) != VK_SUCCESS) {
        vk_fail(vb, HALO_E_NOMEM, "vkBeginCommandBuffer failed");
        return false;
    }
    if (s->stamps) {
        vb->fn.vkCmdResetQueryPool(vb->cmd, s->stamps, 0, vb->stamp_cap + 2);
        vb->fn.vkCmdWriteTimestamp(vb->cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, s->stamps, 0);
    }
    s->n_stamps = 0;
    vb->recording = true;
    vb->host_pending = false; /* the last submission ended with the host's barrier */
    return true;
}

static bool flush_or_fail(vk_backend *vb) {
    halo_error err;
    if (!vk_flush(vb, &err)) return true;
    vk_fail(vb, err.status, "%s", err.message);
    return false;
}

/* What the time bound asks for: the recorded work goes out, and (HALO_VK_ASYNC=0) is waited
 * for. */
static bool submit_or_fail(vk_backend *vb) {
    if (!vb->async) return flush_or_fail(vb);
    halo_error err;
    if (!submit_current(vb, &err)) return true;
    vk_fail(vb, err.status, "%s", err.message);
    return false;
}

bool vk_op_begin(vk_backend *vb, uint64_t upload_bytes) {
    vk_defer_flush(vb); /* recorded before the op that comes after it */
    uint64_t need = (upload_bytes + 255) & ~255ull;
    /* The upload buffer is reused only when nothing queued or running reads it (an op split
     * across submissions still reads its uploads): a full one drains the queue. */
    bool busy = vb->recording || vk_in_flight(vb);
    if (busy && vb->upload.used + need > vb->upload.buf->size && !flush_or_fail(vb)) return false;
    if (!vb->recording && !vk_in_flight(vb)) vb->upload.used = 0;
    if (need > vb->upload.buf->size) {
        halo_buf *nb = NULL;
        halo_error err;
        if (vk_buf_create_in(vb, VK_MEM_HOST, need * 2, &nb, &err)) {
            vk_fail(vb, err.status, "%s", err.message);
            return false;
        }
        vk_buf_destroy(vb, vb->upload.buf); /* not recording here: nothing uses it */
        vb->upload.buf = nb;
        vb->upload.used = 0;
    }
    return true;
}

void vk_note_work(vk_backend *vb, double work) {
    vb->next_work = work;
}

bool vk_submit_bound(vk_backend *vb, double work) {
    if (vb->recording && vb->n_dispatch > 0) {
        /* After the queue drained (each decode step ends so) the GPU idles until the first
         * submission: the first ones go out small (HALO_VK_FIRST, default 32, then doubling up
         * to HALO_VK_MAX_DISPATCH) so it starts early. */
        uint32_t cap = vb->max_dispatch;
        if (vb->async && vb->since_drain < 16 &&
            (uint64_t)vb->first_dispatch << vb->since_drain < cap)
            cap = vb->first_dispatch << vb->since_drain;
        if (cap < 1) cap = 1;
        bool full = vb->n_dispatch >= cap || vb->submit_s == 0 ||
                    (vb->rate > 0 ? (vb->queued_work + work) * vb->rate > vb->submit_s
                                  : vb->n_dispatch >= VK_UNTIMED_DISPATCHES);
        if (full && !submit_or_fail(vb)) return false;
    }
    vb->queued_work += work;
    return true;
}

uint32_t vk_chunk(const vk_backend *vb, double work_per_unit, uint32_t n_units, uint32_t granule) {
    if (granule == 0) granule = 1;
    double cap = vb->split_work > 0 ? vb->split_work
                 : vb->rate > 0     ? 0.5 * vb->submit_s / vb->rate
                                    : VK_UNTIMED_CHUNK_WORK;
    if (vb->submit_s == 0 && vb->split_work <= 0) cap = VK_UNTIMED_CHUNK_WORK;
    double units = work_per_unit > 0 ? cap / work_per_unit : (double)n_units;
    uint32_t per = units >= (double)n_units ? n_units : (uint32_t)units;
    per = per / granule * granule;
    if (per < granule) per = granule;
    return per < n_units ? per : n_units;
}

uint64_t halo_backend_vulkan_submissions(const halo_backend *be) {
    return ((const vk_backend *)be)->n_submits;
}

/* ---- profile ------------------------------------------------------------------------------ */

void vk_profile_stamp(vk_backend *vb, const char *op, const char *kernel, uint32_t type) {
    vk_slot *s = &vb->ring[vb->slot];
    if (!vb->profile || !s->stamps || s->n_stamps >= vb->stamp_cap) return;
    char name[40];
    snprintf(name, sizeof name, "%s%s/%s%s%s", vb->prof_tag && vb->prof_decode ? "1:" : "", op,
             kernel, type < 64 ? "/" : "",
             type < 64 ? halo_type_name(type) : "");
    uint32_t l = 0;
    while (l < vb->n_labels && strcmp(vb->prof_name[l], name))
        l++;
    if (l == vb->n_labels) {
        if (l == VK_PROF_LABELS)
            l--; /* the last label takes the rest */
        else
            snprintf(vb->prof_name[vb->n_labels++], sizeof vb->prof_name[0], "%s", name);
    }
    vb->fn.vkCmdWriteTimestamp(vb->cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, s->stamps,
                               1 + s->n_stamps);
    s->stamp_label[s->n_stamps++] = (uint16_t)l;
}

void vk_profile_print(vk_backend *vb) {
    if (!vb->stats) return;
    if (!vb->has_stamps) {
        fprintf(stderr, "vulkan profile: the queue writes no timestamps\n");
        return;
    }
    double wall = vb->prof_wall1 - vb->prof_wall0;
    fprintf(stderr,
            "vulkan stats: %llu submissions, %llu dispatches, %llu barriers (%llu waiting for "
            "transfers); GPU busy %.3f s (%.1f %%) of %.3f s between the first submission and "
            "the last wait; the host waited %.3f s of it\n",
            (unsigned long long)vb->n_submits, (unsigned long long)vb->n_dispatch_total,
            (unsigned long long)vb->n_barriers, (unsigned long long)vb->n_xfer_barriers,
            vb->prof_gpu_s, wall > 0 ? 100 * vb->prof_gpu_s / wall : 0.0, wall, vb->wait_s);
    fprintf(stderr, "vulkan stats: descriptor sets %llu bound from the cache, %llu written\n",
            (unsigned long long)vb->dsc_hits, (unsigned long long)vb->dsc_misses);
    if (!vb->profile) return;
    double total = 0;
    for (uint32_t i = 0; i < vb->n_labels; i++)
        total += vb->prof_s[i];
    fprintf(stderr,
            "vulkan profile: %llu submissions, GPU busy %.3f s of %.3f s between the first "
            "submission and the last wait; per dispatch (GPU time since the previous one; "
            "its 10th, 50th and 90th percentiles and the largest, us):\n",
            (unsigned long long)vb->n_submits, vb->prof_gpu_s, vb->prof_wall1 - vb->prof_wall0);
    bool done[VK_PROF_LABELS] = {false};
    for (uint32_t k = 0; k < vb->n_labels; k++) {
        uint32_t best = VK_PROF_LABELS;
        for (uint32_t i = 0; i < vb->n_labels; i++)
            if (!done[i] && (best == VK_PROF_LABELS || vb->prof_s[i] > vb->prof_s[best])) best = i;
        done[best] = true;
        if (vb->prof_kept[best])
            qsort(vb->prof_samp[best], vb->prof_kept[best], sizeof(float), cmp_float);
        fprintf(stderr,
                "vulkan profile: %-34s %9llu x %9.2f us = %9.4f s %5.1f %% | %.1f %.1f %.1f "
                "%.1f\n",
                vb->prof_name[best], (unsigned long long)vb->prof_n[best],
                vb->prof_n[best] ? 1e6 * vb->prof_s[best] / (double)vb->prof_n[best] : 0.0,
                vb->prof_s[best], total > 0 ? 100 * vb->prof_s[best] / total : 0.0,
                prof_pct(vb, best, 0.1), prof_pct(vb, best, 0.5), prof_pct(vb, best, 0.9),
                prof_pct(vb, best, 1.0));
    }
}

uint64_t halo_backend_vulkan_dispatches(const halo_backend *be) {
    const vk_backend *vb = (const vk_backend *)be;
    return vb->n_dispatch_total + vb->n_dispatch;
}
