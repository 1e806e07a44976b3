#version 450
// Fast mode's projection by Q8_0 weights: out[o, col] = sum over blocks of
// d_w * d_x * (sum of 32 int8 products), the int8 products summed by the device's packed
// 4x8-bit dot product (VK_KHR_shader_integer_dot_product, OpSDot). Activations come from
// quant_q8.comp, so this computes what ggml's Q8_0 x Q8_0 dot does (the CPU backend's
// non-precise mode), in another summation order. One subgroup per output row, lanes striding
// over blocks; one column per workgroup row.
//
// Debian 12's glslc (shaderc 2023.2, glslang 11.13) has no GL_EXT_integer_dot_product, so the
// instruction is declared through GL_EXT_spirv_intrinsics: SPIR-V opcode 4450 (OpSDot) with
// capabilities DotProduct (6019) and DotProductInput4x8BitPacked (6018), the last operand the
// packed vector format 0 (PackedVectorFormat4x8Bit).
#extension GL_EXT_spirv_intrinsics : require
#define WG 64
#include "common.glsl"
#include "quant.glsl"

spirv_instruction(extensions = ["SPV_KHR_integer_dot_product"], capabilities = [6019, 6018],
                  id = 4450)
int sdot4x8(int a, int b, spirv_literal int packed_format);

layout(binding = 1) readonly buffer Q { uint d[]; } QB;
layout(binding = 2) writeonly buffer Out { float d[]; } OUT;
layout(binding = 3) readonly buffer S { float d[]; } SB;
layout(push_constant) uniform PC {
    uint K, N, groups, w_rel, w_chunk_rows, w_row_bytes, q_off, s_off, nb_col, out_off,
        out_col_stride, rows_per_wg;
} pc;

void main() {
    uint lane = gl_SubgroupInvocationID, ss = gl_SubgroupSize, col = gl_WorkGroupID.y;
    uint row0 = (gl_WorkGroupID.x + gl_WorkGroupID.z * gl_NumWorkGroups.x) * pc.rows_per_wg;
    uint nbw = pc.K / 32u;
    for (uint r = gl_SubgroupID; r < pc.rows_per_wg; r += gl_NumSubgroups) {
        uint o = row0 + r;
        if (o >= pc.N) break;
        uint g = o / (pc.N / pc.groups);
        uint c, base;
        wrow(o, pc.w_rel, pc.w_chunk_rows, pc.w_row_bytes, c, base);
        float acc = 0.0;
        for (uint b = lane; b < nbw; b += ss) {
            uint wb = base + b * 34u, xblk = col * pc.nb_col + g * nbw + b;
            int sumi = 0;
            [[unroll]] for (uint j = 0u; j < 8u; j++)
                sumi += sdot4x8(int(rd32(c, wb + 2u + 4u * j)), int(QB.d[pc.q_off + xblk * 8u + j]),
                                0);
            acc += float(sumi) * (f16v(rd16(c, wb)) * SB.d[pc.s_off + xblk]);
        }
        float s = subgroupAdd(acc);
        if (subgroupElect()) OUT.d[pc.out_off + col * pc.out_col_stride + o] = s;
    }
}
