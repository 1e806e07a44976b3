/* Engine and session: the public API over gguf + hparams + weights + backend + kv + forward. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "halo/halo.h"
#include "halo/plan.h"
#include "model/forward.h"

struct halo_engine {
    halo_gguf *gguf;
    halo_backend *be;
    halo_hparams hp;
    halo_weights w;
    halo_mem_arena *arena;  /* every tensor, read once into its final place (src/mem) */
    halo_buf **tensor_bufs; /* backend buffers wrapping the arena, one per bound tensor */
    uint32_t n_bufs;
};

struct halo_session {
    halo_engine *e;
    halo_kv *kv;
    float *logits;
    uint32_t n_rows, cap_rows;
    int32_t *tokens; /* every evaluated token, for rewinding [n_ctx] */
    halo_snapshot *anchor; /* latest snapshot taken on this session, a rewind starting point */
    bool broken;           /* the state may not match tokens[0..n_past): rebuild before use */
    bool replaying;        /* inside replay_to: a failure is reported, not repaired again */
};

static halo_status replay_to(halo_session *s, uint32_t n_past, halo_error *err);

struct halo_snapshot {
    halo_kv_snapshot *kv;
    int32_t *tokens;
    uint32_t n_tokens;
};

/* Admission: plan the model and n_ctx positions of state on this machine before allocating
 * anything, so a model that cannot fit is refused with the planner's reason instead of being
 * killed by the OOM killer halfway through loading. */
static halo_status admit(const halo_engine_params *params, const halo_gguf *g,
                         const halo_hparams *hp, halo_error *err) {
    /* HALO_PROFILE plans against a machine profile instead of this machine (as `halo plan
     * --profile` does): for trying a model's fit elsewhere, and for tests. */
    halo_machine m;
    const char *profile = getenv("HALO_PROFILE");
    halo_status st = profile && *profile ? halo_machine_load_profile(profile, &m, err)
                                         : halo_machine_probe("/", params->model_path, &m, err);
    if (st) return halo_error_prefix(err, "cannot check memory before loading: ");
    uint32_t n_ctx = params->n_ctx ? params->n_ctx : 4096;
    if (!params->n_ctx && hp->n_ctx_train && n_ctx > hp->n_ctx_train) n_ctx = hp->n_ctx_train;
    halo_plan_options o = {.n_ctx = n_ctx,
                           .backend = HALO_BACKEND_CPU,
                           .weights = HALO_WEIGHTS_AUTO};
    halo_plan *plan = NULL;
    st = halo_plan_build(g, &m, &o, &plan, err);
    if (st) return st;
    bool streams = false;
    for (uint64_t i = 0; i < plan->n_tensors; i++) streams |= plan->tensor_pool[i] == HALO_POOL_DISK;
    if (plan->refused)
        st = halo_fail(err, HALO_E_NOMEM, "%s: refused before loading: %s%s%s",
                       params->model_path, plan->reason, plan->n_fixes ? "; fix: " : "",
                       plan->n_fixes ? plan->fixes[0] : "");
    else if (streams)
        st = halo_fail(err, HALO_E_UNSUPPORTED,
                       "%s: %.2f GiB of weights do not fit in memory here (machine: %s) and "
                       "would have to stream from disk, which halo does not do yet (`halo plan "
                       "-m %s` shows the plan)", params->model_path,
                       (double)plan->weight_bytes / (double)(1ull << 30), m.name,
                       params->model_path);
    halo_plan_free(plan);
    return st;
}

/* Points one bound weight at its bytes in the arena through a wrapped backend buffer. */
static halo_status place_one(halo_weight *w, void *user, halo_error *err) {
    halo_engine *e = user;
    uint64_t index = (uint64_t)(w->src - halo_gguf_tensor_at(e->gguf, 0));
    void *data = (void *)halo_mem_arena_tensor(e->arena, index);
    if (!data) return halo_fail(err, HALO_E_NOT_FOUND, "tensor '%s' was not loaded", w->src->name);
    halo_buf *buf = NULL;
    halo_status st = e->be->ops->buf_wrap_host(e->be, data, w->src->n_bytes, &buf, err);
    if (st) return st;
    e->tensor_bufs[e->n_bufs++] = buf;
    w->t.buf = buf;
    w->t.offset = 0;
    return HALO_OK;
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
    if (!st) st = admit(params, e->gguf, &e->hp, err);
    if (!st) st = halo_backend_cpu_create(params->threads, params->precise, &e->be, err);
    /* The CPU backend computes on host memory, so the loader's host arena is the weights'
     * final place: each tensor is read once, with no staging copy. */
    if (!st) st = halo_mem_arena_load(e->gguf, NULL, NULL, &e->arena, NULL, err);
    if (!st) {
        e->tensor_bufs = calloc(halo_gguf_tensor_count(e->gguf) + 1, sizeof *e->tensor_bufs);
        st = e->tensor_bufs ? halo_weights_for_each(&e->w, place_one, e, err)
                            : halo_fail(err, HALO_E_NOMEM, "out of memory");
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
    for (uint32_t i = 0; i < e->n_bufs; i++) e->be->ops->buf_free(e->be, e->tensor_bufs[i]);
    free(e->tensor_bufs);
    if (e->be) e->be->ops->destroy(e->be);
    halo_mem_arena_free(e->arena);
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
    if (s->broken && !s->replaying) {
        halo_status st = replay_to(s, (uint32_t)s->kv->n_past, err);
        if (st) return halo_error_prefix(err, "session state could not be rebuilt: ");
    }
    int64_t at = s->kv->n_past;
    halo_status st = halo_forward(s->e->be, &s->e->hp, &s->e->w, s->kv, tokens, n, all_logits,
                                  s->logits, err);
    if (!st) memcpy(s->tokens + at, tokens, (size_t)n * sizeof *tokens);
    s->n_rows = st ? 0 : rows;
    /* Bad input is refused before anything is touched; a failure inside the forward (memory)
     * may have left some layers a step ahead: rebuild from the token history, now or at the
     * next eval, so the session stays what its first n_past tokens make it. */
    if (st && st != HALO_E_INVALID_ARG) {
        s->broken = true;
        if (!s->replaying) {
            halo_error ignored;
            replay_to(s, (uint32_t)s->kv->n_past, &ignored);
        }
    }
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
    if (n_past == now && !s->broken) return HALO_OK;
    return replay_to(s, n_past, err);
}

/* Rebuilds the state of the first n_past tokens: from the session's snapshot anchor when it
 * is a prefix of them, else from the start. */
static halo_status replay_to(halo_session *s, uint32_t n_past, halo_error *err) {
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
    s->broken = false;
    s->replaying = true;
    for (uint32_t at = from; !st && at < n_past; at += REPLAY_CHUNK) {
        uint32_t m = n_past - at < REPLAY_CHUNK ? n_past - at : REPLAY_CHUNK;
        st = halo_session_eval(s, replay + at, m, false, err);
    }
    s->replaying = false;
    if (st) s->broken = true;
    free(replay);
    return st;
}

const float *halo_session_logits(const halo_session *s, uint32_t *n_rows) {
    if (n_rows) *n_rows = s->n_rows;
    return s->logits;
}

uint32_t halo_session_n_past(const halo_session *s) { return (uint32_t)s->kv->n_past; }
