#version 450
// out[:, t] = row tokens[t] of the table, decoded to f32 (also converts small weights to f32).
#define WG 64
#include "common.glsl"
#include "quant.glsl"

layout(constant_id = 0) const uint TYPE = 0u; // the weight type (one pipeline per type)

layout(binding = 1) readonly buffer Tok { int d[]; } TOK;
layout(binding = 2) writeonly buffer Out { float d[]; } OUT;
layout(push_constant) uniform PC {
    uint n, type, w_rel, w_chunk_rows, w_row_bytes, tok_off, out_off, n_rows;
} pc;

// Workgroup (t, y) writes elements y·SLICE .. y·SLICE + SLICE-1 of column t: a decode step
// embeds one token, which one workgroup did alone (a 4096-wide row in ~0.1 ms on the H200).
const uint SLICE = 512u;

void main() {
    uint t = gl_WorkGroupID.x;
    int tok = TOK.d[pc.tok_off + t];
    uint row = tok >= 0 && uint(tok) < pc.n_rows ? uint(tok) : 0u;
    uint c, base;
    wrow(row, pc.w_rel, pc.w_chunk_rows, pc.w_row_bytes, c, base);
    uint i0 = gl_WorkGroupID.y * SLICE, i1 = min(pc.n, i0 + SLICE);
    for (uint i = i0 + gl_LocalInvocationID.x; i < i1; i += WG)
        OUT.d[pc.out_off + t * pc.n + i] = wval(TYPE, c, base, i);
}
