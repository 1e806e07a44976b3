#version 450
// Hyper-connection pre, first pass: the mix projection fn · flat and the sum of squares of the
// flattened streams, in parallel. hc_pre.comp had one workgroup per token do all of it (24 rows
// of 16,384 weights: ~0.4 ms a call on the H200, a third of a decode step); here workgroup
// (m, s, t) sums row m (or, for m = n_mix, the squares) over chunk s of token t's streams, and
// hc_pre.comp adds the chunks in order and scales by the RMS factor (fn · (x·r) = r·(fn · x)).
// With vec (the views 16-byte aligned, chunks of whole vec4s) an invocation takes 4 consecutive
// elements a step by 16-byte loads: at decode's 16,384-wide streams and 16 chunks, one step each,
// all of its loads independent (64 invocations walking 16 elements each took ~17 us a dispatch
// on the H200, a chain of dependent steps; session 10).
#define WG 256
#include "common.glsl"
#include "quant.glsl"

layout(constant_id = 0) const uint TYPE = 0u; // the weight type (one pipeline per type)

layout(binding = 1) readonly buffer S { float d[]; } ST;
layout(binding = 1) readonly buffer S4 { vec4 d[]; } ST4;
layout(binding = 2) writeonly buffer P { float d[]; } PART;
layout(binding = 3) readonly buffer Y { float d[]; } YB;  // fold: the block's output
layout(binding = 3) readonly buffer Y4 { vec4 d[]; } YB4;
layout(binding = 4) readonly buffer Po { float d[]; } PO; // fold: the previous site's post
layout(binding = 5) readonly buffer Co { float d[]; } CO; // ... and comb
layout(push_constant) uniform PC {
    uint width, n_mix, n_split, chunk, w_rel, w_chunk_rows, w_row_bytes, s_off, p_off;
    uint fold, n_embd, hc, y_off, post_off, comb_off, copy_off, vec;
} pc;

// Element i of token t's flattened streams. With fold (HALO_VK_DEFER_POST), the previous
// site's hc_post has not run: the streams it would write, post·y + Σ_j comb·streams_j, are
// computed here from the old ones as hc_post.comp does (the same order), and hc_pre.comp
// writes them.
float sval(uint t, uint xb, uint i) {
    if (pc.fold == 0u) return ST.d[xb + i];
    uint hc = pc.hc, k = i / pc.n_embd, d = i - k * pc.n_embd;
    float s = PO.d[pc.post_off + t * hc + k] * YB.d[pc.y_off + t * pc.n_embd + d];
    for (uint j = 0u; j < hc; j++)
        s += CO.d[pc.comb_off + t * hc * hc + j * hc + k] * ST.d[xb + j * pc.n_embd + d];
    return s;
}

// Elements i .. i + 3 (vec: i % 4 == 0, one stream k for all four), as sval.
vec4 sval4(uint t, uint xb, uint i) {
    if (pc.fold == 0u) return ST4.d[(xb + i) >> 2];
    uint hc = pc.hc, k = i / pc.n_embd, d = i - k * pc.n_embd;
    vec4 s = PO.d[pc.post_off + t * hc + k] * YB4.d[(pc.y_off + t * pc.n_embd + d) >> 2];
    for (uint j = 0u; j < hc; j++)
        s += CO.d[pc.comb_off + t * hc * hc + j * hc + k] * ST4.d[(xb + j * pc.n_embd + d) >> 2];
    return s;
}

// Weights i .. i + 3 of the row at byte `base` of chunk c (vec: F16 and F32 rows word-aligned).
vec4 wval4(uint c, uint base, uint i) {
    if (TYPE == T_F16) {
        uint w = (base >> 2) + (i >> 1);
        return vec4(unpackHalf2x16(W[c].d[w]), unpackHalf2x16(W[c].d[w + 1u]));
    }
    if (TYPE == T_F32) {
        uint w = (base >> 2) + i;
        return uintBitsToFloat(uvec4(W[c].d[w], W[c].d[w + 1u], W[c].d[w + 2u], W[c].d[w + 3u]));
    }
    return vec4(wval(TYPE, c, base, i), wval(TYPE, c, base, i + 1u), wval(TYPE, c, base, i + 2u),
                wval(TYPE, c, base, i + 3u));
}

void main() {
    uint m = gl_WorkGroupID.x, s = gl_WorkGroupID.y, t = gl_WorkGroupID.z;
    uint lid = gl_LocalInvocationID.x, xb = pc.s_off + t * pc.width;
    uint i0 = s * pc.chunk, i1 = min(i0 + pc.chunk, pc.width);
    float acc = 0.0;
    if (pc.vec != 0u) {
        vec4 a = vec4(0.0);
        if (m < pc.n_mix) {
            uint c, base;
            wrow(m, pc.w_rel, pc.w_chunk_rows, pc.w_row_bytes, c, base);
            for (uint i = i0 + 4u * lid; i < i1; i += 4u * WG) a += wval4(c, base, i) * sval4(t, xb, i);
        } else {
            for (uint i = i0 + 4u * lid; i < i1; i += 4u * WG) {
                vec4 v = sval4(t, xb, i);
                a += v * v;
            }
        }
        acc = (a.x + a.y) + (a.z + a.w);
    } else if (m < pc.n_mix) {
        uint c, base;
        wrow(m, pc.w_rel, pc.w_chunk_rows, pc.w_row_bytes, c, base);
        for (uint i = i0 + lid; i < i1; i += WG) acc += wval(TYPE, c, base, i) * sval(t, xb, i);
    } else {
        for (uint i = i0 + lid; i < i1; i += WG) {
            float v = sval(t, xb, i);
            acc += v * v;
        }
    }
    acc = wg_sum(acc);
    if (lid == 0u) PART.d[pc.p_off + (t * pc.n_split + s) * (pc.n_mix + 1u) + m] = acc;
    // fold: a copy of the old post and comb for hc_pre.comp, whose workgroups write the new
    // ones over them (the forward's scratch) while others may still need the old
    uint hc = pc.hc, nc = hc + hc * hc;
    if (pc.fold != 0u && m == 0u && s == 0u)
        for (uint i = lid; i < nc; i += WG)
            PART.d[pc.copy_off + t * nc + i] = i < hc ? PO.d[pc.post_off + t * hc + i]
                                                      : CO.d[pc.comb_off + t * hc * hc + i - hc];
}
