#version 450
// Split-K decode attention, pass 1 (vk_attn_split.c): workgroup (head group, chunk, token)
// runs the online softmax of G heads over one chunk of the token's candidate rows (its visible
// window rows, then its compressed candidates: the indexer's selection or all visible rows)
// and writes the un-normalized partial (max m, sum l, acc[head_dim]) for attn_comb.comp to
// merge with the sink. A token's rows are shared by all heads (K = V, one kv row), so one
// load of a row serves G heads. Each invocation keeps head_dim/128 channels of every head, as
// attention.comp, so nothing here depends on the subgroup size.
#define WG 128
#include "common.glsl"

layout(constant_id = 0) const uint G = 8u; // heads a workgroup (1, 2, 4 or 8)

layout(binding = 1) readonly buffer Q { float d[]; } QB;
layout(binding = 2) readonly buffer Win { float d[]; } WIN;
layout(binding = 3) readonly buffer Comp { float d[]; } COMP;
layout(binding = 4) readonly buffer Sel { int d[]; } SEL;
layout(binding = 6) readonly buffer Pos { int d[]; } POS;
layout(binding = 7) writeonly buffer Part { float d[]; } PART;
layout(push_constant) uniform PC {
    uint hd, n_head, n_win, sliding_window, n_comp, ratio, k_sel, has_comp;
    int win_pos0;
    float scale;
    uint q_off, win_off, comp_off, sel_off, pos_off, acc_off, ml_off, n_split;
} pc;

const uint MAXD = 4u;  // head_dim <= 4 * WG = 512
const uint R = 4u;     // rows a step: their dots share one workgroup sum
const uint MAXSG = 32u; // subgroups of at least 4 lanes (the host checks)
// A finite "minus infinity": an empty chunk's max. exp(NEG - NEG) is 1 where -inf - -inf
// would be NaN, and exp(NEG - m) is 0 against any real logit.
const float NEG = -1.0e30;
const uint NONE = 0xffffffffu, COMP_BIT = 0x80000000u;

float q[G][MAXD], acc[G][MAXD], m_run[G], l_run[G];
// The current block's candidates resolved to element offsets (COMP_BIT: a compressed row;
// NONE: masked out), and the per-subgroup dot sums, double-buffered so a step needs one
// barrier: a write to one half comes after the barrier that ended the reads of it.
shared uint rows_sh[WG];
shared vec4 red[2][MAXSG][G];
uint parity = 0u;

void step(uint i, uint nr) {
    uint lid = gl_LocalInvocationID.x;
    float row[R][MAXD];
    bool on[R];
    vec4 dot[G];
    [[unroll]] for (uint g = 0u; g < G; g++) dot[g] = vec4(0.0);
    [[unroll]] for (uint r = 0u; r < R; r++) {
        uint rb = r < nr ? rows_sh[i + r] : NONE;
        on[r] = rb != NONE;
        bool comp = (rb & COMP_BIT) != 0u;
        uint base = rb & ~COMP_BIT;
        [[unroll]] for (uint j = 0u; j < MAXD; j++) {
            uint d = lid + j * WG;
            row[r][j] = on[r] && d < pc.hd ? (comp ? COMP.d[base + d] : WIN.d[base + d]) : 0.0;
            [[unroll]] for (uint g = 0u; g < G; g++) dot[g][r] += q[g][j] * row[r][j];
        }
    }
    [[unroll]] for (uint g = 0u; g < G; g++) {
        vec4 s = subgroupAdd(dot[g]);
        if (subgroupElect()) red[parity][gl_SubgroupID][g] = s;
    }
    barrier();
    [[unroll]] for (uint g = 0u; g < G; g++) {
        vec4 logit = vec4(0.0);
        for (uint s = 0u; s < gl_NumSubgroups; s++) logit += red[parity][s][g];
        logit *= pc.scale;
        float m_new = m_run[g];
        [[unroll]] for (uint r = 0u; r < R; r++)
            if (on[r]) m_new = max(m_new, logit[r]);
        float corr = exp(m_run[g] - m_new), p[R];
        [[unroll]] for (uint r = 0u; r < R; r++) p[r] = on[r] ? exp(logit[r] - m_new) : 0.0;
        l_run[g] = l_run[g] * corr + p[0] + p[1] + p[2] + p[3];
        [[unroll]] for (uint j = 0u; j < MAXD; j++)
            acc[g][j] = acc[g][j] * corr + p[0] * row[0][j] + p[1] * row[1][j] +
                        p[2] * row[2][j] + p[3] * row[3][j];
        m_run[g] = m_new;
    }
    parity ^= 1u;
}

void main() {
    uint hg = gl_WorkGroupID.x, c = gl_WorkGroupID.y, t = gl_WorkGroupID.z;
    uint lid = gl_LocalInvocationID.x;
    [[unroll]] for (uint g = 0u; g < G; g++) {
        uint h = hg * G + g, qb = pc.q_off + (t * pc.n_head + h) * pc.hd;
        [[unroll]] for (uint j = 0u; j < MAXD; j++) {
            uint d = lid + j * WG;
            q[g][j] = h < pc.n_head && d < pc.hd ? QB.d[qb + d] : 0.0;
            acc[g][j] = 0.0;
        }
        m_run[g] = NEG;
        l_run[g] = 0.0;
    }
    // The token's candidates: window slots lo .. lo + n_w - 1 (the rows it sees are one
    // contiguous run), then n_c compressed ones; chunk c takes an equal share of them.
    int pos = POS.d[pc.pos_off + t];
    int lo = max(0, pos - int(pc.sliding_window) + 1 - pc.win_pos0);
    int hi = min(int(pc.n_win), pos - pc.win_pos0 + 1);
    uint n_w = uint(max(0, hi - lo)), n_c = 0u;
    int visible = pc.has_comp != 0u ? (pos + 1) / int(pc.ratio) : 0;
    if (pc.has_comp != 0u)
        n_c = pc.k_sel > 0u ? pc.k_sel : uint(clamp(visible, 0, int(pc.n_comp)));
    uint total = n_w + n_c, len = (total + pc.n_split - 1u) / pc.n_split;
    uint begin = min(c * len, total), end = min(begin + len, total);
    for (uint b0 = begin; b0 < end; b0 += WG) {
        uint n = min(WG, end - b0), k = b0 + lid;
        if (b0 != begin) barrier(); // the last block's steps have read rows_sh
        if (lid < n) {
            uint rb = NONE;
            if (k < n_w) {
                rb = pc.win_off + (uint(lo) + k) * pc.hd;
            } else if (pc.k_sel > 0u) {
                int s = SEL.d[pc.sel_off + t * pc.k_sel + (k - n_w)];
                if (s >= 0 && s < visible && uint(s) < pc.n_comp)
                    rb = (pc.comp_off + uint(s) * pc.hd) | COMP_BIT;
            } else {
                rb = (pc.comp_off + (k - n_w) * pc.hd) | COMP_BIT;
            }
            rows_sh[lid] = rb;
        }
        barrier();
        for (uint i = 0u; i < n; i += R) step(i, min(R, n - i));
    }
    [[unroll]] for (uint g = 0u; g < G; g++) {
        uint h = hg * G + g;
        if (h >= pc.n_head) continue;
        uint p = (t * pc.n_head + h) * pc.n_split + c;
        [[unroll]] for (uint j = 0u; j < MAXD; j++) {
            uint d = lid + j * WG;
            if (d < pc.hd) PART.d[pc.acc_off + p * pc.hd + d] = acc[g][j];
        }
        if (lid == 0u) {
            PART.d[pc.ml_off + 2u * p] = m_run[g];
            PART.d[pc.ml_off + 2u * p + 1u] = l_run[g];
        }
    }
}
