/* Samplers: draws follow the intended distribution (chi-square against probabilities computed
 * here independently), filters remove exactly the tokens they should, penalties move the
 * logits by the documented amounts, and the same seed gives the same tokens. */
#include <math.h>
#include <stdlib.h>

#include "check.h"
#include "halo/sample.h"

#define N 8
static const float logits[N] = {2.0f, 1.5f, 1.0f, 0.5f, 0.0f, -0.5f, -1.0f, -3.0f};

/* softmax(logits / t) restricted to keep[], renormalised. */
static void expected(float t, const int *keep, double *p) {
    double sum = 0;
    for (int i = 0; i < N; i++)
        sum += keep[i] ? exp(logits[i] / t) : 0;
    for (int i = 0; i < N; i++)
        p[i] = keep[i] ? exp(logits[i] / t) / sum : 0;
}

/* Draws `draws` tokens; checks none outside keep[] and returns the chi-square statistic. */
static double chi_square(halo_sampler *s, const double *p, int draws, int *df) {
    long counts[N] = {0};
    for (int i = 0; i < draws; i++) {
        int32_t t = halo_sampler_sample(s, logits);
        CHECK(t >= 0 && t < N);
        if (t >= 0 && t < N) counts[t]++;
    }
    double chi = 0;
    *df = -1;
    for (int i = 0; i < N; i++) {
        if (p[i] == 0) {
            CHECK_INT(counts[i], 0);
            continue;
        }
        double e = p[i] * draws;
        chi += (counts[i] - e) * (counts[i] - e) / e;
        (*df)++;
    }
    return chi;
}

/* Chi-square critical values at p = 0.001 for 1..7 degrees of freedom. */
static const double critical[8] = {0, 10.83, 13.82, 16.27, 18.47, 20.52, 22.46, 24.32};

static void check_distribution(halo_sampler_params sp, const int *keep) {
    halo_sampler *s = NULL;
    halo_error err;
    CHECK_INT(halo_sampler_create(&sp, N, &s, &err), HALO_OK);
    if (!s) return;
    double p[N];
    expected(sp.temperature, keep, p);
    float probs[N];
    halo_sampler_probs(s, logits, probs);
    for (int i = 0; i < N; i++)
        CHECK(fabs(probs[i] - p[i]) < 1e-5);
    int df;
    double chi = chi_square(s, p, 200000, &df);
    CHECK(df >= 1 && df <= 7);
    if (df >= 1 && df <= 7 && chi >= critical[df])
        fprintf(stderr, "  chi-square %.2f >= %.2f (df %d)\n", chi, critical[df], df);
    CHECK(df >= 1 && df <= 7 && chi < critical[df]);
    halo_sampler_free(s);
}

static halo_sampler_params plain(float t, uint64_t seed) {
    halo_sampler_params p = halo_sampler_defaults();
    p.temperature = t;
    p.min_p = 0;
    p.seed = seed;
    return p;
}

static void temperature_draws_follow_softmax(void) {
    int all[N] = {1, 1, 1, 1, 1, 1, 1, 1};
    check_distribution(plain(1.0f, 1), all);
    check_distribution(plain(0.5f, 2), all);
    check_distribution(plain(2.0f, 3), all);
}

static void top_k_keeps_the_k_most_likely(void) {
    halo_sampler_params p = plain(1.0f, 4);
    p.top_k = 3;
    int keep[N] = {1, 1, 1, 0, 0, 0, 0, 0};
    check_distribution(p, keep);
}

static void top_p_keeps_the_smallest_set_reaching_p(void) {
    /* softmax: .4046 .2454 .1488 .0903 ..., cumulative .4046 .6500 .7989 .8892 ... */
    halo_sampler_params p = plain(1.0f, 5);
    p.top_p = 0.7f;
    int keep[N] = {1, 1, 1, 0, 0, 0, 0, 0};
    check_distribution(p, keep);
    p.top_p = 0.5f;
    p.seed = 6;
    int keep2[N] = {1, 1, 0, 0, 0, 0, 0, 0};
    check_distribution(p, keep2);
}

static void min_p_drops_tokens_below_a_fraction_of_the_best(void) {
    /* p_i / p_max = exp(l_i - 2): 1, .61, .37, .22, .135, .082, .05, .0067 */
    halo_sampler_params p = plain(1.0f, 7);
    p.min_p = 0.1f;
    int keep[N] = {1, 1, 1, 1, 1, 0, 0, 0};
    check_distribution(p, keep);
    /* The defaults (min-p 0.05) drop only the last token here. */
    p = halo_sampler_defaults();
    p.seed = 8;
    CHECK(p.temperature == 1.0f && p.top_p == 1.0f && p.min_p == 0.05f && p.top_k == 0);
    int keep2[N] = {1, 1, 1, 1, 1, 1, 0, 0};
    check_distribution(p, keep2);
}

static void greedy_takes_the_argmax_after_penalties(void) {
    halo_sampler_params p = plain(0.0f, 9);
    halo_sampler *s = NULL;
    halo_error err;
    CHECK_INT(halo_sampler_create(&p, N, &s, &err), HALO_OK);
    for (int i = 0; i < 5; i++)
        CHECK_INT(halo_sampler_sample(s, logits), 0);
    halo_sampler_free(s);
    p.repeat_penalty = 2.0f; /* token 0: 2.0 -> 1.0, below token 1's 1.5 */
    CHECK_INT(halo_sampler_create(&p, N, &s, &err), HALO_OK);
    halo_sampler_accept(s, 0);
    CHECK_INT(halo_sampler_sample(s, logits), 1);
    halo_sampler_free(s);
}

static void penalties_move_logits_by_the_documented_amounts(void) {
    halo_sampler_params p = plain(1.0f, 10);
    p.repeat_penalty = 1.5f;
    p.frequency_penalty = 0.25f;
    p.presence_penalty = 0.5f;
    p.penalty_last_n = 4;
    halo_sampler *s = NULL;
    halo_error err;
    CHECK_INT(halo_sampler_create(&p, N, &s, &err), HALO_OK);
    /* Window after these: 5 1 1 6 (token 0 has left it). */
    int32_t seen[] = {0, 5, 1, 1, 6};
    for (int i = 0; i < 5; i++)
        halo_sampler_accept(s, seen[i]);
    float adj[N];
    for (int i = 0; i < N; i++)
        adj[i] = logits[i];
    adj[1] = 1.5f / 1.5f - 2 * 0.25f - 0.5f;  /* positive: divided */
    adj[5] = -0.5f * 1.5f - 1 * 0.25f - 0.5f; /* negative: multiplied */
    adj[6] = -1.0f * 1.5f - 1 * 0.25f - 0.5f;
    double sum = 0, e[N];
    for (int i = 0; i < N; i++)
        sum += exp(adj[i]);
    float probs[N];
    halo_sampler_probs(s, logits, probs);
    for (int i = 0; i < N; i++) {
        e[i] = exp(adj[i]) / sum;
        CHECK(fabs(probs[i] - e[i]) < 1e-5);
    }
    halo_sampler_free(s);
}

static void same_seed_same_tokens(void) {
    enum { V = 129280, STEPS = 200 };
    float *l = malloc(sizeof *l * V);
    unsigned x = 42;
    for (int i = 0; i < V; i++) {
        x = x * 1664525u + 1013904223u;
        l[i] = (float)(x >> 8) / (float)(1u << 24) * 12.0f - 6.0f;
    }
    halo_sampler_params p = halo_sampler_defaults();
    p.min_p = 0.0f;
    p.top_k = 40;
    p.top_p = 0.95f;
    p.temperature = 0.8f;
    p.repeat_penalty = 1.1f;
    int32_t a[STEPS], b[STEPS], c[STEPS];
    for (int run = 0; run < 3; run++) {
        p.seed = run == 2 ? 1234 : 77;
        halo_sampler *s = NULL;
        halo_error err;
        CHECK_INT(halo_sampler_create(&p, V, &s, &err), HALO_OK);
        if (!s) break;
        int32_t *out = run == 0 ? a : run == 1 ? b : c;
        for (int i = 0; i < STEPS; i++) {
            out[i] = halo_sampler_sample(s, l);
            halo_sampler_accept(s, out[i]);
        }
        /* After reset the sampler starts over from the seed. */
        if (run == 0) {
            halo_sampler_reset(s);
            CHECK_INT(halo_sampler_sample(s, l), a[0]);
        }
        halo_sampler_free(s);
    }
    CHECK(!memcmp(a, b, sizeof a));
    CHECK(memcmp(a, c, sizeof a) != 0);
    free(l);
}

static void rejects_bad_parameters(void) {
    halo_sampler *s = NULL;
    halo_error err;
    halo_sampler_params p = halo_sampler_defaults();
    p.top_p = 0;
    CHECK_INT(halo_sampler_create(&p, N, &s, &err), HALO_E_INVALID_ARG);
    CHECK_CONTAINS(err.message, "top-p 0 is not in (0, 1]");
    p = halo_sampler_defaults();
    p.min_p = 1.5f;
    CHECK_INT(halo_sampler_create(&p, N, &s, &err), HALO_E_INVALID_ARG);
    CHECK_CONTAINS(err.message, "min-p 1.5");
    p = halo_sampler_defaults();
    CHECK_INT(halo_sampler_create(&p, 0, &s, &err), HALO_E_INVALID_ARG);
    CHECK(s == NULL);
    halo_sampler_free(NULL);
}

int main(void) {
    RUN(temperature_draws_follow_softmax);
    RUN(top_k_keeps_the_k_most_likely);
    RUN(top_p_keeps_the_smallest_set_reaching_p);
    RUN(min_p_drops_tokens_below_a_fraction_of_the_best);
    RUN(greedy_takes_the_argmax_after_penalties);
    RUN(penalties_move_logits_by_the_documented_amounts);
    RUN(same_seed_same_tokens);
    RUN(rejects_bad_parameters);
    return check_report();
}
