#version 450
// out[o, col] = sum_i w[i, o] * x[i, col], the weight decoded inside the dot, f32
// accumulation. One subgroup per output row, its lanes striding over the input and summed
// with subgroupAdd (no workgroup barriers: they are costly on lavapipe and unneeded here), for
// a tile of up to 8 columns that share each decoded weight. Columns may take their x from
// col / x_col_div (MoE: several experts per token) and their rows from expert sel[col] (then
// tiles are one column); with groups > 1, output slice g reads input slice g.
#define WG 64
#include "common.glsl"
#include "quant.glsl"

// The weight type, fixed when the pipeline is made (one pipeline per type), so the decoder
// of that type alone is compiled in.
layout(constant_id = 0) const uint TYPE = 0u;

layout(binding = 1) readonly buffer X { float d[]; } XB;
layout(binding = 2) writeonly buffer Out { float d[]; } OUT;
layout(binding = 3) readonly buffer Sel { int d[]; } SEL;
layout(push_constant) uniform PC {
    uint K, N, n_cols, groups, type, w_rel, w_chunk_rows, w_row_bytes;
    uint x_off, x_col_stride, x_col_div, out_off, out_col_stride, sel_mode, sel_off, n_expert;
    uint rows_per_wg, col_tile;
} pc;

void main() {
    uint lane = gl_SubgroupInvocationID, ss = gl_SubgroupSize;
    uint col0 = gl_WorkGroupID.y * pc.col_tile;
    uint ncol = min(pc.col_tile, pc.n_cols - col0);
    uint row0 = (gl_WorkGroupID.x + gl_WorkGroupID.z * gl_NumWorkGroups.x) * pc.rows_per_wg;
    uint e = 0u;
    if (pc.sel_mode != 0u) {
        int s = SEL.d[pc.sel_off + col0];
        e = s >= 0 && uint(s) < pc.n_expert ? uint(s) : 0u;
    }
    for (uint r = gl_SubgroupID; r < pc.rows_per_wg; r += gl_NumSubgroups) {
        uint o = row0 + r;
        if (o >= pc.N) break;
        uint g = o / (pc.N / pc.groups);
        uint c, base;
        wrow(e * pc.N + o, pc.w_rel, pc.w_chunk_rows, pc.w_row_bytes, c, base);
        float acc[8] = float[8](0., 0., 0., 0., 0., 0., 0., 0.);
        uint xb[8];
        [[unroll]] for (uint j = 0u; j < 8u; j++)
            xb[j] = pc.x_off + ((col0 + min(j, ncol - 1u)) / pc.x_col_div) * pc.x_col_stride +
                    g * pc.K;
        if (ncol == 8u) {
            for (uint i = lane; i < pc.K; i += ss) {
                float w = wval(TYPE, c, base, i);
                [[unroll]] for (uint j = 0u; j < 8u; j++) acc[j] += w * XB.d[xb[j] + i];
            }
        } else {
            for (uint i = lane; i < pc.K; i += ss) {
                float w = wval(TYPE, c, base, i);
                [[unroll]] for (uint j = 0u; j < 8u; j++)
                    if (j < ncol) acc[j] += w * XB.d[xb[j] + i];
            }
        }
        [[unroll]] for (uint j = 0u; j < 8u; j++) {
            if (j >= ncol) break;
            float s = subgroupAdd(acc[j]);
            if (subgroupElect()) OUT.d[pc.out_off + (col0 + j) * pc.out_col_stride + o] = s;
        }
    }
}
