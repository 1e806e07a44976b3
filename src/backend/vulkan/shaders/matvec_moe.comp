#version 450
// The routed experts' projections (IQ2_XXS gate and up, Q2_K down: one expert per column, a
// few columns a token), and any other IQ2_XXS or Q2_K projection of a few columns. matvec.glsl
// gave each lane 8 weights at a time, which for these 2-bit types is 2 bytes of weight against
// four or five load instructions (scale, index, signs, codebook), and gave each workgroup one
// row, so every 1 KB row paid for filling the 2 KB IQ2_XXS codebook in shared memory and a
// barrier: on the H200 both ran at ~150 GB/s. Here a lane takes a whole piece that shares its
// loads (IQ2_XXS: a 32-weight sub-block, its 8 bytes in two or three loads; Q2_K: a 16-weight
// sub-block, 16 bytes of quants in four loads, one scale byte, one word of d and dmin), a
// subgroup takes R rows at once (one x load serves them all), and a workgroup walks
// rows_per_wg rows after one codebook fill. Weights decode to the same f32 values as
// matvec.glsl's unit8, f32 accumulation (with CVT, cvt.glsl, each piece's scale multiplies
// its sum once: another order of the same products).
#define WG 128
#include "common.glsl"
#include "quant.glsl"
#include "cvt.glsl"

layout(constant_id = 0) const uint TYPE = 16u; // T_IQ2_XXS or T_Q2_K
// Constant 1, the mode's bits. 2: x is the gate projection, SwiGLU'd with the up projection on
// the load (swiglu.glsl). 4 (with 2, routed down): the MoE's weighted sum too. A workgroup row
// is then a token: it walks the token's k expert columns (expert sel, weight wt), adds
// wt · (W_e · x) over them and the shared expert's output ys, and writes the MoE's output
// (moe_sum.comp's job: one dispatch and one barrier fewer).
layout(constant_id = 1) const uint MODE = 0u;
const bool SUM = (MODE & 4u) != 0u;
// rows per subgroup at once: 2, or 4 with HALO_VK_MOE_R=4 (bits 8-10 of constant 2, cvt.glsl;
// the host then gives a workgroup twice the rows)
const uint R = ((CVT_MODE >> 8) & 7u) == 4u ? 4u : 2u;
const uint RMAX = 4u; // the arrays' size (R is a specialisation constant)
const uint PW = TYPE == T_IQ2_XXS ? 32u : 16u;  // weights per piece (per lane per step)
const uint UNR_ = (CVT_MODE >> 4) & 15u; // pieces a lane loads at once, 1..4 (cvt.glsl)
const uint UNR = UNR_ == 0u ? 1u : UNR_ > 4u ? 4u : UNR_;
// Bit 12 of constant 2 (HALO_VK_MOE_PRE): a subgroup's first loads of weights are issued before
// the waits that do not need them (the codebook fill's barrier; the routed down's staging of
// each expert's SwiGLU'd input), so the round trip to memory for an expert's first pieces
// overlaps them instead of following them: in a decode step each layer's experts come from
// memory, not the L2 a repeated call hits. On the H200 one MoE call took 144 us with it, 149
// without (bench_vk_matvec, session 8).
const bool PRE = ((CVT_MODE >> 12) & 1u) != 0u;

layout(binding = 1) readonly buffer X { float d[]; } XB;
layout(binding = 1) readonly buffer X4 { vec4 d[]; } XB4; // the same, 16 bytes a load
layout(binding = 2) writeonly buffer Out { float d[]; } OUT;
layout(binding = 3) readonly buffer Sel { int d[]; } SEL;
layout(binding = 6) readonly buffer Wt { float d[]; } WT; // SUM: the routing weights
layout(binding = 7) readonly buffer YS { float d[]; } YSB; // SUM: the shared expert's output
layout(push_constant) uniform PC {
    uint K, N, n_cols, groups, type, w_rel, w_chunk_rows, w_row_bytes;
    uint x_off, x_col_stride, x_col_div, out_off, out_col_stride, sel_mode, sel_off, n_expert;
    uint rows_per_wg, col_tile, norm_off;
    float eps;
    int u_delta4;
    float clamp_v;
    uint k_sum, wt_off, ys_off, has_ys;
} pc;
#include "swiglu.glsl"

shared uvec2 grid_s[TYPE == T_IQ2_XXS ? 256 : 1]; // one 8-byte load an entry

uint wld(uint c, uint i) { return W[c].d[i]; }
#include "moe_piece.glsl"

// SWIGLU: the column's SwiGLU'd input is computed once per workgroup into shared memory (each
// subgroup computing it on its own loads did it rows_per_wg / R times a workgroup, an exp and
// a division per input: ~25 M a token at the routed down's shapes). A subgroup then keeps up to
// MAXG row groups (the host keeps rows_per_wg within MAXG x subgroups x R, and K <= 4096).
const uint MAXG = 4u;
shared vec4 xs[SWIGLU ? 1024 : 1];

void main_swiglu(uint wy, uint n_sum, uint wg_row0, uint pieces) {
    uint lane = gl_SubgroupInvocationID, ss = gl_SubgroupSize;
    float tot[MAXG][RMAX];
    [[unroll]] for (uint gi = 0u; gi < MAXG; gi++)
        [[unroll]] for (uint r = 0u; r < R; r++) tot[gi][r] = 0.0;
    // PRE: the first row group's first pieces of this column's expert, loaded before the
    // staging below (used by its first step)
    Raw pre[4][RMAX];
    uint rg_pre = gl_SubgroupID * R;
    bool pre_ok = PRE && rg_pre < pc.rows_per_wg && wg_row0 + rg_pre < pc.N;
    for (uint js = 0u; js < n_sum; js++) {
        uint col = SUM ? wy * n_sum + js : wy;
        uint e = 0u;
        if (pc.sel_mode != 0u) {
            int s = SEL.d[pc.sel_off + col];
            e = s >= 0 && uint(s) < pc.n_expert ? uint(s) : 0u;
        }
        if (pre_ok) {
            uint row0 = wg_row0 + rg_pre, nr = min(R, min(pc.N - row0, pc.rows_per_wg - rg_pre));
            [[unroll]] for (uint r = 0u; r < R; r++) {
                uint c, base;
                wrow(e * pc.N + row0 + min(r, nr - 1u), pc.w_rel, pc.w_chunk_rows,
                     pc.w_row_bytes, c, base);
                [[unroll]] for (uint u = 0u; u < UNR; u++)
                    pre[u][r] = piece_load(c, base, min(lane + u * ss, pieces - 1u));
            }
        }
        uint xb4 = (pc.x_off + col * pc.x_col_stride) >> 2; // groups 1, x_col_div 1: the host
        barrier(); // the previous column's reads are done
        for (uint i = gl_LocalInvocationID.x; i < pc.K / 4u; i += WG)
            xs[i] = swiglu4(XB4.d[xb4 + i], xb4 + i);
        barrier();
        float wt = SUM ? WT.d[pc.wt_off + col] : 1.0;
        [[unroll]] for (uint gi = 0u; gi < MAXG; gi++) {
            uint rg = (gl_SubgroupID + gi * gl_NumSubgroups) * R, row0 = wg_row0 + rg;
            if (rg >= pc.rows_per_wg || row0 >= pc.N) continue; // uniform in the subgroup
            uint nr = min(R, min(pc.N - row0, pc.rows_per_wg - rg));
            uint c[RMAX], base[RMAX];
            float acc[RMAX];
            [[unroll]] for (uint r = 0u; r < R; r++) {
                wrow(e * pc.N + row0 + min(r, nr - 1u), pc.w_rel, pc.w_chunk_rows,
                     pc.w_row_bytes, c[r], base[r]);
                acc[r] = 0.0;
            }
            for (uint p0 = lane; p0 < pieces; p0 += UNR * ss) {
                Raw raw[4][RMAX];
                if (pre_ok && gi == 0u && p0 == lane) {
                    raw = pre;
                } else {
                    [[unroll]] for (uint u = 0u; u < UNR; u++) {
                        uint p = min(p0 + u * ss, pieces - 1u); // past the end: loaded, unused
                        [[unroll]] for (uint r = 0u; r < R; r++)
                            raw[u][r] = piece_load(c[r], base[r], p);
                    }
                }
                [[unroll]] for (uint u = 0u; u < UNR; u++) {
                    uint p = p0 + u * ss;
                    if (p >= pieces) break;
                    [[unroll]] for (uint k = 0u; k < PW / 4u; k++)
                        xv[k] = xs[p * (PW / 4u) + k];
                    if (CVT && TYPE == T_Q2_K) xsum = piece_sum();
                    [[unroll]] for (uint r = 0u; r < R; r++)
                        acc[r] = piece_math(acc[r], raw[u][r], p);
                }
            }
            [[unroll]] for (uint r = 0u; r < R; r++) tot[gi][r] += SUM ? wt * acc[r] : acc[r];
        }
    }
    [[unroll]] for (uint gi = 0u; gi < MAXG; gi++) {
        uint rg = (gl_SubgroupID + gi * gl_NumSubgroups) * R, row0 = wg_row0 + rg;
        if (rg >= pc.rows_per_wg || row0 >= pc.N) continue;
        uint nr = min(R, min(pc.N - row0, pc.rows_per_wg - rg));
        [[unroll]] for (uint r = 0u; r < R; r++) {
            float s = subgroupAdd(tot[gi][r]);
            if (SUM && pc.has_ys != 0u && r < nr) s += YSB.d[pc.ys_off + wy * pc.N + row0 + r];
            if (r < nr && subgroupElect())
                OUT.d[pc.out_off + wy * pc.out_col_stride + row0 + r] = s;
        }
    }
}

void main() {
    uint lane = gl_SubgroupInvocationID, ss = gl_SubgroupSize;
    // one column per workgroup row (its expert with sel); SUM: one token, its k columns
    uint wy = gl_WorkGroupID.y, n_sum = SUM ? pc.k_sum : 1u;
    uint wg_row0 = (gl_WorkGroupID.x + gl_WorkGroupID.z * gl_NumWorkGroups.x) * pc.rows_per_wg;
    uint pieces = pc.K / PW;
    // PRE (not SWIGLU: n_sum is 1): the subgroup's first row group's first pieces, loaded
    // before the codebook fill and its barrier
    Raw pre[4][RMAX];
    uint rg_pre = gl_SubgroupID * R;
    bool pre_ok = PRE && !SWIGLU && rg_pre < pc.rows_per_wg && wg_row0 + rg_pre < pc.N;
    if (pre_ok) {
        uint row0 = wg_row0 + rg_pre, nr = min(R, min(pc.N - row0, pc.rows_per_wg - rg_pre));
        uint e = 0u;
        if (pc.sel_mode != 0u) {
            int s = SEL.d[pc.sel_off + wy];
            e = s >= 0 && uint(s) < pc.n_expert ? uint(s) : 0u;
        }
        [[unroll]] for (uint r = 0u; r < R; r++) {
            uint c, base;
            wrow(e * pc.N + row0 + min(r, nr - 1u), pc.w_rel, pc.w_chunk_rows, pc.w_row_bytes, c,
                 base);
            [[unroll]] for (uint u = 0u; u < UNR; u++)
                pre[u][r] = piece_load(c, base, min(lane + u * ss, pieces - 1u));
        }
    }
    if (TYPE == T_IQ2_XXS) {
        for (uint i = gl_LocalInvocationID.x; i < 256u; i += WG)
            grid_s[i] = uvec2(GRID.d[2u * i], GRID.d[2u * i + 1u]);
        barrier();
    }
    if (SWIGLU) {
        main_swiglu(wy, n_sum, wg_row0, pieces);
        return;
    }
    bool vec = (pc.x_off & 3u) == 0u && (pc.x_col_stride & 3u) == 0u;
    for (uint rg = gl_SubgroupID * R; rg < pc.rows_per_wg; rg += gl_NumSubgroups * R) {
        uint row0 = wg_row0 + rg;
        if (row0 >= pc.N) break;
        uint nr = min(R, min(pc.N - row0, pc.rows_per_wg - rg));
        uint g = row0 / (pc.N / pc.groups); // the host keeps R rows inside one group
        float tot[RMAX];
        [[unroll]] for (uint r = 0u; r < R; r++) tot[r] = 0.0;
        for (uint js = 0u; js < n_sum; js++) {
            uint col = SUM ? wy * n_sum + js : wy;
            uint e = 0u;
            if (pc.sel_mode != 0u) {
                int s = SEL.d[pc.sel_off + col];
                e = s >= 0 && uint(s) < pc.n_expert ? uint(s) : 0u;
            }
            uint xb = pc.x_off + (col / pc.x_col_div) * pc.x_col_stride + g * pc.K;
            uint c[RMAX], base[RMAX];
            float acc[RMAX];
            [[unroll]] for (uint r = 0u; r < R; r++) {
                wrow(e * pc.N + row0 + min(r, nr - 1u), pc.w_rel, pc.w_chunk_rows,
                     pc.w_row_bytes, c[r], base[r]);
                acc[r] = 0.0;
            }
            for (uint p0 = lane; p0 < pieces; p0 += UNR * ss) {
                Raw raw[4][RMAX];
                if (pre_ok && rg == rg_pre && p0 == lane) {
                    raw = pre;
                } else {
                    [[unroll]] for (uint u = 0u; u < UNR; u++) {
                        uint p = min(p0 + u * ss, pieces - 1u); // past the end: loaded, unused
                        [[unroll]] for (uint r = 0u; r < R; r++)
                            raw[u][r] = piece_load(c[r], base[r], p);
                    }
                }
                [[unroll]] for (uint u = 0u; u < UNR; u++) {
                    uint p = p0 + u * ss;
                    if (p >= pieces) break;
                    uint xi = xb + p * PW;
                    [[unroll]] for (uint k = 0u; k < PW / 4u; k++) {
                        uint i = xi + 4u * k;
                        xv[k] = vec ? XB4.d[i >> 2]
                                    : vec4(XB.d[i], XB.d[i + 1u], XB.d[i + 2u], XB.d[i + 3u]);
                    }
                    if (CVT && TYPE == T_Q2_K) xsum = piece_sum();
                    [[unroll]] for (uint r = 0u; r < R; r++)
                        acc[r] = piece_math(acc[r], raw[u][r], p);
                }
            }
            float wt = SUM ? WT.d[pc.wt_off + col] : 1.0;
            [[unroll]] for (uint r = 0u; r < R; r++) tot[r] += SUM ? wt * acc[r] : acc[r];
        }
        [[unroll]] for (uint r = 0u; r < R; r++) {
            float s = subgroupAdd(tot[r]);
            if (SUM && pc.has_ys != 0u && r < nr) s += YSB.d[pc.ys_off + wy * pc.N + row0 + r];
            if (r < nr && subgroupElect())
                OUT.d[pc.out_off + wy * pc.out_col_stride + row0 + r] = s;
        }
    }
}
