#version 450
// Rotates consecutive pairs of each head's tail by angles whose cos/sin the host computed
// (cs[t][pair] = cos, sin: the same f32 values as the CPU backend, and exact for any
// position, where GPU sin/cos lose accuracy on large arguments).
#define WG 64
#include "common.glsl"

layout(binding = 1) buffer X { float d[]; } XB;
layout(binding = 2) readonly buffer CS { float d[]; } CSB;
layout(push_constant) uniform PC {
    uint head_dim, n_head, n_rot, x_off, cs_off, inverse;
} pc;

void main() {
    uint h = gl_WorkGroupID.x, t = gl_WorkGroupID.y;
    uint b = pc.x_off + (t * pc.n_head + h) * pc.head_dim + pc.head_dim - pc.n_rot;
    for (uint i = gl_LocalInvocationID.x; i < pc.n_rot / 2u; i += WG) {
        float c = CSB.d[pc.cs_off + (t * (pc.n_rot / 2u) + i) * 2u];
        float s = CSB.d[pc.cs_off + (t * (pc.n_rot / 2u) + i) * 2u + 1u];
        if (pc.inverse != 0u) s = -s;
        float a = XB.d[b + 2u * i], bb = XB.d[b + 2u * i + 1u];
        XB.d[b + 2u * i] = a * c - bb * s;
        XB.d[b + 2u * i + 1u] = bb * c + a * s;
    }
}
