/* Vulkan backend: embedding, projections, norm, rope and hyper-connection ops. Each op
 * resolves its bindings (to learn where each view starts inside its descriptor), fills the
 * shader's push constants and records one or more dispatches. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/vulkan/vk_ops.h"
#include "halo/types.h"

bool vk_type_supported(uint32_t type) {
    switch (type) {
    case HALO_TYPE_F32:
    case HALO_TYPE_F16:
    case HALO_TYPE_BF16:
    case HALO_TYPE_Q8_0:
    case HALO_TYPE_Q4_0:
    case HALO_TYPE_Q4_1:
    case HALO_TYPE_Q5_0:
    case HALO_TYPE_Q5_1:
    case HALO_TYPE_Q2_K:
    case HALO_TYPE_Q4_K:
    case HALO_TYPE_Q5_K:
    case HALO_TYPE_Q6_K:
    case HALO_TYPE_IQ2_XXS:
    case HALO_TYPE_MXFP4:
        return true;
    default:
        return false;
    }
}

bool vk_check_type(vk_backend *vb, const char *op, const halo_tensor *t) {
    if (vk_type_supported(t->type)) return true;
    vk_fail(vb, HALO_E_UNSUPPORTED, "%s: weight type %s is not supported by the Vulkan shaders", op,
            halo_type_name(t->type));
    return false;
}

uint64_t vk_take(uint64_t *cursor, uint64_t bytes) {
    uint64_t off = *cursor;
    *cursor += (bytes + 255) & ~255ull;
    return off;
}

uint32_t vk_rows_per_wg(const vk_backend *vb) {
    uint32_t s = vb->subgroup_size ? vb->subgroup_size : 32;
    return s >= 64 ? 1 : 64 / s;
}

bool vk_begin_uploads(vk_backend *vb, uint64_t bytes) {
    return !vb->failed && vk_op_begin(vb, bytes + 4096);
}

typedef struct embed_pc {
    uint32_t n, type, w_rel, w_chunk_rows, w_row_bytes, tok_off, out_off, n_rows;
} embed_pc;

/* Rows `ids` of table (any type) as f32 into out. */
static void embed_rows(vk_backend *vb, const char *op, const halo_tensor *table, vk_binding ids,
                       uint32_t n_ids, vk_binding out) {
    if (!vk_check_type(vb, op, table)) return;
    int64_t n_rows = table->ne[1] * table->ne[2] * table->ne[3];
    vk_binding b[3] = {vk_bind_weight(table, 1), ids, out};
    vk_bound bd[3];
    if (!vk_resolve(vb, op, b, 3, bd)) return;
    embed_pc pc = {(uint32_t)table->ne[0],   table->type,   bd[0].rel,     bd[0].chunk_rows,
                   (uint32_t)b[0].row_bytes, bd[1].rel / 4, bd[2].rel / 4, (uint32_t)n_rows};
    vk_dispatch_pipe(vb, VK_K_EMBED, vk_typed_pipeline(vb, VK_K_EMBED, table->type), op, b, 3, NULL,
                     &pc, sizeof pc, n_ids, (pc.n + 511) / 512, 1); /* embed.comp's SLICE */
}

vk_binding vk_as_f32(vk_backend *vb, const char *op, const halo_tensor *t, uint64_t scratch_off) {
    if (t->type == HALO_TYPE_F32) return vk_bind_tensor(t);
    uint32_t rows = (uint32_t)(t->ne[1] * t->ne[2] * t->ne[3]);
    int32_t ids[1024];
    if (rows > 1024) {
        vk_fail(vb, HALO_E_UNSUPPORTED, "%s: a %u-row %s vector is too large to convert", op, rows,
                halo_type_name(t->type));
        return (vk_binding){0};
    }
    for (uint32_t i = 0; i < rows; i++)
        ids[i] = (int32_t)i;
    vk_binding idb = vk_upload_data(vb, ids, rows * sizeof *ids);
    uint64_t bytes = (uint64_t)halo_tensor_nelements(t) * 4;
    vk_binding out = vk_scratch_at(vb, scratch_off, bytes);
    embed_rows(vb, op, t, idb, rows, out);
    return out;
}

uint64_t vk_f32_bytes(const halo_tensor *t) {
    return t && t->type != HALO_TYPE_F32 ? (uint64_t)halo_tensor_nelements(t) * 4 : 0;
}

void vk_embed(halo_backend *be, const halo_tensor *table, const int32_t *tokens, halo_tensor *out) {
    vk_backend *vb = vk_of(be);
    uint32_t n = (uint32_t)out->ne[1];
    vb->prof_decode = n == 1; /* a forward starts with its embedding */
    if (!vk_begin_uploads(vb, n * 4)) return;
    vk_binding ids = vk_upload_data(vb, tokens, n * sizeof *tokens);
    embed_rows(vb, "embed", table, ids, n, vk_bind_tensor(out));
}

/* Columns matvec.comp takes at once (its tile). */
#define VK_MATVEC_COLS 4
/* Up to this many rows x column tiles, matvec.comp gives each row a whole workgroup. */
#define VK_MATVEC_WIDE_ROWS 16384

typedef struct matmul_pc {
    uint32_t K, N, n_cols, groups, type, w_rel, w_chunk_rows, w_row_bytes;
    uint32_t x_off, x_col_stride, x_col_div, out_off, out_col_stride, sel_mode, sel_off, n_expert;
    uint32_t rows_per_wg, col_tile, norm_off;
    float eps;
    int32_t u_delta4; /* SwiGLU on the load: up's index - x's, in vec4s */
    float clamp_v;
    uint32_t k_sum, wt_off, ys_off, has_ys; /* matvec_moe's weighted sum */
    uint32_t cs_off, rope_hd, rope_nrot;    /* the inverse rope on the load (vec2 units) */
} matmul_pc;

typedef struct quant_pc {
    uint32_t nb_col, x_off, x_col_stride, q_off, s_off;
} quant_pc;

typedef struct mm_q8_pc {
    uint32_t K, N, groups, w_rel, w_chunk_rows, w_row_bytes, q_off, s_off, nb_col, out_off,
        out_col_stride, rows_per_wg, n_cols;
} mm_q8_pc;

/* Fast mode's Q8_0 projection: the columns of x quantized to Q8_0 blocks (as ggml's
 * quantize_row_q8_0), then integer dot products against the weight's blocks (matmul_q8.comp).
 * Columns are independent, so they are split like vk_mm's (vk_submit.c). */
static void mm_q8(vk_backend *vb, const char *op, const halo_tensor *w, const vk_mm_args *m) {
    uint32_t groups = m->groups ? m->groups : 1, K = (uint32_t)w->ne[0];
    uint32_t nb_col = K * groups / 32, n_cols = m->n_cols;
    uint64_t q_bytes = (uint64_t)n_cols * nb_col * 32, s_bytes = (uint64_t)n_cols * nb_col * 4;
    if (!vk_reserve(vb, &vb->qact, q_bytes + s_bytes, op)) return;
    vk_binding qb = {.buf = vb->qact, .offset = 0, .bytes = q_bytes};
    vk_binding sb = {.buf = vb->qact, .offset = q_bytes, .bytes = s_bytes};
    vk_binding b[4] = {vk_bind_weight(w, 1), m->x, qb, sb};
    vk_bound bd[4] = {{0}};
    if (!vk_resolve(vb, op, b, 4, bd)) return;
    /* 1. quantize: bindings x (1), q (2), scales (3) */
    vk_binding qbind[4] = {{0}, m->x, qb, sb};
    quant_pc qp = {nb_col, bd[1].rel / 4 + m->x_off, m->x_col_stride, bd[2].rel / 4, bd[3].rel / 4};
    vk_note_work(vb, (double)n_cols * K * groups);
    if (!vk_dispatch(vb, VK_K_QUANT_Q8, op, qbind, 4, NULL, &qp, sizeof qp, (nb_col + 63) / 64,
                     n_cols, 1))
        return;
    /* 2. the dots: weight (0), q (1), out (2), scales (3) */
    vk_binding db[4] = {b[0], qb, m->out, sb};
    vk_bound dd[4] = {{0}};
    if (!vk_resolve(vb, op, db, 4, dd)) return;
    mm_q8_pc pc = {K,
                   m->N,
                   groups,
                   dd[0].rel,
                   dd[0].chunk_rows,
                   (uint32_t)db[0].row_bytes,
                   dd[1].rel / 4,
                   dd[3].rel / 4,
                   nb_col,
                   dd[2].rel / 4 + m->out_off,
                   m->out_col_stride,
                   vk_rows_per_wg(vb),
                   n_cols};
    /* matmul_q8t.comp (HALO_VK_MMQ8T=0: off) for many columns: tiles of 64 rows (inside one
     * input group) x 32 columns; matmul_q8.comp otherwise, a subgroup per row and column. */
    bool tiled = vb->mm_q8t && n_cols >= 8 && (m->N / groups) % 64 == 0 && m->N / 64 <= 65535;
    uint32_t wgs = (m->N + pc.rows_per_wg - 1) / pc.rows_per_wg;
    uint32_t gx = tiled ? m->N / 64 : wgs < 32768 ? wgs : 32768;
    uint32_t gz = tiled ? 1 : (wgs + gx - 1) / gx;
    double per_col = (double)m->N * K;
    uint32_t per = vk_chunk(vb, per_col, n_cols, tiled ? 32 : 1);
    for (uint32_t c0 = 0; c0 < n_cols; c0 += per) {
        mm_q8_pc cp = pc;
        uint32_t n = n_cols - c0 < per ? n_cols - c0 : per;
        cp.q_off += c0 * nb_col * 8;
        cp.s_off += c0 * nb_col;
        cp.out_off += c0 * m->out_col_stride;
        cp.n_cols = n;
        vk_note_work(vb, per_col * n);
        if (!vk_dispatch(vb, tiled ? VK_K_MATMUL_Q8T : VK_K_MATMUL_Q8, op, db, 4, NULL, &cp,
                         sizeof cp, gx, tiled ? (n + 31) / 32 : n, gz))
            return;
    }
}

/* Whether matvec.comp takes this projection: a type it decodes 8 weights at a time, and few
 * columns (decode) or one expert per column (the routed experts, whose columns never share a
 * weight). */
static bool use_matvec(const vk_backend *vb, const halo_tensor *w, const vk_mm_args *m) {
    switch (w->type) {
    case HALO_TYPE_F32:
    case HALO_TYPE_F16:
    case HALO_TYPE_BF16:
    case HALO_TYPE_Q8_0:
    case HALO_TYPE_Q2_K:
    case HALO_TYPE_IQ2_XXS:
        break;
    default:
        return false;
    }
    return vb->matvec && w->ne[0] % 8 == 0 && (m->sel.buf || m->n_cols <= VK_MATVEC_COLS);
}

int32_t vk_mvq8_parse(const char *v) {
    if (!v || !*v) return -1;
    if (!strcmp(v, "0")) return 0;
    if (v[0] < '1' || v[0] > '4') return -1;
    int32_t r = v[0] - '0';
    for (v++; *v; v++) {
        if (*v == 'w' && !(r & 16))
            r |= 16;
        else if (*v == 'u' && !(r & 32))
            r |= 32;
        else
            return -1;
    }
    return r;
}

/* matvec_q8.comp's variant for a Q8_0 projection of plain columns (0: matvec.comp takes it):
 * rows per lane group (they must stay inside one input group), whether the group is the whole
 * workgroup, whether two units are in flight. Auto, from bench_vk_matvec on the H200
 * (bench/vulkan/RESULTS.md): a workgroup per row for up to 1024 rows (q_a, kv), four rows per
 * subgroup with two units in flight for the large ones (q_b, the output projections, the
 * vocabulary), one row per subgroup between (the shared expert). */
static int32_t mvq8_variant(const vk_backend *vb, const halo_tensor *w, const vk_mm_args *m) {
    if (w->type != HALO_TYPE_Q8_0 || m->sel.buf || vb->mvq8 == 0) return 0;
    if (vb->matvec_rows && vb->mvq8 < 0) return 0; /* tests of matvec.comp's variants */
    uint32_t groups = m->groups ? m->groups : 1, per_group = m->N / groups;
    int32_t v = vb->mvq8;
    if (v < 0) {
        if (vb->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU) return 0;
        uint32_t tiles = (m->n_cols + VK_MATVEC_COLS - 1) / VK_MATVEC_COLS;
        uint64_t rows = (uint64_t)m->N * tiles, weights = (uint64_t)m->N * (uint64_t)w->ne[0];
        v = rows <= 1024 ? 1 | 16 : weights >= (32u << 20) ? 4 | 32 : 1;
    }
    if (per_group % (uint32_t)(v & 15)) v = (v & ~15) | 1;
    return v;
}

/* matvec_q8s.comp's rows per workgroup where it takes a projection matvec_q8.comp would (0: it
 * does not): rows of whole 16-byte pieces (K % 256 == 0) starting 16-byte aligned (rel, the
 * view's offset; the caller checks it once resolved), a power of two dividing the group's rows.
 * Off by default (HALO_VK_MVQ8S unset): the 24-layer step with `auto` in session 9's final call,
 * tg64 70.09 against the defaults' 74.54 / 76.25. HALO_VK_MVQ8S=auto: 16 rows for the shared expert's down (its x SwiGLU'd on
 * the load) and the vocabulary, 0 for the rest. From bench_vk_matvec on the H200 (session 9 request
 * 1, bench/vulkan/RESULTS.md; us a call, matvec_q8's shape default against 16 rows):
 * ffn_down_shexp 22.15 -> 13.96 over 1 GB of cold copies, the 563 MB vocabulary 529 -> 458,
 * attn_output_b 34.0 / 34.4; but q_b 23.9 -> 52.0, out_a 23.5 -> 38.0, the shared gate 15.5
 * -> 18.2, q_a/kv no better, and fewer rows a workgroup slower still (q_b 236 at 1 row: each
 * workgroup's stage, barriers and reduction are fixed costs). The stage's many 16-byte loads in
 * flight did not make the large projections stream faster than matvec_q8's 4-byte ones (~1.5 TB/s
 * at best): bytes in flight are not what bounds them (what does is not measured; the next suspect:
 * instructions, ~5 a weight to decode and multiply). */
static uint32_t mvq8s_rows(const vk_backend *vb, const halo_tensor *w, const vk_mm_args *m,
                           uint32_t rel) {
    int32_t v = vb->mvq8s;
    if (v == 0 || w->ne[0] % 256 || rel % 16) return 0; /* v < 0: auto */
    uint32_t groups = m->groups ? m->groups : 1, per_group = m->N / groups;
    uint32_t tiles = (m->n_cols + VK_MATVEC_COLS - 1) / VK_MATVEC_COLS;
    uint32_t rw = v > 0 ? (uint32_t)v : 16;
    if (v < 0 && !(m->up.buf || (uint64_t)m->N * tiles >= 65536)) return 0;
    if (rw > 16 || (rw & (rw - 1))) return 0;
    while (per_group % rw)
        rw /= 2;
    return rw;
}

/* Whether matvec_moe.comp takes a projection matvec.comp would: IQ2_XXS or Q2_K (the routed
 * experts), ungrouped. HALO_VK_MVMOE=0, or HALO_VK_MATVEC_ROWS (tests of matvec.comp's
 * variants), keeps matvec.comp; HALO_VK_MVMOE=N walks N rows a workgroup (8). */
static bool use_mvmoe(const vk_backend *vb, const halo_tensor *w, const vk_mm_args *m) {
    return vb->mvmoe && !vb->matvec_rows && (m->groups ? m->groups : 1) == 1 &&
           (w->type == HALO_TYPE_IQ2_XXS || w->type == HALO_TYPE_Q2_K) && w->ne[0] % 256 == 0;
}

/* The shader vk_mm records for this projection (VK_K_MATMUL_Q8: fast mode's quantizing
 * dispatch and integer dots; VK_K_MATVEC: matvec.comp or matvec_wide.comp) and, for
 * matvec_q8.comp, its variant. */
static vk_kernel mm_kernel(const vk_backend *vb, const halo_tensor *w, const vk_mm_args *m,
                           int32_t *q8v) {
    *q8v = 0;
    bool mv = use_matvec(vb, w, m);
    /* Fast mode: Q8_0 projections of plain columns (not expert-selected ones) by integer dots,
     * except for a few columns (decode): there quantizing the activations is one more dispatch
     * and barrier per projection, which costs more than it saves, and matvec.comp's f32 path
     * (the precise result, more accurate than ggml's) takes them. */
    if (vb->int_dot && w->type == HALO_TYPE_Q8_0 && !m->sel.buf &&
        !(mv && m->n_cols <= VK_MATVEC_COLS) && (m->x_col_div ? m->x_col_div : 1) == 1 &&
        w->ne[0] % 32 == 0)
        return VK_K_MATMUL_Q8;
    if (!mv) return VK_K_MATMUL;
    if (use_mvmoe(vb, w, m)) return VK_K_MATVEC_MOE;
    *q8v = mvq8_variant(vb, w, m);
    return *q8v > 0 ? VK_K_MATVEC_Q8 : VK_K_MATVEC;
}

/* Where a view starts inside its descriptor, in f32 elements (false: it cannot be bound). */
static bool rel_f32(vk_backend *vb, vk_binding b, uint32_t *rel) {
    vk_bound bd = {0};
    if (!b.buf || !vk_resolve(vb, "moe", &b, 1, &bd)) return false; /* as binding 1 */
    *rel = bd.rel / 4;
    return bd.rel % 4 == 0;
}

bool vk_mm_swiglu_fits(vk_backend *vb, const halo_tensor *w, const vk_mm_args *m) {
    int32_t q8v;
    if (!vk_type_supported(w->type) || !m->up.buf || m->norm.buf || m->up.bytes < m->x.bytes ||
        (m->groups ? m->groups : 1) != 1 || (m->x_col_div ? m->x_col_div : 1) != 1)
        return false;
    vk_kernel k = mm_kernel(vb, w, m, &q8v);
    if (k == VK_K_MATMUL || k == VK_K_MATMUL_Q8) return false;
    /* matvec_moe.comp stages the column's SwiGLU in shared memory (at most 4096 inputs) and a
     * subgroup keeps at most 4 row pairs: 8 rows a workgroup covers them even with one subgroup
     * (a subgroup as wide as the workgroup) */
    if (k == VK_K_MATVEC_MOE && (w->ne[0] > 4096 || vb->mvmoe > 8)) return false;
    /* The shaders load x and up 16 bytes at a time */
    uint32_t xr = 0, ur = 0;
    return rel_f32(vb, m->x, &xr) && rel_f32(vb, m->up, &ur) && (xr + m->x_off) % 4 == 0 &&
           (ur + m->x_off) % 4 == 0 && m->x_col_stride % 4 == 0;
}

bool vk_mm_sum_fits(vk_backend *vb, const halo_tensor *w, const vk_mm_args *m) {
    int32_t q8v;
    return m->sum_k && m->sel.buf && m->wts.buf && m->n_cols % m->sum_k == 0 &&
           vk_mm_swiglu_fits(vb, w, m) && mm_kernel(vb, w, m, &q8v) == VK_K_MATVEC_MOE;
}

bool vk_mm_rope_fits(vk_backend *vb, const halo_tensor *w, const vk_mm_args *m) {
    int32_t q8v;
    if (!vk_type_supported(w->type) || m->sel.buf || m->norm.buf || m->up.buf ||
        m->n_cols > VK_MATVEC_COLS || (m->x_col_div ? m->x_col_div : 1) != 1 || !m->rope_hd ||
        m->rope_hd % 8 || m->rope_nrot % 8 || m->rope_nrot > m->rope_hd || w->ne[0] % 8)
        return false;
    vk_kernel k = mm_kernel(vb, w, m, &q8v);
    if (k != VK_K_MATVEC && k != VK_K_MATVEC_Q8) return false;
    uint32_t xr = 0; /* 16-byte loads of x, pairs never split across two */
    return rel_f32(vb, m->x, &xr) && (xr + m->x_off) % 4 == 0 && m->x_col_stride % 4 == 0;
}

bool vk_mm_norm_fits(vk_backend *vb, const halo_tensor *w, const vk_mm_args *m) {
    if (!vk_type_supported(w->type) || !use_matvec(vb, w, m) || m->sel.buf ||
        m->n_cols > VK_MATVEC_COLS || (m->groups ? m->groups : 1) != 1 ||
        (m->x_col_div ? m->x_col_div : 1) != 1 || use_mvmoe(vb, w, m) || !m->norm.buf ||
        m->norm.bytes < (uint64_t)w->ne[0] * 4)
        return false;
    vk_binding b[2] = {m->x, m->norm};
    vk_bound bd[2] = {{0}};
    for (int i = 0; i < 2; i++) /* resolved one at a time: both as a shader's binding 1 */
        if (!b[i].buf || !vk_resolve(vb, "matmul_multi", &b[i], 1, &bd[i])) return false;
    return (bd[0].rel / 4 + m->x_off) % 4 == 0 && m->x_col_stride % 4 == 0 && bd[1].rel % 16 == 0;
}

void vk_mm(vk_backend *vb, const char *op, const halo_tensor *w, const vk_mm_args *m) {
    if (!vk_check_type(vb, op, w)) return;
    if (m->norm.buf && !vk_mm_norm_fits(vb, w, m)) {
        vk_fail(vb, HALO_E_INVALID_ARG, "%s: a norm this projection cannot fold in", op);
        return;
    }
    bool sum = m->sum_k != 0;
    if ((m->up.buf && !vk_mm_swiglu_fits(vb, w, m)) || (sum && !vk_mm_sum_fits(vb, w, m)) ||
        (m->cs.buf && !vk_mm_rope_fits(vb, w, m))) {
        vk_fail(vb, HALO_E_INVALID_ARG, "%s: a SwiGLU, sum or rope this projection cannot fold in",
                op);
        return;
    }
    int32_t q8v = 0;
    vk_kernel kern = mm_kernel(vb, w, m, &q8v);
    if (kern == VK_K_MATMUL_Q8) {
        mm_q8(vb, op, w, m);
        return;
    }
    vk_binding b[8] = {vk_bind_weight(w, m->sel.buf ? m->N : 1),
                       m->x,
                       m->out,
                       m->sel,
                       m->norm,
                       m->up,
                       m->cs.buf ? m->cs : m->wts, /* never both: the rope's only plain columns */
                       m->ys};
    uint32_t nb = m->up.buf || m->cs.buf ? 8 : m->norm.buf ? 5 : m->sel.buf ? 4 : 3;
    vk_bound bd[8] = {{0}};
    if (!vk_resolve(vb, op, b, nb, bd)) return;
    matmul_pc pc = {(uint32_t)w->ne[0],
                    m->N,
                    m->n_cols,
                    m->groups ? m->groups : 1,
                    w->type,
                    bd[0].rel,
                    bd[0].chunk_rows,
                    (uint32_t)b[0].row_bytes,
                    bd[1].rel / 4 + m->x_off,
                    m->x_col_stride,
                    m->x_col_div ? m->x_col_div : 1,
                    bd[2].rel / 4 + m->out_off,
                    m->out_col_stride,
                    m->sel.buf ? 1u : 0u,
                    bd[3].rel / 4 + m->sel_off,
                    m->n_expert,
                    vk_rows_per_wg(vb),
                    m->sel.buf ? 1u : 8u,
                    bd[4].rel / 4,
                    m->eps,
                    ((int32_t)(bd[5].rel / 4) - (int32_t)(bd[1].rel / 4)) / 4,
                    m->clamp_v,
                    sum ? m->sum_k : 0,
                    bd[6].rel / 4,
                    bd[7].rel / 4,
                    m->ys.buf != NULL,
                    bd[6].rel / 8,
                    m->rope_hd,
                    m->rope_nrot};
    uint32_t mode = (m->norm.buf ? VK_KEY_NORM : 0) | (m->up.buf ? VK_KEY_SWIGLU : 0) |
                    (sum ? VK_KEY_SUM : 0) | (m->cs.buf ? VK_KEY_ROPE : 0);
    /* Workgroups of rows fold into x and z so a vocabulary-sized projection stays within the
     * workgroup-count limit. */
    VkPipeline pipe = VK_NULL_HANDLE;
    uint32_t rw = 0;
    if (kern == VK_K_MATVEC_MOE) {
        /* a column per workgroup row, rows_per_wg rows per workgroup after one codebook fill */
        pc.col_tile = 1;
        /* even: the shader's R = 2; R = 4 (HALO_VK_MOE_R) takes twice the rows so that as
         * many subgroups have work */
        pc.rows_per_wg = vb->mvmoe * (vb->moe_r / 2);
    } else if (kern == VK_K_MATVEC_Q8 && (rw = mvq8s_rows(vb, w, m, bd[0].rel)) > 0) {
        kern = VK_K_MATVEC_Q8S;
        pc.col_tile = VK_MATVEC_COLS;
        pc.rows_per_wg = rw;
        pipe = vk_typed_pipeline(vb, kern, rw | mode);
    } else if (kern == VK_K_MATVEC_Q8) {
        uint32_t s = vb->subgroup_size ? vb->subgroup_size : 32;
        uint32_t r = (uint32_t)q8v & 15u;
        pc.col_tile = VK_MATVEC_COLS;
        pc.rows_per_wg = (q8v & 16) || s >= 128 ? r : r * (128 / s);
        pipe = vk_typed_pipeline(vb, kern, (uint32_t)q8v | mode);
    } else if (kern == VK_K_MATVEC) {
        uint32_t s = vb->subgroup_size ? vb->subgroup_size : 32;
        pc.col_tile = m->sel.buf ? 1u : VK_MATVEC_COLS;
        /* A subgroup per row, or the whole workgroup per row where there are few rows to go
         * round (a decode step's small projections and the routed experts' gate and up: one
         * subgroup each would leave most of a large GPU idle, each walking a long row). Not on
         * a CPU implementation (lavapipe), where a workgroup's barriers cost more than that. */
        uint32_t tiles = (m->n_cols + pc.col_tile - 1) / pc.col_tile;
        bool few = (uint64_t)m->N * tiles <= VK_MATVEC_WIDE_ROWS &&
                   vb->props.deviceType != VK_PHYSICAL_DEVICE_TYPE_CPU;
        bool wide = vb->matvec_rows ? vb->matvec_rows == 1 : few;
        pc.rows_per_wg = wide || s >= 128 ? 1 : 128 / s;
        if (wide) kern = VK_K_MATVEC_WIDE;
    }
    uint32_t wgs = (m->N + pc.rows_per_wg - 1) / pc.rows_per_wg;
    uint32_t gx = wgs < 32768 ? wgs : 32768, gz = (wgs + gx - 1) / gx;
    if (!pipe) pipe = vk_typed_pipeline(vb, kern, w->type | mode);
    /* Columns in chunks of whole tiles sharing whole x columns (vk_submit.c): each output is
     * computed by the same invocation as unsplit. With the sum, chunks of whole tokens (their
     * sum_k columns each), a workgroup row per token. */
    uint32_t div = pc.x_col_div, n_cols = m->n_cols, step = sum ? m->sum_k : pc.col_tile * div;
    double per_col = (double)m->N * (double)pc.K;
    uint32_t per = vk_chunk(vb, per_col, n_cols, step);
    for (uint32_t c0 = 0; c0 < n_cols; c0 += per) {
        matmul_pc cp = pc;
        cp.n_cols = n_cols - c0 < per ? n_cols - c0 : per;
        cp.x_off = pc.x_off + c0 / div * pc.x_col_stride;
        cp.out_off = pc.out_off + (sum ? c0 / m->sum_k : c0) * pc.out_col_stride;
        cp.sel_off = pc.sel_off + c0;
        cp.wt_off = pc.wt_off + c0;
        cp.cs_off = pc.cs_off + (m->cs.buf ? c0 * (m->rope_nrot / 2) : 0); /* the rope's columns */
        cp.ys_off = pc.ys_off + (sum ? c0 / m->sum_k : 0) * m->N;
        uint32_t gy = sum ? cp.n_cols / m->sum_k : (cp.n_cols + cp.col_tile - 1) / cp.col_tile;
        vk_note_work(vb, per_col * cp.n_cols);
        if (!vk_dispatch_pipe(vb, kern, pipe, op, b, nb, NULL, &cp, sizeof cp, gx, gy, gz)) return;
    }
}

/* The attention output's inverse rope, deferred by vk_rope, is folded into the projection of it
 * (out_a) where that is a matvec of a few plain columns: its loads rotate back (rope_load.glsl),
 * no rope dispatch and no barrier before the projection. */
void vk_matmul(halo_backend *be, const halo_tensor *w, const halo_tensor *x, uint32_t groups,
               halo_tensor *out) {
    vk_backend *vb = vk_of(be);
    uint32_t n_out = (uint32_t)(w->ne[1] * w->ne[2] * w->ne[3]);
    uint32_t in_total = (uint32_t)w->ne[0] * (groups ? groups : 1);
    uint32_t n_tok = (uint32_t)(halo_tensor_nelements(x) / in_total);
    vk_mm_args m = {.x = vk_bind_tensor(x),
                    .out = vk_bind_tensor(out),
                    .N = n_out,
                    .n_cols = n_tok,
                    .groups = groups,
                    .x_col_stride = in_total,
                    .out_col_stride = n_out};
    const halo_tensor *rx = &vb->pend_rope.x;
    bool fold = vb->pend_rope.on && rx->buf == x->buf && rx->offset == x->offset &&
                halo_tensor_nbytes(rx) == halo_tensor_nbytes(x) &&
                (uint64_t)rx->ne[0] * rx->ne[1] == in_total;
    float *cs = vb->pend_rope.cs;
    uint64_t cs_bytes = vb->pend_rope.cs_bytes;
    if (fold) {
        m.rope_hd = (uint32_t)rx->ne[0];
        m.rope_nrot = vb->pend_rope.n_rot;
        m.cs = m.x; /* a stand-in for the fit: the table is uploaded below */
        fold = vk_mm_rope_fits(vb, w, &m);
    }
    if (fold) vb->pend_rope.on = false;
    if (!vk_begin_uploads(vb, fold ? cs_bytes : 0)) return;
    if (fold) {
        m.cs = vk_upload_data(vb, cs, cs_bytes);
        free(cs);
    } else {
        m.cs = (vk_binding){0};
    }
    vk_mm(vb, "matmul", w, &m);
}

/* Several projections of one input, with an optional RMS norm first (backend.h). Where every
 * projection is a matvec of a few plain columns (decode), the norm is folded into each one
 * (vk_mm_norm_fits): no norm dispatch and no barrier between the norm and the projections,
 * which all read x together. Otherwise (prefill, types matvec does not take, unaligned views,
 * HALO_VK_FUSE_NORM=0) the norm runs in place first, as the forward does without this op. */
void vk_matmul_multi(halo_backend *be, const halo_tensor *x, const halo_tensor *norm, float eps,
                     uint32_t n, const halo_tensor *const *w, halo_tensor *const *out) {
    vk_backend *vb = vk_of(be);
    if (!vk_begin_uploads(vb, 64) || n == 0) return;
    uint32_t K = (uint32_t)x->ne[0];
    uint32_t n_tok = (uint32_t)(halo_tensor_nelements(x) / (K ? K : 1));
    bool fuse = norm && norm->type == HALO_TYPE_F32 && vb->fuse_norm;
    for (uint32_t i = 0; i < n && fuse; i++) {
        uint32_t n_out = (uint32_t)(w[i]->ne[1] * w[i]->ne[2] * w[i]->ne[3]);
        vk_mm_args m = {.x = vk_bind_tensor(x),
                        .out = vk_bind_tensor(out[i]),
                        .N = n_out,
                        .n_cols = n_tok,
                        .groups = 1,
                        .x_col_stride = K,
                        .out_col_stride = n_out,
                        .norm = vk_bind_tensor(norm),
                        .eps = eps};
        fuse = (uint32_t)w[i]->ne[0] == K && vk_mm_norm_fits(vb, w[i], &m);
    }
    if (norm && !fuse) {
        halo_tensor xn = *x; /* x's contents afterwards are the caller's to forget */
        vk_norm_now(vb, &xn, K, norm, eps);
    }
    for (uint32_t i = 0; i < n; i++) {
        uint32_t n_out = (uint32_t)(w[i]->ne[1] * w[i]->ne[2] * w[i]->ne[3]);
        vk_mm_args m = {.x = vk_bind_tensor(x),
                        .out = vk_bind_tensor(out[i]),
                        .N = n_out,
                        .n_cols = n_tok,
                        .groups = 1,
                        .x_col_stride = K,
                        .out_col_stride = n_out};
        if (fuse) {
            m.norm = vk_bind_tensor(norm);
            m.eps = eps;
        }
        vk_mm(vb, "matmul_multi", w[i], &m);
    }
}

typedef struct norm_pc {
    uint32_t width, n_rows, x_off, w_off, has_w;
    float eps;
} norm_pc;

/* The forward's norms are deferred to the next op (HALO_VK_DEFER_NORM, default on): the
 * attention's per-head norms of q and kv are each followed by a rope of the same tensor, which
 * folds the norm in (norm_rope.comp: one dispatch and one barrier fewer, twice a layer), and
 * the FFN's norm by the MoE of it, which folds it into its first projections (vk_moe). Any
 * other op records the norm first, as called. Only f32 (or no) weights, whole rows. */
void vk_rms_norm(halo_backend *be, halo_tensor *x, uint32_t width, const halo_tensor *weight,
                 float eps) {
    vk_backend *vb = vk_of(be);
    vk_defer_flush(vb);
    if (vb->defer_norm && !vb->failed && width == x->ne[0] &&
        (!weight || weight->type == HALO_TYPE_F32)) {
        vb->pend_norm.on = true;
        vb->pend_norm.x = *x;
        vb->pend_norm.has_w = weight != NULL;
        vb->pend_norm.w = weight ? *weight : (halo_tensor){0};
        vb->pend_norm.width = width;
        vb->pend_norm.eps = eps;
        return;
    }
    vk_norm_now(vb, x, width, weight, eps);
}

bool vk_same_view(const halo_tensor *a, const halo_tensor *b) {
    return a->buf == b->buf && a->offset == b->offset && a->type == b->type &&
           !memcmp(a->ne, b->ne, sizeof a->ne);
}

bool vk_norm_pending_on(const vk_backend *vb, const halo_tensor *x) {
    return vb->pend_norm.on && vk_same_view(&vb->pend_norm.x, x);
}

bool vk_defer_uses(const vk_backend *vb, const halo_buf *b) {
    return (vb->pend_norm.on && (vb->pend_norm.x.buf == b || vb->pend_norm.w.buf == b)) ||
           (vb->pend_post.on && (vb->pend_post.streams.buf == b || vb->pend_post.y.buf == b ||
                                 vb->pend_post.post.buf == b || vb->pend_post.comb.buf == b)) ||
           (vb->pend_rope.on && vb->pend_rope.x.buf == b);
}

void vk_defer_flush(vk_backend *vb) {
    /* cleared first: recording it begins an op, which flushes */
    if (vb->pend_norm.on) {
        vb->pend_norm.on = false;
        vk_norm_now(vb, &vb->pend_norm.x, vb->pend_norm.width,
                    vb->pend_norm.has_w ? &vb->pend_norm.w : NULL, vb->pend_norm.eps);
    }
    if (vb->pend_post.on) {
        vb->pend_post.on = false;
        vk_hc_post_now(vb, &vb->pend_post.streams, &vb->pend_post.y, &vb->pend_post.post,
                       &vb->pend_post.comb);
    }
    if (vb->pend_rope.on) {
        vb->pend_rope.on = false;
        vk_rope_now(vb, &vb->pend_rope.x, vb->pend_rope.cs, vb->pend_rope.cs_bytes,
                    vb->pend_rope.n_rot, true);
        free(vb->pend_rope.cs);
    }
}

void vk_norm_now(vk_backend *vb, halo_tensor *x, uint32_t width, const halo_tensor *weight,
                 float eps) {
    uint64_t cur = 0, w_off = vk_take(&cur, vk_f32_bytes(weight));
    if (!vk_begin_uploads(vb, 64) || (cur && !vk_scratch_reserve(vb, cur, "rms_norm"))) return;
    vk_binding b[3] = {{0}, vk_bind_tensor(x), {0}};
    if (weight) b[2] = vk_as_f32(vb, "rms_norm", weight, w_off);
    vk_bound bd[3] = {{0}};
    if (!vk_resolve(vb, "rms_norm", b, weight ? 3 : 2, bd)) return;
    uint32_t rows = (uint32_t)(halo_tensor_nelements(x) / width);
    norm_pc pc = {width, rows, bd[1].rel / 4, bd[2].rel / 4, weight != NULL, eps};
    uint32_t gx = rows < 32768 ? rows : 32768;
    vk_dispatch(vb, VK_K_RMS_NORM, "rms_norm", b, weight ? 3 : 2, NULL, &pc, sizeof pc, gx,
                (rows + gx - 1) / gx, 1);
}

/* The CPU backend's YaRN frequencies (cpu_norm_rope.c; cpu.h cannot be included here, its
 * halo_buf is host memory), so both backends rotate by bit-identical angles. */
void cpu_rope_inv_freq(const halo_rope *rope, float *inv_freq);

/* cos/sin of pos[t]·inv_freq[i] for every (t, pair), computed as the CPU backend does. */
float *vk_rope_table(const halo_rope *rope, const float *pos, uint32_t n) {
    float inv_freq[512];
    cpu_rope_inv_freq(rope, inv_freq);
    uint32_t half = rope->n_rot / 2;
    float *cs = malloc((size_t)n * half * 2 * sizeof *cs + 1);
    if (!cs) return NULL;
    for (uint32_t t = 0; t < n; t++)
        for (uint32_t i = 0; i < half; i++) {
            float angle = pos[t] * inv_freq[i];
            cs[(t * half + i) * 2] = cosf(angle);
            cs[(t * half + i) * 2 + 1] = sinf(angle);
        }
    return cs;
}

typedef struct rope_pc {
    uint32_t head_dim, n_head, n_rot, x_off, cs_off, inverse;
} rope_pc;

typedef struct norm_rope_pc {
    uint32_t head_dim, n_head, n_rot, x_off, cs_off, w_off, has_w;
    float eps;
} norm_rope_pc;

/* An inverse rope (the attention output's) is deferred to the next op (HALO_VK_DEFER_ROPE,
 * default on): the projection of it folds it into its loads (vk_matmul); anything else records
 * it first. A forward rope folds in the norm just deferred on the same tensor (vk_rms_norm). */
void vk_rope(halo_backend *be, halo_tensor *x, const int32_t *pos, const halo_rope *rope,
             bool inverse) {
    vk_backend *vb = vk_of(be);
    uint32_t n_tok = (uint32_t)(x->ne[2] * x->ne[3]), half = rope->n_rot / 2;
    uint64_t bytes = (uint64_t)n_tok * half * 2 * sizeof(float);
    /* The norm just asked for on this tensor (per head: its width is the head's), folded in. */
    bool fold = !inverse && vk_norm_pending_on(vb, x) && rope->n_rot <= x->ne[0];
    float eps = vb->pend_norm.eps;
    halo_tensor w = vb->pend_norm.w;
    bool has_w = vb->pend_norm.has_w;
    if (fold) vb->pend_norm.on = false;
    float *p = malloc(n_tok * sizeof *p + 1);
    float *cs = NULL;
    if (p) {
        for (uint32_t t = 0; t < n_tok; t++)
            p[t] = (float)pos[t];
        cs = vk_rope_table(rope, p, n_tok);
    }
    free(p);
    if (!cs) {
        vk_fail(vb, HALO_E_NOMEM, "rope: out of host memory");
        return;
    }
    if (inverse && vb->defer_rope && !vb->failed && x->ne[0] % 8 == 0 && rope->n_rot % 8 == 0) {
        vk_defer_flush(vb);
        vb->pend_rope.on = true;
        vb->pend_rope.x = *x;
        vb->pend_rope.cs = cs; /* the op that takes it frees it */
        vb->pend_rope.cs_bytes = bytes;
        vb->pend_rope.n_rot = rope->n_rot;
        return;
    }
    if (!fold) {
        vk_rope_now(vb, x, cs, bytes, rope->n_rot, inverse);
        free(cs);
        return;
    }
    if (!vk_begin_uploads(vb, bytes)) {
        free(cs);
        return;
    }
    vk_binding b[4] = {{0},
                       vk_bind_tensor(x),
                       vk_upload_data(vb, cs, bytes),
                       has_w ? vk_bind_tensor(&w) : (vk_binding){0}};
    free(cs);
    vk_bound bd[4] = {{0}};
    if (!vk_resolve(vb, "rope", b, has_w ? 4 : 3, bd)) return;
    norm_rope_pc np = {(uint32_t)x->ne[0], (uint32_t)x->ne[1], rope->n_rot, bd[1].rel / 4,
                       bd[2].rel / 4,      bd[3].rel / 4,      has_w,       eps};
    vk_dispatch(vb, VK_K_NORM_ROPE, "rope", b, has_w ? 4 : 3, NULL, &np, sizeof np,
                (uint32_t)x->ne[1], n_tok, 1);
}

void vk_rope_now(vk_backend *vb, halo_tensor *x, const float *cs, uint64_t cs_bytes, uint32_t n_rot,
                 bool inverse) {
    uint32_t n_tok = (uint32_t)(x->ne[2] * x->ne[3]);
    if (!vk_begin_uploads(vb, cs_bytes)) return;
    vk_binding b[3] = {{0}, vk_bind_tensor(x), vk_upload_data(vb, cs, cs_bytes)};
    vk_bound bd[3] = {{0}};
    if (!vk_resolve(vb, "rope", b, 3, bd)) return;
    rope_pc pc = {(uint32_t)x->ne[0], (uint32_t)x->ne[1], n_rot,
                  bd[1].rel / 4,      bd[2].rel / 4,      inverse};
    vk_dispatch(vb, VK_K_ROPE, "rope", b, 3, NULL, &pc, sizeof pc, (uint32_t)x->ne[1], n_tok, 1);
}

typedef struct hc_pc {
    uint32_t n_embd, hc, iters, head, type, w_rel, w_chunk_rows, w_row_bytes;
    uint32_t s_off, base_off, scale_off, col_off, post_off, comb_off;
    float eps, norm_eps;
    uint32_t p_off, n_split;
    uint32_t fold, y_off, copy_off;
} hc_pc;

typedef struct hc_mix_pc {
    uint32_t width, n_mix, n_split, chunk, w_rel, w_chunk_rows, w_row_bytes, s_off, p_off;
    uint32_t fold, n_embd, hc, y_off, post_off, comb_off, copy_off, vec;
} hc_mix_pc;

/* Chunks hc_mix.comp splits each row of the mix projection into (workgroups per row): up to
 * 16, none shorter than one 16-byte step of every invocation (4 · 256 elements). DeepSeek V4's
 * 16,384-wide streams take all 16; a narrow model's one or a few (a tiny test model's 512-wide
 * streams in 16 chunks of 32 left most of each workgroup idle: 64 % of a 300-token prefill on
 * lavapipe). */
#define VK_HC_SPLIT_MAX 16
#define VK_HC_CHUNK_MIN 1024

static uint32_t hc_splits(uint32_t width) {
    uint32_t n = width / VK_HC_CHUNK_MIN;
    return n < 1 ? 1 : n > VK_HC_SPLIT_MAX ? VK_HC_SPLIT_MAX : n;
}

static bool views_meet(const halo_tensor *a, const halo_tensor *b) {
    uint64_t an = halo_tensor_nbytes(a), bn = halo_tensor_nbytes(b);
    return a->buf == b->buf && a->offset < b->offset + bn && b->offset < a->offset + an;
}

void vk_hc_pre(halo_backend *be, const halo_hc_args *a) {
    vk_backend *vb = vk_of(be);
    if (a->hc > 16) {
        vk_fail(vb, HALO_E_UNSUPPORTED, "hc_pre: %u hyper-connection streams (at most 16)", a->hc);
        return;
    }
    /* The previous site's hc_post of these streams, deferred by vk_hc_post, folded into both
     * dispatches (HALO_VK_DEFER_POST): hc_mix.comp mixes the streams it would write,
     * hc_pre.comp writes them first. No hc_post dispatch, no barrier between it and hc_mix.
     * Decode only (a few tokens): every hc_mix workgroup recomputes the new streams of its
     * chunk (n_mix + 1 times over), cheap for a token, not for a prefill. */
    bool fold = vb->pend_post.on && vk_same_view(&vb->pend_post.streams, a->streams) &&
                (uint32_t)vb->pend_post.post.ne[0] == a->hc &&
                vb->pend_post.y.ne[0] == a->collapsed->ne[0] && a->collapsed->ne[1] <= 4;
    halo_tensor fy = vb->pend_post.y, fpost = vb->pend_post.post, fcomb = vb->pend_post.comb;
    if (fold) vb->pend_post.on = false;
    bool head = a->post == NULL;
    uint32_t n_tok = (uint32_t)a->collapsed->ne[1], width = a->hc * (uint32_t)a->collapsed->ne[0];
    uint32_t n_mix = head ? a->hc : (2 + a->hc) * a->hc;
    uint64_t cur = 0, base_off = vk_take(&cur, vk_f32_bytes(a->base));
    uint64_t scale_off = vk_take(&cur, vk_f32_bytes(a->scale));
    /* the chunks' partial sums, then (fold) hc_mix's copy of the old post and comb */
    uint32_t n_split = hc_splits(width);
    uint64_t sums = (uint64_t)n_tok * n_split * (n_mix + 1);
    uint64_t part_bytes = (sums + (fold ? (uint64_t)n_tok * (a->hc + a->hc * a->hc) : 0)) * 4;
    uint64_t part_off = vk_take(&cur, part_bytes);
    if (!vk_begin_uploads(vb, 8192) || !vk_scratch_reserve(vb, cur, "hc_pre")) return;
    if (!vk_check_type(vb, "hc_pre", a->fn)) return;
    vk_binding part = vk_scratch_at(vb, part_off, part_bytes);
    /* 1. the mix projection and the squares, in chunks: weight (0), streams (1), partials (2) */
    vk_binding fb[3] = {{0}};
    if (fold) {
        fb[0] = vk_bind_tensor(&fy);
        fb[1] = vk_bind_tensor(&fpost);
        fb[2] = vk_bind_tensor(&fcomb);
    }
    vk_binding mb[6] = {
        vk_bind_weight(a->fn, 1), vk_bind_tensor(a->streams), part, fb[0], fb[1], fb[2]};
    uint32_t nm = fold ? 6 : 3;
    vk_bound md[6] = {{0}};
    if (!vk_resolve(vb, "hc_pre", mb, nm, md)) return;
    hc_mix_pc mp = {width,
                    n_mix,
                    n_split,
                    (width + n_split - 1) / n_split,
                    md[0].rel,
                    md[0].chunk_rows,
                    (uint32_t)mb[0].row_bytes,
                    md[1].rel / 4,
                    md[2].rel / 4,
                    fold,
                    (uint32_t)a->collapsed->ne[0],
                    a->hc,
                    md[3].rel / 4,
                    md[4].rel / 4,
                    md[5].rel / 4,
                    md[2].rel / 4 + (uint32_t)sums,
                    0};
    /* 16-byte loads (hc_mix.comp's vec): F16/F32 rows on words, streams and y on 16 bytes,
     * chunks and streams of whole vec4s */
    uint32_t n_embd = (uint32_t)a->collapsed->ne[0];
    mp.vec = (a->fn->type == HALO_TYPE_F16 || a->fn->type == HALO_TYPE_F32) && md[0].rel % 4 == 0 &&
             mb[0].row_bytes % 4 == 0 && mp.s_off % 4 == 0 && n_embd % 4 == 0 &&
             mp.chunk % 4 == 0 && (!fold || mp.y_off % 4 == 0) && vb->hc_vec;
    vk_note_work(vb, (double)n_tok * (n_mix + 1) * width * (fold ? a->hc + 1 : 1));
    if (!vk_dispatch_pipe(vb, VK_K_HC_MIX, vk_typed_pipeline(vb, VK_K_HC_MIX, a->fn->type),
                          "hc_pre", mb, nm, NULL, &mp, sizeof mp, n_mix + 1, n_split, n_tok))
        return;
    /* 2. per token: the sums, pre/post/comb (Sinkhorn) and the collapsed stream */
    vk_binding b[9] = {{0},
                       vk_bind_tensor(a->streams),
                       vk_as_f32(vb, "hc_pre", a->base, base_off),
                       vk_as_f32(vb, "hc_pre", a->scale, scale_off),
                       vk_bind_tensor(a->collapsed),
                       head ? (vk_binding){0} : vk_bind_tensor(a->post),
                       head ? (vk_binding){0} : vk_bind_tensor(a->comb),
                       part,
                       fb[0]};
    uint32_t nb = fold ? 9 : 8;
    vk_bound bd[9] = {{0}};
    if (!vk_resolve(vb, "hc_pre", b, nb, bd)) return;
    hc_pc pc = {(uint32_t)a->collapsed->ne[0],
                a->hc,
                a->sinkhorn_iters,
                head,
                a->fn->type,
                0,
                0,
                0,
                bd[1].rel / 4,
                bd[2].rel / 4,
                bd[3].rel / 4,
                bd[4].rel / 4,
                bd[5].rel / 4,
                bd[6].rel / 4,
                a->eps,
                a->norm_eps,
                bd[7].rel / 4,
                n_split,
                fold,
                bd[8].rel / 4,
                bd[7].rel / 4 + (uint32_t)sums};
    /* Slices of the channels per token (HALO_VK_HC_SLICES): the per-token part is tiny and
     * done by each, the streams and the collapsed output split between them. */
    uint32_t slices = vb->hc_slices < a->collapsed->ne[0] ? vb->hc_slices : 1;
    /* With the fold, a slice reads y where another may write: only where y is the collapsed
     * tensor itself (each element read and written by one invocation) or apart from it, and
     * apart from post and comb (slice 0 writes them), may the slices go on their own. */
    if (fold && !(vk_same_view(&fy, a->collapsed) || !views_meet(&fy, a->collapsed))) slices = 1;
    if (fold && !head && (views_meet(&fy, a->post) || views_meet(&fy, a->comb))) slices = 1;
    vk_dispatch(vb, VK_K_HC_PRE, "hc_pre", b, nb, NULL, &pc, sizeof pc, n_tok, slices, 1);
}

typedef struct post_pc {
    uint32_t n_embd, hc, s_off, y_off, post_off, comb_off;
} post_pc;

/* Deferred to the next op (HALO_VK_DEFER_POST, default on): the next site's hc_pre of the same
 * streams folds it in (vk_hc_pre); anything else records it first. */
void vk_hc_post(halo_backend *be, halo_tensor *streams, const halo_tensor *y,
                const halo_tensor *post, const halo_tensor *comb) {
    vk_backend *vb = vk_of(be);
    vk_defer_flush(vb);
    if (vb->defer_post && !vb->failed && post->ne[0] <= 16) {
        vb->pend_post.on = true;
        vb->pend_post.streams = *streams;
        vb->pend_post.y = *y;
        vb->pend_post.post = *post;
        vb->pend_post.comb = *comb;
        return;
    }
    vk_hc_post_now(vb, streams, y, post, comb);
}

void vk_hc_post_now(vk_backend *vb, halo_tensor *streams, const halo_tensor *y,
                    const halo_tensor *post, const halo_tensor *comb) {
    if (!vk_begin_uploads(vb, 0)) return;
    vk_binding b[5] = {{0},
                       vk_bind_tensor(streams),
                       vk_bind_tensor(y),
                       vk_bind_tensor(post),
                       vk_bind_tensor(comb)};
    vk_bound bd[5] = {{0}};
    if (!vk_resolve(vb, "hc_post", b, 5, bd)) return;
    uint32_t n_embd = (uint32_t)y->ne[0];
    post_pc pc = {n_embd,        (uint32_t)post->ne[0], bd[1].rel / 4,
                  bd[2].rel / 4, bd[3].rel / 4,         bd[4].rel / 4};
    vk_dispatch(vb, VK_K_HC_POST, "hc_post", b, 5, NULL, &pc, sizeof pc, (n_embd + 63) / 64,
                (uint32_t)y->ne[1], 1);
}
