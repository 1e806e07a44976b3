// Shared by every shader: extensions, the workgroup sum (and with WG_SCAN the prefix sum), and
// small float helpers. A shader sets WG (its workgroup width) before including this file.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_EXT_control_flow_attributes : require

layout(local_size_x = WG) in;

shared float wg_red[WG];

// Sum over the workgroup: subgroup sums, then one value per subgroup through shared memory.
// Every invocation must call it (it has barriers); every invocation gets the sum.
float wg_sum(float v) {
    v = subgroupAdd(v);
    if (subgroupElect()) wg_red[gl_SubgroupID] = v;
    barrier();
    float s = 0.0;
    for (uint i = 0; i < gl_NumSubgroups; i++) s += wg_red[i];
    barrier();
    return s;
}

#ifdef WG_SCAN // (a shader that scans defines it: the shared array only where it is used)
shared uint wg_sg_total[WG];

// Exclusive prefix sum of v over the workgroup in invocation order; total gets the sum.
// Every invocation must call it (it has barriers).
uint wg_scan(uint v, out uint total) {
    uint incl = subgroupInclusiveAdd(v);
    if (gl_SubgroupInvocationID == gl_SubgroupSize - 1u) wg_sg_total[gl_SubgroupID] = incl;
    barrier();
    uint before = 0u, all = 0u;
    for (uint i = 0u; i < gl_NumSubgroups; i++) {
        uint x = wg_sg_total[i];
        before += i < gl_SubgroupID ? x : 0u;
        all += x;
    }
    barrier();
    total = all;
    return before + incl - v;
}
#endif

float wg_max(float v) {
    v = subgroupMax(v);
    if (subgroupElect()) wg_red[gl_SubgroupID] = v;
    barrier();
    float s = wg_red[0];
    for (uint i = 1; i < gl_NumSubgroups; i++) s = max(s, wg_red[i]);
    barrier();
    return s;
}
