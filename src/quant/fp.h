/* Scalar number formats used inside blocks: IEEE half (f16), bfloat16, and the OCP MX e8m0
 * exponent. Conversions to f32 are exact; conversions from f32 round to nearest even, the way
 * ggml's reference converters do, so quantized files match byte for byte. */
#ifndef HALO_QUANT_FP_H
#define HALO_QUANT_FP_H

#include <stdint.h>
#include <string.h>

static inline uint32_t halo_f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static inline float halo_f32_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Exact: every f16 (subnormals, infinities, NaN payloads) has an f32 with the same value. */
static inline float halo_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t man = h & 0x3ff;
    if (exp == 0x1f) return halo_f32_from_bits(sign | 0x7f800000 | (man << 13));
    if (exp != 0) return halo_f32_from_bits(sign | ((exp + 112) << 23) | (man << 13));
    if (man == 0) return halo_f32_from_bits(sign);
    /* Subnormal: man * 2^-24, exact in f32. */
    float v = (float)man * 0x1p-24f;
    return sign ? -v : v;
}

/* Round to nearest even; overflow gives infinity; NaN gives a quiet NaN (0x7e00 with the sign,
 * as ggml writes it). */
static inline uint16_t halo_f32_to_f16(float f) {
    uint32_t u = halo_f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
    uint32_t a = u & 0x7fffffff;
    if (a > 0x7f800000) return sign | 0x7e00;
    if (a >= 0x477ff000) return sign | 0x7c00; /* >= 65520 rounds to infinity */
    if (a < 0x38800000) {
        /* Result subnormal (or zero): value / 2^-24 rounded to nearest even integer. */
        float v = halo_f32_from_bits(a) * 0x1p24f; /* exact scaling by a power of two */
        uint32_t q = (uint32_t)v;
        float rem = v - (float)q;
        if (rem > 0.5f || (rem == 0.5f && (q & 1))) q++;
        return sign | (uint16_t)q;
    }
    uint32_t exp = (a >> 23) - 112;
    uint32_t man = a & 0x7fffff;
    uint32_t h = (exp << 10) | (man >> 13);
    uint32_t low = man & 0x1fff;
    if (low > 0x1000 || (low == 0x1000 && (h & 1))) h++; /* carry may bump the exponent */
    return sign | (uint16_t)h;
}

static inline float halo_bf16_to_f32(uint16_t h) {
    return halo_f32_from_bits((uint32_t)h << 16);
}

/* Round to nearest even; NaN keeps its top bits and is forced quiet (ggml's rule). */
static inline uint16_t halo_f32_to_bf16(float f) {
    uint32_t u = halo_f32_bits(f);
    if ((u & 0x7fffffff) > 0x7f800000) return (uint16_t)((u >> 16) | 64);
    return (uint16_t)((u + (0x7fff + ((u >> 16) & 1))) >> 16);
}

/* Half of 2^(e-127): MXFP4 blocks store e2m1 values doubled (integers 0..12), so the block scale
 * is taken at half value. e = 0 and 1 give f32 subnormals. e = 255 (NaN in the OCP spec) reads
 * as 2^127 here, as in ggml; validation reports it. */
static inline float halo_e8m0_half_to_f32(uint8_t e) {
    uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    return halo_f32_from_bits(bits);
}

/* Round half to even, for |x| < 2^22: what ggml's quantizers use (not roundf). */
static inline int halo_nearest_int(float x) {
    float v = x + 12582912.f; /* 1.5 * 2^23: the sum's low mantissa bits hold round(x) */
    uint32_t i = halo_f32_bits(v);
    return (int)(i & 0x007fffff) - 0x00400000;
}

#endif
