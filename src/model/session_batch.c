/* Steps of the engine (one or more sessions' tokens through one forward) and
 * halo_session_eval_many. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "kv/session_state.h"
#include "model/engine_internal.h"

enum { DEFAULT_UBATCH = 512 };

static halo_status ensure_scratch(halo_engine *e, halo_error *err) {
    if (e->scratch) return HALO_OK;
    e->n_ubatch = halo_engine_forward_tokens(e);
    uint64_t bytes = halo_forward_scratch_bytes(&e->hp, &e->w, e->n_ubatch);
    if (!bytes) return halo_fail(err, HALO_E_NOMEM, "cannot size the step scratch");
    halo_status st = e->be->ops->buf_alloc(e->be, bytes, &e->scratch, err);
    if (st) return halo_error_prefix(err, "step scratch for %u tokens: ", e->n_ubatch);
    e->scratch_bytes = bytes;
    return HALO_OK;
}

uint32_t halo_engine_forward_tokens(const halo_engine *e) {
    return e->n_ubatch ? e->n_ubatch : DEFAULT_UBATCH;
}

void halo_engine_step_free(halo_engine *e) {
    if (e->scratch) e->be->ops->buf_free(e->be, e->scratch);
    e->scratch = NULL;
    e->scratch_bytes = 0;
}

/* Fills one step of at most `budget` tokens from the items' remaining tokens, in order. */
static uint32_t plan_step(const halo_fwd_item *items, uint32_t n_items, const uint32_t *done,
                          uint32_t budget, halo_fwd_item *step, uint32_t *which) {
    uint32_t k = 0;
    for (uint32_t i = 0; i < n_items && budget; i++) {
        uint32_t left = items[i].n - done[i];
        if (!left) continue;
        uint32_t m = left < budget ? left : budget;
        step[k] = (halo_fwd_item){.kv = items[i].kv, .tokens = items[i].tokens + done[i], .n = m};
        which[k++] = i;
        budget -= m;
    }
    return k;
}

halo_status halo_engine_step(halo_engine *e, const halo_fwd_item *items, uint32_t n_items,
                             bool all_logits, float *logits, uint32_t *done_out, halo_error *err) {
    if (all_logits && n_items != 1)
        return halo_fail(err, HALO_E_INVALID_ARG, "all logits are kept for one sequence only");
    uint32_t V = e->hp.n_vocab;
    halo_status st = halo_forward_check(&e->hp, items, n_items, err); /* before any step */
    if (st) return st;
    pthread_mutex_lock(&e->step_lock);
    st = ensure_scratch(e, err);
    uint32_t *done = calloc(n_items, sizeof *done), *which = calloc(n_items, sizeof *which);
    halo_fwd_item *step = calloc(n_items, sizeof *step);
    /* One sequence writes its last row straight into the caller's logits: no fresh 517 KB
     * buffer (and a copy of it) a decoded token. Several gather theirs in rows first. */
    bool direct = all_logits || n_items == 1;
    float *rows = direct ? NULL : malloc((size_t)n_items * V * sizeof *rows);
    if (!st && (!done || !which || !step || (!direct && !rows)))
        st = halo_fail(err, HALO_E_NOMEM, "out of memory");
    while (!st) {
        uint32_t k = plan_step(items, n_items, done, e->n_ubatch, step, which);
        if (!k) break;
        float *out = all_logits ? logits + (size_t)done[0] * V : direct ? logits : rows;
        st = halo_forward(e->be, &e->hp, &e->w, e->scratch, e->scratch_bytes, step, k, all_logits,
                          out, err);
        for (uint32_t j = 0; !st && j < k; j++) {
            uint32_t i = which[j];
            done[i] += step[j].n;
            if (!direct && done[i] == items[i].n)
                memcpy(logits + (size_t)i * V, rows + (size_t)j * V, (size_t)V * sizeof *rows);
        }
    }
    if (done_out && done) memcpy(done_out, done, n_items * sizeof *done);
    pthread_mutex_unlock(&e->step_lock);
    free(done);
    free(which);
    free(step);
    free(rows);
    return st;
}

halo_status halo_session_eval_many(halo_session *const *sessions, const int32_t *const *tokens,
                                   const uint32_t *n, uint32_t count, halo_error *err) {
    if (count == 0) return HALO_OK;
    if (count == 1) return halo_session_eval(sessions[0], tokens[0], n[0], false, err);
    halo_engine *e = sessions[0]->e;
    uint32_t V = e->hp.n_vocab;
    for (uint32_t i = 0; i < count; i++) {
        halo_session *s = sessions[i];
        if (s->e != e)
            return halo_fail(err, HALO_E_INVALID_ARG, "session %u belongs to another engine", i);
        for (uint32_t j = 0; j < i; j++)
            if (sessions[j] == s)
                return halo_fail(err, HALO_E_INVALID_ARG, "session %u appears twice", i);
        if (s->broken) { /* rebuild first, as halo_session_eval does */
            halo_status st = halo_session_rewind(s, (uint32_t)s->kv->n_past, err);
            if (st) return halo_error_prefix(err, "session %u could not be rebuilt: ", i);
        }
        if (!s->cap_rows) {
            float *l = realloc(s->logits, (size_t)V * sizeof *l);
            if (!l) return halo_fail(err, HALO_E_NOMEM, "out of memory for logits");
            s->logits = l;
            s->cap_rows = 1;
        }
    }
    halo_fwd_item *items = calloc(count, sizeof *items), *round = calloc(count, sizeof *round);
    uint32_t *before = calloc(count, sizeof *before), *done = calloc(count, sizeof *done);
    uint32_t *which = calloc(count, sizeof *which), *rdone = calloc(count, sizeof *rdone);
    float *logits = malloc((size_t)count * V * sizeof *logits);
    bool ok = items && round && before && done && which && rdone && logits;
    halo_status st = ok ? HALO_OK : halo_fail(err, HALO_E_NOMEM, "out of memory");
    for (uint32_t i = 0; !st && i < count; i++) {
        items[i] = (halo_fwd_item){.kv = sessions[i]->kv, .tokens = tokens[i], .n = n[i]};
        before[i] = (uint32_t)sessions[i]->kv->n_past;
    }
    if (!st) st = halo_forward_check(&e->hp, items, count, err); /* before any step */
    /* Rounds that stop each session at its next checkpoint position, so sessions stepped
     * together keep the same checkpoints (cheap rewinds) as those evaluated alone. */
    while (!st) {
        uint32_t k = 0;
        for (uint32_t i = 0; i < count; i++) {
            uint32_t left = n[i] - done[i], room = halo_session_checkpoint_room(sessions[i]);
            if (!left) continue;
            uint32_t m = room && room < left ? room : left;
            round[k] = (halo_fwd_item){.kv = items[i].kv, .tokens = tokens[i] + done[i], .n = m};
            which[k++] = i;
        }
        if (!k) break;
        memset(rdone, 0, k * sizeof *rdone);
        st = halo_engine_step(e, round, k, false, logits, rdone, err);
        for (uint32_t j = 0; j < k; j++) {
            uint32_t i = which[j];
            halo_session *s = sessions[i];
            memcpy(s->tokens + before[i] + done[i], round[j].tokens,
                   (size_t)rdone[j] * sizeof *round[j].tokens);
            done[i] += rdone[j];
            if (st) continue;
            if (done[i] == n[i])
                memcpy(s->logits, logits + (size_t)j * V, (size_t)V * sizeof *logits);
            halo_session_checkpoint_if_due(s);
        }
    }
    for (uint32_t i = 0; ok && i < count; i++) {
        halo_session *s = sessions[i];
        if (!st) {
            s->n_rows = 1;
        } else if (done[i] != n[i] && st != HALO_E_INVALID_ARG) {
            /* Not advanced by all its tokens: back to where it was, as the contract says. */
            halo_error ignored;
            s->broken = true;
            s->n_rows = 0;
            if (halo_session_rewind(s, before[i], &ignored)) s->broken = true;
        } else {
            s->n_rows = 0;
        }
    }
    free(items);
    free(round);
    free(before);
    free(done);
    free(which);
    free(rdone);
    free(logits);
    return st;
}
