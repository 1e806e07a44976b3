/* Device decoding of the i-quants beyond IQ2_XXS/IQ3_XXS: IQ2_XS, IQ2_S, IQ3_S, IQ1_S, IQ1_M and
 * IQ4_XS (ggml's block layouts; the codebooks are src/quant/grids.c's, uploaded once per
 * backend). Included by quant.cuh, whose deq32 calls deq32_more for these types. As there, the
 * expressions and their order are src/quant/iquants.c's (which are ggml's), multiplies and adds
 * kept apart so a decoded weight is bit-identical to the CPU's. */
#ifndef HALO_BACKEND_CUDA_IQUANT_MORE_CUH
#define HALO_BACKEND_CUDA_IQUANT_MORE_CUH

/* Block bytes of these types (256 elements each); 0 for any other type. */
static __device__ __forceinline__ int block_bytes_more(uint32_t t) {
    switch (t) {
    case HALO_TYPE_IQ2_XS:
        return 74; /* d, qs[32 x u16], scales[8] */
    case HALO_TYPE_IQ2_S:
        return 82; /* d, qs[32 index + 32 sign bytes], qh[8], scales[8] */
    case HALO_TYPE_IQ3_S:
        return 110; /* d, qs[64], qh[8], signs[32], scales[4] */
    case HALO_TYPE_IQ1_S:
        return 50; /* d, qs[32], qh[8 x u16] */
    case HALO_TYPE_IQ1_M:
        return 56; /* qs[32], qh[16], scales[4 x u16] (the f16 scale in their top nibbles) */
    case HALO_TYPE_IQ4_XS:
        return 136; /* d, scales_h (u16), scales_l[4], qs[128] */
    default:
        return 0;
    }
}

/* 8 weights db · grid byte j, negated where the sign byte has bit j. */
static __device__ __forceinline__ void put8_signed(float *v, float db, uint64_t row,
                                                   uint8_t signs) {
    for (int j = 0; j < 8; j++) {
        float x = __fmul_rn(db, (float)((row >> (8 * j)) & 0xff));
        v[j] = (signs >> j) & 1 ? -x : x;
    }
}

/* 8 weights dl · (grid value + delta), the grid's bytes signed (-1, 0, 1): IQ1_S and IQ1_M. */
static __device__ __forceinline__ void put8_iq1(float *v, float dl, uint64_t row, float delta) {
    for (int j = 0; j < 8; j++)
        v[j] = __fmul_rn(dl, __fadd_rn((float)(int8_t)((row >> (8 * j)) & 0xff), delta));
}

/* (d · (0.5 + s)) · 0.25: the 4-bit scales of IQ2_XS and IQ2_S. */
static __device__ __forceinline__ float iq2_scale(float d, int s) {
    return __fmul_rn(__fmul_rn(d, __fadd_rn(0.5f, (float)s)), 0.25f);
}

/* Decodes part `sub` (32 elements) of the super-block at b, of one of the types above. */
static inline __device__ void deq32_more(uint32_t t, const uint8_t *b, int sub, float v[32],
                                         cu_grids g) {
    switch (t) {
    case HALO_TYPE_IQ2_XS: {
        float d = h16(b);
        uint8_t sc = b[66 + sub];
        float db[2] = {iq2_scale(d, sc & 0xf), iq2_scale(d, sc >> 4)};
        for (int l = 0; l < 4; l++) {
            uint16_t q = ld16(b + 2 + 2 * (4 * sub + l));
            put8_signed(v + 8 * l, db[l / 2], g.iq2xs[q & 511], iq_signs(q >> 9));
        }
        return;
    }
    case HALO_TYPE_IQ2_S: {
        float d = h16(b);
        uint8_t sc = b[74 + sub], qh = b[66 + sub];
        float db[2] = {iq2_scale(d, sc & 0xf), iq2_scale(d, sc >> 4)};
        for (int l = 0; l < 4; l++) {
            int idx = b[2 + 4 * sub + l] | ((qh << (8 - 2 * l)) & 0x300);
            put8_signed(v + 8 * l, db[l / 2], g.iq2s[idx], b[2 + 32 + 4 * sub + l]);
        }
        return;
    }
    case HALO_TYPE_IQ3_S: {
        float d = h16(b);
        float db = __fmul_rn(d, (float)(1 + 2 * ((b[106 + sub / 2] >> (4 * (sub % 2))) & 0xf)));
        uint8_t qh = b[66 + sub];
        const uint8_t *qs = b + 2 + 8 * sub;
        for (int l = 0; l < 4; l++) {
            int i0 = qs[2 * l] | (((qh >> (2 * l)) & 1) << 8);
            int i1 = qs[2 * l + 1] | (((qh >> (2 * l + 1)) & 1) << 8);
            uint64_t row = (uint64_t)g.iq3s[i0] | (uint64_t)g.iq3s[i1] << 32;
            put8_signed(v + 8 * l, db, row, b[74 + 4 * sub + l]);
        }
        return;
    }
    case HALO_TYPE_IQ1_S: {
        float d = h16(b);
        uint16_t h = ld16(b + 34 + 2 * sub);
        float dl = __fmul_rn(d, (float)(2 * ((h >> 12) & 7) + 1));
        float delta = h & 0x8000 ? -0.125f : 0.125f;
        for (int l = 0; l < 4; l++)
            put8_iq1(v + 8 * l, dl, g.iq1s[b[2 + 4 * sub + l] | (((h >> (3 * l)) & 7) << 8)],
                     delta);
        return;
    }
    case HALO_TYPE_IQ1_M: {
        uint16_t sc[4];
        for (int k = 0; k < 4; k++)
            sc[k] = ld16(b + 48 + 2 * k);
        float d = f16_to_f32((uint16_t)((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) |
                                        ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000)));
        for (int l = 0; l < 4; l++) {
            int s = 2 * ((sc[sub / 2] >> (6 * (sub % 2) + 3 * (l / 2))) & 7) + 1;
            float dl = __fmul_rn(d, (float)s);
            uint8_t h = b[32 + 2 * sub + l / 2] >> (4 * (l % 2));
            put8_iq1(v + 8 * l, dl, g.iq1s[b[4 * sub + l] | ((h & 7) << 8)],
                     h & 0x08 ? -0.125f : 0.125f);
        }
        return;
    }
    case HALO_TYPE_IQ4_XS: {
        float d = h16(b);
        uint16_t sh = ld16(b + 2);
        int s = (((b[4 + sub / 2] >> (4 * (sub % 2))) & 0xf) | (((sh >> (2 * sub)) & 3) << 4)) - 32;
        float dl = __fmul_rn(d, (float)s);
        const uint8_t *qs = b + 8 + 16 * sub;
        for (int j = 0; j < 16; j++) {
            v[j] = __fmul_rn(dl, (float)cu_kvalues_iq4nl[qs[j] & 0xf]);
            v[j + 16] = __fmul_rn(dl, (float)cu_kvalues_iq4nl[qs[j] >> 4]);
        }
        return;
    }
    default:
        for (int j = 0; j < 32; j++)
            v[j] = 0.0f;
        return;
    }
}

#endif
