/* Binding DeepSeek V4 tensors by name with shape checks. Shapes are in ggml order (ne[0] is the
 * contiguous input dimension), as docs/dsv4-flash-table.md lists them. */
#include "model/weights.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "halo/quant.h"

typedef struct binder {
    const halo_gguf *g;
    halo_error *err;
    halo_status st;
} binder;

/* Binds `name` (printf-style with the layer number) expecting n_dims dims ne0..ne2. */
static void bind(binder *b, halo_weight *slot, int il, const char *fmt, uint32_t n_dims,
                 int64_t ne0, int64_t ne1, int64_t ne2) {
    if (b->st) return;
    char name[96];
    snprintf(name, sizeof name, fmt, il);
    const halo_gguf_tensor *t = halo_gguf_find_tensor(b->g, name);
    if (!t) {
        b->st = halo_fail(b->err, HALO_E_NOT_FOUND, "tensor '%s' is missing", name);
        return;
    }
    int64_t want[4] = {ne0, n_dims > 1 ? ne1 : 1, n_dims > 2 ? ne2 : 1, 1};
    if (want[0] != t->ne[0] || want[1] != t->ne[1] || want[2] != t->ne[2] || t->ne[3] != 1) {
        b->st = halo_fail(b->err, HALO_E_BAD_VALUE,
                          "tensor '%s' has shape {%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64
                          "}, expected {%" PRId64 ", %" PRId64 ", %" PRId64 "}",
                          name, t->ne[0], t->ne[1], t->ne[2], t->ne[3], want[0], want[1], want[2]);
        return;
    }
    /* Routing tables hold expert ids, read as i32 by the kernels: no other type will do (an
     * f32 table would be read as ids of absurd value). Every other weight is computed with. */
    bool ids = strstr(name, "tid2eid") != NULL;
    if (ids && t->type != HALO_TYPE_I32) {
        b->st = halo_fail(b->err, HALO_E_BAD_VALUE, "tensor '%s' has type %s: a routing table "
                          "holds expert ids as i32", name, halo_type_name(t->type));
        return;
    }
    if (!ids && !halo_quant_supported(t->type)) {
        b->st = halo_fail(b->err, HALO_E_UNSUPPORTED, "tensor '%s' has type %s, which halo cannot "
                          "compute with", name, halo_type_name(t->type));
        return;
    }
    slot->src = t;
    slot->t = (halo_tensor){.type = t->type, .ne = {t->ne[0], t->ne[1], t->ne[2], t->ne[3]}};
}

/* Norm weights are read by the backends' rms_norm as plain f32 rows (every GGUF converter keeps
 * 1-D norm weights in f32); any other type would be read past its end. */
static void bind_norm(binder *b, halo_weight *slot, int il, const char *fmt, int64_t n) {
    bind(b, slot, il, fmt, 1, n, 0, 0);
    if (!b->st && slot->src->type != HALO_TYPE_F32) {
        char name[96];
        snprintf(name, sizeof name, fmt, il);
        b->st = halo_fail(b->err, HALO_E_BAD_VALUE, "tensor '%s' has type %s: norm weights are f32",
                          name, halo_type_name(slot->src->type));
    }
}

static void bind_layer(binder *b, const halo_hparams *hp, halo_layer_weights *L, int il) {
    int64_t E = hp->n_embd, hd = hp->head_dim, H = hp->n_head, hc = hp->hc;
    int64_t mix = (2 + hc) * hc, ff = hp->n_ff_exp, ffs = hp->n_ff_exp * hp->n_expert_shared;
    bind_norm(b, &L->attn_norm, il, "blk.%d.attn_norm.weight", E);
    bind(b, &L->attn_sinks, il, "blk.%d.attn_sinks.weight", 1, H, 0, 0);
    bind(b, &L->q_a, il, "blk.%d.attn_q_a.weight", 2, E, hp->q_lora_rank, 0);
    bind_norm(b, &L->q_a_norm, il, "blk.%d.attn_q_a_norm.weight", hp->q_lora_rank);
    bind(b, &L->q_b, il, "blk.%d.attn_q_b.weight", 2, hp->q_lora_rank, H * hd, 0);
    bind(b, &L->kv, il, "blk.%d.attn_kv.weight", 2, E, hd, 0);
    bind_norm(b, &L->kv_norm, il, "blk.%d.attn_kv_a_norm.weight", hd);
    bind(b, &L->out_a, il, "blk.%d.attn_output_a.weight", 2, H * hd / hp->o_groups,
         (int64_t)hp->o_groups * hp->o_lora_rank, 0);
    bind(b, &L->out_b, il, "blk.%d.attn_output_b.weight", 2,
         (int64_t)hp->o_groups * hp->o_lora_rank, E, 0);
    bind(b, &L->hc_attn_fn, il, "blk.%d.hc_attn_fn.weight", 2, hc * E, mix, 0);
    bind(b, &L->hc_attn_base, il, "blk.%d.hc_attn_base.weight", 1, mix, 0, 0);
    bind(b, &L->hc_attn_scale, il, "blk.%d.hc_attn_scale.weight", 1, 3, 0, 0);
    bind(b, &L->hc_ffn_fn, il, "blk.%d.hc_ffn_fn.weight", 2, hc * E, mix, 0);
    bind(b, &L->hc_ffn_base, il, "blk.%d.hc_ffn_base.weight", 1, mix, 0, 0);
    bind(b, &L->hc_ffn_scale, il, "blk.%d.hc_ffn_scale.weight", 1, 3, 0, 0);

    uint32_t ratio = hp->compress_ratio[il];
    if (ratio) {
        int64_t w = ratio == 4 ? 2 * hd : hd; /* ratio-4 windows overlap: two series */
        bind(b, &L->comp_kv, il, "blk.%d.attn_compressor_kv.weight", 2, E, w, 0);
        bind(b, &L->comp_gate, il, "blk.%d.attn_compressor_gate.weight", 2, E, w, 0);
        bind(b, &L->comp_ape, il, "blk.%d.attn_compressor_ape.weight", 2, w, ratio, 0);
        bind_norm(b, &L->comp_norm, il, "blk.%d.attn_compressor_norm.weight", hd);
    }
    if (ratio == 4) {
        int64_t ih = hp->indexer_n_head, id = hp->indexer_head_dim;
        bind(b, &L->idx_proj, il, "blk.%d.indexer.proj.weight", 2, E, ih, 0);
        bind(b, &L->idx_q_b, il, "blk.%d.indexer.attn_q_b.weight", 2, hp->q_lora_rank, ih * id, 0);
        bind(b, &L->idx_kv, il, "blk.%d.indexer_compressor_kv.weight", 2, E, 2 * id, 0);
        bind(b, &L->idx_gate, il, "blk.%d.indexer_compressor_gate.weight", 2, E, 2 * id, 0);
        bind(b, &L->idx_ape, il, "blk.%d.indexer_compressor_ape.weight", 2, 2 * id, 4, 0);
        bind_norm(b, &L->idx_norm, il, "blk.%d.indexer_compressor_norm.weight", id);
    }

    bind_norm(b, &L->ffn_norm, il, "blk.%d.ffn_norm.weight", E);
    bind(b, &L->gate_inp, il, "blk.%d.ffn_gate_inp.weight", 2, E, hp->n_expert, 0);
    if ((uint32_t)il < hp->n_hash_layer)
        bind(b, &L->tid2eid, il, "blk.%d.ffn_gate_tid2eid.weight", 2, hp->n_expert_used,
             hp->n_vocab, 0);
    else
        bind(b, &L->probs_b, il, "blk.%d.exp_probs_b.bias", 1, hp->n_expert, 0, 0);
    bind(b, &L->gate_exps, il, "blk.%d.ffn_gate_exps.weight", 3, E, ff, hp->n_expert);
    bind(b, &L->up_exps, il, "blk.%d.ffn_up_exps.weight", 3, E, ff, hp->n_expert);
    bind(b, &L->down_exps, il, "blk.%d.ffn_down_exps.weight", 3, ff, E, hp->n_expert);
    if (hp->n_expert_shared) {
        bind(b, &L->gate_sh, il, "blk.%d.ffn_gate_shexp.weight", 2, E, ffs, 0);
        bind(b, &L->up_sh, il, "blk.%d.ffn_up_shexp.weight", 2, E, ffs, 0);
        bind(b, &L->down_sh, il, "blk.%d.ffn_down_shexp.weight", 2, ffs, E, 0);
    }
}

halo_status halo_weights_bind(const halo_gguf *g, const halo_hparams *hp, halo_weights *w,
                              halo_error *err) {
    memset(w, 0, sizeof *w);
    w->n_layer = hp->n_layer;
    binder b = {g, err, HALO_OK};
    int64_t E = hp->n_embd, hc = hp->hc;
    bind(&b, &w->token_embd, 0, "token_embd.weight", 2, E, hp->n_vocab, 0);
    for (uint32_t il = 0; il < hp->n_layer && !b.st; il++) bind_layer(&b, hp, &w->layer[il], (int)il);
    bind(&b, &w->out_hc_fn, 0, "output_hc_fn.weight", 2, hc * E, hc, 0);
    bind(&b, &w->out_hc_base, 0, "output_hc_base.weight", 1, hc, 0, 0);
    bind(&b, &w->out_hc_scale, 0, "output_hc_scale.weight", 1, 1, 0, 0);
    bind_norm(&b, &w->output_norm, 0, "output_norm.weight", E);
    bind(&b, &w->output, 0, "output.weight", 2, E, hp->n_vocab, 0);
    return b.st;
}

halo_status halo_weights_for_each(halo_weights *w, halo_weight_fn fn, void *user,
                                  halo_error *err) {
    halo_weight *globals[] = {&w->token_embd, &w->output_norm, &w->output,
                              &w->out_hc_fn, &w->out_hc_base, &w->out_hc_scale};
    halo_status st = HALO_OK;
    for (size_t i = 0; i < sizeof globals / sizeof globals[0] && !st; i++)
        if (globals[i]->src) st = fn(globals[i], user, err);
    /* A layer is a plain struct of halo_weight: walk it as an array. */
    for (uint32_t il = 0; il < w->n_layer && !st; il++) {
        halo_weight *slots = (halo_weight *)&w->layer[il];
        size_t n = sizeof(halo_layer_weights) / sizeof(halo_weight);
        for (size_t i = 0; i < n && !st; i++)
            if (slots[i].src) st = fn(&slots[i], user, err);
    }
    return st;
}
