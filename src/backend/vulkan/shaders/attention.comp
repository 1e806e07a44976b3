#version 450
// DeepSeek V4 attention. One subgroup per (head, token): raw window rows the query sees, then
// compressed rows (the indexer's selection, or all causally visible), with the head's sink as
// an extra logit; online softmax over the rows. Each lane keeps head_dim / subgroup-size
// channels; dots are summed with subgroupAdd, so no workgroup barrier per row.
#define WG 64
#include "common.glsl"

layout(binding = 1) readonly buffer Q { float d[]; } QB;
layout(binding = 2) readonly buffer Win { float d[]; } WIN;
layout(binding = 3) readonly buffer Comp { float d[]; } COMP;
layout(binding = 4) readonly buffer Sel { int d[]; } SEL;
layout(binding = 5) readonly buffer Sinks { float d[]; } SINKS;
layout(binding = 6) readonly buffer Pos { int d[]; } POS;
layout(binding = 7) writeonly buffer Out { float d[]; } OUT;
layout(push_constant) uniform PC {
    uint hd, n_head, n_win, sliding_window, n_comp, ratio, k_sel, has_comp;
    int win_pos0;
    float scale;
    uint q_off, win_off, comp_off, sel_off, sinks_off, pos_off, out_off, n_units, units_per_wg;
} pc;

const uint MAXD = 64u; // head_dim / subgroup size (the host checks)
float q[MAXD], acc[MAXD];
float m_run, l_run;
uint nd;

void take(bool comp, uint base) {
    uint lane = gl_SubgroupInvocationID, ss = gl_SubgroupSize;
    float dot = 0.0;
    for (uint j = 0u; j < nd; j++) {
        uint d = lane + j * ss;
        float v = d < pc.hd ? (comp ? COMP.d[base + d] : WIN.d[base + d]) : 0.0;
        dot += q[j] * v;
    }
    float logit = subgroupAdd(dot) * pc.scale;
    float m_new = max(m_run, logit);
    float corr = exp(m_run - m_new), p = exp(logit - m_new);
    l_run = l_run * corr + p;
    for (uint j = 0u; j < nd; j++) {
        uint d = lane + j * ss;
        float v = d < pc.hd ? (comp ? COMP.d[base + d] : WIN.d[base + d]) : 0.0;
        acc[j] = acc[j] * corr + p * v;
    }
    m_run = m_new;
}

void main() {
    uint lane = gl_SubgroupInvocationID, ss = gl_SubgroupSize;
    nd = min((pc.hd + ss - 1u) / ss, MAXD);
    uint unit0 = (gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x) * pc.units_per_wg;
    for (uint r = gl_SubgroupID; r < pc.units_per_wg; r += gl_NumSubgroups) {
        uint unit = unit0 + r;
        if (unit >= pc.n_units) break;
        uint h = unit % pc.n_head, t = unit / pc.n_head;
        uint qb = pc.q_off + (t * pc.n_head + h) * pc.hd;
        for (uint j = 0u; j < nd; j++) {
            uint d = lane + j * ss;
            q[j] = d < pc.hd ? QB.d[qb + d] : 0.0;
            acc[j] = 0.0;
        }
        m_run = SINKS.d[pc.sinks_off + h];
        l_run = 1.0; // the sink's own exp(sink - m)
        int pos = POS.d[pc.pos_off + t];
        for (uint i = 0u; i < pc.n_win; i++) {
            int kp = pc.win_pos0 + int(i);
            if (kp > pos || pos - kp >= int(pc.sliding_window)) continue;
            take(false, pc.win_off + i * pc.hd);
        }
        if (pc.has_comp != 0u) {
            int visible = (pos + 1) / int(pc.ratio);
            if (pc.k_sel > 0u) {
                for (uint i = 0u; i < pc.k_sel; i++) {
                    int s = SEL.d[pc.sel_off + t * pc.k_sel + i];
                    if (s < 0 || s >= visible || uint(s) >= pc.n_comp) continue;
                    take(true, pc.comp_off + uint(s) * pc.hd);
                }
            } else {
                for (int w = 0; w < visible && uint(w) < pc.n_comp; w++)
                    take(true, pc.comp_off + uint(w) * pc.hd);
            }
        }
        uint ob = pc.out_off + (t * pc.n_head + h) * pc.hd;
        for (uint j = 0u; j < nd; j++) {
            uint d = lane + j * ss;
            if (d < pc.hd) OUT.d[ob + d] = acc[j] / l_run;
        }
    }
}
