#version 450
// streams[:, k, t] = post[k, t] * y[:, t] + sum_j comb[j, k, t] * streams[:, j, t]
#define WG 64
#include "common.glsl"

layout(binding = 1) buffer S { float d[]; } ST;
layout(binding = 2) readonly buffer Y { float d[]; } YB;
layout(binding = 3) readonly buffer P { float d[]; } PO;
layout(binding = 4) readonly buffer C { float d[]; } CO;
layout(push_constant) uniform PC {
    uint n_embd, hc, s_off, y_off, post_off, comb_off;
} pc;

void main() {
    uint d = gl_WorkGroupID.x * WG + gl_LocalInvocationID.x, t = gl_WorkGroupID.y;
    if (d >= pc.n_embd) return;
    uint hc = pc.hc, xb = pc.s_off + t * hc * pc.n_embd;
    float y = YB.d[pc.y_off + t * pc.n_embd + d];
    float mixed[16];
    for (uint k = 0u; k < hc; k++) {
        float s = PO.d[pc.post_off + t * hc + k] * y;
        for (uint j = 0u; j < hc; j++)
            s += CO.d[pc.comb_off + t * hc * hc + j * hc + k] * ST.d[xb + j * pc.n_embd + d];
        mixed[k] = s;
    }
    for (uint k = 0u; k < hc; k++) ST.d[xb + k * pc.n_embd + d] = mixed[k];
}
