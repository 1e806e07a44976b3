/* DeepSeek V4 forward (the transformers reference's DeepseekV4Model, paper §2), as a fixed
 * sequence of backend ops per layer:
 *
 *   streams ──hc_pre──> x ─norm─> attention (q/kv low rank, partial rope, sliding window +
 *   compressed rows [+ indexer top-k], sinks, inverse rope, grouped output) ──hc_post──>
 *   streams ──hc_pre──> x ─norm─> MoE (hash or biased top-k routing, shared expert)
 *   ──hc_post──> streams ... ──hc_head──> norm ──> output projection ──> logits
 *
 * Positions, window bookkeeping and which compressor windows close are integers known on the
 * host; no activation is read back until the logits.
 *
 * One call evaluates the tokens of one or more sequences (each with its own KV state): every
 * projection, norm, hyper-connection and MoE runs once over all their tokens, so the weights
 * are read once per step; only the attention state (window, compressor, indexer, attention
 * itself) is per sequence. Activations are carved from one scratch buffer given by the caller
 * (nothing is allocated during a step, so a GPU can capture the step as a graph); its size is
 * measured by running the same code over a no-op backend (halo_forward_scratch_bytes). */
#include "model/forward.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "halo/types.h"

enum { SCRATCH_ALIGN = 256 };

/* One sequence of the step: its KV state and where its tokens sit in the batch. */
typedef struct seq {
    halo_kv *kv;
    int64_t t0, n, p0; /* first batch row, token count, position of the first token */
} seq;

typedef struct fwd {
    halo_backend *be;
    const halo_backend_ops *op;
    const halo_hparams *hp;
    const halo_weights *w;
    seq *seqs;
    uint32_t n_seqs;
    const int32_t *tokens; /* all sequences' tokens, in batch order */
    int32_t *pos;          /* their positions */
    int64_t n;             /* tokens in the batch */
    halo_buf *scratch;
    uint64_t cap, used, peak; /* scratch bytes: capacity, in use, high-water mark */
    halo_error *err;
    halo_status st;
} fwd;

/* A temporary activation carved from the scratch buffer; release_to(mark) gives back all
 * carved after the mark. Reuse is safe on a backend that runs ops in order. On failure f->st
 * is set and later ops are skipped by the callers' checks. */
static halo_tensor tmp(fwd *f, uint32_t type, int64_t ne0, int64_t ne1, int64_t ne2) {
    halo_tensor t = {.buf = f->scratch, .offset = f->used, .type = type, .ne = {ne0, ne1, ne2, 1}};
    if (f->st) return t;
    uint64_t end =
        f->used + ((halo_tensor_nbytes(&t) + SCRATCH_ALIGN - 1) & ~(uint64_t)(SCRATCH_ALIGN - 1));
    if (end > f->cap) {
        f->st = halo_fail(f->err, HALO_E_NOMEM,
                          "forward: scratch of %llu bytes is too small "
                          "(needs at least %llu)",
                          (unsigned long long)f->cap, (unsigned long long)end);
        return t;
    }
    f->used = end;
    if (end > f->peak) f->peak = end;
    return t;
}

static void release_to(fwd *f, uint64_t mark) {
    f->used = mark;
}

/* Rows [r0, r0+n) of a 2-D view. */
static halo_tensor rows(const halo_tensor *t, int64_t r0, int64_t n) {
    uint64_t rb = 0;
    halo_type_bytes(t->type, (uint64_t)t->ne[0], &rb);
    halo_tensor v = *t;
    v.offset += (uint64_t)r0 * rb;
    v.ne[1] = n;
    v.ne[2] = v.ne[3] = 1;
    return v;
}

static halo_tensor reshape(halo_tensor t, int64_t ne0, int64_t ne1, int64_t ne2) {
    t.ne[0] = ne0;
    t.ne[1] = ne1;
    t.ne[2] = ne2;
    t.ne[3] = 1;
    return t;
}

static void copy_rows(fwd *f, const halo_tensor *dst, int64_t d0, const halo_tensor *src,
                      int64_t s0, int64_t n) {
    if (n <= 0) return;
    halo_tensor d = rows(dst, d0, n), s = rows(src, s0, n);
    f->op->copy(f->be, &d, &s);
}

/* out[i] = w[i] · x (x RMS-normed by norm first when norm is set): one backend call where the
 * backend has matmul_multi, else the norm in place and one matmul per projection. */
static void project(fwd *f, halo_tensor *x, const halo_tensor *norm, uint32_t n,
                    const halo_tensor *const *w, halo_tensor *const *out) {
    if (f->op->matmul_multi) {
        f->op->matmul_multi(f->be, x, norm, f->hp->norm_eps, n, w, out);
        return;
    }
    if (norm) f->op->rms_norm(f->be, x, (uint32_t)x->ne[0], norm, f->hp->norm_eps);
    for (uint32_t i = 0; i < n; i++) f->op->matmul(f->be, w[i], x, 1, out[i]);
}

static halo_rope layer_rope(const halo_hparams *hp, uint32_t ratio) {
    /* Sliding-only layers: plain RoPE at rope.freq_base. Compressed layers share the
     * compressor's base and YaRN scaling. */
    halo_rope r = {.n_rot = hp->rope_dim, .base = hp->rope_base};
    if (ratio) {
        r.base = hp->compress_rope_base;
        r.yarn = hp->rope_yarn;
        r.yarn_factor = hp->yarn_factor;
        r.yarn_beta_fast = hp->yarn_beta_fast;
        r.yarn_beta_slow = hp->yarn_beta_slow;
        r.yarn_orig_ctx = hp->yarn_orig_ctx;
    }
    return r;
}

/* Feeds the new source rows (kv, gate: [width, n] for sequence q) of one compressed series:
 * windows that close are pooled into new rows; the rest waits in the series' pending rows. */
static void compress(fwd *f, const seq *q, halo_kv_series *s, const halo_tensor *kv,
                     const halo_tensor *gate, const halo_weight *ape, const halo_weight *norm,
                     const halo_rope *rope) {
    int64_t m = s->n_pend + q->n, n_win = m / s->ratio, used = n_win * s->ratio;
    halo_tensor src_kv = tmp(f, HALO_TYPE_F32, s->width, m, 1);
    halo_tensor src_gate = tmp(f, HALO_TYPE_F32, s->width, m, 1);
    if (f->st) return;
    copy_rows(f, &src_kv, 0, &s->pend_kv, 0, s->n_pend);
    copy_rows(f, &src_gate, 0, &s->pend_gate, 0, s->n_pend);
    copy_rows(f, &src_kv, s->n_pend, kv, q->t0, q->n);
    copy_rows(f, &src_gate, s->n_pend, gate, q->t0, q->n);
    if (n_win > 0) {
        halo_tensor in_kv = rows(&src_kv, 0, used), in_gate = rows(&src_gate, 0, used);
        halo_tensor out = rows(&s->rows, s->n_rows, n_win);
        halo_pool_args a = {.kv = &in_kv,
                            .gate = &in_gate,
                            .ape = &ape->t,
                            .norm = &norm->t,
                            .eps = f->hp->norm_eps,
                            .overlap = s->width == 2 * s->dim,
                            .prev_kv = &s->prev_kv,
                            .prev_gate = &s->prev_gate,
                            .have_prev = s->have_prev,
                            .pos0 = s->n_rows * s->ratio,
                            .ratio = s->ratio,
                            .dim = s->dim,
                            .rope = rope,
                            .out = &out};
        f->op->pool(f->be, &a);
        s->n_rows += n_win;
        s->have_prev = true;
    }
    copy_rows(f, &s->pend_kv, 0, &src_kv, used, m - used);
    copy_rows(f, &s->pend_gate, 0, &src_gate, used, m - used);
    s->n_pend = m - used;
}

/* The projections of every token of the step, for the per-sequence part of attention. */
typedef struct attn_proj {
    halo_tensor q, kvr, ckv, cg, ikv, ig, iq, iw, o;
} attn_proj;

/* One sequence's attention: its raw window, compressor and indexer state, the attention of
 * its queries (rows q->t0 .. +q->n of the step's projections) into the same rows of P->o. */
static void attend_seq(fwd *f, uint32_t il, const seq *q, const attn_proj *P,
                       const halo_rope *rope) {
    const halo_hparams *hp = f->hp;
    const halo_layer_weights *L = &f->w->layer[il];
    halo_kv_layer *K = &q->kv->layer[il];
    int64_t n = q->n, hd = hp->head_dim, H = hp->n_head, W = hp->sliding_window;
    const int32_t *pos = f->pos + q->t0;
    uint64_t mark = f->used;

    /* Raw window: the ring's rows for positions max(0, p0-W+1) .. p0-1, then the new rows. */
    int64_t old0 = q->p0 - (W - 1) > 0 ? q->p0 - (W - 1) : 0, n_old = q->p0 - old0;
    halo_tensor win = tmp(f, HALO_TYPE_F32, hd, n_old + n, 1);
    if (f->st) return;
    for (int64_t p = old0; p < q->p0; p++)
        copy_rows(f, &win, p - old0, &K->window, p % W, 1);
    halo_tensor kv2 = reshape(P->kvr, hd, f->n, 1);
    copy_rows(f, &win, n_old, &kv2, q->t0, n);

    halo_tensor sel = {0}, comp_rows = {0};
    if (K->ratio) {
        compress(f, q, &K->comp, &P->ckv, &P->cg, &L->comp_ape, &L->comp_norm, rope);
        comp_rows = rows(&K->comp.rows, 0, K->comp.n_rows);
    }
    if (K->ratio == 4) {
        sel = tmp(f, HALO_TYPE_I32, hp->indexer_top_k, n, 1);
        if (f->st) return;
        compress(f, q, &K->index, &P->ikv, &P->ig, &L->idx_ape, &L->idx_norm, rope);
        halo_tensor iq = P->iq, iw = P->iw;
        iq.offset += (uint64_t)q->t0 * hp->indexer_head_dim * hp->indexer_n_head * sizeof(float);
        iq.ne[2] = n;
        iw = rows(&iw, q->t0, n);
        halo_tensor keys = rows(&K->index.rows, 0, K->index.n_rows);
        halo_topk_args t = {.q = &iq,
                            .w = &iw,
                            .keys = &keys,
                            .pos = pos,
                            .ratio = 4,
                            .top_k = hp->indexer_top_k,
                            .out = &sel};
        f->op->topk(f->be, &t);
    }
    if (f->st) return;

    halo_tensor qs = P->q, os = P->o;
    uint64_t head_rows = (uint64_t)q->t0 * hd * H * sizeof(float);
    qs.offset += head_rows;
    os.offset += head_rows;
    qs.ne[2] = os.ne[2] = n;
    halo_attn_args a = {.q = &qs,
                        .pos = pos,
                        .window = &win,
                        .win_pos0 = old0,
                        .sliding_window = (uint32_t)W,
                        .comp = K->ratio ? &comp_rows : NULL,
                        .ratio = K->ratio,
                        .select = K->ratio == 4 ? &sel : NULL,
                        .sinks = &L->attn_sinks.t,
                        .scale = 1.0f / sqrtf((float)hd),
                        .out = &os};
    f->op->attention(f->be, &a);

    /* The ring keeps the last W raw rows. */
    for (int64_t i = n > W ? n - W : 0; i < n; i++)
        copy_rows(f, &K->window, (q->p0 + i) % W, &kv2, q->t0 + i, 1);
    release_to(f, mark);
}

static void attention_block(fwd *f, uint32_t il, halo_tensor *x) {
    const halo_hparams *hp = f->hp;
    const halo_layer_weights *L = &f->w->layer[il];
    int64_t n = f->n, hd = hp->head_dim, H = hp->n_head;
    uint32_t ratio = hp->compress_ratio[il];
    halo_rope rope = layer_rope(hp, ratio);
    halo_backend *be = f->be;
    const halo_backend_ops *op = f->op;
    attn_proj P = {0};

    halo_tensor qr = tmp(f, HALO_TYPE_F32, hp->q_lora_rank, n, 1);
    P.q = tmp(f, HALO_TYPE_F32, hd, H, n);
    P.kvr = tmp(f, HALO_TYPE_F32, hd, 1, n);
    int64_t width = ratio ? f->seqs[0].kv->layer[il].comp.width : 0; /* the same in every sequence */
    int64_t id = hp->indexer_head_dim, ih = hp->indexer_n_head;
    if (ratio) {
        P.ckv = tmp(f, HALO_TYPE_F32, width, n, 1);
        P.cg = tmp(f, HALO_TYPE_F32, width, n, 1);
    }
    if (ratio == 4) {
        P.ikv = tmp(f, HALO_TYPE_F32, 2 * id, n, 1);
        P.ig = tmp(f, HALO_TYPE_F32, 2 * id, n, 1);
        P.iq = tmp(f, HALO_TYPE_F32, id, ih, n);
        P.iw = tmp(f, HALO_TYPE_F32, ih, n, 1);
    }
    if (f->st) return;
    /* Every projection of the normed x in one call, then every one of the normed qr. */
    const halo_tensor *wx[7] = {&L->q_a.t, &L->kv.t};
    halo_tensor *ox[7] = {&qr, &P.kvr};
    uint32_t nx = 2;
    if (ratio) {
        wx[nx] = &L->comp_kv.t, ox[nx++] = &P.ckv;
        wx[nx] = &L->comp_gate.t, ox[nx++] = &P.cg;
    }
    if (ratio == 4) {
        wx[nx] = &L->idx_kv.t, ox[nx++] = &P.ikv;
        wx[nx] = &L->idx_gate.t, ox[nx++] = &P.ig;
        wx[nx] = &L->idx_proj.t, ox[nx++] = &P.iw;
    }
    project(f, x, &L->attn_norm.t, nx, wx, ox);
    const halo_tensor *wq[2] = {&L->q_b.t, &L->idx_q_b.t};
    halo_tensor *oq[2] = {&P.q, &P.iq};
    project(f, &qr, &L->q_a_norm.t, ratio == 4 ? 2 : 1, wq, oq);
    op->rms_norm(be, &P.q, (uint32_t)hd, NULL, hp->norm_eps);
    op->rope(be, &P.q, f->pos, &rope, false);
    op->rms_norm(be, &P.kvr, (uint32_t)hd, &L->kv_norm.t, hp->norm_eps);
    op->rope(be, &P.kvr, f->pos, &rope, false);
    if (ratio == 4) op->rope(be, &P.iq, f->pos, &rope, false);
    P.o = tmp(f, HALO_TYPE_F32, hd, H, n);
    halo_tensor y1 = tmp(f, HALO_TYPE_F32, (int64_t)hp->o_groups * hp->o_lora_rank, n, 1);
    if (f->st) return;
    for (uint32_t i = 0; i < f->n_seqs && !f->st; i++)
        attend_seq(f, il, &f->seqs[i], &P, &rope);
    if (f->st) return;
    /* K = V carries rope on its tail: rotate the output back by the query position. */
    op->rope(be, &P.o, f->pos, &rope, true);
    halo_tensor o2 = reshape(P.o, hd * H, n, 1);
    op->matmul(be, &L->out_a.t, &o2, hp->o_groups, &y1);
    op->matmul(be, &L->out_b.t, &y1, 1, x);
}

static void ffn_block(fwd *f, uint32_t il, halo_tensor *x, halo_tensor *y) {
    const halo_hparams *hp = f->hp;
    const halo_layer_weights *L = &f->w->layer[il];
    f->op->rms_norm(f->be, x, (uint32_t)hp->n_embd, &L->ffn_norm.t, hp->norm_eps);
    bool hash = L->tid2eid.src != NULL;
    halo_moe_args a = {.x = x,
                       .gate_inp = &L->gate_inp.t,
                       .probs_bias = L->probs_b.src ? &L->probs_b.t : NULL,
                       .tid2eid = hash ? &L->tid2eid.t : NULL,
                       .tokens = f->tokens,
                       .gate_exps = &L->gate_exps.t,
                       .up_exps = &L->up_exps.t,
                       .down_exps = &L->down_exps.t,
                       .gate_sh = L->gate_sh.src ? &L->gate_sh.t : NULL,
                       .up_sh = L->up_sh.src ? &L->up_sh.t : NULL,
                       .down_sh = L->down_sh.src ? &L->down_sh.t : NULL,
                       .n_used = hp->n_expert_used,
                       .gating = hp->gating_func,
                       .norm_weights = hp->expert_weights_norm,
                       .weights_scale = hp->expert_weights_scale,
                       .clamp_exp = hp->swiglu_clamp_exp[il],
                       .clamp_shexp = hp->swiglu_clamp_shexp[il],
                       .out = y,
                       .experts = L->experts};
    f->op->moe(f->be, &a);
}

/* One hyper-connected sublayer: collapse the streams, run the block, write back. */
static void hc_site(fwd *f, halo_tensor *streams, const halo_weight *fn, const halo_weight *base,
                    const halo_weight *scale, uint32_t il, bool attention) {
    const halo_hparams *hp = f->hp;
    int64_t n = f->n, E = hp->n_embd, hc = hp->hc;
    uint64_t mark = f->used;
    halo_tensor x = tmp(f, HALO_TYPE_F32, E, n, 1);
    halo_tensor post = tmp(f, HALO_TYPE_F32, hc, n, 1);
    halo_tensor comb = tmp(f, HALO_TYPE_F32, hc, hc, n);
    halo_tensor y = tmp(f, HALO_TYPE_F32, E, n, 1);
    if (f->st) return;
    halo_hc_args a = {.streams = streams,
                      .fn = &fn->t,
                      .base = &base->t,
                      .scale = &scale->t,
                      .hc = (uint32_t)hc,
                      .sinkhorn_iters = hp->hc_sinkhorn_iters,
                      .eps = hp->hc_eps,
                      .norm_eps = hp->norm_eps,
                      .collapsed = &x,
                      .post = &post,
                      .comb = &comb};
    f->op->hc_pre(f->be, &a);
    if (attention) {
        attention_block(f, il, &x); /* leaves the block output in x */
        if (!f->st) f->op->hc_post(f->be, streams, &x, &post, &comb);
    } else {
        ffn_block(f, il, &x, &y);
        if (!f->st) f->op->hc_post(f->be, streams, &y, &post, &comb);
    }
    release_to(f, mark);
}

/* The step itself, over f's sequences, scratch and batch arrays (all set by the caller). */
static void run_step(fwd *f, bool all_logits, float *logits) {
    const halo_hparams *hp = f->hp;
    const halo_weights *w = f->w;
    halo_backend *be = f->be;
    int64_t n = f->n, E = hp->n_embd, hc = hp->hc;
    halo_tensor x = tmp(f, HALO_TYPE_F32, E, n, 1);
    halo_tensor streams = tmp(f, HALO_TYPE_F32, E, hc, n);
    if (f->st) return;
    /* Every stream starts as the token embedding. */
    f->op->embed(be, &w->token_embd.t, f->tokens, &x);
    for (int64_t t = 0; t < n; t++)
        for (int64_t k = 0; k < hc; k++)
            copy_rows(f, &streams, t * hc + k, &x, t, 1);
    for (uint32_t il = 0; il < hp->n_layer && !f->st; il++) {
        const halo_layer_weights *L = &w->layer[il];
        hc_site(f, &streams, &L->hc_attn_fn, &L->hc_attn_base, &L->hc_attn_scale, il, true);
        hc_site(f, &streams, &L->hc_ffn_fn, &L->hc_ffn_base, &L->hc_ffn_scale, il, false);
        if (!f->st) f->st = f->op->check(be, f->err); /* an op that failed stops the step */
    }
    if (f->st) return;
    halo_hc_args head = {.streams = &streams,
                         .fn = &w->out_hc_fn.t,
                         .base = &w->out_hc_base.t,
                         .scale = &w->out_hc_scale.t,
                         .hc = (uint32_t)hc,
                         .eps = hp->hc_eps,
                         .norm_eps = hp->norm_eps,
                         .collapsed = &x};
    f->op->hc_pre(be, &head);
    /* Every token's row, or each sequence's last token's, gathered into consecutive rows (the
     * norm is per row, so it comes after, with the head's projection). */
    int64_t n_out = all_logits ? n : f->n_seqs;
    halo_tensor last = x;
    if (!all_logits) {
        last = tmp(f, HALO_TYPE_F32, E, n_out, 1);
        for (uint32_t i = 0; i < f->n_seqs && !f->st; i++)
            copy_rows(f, &last, i, &x, f->seqs[i].t0 + f->seqs[i].n - 1, 1);
    }
    halo_tensor out = tmp(f, HALO_TYPE_F32, hp->n_vocab, n_out, 1);
    if (f->st) return;
    const halo_tensor *head_w = &w->output.t;
    halo_tensor *head_out = &out;
    project(f, &last, &w->output_norm.t, 1, &head_w, &head_out);
    f->st = f->op->sync(be, f->err);
    if (!f->st)
        f->st = f->op->buf_read(be, out.buf, out.offset, logits, halo_tensor_nbytes(&out), f->err);
}

halo_status halo_forward_check(const halo_hparams *hp, const halo_fwd_item *items, uint32_t n_items,
                               halo_error *err) {
    if (n_items == 0) return halo_fail(err, HALO_E_INVALID_ARG, "no sequences to evaluate");
    for (uint32_t k = 0; k < n_items; k++) {
        const halo_fwd_item *it = &items[k];
        if (it->n == 0) return halo_fail(err, HALO_E_INVALID_ARG, "no tokens to evaluate");
        if (it->kv->n_past + it->n > it->kv->n_ctx)
            return halo_fail(err, HALO_E_INVALID_ARG,
                             "%u tokens at position %lld exceed the context of %u", it->n,
                             (long long)it->kv->n_past, it->kv->n_ctx);
        for (uint32_t i = 0; i < it->n; i++)
            if (it->tokens[i] < 0 || (uint32_t)it->tokens[i] >= hp->n_vocab)
                return halo_fail(err, HALO_E_INVALID_ARG,
                                 "token %d at index %u is outside the "
                                 "vocabulary of %u",
                                 it->tokens[i], i, hp->n_vocab);
        for (uint32_t j = 0; j < k; j++)
            if (items[j].kv == it->kv)
                return halo_fail(err, HALO_E_INVALID_ARG, "a sequence appears twice in a step");
    }
    return HALO_OK;
}

halo_status halo_forward(halo_backend *be, const halo_hparams *hp, const halo_weights *w,
                         halo_buf *scratch, uint64_t scratch_bytes, const halo_fwd_item *items,
                         uint32_t n_items, bool all_logits, float *logits, halo_error *err) {
    halo_status st = halo_forward_check(hp, items, n_items, err);
    if (st) return st;
    int64_t n = 0;
    for (uint32_t k = 0; k < n_items; k++)
        n += items[k].n;
    fwd f = {.be = be,
             .op = be->ops,
             .hp = hp,
             .w = w,
             .n = n,
             .n_seqs = n_items,
             .scratch = scratch,
             .cap = scratch_bytes,
             .err = err};
    f.seqs = malloc(n_items * sizeof *f.seqs);
    int32_t *toks = malloc((size_t)n * sizeof *toks);
    f.pos = malloc((size_t)n * sizeof *f.pos);
    if (!f.seqs || !toks || !f.pos) {
        st = halo_fail(err, HALO_E_NOMEM, "out of memory");
    } else {
        for (uint32_t k = 0, t0 = 0; k < n_items; t0 += items[k].n, k++) {
            f.seqs[k] =
                (seq){.kv = items[k].kv, .t0 = t0, .n = items[k].n, .p0 = items[k].kv->n_past};
            for (uint32_t i = 0; i < items[k].n; i++) {
                toks[t0 + i] = items[k].tokens[i];
                f.pos[t0 + i] = (int32_t)(items[k].kv->n_past + i);
            }
        }
        f.tokens = toks;
        run_step(&f, all_logits, logits);
        st = f.st;
    }
    if (!st)
        for (uint32_t k = 0; k < n_items; k++)
            items[k].kv->n_past += items[k].n;
    free(f.seqs);
    free(toks);
    free(f.pos);
    return st;
}

uint64_t halo_forward_scratch_bytes(const halo_hparams *hp, const halo_weights *w,
                                    uint32_t n_tokens) {
    /* The temporaries grow with the batch, with the raw rows before it in the window and with
     * the compressors' pending rows: measure one sequence with all three at their largest.
     * Several sequences of the same total need no more (their per-sequence temporaries are
     * given back after each one and each is no larger than the single sequence's). */
    halo_backend nop = {.ops = &halo_measure_ops};
    halo_kv *kv = NULL;
    halo_error err;
    uint32_t W = hp->sliding_window;
    if (n_tokens == 0 || halo_kv_create(&nop, hp, W + n_tokens, &kv, &err)) return 0;
    kv->n_past = W - 1;
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        halo_kv_layer *L = &kv->layer[il];
        if (L->ratio) L->comp.n_pend = L->comp.ratio - 1;
        if (L->ratio == 4) L->index.n_pend = L->index.ratio - 1;
    }
    int32_t *toks = calloc(n_tokens, sizeof *toks);
    float logit;
    uint64_t peak = 0;
    for (int all = 0; all < 2 && toks; all++) {
        fwd f = {.be = &nop,
                 .op = &halo_measure_ops,
                 .hp = hp,
                 .w = w,
                 .n = n_tokens,
                 .n_seqs = 1,
                 .tokens = toks,
                 .cap = UINT64_MAX,
                 .err = &err};
        seq q = {.kv = kv, .t0 = 0, .n = n_tokens, .p0 = kv->n_past};
        f.seqs = &q;
        f.pos = toks; /* positions are not read by the measuring ops */
        halo_kv_series saved[HALO_MAX_LAYERS][2];
        for (uint32_t il = 0; il < hp->n_layer; il++) {
            saved[il][0] = kv->layer[il].comp;
            saved[il][1] = kv->layer[il].index;
        }
        run_step(&f, all, &logit);
        for (uint32_t il = 0; il < hp->n_layer; il++) {
            kv->layer[il].comp = saved[il][0];
            kv->layer[il].index = saved[il][1];
        }
        if (f.peak > peak) peak = f.peak;
    }
    free(toks);
    halo_kv_free(kv);
    return peak;
}
