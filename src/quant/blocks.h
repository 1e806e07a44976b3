/* Block layouts of the ggml quantized formats (ggml-common.h is the format definition). Every
 * struct is byte-packed by construction (only uint8/uint16 fields after a 2-byte scale, or a
 * 4-byte f32 first), and the sizes are asserted against halo's type table in tests. */
#ifndef HALO_QUANT_BLOCKS_H
#define HALO_QUANT_BLOCKS_H

#include <stdint.h>

#define QK_K 256
#define QK32 32

typedef struct {
    uint16_t d;
    uint8_t qs[16];
} block_q4_0; /* x = d*(q-8) */
typedef struct {
    uint16_t d, m;
    uint8_t qs[16];
} block_q4_1; /* x = d*q + m */
typedef struct {
    uint16_t d;
    uint8_t qh[4];
    uint8_t qs[16];
} block_q5_0; /* x = d*(q-16) */
typedef struct {
    uint16_t d, m;
    uint8_t qh[4];
    uint8_t qs[16];
} block_q5_1; /* x = d*q + m */
typedef struct {
    uint16_t d;
    int8_t qs[32];
} block_q8_0; /* x = d*q */
typedef struct {
    uint16_t d;
    uint8_t qs[16];
} block_iq4_nl; /* x = d*kv[q] */
typedef struct {
    uint8_t e;
    uint8_t qs[16];
} block_mxfp4; /* x = 2^(e-128)*fp4[q] */

/* k-quants: 256-element super-blocks of 16 or 32-element sub-blocks with 4-8 bit scales. */
typedef struct {
    uint8_t scales[QK_K / 16]; /* low nibble scale, high nibble min */
    uint8_t qs[QK_K / 4];
    uint16_t d, dmin;
} block_q2_K;
typedef struct {
    uint8_t hmask[QK_K / 8];
    uint8_t qs[QK_K / 4];
    uint8_t scales[12]; /* 16 6-bit scales, biased by 32 */
    uint16_t d;
} block_q3_K;
typedef struct {
    uint16_t d, dmin;
    uint8_t scales[12]; /* 8 6-bit scales + 8 6-bit mins */
    uint8_t qs[QK_K / 2];
} block_q4_K;
typedef struct {
    uint16_t d, dmin;
    uint8_t scales[12];
    uint8_t qh[QK_K / 8];
    uint8_t qs[QK_K / 2];
} block_q5_K;
typedef struct {
    uint8_t ql[QK_K / 2];
    uint8_t qh[QK_K / 4];
    int8_t scales[QK_K / 16];
    uint16_t d;
} block_q6_K;
typedef struct {
    float d;
    int8_t qs[QK_K];
    int16_t bsums[QK_K / 16]; /* sums of qs over 16-element groups */
} block_q8_K;

/* i-quants: indices into fixed codebooks (grids.h) with packed signs and 4-bit scales. */
typedef struct {
    uint16_t d;
    uint16_t qs[QK_K / 8];
} block_iq2_xxs;
typedef struct {
    uint16_t d;
    uint16_t qs[QK_K / 8];
    uint8_t scales[QK_K / 32];
} block_iq2_xs;
typedef struct {
    uint16_t d;
    uint8_t qs[QK_K / 4]; /* 128 grid index bytes then 32 sign bytes */
    uint8_t qh[QK_K / 32];
    uint8_t scales[QK_K / 32];
} block_iq2_s;
typedef struct {
    uint16_t d;
    uint8_t qs[3 * QK_K / 8];
} block_iq3_xxs;
typedef struct {
    uint16_t d;
    uint8_t qs[QK_K / 4];
    uint8_t qh[QK_K / 32];
    uint8_t signs[QK_K / 8];
    uint8_t scales[QK_K / 64];
} block_iq3_s;
typedef struct {
    uint16_t d;
    uint8_t qs[QK_K / 8];
    uint16_t qh[QK_K / 32];
} block_iq1_s;
typedef struct {
    uint8_t qs[QK_K / 8];
    uint8_t qh[QK_K / 16];
    uint8_t scales[QK_K / 32]; /* 3-bit sub-scales; the f16 block scale is spread over the top
                                  nibbles of the four 16-bit words */
} block_iq1_m;
typedef struct {
    uint16_t d;
    uint16_t scales_h;
    uint8_t scales_l[QK_K / 64];
    uint8_t qs[QK_K / 2];
} block_iq4_xs;

_Static_assert(sizeof(block_q4_0) == 18, "q4_0");
_Static_assert(sizeof(block_q4_1) == 20, "q4_1");
_Static_assert(sizeof(block_q5_0) == 22, "q5_0");
_Static_assert(sizeof(block_q5_1) == 24, "q5_1");
_Static_assert(sizeof(block_q8_0) == 34, "q8_0");
_Static_assert(sizeof(block_mxfp4) == 17, "mxfp4");
_Static_assert(sizeof(block_q2_K) == 84, "q2_K");
_Static_assert(sizeof(block_q3_K) == 110, "q3_K");
_Static_assert(sizeof(block_q4_K) == 144, "q4_K");
_Static_assert(sizeof(block_q5_K) == 176, "q5_K");
_Static_assert(sizeof(block_q6_K) == 210, "q6_K");
_Static_assert(sizeof(block_q8_K) == 292, "q8_K");
_Static_assert(sizeof(block_iq2_xxs) == 66, "iq2_xxs");
_Static_assert(sizeof(block_iq2_xs) == 74, "iq2_xs");
_Static_assert(sizeof(block_iq2_s) == 82, "iq2_s");
_Static_assert(sizeof(block_iq3_xxs) == 98, "iq3_xxs");
_Static_assert(sizeof(block_iq3_s) == 110, "iq3_s");
_Static_assert(sizeof(block_iq1_s) == 50, "iq1_s");
_Static_assert(sizeof(block_iq1_m) == 56, "iq1_m");
_Static_assert(sizeof(block_iq4_xs) == 136, "iq4_xs");

/* Non-linear 4-bit codebook of IQ4_NL / IQ4_XS. */
static const int8_t halo_kvalues_iq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                              1,    13,   25,  38,  53,  69,  89,  113};
/* e2m1 (FP4) code -> value, doubled so every value is an integer (OCP MX spec, table 4). */
static const int8_t halo_kvalues_mxfp4[16] = {0, 1,  2,  3,  4,  6,  8,  12,
                                              0, -1, -2, -3, -4, -6, -8, -12};

/* Sub-block scale and min of Q4_K / Q5_K: 8 6-bit pairs packed into 12 bytes. */
static inline void halo_k4_scale_min(int j, const uint8_t *q, uint8_t *sc, uint8_t *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

/* Q3_K: 16 signed 6-bit scales (stored +32) in 12 bytes: low nibbles in bytes 0-7, the two high
 * bits of each in bytes 8-11. */
static inline void halo_q3k_scales(const uint8_t *s, int8_t out[16]) {
    for (int j = 0; j < 16; j++) {
        int lo = j < 8 ? s[j] & 0xf : s[j - 8] >> 4;
        int hi = (s[8 + (j & 3)] >> (2 * (j >> 2))) & 3;
        out[j] = (int8_t)((lo | (hi << 4)) - 32);
    }
}

/* The IQ2/IQ3 sign byte for a 7-bit index: bit 7 is the parity of the other seven, so every
 * group of eight has an even number of negative signs (ggml's ksigns_iq2xs). */
static inline uint8_t halo_iq_signs(uint32_t idx7) {
    return (uint8_t)(idx7 | ((uint32_t)__builtin_parity(idx7) << 7));
}

#endif
