/* Vulkan backend: DeepSeek V4's attention, compressor pooling, indexer top-k and MoE. */
#include <stdlib.h>
#include <string.h>

#include "backend/vulkan/vk_ops.h"
#include "halo/types.h"

static vk_binding opt(const halo_tensor *t) {
    return t ? vk_bind_tensor(t) : (vk_binding){0};
}

vk_attn_shape vk_attn_shape_of(const halo_attn_args *a) {
    return (vk_attn_shape){(uint32_t)a->q->ne[0],
                           (uint32_t)a->q->ne[1],
                           (uint32_t)a->window->ne[1],
                           a->sliding_window,
                           a->comp ? (uint32_t)a->comp->ne[1] : 0,
                           a->ratio ? a->ratio : 1,
                           a->select ? (uint32_t)a->select->ne[0] : 0,
                           a->comp != NULL,
                           (int32_t)a->win_pos0,
                           a->scale};
}

typedef struct attn_pc {
    vk_attn_shape s;
    uint32_t q_off, win_off, comp_off, sel_off, sinks_off, pos_off, out_off;
} attn_pc;

void vk_attention(halo_backend *be, const halo_attn_args *a) {
    vk_backend *vb = vk_of(be);
    uint32_t hd = (uint32_t)a->q->ne[0], n_head = (uint32_t)a->q->ne[1];
    uint32_t n_tok = (uint32_t)a->q->ne[2];
    if (hd > 512 || a->win_pos0 > INT32_MAX) {
        vk_fail(vb, HALO_E_UNSUPPORTED,
                "attention: head_dim %u or window position %lld beyond "
                "the shader's range (512, 2^31)",
                hd, (long long)a->win_pos0);
        return;
    }
    if (vk_attn_split(vb, a)) return; /* a few tokens: split-K (vk_attn_split.c) */
    uint64_t cur = 0, sinks_off = vk_take(&cur, vk_f32_bytes(a->sinks));
    if (!vk_begin_uploads(vb, n_tok * 4) || (cur && !vk_scratch_reserve(vb, cur, "attention")))
        return;
    vk_binding b[8] = {{0},
                       vk_bind_tensor(a->q),
                       vk_bind_tensor(a->window),
                       opt(a->comp),
                       opt(a->select),
                       vk_as_f32(vb, "attention", a->sinks, sinks_off),
                       vk_upload_data(vb, a->pos, n_tok * sizeof *a->pos),
                       vk_bind_tensor(a->out)};
    vk_bound bd[8] = {{0}};
    if (!vk_resolve(vb, "attention", b, 8, bd)) return;
    attn_pc pc = {vk_attn_shape_of(a), bd[1].rel / 4, bd[2].rel / 4, bd[3].rel / 4,
                  bd[4].rel / 4,        bd[5].rel / 4, bd[6].rel / 4, bd[7].rel / 4};
    /* Tokens in chunks (vk_submit.c); each (head, token) is one workgroup either way. A token
     * reads at most its window and its compressed (or selected) rows. */
    double rows = (double)pc.s.n_win + (pc.s.k_sel ? pc.s.k_sel : pc.s.n_comp);
    double per_tok = rows * n_head * hd * 2;
    uint32_t per = vk_chunk(vb, per_tok, n_tok, 1);
    for (uint32_t t0 = 0; t0 < n_tok; t0 += per) {
        uint32_t n = n_tok - t0 < per ? n_tok - t0 : per;
        attn_pc cp = pc;
        cp.q_off += t0 * n_head * hd;
        cp.out_off += t0 * n_head * hd;
        cp.sel_off += t0 * pc.s.k_sel;
        cp.pos_off += t0;
        vk_note_work(vb, per_tok * n);
        if (!vk_dispatch(vb, VK_K_ATTENTION, "attention", b, 8, NULL, &cp, sizeof cp, n_head, n, 1))
            return;
    }
}

typedef struct pool_pc {
    uint32_t ratio, dim, width, overlap, have_prev, n_rot;
    float eps;
    uint32_t kv_off, gate_off, ape_off, norm_off, pkv_off, pgate_off, out_off, cs_off;
} pool_pc;

typedef struct save_pc {
    uint32_t ratio, dim, width, n_win, kv_off, gate_off, ape_off, pkv_off, pgate_off;
} save_pc;

void vk_pool(halo_backend *be, const halo_pool_args *a) {
    vk_backend *vb = vk_of(be);
    uint32_t n_win = (uint32_t)a->out->ne[1], width = a->overlap ? 2 * a->dim : a->dim;
    if (n_win == 0) return;
    if (a->dim > 512) {
        vk_fail(vb, HALO_E_UNSUPPORTED, "pool: dim %u beyond the shader's 512", a->dim);
        return;
    }
    uint32_t half = a->rope->n_rot / 2;
    uint64_t cs_bytes = (uint64_t)n_win * half * 2 * sizeof(float);
    uint64_t cur = 0, ape_off = vk_take(&cur, vk_f32_bytes(a->ape));
    uint64_t norm_off = vk_take(&cur, vk_f32_bytes(a->norm));
    if (!vk_begin_uploads(vb, cs_bytes + 8192) || (cur && !vk_scratch_reserve(vb, cur, "pool")))
        return;
    float *pos = malloc(n_win * sizeof *pos);
    float *cs = NULL;
    if (pos) {
        for (uint32_t w = 0; w < n_win; w++)
            pos[w] = (float)(a->pos0 + (int64_t)w * a->ratio);
        cs = vk_rope_table(a->rope, pos, n_win);
    }
    free(pos);
    if (!cs) {
        vk_fail(vb, HALO_E_NOMEM, "pool: out of host memory");
        return;
    }
    vk_binding csb = vk_upload_data(vb, cs, cs_bytes);
    free(cs);
    vk_binding ape = vk_as_f32(vb, "pool", a->ape, ape_off);
    vk_binding b[9] = {{0},
                       vk_bind_tensor(a->kv),
                       vk_bind_tensor(a->gate),
                       ape,
                       vk_as_f32(vb, "pool", a->norm, norm_off),
                       a->overlap ? opt(a->prev_kv) : (vk_binding){0},
                       a->overlap ? opt(a->prev_gate) : (vk_binding){0},
                       vk_bind_tensor(a->out),
                       csb};
    vk_bound bd[9] = {{0}};
    if (!vk_resolve(vb, "pool", b, 9, bd)) return;
    pool_pc pc = {a->ratio,       a->dim,        width,         a->overlap,    a->have_prev,
                  a->rope->n_rot, a->eps,        bd[1].rel / 4, bd[2].rel / 4, bd[3].rel / 4,
                  bd[4].rel / 4,  bd[5].rel / 4, bd[6].rel / 4, bd[7].rel / 4, bd[8].rel / 4};
    vk_dispatch(vb, VK_K_POOL, "pool", b, 9, NULL, &pc, sizeof pc, n_win, 1, 1);
    if (!a->overlap) return;
    vk_binding s[6] = {{0}, b[1], b[2], ape, b[5], b[6]};
    vk_bound sd[6] = {{0}};
    if (!vk_resolve(vb, "pool", s, 6, sd)) return;
    save_pc sp = {a->ratio,      a->dim,        width,         n_win,        sd[1].rel / 4,
                  sd[2].rel / 4, sd[3].rel / 4, sd[4].rel / 4, sd[5].rel / 4};
    vk_dispatch(vb, VK_K_POOL_SAVE, "pool", s, 6, NULL, &sp, sizeof sp,
                (a->ratio * a->dim + 63) / 64, 1, 1);
}

typedef struct score_pc {
    uint32_t hd, n_head, n_rows, ratio, q_off, w_off, k_off, score_off, pos_off;
} score_pc;

typedef struct select_pc {
    uint32_t n_rows, ratio, top_k, score_off, pos_off, out_off;
} select_pc;

void vk_topk(halo_backend *be, const halo_topk_args *a) {
    vk_backend *vb = vk_of(be);
    uint32_t n_tok = (uint32_t)a->q->ne[2], n_rows = (uint32_t)a->keys->ne[1];
    uint64_t score_bytes = (uint64_t)n_tok * n_rows * 4;
    if (!vk_begin_uploads(vb, n_tok * 4) || !vk_scratch_reserve(vb, score_bytes + 4, "topk"))
        return;
    vk_binding b[7] = {{0},
                       vk_bind_tensor(a->q),
                       vk_bind_tensor(a->w),
                       vk_bind_tensor(a->keys),
                       vk_scratch_at(vb, 0, score_bytes),
                       vk_upload_data(vb, a->pos, n_tok * sizeof *a->pos),
                       vk_bind_tensor(a->out)};
    vk_bound bd[7] = {{0}};
    if (!vk_resolve(vb, "topk", b, 7, bd)) return;
    if (n_rows > 0) {
        score_pc sp = {(uint32_t)a->q->ne[0], (uint32_t)a->q->ne[1], n_rows,        a->ratio,
                       bd[1].rel / 4,         bd[2].rel / 4,         bd[3].rel / 4, bd[4].rel / 4,
                       bd[5].rel / 4};
        /* topk_score_row.comp: 64 rows a workgroup (head_dim <= 128, DeepSeek V4's indexer);
         * topk_score.comp otherwise: a workgroup per (row, token), rows over x and z. */
        bool by_row = vb->score_row && sp.hd <= 128 && n_rows <= 65535u * 64;
        uint32_t gx = by_row ? (n_rows + 63) / 64 : n_rows < 32768 ? n_rows : 32768;
        uint32_t gz = by_row ? 1 : (n_rows + gx - 1) / gx;
        /* Tokens in chunks (vk_submit.c). */
        double per_tok = (double)n_rows * sp.n_head * sp.hd;
        uint32_t per = vk_chunk(vb, per_tok, n_tok, 1);
        for (uint32_t t0 = 0; t0 < n_tok; t0 += per) {
            uint32_t n = n_tok - t0 < per ? n_tok - t0 : per;
            score_pc cp = sp;
            cp.q_off += t0 * sp.n_head * sp.hd;
            cp.w_off += t0 * sp.n_head;
            cp.score_off += t0 * n_rows;
            cp.pos_off += t0;
            vk_note_work(vb, per_tok * n);
            if (!vk_dispatch(vb, by_row ? VK_K_TOPK_SCORE_ROW : VK_K_TOPK_SCORE, "topk", b, 6,
                             NULL, &cp, sizeof cp, gx, n, gz))
                return;
        }
    }
    select_pc pc = {n_rows, a->ratio, a->top_k, bd[4].rel / 4, bd[5].rel / 4, bd[6].rel / 4};
    vk_dispatch(vb, VK_K_TOPK_SELECT, "topk", b, 7, NULL, &pc, sizeof pc, n_tok, 1, 1);
}

typedef struct route_pc {
    uint32_t n_expert, k, gating, has_bias, has_hash, norm_weights;
    float weights_scale;
    uint32_t logit_off, bias_off, tid_off, tok_off, sel_off, w_off;
} route_pc;

typedef struct swiglu_pc {
    uint32_t n, g_off, u_off;
    float clamp_v;
} swiglu_pc;

typedef struct sum_pc {
    uint32_t n_embd, k, has_shared, yr_off, ys_off, w_off, out_off;
} sum_pc;

static void swiglu(vk_backend *vb, vk_binding g, vk_binding u, uint32_t n, float clamp_v) {
    vk_binding b[3] = {{0}, g, u};
    vk_bound bd[3] = {{0}};
    if (!vk_resolve(vb, "moe", b, 3, bd)) return;
    swiglu_pc pc = {n, bd[1].rel / 4, bd[2].rel / 4, clamp_v};
    uint32_t groups = (n + 63) / 64, gx = groups < 32768 ? groups : 32768;
    vk_dispatch(vb, VK_K_MOE_SWIGLU, "moe", b, 3, NULL, &pc, sizeof pc, gx, (groups + gx - 1) / gx,
                1);
}

/* out = Σ_k wts · yr (the token's routed outputs) + ys (the shared expert's, if there is one). */
static void moe_sum(vk_backend *vb, const halo_moe_args *a, vk_binding yr, vk_binding ys,
                    vk_binding wts, uint32_t n_tok, uint32_t n_embd, uint32_t k) {
    vk_binding s[5] = {{0}, yr, a->gate_sh ? ys : yr, wts, vk_bind_tensor(a->out)};
    vk_bound sdb[5] = {{0}};
    if (!vk_resolve(vb, "moe", s, 5, sdb)) return;
    sum_pc sp = {
        n_embd,        k, a->gate_sh != NULL, sdb[1].rel / 4, sdb[2].rel / 4, sdb[3].rel / 4,
        sdb[4].rel / 4};
    vk_dispatch(vb, VK_K_MOE_SUM, "moe", s, 5, NULL, &sp, sizeof sp, (n_embd + 63) / 64, n_tok, 1);
}

void vk_moe(halo_backend *be, const halo_moe_args *a) {
    vk_backend *vb = vk_of(be);
    uint32_t n_tok = (uint32_t)a->x->ne[1], n_embd = (uint32_t)a->x->ne[0];
    uint32_t n_expert = (uint32_t)a->gate_inp->ne[1], k = a->n_used;
    uint32_t n_ff = (uint32_t)a->gate_exps->ne[1];
    uint32_t n_ff_sh = a->gate_sh ? (uint32_t)a->gate_sh->ne[1] : 0;
    if (a->experts) {
        /* The expert cache lives in host memory the backend wraps; this backend copies wrapped
         * memory at wrap time, so it would not see later cache fills (docs/vulkan.md). */
        vk_fail(vb, HALO_E_UNSUPPORTED,
                "moe: streamed experts (blk.%u) are not supported by the "
                "Vulkan backend yet; the model must fit in memory",
                a->experts->layer);
        return;
    }
    if (k > 32 || n_expert > 1024) {
        vk_fail(vb, HALO_E_UNSUPPORTED,
                "moe: %u experts used of %u (the shader takes at most 32 "
                "of 1024)",
                k, n_expert);
        return;
    }
    /* The FFN's norm of x, deferred by vk_rms_norm, folded into the router and the shared
     * expert's gate and up (the first readers of x: no norm dispatch and no barrier before
     * them); x itself is normed in place beside the routing, before the routed experts read
     * it. Where those projections cannot fold it (prefill), it is recorded first. */
    bool fold = false;
    vk_binding norm_w = {0};
    float norm_eps = vb->pend_norm.eps;
    if (vk_norm_pending_on(vb, a->x) && vb->pend_norm.has_w && vb->fuse_norm) {
        norm_w = vk_bind_tensor(&vb->pend_norm.w);
        vk_mm_args t = {.x = vk_bind_tensor(a->x),
                        .N = n_expert,
                        .n_cols = n_tok,
                        .x_col_stride = n_embd,
                        .out_col_stride = n_expert,
                        .norm = norm_w,
                        .eps = norm_eps};
        fold = vk_mm_norm_fits(vb, a->gate_inp, &t);
        t.N = t.out_col_stride = n_ff_sh;
        if (a->gate_sh)
            fold = fold && vk_mm_norm_fits(vb, a->gate_sh, &t) && vk_mm_norm_fits(vb, a->up_sh, &t);
    }
    halo_tensor xn = *a->x, nw = vb->pend_norm.w;
    if (fold) vb->pend_norm.on = false;
    uint64_t pairs = (uint64_t)n_tok * k, cur = 0;
    uint64_t lg_off = vk_take(&cur, (uint64_t)n_tok * n_expert * 4);
    uint64_t sel_off = vk_take(&cur, pairs * 4), w_off = vk_take(&cur, pairs * 4);
    uint64_t bias_off = vk_take(&cur, vk_f32_bytes(a->probs_bias));
    uint64_t g_off = vk_take(&cur, pairs * n_ff * 4), u_off = vk_take(&cur, pairs * n_ff * 4);
    uint64_t yr_off = vk_take(&cur, pairs * n_embd * 4);
    uint64_t gs_off = vk_take(&cur, (uint64_t)n_tok * n_ff_sh * 4);
    uint64_t us_off = vk_take(&cur, (uint64_t)n_tok * n_ff_sh * 4);
    uint64_t ys_off = vk_take(&cur, (uint64_t)n_tok * n_embd * 4);
    bool grouped = vk_moe_mm_fits(vb, a, n_tok); /* prefill: grouped products (vk_moe_mm.c) */
    uint32_t n_tiles = grouped ? vk_moe_mm_tiles((uint32_t)pairs, n_expert) : 0;
    uint64_t ord_off = vk_take(&cur, (uint64_t)n_tiles * VK_MOE_MM_BN * 4);
    uint64_t til_off = vk_take(&cur, (uint64_t)n_tiles * 4);
    if (!vk_begin_uploads(vb, n_tok * 4 + 8192) || !vk_scratch_reserve(vb, cur, "moe")) return;
    vk_binding lg = vk_scratch_at(vb, lg_off, (uint64_t)n_tok * n_expert * 4);
    vk_binding sel = vk_scratch_at(vb, sel_off, pairs * 4),
               wts = vk_scratch_at(vb, w_off, pairs * 4);
    vk_binding g = vk_scratch_at(vb, g_off, pairs * n_ff * 4);
    vk_binding u = vk_scratch_at(vb, u_off, pairs * n_ff * 4);
    vk_binding yr = vk_scratch_at(vb, yr_off, pairs * n_embd * 4);
    vk_binding gs = vk_scratch_at(vb, gs_off, (uint64_t)n_tok * n_ff_sh * 4);
    vk_binding us = vk_scratch_at(vb, us_off, (uint64_t)n_tok * n_ff_sh * 4);
    vk_binding ys = vk_scratch_at(vb, ys_off, (uint64_t)n_tok * n_embd * 4);
    vk_binding x = vk_bind_tensor(a->x);

    vk_mm_args router = {.x = x,
                         .out = lg,
                         .N = n_expert,
                         .n_cols = n_tok,
                         .x_col_stride = n_embd,
                         .out_col_stride = n_expert};
    if (fold) router.norm = norm_w, router.eps = norm_eps;
    vk_mm(vb, "moe", a->gate_inp, &router);
    /* The shared expert reads only x: its steps are recorded beside the routed ones, so they
     * share their barriers (vk_hazard.c puts one only before a command that reads what the
     * commands since the last one wrote). With HALO_VK_FUSE_MOE (default 2) the SwiGLUs are
     * folded into the down projections' loads and the weighted sum into the routed down: router
     * + shared gate and up, then the routing + shared down, then routed gate and up, then the
     * routed down, which writes the output (4 barriers, 7 dispatches; unfused: 6 and 11). */
    vk_mm_args sh = {.x = x,
                     .out = gs,
                     .N = n_ff_sh,
                     .n_cols = n_tok,
                     .x_col_stride = n_embd,
                     .out_col_stride = n_ff_sh};
    if (fold) sh.norm = norm_w, sh.eps = norm_eps;
    if (a->gate_sh) {
        vk_mm(vb, "moe", a->gate_sh, &sh);
        sh.out = us;
        vk_mm(vb, "moe", a->up_sh, &sh);
    }

    vk_binding r[7] = {
        {0},
        lg,
        a->probs_bias ? vk_as_f32(vb, "moe", a->probs_bias, bias_off) : (vk_binding){0},
        opt(a->tid2eid),
        a->tid2eid ? vk_upload_data(vb, a->tokens, n_tok * sizeof *a->tokens) : (vk_binding){0},
        sel,
        wts};
    vk_bound rd[7] = {{0}};
    if (!vk_resolve(vb, "moe", r, 7, rd)) return;
    route_pc rp = {n_expert,           k,
                   a->gating,          a->probs_bias != NULL,
                   a->tid2eid != NULL, a->norm_weights,
                   a->weights_scale,   rd[1].rel / 4,
                   rd[2].rel / 4,      rd[3].rel / 4,
                   rd[4].rel / 4,      rd[5].rel / 4,
                   rd[6].rel / 4};
    vk_dispatch(vb, VK_K_MOE_ROUTE, "moe", r, 7, NULL, &rp, sizeof rp, n_tok, 1, 1);
    if (fold) vk_norm_now(vb, &xn, n_embd, &nw, norm_eps);
    vk_mm_args sd = {.x = gs,
                     .out = ys,
                     .N = n_embd,
                     .n_cols = n_tok,
                     .x_col_stride = n_ff_sh,
                     .out_col_stride = n_embd};
    /* Decode only (a few tokens): the fold saves a dispatch and a barrier but every workgroup
     * of the down projection computes the SwiGLU of its column again (N / rows a workgroup
     * times), which over a prefill's many columns would cost more than the dispatch. */
    bool fuse = vb->fuse_moe >= 1 && n_tok <= 4;
    bool sh_fused = false;
    if (a->gate_sh) {
        sd.up = us;
        sd.clamp_v = a->clamp_shexp;
        sh_fused = fuse && vk_mm_swiglu_fits(vb, a->down_sh, &sd);
        if (sh_fused) {
            vk_mm(vb, "moe", a->down_sh, &sd);
        } else {
            sd.up = (vk_binding){0};
            swiglu(vb, gs, us, n_tok * n_ff_sh, a->clamp_shexp);
        }
    }

    /* Fast mode, one decode token (HALO_VK_MOEQ, vk_moeq.c): the same two dispatches on int8
     * activations, quantized by each workgroup as the CPU's fast mode quantizes them. */
    if (vk_moeq_fits(vb, a, n_tok, x)) {
        vk_moeq_gu(vb, a, n_tok, x, sel, g);
        if (a->gate_sh && !sh_fused) vk_mm(vb, "moe", a->down_sh, &sd);
        vk_moeq_dn(vb, a, n_tok, g, sel, wts, a->gate_sh ? ys : (vk_binding){0},
                   vk_bind_tensor(a->out));
        return;
    }
    if (grouped) {
        vk_binding ord = vk_scratch_at(vb, ord_off, (uint64_t)n_tiles * VK_MOE_MM_BN * 4);
        vk_binding til = vk_scratch_at(vb, til_off, (uint64_t)n_tiles * 4);
        vk_moe_mm_bucket(vb, sel, (uint32_t)pairs, n_expert, ord, til);
        vk_moe_mm(vb, a->gate_exps, x, n_embd, k, g, (uint32_t)pairs, n_expert, ord, til);
        vk_moe_mm(vb, a->up_exps, x, n_embd, k, u, (uint32_t)pairs, n_expert, ord, til);
        if (a->gate_sh && !sh_fused) vk_mm(vb, "moe", a->down_sh, &sd);
        swiglu(vb, g, u, (uint32_t)(pairs * n_ff), a->clamp_exp);
        vk_moe_mm(vb, a->down_exps, g, n_ff, 1, yr, (uint32_t)pairs, n_expert, ord, til);
        moe_sum(vb, a, yr, ys, wts, n_tok, n_embd, k);
        return;
    }
    vk_mm_args gu = {.x = x,
                     .out = g,
                     .sel = sel,
                     .N = n_ff,
                     .n_cols = (uint32_t)pairs,
                     .x_col_stride = n_embd,
                     .x_col_div = k,
                     .out_col_stride = n_ff,
                     .n_expert = n_expert};
    vk_mm(vb, "moe", a->gate_exps, &gu);
    gu.out = u;
    vk_mm(vb, "moe", a->up_exps, &gu);
    if (a->gate_sh && !sh_fused) vk_mm(vb, "moe", a->down_sh, &sd);
    vk_mm_args dn = {.x = g,
                     .out = yr,
                     .sel = sel,
                     .N = n_embd,
                     .n_cols = (uint32_t)pairs,
                     .x_col_stride = n_ff,
                     .out_col_stride = n_embd,
                     .n_expert = n_expert,
                     .up = u,
                     .clamp_v = a->clamp_exp};
    if (fuse && vk_mm_swiglu_fits(vb, a->down_exps, &dn)) {
        vk_mm_args ds = dn;
        ds.out = vk_bind_tensor(a->out);
        ds.wts = wts;
        ds.ys = a->gate_sh ? ys : (vk_binding){0};
        ds.sum_k = k;
        if (vb->fuse_moe >= 2 && vk_mm_sum_fits(vb, a->down_exps, &ds)) {
            vk_mm(vb, "moe", a->down_exps, &ds);
            return;
        }
    } else {
        dn.up = (vk_binding){0};
        swiglu(vb, g, u, (uint32_t)(pairs * n_ff), a->clamp_exp);
    }
    vk_mm(vb, "moe", a->down_exps, &dn);
    moe_sum(vb, a, yr, ys, wts, n_tok, n_embd, k);
}
