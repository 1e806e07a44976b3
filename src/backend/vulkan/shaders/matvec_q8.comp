#version 450
// Q8_0 projections of a few columns (decode), matvec.glsl's job for the type that carries most
// of a decode step's bytes (attention projections, shared expert, head). The difference: a
// group of lanes (a subgroup, or with WIDE the whole workgroup) takes R rows at once, so each
// x load (the activations, f32: 4 bytes a weight against the weight's 1.06) serves R rows and
// each lane has R independent weight loads in flight. Lanes take units of 8 consecutive
// weights (a quarter of a 34-byte block), so a load instruction of the group covers
// consecutive bytes. Weights decode to the same f32 values as wval (d · q), f32 accumulation;
// only the order of the sums differs from matvec.glsl.
#define WG 128
#include "common.glsl"
#include "quant.glsl"
#include "cvt.glsl"

// Rows per lane group in the low 4 bits (1..4); 16: the group is the whole workgroup; 32: two
// units in flight per lane (more loads outstanding). (Four in flight took the H200 as long as
// two over 9 GB of cold weights, session 8: not kept.)
layout(constant_id = 0) const uint VARIANT = 2u;
const uint R = VARIANT & 15u;
const bool WIDE = (VARIANT & 16u) != 0u;
const bool TWO = (VARIANT & 32u) != 0u;
// Constant 1, the mode's bits. 1: an RMS norm of x first (matmul_multi): out = r · Σ w·(g·x),
// r = 1/sqrt(mean(x²) + eps) over the column's K inputs, g the norm weight. Each lane group
// walks the whole of x for its rows anyway, so it sums x² on the way: no norm dispatch and no
// barrier before this one.
// 2: x is the MoE's gate projection, SwiGLU'd with the up projection on the load (swiglu.glsl).
// 8: x is the attention output, rotated back on the load (rope_load.glsl).
layout(constant_id = 1) const uint MODE = 0u;
const bool NORM = (MODE & 1u) != 0u;

layout(binding = 1) readonly buffer X { float d[]; } XB;
layout(binding = 1) readonly buffer X4 { vec4 d[]; } XB4; // the same, 16 bytes a load
layout(binding = 2) writeonly buffer Out { float d[]; } OUT;
layout(binding = 4) readonly buffer G4B { vec4 d[]; } G4; // NORM: the norm weight (f32)
layout(push_constant) uniform PC {
    uint K, N, n_cols, groups, type, w_rel, w_chunk_rows, w_row_bytes;
    uint x_off, x_col_stride, x_col_div, out_off, out_col_stride, sel_mode, sel_off, n_expert;
    uint rows_per_wg, col_tile, norm_off;
    float eps;
    int u_delta4;
    float clamp_v;
    uint k_sum, wt_off, ys_off, has_ys, cs_off, rope_hd, rope_nrot;
} pc;
#include "swiglu.glsl"
#include "rope_load.glsl"

// The subgroups' partial sums (WIDE): up to 16 outputs (4 rows x 4 columns) each, then (NORM)
// the 4 columns' sums of squares.
shared float part[WIDE ? 20 * 32 : 1];

// Two words from byte b (b even): Q8_0's blocks are 34 bytes, so half of them start mid-word.
uvec2 rd64(uint c, uint b) {
    uint w = b >> 2;
    if ((b & 3u) == 0u) return uvec2(W[c].d[w], W[c].d[w + 1u]);
    uint a0 = W[c].d[w], a1 = W[c].d[w + 1u], a2 = W[c].d[w + 2u];
    return uvec2((a0 >> 16) | (a1 << 16), (a1 >> 16) | (a2 << 16));
}

float sb8(uint w, uint k) { return float(int(w << (24u - 8u * k)) >> 24); }

// acc + Σ_k (q_k · d) · x_k over unit u's 8 weights (row at byte `row` of chunk c).
float unit_dot(float acc, uint c, uint row, uint u, vec4 xa, vec4 xb) {
    uint bb = row + (u >> 2) * 34u;
    float d = f16v(rd16(c, bb));
    uvec2 q = rd64(c, bb + 2u + 8u * (u & 3u));
    if (CVT) {
        // q_k + 128 = byte ^ 0x80 under the exponent: 2^23 + 128 + q_k, exact; the unit's
        // sum of q_k · x_k times d once
        q ^= uvec2(0x80808080u);
        const float o = CVT_2P23 + 128.0;
        float s = (cvt_b(q.x, 0u) - o) * xa.x;
        s += (cvt_b(q.x, 1u) - o) * xa.y;
        s += (cvt_b(q.x, 2u) - o) * xa.z;
        s += (cvt_b(q.x, 3u) - o) * xa.w;
        s += (cvt_b(q.y, 0u) - o) * xb.x;
        s += (cvt_b(q.y, 1u) - o) * xb.y;
        s += (cvt_b(q.y, 2u) - o) * xb.z;
        s += (cvt_b(q.y, 3u) - o) * xb.w;
        return acc + s * d;
    }
    acc += sb8(q.x, 0u) * d * xa.x;
    acc += sb8(q.x, 1u) * d * xa.y;
    acc += sb8(q.x, 2u) * d * xa.z;
    acc += sb8(q.x, 3u) * d * xa.w;
    acc += sb8(q.y, 0u) * d * xb.x;
    acc += sb8(q.y, 1u) * d * xb.y;
    acc += sb8(q.y, 2u) * d * xb.z;
    acc += sb8(q.y, 3u) * d * xb.w;
    return acc;
}

// The invocation's rows (chunk and byte offset), columns and sums.
uint c[4], base[4], xb[4], ncol, col0, g_k;
bool vec;
float acc[16], ssq[4];

// Unit u of every row, for every column.
void unit_step(uint u) {
    [[unroll]] for (uint j = 0u; j < 4u; j++) {
        if (j >= ncol) break;
        uint xi = xb[j] + 8u * u;
        vec4 xa, xc;
        if (vec) {
            xa = XB4.d[xi >> 2];
            xc = XB4.d[(xi >> 2) + 1u];
        } else {
            xa = vec4(XB.d[xi], XB.d[xi + 1u], XB.d[xi + 2u], XB.d[xi + 3u]);
            xc = vec4(XB.d[xi + 4u], XB.d[xi + 5u], XB.d[xi + 6u], XB.d[xi + 7u]);
        }
        if (SWIGLU) { // vec: the host asks for SWIGLU only then
            xa = swiglu4(xa, xi >> 2);
            xc = swiglu4(xc, (xi >> 2) + 1u);
        }
        if (ROPE) rope8(xa, xc, g_k + 8u * u, col0 + j);
        if (NORM) {
            ssq[j] += dot(xa, xa) + dot(xc, xc);
            uint gi = (pc.norm_off >> 2) + 2u * u;
            xa *= G4.d[gi];
            xc *= G4.d[gi + 1u];
        }
        [[unroll]] for (uint r = 0u; r < R; r++)
            acc[4u * r + j] = unit_dot(acc[4u * r + j], c[r], base[r], u, xa, xc);
    }
}

void main() {
    uint lane = WIDE ? gl_LocalInvocationID.x : gl_SubgroupInvocationID;
    uint ss = WIDE ? uint(WG) : gl_SubgroupSize;
    uint grp = WIDE ? 0u : gl_SubgroupID;
    col0 = gl_WorkGroupID.y * pc.col_tile;
    ncol = min(pc.col_tile, pc.n_cols - col0);
    uint row0 = (gl_WorkGroupID.x + gl_WorkGroupID.z * gl_NumWorkGroups.x) * pc.rows_per_wg +
                grp * R;
    uint nr = row0 < pc.N ? min(R, pc.N - row0) : 0u;
    if (!WIDE && nr == 0u) return; // no barriers below in this variant
    // The host keeps a group's rows inside one input group (R divides N / groups).
    uint g = row0 / (pc.N / pc.groups);
    g_k = g * pc.K; // the group's first input (ROPE: its index in the flattened heads)
    [[unroll]] for (uint r = 0u; r < 4u; r++) {
        uint o = row0 + min(r, max(nr, 1u) - 1u); // rows past the end repeat the last one
        wrow(o, pc.w_rel, pc.w_chunk_rows, pc.w_row_bytes, c[r], base[r]);
    }
    [[unroll]] for (uint j = 0u; j < 4u; j++)
        xb[j] = pc.x_off + ((col0 + min(j, ncol - 1u)) / pc.x_col_div) * pc.x_col_stride +
                g * pc.K;
    vec = (pc.x_off & 3u) == 0u && (pc.x_col_stride & 3u) == 0u;
    [[unroll]] for (uint i = 0u; i < 16u; i++) acc[i] = 0.0;
    [[unroll]] for (uint j = 0u; j < 4u; j++) ssq[j] = 0.0;
    uint units = pc.K / 8u;
    if (TWO) {
        uint u = lane;
        for (; u + ss < units; u += 2u * ss) {
            unit_step(u);
            unit_step(u + ss);
        }
        if (u < units) unit_step(u);
    } else {
        for (uint u = lane; u < units; u += ss) unit_step(u);
    }
    if (WIDE) {
        // subgroup sums, then one value per subgroup and output through shared memory
        uint ns = gl_NumSubgroups;
        [[unroll]] for (uint i = 0u; i < 16u; i++) {
            if (i >= 4u * R) break;
            float s = subgroupAdd(acc[i]);
            if (subgroupElect() && gl_SubgroupID < 32u) part[i * 32u + gl_SubgroupID] = s;
        }
        if (NORM) {
            [[unroll]] for (uint j = 0u; j < 4u; j++) {
                float s = subgroupAdd(ssq[j]);
                if (subgroupElect() && gl_SubgroupID < 32u)
                    part[(16u + j) * 32u + gl_SubgroupID] = s;
            }
        }
        barrier();
        uint i = gl_LocalInvocationID.x, r = i / 4u, j = i % 4u;
        if (r < nr && j < ncol) {
            float s = 0.0;
            for (uint k = 0u; k < min(ns, 32u); k++) s += part[i * 32u + k];
            if (NORM) {
                float q = 0.0;
                for (uint k = 0u; k < min(ns, 32u); k++) q += part[(16u + j) * 32u + k];
                s *= 1.0 / sqrt(q / float(pc.K) + pc.eps);
            }
            OUT.d[pc.out_off + (col0 + j) * pc.out_col_stride + row0 + r] = s;
        }
    } else {
        float rs[4] = float[4](1.0, 1.0, 1.0, 1.0);
        if (NORM) {
            [[unroll]] for (uint j = 0u; j < 4u; j++) {
                if (j >= ncol) break;
                rs[j] = 1.0 / sqrt(subgroupAdd(ssq[j]) / float(pc.K) + pc.eps);
            }
        }
        [[unroll]] for (uint r = 0u; r < R; r++) {
            [[unroll]] for (uint j = 0u; j < 4u; j++) {
                if (j >= ncol) break;
                float s = subgroupAdd(acc[4u * r + j]) * rs[j];
                if (r < nr && subgroupElect())
                    OUT.d[pc.out_off + (col0 + j) * pc.out_col_stride + row0 + r] = s;
            }
        }
    }
}
