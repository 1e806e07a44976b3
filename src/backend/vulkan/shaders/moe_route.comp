#version 450
// MoE routing for one token (one invocation does it: a few hundred experts): router scores
// (softmax, sigmoid or sqrt-softplus), the top-k of score + bias (lowest index on ties) or the
// hash table's row, then weights (normalised, scaled) from the raw scores.
#define WG 64
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

void main() {
    if (gl_LocalInvocationID.x != 0u) return;
    uint t = gl_WorkGroupID.x, ne = pc.n_expert, lb = pc.logit_off + t * ne;
    if (pc.gating == 1u) { // softmax
        float mx = LG.d[lb], sum = 0.0;
        for (uint e = 1u; e < ne; e++) mx = max(mx, LG.d[lb + e]);
        for (uint e = 0u; e < ne; e++) {
            LG.d[lb + e] = exp(LG.d[lb + e] - mx);
            sum += LG.d[lb + e];
        }
        for (uint e = 0u; e < ne; e++) LG.d[lb + e] /= sum;
    } else if (pc.gating == 2u) {
        for (uint e = 0u; e < ne; e++) LG.d[lb + e] = 1.0 / (1.0 + exp(-LG.d[lb + e]));
    } else if (pc.gating == 4u) { // softplus with torch's threshold: linear above 20
        for (uint e = 0u; e < ne; e++) {
            float x = LG.d[lb + e];
            LG.d[lb + e] = sqrt(x > 20.0 ? x : log(1.0 + exp(x)));
        }
    }
    int sel[32];
    uint k = min(pc.k, 32u);
    if (pc.has_hash != 0u) {
        int tok = TOK.d[pc.tok_off + t];
        for (uint i = 0u; i < k; i++) {
            int e = TID.d[pc.tid_off + uint(tok) * pc.k + i];
            sel[i] = e >= 0 && uint(e) < ne ? e : 0; // ids stay in range on every path
        }
    } else {
        uint taken[32];
        for (uint i = 0u; i < 32u; i++) taken[i] = 0u;
        for (uint i = 0u; i < k; i++) {
            int best = -1;
            float best_v = 0.0;
            for (uint e = 0u; e < ne && e < 1024u; e++) {
                float v = LG.d[lb + e] + (pc.has_bias != 0u ? BIAS.d[pc.bias_off + e] : 0.0);
                if ((taken[e >> 5] & (1u << (e & 31u))) == 0u && (best < 0 || v > best_v)) {
                    best = int(e);
                    best_v = v;
                }
            }
            if (best < 0) best = 0;
            taken[uint(best) >> 5] |= 1u << (uint(best) & 31u);
            sel[i] = best;
        }
    }
    float w[32], sum = 0.0;
    for (uint i = 0u; i < k; i++) {
        w[i] = LG.d[lb + uint(sel[i])];
        sum += w[i];
    }
    for (uint i = 0u; i < k; i++) {
        float v = w[i];
        if (pc.norm_weights != 0u) v /= sum + 1e-20;
        SEL.d[pc.sel_off + t * pc.k + i] = sel[i];
        WT.d[pc.w_off + t * pc.k + i] = v * pc.weights_scale;
    }
}
