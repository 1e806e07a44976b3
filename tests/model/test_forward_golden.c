/* halo's forward against transformers' logits (tests/golden, made by tools/oracle/): every
 * golden model variant and sequence within 1e-3 of the reference's range at every position with
 * top-1 identical (a flip only at a recorded near-tie); evaluation in chunks and one token at a
 * time equal to the batched prefill; greedy continuations equal to transformers'. */
#include <math.h>
#include <stdlib.h>

#include "check.h"
#include "golden/golden.h"
#include "halo/halo.h"

#define TOL_REL 1e-3
/* Decode vs prefill: the same arithmetic in another order; measured ~1e-6 of the range. */
#define TOL_INCREMENTAL 1e-4
#define NEAR_TIE 1e-3f

static halo_golden *golden;
static const char *models[] = {"tiny-a", "tiny-yarn"}, *variants[] = {"f32", "f16"};

static const halo_golden_variant *variant(const char *model, const char *var) {
    const halo_golden_variant *v = NULL;
    halo_error err = {0};
    if (halo_golden_variant_get(golden, model, var, &v, &err)) {
        fprintf(stderr, "  %s\n", err.message);
        check_failures++;
    }
    return v;
}

static halo_engine *open_engine(const halo_golden_variant *v) {
    halo_engine *e = NULL;
    halo_error err = {0};
    halo_engine_params p = {.model_path = v->gguf_path};
    if (halo_engine_open(&p, &e, &err)) {
        fprintf(stderr, "  %s\n", err.message);
        check_failures++;
    }
    return e;
}

/* Every position's logits, evaluated in chunks of `chunk` (0: at once); caller frees. */
static float *eval(halo_engine *e, const int32_t *tokens, int32_t n, int32_t chunk) {
    float *all = NULL;
    halo_error err = {0};
    if (halo_golden_eval(e, tokens, n, chunk, &all, &err)) {
        fprintf(stderr, "  %s\n", err.message);
        check_failures++;
    }
    return all;
}

/* A comparison passes when nothing is off, or the first disagreement follows a recorded
 * decision margin small enough for rounding to flip (reported as such). */
static void expect_agreement(const halo_golden_cmp *c, const char *what) {
    char line[256];
    halo_golden_format(c, line, sizeof line);
    bool tie = c->first_bad >= 0 && halo_golden_near_tie(c, NEAR_TIE);
    printf("  %-28s %s%s\n", what, line, tie ? "  (near-tie flip)" : "");
    CHECK(c->first_bad < 0 || tie);
}

static void every_sequence_matches_transformers(void) {
    for (int m = 0; m < 2; m++)
        for (int k = 0; k < 2; k++) {
            const halo_golden_variant *v = variant(models[m], variants[k]);
            halo_engine *e = v ? open_engine(v) : NULL;
            for (int i = 0; e && i < halo_golden_n_seqs(golden); i++) {
                const halo_golden_seq *seq = halo_golden_seq_at(golden, i);
                float *got = eval(e, seq->tokens, seq->length, 0);
                halo_golden_cmp c;
                halo_golden_compare_seq(v, seq, got, TOL_REL, &c);
                char what[64];
                snprintf(what, sizeof what, "%s-%s %s", models[m], variants[k], seq->name);
                expect_agreement(&c, what);
                free(got);
            }
            halo_engine_close(e);
        }
}

/* Chunked prefill and one-token decode must give the batched prefill's logits. */
static void incremental_evaluation_equals_prefill(void) {
    static const struct { const char *model, *seq; int32_t chunk; } cases[] = {
        {"tiny-a", "L300", 1},    {"tiny-a", "L520", 7},      {"tiny-a", "L1100", 128},
        {"tiny-yarn", "L1100", 512}, {"tiny-yarn", "L129", 1}, {"tiny-yarn", "L520", 37},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const halo_golden_variant *v = variant(cases[i].model, "f32");
        const halo_golden_seq *seq = halo_golden_seq_find(golden, cases[i].seq);
        halo_engine *e = v && seq ? open_engine(v) : NULL;
        if (!e) continue;
        float *batch = eval(e, seq->tokens, seq->length, 0);
        float *inc = eval(e, seq->tokens, seq->length, cases[i].chunk);
        halo_golden_cmp c;
        halo_golden_compare(batch, inc, NULL, seq->length, v->n_vocab, TOL_INCREMENTAL, &c);
        char what[64];
        snprintf(what, sizeof what, "%s %s chunk %d", cases[i].model, cases[i].seq,
                 cases[i].chunk);
        expect_agreement(&c, what);
        CHECK(c.first_bad < 0);
        free(batch);
        free(inc);
        halo_engine_close(e);
    }
}

/* Greedy decoding, one token at a time from the prompt's prefill, gives transformers' tokens
 * (a different choice is allowed only where the reference's top-2 margin is a near-tie). */
static void greedy_continuations_match(void) {
    for (int m = 0; m < 2; m++) {
        const halo_golden_variant *v = variant(models[m], "f32");
        halo_engine *e = v ? open_engine(v) : NULL;
        for (int g = 0; e && g < v->n_greedy; g++) {
            const halo_golden_greedy *run = &v->greedy[g];
            const halo_golden_seq *prompt = halo_golden_seq_find(golden, run->prompt);
            halo_session *s = NULL;
            halo_error err = {0};
            CHECK_INT(halo_session_create(e, (uint32_t)(prompt->length + run->steps), &s, &err),
                      HALO_OK);
            CHECK_INT(halo_session_eval(s, prompt->tokens, (uint32_t)prompt->length, false, &err),
                      HALO_OK);
            int same = 0;
            for (int step = 0; step < run->steps; step++) {
                int tok = halo_golden_argmax(halo_session_logits(s, NULL), halo_engine_n_vocab(e));
                if (tok != run->ref_tokens[step]) {
                    bool tie = run->ref_margins[step] < NEAR_TIE;
                    printf("  %s greedy from %s: step %d chose %d, transformers %d (margin %g)\n",
                           models[m], run->prompt, step, tok, run->ref_tokens[step],
                           (double)run->ref_margins[step]);
                    CHECK(tie);
                    break; /* later steps continue from different text */
                }
                same++;
                int32_t t = tok;
                CHECK_INT(halo_session_eval(s, &t, 1, false, &err), HALO_OK);
            }
            printf("  %-28s greedy %d/%d tokens identical\n", models[m], same, run->steps);
            halo_session_free(s);
        }
        halo_engine_close(e);
    }
}

/* Rewinding and snapshots: after going back, evaluating the rest again gives the reference. */
static void rewind_and_snapshots_reproduce_the_reference(void) {
    const halo_golden_variant *v = variant("tiny-a", "f32");
    const halo_golden_seq *seq = halo_golden_seq_find(golden, "L300");
    halo_engine *e = v && seq ? open_engine(v) : NULL;
    if (!e) return;
    uint32_t V = halo_engine_n_vocab(e), n = (uint32_t)seq->length;
    float *got = calloc((size_t)n * V, sizeof *got);
    halo_session *s = NULL, *other = NULL;
    halo_snapshot *snap = NULL;
    halo_error err = {0};
    CHECK_INT(halo_session_create(e, n, &s, &err), HALO_OK);
    CHECK_INT(halo_session_create(e, n, &other, &err), HALO_OK);
    /* 0..200, snapshot, on to 300 */
    CHECK_INT(halo_session_eval(s, seq->tokens, 200, true, &err), HALO_OK);
    memcpy(got, halo_session_logits(s, NULL), (size_t)200 * V * sizeof *got);
    CHECK_INT(halo_session_snapshot(s, &snap, &err), HALO_OK);
    CHECK_INT(halo_session_eval(s, seq->tokens + 200, 100, true, &err), HALO_OK);
    /* back to 130 (replays from the start: the snapshot is later), then 130..300 again */
    CHECK_INT(halo_session_rewind(s, 130, &err), HALO_OK);
    CHECK_INT(halo_session_n_past(s), 130);
    CHECK_INT(halo_session_rewind(s, 131, &err), HALO_E_INVALID_ARG);
    CHECK_INT(halo_session_eval(s, seq->tokens + 130, 170, true, &err), HALO_OK);
    memcpy(got + (size_t)130 * V, halo_session_logits(s, NULL), (size_t)170 * V * sizeof *got);
    halo_golden_cmp c;
    halo_golden_compare_seq(v, seq, got, TOL_REL, &c);
    expect_agreement(&c, "rewind 300 -> 130 -> 300");
    /* back to 250: restores the snapshot at 200 and replays 50 tokens */
    CHECK_INT(halo_session_rewind(s, 250, &err), HALO_OK);
    CHECK_INT(halo_session_eval(s, seq->tokens + 250, 50, true, &err), HALO_OK);
    memcpy(got + (size_t)250 * V, halo_session_logits(s, NULL), (size_t)50 * V * sizeof *got);
    halo_golden_compare_seq(v, seq, got, TOL_REL, &c);
    expect_agreement(&c, "rewind to 250 via snapshot");
    /* the snapshot restored into another session continues identically */
    CHECK_INT(halo_session_restore(other, snap, &err), HALO_OK);
    CHECK_INT(halo_session_n_past(other), 200);
    CHECK_INT(halo_session_eval(other, seq->tokens + 200, 100, true, &err), HALO_OK);
    memcpy(got + (size_t)200 * V, halo_session_logits(other, NULL), (size_t)100 * V * sizeof *got);
    halo_golden_compare_seq(v, seq, got, TOL_REL, &c);
    expect_agreement(&c, "snapshot restored elsewhere");
    halo_snapshot_free(snap);
    halo_session_free(other);
    halo_session_free(s);
    free(got);
    halo_engine_close(e);
}

/* Tokens outside the vocabulary and sequences longer than the context are errors. */
static void bad_tokens_and_overlong_sequences_are_errors(void) {
    const halo_golden_variant *v = variant("tiny-a", "f32");
    halo_engine *e = v ? open_engine(v) : NULL;
    if (!e) return;
    halo_session *s = NULL;
    halo_error err = {0};
    CHECK_INT(halo_session_create(e, 8, &s, &err), HALO_OK);
    int32_t bad[2] = {5, 256};
    CHECK_INT(halo_session_eval(s, bad, 2, true, &err), HALO_E_INVALID_ARG);
    CHECK_CONTAINS(err.message, "token 256 at index 1 is outside the vocabulary of 256");
    int32_t neg = -1;
    CHECK_INT(halo_session_eval(s, &neg, 1, true, &err), HALO_E_INVALID_ARG);
    int32_t nine[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    CHECK_INT(halo_session_eval(s, nine, 9, true, &err), HALO_E_INVALID_ARG);
    CHECK_CONTAINS(err.message, "9 tokens at position 0 exceed the context of 8");
    CHECK_INT(halo_session_n_past(s), 0); /* nothing was evaluated */
    CHECK_INT(halo_session_eval(s, nine, 8, false, &err), HALO_OK);
    CHECK_INT(halo_session_eval(s, nine, 1, false, &err), HALO_E_INVALID_ARG);
    halo_session_free(s);
    CHECK_INT(halo_session_create(e, 0, &s, &err), HALO_E_INVALID_ARG);
    halo_engine_close(e);
}

/* An op that runs out of memory mid-eval (injected: the N-th scratch allocation of the CPU
 * backend fails) makes that eval fail with a message naming the op; the session is rebuilt
 * from its token history, so continuing gives the reference logits. */
static void an_op_failing_mid_eval_leaves_the_session_usable(void) {
    const halo_golden_variant *v = variant("tiny-a", "f32");
    const halo_golden_seq *seq = halo_golden_seq_find(golden, "L300");
    if (!v || !seq) return;
    setenv("HALO_TEST_FAIL_SCRATCH", "700", 1); /* inside the second chunk's layers */
    halo_engine *e = open_engine(v);
    unsetenv("HALO_TEST_FAIL_SCRATCH");
    if (!e) return;
    uint32_t V = halo_engine_n_vocab(e), n = (uint32_t)seq->length;
    float *got = calloc((size_t)n * V, sizeof *got);
    halo_session *s = NULL;
    halo_error err = {0};
    CHECK_INT(halo_session_create(e, n, &s, &err), HALO_OK);
    uint32_t at = 0, failures = 0;
    while (s && at < n) {
        uint32_t m = n - at < 50 ? n - at : 50;
        halo_status st = halo_session_eval(s, seq->tokens + at, m, true, &err);
        if (st) {
            failures++;
            CHECK_INT(st, HALO_E_NOMEM);
            CHECK_CONTAINS(err.message, "out of memory for");
            CHECK_INT(halo_session_n_past(s), at); /* nothing of the failed chunk counts */
            if (failures > 1) break;
            continue; /* the same chunk again */
        }
        memcpy(got + (size_t)at * V, halo_session_logits(s, NULL), (size_t)m * V * sizeof *got);
        at += m;
    }
    CHECK_INT(failures, 1);
    halo_golden_cmp c;
    halo_golden_compare_seq(v, seq, got, TOL_REL, &c);
    expect_agreement(&c, "after an injected failure");
    halo_session_free(s);
    free(got);
    halo_engine_close(e);
}

int main(void) {
    halo_error err = {0};
    if (halo_golden_open("tests/golden", &golden, &err)) {
        fprintf(stderr, "%s\n", err.message);
        return 1;
    }
    RUN(every_sequence_matches_transformers);
    RUN(incremental_evaluation_equals_prefill);
    RUN(greedy_continuations_match);
    RUN(rewind_and_snapshots_reproduce_the_reference);
    RUN(bad_tokens_and_overlong_sequences_are_errors);
    RUN(an_op_failing_mid_eval_leaves_the_session_usable);
    halo_golden_close(golden);
    return check_report();
}
