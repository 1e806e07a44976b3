#version 450
// After pooling with overlap: keep the last window's Ca series (gates with ape included) as
// the previous window of the next call.
#define WG 64
#include "common.glsl"

layout(binding = 1) readonly buffer KV { float d[]; } KVB;
layout(binding = 2) readonly buffer G { float d[]; } GB;
layout(binding = 3) readonly buffer Ape { float d[]; } APE;
layout(binding = 4) writeonly buffer PKV { float d[]; } PKVB;
layout(binding = 5) writeonly buffer PG { float d[]; } PGB;
layout(push_constant) uniform PC {
    uint ratio, dim, width, n_win, kv_off, gate_off, ape_off, pkv_off, pgate_off;
} pc;

void main() {
    uint k = gl_WorkGroupID.x * WG + gl_LocalInvocationID.x;
    if (k >= pc.ratio * pc.dim) return;
    uint i = k / pc.dim, d = k % pc.dim;
    uint b = (pc.n_win - 1u) * pc.ratio * pc.width + i * pc.width + d;
    PKVB.d[pc.pkv_off + i * pc.dim + d] = KVB.d[pc.kv_off + b];
    PGB.d[pc.pgate_off + i * pc.dim + d] =
        GB.d[pc.gate_off + b] + APE.d[pc.ape_off + i * pc.width + d];
}
