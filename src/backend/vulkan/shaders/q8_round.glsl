// ggml's quantize_row_q8_0 steps, correctly rounded on any Vulkan implementation (shared by
// quant_q8.comp). A Vulkan implementation may divide approximately (NVIDIA's
// driver computes a / b as a times an approximate 1 / b, within the 2.5 ulp the spec allows: on
// the H200 some q came out one step off ggml's, 1.8e-4 of the output's range), and the float
// corrections tried failed somewhere: one fma step where fma is not fused (lavapipe: ~1 block in
// 10^5 a step off, 8.6e-5 of the range), a residual by Dekker's exact product on the H200
// (9.3e-5; its compiler may rewrite the splitting), so both divisions are done on the
// significands in integers, exactly; and roundf is written out (floor(|v| + 0.5) rounds
// 0.49999997 up).

// a / b rounded to nearest for a >= 0, b > 0: the 24-bit significands' quotient by long division
// in 8-bit steps (each remainder < 2^24, so the shifted one fits 32 bits; integer division is
// exact by the spec), then rounded. A tie cannot occur: it would need ma · 2^k = (2q + 1) · mb /
// 2 with k >= 24 while mb has at most 23 trailing zeros. Zero, subnormal or out-of-range
// operands and results (never met by these scales) take the implementation's a / b.
float div_rn(float a, float b) {
    uint xa = floatBitsToUint(a), xb = floatBitsToUint(b);
    int ea = int(xa >> 23) & 255, eb = int(xb >> 23) & 255;
    if (a == 0.0 || ea == 0 || ea == 255 || eb == 0 || eb == 255 || (xa >> 31) != 0u ||
        (xb >> 31) != 0u)
        return a / b;
    uint ma = (xa & 0x7fffffu) | 0x800000u, mb = (xb & 0x7fffffu) | 0x800000u;
    uint q = ma / mb, rem = ma - q * mb; // q: 0 or 1
    [[unroll]] for (uint i = 0u; i < 3u; i++) { // floor(ma · 2^24 / mb): 24 or 25 bits
        rem <<= 8;
        uint d = rem / mb;
        rem -= d * mb;
        q = (q << 8) | d;
    }
    int e; // the result's unbiased exponent
    uint sig;
    if (q >= 0x1000000u) { // ma >= mb: 25 bits, the lowest one decides (no tie: see above)
        sig = (q >> 1) + (q & 1u);
        e = ea - eb;
    } else { // 24 bits, the next one from the remainder
        sig = q + (2u * rem > mb ? 1u : 0u);
        e = ea - eb - 1;
    }
    if (sig >= 0x1000000u) { // rounded up past the top
        sig >>= 1;
        e++;
    }
    if (e + 127 <= 0 || e + 127 >= 255) return a / b;
    return uintBitsToFloat((uint(e + 127) << 23) | (sig & 0x7fffffu));
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
