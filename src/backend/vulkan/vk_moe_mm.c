/* Vulkan backend: a prefill's routed experts as grouped matrix products. moe_bucket.comp
 * groups the routed (token, expert) pairs by expert into column tiles of VK_MOE_MM_BN pairs;
 * moe_mm.comp then reads each expert's weights once per tile of its pairs, where
 * matvec_moe.comp read them once per pair. vk_moe calls these for its gate, up and down when
 * vk_moe_mm_fits. */
#include "backend/vulkan/vk_ops.h"
#include "halo/types.h"

typedef struct bucket_pc {
    uint32_t n_pairs, n_expert, bn, n_tiles, sel_off, ord_off, til_off;
} bucket_pc;

typedef struct mm_pc {
    uint32_t K, N, w_rel, w_chunk_rows, w_row_bytes, x_off, x_col_stride, x_col_div;
    uint32_t out_off, out_col_stride, ord_off, til_off;
} mm_pc;

static bool two_bit(const halo_tensor *w) {
    return (w->type == HALO_TYPE_IQ2_XXS || w->type == HALO_TYPE_Q2_K) && w->ne[0] % 256 == 0;
}

bool vk_moe_mm_fits(vk_backend *vb, const halo_moe_args *a, uint32_t n_tok) {
    uint64_t pairs = (uint64_t)n_tok * a->n_used;
    return vb->moe_mm && n_tok >= VK_MOE_MM_MIN_TOK && a->gate_exps->ne[2] <= 1024 &&
           pairs <= 65535u * (VK_MOE_MM_BN / 2) && /* the column tiles: a dispatch's y */
           two_bit(a->gate_exps) && two_bit(a->up_exps) && two_bit(a->down_exps);
}

/* Column tiles enough for any grouping: each expert's last tile may be partial. */
uint32_t vk_moe_mm_tiles(uint32_t pairs, uint32_t n_expert) {
    return (pairs + VK_MOE_MM_BN - 1) / VK_MOE_MM_BN + (n_expert < pairs ? n_expert : pairs);
}

void vk_moe_mm_bucket(vk_backend *vb, vk_binding sel, uint32_t pairs, uint32_t n_expert,
                      vk_binding order, vk_binding tiles) {
    vk_binding b[6] = {{0}, {0}, {0}, sel, order, tiles};
    vk_bound bd[6] = {{0}};
    if (!vk_resolve(vb, "moe", b, 6, bd)) return;
    bucket_pc pc = {pairs,         n_expert,      VK_MOE_MM_BN, vk_moe_mm_tiles(pairs, n_expert),
                    bd[3].rel / 4, bd[4].rel / 4, bd[5].rel / 4};
    vk_dispatch(vb, VK_K_MOE_BUCKET, "moe", b, 6, NULL, &pc, sizeof pc, 1, 1, 1);
}

void vk_moe_mm(vk_backend *vb, const halo_tensor *w, vk_binding x, uint32_t x_col_stride,
               uint32_t x_col_div, vk_binding out, uint32_t pairs, uint32_t n_expert,
               vk_binding order, vk_binding tiles) {
    uint32_t K = (uint32_t)w->ne[0], N = (uint32_t)w->ne[1];
    vk_binding b[6] = {vk_bind_weight(w, N), x, out, {0}, order, tiles};
    vk_bound bd[6] = {{0}};
    if (!vk_resolve(vb, "moe", b, 6, bd)) return;
    mm_pc pc = {K,
                N,
                bd[0].rel,
                bd[0].chunk_rows,
                (uint32_t)b[0].row_bytes,
                bd[1].rel / 4,
                x_col_stride,
                x_col_div,
                bd[2].rel / 4,
                N,
                bd[4].rel / 4,
                bd[5].rel / 4};
    VkPipeline pipe = vk_typed_pipeline(vb, VK_K_MOE_MM, w->type);
    if (!pipe) return; /* recorded for sync */
    uint32_t n_tiles = vk_moe_mm_tiles(pairs, n_expert);
    vk_note_work(vb, (double)pairs * N * K * 2);
    vk_dispatch_pipe(vb, VK_K_MOE_MM, pipe, "moe", b, 6, NULL, &pc, sizeof pc, (N + 127) / 128,
                     n_tiles, 1);
}
