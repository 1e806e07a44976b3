/* The whole forward through the Vulkan backend (on Mesa lavapipe in CI) against the oracles'
 * logits (tests/golden): every golden variant (F32, F16, and the quantized mixes: IQ2_XXS /
 * Q2_K / Q8_0 / F16, Q4_K_M, MXFP4 / BF16 / Q8_0) within 1e-3 of the reference's range at
 * every position with top-1 identical (a flip only at a recorded near-tie). The Vulkan shaders
 * keep activations f32 and decode weights inside the dot, so the quantized variants are held
 * to the CPU backend's precise-mode bound. Evaluation in chunks and token by token equals the
 * prefill, and greedy continuations equal transformers'. lavapipe is slow, so sequences are
 * sampled (HALO_VK_TEST_ALL=1 runs every one). Skips (exit 77) when no Vulkan device works. */
#include <math.h>
#include <stdlib.h>

#include "backend/vulkan/vulkan.h"
#include "check.h"
#include "golden/golden.h"
#include "halo/halo.h"

#define TOL_REL 1e-3
#define TOL_INCREMENTAL 1e-4
#define NEAR_TIE 1e-3f

static halo_golden *golden;
static bool all_seqs;

static const struct {
    const char *model, *variant;
} variants[] = {{"tiny-a", "f32"}, {"tiny-a", "f16"},  {"tiny-yarn", "f32"}, {"tiny-yarn", "f16"},
                {"tiny-q", "ds4"}, {"tiny-q", "q4km"}, {"tiny-m", "mxfp4"}};
#define N_VARIANTS (sizeof variants / sizeof variants[0])
/* Sampled sequences: one token, a short one, across the 128-row window and compression
 * boundaries, and a long one (the longest on one variant only). */
static const char *sampled[] = {"L1", "L7", "L129", "L300"};

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
    halo_engine_params p = {.model_path = v->gguf_path, .backend = "vulkan", .precise = true};
    if (halo_engine_open(&p, &e, &err)) {
        fprintf(stderr, "  %s\n", err.message);
        check_failures++;
    }
    return e;
}

static float *eval(halo_engine *e, const int32_t *tokens, int32_t n, int32_t chunk) {
    uint32_t V = halo_engine_n_vocab(e);
    float *all = calloc((size_t)n * V, sizeof *all);
    halo_session *s = NULL;
    halo_error err = {0};
    CHECK_INT(halo_session_create(e, (uint32_t)n, &s, &err), HALO_OK);
    if (!chunk) chunk = n;
    for (int32_t at = 0; s && at < n; at += chunk) {
        int32_t m = n - at < chunk ? n - at : chunk;
        halo_status st = halo_session_eval(s, tokens + at, (uint32_t)m, true, &err);
        CHECK_INT(st, HALO_OK);
        if (st) {
            fprintf(stderr, "  %s\n", err.message);
            break;
        }
        uint32_t rows;
        const float *l = halo_session_logits(s, &rows);
        memcpy(all + (size_t)at * V, l, (size_t)rows * V * sizeof *l);
    }
    halo_session_free(s);
    return all;
}

static bool wanted(const halo_golden_seq *seq) {
    const char *only = getenv("HALO_VK_TEST_ONLY"); /* one sequence, for diagnosis */
    if (only && *only) return !strcmp(seq->name, only);
    if (all_seqs) return true;
    for (size_t i = 0; i < sizeof sampled / sizeof *sampled; i++)
        if (!strcmp(seq->name, sampled[i])) return true;
    return false;
}

static void every_variant_matches_the_oracle(void) {
    for (size_t k = 0; k < N_VARIANTS; k++) {
        const halo_golden_variant *v = variant(variants[k].model, variants[k].variant);
        halo_engine *e = v ? open_engine(v) : NULL;
        for (int i = 0; e && i < halo_golden_n_seqs(golden); i++) {
            const halo_golden_seq *seq = halo_golden_seq_at(golden, i);
            if (!halo_golden_variant_has_seq(v, seq) || !wanted(seq)) continue;
            float *got = eval(e, seq->tokens, (int32_t)seq->length, 0);
            halo_golden_cmp c;
            halo_golden_compare_seq(v, seq, got, TOL_REL, &c);
            char line[256];
            halo_golden_format(&c, line, sizeof line);
            bool tie = c.first_bad >= 0 && halo_golden_near_tie(&c, NEAR_TIE);
            printf("  vulkan %s-%s %-5s %s%s\n", v->model, v->variant, seq->name, line,
                   tie ? "  (near-tie flip)" : "");
            CHECK(c.first_bad < 0 || tie);
            free(got);
        }
        halo_engine_close(e);
    }
}

static double max_rel_diff(const float *a, const float *b, size_t n) {
    float lo = b[0], hi = b[0];
    double d = 0;
    for (size_t i = 0; i < n; i++) {
        lo = b[i] < lo ? b[i] : lo;
        hi = b[i] > hi ? b[i] : hi;
        double x = fabs((double)a[i] - b[i]);
        d = x > d ? x : d;
    }
    return hi > lo ? d / (hi - lo) : d;
}

static void chunked_and_token_by_token_equal_prefill(void) {
    static const struct {
        const char *model, *seq;
        int32_t chunk;
    } cases[] = {{"tiny-a", "L300", 7}, {"tiny-yarn", "L129", 1}, {"tiny-a", "L129", 37}};
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        const halo_golden_variant *v = variant(cases[k].model, "f32");
        const halo_golden_seq *seq = halo_golden_seq_find(golden, cases[k].seq);
        halo_engine *e = v && seq ? open_engine(v) : NULL;
        if (!e) continue;
        int32_t n = (int32_t)seq->length;
        float *full = eval(e, seq->tokens, n, 0), *part = eval(e, seq->tokens, n, cases[k].chunk);
        double d = max_rel_diff(part, full, (size_t)n * halo_engine_n_vocab(e));
        printf("  vulkan %s %s chunks of %d vs prefill: rel %.2e\n", cases[k].model, cases[k].seq,
               cases[k].chunk, d);
        CHECK(d < TOL_INCREMENTAL);
        free(full);
        free(part);
        halo_engine_close(e);
    }
}

static int argmax(const float *l, uint32_t n) {
    int best = 0;
    for (uint32_t t = 1; t < n; t++)
        if (l[t] > l[best]) best = (int)t;
    return best;
}

static void greedy_continuations_match(void) {
    const halo_golden_variant *v = variant("tiny-a", "f32");
    halo_engine *e = v ? open_engine(v) : NULL;
    for (int g = 0; e && g < v->n_greedy && g < 2; g++) {
        const halo_golden_greedy *run = &v->greedy[g];
        const halo_golden_seq *prompt = halo_golden_seq_find(golden, run->prompt);
        halo_session *s = NULL;
        halo_error err = {0};
        CHECK_INT(halo_session_create(e, (uint32_t)(prompt->length + run->steps), &s, &err),
                  HALO_OK);
        if (!s) continue;
        CHECK_INT(halo_session_eval(s, prompt->tokens, (uint32_t)prompt->length, false, &err),
                  HALO_OK);
        int same = 0;
        for (int step = 0; step < run->steps; step++) {
            int tok = argmax(halo_session_logits(s, NULL), halo_engine_n_vocab(e));
            if (tok != run->ref_tokens[step]) {
                printf("  vulkan greedy from %s: step %d chose %d, transformers %d (margin %g)\n",
                       run->prompt, step, tok, run->ref_tokens[step],
                       (double)run->ref_margins[step]);
                CHECK(run->ref_margins[step] < NEAR_TIE);
                break;
            }
            same++;
            int32_t t = tok;
            CHECK_INT(halo_session_eval(s, &t, 1, false, &err), HALO_OK);
        }
        printf("  vulkan greedy from %-6s %d/%d tokens identical\n", run->prompt, same, run->steps);
        halo_session_free(s);
    }
    halo_engine_close(e);
}

int main(void) {
    halo_backend *be = NULL;
    halo_error err = {0};
    if (halo_backend_vulkan_create(-1, &be, &err)) {
        printf("skipped: %s\n", err.message);
        return 77;
    }
    printf("device: %s\n", halo_backend_vulkan_device_name(be));
    be->ops->destroy(be);
    all_seqs = getenv("HALO_VK_TEST_ALL") && atoi(getenv("HALO_VK_TEST_ALL"));
    if (halo_golden_open("tests/golden", &golden, &err)) {
        fprintf(stderr, "%s\n", err.message);
        return 1;
    }
    RUN(every_variant_matches_the_oracle);
    RUN(chunked_and_token_by_token_equal_prefill);
    RUN(greedy_continuations_match);
    halo_golden_close(golden);
    return check_report();
}
