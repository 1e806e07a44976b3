#version 450
// Hyper-connection pre, first pass: the mix projection fn · flat and the sum of squares of the
// flattened streams, in parallel. hc_pre.comp had one workgroup per token do all of it (24 rows
// of 16,384 weights: ~0.4 ms a call on the H200, a third of a decode step); here workgroup
// (m, s, t) sums row m (or, for m = n_mix, the squares) over chunk s of token t's streams, and
// hc_pre.comp adds the chunks in order and scales by the RMS factor (fn · (x·r) = r·(fn · x)).
#define WG 64
#include "common.glsl"
#include "quant.glsl"

layout(constant_id = 0) const uint TYPE = 0u; // the weight type (one pipeline per type)

layout(binding = 1) readonly buffer S { float d[]; } ST;
layout(binding = 2) writeonly buffer P { float d[]; } PART;
layout(push_constant) uniform PC {
    uint width, n_mix, n_split, chunk, w_rel, w_chunk_rows, w_row_bytes, s_off, p_off;
} pc;

void main() {
    uint m = gl_WorkGroupID.x, s = gl_WorkGroupID.y, t = gl_WorkGroupID.z;
    uint lid = gl_LocalInvocationID.x, xb = pc.s_off + t * pc.width;
    uint i0 = s * pc.chunk, i1 = min(i0 + pc.chunk, pc.width);
    float acc = 0.0;
    if (m < pc.n_mix) {
        uint c, base;
        wrow(m, pc.w_rel, pc.w_chunk_rows, pc.w_row_bytes, c, base);
        for (uint i = i0 + lid; i < i1; i += WG) acc += wval(TYPE, c, base, i) * ST.d[xb + i];
    } else {
        for (uint i = i0 + lid; i < i1; i += WG) acc += ST.d[xb + i] * ST.d[xb + i];
    }
    acc = wg_sum(acc);
    if (lid == 0u) PART.d[pc.p_off + (t * pc.n_split + s) * (pc.n_mix + 1u) + m] = acc;
}
