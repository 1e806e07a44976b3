/* The golden fixtures and their comparison library: the manifest describes the committed files,
 * the two oracles agree on them, and a comparison finds the first position that was perturbed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "golden/golden.h"

static halo_golden *g;

static const halo_golden_variant *variant(const char *model, const char *var) {
    const halo_golden_variant *v = NULL;
    halo_error err = {0};
    CHECK_INT(halo_golden_variant_get(g, model, var, &v, &err), HALO_OK);
    if (!v) fprintf(stderr, "%s\n", err.message);
    return v;
}

static void golden_manifest_lists_sequences_over_shared_tokens(void) {
    static const int lengths[] = {1, 7, 64, 127, 128, 129, 300, 520, 1100};
    CHECK_INT(halo_golden_n_seqs(g), 9);
    CHECK_INT(halo_golden_n_vocab(g), 256);
    int64_t off = 0;
    for (int i = 0; i < halo_golden_n_seqs(g) && i < 9; i++) {
        const halo_golden_seq *s = halo_golden_seq_at(g, i);
        CHECK_INT(s->length, lengths[i]);
        CHECK_INT(s->offset, off);
        for (int t = 0; t < s->length; t++)
            CHECK(s->tokens[t] >= 0 && s->tokens[t] < 256);
        off += s->length;
    }
    CHECK(halo_golden_seq_find(g, "L129") == halo_golden_seq_at(g, 5));
    CHECK(halo_golden_seq_find(g, "L2") == NULL);
}

static void golden_variants_load_with_their_files(void) {
    static const char *models[] = {"tiny-a", "tiny-yarn"}, *vars[] = {"f32", "f16"};
    for (int m = 0; m < 2; m++) {
        for (int k = 0; k < 2; k++) {
            const halo_golden_variant *v = variant(models[m], vars[k]);
            if (!v) continue;
            CHECK_INT(v->n_rows, 2376);
            CHECK_INT(v->n_greedy, 2);
            FILE *f = fopen(v->gguf_path, "rb");
            CHECK(f != NULL);
            if (f) fclose(f);
            for (int i = 0; i < v->n_greedy; i++) {
                CHECK_INT(v->greedy[i].steps, 32);
                /* the recorded token is the argmax of the recorded step logits */
                for (int s = 0; s < v->greedy[i].steps; s++) {
                    const float *row = v->greedy_logits + (v->greedy[i].row + s) * v->n_vocab;
                    int best = 0;
                    for (int t = 1; t < v->n_vocab; t++)
                        if (row[t] > row[best]) best = t;
                    CHECK_INT(best, v->greedy[i].ref_tokens[s]);
                }
            }
            /* margins are non-negative or +inf; position 0 has no compressed row to choose */
            for (int64_t p = 0; p < v->n_rows * 2; p++)
                CHECK(v->margins[p] >= 0.0f);
            CHECK(isinf(v->margins[1]));
        }
    }
    const halo_golden_variant *v = NULL;
    halo_error err = {0};
    CHECK_INT(halo_golden_variant_get(g, "tiny-b", "f32", &v, &err), HALO_E_NOT_FOUND);
    CHECK_CONTAINS(err.message, "tiny-b");
}

static void golden_reference_matches_itself(void) {
    const halo_golden_variant *v = variant("tiny-a", "f32");
    if (!v) return;
    halo_golden_cmp c;
    halo_golden_compare(v->logits, v->logits, v->margins, v->n_rows, v->n_vocab, 1e-6, &c);
    CHECK(c.max_abs == 0.0);
    CHECK_INT(c.first_bad, -1);
    CHECK_INT(c.top1_agree, v->n_rows);
    CHECK(c.ref_range > 1.0);
}

/* The second oracle, llama.cpp, against the first, transformers: float32 rounding everywhere. */
static void golden_llamacpp_agrees_with_transformers(void) {
    const halo_golden_variant *v = variant("tiny-a", "f32");
    if (!v) return;
    CHECK(v->llama_logits != NULL);
    if (!v->llama_logits) return;
    for (int i = 0; i < halo_golden_n_seqs(g); i++) {
        const halo_golden_seq *s = halo_golden_seq_at(g, i);
        halo_golden_cmp c;
        halo_golden_compare_seq(v, s, v->llama_logits + s->offset * v->n_vocab, 1e-5, &c);
        char line[512];
        halo_golden_format(&c, line, sizeof(line));
        printf("  tiny-a f32 %-6s llama.cpp vs transformers: %s\n", s->name, line);
        CHECK(c.rel < 1e-5);
        CHECK_INT(c.first_bad, -1);
        CHECK_INT(c.top1_agree, s->length);
    }
    for (int i = 0; i < v->n_greedy; i++)
        CHECK(memcmp(v->greedy[i].ref_tokens, v->greedy[i].llama_tokens,
                     sizeof(int32_t) * (size_t)v->greedy[i].steps) == 0);
}

static float *copy_seq(const halo_golden_variant *v, const halo_golden_seq *s) {
    size_t n = (size_t)s->length * (size_t)v->n_vocab;
    float *x = malloc(n * sizeof(float));
    if (x) memcpy(x, v->logits + s->offset * v->n_vocab, n * sizeof(float));
    return x;
}

static void golden_reports_first_perturbed_position(void) {
    const halo_golden_variant *v = variant("tiny-yarn", "f32");
    const halo_golden_seq *s = halo_golden_seq_find(g, "L129");
    if (!v || !s) return;
    float *x = copy_seq(v, s);
    if (!x) return;
    halo_golden_cmp c;
    halo_golden_compare_seq(v, s, x, 1e-3, &c);
    const double range = c.ref_range;

    x[37 * v->n_vocab + 11] += (float)(0.01 * range);   /* beyond 1e-3 of the range */
    x[100 * v->n_vocab + 200] -= (float)(0.05 * range); /* larger, but later */
    x[20 * v->n_vocab + 3] += (float)(1e-5 * range);    /* within tolerance */
    halo_golden_compare_seq(v, s, x, 1e-3, &c);
    CHECK_INT(c.first_bad, 37);
    CHECK_INT(c.max_abs_pos, 100);
    CHECK(fabs(c.first_bad_abs - 0.01 * range) < 1e-4 * range);
    CHECK(fabs(c.rel - 0.05) < 1e-3);
    const float *m = v->margins + (s->offset + 37) * 2;
    CHECK(c.bad_moe_margin == m[0]);
    CHECK(c.bad_index_margin == m[1]);
    CHECK(c.prefix_moe_margin <= m[0] && c.prefix_index_margin <= m[1]);
    char line[512];
    halo_golden_format(&c, line, sizeof(line));
    CHECK_CONTAINS(line, "first-bad 37");

    halo_golden_compare_seq(v, s, x, 0.1, &c); /* a loose tolerance accepts all three */
    CHECK_INT(c.first_bad, -1);
    free(x);
}

/* Swapping the two best logits of a position is a tie when they are closer than the tolerance
 * and a disagreement when they are not. */
static void golden_top1_flip_counts_only_beyond_a_tie(void) {
    const halo_golden_variant *v = variant("tiny-a", "f32");
    const halo_golden_seq *s = halo_golden_seq_find(g, "L1100");
    if (!v || !s) return;
    float *x = copy_seq(v, s);
    if (!x) return;
    int64_t best_p = -1;
    double best_gap = INFINITY;
    int a = 0, b = 0;
    for (int64_t p = 0; p < s->length; p++) {
        const float *r = x + p * v->n_vocab;
        int t1 = 0, t2 = -1;
        for (int t = 1; t < v->n_vocab; t++) {
            if (r[t] > r[t1]) {
                t2 = t1;
                t1 = t;
            } else if (t2 < 0 || r[t] > r[t2]) {
                t2 = t;
            }
        }
        if (t2 >= 0 && r[t1] - r[t2] < best_gap && r[t1] > r[t2]) {
            best_gap = r[t1] - r[t2];
            best_p = p;
            a = t1;
            b = t2;
        }
    }
    CHECK(best_p >= 0);
    if (best_p < 0) {
        free(x);
        return;
    }
    float *r = x + best_p * v->n_vocab;
    float tmp = r[a];
    r[a] = r[b];
    r[b] = tmp;
    halo_golden_cmp c;
    halo_golden_compare_seq(v, s, x, 0, &c);
    const double range = c.ref_range;
    halo_golden_compare_seq(v, s, x, 2.0 * best_gap / range, &c);
    CHECK_INT(c.first_bad, -1);
    CHECK_INT(c.top1_agree, s->length - 1);
    halo_golden_compare_seq(v, s, x, 0.5 * best_gap / range, &c);
    CHECK_INT(c.first_bad, best_p);
    CHECK_INT(c.first_bad_top1, 1);
    free(x);
}

static void golden_near_tie_needs_a_small_recorded_margin(void) {
    enum { P = 16, V = 4 };
    float ref[P * V], got[P * V], margins[P * 2];
    for (int i = 0; i < P * V; i++)
        ref[i] = got[i] = (float)((i * 7) % 13);
    for (int i = 0; i < P * 2; i++)
        margins[i] = 1.0f;
    margins[5 * 2 + 1] = 1e-7f; /* an indexer choice decided by 1e-7 at position 5 */
    got[10 * V + 2] += 5.0f;
    halo_golden_cmp c;
    halo_golden_compare(ref, got, margins, P, V, 1e-3, &c);
    CHECK_INT(c.first_bad, 10);
    CHECK_INT(c.prefix_index_pos, 5);
    CHECK(halo_golden_near_tie(&c, 1e-5f));
    CHECK(!halo_golden_near_tie(&c, 1e-8f));
    margins[5 * 2 + 1] = INFINITY; /* no decision there: nothing explains the difference */
    halo_golden_compare(ref, got, margins, P, V, 1e-3, &c);
    CHECK(!halo_golden_near_tie(&c, 1e-5f));
    got[3] = NAN; /* NaN is a disagreement, not a pass */
    halo_golden_compare(ref, got, margins, P, V, 1e-3, &c);
    CHECK_INT(c.first_bad, 0);
}

/* Different models disagree at once: the comparison is not vacuous. */
static void golden_other_model_disagrees_at_first_position(void) {
    const halo_golden_variant *a = variant("tiny-a", "f32"), *y = variant("tiny-yarn", "f32");
    const halo_golden_variant *h = variant("tiny-a", "f16");
    if (!a || !y || !h) return;
    halo_golden_cmp c;
    halo_golden_compare(a->logits, y->logits, a->margins, a->n_rows, a->n_vocab, 1e-3, &c);
    CHECK_INT(c.first_bad, 0);
    CHECK(c.rel > 0.1);
    /* F16 weights move transformers' own logits by far more than float32 rounding */
    halo_golden_compare(a->logits, h->logits, a->margins, a->n_rows, a->n_vocab, 1e-5, &c);
    CHECK(c.first_bad >= 0);
    CHECK(c.rel > 1e-4);
}

int main(void) {
    halo_error err = {0};
    if (halo_golden_open("tests/golden", &g, &err) != HALO_OK) {
        fprintf(stderr, "halo_golden_open: %s\n", err.message);
        return 1;
    }
    RUN(golden_manifest_lists_sequences_over_shared_tokens);
    RUN(golden_variants_load_with_their_files);
    RUN(golden_reference_matches_itself);
    RUN(golden_llamacpp_agrees_with_transformers);
    RUN(golden_reports_first_perturbed_position);
    RUN(golden_top1_flip_counts_only_beyond_a_tie);
    RUN(golden_near_tie_needs_a_small_recorded_margin);
    RUN(golden_other_model_disagrees_at_first_position);
    halo_golden_close(g);
    return check_report();
}
