#version 450
// RMS norm of each run of `width` elements, in place, times an f32 weight (optional).
#define WG 256 // one row per workgroup: a wide one, so a 4096-row takes 16 steps
#include "common.glsl"

layout(binding = 1) buffer X { float d[]; } XB;
layout(binding = 2) readonly buffer Wt { float d[]; } WT;
layout(push_constant) uniform PC {
    uint width, n_rows, x_off, w_off, has_w;
    float eps;
} pc;

void main() {
    uint row = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
    if (row >= pc.n_rows) return;
    uint b = pc.x_off + row * pc.width;
    float ss = 0.0;
    for (uint i = gl_LocalInvocationID.x; i < pc.width; i += WG) ss += XB.d[b + i] * XB.d[b + i];
    ss = wg_sum(ss);
    float r = 1.0 / sqrt(ss / float(pc.width) + pc.eps);
    for (uint i = gl_LocalInvocationID.x; i < pc.width; i += WG) {
        float v = XB.d[b + i] * r;
        XB.d[b + i] = pc.has_w != 0u ? WT.d[pc.w_off + i] * v : v;
    }
}
