#version 450
// Hyper-connection pre (mHC, DeepSeek V4 §2.2), one workgroup per token: RMS-normalise the
// flattened streams, mix = fn · flat (summed in parallel by hc_mix.comp first), then
// pre = sigmoid(mix·scale0 + base) + eps (collapse weights), post = 2·sigmoid(..) and
// comb = Sinkhorn(..) (skipped for the output head).
// Sinkhorn stays in f32 (its epsilon is near f16's limits).
#define WG 256
#extension GL_KHR_shader_subgroup_shuffle : require
#include "common.glsl"

layout(binding = 1) buffer S { float d[]; } ST; // written with fold
layout(binding = 2) readonly buffer B { float d[]; } BASE;
layout(binding = 3) readonly buffer Sc { float d[]; } SCALE;
layout(binding = 4) writeonly buffer Col { float d[]; } COL;
layout(binding = 5) writeonly buffer Po { float d[]; } POST;
layout(binding = 6) writeonly buffer Co { float d[]; } COMB;
layout(binding = 7) readonly buffer Pa { float d[]; } PART;
layout(binding = 8) readonly buffer Y { float d[]; } YB; // fold: the block's output
layout(push_constant) uniform PC {
    uint n_embd, hc, iters, head, type, w_rel, w_chunk_rows, w_row_bytes;
    uint s_off, base_off, scale_off, col_off, post_off, comb_off;
    float eps, norm_eps;
    uint p_off, n_split;
    uint fold, y_off, copy_off; // copy_off: hc_mix.comp's copy of the old post and comb (PART)
} pc;

shared float mix[18 * 16 + 1];
shared float pre[16];
shared float sk[256];

float sigm(float x) { return 1.0 / (1.0 + exp(-x)); }

void main() {
    uint t = gl_WorkGroupID.x, hc = pc.hc, lid = gl_LocalInvocationID.x;
    uint width = hc * pc.n_embd, xb = pc.s_off + t * width;
    // Workgroup (t, slice) of n_slice: the mix, pre/post/comb (tiny: every slice computes them,
    // slice 0 writes post and comb) and the streams and collapsed output of its slice of the
    // n_embd channels (one workgroup walked all 4096: a chain of loads on one SM of the GPU).
    uint n_slice = gl_NumWorkGroups.y, per = (pc.n_embd + n_slice - 1u) / n_slice;
    uint d0 = gl_WorkGroupID.y * per, d1 = min(d0 + per, pc.n_embd);
    bool first = gl_WorkGroupID.y == 0u;
    if (pc.fold != 0u) {
        // The previous site's hc_post (hc_post.comp's sums, in place; hc_mix.comp computed
        // the same values for the mix). y, the old post and comb may share memory with this
        // site's COL, POST and COMB (the forward's scratch): each y element is read here by
        // the invocation that writes its COL element below, and the old post and comb are
        // read from hc_mix.comp's copy (slice 0 may write the new ones before another slice
        // starts).
        uint ob = pc.copy_off + t * (hc + hc * hc); // old post, then old comb
        for (uint d = d0 + lid; d < d1; d += WG) {
            float y = YB.d[pc.y_off + t * pc.n_embd + d], mixed[16];
            for (uint k = 0u; k < hc; k++) {
                float s = PART.d[ob + k] * y;
                for (uint j = 0u; j < hc; j++)
                    s += PART.d[ob + hc + j * hc + k] * ST.d[xb + j * pc.n_embd + d];
                mixed[k] = s;
            }
            for (uint k = 0u; k < hc; k++) ST.d[xb + k * pc.n_embd + d] = mixed[k];
        }
        memoryBarrierBuffer();
        barrier();
    }
    // The chunks' sums from hc_mix.comp, added in order.
    uint n_mix = pc.head != 0u ? hc : (2u + hc) * hc, pb = pc.p_off + t * pc.n_split * (n_mix + 1u);
    for (uint m = lid; m <= n_mix; m += WG) {
        float acc = 0.0;
        for (uint s = 0u; s < pc.n_split; s++) acc += PART.d[pb + s * (n_mix + 1u) + m];
        mix[m] = acc;
    }
    barrier();
    float r = 1.0 / sqrt(mix[n_mix] / float(width) + pc.norm_eps);
    barrier(); // every invocation has read mix[n_mix]
    for (uint m = lid; m < n_mix; m += WG) mix[m] *= r;
    barrier();
    float s0 = SCALE.d[pc.scale_off], s1 = SCALE.d[pc.scale_off + 1u];
    float s2 = SCALE.d[pc.scale_off + 2u];
    // pre by invocations 0 .. hc-1, post by hc .. 2hc-1 (one invocation's chain of loads was
    // a few microseconds a call)
    if (lid < hc) pre[lid] = sigm(mix[lid] * s0 + BASE.d[pc.base_off + lid]) + pc.eps;
    if (pc.head == 0u && first && lid >= hc && lid < 2u * hc)
        POST.d[pc.post_off + t * hc + lid - hc] =
            2.0 * sigm(mix[lid] * s1 + BASE.d[pc.base_off + lid]);
    if (pc.head == 0u && gl_SubgroupSize >= hc * hc) {
        // Sinkhorn-Knopp in the first subgroup alone: lane j·hc + k keeps element (j, k) in a
        // register and reads its row or column from the lanes holding them by shuffles, summing
        // in the serial order as below, with no barrier (the workgroup version below takes two
        // barriers a pass, ~80 a call)
        if (gl_SubgroupID == 0u) {
            uint l = gl_SubgroupInvocationID;
            bool own = l < hc * hc;
            uint j = own ? l / hc : 0u, k = own ? l % hc : 0u;
            float v = own ? mix[2u * hc + l] * s2 + BASE.d[pc.base_off + 2u * hc + l] : 0.0;
            float mx = subgroupShuffle(v, j * hc), sum = 0.0;
            for (uint i = 1u; i < hc; i++) mx = max(mx, subgroupShuffle(v, j * hc + i));
            for (uint i = 0u; i < hc; i++) sum += exp(subgroupShuffle(v, j * hc + i) - mx);
            v = exp(v - mx) / sum + pc.eps;
            for (uint it = 0u; it < pc.iters; it++) {
                if (it > 0u) {
                    sum = 0.0;
                    for (uint i = 0u; i < hc; i++) sum += subgroupShuffle(v, j * hc + i);
                    v = v / (sum + pc.eps);
                }
                sum = 0.0;
                for (uint i = 0u; i < hc; i++) sum += subgroupShuffle(v, i * hc + k);
                v = v / (sum + pc.eps);
            }
            if (own && first) COMB.d[pc.comb_off + t * hc * hc + l] = v;
        }
    } else if (pc.head == 0u) {
        // Sinkhorn-Knopp: softmax rows, then column and row normalisation (the reference
        // starts with a column pass). Invocation j·hc + k keeps element (j, k) in shared memory
        // and sums its row or column itself, in the serial order (one invocation did it all
        // in a local array: 0.07 ms a call on the H200).
        bool own = lid < hc * hc;
        uint j = own ? lid / hc : 0u, k = own ? lid % hc : 0u;
        if (own) sk[lid] = mix[2u * hc + lid] * s2 + BASE.d[pc.base_off + 2u * hc + lid];
        barrier();
        float v = 0.0;
        if (own) {
            float mx = sk[j * hc], sum = 0.0;
            for (uint i = 1u; i < hc; i++) mx = max(mx, sk[j * hc + i]);
            for (uint i = 0u; i < hc; i++) sum += exp(sk[j * hc + i] - mx);
            v = exp(sk[lid] - mx) / sum + pc.eps;
        }
        barrier();
        if (own) sk[lid] = v;
        barrier();
        for (uint it = 0u; it < pc.iters; it++) {
            if (it > 0u) {
                if (own) {
                    float sum = 0.0;
                    for (uint i = 0u; i < hc; i++) sum += sk[j * hc + i];
                    v = sk[lid] / (sum + pc.eps);
                }
                barrier();
                if (own) sk[lid] = v;
                barrier();
            }
            if (own) {
                float sum = 0.0;
                for (uint i = 0u; i < hc; i++) sum += sk[i * hc + k];
                v = sk[lid] / (sum + pc.eps);
            }
            barrier();
            if (own) sk[lid] = v;
            barrier();
        }
        if (own && first) COMB.d[pc.comb_off + t * hc * hc + lid] = sk[lid];
    }
    barrier();
    for (uint d = d0 + lid; d < d1; d += WG) {
        float s = 0.0;
        for (uint k = 0u; k < hc; k++) s += pre[k] * ST.d[xb + k * pc.n_embd + d];
        COL.d[pc.col_off + t * pc.n_embd + d] = s;
    }
}
