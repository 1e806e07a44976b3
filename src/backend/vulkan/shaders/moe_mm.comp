#version 450
// A prefill's routed experts as a grouped matrix product (IQ2_XXS or Q2_K weights): workgroup
// (x, y) computes rows 128x .. +127 of expert tiles[y] for the BN pairs of column tile y
// (moe_bucket.comp). Each step decodes 32 inputs of the tile's 128 rows into shared memory (an
// invocation a row: one IQ2_XXS sub-block or two Q2_K ones, decoded to matvec_moe.comp's f32
// values) beside the pairs' 32 inputs, then each invocation adds a 4 x 4 block of products.
// matvec_moe.comp took a prefill's pairs one column at a time, reading each expert's weights
// once per pair (28 ms of a 512-token layer on the H200). f32 products summed in input order.
#define WG 128
#include "common.glsl"
#include "quant.glsl"

layout(constant_id = 0) const uint TYPE = 16u; // T_IQ2_XXS or T_Q2_K
layout(binding = 1) readonly buffer X { float d[]; } XB;
layout(binding = 2) writeonly buffer Out { float d[]; } OUT;
layout(binding = 4) readonly buffer Order { int d[]; } ORD;
layout(binding = 5) readonly buffer Tiles { int d[]; } TIL;
layout(push_constant) uniform PC {
    uint K, N, w_rel, w_chunk_rows, w_row_bytes, x_off, x_col_stride, x_col_div;
    uint out_off, out_col_stride, ord_off, til_off;
} pc;

const uint BM = 128u, BN = 16u, BK = 32u;
shared vec4 ws[BK * BM / 4u]; // [k][row]: a row group of 4 is one load
shared float xs[BN * (BK + 1u)]; // [column][k], padded: a step's stores hit distinct banks
shared uvec2 grid_s[TYPE == T_IQ2_XXS ? 256 : 1];

// Inputs k0 .. k0+31 of the weight row at byte `row` of chunk c, into column `r` of ws.
void decode(uint c, uint row, uint k0, uint r, bool on) {
    if (TYPE == T_IQ2_XXS) {
        uint bb = row + (k0 >> 8) * 66u, ib = (k0 & 255u) >> 5;
        float d = on ? f16v(rd16(c, bb)) : 0.0;
        uint idx4 = on ? rd32(c, bb + 2u + 8u * ib) : 0u;
        uint aux = on ? rd32(c, bb + 6u + 8u * ib) : 0u;
        float db = d * (0.5 + float(aux >> 28)) * 0.25;
        [[unroll]] for (uint l = 0u; l < 4u; l++) {
            uvec2 g = grid_s[(idx4 >> (8u * l)) & 0xffu];
            uint s7 = (aux >> (7u * l)) & 127u;
            uint signs = s7 | ((uint(bitCount(s7)) & 1u) << 7);
            [[unroll]] for (uint j = 0u; j < 8u; j++) {
                float v = db * float(((j < 4u ? g.x : g.y) >> (8u * (j & 3u))) & 0xffu);
                ws[(8u * l + j) * (BM / 4u) + r / 4u][r % 4u] = ((signs >> j) & 1u) != 0u ? -v : v;
            }
        }
    } else {
        uint bb = row + (k0 >> 8) * 84u;
        vec2 dm = on ? unpackHalf2x16(rd32(c, bb + 80u)) : vec2(0.0);
        [[unroll]] for (uint h = 0u; h < 2u; h++) {
            uint e = (k0 & 255u) + 16u * h, s = e / 16u;
            uint sc = on ? rd8(c, bb + s) : 0u;
            float dl = dm.x * float(sc & 0xfu), ml = dm.y * float(sc >> 4);
            uint qb = bb + 16u + 32u * (e / 128u) + e % 32u, sh = 2u * ((e % 128u) / 32u);
            [[unroll]] for (uint w = 0u; w < 4u; w++) {
                uint q = on ? W[c].d[(qb >> 2) + w] : 0u;
                [[unroll]] for (uint j = 0u; j < 4u; j++) {
                    uint kk = 16u * h + 4u * w + j;
                    ws[kk * (BM / 4u) + r / 4u][r % 4u] = dl * float((q >> (8u * j + sh)) & 3u) - ml;
                }
            }
        }
    }
}

void main() {
    uint lid = gl_LocalInvocationID.x, tile = gl_WorkGroupID.y;
    int ex = TIL.d[pc.til_off + tile];
    if (ex < 0) return; // past the last tile: the whole workgroup
    uint e = uint(ex), row0 = gl_WorkGroupID.x * BM;
    if (TYPE == T_IQ2_XXS) {
        for (uint i = lid; i < 256u; i += WG) grid_s[i] = uvec2(GRID.d[2u * i], GRID.d[2u * i + 1u]);
    }
    // The row this invocation decodes (rows past N decode to zeros)
    bool on = row0 + lid < pc.N;
    uint c, base;
    wrow(e * pc.N + min(row0 + lid, pc.N - 1u), pc.w_rel, pc.w_chunk_rows, pc.w_row_bytes, c, base);
    // The x values this invocation loads: 4 of the tile's BK x BN, column i / BK, input i % BK
    int xcol[4];
    [[unroll]] for (uint j = 0u; j < 4u; j++) {
        int p = ORD.d[pc.ord_off + tile * BN + (lid + j * WG) / BK];
        xcol[j] = p < 0 ? -1 : int(pc.x_off + (uint(p) / pc.x_col_div) * pc.x_col_stride);
    }
    uint rg = lid % (BM / 4u), cg = lid / (BM / 4u); // the 4 x 4 block: rows 4rg.., columns 4cg..
    vec4 acc[4] = vec4[4](vec4(0.0), vec4(0.0), vec4(0.0), vec4(0.0)); // acc[column][row]
    for (uint k0 = 0u; k0 < pc.K; k0 += BK) {
        barrier(); // the previous step's reads are done (and the codebook is filled)
        decode(c, base, k0, lid, on);
        [[unroll]] for (uint j = 0u; j < 4u; j++) {
            uint i = lid + j * WG, col = i / BK, kk = i % BK;
            xs[col * (BK + 1u) + kk] = xcol[j] < 0 ? 0.0 : XB.d[uint(xcol[j]) + k0 + kk];
        }
        barrier();
        [[unroll]] for (uint kk = 0u; kk < BK; kk++) {
            vec4 w = ws[kk * (BM / 4u) + rg];
            uint xo = 4u * cg * (BK + 1u) + kk; // the same for the subgroup: a broadcast
            vec4 x = vec4(xs[xo], xs[xo + BK + 1u], xs[xo + 2u * (BK + 1u)], xs[xo + 3u * (BK + 1u)]);
            acc[0] += w * x.x;
            acc[1] += w * x.y;
            acc[2] += w * x.z;
            acc[3] += w * x.w;
        }
    }
    [[unroll]] for (uint j = 0u; j < 4u; j++) {
        int p = ORD.d[pc.ord_off + tile * BN + 4u * cg + j];
        if (p < 0) continue;
        [[unroll]] for (uint i = 0u; i < 4u; i++) {
            uint row = row0 + 4u * rg + i;
            if (row < pc.N) OUT.d[pc.out_off + uint(p) * pc.out_col_stride + row] = acc[j][i];
        }
    }
}
