#version 450
// h = silu(min(g, c)) * clamp(u, -c, c) in place of g (clamp 0: none), f32 like the CPU.
#define WG 64
#include "common.glsl"

layout(binding = 1) buffer G { float d[]; } GB;
layout(binding = 2) readonly buffer U { float d[]; } UB;
layout(push_constant) uniform PC {
    uint n, g_off, u_off;
    float clamp_v;
} pc;

void main() {
    uint i = (gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x) * WG +
             gl_LocalInvocationID.x;
    if (i >= pc.n) return;
    float a = GB.d[pc.g_off + i], b = UB.d[pc.u_off + i];
    if (pc.clamp_v > 0.0) {
        a = min(a, pc.clamp_v);
        b = clamp(b, -pc.clamp_v, pc.clamp_v);
    }
    GB.d[pc.g_off + i] = a / (1.0 + exp(-a)) * b;
}
