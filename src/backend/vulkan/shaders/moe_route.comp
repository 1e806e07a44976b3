#version 450
// MoE routing, one workgroup per token (one invocation did it all: 0.15 ms a layer on the
// H200): router scores (softmax, sigmoid or sqrt-softplus), the top-k of score + bias (lowest index on ties) or the
// hash table's row, then weights (normalised, scaled) from the raw scores.
#define WG 256
#include "common.glsl"

layout(binding = 1) buffer L { float d[]; } LG;
layout(binding = 2) readonly buffer Bias { float d[]; } BIAS;
layout(binding = 3) readonly buffer Tid { int d[]; } TID;
layout(binding = 4) readonly buffer Tok { int d[]; } TOK;
layout(binding = 5) writeonly buffer Sel { int d[]; } SEL;
layout(binding = 6) writeonly buffer Wt { float d[]; } WT;
layout(push_constant) uniform PC {
    uint n_expert, k, gating, has_bias, has_hash, norm_weights;
    float weights_scale;
    uint logit_off, bias_off, tid_off, tok_off, sel_off, w_off;
} pc;

shared float sc[1024]; // the experts' scores after gating
shared uint taken[32];
shared float am_v[256];
shared uint am_i[256];

// The workgroup's largest v, the lowest index i among equals (ties go to the lowest index).
void wg_argmax(inout float v, inout uint i) {
    float m = subgroupMax(v);
    uint mi = subgroupMin(v == m ? i : 0xffffffffu);
    if (subgroupElect()) {
        am_v[gl_SubgroupID] = m;
        am_i[gl_SubgroupID] = mi;
    }
    barrier();
    v = am_v[0];
    i = am_i[0];
    for (uint s = 1u; s < gl_NumSubgroups; s++)
        if (am_v[s] > v || (am_v[s] == v && am_i[s] < i)) {
            v = am_v[s];
            i = am_i[s];
        }
    barrier();
}

void main() {
    uint t = gl_WorkGroupID.x, ne = min(pc.n_expert, 1024u), lb = pc.logit_off + t * pc.n_expert;
    uint lid = gl_LocalInvocationID.x;
    if (pc.gating == 1u) { // softmax
        float mx = -1.0 / 0.0;
        for (uint e = lid; e < ne; e += WG) mx = max(mx, LG.d[lb + e]);
        mx = wg_max(mx);
        float sum = 0.0;
        for (uint e = lid; e < ne; e += WG) {
            sc[e] = exp(LG.d[lb + e] - mx);
            sum += sc[e];
        }
        sum = wg_sum(sum);
        for (uint e = lid; e < ne; e += WG) sc[e] /= sum;
    } else {
        for (uint e = lid; e < ne; e += WG) {
            float x = LG.d[lb + e];
            if (pc.gating == 2u) x = 1.0 / (1.0 + exp(-x));
            // softplus with torch's threshold: linear above 20
            if (pc.gating == 4u) x = sqrt(x > 20.0 ? x : log(1.0 + exp(x)));
            sc[e] = x;
        }
    }
    if (lid < 32u) taken[lid] = 0u;
    barrier();
    for (uint e = lid; e < ne; e += WG) LG.d[lb + e] = sc[e];
    uint k = min(pc.k, 32u);
    // Top-k of score + bias (lowest index on ties), one workgroup argmax per pick; every
    // invocation keeps the picks in sel.
    int sel[32];
    if (pc.has_hash != 0u) {
        int tok = TOK.d[pc.tok_off + t];
        for (uint i = 0u; i < k; i++) {
            int e = TID.d[pc.tid_off + uint(tok) * pc.k + i];
            sel[i] = e >= 0 && uint(e) < pc.n_expert ? e : 0; // ids stay in range on every path
        }
    } else {
        for (uint i = 0u; i < k; i++) {
            float bv = -1.0 / 0.0;
            uint bi = 0xffffffffu;
            for (uint e = lid; e < ne; e += WG) {
                float v = sc[e] + (pc.has_bias != 0u ? BIAS.d[pc.bias_off + e] : 0.0);
                if ((taken[e >> 5] & (1u << (e & 31u))) == 0u && (bi == 0xffffffffu || v > bv)) {
                    bv = v;
                    bi = e;
                }
            }
            wg_argmax(bv, bi);
            uint best = bi < ne ? bi : 0u;
            if (lid == 0u) taken[best >> 5] |= 1u << (best & 31u);
            barrier();
            sel[i] = int(best);
        }
    }
    if (lid != 0u) return;
    float w[32], sum = 0.0;
    for (uint i = 0u; i < k; i++) {
        w[i] = sc[uint(sel[i])];
        sum += w[i];
    }
    for (uint i = 0u; i < k; i++) {
        float v = w[i];
        if (pc.norm_weights != 0u) v /= sum + 1e-20;
        SEL.d[pc.sel_off + t * pc.k + i] = sel[i];
        WT.d[pc.w_off + t * pc.k + i] = v * pc.weights_scale;
    }
}
