/* Vulkan backend: fast mode's routed experts of a decode token on int8 activations (moeq.comp,
 * HALO_VK_MOEQ): gate and up with the SwiGLU in one dispatch, down with the weighted sum and
 * the shared expert's output in another. Each workgroup quantizes the activation it reads
 * (x: 4096 values; h: the token's k pairs') to Q8_K in shared memory, as the CPU's fast mode
 * quantizes it, so there is no quantizing dispatch and no barrier for it. vk_moe calls these
 * in place of matvec_moe.comp's gate, up and fused down. */
#include <stdio.h>
#include <stdlib.h>

#include "backend/vulkan/vk_ops.h"
#include "halo/types.h"

typedef struct moeq_pc {
    uint32_t K, N, w_rel, w_chunk_rows, w_row_bytes, u_rel;
    uint32_t x_off4, x_col_stride4, k, sel_off, n_expert, out_off, out_col_stride;
    uint32_t wt_off, ys_off, has_ys;
    float clamp_v;
    uint32_t rows_per_wg;
} moeq_pc;

/* The shader's shared activation: 16384 int8 values (moeq.comp's XQ_MAX granules). */
enum { MOEQ_MAX_VALUES = 16384 };

void vk_moeq_init(vk_backend *vb) {
    const char *e = getenv("HALO_VK_MOEQ");
    vb->moeq = e ? atoi(e) != 0 : VK_MOEQ_DEFAULT;
    vb->moeq_rows_gu = 32, vb->moeq_rows_dn = 16;
    e = getenv("HALO_VK_MOEQ_VAR");
    vb->moeq_var = e ? (uint32_t)atoi(e) & 63u : VK_MOEQ_VAR_DEFAULT;
    e = getenv("HALO_VK_MOEQ_ROWS");
    unsigned a, b;
    if (e && sscanf(e, "%u:%u", &a, &b) == 2 && a >= 1 && a <= 4096 && b >= 1 && b <= 4096)
        vb->moeq_rows_gu = a, vb->moeq_rows_dn = b;
}

static bool vec4_aligned(vk_backend *vb, vk_binding b) {
    vk_bound bd = {0};
    return b.buf && vk_resolve(vb, "moe", &b, 1, &bd) && bd.rel % 16 == 0;
}

bool vk_moeq_fits(vk_backend *vb, const halo_moe_args *a, uint32_t n_tok, vk_binding x) {
    const halo_tensor *g = a->gate_exps, *u = a->up_exps, *d = a->down_exps;
    uint64_t n_embd = (uint64_t)g->ne[0], n_ff = (uint64_t)g->ne[1], k = a->n_used;
    /* fast mode on a device with integer dots; a few tokens (decode: the experts' weights are
     * read once a token, a workgroup quantizes its token's activation); ds4's q2 mix; x and
     * the token's k h vectors fit the shared activation; the up weight one range (binding 8) */
    return vb->moeq && vb->int_dot && n_tok <= 4 && k >= 1 && g->type == HALO_TYPE_IQ2_XXS &&
           u->type == g->type && d->type == HALO_TYPE_Q2_K && u->ne[0] == g->ne[0] &&
           u->ne[1] == g->ne[1] && u->ne[2] == g->ne[2] && n_embd % 256 == 0 && n_embd <= 4096 &&
           n_ff % 256 == 0 && k * n_ff <= MOEQ_MAX_VALUES && (uint64_t)d->ne[0] == n_ff &&
           (uint64_t)d->ne[1] == n_embd && halo_tensor_nbytes(u) + vb->align <= vb->max_range &&
           vec4_aligned(vb, x);
}

void vk_moeq_gu(vk_backend *vb, const halo_moe_args *a, uint32_t n_tok, vk_binding x,
                vk_binding sel, vk_binding h) {
    const halo_tensor *g = a->gate_exps;
    uint32_t n_embd = (uint32_t)g->ne[0], n_ff = (uint32_t)g->ne[1], k = a->n_used;
    uint32_t n_expert = (uint32_t)g->ne[2], pairs = n_tok * k;
    vk_binding b[9] = {vk_bind_weight(g, n_ff),   x, h, sel, {0}, {0}, {0}, {0},
                       vk_bind_tensor(a->up_exps)};
    vk_bound bd[9] = {{0}};
    if (!vk_resolve(vb, "moe", b, 9, bd)) return;
    moeq_pc pc = {.K = n_embd,
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
                  .clamp_v = a->clamp_exp,
                  .rows_per_wg = vb->moeq_rows_gu};
    VkPipeline pipe = vk_typed_pipeline(vb, VK_K_MOEQ, g->type | VK_KEY_SWIGLU);
    if (!pipe) return; /* recorded for sync */
    vk_note_work(vb, (double)pairs * n_ff * n_embd * 2);
    vk_dispatch_pipe(vb, VK_K_MOEQ, pipe, "moe", b, 9, NULL, &pc, sizeof pc,
                     (n_ff + pc.rows_per_wg - 1) / pc.rows_per_wg, pairs, 1);
}

void vk_moeq_dn(vk_backend *vb, const halo_moe_args *a, uint32_t n_tok, vk_binding h,
                vk_binding sel, vk_binding wts, vk_binding ys, vk_binding out) {
    const halo_tensor *d = a->down_exps;
    uint32_t n_ff = (uint32_t)d->ne[0], n_embd = (uint32_t)d->ne[1], k = a->n_used;
    uint32_t n_expert = (uint32_t)d->ne[2];
    vk_binding b[8] = {vk_bind_weight(d, n_embd), h, out, sel, {0}, {0}, wts, ys};
    vk_bound bd[8] = {{0}};
    if (!vk_resolve(vb, "moe", b, 8, bd)) return;
    if (bd[1].rel % 16) { /* the scratch's views start on 256 bytes (vk_take) */
        vk_fail(vb, HALO_E_INVALID_ARG, "moe: h not 16-byte aligned for moeq.comp");
        return;
    }
    moeq_pc pc = {.K = n_ff,
                  .N = n_embd,
                  .w_rel = bd[0].rel,
                  .w_chunk_rows = bd[0].chunk_rows,
                  .w_row_bytes = (uint32_t)b[0].row_bytes,
                  .x_off4 = bd[1].rel / 16,
                  .x_col_stride4 = n_ff / 4, /* a token's k h vectors back to back */
                  .k = k,
                  .sel_off = bd[3].rel / 4,
                  .n_expert = n_expert,
                  .out_off = bd[2].rel / 4,
                  .out_col_stride = n_embd,
                  .wt_off = bd[6].rel / 4,
                  .ys_off = bd[7].rel / 4,
                  .has_ys = ys.buf != NULL,
                  .rows_per_wg = vb->moeq_rows_dn};
    VkPipeline pipe = vk_typed_pipeline(vb, VK_K_MOEQ, d->type);
    if (!pipe) return;
    vk_note_work(vb, (double)n_tok * k * n_ff * n_embd);
    vk_dispatch_pipe(vb, VK_K_MOEQ, pipe, "moe", b, 8, NULL, &pc, sizeof pc,
                     (n_embd + pc.rows_per_wg - 1) / pc.rows_per_wg, n_tok, 1);
}
