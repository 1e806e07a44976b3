#version 450
// out[o, col] = sum_i w[i, o] * x[i, col]: one workgroup per (output row, column), the weight
// decoded inside the dot, f32 accumulation. Columns may take their x from col / x_col_div
// (MoE: several experts per token) and their rows from expert sel[col]; with groups > 1,
// output slice g reads input slice g.
#define WG 64
#include "common.glsl"
#include "quant.glsl"

layout(binding = 1) readonly buffer X { float d[]; } XB;
layout(binding = 2) writeonly buffer Out { float d[]; } OUT;
layout(binding = 3) readonly buffer Sel { int d[]; } SEL;
layout(push_constant) uniform PC {
    uint K, N, n_cols, groups, type, w_rel, w_chunk_rows, w_row_bytes;
    uint x_off, x_col_stride, x_col_div, out_off, out_col_stride, sel_mode, sel_off, n_expert;
} pc;

void main() {
    uint o = gl_WorkGroupID.x + gl_WorkGroupID.z * gl_NumWorkGroups.x;
    uint col = gl_WorkGroupID.y;
    if (o >= pc.N) return;
    uint g = o / (pc.N / pc.groups);
    uint xb = pc.x_off + (col / pc.x_col_div) * pc.x_col_stride + g * pc.K;
    uint e = 0u;
    if (pc.sel_mode != 0u) {
        int s = SEL.d[pc.sel_off + col];
        e = s >= 0 && uint(s) < pc.n_expert ? uint(s) : 0u;
    }
    uint c, base;
    wrow(e * pc.N + o, pc.w_rel, pc.w_chunk_rows, pc.w_row_bytes, c, base);
    float acc = 0.0;
    for (uint i = gl_LocalInvocationID.x; i < pc.K; i += WG)
        acc += wval(pc.type, c, base, i) * XB.d[xb + i];
    acc = wg_sum(acc);
    if (gl_LocalInvocationID.x == 0u) OUT.d[pc.out_off + col * pc.out_col_stride + o] = acc;
}
