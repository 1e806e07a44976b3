#version 450
// Fast mode's Q8_0 projections of a few columns (decode) on int8 activations: each workgroup
// quantizes the x its rows need into shared memory (ggml's quantize_row_q8_0 bit for bit,
// q8_round.glsl: what the CPU backend's fast mode computes), after the projection's fold (an RMS
// norm, the MoE's SwiGLU, the inverse rope), then each 32-weight block of a row is summed by 9
// packed int8 dot products (OpSDot, as matmul_q8.comp) and scaled once: d_w · d_x · sum. So the
// integer sums are the CPU's and only the float summation order differs. No quantizing dispatch
// and no barrier before it (matmul_q8.comp's way costs one of each per projection, more than the
// integer dots saved at decode): x is a few KB, L2-resident, read again by every workgroup.
//
// Why not f32 (matvec_q8.comp): ~5 instructions a weight (byte to float, scale, FMA, x loads),
// against ~1 here (a word load, a shared load and a dot per 4 weights). One column per workgroup
// row (a decode step has one); rows_per_wg rows a workgroup, R of them a subgroup at once (each x
// word from shared memory serves R rows, each lane has 9R weight loads in flight).
//
// Layout trick: a lane takes one block (34 bytes: d, then 32 int8) and loads the 9 aligned words
// that cover it (rows are 4-byte aligned: K % 64 == 0). An even block's words hold [d d q0 q1]
// [q2..q5] ... [q30 q31 d' d'], an odd one's [q30' q31' d d] [q0..q3] ... [q28..q31]. The
// quantized x is stored per block as the same 9 words with zeros where the weight words hold
// anything but this block's quants, so the 9 dots need no realignment of the weight bytes.
#extension GL_EXT_spirv_intrinsics : require
#define WG 128
#include "common.glsl"
#include "quant.glsl"
#include "q8_round.glsl"

spirv_instruction(extensions = ["SPV_KHR_integer_dot_product"], capabilities = [6019, 6018],
                  id = 4450)
int sdot4x8(int a, int b, spirv_literal int packed_format);

// Constant 0: rows a subgroup takes at once (bits 0-2: 1 or 2; the arrays keep room for 4); bit 3: the next block's
// weight words are loaded before the current one is summed (twice the registers); bit 4
// (STAGE): a subgroup's rows go through shared memory, see below.
layout(constant_id = 0) const uint VARIANT = 2u;
const uint R = VARIANT & 7u;
const bool PIPE = (VARIANT & 8u) != 0u;
const bool STAGE = (VARIANT & 16u) != 0u;
// Bit 5 (WIDE, not with STAGE): the whole workgroup takes each row group, its lanes the blocks
// (few rows: q_a's 1024, kv's 512; a subgroup per row group left most of the GPU idle, each
// walking a long row one dependent load after another).
const bool WIDE = (VARIANT & 32u) != 0u && !STAGE;
// Constant 1: the fold, as matvec_q8.comp's MODE (1 norm, 2 SwiGLU, 8 rope).
layout(constant_id = 1) const uint MODE = 0u;
const bool NORM = (MODE & 1u) != 0u;

layout(binding = 0) readonly buffer WeightBuf4 { uvec4 d[]; } W4[8]; // STAGE: 16-byte loads
layout(binding = 1) readonly buffer X { float d[]; } XB;
layout(binding = 1) readonly buffer X4 { vec4 d[]; } XB4;
layout(binding = 2) writeonly buffer Out { float d[]; } OUT;
layout(binding = 4) readonly buffer G4B { vec4 d[]; } G4;
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

// K <= 8192 (the host checks): 256 blocks of 9 words (a stride of 9 words puts the 32 lanes'
// loads of one word index on 32 different banks) and their scales (d_x as the CPU's block
// stores it: rounded to f16).
const uint MAXB = 256u;
shared uint xq[MAXB * 9u];
shared float xs[MAXB];

uint col, xb, g_k;
bool vec;

// x[xb + i .. + 3] after the fold (not the norm: that needs the whole column's sum first).
vec4 x4(uint i) {
    vec4 v;
    if (vec) v = XB4.d[(xb + i) >> 2];
    else v = vec4(XB.d[xb + i], XB.d[xb + i + 1u], XB.d[xb + i + 2u], XB.d[xb + i + 3u]);
    if (SWIGLU) v = swiglu4(v, (xb + i) >> 2); // vec: the host asks for SWIGLU only then
    return v;
}

// Quantizes block b of the column (32 values) into xq / xs; r: the norm's scale.
void quant_block(uint b, float r) {
    vec4 v[8];
    [[unroll]] for (uint k = 0u; k < 8u; k++) v[k] = x4(32u * b + 4u * k);
    if (ROPE) {
        [[unroll]] for (uint k = 0u; k < 8u; k += 2u) rope8(v[k], v[k + 1u], g_k + 32u * b + 4u * k, col);
    }
    if (NORM) { // w · (x · r), as the CPU's rms norm
        uint gi = (pc.norm_off >> 2) + 8u * b;
        [[unroll]] for (uint k = 0u; k < 8u; k++) v[k] = G4.d[gi + k] * (v[k] * r);
    }
    float amax = 0.0;
    [[unroll]] for (uint k = 0u; k < 8u; k++) {
        vec4 a = abs(v[k]);
        amax = max(amax, max(max(a.x, a.y), max(a.z, a.w)));
    }
    float d = div_rn(amax, 127.0);
    float id = d != 0.0 ? div_rn(1.0, d) : 0.0;
    uint p[8]; // q[4k .. 4k + 3]
    [[unroll]] for (uint k = 0u; k < 8u; k++)
        p[k] = q8_byte(v[k].x, id) | q8_byte(v[k].y, id) << 8 | q8_byte(v[k].z, id) << 16 |
               q8_byte(v[k].w, id) << 24;
    uint o = 9u * b;
    if ((b & 1u) == 0u) { // [0 0 q0 q1] [q2..q5] ... [q30 q31 0 0]
        xq[o] = p[0] << 16;
        [[unroll]] for (uint k = 1u; k < 8u; k++) xq[o + k] = (p[k - 1u] >> 16) | (p[k] << 16);
        xq[o + 8u] = p[7] >> 16;
    } else { // [0 0 0 0] [q0..q3] ... [q28..q31]
        xq[o] = 0u;
        [[unroll]] for (uint k = 0u; k < 8u; k++) xq[o + 1u + k] = p[k];
    }
    xs[b] = unpackHalf2x16(f16_bits_rne(d)).x;
}

// The invocation's work: its row groups of R rows (rg: gl_SubgroupID, + gl_NumSubgroups, ...),
// the blocks of a row a lane visits (per_row), the current group's rows and weight words (two
// slots with PIPE: the next block's words load while the current ones are summed).
uint lane, ss, row0, nbk, per_row, base[4], cw[4], n_it;
uint grp, ngrp; // this lane group (a subgroup, or WIDE the workgroup) and how many
uint wv[2][4][9];
float acc[4];

// Points base / cw at row group rg's rows (rows past the end repeat the last one; their sums
// are not written) and returns how many are real.
uint rows_of(uint rg) {
    uint first = row0 + rg * R;
    [[unroll]] for (uint r = 0u; r < R; r++) {
        uint o = min(first + r, pc.N - 1u);
        wrow(o, pc.w_rel, pc.w_chunk_rows, pc.w_row_bytes, cw[r], base[r]);
    }
    return first < pc.N ? min(R, pc.N - first) : 0u;
}

// The 9 weight words of block b of each row into slot s (lanes past the row's blocks load none).
void load(const uint s, uint b) {
    if (b >= nbk) return;
    [[unroll]] for (uint r = 0u; r < R; r++) {
        uint w = (base[r] + 34u * b) >> 2;
        [[unroll]] for (uint j = 0u; j < 9u; j++) wv[s][r][j] = W[cw[r]].d[w + j];
    }
}

// Block b of every row from slot s: 9 dots a row against the block's x words, d_w · d_x once.
void dots(const uint s, uint b) {
    if (b >= nbk) return;
    uint o = 9u * b;
    float dx = xs[b];
    int xw[9];
    [[unroll]] for (uint j = 0u; j < 9u; j++) xw[j] = int(xq[o + j]);
    [[unroll]] for (uint r = 0u; r < R; r++) {
        int sum = 0;
        [[unroll]] for (uint j = 0u; j < 9u; j++) sum = sdot4x8(int(wv[s][r][j]), xw[j], 0) + sum;
        uint w0 = wv[s][r][0];
        float dw = f16v((b & 1u) != 0u ? w0 >> 16 : w0 & 0xffffu);
        acc[r] += float(sum) * (dw * dx);
    }
}

uint cur_n, next_n;

// WIDE: the subgroups' partial sums of up to 4 rows.
shared float part[WIDE ? 4u * 32u : 1u];

// Row group rg's sums out (n real rows), the accumulators cleared.
void finish(uint rg, uint n) {
    if (WIDE) {
        [[unroll]] for (uint r = 0u; r < R; r++) {
            float t = subgroupAdd(acc[r]);
            if (subgroupElect() && gl_SubgroupID < 32u) part[r * 32u + gl_SubgroupID] = t;
            acc[r] = 0.0;
        }
        barrier();
        uint i = gl_LocalInvocationID.x;
        if (i < n) {
            float t = 0.0;
            for (uint k = 0u; k < min(gl_NumSubgroups, 32u); k++) t += part[i * 32u + k];
            OUT.d[pc.out_off + col * pc.out_col_stride + row0 + rg * R + i] = t;
        }
        barrier(); // part is written again by the next row group
        return;
    }
    [[unroll]] for (uint r = 0u; r < R; r++) {
        float t = subgroupAdd(acc[r]);
        if (r < n && subgroupElect())
            OUT.d[pc.out_off + col * pc.out_col_stride + row0 + rg * R + r] = t;
        acc[r] = 0.0;
    }
}

// STAGE: a lane's 9 word loads at a 34-byte stride touch a 32-byte sector each (8.5x the
// sectors of the bytes: an L1 bound near the HBM's rate on the H200), so the subgroup instead
// copies each row's next ss blocks (34·ss bytes, whole 16-byte pieces: the host asks for STAGE
// only where K / 32 is a multiple of ss and the rows start 16-byte aligned) by coalesced 16-byte
// loads into its part of shared memory, and each lane reads its block's words from there. The
// next piece's loads are issued before the current one is summed. Subgroup barriers only.
const uint SW = 1088u; // 8.5 words a block x 128 lanes: the stage's words per row
shared uint stg[STAGE ? R * SW : 1u];
uvec4 sv[4][3]; // the next piece: 2.125 ss 16-byte loads a row, up to 3 a lane

void sload(uint it) {
    uint c = it % per_row, n16 = (17u * ss) >> 3; // 34 ss / 16
    [[unroll]] for (uint r = 0u; r < R; r++) {
        uint q = (base[r] + 34u * ss * c) >> 4;
        [[unroll]] for (uint k = 0u; k < 3u; k++) {
            uint i = lane + k * ss;
            if (i < n16) sv[r][k] = W4[cw[r]].d[q + i];
        }
    }
}

void sstore() {
    uint n16 = (17u * ss) >> 3, o = gl_SubgroupID * R * ((17u * ss) >> 1);
    [[unroll]] for (uint r = 0u; r < R; r++) {
        [[unroll]] for (uint k = 0u; k < 3u; k++) {
            uint i = lane + k * ss, w = o + r * ((17u * ss) >> 1) + 4u * i;
            if (i < n16) {
                stg[w] = sv[r][k].x;
                stg[w + 1u] = sv[r][k].y;
                stg[w + 2u] = sv[r][k].z;
                stg[w + 3u] = sv[r][k].w;
            }
        }
    }
}

// Block b (the lane's of this piece) of every row from the stage.
void sdots(uint b) {
    uint o = gl_SubgroupID * R * ((17u * ss) >> 1) + ((17u * lane) >> 1);
    uint xo = 9u * b;
    float dx = xs[b];
    int xw[9];
    [[unroll]] for (uint j = 0u; j < 9u; j++) xw[j] = int(xq[xo + j]);
    [[unroll]] for (uint r = 0u; r < R; r++) {
        uint ro = o + r * ((17u * ss) >> 1);
        int sum = 0;
        [[unroll]] for (uint j = 0u; j < 9u; j++) sum = sdot4x8(int(stg[ro + j]), xw[j], 0) + sum;
        uint w0 = stg[ro];
        float dw = f16v((b & 1u) != 0u ? w0 >> 16 : w0 & 0xffffu);
        acc[r] += float(sum) * (dw * dx);
    }
}

void sstep(uint it) {
    uint rg = grp + (it / per_row) * ngrp;
    uint b = lane + (it % per_row) * ss;
    bool last = (it + 1u) % per_row == 0u;
    sstore(); // piece it, loaded the step before (or before the quantization)
    subgroupMemoryBarrierShared();
    subgroupBarrier();
    if (it + 1u < n_it) {
        if (last) next_n = rows_of(rg + ngrp);
        sload(it + 1u);
    }
    sdots(b);
    subgroupBarrier(); // every lane's reads done before the next piece is stored
    if (last) {
        finish(rg, cur_n);
        if (it + 1u < n_it) cur_n = next_n;
    }
}

// Iteration it (slot s): with PIPE the next iteration's words are requested first.
void step(uint it, const uint s) {
    uint rg = grp + (it / per_row) * ngrp;
    uint b = lane + (it % per_row) * ss;
    bool last = (it + 1u) % per_row == 0u;
    if (PIPE) {
        if (it + 1u < n_it) {
            if (last) next_n = rows_of(rg + ngrp);
            load(s ^ 1u, lane + ((it + 1u) % per_row) * ss);
        }
    } else if (it > 0u) {
        load(0u, b);
    }
    dots(s, b);
    if (last) {
        finish(rg, cur_n);
        if (it + 1u < n_it) cur_n = PIPE ? next_n : rows_of(rg + ngrp);
    }
}

void main() {
    lane = WIDE ? gl_LocalInvocationID.x : gl_SubgroupInvocationID;
    ss = WIDE ? uint(WG) : gl_SubgroupSize;
    grp = WIDE ? 0u : gl_SubgroupID;
    ngrp = WIDE ? 1u : gl_NumSubgroups;
    col = gl_WorkGroupID.y;
    row0 = (gl_WorkGroupID.x + gl_WorkGroupID.z * gl_NumWorkGroups.x) * pc.rows_per_wg;
    nbk = pc.K / 32u;
    per_row = (nbk + ss - 1u) / ss;
    // The host keeps a workgroup's rows inside one input group (rows_per_wg divides N / groups).
    uint g = min(row0, pc.N - 1u) / (pc.N / pc.groups);
    g_k = g * pc.K; // the group's first input (ROPE: its index in the flattened heads)
    xb = pc.x_off + col * pc.x_col_stride + g * pc.K;
    vec = (pc.x_off & 3u) == 0u && (pc.x_col_stride & 3u) == 0u;
    [[unroll]] for (uint r = 0u; r < 4u; r++) acc[r] = 0.0;

    // Row groups of this workgroup that hold rows, and this subgroup's share of them.
    uint n_grp = row0 < pc.N ? min(pc.rows_per_wg / R, (pc.N - row0 + R - 1u) / R) : 0u;
    uint n_rg = grp < n_grp ? (n_grp - 1u - grp) / ngrp + 1u : 0u;
    n_it = n_rg * per_row;
    // The first weight words are requested before the quantization and its barriers, so their
    // round trip to memory overlaps them.
    cur_n = 0u;
    if (n_it > 0u) {
        cur_n = rows_of(grp);
        if (STAGE) sload(0u);
        else load(0u, lane);
    }

    float r = 1.0;
    if (NORM) {
        float q = 0.0;
        for (uint i = 4u * gl_LocalInvocationID.x; i < pc.K; i += 4u * WG) {
            vec4 v = x4(i);
            q += dot(v, v);
        }
        r = 1.0 / sqrt(wg_sum(q) / float(pc.K) + pc.eps);
    }
    for (uint b = gl_LocalInvocationID.x; b < nbk; b += WG) quant_block(b, r);
    barrier();

    if (STAGE) {
        for (uint it = 0u; it < n_it; it++) sstep(it);
    } else if (PIPE) { // two iterations a trip, so each slot is a constant index (registers)
        uint it = 0u;
        for (; it + 1u < n_it; it += 2u) {
            step(it, 0u);
            step(it + 1u, 1u);
        }
        if (it < n_it) step(it, 0u);
    } else {
        for (uint it = 0u; it < n_it; it++) step(it, 0u);
    }
}
