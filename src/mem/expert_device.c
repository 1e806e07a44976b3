/* The GPU-side expert cache over the host expert cache (see expert_device.h). */
#include "mem/expert_device.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "mem/expert_cache.h"
#include "mem/expert_slots.h"

struct halo_expert_device {
    halo_backend *be;
    halo_buf *buf;
    halo_expert_slots slots;
    uint64_t slot_bytes, region[3]; /* offsets of gate, up, down inside a slot */
    uint32_t n_layer, n_expert;
    const halo_weights *w;
    const halo_expert_source **inner; /* [n_layer] the host cache's sources */
    halo_expert_source *src;          /* [n_layer] ours */
    halo_expert_view *hviews;         /* [n_expert] what the host cache returns */
    halo_expert_device_stats st;
};

static uint64_t align256(uint64_t v) {
    return (v + 255) & ~255ull;
}

/* Bytes of one expert of a stacked [.., .., n_expert] tensor. */
static uint64_t expert_bytes(const halo_weight *m) {
    return m->src ? m->src->n_bytes / (uint64_t)m->src->ne[2] : 0;
}

static const halo_weight *mat_of(const halo_layer_weights *L, int mat) {
    return mat == 0 ? &L->gate_exps : mat == 1 ? &L->up_exps : &L->down_exps;
}

uint64_t halo_expert_device_slot_bytes(const halo_weights *w) {
    uint64_t per[3] = {0};
    for (uint32_t l = 0; l < w->n_layer; l++)
        for (int m = 0; m < 3; m++) {
            uint64_t b = expert_bytes(mat_of(&w->layer[l], m));
            per[m] = b > per[m] ? b : per[m];
        }
    return align256(per[0]) + align256(per[1]) + align256(per[2]);
}

static halo_tensor slot_view(const halo_expert_device *d, int32_t slot, uint32_t layer, int mat) {
    const halo_gguf_tensor *t = mat_of(&d->w->layer[layer], mat)->src;
    halo_tensor v = {.buf = d->buf,
                     .offset = (uint64_t)slot * d->slot_bytes + d->region[mat],
                     .type = t->type,
                     .ne = {t->ne[0], t->ne[1], 1, 1}};
    return v;
}

static void fill_view(const halo_expert_device *d, int32_t slot, uint32_t layer,
                      halo_expert_view *v) {
    v->gate = slot_view(d, slot, layer, 0);
    v->up = slot_view(d, slot, layer, 1);
    v->down = slot_view(d, slot, layer, 2);
}

/* Copies one expert from the host cache's (pinned) memory into a slot. The host views are
 * tensors of the buffer wrapping the cache's memory from its start (src/mem/stream.c). */
static halo_status upload(halo_expert_device *d, const halo_expert_source *inner, int32_t slot,
                          uint32_t layer, uint32_t expert, const halo_expert_view *hv,
                          halo_error *err) {
    uint64_t mem_bytes = 0;
    const unsigned char *mem = halo_expert_cache_memory(inner->impl, &mem_bytes);
    const halo_tensor *h[3] = {&hv->gate, &hv->up, &hv->down};
    for (int m = 0; m < 3; m++) {
        uint64_t n = expert_bytes(mat_of(&d->w->layer[layer], m));
        if (h[m]->offset > mem_bytes || n > mem_bytes - h[m]->offset)
            return halo_fail(err, HALO_E_OUT_OF_BOUNDS,
                             "device expert cache: blk.%u expert %u lies outside the host cache",
                             layer, expert);
        halo_status st =
            d->be->ops->buf_write(d->be, d->buf, (uint64_t)slot * d->slot_bytes + d->region[m],
                                  mem + h[m]->offset, n, err);
        if (st)
            return halo_error_prefix(
                err, "%s, expert %u: ", mat_of(&d->w->layer[layer], m)->src->name, expert);
        d->st.upload_bytes += n;
    }
    d->st.uploads++;
    return HALO_OK;
}

static halo_status resolve(const halo_expert_source *src, int32_t *ids, uint32_t n,
                           halo_expert_view *views, uint32_t *n_ready, halo_error *err) {
    halo_expert_device *d = src->impl;
    const uint32_t layer = src->layer;
    const halo_expert_source *inner = d->inner[layer];
    *n_ready = 0;
    if (!inner)
        return halo_fail(err, HALO_E_BAD_VALUE, "device expert cache: blk.%u has no routed experts",
                         layer);
    for (uint32_t i = 0; i < n; i++)
        if (ids[i] < 0 || (uint32_t)ids[i] >= d->n_expert)
            return halo_fail(err, HALO_E_BAD_VALUE, "blk.%u: routing chose expert %d of %u", layer,
                             ids[i], d->n_expert);
    halo_expert_slots_new_round(&d->slots);
    /* Hits first, pinned for this round, so the misses never evict them. */
    uint32_t ready = 0;
    for (uint32_t i = 0; i < n; i++) {
        int32_t slot = halo_expert_slots_find(&d->slots, layer, (uint32_t)ids[i]);
        if (slot < 0) continue;
        int32_t tmp = ids[ready];
        ids[ready] = ids[i];
        ids[i] = tmp;
        halo_expert_slots_use(&d->slots, slot);
        fill_view(d, slot, layer, &views[ready++]);
    }
    d->st.requests += n;
    d->st.hits += ready;
    if (ready < n) {
        /* The host cache reorders ids[ready..n) and reads what it lacks; copy what fits. */
        uint32_t host_ready = 0, base = ready;
        halo_status st = inner->resolve(inner, ids + base, n - base, d->hviews, &host_ready, err);
        if (st) return st;
        for (uint32_t j = 0; j < host_ready; j++) {
            int32_t slot = halo_expert_slots_victim(&d->slots, layer);
            if (slot < 0) break; /* every slot holds an expert of this round */
            uint32_t expert = (uint32_t)ids[base + j];
            halo_expert_slots_assign(&d->slots, slot, layer, expert);
            st = upload(d, inner, slot, layer, expert, &d->hviews[j], err);
            if (st) {
                halo_expert_slots_drop(&d->slots, slot);
                return st;
            }
            fill_view(d, slot, layer, &views[ready++]);
        }
    }
    if (!ready)
        return halo_fail(err, HALO_E_NOMEM, "device expert cache of blk.%u: no slot free", layer);
    *n_ready = ready;
    return HALO_OK;
}

halo_status halo_expert_device_create(halo_backend *be, halo_weights *w, uint32_t pool,
                                      uint64_t bytes, uint32_t n_used, halo_buf **buf,
                                      halo_expert_device **out, halo_error *err) {
    *out = NULL;
    *buf = NULL;
    halo_expert_device *d = calloc(1, sizeof *d);
    if (!d) return halo_fail(err, HALO_E_NOMEM, "out of memory");
    d->be = be;
    d->w = w;
    d->n_layer = w->n_layer;
    uint64_t per[3] = {0};
    for (uint32_t l = 0; l < w->n_layer; l++) {
        const halo_weight *g = &w->layer[l].gate_exps;
        if (g->src && (uint32_t)g->src->ne[2] > d->n_expert) d->n_expert = (uint32_t)g->src->ne[2];
        for (int m = 0; m < 3; m++) {
            uint64_t b = expert_bytes(mat_of(&w->layer[l], m));
            per[m] = b > per[m] ? b : per[m];
        }
    }
    d->region[1] = align256(per[0]);
    d->region[2] = d->region[1] + align256(per[1]);
    d->slot_bytes = d->region[2] + align256(per[2]);
    uint64_t n_slots = d->slot_bytes ? bytes / d->slot_bytes : 0;
    if (n_slots > UINT32_MAX / 2) n_slots = UINT32_MAX / 2;
    halo_status st = HALO_OK;
    if (!d->n_expert || n_slots < n_used)
        st = halo_fail(err, HALO_E_NOMEM,
                       "device expert cache: %.2f GiB holds %llu experts of %.1f MiB; a token "
                       "needs %u at once",
                       (double)bytes / (double)(1ull << 30), (unsigned long long)n_slots,
                       (double)d->slot_bytes / (double)(1 << 20), n_used);
    d->inner = calloc(d->n_layer ? d->n_layer : 1, sizeof *d->inner);
    d->src = calloc(d->n_layer ? d->n_layer : 1, sizeof *d->src);
    d->hviews = calloc(d->n_expert ? d->n_expert : 1, sizeof *d->hviews);
    if (!st && (!d->inner || !d->src || !d->hviews))
        st = halo_fail(err, HALO_E_NOMEM, "out of memory");
    if (!st && !halo_expert_slots_init(&d->slots, d->n_layer, d->n_expert, (uint32_t)n_slots,
                                       HALO_EXPERT_LRU))
        st = halo_fail(err, HALO_E_NOMEM, "out of memory");
    if (!st) {
        st = be->ops->buf_alloc_pool(be, pool, n_slots * d->slot_bytes, &d->buf, err);
        if (st)
            halo_error_prefix(err, "device expert cache (%llu slots of %.1f MiB): ",
                              (unsigned long long)n_slots, (double)d->slot_bytes / (1 << 20));
    }
    if (st) {
        if (d->buf) be->ops->buf_free(be, d->buf);
        d->buf = NULL;
        halo_expert_device_free(d);
        return st;
    }
    d->st.slots = (uint32_t)n_slots;
    for (uint32_t l = 0; l < w->n_layer; l++) {
        d->inner[l] = w->layer[l].experts;
        d->src[l] = (halo_expert_source){resolve, d, l};
        if (w->layer[l].experts) w->layer[l].experts = &d->src[l];
    }
    *buf = d->buf;
    *out = d;
    return HALO_OK;
}

halo_expert_device *halo_expert_device_of(const halo_weights *w) {
    for (uint32_t l = 0; l < w->n_layer; l++)
        if (w->layer[l].experts && w->layer[l].experts->resolve == resolve)
            return w->layer[l].experts->impl;
    return NULL;
}

void halo_expert_device_stats_get(const halo_expert_device *d, halo_expert_device_stats *out) {
    memset(out, 0, sizeof *out);
    if (d) *out = d->st;
}

void halo_expert_device_free(halo_expert_device *d) {
    if (!d) return;
    halo_expert_slots_free(&d->slots);
    free(d->inner);
    free(d->src);
    free(d->hviews);
    free(d);
}
