#version 450
// DeepSeek V4 attention for one (head, token): raw window rows the query sees, then
// compressed rows (the indexer's selection, or all causally visible), with the head's sink
// as an extra logit. Online softmax over rows, four at a time; each invocation keeps
// head_dim/128 channels.
// (A subgroup-per-(head, token) variant without workgroup barriers lost channels past 424 on
// lavapipe for some inputs at head_dim 512; this one is checked by test_backend_vulkan_ops.)
#define WG 128
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

const uint MAXD = 4u; // head_dim <= 4 * WG = 512
float q[MAXD], acc[MAXD];
float m_run, l_run;

// Up to 4 rows are gathered and taken at once: their dots share one workgroup sum (two
// barriers for four rows, where one row a step made a decode step's attention a chain of
// hundreds of barriers). The online softmax over 4 rows at once is the same sum, rounded a
// little differently.
uint n_rows;
uint row_base[4];
bool row_comp[4];
shared vec4 red4[WG];

vec4 wg_sum4(vec4 v) {
    v = subgroupAdd(v);
    if (subgroupElect()) red4[gl_SubgroupID] = v;
    barrier();
    vec4 s = vec4(0.0);
    for (uint i = 0u; i < gl_NumSubgroups; i++) s += red4[i];
    barrier();
    return s;
}

void flush_rows() {
    uint lid = gl_LocalInvocationID.x;
    float row[4][MAXD];
    vec4 dot = vec4(0.0);
    [[unroll]] for (uint r = 0u; r < 4u; r++) {
        bool on = r < n_rows;
        uint base = on ? row_base[r] : 0u;
        bool comp = on && row_comp[r];
        [[unroll]] for (uint j = 0u; j < MAXD; j++) {
            uint d = lid + j * WG;
            row[r][j] = on && d < pc.hd ? (comp ? COMP.d[base + d] : WIN.d[base + d]) : 0.0;
            dot[r] += q[j] * row[r][j];
        }
    }
    vec4 logit = wg_sum4(dot) * pc.scale;
    float m_new = m_run;
    [[unroll]] for (uint r = 0u; r < 4u; r++)
        if (r < n_rows) m_new = max(m_new, logit[r]);
    float corr = exp(m_run - m_new), p[4];
    [[unroll]] for (uint r = 0u; r < 4u; r++) p[r] = r < n_rows ? exp(logit[r] - m_new) : 0.0;
    l_run = l_run * corr + p[0] + p[1] + p[2] + p[3];
    [[unroll]] for (uint j = 0u; j < MAXD; j++)
        acc[j] = acc[j] * corr + p[0] * row[0][j] + p[1] * row[1][j] + p[2] * row[2][j] +
                 p[3] * row[3][j];
    m_run = m_new;
    n_rows = 0u;
}

void take(bool comp, uint base) {
    row_base[n_rows] = base;
    row_comp[n_rows] = comp;
    n_rows++;
    if (n_rows == 4u) flush_rows();
}

void main() {
    uint h = gl_WorkGroupID.x, t = gl_WorkGroupID.y, lid = gl_LocalInvocationID.x;
    uint qb = pc.q_off + (t * pc.n_head + h) * pc.hd;
    for (uint j = 0u; j < MAXD; j++) {
        uint d = lid + j * WG;
        q[j] = d < pc.hd ? QB.d[qb + d] : 0.0;
        acc[j] = 0.0;
    }
    n_rows = 0u;
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
    if (n_rows > 0u) flush_rows();
    uint ob = pc.out_off + (t * pc.n_head + h) * pc.hd;
    for (uint j = 0u; j < MAXD; j++) {
        uint d = lid + j * WG;
        if (d < pc.hd) OUT.d[ob + d] = acc[j] / l_run;
    }
}
