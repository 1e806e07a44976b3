#include "kv/image.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"

static halo_kv_image *image_new(uint32_t n_layer, uint32_t n_tokens, uint32_t n_ckpt) {
    halo_kv_image *img = calloc(1, sizeof *img);
    if (!img) return NULL;
    img->n_layer = n_layer;
    img->n_tokens = n_tokens;
    img->tokens = malloc((size_t)(n_tokens ? n_tokens : 1) * sizeof *img->tokens);
    img->ckpt = calloc(n_ckpt ? n_ckpt : 1, sizeof *img->ckpt);
    if (!img->tokens || !img->ckpt) {
        halo_kv_image_free(img);
        return NULL;
    }
    return img;
}

halo_status halo_kv_image_capture(halo_kv *kv, const int32_t *tokens, const halo_kv_ckset *set,
                                  halo_kv_image **out, halo_error *err) {
    *out = NULL;
    uint32_t n_tokens = (uint32_t)kv->n_past, n_set = 0;
    for (uint32_t i = 0; set && i < set->n; i++)
        n_set += set->c[i]->pos < kv->n_past;
    halo_kv_image *img = image_new(kv->n_layer, n_tokens, n_set + 1);
    if (!img) return halo_fail(err, HALO_E_NOMEM, "out of memory for a session image");
    memcpy(img->tokens, tokens, (size_t)n_tokens * sizeof *tokens);
    for (uint32_t i = 0; i < n_set; i++) {
        img->ckpt[i] = halo_kv_ckpt_dup(set->c[i]);
        img->n_ckpt++;
        if (!img->ckpt[i]) {
            halo_kv_image_free(img);
            return halo_fail(err, HALO_E_NOMEM, "out of memory for a session image");
        }
    }
    halo_status st = halo_kv_ckpt_take(kv, &img->ckpt[n_set], err);
    if (!st) {
        img->n_ckpt++;
        const halo_kv_count *count = img->ckpt[n_set]->count;
        img->rows_bytes = halo_kv_rows_bytes(kv, count);
        img->rows = malloc(img->rows_bytes ? img->rows_bytes : 1);
        st = img->rows ? halo_kv_rows_read(kv, count, img->rows, err)
                       : halo_fail(err, HALO_E_NOMEM, "out of memory for %llu bytes of rows",
                                   (unsigned long long)img->rows_bytes);
    }
    if (st) {
        halo_kv_image_free(img);
        return st;
    }
    *out = img;
    return HALO_OK;
}

halo_status halo_kv_image_apply(halo_kv *kv, const halo_kv_image *img, uint32_t at,
                                halo_kv_ckset *set, halo_error *err) {
    if (at >= img->n_ckpt || img->n_layer != kv->n_layer)
        return halo_fail(err, HALO_E_INVALID_ARG, "no such checkpoint in the image");
    const halo_kv_ckpt *c = img->ckpt[at];
    if (c->pos > kv->n_ctx)
        return halo_fail(err, HALO_E_INVALID_ARG,
                         "the saved state holds %lld positions, the "
                         "session's context %u",
                         (long long)c->pos, kv->n_ctx);
    halo_status st =
        halo_kv_rows_write(kv, img->ckpt[img->n_ckpt - 1]->count, c->count, img->rows, err);
    if (!st) st = halo_kv_ckpt_restore(kv, c, err);
    if (st) return st;
    if (!set) return HALO_OK;
    halo_kv_ckset_clear(set);
    /* Only checkpoints on the session's grid: others (ends of earlier sequences) would pile
     * up in every state captured from this session later. */
    for (uint32_t i = 0; i <= at; i++) {
        int64_t pos = img->ckpt[i]->pos;
        if (pos == 0 || !set->interval || pos % set->interval != 0) continue;
        halo_kv_ckpt *d = halo_kv_ckpt_dup(img->ckpt[i]);
        /* A missing checkpoint only makes later rewinds longer. */
        if (!d || halo_kv_ckset_add(set, d, err)) {
            if (!d) set->n_failed++;
            break;
        }
    }
    return HALO_OK;
}

uint64_t halo_kv_image_size(const halo_kv_image *img) {
    uint64_t n = sizeof *img + (uint64_t)img->n_tokens * sizeof *img->tokens + img->rows_bytes;
    for (uint32_t i = 0; i < img->n_ckpt; i++)
        n += halo_kv_ckpt_size(img->ckpt[i]);
    return n;
}

void halo_kv_image_free(halo_kv_image *img) {
    if (!img) return;
    for (uint32_t i = 0; i < img->n_ckpt; i++)
        halo_kv_ckpt_free(img->ckpt[i]);
    free(img->ckpt);
    free(img->tokens);
    free(img->rows);
    free(img);
}

/* ---- payload: u32 n_layer, u32 n_ckpt, u64 rows_bytes; per checkpoint i64 pos, u64 n_bytes,
 * n_layer·2 × (i64 n_rows, i64 n_pend, i64 have_prev), n_bytes of light state; the rows.
 * Little-endian (halo runs on little-endian machines only; the header records it). */

static uint64_t ckpt_wire_bytes(const halo_kv_ckpt *c) {
    return 16 + (uint64_t)c->n_layer * 2 * sizeof(halo_kv_count) + c->n_bytes;
}

uint64_t halo_kv_image_payload_bytes(const halo_kv_image *img) {
    uint64_t n = 16 + img->rows_bytes;
    for (uint32_t i = 0; i < img->n_ckpt; i++)
        n += ckpt_wire_bytes(img->ckpt[i]);
    return n;
}

static unsigned char *put(unsigned char *at, const void *src, uint64_t n) {
    memcpy(at, src, n);
    return at + n;
}

void halo_kv_image_encode(const halo_kv_image *img, unsigned char *dst) {
    dst = put(dst, &img->n_layer, 4);
    dst = put(dst, &img->n_ckpt, 4);
    dst = put(dst, &img->rows_bytes, 8);
    for (uint32_t i = 0; i < img->n_ckpt; i++) {
        const halo_kv_ckpt *c = img->ckpt[i];
        dst = put(dst, &c->pos, 8);
        dst = put(dst, &c->n_bytes, 8);
        dst = put(dst, c->count, (uint64_t)c->n_layer * 2 * sizeof *c->count);
        dst = put(dst, c->bytes, c->n_bytes);
    }
    put(dst, img->rows, img->rows_bytes);
}

typedef struct reader {
    const unsigned char *at;
    uint64_t left;
} reader;

static bool take(reader *r, void *dst, uint64_t n) {
    if (n > r->left) return false;
    memcpy(dst, r->at, n);
    r->at += n;
    r->left -= n;
    return true;
}

halo_status halo_kv_image_decode(const halo_kv *kv, const unsigned char *src, uint64_t n,
                                 const int32_t *tokens, uint32_t n_tokens, halo_kv_image **out,
                                 halo_error *err) {
    *out = NULL;
    reader r = {src, n};
    uint32_t n_layer = 0, n_ckpt = 0;
    uint64_t rows_bytes = 0;
    if (!take(&r, &n_layer, 4) || !take(&r, &n_ckpt, 4) || !take(&r, &rows_bytes, 8))
        return halo_fail(err, HALO_E_TRUNCATED, "state ends inside its header");
    if (n_layer != kv->n_layer)
        return halo_fail(err, HALO_E_BAD_VALUE, "state of %u layers, model of %u", n_layer,
                         kv->n_layer);
    if (n_ckpt == 0 || n_ckpt > n_tokens + 1u)
        return halo_fail(err, HALO_E_BAD_VALUE, "%u checkpoints for %u tokens", n_ckpt, n_tokens);
    halo_kv_image *img = image_new(n_layer, n_tokens, n_ckpt);
    if (!img) return halo_fail(err, HALO_E_NOMEM, "out of memory for a session image");
    memcpy(img->tokens, tokens, (size_t)n_tokens * sizeof *tokens);
    halo_status st = HALO_OK;
    halo_kv_count *count = malloc((size_t)n_layer * 2 * sizeof *count);
    if (!count) st = halo_fail(err, HALO_E_NOMEM, "out of memory");
    int64_t last = -1;
    for (uint32_t i = 0; !st && i < n_ckpt; i++) {
        int64_t pos = 0;
        uint64_t n_bytes = 0;
        if (!take(&r, &pos, 8) || !take(&r, &n_bytes, 8) ||
            !take(&r, count, (uint64_t)n_layer * 2 * sizeof *count)) {
            st = halo_fail(err, HALO_E_TRUNCATED, "state ends inside checkpoint %u", i);
            break;
        }
        bool final = i == n_ckpt - 1;
        if (pos <= last || pos > n_tokens || (final && pos != n_tokens)) {
            st = halo_fail(err, HALO_E_BAD_VALUE,
                           "checkpoint %u at position %lld is out of "
                           "order for %u tokens",
                           i, (long long)pos, n_tokens);
            break;
        }
        last = pos;
        halo_kv_ckpt *c = NULL;
        st = halo_kv_ckpt_alloc(kv, pos, count, &c, err);
        if (st) break;
        img->ckpt[img->n_ckpt++] = c;
        if (c->n_bytes != n_bytes)
            st = halo_fail(err, HALO_E_BAD_VALUE,
                           "checkpoint %u holds %llu bytes, its counts "
                           "%llu",
                           i, (unsigned long long)n_bytes, (unsigned long long)c->n_bytes);
        else if (!take(&r, c->bytes, n_bytes))
            st = halo_fail(err, HALO_E_TRUNCATED, "state ends inside checkpoint %u", i);
    }
    if (!st) {
        uint64_t want = halo_kv_rows_bytes(kv, img->ckpt[n_ckpt - 1]->count);
        img->rows_bytes = rows_bytes;
        img->rows = rows_bytes == want ? malloc(want ? want : 1) : NULL;
        if (rows_bytes != want)
            st = halo_fail(err, HALO_E_BAD_VALUE,
                           "state holds %llu bytes of rows, its counts "
                           "%llu",
                           (unsigned long long)rows_bytes, (unsigned long long)want);
        else if (!img->rows)
            st = halo_fail(err, HALO_E_NOMEM, "out of memory for %llu bytes of rows",
                           (unsigned long long)want);
        else if (!take(&r, img->rows, want) || r.left)
            st = halo_fail(err, r.left ? HALO_E_BAD_VALUE : HALO_E_TRUNCATED,
                           "state rows do not end where the state does");
    }
    free(count);
    if (st) {
        halo_kv_image_free(img);
        return st;
    }
    *out = img;
    return HALO_OK;
}
