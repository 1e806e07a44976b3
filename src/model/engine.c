/* Engine and session: the public API over gguf + hparams + weights + backend + kv + forward. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "halo/halo.h"
#include "model/forward.h"

struct halo_engine {
    halo_gguf *gguf;
    halo_backend *be;
    halo_hparams hp;
    halo_weights w;
    halo_buf *weights_buf;
};

struct halo_session {
    halo_engine *e;
    halo_kv *kv;
    float *logits;
    uint32_t n_rows, cap_rows;
};

typedef struct load_ctx {
    halo_engine *e;
    uint64_t at;
    void *staging;
    uint64_t staging_size;
} load_ctx;

static halo_status size_one(halo_weight *w, void *user, halo_error *err) {
    (void)err;
    load_ctx *c = user;
    c->at = (c->at + w->src->n_bytes + 63) & ~63ull;
    if (w->src->n_bytes > c->staging_size) c->staging_size = w->src->n_bytes;
    return HALO_OK;
}

/* Reads one tensor from the file and places it in the weights buffer. (The memory planner's
 * loader will read straight into place; this copies through one staging buffer.) */
static halo_status load_one(halo_weight *w, void *user, halo_error *err) {
    load_ctx *c = user;
    halo_engine *e = c->e;
    halo_status st = halo_gguf_read_tensor(e->gguf, w->src, c->staging, c->staging_size, err);
    if (!st)
        st = e->be->ops->buf_write(e->be, e->weights_buf, c->at, c->staging, w->src->n_bytes, err);
    w->t.buf = e->weights_buf;
    w->t.offset = c->at;
    c->at = (c->at + w->src->n_bytes + 63) & ~63ull;
    return st;
}

halo_status halo_engine_open(const halo_engine_params *params, halo_engine **out,
                             halo_error *err) {
    *out = NULL;
    if (params->backend && strcmp(params->backend, "cpu") != 0)
        return halo_fail(err, HALO_E_UNSUPPORTED, "backend '%s' is not built; available: cpu",
                         params->backend);
    halo_engine *e = calloc(1, sizeof *e);
    if (!e) return halo_fail(err, HALO_E_NOMEM, "out of memory");
    halo_status st = halo_gguf_open(params->model_path, &e->gguf, err);
    if (!st) {
        st = halo_hparams_load(e->gguf, &e->hp, err);
        if (!st) st = halo_weights_bind(e->gguf, &e->hp, &e->w, err);
        if (st) halo_error_prefix(err, "%s: ", params->model_path);
    }
    if (!st) st = halo_backend_cpu_create(params->threads, &e->be, err);
    load_ctx c = {.e = e};
    if (!st) st = halo_weights_for_each(&e->w, size_one, &c, err);
    if (!st) st = e->be->ops->buf_alloc(e->be, c.at, &e->weights_buf, err);
    if (!st) {
        c.staging = malloc(c.staging_size ? c.staging_size : 1);
        c.at = 0;
        st = c.staging ? halo_weights_for_each(&e->w, load_one, &c, err)
                       : halo_fail(err, HALO_E_NOMEM, "out of memory");
        free(c.staging);
    }
    if (st) {
        halo_engine_close(e);
        return st;
    }
    *out = e;
    return HALO_OK;
}

void halo_engine_close(halo_engine *e) {
    if (!e) return;
    if (e->be) {
        e->be->ops->buf_free(e->be, e->weights_buf);
        e->be->ops->destroy(e->be);
    }
    halo_gguf_close(e->gguf);
    free(e);
}

uint32_t halo_engine_n_vocab(const halo_engine *e) { return e->hp.n_vocab; }
uint32_t halo_engine_n_ctx_train(const halo_engine *e) { return e->hp.n_ctx_train; }

uint64_t halo_engine_session_bytes(const halo_engine *e, uint32_t n_ctx) {
    return halo_kv_bytes(&e->hp, n_ctx);
}

halo_status halo_session_create(halo_engine *e, uint32_t n_ctx, halo_session **out,
                                halo_error *err) {
    *out = NULL;
    halo_session *s = calloc(1, sizeof *s);
    if (!s) return halo_fail(err, HALO_E_NOMEM, "out of memory");
    s->e = e;
    halo_status st = halo_kv_create(e->be, &e->hp, n_ctx, &s->kv, err);
    if (st) {
        free(s);
        return st;
    }
    *out = s;
    return HALO_OK;
}

void halo_session_free(halo_session *s) {
    if (!s) return;
    halo_kv_free(s->kv);
    free(s->logits);
    free(s);
}

halo_status halo_session_eval(halo_session *s, const int32_t *tokens, uint32_t n,
                              bool all_logits, halo_error *err) {
    uint32_t rows = all_logits ? n : 1;
    if (rows > s->cap_rows) {
        float *l = realloc(s->logits, (size_t)rows * s->e->hp.n_vocab * sizeof *l);
        if (!l) return halo_fail(err, HALO_E_NOMEM, "out of memory for %u logit rows", rows);
        s->logits = l;
        s->cap_rows = rows;
    }
    halo_status st = halo_forward(s->e->be, &s->e->hp, &s->e->w, s->kv, tokens, n, all_logits,
                                  s->logits, err);
    s->n_rows = st ? 0 : rows;
    return st;
}

const float *halo_session_logits(const halo_session *s, uint32_t *n_rows) {
    if (n_rows) *n_rows = s->n_rows;
    return s->logits;
}

uint32_t halo_session_n_past(const halo_session *s) { return (uint32_t)s->kv->n_past; }
