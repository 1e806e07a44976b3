/* DeepSeek V4 forward (the transformers reference's DeepseekV4Model, paper §2), as a fixed
 * sequence of backend ops per layer:
 *
 *   streams ──hc_pre──> x ─norm─> attention (q/kv low rank, partial rope, sliding window +
 *   compressed rows [+ indexer top-k], sinks, inverse rope, grouped output) ──hc_post──>
 *   streams ──hc_pre──> x ─norm─> MoE (hash or biased top-k routing, shared expert)
 *   ──hc_post──> streams ... ──hc_head──> norm ──> output projection ──> logits
 *
 * Positions, window bookkeeping and which compressor windows close are integers known on the
 * host; no activation is read back until the logits. */
#include "model/forward.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "halo/types.h"

enum { MAX_TEMPS = 64 };

typedef struct fwd {
    halo_backend *be;
    const halo_backend_ops *op;
    const halo_hparams *hp;
    const halo_weights *w;
    halo_kv *kv;
    const int32_t *tokens;
    int32_t *pos;
    int64_t n, p0;
    halo_buf *temps[MAX_TEMPS];
    int n_temps;
    halo_error *err;
    halo_status st;
} fwd;

/* A temporary activation, freed by free_temps. On failure f->st is set and later ops are
 * skipped by the callers' checks. */
static halo_tensor tmp(fwd *f, uint32_t type, int64_t ne0, int64_t ne1, int64_t ne2) {
    halo_tensor t = {.type = type, .ne = {ne0, ne1, ne2, 1}};
    if (f->st) return t;
    if (f->n_temps == MAX_TEMPS) {
        f->st = halo_fail(f->err, HALO_E_NOMEM, "forward: too many temporaries");
        return t;
    }
    f->st = f->op->buf_alloc(f->be, halo_tensor_nbytes(&t), &t.buf, f->err);
    if (!f->st) f->temps[f->n_temps++] = t.buf;
    return t;
}

static void free_temps(fwd *f, int keep) {
    while (f->n_temps > keep) f->op->buf_free(f->be, f->temps[--f->n_temps]);
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

/* Feeds the new source rows (kv, gate: [width, n]) of one compressed series: windows that
 * close are pooled into new rows; the rest waits in the series' pending rows. */
static void compress(fwd *f, halo_kv_series *s, const halo_tensor *kv, const halo_tensor *gate,
                     const halo_weight *ape, const halo_weight *norm, const halo_rope *rope) {
    int64_t m = s->n_pend + f->n, n_win = m / s->ratio, used = n_win * s->ratio;
    halo_tensor src_kv = tmp(f, HALO_TYPE_F32, s->width, m, 1);
    halo_tensor src_gate = tmp(f, HALO_TYPE_F32, s->width, m, 1);
    if (f->st) return;
    copy_rows(f, &src_kv, 0, &s->pend_kv, 0, s->n_pend);
    copy_rows(f, &src_gate, 0, &s->pend_gate, 0, s->n_pend);
    copy_rows(f, &src_kv, s->n_pend, kv, 0, f->n);
    copy_rows(f, &src_gate, s->n_pend, gate, 0, f->n);
    if (n_win > 0) {
        halo_tensor in_kv = rows(&src_kv, 0, used), in_gate = rows(&src_gate, 0, used);
        halo_tensor out = rows(&s->rows, s->n_rows, n_win);
        halo_pool_args a = {.kv = &in_kv, .gate = &in_gate, .ape = &ape->t, .norm = &norm->t,
                            .eps = f->hp->norm_eps, .overlap = s->width == 2 * s->dim,
                            .prev_kv = &s->prev_kv, .prev_gate = &s->prev_gate,
                            .have_prev = s->have_prev, .pos0 = s->n_rows * s->ratio,
                            .ratio = s->ratio, .dim = s->dim, .rope = rope, .out = &out};
        f->op->pool(f->be, &a);
        s->n_rows += n_win;
        s->have_prev = true;
    }
    copy_rows(f, &s->pend_kv, 0, &src_kv, used, m - used);
    copy_rows(f, &s->pend_gate, 0, &src_gate, used, m - used);
    s->n_pend = m - used;
}

static void attention_block(fwd *f, uint32_t il, halo_tensor *x) {
    const halo_hparams *hp = f->hp;
    const halo_layer_weights *L = &f->w->layer[il];
    halo_kv_layer *K = &f->kv->layer[il];
    int64_t n = f->n, hd = hp->head_dim, H = hp->n_head, W = hp->sliding_window;
    halo_rope rope = layer_rope(hp, K->ratio);
    halo_backend *be = f->be;
    const halo_backend_ops *op = f->op;

    op->rms_norm(be, x, (uint32_t)hp->n_embd, &L->attn_norm.t, hp->norm_eps);
    halo_tensor qr = tmp(f, HALO_TYPE_F32, hp->q_lora_rank, n, 1);
    halo_tensor q = tmp(f, HALO_TYPE_F32, hd, H, n);
    halo_tensor kvr = tmp(f, HALO_TYPE_F32, hd, 1, n);
    if (f->st) return;
    op->matmul(be, &L->q_a.t, x, 1, &qr);
    op->rms_norm(be, &qr, hp->q_lora_rank, &L->q_a_norm.t, hp->norm_eps);
    op->matmul(be, &L->q_b.t, &qr, 1, &q);
    op->rms_norm(be, &q, (uint32_t)hd, NULL, hp->norm_eps);
    op->rope(be, &q, f->pos, &rope, false);
    op->matmul(be, &L->kv.t, x, 1, &kvr);
    op->rms_norm(be, &kvr, (uint32_t)hd, &L->kv_norm.t, hp->norm_eps);
    op->rope(be, &kvr, f->pos, &rope, false);

    /* Raw window: the ring's rows for positions max(0, p0-W+1) .. p0-1, then the new rows. */
    int64_t old0 = f->p0 - (W - 1) > 0 ? f->p0 - (W - 1) : 0, n_old = f->p0 - old0;
    halo_tensor win = tmp(f, HALO_TYPE_F32, hd, n_old + n, 1);
    if (f->st) return;
    for (int64_t p = old0; p < f->p0; p++) copy_rows(f, &win, p - old0, &K->window, p % W, 1);
    halo_tensor kv2 = reshape(kvr, hd, n, 1);
    copy_rows(f, &win, n_old, &kv2, 0, n);

    halo_tensor sel = {0}, comp_rows = {0};
    if (K->ratio) {
        int64_t width = K->comp.width;
        halo_tensor ckv = tmp(f, HALO_TYPE_F32, width, n, 1);
        halo_tensor cg = tmp(f, HALO_TYPE_F32, width, n, 1);
        if (f->st) return;
        op->matmul(be, &L->comp_kv.t, x, 1, &ckv);
        op->matmul(be, &L->comp_gate.t, x, 1, &cg);
        compress(f, &K->comp, &ckv, &cg, &L->comp_ape, &L->comp_norm, &rope);
        comp_rows = rows(&K->comp.rows, 0, K->comp.n_rows);
    }
    if (K->ratio == 4) {
        int64_t id = hp->indexer_head_dim, ih = hp->indexer_n_head;
        halo_tensor ikv = tmp(f, HALO_TYPE_F32, 2 * id, n, 1);
        halo_tensor ig = tmp(f, HALO_TYPE_F32, 2 * id, n, 1);
        halo_tensor iq = tmp(f, HALO_TYPE_F32, id, ih, n);
        halo_tensor iw = tmp(f, HALO_TYPE_F32, ih, n, 1);
        sel = tmp(f, HALO_TYPE_I32, hp->indexer_top_k, n, 1);
        if (f->st) return;
        op->matmul(be, &L->idx_kv.t, x, 1, &ikv);
        op->matmul(be, &L->idx_gate.t, x, 1, &ig);
        compress(f, &K->index, &ikv, &ig, &L->idx_ape, &L->idx_norm, &rope);
        op->matmul(be, &L->idx_q_b.t, &qr, 1, &iq);
        op->rope(be, &iq, f->pos, &rope, false);
        op->matmul(be, &L->idx_proj.t, x, 1, &iw);
        halo_tensor keys = rows(&K->index.rows, 0, K->index.n_rows);
        halo_topk_args t = {.q = &iq, .w = &iw, .keys = &keys, .pos = f->pos, .ratio = 4,
                            .top_k = hp->indexer_top_k, .out = &sel};
        op->topk(be, &t);
    }
    if (f->st) return;

    halo_tensor o = tmp(f, HALO_TYPE_F32, hd, H, n);
    halo_tensor y1 = tmp(f, HALO_TYPE_F32, (int64_t)hp->o_groups * hp->o_lora_rank, n, 1);
    if (f->st) return;
    halo_attn_args a = {.q = &q, .pos = f->pos, .window = &win, .win_pos0 = old0,
                        .sliding_window = (uint32_t)W, .comp = K->ratio ? &comp_rows : NULL,
                        .ratio = K->ratio, .select = K->ratio == 4 ? &sel : NULL,
                        .sinks = &L->attn_sinks.t, .scale = 1.0f / sqrtf((float)hd), .out = &o};
    op->attention(be, &a);
    /* K = V carries rope on its tail: rotate the output back by the query position. */
    op->rope(be, &o, f->pos, &rope, true);
    halo_tensor o2 = reshape(o, hd * H, n, 1);
    op->matmul(be, &L->out_a.t, &o2, hp->o_groups, &y1);
    op->matmul(be, &L->out_b.t, &y1, 1, x);

    /* The ring keeps the last W raw rows. */
    for (int64_t i = n > W ? n - W : 0; i < n; i++)
        copy_rows(f, &K->window, (f->p0 + i) % W, &kv2, i, 1);
}

static void ffn_block(fwd *f, uint32_t il, halo_tensor *x, halo_tensor *y) {
    const halo_hparams *hp = f->hp;
    const halo_layer_weights *L = &f->w->layer[il];
    f->op->rms_norm(f->be, x, (uint32_t)hp->n_embd, &L->ffn_norm.t, hp->norm_eps);
    bool hash = L->tid2eid.src != NULL;
    halo_moe_args a = {.x = x, .gate_inp = &L->gate_inp.t,
                       .probs_bias = L->probs_b.src ? &L->probs_b.t : NULL,
                       .tid2eid = hash ? &L->tid2eid.t : NULL, .tokens = f->tokens,
                       .gate_exps = &L->gate_exps.t, .up_exps = &L->up_exps.t,
                       .down_exps = &L->down_exps.t,
                       .gate_sh = L->gate_sh.src ? &L->gate_sh.t : NULL,
                       .up_sh = L->up_sh.src ? &L->up_sh.t : NULL,
                       .down_sh = L->down_sh.src ? &L->down_sh.t : NULL,
                       .n_used = hp->n_expert_used, .gating = hp->gating_func,
                       .norm_weights = hp->expert_weights_norm,
                       .weights_scale = hp->expert_weights_scale,
                       .clamp_exp = hp->swiglu_clamp_exp[il],
                       .clamp_shexp = hp->swiglu_clamp_shexp[il], .out = y};
    f->op->moe(f->be, &a);
}

/* One hyper-connected sublayer: collapse the streams, run the block, write back. */
static void hc_site(fwd *f, halo_tensor *streams, const halo_weight *fn, const halo_weight *base,
                    const halo_weight *scale, uint32_t il, bool attention) {
    const halo_hparams *hp = f->hp;
    int64_t n = f->n, E = hp->n_embd, hc = hp->hc;
    halo_tensor x = tmp(f, HALO_TYPE_F32, E, n, 1);
    halo_tensor post = tmp(f, HALO_TYPE_F32, hc, n, 1);
    halo_tensor comb = tmp(f, HALO_TYPE_F32, hc, hc, n);
    halo_tensor y = tmp(f, HALO_TYPE_F32, E, n, 1);
    if (f->st) return;
    halo_hc_args a = {.streams = streams, .fn = &fn->t, .base = &base->t, .scale = &scale->t,
                      .hc = (uint32_t)hc, .sinkhorn_iters = hp->hc_sinkhorn_iters,
                      .eps = hp->hc_eps, .norm_eps = hp->norm_eps, .collapsed = &x,
                      .post = &post, .comb = &comb};
    f->op->hc_pre(f->be, &a);
    if (attention) {
        attention_block(f, il, &x); /* leaves the block output in x */
        if (!f->st) f->op->hc_post(f->be, streams, &x, &post, &comb);
    } else {
        ffn_block(f, il, &x, &y);
        if (!f->st) f->op->hc_post(f->be, streams, &y, &post, &comb);
    }
}

halo_status halo_forward(halo_backend *be, const halo_hparams *hp, const halo_weights *w,
                         halo_kv *kv, const int32_t *tokens, uint32_t n, bool all_logits,
                         float *logits, halo_error *err) {
    if (n == 0) return halo_fail(err, HALO_E_INVALID_ARG, "no tokens to evaluate");
    if (kv->n_past + n > kv->n_ctx)
        return halo_fail(err, HALO_E_INVALID_ARG,
                         "%u tokens at position %lld exceed the context of %u", n,
                         (long long)kv->n_past, kv->n_ctx);
    for (uint32_t i = 0; i < n; i++)
        if (tokens[i] < 0 || (uint32_t)tokens[i] >= hp->n_vocab)
            return halo_fail(err, HALO_E_INVALID_ARG, "token %d at index %u is outside the "
                             "vocabulary of %u", tokens[i], i, hp->n_vocab);
    fwd f = {.be = be, .op = be->ops, .hp = hp, .w = w, .kv = kv, .tokens = tokens, .n = n,
             .p0 = kv->n_past, .err = err};
    f.pos = malloc(n * sizeof *f.pos);
    if (!f.pos) return halo_fail(err, HALO_E_NOMEM, "out of memory");
    for (uint32_t i = 0; i < n; i++) f.pos[i] = (int32_t)(f.p0 + i);

    int64_t E = hp->n_embd, hc = hp->hc;
    halo_tensor x = tmp(&f, HALO_TYPE_F32, E, n, 1);
    halo_tensor streams = tmp(&f, HALO_TYPE_F32, E, hc, n);
    if (!f.st) {
        /* Every stream starts as the token embedding. */
        f.op->embed(be, &w->token_embd.t, tokens, &x);
        for (int64_t t = 0; t < n; t++)
            for (int64_t k = 0; k < hc; k++) {
                halo_tensor d = rows(&streams, t * hc + k, 1), s = rows(&x, t, 1);
                f.op->copy(be, &d, &s);
            }
    }
    int keep = f.n_temps;
    for (uint32_t il = 0; il < hp->n_layer && !f.st; il++) {
        const halo_layer_weights *L = &w->layer[il];
        hc_site(&f, &streams, &L->hc_attn_fn, &L->hc_attn_base, &L->hc_attn_scale, il, true);
        free_temps(&f, keep);
        hc_site(&f, &streams, &L->hc_ffn_fn, &L->hc_ffn_base, &L->hc_ffn_scale, il, false);
        free_temps(&f, keep);
        if (!f.st) f.st = f.op->sync(be, err); /* an op that failed stops the eval here */
    }
    if (!f.st) {
        halo_hc_args head = {.streams = &streams, .fn = &w->out_hc_fn.t,
                             .base = &w->out_hc_base.t, .scale = &w->out_hc_scale.t,
                             .hc = (uint32_t)hc, .eps = hp->hc_eps, .norm_eps = hp->norm_eps,
                             .collapsed = &x};
        f.op->hc_pre(be, &head);
        f.op->rms_norm(be, &x, (uint32_t)E, &w->output_norm.t, hp->norm_eps);
        int64_t n_out = all_logits ? n : 1;
        halo_tensor last = rows(&x, n - n_out, n_out);
        halo_tensor out = tmp(&f, HALO_TYPE_F32, hp->n_vocab, n_out, 1);
        if (!f.st) {
            f.op->matmul(be, &w->output.t, &last, 1, &out);
            f.st = f.op->sync(be, err);
        }
        if (!f.st)
            f.st = f.op->buf_read(be, out.buf, out.offset, logits, halo_tensor_nbytes(&out), err);
    }
    free_temps(&f, 0);
    free(f.pos);
    if (!f.st) kv->n_past += n;
    return f.st;
}
