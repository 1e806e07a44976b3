/* halo_session_eval_many: several sessions stepped through one forward (weights read once for
 * all) give each session transformers' logits at its own position (tests/golden), whatever
 * the mix of positions, token counts and compressor-window phases in the step; a step larger
 * than the engine's batch is split; bad input changes no session. */
#include <math.h>
#include <stdlib.h>

#include "check.h"
#include "golden/golden.h"
#include "halo/cache.h"
#include "halo/halo.h"

#define TOL_REL 1e-3
#define NEAR_TIE 1e-3f
enum { N_SESS = 4 };

static halo_golden *golden;

/* The last-token logits of session s against the reference at position pos of seq. */
static void expect_reference(const halo_golden_variant *v, const halo_golden_seq *seq,
                             halo_session *s, int32_t pos, const char *what) {
    uint32_t rows = 0;
    const float *got = halo_session_logits(s, &rows);
    CHECK_INT(rows, 1);
    CHECK_INT(halo_session_n_past(s), pos + 1);
    if (rows != 1) return;
    int64_t row = v->seq_row[seq->index] + pos;
    halo_golden_cmp c;
    halo_golden_compare(v->logits + row * v->n_vocab, got, v->margins + row * 2, 1, v->n_vocab,
                        TOL_REL, &c);
    bool tie = c.first_bad >= 0 && halo_golden_near_tie(&c, NEAR_TIE);
    if (c.first_bad >= 0 && !tie) {
        char line[256];
        halo_golden_format(&c, line, sizeof line);
        fprintf(stderr, "  %s at position %d: %s\n", what, pos, line);
    }
    CHECK(c.first_bad < 0 || tie);
}

static halo_engine *open_variant(const char *model, const char *var,
                                 const halo_golden_variant **v) {
    halo_error err = {0};
    halo_engine *e = NULL;
    if (halo_golden_variant_get(golden, model, var, v, &err)) {
        fprintf(stderr, "  %s\n", err.message);
        check_failures++;
        return NULL;
    }
    halo_engine_params p = {.model_path = (*v)->gguf_path, .threads = 1};
    if (halo_engine_open(&p, &e, &err)) {
        fprintf(stderr, "  %s\n", err.message);
        check_failures++;
    }
    return e;
}

/* Four sessions on one sequence, started at different positions (so their windows close at
 * different steps), advanced together by 1, 2, 3 and 5 tokens a step. */
static void staggered_sessions_match_transformers(const char *model, const char *var) {
    const halo_golden_variant *v = NULL;
    halo_engine *e = open_variant(model, var, &v);
    const halo_golden_seq *seq = halo_golden_seq_find(golden, "L300");
    CHECK(seq != NULL);
    if (!e || !seq) return;
    static const uint32_t start[N_SESS] = {1, 6, 129, 250}, stride[N_SESS] = {1, 2, 3, 5};
    halo_session *s[N_SESS] = {0};
    uint32_t at[N_SESS];
    halo_error err = {0};
    for (int k = 0; k < N_SESS; k++) {
        CHECK_INT(halo_session_create(e, (uint32_t)seq->length, &s[k], &err), HALO_OK);
        CHECK_INT(halo_session_eval(s[k], seq->tokens, start[k], false, &err), HALO_OK);
        at[k] = start[k];
    }
    int steps = 0, checked = 0;
    for (;; steps++) {
        halo_session *live[N_SESS];
        const int32_t *toks[N_SESS];
        uint32_t n[N_SESS], m = 0, idx[N_SESS];
        for (int k = 0; k < N_SESS; k++) {
            uint32_t left = (uint32_t)seq->length - at[k];
            if (!left || (k == 3 && steps >= 8)) continue;
            live[m] = s[k];
            toks[m] = seq->tokens + at[k];
            n[m] = left < stride[k] ? left : stride[k];
            idx[m++] = (uint32_t)k;
        }
        if (!m || steps == 60) break;
        halo_status st = halo_session_eval_many(live, toks, n, m, &err);
        CHECK_INT(st, HALO_OK);
        if (st) {
            fprintf(stderr, "  %s\n", err.message);
            break;
        }
        for (uint32_t j = 0; j < m; j++) {
            at[idx[j]] += n[j];
            expect_reference(v, seq, live[j], (int32_t)at[idx[j]] - 1, model);
            checked++;
        }
    }
    printf("  %s %s: %d steps, %d session positions checked against transformers\n", model, var,
           steps, checked);
    /* Sessions stepped together keep their checkpoints: a rewind re-evaluates less than one
     * checkpoint interval, and lands on the reference. */
    for (int k = 0; k < N_SESS; k++) {
        halo_checkpoint_stats cs;
        halo_session_checkpoint_stats(s[k], &cs);
        uint32_t past = halo_session_n_past(s[k]);
        if (!cs.interval || past <= cs.interval + 1) continue;
        CHECK(cs.count >= 1);
        CHECK_INT(halo_session_rewind(s[k], past - 1, &err), HALO_OK);
        halo_session_checkpoint_stats(s[k], &cs);
        CHECK(cs.last_replayed < cs.interval);
        CHECK_INT(halo_session_eval(s[k], seq->tokens + past - 1, 1, false, &err), HALO_OK);
        expect_reference(v, seq, s[k], (int32_t)past - 1, "rewound");
    }
    for (int k = 0; k < N_SESS; k++)
        halo_session_free(s[k]);
    halo_engine_close(e);
}

static void staggered_tiny_a_f32(void) {
    staggered_sessions_match_transformers("tiny-a", "f32");
}
static void staggered_tiny_yarn_f16(void) {
    staggered_sessions_match_transformers("tiny-yarn", "f16");
}

/* Three 300-token prompts in one call: 900 tokens, more than one step holds. */
static void large_step_is_split(void) {
    const halo_golden_variant *v = NULL;
    halo_engine *e = open_variant("tiny-a", "f32", &v);
    const halo_golden_seq *seq = halo_golden_seq_find(golden, "L300");
    if (!e || !seq) return;
    halo_session *s[3] = {0};
    const int32_t *toks[3];
    uint32_t n[3];
    halo_error err = {0};
    for (int k = 0; k < 3; k++) {
        CHECK_INT(halo_session_create(e, (uint32_t)seq->length, &s[k], &err), HALO_OK);
        toks[k] = seq->tokens;
        n[k] = (uint32_t)seq->length;
    }
    CHECK_INT(halo_session_eval_many(s, toks, n, 3, &err), HALO_OK);
    for (int k = 0; k < 3; k++) {
        expect_reference(v, seq, s[k], seq->length - 1, "split step");
        halo_session_free(s[k]);
    }
    halo_engine_close(e);
}

/* A bad token in one item, or a session given twice, is refused and advances nobody. */
static void bad_input_changes_no_session(void) {
    const halo_golden_variant *v = NULL;
    halo_engine *e = open_variant("tiny-a", "f32", &v);
    const halo_golden_seq *seq = halo_golden_seq_find(golden, "L300");
    if (!e || !seq) return;
    halo_session *s[2] = {0};
    halo_error err = {0};
    for (int k = 0; k < 2; k++)
        CHECK_INT(halo_session_create(e, 64, &s[k], &err), HALO_OK);
    int32_t bad[2] = {seq->tokens[0], (int32_t)halo_engine_n_vocab(e)};
    const int32_t *toks[2] = {seq->tokens, bad};
    uint32_t n[2] = {5, 2};
    CHECK_INT(halo_session_eval_many(s, toks, n, 2, &err), HALO_E_INVALID_ARG);
    CHECK_INT(halo_session_n_past(s[0]), 0);
    CHECK_INT(halo_session_n_past(s[1]), 0);
    halo_session *twice[2] = {s[0], s[0]};
    toks[1] = seq->tokens;
    CHECK_INT(halo_session_eval_many(twice, toks, n, 2, &err), HALO_E_INVALID_ARG);
    CHECK_INT(halo_session_n_past(s[0]), 0);
    uint32_t over[2] = {5, 65};
    CHECK_INT(halo_session_eval_many(s, toks, over, 2, &err), HALO_E_INVALID_ARG);
    CHECK_INT(halo_session_n_past(s[0]), 0);
    /* Still usable: good input gives the reference. */
    n[1] = 5;
    CHECK_INT(halo_session_eval_many(s, toks, n, 2, &err), HALO_OK);
    for (int k = 0; k < 2; k++) {
        expect_reference(v, seq, s[k], 4, "after refusals");
        halo_session_free(s[k]);
    }
    halo_engine_close(e);
}

int main(void) {
    halo_error err = {0};
    if (halo_golden_open("tests/golden", &golden, &err)) {
        fprintf(stderr, "%s\n", err.message);
        return 1;
    }
    RUN(staggered_tiny_a_f32);
    RUN(staggered_tiny_yarn_f16);
    RUN(large_step_is_split);
    RUN(bad_input_changes_no_session);
    halo_golden_close(golden);
    return check_report();
}
