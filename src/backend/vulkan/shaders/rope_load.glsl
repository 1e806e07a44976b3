// The attention output's inverse rope folded into the next projection's activation load
// (HALO_VK_DEFER_ROPE): with ROPE, x is the attention output before rope.comp's inverse
// rotation, and each load of 8 values at flattened input index k (a multiple of 8) of column col
// rotates the consecutive pairs that lie in a head's tail (the last rope_nrot of rope_hd
// channels) back by the column's angles (cos, sin at binding 6, as rope.comp reads them) with
// rope.comp's expressions. Included after the shader's push constants and its MODE constant.
const bool ROPE = (MODE & 8u) != 0u;

layout(binding = 6) readonly buffer RopeCS { vec2 d[]; } RCS;

vec2 unrot(vec2 v, vec2 cs) {
    float s = -cs.y; // inverse
    return vec2(v.x * cs.x - v.y * s, v.y * cs.x + v.x * s);
}

void rope8(inout vec4 a, inout vec4 b, uint k, uint col) {
    uint c = k % pc.rope_hd, tail = pc.rope_hd - pc.rope_nrot;
    if (c < tail) return;
    uint p = pc.cs_off + col * (pc.rope_nrot / 2u) + (c - tail) / 2u;
    a = vec4(unrot(a.xy, RCS.d[p]), unrot(a.zw, RCS.d[p + 1u]));
    b = vec4(unrot(b.xy, RCS.d[p + 2u]), unrot(b.zw, RCS.d[p + 3u]));
}
