/* Manifold-constrained hyper-connections (DeepSeek V4 §2.2) on the CPU: the hc residual
 * streams are mixed into one sublayer input (pre), and the sublayer output is written back
 * (post) through a Sinkhorn-normalised stream mixer (comb). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "backend/cpu/cpu.h"
#include "halo/quant.h"
#include "quant/gemm.h"

/* Embedding channels per task of the per-token phases: a single decode token's mixing still
 * spreads over the threads (each channel's arithmetic is independent of the split). */
enum { HC_MAX = 16, HC_CHUNK = 512 };

static int64_t n_chunks(int64_t n_embd) {
    return (n_embd + HC_CHUNK - 1) / HC_CHUNK;
}

typedef struct hc_ctx {
    cpu_backend *be;
    bool precise;
    const halo_hc_args *a;
    int64_t n_embd;
    uint32_t n_mix;       /* rows of fn: hc (the head) or (2 + hc) * hc */
    unsigned char *acts;  /* [n_tok] activation rows of the normalised streams */
    uint64_t act_bytes;
    float *mix;           /* [n_tok][n_mix] */
    float base[(2 + HC_MAX) * HC_MAX], scale[3];
} hc_ctx;

static float sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }

/* Sinkhorn-Knopp: softmax rows, then alternate column and row normalisation so the mixer is
 * (nearly) doubly stochastic; eps keeps every division finite. */
static void sinkhorn(float *m, uint32_t hc, uint32_t iters, float eps) {
    for (uint32_t j = 0; j < hc; j++) {
        float *row = m + j * hc, mx = row[0], sum = 0;
        for (uint32_t k = 1; k < hc; k++) mx = row[k] > mx ? row[k] : mx;
        for (uint32_t k = 0; k < hc; k++) sum += row[k] = expf(row[k] - mx);
        for (uint32_t k = 0; k < hc; k++) row[k] = row[k] / sum + eps;
    }
    for (uint32_t it = 0; it < iters; it++) {
        if (it > 0) { /* rows: the reference starts with a column pass */
            for (uint32_t j = 0; j < hc; j++) {
                float sum = 0;
                for (uint32_t k = 0; k < hc; k++) sum += m[j * hc + k];
                for (uint32_t k = 0; k < hc; k++) m[j * hc + k] /= sum + eps;
            }
        }
        for (uint32_t k = 0; k < hc; k++) {
            float sum = 0;
            for (uint32_t j = 0; j < hc; j++) sum += m[j * hc + k];
            for (uint32_t j = 0; j < hc; j++) m[j * hc + k] /= sum + eps;
        }
    }
}

/* Phase 1: the flattened streams, RMS-normalised, as activation rows for fn. */
static void hc_norm_task(void *p, int64_t t) {
    hc_ctx *c = p;
    const halo_hc_args *a = c->a;
    int64_t width = (int64_t)a->hc * c->n_embd;
    float *flat = cpu_scratch(c->be, (size_t)width * sizeof *flat, "hc_pre");
    if (!flat) return;
    memcpy(flat, cpu_f32(a->streams) + t * width, (size_t)width * sizeof *flat);
    cpu_rms_norm_row(flat, width, NULL, a->norm_eps);
    cpu_make_act(c->precise, a->fn->type, flat, width, c->acts + (uint64_t)t * c->act_bytes);
    free(flat);
}

/* Phase 2: one row of fn for up to HALO_GEMM_MAX_TOK tokens (fn has few, long rows: a single
 * decode token still spreads them over the threads). */
static void hc_mix_task(void *p, int64_t task) {
    hc_ctx *c = p;
    int64_t t0 = task / c->n_mix * HALO_GEMM_MAX_TOK, r = task % c->n_mix;
    int64_t n_tok = c->a->collapsed->ne[1];
    int nt = n_tok - t0 < HALO_GEMM_MAX_TOK ? (int)(n_tok - t0) : HALO_GEMM_MAX_TOK;
    const void *act[HALO_GEMM_MAX_TOK];
    float *y[HALO_GEMM_MAX_TOK];
    for (int j = 0; j < nt; j++) {
        act[j] = c->acts + (uint64_t)(t0 + j) * c->act_bytes;
        y[j] = c->mix + (t0 + j) * c->n_mix + r;
    }
    cpu_dot_rows_tok(c->precise, c->a->fn, r, r + 1, act, nt, y, 0);
}

/* Phase 3: the collapsed input of one token over one chunk of channels; the chunk 0 task also
 * writes the token's post and comb mixing weights. */
static void hc_task(void *p, int64_t task) {
    hc_ctx *c = p;
    const halo_hc_args *a = c->a;
    uint32_t hc = a->hc;
    int64_t chunks = n_chunks(c->n_embd), t = task / chunks, d0 = task % chunks * HC_CHUNK;
    int64_t d1 = d0 + HC_CHUNK < c->n_embd ? d0 + HC_CHUNK : c->n_embd;
    int64_t width = (int64_t)hc * c->n_embd;
    const float *x = cpu_f32(a->streams) + t * width;
    bool head = a->post == NULL;
    const float *mix = c->mix + t * c->n_mix;

    float pre[HC_MAX];
    for (uint32_t k = 0; k < hc; k++) pre[k] = sigmoidf(mix[k] * c->scale[0] + c->base[k]) + a->eps;
    float *out = cpu_f32(a->collapsed) + t * c->n_embd;
    int64_t d = d0;
#if defined(__SSE2__)
    /* four channels at a time, each with the scalar loop's sum in its order */
    for (; d + 4 <= d1; d += 4) {
        __m128 s = _mm_setzero_ps();
        for (uint32_t k = 0; k < hc; k++)
            s = _mm_add_ps(s, _mm_mul_ps(_mm_set1_ps(pre[k]), _mm_loadu_ps(x + k * c->n_embd + d)));
        _mm_storeu_ps(out + d, s);
    }
#endif
    for (; d < d1; d++) {
        float s = 0;
        for (uint32_t k = 0; k < hc; k++) s += pre[k] * x[k * c->n_embd + d];
        out[d] = s;
    }
    if (head || d0 != 0) return;
    float *post = cpu_f32(a->post) + t * hc;
    for (uint32_t k = 0; k < hc; k++)
        post[k] = 2.0f * sigmoidf(mix[hc + k] * c->scale[1] + c->base[hc + k]);
    float *comb = cpu_f32(a->comb) + t * hc * hc;
    for (uint32_t i = 0; i < hc * hc; i++)
        comb[i] = mix[2 * hc + i] * c->scale[2] + c->base[2 * hc + i];
    sinkhorn(comb, hc, a->sinkhorn_iters, a->eps);
}

void cpu_hc_pre(halo_backend *be, const halo_hc_args *a) {
    hc_ctx c = {.be = cpu_of(be), .precise = cpu_of(be)->precise, .a = a,
                .n_embd = a->collapsed->ne[0]};
    int64_t n_tok = a->collapsed->ne[1], width = (int64_t)a->hc * c.n_embd;
    c.n_mix = a->post == NULL ? a->hc : (2 + a->hc) * a->hc;
    c.act_bytes = cpu_act_bytes(c.precise, a->fn->type, width);
    halo_quant_dequantize_row(a->base->type, cpu_ptr(a->base), c.base, a->base->ne[0]);
    halo_quant_dequantize_row(a->scale->type, cpu_ptr(a->scale), c.scale, a->scale->ne[0]);
    c.acts = cpu_scratch(c.be, (size_t)(c.act_bytes * (uint64_t)n_tok), "hc_pre");
    c.mix = cpu_scratch(c.be, (size_t)(n_tok * c.n_mix) * sizeof *c.mix, "hc_pre");
    halo_threadpool *pool = cpu_of(be)->pool;
    if (c.acts && c.mix) {
        halo_threadpool_run(pool, n_tok, hc_norm_task, &c);
        int64_t chunks = (n_tok + HALO_GEMM_MAX_TOK - 1) / HALO_GEMM_MAX_TOK;
        if (!atomic_load(&c.be->failed)) {
            halo_threadpool_run(pool, chunks * c.n_mix, hc_mix_task, &c);
            halo_threadpool_run(pool, n_tok * n_chunks(c.n_embd), hc_task, &c);
        }
    }
    free(c.acts);
    free(c.mix);
}

typedef struct post_ctx {
    float *streams;
    const float *y, *post, *comb;
    int64_t n_embd;
    uint32_t hc;
} post_ctx;

/* One token's streams over one chunk of channels. */
static void post_task(void *p, int64_t task) {
    post_ctx *c = p;
    uint32_t hc = c->hc;
    int64_t chunks = n_chunks(c->n_embd), t = task / chunks, d0 = task % chunks * HC_CHUNK;
    int64_t d1 = d0 + HC_CHUNK < c->n_embd ? d0 + HC_CHUNK : c->n_embd;
    float *x = c->streams + t * hc * c->n_embd;
    const float *y = c->y + t * c->n_embd, *post = c->post + t * hc, *comb = c->comb + t * hc * hc;
    float mixed[HC_MAX];
    int64_t d = d0;
#if defined(__SSE2__)
    /* four channels at a time, each with the scalar loop's sums in their order */
    for (; d + 4 <= d1; d += 4) {
        __m128 xv[HC_MAX], mv[HC_MAX], yv = _mm_loadu_ps(y + d);
        for (uint32_t j = 0; j < hc; j++) xv[j] = _mm_loadu_ps(x + j * c->n_embd + d);
        for (uint32_t k = 0; k < hc; k++) {
            __m128 s = _mm_mul_ps(_mm_set1_ps(post[k]), yv);
            for (uint32_t j = 0; j < hc; j++)
                s = _mm_add_ps(s, _mm_mul_ps(_mm_set1_ps(comb[j * hc + k]), xv[j]));
            mv[k] = s;
        }
        for (uint32_t k = 0; k < hc; k++) _mm_storeu_ps(x + k * c->n_embd + d, mv[k]);
    }
#endif
    for (; d < d1; d++) {
        for (uint32_t k = 0; k < hc; k++) {
            float s = post[k] * y[d];
            for (uint32_t j = 0; j < hc; j++) s += comb[j * hc + k] * x[j * c->n_embd + d];
            mixed[k] = s;
        }
        for (uint32_t k = 0; k < hc; k++) x[k * c->n_embd + d] = mixed[k];
    }
}

void cpu_hc_post(halo_backend *be, halo_tensor *streams, const halo_tensor *y,
                 const halo_tensor *post, const halo_tensor *comb) {
    post_ctx c = {cpu_f32(streams), cpu_f32(y), cpu_f32(post), cpu_f32(comb), y->ne[0],
                  (uint32_t)post->ne[0]};
    halo_threadpool_run(cpu_of(be)->pool, y->ne[1] * n_chunks(c.n_embd), post_task, &c);
}
