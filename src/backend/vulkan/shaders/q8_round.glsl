// ggml's quantize_row_q8_0 steps, correctly rounded on any Vulkan implementation (shared by
// quant_q8.comp and matvec_q8i.comp). A Vulkan implementation may divide approximately (NVIDIA's
// driver computes a / b as a times an approximate 1 / b, within 2.5 ulp as the spec allows: on
// the H200 some q came out one step off ggml's, 1.8e-4 of the output's range) and may not fuse
// fma (lavapipe: a one-step correction by fma(-q, b, a) then missed the rounded quotient for a
// few blocks in 10^5, 8.6e-5 of the range), so the quotient is corrected against a residual
// computed exactly without fma (Dekker's product), and roundf is written out (floor(|v| + 0.5)
// rounds 0.49999997 up).

// a - q·b for q·b close to a: q·b = p + e exactly (Veltkamp's split of each factor into 12-bit
// halves, products exact in f32), a - p exact (Sterbenz), then e's rounding only; `precise`
// keeps a compiler from fusing or reassociating any of it.
float resid(float a, float q, float b) {
    precise float p = q * b;
    precise float cq = 4097.0 * q, cb = 4097.0 * b;
    precise float qh = cq - (cq - q), bh = cb - (cb - b);
    precise float ql = q - qh, bl = b - bh;
    precise float e = (((qh * bh - p) + qh * bl) + ql * bh) + ql * bl;
    precise float r = (a - p) - e;
    return r;
}

// a / b rounded as IEEE division for a >= 0, b > 0 (finite): the implementation's quotient,
// then up to three steps to the neighbour whose residual is smaller (the quotient is never
// exactly between two floats, so the nearest one has the smallest residual).
float div_rn(float a, float b) {
    float q = a / b;
    if (!(q > 0.0) || isinf(q)) return q; // 0, or b subnormal: as the division gives it
    [[unroll]] for (uint i = 0u; i < 3u; i++) {
        float r = resid(a, q, b);
        float n = uintBitsToFloat(floatBitsToUint(q) + (r > 0.0 ? 1u : 0xffffffffu));
        if (abs(resid(a, n, b)) < abs(r)) q = n;
    }
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
