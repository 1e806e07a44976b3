/* Rewinds through checkpoints: going back to any position of a 1,100-token golden sequence
 * and continuing gives, bit for bit, the logits of evaluating that prefix uninterrupted, and
 * re-evaluates fewer tokens than the checkpoint interval (by default the model's largest
 * compression ratio plus its sliding window, rounded up to a multiple of the engine's 512-token
 * forward so that checkpoints never split a prompt's forwards). */
#include <time.h>

#include "kv/kv_fixture.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Every position costs a rewind of up to `bound` tokens (1,100 positions: ~140,000 tokens,
 * minutes on a 2-core CI machine), so the test takes a sample: every 13th position (all
 * residues modulo the ratios), each checkpoint position and its neighbours, the neighbours of
 * every ratio-128 window boundary, the first and the last positions. */
static bool sampled(uint32_t p, uint32_t n, uint32_t bound) {
    if (p % 13 == 0 || p < 6 || p + 4 >= n) return true;
    uint32_t r = p % bound, w = p % 128;
    return r <= 1 || r == bound - 1 || w <= 1 || w == 127;
}

/* Sampled positions (see sampled), last to first: from position p+1, rewind to p and evaluate token
 * p (the rewind restores the checkpoint at or before p and re-evaluates the tokens after it). At a
 * sample of positions, continue to the end of the sequence in one call instead, so the next
 * rewind is a long one. */
static void rewind_to_every_position(const char *model, const char *variant, uint32_t bound) {
    halo_engine *e = fixture_engine(model, variant);
    const halo_golden_seq *seq = fixture_seq("L1100");
    if (!e || !seq) {
        halo_engine_close(e);
        return;
    }
    uint32_t n = (uint32_t)seq->length, V = halo_engine_n_vocab(e);
    double t0 = now();
    float *want = fixture_uninterrupted(e, seq->tokens, n);
    halo_session *s = NULL;
    halo_error err = {0};
    CHECK_INT(halo_session_create(e, n, &s, &err), HALO_OK);
    CHECK_INT(halo_session_eval(s, seq->tokens, n, false, &err), HALO_OK);
    halo_checkpoint_stats cs;
    halo_session_checkpoint_stats(s, &cs);
    CHECK_INT(cs.interval, bound);
    CHECK_INT(cs.count, (n - 1) / bound); /* positions bound, 2·bound, ... below n */
    halo_checkpoint_stats full = cs;
    uint32_t worst = 0, bad = 0, long_runs = 0;
    uint64_t replayed = 0;
    uint32_t tried = 0;
    for (uint32_t p = n; p-- > 0 && want && bad < 3;) {
        if (!sampled(p, n, bound)) continue;
        tried++;
        if (halo_session_rewind(s, p, &err)) {
            fprintf(stderr, "  rewind to %u: %s\n", p, err.message);
            check_failures++;
            break;
        }
        halo_session_checkpoint_stats(s, &cs);
        if (cs.last_replayed > worst) worst = cs.last_replayed;
        replayed += cs.last_replayed;
        CHECK(cs.last_replayed < bound);
        bool run_on = p % 97 == 5; /* ~11 positions continue to the end */
        uint32_t m = run_on ? n - p : 1;
        long_runs += run_on;
        if (halo_session_eval(s, seq->tokens + p, m, true, &err)) {
            fprintf(stderr, "  eval at %u: %s\n", p, err.message);
            check_failures++;
            break;
        }
        char what[96];
        snprintf(what, sizeof what, "%s-%s rewind to %u, %u tokens on", model, variant, p, m);
        bad +=
            !fixture_same(halo_session_logits(s, NULL), want + (size_t)p * V, (size_t)m * V, what);
        if (run_on) CHECK_INT(halo_session_rewind(s, p + 1, &err), HALO_OK);
    }
    printf("  %s-%s: %u rewinds of %u positions (%u continued to the end), logits bitwise "
           "equal; re-evaluated at most %u tokens (bound %u), %.1f on average; checkpoints "
           "%u x %.0f KiB; %.1f s\n",
           model, variant, tried, n, long_runs, worst, bound - 1,
           tried ? (double)replayed / tried : 0.0, full.count,
           full.count ? (double)full.bytes / full.count / 1024 : 0.0, now() - t0);
    free(want);
    halo_session_free(s);
    halo_engine_close(e);
}

/* A budget for two and a half checkpoints: the interval doubles, every other checkpoint goes,
 * the stats say so, and rewinds stay exact (only longer). An interval of 256 set by policy
 * (below the default's 512), so 1,100 tokens take four checkpoints before thinning. */
static void checkpoint_memory_stays_within_its_budget(void) {
    halo_engine *e = fixture_engine("tiny-a", "f32");
    const halo_golden_seq *seq = fixture_seq("L1100");
    if (!e || !seq) {
        halo_engine_close(e);
        return;
    }
    uint32_t n = (uint32_t)seq->length, V = halo_engine_n_vocab(e);
    float *want = fixture_uninterrupted(e, seq->tokens, n);
    halo_session *s = NULL;
    halo_error err = {0};
    CHECK_INT(halo_session_create(e, n, &s, &err), HALO_OK);
    halo_checkpoint_policy pol = {.interval = 256};
    CHECK_INT(halo_session_set_checkpoints(s, &pol, &err), HALO_OK);
    CHECK_INT(halo_session_eval(s, seq->tokens, 300, false, &err), HALO_OK);
    halo_checkpoint_stats cs;
    halo_session_checkpoint_stats(s, &cs);
    CHECK_INT(cs.count, 1);
    uint64_t one = cs.bytes, budget = one * 5 / 2;
    pol.max_bytes = budget;
    CHECK_INT(halo_session_set_checkpoints(s, &pol, &err), HALO_OK);
    CHECK_INT(halo_session_rewind(s, 0, &err), HALO_OK);
    CHECK_INT(halo_session_eval(s, seq->tokens, n, false, &err), HALO_OK);
    halo_session_checkpoint_stats(s, &cs);
    printf("  budget %.0f KiB: %u checkpoints, %.0f KiB, every %u tokens (policy %u, thinned "
           "%u times)\n",
           (double)budget / 1024, cs.count, (double)cs.bytes / 1024, cs.interval, cs.base_interval,
           cs.n_thinned);
    CHECK(cs.bytes <= budget);
    CHECK_INT(cs.interval, 512);
    CHECK_INT(cs.base_interval, 256);
    CHECK_INT(cs.n_thinned, 1);
    CHECK_INT(cs.count, 2); /* 512 and 1024 */
    CHECK_INT(halo_session_rewind(s, 1000, &err), HALO_OK);
    halo_session_checkpoint_stats(s, &cs);
    CHECK_INT(cs.last_replayed, 1000 - 512);
    CHECK_INT(halo_session_eval(s, seq->tokens + 1000, n - 1000, true, &err), HALO_OK);
    if (want)
        fixture_same(halo_session_logits(s, NULL), want + (size_t)1000 * V, (size_t)(n - 1000) * V,
                     "after thinning");
    /* No checkpoints at all: a rewind replays from the start. */
    pol.interval = UINT32_MAX;
    CHECK_INT(halo_session_set_checkpoints(s, &pol, &err), HALO_OK);
    CHECK_INT(halo_session_rewind(s, 200, &err), HALO_OK);
    halo_session_checkpoint_stats(s, &cs);
    CHECK_INT(cs.last_replayed, 200);
    CHECK_INT(cs.count, 0);
    free(want);
    halo_session_free(s);
    halo_engine_close(e);
}

int main(void) {
    checkpoint_memory_stays_within_its_budget();
    /* tiny-a: largest ratio 128, window 128 (256); tiny-yarn: 128 and 64 (192); both rounded
     * up to the 512-token forward. */
    rewind_to_every_position("tiny-a", "f32", 512);
    rewind_to_every_position("tiny-yarn", "f16", 512);
    halo_golden_close(fixture_golden());
    return check_failures ? 1 : 0;
}
