/* k-quants (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, and the Q8_K activation format): scalar reference
 * dequantizers and dots with Q8_K activations.
 *
 * The dequantizers evaluate the same float expressions in the same order as ggml's (e.g. Q4_K:
 * (d*sc)*q - (dmin*m), no fused multiply-add), so they are bit-identical to ggml's. The dots
 * decode a super-block into the common integer form of kdot.h. */
#include "quant/blocks.h"
#include "quant/fp.h"
#include "quant/kdot.h"
#include "quant/kernels.h"

static inline float f16(uint16_t h) {
    return halo_f16_to_f32(h);
}

/* Q2_K element e: 2 bits at shift 2*((e%128)/32) of qs[32*(e/128) + e%32]; sub-block e/16. */
static inline int q2k_level(const block_q2_K *b, int e) {
    return (b->qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
}

void halo_dequant_q2_K(const void *src, float *dst, int64_t n) {
    const block_q2_K *x = src;
    for (int64_t i = 0; i < n / QK_K; i++) {
        float d = f16(x[i].d), dmin = f16(x[i].dmin);
        for (int g = 0; g < 16; g++) {
            float dl = d * (float)(x[i].scales[g] & 0xf);
            float ml = dmin * (float)(x[i].scales[g] >> 4);
            for (int e = 16 * g; e < 16 * g + 16; e++)
                *dst++ = dl * (float)q2k_level(&x[i], e) - ml;
        }
    }
}

float halo_dot_q2_K(int64_t n, const void *w, const void *act) {
    const block_q2_K *x = w;
    const block_q8_K *a = act;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        kdecoded k = {.d = f16(x[i].d), .dmin = f16(x[i].dmin), .group = 16};
        for (int g = 0; g < 16; g++) {
            k.s[g] = x[i].scales[g] & 0xf;
            k.m[g] = x[i].scales[g] >> 4;
        }
        for (int e = 0; e < QK_K; e++)
            k.q[e] = (int8_t)q2k_level(&x[i], e);
        sum += halo_kdot(&k, &a[i]);
    }
    return sum;
}

/* Q3_K element e: low 2 bits as in Q2_K; the high bit is bit (e/32) of hmask[e%32], and a clear
 * high bit means the level is lowered by 4 (levels -4..3). */
static inline int q3k_level(const block_q3_K *b, int e) {
    int lo = (b->qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
    int hi = (b->hmask[e % 32] >> (e / 32)) & 1;
    return lo - (hi ? 0 : 4);
}

void halo_dequant_q3_K(const void *src, float *dst, int64_t n) {
    const block_q3_K *x = src;
    for (int64_t i = 0; i < n / QK_K; i++) {
        float d = f16(x[i].d);
        int8_t sc[16];
        halo_q3k_scales(x[i].scales, sc);
        for (int g = 0; g < 16; g++) {
            float dl = d * (float)sc[g];
            for (int e = 16 * g; e < 16 * g + 16; e++)
                *dst++ = dl * (float)q3k_level(&x[i], e);
        }
    }
}

float halo_dot_q3_K(int64_t n, const void *w, const void *act) {
    const block_q3_K *x = w;
    const block_q8_K *a = act;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        kdecoded k = {.d = f16(x[i].d), .group = 16};
        int8_t sc[16];
        halo_q3k_scales(x[i].scales, sc);
        for (int g = 0; g < 16; g++)
            k.s[g] = sc[g];
        for (int e = 0; e < QK_K; e++)
            k.q[e] = (int8_t)q3k_level(&x[i], e);
        sum += halo_kdot(&k, &a[i]);
    }
    return sum;
}

/* Q4_K / Q5_K element e: nibble (e%64)/32 of qs[32*(e/64) + e%32]; Q5_K's fifth bit is bit
 * (e/32) of qh[e%32]. Sub-block e/32. */
static inline int q4k_level(const uint8_t *qs, int e) {
    return (qs[32 * (e / 64) + e % 32] >> (4 * ((e % 64) / 32))) & 0xf;
}

void halo_dequant_q4_K(const void *src, float *dst, int64_t n) {
    const block_q4_K *x = src;
    for (int64_t i = 0; i < n / QK_K; i++) {
        float d = f16(x[i].d), dmin = f16(x[i].dmin);
        for (int g = 0; g < 8; g++) {
            uint8_t sc, m;
            halo_k4_scale_min(g, x[i].scales, &sc, &m);
            float dl = d * (float)sc, ml = dmin * (float)m;
            for (int e = 32 * g; e < 32 * g + 32; e++)
                *dst++ = dl * (float)q4k_level(x[i].qs, e) - ml;
        }
    }
}

float halo_dot_q4_K(int64_t n, const void *w, const void *act) {
    const block_q4_K *x = w;
    const block_q8_K *a = act;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        kdecoded k = {.d = f16(x[i].d), .dmin = f16(x[i].dmin), .group = 32};
        for (int g = 0; g < 8; g++) {
            uint8_t sc, m;
            halo_k4_scale_min(g, x[i].scales, &sc, &m);
            k.s[g] = sc;
            k.m[g] = m;
        }
        for (int e = 0; e < QK_K; e++)
            k.q[e] = (int8_t)q4k_level(x[i].qs, e);
        sum += halo_kdot(&k, &a[i]);
    }
    return sum;
}

static inline int q5k_level(const block_q5_K *b, int e) {
    return q4k_level(b->qs, e) | (((b->qh[e % 32] >> (e / 32)) & 1) << 4);
}

void halo_dequant_q5_K(const void *src, float *dst, int64_t n) {
    const block_q5_K *x = src;
    for (int64_t i = 0; i < n / QK_K; i++) {
        float d = f16(x[i].d), dmin = f16(x[i].dmin);
        for (int g = 0; g < 8; g++) {
            uint8_t sc, m;
            halo_k4_scale_min(g, x[i].scales, &sc, &m);
            float dl = d * (float)sc, ml = dmin * (float)m;
            for (int e = 32 * g; e < 32 * g + 32; e++)
                *dst++ = dl * (float)q5k_level(&x[i], e) - ml;
        }
    }
}

float halo_dot_q5_K(int64_t n, const void *w, const void *act) {
    const block_q5_K *x = w;
    const block_q8_K *a = act;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        kdecoded k = {.d = f16(x[i].d), .dmin = f16(x[i].dmin), .group = 32};
        for (int g = 0; g < 8; g++) {
            uint8_t sc, m;
            halo_k4_scale_min(g, x[i].scales, &sc, &m);
            k.s[g] = sc;
            k.m[g] = m;
        }
        for (int e = 0; e < QK_K; e++)
            k.q[e] = (int8_t)q5k_level(&x[i], e);
        sum += halo_kdot(&k, &a[i]);
    }
    return sum;
}

/* Q6_K element e (c = e/128, r = e%128, l = r%32, part = r/32): low nibble (part 0, 1) or high
 * nibble (part 2, 3) of ql[64c + l + 32*(part&1)], high 2 bits at shift 2*part of qh[32c + l].
 * Levels are stored +32. Sub-block e/16, signed 8-bit scales. */
static inline int q6k_level(const block_q6_K *b, int e) {
    int c = e / 128, r = e % 128, l = r % 32, part = r / 32;
    int lo = (b->ql[64 * c + l + 32 * (part & 1)] >> (4 * (part >> 1))) & 0xf;
    int hi = (b->qh[32 * c + l] >> (2 * part)) & 3;
    return (lo | (hi << 4)) - 32;
}

void halo_dequant_q6_K(const void *src, float *dst, int64_t n) {
    const block_q6_K *x = src;
    for (int64_t i = 0; i < n / QK_K; i++, dst += QK_K) {
        float d = f16(x[i].d);
        /* ggml evaluates (d * scale) * level for every element. */
        for (int e = 0; e < QK_K; e++)
            dst[e] = d * (float)x[i].scales[e / 16] * (float)q6k_level(&x[i], e);
    }
}

float halo_dot_q6_K(int64_t n, const void *w, const void *act) {
    const block_q6_K *x = w;
    const block_q8_K *a = act;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        kdecoded k = {.d = f16(x[i].d), .group = 16};
        for (int g = 0; g < 16; g++)
            k.s[g] = x[i].scales[g];
        for (int e = 0; e < QK_K; e++)
            k.q[e] = (int8_t)q6k_level(&x[i], e);
        sum += halo_kdot(&k, &a[i]);
    }
    return sum;
}

void halo_dequant_q8_K(const void *src, float *dst, int64_t n) {
    const block_q8_K *x = src;
    for (int64_t i = 0; i < n / QK_K; i++)
        for (int e = 0; e < QK_K; e++)
            *dst++ = x[i].d * (float)x[i].qs[e];
}
