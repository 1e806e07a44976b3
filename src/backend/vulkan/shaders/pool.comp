#version 450
// Compressor pooling, one workgroup per closed window: per channel, a softmax over the
// window's slots of gate + ape weights the kv values (with overlap, the previous window's Ca
// series too); then RMS norm and rope at the window's first position (cos/sin from the host).
#define WG 64
#include "common.glsl"

layout(binding = 1) readonly buffer KV { float d[]; } KVB;
layout(binding = 2) readonly buffer G { float d[]; } GB;
layout(binding = 3) readonly buffer Ape { float d[]; } APE;
layout(binding = 4) readonly buffer Nrm { float d[]; } NRM;
layout(binding = 5) readonly buffer PKV { float d[]; } PKVB;
layout(binding = 6) readonly buffer PG { float d[]; } PGB;
layout(binding = 7) writeonly buffer Out { float d[]; } OUT;
layout(binding = 8) readonly buffer CS { float d[]; } CSB;
layout(push_constant) uniform PC {
    uint ratio, dim, width, overlap, have_prev, n_rot;
    float eps;
    uint kv_off, gate_off, ape_off, norm_off, pkv_off, pgate_off, out_off, cs_off;
} pc;

shared float row[512];

// The slot s of channel d: 0 .. r-1 the previous series (when present), then the current.
float slot_logit(uint w, uint d, uint s, uint n_prev, out float v) {
    uint r = pc.ratio, width = pc.width;
    if (s < n_prev) {
        if (w > 0u) {
            uint b = (w - 1u) * r * width + s * width + d;
            v = KVB.d[pc.kv_off + b];
            return GB.d[pc.gate_off + b] + APE.d[pc.ape_off + s * width + d];
        }
        v = PKVB.d[pc.pkv_off + s * pc.dim + d];
        return PGB.d[pc.pgate_off + s * pc.dim + d]; // saved gates include ape
    }
    uint i = s - n_prev, cur = pc.overlap != 0u ? pc.dim : 0u;
    uint b = w * r * width + i * width + cur + d;
    v = KVB.d[pc.kv_off + b];
    return GB.d[pc.gate_off + b] + APE.d[pc.ape_off + i * width + cur + d];
}

void main() {
    uint w = gl_WorkGroupID.x, lid = gl_LocalInvocationID.x, dim = pc.dim;
    uint n_prev = pc.overlap != 0u && (w > 0u || pc.have_prev != 0u) ? pc.ratio : 0u;
    uint n = n_prev + pc.ratio;
    float ss = 0.0;
    for (uint d = lid; d < dim; d += WG) {
        float v, mx = -1.0 / 0.0;
        for (uint s = 0u; s < n; s++) mx = max(mx, slot_logit(w, d, s, n_prev, v));
        float sum = 0.0;
        for (uint s = 0u; s < n; s++) sum += exp(slot_logit(w, d, s, n_prev, v) - mx);
        float a = 0.0;
        for (uint s = 0u; s < n; s++) {
            float e = exp(slot_logit(w, d, s, n_prev, v) - mx);
            a += (e / sum) * v;
        }
        row[d] = a;
        ss += a * a;
    }
    ss = wg_sum(ss);
    float r = 1.0 / sqrt(ss / float(dim) + pc.eps);
    for (uint d = lid; d < dim; d += WG) row[d] = NRM.d[pc.norm_off + d] * (row[d] * r);
    barrier();
    uint tail = dim - pc.n_rot;
    for (uint i = lid; i < pc.n_rot / 2u; i += WG) {
        float c = CSB.d[pc.cs_off + (w * (pc.n_rot / 2u) + i) * 2u];
        float s = CSB.d[pc.cs_off + (w * (pc.n_rot / 2u) + i) * 2u + 1u];
        float a = row[tail + 2u * i], b = row[tail + 2u * i + 1u];
        row[tail + 2u * i] = a * c - b * s;
        row[tail + 2u * i + 1u] = b * c + a * s;
    }
    barrier();
    for (uint d = lid; d < dim; d += WG) OUT.d[pc.out_off + w * dim + d] = row[d];
}
