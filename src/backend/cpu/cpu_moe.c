/* DeepSeek V4 mixture of experts on the CPU: router scores (sqrt-softplus by default), top-k
 * selection with the load-balancing bias or the hash table for the first layers, weights
 * normalised and scaled, clamped SwiGLU experts, plus the shared expert. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu.h"
#include "halo/quant.h"

typedef struct moe_ctx {
    bool precise;
    const halo_moe_args *a;
    float *bias; /* [n_expert] or NULL */
} moe_ctx;

static float score_fn(uint32_t gating, float x) {
    switch (gating) {
    case HALO_GATING_SIGMOID: return 1.0f / (1.0f + expf(-x));
    case HALO_GATING_SQRTSOFTPLUS: {
        /* softplus with torch's threshold: linear above 20 */
        float sp = x > 20.0f ? x : log1pf(expf(x));
        return sqrtf(sp);
    }
    default: return x; /* softmax: normalised over experts by the caller */
    }
}

/* SwiGLU expert on one token: down · (silu(min(gate·x, c)) · clamp(up·x, ±c)), c = 0: no clamp.
 * gate/up/down are views of one expert's matrices. */
static void expert(bool precise, const halo_tensor *gate, const halo_tensor *up, const halo_tensor *down,
                   uint64_t off_gu, uint64_t off_d, const void *x_act, float clamp, float *y,
                   float *h, void *h_act) {
    int64_t n_ff = gate->ne[1];
    float *g = malloc((size_t)n_ff * sizeof *g);
    cpu_dot_rows(precise, gate, 0, n_ff, x_act, g, off_gu);
    cpu_dot_rows(precise, up, 0, n_ff, x_act, h, off_gu);
    for (int64_t i = 0; i < n_ff; i++) {
        float gv = g[i], uv = h[i];
        if (clamp > 0) {
            gv = gv > clamp ? clamp : gv;
            uv = uv > clamp ? clamp : uv < -clamp ? -clamp : uv;
        }
        h[i] = gv / (1.0f + expf(-gv)) * uv;
    }
    free(g);
    cpu_make_act(precise, down->type, h, n_ff, h_act);
    cpu_dot_rows(precise, down, 0, down->ne[1], h_act, y, off_d);
}

static void moe_task(void *p, int64_t t) {
    moe_ctx *c = p;
    const halo_moe_args *a = c->a;
    int64_t n_embd = a->x->ne[0], n_expert = a->gate_inp->ne[1];
    const float *x = cpu_f32(a->x) + t * n_embd;
    float *out = cpu_f32(a->out) + t * n_embd;

    /* Router scores in f32. */
    bool precise = c->precise;
    void *x_act = malloc((size_t)cpu_act_bytes(precise, a->gate_inp->type, n_embd));
    cpu_make_act(precise, a->gate_inp->type, x, n_embd, x_act);
    float *score = malloc((size_t)n_expert * sizeof *score);
    cpu_dot_rows(precise, a->gate_inp, 0, n_expert, x_act, score, 0);
    free(x_act);
    if (a->gating == HALO_GATING_SOFTMAX) {
        float mx = score[0], sum = 0;
        for (int64_t e = 1; e < n_expert; e++) mx = score[e] > mx ? score[e] : mx;
        for (int64_t e = 0; e < n_expert; e++) sum += score[e] = expf(score[e] - mx);
        for (int64_t e = 0; e < n_expert; e++) score[e] /= sum;
    } else {
        for (int64_t e = 0; e < n_expert; e++) score[e] = score_fn(a->gating, score[e]);
    }

    int32_t sel[64];
    float wsel[64], wsum = 0;
    uint32_t k = a->n_used;
    if (a->tid2eid) {
        const int32_t *row = (const int32_t *)cpu_ptr(a->tid2eid) + (int64_t)a->tokens[t] * k;
        for (uint32_t i = 0; i < k; i++) sel[i] = row[i];
    } else {
        /* top-k of score + bias; the bias steers selection only, weights use the raw score */
        bool *taken = calloc((size_t)n_expert, 1);
        for (uint32_t i = 0; i < k; i++) {
            int64_t best = -1;
            float best_v = 0;
            for (int64_t e = 0; e < n_expert; e++) {
                float v = score[e] + (c->bias ? c->bias[e] : 0.0f);
                if (!taken[e] && (best < 0 || v > best_v)) {
                    best = e;
                    best_v = v;
                }
            }
            taken[best] = true;
            sel[i] = (int32_t)best;
        }
        free(taken);
    }
    for (uint32_t i = 0; i < k; i++) wsum += wsel[i] = score[sel[i]];
    for (uint32_t i = 0; i < k; i++) {
        if (a->norm_weights) wsel[i] /= wsum + 1e-20f;
        wsel[i] *= a->weights_scale;
    }
    free(score);

    /* Experts: x converted once to the expert weights' activation format. */
    int64_t n_ff = a->gate_exps->ne[1];
    int64_t n_ff_sh = a->gate_sh ? a->gate_sh->ne[1] : 0;
    int64_t n_h = n_ff > n_ff_sh ? n_ff : n_ff_sh;
    float *h = malloc((size_t)n_h * sizeof *h), *y = malloc((size_t)n_embd * sizeof *y);
    uint64_t act_bytes = cpu_act_bytes(precise, a->gate_exps->type, n_embd);
    if (a->gate_sh && cpu_act_bytes(precise, a->gate_sh->type, n_embd) > act_bytes)
        act_bytes = cpu_act_bytes(precise, a->gate_sh->type, n_embd);
    void *xa = malloc((size_t)act_bytes);
    void *ha = malloc((size_t)n_h * sizeof(float)); /* no activation format is wider than f32 */
    memset(out, 0, (size_t)n_embd * sizeof *out);
    cpu_make_act(precise, a->gate_exps->type, x, n_embd, xa);
    uint64_t gu_bytes = (uint64_t)n_ff * cpu_row_bytes(a->gate_exps);
    uint64_t d_bytes = (uint64_t)n_embd * cpu_row_bytes(a->down_exps);
    for (uint32_t i = 0; i < k; i++) {
        expert(precise, a->gate_exps, a->up_exps, a->down_exps, (uint64_t)sel[i] * gu_bytes,
               (uint64_t)sel[i] * d_bytes, xa, a->clamp_exp, y, h, ha);
        for (int64_t d = 0; d < n_embd; d++) out[d] += wsel[i] * y[d];
    }
    if (a->gate_sh) {
        cpu_make_act(precise, a->gate_sh->type, x, n_embd, xa);
        expert(precise, a->gate_sh, a->up_sh, a->down_sh, 0, 0, xa, a->clamp_shexp, y, h, ha);
        for (int64_t d = 0; d < n_embd; d++) out[d] += y[d];
    }
    free(h);
    free(y);
    free(xa);
    free(ha);
}

void cpu_moe(halo_backend *be, const halo_moe_args *a) {
    moe_ctx c = {.precise = cpu_of(be)->precise, .a = a};
    if (a->probs_bias) {
        c.bias = malloc((size_t)a->probs_bias->ne[0] * sizeof(float));
        halo_quant_dequantize_row(a->probs_bias->type, cpu_ptr(a->probs_bias), c.bias,
                                  a->probs_bias->ne[0]);
    }
    halo_threadpool_run(cpu_of(be)->pool, a->x->ne[1], moe_task, &c);
    free(c.bias);
}
