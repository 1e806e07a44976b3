/* Vulkan backend: one decode token's routed experts by moe_dec.comp (HALO_VK_MOE_DEC): gate and
 * up with the SwiGLU in one dispatch, down with the weighted sum in another, each spread over a
 * fixed number of workgroups whatever the shape (a subgroup walks many rows of one pair, its
 * next row's loads in flight while it decodes one: the shader's comment says why). vk_moe
 * calls these in place of matvec_moe.comp's two gate/up dispatches and its fused down. */
#include "backend/vulkan/vk_ops.h"
#include "halo/types.h"

typedef struct dec_pc {
    uint32_t K, N, w_rel, w_chunk_rows, w_row_bytes, u_rel;
    uint32_t x_off4, x_col_stride4, k, sel_off, n_expert, out_off, out_col_stride;
    uint32_t wt_off, ys_off, has_ys;
    float clamp_v;
} dec_pc;

/* A binding's start inside its descriptor, 16-byte aligned (the shader reads x and h as vec4) */
static bool vec4_aligned(vk_backend *vb, vk_binding b) {
    vk_bound bd = {0};
    return b.buf && vk_resolve(vb, "moe", &b, 1, &bd) && bd.rel % 16 == 0;
}

bool vk_moe_dec_fits(vk_backend *vb, const halo_moe_args *a, uint32_t n_tok, vk_binding x) {
    const halo_tensor *g = a->gate_exps, *u = a->up_exps, *d = a->down_exps;
    uint64_t n_embd = (uint64_t)g->ne[0], n_ff = (uint64_t)g->ne[1];
    /* A few tokens (decode, where the experts' weights are read once a token): the sum over a
     * token's k pairs is done by one subgroup per row. gate/up's x staged in shared memory
     * (at most 4096 inputs); the up weight bound as one range (binding 8); h in down's read
     * order, groups of 512 values (moe_dec.comp's h_at). */
    return vb->moe_dec && vb->fuse_moe >= 2 && n_tok <= 4 && g->type == HALO_TYPE_IQ2_XXS &&
           u->type == g->type && d->type == HALO_TYPE_Q2_K && n_embd % 256 == 0 && n_embd <= 4096 &&
           n_ff % 512 == 0 && (uint64_t)d->ne[0] == n_ff && (uint64_t)d->ne[1] == n_embd &&
           halo_tensor_nbytes(u) + vb->align <= vb->max_range && vec4_aligned(vb, x);
}

/* Workgroups along the rows: the dispatch's share of HALO_VK_MOE_DEC among its workgroup rows
 * (pairs or tokens), at most one row a subgroup. */
static uint32_t wgs_x(const vk_backend *vb, uint32_t rows, uint32_t gy) {
    uint32_t ss = vb->subgroup_size ? vb->subgroup_size : 32, nsg = ss >= 128 ? 1 : 128 / ss;
    uint32_t want = (vb->moe_dec + gy - 1) / gy, most = (rows + nsg - 1) / nsg;
    want = want < most ? want : most;
    return want ? want : 1;
}

void vk_moe_dec_gu(vk_backend *vb, const halo_moe_args *a, uint32_t n_tok, vk_binding x,
                   vk_binding sel, vk_binding h) {
    const halo_tensor *g = a->gate_exps;
    uint32_t n_embd = (uint32_t)g->ne[0], n_ff = (uint32_t)g->ne[1], k = a->n_used;
    uint32_t n_expert = (uint32_t)g->ne[2], pairs = n_tok * k;
    vk_binding b[9] = {vk_bind_weight(g, n_ff),   x, h, sel, {0}, {0}, {0}, {0},
                       vk_bind_tensor(a->up_exps)};
    vk_bound bd[9] = {{0}};
    if (!vk_resolve(vb, "moe", b, 9, bd)) return;
    dec_pc pc = {.K = n_embd,
                 .N = n_ff,
                 .w_rel = bd[0].rel,
                 .w_chunk_rows = bd[0].chunk_rows,
                 .w_row_bytes = (uint32_t)b[0].row_bytes,
                 .u_rel = bd[8].rel,
                 .x_off4 = bd[1].rel / 16,
                 .x_col_stride4 = n_embd / 4,
                 .k = k,
                 .sel_off = bd[3].rel / 4,
                 .n_expert = n_expert,
                 .out_off = bd[2].rel / 4,
                 .out_col_stride = n_ff,
                 .clamp_v = a->clamp_exp};
    VkPipeline pipe = vk_typed_pipeline(vb, VK_K_MOE_DEC, g->type | VK_KEY_SWIGLU);
    vk_note_work(vb, (double)pairs * n_ff * n_embd * 2);
    vk_dispatch_pipe(vb, VK_K_MOE_DEC, pipe, "moe", b, 9, NULL, &pc, sizeof pc,
                     wgs_x(vb, n_ff, pairs), pairs, 1);
}

void vk_moe_dec_dn(vk_backend *vb, const halo_moe_args *a, uint32_t n_tok, vk_binding h,
                   vk_binding sel, vk_binding wts, vk_binding ys, vk_binding out) {
    const halo_tensor *d = a->down_exps;
    uint32_t n_ff = (uint32_t)d->ne[0], n_embd = (uint32_t)d->ne[1], k = a->n_used;
    uint32_t n_expert = (uint32_t)d->ne[2];
    vk_binding b[8] = {vk_bind_weight(d, n_embd), h, out, sel, {0}, {0}, wts, ys};
    vk_bound bd[8] = {{0}};
    if (!vk_resolve(vb, "moe", b, 8, bd)) return;
    if (bd[1].rel % 16) { /* the scratch's views start on 256 bytes (vk_take) */
        vk_fail(vb, HALO_E_INVALID_ARG, "moe: h not 16-byte aligned for moe_dec.comp");
        return;
    }
    dec_pc pc = {.K = n_ff,
                 .N = n_embd,
                 .w_rel = bd[0].rel,
                 .w_chunk_rows = bd[0].chunk_rows,
                 .w_row_bytes = (uint32_t)b[0].row_bytes,
                 .x_off4 = bd[1].rel / 16,
                 .x_col_stride4 = n_ff / 4,
                 .k = k,
                 .sel_off = bd[3].rel / 4,
                 .n_expert = n_expert,
                 .out_off = bd[2].rel / 4,
                 .out_col_stride = n_embd,
                 .wt_off = bd[6].rel / 4,
                 .ys_off = bd[7].rel / 4,
                 .has_ys = ys.buf != NULL};
    VkPipeline pipe = vk_typed_pipeline(vb, VK_K_MOE_DEC, d->type);
    vk_note_work(vb, (double)n_tok * k * n_ff * n_embd);
    vk_dispatch_pipe(vb, VK_K_MOE_DEC, pipe, "moe", b, 8, NULL, &pc, sizeof pc,
                     wgs_x(vb, n_embd, n_tok), n_tok, 1);
}
