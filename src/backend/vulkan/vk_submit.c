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
 * submission (default 256) whatever their time. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "backend/vulkan/vk.h"
#include "backend/vulkan/vulkan.h"
#include "core/error.h"

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
    const char *ms = getenv("HALO_VK_SUBMIT_MS");
    vb->submit_s = ms && *ms ? atof(ms) / 1e3 : 0.5;
    if (vb->submit_s < 0) vb->submit_s = 0;
    const char *sw = getenv("HALO_VK_SPLIT_WORK");
    vb->split_work = sw && *sw ? atof(sw) : 0;
    const char *lose = getenv("HALO_VK_TEST_LOSE");
    vb->lose_at = lose && *lose ? strtoull(lose, NULL, 10) : 0;
}

void vk_release_deferred(vk_backend *vb) {
    while (vb->deferred) {
        halo_buf *b = vb->deferred;
        vb->deferred = b->next_free;
        vk_buf_destroy(vb, b);
    }
}

/* Seconds per unit of work from one timed submission: a slower sample is taken at once (the
 * bound must hold), a faster one only slowly (one fast submission does not undo it). */
static void learn_rate(vk_backend *vb, double seconds, double work) {
    if (work <= 0 || seconds <= 0) return;
    double r = seconds / work;
    vb->rate = r > vb->rate ? r : 0.9 * vb->rate + 0.1 * r;
}

halo_status vk_flush(vk_backend *vb, halo_error *err) {
    if (!vb->recording) return HALO_OK;
    vb->recording = false;
    vb->n_dispatch = 0;
    double work = vb->queued_work, t0 = now_s();
    vb->queued_work = 0;
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
    vb->n_submits++;
    if (r == VK_SUCCESS && (vb->lost || vb->n_submits == vb->lose_at)) {
        what = vb->lost ? "vkQueueSubmit" : "vkWaitForFences";
        r = VK_ERROR_DEVICE_LOST;
    }
    if (r == VK_ERROR_DEVICE_LOST) vb->lost = true;
    if (r == VK_SUCCESS) learn_rate(vb, now_s() - t0, work);
    for (uint32_t i = 0; i < vb->n_pools; i++)
        vb->fn.vkResetDescriptorPool(vb->device, vb->pools[i], 0);
    vb->cur_pool = 0;
    /* The upload buffer is not reset here: an op split across submissions still reads its
     * uploads. vk_op_begin resets it when nothing is queued. */
    if (r != VK_SUCCESS) {
        /* A lost device stays lost; later calls fail here again rather than crash. */
        return halo_fail(err, r == VK_ERROR_DEVICE_LOST ? HALO_E_IO : HALO_E_NOMEM,
                         "vulkan backend: %s failed: %s%s", what, vk_result_name(r),
                         r == VK_ERROR_DEVICE_LOST ? " (the device was lost: a driver reset or "
                                                     "a submission that ran too long)"
                                                   : "");
    }
    vk_release_deferred(vb);
    return HALO_OK;
}

static bool flush_or_fail(vk_backend *vb) {
    halo_error err;
    if (!vk_flush(vb, &err)) return true;
    vk_fail(vb, err.status, "%s", err.message);
    return false;
}

bool vk_op_begin(vk_backend *vb, uint64_t upload_bytes) {
    uint64_t need = (upload_bytes + 255) & ~255ull;
    if (vb->recording && vb->upload.used + need > vb->upload.buf->size && !flush_or_fail(vb))
        return false;
    if (!vb->recording) vb->upload.used = 0; /* nothing queued reads it */
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
        bool full = vb->n_dispatch >= vb->max_dispatch || vb->submit_s == 0 ||
                    (vb->rate > 0 ? (vb->queued_work + work) * vb->rate > vb->submit_s
                                  : vb->n_dispatch >= VK_UNTIMED_DISPATCHES);
        if (full && !flush_or_fail(vb)) return false;
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
