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

void main() {
    uint t = gl_WorkGroupID.x;
    int tok = TOK.d[pc.tok_off + t];
    uint row = tok >= 0 && uint(tok) < pc.n_rows ? uint(tok) : 0u;
    uint c, base;
    wrow(row, pc.w_rel, pc.w_chunk_rows, pc.w_row_bytes, c, base);
    for (uint i = gl_LocalInvocationID.x; i < pc.n; i += WG)
        OUT.d[pc.out_off + t * pc.n + i] = wval(TYPE, c, base, i);
}
