#version 450
// Q8_0 projections of a few columns (decode), matvec_q8.comp's job with the weight read for
// streaming from memory: a decode step reads every weight once, cold, and matvec_q8.comp's
// 2- and 4-byte loads at block-dependent offsets (34-byte blocks: half start mid-word) reached
// ~1.04 TB/s on the H200 over 9 GB of cold copies (session 8), a quarter of its HBM. Here the
// workgroup copies a stage of its RW rows (up to 17 KB) into shared memory with 16-byte loads
// at consecutive addresses (the rows' bytes regardless of block boundaries: a row of K % 256 ==
// 0 weights is a whole number of 16-byte pieces), each invocation holding up to 9 of them in
// flight, the next stage's loads issued before this stage's math. The math then reads blocks
// from shared memory as matvec_q8.comp does from the buffer: 8 weights a unit, the same f32
// values (d · q), f32 sums; only their order differs. Measured (H200, session 9): at 16 rows
// faster only for the shared expert's down (22.2 -> 14.0 us cold) and the vocabulary (529 ->
// 458 us), slower for the other shapes (q_b 23.9 -> 52.0): off by default, HALO_VK_MVQ8S=auto
// takes it for those two (vk_ops.c, mvq8s_rows).
#define WG 128
#include "common.glsl"
#include "quant.glsl"
#include "cvt.glsl"

// Rows per workgroup: 1, 2, 4, 8 or 16 (the host keeps them inside one input group). Up to 4
// groups of invocations take RW / 4 rows each, so each x load serves that many rows.
layout(constant_id = 0) const uint RW = 4u;
// Constant 1, the mode's bits, as matvec_q8.comp: 1 the RMS norm of x folded in, 2 SwiGLU on
// the load, 8 the inverse rope on the load.
layout(constant_id = 1) const uint MODE = 0u;
const bool NORM = (MODE & 1u) != 0u;
const uint G = RW < 4u ? RW : 4u, RT = RW / G, TPG = WG / G;
// A stage is STAGE blocks of 34 bytes over the rows (KT of each row, a multiple of 8 so each
// row's piece is whole 16-byte loads); LPT loads an invocation.
const uint STAGE = 512u, KT = STAGE / RW, LPT = (STAGE * 34u / 16u + WG - 1u) / WG;

layout(binding = 0) readonly buffer WeightBuf4 { uvec4 d[]; } W4[8];
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

// The stage (row r's piece at word r · n16 · 4), then the partial sums; one spare word: a
// unit's 8 bytes at an odd half-word read three words.
shared uint sw[STAGE * 34u / 4u + 1u];

float sb8(uint w, uint k) { return float(int(w << (24u - 8u * k)) >> 24); }

// acc + Σ (q_k · d) · x_k over unit u (8 weights) of the row piece at byte `row` of the stage.
float unit_dot(float acc, uint row, uint u, vec4 xa, vec4 xb) {
    uint bb = row + (u >> 2) * 34u, b = bb + 2u + 8u * (u & 3u), w = b >> 2;
    float d = f16v((sw[bb >> 2] >> ((bb & 2u) * 8u)) & 0xffffu);
    uint a0 = sw[w], a1 = sw[w + 1u], a2 = sw[w + 2u];
    // no branch: both alignments computed, one chosen
    uvec2 q = (b & 2u) != 0u ? uvec2((a0 >> 16) | (a1 << 16), (a1 >> 16) | (a2 << 16))
                             : uvec2(a0, a1);
    if (CVT) {
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

uint row0, nr, c0, b0;
bool one; // all the workgroup's rows in one chunk (the weight's views): one base, uniform index
uvec4 v[LPT];

// 16-byte index of row r's piece j of the stage at block kb (r clamped: rows past the end
// repeat the last one).
uint idx16(uint r, uint kb, uint j) {
    return ((b0 + min(r, nr - 1u) * pc.w_row_bytes + kb * 34u) >> 4) + j;
}

// The stage at block kb into registers (the common case: one chunk).
void load_stage(uint kb, uint n16) {
    uint t = gl_LocalInvocationID.x;
    [[unroll]] for (uint l = 0u; l < LPT; l++) {
        uint i = t + l * WG, r = i / n16;
        if (i < RW * n16) v[l] = W4[c0].d[idx16(r, kb, i - r * n16)];
    }
}

// The registers into the stage; rows over two chunks (rare) load here, a row at a time so the
// chunk's index is uniform.
void store_stage(uint kb, uint n16) {
    uint t = gl_LocalInvocationID.x;
    if (one) {
        [[unroll]] for (uint l = 0u; l < LPT; l++) {
            uint i = t + l * WG;
            if (i < RW * n16) {
                sw[4u * i] = v[l].x;
                sw[4u * i + 1u] = v[l].y;
                sw[4u * i + 2u] = v[l].z;
                sw[4u * i + 3u] = v[l].w;
            }
        }
        return;
    }
    for (uint r = 0u; r < RW; r++) {
        uint c, base;
        wrow(row0 + min(r, nr - 1u), pc.w_rel, pc.w_chunk_rows, pc.w_row_bytes, c, base);
        for (uint j = t; j < n16; j += WG) {
            uvec4 q = W4[c].d[((base + kb * 34u) >> 4) + j];
            uint i = r * n16 + j;
            sw[4u * i] = q.x;
            sw[4u * i + 1u] = q.y;
            sw[4u * i + 2u] = q.z;
            sw[4u * i + 3u] = q.w;
        }
    }
}

void main() {
    uint t = gl_LocalInvocationID.x, grp = t / TPG, lane = t % TPG;
    uint col0 = gl_WorkGroupID.y * pc.col_tile, ncol = min(pc.col_tile, pc.n_cols - col0);
    row0 = (gl_WorkGroupID.x + gl_WorkGroupID.z * gl_NumWorkGroups.x) * RW;
    if (row0 >= pc.N) return; // the whole workgroup: no barrier is left waiting
    nr = min(RW, pc.N - row0);
    uint g = row0 / (pc.N / pc.groups), g_k = g * pc.K, cl, bl;
    wrow(row0, pc.w_rel, pc.w_chunk_rows, pc.w_row_bytes, c0, b0);
    wrow(row0 + nr - 1u, pc.w_rel, pc.w_chunk_rows, pc.w_row_bytes, cl, bl);
    one = c0 == cl;
    uint xb[4];
    [[unroll]] for (uint j = 0u; j < 4u; j++)
        xb[j] = pc.x_off + ((col0 + min(j, ncol - 1u)) / pc.x_col_div) * pc.x_col_stride +
                g * pc.K;
    bool vec = (pc.x_off & 3u) == 0u && (pc.x_col_stride & 3u) == 0u;
    float acc[16], ssq[4];
    [[unroll]] for (uint i = 0u; i < 16u; i++) acc[i] = 0.0;
    [[unroll]] for (uint j = 0u; j < 4u; j++) ssq[j] = 0.0;
    uint nblk = pc.K / 32u;
    if (one) load_stage(0u, min(KT, nblk) * 17u / 8u);
    for (uint kb = 0u; kb < nblk; kb += KT) {
        uint tb = min(KT, nblk - kb), n16 = tb * 17u / 8u; // blocks, 16-byte pieces a row
        barrier(); // the stage before read by all
        store_stage(kb, n16);
        barrier();
        if (one && kb + KT < nblk) load_stage(kb + KT, min(KT, nblk - kb - KT) * 17u / 8u);
        for (uint u = lane; u < 4u * tb; u += TPG) {
            uint ku = kb * 4u + u; // the unit's index in the row
            [[unroll]] for (uint j = 0u; j < 4u; j++) {
                if (j >= ncol) break;
                uint xi = xb[j] + 8u * ku;
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
                if (ROPE) rope8(xa, xc, g_k + 8u * ku, col0 + j);
                if (NORM) {
                    ssq[j] += dot(xa, xa) + dot(xc, xc);
                    uint gi = (pc.norm_off >> 2) + 2u * ku;
                    xa *= G4.d[gi];
                    xc *= G4.d[gi + 1u];
                }
                [[unroll]] for (uint r = 0u; r < RT; r++)
                    acc[4u * r + j] = unit_dot(acc[4u * r + j], (grp * RT + r) * n16 * 16u, u,
                                               xa, xc);
            }
        }
    }
    // The sums: within a subgroup where it lies inside one group (P lanes an entry), then the
    // group's entries in the stage's words (value i of entry e at i · WG / P + e).
    barrier();
    uint P = gl_SubgroupSize <= TPG ? gl_SubgroupSize : 1u, EW = WG / P;
    [[unroll]] for (uint i = 0u; i < 4u * RT + 4u; i++) {
        if (i >= 4u * RT && !NORM) break;
        float s = i < 4u * RT ? acc[i] : ssq[i - 4u * RT];
        if (P > 1u) s = subgroupAdd(s);
        if (t % P == 0u) sw[i * EW + t / P] = floatBitsToUint(s);
    }
    barrier();
    uint r = t / 4u, j = t % 4u;
    if (r < nr && j < ncol) {
        uint e0 = (r / RT) * (TPG / P), i = 4u * (r % RT) + j;
        float s = 0.0;
        for (uint e = 0u; e < TPG / P; e++) s += uintBitsToFloat(sw[i * EW + e0 + e]);
        if (NORM) {
            float q = 0.0;
            for (uint e = 0u; e < TPG / P; e++)
                q += uintBitsToFloat(sw[(4u * RT + j) * EW + e0 + e]);
            s *= 1.0 / sqrt(q / float(pc.K) + pc.eps);
        }
        OUT.d[pc.out_off + (col0 + j) * pc.out_col_stride + row0 + r] = s;
    }
}
