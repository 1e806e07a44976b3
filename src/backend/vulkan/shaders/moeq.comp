#version 450
// Fast mode's routed experts of a decode token on int8 activations (vk_moeq.c, HALO_VK_MOEQ):
// GU (IQ2_XXS gate and up of one routed pair, the clamped SwiGLU in registers, h written once)
// and DN (Q2_K down of a token's k pairs, weighted by the routing and + the shared expert's ys:
// the MoE's output). The CUDA backend's moe_dec.cuh in Vulkan terms.
//
// Why: matvec_moe.comp's f32 path decodes every 2-bit weight to a float and multiplies it by an
// f32 activation (gate 45 + up 45 + down 52 us a layer on the H200 for ~42 MB: ~300 GB/s, bound
// by instruction issue as CUDA's ncu found for its f32 kernels). Here the activation is int8
// (each workgroup quantizes what it reads into shared memory first: no quantizing dispatch and
// no barrier of its own) and four weights go into one packed 4x8-bit dot product (OpSDot).
//
// The quantization is halo_quantize_q8_K's (src/quant/quantize.c) bit for bit: 256-value
// blocks, the first value of the largest magnitude gives iscale = -127 / max (a correctly
// rounded division: div_rn, as quant_q8.comp), q = min(nearest_int(iscale · x), 127) ties to
// even, d = 1 / iscale, the 16-value sums bsums (Q2_K's mins). The weights' integer sums are
// then the CPU fast mode's (halo_dot_iq2_xxs / halo_dot_q2_K through halo_kdot) and only the
// float summation order differs.
#extension GL_EXT_spirv_intrinsics : require
#define WG 256
#include "common.glsl"
#include "quant.glsl"

spirv_instruction(extensions = ["SPV_KHR_integer_dot_product"], capabilities = [6019, 6018],
                  id = 4450)
int sdot4x8(int a, int b, spirv_literal int packed_format);
int sdot(uint a, uint b) { return sdot4x8(int(a), int(b), 0); }

layout(constant_id = 0) const uint TYPE = 16u; // GU: T_IQ2_XXS; DN: T_Q2_K
layout(constant_id = 1) const uint MODE = 0u;  // 2 (VK_KEY_SWIGLU >> 6): GU; 0: DN
const bool GU = (MODE & 2u) != 0u;
// Constant 2, bits 16-19 (HALO_VK_MOEQ_VAR, measurement): GU's IQ2_XXS sign masks from a table
// in shared memory (bit 16: one load for 8 weights' masks in place of ~10 integer ops), and the
// codebook in 16 copies side by side (bit 17: lane l reads copy l % 16, so a half-subgroup's
// 8-byte lookups hit 16 different bank pairs whatever the indices; moe_dec.cuh's tables).
// Bit 18 (HOLD): GU's lanes keep their units' x in registers (a lane's units are the same in
// every row: read from shared memory once, not once a row); bit 19 (PIPE, with HOLD): the
// subgroup's first row is loaded before x's quantization and each next row's words before the
// current row's math, so a row's round trip to memory overlaps the work before it. HOLD and
// PIPE take a row in one step of GU_UNR units a lane (K <= 128 · subgroup size; else GU's
// plain loop runs).
layout(constant_id = 2) const uint VAR = 0u;
const uint STAB_ = (VAR >> 16) & (MODE >> 1) & 1u, GREP_ = (VAR >> 17) & (MODE >> 1) & 1u;
const bool STAB = STAB_ != 0u, GREP = GREP_ != 0u;
const uint HOLD_ = (VAR >> 18) & (MODE >> 1) & 1u, PIPE_ = HOLD_ & (VAR >> 19) & 1u;
const bool HOLD = HOLD_ != 0u, PIPE = PIPE_ != 0u; // (glslc's optimizer fails on && of these)
// Bit 20 (DPRE): DN's subgroups load their first row's first pairs' items before h's
// quantization (the weights do not depend on h: their round trip to memory overlaps it); bit 21
// (QB): the quantization loads every round's values before the first round's math (DN's k h
// vectors are 3 rounds: one L2 round trip, not three).
const uint DPRE_ = (VAR >> 20) & 1u & ~(MODE >> 1), QB_ = (VAR >> 21) & 1u;
const bool DPRE = DPRE_ != 0u, QB = QB_ != 0u;
const uint GCOPIES = 1u + 15u * GREP_; // (integer arithmetic: glslc's optimizer failed on a
                                       // select of a boolean constant in an array size)

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
    uint rows_per_wg;
} pc;

// The quantized activation: int8 values in 16-byte granules (in an order that lets a
// subgroup's lanes read consecutive granules: xq_at), one f32 scale per 256 values, one sum
// per 16. GU: x (K <= 4096); DN: the token's k h vectors (k · K <= 16384): the host checks.
const uint XQ_MAX = GU ? 256u : 1024u;
shared uvec4 xq[XQ_MAX];
shared float xd[XQ_MAX / 16u];
shared int xbs[GU ? 1 : XQ_MAX]; // at the granules' places (xq_at)
shared float red_a[WG], red_v[WG];
shared uvec2 grid_s[GU ? 256u * GCOPIES : 1u];
shared uvec2 sign_s[1u + 127u * STAB_];

// Granule of values e .. e + 15 (e % 16 == 0) of vector j. GU's lane reads unit u (32 values:
// granules t = 0, 1) as xq[t · K/32 + u]; DN's lane reads item i (64 values: sub-block q of
// half h of super-block sb, i = 4 sb + 2 h + q) at shift s (values 128 h + 32 s + 16 q of the
// super-block) as xq[j · K/16 + s · K/64 + i]. Either way the lanes of a subgroup read
// consecutive granules at once: no bank conflicts.
uint xq_at(uint j, uint e) {
    if (GU) return ((e >> 4) & 1u) * (pc.K / 32u) + (e >> 5);
    uint r = e & 255u, i = 4u * (e >> 8) + 2u * (r >> 7) + ((r >> 4) & 1u);
    return j * (pc.K / 16u) + ((r >> 5) & 3u) * (pc.K / 64u) + i;
}

// a / b rounded as IEEE division (quant_q8.comp's: the driver's a / b may be a · approx(1/b)).
float div_rn(float a, float b, float rb) {
    precise float q0 = a * rb;
    precise float r = fma(-q0, b, a);
    precise float q = fma(r, rb, q0);
    return q;
}

// Quantizes n_vec vectors of K values at vec4 src4 (consecutive) into xq/xd/xbs. A thread takes
// 16 values a round; a block's 16 threads find its max, each quantizes its own 16. Every
// invocation calls it (barriers).
const uint QROUNDS = XQ_MAX / WG; // rounds at most (QB's registers)

void quantize(uint src4, uint n_vec) {
    uint tid = gl_LocalInvocationID.x, nt = n_vec * pc.K / 16u;
    vec4 pre[QB ? QROUNDS : 1][4];
    if (QB)
        [[unroll]] for (uint r = 0u; r < QROUNDS; r++) {
            uint t = r * WG + tid;
            if (t < nt)
                [[unroll]] for (uint i = 0u; i < 4u; i++) pre[r][i] = XB4.d[src4 + 4u * t + i];
        }
    for (uint t0 = 0u; t0 < nt; t0 += WG) {
        uint t = t0 + tid, p = t & 15u;
        bool on = t < nt;
        float v[16];
        float amax = 0.0, mx = 0.0;
        if (on) {
            [[unroll]] for (uint i = 0u; i < 4u; i++) {
                vec4 a = QB ? pre[t0 / WG][i] : XB4.d[src4 + 4u * t + i];
                v[4u * i] = a.x, v[4u * i + 1u] = a.y, v[4u * i + 2u] = a.z, v[4u * i + 3u] = a.w;
            }
            // the CPU's scan: the first value of the largest magnitude
            [[unroll]] for (uint i = 0u; i < 16u; i++)
                if (abs(v[i]) > amax) amax = abs(v[i]), mx = v[i];
        }
        red_a[tid] = amax;
        red_v[tid] = mx;
        barrier();
        if (on) {
            amax = 0.0, mx = 0.0;
            for (uint i = tid - p; i < tid - p + 16u; i++) // the block's threads, in order
                if (red_a[i] > amax) amax = red_a[i], mx = red_v[i];
            uvec4 w = uvec4(0u);
            int bs = 0;
            float d = 0.0;
            if (amax != 0.0) {
                float iscale = div_rn(-127.0, mx, 1.0 / mx);
                [[unroll]] for (uint i = 0u; i < 16u; i++) {
                    precise float s = iscale * v[i];
                    int q = min(int(roundEven(s)), 127);
                    bs += q;
                    w[i / 4u] |= (uint(q) & 0xffu) << (8u * (i % 4u));
                }
                d = div_rn(1.0, iscale, 1.0 / iscale);
            }
            uint e = 16u * t, j = e / pc.K, at = xq_at(j, e - j * pc.K);
            xq[at] = w;
            if (!GU) xbs[at] = bs;
            if (p == 0u) xd[t / 16u] = d;
        }
        barrier();
    }
}

uint expert(uint pair) {
    int s = SEL.d[pc.sel_off + pair];
    return s >= 0 && uint(s) < pc.n_expert ? uint(s) : 0u;
}

// ---- GU: IQ2_XXS units of 32 weights (a 66-byte super-block holds d and 8 of them) ----

const uint UPW = 8u; // chunk index meaning the up weight (binding 8)
uint wld(uint c, uint i) {
    if (c == UPW) return WU.d[i];
    return W[c].d[i];
}

// Unit u of the row at byte `row` of chunk c: (d's word, the 4 grid indices, the signs+scale
// word, whether d is the word's high half). Its 8 bytes sit at 2 mod 4 in an even super-block
// (three words), aligned in an odd one (two: the third load repeats the second).
uvec4 iq2_load(uint c, uint row, uint u) {
    uint bb = row + (u >> 3) * 66u, b = bb + 2u + 8u * (u & 7u), w = b >> 2;
    bool mid = (b & 2u) != 0u; // the 8 bytes start mid-word
    uint w0 = wld(c, w), w1 = wld(c, w + 1u), w2 = wld(c, w + (mid ? 2u : 1u));
    uint dw = wld(c, bb >> 2);
    uint idx4 = mid ? (w0 >> 16) | (w1 << 16) : w0, aux = mid ? (w1 >> 16) | (w2 << 16) : w1;
    return uvec4(dw, idx4, aux, bb & 2u);
}

// 0x01 in byte k where bit k of the 4 bits b is set (bit k to bit 8k: no two meet)
uint ones4(uint b) { return (b * 0x00204081u) & 0x01010101u; }

// The unit's d_w · d_x · Σ w · q_x. A weight byte g (< 128) with its sign: (g ^ m) + m1 is -g
// where m = 0xff (m1 = 1): two's complement per byte, no carry crosses a byte.
// x of unit u (its 32 int8 values in 8 words) from the shared activation.
void unit_x(uint u, out uint xw[8]) {
    uvec4 xa = xq[u], xb = xq[pc.K / 32u + u];
    xw = uint[8](xa.x, xa.y, xa.z, xa.w, xb.x, xb.y, xb.z, xb.w);
}

float iq2_dot_x(uvec4 r, uint xw[8], float xdu) {
    int s = 0;
    uint copy = GREP ? gl_SubgroupInvocationID & 15u : 0u;
    [[unroll]] for (uint l = 0u; l < 4u; l++) {
        uvec2 g = grid_s[((r.y >> (8u * l)) & 0xffu) * GCOPIES + copy];
        uint s7 = (r.z >> (7u * l)) & 127u;
        uvec2 m; // 0xff in the bytes of negated weights
        if (STAB) {
            m = sign_s[s7];
        } else {
            uint signs = s7 | ((uint(bitCount(s7)) & 1u) << 7);
            m = uvec2(ones4(signs & 15u), ones4(signs >> 4)) * 0xffu;
        }
        s += sdot((g.x ^ m.x) + (m.x & 0x01010101u), xw[2u * l]);
        s += sdot((g.y ^ m.y) + (m.y & 0x01010101u), xw[2u * l + 1u]);
    }
    int ls = 2 * int(r.z >> 28) + 1;
    float dw = f16v((r.x >> (r.w * 8u)) & 0xffffu) * 0.125;
    return dw * xdu * float(s * ls);
}

float iq2_dot(uvec4 r, uint u) {
    uint xw[8];
    unit_x(u, xw);
    return iq2_dot_x(r, xw, xd[u >> 3]);
}

const uint GU_UNR = 4u; // units of each of gate and up a lane loads before their math

void gu_load(uint e, uint row, out uvec4 rg[GU_UNR], out uvec4 ru[GU_UNR]) {
    uint lane = gl_SubgroupInvocationID, ss = gl_SubgroupSize, units = pc.K / 32u, c, base;
    wrow(e * pc.N + row, pc.w_rel, pc.w_chunk_rows, pc.w_row_bytes, c, base);
    uint ubase = pc.u_rel + (e * pc.N + row) * pc.w_row_bytes;
    [[unroll]] for (uint i = 0u; i < GU_UNR; i++) {
        uint u = min(lane + i * ss, units - 1u); // past the end: loaded, unused
        rg[i] = iq2_load(c, base, u);
        ru[i] = iq2_load(UPW, ubase, u);
    }
}

void gu_write(uint pair, uint row, float sg, float su) {
    float g = subgroupAdd(sg), u = subgroupAdd(su);
    if (subgroupElect()) { // moe_swiglu.comp's expression
        if (pc.clamp_v > 0.0) {
            g = min(g, pc.clamp_v);
            u = clamp(u, -pc.clamp_v, pc.clamp_v);
        }
        OUT.d[pc.out_off + pair * pc.out_col_stride + row] = g / (1.0 + exp(-g)) * u;
    }
}

void tables_fill() {
    for (uint i = gl_LocalInvocationID.x; i < 256u * GCOPIES; i += WG)
        grid_s[i] = uvec2(GRID.d[2u * (i / GCOPIES)], GRID.d[2u * (i / GCOPIES) + 1u]);
    if (STAB)
        for (uint c = gl_LocalInvocationID.x; c < 128u; c += WG) {
            uint signs = c | ((uint(bitCount(c)) & 1u) << 7);
            sign_s[c] = uvec2(ones4(signs & 15u), ones4(signs >> 4)) * 0xffu;
        }
}

// HOLD (and PIPE): a row is one step of GU_UNR units a lane, the lane's x in registers.
void main_gu_hold(uint pair, uint e, uint row0, uint row1) {
    uint lane = gl_SubgroupInvocationID, ss = gl_SubgroupSize, units = pc.K / 32u;
    uint row = row0 + gl_SubgroupID, nsg = gl_NumSubgroups, tok = pair / pc.k;
    uvec4 rg[GU_UNR], ru[GU_UNR];
    if (PIPE && row < row1) gu_load(e, row, rg, ru); // before the quantization's barriers
    tables_fill();
    quantize(pc.x_off4 + tok * pc.x_col_stride4, 1u);
    uint xw[GU_UNR][8];
    float xdu[GU_UNR];
    [[unroll]] for (uint i = 0u; i < GU_UNR; i++) {
        uint u = min(lane + i * ss, units - 1u);
        unit_x(u, xw[i]);
        xdu[i] = xd[u >> 3];
    }
    for (; row < row1; row += nsg) {
        uvec4 ng[GU_UNR], nu[GU_UNR];
        if (PIPE && row + nsg < row1) gu_load(e, row + nsg, ng, nu);
        if (!PIPE) gu_load(e, row, rg, ru);
        float sg = 0.0, su = 0.0;
        [[unroll]] for (uint i = 0u; i < GU_UNR; i++) {
            if (lane + i * ss >= units) break;
            sg += iq2_dot_x(rg[i], xw[i], xdu[i]);
            su += iq2_dot_x(ru[i], xw[i], xdu[i]);
        }
        if (PIPE) {
            rg = ng;
            ru = nu;
        }
        gu_write(pair, row, sg, su);
    }
}

void main_gu() {
    uint lane = gl_SubgroupInvocationID, ss = gl_SubgroupSize;
    uint pair = gl_WorkGroupID.y, tok = pair / pc.k, e = expert(pair);
    uint row0 = gl_WorkGroupID.x * pc.rows_per_wg;
    uint row1 = min(row0 + pc.rows_per_wg, pc.N), units = pc.K / 32u;
    if (HOLD && units <= GU_UNR * ss) { // uniform in the workgroup
        main_gu_hold(pair, e, row0, row1);
        return;
    }
    tables_fill();
    quantize(pc.x_off4 + tok * pc.x_col_stride4, 1u); // its barriers cover the grid's fill
    for (uint row = row0 + gl_SubgroupID; row < row1; row += gl_NumSubgroups) {
        uint c, base;
        wrow(e * pc.N + row, pc.w_rel, pc.w_chunk_rows, pc.w_row_bytes, c, base);
        uint ubase = pc.u_rel + (e * pc.N + row) * pc.w_row_bytes;
        float sg = 0.0, su = 0.0;
        for (uint u0 = lane; u0 < units; u0 += GU_UNR * ss) {
            uvec4 rg[GU_UNR], ru[GU_UNR];
            [[unroll]] for (uint i = 0u; i < GU_UNR; i++) {
                uint u = min(u0 + i * ss, units - 1u); // past the end: loaded, unused
                rg[i] = iq2_load(c, base, u);
                ru[i] = iq2_load(UPW, ubase, u);
            }
            [[unroll]] for (uint i = 0u; i < GU_UNR; i++) {
                uint u = u0 + i * ss;
                if (u >= units) break;
                sg += iq2_dot(rg[i], u);
                su += iq2_dot(ru[i], u);
            }
        }
        gu_write(pair, row, sg, su);
    }
}

// ---- DN: Q2_K items of 64 weights (an 84-byte super-block: scales[16] qs[64] d dmin) ----

// Item i of a row (sub-block q of half h of super-block sb): its 4 quant words (bytes
// 32 h + 16 q .. + 15 of qs: 2 bits each at shifts 0, 2, 4, 6 for its 4 groups of 16 values),
// the 2 words holding its 4 scale bytes (8 h + 2 s + q), d and dmin.
struct Q2 {
    uvec4 q;
    uvec2 sc;
    uint dm;
};

Q2 q2_load(uint c, uint row, uint i) {
    uint bb = row + (i >> 2) * 84u, h = (i >> 1) & 1u, q = i & 1u;
    uint qw = (bb + 16u + 32u * h + 16u * q) >> 2, sw = (bb + 8u * h) >> 2;
    Q2 r;
    r.q = uvec4(W[c].d[qw], W[c].d[qw + 1u], W[c].d[qw + 2u], W[c].d[qw + 3u]);
    r.sc = uvec2(W[c].d[sw], W[c].d[sw + 1u]);
    r.dm = W[c].d[(bb + 80u) >> 2];
    return r;
}

// The item's d_x · (d · Σ sc · Σ q · q_x - dmin · Σ m · bsum) against vector j.
float q2_dot(Q2 r, uint j, uint i) {
    uint sb = i >> 2, h = (i >> 1) & 1u, q = i & 1u;
    int isum = 0, msum = 0;
    [[unroll]] for (uint s = 0u; s < 4u; s++) {
        uvec4 x = xq[j * (pc.K / 16u) + s * (pc.K / 64u) + i];
        uint sh = 2u * s;
        int dot = sdot((r.q.x >> sh) & 0x03030303u, x.x) + sdot((r.q.y >> sh) & 0x03030303u, x.y) +
                  sdot((r.q.z >> sh) & 0x03030303u, x.z) + sdot((r.q.w >> sh) & 0x03030303u, x.w);
        uint sc = (r.sc[s >> 1] >> (8u * (2u * (s & 1u) + q))) & 0xffu;
        isum += int(sc & 15u) * dot;
        msum += int(sc >> 4) * xbs[j * (pc.K / 16u) + s * (pc.K / 64u) + i];
    }
    vec2 dm = unpackHalf2x16(r.dm);
    return xd[j * (pc.K / 256u) + sb] * (dm.x * float(isum) - dm.y * float(msum));
}

const uint DN_JU = 3u; // pairs whose items a lane loads before their math

void main_dn() {
    uint lane = gl_SubgroupInvocationID, ss = gl_SubgroupSize;
    uint tok = gl_WorkGroupID.y, pair0 = tok * pc.k;
    uint row0 = gl_WorkGroupID.x * pc.rows_per_wg;
    uint row1 = min(row0 + pc.rows_per_wg, pc.N), items = pc.K / 64u;
    uint first = row0 + gl_SubgroupID;
    Q2 pre[DN_JU]; // DPRE: the first row's first step, before the quantization's barriers
    if (DPRE && first < row1)
        [[unroll]] for (uint jj = 0u; jj < DN_JU; jj++) {
            uint c, base;
            wrow(expert(pair0 + min(jj, pc.k - 1u)) * pc.N + first, pc.w_rel, pc.w_chunk_rows,
                 pc.w_row_bytes, c, base);
            pre[jj] = q2_load(c, base, min(lane, items - 1u));
        }
    quantize(pc.x_off4 + pair0 * pc.x_col_stride4, pc.k);
    for (uint row = first; row < row1; row += gl_NumSubgroups) {
        float tot = 0.0;
        for (uint j0 = 0u; j0 < pc.k; j0 += DN_JU) {
            uint c[DN_JU], base[DN_JU];
            float wt[DN_JU];
            [[unroll]] for (uint jj = 0u; jj < DN_JU; jj++) {
                uint j = min(j0 + jj, pc.k - 1u); // past the end: loaded, unused
                wrow(expert(pair0 + j) * pc.N + row, pc.w_rel, pc.w_chunk_rows, pc.w_row_bytes,
                     c[jj], base[jj]);
                wt[jj] = WT.d[pc.wt_off + pair0 + j];
            }
            for (uint i = lane; i < items; i += ss) {
                Q2 r[DN_JU];
                if (DPRE && row == first && j0 == 0u && i == lane)
                    r = pre;
                else
                    [[unroll]] for (uint jj = 0u; jj < DN_JU; jj++)
                        r[jj] = q2_load(c[jj], base[jj], i);
                [[unroll]] for (uint jj = 0u; jj < DN_JU; jj++)
                    if (j0 + jj < pc.k) tot += wt[jj] * q2_dot(r[jj], j0 + jj, i);
            }
        }
        float s = subgroupAdd(tot);
        if (pc.has_ys != 0u) s += YSB.d[pc.ys_off + tok * pc.N + row];
        if (subgroupElect()) OUT.d[pc.out_off + tok * pc.out_col_stride + row] = s;
    }
}

void main() {
    if (GU)
        main_gu();
    else
        main_dn();
}
