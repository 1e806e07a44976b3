/* Helpers shared by the Vulkan backend's op files. */
#ifndef HALO_BACKEND_VULKAN_VK_OPS_H
#define HALO_BACKEND_VULKAN_VK_OPS_H

#include "backend/vulkan/vk.h"

/* A projection by weight w (rows N per expert) over n_cols columns of x: column c reads x at
 * element x_off + (c / x_col_div)·x_col_stride and writes out at out_off + c·out_col_stride;
 * with sel bound, column c uses expert sel[sel_off + c]. Offsets are in elements, added to the
 * bindings' own. */
typedef struct vk_mm_args {
    vk_binding x, out, sel;
    uint32_t N, n_cols, groups, x_off, x_col_stride, x_col_div, out_off, out_col_stride, sel_off,
        n_expert;
    /* With norm bound (f32, K elements): an RMS norm of each column of x first, times norm,
     * folded into the matvec (vk_mm_norm_fits must have said yes). */
    vk_binding norm;
    float eps;
    /* With up bound (the MoE's down projections): x is the gate projection and each column's
     * input is silu(min(x, c)) · clamp(up, -c, c) (c = clamp_v, 0: none), up laid out as x
     * (vk_mm_swiglu_fits must have said yes). With sum_k too (the routed down): the columns
     * are tokens' sum_k expert pairs and out[:, t] = Σ_j wts[t·sum_k + j] · (W_e · x_j)
     * (+ ys[:, t] where ys is bound): the MoE's output (vk_mm_sum_fits). */
    vk_binding up, wts, ys;
    float clamp_v;
    uint32_t sum_k;
    /* With cs bound (cos/sin pairs of each column's token): x is rotated back on the load in
     * the last rope_nrot of every rope_hd inputs (the attention output's inverse rope;
     * vk_mm_rope_fits must have said yes). */
    vk_binding cs;
    uint32_t rope_hd, rope_nrot;
} vk_mm_args;
void vk_mm(vk_backend *vb, const char *op, const halo_tensor *w, const vk_mm_args *m);
bool vk_mm_swiglu_fits(vk_backend *vb, const halo_tensor *w, const vk_mm_args *m);
bool vk_mm_sum_fits(vk_backend *vb, const halo_tensor *w, const vk_mm_args *m);
bool vk_mm_rope_fits(vk_backend *vb, const halo_tensor *w, const vk_mm_args *m);
/* Whether vk_mm can fold m->norm into this projection: a matvec of a few plain columns
 * (matvec.comp, matvec_wide.comp or matvec_q8.comp), x and the norm weight 16-byte aligned. */
bool vk_mm_norm_fits(vk_backend *vb, const halo_tensor *w, const vk_mm_args *m);

/* Rows (or other units) a 64-wide workgroup handles with one subgroup each. */
uint32_t vk_rows_per_wg(const vk_backend *vb);
/* Checks the op may start (no earlier failure) and reserves room for its uploads. */
bool vk_begin_uploads(vk_backend *vb, uint64_t bytes);
bool vk_check_type(vk_backend *vb, const char *op, const halo_tensor *t);
/* Bump allocation of scratch regions (256-byte aligned): returns the region's offset. */
uint64_t vk_take(uint64_t *cursor, uint64_t bytes);
/* A small weight (norm, bias, ape ...) as f32: the tensor itself when it is F32, otherwise
 * converted into scratch at scratch_off (vk_f32_bytes of room, reserved by the caller). */
vk_binding vk_as_f32(vk_backend *vb, const char *op, const halo_tensor *t, uint64_t scratch_off);
uint64_t vk_f32_bytes(const halo_tensor *t);
/* The shape of an attention call, the first fields of attention.comp's and attn_part.comp's
 * push constants (the offsets that follow differ). */
typedef struct vk_attn_shape {
    uint32_t hd, n_head, n_win, sliding_window, n_comp, ratio, k_sel, has_comp;
    int32_t win_pos0;
    float scale;
} vk_attn_shape;
vk_attn_shape vk_attn_shape_of(const halo_attn_args *a);
/* cos/sin table [n][n_rot/2][2] for positions pos (caller frees). */
float *vk_rope_table(const halo_rope *rope, const float *pos, uint32_t n);

#endif
