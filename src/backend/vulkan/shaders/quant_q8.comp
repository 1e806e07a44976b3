#version 450
// Activations to ggml's Q8_0 for the integer-dot projection (fast mode, matmul_q8.comp): each
// block of 32 values of a column becomes 32 int8 packed in 8 words and one scale, as ggml's
// quantize_row_q8_0_ref: d = amax / 127, q = roundf(x / d) with 1/d computed once, d stored
// at f16 precision. One invocation per block. Bit for bit on any implementation: q8_round.glsl.
#define WG 64
#include "common.glsl"
#include "q8_round.glsl"

layout(binding = 1) readonly buffer X { float d[]; } XB;
layout(binding = 2) writeonly buffer Q { uint d[]; } QB;
layout(binding = 3) writeonly buffer S { float d[]; } SB;
layout(push_constant) uniform PC {
    uint nb_col, x_off, x_col_stride, q_off, s_off;
} pc;

void main() {
    uint b = gl_GlobalInvocationID.x, col = gl_WorkGroupID.y;
    if (b >= pc.nb_col) return;
    uint xb = pc.x_off + col * pc.x_col_stride + b * 32u;
    float amax = 0.0;
    for (uint i = 0u; i < 32u; i++) amax = max(amax, abs(XB.d[xb + i]));
    float d = div_rn(amax, 127.0);
    float id = d != 0.0 ? div_rn(1.0, d) : 0.0;
    uint blk = col * pc.nb_col + b;
    for (uint w = 0u; w < 8u; w++) {
        uint word = 0u;
        [[unroll]] for (uint k = 0u; k < 4u; k++) {
            precise float v = XB.d[xb + w * 4u + k] * id;
            int q = int(clamp(round_away(v), -127.0, 127.0));
            word |= (uint(q) & 0xffu) << (8u * k);
        }
        QB.d[pc.q_off + blk * 8u + w] = word;
    }
    SB.d[pc.s_off + blk] = unpackHalf2x16(f16_bits_rne(d)).x;
}
