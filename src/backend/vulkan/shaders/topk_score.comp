#version 450
// Lightning-indexer scores, one workgroup per (row s, token t):
// sum_h w[t,h] * n_head^-1/2 * relu(q[t,h] . k[s]) * head_dim^-1/2, for causally visible rows.
#define WG 64
#include "common.glsl"

layout(binding = 1) readonly buffer Q { float d[]; } QB;
layout(binding = 2) readonly buffer Wh { float d[]; } WH;
layout(binding = 3) readonly buffer K { float d[]; } KB;
layout(binding = 4) writeonly buffer Sc { float d[]; } SC;
layout(binding = 5) readonly buffer Pos { int d[]; } POS;
layout(push_constant) uniform PC {
    uint hd, n_head, n_rows, ratio, q_off, w_off, k_off, score_off, pos_off;
} pc;

void main() {
    uint s = gl_WorkGroupID.x + gl_WorkGroupID.z * gl_NumWorkGroups.x, t = gl_WorkGroupID.y;
    int visible = (POS.d[pc.pos_off + t] + 1) / int(pc.ratio);
    if (s >= pc.n_rows || int(s) >= visible) return;
    float qs = 1.0 / sqrt(float(pc.hd)), ws = 1.0 / sqrt(float(pc.n_head));
    float acc = 0.0;
    for (uint h = gl_LocalInvocationID.x; h < pc.n_head; h += WG) {
        uint qb = pc.q_off + (t * pc.n_head + h) * pc.hd, kb = pc.k_off + s * pc.hd;
        float d = 0.0;
        for (uint i = 0u; i < pc.hd; i++) d += QB.d[qb + i] * KB.d[kb + i];
        acc += (d > 0.0 ? d * qs : 0.0) * (WH.d[pc.w_off + t * pc.n_head + h] * ws);
    }
    acc = wg_sum(acc);
    if (gl_LocalInvocationID.x == 0u) SC.d[pc.score_off + t * pc.n_rows + s] = acc;
}
