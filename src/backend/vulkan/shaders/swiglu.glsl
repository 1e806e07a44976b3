// The MoE's SwiGLU folded into the down projection's activation load (HALO_VK_FUSE_MOE): with
// SWIGLU the shader's x is the gate projection g, and u (binding 5) the up projection at the
// same column layout, u_delta4 vec4s from g's index; each x load becomes
// silu(min(g, c)) · clamp(u, -c, c) (c = clamp_v, 0: none), moe_swiglu.comp's expression, so
// the SwiGLU dispatch and the barrier between it and the down projection are gone
// (matvec_moe.comp computes it once a workgroup into shared memory instead). Included
// after the shader's push constants (pc.u_delta4, pc.clamp_v) and its MODE constant.
const bool SWIGLU = (MODE & 2u) != 0u;

layout(binding = 5) readonly buffer U4B { vec4 d[]; } U4;

vec4 swiglu4(vec4 g, uint i4) {
    vec4 u = U4.d[uint(int(i4) + pc.u_delta4)];
    if (pc.clamp_v > 0.0) {
        g = min(g, vec4(pc.clamp_v));
        u = clamp(u, vec4(-pc.clamp_v), vec4(pc.clamp_v));
    }
    return g / (1.0 + exp(-g)) * u;
}
