/* DeepSeek V4 attention on the GPU: for each (token, head), the raw window rows the token sees
 * plus the compressed rows (all causally visible ones, or the indexer's selection), softmax
 * with the head's sink as an extra logit, K = V. One block per (token, head); each of its warps
 * takes every ATT_WARPS-th candidate row with an online softmax (running max, sum and weighted
 * rows), and the warps' partial results are merged at the end with the sink, so no logit array
 * is kept whatever the context length. */
#include <math.h>

#include "backend/cuda/cuda.cuh"

enum { ATT_WARPS = 4, ATT_MAX_J = 32 }; /* head_dim up to 32·32 = 1024, a multiple of 32 */

typedef struct attn_params {
    const float *q, *window, *comp;
    const int32_t *pos, *select;
    const char *sinks;
    uint32_t sinks_type;
    int64_t head_dim, n_head, n_win, n_comp, k_sel, win_pos0;
    uint32_t sliding_window, ratio;
    float scale;
    float *out;
    cu_ints pos_small; /* pos by value when NULL */
} attn_params;

__global__ void attention_kernel(attn_params a) {
    __shared__ float sm_m[ATT_WARPS], sm_l[ATT_WARPS];
    __shared__ float sm_acc[ATT_WARPS][ATT_MAX_J * WARP];
    const int64_t t = blockIdx.x, h = blockIdx.y;
    const int lane = threadIdx.x % WARP, w = threadIdx.x / WARP;
    const int nj = (int)(a.head_dim / WARP);
    const int64_t pos = cu_int_at(a.pos, a.pos_small, t);
    const float *q = a.q + (t * a.n_head + h) * a.head_dim;
    float qv[ATT_MAX_J], acc[ATT_MAX_J];
#pragma unroll
    for (int j = 0; j < ATT_MAX_J; j++) {
        qv[j] = j < nj ? q[lane + WARP * j] : 0.0f;
        acc[j] = 0.0f;
    }
    float m = -INFINITY, l = 0.0f;
    int64_t visible = a.comp ? (pos + 1) / a.ratio : 0;
    if (visible > a.n_comp) visible = a.n_comp;
    const int64_t n_extra = a.comp ? (a.select ? a.k_sel : visible) : 0;
    for (int64_t i = w; i < a.n_win + n_extra; i += ATT_WARPS) {
        const float *row = NULL;
        if (i < a.n_win) {
            int64_t kp = a.win_pos0 + i;
            if (kp <= pos && pos - kp < (int64_t)a.sliding_window) row = a.window + i * a.head_dim;
        } else if (a.select) {
            int32_t s = a.select[t * a.k_sel + (i - a.n_win)];
            if (s >= 0 && s < visible) row = a.comp + (int64_t)s * a.head_dim;
        } else {
            row = a.comp + (i - a.n_win) * a.head_dim;
        }
        if (!row) continue; /* uniform across the warp */
        float part = 0.0f;
#pragma unroll
        for (int j = 0; j < ATT_MAX_J; j++)
            if (j < nj) part += qv[j] * row[lane + WARP * j];
        float s = warp_sum(part) * a.scale;
        float m_new = fmaxf(m, s);
        float corr = expf(m - m_new), p = expf(s - m_new);
        l = l * corr + p;
#pragma unroll
        for (int j = 0; j < ATT_MAX_J; j++)
            if (j < nj) acc[j] = acc[j] * corr + p * row[lane + WARP * j];
        m = m_new;
    }
    if (lane == 0) {
        sm_m[w] = m;
        sm_l[w] = l;
    }
#pragma unroll
    for (int j = 0; j < ATT_MAX_J; j++)
        if (j < nj) sm_acc[w][lane + WARP * j] = acc[j];
    __syncthreads();
    const float sink = load_float(a.sinks_type, a.sinks, h);
    float mx = sink;
    for (int k = 0; k < ATT_WARPS; k++)
        mx = fmaxf(mx, sm_m[k]);
    float sum = expf(sink - mx), f[ATT_WARPS];
    for (int k = 0; k < ATT_WARPS; k++) {
        f[k] = sm_l[k] > 0.0f ? expf(sm_m[k] - mx) : 0.0f;
        sum += sm_l[k] * f[k];
    }
    float *out = a.out + (t * a.n_head + h) * a.head_dim;
    for (int64_t d = threadIdx.x; d < a.head_dim; d += blockDim.x) {
        float o = 0.0f;
        for (int k = 0; k < ATT_WARPS; k++)
            o += sm_acc[k][d] * f[k];
        out[d] = o / sum;
    }
}

void cu_attention(halo_backend *hbe, const halo_attn_args *a) {
    cu_backend *be = cu_of(hbe);
    const int64_t hd = a->q->ne[0], n_head = a->q->ne[1], n_tok = a->q->ne[2];
    if (be->failed || n_tok <= 0 || !cu_float_only(be, a->sinks->type, "attention", "sinks"))
        return;
    if (hd % WARP || hd > ATT_MAX_J * WARP) {
        cu_check(be, "attention", "head_dim not a multiple of 32 up to 1024",
                 cudaErrorInvalidValue);
        return;
    }
    int32_t *spos = (int32_t *)cu_scratch(be, (uint64_t)n_tok * sizeof(int32_t), "attention");
    cu_ints ps;
    const int32_t *dpos = NULL;
    if (!spos || !cu_ints_pass(be, spos, a->pos, n_tok, &ps, &dpos, "attention")) return;
    attn_params p = {cu_f32(a->q),
                     cu_f32(a->window),
                     a->comp ? cu_f32(a->comp) : NULL,
                     dpos,
                     a->select ? (const int32_t *)cu_ptr(a->select) : NULL,
                     cu_ptr(a->sinks),
                     a->sinks->type,
                     hd,
                     n_head,
                     a->window->ne[1],
                     a->comp ? a->comp->ne[1] : 0,
                     a->select ? a->select->ne[0] : 0,
                     a->win_pos0,
                     a->sliding_window,
                     a->ratio ? a->ratio : 1,
                     a->scale,
                     cu_f32(a->out),
                     ps};
    if (a->comp && a->comp->ne[1] == 0) p.comp = NULL;
    dim3 grid((unsigned)n_tok, (unsigned)n_head);
    attention_kernel<<<grid, ATT_WARPS * WARP, 0, be->stream>>>(p);
    CU_LAUNCHED(be, "attention", "attention_kernel");
}
