/* Vulkan backend: copy forwarding. A decode step's compressor feeds each series through a
 * staging copy (forward.c's compress(): src[0, p) = pend[0, p), src[p] = the new row, then
 * pend = src when no window closes), so the copy back reads what two copies just wrote and needs
 * a barrier of its own, once per series and layer. Here the backend remembers recent copies
 * (which bytes of a buffer now equal which bytes of another) and a copy that reads such bytes
 * reads them from where they came from instead: pend[0, p) = pend[0, p) is nothing to do, and
 * pend[p] = the new row depends on no copy, so no barrier. A memory is forgotten as soon as
 * anything writes either side (a dispatch, a copy, or the host: every flush forgets all).
 * HALO_VK_COPY_FWD=0 turns it off. */
#include <string.h>

#include "backend/vulkan/vk.h"

void vk_fwd_clear(vk_backend *vb) {
    vb->n_fwd = 0;
}

static bool meet(uint64_t a, uint64_t an, uint64_t b, uint64_t bn) {
    return a < b + bn && b < a + an;
}

void vk_fwd_written(vk_backend *vb, VkBuffer buf, uint64_t off, uint64_t end) {
    uint32_t k = 0;
    for (uint32_t i = 0; i < vb->n_fwd; i++) {
        const vk_fwd *f = &vb->fwd[i];
        bool hit = (f->dst->buffer == buf && meet(f->d, f->n, off, end - off)) ||
                   (f->src->buffer == buf && meet(f->s, f->n, off, end - off));
        if (!hit) vb->fwd[k++] = *f;
    }
    vb->n_fwd = k;
}

void vk_fwd_add(vk_backend *vb, halo_buf *dst, uint64_t d, halo_buf *src, uint64_t s, uint64_t n) {
    if (!vb->copy_fwd || n == 0) return;
    if (vb->n_fwd == VK_FWD_MAX) { /* the oldest goes */
        memmove(vb->fwd, vb->fwd + 1, (VK_FWD_MAX - 1) * sizeof *vb->fwd);
        vb->n_fwd--;
    }
    vb->fwd[vb->n_fwd++] = (vk_fwd){dst, d, n, src, s};
}

uint32_t vk_fwd_resolve(const vk_backend *vb, const halo_buf *src, uint64_t s, uint64_t n,
                        vk_fwd_piece *out, uint32_t max) {
    if (!vb->copy_fwd) return 0;
    /* Walk [s, s + n) in order; each step must start inside a remembered copy's destination
     * (the newest that covers it), or the whole copy is left as it is. */
    uint32_t np = 0;
    for (uint64_t at = 0; at < n;) {
        uint64_t here = s + at;
        const vk_fwd *f = NULL;
        for (uint32_t i = vb->n_fwd; i-- > 0;) {
            const vk_fwd *g = &vb->fwd[i];
            if (g->dst == src && g->d <= here && here < g->d + g->n) {
                f = g;
                break;
            }
        }
        if (!f || np == max) return 0;
        uint64_t len = f->d + f->n - here;
        if (len > n - at) len = n - at;
        out[np++] = (vk_fwd_piece){f->src, f->s + (here - f->d), at, len};
        at += len;
    }
    return np;
}
