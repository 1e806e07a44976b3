#version 450
// Activations to ggml's Q8_0 for the integer-dot projection (fast mode, matmul_q8.comp): each
// block of 32 values of a column becomes 32 int8 packed in 8 words and one scale, as ggml's
// quantize_row_q8_0_ref: d = amax / 127, q = roundf(x / d) with 1/d computed once, d stored
// at f16 precision. One invocation per block.
//
// Bit for bit: a Vulkan implementation may divide approximately (NVIDIA's driver computes a / b
// as a times an approximate 1 / b: on the H200 some q came out one step off ggml's, 1.8e-4 of
// the output's range), so both divisions are corrected to the rounded quotient with one fused
// multiply-add step, and roundf is written out (floor(|v| + 0.5) rounds 0.49999997 up).
#define WG 64
#include "common.glsl"

layout(binding = 1) readonly buffer X { float d[]; } XB;
layout(binding = 2) writeonly buffer Q { uint d[]; } QB;
layout(binding = 3) writeonly buffer S { float d[]; } SB;
layout(push_constant) uniform PC {
    uint nb_col, x_off, x_col_stride, q_off, s_off;
} pc;

// a / b rounded as IEEE division: q0 = a·(1/b) is within an ulp or two; the residual a - q0·b
// is exact in an fma, and one correction step lands on the rounded quotient.
float div_rn(float a, float b, float rb) {
    precise float q0 = a * rb;
    precise float r = fma(-q0, b, a);
    precise float q = fma(r, rb, q0);
    return q;
}

// f32 to f16 bits rounded to nearest even, as ggml's conversion: the driver's packHalf2x16 may
// round otherwise (on the H200 the scales came out a step off the CPU's for many blocks). d is
// finite and non-negative here; the general cases are kept anyway.
uint f16_bits_rne(float f) {
    uint x = floatBitsToUint(f), sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) return sign | (ax > 0x7f800000u ? 0x7e00u : 0x7c00u);
    if (ax >= 0x477ff000u) return sign | 0x7c00u; // 65520 and up round to infinity
    if (ax < 0x38800000u) // below 2^-14: a multiple of f16's 2^-24, ties to even
        return sign | uint(roundEven(uintBitsToFloat(ax) * 16777216.0));
    uint e = ax - 0x38000000u; // the exponent rebiased from 127 to 15
    return sign | ((e + 0xfffu + ((e >> 13) & 1u)) >> 13);
}

// C's roundf: halves away from zero (v - trunc(v) is exact for |v| < 2^23).
float round_away(float v) {
    precise float t = trunc(v);
    precise float f = abs(v - t);
    return f >= 0.5 ? t + sign(v) : t;
}

void main() {
    uint b = gl_GlobalInvocationID.x, col = gl_WorkGroupID.y;
    if (b >= pc.nb_col) return;
    uint xb = pc.x_off + col * pc.x_col_stride + b * 32u;
    float amax = 0.0;
    for (uint i = 0u; i < 32u; i++) amax = max(amax, abs(XB.d[xb + i]));
    float d = div_rn(amax, 127.0, 1.0 / 127.0);
    float id = d != 0.0 ? div_rn(1.0, d, 1.0 / d) : 0.0;
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
