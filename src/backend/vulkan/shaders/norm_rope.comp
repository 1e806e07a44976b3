#version 450
// The attention's per-head RMS norm (times an optional f32 weight) and then the rotation of the
// head's tail, in place, in one dispatch: rms_norm.comp and rope.comp one after the other (the
// same sums in the same order, the same expressions), without the barrier and the dispatch
// between them (HALO_VK_DEFER_NORM). One workgroup per (head, token).
#define WG 256 // rms_norm.comp's width, so the sum of squares is the same
#include "common.glsl"

layout(binding = 1) buffer X { float d[]; } XB;
layout(binding = 2) readonly buffer CS { float d[]; } CSB;
layout(binding = 3) readonly buffer Wt { float d[]; } WT;
layout(push_constant) uniform PC {
    uint head_dim, n_head, n_rot, x_off, cs_off, w_off, has_w;
    float eps;
} pc;

float normed(uint b, uint i, float r) {
    float v = XB.d[b + i] * r;
    return pc.has_w != 0u ? WT.d[pc.w_off + i] * v : v;
}

void main() {
    uint h = gl_WorkGroupID.x, t = gl_WorkGroupID.y;
    uint b = pc.x_off + (t * pc.n_head + h) * pc.head_dim;
    float ss = 0.0;
    for (uint i = gl_LocalInvocationID.x; i < pc.head_dim; i += WG)
        ss += XB.d[b + i] * XB.d[b + i];
    ss = wg_sum(ss); // every read of x is before its barriers; each element is written once
    float r = 1.0 / sqrt(ss / float(pc.head_dim) + pc.eps);
    uint tail = pc.head_dim - pc.n_rot;
    for (uint i = gl_LocalInvocationID.x; i < tail; i += WG) XB.d[b + i] = normed(b, i, r);
    for (uint i = gl_LocalInvocationID.x; i < pc.n_rot / 2u; i += WG) {
        float c = CSB.d[pc.cs_off + (t * (pc.n_rot / 2u) + i) * 2u];
        float s = CSB.d[pc.cs_off + (t * (pc.n_rot / 2u) + i) * 2u + 1u];
        uint j = tail + 2u * i;
        float a = normed(b, j, r), bb = normed(b, j + 1u, r);
        XB.d[b + j] = a * c - bb * s;
        XB.d[b + j + 1u] = bb * c + a * s;
    }
}
