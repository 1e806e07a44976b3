// ggml's quantize_row_q8_0 steps, correctly rounded on any Vulkan implementation (shared by
// quant_q8.comp and matvec_q8i.comp). A Vulkan implementation may divide approximately (NVIDIA's
// driver computes a / b as a times an approximate 1 / b: on the H200 some q came out one step
// off ggml's, 1.8e-4 of the output's range), so both divisions are corrected to the rounded
// quotient with one fused multiply-add step, and roundf is written out (floor(|v| + 0.5) rounds
// 0.49999997 up).

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

// One quantized value as halo_quantize_q8_0 stores it: roundf(x · id), NaN as 0, clamped to
// ±127 (finite inputs never reach the clamp), as its low byte.
uint q8_byte(float x, float id) {
    precise float v = x * id;
    float r = round_away(v);
    r = isnan(r) ? 0.0 : clamp(r, -127.0, 127.0);
    return uint(int(r)) & 0xffu;
}
