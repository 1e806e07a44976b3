#version 450
// Indexer top-k for one token: a row's rank is the number of visible rows that beat it (a
// higher score, or an equal score at a lower index: the tie rule of every backend); rows of
// rank < top_k are written at their rank, -1 pads. Quadratic in the visible rows.
#define WG 64
#include "common.glsl"

layout(binding = 4) readonly buffer Sc { float d[]; } SC;
layout(binding = 5) readonly buffer Pos { int d[]; } POS;
layout(binding = 6) buffer Out { int d[]; } OUT;
layout(push_constant) uniform PC {
    uint n_rows, ratio, top_k, score_off, pos_off, out_off;
} pc;

void main() {
    uint t = gl_WorkGroupID.x, lid = gl_LocalInvocationID.x;
    int vis = (POS.d[pc.pos_off + t] + 1) / int(pc.ratio);
    uint visible = vis < 0 ? 0u : min(uint(vis), pc.n_rows);
    uint ob = pc.out_off + t * pc.top_k, sb = pc.score_off + t * pc.n_rows;
    for (uint i = lid; i < pc.top_k; i += WG) OUT.d[ob + i] = -1;
    memoryBarrierBuffer();
    barrier();
    for (uint s = lid; s < visible; s += WG) {
        float v = SC.d[sb + s];
        uint rank = 0u;
        for (uint o = 0u; o < visible && rank < pc.top_k; o++) {
            float u = SC.d[sb + o];
            if (u > v || (u == v && o < s)) rank++;
        }
        if (rank < pc.top_k) OUT.d[ob + rank] = int(s);
    }
}
