/* Prediction of a score-routed layer's experts one layer ahead (see predict.h). */
#include "mem/predict.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

enum { MAX_TOK = 4 };

struct halo_predict {
    halo_expert_cache *cache;
    const halo_weights *w;
    uint32_t n_expert, k, gating;
    float **bias;  /* [n_layer] the layer's selection bias (f32 in the file), or NULL */
    halo_buf *out; /* [n_expert, MAX_TOK] f32 router output */
    float *scores; /* its host copy */
    int32_t *ids;  /* [MAX_TOK·k] */
    bool *taken;   /* [n_expert] */
};

void halo_predict_free(halo_predict *p, halo_backend *be) {
    if (!p) return;
    for (uint32_t l = 0; p->bias && l < p->w->n_layer; l++)
        free(p->bias[l]);
    free(p->bias);
    if (p->out) be->ops->buf_free(be, p->out);
    free(p->scores);
    free(p->ids);
    free(p->taken);
    free(p);
}

static const char *arch_key(const halo_gguf *g, const char *name, char *buf, size_t n) {
    const char *arch = "deepseek4";
    halo_gguf_get_str(g, "general.architecture", &arch, NULL);
    snprintf(buf, n, "%s.%s", arch, name);
    return buf;
}

halo_status halo_predict_create(const halo_gguf *g, const halo_weights *w, halo_backend *be,
                                halo_expert_cache *c, halo_predict **out, halo_error *err) {
    *out = NULL;
    halo_predict *p = calloc(1, sizeof *p);
    if (!p) return halo_fail(err, HALO_E_NOMEM, "expert prediction: out of memory");
    p->cache = c;
    p->w = w;
    char key[96];
    halo_status st =
        halo_gguf_get_u32(g, arch_key(g, "expert_count", key, sizeof key), &p->n_expert, err);
    if (!st)
        st = halo_gguf_get_u32(g, arch_key(g, "expert_used_count", key, sizeof key), &p->k, err);
    if (!st)
        st = halo_gguf_get_u32(g, arch_key(g, "expert_gating_func", key, sizeof key), &p->gating,
                               err);
    if (!st && (!p->n_expert || !p->k || p->k > p->n_expert))
        st = halo_fail(err, HALO_E_BAD_VALUE, "expert prediction: %u of %u experts", p->k,
                       p->n_expert);
    if (!st) {
        p->bias = calloc(w->n_layer ? w->n_layer : 1, sizeof *p->bias);
        p->scores = malloc((size_t)p->n_expert * MAX_TOK * sizeof *p->scores);
        p->ids = malloc((size_t)p->k * MAX_TOK * sizeof *p->ids);
        p->taken = malloc(p->n_expert);
        if (!p->bias || !p->scores || !p->ids || !p->taken)
            st = halo_fail(err, HALO_E_NOMEM, "expert prediction: out of memory");
    }
    for (uint32_t l = 0; !st && l < w->n_layer; l++) {
        const halo_gguf_tensor *t = w->layer[l].probs_b.src;
        if (!t || t->type != HALO_TYPE_F32 || t->n_bytes != (uint64_t)p->n_expert * 4) continue;
        if (!(p->bias[l] = malloc(t->n_bytes)))
            st = halo_fail(err, HALO_E_NOMEM, "expert prediction: out of memory");
        else
            st = halo_gguf_read_tensor(g, t, p->bias[l], t->n_bytes, err);
    }
    if (!st)
        st = be->ops->buf_alloc(be, (uint64_t)p->n_expert * MAX_TOK * sizeof(float), &p->out, err);
    if (st) {
        halo_predict_free(p, be);
        return st;
    }
    *out = p;
    return HALO_OK;
}

/* The router's score for one logit, as the MoE computes it (softmax normalised below). */
static float score_of(uint32_t gating, float x) {
    switch (gating) {
    case HALO_GATING_SIGMOID:
        return 1.0f / (1.0f + expf(-x));
    case HALO_GATING_SQRTSOFTPLUS:
        return sqrtf(x > 20.0f ? x : log1pf(expf(x)));
    default:
        return x;
    }
}

void halo_predict_after_moe(halo_predict *p, halo_backend *be, const halo_moe_args *a) {
    uint32_t next = a->experts->layer + 1;
    int64_t n_tok = a->x->ne[1];
    if (next >= p->w->n_layer || n_tok > MAX_TOK || n_tok < 1) return;
    const halo_layer_weights *L = &p->w->layer[next];
    if (!L->experts || L->tid2eid.src || !L->gate_inp.src || L->gate_inp.t.ne[1] != p->n_expert)
        return; /* not streamed, hash-routed (prefetched exactly), or not a router we know */
    if (L->experts != halo_expert_cache_source(p->cache, next))
        return; /* a cache above this one (the GPU's) would not ask for what it holds */
    halo_tensor out = {.buf = p->out, .type = HALO_TYPE_F32, .ne = {p->n_expert, n_tok, 1, 1}};
    be->ops->matmul(be, &L->gate_inp.t, a->x, 1, &out);
    halo_error err = {0};
    if (be->ops->buf_read(be, p->out, 0, p->scores, (uint64_t)p->n_expert * n_tok * 4, &err))
        return;
    uint32_t n = 0;
    for (int64_t t = 0; t < n_tok; t++) {
        float *s = p->scores + t * p->n_expert, mx = s[0], sum = 0;
        if (p->gating == HALO_GATING_SOFTMAX) {
            for (uint32_t e = 1; e < p->n_expert; e++)
                mx = s[e] > mx ? s[e] : mx;
            for (uint32_t e = 0; e < p->n_expert; e++)
                sum += s[e] = expf(s[e] - mx);
        }
        for (uint32_t e = 0; e < p->n_expert; e++) {
            s[e] = p->gating == HALO_GATING_SOFTMAX ? s[e] / sum : score_of(p->gating, s[e]);
            if (p->bias[next]) s[e] += p->bias[next][e];
        }
        memset(p->taken, 0, p->n_expert);
        for (uint32_t i = 0; i < p->k; i++) {
            int32_t best = -1;
            for (uint32_t e = 0; e < p->n_expert; e++)
                if (!p->taken[e] && (best < 0 || s[e] > s[best])) best = (int32_t)e;
            p->taken[best] = true;
            p->ids[n++] = best;
        }
    }
    halo_expert_cache_predict(p->cache, next, p->ids, n);
}
