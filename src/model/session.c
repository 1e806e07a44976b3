/* Sessions: evaluating tokens, logits, snapshots and rewind over an engine. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "model/engine_internal.h"

static halo_status replay_to(halo_session *s, uint32_t n_past, halo_error *err);

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
    halo_fwd_item item = {.kv = s->kv, .tokens = tokens, .n = n};
    halo_status st = halo_engine_step(s->e, &item, 1, all_logits, s->logits, NULL, err);
    if (!st) memcpy(s->tokens + at, tokens, (size_t)n * sizeof *tokens);
    s->n_rows = st ? 0 : rows;
    /* Bad input is refused before anything is touched; a failure inside a step (memory) may
     * have left some layers a step ahead, or the first steps of a long input done: rebuild
     * from the token history, now or at the next eval, so the session stays what its first
     * n_past tokens make it. */
    if (st && st != HALO_E_INVALID_ARG) {
        s->kv->n_past = at;
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
