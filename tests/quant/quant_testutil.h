/* Shared helpers for the quant tests: a deterministic RNG, random valid blocks with chosen
 * scale regimes, NaN-aware float comparison, and the list of types halo reads. */
#ifndef HALO_TESTS_QUANT_UTIL_H
#define HALO_TESTS_QUANT_UTIL_H

#include "halo/quant.h"
#include "halo/types.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

static const uint32_t quant_test_types[] = {
    HALO_TYPE_F32,     HALO_TYPE_F16,    HALO_TYPE_BF16,   HALO_TYPE_Q4_0,    HALO_TYPE_Q4_1,
    HALO_TYPE_Q5_0,    HALO_TYPE_Q5_1,   HALO_TYPE_Q8_0,   HALO_TYPE_IQ4_NL,  HALO_TYPE_MXFP4,
    HALO_TYPE_Q2_K,    HALO_TYPE_Q3_K,   HALO_TYPE_Q4_K,   HALO_TYPE_Q5_K,    HALO_TYPE_Q6_K,
    HALO_TYPE_IQ2_XXS, HALO_TYPE_IQ2_XS, HALO_TYPE_IQ2_S,  HALO_TYPE_IQ3_XXS, HALO_TYPE_IQ3_S,
    HALO_TYPE_IQ1_S,   HALO_TYPE_IQ1_M,  HALO_TYPE_IQ4_XS,
};
#define N_QUANT_TEST_TYPES (sizeof quant_test_types / sizeof quant_test_types[0])

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static inline uint64_t rng_next(void) { /* splitmix64 */
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static inline float rng_uniform(void) {
    return (float)(rng_next() >> 40) * 0x1p-24f;
}
static inline float rng_normal(void) {
    float u = rng_uniform() + 0x1p-25f, v = rng_uniform();
    return sqrtf(-2.0f * logf(u)) * cosf(6.2831853f * v);
}

/* Scale regimes for random blocks. */
enum scale_mode {
    SCALE_TYPICAL,   /* normal f16 in [2^-14, 2^-2]: what real weights look like */
    SCALE_ZERO,      /* +0 and -0 */
    SCALE_SUBNORMAL, /* f16 subnormals */
    SCALE_EXTREME,   /* largest finite f16 (65504) and smallest normal, either sign */
    SCALE_RANDOM,    /* any bit pattern, including NaN and infinity */
    SCALE_MODES
};

static inline uint16_t pick_f16(int mode) {
    uint16_t sign = (uint16_t)((rng_next() & 1) << 15);
    switch (mode) {
    case SCALE_TYPICAL:
        return (uint16_t)((1 + rng_next() % 13) << 10 | (rng_next() & 0x3ff));
    case SCALE_ZERO:
        return sign;
    case SCALE_SUBNORMAL:
        return sign | (uint16_t)(1 + rng_next() % 0x3ff);
    case SCALE_EXTREME:
        return sign | (rng_next() & 1 ? 0x7bff : 0x0400);
    default:
        return (uint16_t)rng_next();
    }
}

static inline void put16(uint8_t *p, uint16_t v) {
    memcpy(p, &v, 2);
}

/* Fills one block of type t with random bits, then sets its scale fields for the regime. Float
 * types get finite random values (any value outside SCALE_RANDOM). */
static inline void random_block(uint32_t t, uint8_t *b, int mode) {
    const halo_type_info *info = halo_type_info_get(t);
    for (uint32_t i = 0; i < info->block_bytes; i++)
        b[i] = (uint8_t)rng_next();
    if (mode == SCALE_RANDOM) return;
    switch (t) {
    case HALO_TYPE_F32: {
        float f = rng_normal();
        memcpy(b, &f, 4);
        return;
    }
    case HALO_TYPE_F16:
        put16(b, pick_f16(mode));
        return;
    case HALO_TYPE_BF16: {
        float f = rng_normal();
        uint32_t u;
        memcpy(&u, &f, 4);
        put16(b, (uint16_t)(u >> 16));
        return;
    }
    case HALO_TYPE_MXFP4:
        b[0] = (uint8_t)(mode == SCALE_TYPICAL     ? 110 + rng_next() % 30
                         : mode == SCALE_ZERO      ? 0
                         : mode == SCALE_SUBNORMAL ? rng_next() % 2
                                                   : 254);
        return;
    case HALO_TYPE_Q2_K:
        put16(b + 80, pick_f16(mode));
        put16(b + 82, pick_f16(mode));
        return;
    case HALO_TYPE_Q3_K:
        put16(b + 108, pick_f16(mode));
        return;
    case HALO_TYPE_Q6_K:
        put16(b + 208, pick_f16(mode));
        return;
    case HALO_TYPE_Q4_1:
    case HALO_TYPE_Q5_1:
    case HALO_TYPE_Q4_K:
    case HALO_TYPE_Q5_K:
        put16(b, pick_f16(mode));
        put16(b + 2, pick_f16(mode));
        return;
    case HALO_TYPE_IQ1_M: {
        /* the f16 scale is the top nibbles of the four 16-bit words at offset 48 */
        uint16_t d = pick_f16(mode), w[4];
        memcpy(w, b + 48, 8);
        for (int k = 0; k < 4; k++)
            w[k] = (uint16_t)((w[k] & 0x0fff) | (((d >> (4 * k)) & 0xf) << 12));
        memcpy(b + 48, w, 8);
        return;
    }
    default:
        put16(b, pick_f16(mode));
        return; /* every other format starts with an f16 d */
    }
}

/* Equal bits, or both NaN. */
static inline bool same_float(float a, float b) {
    return memcmp(&a, &b, 4) == 0 || (isnan(a) && isnan(b));
}

#endif
