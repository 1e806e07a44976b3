#version 450
// DeepSeek V4 attention for one (head, token): raw window rows the query sees, then
// compressed rows (the indexer's selection, or all causally visible), with the head's sink
// as an extra logit. Online softmax over rows; each invocation keeps head_dim/64 channels.
// (A subgroup-per-(head, token) variant without workgroup barriers lost channels past 424 on
// lavapipe for some inputs at head_dim 512; this one is checked by test_backend_vulkan_ops.)
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
    uint q_off, win_off, comp_off, sel_off, sinks_off, pos_off, out_off;
} pc;

const uint MAXD = 8u; // head_dim <= 512
float q[MAXD], acc[MAXD];
float m_run, l_run;

void take(bool comp, uint base) {
    uint lid = gl_LocalInvocationID.x;
    float row[MAXD];
    float dot = 0.0;
    for (uint j = 0u; j < MAXD; j++) {
        uint d = lid + j * WG;
        row[j] = d < pc.hd ? (comp ? COMP.d[base + d] : WIN.d[base + d]) : 0.0;
        dot += q[j] * row[j];
    }
    float logit = wg_sum(dot) * pc.scale;
    float m_new = max(m_run, logit);
    float corr = exp(m_run - m_new), p = exp(logit - m_new);
    l_run = l_run * corr + p;
    for (uint j = 0u; j < MAXD; j++) acc[j] = acc[j] * corr + p * row[j];
    m_run = m_new;
}

void main() {
    uint h = gl_WorkGroupID.x, t = gl_WorkGroupID.y, lid = gl_LocalInvocationID.x;
    uint qb = pc.q_off + (t * pc.n_head + h) * pc.hd;
    for (uint j = 0u; j < MAXD; j++) {
        uint d = lid + j * WG;
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
    for (uint j = 0u; j < MAXD; j++) {
        uint d = lid + j * WG;
        if (d < pc.hd) OUT.d[ob + d] = acc[j] / l_run;
    }
}
