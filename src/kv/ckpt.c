/* Checkpoints: the light part of a state (window ring, open windows' source rows, overlap
 * state) and the compressed rows, moved between the state buffer and host memory through the
 * backend's buf_read/buf_write, so this works for any backend's buffers.
 *
 * Light bytes, layer by layer: the window ring's first min(pos, W) rows; then for the
 * compressed series and the indexer series (when the layer has them) n_pend rows of pend_kv,
 * n_pend rows of pend_gate and, for overlapping series once a window closed, prev_kv and
 * prev_gate. Rows: every series' first n_rows rows, in the same order. */
#include "kv/ckpt.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"

typedef halo_status (*region_fn)(void *ctx, const halo_tensor *t, uint64_t bytes, halo_error *err);

static halo_kv_series *series_of(halo_kv *kv, uint32_t il, int k) {
    halo_kv_layer *L = &kv->layer[il];
    if (k == 0) return L->ratio ? &L->comp : NULL;
    return L->ratio == 4 ? &L->index : NULL;
}

static bool overlaps(const halo_kv_series *s) {
    return s->width == 2 * s->dim;
}

static uint64_t f32s(int64_t n) {
    return (uint64_t)n * sizeof(float);
}

/* Calls fn for each light region of a state with these counts, in the documented order. */
static halo_status visit_light(halo_kv *kv, int64_t pos, const halo_kv_count *count, region_fn fn,
                               void *ctx, halo_error *err) {
    for (uint32_t il = 0; il < kv->n_layer; il++) {
        halo_kv_layer *L = &kv->layer[il];
        int64_t W = L->window.ne[1], n_win = pos < W ? pos : W;
        halo_status st = fn(ctx, &L->window, f32s(n_win * L->window.ne[0]), err);
        for (int k = 0; k < 2 && !st; k++) {
            halo_kv_series *s = series_of(kv, il, k);
            const halo_kv_count *c = &count[il * 2 + k];
            if (!s) continue;
            st = fn(ctx, &s->pend_kv, f32s(c->n_pend * s->width), err);
            if (!st) st = fn(ctx, &s->pend_gate, f32s(c->n_pend * s->width), err);
            if (!st && overlaps(s) && c->have_prev) {
                st = fn(ctx, &s->prev_kv, f32s((int64_t)s->dim * s->ratio), err);
                if (!st) st = fn(ctx, &s->prev_gate, f32s((int64_t)s->dim * s->ratio), err);
            }
        }
        if (st) return st;
    }
    return HALO_OK;
}

typedef struct mover {
    halo_kv *kv;
    unsigned char *at;
    bool write;
} mover;

static halo_status move(void *ctx, const halo_tensor *t, uint64_t bytes, halo_error *err) {
    mover *m = ctx;
    if (!bytes) return HALO_OK;
    halo_backend *be = m->kv->be;
    halo_status st = m->write ? be->ops->buf_write(be, t->buf, t->offset, m->at, bytes, err)
                              : be->ops->buf_read(be, t->buf, t->offset, m->at, bytes, err);
    m->at += bytes;
    return st;
}

static halo_status count_bytes(void *ctx, const halo_tensor *t, uint64_t bytes, halo_error *err) {
    (void)t;
    (void)err;
    *(uint64_t *)ctx += bytes;
    return HALO_OK;
}

static uint64_t light_bytes(halo_kv *kv, int64_t pos, const halo_kv_count *count) {
    uint64_t n = 0;
    visit_light(kv, pos, count, count_bytes, &n, NULL);
    return n;
}

/* Counts a state of kv's shapes can have at position pos: each series holds pos/ratio rows
 * and pos%ratio pending ones, and has overlap state once a window closed. */
static halo_status check_counts(const halo_kv *kv, int64_t pos, const halo_kv_count *count,
                                halo_error *err) {
    if (pos < 0 || pos > kv->n_ctx)
        return halo_fail(err, HALO_E_BAD_VALUE,
                         "state at position %lld does not fit a context "
                         "of %u",
                         (long long)pos, kv->n_ctx);
    for (uint32_t il = 0; il < kv->n_layer; il++)
        for (int k = 0; k < 2; k++) {
            const halo_kv_series *s = series_of((halo_kv *)kv, il, k);
            const halo_kv_count *c = &count[il * 2 + k];
            bool ok = s ? c->n_rows == pos / s->ratio && c->n_pend == pos % s->ratio &&
                              c->n_rows <= s->rows.ne[1] && c->have_prev == (c->n_rows > 0)
                        : c->n_rows == 0 && c->n_pend == 0 && c->have_prev == 0;
            if (!ok)
                return halo_fail(err, HALO_E_BAD_VALUE,
                                 "layer %u: %s series counts (%lld rows, "
                                 "%lld pending) do not match position %lld",
                                 il, k ? "indexer" : "compressed", (long long)c->n_rows,
                                 (long long)c->n_pend, (long long)pos);
        }
    return HALO_OK;
}

halo_status halo_kv_ckpt_alloc(const halo_kv *kv, int64_t pos, const halo_kv_count *count,
                               halo_kv_ckpt **out, halo_error *err) {
    *out = NULL;
    halo_status st = check_counts(kv, pos, count, err);
    if (st) return st;
    uint64_t n = light_bytes((halo_kv *)kv, pos, count);
    halo_kv_ckpt *c = calloc(1, sizeof *c);
    if (c) c->count = malloc((size_t)kv->n_layer * 2 * sizeof *c->count);
    if (c && c->count) c->bytes = malloc(n ? n : 1);
    if (!c || !c->count || !c->bytes) {
        halo_kv_ckpt_free(c);
        return halo_fail(err, HALO_E_NOMEM, "out of memory for a %llu-byte checkpoint",
                         (unsigned long long)n);
    }
    memcpy(c->count, count, (size_t)kv->n_layer * 2 * sizeof *c->count);
    c->pos = pos;
    c->n_layer = kv->n_layer;
    c->n_bytes = n;
    *out = c;
    return HALO_OK;
}

halo_status halo_kv_ckpt_take(halo_kv *kv, halo_kv_ckpt **out, halo_error *err) {
    *out = NULL;
    halo_kv_count *count = calloc((size_t)kv->n_layer * 2, sizeof *count);
    if (!count) return halo_fail(err, HALO_E_NOMEM, "out of memory");
    for (uint32_t il = 0; il < kv->n_layer; il++)
        for (int k = 0; k < 2; k++) {
            halo_kv_series *s = series_of(kv, il, k);
            if (s) count[il * 2 + k] = (halo_kv_count){s->n_rows, s->n_pend, s->have_prev ? 1 : 0};
        }
    halo_kv_ckpt *c = NULL;
    halo_status st = halo_kv_ckpt_alloc(kv, kv->n_past, count, &c, err);
    free(count);
    if (st) return st;
    mover m = {.kv = kv, .at = c->bytes};
    st = visit_light(kv, c->pos, c->count, move, &m, err);
    if (st) {
        halo_kv_ckpt_free(c);
        return st;
    }
    *out = c;
    return HALO_OK;
}

halo_status halo_kv_ckpt_restore(halo_kv *kv, const halo_kv_ckpt *c, halo_error *err) {
    if (c->n_layer != kv->n_layer)
        return halo_fail(err, HALO_E_INVALID_ARG, "checkpoint of %u layers, state of %u",
                         c->n_layer, kv->n_layer);
    halo_status st = check_counts(kv, c->pos, c->count, err);
    if (st) return st;
    if (light_bytes(kv, c->pos, c->count) != c->n_bytes)
        return halo_fail(err, HALO_E_BAD_VALUE, "checkpoint holds %llu bytes, its counts %llu",
                         (unsigned long long)c->n_bytes,
                         (unsigned long long)light_bytes(kv, c->pos, c->count));
    mover m = {.kv = kv, .at = c->bytes, .write = true};
    st = visit_light(kv, c->pos, c->count, move, &m, err);
    if (st) return st;
    kv->n_past = c->pos;
    for (uint32_t il = 0; il < kv->n_layer; il++)
        for (int k = 0; k < 2; k++) {
            halo_kv_series *s = series_of(kv, il, k);
            if (!s) continue;
            s->n_rows = c->count[il * 2 + k].n_rows;
            s->n_pend = c->count[il * 2 + k].n_pend;
            s->have_prev = c->count[il * 2 + k].have_prev != 0;
        }
    return HALO_OK;
}

void halo_kv_ckpt_free(halo_kv_ckpt *c) {
    if (!c) return;
    free(c->count);
    free(c->bytes);
    free(c);
}

halo_kv_ckpt *halo_kv_ckpt_dup(const halo_kv_ckpt *c) {
    halo_kv_ckpt *d = calloc(1, sizeof *d);
    if (!d) return NULL;
    *d = *c;
    d->count = malloc((size_t)c->n_layer * 2 * sizeof *d->count);
    d->bytes = malloc(c->n_bytes ? c->n_bytes : 1);
    if (!d->count || !d->bytes) {
        free(d->count);
        free(d->bytes);
        free(d);
        return NULL;
    }
    memcpy(d->count, c->count, (size_t)c->n_layer * 2 * sizeof *d->count);
    memcpy(d->bytes, c->bytes, c->n_bytes);
    return d;
}

uint64_t halo_kv_ckpt_size(const halo_kv_ckpt *c) {
    return sizeof *c + (uint64_t)c->n_layer * 2 * sizeof *c->count + c->n_bytes;
}

/* ---- compressed rows ------------------------------------------------------------------- */

uint64_t halo_kv_rows_bytes(const halo_kv *kv, const halo_kv_count *count) {
    uint64_t n = 0;
    for (uint32_t il = 0; il < kv->n_layer; il++)
        for (int k = 0; k < 2; k++) {
            const halo_kv_series *s = series_of((halo_kv *)kv, il, k);
            if (s) n += f32s(count[il * 2 + k].n_rows * s->dim);
        }
    return n;
}

static halo_status rows_move(halo_kv *kv, const halo_kv_count *layout, const halo_kv_count *upto,
                             unsigned char *at, bool write, halo_error *err) {
    halo_backend *be = kv->be;
    for (uint32_t il = 0; il < kv->n_layer; il++)
        for (int k = 0; k < 2; k++) {
            halo_kv_series *s = series_of(kv, il, k);
            if (!s) continue;
            int64_t n = upto[il * 2 + k].n_rows, room = layout[il * 2 + k].n_rows;
            if (n > room || room > s->rows.ne[1])
                return halo_fail(err, HALO_E_BAD_VALUE,
                                 "layer %u: %lld compressed rows asked, "
                                 "%lld saved, room for %lld",
                                 il, (long long)n, (long long)room, (long long)s->rows.ne[1]);
            uint64_t bytes = f32s(n * s->dim);
            halo_status st =
                !bytes  ? HALO_OK
                : write ? be->ops->buf_write(be, s->rows.buf, s->rows.offset, at, bytes, err)
                        : be->ops->buf_read(be, s->rows.buf, s->rows.offset, at, bytes, err);
            if (st) return st;
            at += f32s(room * s->dim);
        }
    return HALO_OK;
}

halo_status halo_kv_rows_read(halo_kv *kv, const halo_kv_count *count, unsigned char *dst,
                              halo_error *err) {
    return rows_move(kv, count, count, dst, false, err);
}

halo_status halo_kv_rows_write(halo_kv *kv, const halo_kv_count *layout, const halo_kv_count *upto,
                               const unsigned char *src, halo_error *err) {
    return rows_move(kv, layout, upto, (unsigned char *)src, true, err);
}
