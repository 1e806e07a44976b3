#version 450
// Indexer top-k for one token (one workgroup each): an exact radix select on the scores' bits.
// Four passes of 8 bits, each a histogram of the rows still tied with the prefix so far, find
// the top_k-th largest score T and how many rows equal to T it takes; then the rows above T and
// the lowest-numbered rows equal to T (the tie rule of every backend: an equal score at a lower
// row wins) are written in row order. Linear in the visible rows; the rank-counting select it
// replaces was quadratic (15.7 ms a token at 6,144 rows on the H200).
#define WG 256
#define WG_SCAN
#include "common.glsl"

layout(binding = 4) readonly buffer Sc { float d[]; } SC;
layout(binding = 5) readonly buffer Pos { int d[]; } POS;
layout(binding = 6) buffer Out { int d[]; } OUT;
layout(push_constant) uniform PC {
    uint n_rows, ratio, top_k, score_off, pos_off, out_off;
} pc;

shared uint hist[256];
shared uint found_digit, found_rem;

// A larger float, a larger key; -0 and +0 are one key (they compare equal).
uint key_of(float f) {
    uint u = floatBitsToUint(f == 0.0 ? 0.0 : f);
    return (u & 0x80000000u) != 0u ? ~u : (u | 0x80000000u);
}

void main() {
    uint t = gl_WorkGroupID.x, lid = gl_LocalInvocationID.x;
    int vis = (POS.d[pc.pos_off + t] + 1) / int(pc.ratio);
    uint visible = vis < 0 ? 0u : min(uint(vis), pc.n_rows);
    uint ob = pc.out_off + t * pc.top_k, sb = pc.score_off + t * pc.n_rows;
    if (pc.top_k == 0u) return;
    if (visible <= pc.top_k) { // every visible row, then -1
        for (uint i = lid; i < pc.top_k; i += WG) OUT.d[ob + i] = i < visible ? int(i) : -1;
        return;
    }
    uint prefix = 0u, mask = 0u, rem = pc.top_k; // rem: rows still to take among the tied
    for (int shift = 24; shift >= 0; shift -= 8) {
        hist[lid] = 0u;
        barrier();
        for (uint s = lid; s < visible; s += WG) {
            uint k = key_of(SC.d[sb + s]);
            if ((k & mask) == prefix) atomicAdd(hist[(k >> uint(shift)) & 255u], 1u);
        }
        barrier();
        // Bins from the top (digit 255 - lid): the one where the count reaches rem.
        uint c = hist[255u - lid], total;
        uint above = wg_scan(c, total);
        if (above < rem && above + c >= rem) {
            found_digit = 255u - lid;
            found_rem = rem - above;
        }
        barrier();
        prefix |= found_digit << uint(shift);
        mask |= 255u << uint(shift);
        rem = found_rem;
        barrier();
    }
    // prefix is T's key; rem rows equal to it are taken, the lowest first.
    uint base = 0u, eq_seen = 0u;
    for (uint s0 = 0u; s0 < visible; s0 += WG) {
        uint s = s0 + lid;
        uint k = s < visible ? key_of(SC.d[sb + s]) : 0u;
        bool on = s < visible;
        uint eq = on && k == prefix ? 1u : 0u, eq_total;
        uint eq_before = wg_scan(eq, eq_total) + eq_seen;
        uint take = on && (k > prefix || (eq == 1u && eq_before < rem)) ? 1u : 0u, taken;
        uint at = wg_scan(take, taken);
        if (take == 1u) OUT.d[ob + base + at] = int(s);
        base += taken;
        eq_seen += eq_total;
    }
}
