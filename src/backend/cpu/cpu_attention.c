/* DeepSeek V4 attention on the CPU: sliding-window raw rows plus compressed rows (all causally
 * visible ones, or the indexer's selection) with a per-head sink; the compressor's window
 * pooling; and the lightning indexer's top-k. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu.h"
#include "halo/quant.h"
#include "halo/types.h"
#include "quant/f32rows.h"

/* The quant module's f32 dot: SIMD at the CPU's best level (a plain loop does not vectorise
 * without reassociating the sum). */
static float dot(const float *a, const float *b, int64_t n) {
    return halo_quant_vec_dot(HALO_TYPE_F32, n, a, b);
}

typedef struct attn_ctx {
    cpu_backend *be;
    const halo_attn_args *a;
    float sinks[1024];
} attn_ctx;

/* One (token, head): logits over visible rows, softmax with the sink as an extra logit. */
static void attn_task(void *p, int64_t task) {
    attn_ctx *c = p;
    const halo_attn_args *a = c->a;
    int64_t hd = a->q->ne[0], n_head = a->q->ne[1];
    int64_t t = task / n_head, h = task % n_head;
    int64_t pos = a->pos[t];
    const float *q = cpu_f32(a->q) + (t * n_head + h) * hd;
    float *out = cpu_f32(a->out) + (t * n_head + h) * hd;

    int64_t n_win = a->window->ne[1], n_comp = a->comp ? a->comp->ne[1] : 0;
    int64_t k_sel = a->select ? a->select->ne[0] : 0;
    int64_t cap = n_win + (a->select ? k_sel : n_comp);
    float *logit = cpu_scratch(c->be, (size_t)(cap > 0 ? cap : 1) * sizeof *logit, "attention");
    const float **row = cpu_scratch(c->be, (size_t)(cap > 0 ? cap : 1) * sizeof *row, "attention");
    if (!logit || !row) {
        free(logit);
        free(row);
        return;
    }
    int64_t n = 0;
    const float *win = cpu_f32(a->window);
    for (int64_t i = 0; i < n_win; i++) {
        int64_t kp = a->win_pos0 + i;
        if (kp > pos || pos - kp >= (int64_t)a->sliding_window) continue;
        row[n++] = win + i * hd;
    }
    if (a->comp) {
        const float *comp = cpu_f32(a->comp);
        int64_t visible = (pos + 1) / a->ratio;
        if (a->select) {
            const int32_t *sel = (const int32_t *)cpu_ptr(a->select) + t * k_sel;
            for (int64_t i = 0; i < k_sel; i++)
                if (sel[i] >= 0 && sel[i] < visible && sel[i] < n_comp) row[n++] = comp + sel[i] * hd;
        } else {
            for (int64_t w = 0; w < visible && w < n_comp; w++) row[n++] = comp + w * hd;
        }
    }
    /* Row kernels (src/quant/f32rows.h): the same values as a dot and an axpy per row, the
     * query's loads shared by four rows and the output held in registers across the rows. */
    halo_quant_f32_dots(hd, q, row, n, logit);
    float mx = c->sinks[h];
    for (int64_t i = 0; i < n; i++) {
        logit[i] *= a->scale;
        if (logit[i] > mx) mx = logit[i];
    }
    float sum = expf(c->sinks[h] - mx);
    for (int64_t i = 0; i < n; i++) sum += logit[i] = expf(logit[i] - mx);
    for (int64_t i = 0; i < n; i++) logit[i] /= sum;
    memset(out, 0, (size_t)hd * sizeof *out);
    halo_quant_f32_axpys(hd, out, row, logit, n);
    free(logit);
    free(row);
}

void cpu_attention(halo_backend *be, const halo_attn_args *a) {
    attn_ctx c = {.be = cpu_of(be), .a = a};
    halo_quant_dequantize_row(a->sinks->type, cpu_ptr(a->sinks), c.sinks, a->sinks->ne[0]);
    halo_threadpool_run(cpu_of(be)->pool, a->q->ne[2] * a->q->ne[1], attn_task, &c);
}

/* ---- compressor pooling ---------------------------------------------------------------- */

typedef struct pool_ctx {
    const halo_pool_args *a;
    float *ape;      /* [width, ratio] as f32 */
    float inv_freq[256];
} pool_ctx;

static void pool_task(void *p, int64_t w) {
    pool_ctx *c = p;
    const halo_pool_args *a = c->a;
    uint32_t r = a->ratio, dim = a->dim, width = a->overlap ? 2 * dim : dim;
    const float *kv = cpu_f32(a->kv) + (int64_t)w * r * width;
    const float *gate = cpu_f32(a->gate) + (int64_t)w * r * width;
    /* Slots of this window: r rows of the current series (Cb, or the only one), then with
     * overlap r rows of the previous window's Ca. */
    const float *pkv = NULL, *pgate = NULL;
    bool prev_has_ape = false;
    if (a->overlap) {
        if (w > 0) {
            pkv = kv - (int64_t)r * width;
            pgate = gate - (int64_t)r * width;
            prev_has_ape = false; /* add ape to raw gates below */
        } else if (a->have_prev) {
            pkv = cpu_f32(a->prev_kv);
            pgate = cpu_f32(a->prev_gate);
            prev_has_ape = true; /* saved gates already include ape */
        }
    }
    float *out = cpu_f32(a->out) + (int64_t)w * dim;
    uint32_t cur = a->overlap ? dim : 0; /* channel offset of the current series */
    for (uint32_t d = 0; d < dim; d++) {
        float lg[2 * 256], mx = -INFINITY;
        const float *vals[2 * 256];
        uint32_t n = 0;
        if (pkv) {
            uint32_t stride = prev_has_ape ? dim : width;
            for (uint32_t i = 0; i < r; i++) {
                lg[n] = pgate[i * stride + d] + (prev_has_ape ? 0 : c->ape[i * width + d]);
                vals[n++] = &pkv[i * stride + d];
            }
        }
        for (uint32_t i = 0; i < r; i++) {
            lg[n] = gate[i * width + cur + d] + c->ape[i * width + cur + d];
            vals[n++] = &kv[i * width + cur + d];
        }
        for (uint32_t i = 0; i < n; i++) mx = lg[i] > mx ? lg[i] : mx;
        float sum = 0, acc = 0;
        for (uint32_t i = 0; i < n; i++) sum += lg[i] = expf(lg[i] - mx);
        for (uint32_t i = 0; i < n; i++) acc += (lg[i] / sum) * *vals[i];
        out[d] = acc;
    }
    const float *norm_w = cpu_f32(a->norm);
    cpu_rms_norm_row(out, dim, norm_w, a->eps);
    cpu_rope_row(out + dim - a->rope->n_rot, a->rope->n_rot, c->inv_freq,
                 (float)(a->pos0 + (int64_t)w * r), false);
}

void cpu_pool(halo_backend *be, const halo_pool_args *a) {
    uint32_t width = a->overlap ? 2 * a->dim : a->dim;
    int64_t n_win = a->out->ne[1];
    pool_ctx c = {.a = a};
    c.ape = cpu_scratch(cpu_of(be), (size_t)width * a->ratio * sizeof(float), "pool");
    if (!c.ape) return;
    for (uint32_t i = 0; i < a->ratio; i++)
        halo_quant_dequantize_row(a->ape->type,
                                  (const unsigned char *)cpu_ptr(a->ape) + i * cpu_row_bytes(a->ape),
                                  c.ape + (size_t)i * width, width);
    cpu_rope_inv_freq(a->rope, c.inv_freq);
    halo_threadpool_run(cpu_of(be)->pool, n_win, pool_task, &c);
    if (a->overlap && n_win > 0) {
        /* Keep the last window's Ca series, gates with ape included, for the next call. */
        const float *kv = cpu_f32(a->kv) + (n_win - 1) * a->ratio * width;
        const float *gate = cpu_f32(a->gate) + (n_win - 1) * a->ratio * width;
        float *pk = cpu_f32(a->prev_kv), *pg = cpu_f32(a->prev_gate);
        for (uint32_t i = 0; i < a->ratio; i++)
            for (uint32_t d = 0; d < a->dim; d++) {
                pk[i * a->dim + d] = kv[i * width + d];
                pg[i * a->dim + d] = gate[i * width + d] + c.ape[i * width + d];
            }
    }
    free(c.ape);
}

/* ---- indexer top-k ----------------------------------------------------------------------
 * Two phases so a decode token over a long context still uses every thread: scores for blocks
 * of visible rows, then a per-token selection (quickselect: linear in the visible rows). */

enum { SCORE_BLOCK = 256 };

typedef struct topk_ctx {
    cpu_backend *be;
    const halo_topk_args *a;
    int64_t n_rows, blocks;
    float *score; /* [n_tok][n_rows] */
} topk_ctx;

static int64_t visible_rows(const halo_topk_args *a, int64_t t, int64_t n_rows) {
    int64_t visible = (a->pos[t] + 1) / a->ratio;
    return visible > n_rows ? n_rows : visible;
}

static void score_task(void *p, int64_t task) {
    topk_ctx *c = p;
    const halo_topk_args *a = c->a;
    int64_t t = task / c->blocks, s0 = (task % c->blocks) * SCORE_BLOCK;
    int64_t visible = visible_rows(a, t, c->n_rows);
    int64_t s1 = s0 + SCORE_BLOCK < visible ? s0 + SCORE_BLOCK : visible;
    int64_t hd = a->q->ne[0], n_head = a->q->ne[1];
    const float *q = cpu_f32(a->q) + t * n_head * hd, *w = cpu_f32(a->w) + t * n_head;
    const float *keys = cpu_f32(a->keys);
    float qs = 1.0f / sqrtf((float)hd), ws = 1.0f / sqrtf((float)n_head);
    for (int64_t s = s0; s < s1; s++) {
        float acc = 0;
        for (int64_t h = 0; h < n_head; h++) {
            float d = dot(q + h * hd, keys + s * hd, hd);
            acc += (d > 0 ? d * qs : 0) * (w[h] * ws);
        }
        c->score[t * c->n_rows + s] = acc;
    }
}

typedef struct scored {
    float v;
    int32_t row;
} scored;

/* Orders by score, then by row so equal scores select deterministically. */
static bool before(scored x, scored y) {
    return x.v > y.v || (x.v == y.v && x.row < y.row);
}

/* Moves the k best entries to the front (in no particular order). */
static void quickselect(scored *e, int64_t n, int64_t k) {
    int64_t lo = 0, hi = n - 1;
    while (lo < hi) {
        scored pivot = e[lo + (hi - lo) / 2];
        int64_t i = lo, j = hi;
        while (i <= j) {
            while (before(e[i], pivot)) i++;
            while (before(pivot, e[j])) j--;
            if (i <= j) {
                scored tmp = e[i];
                e[i++] = e[j];
                e[j--] = tmp;
            }
        }
        if (k - 1 <= j) hi = j;
        else if (k - 1 >= i) lo = i;
        else return;
    }
}

static void select_task(void *p, int64_t t) {
    topk_ctx *c = p;
    const halo_topk_args *a = c->a;
    int32_t *out = (int32_t *)cpu_ptr(a->out) + t * a->top_k;
    for (uint32_t i = 0; i < a->top_k; i++) out[i] = -1;
    int64_t visible = visible_rows(a, t, c->n_rows);
    if (visible <= 0) return;
    scored *e = cpu_scratch(c->be, (size_t)visible * sizeof *e, "topk");
    if (!e) return;
    for (int64_t s = 0; s < visible; s++) e[s] = (scored){c->score[t * c->n_rows + s], (int32_t)s};
    int64_t k = visible < a->top_k ? visible : a->top_k;
    if (k < visible) quickselect(e, visible, k);
    for (int64_t i = 0; i < k; i++) out[i] = e[i].row;
    free(e);
}

void cpu_topk(halo_backend *be, const halo_topk_args *a) {
    int64_t n_tok = a->q->ne[2];
    topk_ctx c = {.be = cpu_of(be), .a = a, .n_rows = a->keys->ne[1]};
    c.blocks = (c.n_rows + SCORE_BLOCK - 1) / SCORE_BLOCK;
    c.score = cpu_scratch(c.be, (size_t)(n_tok * c.n_rows + 1) * sizeof *c.score, "topk");
    if (!c.score) return;
    halo_threadpool *pool = cpu_of(be)->pool;
    halo_threadpool_run(pool, n_tok * c.blocks, score_task, &c);
    halo_threadpool_run(pool, n_tok, select_task, &c);
    free(c.score);
}
