/* DeepSeek V4 mixture of experts on the CPU: router scores (sqrt-softplus by default), top-k
 * selection with the load-balancing bias or the hash table for the first layers, weights
 * normalised and scaled, clamped SwiGLU experts, plus the shared expert.
 *
 * Parallel phases so a single decode token still spreads over every thread and a prompt reads
 * each expert's weights once: routing (per token); gate/up projections per (expert, block of
 * rows) for every token routed to that expert, so the block stays in cache across its tokens;
 * down projections likewise; then a per-token weighted sum.
 *
 * Streamed experts (a->experts set): after routing, the distinct experts of the batch are
 * resolved through the expert cache in rounds of as many as it holds at once; each round runs
 * the gate/up and down phases for its experts only. A pair's arithmetic does not depend on the
 * round it falls in, so the output is bitwise the same as with resident experts. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu.h"
#include "core/error.h"
#include "halo/quant.h"
#include "quant/gemm.h"

enum { ROW_BLOCK = 64, SCORE_ROWS = 16, SUM_CHUNK = 512 };

typedef struct moe_ctx {
    cpu_backend *be;
    bool precise;
    const halo_moe_args *a;
    float *bias;          /* [n_expert] or NULL */
    int64_t n_tok, n_embd, n_expert, n_ff, n_ff_sh;
    uint32_t k, slots;    /* experts per token; slots = k (+1 with a shared expert) */
    int32_t *sel;         /* [n_tok][k] chosen experts */
    float *weight;        /* [n_tok][slots] mixing weights (1 for the shared expert) */
    /* [n_tok] activation rows of x for the routed experts' gate [0] and up [1] matrices, and
     * for the shared expert's (xs). A file may give gate and up types whose activations
     * differ; when they agree, [1] is [0]. */
    unsigned char *x_act[2], *xs_act[2];
    uint64_t x_act_bytes[2], xs_act_bytes[2];
    unsigned char *r_act; /* [n_tok] activation rows for the router */
    uint64_t r_act_bytes;
    float *score;         /* [n_tok][n_expert] router logits, then scores */
    float *h;             /* [n_tok][slots][n_h] SwiGLU outputs */
    unsigned char *h_act; /* [n_tok][slots] activation rows of h for the down projections */
    uint64_t h_act_bytes;
    int64_t n_h;
    float *y;             /* [n_tok][slots][n_embd] expert outputs */
    /* Grouping by expert (the shared expert is group n_expert): the (token, slot) pairs of
     * group e are pairs[first[e] .. first[e+1]). */
    int64_t *first, *pairs;
    int64_t (*tasks)[2];  /* (group, first row) of each gate/up or down task */
    /* The current round: in_round[g] for groups computed now, their pairs in round_pairs. */
    bool *in_round;
    int64_t *round_pairs;
    const halo_expert_view **view; /* [n_expert] streamed experts of this round, else NULL */
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

/* Phase 1a: activation rows of x, for the router and the expert matrices. */
static void route_act_task(void *p, int64_t t) {
    moe_ctx *c = p;
    const halo_moe_args *a = c->a;
    const float *x = cpu_f32(a->x) + t * c->n_embd;
    cpu_make_act(c->precise, a->gate_inp->type, x, c->n_embd, c->r_act + t * c->r_act_bytes);
    const halo_tensor *w[2] = {a->gate_exps, a->up_exps}, *ws[2] = {a->gate_sh, a->up_sh};
    for (int i = 0; i < 2; i++) {
        if (i == 0 || c->x_act[1] != c->x_act[0])
            cpu_make_act(c->precise, w[i]->type, x, c->n_embd,
                         c->x_act[i] + t * c->x_act_bytes[i]);
        if (a->gate_sh && (i == 0 || c->xs_act[1] != c->xs_act[0]))
            cpu_make_act(c->precise, ws[i]->type, x, c->n_embd,
                         c->xs_act[i] + t * c->xs_act_bytes[i]);
    }
}

/* Phase 1b: router logits for a block of experts and up to HALO_GEMM_MAX_TOK tokens, so a
 * single decode token's router still spreads over the threads. */
static void score_task(void *p, int64_t task) {
    moe_ctx *c = p;
    int64_t blocks = (c->n_expert + SCORE_ROWS - 1) / SCORE_ROWS;
    int64_t t0 = task / blocks * HALO_GEMM_MAX_TOK, e0 = task % blocks * SCORE_ROWS;
    int64_t e1 = e0 + SCORE_ROWS < c->n_expert ? e0 + SCORE_ROWS : c->n_expert;
    int nt = c->n_tok - t0 < HALO_GEMM_MAX_TOK ? (int)(c->n_tok - t0) : HALO_GEMM_MAX_TOK;
    const void *act[HALO_GEMM_MAX_TOK];
    float *y[HALO_GEMM_MAX_TOK];
    for (int j = 0; j < nt; j++) {
        act[j] = c->r_act + (t0 + j) * c->r_act_bytes;
        y[j] = c->score + (t0 + j) * c->n_expert + e0;
    }
    cpu_dot_rows_tok(c->precise, c->a->gate_inp, e0, e1, act, nt, y, 0);
}

/* Phase 1c: router scores, expert choice and weights. */
static void route_task(void *p, int64_t t) {
    moe_ctx *c = p;
    const halo_moe_args *a = c->a;
    float *score = c->score + t * c->n_expert;
    bool *taken = cpu_scratch(c->be, (size_t)c->n_expert, "moe");
    if (!taken) return;
    if (a->gating == HALO_GATING_SOFTMAX) {
        float mx = score[0], sum = 0;
        for (int64_t e = 1; e < c->n_expert; e++) mx = score[e] > mx ? score[e] : mx;
        for (int64_t e = 0; e < c->n_expert; e++) sum += score[e] = expf(score[e] - mx);
        for (int64_t e = 0; e < c->n_expert; e++) score[e] /= sum;
    } else {
        for (int64_t e = 0; e < c->n_expert; e++) score[e] = score_fn(a->gating, score[e]);
    }
    int32_t *sel = c->sel + t * c->k;
    if (a->tid2eid) {
        const int32_t *row = (const int32_t *)cpu_ptr(a->tid2eid) + (int64_t)a->tokens[t] * c->k;
        memcpy(sel, row, c->k * sizeof *sel);
    } else {
        /* top-k of score + bias; the bias steers selection only, weights use the raw score */
        memset(taken, 0, (size_t)c->n_expert);
        for (uint32_t i = 0; i < c->k; i++) {
            int64_t best = -1;
            float best_v = 0;
            for (int64_t e = 0; e < c->n_expert; e++) {
                float v = score[e] + (c->bias ? c->bias[e] : 0.0f);
                if (!taken[e] && (best < 0 || v > best_v)) {
                    best = e;
                    best_v = v;
                }
            }
            taken[best] = true;
            sel[i] = (int32_t)best;
        }
    }
    free(taken);
    float *w = c->weight + t * c->slots, sum = 0;
    for (uint32_t i = 0; i < c->k; i++) sum += w[i] = score[sel[i]];
    for (uint32_t i = 0; i < c->k; i++) {
        if (a->norm_weights) w[i] /= sum + 1e-20f;
        w[i] *= a->weights_scale;
    }
    if (c->slots > c->k) w[c->k] = 1.0f;
}

/* What a (token, slot) pair multiplies: its gate, up and down matrices (a routed expert or the
 * shared one), their byte offsets (types may differ, so each has its own), the activation rows
 * of x for gate and up, and the clamp. */
typedef struct {
    const halo_tensor *w[3]; /* gate, up, down */
    uint64_t off[3];
    const void *x_act[2];
    float clamp;
} slot_mats;

static slot_mats slot_of(const moe_ctx *c, int64_t pair) {
    const halo_moe_args *a = c->a;
    int64_t t = pair / c->slots;
    uint32_t s = (uint32_t)(pair % c->slots);
    slot_mats m = {{a->gate_sh, a->up_sh, a->down_sh}, {0, 0, 0}, {0}, a->clamp_shexp};
    unsigned char *const *act = c->xs_act;
    const uint64_t *act_bytes = c->xs_act_bytes;
    if (s < c->k) {
        int64_t e = c->sel[t * c->k + s];
        if (c->view && c->view[e]) {
            m = (slot_mats){.w = {&c->view[e]->gate, &c->view[e]->up, &c->view[e]->down}};
        } else {
            m = (slot_mats){.w = {a->gate_exps, a->up_exps, a->down_exps}};
            for (int i = 0; i < 3; i++) /* expert e's block of rows */
                m.off[i] = (uint64_t)e * (uint64_t)m.w[i]->ne[1] * cpu_row_bytes(m.w[i]);
        }
        m.clamp = a->clamp_exp;
        act = c->x_act;
        act_bytes = c->x_act_bytes;
    }
    for (int i = 0; i < 2; i++)
        m.x_act[i] = act[i] + t * act_bytes[i];
    return m;
}

/* Phase 2: h = silu(min(gate·x, c)) · clamp(up·x, ±c) for one block of rows of one expert,
 * for every token routed to it, HALO_GEMM_MAX_TOK tokens per tiled product. */
static void gate_up_task(void *p, int64_t task) {
    moe_ctx *c = p;
    int64_t e = c->tasks[task][0], r0 = c->tasks[task][1];
    float gv[HALO_GEMM_MAX_TOK][ROW_BLOCK], uv[HALO_GEMM_MAX_TOK][ROW_BLOCK];
    float *gy[HALO_GEMM_MAX_TOK], *uy[HALO_GEMM_MAX_TOK];
    for (int j = 0; j < HALO_GEMM_MAX_TOK; j++) {
        gy[j] = gv[j];
        uy[j] = uv[j];
    }
    for (int64_t i0 = c->first[e]; i0 < c->first[e + 1]; i0 += HALO_GEMM_MAX_TOK) {
        int nt = c->first[e + 1] - i0 < HALO_GEMM_MAX_TOK ? (int)(c->first[e + 1] - i0)
                                                          : HALO_GEMM_MAX_TOK;
        /* every pair of a group has the same matrices (one expert, or the shared one) */
        slot_mats m = {0};
        const void *g_act[HALO_GEMM_MAX_TOK], *u_act[HALO_GEMM_MAX_TOK];
        for (int j = 0; j < nt; j++) {
            m = slot_of(c, c->pairs[i0 + j]);
            g_act[j] = m.x_act[0];
            u_act[j] = m.x_act[1];
        }
        float clamp = m.clamp;
        int64_t r1 = r0 + ROW_BLOCK < m.w[0]->ne[1] ? r0 + ROW_BLOCK : m.w[0]->ne[1];
        cpu_dot_rows_tok(c->precise, m.w[0], r0, r1, g_act, nt, gy, m.off[0]);
        cpu_dot_rows_tok(c->precise, m.w[1], r0, r1, u_act, nt, uy, m.off[1]);
        for (int j = 0; j < nt; j++) {
            float *h = c->h + c->pairs[i0 + j] * c->n_h;
            for (int64_t r = 0; r < r1 - r0; r++) {
                float a = gv[j][r], b = uv[j][r];
                if (clamp > 0) {
                    a = a > clamp ? clamp : a;
                    b = b > clamp ? clamp : b < -clamp ? -clamp : b;
                }
                h[r0 + r] = a / (1.0f + expf(-a)) * b;
            }
        }
    }
}

static void h_act_task(void *p, int64_t i) {
    moe_ctx *c = p;
    int64_t pair = c->round_pairs[i];
    slot_mats m = slot_of(c, pair);
    cpu_make_act(c->precise, m.w[2]->type, c->h + pair * c->n_h, m.w[0]->ne[1],
                 c->h_act + pair * c->h_act_bytes);
}

/* Phase 3: y = down · h for one block of output rows of one expert, for each of its tokens,
 * HALO_GEMM_MAX_TOK tokens per tiled product. */
static void down_task(void *p, int64_t task) {
    moe_ctx *c = p;
    int64_t e = c->tasks[task][0], r0 = c->tasks[task][1];
    int64_t r1 = r0 + ROW_BLOCK < c->n_embd ? r0 + ROW_BLOCK : c->n_embd;
    for (int64_t i0 = c->first[e]; i0 < c->first[e + 1]; i0 += HALO_GEMM_MAX_TOK) {
        int nt = c->first[e + 1] - i0 < HALO_GEMM_MAX_TOK ? (int)(c->first[e + 1] - i0)
                                                          : HALO_GEMM_MAX_TOK;
        slot_mats m = {0};
        const void *act[HALO_GEMM_MAX_TOK];
        float *y[HALO_GEMM_MAX_TOK];
        for (int j = 0; j < nt; j++) {
            int64_t pair = c->pairs[i0 + j];
            m = slot_of(c, pair);
            act[j] = c->h_act + pair * c->h_act_bytes;
            y[j] = c->y + pair * c->n_embd + r0;
        }
        cpu_dot_rows_tok(c->precise, m.w[2], r0, r1, act, nt, y, m.off[2]);
    }
}

/* Groups the (token, slot) pairs by expert (the shared expert is group n_expert). */
static bool group_pairs(moe_ctx *c) {
    int64_t groups = c->n_expert + 1, n_pairs = c->n_tok * c->slots;
    memset(c->first, 0, (size_t)(groups + 1) * sizeof *c->first);
    for (int64_t pair = 0; pair < n_pairs; pair++) {
        uint32_t s = (uint32_t)(pair % c->slots);
        int64_t e = s < c->k ? c->sel[(pair / c->slots) * c->k + s] : c->n_expert;
        c->first[e + 1]++;
    }
    for (int64_t e = 0; e < groups; e++) c->first[e + 1] += c->first[e];
    int64_t *fill = cpu_scratch(c->be, (size_t)(uint32_t)groups * sizeof *fill, "moe");
    if (!fill) return false;
    memset(fill, 0, (size_t)(uint32_t)groups * sizeof *fill);
    for (int64_t pair = 0; pair < n_pairs; pair++) {
        uint32_t s = (uint32_t)(pair % c->slots);
        int64_t e = s < c->k ? c->sel[(pair / c->slots) * c->k + s] : c->n_expert;
        c->pairs[c->first[e] + fill[e]++] = pair;
    }
    free(fill);
    return true;
}

/* One task per (group of this round, block of rows), the shared expert's spread evenly among
 * the routed experts': its matrices (Q8_0 in ds4's mixes) stream from memory while the routed
 * experts' 2-bit ones are bound by arithmetic, so threads working on both at once use the
 * memory and the cores together instead of waiting on each in turn. */
static int64_t plan_tasks(moe_ctx *c, int64_t rows_routed, int64_t rows_shared) {
    int64_t n_tasks = 0, e_sh = c->n_expert;
    for (int64_t e = 0; e < c->n_expert; e++) {
        if (c->first[e + 1] == c->first[e] || !c->in_round[e]) continue;
        for (int64_t r0 = 0; r0 < rows_routed; r0 += ROW_BLOCK) {
            c->tasks[n_tasks][0] = e;
            c->tasks[n_tasks++][1] = r0;
        }
    }
    if (c->first[e_sh + 1] == c->first[e_sh] || !c->in_round[e_sh]) return n_tasks;
    int64_t n_routed = n_tasks, n_sh = (rows_shared + ROW_BLOCK - 1) / ROW_BLOCK;
    /* move the routed tasks apart from the back, leaving a slot every (total / n_sh) */
    int64_t total = n_routed + n_sh;
    for (int64_t k = n_sh - 1, src = n_routed - 1, dst = total - 1; k >= 0; k--) {
        int64_t slot = k * total / n_sh; /* where shared task k goes */
        for (; dst > slot; dst--, src--) {
            c->tasks[dst][0] = c->tasks[src][0];
            c->tasks[dst][1] = c->tasks[src][1];
        }
        c->tasks[dst][0] = e_sh;
        c->tasks[dst--][1] = k * ROW_BLOCK;
    }
    return total;
}

/* The gate/up, activation and down phases for the groups of the current round. */
static void run_round(moe_ctx *c) {
    int64_t n = 0;
    for (int64_t e = 0; e < c->n_expert + 1; e++)
        if (c->in_round[e])
            for (int64_t i = c->first[e]; i < c->first[e + 1]; i++) c->round_pairs[n++] = c->pairs[i];
    halo_threadpool *pool = c->be->pool;
    cpu_profile *prof = c->be->prof;
    double t0 = prof ? cpu_prof_now() : 0;
    halo_threadpool_run(pool, plan_tasks(c, c->n_ff, c->n_ff_sh), gate_up_task, c);
    cpu_prof_add(prof, PROF_MOE_GATE_UP, t0);
    t0 = prof ? cpu_prof_now() : 0;
    halo_threadpool_run(pool, n, h_act_task, c);
    halo_threadpool_run(pool, plan_tasks(c, c->n_embd, c->n_embd), down_task, c);
    cpu_prof_add(prof, PROF_MOE_DOWN, t0);
}

/* Streamed experts: the batch's distinct experts through the source, round by round (the
 * shared expert, resident, goes with the first round). */
static void run_streamed(moe_ctx *c) {
    const halo_expert_source *src = c->a->experts;
    int32_t *ids = cpu_scratch(c->be, (size_t)c->n_expert * sizeof *ids, "moe");
    halo_expert_view *views = cpu_scratch(c->be, (size_t)c->n_expert * sizeof *views, "moe");
    uint32_t n = 0;
    if (ids && views) {
        for (int64_t e = 0; e < c->n_expert; e++)
            if (c->first[e + 1] > c->first[e]) ids[n++] = (int32_t)e;
        c->in_round[c->n_expert] = true;
    }
    for (uint32_t done = 0; ids && views && (done < n || c->in_round[c->n_expert]);) {
        uint32_t ready = 0;
        halo_error err = {0};
        halo_status st = done < n ? src->resolve(src, ids + done, n - done, views, &ready, &err)
                                  : HALO_OK;
        if (st == HALO_OK && done < n && (ready == 0 || ready > n - done))
            st = halo_fail(&err, HALO_E_BAD_VALUE, "expert cache of blk.%u resolved %u of %u experts",
                           src->layer, ready, n - done);
        if (st) {
            if (!atomic_exchange(&c->be->failed, true)) {
                c->be->failed_op = "moe";
                c->be->op_status = st;
                c->be->op_error = err;
            }
            break;
        }
        for (uint32_t i = 0; i < ready; i++) {
            c->in_round[ids[done + i]] = true;
            c->view[ids[done + i]] = &views[i];
        }
        run_round(c);
        for (uint32_t i = 0; i < ready; i++) {
            c->in_round[ids[done + i]] = false;
            c->view[ids[done + i]] = NULL;
        }
        c->in_round[c->n_expert] = false;
        done += ready;
    }
    free(ids);
    free(views);
}

/* The weighted sum of one token's expert outputs over one chunk of SUM_CHUNK channels (a
 * single decode token's sum still spreads over the threads). */
static void sum_task(void *p, int64_t task) {
    moe_ctx *c = p;
    int64_t chunks = (c->n_embd + SUM_CHUNK - 1) / SUM_CHUNK, t = task / chunks;
    int64_t d0 = task % chunks * SUM_CHUNK;
    int64_t d1 = d0 + SUM_CHUNK < c->n_embd ? d0 + SUM_CHUNK : c->n_embd;
    float *out = cpu_f32(c->a->out) + t * c->n_embd;
    const float *w = c->weight + t * c->slots;
    memset(out + d0, 0, (size_t)(d1 - d0) * sizeof *out);
    for (uint32_t s = 0; s < c->slots; s++) {
        const float *y = c->y + (t * c->slots + s) * c->n_embd;
        for (int64_t d = d0; d < d1; d++) out[d] += w[s] * y[d];
    }
}

/* Activation buffers of x for a gate/up pair w (NULL: none, a 1-byte stand-in): the up
 * matrix gets its own only when its activation format differs from the gate's. */
static bool act_rows(moe_ctx *c, const halo_tensor *const *w, unsigned char *buf[2],
                     uint64_t bytes[2]) {
    for (int i = 0; i < 2; i++) {
        bytes[i] = w ? cpu_act_bytes(c->precise, w[i]->type, c->n_embd) : 0;
        bool shared = i == 1 && (!w || cpu_act_type(c->precise, w[1]->type) ==
                                           cpu_act_type(c->precise, w[0]->type));
        buf[i] = shared ? buf[0] : cpu_scratch(c->be, (size_t)(c->n_tok * bytes[i]) + 1, "moe");
    }
    return buf[0] && buf[1];
}

void cpu_moe(halo_backend *be, const halo_moe_args *a) {
    moe_ctx c = {.be = cpu_of(be), .precise = cpu_of(be)->precise, .a = a};
    c.n_tok = a->x->ne[1];
    c.n_embd = a->x->ne[0];
    c.n_expert = a->gate_inp->ne[1];
    c.n_ff = a->gate_exps->ne[1];
    c.n_ff_sh = a->gate_sh ? a->gate_sh->ne[1] : 0;
    c.n_h = c.n_ff > c.n_ff_sh ? c.n_ff : c.n_ff_sh;
    c.k = a->n_used;
    c.slots = c.k + (a->gate_sh ? 1 : 0);
    int64_t pairs = c.n_tok * c.slots;

    c.r_act_bytes = cpu_act_bytes(c.precise, a->gate_inp->type, c.n_embd);
    /* No activation format is wider than f32. */
    c.h_act_bytes = (uint64_t)c.n_h * sizeof(float);
    cpu_backend *cb = c.be;
    c.r_act = cpu_scratch(cb, (size_t)(c.n_tok * c.r_act_bytes), "moe");
    c.score = cpu_scratch(cb, (size_t)(c.n_tok * c.n_expert) * sizeof *c.score, "moe");
    c.sel = cpu_scratch(cb, (size_t)(c.n_tok * c.k) * sizeof *c.sel, "moe");
    c.weight = cpu_scratch(cb, (size_t)pairs * sizeof *c.weight, "moe");
    const halo_tensor *xw[2] = {a->gate_exps, a->up_exps}, *xsw[2] = {a->gate_sh, a->up_sh};
    bool acts_ok = act_rows(&c, xw, c.x_act, c.x_act_bytes) &&
                   act_rows(&c, a->gate_sh ? xsw : NULL, c.xs_act, c.xs_act_bytes);
    c.h = cpu_scratch(cb, (size_t)(pairs * c.n_h) * sizeof *c.h, "moe");
    c.h_act = cpu_scratch(cb, (size_t)(pairs * c.h_act_bytes), "moe");
    c.y = cpu_scratch(cb, (size_t)(pairs * c.n_embd) * sizeof *c.y, "moe");
    c.first = cpu_scratch(cb, (size_t)(c.n_expert + 2) * sizeof *c.first, "moe");
    c.pairs = cpu_scratch(cb, (size_t)pairs * sizeof *c.pairs, "moe");
    int64_t max_rows = c.n_h > c.n_embd ? c.n_h : c.n_embd;
    c.tasks = cpu_scratch(cb, (size_t)((c.n_expert + 1) * ((max_rows + ROW_BLOCK - 1) / ROW_BLOCK) + 1) *
                                  sizeof *c.tasks, "moe");
    c.in_round = cpu_scratch(cb, (size_t)(c.n_expert + 1) * sizeof *c.in_round, "moe");
    c.round_pairs = cpu_scratch(cb, (size_t)pairs * sizeof *c.round_pairs, "moe");
    if (a->experts) c.view = cpu_scratch(cb, (size_t)c.n_expert * sizeof *c.view, "moe");
    if (a->probs_bias) {
        c.bias = cpu_scratch(cb, (size_t)a->probs_bias->ne[0] * sizeof(float), "moe");
        if (c.bias)
            halo_quant_dequantize_row(a->probs_bias->type, cpu_ptr(a->probs_bias), c.bias,
                                      a->probs_bias->ne[0]);
    }
    bool ok = c.r_act && c.score && c.sel && c.weight && acts_ok && c.h && c.h_act &&
              c.y && c.first &&
              c.pairs && c.tasks && c.in_round && c.round_pairs && (c.view || !a->experts) &&
              (c.bias || !a->probs_bias);
    if (ok) {
        memset(c.h, 0, (size_t)(pairs * c.n_h) * sizeof *c.h);
        memset(c.in_round, 0, (size_t)(c.n_expert + 1) * sizeof *c.in_round);
        if (c.view) memset(c.view, 0, (size_t)c.n_expert * sizeof *c.view);
    }
    halo_threadpool *pool = cb->pool;
    double t0 = cb->prof ? cpu_prof_now() : 0;
    if (ok) {
        int64_t chunks = (c.n_tok + HALO_GEMM_MAX_TOK - 1) / HALO_GEMM_MAX_TOK;
        halo_threadpool_run(pool, c.n_tok, route_act_task, &c);
        halo_threadpool_run(pool, chunks * ((c.n_expert + SCORE_ROWS - 1) / SCORE_ROWS),
                            score_task, &c);
        halo_threadpool_run(pool, c.n_tok, route_task, &c);
    }
    ok = ok && !atomic_load(&cb->failed); /* routing needs its scratch too */
    ok = ok && group_pairs(&c);
    cpu_prof_add(cb->prof, PROF_MOE_ROUTE, t0);
    if (ok && a->experts) {
        run_streamed(&c);
        ok = !atomic_load(&cb->failed);
    } else if (ok) {
        memset(c.in_round, 1, (size_t)(c.n_expert + 1) * sizeof *c.in_round);
        run_round(&c);
    }
    t0 = cb->prof ? cpu_prof_now() : 0;
    if (ok)
        halo_threadpool_run(pool, c.n_tok * ((c.n_embd + SUM_CHUNK - 1) / SUM_CHUNK), sum_task, &c);
    cpu_prof_add(cb->prof, PROF_MOE_SUM, t0);
    free(c.bias);
    free(c.r_act);
    free(c.score);
    free(c.sel);
    free(c.weight);
    for (int i = 1; i >= 0; i--) { /* [1] may be [0] */
        if (i == 0 || c.x_act[1] != c.x_act[0]) free(c.x_act[i]);
        if (i == 0 || c.xs_act[1] != c.xs_act[0]) free(c.xs_act[i]);
    }
    free(c.h);
    free(c.h_act);
    free(c.y);
    free(c.first);
    free(c.pairs);
    free(c.tasks);
    free(c.in_round);
    free(c.round_pairs);
    free(c.view);
}
