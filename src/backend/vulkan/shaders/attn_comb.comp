#version 450
// Split-K decode attention, pass 2 (vk_attn_split.c): workgroup (head, token) merges the
// n_split partials attn_part.comp wrote with the head's sink logit and writes the output.
// An empty chunk's partial (m = -1e30, l = 0, acc = 0) weighs exp(-1e30 - M) = 0.
#define WG 128
#include "common.glsl"

layout(binding = 1) readonly buffer Part { float d[]; } PART;
layout(binding = 2) readonly buffer Sinks { float d[]; } SINKS;
layout(binding = 3) writeonly buffer Out { float d[]; } OUT;
layout(push_constant) uniform PC {
    uint hd, n_head, n_split, acc_off, ml_off, sinks_off, out_off;
} pc;

const uint MAXD = 4u;

void main() {
    uint h = gl_WorkGroupID.x, t = gl_WorkGroupID.y, lid = gl_LocalInvocationID.x;
    uint p0 = (t * pc.n_head + h) * pc.n_split;
    float sink = SINKS.d[pc.sinks_off + h], m = sink;
    for (uint c = 0u; c < pc.n_split; c++) m = max(m, PART.d[pc.ml_off + 2u * (p0 + c)]);
    float l = exp(sink - m), o[MAXD];
    [[unroll]] for (uint j = 0u; j < MAXD; j++) o[j] = 0.0;
    for (uint c = 0u; c < pc.n_split; c++) {
        float w = exp(PART.d[pc.ml_off + 2u * (p0 + c)] - m);
        l += w * PART.d[pc.ml_off + 2u * (p0 + c) + 1u];
        uint base = pc.acc_off + (p0 + c) * pc.hd;
        [[unroll]] for (uint j = 0u; j < MAXD; j++) {
            uint d = lid + j * WG;
            if (d < pc.hd) o[j] += w * PART.d[base + d];
        }
    }
    uint ob = pc.out_off + (t * pc.n_head + h) * pc.hd;
    [[unroll]] for (uint j = 0u; j < MAXD; j++) {
        uint d = lid + j * WG;
        if (d < pc.hd) OUT.d[ob + d] = o[j] / l;
    }
}
