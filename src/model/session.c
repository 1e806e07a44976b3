/* Sessions: evaluating tokens, logits, snapshots and rewind over an engine. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "halo/cache.h"
#include "kv/ckset.h"
#include "kv/session_state.h"
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
    s->ckpts = calloc(1, sizeof *s->ckpts);
    if (!s->ckpts) {
        free(s->tokens);
        free(s);
        return halo_fail(err, HALO_E_NOMEM, "out of memory");
    }
    halo_kv_ckset_configure(s->ckpts,
                            halo_kv_ckset_default_interval(&e->hp, halo_engine_forward_tokens(e)),
                            HALO_CHECKPOINT_DEFAULT_BYTES);
    halo_status st = halo_kv_create(e->be, &e->hp, n_ctx, &s->kv, err);
    if (st) {
        free(s->ckpts);
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
    halo_kv_ckset_clear(s->ckpts);
    free(s->ckpts->c);
    free(s->ckpts);
    free(s->tokens);
    halo_kv_free(s->kv);
    free(s->logits);
    free(s);
}

/* Refuses what the forward would refuse, before anything is evaluated: a chunk split at
 * checkpoint positions must not fail halfway on bad input. */
static halo_status check_input(const halo_session *s, const int32_t *tokens, uint32_t n,
                               halo_error *err) {
    if (n == 0) return halo_fail(err, HALO_E_INVALID_ARG, "no tokens to evaluate");
    if (s->kv->n_past + n > s->kv->n_ctx)
        return halo_fail(err, HALO_E_INVALID_ARG,
                         "%u tokens at position %lld exceed the context of %u", n,
                         (long long)s->kv->n_past, s->kv->n_ctx);
    for (uint32_t i = 0; i < n; i++)
        if (tokens[i] < 0 || (uint32_t)tokens[i] >= s->e->hp.n_vocab)
            return halo_fail(err, HALO_E_INVALID_ARG,
                             "token %d at index %u is outside the "
                             "vocabulary of %u",
                             tokens[i], i, s->e->hp.n_vocab);
    return HALO_OK;
}

uint32_t halo_session_checkpoint_room(const halo_session *s) {
    int64_t next = halo_kv_ckset_next(s->ckpts, s->kv->n_past) - s->kv->n_past;
    return next > UINT32_MAX ? UINT32_MAX : (uint32_t)next;
}

/* Checkpoints when the state reached a checkpoint position. A checkpoint that cannot be
 * taken (memory) is counted, not fatal: rewinds past it only re-evaluate more. */
void halo_session_checkpoint_if_due(halo_session *s) {
    halo_kv_ckset *set = s->ckpts;
    int64_t at = s->kv->n_past;
    if (!set->interval || at % set->interval != 0) return;
    if (set->n && set->c[set->n - 1]->pos >= at) return;
    halo_kv_ckpt *c = NULL;
    halo_error ignored;
    if (halo_kv_ckpt_take(s->kv, &c, &ignored)) {
        set->n_failed++;
        return;
    }
    halo_kv_ckset_add(set, c, &ignored);
}

halo_status halo_session_eval(halo_session *s, const int32_t *tokens, uint32_t n, bool all_logits,
                              halo_error *err) {
    uint32_t rows = all_logits ? n : 1, V = s->e->hp.n_vocab;
    if (rows > s->cap_rows) {
        float *l = realloc(s->logits, (size_t)rows * V * sizeof *l);
        if (!l) return halo_fail(err, HALO_E_NOMEM, "out of memory for %u logit rows", rows);
        s->logits = l;
        s->cap_rows = rows;
    }
    if (s->broken && !s->replaying) {
        halo_status st = replay_to(s, (uint32_t)s->kv->n_past, err);
        if (st) return halo_error_prefix(err, "session state could not be rebuilt: ");
    }
    halo_status st = check_input(s, tokens, n, err);
    if (st) return st;
    /* The chunk is split where checkpoints are due. Evaluation is per token (the CPU backend
     * computes every row the same way whatever the chunk), so the split changes no logit. */
    int64_t start = s->kv->n_past;
    for (uint32_t done = 0; !st && done < n;) {
        int64_t at = s->kv->n_past, next = halo_kv_ckset_next(s->ckpts, at);
        uint32_t m = next - at < (int64_t)(n - done) ? (uint32_t)(next - at) : n - done;
        float *out = s->logits + (all_logits ? (size_t)done * V : 0);
        halo_fwd_item item = {.kv = s->kv, .tokens = tokens + done, .n = m};
        st = halo_engine_step(s->e, &item, 1, all_logits, out, NULL, err);
        if (st) break;
        memcpy(s->tokens + at, tokens + done, (size_t)m * sizeof *tokens);
        done += m;
        halo_session_checkpoint_if_due(s);
    }
    s->n_rows = st ? 0 : rows;
    /* A failure inside the forward (memory) may have left some layers a step ahead, after
     * some pieces were evaluated: go back to where the call started (from a checkpoint or the
     * token history), now or at the next eval, so a failed eval changes nothing. */
    if (st) {
        s->kv->n_past = start; /* tokens[0..start) are the history to rebuild */
        s->broken = true;
        if (!s->replaying) {
            halo_error ignored;
            replay_to(s, (uint32_t)start, &ignored);
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
    halo_kv_ckset_clear(s->ckpts); /* they described the state this one replaces */
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
        return halo_fail(err, HALO_E_INVALID_ARG, "cannot rewind forward: position %u > %u", n_past,
                         now);
    if (n_past == now && !s->broken) return HALO_OK;
    return replay_to(s, n_past, err);
}

/* Rebuilds the state of the first n_past tokens from the nearest starting point at or before
 * it: the last checkpoint, the session's snapshot anchor when it is a prefix of them and
 * later, or the start. */
static halo_status replay_to(halo_session *s, uint32_t n_past, halo_error *err) {
    /* The replayed tokens are this session's own history, kept in s->tokens; copy them out
     * first since replaying writes the same array. */
    int32_t *replay = malloc((size_t)(n_past ? n_past : 1) * sizeof *replay);
    if (!replay) return halo_fail(err, HALO_E_NOMEM, "out of memory");
    memcpy(replay, s->tokens, (size_t)n_past * sizeof *replay);
    halo_kv_ckset *set = s->ckpts;
    halo_kv_ckset_drop_after(set, n_past);
    const halo_kv_ckpt *c = halo_kv_ckset_best(set, n_past);
    int64_t from = c ? c->pos : 0;
    halo_status st = HALO_OK;
    s->n_rows = 0; /* logits afterwards: the last replayed token's, if any was replayed */
    if (s->anchor && s->anchor->n_tokens <= n_past && s->anchor->n_tokens > from &&
        memcmp(s->anchor->tokens, replay, (size_t)s->anchor->n_tokens * sizeof *replay) == 0) {
        /* The whole buffer comes back, rows after the anchor too: later checkpoints would
         * rely on rows this overwrites. */
        halo_kv_ckset_drop_after(set, s->anchor->n_tokens);
        st = halo_kv_snapshot_restore(s->kv, s->anchor->kv, err);
        from = s->anchor->n_tokens;
    } else if (c && halo_kv_ckpt_restore(s->kv, c, err) == HALO_OK) {
        from = c->pos;
    } else {
        halo_kv_ckset_clear(set);
        halo_kv_reset(s->kv);
        from = 0;
    }
    s->broken = false;
    s->replaying = true;
    for (int64_t at = from; !st && at < n_past; at += REPLAY_CHUNK) {
        uint32_t m = n_past - at < REPLAY_CHUNK ? (uint32_t)(n_past - at) : REPLAY_CHUNK;
        st = halo_session_eval(s, replay + at, m, false, err);
    }
    s->replaying = false;
    set->last_replayed = (uint32_t)(n_past - from);
    set->replayed_total += set->last_replayed;
    if (st) s->broken = true;
    free(replay);
    return st;
}

const float *halo_session_logits(const halo_session *s, uint32_t *n_rows) {
    if (n_rows) *n_rows = s->n_rows;
    return s->logits;
}

uint32_t halo_session_n_past(const halo_session *s) {
    return (uint32_t)s->kv->n_past;
}

const int32_t *halo_session_tokens(const halo_session *s) {
    return s->tokens;
}

halo_status halo_session_set_checkpoints(halo_session *s, const halo_checkpoint_policy *p,
                                         halo_error *err) {
    if (!p) return halo_fail(err, HALO_E_INVALID_ARG, "no checkpoint policy");
    uint32_t interval = p->interval == UINT32_MAX ? 0
                        : p->interval             ? p->interval
                                                  : halo_kv_ckset_default_interval(
                                                        &s->e->hp, halo_engine_forward_tokens(s->e));
    uint64_t max_bytes = p->max_bytes ? p->max_bytes : HALO_CHECKPOINT_DEFAULT_BYTES;
    halo_kv_ckset_configure(s->ckpts, interval, max_bytes);
    return HALO_OK;
}

void halo_session_checkpoint_stats(const halo_session *s, halo_checkpoint_stats *out) {
    const halo_kv_ckset *set = s->ckpts;
    *out = (halo_checkpoint_stats){.count = set->n,
                                   .bytes = set->bytes,
                                   .max_bytes = set->max_bytes,
                                   .interval = set->interval,
                                   .base_interval = set->base_interval,
                                   .n_thinned = set->n_thinned,
                                   .last_replayed = set->last_replayed,
                                   .replayed_total = set->replayed_total};
}
