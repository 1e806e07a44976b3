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

static void place_series(layout *l, halo_kv_series *s, uint32_t dim, uint32_t ratio,
                         bool overlap, uint32_t n_ctx) {
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

halo_status halo_kv_create(halo_backend *be, const halo_hparams *hp, uint32_t n_ctx,
                           halo_kv **out, halo_error *err) {
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
