/* One token's experts, int8 path: the down projections with each warp's rows in one pair, so the
 * pair's quantized h stays in registers (mvq_stream's HOLD; opt-in, HALO_CUDA_DNHOLD=1, or 2 for
 * two rows at a time). Included by moe.cu (CUDA only), after moeq_down_stream.
 *
 * moeq_down_stream's warps take rows stride apart over all the pairs (~3,000 warps, 4,096 rows a
 * pair), so a warp's rows change pair every row or two and each row loads its pair's
 * activation (2 KB of int8 and the sums of Q8_K) from global memory through L1 again. Here the
 * routed part's warps are dealt to its items, wpp = stride / items each (the last few warps
 * idle), and a warp takes rows lw, lw + wpp, ... of its item's pair: one activation a warp, in
 * registers once, and the item, pair and row bases looked up once; a row's place is one
 * float-reciprocal quotient (moe_div.h) where moeq_down_stream's rows run two runtime divisions
 * and two dependent loads three times a row (cuda-moe-1's ncu: ~530 instructions a Q2_K row,
 * ~90 of them its units). The same rows and sums as moeq_down_stream (a row's units in the same
 * order), so the same bits. The shared expert's part (Q8_0 rows of two chunks) is unchanged. */

#include "backend/cuda/moe_div.h"

template <int T> struct moeq_dn_rows {
    const expert_mats &m;
    mvq_tabs *tab;
    const char *row0;    /* the warp's expert's down row 0 */
    uint64_t rb;         /* bytes a row */
    int64_t width;       /* the expert's inputs; 0: an idle warp */
    const uint8_t *act0; /* the warp's pair's quantized h */
    float *yrow;         /* y[pair, .] */
    uint32_t first;      /* the warp's first item index */
    uint32_t lw, wpp;    /* its place among its item's warps, and their count */
    moe_divisor stride;
    uint32_t cur_r;
    /* Item i's row (i = first + k stride: the items mvq_stream passes). */
    __device__ uint32_t r_of(int64_t i) const {
        return lw + wpp * moe_quot((uint32_t)i - first, stride);
    }
    __device__ int64_t row(int64_t i, const char **r) const {
        const uint32_t rr = r_of(i);
        *r = row0 + rr * rb;
        return rr < (uint32_t)m.n_embd ? width : 0;
    }
    __device__ void prepare() const {
        if constexpr (T == HALO_TYPE_IQ2_XXS) {
            mvq_tabs_load(tab, m.g);
            __syncthreads();
        }
    }
    __device__ int64_t begin(int64_t i) {
        cur_r = r_of(i);
        return cur_r < (uint32_t)m.n_embd ? width : 0;
    }
    /* The warp's pair (HOLD calls it once, before any begin). */
    __device__ q8act act() const {
        return mvq_act_at(act0, m.n_h);
    }
    __device__ void end(int64_t, float sum) const {
        if (threadIdx.x % WARP) return;
        yrow[cur_r] = sum;
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
        const uint32_t st = (uint32_t)stride, fw = (uint32_t)first;
        const uint32_t per = n_y > 0 ? st / (uint32_t)n_y : 1u, wpp = per > 0 ? per : 1u;
        const uint32_t it = fw / wpp;
        const bool on = (int32_t)it < n_y;
        const int32_t *item = m.act + 1 + 3 * (y0 + (on ? (int32_t)it : 0));
        const int64_t e = on ? item[0] : 0;
        const int64_t pair = on ? m.pairs[item[1]] : 0;
        const int64_t total = (int64_t)stride * ((m.n_embd + wpp - 1) / wpp);
        moeq_dn_rows<TR> rows = {m,
                                 tab,
                                 m.down + (uint64_t)e * m.n_embd * m.drb,
                                 m.drb,
                                 on ? m.n_ff : 0,
                                 xq + pair * mvq_act_bytes(m.n_h),
                                 y + pair * m.n_embd,
                                 fw,
                                 fw % wpp,
                                 wpp,
                                 moe_divisor_of(st),
                                 0u};
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
