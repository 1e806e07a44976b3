#version 450
// The routed (token, expert) pairs of a prefill grouped by expert for moe_mm.comp, in one
// workgroup: each expert's pairs fill whole column tiles of BN slots (the last one padded with
// -1), tiles[t] is the expert of column tile t (-1 past the last), order[slot] the pair in that
// slot. Which slot a pair gets within its expert's tiles is not fixed (atomics), and need not
// be: each output column is computed the same way in any slot.
#define WG 256
#define WG_SCAN
#include "common.glsl"

layout(binding = 3) readonly buffer Sel { int d[]; } SEL;
layout(binding = 4) buffer Order { int d[]; } ORD;
layout(binding = 5) buffer Tiles { int d[]; } TIL;
layout(push_constant) uniform PC {
    uint n_pairs, n_expert, bn, n_tiles, sel_off, ord_off, til_off;
} pc;

const uint MAXE = 1024u, PER = MAXE / WG; // experts (the host checks), a thread's share
shared uint cnt[MAXE], first[MAXE]; // pairs of each expert; its first slot, then the next free

int expert_of(uint p) {
    int e = SEL.d[pc.sel_off + p];
    return e >= 0 && uint(e) < pc.n_expert ? e : -1;
}

void main() {
    uint lid = gl_LocalInvocationID.x;
    for (uint e = lid; e < MAXE; e += WG) cnt[e] = 0u;
    for (uint i = lid; i < pc.n_tiles * pc.bn; i += WG) ORD.d[pc.ord_off + i] = -1;
    for (uint t = lid; t < pc.n_tiles; t += WG) TIL.d[pc.til_off + t] = -1;
    barrier();
    for (uint p = lid; p < pc.n_pairs; p += WG) {
        int e = expert_of(p);
        if (e >= 0) atomicAdd(cnt[uint(e)], 1u);
    }
    barrier();
    // Experts lid·PER .. +PER-1: their tiles, and where each one's start
    uint nt[PER], mine = 0u;
    [[unroll]] for (uint j = 0u; j < PER; j++) {
        nt[j] = (cnt[lid * PER + j] + pc.bn - 1u) / pc.bn;
        mine += nt[j];
    }
    uint all_tiles;
    uint t0 = wg_scan(mine, all_tiles);
    [[unroll]] for (uint j = 0u; j < PER; j++) {
        uint e = lid * PER + j;
        first[e] = t0 * pc.bn;
        for (uint t = 0u; t < nt[j] && t0 + t < pc.n_tiles; t++) TIL.d[pc.til_off + t0 + t] = int(e);
        t0 += nt[j];
    }
    memoryBarrierBuffer();
    barrier();
    for (uint p = lid; p < pc.n_pairs; p += WG) {
        int e = expert_of(p);
        if (e < 0) continue;
        uint slot = atomicAdd(first[uint(e)], 1u);
        if (slot < pc.n_tiles * pc.bn) ORD.d[pc.ord_off + slot] = int(p);
    }
}
