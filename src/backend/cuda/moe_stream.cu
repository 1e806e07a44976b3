/* DeepSeek V4 MoE on the GPU with routed experts that are not resident (halo_moe_args.experts):
 * the router and the choice of experts run on the GPU as in the CPU backend (the same scores,
 * the lowest index winning ties, the same weights); the choices are read back, grouped by expert
 * on the host, and the batch's distinct experts are resolved through the source in rounds of as
 * many as it holds at once (backend.h). The engine's source on a GPU is the GPU's own expert
 * cache (src/mem/expert_device.c), so the views are device memory; views of GPU-visible host
 * memory work too, read over the bus. Per expert of a round: its tokens' rows gathered, the
 * gate/up projections (the matmul kernel, so every weight type the GPU decodes), the clamped
 * SwiGLU, the down projection, scattered to the (token, slot) rows; the shared expert (resident)
 * over all tokens; then the weighted sum per token in slot order, as the CPU sums. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/quant.cuh"

typedef struct sroute_params {
    const float *score_in; /* [n_tok][n_expert] router logits */
    const char *bias;      /* [n_expert] or NULL */
    uint32_t bias_type;
    const int32_t *tid2eid; /* [n_vocab][k] or NULL */
    const int32_t *tokens;
    int64_t n_expert;
    uint32_t k, slots, gating;
    bool norm_weights;
    float weights_scale;
    int32_t *sel;  /* [n_tok][k] */
    float *weight; /* [n_tok][slots] */
} sroute_params;

static __device__ float sscore(uint32_t gating, float x) {
    if (gating == HALO_GATING_SIGMOID) return 1.0f / (1.0f + expf(-x));
    if (gating == HALO_GATING_SQRTSOFTPLUS) return sqrtf(x > 20.0f ? x : log1pf(expf(x)));
    return x;
}

/* One token per block: the scores in parallel, then the CPU's sequential choice on one thread,
 * so ties resolve as there (the lowest index wins). */
__global__ void sroute_kernel(sroute_params a) {
    extern __shared__ float sm[]; /* score[n_expert], then taken flags */
    float *score = sm;
    unsigned char *taken = (unsigned char *)(sm + a.n_expert);
    const int64_t t = blockIdx.x;
    const float *in = a.score_in + t * a.n_expert;
    for (int64_t e = threadIdx.x; e < a.n_expert; e += blockDim.x) {
        score[e] = a.gating == HALO_GATING_SOFTMAX ? in[e] : sscore(a.gating, in[e]);
        taken[e] = 0;
    }
    __syncthreads();
    if (threadIdx.x != 0) return;
    if (a.gating == HALO_GATING_SOFTMAX) {
        float mx = score[0], sum = 0;
        for (int64_t e = 1; e < a.n_expert; e++)
            mx = score[e] > mx ? score[e] : mx;
        for (int64_t e = 0; e < a.n_expert; e++)
            sum += score[e] = expf(score[e] - mx);
        for (int64_t e = 0; e < a.n_expert; e++)
            score[e] /= sum;
    }
    int32_t *sel = a.sel + t * a.k;
    for (uint32_t i = 0; i < a.k; i++) {
        if (a.tid2eid) {
            sel[i] = a.tid2eid[(int64_t)a.tokens[t] * a.k + i];
            continue;
        }
        int64_t best = -1;
        float best_v = 0;
        for (int64_t e = 0; e < a.n_expert; e++) {
            float v = score[e] + (a.bias ? load_float(a.bias_type, a.bias, e) : 0.0f);
            if (!taken[e] && (best < 0 || v > best_v)) {
                best = e;
                best_v = v;
            }
        }
        taken[best] = 1;
        sel[i] = (int32_t)best;
    }
    float *w = a.weight + t * a.slots, sum = 0;
    for (uint32_t i = 0; i < a.k; i++) {
        int32_t e = sel[i];
        /* A hash table row naming an expert out of range: weight 0 (the CPU's rule); the pair is
         * marked -1 and computes nothing. */
        if (e < 0 || e >= a.n_expert)
            sel[i] = -1, w[i] = 0.0f;
        else
            w[i] = score[e];
        sum += w[i];
    }
    for (uint32_t i = 0; i < a.k; i++) {
        if (a.norm_weights) w[i] /= sum + 1e-20f;
        w[i] *= a.weights_scale;
    }
    if (a.slots > a.k) w[a.k] = 1.0f;
}

/* xg[j] = x[pairs[j] / slots] (the token of each pair). */
__global__ void sgather_kernel(const float *x, const int32_t *pairs, int32_t m, uint32_t slots,
                               int64_t n_embd, float *xg) {
    int64_t id = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (id >= (int64_t)m * n_embd) return;
    int64_t j = id / n_embd, d = id % n_embd;
    xg[id] = x[(int64_t)(pairs[j] / slots) * n_embd + d];
}

/* g = silu(min(g, c)) · clamp(u, ±c) (c = 0: no clamp), as the CPU and the resident kernels. */
__global__ void sswiglu_kernel(float *g, const float *u, int64_t n, float clamp) {
    int64_t id = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (id >= n) return;
    float a = g[id], b = u[id];
    if (clamp > 0) {
        a = a > clamp ? clamp : a;
        b = b > clamp ? clamp : b < -clamp ? -clamp : b;
    }
    g[id] = a / (1.0f + expf(-a)) * b;
}

/* y[pairs[j]] = yg[j]. */
__global__ void sscatter_kernel(const float *yg, const int32_t *pairs, int32_t m, int64_t n_embd,
                                float *y) {
    int64_t id = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (id >= (int64_t)m * n_embd) return;
    int64_t j = id / n_embd, d = id % n_embd;
    y[(int64_t)pairs[j] * n_embd + d] = yg[id];
}

__global__ void ssum_kernel(const float *y, const float *weight, uint32_t slots, int64_t n_embd,
                            int64_t n_tok, float *out) {
    int64_t id = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (id >= n_tok * n_embd) return;
    int64_t t = id / n_embd, d = id % n_embd;
    float s = 0.0f;
    for (uint32_t k = 0; k < slots; k++)
        s += weight[t * slots + k] * y[(t * slots + k) * n_embd + d];
    out[id] = s;
}

static char *carve(char **at, uint64_t bytes) {
    char *p = *at;
    *at += (bytes + 255) & ~255ull;
    return p;
}

typedef struct sctx {
    cu_backend *be;
    const halo_moe_args *a;
    int64_t n_tok, n_embd, n_expert, n_ff, n_ff_sh;
    uint32_t k, slots;
    float *y, *xg, *hg, *hu, *yg;
    int32_t *pairs_dev;
} sctx;

/* One expert (matrices gate/up/down in device-readable memory) over m pairs listed at pairs
 * (device), in the matmul kernel, scattered into y. */
static void run_expert(sctx *c, const halo_tensor *gate, const halo_tensor *up,
                       const halo_tensor *down, int64_t n_ff, float clamp, const int32_t *pairs,
                       int32_t m, const char *op) {
    cu_backend *be = c->be;
    const float *x = cu_f32(c->a->x);
    unsigned nb = cu_blocks((int64_t)m * c->n_embd, 256);
    sgather_kernel<<<nb, 256, 0, be->stream>>>(x, pairs, m, c->slots, c->n_embd, c->xg);
    if (!CU_LAUNCHED(be, op, "sgather_kernel")) return;
    cu_matmul_launch(be, gate->type, cu_ptr(gate), c->n_embd, n_ff, 1, c->xg, c->n_embd, m, c->hg,
                     op);
    cu_matmul_launch(be, up->type, cu_ptr(up), c->n_embd, n_ff, 1, c->xg, c->n_embd, m, c->hu, op);
    if (be->failed) return;
    sswiglu_kernel<<<cu_blocks((int64_t)m * n_ff, 256), 256, 0, be->stream>>>(
        c->hg, c->hu, (int64_t)m * n_ff, clamp);
    if (!CU_LAUNCHED(be, op, "sswiglu_kernel")) return;
    cu_matmul_launch(be, down->type, cu_ptr(down), n_ff, c->n_embd, 1, c->hg, n_ff, m, c->yg, op);
    if (be->failed) return;
    sscatter_kernel<<<nb, 256, 0, be->stream>>>(c->yg, pairs, m, c->n_embd, c->y);
    CU_LAUNCHED(be, op, "sscatter_kernel");
}

static void record(cu_backend *be, const char *op, const halo_error *err) {
    if (be->failed) return;
    be->failed = true;
    snprintf(be->fail, sizeof be->fail, "%s: %.380s", op, err->message);
}

/* The routed experts, round by round through the source. sel: the host copy of the choices. */
static void run_rounds(sctx *c, const int32_t *sel, const char *op) {
    cu_backend *be = c->be;
    const halo_expert_source *src = c->a->experts;
    const int64_t n_pairs = c->n_tok * c->slots;
    int32_t *first = (int32_t *)calloc((size_t)c->n_expert + 2, sizeof *first);
    int32_t *list = (int32_t *)malloc((size_t)(n_pairs ? n_pairs : 1) * sizeof *list);
    int32_t *fill = (int32_t *)calloc((size_t)c->n_expert + 1, sizeof *fill);
    int32_t *ids = (int32_t *)malloc((size_t)c->n_expert * sizeof *ids);
    int32_t *round = (int32_t *)malloc((size_t)(n_pairs ? n_pairs : 1) * sizeof *round);
    halo_expert_view *views = (halo_expert_view *)calloc((size_t)c->n_expert, sizeof *views);
    if (!first || !list || !fill || !ids || !round || !views) {
        halo_error e = {};
        halo_fail(&e, HALO_E_NOMEM, "out of memory for the streamed experts' lists");
        record(be, op, &e);
        goto done;
    }
    /* Pairs grouped by expert (counting sort): list[first[e] .. first[e+1]). */
    for (int64_t t = 0; t < c->n_tok; t++)
        for (uint32_t s = 0; s < c->k; s++)
            if (sel[t * c->k + s] >= 0) first[sel[t * c->k + s] + 1]++;
    for (int64_t e = 0; e < c->n_expert; e++)
        first[e + 1] += first[e];
    for (int64_t t = 0; t < c->n_tok; t++)
        for (uint32_t s = 0; s < c->k; s++) {
            int32_t e = sel[t * c->k + s];
            if (e >= 0) list[first[e] + fill[e]++] = (int32_t)(t * c->slots + s);
        }
    {
        uint32_t n = 0;
        for (int64_t e = 0; e < c->n_expert; e++)
            if (first[e + 1] > first[e]) ids[n++] = (int32_t)e;
        for (uint32_t done = 0; done < n && !be->failed;) {
            /* The previous round's kernels are done with its views (the next resolve may reuse
             * their memory) and with the pair lists. */
            if (!CU_OK(be, op, cudaStreamSynchronize(be->stream))) break;
            uint32_t ready = 0;
            halo_error err = {};
            halo_status st = src->resolve(src, ids + done, n - done, views, &ready, &err);
            if (!st && (ready == 0 || ready > n - done))
                st = halo_fail(&err, HALO_E_BAD_VALUE,
                               "expert source of blk.%u resolved %u of %u experts", src->layer,
                               ready, n - done);
            if (st) {
                record(be, op, &err);
                break;
            }
            int32_t m_all = 0;
            for (uint32_t i = 0; i < ready; i++) {
                int32_t e = ids[done + i];
                memcpy(round + m_all, list + first[e], (size_t)(first[e + 1] - first[e]) * 4);
                m_all += first[e + 1] - first[e];
            }
            if (!cu_upload(be, c->pairs_dev, round, (uint64_t)m_all * 4, op)) break;
            for (uint32_t i = 0, at = 0; i < ready && !be->failed; i++) {
                int32_t e = ids[done + i], m = first[e + 1] - first[e];
                run_expert(c, &views[i].gate, &views[i].up, &views[i].down, c->n_ff,
                           c->a->clamp_exp, c->pairs_dev + at, m, op);
                at += (uint32_t)m;
            }
            done += ready;
        }
    }
done:
    /* The lists are host memory the queued kernels do not read; the views' memory stays valid
     * until the next resolve, which waits for the stream first. */
    free(first);
    free(list);
    free(fill);
    free(ids);
    free(round);
    free(views);
}

void cu_moe_streamed(halo_backend *hbe, const halo_moe_args *a) {
    cu_backend *be = cu_of(hbe);
    const char *op = "moe";
    /* Reads the routing back and waits: not in a graph (and the backend stays eager). */
    cu_graph_streamed(be);
    sctx c;
    memset(&c, 0, sizeof c);
    c.be = be;
    c.a = a;
    c.n_tok = a->x->ne[1];
    c.n_embd = a->x->ne[0];
    c.n_expert = a->gate_inp->ne[1];
    c.n_ff = a->gate_exps->ne[1];
    c.n_ff_sh = a->gate_sh ? a->gate_sh->ne[1] : 0;
    c.k = a->n_used;
    c.slots = c.k + (a->gate_sh ? 1 : 0);
    const int64_t n_h = c.n_ff > c.n_ff_sh ? c.n_ff : c.n_ff_sh, n_pairs = c.n_tok * c.slots;
    if (be->failed || c.n_tok <= 0) return;
    uint32_t types[] = {a->gate_exps->type, a->up_exps->type, a->down_exps->type};
    for (int i = 0; i < 3; i++)
        if (!cu_type_supported(be, types[i], op)) return;
    if (a->probs_bias && !cu_float_only(be, a->probs_bias->type, op, "expert bias")) return;
    /* Scratch, in order: tokens, router scores, choices, weights, y, and per expert: gathered
     * rows, gate and up (then h), the down rows, the pair list. */
    const uint64_t sizes[] = {(uint64_t)c.n_tok * 4,
                              (uint64_t)(c.n_tok * c.n_expert) * 4,
                              (uint64_t)(c.n_tok * c.k) * 4,
                              (uint64_t)n_pairs * 4,
                              (uint64_t)(n_pairs * c.n_embd) * 4,
                              (uint64_t)(c.n_tok * c.n_embd) * 4,
                              (uint64_t)(c.n_tok * n_h) * 4,
                              (uint64_t)(c.n_tok * n_h) * 4,
                              (uint64_t)(c.n_tok * c.n_embd) * 4,
                              (uint64_t)n_pairs * 4};
    uint64_t total = 0;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        total += (sizes[i] + 255) & ~255ull;
    char *at = cu_scratch(be, total, op);
    if (!at) return;
    int32_t *tokens = (int32_t *)carve(&at, sizes[0]);
    float *scores = (float *)carve(&at, sizes[1]);
    int32_t *sel = (int32_t *)carve(&at, sizes[2]);
    float *weight = (float *)carve(&at, sizes[3]);
    c.y = (float *)carve(&at, sizes[4]);
    c.xg = (float *)carve(&at, sizes[5]);
    c.hg = (float *)carve(&at, sizes[6]);
    c.hu = (float *)carve(&at, sizes[7]);
    c.yg = (float *)carve(&at, sizes[8]);
    c.pairs_dev = (int32_t *)carve(&at, sizes[9]);

    if (a->tid2eid && !cu_upload(be, tokens, a->tokens, sizes[0], op)) return;
    cu_matmul_launch(be, a->gate_inp->type, cu_ptr(a->gate_inp), c.n_embd, c.n_expert, 1,
                     cu_f32(a->x), c.n_embd, c.n_tok, scores, op);
    if (be->failed) return;
    sroute_params rp = {scores,
                        a->probs_bias ? cu_ptr(a->probs_bias) : NULL,
                        a->probs_bias ? a->probs_bias->type : (uint32_t)HALO_TYPE_F32,
                        a->tid2eid ? (const int32_t *)cu_ptr(a->tid2eid) : NULL,
                        tokens,
                        c.n_expert,
                        c.k,
                        c.slots,
                        a->gating,
                        a->norm_weights,
                        a->weights_scale,
                        sel,
                        weight};
    sroute_kernel<<<(unsigned)c.n_tok, 256, (size_t)c.n_expert * 5, be->stream>>>(rp);
    if (!CU_LAUNCHED(be, op, "sroute_kernel")) return;
    /* Pairs no expert computes (an out-of-range hash row) must read as 0, not old scratch. */
    if (!CU_OK(be, op, cudaMemsetAsync(c.y, 0, sizes[4], be->stream))) return;
    /* The shared expert: resident, every token; its pairs are (t, k). */
    if (a->gate_sh) {
        int32_t *sh = (int32_t *)malloc((size_t)c.n_tok * sizeof *sh);
        if (!sh) {
            halo_error e = {};
            halo_fail(&e, HALO_E_NOMEM, "out of memory");
            record(be, op, &e);
            return;
        }
        for (int64_t t = 0; t < c.n_tok; t++)
            sh[t] = (int32_t)(t * c.slots + c.k);
        bool ok = cu_upload(be, c.pairs_dev, sh, (uint64_t)c.n_tok * 4, op);
        free(sh); /* pageable: the copy has left it when cudaMemcpyAsync returns */
        if (!ok) return;
        run_expert(&c, a->gate_sh, a->up_sh, a->down_sh, c.n_ff_sh, a->clamp_shexp, c.pairs_dev,
                   (int32_t)c.n_tok, op);
    }
    /* The choices, back on the host to resolve the experts. */
    int32_t *sel_host = (int32_t *)malloc((size_t)(c.n_tok * c.k) * sizeof *sel_host);
    if (!sel_host) {
        halo_error e = {};
        halo_fail(&e, HALO_E_NOMEM, "out of memory");
        record(be, op, &e);
        return;
    }
    if (CU_OK(be, op,
              cudaMemcpyAsync(sel_host, sel, sizes[2], cudaMemcpyDeviceToHost, be->stream)) &&
        CU_OK(be, op, cudaStreamSynchronize(be->stream)))
        run_rounds(&c, sel_host, op);
    free(sel_host);
    if (be->failed) return;
    ssum_kernel<<<cu_blocks(c.n_tok * c.n_embd, 256), 256, 0, be->stream>>>(
        c.y, weight, c.slots, c.n_embd, c.n_tok, cu_f32(a->out));
    CU_LAUNCHED(be, op, "ssum_kernel");
}
