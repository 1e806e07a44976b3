#version 450
// Fast mode's Q8_0 projection of many columns (prefill) by integer dot products, tiled:
// workgroup (x, y) computes rows 64x .. +63 for columns 32y .. +31. Each step stages one
// 32-weight block of the tile's rows and of its columns' quantized x (quant_q8.comp) in shared
// memory, then each invocation sums a 4 x 4 block of outputs, 8 packed dots each, scaled by
// d_w · d_x once a block: the products of matmul_q8.comp (a subgroup per row and column, the
// weights read again for every column: ~2.5 T int8 MACs/s on the H200), in block order.
#extension GL_EXT_spirv_intrinsics : require
#define WG 128
#include "common.glsl"
#include "quant.glsl"

spirv_instruction(extensions = ["SPV_KHR_integer_dot_product"], capabilities = [6019, 6018],
                  id = 4450)
int sdot4x8(int a, int b, spirv_literal int packed_format);

layout(binding = 1) readonly buffer Q { uint d[]; } QB;
layout(binding = 2) writeonly buffer Out { float d[]; } OUT;
layout(binding = 3) readonly buffer S { float d[]; } SB;
layout(push_constant) uniform PC {
    uint K, N, groups, w_rel, w_chunk_rows, w_row_bytes, q_off, s_off, nb_col, out_off,
        out_col_stride, rows_per_wg, n_cols;
} pc;

const uint BM = 64u, BN = 32u;
shared uvec4 wq[8u * BM / 4u]; // [word][row]: 4 rows' word w is one load
shared vec4 wd[BM / 4u];       // the rows' f16 scales
shared uvec4 xq[BN * 2u];      // [column][words 0-3, 4-7]
shared vec4 xd[BN / 4u];

void main() {
    uint lid = gl_LocalInvocationID.x;
    uint row0 = gl_WorkGroupID.x * BM, col0 = gl_WorkGroupID.y * BN;
    uint nbw = pc.K / 32u, g = row0 / (pc.N / pc.groups); // the host keeps a tile in one group
    // Staging: invocation lid loads words 4h .. 4h+3 (and h = 0: the scale) of row lid / 2's
    // block, and x words 2(lid % 4) .. +1 of column lid / 4 (lid < 4·BN)
    uint sr = lid / 2u, h = lid % 2u, c, base;
    bool row_on = row0 + sr < pc.N;
    wrow(min(row0 + sr, pc.N - 1u), pc.w_rel, pc.w_chunk_rows, pc.w_row_bytes, c, base);
    uint xc = lid / 4u, xw = 2u * (lid % 4u);
    bool col_on = col0 + xc < pc.n_cols;
    uint xblk0 = min(col0 + xc, pc.n_cols - 1u) * pc.nb_col + g * nbw; // past the end: unused
    uint rg = lid % (BM / 4u), cg = lid / (BM / 4u); // outputs: rows 4rg.., columns 4cg..
    vec4 acc[4] = vec4[4](vec4(0.0), vec4(0.0), vec4(0.0), vec4(0.0)); // acc[column][row]
    for (uint b = 0u; b < nbw; b++) {
        barrier(); // the previous block's reads are done
        uint wb = base + b * 34u;
        [[unroll]] for (uint j = 0u; j < 4u; j++) {
            uint w = row_on ? rd32(c, wb + 2u + 4u * (4u * h + j)) : 0u;
            wq[(4u * h + j) * (BM / 4u) + sr / 4u][sr % 4u] = w;
        }
        if (h == 0u) wd[sr / 4u][sr % 4u] = row_on ? f16v(rd16(c, wb)) : 0.0;
        uint xblk = xblk0 + b;
        [[unroll]] for (uint j = 0u; j < 2u; j++)
            xq[2u * xc + (xw + j) / 4u][(xw + j) % 4u] = col_on ? QB.d[pc.q_off + xblk * 8u + xw + j] : 0u;
        if (lid % 4u == 0u) xd[xc / 4u][xc % 4u] = col_on ? SB.d[pc.s_off + xblk] : 0.0;
        barrier();
        uvec4 wv[8];
        [[unroll]] for (uint w = 0u; w < 8u; w++) wv[w] = wq[w * (BM / 4u) + rg];
        vec4 dw = wd[rg], dx = xd[cg];
        [[unroll]] for (uint j = 0u; j < 4u; j++) {
            uvec4 x0 = xq[2u * (4u * cg + j)], x1 = xq[2u * (4u * cg + j) + 1u];
            [[unroll]] for (uint i = 0u; i < 4u; i++) {
                int s = sdot4x8(int(wv[0][i]), int(x0.x), 0);
                s = sdot4x8(int(wv[1][i]), int(x0.y), 0) + s;
                s = sdot4x8(int(wv[2][i]), int(x0.z), 0) + s;
                s = sdot4x8(int(wv[3][i]), int(x0.w), 0) + s;
                s = sdot4x8(int(wv[4][i]), int(x1.x), 0) + s;
                s = sdot4x8(int(wv[5][i]), int(x1.y), 0) + s;
                s = sdot4x8(int(wv[6][i]), int(x1.z), 0) + s;
                s = sdot4x8(int(wv[7][i]), int(x1.w), 0) + s;
                acc[j][i] += float(s) * (dw[i] * dx[j]);
            }
        }
    }
    [[unroll]] for (uint j = 0u; j < 4u; j++) {
        uint col = col0 + 4u * cg + j;
        if (col >= pc.n_cols) continue;
        [[unroll]] for (uint i = 0u; i < 4u; i++) {
            uint row = row0 + 4u * rg + i;
            if (row < pc.N) OUT.d[pc.out_off + col * pc.out_col_stride + row] = acc[j][i];
        }
    }
}
