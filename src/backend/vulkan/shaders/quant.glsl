// Decoding one element of a weight row of any supported type (ggml block layouts, as
// src/quant/blocks.h; the float expressions in ggml's order so values match the CPU's
// dequantizers). The weight is binding 0: VK_CHUNKS ranges of 32-bit words; the IQ2_XXS
// codebook is binding 12. Reads are word-wise (blocks such as Q8_0's 34 bytes are not
// word-aligned), so no 8-bit storage is needed.
layout(binding = 0) readonly buffer WeightBuf { uint d[]; } W[8];
layout(binding = 12) readonly buffer GridBuf { uint d[]; } GRID;

const uint T_F32 = 0u, T_F16 = 1u, T_Q4_0 = 2u, T_Q4_1 = 3u, T_Q5_0 = 6u, T_Q5_1 = 7u,
           T_Q8_0 = 8u, T_Q2_K = 10u, T_Q4_K = 12u, T_Q5_K = 13u,
           T_Q6_K = 14u, T_IQ2_XXS = 16u, T_BF16 = 30u, T_MXFP4 = 39u;

uint rd8(uint c, uint b) { return (W[c].d[b >> 2] >> ((b & 3u) * 8u)) & 0xffu; }
uint rd16(uint c, uint b) { // b even: never straddles a word
    return (W[c].d[b >> 2] >> ((b & 2u) * 8u)) & 0xffffu;
}
uint rd32(uint c, uint b) {
    if ((b & 3u) == 0u) return W[c].d[b >> 2];
    return rd16(c, b) | (rd16(c, b + 2u) << 16);
}
float f16v(uint h) { return unpackHalf2x16(h).x; }
int s8(uint v) { return int(v << 24) >> 24; }

// Scale and min of sub-block j of Q4_K/Q5_K (12 packed bytes at sb).
void k4_scale_min(uint c, uint sb, uint j, out float sc, out float m) {
    if (j < 4u) {
        sc = float(rd8(c, sb + j) & 63u);
        m = float(rd8(c, sb + j + 4u) & 63u);
    } else {
        sc = float((rd8(c, sb + j + 4u) & 0xfu) | ((rd8(c, sb + j - 4u) >> 6) << 4));
        m = float((rd8(c, sb + j + 4u) >> 4) | ((rd8(c, sb + j) >> 6) << 4));
    }
}

// Element i of the row starting at byte `row` of chunk c.
float wval(uint type, uint c, uint row, uint i) {
    if (type == T_F32) return uintBitsToFloat(W[c].d[(row >> 2) + i]);
    if (type == T_F16) return f16v(rd16(c, row + 2u * i));
    if (type == T_BF16) return uintBitsToFloat(rd16(c, row + 2u * i) << 16);
    if (type == T_Q8_0) {
        uint bb = row + (i >> 5) * 34u;
        return float(s8(rd8(c, bb + 2u + (i & 31u)))) * f16v(rd16(c, bb));
    }
    if (type == T_Q4_0 || type == T_Q4_1 || type == T_Q5_0 || type == T_Q5_1) {
        // 32-element blocks: d (and m) as f16, then (Q5) 4 bytes of fifth bits, 16 nibble bytes
        bool five = type == T_Q5_0 || type == T_Q5_1, has_m = type == T_Q4_1 || type == T_Q5_1;
        uint bytes = (five ? 22u : 18u) + (has_m ? 2u : 0u);
        uint bb = row + (i >> 5) * bytes, j = i & 31u;
        uint qs = bb + (has_m ? 4u : 2u) + (five ? 4u : 0u);
        uint q = j < 16u ? rd8(c, qs + j) & 0xfu : rd8(c, qs + j - 16u) >> 4;
        if (five) q |= ((rd32(c, bb + (has_m ? 4u : 2u)) >> j) & 1u) << 4;
        float d = f16v(rd16(c, bb));
        if (has_m) return float(q) * d + f16v(rd16(c, bb + 2u));
        return float(int(q) - (five ? 16 : 8)) * d;
    }
    if (type == T_MXFP4) {
        uint bb = row + (i >> 5) * 17u, j = i & 31u;
        uint e = rd8(c, bb);
        uint q = j < 16u ? rd8(c, bb + 1u + j) & 0xfu : rd8(c, bb + 1u + j - 16u) >> 4;
        const float kv[16] = float[16](0., 1., 2., 3., 4., 6., 8., 12., 0., -1., -2., -3., -4.,
                                       -6., -8., -12.);
        uint bits = e < 2u ? (0x00200000u << e) : ((e - 1u) << 23);
        return kv[q] * uintBitsToFloat(bits);
    }
    uint e = i & 255u;
    if (type == T_Q2_K) {
        uint bb = row + (i >> 8) * 84u;
        float d = f16v(rd16(c, bb + 80u)), dmin = f16v(rd16(c, bb + 82u));
        uint sc = rd8(c, bb + e / 16u);
        float dl = d * float(sc & 0xfu), ml = dmin * float(sc >> 4);
        uint q = (rd8(c, bb + 16u + 32u * (e / 128u) + e % 32u) >> (2u * ((e % 128u) / 32u))) & 3u;
        return dl * float(q) - ml;
    }
    if (type == T_Q4_K || type == T_Q5_K) {
        bool five = type == T_Q5_K;
        uint bb = row + (i >> 8) * (five ? 176u : 144u);
        float d = f16v(rd16(c, bb)), dmin = f16v(rd16(c, bb + 2u));
        float sc, m;
        k4_scale_min(c, bb + 4u, e / 32u, sc, m);
        uint qs = bb + (five ? 48u : 16u);
        uint q = (rd8(c, qs + 32u * (e / 64u) + e % 32u) >> (4u * ((e % 64u) / 32u))) & 0xfu;
        if (five) q |= ((rd8(c, bb + 16u + e % 32u) >> (e / 32u)) & 1u) << 4;
        return (d * sc) * float(q) - dmin * m;
    }
    if (type == T_Q6_K) {
        uint bb = row + (i >> 8) * 210u;
        uint cc = e / 128u, r = e % 128u, l = r % 32u, part = r / 32u;
        uint lo = (rd8(c, bb + 64u * cc + l + 32u * (part & 1u)) >> (4u * (part >> 1))) & 0xfu;
        uint hi = (rd8(c, bb + 128u + 32u * cc + l) >> (2u * part)) & 3u;
        float d = f16v(rd16(c, bb + 208u));
        return d * float(s8(rd8(c, bb + 192u + e / 16u))) * float(int(lo | (hi << 4)) - 32);
    }
    if (type == T_IQ2_XXS) {
        uint bb = row + (i >> 8) * 66u, ib = e / 32u, l = (e % 32u) / 8u, j = e % 8u;
        float d = f16v(rd16(c, bb));
        uint idx = rd8(c, bb + 2u + 8u * ib + l);
        uint aux = rd32(c, bb + 2u + 8u * ib + 4u);
        float db = d * (0.5 + float(aux >> 28)) * 0.25;
        uint g = GRID.d[2u * idx + (j >> 2)];
        float v = db * float((g >> (8u * (j & 3u))) & 0xffu);
        uint s7 = (aux >> (7u * l)) & 127u;
        uint signs = s7 | ((uint(bitCount(s7)) & 1u) << 7);
        return ((signs >> j) & 1u) != 0u ? -v : v;
    }
    return 0.0;
}

// Chunk and byte offset of weight row `row` (chunk_rows rows per chunk, views at `rel`).
void wrow(uint row, uint rel, uint chunk_rows, uint row_bytes, out uint c, out uint base) {
    c = row / chunk_rows;
    base = rel + (row - c * chunk_rows) * row_bytes;
}
