#include "kv/kv.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "halo/types.h"

/* Lays out every tensor of the state in one buffer; with buf == NULL it only counts bytes. */
typedef struct layout {
    halo_buf *buf;
    uint64_t at;
} layout;

static halo_tensor place(layout *l, int64_t ne0, int64_t ne1) {
    halo_tensor t = {.buf = l->buf, .offset = l->at, .type = HALO_TYPE_F32, .ne = {ne0, ne1, 1, 1}};
    l->at += (uint64_t)ne0 * (uint64_t)ne1 * sizeof(float);
    l->at = (l->at + 63) & ~63ull;
    return t;
}

static void place_series(layout *l, halo_kv_series *s, uint32_t dim, uint32_t ratio, bool overlap,
                         uint32_t n_ctx) {
    s->dim = dim;
    s->ratio = ratio;
    s->width = overlap ? 2 * dim : dim;
    s->rows = place(l, dim, (n_ctx + ratio - 1) / ratio);
    s->pend_kv = place(l, s->width, ratio);
    s->pend_gate = place(l, s->width, ratio);
    if (overlap) {
        s->prev_kv = place(l, dim, ratio);
        s->prev_gate = place(l, dim, ratio);
    }
}

static void place_all(layout *l, halo_kv *kv, const halo_hparams *hp, uint32_t n_ctx) {
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        halo_kv_layer *L = &kv->layer[il];
        L->ratio = hp->compress_ratio[il];
        L->window = place(l, hp->head_dim, hp->sliding_window);
        if (L->ratio) place_series(l, &L->comp, hp->head_dim, L->ratio, L->ratio == 4, n_ctx);
        if (L->ratio == 4) place_series(l, &L->index, hp->indexer_head_dim, 4, true, n_ctx);
    }
}

uint64_t halo_kv_bytes(const halo_hparams *hp, uint32_t n_ctx) {
    halo_kv *scratch = calloc(1, sizeof *scratch);
    if (!scratch) return 0;
    layout l = {0};
    place_all(&l, scratch, hp, n_ctx);
    free(scratch);
    return l.at;
}

halo_status halo_kv_create(halo_backend *be, const halo_hparams *hp, uint32_t n_ctx, halo_kv **out,
                           halo_error *err) {
    *out = NULL;
    if (n_ctx == 0) return halo_fail(err, HALO_E_INVALID_ARG, "context size must be positive");
    halo_kv *kv = calloc(1, sizeof *kv);
    if (!kv) return halo_fail(err, HALO_E_NOMEM, "out of memory");
    uint64_t bytes = halo_kv_bytes(hp, n_ctx);
    halo_status st = be->ops->buf_alloc(be, bytes, &kv->buf, err);
    if (st) {
        free(kv);
        return halo_error_prefix(err, "KV state for %u positions: ", n_ctx);
    }
    kv->be = be;
    kv->n_bytes = bytes;
    kv->n_ctx = n_ctx;
    kv->n_layer = hp->n_layer;
    layout l = {.buf = kv->buf};
    place_all(&l, kv, hp, n_ctx);
    *out = kv;
    return HALO_OK;
}

void halo_kv_free(halo_kv *kv) {
    if (!kv) return;
    kv->be->ops->buf_free(kv->be, kv->buf);
    free(kv);
}

static void reset_series(halo_kv_series *s) {
    s->n_rows = 0;
    s->n_pend = 0;
    s->have_prev = false;
}

void halo_kv_reset(halo_kv *kv) {
    kv->n_past = 0;
    for (uint32_t il = 0; il < kv->n_layer; il++) {
        reset_series(&kv->layer[il].comp);
        reset_series(&kv->layer[il].index);
    }
}

halo_status halo_kv_snapshot_take(halo_kv *kv, halo_kv_snapshot **out, halo_error *err) {
    *out = NULL;
    halo_kv_snapshot *snap = calloc(1, sizeof *snap);
    if (snap) snap->bytes = malloc(kv->n_bytes ? kv->n_bytes : 1);
    if (!snap || !snap->bytes) {
        if (snap) free(snap);
        return halo_fail(err, HALO_E_NOMEM, "out of memory for a %llu-byte KV snapshot",
                         (unsigned long long)kv->n_bytes);
    }
    halo_status st = kv->be->ops->buf_read(kv->be, kv->buf, 0, snap->bytes, kv->n_bytes, err);
    if (st) {
        halo_kv_snapshot_free(snap);
        return st;
    }
    snap->meta = *kv;
    snap->n_bytes = kv->n_bytes;
    *out = snap;
    return HALO_OK;
}

halo_status halo_kv_snapshot_restore(halo_kv *kv, const halo_kv_snapshot *snap, halo_error *err) {
    if (snap->n_bytes != kv->n_bytes || snap->meta.n_ctx != kv->n_ctx ||
        snap->meta.n_layer != kv->n_layer)
        return halo_fail(err, HALO_E_INVALID_ARG, "snapshot is from another model or context size");
    halo_status st = kv->be->ops->buf_write(kv->be, kv->buf, 0, snap->bytes, kv->n_bytes, err);
    if (st) return st;
    halo_buf *buf = kv->buf;
    *kv = snap->meta;
    kv->buf = buf; /* views point at this kv's buffer */
    for (uint32_t il = 0; il < kv->n_layer; il++) {
        halo_kv_layer *L = &kv->layer[il];
        halo_tensor *views[] = {&L->window,         &L->comp.rows,      &L->comp.pend_kv,
                                &L->comp.pend_gate, &L->comp.prev_kv,   &L->comp.prev_gate,
                                &L->index.rows,     &L->index.pend_kv,  &L->index.pend_gate,
                                &L->index.prev_kv,  &L->index.prev_gate};
        for (size_t i = 0; i < sizeof views / sizeof views[0]; i++)
            if (views[i]->buf) views[i]->buf = buf;
    }
    return HALO_OK;
}

void halo_kv_snapshot_free(halo_kv_snapshot *snap) {
    if (!snap) return;
    free(snap->bytes);
    free(snap);
}
