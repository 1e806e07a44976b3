#version 450
// Hyper-connection pre, first pass: the mix projection fn · flat and the sum of squares of the
// flattened streams, in parallel. hc_pre.comp had one workgroup per token do all of it (24 rows
// of 16,384 weights: ~0.4 ms a call on the H200, a third of a decode step); here workgroup
// (m, s, t) sums row m (or, for m = n_mix, the squares) over chunk s of token t's streams, and
// hc_pre.comp adds the chunks in order and scales by the RMS factor (fn · (x·r) = r·(fn · x)).
#define WG 64
#include "common.glsl"
#include "quant.glsl"

layout(constant_id = 0) const uint TYPE = 0u; // the weight type (one pipeline per type)

layout(binding = 1) readonly buffer S { float d[]; } ST;
layout(binding = 2) writeonly buffer P { float d[]; } PART;
layout(binding = 3) readonly buffer Y { float d[]; } YB;  // fold: the block's output
layout(binding = 4) readonly buffer Po { float d[]; } PO; // fold: the previous site's post
layout(binding = 5) readonly buffer Co { float d[]; } CO; // ... and comb
layout(push_constant) uniform PC {
    uint width, n_mix, n_split, chunk, w_rel, w_chunk_rows, w_row_bytes, s_off, p_off;
    uint fold, n_embd, hc, y_off, post_off, comb_off, copy_off;
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

void main() {
    uint m = gl_WorkGroupID.x, s = gl_WorkGroupID.y, t = gl_WorkGroupID.z;
    uint lid = gl_LocalInvocationID.x, xb = pc.s_off + t * pc.width;
    uint i0 = s * pc.chunk, i1 = min(i0 + pc.chunk, pc.width);
    float acc = 0.0;
    if (m < pc.n_mix) {
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
