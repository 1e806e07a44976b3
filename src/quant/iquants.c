/* i-quants (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M, IQ4_XS): scalar reference
 * dequantizers and dots with Q8_K activations.
 *
 * Each group of 8 (or 4) weights is one codebook row (grids.h) times a sign pattern times a
 * sub-block scale. The dequantizers evaluate ggml's float expressions in ggml's order, e.g.
 * IQ2_XXS: ((d * (0.5 + s)) * 0.25) * grid, negated for a set sign bit, so they are
 * bit-identical. For the dots, the half-integer scales are doubled into odd integers (2s + 1)
 * and the 1/8 or 1/4 moved into the float factor, giving kdot.h's integer form. */
#include "quant/blocks.h"
#include "quant/fp.h"
#include "quant/grids.h"
#include "quant/kdot.h"
#include "quant/kernels.h"

#include <string.h>

static inline float f16(uint16_t h) {
    return halo_f16_to_f32(h);
}

static inline int grid8(uint64_t row, int j) {
    return (int)((row >> (8 * j)) & 0xff);
}
static inline int grid1s(uint64_t row, int j) {
    return (int8_t)((row >> (8 * j)) & 0xff);
}

/* Writes 8 weights: v * grid value, negated where the sign byte has the element's bit. */
static inline void put8(float *y, float db, uint64_t row, uint8_t signs) {
    for (int j = 0; j < 8; j++) {
        float v = db * (float)grid8(row, j);
        y[j] = (signs >> j) & 1 ? -v : v;
    }
}

static inline void level8(int8_t *q, uint64_t row, uint8_t signs) {
    for (int j = 0; j < 8; j++)
        q[j] = (int8_t)((signs >> j) & 1 ? -grid8(row, j) : grid8(row, j));
}

/* IQ2_XXS sub-block ib (32 weights): 4 grid-index bytes, then a word with four 7-bit sign
 * indices (bits 0-27) and the 4-bit scale (bits 28-31). */
static inline void iq2xxs_sub(const block_iq2_xxs *b, int ib, uint8_t idx[4], uint32_t *aux) {
    memcpy(idx, (const uint8_t *)b->qs + 8 * ib, 4);
    memcpy(aux, (const uint8_t *)b->qs + 8 * ib + 4, 4);
}

void halo_dequant_iq2_xxs(const void *src, float *dst, int64_t n) {
    const block_iq2_xxs *x = src;
    for (int64_t i = 0; i < n / QK_K; i++) {
        float d = f16(x[i].d);
        for (int ib = 0; ib < 8; ib++) {
            uint8_t idx[4];
            uint32_t aux;
            iq2xxs_sub(&x[i], ib, idx, &aux);
            float db = d * (0.5f + (float)(aux >> 28)) * 0.25f;
            for (int l = 0; l < 4; l++, dst += 8)
                put8(dst, db, halo_iq2xxs_grid[idx[l]], halo_iq_signs((aux >> (7 * l)) & 127));
        }
    }
}

float halo_dot_iq2_xxs(int64_t n, const void *w, const void *act) {
    const block_iq2_xxs *x = w;
    const block_q8_K *a = act;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        kdecoded k = {.d = f16(x[i].d) * 0.125f, .group = 32};
        for (int ib = 0; ib < 8; ib++) {
            uint8_t idx[4];
            uint32_t aux;
            iq2xxs_sub(&x[i], ib, idx, &aux);
            k.s[ib] = (int16_t)(2 * (aux >> 28) + 1);
            for (int l = 0; l < 4; l++)
                level8(k.q + 32 * ib + 8 * l, halo_iq2xxs_grid[idx[l]],
                       halo_iq_signs((aux >> (7 * l)) & 127));
        }
        sum += halo_kdot(&k, &a[i]);
    }
    return sum;
}

/* IQ2_XS: each 16-bit word is a 9-bit grid index and a 7-bit sign index; one 4-bit scale per 16
 * weights. */
void halo_dequant_iq2_xs(const void *src, float *dst, int64_t n) {
    const block_iq2_xs *x = src;
    for (int64_t i = 0; i < n / QK_K; i++) {
        float d = f16(x[i].d);
        for (int ib = 0; ib < 8; ib++) {
            float db[2] = {d * (0.5f + (float)(x[i].scales[ib] & 0xf)) * 0.25f,
                           d * (0.5f + (float)(x[i].scales[ib] >> 4)) * 0.25f};
            for (int l = 0; l < 4; l++, dst += 8) {
                uint16_t q = x[i].qs[4 * ib + l];
                put8(dst, db[l / 2], halo_iq2xs_grid[q & 511], halo_iq_signs(q >> 9));
            }
        }
    }
}

float halo_dot_iq2_xs(int64_t n, const void *w, const void *act) {
    const block_iq2_xs *x = w;
    const block_q8_K *a = act;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        kdecoded k = {.d = f16(x[i].d) * 0.125f, .group = 16};
        for (int ib = 0; ib < 8; ib++) {
            k.s[2 * ib] = (int16_t)(2 * (x[i].scales[ib] & 0xf) + 1);
            k.s[2 * ib + 1] = (int16_t)(2 * (x[i].scales[ib] >> 4) + 1);
            for (int l = 0; l < 4; l++) {
                uint16_t q = x[i].qs[4 * ib + l];
                level8(k.q + 32 * ib + 8 * l, halo_iq2xs_grid[q & 511], halo_iq_signs(q >> 9));
            }
        }
        sum += halo_kdot(&k, &a[i]);
    }
    return sum;
}

/* IQ2_S: 10-bit grid indices (8 low bits in qs, 2 high bits per index in qh), explicit sign
 * bytes after the 32 index bytes, one 4-bit scale per 16 weights. */
static inline int iq2s_index(const block_iq2_s *b, int ib, int l) {
    return b->qs[4 * ib + l] | ((b->qh[ib] << (8 - 2 * l)) & 0x300);
}

void halo_dequant_iq2_s(const void *src, float *dst, int64_t n) {
    const block_iq2_s *x = src;
    for (int64_t i = 0; i < n / QK_K; i++) {
        float d = f16(x[i].d);
        const uint8_t *signs = x[i].qs + QK_K / 8;
        for (int ib = 0; ib < 8; ib++) {
            float db[2] = {d * (0.5f + (float)(x[i].scales[ib] & 0xf)) * 0.25f,
                           d * (0.5f + (float)(x[i].scales[ib] >> 4)) * 0.25f};
            for (int l = 0; l < 4; l++, dst += 8)
                put8(dst, db[l / 2], halo_iq2s_grid[iq2s_index(&x[i], ib, l)], signs[4 * ib + l]);
        }
    }
}

float halo_dot_iq2_s(int64_t n, const void *w, const void *act) {
    const block_iq2_s *x = w;
    const block_q8_K *a = act;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        kdecoded k = {.d = f16(x[i].d) * 0.125f, .group = 16};
        const uint8_t *signs = x[i].qs + QK_K / 8;
        for (int ib = 0; ib < 8; ib++) {
            k.s[2 * ib] = (int16_t)(2 * (x[i].scales[ib] & 0xf) + 1);
            k.s[2 * ib + 1] = (int16_t)(2 * (x[i].scales[ib] >> 4) + 1);
            for (int l = 0; l < 4; l++)
                level8(k.q + 32 * ib + 8 * l, halo_iq2s_grid[iq2s_index(&x[i], ib, l)],
                       signs[4 * ib + l]);
        }
        sum += halo_kdot(&k, &a[i]);
    }
    return sum;
}

/* IQ3_XXS: 64 grid-index bytes (4 weights each), then per 32 weights a word of four 7-bit sign
 * indices and a 4-bit scale, as IQ2_XXS. */
void halo_dequant_iq3_xxs(const void *src, float *dst, int64_t n) {
    const block_iq3_xxs *x = src;
    for (int64_t i = 0; i < n / QK_K; i++) {
        float d = f16(x[i].d);
        const uint8_t *qs = x[i].qs;
        for (int ib = 0; ib < 8; ib++) {
            uint32_t aux;
            memcpy(&aux, qs + QK_K / 4 + 4 * ib, 4);
            float db = d * (0.5f + (float)(aux >> 28)) * 0.5f;
            for (int l = 0; l < 4; l++, dst += 8) {
                uint8_t signs = halo_iq_signs((aux >> (7 * l)) & 127);
                uint64_t row = halo_iq3xxs_grid[qs[8 * ib + 2 * l]] |
                               (uint64_t)halo_iq3xxs_grid[qs[8 * ib + 2 * l + 1]] << 32;
                put8(dst, db, row, signs);
            }
        }
    }
}

float halo_dot_iq3_xxs(int64_t n, const void *w, const void *act) {
    const block_iq3_xxs *x = w;
    const block_q8_K *a = act;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        kdecoded k = {.d = f16(x[i].d) * 0.25f, .group = 32};
        const uint8_t *qs = x[i].qs;
        for (int ib = 0; ib < 8; ib++) {
            uint32_t aux;
            memcpy(&aux, qs + QK_K / 4 + 4 * ib, 4);
            k.s[ib] = (int16_t)(2 * (aux >> 28) + 1);
            for (int l = 0; l < 4; l++) {
                uint64_t row = halo_iq3xxs_grid[qs[8 * ib + 2 * l]] |
                               (uint64_t)halo_iq3xxs_grid[qs[8 * ib + 2 * l + 1]] << 32;
                level8(k.q + 32 * ib + 8 * l, row, halo_iq_signs((aux >> (7 * l)) & 127));
            }
        }
        sum += halo_kdot(&k, &a[i]);
    }
    return sum;
}

/* IQ3_S: 9-bit grid indices (high bit m of index m in qh[ib]), explicit sign bytes, one odd
 * scale 1 + 2s per 32 weights. */
static inline uint64_t iq3s_row(const block_iq3_s *b, int ib, int l) {
    int m0 = 2 * l, m1 = 2 * l + 1;
    int i0 = b->qs[8 * ib + m0] | (((b->qh[ib] >> m0) & 1) << 8);
    int i1 = b->qs[8 * ib + m1] | (((b->qh[ib] >> m1) & 1) << 8);
    return halo_iq3s_grid[i0] | (uint64_t)halo_iq3s_grid[i1] << 32;
}

static inline int iq3s_scale(const block_iq3_s *b, int ib) {
    return 1 + 2 * ((b->scales[ib / 2] >> (4 * (ib % 2))) & 0xf);
}

void halo_dequant_iq3_s(const void *src, float *dst, int64_t n) {
    const block_iq3_s *x = src;
    for (int64_t i = 0; i < n / QK_K; i++) {
        float d = f16(x[i].d);
        for (int ib = 0; ib < 8; ib++) {
            float db = d * (float)iq3s_scale(&x[i], ib);
            for (int l = 0; l < 4; l++, dst += 8)
                put8(dst, db, iq3s_row(&x[i], ib, l), x[i].signs[4 * ib + l]);
        }
    }
}

float halo_dot_iq3_s(int64_t n, const void *w, const void *act) {
    const block_iq3_s *x = w;
    const block_q8_K *a = act;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        kdecoded k = {.d = f16(x[i].d), .group = 32};
        for (int ib = 0; ib < 8; ib++) {
            k.s[ib] = (int16_t)iq3s_scale(&x[i], ib);
            for (int l = 0; l < 4; l++)
                level8(k.q + 32 * ib + 8 * l, iq3s_row(&x[i], ib, l), x[i].signs[4 * ib + l]);
        }
        sum += halo_kdot(&k, &a[i]);
    }
    return sum;
}

/* IQ1_S: per 32 weights a 16-bit word: four 3-bit high index parts, a 3-bit scale (bits 12-14)
 * and the sign of a +-1/8 shift applied to every weight (bit 15). Grid values are -1, 0, 1. */
#define IQ1_DELTA 0.125f

void halo_dequant_iq1_s(const void *src, float *dst, int64_t n) {
    const block_iq1_s *x = src;
    for (int64_t i = 0; i < n / QK_K; i++) {
        float d = f16(x[i].d);
        for (int ib = 0; ib < 8; ib++) {
            uint16_t h = x[i].qh[ib];
            float dl = d * (float)(2 * ((h >> 12) & 7) + 1);
            float delta = h & 0x8000 ? -IQ1_DELTA : IQ1_DELTA;
            for (int l = 0; l < 4; l++, dst += 8) {
                uint64_t row = halo_iq1s_grid[x[i].qs[4 * ib + l] | (((h >> (3 * l)) & 7) << 8)];
                for (int j = 0; j < 8; j++)
                    dst[j] = dl * ((float)grid1s(row, j) + delta);
            }
        }
    }
}

float halo_dot_iq1_s(int64_t n, const void *w, const void *act) {
    const block_iq1_s *x = w;
    const block_q8_K *a = act;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        kdecoded k = {.d = f16(x[i].d) * 0.125f, .group = 32};
        for (int ib = 0; ib < 8; ib++) {
            uint16_t h = x[i].qh[ib];
            int delta = h & 0x8000 ? -1 : 1;
            k.s[ib] = (int16_t)(2 * ((h >> 12) & 7) + 1);
            for (int l = 0; l < 4; l++) {
                uint64_t row = halo_iq1s_grid[x[i].qs[4 * ib + l] | (((h >> (3 * l)) & 7) << 8)];
                for (int j = 0; j < 8; j++)
                    k.q[32 * ib + 8 * l + j] = (int8_t)(8 * grid1s(row, j) + delta);
            }
        }
        sum += halo_kdot(&k, &a[i]);
    }
    return sum;
}

/* IQ1_M: per 32 weights 4 index bytes and 2 qh bytes (3 high index bits + a shift sign per 8
 * weights); 3-bit scales per 16 weights in four 16-bit words whose top nibbles together hold the
 * f16 block scale. */
static inline float iq1m_d(const block_iq1_m *b) {
    uint16_t sc[4];
    memcpy(sc, b->scales, 8);
    return f16((uint16_t)((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) |
                          (sc[3] & 0xf000)));
}

static inline int iq1m_scale(const block_iq1_m *b, int ib, int half) {
    uint16_t sc[4];
    memcpy(sc, b->scales, 8);
    return 2 * ((sc[ib / 2] >> (6 * (ib % 2) + 3 * half)) & 7) + 1;
}

/* Grid row and shift sign of the l-th group of 8 in sub-block ib. */
static inline uint64_t iq1m_row(const block_iq1_m *b, int ib, int l, int *neg) {
    uint8_t h = b->qh[2 * ib + l / 2] >> (4 * (l % 2));
    *neg = (h & 0x08) != 0;
    return halo_iq1s_grid[b->qs[4 * ib + l] | ((h & 7) << 8)];
}

void halo_dequant_iq1_m(const void *src, float *dst, int64_t n) {
    const block_iq1_m *x = src;
    for (int64_t i = 0; i < n / QK_K; i++) {
        float d = iq1m_d(&x[i]);
        for (int ib = 0; ib < 8; ib++) {
            for (int l = 0; l < 4; l++, dst += 8) {
                float dl = d * (float)iq1m_scale(&x[i], ib, l / 2);
                int neg;
                uint64_t row = iq1m_row(&x[i], ib, l, &neg);
                float delta = neg ? -IQ1_DELTA : IQ1_DELTA;
                for (int j = 0; j < 8; j++)
                    dst[j] = dl * ((float)grid1s(row, j) + delta);
            }
        }
    }
}

float halo_dot_iq1_m(int64_t n, const void *w, const void *act) {
    const block_iq1_m *x = w;
    const block_q8_K *a = act;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        kdecoded k = {.d = iq1m_d(&x[i]) * 0.125f, .group = 16};
        for (int ib = 0; ib < 8; ib++) {
            k.s[2 * ib] = (int16_t)iq1m_scale(&x[i], ib, 0);
            k.s[2 * ib + 1] = (int16_t)iq1m_scale(&x[i], ib, 1);
            for (int l = 0; l < 4; l++) {
                int neg;
                uint64_t row = iq1m_row(&x[i], ib, l, &neg);
                for (int j = 0; j < 8; j++)
                    k.q[32 * ib + 8 * l + j] = (int8_t)(8 * grid1s(row, j) + (neg ? -1 : 1));
            }
        }
        sum += halo_kdot(&k, &a[i]);
    }
    return sum;
}

/* IQ4_XS: IQ4_NL's codebook with a 6-bit scale (stored +32) per 32 weights: 4 low bits in
 * scales_l, 2 high bits in scales_h. */
static inline int iq4xs_scale(const block_iq4_xs *b, int ib) {
    return (((b->scales_l[ib / 2] >> (4 * (ib % 2))) & 0xf) |
            (((b->scales_h >> (2 * ib)) & 3) << 4)) -
           32;
}

void halo_dequant_iq4_xs(const void *src, float *dst, int64_t n) {
    const block_iq4_xs *x = src;
    for (int64_t i = 0; i < n / QK_K; i++) {
        float d = f16(x[i].d);
        for (int ib = 0; ib < 8; ib++, dst += 32) {
            float dl = d * (float)iq4xs_scale(&x[i], ib);
            const uint8_t *qs = x[i].qs + 16 * ib;
            for (int j = 0; j < 16; j++) {
                dst[j] = dl * (float)halo_kvalues_iq4nl[qs[j] & 0xf];
                dst[j + 16] = dl * (float)halo_kvalues_iq4nl[qs[j] >> 4];
            }
        }
    }
}

float halo_dot_iq4_xs(int64_t n, const void *w, const void *act) {
    const block_iq4_xs *x = w;
    const block_q8_K *a = act;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        kdecoded k = {.d = f16(x[i].d), .group = 32};
        for (int ib = 0; ib < 8; ib++) {
            k.s[ib] = (int16_t)iq4xs_scale(&x[i], ib);
            const uint8_t *qs = x[i].qs + 16 * ib;
            for (int j = 0; j < 16; j++) {
                k.q[32 * ib + j] = halo_kvalues_iq4nl[qs[j] & 0xf];
                k.q[32 * ib + j + 16] = halo_kvalues_iq4nl[qs[j] >> 4];
            }
        }
        sum += halo_kdot(&k, &a[i]);
    }
    return sum;
}
