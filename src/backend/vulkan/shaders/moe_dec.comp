#version 450
// One decode token's routed experts in two dispatches (HALO_VK_MOE_DEC, vk_moe_dec.c): gate and
// up of every routed pair with the clamped SwiGLU in registers (GU), then down with the weighted
// sum and the shared expert's output (DN). The design of the CUDA backend's moe_dec.cuh:
//
// matvec_moe.comp gives a workgroup 8 rows of one pair: each 128-lane workgroup fills the 2 KB
// IQ2_XXS codebook and waits on a barrier for ~8 KB of weights, and a subgroup issues two rows'
// loads, decodes them and only then asks for more, so on cold weights few bytes are in flight
// (session 8: a routed gate or up 42 us for 13 MB alone, ~110 us inside the decode step). Here
// a subgroup stays on one pair and walks rows r, r + S, r + 2S, ... (S = all subgroups given to
// the pair), a lane taking pieces lane + i·ss (U of them a step: a 2048-wide Q2_K row is one
// step at ss 32, a 4096-wide IQ2_XXS gate/up pair two) of each row, and a step's loads are
// issued before the step before it is decoded (software pipelining: while one is decoded the
// next is in flight); the codebook fill and x's staging are paid once for the subgroup's many
// rows and the first step's loads go out before their barrier. GU: the same lane holds the
// gate and the up piece of a row (one x read for both) and the lane that owns the row's sums
// writes silu(min(g, c))·clamp(u, ±c): no SwiGLU dispatch, g and u never stored. DN: a
// subgroup walks rows, and for each row the k pairs of its token (expert sel, weight wt), so
// the weighted sum over the experts needs no other dispatch: out = Σ_j wt_j (W_j · h_j) + ys
// (moe_sum.comp's expression).
//
// Measured on the H200 (request vk-moe-1, bench/vulkan/RESULTS.md): down with the sum 42.5 us a
// cold call against matvec_moe.comp's 47.4, but gate/up 108 us against its 2 x 42, so the path
// is off by default; since then gate/up keeps half the pieces live and reads x swizzled (not
// yet run on a GPU).
//
// The pieces decode as matvec_moe.comp's (moe_piece.glsl: the same f32 values, f32
// accumulation; a lane's pieces in order, then subgroupAdd).
#define WG 128
#include "common.glsl"
#include "quant.glsl"
#include "cvt.glsl"

layout(constant_id = 0) const uint TYPE = 16u; // T_IQ2_XXS or T_Q2_K
// Constant 1: 2 (VK_KEY_SWIGLU >> 6) GU; 0 DN.
layout(constant_id = 1) const uint MODE = 0u;
const bool GU = (MODE & 2u) != 0u;
const uint PW = TYPE == T_IQ2_XXS ? 32u : 16u; // weights per piece
// Pieces of a row a lane loads in one step. GU: 2 (a step holds gate and up, and the next
// step's: with 4, as DN, request vk-moe-1 measured the gate/up dispatch at 108 us against 2 x 42
// for matvec_moe.comp's, which keeps half as many pieces live: taken as register spills).
const uint U = GU ? 2u : 4u;
const uint UMAX = 4u; // the arrays' size (U comes from a specialisation constant)

layout(binding = 1) readonly buffer X4 { vec4 d[]; } XB4; // GU: x; DN: h (16-byte aligned)
layout(binding = 2) writeonly buffer Out { float d[]; } OUT;
layout(binding = 3) readonly buffer Sel { int d[]; } SEL;
layout(binding = 6) readonly buffer Wt { float d[]; } WT;  // DN: the routing weights
layout(binding = 7) readonly buffer YS { float d[]; } YSB; // DN: the shared expert's output
layout(binding = 8) readonly buffer WUp { uint d[]; } WU;  // GU: the up weight (one range)
layout(push_constant) uniform PC {
    uint K, N, w_rel, w_chunk_rows, w_row_bytes, u_rel;
    uint x_off4, x_col_stride4, k, sel_off, n_expert, out_off, out_col_stride;
    uint wt_off, ys_off, has_ys;
    float clamp_v;
} pc;

shared uvec2 grid_s[TYPE == T_IQ2_XXS ? 256 : 1];
shared vec4 xs[GU ? 1024 : 1]; // GU: the token's x (K <= 4096, the host checks)
// GU: x's vec4 t of piece p sits at slot t ^ (p % PV) of the piece's PV slots. The lanes of a
// subgroup read pieces 128 bytes apart (IQ2_XXS), so in order each 16-byte read of a quarter
// warp (8 lanes) would hit the same four banks: 8-way conflicts, ~8 x 8 shared-memory
// wavefronts a piece where 8 do (an estimate from NVIDIA's bank rules, ~48 us of the gate/up
// dispatch's 108 in request vk-moe-1; not measured). Swizzled, the 8 lanes' slots differ.
const uint PV = PW / 4u; // vec4s a piece
uint xs_at(uint i) { return (i & ~(PV - 1u)) | ((i ^ (i / PV)) & (PV - 1u)); }

// h (GU's output, DN's input) in an order for DN's reads: DN's lane l reads pieces l + 32 i of
// 16 values (Q2_K), 64 bytes apart in row order, so one 16-byte load of a subgroup spans 2 KB
// (16 cache lines where 4 would do: by the same estimate ~24 us of the down dispatch's 42.5).
// Vec4 t of piece p is stored at vec4 ((p / 32) · 4 + t) · 32 + p % 32 instead: the 32 lanes'
// loads of one (i, t) are 512 consecutive bytes (at a subgroup of 32; any size reads right).
// The host keeps n_ff a multiple of 512.
const uint HG = 32u, HPV = 4u; // lanes a group; vec4s of a down piece (Q2_K: 16 values)
uint h_vec(uint p, uint t) { return ((p / HG) * HPV + t) * HG + p % HG; }
uint h_at(uint e) { return 4u * h_vec(e / (4u * HPV), (e / 4u) % HPV) + e % 4u; }

const uint UPW = 8u; // chunk index meaning the up weight (binding 8)
uint wld(uint c, uint i) {
    if (c == UPW) return WU.d[i];
    return W[c].d[i];
}
#include "moe_piece.glsl"

uint expert(uint pair) {
    int s = SEL.d[pc.sel_off + pair];
    return s >= 0 && uint(s) < pc.n_expert ? uint(s) : 0u;
}

// Step s of this subgroup: item s / nch (GU: a row; DN: a row and one of its k pairs), chunk
// s % nch of the row's pieces.
struct Pos {
    uint row, j, ch;
};

Pos step_pos(uint s, uint nch, uint sg0, uint stride) {
    Pos q;
    q.ch = s % nch;
    uint it = s / nch;
    q.j = GU ? 0u : it % pc.k;
    q.row = sg0 + (GU ? it : it / pc.k) * stride;
    return q;
}

// e_gu: GU's expert (one pair a workgroup), looked up once.
void load_step(Pos q, uint pair0, uint e_gu, uint pieces, out Raw g[UMAX], out Raw u[UMAX]) {
    uint lane = gl_SubgroupInvocationID, ss = gl_SubgroupSize;
    uint e = GU ? e_gu : expert(pair0 + q.j), c, base;
    wrow(e * pc.N + q.row, pc.w_rel, pc.w_chunk_rows, pc.w_row_bytes, c, base);
    uint ubase = pc.u_rel + (e * pc.N + q.row) * pc.w_row_bytes;
    [[unroll]] for (uint i = 0u; i < U; i++) {
        uint p = min(q.ch * U * ss + i * ss + lane, pieces - 1u); // past the end: unused
        g[i] = piece_load(c, base, p);
        if (GU) u[i] = piece_load(UPW, ubase, p);
    }
}

void main() {
    uint lane = gl_SubgroupInvocationID, ss = gl_SubgroupSize;
    uint wy = gl_WorkGroupID.y; // GU: the pair; DN: the token
    uint pair0 = GU ? wy : wy * pc.k;
    uint sg0 = gl_WorkGroupID.x * gl_NumSubgroups + gl_SubgroupID;
    uint stride = gl_NumWorkGroups.x * gl_NumSubgroups;
    uint pieces = pc.K / PW, nch = (pieces + U * ss - 1u) / (U * ss);
    uint rows = sg0 < pc.N ? (pc.N - sg0 + stride - 1u) / stride : 0u;
    uint steps = rows * nch * (GU ? 1u : pc.k);
    uint e_gu = GU ? expert(pair0) : 0u;
    Raw cg[UMAX], cu[UMAX];
    if (steps > 0u) load_step(step_pos(0u, nch, sg0, stride), pair0, e_gu, pieces, cg, cu);
    if (TYPE == T_IQ2_XXS) {
        for (uint i = gl_LocalInvocationID.x; i < 256u; i += WG)
            grid_s[i] = uvec2(GRID.d[2u * i], GRID.d[2u * i + 1u]);
    }
    uint xb4 = pc.x_off4 + (GU ? wy / pc.k : 0u) * pc.x_col_stride4;
    if (GU)
        for (uint i = gl_LocalInvocationID.x; i < pc.K / 4u; i += WG) xs[xs_at(i)] = XB4.d[xb4 + i];
    if (TYPE == T_IQ2_XXS || GU) barrier();
    float ag = 0.0, au = 0.0, tot = 0.0;
    for (uint s = 0u; s < steps; s++) {
        Pos q = step_pos(s, nch, sg0, stride);
        Raw ng[UMAX], nu[UMAX];
        if (s + 1u < steps)
            load_step(step_pos(s + 1u, nch, sg0, stride), pair0, e_gu, pieces, ng, nu);
        uint hx4 = GU ? 0u : pc.x_off4 + (pair0 + q.j) * pc.x_col_stride4;
        [[unroll]] for (uint i = 0u; i < U; i++) {
            uint p = q.ch * U * ss + i * ss + lane;
            if (p >= pieces) break;
            [[unroll]] for (uint t = 0u; t < PW / 4u; t++)
                xv[t] = GU ? xs[xs_at(p * PV + t)] : XB4.d[hx4 + h_vec(p, t)];
            if (CVT && TYPE == T_Q2_K) xsum = piece_sum();
            ag = piece_math(ag, cg[i], p);
            if (GU) au = piece_math(au, cu[i], p);
        }
        cg = ng;
        cu = nu;
        if (q.ch + 1u < nch) continue; // uniform in the subgroup
        if (GU) {
            float g = subgroupAdd(ag), u = subgroupAdd(au);
            if (subgroupElect()) {
                if (pc.clamp_v > 0.0) {
                    g = min(g, pc.clamp_v);
                    u = clamp(u, -pc.clamp_v, pc.clamp_v);
                }
                OUT.d[pc.out_off + wy * pc.out_col_stride + h_at(q.row)] = g / (1.0 + exp(-g)) * u;
            }
            ag = au = 0.0;
        } else {
            tot += WT.d[pc.wt_off + pair0 + q.j] * ag;
            ag = 0.0;
            if (q.j + 1u < pc.k) continue;
            float s = subgroupAdd(tot);
            if (pc.has_ys != 0u) s += YSB.d[pc.ys_off + wy * pc.N + q.row];
            if (subgroupElect()) OUT.d[pc.out_off + wy * pc.out_col_stride + q.row] = s;
            tot = 0.0;
        }
    }
}
