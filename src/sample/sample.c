/* Samplers. One pass builds the candidate set: penalties and temperature touch only a copy of
 * the logits, min-p is a threshold on the logits (p_i >= min_p * p_max <=> l_i >= l_max +
 * log(min_p)), so with the default min-p 0.05 a 129k vocabulary shrinks to a handful of
 * candidates before anything is sorted. Only top-p needs an order; top-k needs a selection. */
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "halo/sample.h"

typedef struct cand {
    float logit;
    int32_t id;
} cand;

struct halo_sampler {
    halo_sampler_params p;
    uint32_t n_vocab;
    uint64_t rng[4];
    float *scratch;   /* n_vocab adjusted logits */
    cand *cands;      /* n_vocab */
    uint32_t *counts; /* occurrences in the window, per token */
    int32_t *window;  /* ring of the last penalty_last_n tokens */
    uint32_t win_n, win_at;
};

halo_sampler_params halo_sampler_defaults(void) {
    return (halo_sampler_params){.temperature = 1.0f,
                                 .top_k = 0,
                                 .top_p = 1.0f,
                                 .min_p = 0.05f,
                                 .repeat_penalty = 1.0f,
                                 .frequency_penalty = 0.0f,
                                 .presence_penalty = 0.0f,
                                 .penalty_last_n = 64,
                                 .seed = 0};
}

/* ---- generator ------------------------------------------------------------------------ */

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) {
    return (x << k) | (x >> (64 - k));
}

static uint64_t next_u64(uint64_t s[4]) { /* xoshiro256** */
    uint64_t r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return r;
}

static double next_unit(uint64_t s[4]) { /* [0, 1) with 53 bits */
    return (double)(next_u64(s) >> 11) * (1.0 / 9007199254740992.0);
}

/* ---- lifecycle ------------------------------------------------------------------------- */

halo_status halo_sampler_create(const halo_sampler_params *p, uint32_t n_vocab, halo_sampler **out,
                                halo_error *err) {
    *out = NULL;
    if (!n_vocab) return halo_fail(err, HALO_E_INVALID_ARG, "sampler: empty vocabulary");
    if (!(p->top_p > 0.0f && p->top_p <= 1.0f))
        return halo_fail(err, HALO_E_INVALID_ARG, "sampler: top-p %g is not in (0, 1]", p->top_p);
    if (!(p->min_p >= 0.0f && p->min_p <= 1.0f))
        return halo_fail(err, HALO_E_INVALID_ARG, "sampler: min-p %g is not in [0, 1]", p->min_p);
    if (!(p->repeat_penalty > 0.0f) || isnan(p->temperature) || !isfinite(p->frequency_penalty) ||
        !isfinite(p->presence_penalty))
        return halo_fail(err, HALO_E_INVALID_ARG,
                         "sampler: repeat penalty must be > 0 and "
                         "temperature and penalties numbers");
    halo_sampler *s = calloc(1, sizeof *s);
    if (!s) return halo_fail(err, HALO_E_NOMEM, "sampler: out of memory");
    s->p = *p;
    s->n_vocab = n_vocab;
    s->scratch = malloc(sizeof *s->scratch * n_vocab);
    s->cands = malloc(sizeof *s->cands * n_vocab);
    s->counts = calloc(n_vocab, sizeof *s->counts);
    s->window = malloc(sizeof *s->window * (p->penalty_last_n ? p->penalty_last_n : 1));
    if (!s->scratch || !s->cands || !s->counts || !s->window) {
        halo_sampler_free(s);
        return halo_fail(err, HALO_E_NOMEM, "sampler: out of memory for %u tokens", n_vocab);
    }
    halo_sampler_reset(s);
    *out = s;
    return HALO_OK;
}

void halo_sampler_free(halo_sampler *s) {
    if (!s) return;
    free(s->scratch);
    free(s->cands);
    free(s->counts);
    free(s->window);
    free(s);
}

void halo_sampler_reset(halo_sampler *s) {
    uint64_t x = s->p.seed;
    for (int i = 0; i < 4; i++)
        s->rng[i] = splitmix64(&x);
    memset(s->counts, 0, sizeof *s->counts * s->n_vocab);
    s->win_n = s->win_at = 0;
}

void halo_sampler_accept(halo_sampler *s, int32_t token) {
    uint32_t n = s->p.penalty_last_n;
    if (!n || token < 0 || (uint32_t)token >= s->n_vocab) return;
    if (s->win_n == n)
        s->counts[s->window[s->win_at]]--; /* the oldest leaves the window */
    else
        s->win_n++;
    s->window[s->win_at] = token;
    s->counts[token]++;
    s->win_at = (s->win_at + 1) % n;
}

/* ---- the distribution ----------------------------------------------------------------- */

static bool penalties_on(const halo_sampler_params *p) {
    return p->penalty_last_n && (p->repeat_penalty != 1.0f || p->frequency_penalty != 0.0f ||
                                 p->presence_penalty != 0.0f);
}

/* Logits after penalties, in s->scratch. */
static const float *penalized(halo_sampler *s, const float *logits) {
    if (!penalties_on(&s->p) || !s->win_n) return logits;
    memcpy(s->scratch, logits, sizeof *logits * s->n_vocab);
    for (uint32_t i = 0; i < s->win_n; i++) {
        int32_t t = s->window[i];
        uint32_t c = s->counts[t];
        if (!c) continue; /* already handled: its count was zeroed below */
        float l = s->scratch[t];
        /* CTRL's repetition penalty: shrink a positive logit, grow a negative one. */
        l = l > 0 ? l / s->p.repeat_penalty : l * s->p.repeat_penalty;
        l -= (float)c * s->p.frequency_penalty + s->p.presence_penalty;
        s->scratch[t] = l;
        s->counts[t] = 0;
    }
    for (uint32_t i = 0; i < s->win_n; i++)
        s->counts[s->window[i]]++; /* restore */
    return s->scratch;
}

static int32_t argmax(const float *l, uint32_t n) {
    int32_t best = 0;
    for (uint32_t i = 1; i < n; i++)
        if (l[i] > l[best]) best = (int32_t)i;
    return best;
}

static int cmp_desc(const void *a, const void *b) {
    const cand *x = a, *y = b;
    if (x->logit != y->logit) return x->logit < y->logit ? 1 : -1;
    return x->id < y->id ? -1 : x->id > y->id; /* stable across libc qsort implementations */
}

/* Moves the k largest candidates to the front (quickselect), unordered. */
static void select_top(cand *c, ptrdiff_t n, ptrdiff_t k) {
    ptrdiff_t lo = 0, hi = n - 1;
    while (hi > lo) {
        float pivot = c[lo + (hi - lo) / 2].logit;
        ptrdiff_t i = lo, j = hi;
        while (i <= j) {
            while (c[i].logit > pivot)
                i++;
            while (c[j].logit < pivot)
                j--;
            if (i <= j) {
                cand t = c[i];
                c[i++] = c[j];
                c[j--] = t;
            }
        }
        /* [lo, j] >= pivot >= [i, hi]; between them everything equals the pivot. */
        if (k - 1 <= j)
            hi = j;
        else if (k - 1 >= i)
            lo = i;
        else
            break;
    }
}

/* Fills s->cands with the surviving candidates, sorted by logit (descending), their weights
 * exp((l - l_max) / T) in .logit on return; returns the count and their weight sum. */
static size_t candidates(halo_sampler *s, const float *logits, double *sum) {
    const float *l = penalized(s, logits);
    float inv_t = 1.0f / s->p.temperature;
    float max = l[argmax(l, s->n_vocab)] * inv_t;
    /* min-p relative to the most likely token, on tempered logits. */
    float floor_l = s->p.min_p > 0.0f ? max + logf(s->p.min_p) : -INFINITY;
    size_t n = 0;
    for (uint32_t i = 0; i < s->n_vocab; i++) {
        float v = l[i] * inv_t;
        if (v >= floor_l && v > -INFINITY) s->cands[n++] = (cand){v, (int32_t)i};
    }
    if (s->p.top_k && s->p.top_k < n) {
        select_top(s->cands, (ptrdiff_t)n, (ptrdiff_t)s->p.top_k);
        n = s->p.top_k;
    }
    qsort(s->cands, n, sizeof *s->cands, cmp_desc);
    double total = 0;
    for (size_t i = 0; i < n; i++) {
        s->cands[i].logit = expf(s->cands[i].logit - max);
        total += s->cands[i].logit;
    }
    if (s->p.top_p < 1.0f) { /* smallest prefix whose mass reaches top_p */
        double acc = 0;
        for (size_t i = 0; i < n; i++) {
            acc += s->cands[i].logit;
            if (acc >= s->p.top_p * total) {
                n = i + 1;
                total = acc;
                break;
            }
        }
    }
    *sum = total;
    return n;
}

int32_t halo_sampler_sample(halo_sampler *s, const float *logits) {
    if (s->p.temperature <= 0.0f) return argmax(penalized(s, logits), s->n_vocab);
    double total;
    size_t n = candidates(s, logits, &total);
    if (n == 0) return argmax(penalized(s, logits), s->n_vocab); /* all logits -inf or NaN */
    double r = next_unit(s->rng) * total, acc = 0;
    for (size_t i = 0; i < n; i++) {
        acc += s->cands[i].logit;
        if (r < acc) return s->cands[i].id;
    }
    return s->cands[n - 1].id; /* rounding left r at the very top */
}

void halo_sampler_probs(halo_sampler *s, const float *logits, float *probs) {
    memset(probs, 0, sizeof *probs * s->n_vocab);
    if (s->p.temperature <= 0.0f) {
        probs[argmax(penalized(s, logits), s->n_vocab)] = 1.0f;
        return;
    }
    double total;
    size_t n = candidates(s, logits, &total);
    for (size_t i = 0; i < n; i++)
        probs[s->cands[i].id] = (float)(s->cands[i].logit / total);
}
