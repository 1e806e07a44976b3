#version 450
// Hyper-connection pre, first pass, hc_mix.comp's job with each stream value read (and, with
// the fold, mixed) once: workgroup (s, t) takes chunk s of token t's flattened streams and sums
// all n_mix rows of the mix projection and the squares over it. hc_mix.comp's workgroups take
// one row each, so every chunk of the streams was read, and the previous site's hc_post
// recomputed, n_mix + 1 = 25 times over (hc = 4), as chains of loads per invocation. At most
// MAXM rows (hc <= 4); the host keeps hc_mix.comp for more. Partial sums as hc_mix.comp lays
// them out, so hc_pre.comp adds them the same way.
#define WG 128
#include "common.glsl"
#include "quant.glsl"

layout(constant_id = 0) const uint TYPE = 0u; // the weight type (one pipeline per type)
const uint MAXM = 24u;

layout(binding = 1) readonly buffer S { float d[]; } ST;
layout(binding = 2) writeonly buffer P { float d[]; } PART;
layout(binding = 3) readonly buffer Y { float d[]; } YB;  // fold: the block's output
layout(binding = 4) readonly buffer Po { float d[]; } PO; // fold: the previous site's post
layout(binding = 5) readonly buffer Co { float d[]; } CO; // ... and comb
layout(push_constant) uniform PC {
    uint width, n_mix, n_split, chunk, w_rel, w_chunk_rows, w_row_bytes, s_off, p_off;
    uint fold, n_embd, hc, y_off, post_off, comb_off, copy_off;
} pc;

// The subgroups' sums: value m of subgroup g at m · 32 + g.
shared float red[(MAXM + 1u) * 32u];

// Element i of token t's flattened streams, as hc_mix.comp's sval (with fold: the streams the
// previous site's hc_post would write, in its order).
float sval(uint t, uint xb, uint i) {
    if (pc.fold == 0u) return ST.d[xb + i];
    uint hc = pc.hc, k = i / pc.n_embd, d = i - k * pc.n_embd;
    float s = PO.d[pc.post_off + t * hc + k] * YB.d[pc.y_off + t * pc.n_embd + d];
    for (uint j = 0u; j < hc; j++)
        s += CO.d[pc.comb_off + t * hc * hc + j * hc + k] * ST.d[xb + j * pc.n_embd + d];
    return s;
}

void main() {
    uint s = gl_WorkGroupID.x, t = gl_WorkGroupID.y, lid = gl_LocalInvocationID.x;
    uint xb = pc.s_off + t * pc.width, i0 = s * pc.chunk, i1 = min(i0 + pc.chunk, pc.width);
    float acc[MAXM + 1u];
    [[unroll]] for (uint m = 0u; m <= MAXM; m++) acc[m] = 0.0;
    for (uint i = i0 + lid; i < i1; i += WG) {
        float v = sval(t, xb, i);
        acc[MAXM] += v * v;
        [[unroll]] for (uint m = 0u; m < MAXM; m++) {
            if (m >= pc.n_mix) break;
            uint c, base;
            wrow(m, pc.w_rel, pc.w_chunk_rows, pc.w_row_bytes, c, base);
            acc[m] += wval(TYPE, c, base, i) * v;
        }
    }
    [[unroll]] for (uint m = 0u; m <= MAXM; m++) {
        if (m < MAXM && m >= pc.n_mix) continue;
        float v = subgroupAdd(acc[m]);
        if (subgroupElect() && gl_SubgroupID < 32u) red[m * 32u + gl_SubgroupID] = v;
    }
    barrier();
    if (lid <= pc.n_mix) {
        uint m = lid < pc.n_mix ? lid : MAXM;
        float v = 0.0;
        for (uint g = 0u; g < min(gl_NumSubgroups, 32u); g++) v += red[m * 32u + g];
        PART.d[pc.p_off + (t * pc.n_split + s) * (pc.n_mix + 1u) + lid] = v;
    }
    // fold: a copy of the old post and comb for hc_pre.comp (as hc_mix.comp)
    uint hc = pc.hc, nc = hc + hc * hc;
    if (pc.fold != 0u && s == 0u)
        for (uint i = lid; i < nc; i += WG)
            PART.d[pc.copy_off + t * nc + i] = i < hc ? PO.d[pc.post_off + t * hc + i]
                                                      : CO.d[pc.comb_off + t * hc * hc + i - hc];
}
