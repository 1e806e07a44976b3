/* Vulkan backend: split-K (flash-decoding) attention for a few tokens (HALO_VK_ATTN_SPLIT).
 *
 * attention.comp runs one workgroup per (head, token) through all of the token's rows: a
 * decode token's 64 workgroups leave most of a large GPU idle while each steps serially
 * through up to ~640 rows (H200, depth 24,576: ~150 us a call). Here each (head group, token)'s
 * rows are cut into n_split chunks, one workgroup each (attn_part.comp: G heads share every row
 * load, the rows being the same for all heads), which write partial softmax states to scratch;
 * attn_comb.comp then merges them with the sink, one workgroup per (head, token). Prefill
 * (more than VK_ATTN_SPLIT_TOK tokens) already fills the GPU with n_head x n_tok workgroups
 * and keeps attention.comp. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/vulkan/vk_ops.h"
#include "halo/types.h"

/* Tokens up to which the split path runs: decode (one token a sequence step, or a few for
 * speculation); with 5 or more, attention.comp's 320+ workgroups cover the GPU already. */
enum { VK_ATTN_SPLIT_TOK = 4 };
/* Auto: a chunk per ~40 candidate rows, at most 16 (640 rows at depth 24,576: 16 chunks x 8
 * head groups = 128 workgroups of 10 four-row steps, against 64 of 160); the combine reads
 * n_split partials of head_dim floats per head, so more chunks cost more traffic there. */
enum { VK_ATTN_ROWS_PER_CHUNK = 40, VK_ATTN_MAX_AUTO = 16, VK_ATTN_MAX_SPLIT = 256 };
/* Auto takes the split only from this many candidate rows: at a few dozen (tg64 from depth 0)
 * 8 heads a workgroup made each workgroup's chain ~4x attention.comp's, and the 24-layer tg64
 * fell from 112.5 to 85.0 tok/s on the H200 (session 11 final call B); at depth 24,576 (320
 * and 640 rows) the split won, 8 layers tg32 224 -> 276 (call 4). */
enum { VK_ATTN_SPLIT_MIN_ROWS = 256 };

typedef struct part_pc {
    vk_attn_shape s;
    uint32_t q_off, win_off, comp_off, sel_off, pos_off, acc_off, ml_off, n_split;
} part_pc;

typedef struct comb_pc {
    uint32_t hd, n_head, n_split, acc_off, ml_off, sinks_off, out_off;
} comb_pc;

void vk_attn_split_init(vk_backend *vb) {
    const char *e = getenv("HALO_VK_ATTN_SPLIT");
    unsigned n = 0, g = 0;
    vb->attn_split = -1, vb->attn_heads = 8;
    if (!e || !*e || !strcmp(e, "auto")) return;
    int k = sscanf(e, "%u:%u", &n, &g);
    if (k >= 1) vb->attn_split = n > VK_ATTN_MAX_SPLIT ? VK_ATTN_MAX_SPLIT : (int32_t)n;
    if (k == 2 && (g == 1 || g == 2 || g == 4 || g == 8)) vb->attn_heads = g;
}

/* Candidate rows of the token at pos: its visible window rows and compressed candidates
 * (the selection's valid entries are at most min(k_sel, visible)). */
static uint64_t token_rows(const halo_attn_args *a, int64_t pos) {
    int64_t n_win = a->window->ne[1], sw = a->sliding_window;
    int64_t lo = pos - sw + 1 - a->win_pos0, hi = pos - a->win_pos0 + 1;
    if (lo < 0) lo = 0;
    if (hi > n_win) hi = n_win;
    int64_t n = hi > lo ? hi - lo : 0;
    if (a->comp) {
        int64_t visible = (pos + 1) / (a->ratio ? a->ratio : 1), n_comp = a->comp->ne[1];
        int64_t cap = a->select ? a->select->ne[0] : n_comp;
        if (visible > cap) visible = cap;
        if (visible > 0) n += visible;
    }
    return (uint64_t)n;
}

bool vk_attn_split(vk_backend *vb, const halo_attn_args *a) {
    uint32_t hd = (uint32_t)a->q->ne[0], n_head = (uint32_t)a->q->ne[1];
    uint32_t n_tok = (uint32_t)a->q->ne[2];
    /* attn_part.comp's per-subgroup sums hold 32 subgroups: lanes of at least 4 */
    uint32_t sg = vb->subgroup_size ? vb->subgroup_size : 32;
    if (vb->attn_split == 0 || n_tok == 0 || n_tok > VK_ATTN_SPLIT_TOK || sg < 4 || hd > 512 ||
        n_head == 0)
        return false;
    uint64_t rows = 0;
    for (uint32_t t = 0; t < n_tok; t++) {
        uint64_t r = token_rows(a, a->pos[t]);
        if (r > rows) rows = r;
    }
    if (vb->attn_split < 0 && rows < VK_ATTN_SPLIT_MIN_ROWS) return false;
    uint64_t chunks = (rows + VK_ATTN_ROWS_PER_CHUNK - 1) / VK_ATTN_ROWS_PER_CHUNK;
    uint32_t n_split = chunks < VK_ATTN_MAX_AUTO ? (uint32_t)chunks : VK_ATTN_MAX_AUTO;
    if (vb->attn_split > 0) n_split = (uint32_t)vb->attn_split;
    if (n_split == 0) n_split = 1; /* no rows: the sink alone */
    uint32_t g = vb->attn_heads;
    while (g > 1 && g / 2 >= n_head) /* no more heads a group than there are */
        g /= 2;
    uint32_t n_hg = (n_head + g - 1) / g;
    uint64_t n_part = (uint64_t)n_tok * n_head * n_split;
    uint64_t acc_bytes = n_part * hd * 4, ml_bytes = n_part * 2 * 4;
    uint64_t cur = 0, sinks_off = vk_take(&cur, vk_f32_bytes(a->sinks));
    uint64_t part_off = vk_take(&cur, acc_bytes + ml_bytes);
    if (!vk_begin_uploads(vb, n_tok * 4) || !vk_scratch_reserve(vb, cur, "attention")) return true;
    vk_binding part = vk_scratch_at(vb, part_off, acc_bytes + ml_bytes);
    vk_binding b[8] = {{0},
                       vk_bind_tensor(a->q),
                       vk_bind_tensor(a->window),
                       a->comp ? vk_bind_tensor(a->comp) : (vk_binding){0},
                       a->select ? vk_bind_tensor(a->select) : (vk_binding){0},
                       {0},
                       vk_upload_data(vb, a->pos, n_tok * sizeof *a->pos),
                       part};
    vk_bound bd[8] = {{0}};
    if (!vk_resolve(vb, "attention", b, 8, bd)) return true;
    uint32_t n_comp = a->comp ? (uint32_t)a->comp->ne[1] : 0;
    /* attn_part.comp tags a compressed row's element offset with bit 31 */
    if (bd[3].rel / 4 + (uint64_t)n_comp * hd >= 0x80000000ull) {
        vk_fail(vb, HALO_E_UNSUPPORTED,
                "attention: %u compressed rows beyond the split path's "
                "offsets (2^31 elements)",
                n_comp);
        return true;
    }
    part_pc pc = {vk_attn_shape_of(a),
                  bd[1].rel / 4,
                  bd[2].rel / 4,
                  bd[3].rel / 4,
                  bd[4].rel / 4,
                  bd[6].rel / 4,
                  bd[7].rel / 4,
                  (uint32_t)(bd[7].rel / 4 + n_part * hd),
                  n_split};
    vk_note_work(vb, (double)rows * n_head * hd * 2 * n_tok);
    if (!vk_dispatch_pipe(vb, VK_K_ATTN_PART, vk_typed_pipeline(vb, VK_K_ATTN_PART, g), "attention",
                          b, 8, NULL, &pc, sizeof pc, n_hg, n_split, n_tok))
        return true;
    /* The combine reads the partials as binding 1: the hazard tracker puts the barrier
     * between the two passes. */
    vk_binding c[4] = {
        {0}, part, vk_as_f32(vb, "attention", a->sinks, sinks_off), vk_bind_tensor(a->out)};
    vk_bound cd[4] = {{0}};
    if (!vk_resolve(vb, "attention", c, 4, cd)) return true;
    uint32_t acc_rel = cd[1].rel / 4, ml_rel = (uint32_t)(acc_rel + n_part * hd);
    comb_pc cp = {hd, n_head, n_split, acc_rel, ml_rel, cd[2].rel / 4, cd[3].rel / 4};
    vk_note_work(vb, (double)n_part * hd);
    vk_dispatch(vb, VK_K_ATTN_COMB, "attention", c, 4, NULL, &cp, sizeof cp, n_head, n_tok, 1);
    return true;
}
