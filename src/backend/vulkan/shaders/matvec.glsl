// out[o, col] = sum_i w[i, o] * x[i, col] for a few columns (decode: one token; MoE: one
// expert per column), the weight decoded in f32 as quant.glsl's wval does (the same values),
// f32 accumulation. Built for memory bandwidth on a discrete GPU (the CUDA backend's lessons,
// bench/cuda/NOTES.md): each lane takes units of 8 consecutive weights, so a subgroup's loads
// cover consecutive bytes of the row (coalesced) and a unit's scale and codebook lookups are
// done once per 8 weights; one subgroup per row, several rows per workgroup, the row's sum by
// subgroupAdd. Up to 4 plain columns share each decoded unit; with sel (routed experts) a
// workgroup row is one column and its expert. matmul.comp takes every other case.
// Compiled twice: matvec.comp (a subgroup per row) and matvec_wide.comp (MATVEC_WIDE: the whole
// workgroup per row, for projections with few rows: more invocations per row, shorter chains
// of loads; its sums need barriers, which the subgroup variant must not contain).
#define WG 128
#include "common.glsl"
#include "quant.glsl"

layout(constant_id = 0) const uint TYPE = 0u;
// Constant 1, the mode's bits. 1: an RMS norm of x first (matmul_multi, plain columns only):
// out = r · Σ w·(g·x) with r = 1/sqrt(mean(x²) + eps) over the column's K inputs and g the norm
// weight; the lanes of a row walk the whole of x anyway, so they sum x² on the way (no norm
// dispatch, no barrier).
// 2: x is the MoE's gate projection, SwiGLU'd with the up projection on the load (swiglu.glsl).
// 8: x is the attention output, rotated back on the load (rope_load.glsl).
layout(constant_id = 1) const uint MODE = 0u;
const bool NORM = (MODE & 1u) != 0u;

layout(binding = 0) readonly buffer WeightBuf4 { uvec4 d[]; } W4[8]; // quant.glsl's W, 16 B
layout(binding = 1) readonly buffer X { float d[]; } XB;
layout(binding = 1) readonly buffer X4 { vec4 d[]; } XB4; // the same, 16 bytes a load
layout(binding = 2) writeonly buffer Out { float d[]; } OUT;
layout(binding = 3) readonly buffer Sel { int d[]; } SEL;
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

// Two words from byte b (b even): Q8_0's blocks are 34 bytes, so half of them start mid-word.
uvec2 rd64(uint c, uint b) {
    uint w = b >> 2;
    if ((b & 3u) == 0u) return uvec2(W[c].d[w], W[c].d[w + 1u]);
    uint a0 = W[c].d[w], a1 = W[c].d[w + 1u], a2 = W[c].d[w + 2u];
    return uvec2((a0 >> 16) | (a1 << 16), (a1 >> 16) | (a2 << 16));
}

float sb8(uint w, uint k) { return float(int(w << (24u - 8u * k)) >> 24); }
float ub8(uint w, uint k) { return float((w >> (8u * k)) & 0xffu); }

// IQ2_XXS's codebook (256 entries of 8 bytes) in shared memory: lanes look entries up at
// random, which from the storage buffer cost a cache line each (up to 32 a load).
shared uint grid_s[TYPE == T_IQ2_XXS ? 512 : 1];

// Weights 8u .. 8u+7 of the row at byte `row` of chunk c.
void unit8(uint c, uint row, uint u, out float w[8]) {
    if (TYPE == T_F32) {
        uint b = (row >> 2) + 8u * u;
        [[unroll]] for (uint j = 0u; j < 8u; j++) w[j] = uintBitsToFloat(W[c].d[b + j]);
    } else if (TYPE == T_F16 || TYPE == T_BF16) {
        uint b = (row >> 2) + 4u * u;
        // one 16-byte load where the row allows (four 4-byte ones otherwise)
        uvec4 q = (row & 15u) == 0u ? W4[c].d[b >> 2]
                                    : uvec4(W[c].d[b], W[c].d[b + 1u], W[c].d[b + 2u],
                                            W[c].d[b + 3u]);
        [[unroll]] for (uint j = 0u; j < 4u; j++) {
            uint v = q[j];
            if (TYPE == T_F16) {
                vec2 h = unpackHalf2x16(v);
                w[2u * j] = h.x;
                w[2u * j + 1u] = h.y;
            } else {
                w[2u * j] = uintBitsToFloat(v << 16);
                w[2u * j + 1u] = uintBitsToFloat(v & 0xffff0000u);
            }
        }
    } else if (TYPE == T_Q8_0) {
        uint bb = row + (u >> 2) * 34u;
        float d = f16v(rd16(c, bb));
        uvec2 q = rd64(c, bb + 2u + 8u * (u & 3u));
        [[unroll]] for (uint j = 0u; j < 4u; j++) {
            w[j] = sb8(q.x, j) * d;
            w[4u + j] = sb8(q.y, j) * d;
        }
    } else if (TYPE == T_Q2_K) {
        // 8 consecutive elements share a scale byte and a 2-bit shift; their quants are 8
        // consecutive bytes (word-aligned: blocks are 84 bytes).
        uint bb = row + (u >> 5) * 84u, e = (u & 31u) * 8u;
        vec2 dm = unpackHalf2x16(W[c].d[(bb + 80u) >> 2]); // d and dmin: one word
        float d = dm.x, dmin = dm.y;
        uint sc = rd8(c, bb + e / 16u);
        float dl = d * float(sc & 0xfu), ml = dmin * float(sc >> 4);
        uint qb = (bb + 16u + 32u * (e / 128u) + e % 32u) >> 2, sh = 2u * ((e % 128u) / 32u);
        uint q0 = W[c].d[qb], q1 = W[c].d[qb + 1u];
        [[unroll]] for (uint j = 0u; j < 4u; j++) {
            w[j] = dl * float((q0 >> (8u * j + sh)) & 3u) - ml;
            w[4u + j] = dl * float((q1 >> (8u * j + sh)) & 3u) - ml;
        }
    } else if (TYPE == T_IQ2_XXS) {
        // 8 weights: one codebook entry (two words), one 7-bit sign group and parity.
        uint bb = row + (u >> 5) * 66u, ib = (u >> 2) & 7u, l = u & 3u;
        float d = f16v(rd16(c, bb));
        uint idx = rd8(c, bb + 2u + 8u * ib + l);
        uint aux = rd32(c, bb + 2u + 8u * ib + 4u);
        float db = d * (0.5 + float(aux >> 28)) * 0.25;
        uint g0 = grid_s[2u * idx], g1 = grid_s[2u * idx + 1u];
        uint s7 = (aux >> (7u * l)) & 127u;
        uint signs = s7 | ((uint(bitCount(s7)) & 1u) << 7);
        [[unroll]] for (uint j = 0u; j < 4u; j++) {
            float v0 = db * ub8(g0, j), v1 = db * ub8(g1, j);
            w[j] = ((signs >> j) & 1u) != 0u ? -v0 : v0;
            w[4u + j] = ((signs >> (4u + j)) & 1u) != 0u ? -v1 : v1;
        }
    }
}

// acc + w[0]·x[xi] + ... + w[7]·x[xi + 7], in that order. NORM: x times the norm weight of
// unit u, and x² added to ssq; SWIGLU: x = silu(g)·u (x by 16-byte loads: the host asks for
// either only then).
float dot8(float acc, float w[8], uint xi, bool vec, uint u, inout float ssq, uint k, uint col) {
    if (NORM || SWIGLU || ROPE || vec) {
        vec4 a = XB4.d[xi >> 2], b = XB4.d[(xi >> 2) + 1u];
        if (SWIGLU) {
            a = swiglu4(a, xi >> 2);
            b = swiglu4(b, (xi >> 2) + 1u);
        }
        if (ROPE) rope8(a, b, k, col);
        if (NORM) {
            ssq += dot(a, a) + dot(b, b);
            uint gi = (pc.norm_off >> 2) + 2u * u;
            a *= G4.d[gi];
            b *= G4.d[gi + 1u];
        }
        acc += w[0] * a.x;
        acc += w[1] * a.y;
        acc += w[2] * a.z;
        acc += w[3] * a.w;
        acc += w[4] * b.x;
        acc += w[5] * b.y;
        acc += w[6] * b.z;
        acc += w[7] * b.w;
    } else {
        [[unroll]] for (uint k = 0u; k < 8u; k++) acc += w[k] * XB.d[xi + k];
    }
    return acc;
}

void main() {
#ifdef MATVEC_WIDE
    const bool wide = true;
#else
    const bool wide = false;
#endif
    uint lane = wide ? gl_LocalInvocationID.x : gl_SubgroupInvocationID;
    uint ss = wide ? uint(WG) : gl_SubgroupSize;
    uint col0 = gl_WorkGroupID.y * pc.col_tile;
    uint ncol = min(pc.col_tile, pc.n_cols - col0);
    uint row0 = (gl_WorkGroupID.x + gl_WorkGroupID.z * gl_NumWorkGroups.x) * pc.rows_per_wg;
    uint e = 0u;
    if (pc.sel_mode != 0u) {
        int s = SEL.d[pc.sel_off + col0];
        e = s >= 0 && uint(s) < pc.n_expert ? uint(s) : 0u;
    }
    if (TYPE == T_IQ2_XXS) {
        for (uint i = gl_LocalInvocationID.x; i < 512u; i += WG) grid_s[i] = GRID.d[i];
        barrier();
    }
    uint units = pc.K / 8u;
    for (uint r = wide ? 0u : gl_SubgroupID; r < pc.rows_per_wg;
         r += wide ? 1u : gl_NumSubgroups) {
        uint o = row0 + r;
        if (o >= pc.N) break;
        uint g = o / (pc.N / pc.groups);
        uint c, base;
        wrow(e * pc.N + o, pc.w_rel, pc.w_chunk_rows, pc.w_row_bytes, c, base);
        float acc[4] = float[4](0., 0., 0., 0.);
        float ssq[4] = float[4](0., 0., 0., 0.);
        uint xb[4];
        [[unroll]] for (uint j = 0u; j < 4u; j++)
            xb[j] = pc.x_off + ((col0 + min(j, ncol - 1u)) / pc.x_col_div) * pc.x_col_stride +
                    g * pc.K;
        // x by 16-byte loads where every column's start allows (two instead of eight per
        // unit); two units in flight per lane. Each acc[j] adds w[k]·x[k] in the same order
        // either way.
        bool vec = (pc.x_off & 3u) == 0u && (pc.x_col_stride & 3u) == 0u;
        uint u = lane;
        for (; u + ss < units; u += 2u * ss) {
            float w[8], w2[8];
            unit8(c, base, u, w);
            unit8(c, base, u + ss, w2);
            [[unroll]] for (uint j = 0u; j < 4u; j++) {
                if (j >= ncol) break;
                acc[j] = dot8(acc[j], w, xb[j] + 8u * u, vec, u, ssq[j], g * pc.K + 8u * u,
                              col0 + j);
                acc[j] = dot8(acc[j], w2, xb[j] + 8u * (u + ss), vec, u + ss, ssq[j],
                              g * pc.K + 8u * (u + ss), col0 + j);
            }
        }
        if (u < units) {
            float w[8];
            unit8(c, base, u, w);
            [[unroll]] for (uint j = 0u; j < 4u; j++) {
                if (j >= ncol) break;
                acc[j] = dot8(acc[j], w, xb[j] + 8u * u, vec, u, ssq[j], g * pc.K + 8u * u,
                              col0 + j);
            }
        }
        [[unroll]] for (uint j = 0u; j < 4u; j++) {
            if (j >= ncol) break;
            uint oi = pc.out_off + (col0 + j) * pc.out_col_stride + o;
#ifdef MATVEC_WIDE // barriers inside: the whole workgroup is here (rows, ncol uniform)
            float s = wg_sum(acc[j]);
            if (NORM) s *= 1.0 / sqrt(wg_sum(ssq[j]) / float(pc.K) + pc.eps);
            if (gl_LocalInvocationID.x == 0u) OUT.d[oi] = s;
#else
            float s = subgroupAdd(acc[j]);
            if (NORM) s *= 1.0 / sqrt(subgroupAdd(ssq[j]) / float(pc.K) + pc.eps);
            if (subgroupElect()) OUT.d[oi] = s;
#endif
        }
    }
}
