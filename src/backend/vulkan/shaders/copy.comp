#version 450
// Gathered buffer copies as a compute dispatch (vk_copy_flush): up to VK_COPY_PC_REGIONS
// regions between two buffers, workgroup row y copying region y word by word. On the H200's
// NVIDIA driver a vkCmdCopyBuffer between compute dispatches cost ~8 us a copy inside the
// decode step (session 10's ablation: 40 us a layer for ~4.6 copies); a dispatch with a
// compute-to-compute barrier costs less, and needs no transfer stage in the barriers after it.
#define WG 256
#include "common.glsl"

layout(binding = 1) readonly buffer S { uint d[]; } SRC;
layout(binding = 2) writeonly buffer D { uint d[]; } DST;
// n regions of (source word, destination word, words), each from its binding's start
layout(push_constant) uniform PC { uint n; uint r[30]; } pc;

void main() {
    uint i = gl_WorkGroupID.y;
    if (i >= pc.n) return;
    uint s = pc.r[3u * i], d = pc.r[3u * i + 1u], w = pc.r[3u * i + 2u];
    for (uint k = gl_GlobalInvocationID.x; k < w; k += gl_NumWorkGroups.x * WG)
        DST.d[d + k] = SRC.d[s + k];
}
