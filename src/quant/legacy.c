/* 32-element block formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL, MXFP4): scalar reference
 * dequantizers and dots with Q8_0 activations.
 *
 * Dequantizers evaluate exactly the float expressions of ggml's (int level times f32 scale,
 * then + min), so results are bit-identical. Dots sum integer products per block and scale once.
 * Q4_1/Q5_1 need the activation block's sum for their min term; ggml takes it from a Q8_1 block's
 * f16-rounded s field, halo sums the Q8_0 quants instead (exact, and one activation format fewer).
 */
#include "quant/blocks.h"
#include "quant/fp.h"
#include "quant/kernels.h"

#include <string.h>

static inline float f16(uint16_t h) {
    return halo_f16_to_f32(h);
}

/* Unpacks 32 levels of a 4-bit block: byte j holds element j (low nibble) and j + 16 (high). */
static inline void nibbles(const uint8_t *qs, int q[32]) {
    for (int j = 0; j < 16; j++) {
        q[j] = qs[j] & 0xf;
        q[j + 16] = qs[j] >> 4;
    }
}

/* Q5: the fifth bit of element j is bit j of the 32-bit little-endian qh. */
static inline void nibbles5(const uint8_t *qs, const uint8_t qh[4], int q[32]) {
    uint32_t h;
    memcpy(&h, qh, 4);
    nibbles(qs, q);
    for (int j = 0; j < 32; j++)
        q[j] |= (int)((h >> j) & 1) << 4;
}

static inline int32_t idot32(const int q[32], const int8_t *a) {
    int32_t s = 0;
    for (int j = 0; j < 32; j++)
        s += q[j] * a[j];
    return s;
}

static inline int32_t isum32(const int8_t *a) {
    int32_t s = 0;
    for (int j = 0; j < 32; j++)
        s += a[j];
    return s;
}

void halo_dequant_q4_0(const void *src, float *dst, int64_t n) {
    const block_q4_0 *x = src;
    for (int64_t i = 0; i < n / QK32; i++, dst += QK32) {
        float d = f16(x[i].d);
        int q[32];
        nibbles(x[i].qs, q);
        for (int j = 0; j < 32; j++)
            dst[j] = (float)(q[j] - 8) * d;
    }
}

float halo_dot_q4_0(int64_t n, const void *w, const void *act) {
    const block_q4_0 *x = w;
    const block_q8_0 *a = act;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK32; i++) {
        int q[32];
        nibbles(x[i].qs, q);
        for (int j = 0; j < 32; j++)
            q[j] -= 8;
        sum += f16(x[i].d) * f16(a[i].d) * (float)idot32(q, a[i].qs);
    }
    return sum;
}

void halo_dequant_q4_1(const void *src, float *dst, int64_t n) {
    const block_q4_1 *x = src;
    for (int64_t i = 0; i < n / QK32; i++, dst += QK32) {
        float d = f16(x[i].d), m = f16(x[i].m);
        int q[32];
        nibbles(x[i].qs, q);
        for (int j = 0; j < 32; j++)
            dst[j] = (float)q[j] * d + m;
    }
}

float halo_dot_q4_1(int64_t n, const void *w, const void *act) {
    const block_q4_1 *x = w;
    const block_q8_0 *a = act;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK32; i++) {
        int q[32];
        nibbles(x[i].qs, q);
        float da = f16(a[i].d);
        sum += f16(x[i].d) * da * (float)idot32(q, a[i].qs) +
               f16(x[i].m) * da * (float)isum32(a[i].qs);
    }
    return sum;
}

void halo_dequant_q5_0(const void *src, float *dst, int64_t n) {
    const block_q5_0 *x = src;
    for (int64_t i = 0; i < n / QK32; i++, dst += QK32) {
        float d = f16(x[i].d);
        int q[32];
        nibbles5(x[i].qs, x[i].qh, q);
        for (int j = 0; j < 32; j++)
            dst[j] = (float)(q[j] - 16) * d;
    }
}

float halo_dot_q5_0(int64_t n, const void *w, const void *act) {
    const block_q5_0 *x = w;
    const block_q8_0 *a = act;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK32; i++) {
        int q[32];
        nibbles5(x[i].qs, x[i].qh, q);
        for (int j = 0; j < 32; j++)
            q[j] -= 16;
        sum += f16(x[i].d) * f16(a[i].d) * (float)idot32(q, a[i].qs);
    }
    return sum;
}

void halo_dequant_q5_1(const void *src, float *dst, int64_t n) {
    const block_q5_1 *x = src;
    for (int64_t i = 0; i < n / QK32; i++, dst += QK32) {
        float d = f16(x[i].d), m = f16(x[i].m);
        int q[32];
        nibbles5(x[i].qs, x[i].qh, q);
        for (int j = 0; j < 32; j++)
            dst[j] = (float)q[j] * d + m;
    }
}

float halo_dot_q5_1(int64_t n, const void *w, const void *act) {
    const block_q5_1 *x = w;
    const block_q8_0 *a = act;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK32; i++) {
        int q[32];
        nibbles5(x[i].qs, x[i].qh, q);
        float da = f16(a[i].d);
        sum += f16(x[i].d) * da * (float)idot32(q, a[i].qs) +
               f16(x[i].m) * da * (float)isum32(a[i].qs);
    }
    return sum;
}

void halo_dequant_q8_0(const void *src, float *dst, int64_t n) {
    const block_q8_0 *x = src;
    for (int64_t i = 0; i < n / QK32; i++, dst += QK32) {
        float d = f16(x[i].d);
        for (int j = 0; j < 32; j++)
            dst[j] = (float)x[i].qs[j] * d;
    }
}

float halo_dot_q8_0(int64_t n, const void *w, const void *act) {
    const block_q8_0 *x = w;
    const block_q8_0 *a = act;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK32; i++) {
        int32_t s = 0;
        for (int j = 0; j < 32; j++)
            s += x[i].qs[j] * a[i].qs[j];
        sum += f16(x[i].d) * f16(a[i].d) * (float)s;
    }
    return sum;
}

void halo_dequant_iq4_nl(const void *src, float *dst, int64_t n) {
    const block_iq4_nl *x = src;
    for (int64_t i = 0; i < n / QK32; i++, dst += QK32) {
        float d = f16(x[i].d);
        int q[32];
        nibbles(x[i].qs, q);
        for (int j = 0; j < 32; j++)
            dst[j] = d * (float)halo_kvalues_iq4nl[q[j]];
    }
}

float halo_dot_iq4_nl(int64_t n, const void *w, const void *act) {
    const block_iq4_nl *x = w;
    const block_q8_0 *a = act;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK32; i++) {
        int q[32];
        nibbles(x[i].qs, q);
        for (int j = 0; j < 32; j++)
            q[j] = halo_kvalues_iq4nl[q[j]];
        sum += f16(x[i].d) * f16(a[i].d) * (float)idot32(q, a[i].qs);
    }
    return sum;
}

void halo_dequant_mxfp4(const void *src, float *dst, int64_t n) {
    const block_mxfp4 *x = src;
    for (int64_t i = 0; i < n / QK32; i++, dst += QK32) {
        float d = halo_e8m0_half_to_f32(x[i].e);
        int q[32];
        nibbles(x[i].qs, q);
        for (int j = 0; j < 32; j++)
            dst[j] = (float)halo_kvalues_mxfp4[q[j]] * d;
    }
}

float halo_dot_mxfp4(int64_t n, const void *w, const void *act) {
    const block_mxfp4 *x = w;
    const block_q8_0 *a = act;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK32; i++) {
        int q[32];
        nibbles(x[i].qs, q);
        for (int j = 0; j < 32; j++)
            q[j] = halo_kvalues_mxfp4[q[j]];
        sum += halo_e8m0_half_to_f32(x[i].e) * f16(a[i].d) * (float)idot32(q, a[i].qs);
    }
    return sum;
}
