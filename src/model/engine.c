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
    int32_t *tokens; /* every evaluated token, for rewinding [n_ctx] */
    halo_snapshot *anchor; /* latest snapshot taken on this session, a rewind starting point */
};

struct halo_snapshot {
    halo_kv_snapshot *kv;
    int32_t *tokens;
    uint32_t n_tokens;
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
    if (!st) st = halo_backend_cpu_create(params->threads, params->precise, &e->be, err);
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
    s->tokens = malloc((size_t)n_ctx * sizeof *s->tokens);
    if (!s->tokens) {
        free(s);
        return halo_fail(err, HALO_E_NOMEM, "out of memory");
    }
    halo_status st = halo_kv_create(e->be, &e->hp, n_ctx, &s->kv, err);
    if (st) {
        free(s->tokens);
        free(s);
        return st;
    }
    *out = s;
    return HALO_OK;
}

void halo_session_free(halo_session *s) {
    if (!s) return;
    halo_snapshot_free(s->anchor);
    free(s->tokens);
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
    int64_t at = s->kv->n_past;
    halo_status st = halo_forward(s->e->be, &s->e->hp, &s->e->w, s->kv, tokens, n, all_logits,
                                  s->logits, err);
    if (!st) memcpy(s->tokens + at, tokens, (size_t)n * sizeof *tokens);
    s->n_rows = st ? 0 : rows;
    return st;
}

static halo_status snapshot_take(halo_session *s, halo_snapshot **out, halo_error *err) {
    *out = NULL;
    halo_snapshot *snap = calloc(1, sizeof *snap);
    uint32_t n = (uint32_t)s->kv->n_past;
    if (snap) snap->tokens = malloc((size_t)(n ? n : 1) * sizeof *snap->tokens);
    if (!snap || !snap->tokens) {
        halo_snapshot_free(snap);
        return halo_fail(err, HALO_E_NOMEM, "out of memory for a snapshot");
    }
    halo_status st = halo_kv_snapshot_take(s->kv, &snap->kv, err);
    if (st) {
        halo_snapshot_free(snap);
        return st;
    }
    memcpy(snap->tokens, s->tokens, (size_t)n * sizeof *snap->tokens);
    snap->n_tokens = n;
    *out = snap;
    return HALO_OK;
}

halo_status halo_session_snapshot(halo_session *s, halo_snapshot **out, halo_error *err) {
    halo_status st = snapshot_take(s, out, err);
    if (st) return st;
    /* Keep a private copy as this session's rewind anchor. */
    halo_snapshot *anchor = NULL;
    if (snapshot_take(s, &anchor, err) == HALO_OK) {
        halo_snapshot_free(s->anchor);
        s->anchor = anchor;
    }
    return HALO_OK;
}

halo_status halo_session_restore(halo_session *s, const halo_snapshot *snap, halo_error *err) {
    halo_status st = halo_kv_snapshot_restore(s->kv, snap->kv, err);
    if (st) return st;
    memcpy(s->tokens, snap->tokens, (size_t)snap->n_tokens * sizeof *s->tokens);
    s->n_rows = 0;
    return HALO_OK;
}

void halo_snapshot_free(halo_snapshot *snap) {
    if (!snap) return;
    halo_kv_snapshot_free(snap->kv);
    free(snap->tokens);
    free(snap);
}

enum { REPLAY_CHUNK = 256 };

halo_status halo_session_rewind(halo_session *s, uint32_t n_past, halo_error *err) {
    uint32_t now = (uint32_t)s->kv->n_past;
    if (n_past > now)
        return halo_fail(err, HALO_E_INVALID_ARG, "cannot rewind forward: position %u > %u",
                         n_past, now);
    if (n_past == now) return HALO_OK;
    /* The replayed tokens are this session's own history, kept in s->tokens; copy them out
     * first since replaying writes the same array. */
    int32_t *replay = malloc((size_t)(n_past ? n_past : 1) * sizeof *replay);
    if (!replay) return halo_fail(err, HALO_E_NOMEM, "out of memory");
    memcpy(replay, s->tokens, (size_t)n_past * sizeof *replay);
    uint32_t from = 0;
    halo_status st = HALO_OK;
    s->n_rows = 0; /* logits afterwards: the last replayed token's, if any was replayed */
    if (s->anchor && s->anchor->n_tokens <= n_past &&
        memcmp(s->anchor->tokens, replay, (size_t)s->anchor->n_tokens * sizeof *replay) == 0) {
        st = halo_kv_snapshot_restore(s->kv, s->anchor->kv, err);
        from = s->anchor->n_tokens;
    } else {
        halo_kv_reset(s->kv);
    }
    for (uint32_t at = from; !st && at < n_past; at += REPLAY_CHUNK) {
        uint32_t m = n_past - at < REPLAY_CHUNK ? n_past - at : REPLAY_CHUNK;
        st = halo_session_eval(s, replay + at, m, false, err);
    }
    free(replay);
    return st;
}

const float *halo_session_logits(const halo_session *s, uint32_t *n_rows) {
    if (n_rows) *n_rows = s->n_rows;
    return s->logits;
}

uint32_t halo_session_n_past(const halo_session *s) { return (uint32_t)s->kv->n_past; }
