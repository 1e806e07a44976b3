/* Manifold-constrained hyper-connections (DeepSeek V4 §2.2) on the CPU: the hc residual
 * streams are mixed into one sublayer input (pre), and the sublayer output is written back
 * (post) through a Sinkhorn-normalised stream mixer (comb). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu.h"
#include "halo/quant.h"

enum { HC_MAX = 16 };

typedef struct hc_ctx {
    cpu_backend *be;
    bool precise;
    const halo_hc_args *a;
    int64_t n_embd;
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

static void hc_task(void *p, int64_t t) {
    hc_ctx *c = p;
    const halo_hc_args *a = c->a;
    uint32_t hc = a->hc;
    int64_t width = (int64_t)hc * c->n_embd;
    const float *x = cpu_f32(a->streams) + t * width;
    float *flat = cpu_scratch(c->be, (size_t)width * sizeof *flat, "hc_pre");
    void *act = cpu_scratch(c->be, (size_t)cpu_act_bytes(c->precise, a->fn->type, width), "hc_pre");
    if (!flat || !act) {
        free(flat);
        free(act);
        return;
    }
    memcpy(flat, x, (size_t)width * sizeof *flat);
    cpu_rms_norm_row(flat, width, NULL, a->norm_eps);
    bool head = a->post == NULL;
    uint32_t n_mix = head ? hc : (2 + hc) * hc;
    float mix[(2 + HC_MAX) * HC_MAX];
    cpu_make_act(c->precise, a->fn->type, flat, width, act);
    cpu_dot_rows(c->precise, a->fn, 0, n_mix, act, mix, 0);
    free(act);
    free(flat);

    float pre[HC_MAX];
    for (uint32_t k = 0; k < hc; k++) pre[k] = sigmoidf(mix[k] * c->scale[0] + c->base[k]) + a->eps;
    float *out = cpu_f32(a->collapsed) + t * c->n_embd;
    for (int64_t d = 0; d < c->n_embd; d++) {
        float s = 0;
        for (uint32_t k = 0; k < hc; k++) s += pre[k] * x[k * c->n_embd + d];
        out[d] = s;
    }
    if (head) return;
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
    halo_quant_dequantize_row(a->base->type, cpu_ptr(a->base), c.base, a->base->ne[0]);
    halo_quant_dequantize_row(a->scale->type, cpu_ptr(a->scale), c.scale, a->scale->ne[0]);
    halo_threadpool_run(cpu_of(be)->pool, a->collapsed->ne[1], hc_task, &c);
}

typedef struct post_ctx {
    float *streams;
    const float *y, *post, *comb;
    int64_t n_embd;
    uint32_t hc;
} post_ctx;

static void post_task(void *p, int64_t t) {
    post_ctx *c = p;
    uint32_t hc = c->hc;
    float *x = c->streams + t * hc * c->n_embd;
    const float *y = c->y + t * c->n_embd, *post = c->post + t * hc, *comb = c->comb + t * hc * hc;
    float mixed[HC_MAX];
    for (int64_t d = 0; d < c->n_embd; d++) {
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
    halo_threadpool_run(cpu_of(be)->pool, y->ne[1], post_task, &c);
}
