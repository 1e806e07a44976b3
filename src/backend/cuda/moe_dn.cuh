/* One token's experts, int8 path: the down projections with each warp's rows in one pair, so the
 * pair's quantized h stays in registers (mvq_stream's HOLD; opt-in, HALO_CUDA_DNHOLD=1, or 2 for
 * two rows at a time). Included by moe.cu (CUDA only), after moeq_down_stream.
 *
 * moeq_down_stream's warps take rows stride apart over all the pairs (~3,000 warps, 4,096 rows a
 * pair), so a warp's rows change pair every row or two and each row loads its pair's
 * activation (2 KB of int8 and the sums of Q8_K) from global memory through L1 again. Here the
 * routed part's warps are dealt to its items, wpp = stride / items each (the last few warps
 * idle), and a warp takes rows lw, lw + wpp, ... of its item's pair: one activation a warp, in
 * registers once. The same rows and sums as moeq_down_stream (a row's units in the same order),
 * so the same bits. The shared expert's part (Q8_0 rows of two chunks) is unchanged. */

template <int T> struct moeq_dn_rows {
    struct at {
        int64_t e, r;
        int32_t p0;
        bool ok;
    };
    const expert_mats &m;
    const uint8_t *xq; /* every pair's quantized h */
    mvq_tabs *tab;
    float *y;
    int32_t y0, n_y; /* the part's items */
    uint32_t stride; /* the part's warps */
    uint32_t wpp;    /* warps an item */
    int32_t item;    /* this warp's item (>= n_y: idle) */
    at cur;
    __device__ at locate(int64_t i) const {
        at t;
        const uint32_t ui = (uint32_t)i, w = ui % stride, k = ui / stride;
        const int32_t it = (int32_t)(w / wpp);
        t.r = (int64_t)(w % wpp + wpp * k);
        t.ok = it < n_y && t.r < m.n_embd;
        const int32_t *p = m.act + 1 + 3 * (y0 + (t.ok ? it : 0));
        t.e = p[0];
        t.p0 = p[1];
        return t;
    }
    __device__ int64_t width(const at &t) const {
        return t.ok ? (t.e == m.n_expert ? m.n_ff_sh : m.n_ff) : 0;
    }
    __device__ int64_t row(int64_t i, const char **r) const {
        const at t = locate(i);
        *r = t.e == m.n_expert ? m.down_sh + t.r * m.drb_sh
                               : m.down + ((uint64_t)t.e * m.n_embd + t.r) * m.drb;
        return width(t);
    }
    __device__ void prepare() const {
        if constexpr (T == HALO_TYPE_IQ2_XXS) {
            mvq_tabs_load(tab, m.g);
            __syncthreads();
        }
    }
    __device__ int64_t begin(int64_t i) {
        cur = locate(i);
        return width(cur);
    }
    /* The warp's pair (HOLD calls it once, before any begin). */
    __device__ q8act act() const {
        const int32_t *p = m.act + 1 + 3 * (y0 + (item < n_y ? item : 0));
        return mvq_act_at(xq + (int64_t)m.pairs[p[1]] * mvq_act_bytes(m.n_h), m.n_h);
    }
    __device__ void end(int64_t, float sum) const {
        if (threadIdx.x % WARP) return;
        y[(int64_t)m.pairs[cur.p0] * m.n_embd + cur.r] = sum;
    }
};

template <int TR, int TS>
__global__ void __launch_bounds__(MOE_FAST_WARPS *WARP, 3)
    moeq_dn_stream(GPU_GRID_CONST const expert_mats m, const uint8_t *xq, float *y, int n_sh,
                   unsigned blocks_r, bool early, int hold) {
    if (early && n_sh > 0 && blockIdx.x >= blocks_r) { /* as moeq_down_stream */
        cu_pdl_trigger();
        moeq_prefetch_share(m.down_sh, (uint64_t)m.n_embd * m.drb_sh, blockIdx.x - blocks_r,
                            gridDim.x - blocks_r);
    }
    cu_pdl_entry();
    extern __shared__ __align__(16) uint8_t mv_dyn[];
    const int warp = threadIdx.x / WARP;
    uint8_t *stage = mv_dyn + warp * MV_STAGES * MV_STAGE;
    mvq_tabs *tab = (mvq_tabs *)(mv_dyn + MOE_FAST_WARPS * MV_STAGES * MV_STAGE + 16);
    const int32_t n_items = m.act[0];
    const bool routed = blockIdx.x < blocks_r;
    const int32_t y0 = routed ? 0 : n_items - n_sh, n_y = routed ? n_items - n_sh : n_sh;
    const int64_t b = routed ? blockIdx.x : blockIdx.x - blocks_r;
    const int64_t nb = routed ? blocks_r : gridDim.x - blocks_r;
    const int64_t first = b * MOE_FAST_WARPS + warp, stride = nb * MOE_FAST_WARPS;
    if (routed) {
        /* At least one warp an item (the host gives the routed part >= 8 warps an item). */
        const uint32_t wpp = n_y > 0 ? (uint32_t)(stride / n_y) : 1u;
        const int64_t total = (int64_t)stride * ((m.n_embd + wpp - 1) / wpp);
        moeq_dn_rows<TR> rows = {
            m, xq, tab, y, y0, n_y, (uint32_t)stride, wpp, (int32_t)(first / wpp), {}};
        const mvq_grid g = mvq_grid_at(tab, m.g);
        if (hold == 2)
            mvq_stream<TR, true, moeq_dn_rows<TR>, true>(rows, first, stride, total, stage, g);
        else
            mvq_stream<TR, true>(rows, first, stride, total, stage, g);
    } else {
        const moe_down_rows<1> r = {m, NULL, y, y0, 1, {}};
        moeq_down_rows<TS> rows = {r, xq, tab};
        mvq_stream<TS>(rows, first, stride, (int64_t)n_y * m.n_embd, stage, mvq_grid_at(tab, m.g));
    }
}
