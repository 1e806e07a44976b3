// The routed experts' 2-bit pieces (a lane's unit of work): the loads and the decode math of
// one IQ2_XXS 32-weight sub-block or one Q2_K 16-weight sub-block, for matvec_moe.comp. The
// including shader defines TYPE, PW, CVT (cvt.glsl), grid_s (IQ2_XXS: the codebook in shared
// memory) and wld(c, i), word i of weight chunk c, before including it.
float ub8(uint w, uint k) { return float((w >> (8u * k)) & 0xffu); }

vec4 xv[8]; // the piece's x values (PW of them)
float xsum; // CVT, Q2_K: their sum (the mins' term, shared by a subgroup's rows)

// CVT, IQ2_XXS: 4 codebook bytes g (each < 128) with the signs of the low 4 bits of s as
// bytes 128 ± g_k (85..171, so no carry or borrow crosses a byte): 0x80808080 + g - 2 (g & m),
// m = 0xff in each byte whose sign bit is set.
uint signed_bytes(uint g, uint s) {
    uint m = ((s & 15u) * 0x00204081u) & 0x01010101u; // bit k to bit 8k
    return 0x80808080u + g - ((g & (m * 0xffu)) << 1);
}

float piece_sum() {
    vec4 t = vec4(0.0);
    [[unroll]] for (uint k = 0u; k < PW / 4u; k++) t += xv[k];
    return (t.x + t.y) + (t.z + t.w);
}

// A piece's weight words, loaded before any is used (HALO_VK_MOE_UNROLL: a lane loads UNR
// pieces of each of its R rows at once, so more loads are in flight per lane). IQ2_XXS: a =
// (the block's d word, idx4, aux); Q2_K: a = the four quant words, b = (d and dmin, scale word).
struct Raw {
    uvec4 a;
    uvec2 b;
};

Raw piece_load(uint c, uint row, uint p) {
    Raw r;
    if (TYPE == T_IQ2_XXS) {
        uint bb = row + (p >> 3) * 66u, ib = p & 7u;
        uint b = bb + 2u + 8u * ib, w = b >> 2;
        r.a.x = wld(c, bb >> 2);
        if ((b & 3u) == 0u) {
            r.a.y = wld(c, w);
            r.a.z = wld(c, w + 1u);
        } else {
            uint a0 = wld(c, w), a1 = wld(c, w + 1u), a2 = wld(c, w + 2u);
            r.a.y = (a0 >> 16) | (a1 << 16);
            r.a.z = (a1 >> 16) | (a2 << 16);
        }
        r.a.w = bb; // for d's half of its word
        r.b = uvec2(0u);
    } else {
        uint bb = row + (p >> 4) * 84u, s = p & 15u, e = s * 16u;
        uint qb = (bb + 16u + 32u * (e / 128u) + e % 32u) >> 2;
        r.a = uvec4(wld(c, qb), wld(c, qb + 1u), wld(c, qb + 2u), wld(c, qb + 3u));
        r.b = uvec2(wld(c, (bb + 80u) >> 2), wld(c, (bb + s) >> 2));
    }
    return r;
}

// acc + Σ w_i · x_i over piece p (its words in r).
float piece_math(float acc, Raw r, uint p) {
    if (TYPE == T_IQ2_XXS) {
        float d = f16v((r.a.x >> ((r.a.w & 2u) * 8u)) & 0xffffu);
        uint idx4 = r.a.y, aux = r.a.z;
        float db = d * (0.5 + float(aux >> 28)) * 0.25;
        if (CVT) {
            // Σ ±g · x over the piece, then db once
            const float o = CVT_2P23 + 128.0;
            float sum = 0.0;
            [[unroll]] for (uint l = 0u; l < 4u; l++) {
                uvec2 g = grid_s[(idx4 >> (8u * l)) & 0xffu];
                uint s7 = (aux >> (7u * l)) & 127u;
                uint signs = s7 | ((uint(bitCount(s7)) & 1u) << 7);
                uint p0 = signed_bytes(g.x, signs), p1 = signed_bytes(g.y, signs >> 4);
                vec4 xa = xv[2u * l], xb = xv[2u * l + 1u];
                [[unroll]] for (uint j = 0u; j < 4u; j++) sum += (cvt_b(p0, j) - o) * xa[j];
                [[unroll]] for (uint j = 0u; j < 4u; j++) sum += (cvt_b(p1, j) - o) * xb[j];
            }
            return acc + db * sum;
        }
        [[unroll]] for (uint l = 0u; l < 4u; l++) {
            uint idx = (idx4 >> (8u * l)) & 0xffu;
            uint g0 = grid_s[idx].x, g1 = grid_s[idx].y;
            uint s7 = (aux >> (7u * l)) & 127u;
            uint signs = s7 | ((uint(bitCount(s7)) & 1u) << 7);
            vec4 xa = xv[2u * l], xb = xv[2u * l + 1u];
            [[unroll]] for (uint j = 0u; j < 4u; j++) {
                float v0 = db * ub8(g0, j);
                acc += (((signs >> j) & 1u) != 0u ? -v0 : v0) * xa[j];
            }
            [[unroll]] for (uint j = 0u; j < 4u; j++) {
                float v1 = db * ub8(g1, j);
                acc += (((signs >> (4u + j)) & 1u) != 0u ? -v1 : v1) * xb[j];
            }
        }
    } else {
        // 16 consecutive elements share a scale byte and a 2-bit shift; their quants are 16
        // consecutive bytes (word-aligned: blocks are 84 bytes, the run starts at 16 or 32).
        uint s = p & 15u, e = s * 16u;
        vec2 dm = unpackHalf2x16(r.b.x);
        float d = dm.x, dmin = dm.y;
        uint sc = (r.b.y >> ((s & 3u) * 8u)) & 0xffu; // the row and block start on words
        float dl = d * float(sc & 0xfu), ml = dmin * float(sc >> 4);
        uint sh = 2u * ((e % 128u) / 32u);
        if (CVT) {
            // dl · Σ q · x - ml · Σ x, the quants under the exponent four a word
            float sum = 0.0;
            [[unroll]] for (uint k = 0u; k < 4u; k++) {
                uint q = (r.a[k] >> sh) & 0x03030303u;
                [[unroll]] for (uint j = 0u; j < 4u; j++)
                    sum += (cvt_b(q, j) - CVT_2P23) * xv[k][j];
            }
            return acc + (dl * sum - ml * xsum);
        }
        [[unroll]] for (uint k = 0u; k < 4u; k++) {
            uint q = r.a[k];
            vec4 x = xv[k];
            [[unroll]] for (uint j = 0u; j < 4u; j++)
                acc += (dl * float((q >> (8u * j + sh)) & 3u) - ml) * x[j];
        }
    }
    return acc;
}
