#version 450
// out[:, t] = sum_s weight[t, s] * y_routed[t, s] (+ the shared expert's y).
#define WG 64
#include "common.glsl"

layout(binding = 1) readonly buffer YR { float d[]; } YRB;
layout(binding = 2) readonly buffer YS { float d[]; } YSB;
layout(binding = 3) readonly buffer Wt { float d[]; } WT;
layout(binding = 4) writeonly buffer Out { float d[]; } OUT;
layout(push_constant) uniform PC {
    uint n_embd, k, has_shared, yr_off, ys_off, w_off, out_off;
} pc;

void main() {
    uint d = gl_WorkGroupID.x * WG + gl_LocalInvocationID.x, t = gl_WorkGroupID.y;
    if (d >= pc.n_embd) return;
    float s = 0.0;
    for (uint i = 0u; i < pc.k; i++)
        s += WT.d[pc.w_off + t * pc.k + i] * YRB.d[pc.yr_off + (t * pc.k + i) * pc.n_embd + d];
    if (pc.has_shared != 0u) s += YSB.d[pc.ys_off + t * pc.n_embd + d];
    OUT.d[pc.out_off + t * pc.n_embd + d] = s;
}
