/* DeepSeek V4 mixture of experts on the GPU, in the CPU backend's phases: router projection
 * (the matmul kernel); per token the scores (sqrt-softplus, sigmoid or softmax), the choice of
 * experts (biased top-k with the lowest index winning ties, or the hash table) and their
 * weights; the (token, slot) pairs grouped by expert on the device; gate/up projections and the
 * clamped SwiGLU for one block of rows of one expert over all its pairs, MOE_TOK pairs at a time
 * (each expert's weights read once per MOE_TOK tokens); the down projections likewise; and the
 * weighted sum per token in slot order. Nothing is read back to the host. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/gemm_mma.h"
#include "backend/cuda/mvq.cuh"

enum { MOE_WARPS = 4, MOE_TOK = 8, MOE_ITEM = 64 /* pairs per work item */ };
enum { MOE_FAST_WARPS = 8 }; /* warps per block of the fast kernels */

#include "backend/cuda/moe_route.cuh"

typedef struct expert_mats {
    const char *gate, *up, *down; /* routed: stacked over experts */
    uint32_t gate_type, up_type, down_type;
    const char *gate_sh, *up_sh, *down_sh; /* shared expert, or NULL */
    uint32_t gate_sh_type, up_sh_type, down_sh_type;
    int64_t n_embd, n_ff, n_ff_sh, n_expert, n_h;
    uint32_t slots;
    float clamp_exp, clamp_sh;
    const int32_t *first, *pairs, *act;
    uint64_t grb, urb, drb, grb_sh, urb_sh, drb_sh; /* bytes per row of each matrix */
    cu_grids g;
} expert_mats;

/* h[pair, r] = silu(min(gate·x, c)) · clamp(up·x, ±c) for rows r of one expert. */
__global__ void gate_up_kernel(expert_mats m, const float *x, float *h) {
    cu_pdl_entry();
    if ((int32_t)blockIdx.y >= m.act[0]) return;
    const int32_t *item = m.act + 1 + 3 * blockIdx.y;
    const int64_t e = item[0];
    const bool shared = e == m.n_expert;
    const int64_t rows = shared ? m.n_ff_sh : m.n_ff;
    const int64_t r = (int64_t)blockIdx.x * MOE_WARPS + threadIdx.x / WARP;
    const int32_t p0 = item[1], p1 = item[2];
    if (r >= rows || p0 == p1) return;
    const uint32_t gt = shared ? m.gate_sh_type : m.gate_type;
    const uint32_t ut = shared ? m.up_sh_type : m.up_type;
    const uint64_t grb = shared ? m.grb_sh : m.grb, urb = shared ? m.urb_sh : m.urb;
    const char *grow = shared ? m.gate_sh + r * grb : m.gate + ((uint64_t)e * m.n_ff + r) * grb;
    const char *urow = shared ? m.up_sh + r * urb : m.up + ((uint64_t)e * m.n_ff + r) * urb;
    const float clamp = shared ? m.clamp_sh : m.clamp_exp;
    for (int32_t i0 = p0; i0 < p1; i0 += MOE_TOK) {
        int nt = p1 - i0 < MOE_TOK ? p1 - i0 : MOE_TOK;
        const float *xs[MOE_TOK];
        for (int k = 0; k < MOE_TOK; k++)
            xs[k] = x + (int64_t)(m.pairs[i0 + (k < nt ? k : 0)] / m.slots) * m.n_embd;
        float gv[MOE_TOK], uv[MOE_TOK];
        warp_dot_gather<MOE_TOK>(gt, grow, m.n_embd, xs, nt, gv, m.g);
        warp_dot_gather<MOE_TOK>(ut, urow, m.n_embd, xs, nt, uv, m.g);
        if (threadIdx.x % WARP == 0)
            for (int k = 0; k < nt; k++) {
                float a = gv[k], b = uv[k];
                if (clamp > 0) {
                    a = a > clamp ? clamp : a;
                    b = b > clamp ? clamp : b < -clamp ? -clamp : b;
                }
                h[(int64_t)m.pairs[i0 + k] * m.n_h + r] = a / (1.0f + expf(-a)) * b;
            }
    }
}

/* y[pair, r] = down[r] · h[pair] for rows r of one expert. */
__global__ void down_kernel(expert_mats m, const float *h, float *y) {
    cu_pdl_entry();
    if ((int32_t)blockIdx.y >= m.act[0]) return;
    const int32_t *item = m.act + 1 + 3 * blockIdx.y;
    const int64_t e = item[0];
    const bool shared = e == m.n_expert;
    const int64_t r = (int64_t)blockIdx.x * MOE_WARPS + threadIdx.x / WARP;
    const int32_t p0 = item[1], p1 = item[2];
    if (r >= m.n_embd || p0 == p1) return;
    const uint32_t dt = shared ? m.down_sh_type : m.down_type;
    const int64_t n_in = shared ? m.n_ff_sh : m.n_ff;
    const uint64_t rb = shared ? m.drb_sh : m.drb;
    const char *row = shared ? m.down_sh + r * rb : m.down + ((uint64_t)e * m.n_embd + r) * rb;
    for (int32_t i0 = p0; i0 < p1; i0 += MOE_TOK) {
        int nt = p1 - i0 < MOE_TOK ? p1 - i0 : MOE_TOK;
        const float *hs[MOE_TOK];
        for (int k = 0; k < MOE_TOK; k++)
            hs[k] = h + (int64_t)m.pairs[i0 + (k < nt ? k : 0)] * m.n_h;
        float acc[MOE_TOK];
        warp_dot_gather<MOE_TOK>(dt, row, n_in, hs, nt, acc, m.g);
        if (threadIdx.x % WARP == 0)
            for (int k = 0; k < nt; k++)
                y[(int64_t)m.pairs[i0 + k] * m.n_embd + r] = acc[k];
    }
}

/* The type pairs (routed, shared) with fast expert kernels: ds4's q2 mix (IQ2_XXS gate/up,
 * Q2_K down), its q4 layers (Q4_K) and the MXFP4 mix, each with a Q8_0 shared expert. */
#define MOE_GATE_UP_PAIRS(X)                                                                       \
    X(HALO_TYPE_IQ2_XXS, HALO_TYPE_Q8_0)                                                           \
    X(HALO_TYPE_Q4_K, HALO_TYPE_Q8_0) X(HALO_TYPE_MXFP4, HALO_TYPE_Q8_0)
#define MOE_DOWN_PAIRS(X)                                                                          \
    X(HALO_TYPE_Q2_K, HALO_TYPE_Q8_0)                                                              \
    X(HALO_TYPE_Q4_K, HALO_TYPE_Q8_0) X(HALO_TYPE_MXFP4, HALO_TYPE_Q8_0)

#ifdef HALO_HIP
/* The fast versions (mv.cuh): routed experts of type TR, the shared expert of type TS, NT
 * pairs at a time; one warp per row. */

template <int TR, int TS, int NT>
__global__ void __launch_bounds__(MOE_FAST_WARPS *WARP, 2)
    gate_up_fast(expert_mats m, const float *x, float *h) {
    cu_pdl_entry();
    extern __shared__ __align__(16) uint8_t mv_dyn[];
    if ((int32_t)blockIdx.y >= m.act[0]) return;
    const int warp = threadIdx.x / WARP;
    uint8_t *stage = mv_dyn + warp * MV_STAGES * MV_STAGE;
    const int32_t *item = m.act + 1 + 3 * blockIdx.y;
    const int64_t e = item[0];
    const bool shared = e == m.n_expert;
    const int64_t rows = shared ? m.n_ff_sh : m.n_ff;
    const int64_t r = (int64_t)blockIdx.x * MOE_FAST_WARPS + warp;
    const int32_t p0 = item[1], p1 = item[2];
    if (r >= rows) return; /* whole warps; no block barrier below */
    const uint64_t grb = shared ? m.grb_sh : m.grb, urb = shared ? m.urb_sh : m.urb;
    const char *grow = shared ? m.gate_sh + r * grb : m.gate + ((uint64_t)e * m.n_ff + r) * grb;
    const char *urow = shared ? m.up_sh + r * urb : m.up + ((uint64_t)e * m.n_ff + r) * urb;
    const float clamp = shared ? m.clamp_sh : m.clamp_exp;
    for (int32_t i0 = p0; i0 < p1; i0 += NT) {
        const int nt = p1 - i0 < NT ? p1 - i0 : NT;
        const float *xs[NT];
#pragma unroll
        for (int k = 0; k < NT; k++)
            xs[k] = x + (int64_t)(m.pairs[i0 + (k < nt ? k : 0)] / m.slots) * m.n_embd;
        float gv[NT], uv[NT];
        if (shared) {
            mv_row<TS, NT>(grow, 0, m.n_embd, xs, nt, gv, stage, m.g);
            mv_row<TS, NT>(urow, 0, m.n_embd, xs, nt, uv, stage, m.g);
        } else {
            mv_row<TR, NT>(grow, 0, m.n_embd, xs, nt, gv, stage, m.g);
            mv_row<TR, NT>(urow, 0, m.n_embd, xs, nt, uv, stage, m.g);
        }
        if (threadIdx.x % WARP == 0)
            for (int k = 0; k < nt; k++) {
                float a = gv[k], b = uv[k];
                if (clamp > 0) {
                    a = a > clamp ? clamp : a;
                    b = b > clamp ? clamp : b < -clamp ? -clamp : b;
                }
                h[(int64_t)m.pairs[i0 + k] * m.n_h + r] = a / (1.0f + expf(-a)) * b;
            }
    }
}

template <int TR, int TS, int NT>
__global__ void __launch_bounds__(MOE_FAST_WARPS *WARP, 2)
    down_fast(expert_mats m, const float *h, float *y) {
    cu_pdl_entry();
    extern __shared__ __align__(16) uint8_t mv_dyn[];
    if ((int32_t)blockIdx.y >= m.act[0]) return;
    const int warp = threadIdx.x / WARP;
    uint8_t *stage = mv_dyn + warp * MV_STAGES * MV_STAGE;
    const int32_t *item = m.act + 1 + 3 * blockIdx.y;
    const int64_t e = item[0];
    const bool shared = e == m.n_expert;
    const int64_t r = (int64_t)blockIdx.x * MOE_FAST_WARPS + warp;
    const int32_t p0 = item[1], p1 = item[2];
    if (r >= m.n_embd) return;
    const int64_t n_in = shared ? m.n_ff_sh : m.n_ff;
    const uint64_t rb = shared ? m.drb_sh : m.drb;
    const char *row = shared ? m.down_sh + r * rb : m.down + ((uint64_t)e * m.n_embd + r) * rb;
    for (int32_t i0 = p0; i0 < p1; i0 += NT) {
        const int nt = p1 - i0 < NT ? p1 - i0 : NT;
        const float *hs[NT];
#pragma unroll
        for (int k = 0; k < NT; k++)
            hs[k] = h + (int64_t)m.pairs[i0 + (k < nt ? k : 0)] * m.n_h;
        float acc[NT];
        if (shared)
            mv_row<TS, NT>(row, 0, n_in, hs, nt, acc, stage, m.g);
        else
            mv_row<TR, NT>(row, 0, n_in, hs, nt, acc, stage, m.g);
        if (threadIdx.x % WARP == 0)
            for (int k = 0; k < nt; k++)
                y[(int64_t)m.pairs[i0 + k] * m.n_embd + r] = acc[k];
    }
}

static bool moe_fast_gate_up(cu_backend *be, uint32_t tr, uint32_t ts, int nt, dim3 grid,
                             const expert_mats &m, const float *x, float *h) {
    /* Block formats only: both types of a pair are (a float shared expert would need none). */
    const int smem = MOE_FAST_WARPS * MV_STAGES * MV_STAGE;
#define GU_CASE(a, b)                                                                              \
    if (tr == (a) && ts == (b)) {                                                                  \
        static bool done1, done8;                                                                  \
        if (nt == 1) {                                                                             \
            if (!cu_smem_attr(be, gate_up_fast<a, b, 1>, smem, &done1, "moe")) return true;        \
            cu_launch(be, gate_up_fast<a, b, 1>, grid, MOE_FAST_WARPS *WARP, smem, m, x, h);       \
        } else {                                                                                   \
            if (!cu_smem_attr(be, gate_up_fast<a, b, 8>, smem, &done8, "moe")) return true;        \
            cu_launch(be, gate_up_fast<a, b, 8>, grid, MOE_FAST_WARPS *WARP, smem, m, x, h);       \
        }                                                                                          \
        return true;                                                                               \
    }
    MOE_GATE_UP_PAIRS(GU_CASE)
#undef GU_CASE
    return false;
}

static bool moe_fast_down(cu_backend *be, uint32_t tr, uint32_t ts, int nt, dim3 grid,
                          const expert_mats &m, const float *h, float *y) {
    const int smem = MOE_FAST_WARPS * MV_STAGES * MV_STAGE;
#define DN_CASE(a, b)                                                                              \
    if (tr == (a) && ts == (b)) {                                                                  \
        static bool done1, done8;                                                                  \
        if (nt == 1) {                                                                             \
            if (!cu_smem_attr(be, down_fast<a, b, 1>, smem, &done1, "moe")) return true;           \
            cu_launch(be, down_fast<a, b, 1>, grid, MOE_FAST_WARPS *WARP, smem, m, h, y);          \
        } else {                                                                                   \
            if (!cu_smem_attr(be, down_fast<a, b, 8>, smem, &done8, "moe")) return true;           \
            cu_launch(be, down_fast<a, b, 8>, grid, MOE_FAST_WARPS *WARP, smem, m, h, y);          \
        }                                                                                          \
        return true;                                                                               \
    }
    MOE_DOWN_PAIRS(DN_CASE)
#undef DN_CASE
    return false;
}

#else
/* CUDA: the experts' rows as streams (mv_stream): work items of act (mv: group, pair range)
 * times pair groups of NT times rows. The first blocks take the routed experts' items (type
 * TR), the rest the shared expert's (type TS: its items are the last n_sh of act). */
template <int NT> struct moe_up_rows {
    const expert_mats &m;
    const float *x;
    float *hg, *hu;
    int32_t y0;
    int n_pg;
    struct at {
        int64_t e, r;
        int32_t p0, p1;
        int mat;
    };
    /* 32-bit arithmetic: item counts stay far below 2^32 (a bound is checked on the host). */
    __device__ at locate(int64_t i) const {
        at t;
        const uint32_t ui = (uint32_t)i, nh = (uint32_t)m.n_h;
        t.r = ui % nh;
        uint32_t rest = ui / nh;
        const int pg = (int)(rest % (uint32_t)n_pg);
        rest /= (uint32_t)n_pg;
        t.mat = (int)(rest & 1);
        const int32_t *item = m.act + 1 + 3 * (y0 + (int32_t)(rest >> 1));
        t.e = item[0];
        t.p0 = item[1] + pg * NT;
        t.p1 = t.p0 + NT < item[2] ? t.p0 + NT : item[2];
        return t;
    }
    at cur; /* the item begun last (end follows begin for the same item) */
    __device__ int64_t width(const at &t) const {
        const int64_t rows = t.e == m.n_expert ? m.n_ff_sh : m.n_ff;
        return t.p0 < t.p1 && t.r < rows ? m.n_embd : 0;
    }
    __device__ int64_t row(int64_t i, const char **r) const {
        at t = locate(i);
        if (t.e == m.n_expert)
            *r = t.mat ? m.up_sh + t.r * m.urb_sh : m.gate_sh + t.r * m.grb_sh;
        else
            *r = t.mat ? m.up + ((uint64_t)t.e * m.n_ff + t.r) * m.urb
                       : m.gate + ((uint64_t)t.e * m.n_ff + t.r) * m.grb;
        return width(t);
    }
    __device__ int64_t begin(int64_t i, const float **xs, int &nt) {
        at t = cur = locate(i);
        nt = t.p1 - t.p0;
#pragma unroll
        for (int k = 0; k < NT; k++)
            xs[k] = x + (int64_t)(m.pairs[t.p0 + (k < nt ? k : 0)] / m.slots) * m.n_embd;
        return width(t);
    }
    __device__ void end(int64_t, const float *acc, int nt) const {
        if (threadIdx.x % WARP) return;
        const at &t = cur;
        float *h = t.mat ? hu : hg;
        for (int k = 0; k < nt; k++)
            h[(int64_t)m.pairs[t.p0 + k] * m.n_h + t.r] = acc[k];
    }
};

template <int NT> struct moe_down_rows {
    const expert_mats &m;
    const float *h;
    float *y;
    int32_t y0;
    int n_pg;
    struct at {
        int64_t e, r;
        int32_t p0, p1;
    };
    __device__ at locate(int64_t i) const {
        at t;
        const uint32_t ui = (uint32_t)i, ne = (uint32_t)m.n_embd;
        t.r = ui % ne;
        const uint32_t rest = ui / ne;
        const int pg = (int)(rest % (uint32_t)n_pg);
        const int32_t *item = m.act + 1 + 3 * (y0 + (int32_t)(rest / (uint32_t)n_pg));
        t.e = item[0];
        t.p0 = item[1] + pg * NT;
        t.p1 = t.p0 + NT < item[2] ? t.p0 + NT : item[2];
        return t;
    }
    at cur;
    __device__ int64_t width(const at &t) const {
        return t.p0 < t.p1 ? (t.e == m.n_expert ? m.n_ff_sh : m.n_ff) : 0;
    }
    __device__ int64_t row(int64_t i, const char **r) const {
        at t = locate(i);
        *r = t.e == m.n_expert ? m.down_sh + t.r * m.drb_sh
                               : m.down + ((uint64_t)t.e * m.n_embd + t.r) * m.drb;
        return width(t);
    }
    __device__ int64_t begin(int64_t i, const float **xs, int &nt) {
        at t = cur = locate(i);
        nt = t.p1 - t.p0;
#pragma unroll
        for (int k = 0; k < NT; k++)
            xs[k] = h + (int64_t)m.pairs[t.p0 + (k < nt ? k : 0)] * m.n_h;
        return width(t);
    }
    __device__ void end(int64_t, const float *acc, int nt) const {
        if (threadIdx.x % WARP) return;
        const at &t = cur;
        for (int k = 0; k < nt; k++)
            y[(int64_t)m.pairs[t.p0 + k] * m.n_embd + t.r] = acc[k];
    }
};

template <int TR, int TS, int NT>
__global__ void __launch_bounds__(MOE_FAST_WARPS *WARP, NT == 1 ? 3 : 2)
    moe_up_stream(GPU_GRID_CONST const expert_mats m, const float *x, float *hg, float *hu,
                  int n_pg, int n_sh, unsigned blocks_r) {
    cu_pdl_entry();
    extern __shared__ __align__(16) uint8_t mv_dyn[];
    const int warp = threadIdx.x / WARP;
    uint8_t *stage = mv_dyn + warp * MV_STAGES * MV_STAGE;
    const int32_t n_items = m.act[0];
    const bool routed = blockIdx.x < blocks_r;
    const int32_t y0 = routed ? 0 : n_items - n_sh, n_y = routed ? n_items - n_sh : n_sh;
    moe_up_rows<NT> rows = {m, x, hg, hu, y0, n_pg, {}};
    const int64_t total = (int64_t)n_y * 2 * n_pg * m.n_h;
    const int64_t b = routed ? blockIdx.x : blockIdx.x - blocks_r;
    const int64_t nb = routed ? blocks_r : gridDim.x - blocks_r;
    if (routed)
        mv_stream<TR, NT>(rows, b * MOE_FAST_WARPS + warp, nb * MOE_FAST_WARPS, total, stage, m.g);
    else
        mv_stream<TS, NT>(rows, b * MOE_FAST_WARPS + warp, nb * MOE_FAST_WARPS, total, stage, m.g);
}

template <int TR, int TS, int NT>
__global__ void __launch_bounds__(MOE_FAST_WARPS *WARP, NT == 1 ? 3 : 2)
    moe_down_stream(GPU_GRID_CONST const expert_mats m, const float *h, float *y, int n_pg,
                    int n_sh, unsigned blocks_r) {
    cu_pdl_entry();
    extern __shared__ __align__(16) uint8_t mv_dyn[];
    const int warp = threadIdx.x / WARP;
    uint8_t *stage = mv_dyn + warp * MV_STAGES * MV_STAGE;
    const int32_t n_items = m.act[0];
    const bool routed = blockIdx.x < blocks_r;
    const int32_t y0 = routed ? 0 : n_items - n_sh, n_y = routed ? n_items - n_sh : n_sh;
    moe_down_rows<NT> rows = {m, h, y, y0, n_pg, {}};
    const int64_t total = (int64_t)n_y * n_pg * m.n_embd;
    const int64_t b = routed ? blockIdx.x : blockIdx.x - blocks_r;
    const int64_t nb = routed ? blocks_r : gridDim.x - blocks_r;
    if (routed)
        mv_stream<TR, NT>(rows, b * MOE_FAST_WARPS + warp, nb * MOE_FAST_WARPS, total, stage, m.g);
    else
        mv_stream<TS, NT>(rows, b * MOE_FAST_WARPS + warp, nb * MOE_FAST_WARPS, total, stage, m.g);
}

/* h[pair, r] = silu(min(g, c)) · clamp(u, ±c) over the rows of each pair's expert (hg = h). */
__global__ void moe_swiglu_kernel(float *hg, const float *hu, int64_t n_pairs, int64_t n_h,
                                  uint32_t k, uint32_t slots, int64_t n_ff, int64_t n_ff_sh,
                                  float clamp_exp, float clamp_sh) {
    cu_pdl_entry();
    const int64_t id = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (id >= n_pairs * n_h) return;
    const int64_t p = id / n_h, r = id % n_h;
    const bool shared = (uint32_t)(p % slots) >= k;
    if (r >= (shared ? n_ff_sh : n_ff)) return;
    const float c = shared ? clamp_sh : clamp_exp;
    float a = hg[id], b = hu[id];
    if (c > 0) {
        a = a > c ? c : a;
        b = b > c ? c : b < -c ? -c : b;
    }
    hg[id] = a / (1.0f + expf(-a)) * b;
}

/* Relative decoding cost per weight (for sharing blocks between routed and shared work). */
static double moe_cost(uint32_t t) {
    return t == HALO_TYPE_IQ2_XXS ? 2.5
           : t == HALO_TYPE_Q2_K  ? 2.0
           : t == HALO_TYPE_Q8_0  ? 1.0
                                  : 1.5;
}

typedef struct moe_stream_plan {
    int n_pg, n_sh;
    unsigned blocks_r, blocks;
} moe_stream_plan;

static bool moe_stream_up(cu_backend *be, uint32_t tr, uint32_t ts, int nt,
                          const moe_stream_plan &sp, const expert_mats &m, const float *x,
                          float *hg, float *hu) {
    const int smem = MOE_FAST_WARPS * MV_STAGES * MV_STAGE;
#define UP_CASE(a, b)                                                                              \
    if (tr == (a) && ts == (b)) {                                                                  \
        static bool done1, done8;                                                                  \
        if (nt == 1) {                                                                             \
            if (!cu_smem_attr(be, moe_up_stream<a, b, 1>, smem, &done1, "moe")) return true;       \
            cu_launch(be, moe_up_stream<a, b, 1>, sp.blocks, MOE_FAST_WARPS *WARP, smem, m, x, hg, \
                      hu, sp.n_pg, sp.n_sh, sp.blocks_r);                                          \
        } else {                                                                                   \
            if (!cu_smem_attr(be, moe_up_stream<a, b, 8>, smem, &done8, "moe")) return true;       \
            cu_launch(be, moe_up_stream<a, b, 8>, sp.blocks, MOE_FAST_WARPS *WARP, smem, m, x, hg, \
                      hu, sp.n_pg, sp.n_sh, sp.blocks_r);                                          \
        }                                                                                          \
        return true;                                                                               \
    }
    MOE_GATE_UP_PAIRS(UP_CASE)
#undef UP_CASE
    return false;
}

static bool moe_stream_down(cu_backend *be, uint32_t tr, uint32_t ts, int nt,
                            const moe_stream_plan &sp, const expert_mats &m, const float *h,
                            float *y) {
    const int smem = MOE_FAST_WARPS * MV_STAGES * MV_STAGE;
#define DN_CASE(a, b)                                                                              \
    if (tr == (a) && ts == (b)) {                                                                  \
        static bool done1, done8;                                                                  \
        if (nt == 1) {                                                                             \
            if (!cu_smem_attr(be, moe_down_stream<a, b, 1>, smem, &done1, "moe")) return true;     \
            cu_launch(be, moe_down_stream<a, b, 1>, sp.blocks, MOE_FAST_WARPS *WARP, smem, m, h,   \
                      y, sp.n_pg, sp.n_sh, sp.blocks_r);                                           \
        } else {                                                                                   \
            if (!cu_smem_attr(be, moe_down_stream<a, b, 8>, smem, &done8, "moe")) return true;     \
            cu_launch(be, moe_down_stream<a, b, 8>, sp.blocks, MOE_FAST_WARPS *WARP, smem, m, h,   \
                      y, sp.n_pg, sp.n_sh, sp.blocks_r);                                           \
        }                                                                                          \
        return true;                                                                               \
    }
    MOE_DOWN_PAIRS(DN_CASE)
#undef DN_CASE
    return false;
}

/* ---- one token over int8 activations (HALO_CUDA_INTDOT=1, mvq.cuh) --------------------------
 * The routed blocks quantize x as their type's activation (Q8_K for IQ2_XXS), the shared
 * expert's blocks as theirs (Q8_0), each into its own shared memory; the SwiGLU kernel
 * quantizes each pair's h for the down projections (into xq, mvq_act_bytes(n_h) a pair). */
template <int T> struct moeq_up_rows {
    moe_up_rows<1> r;
    const float *x;
    uint8_t *xq;
    mvq_tabs *tab;
    int64_t n;
    __device__ int64_t row(int64_t i, const char **w) const {
        return r.row(i, w);
    }
    __device__ void prepare() const {
        if constexpr (T == HALO_TYPE_IQ2_XXS) mvq_tabs_load(tab, r.m.g);
        mvq_quant_block<mvq_k(T)>(x, n, xq);
        __syncthreads();
    }
    __device__ int64_t begin(int64_t i) {
        const float *xs[1];
        int nt = 1;
        return r.begin(i, xs, nt);
    }
    __device__ q8act act() const {
        return mvq_act_at(xq, n);
    }
    __device__ void end(int64_t i, float sum) const {
        r.end(i, &sum, 1);
    }
};

template <int T> struct moeq_down_rows {
    moe_down_rows<1> r;
    const uint8_t *xq; /* every pair's quantized h */
    mvq_tabs *tab;
    __device__ int64_t row(int64_t i, const char **w) const {
        return r.row(i, w);
    }
    __device__ void prepare() const {
        if constexpr (T == HALO_TYPE_IQ2_XXS) {
            mvq_tabs_load(tab, r.m.g);
            __syncthreads();
        }
    }
    __device__ int64_t begin(int64_t i) {
        const float *xs[1];
        int nt = 1;
        return r.begin(i, xs, nt);
    }
    __device__ q8act act() const {
        const int64_t pair = r.m.pairs[r.cur.p0];
        return mvq_act_at(xq + pair * mvq_act_bytes(r.m.n_h), r.m.n_h);
    }
    __device__ void end(int64_t i, float sum) const {
        r.end(i, &sum, 1);
    }
};

/* Block b of nb asks L2 for its share of the n bytes at p, its warps in turn. */
static __device__ __forceinline__ void moeq_prefetch_share(const char *p, uint64_t n, uint64_t b,
                                                           uint64_t nb) {
    const uint64_t lines = (n + 127) / 128, per = (lines + nb - 1) / nb;
    const uint64_t l0 = b * per, l1 = l0 + per < lines ? l0 + per : lines;
    const uint64_t w = threadIdx.x / WARP, nw = blockDim.x / WARP, step = 4096 * nw;
    for (uint64_t o = 128 * l0 + 4096 * w; o < 128 * l1; o += step)
        cu_prefetch_l2(p + o, 128 * l1 - o < 4096 ? 128 * l1 - o : 4096);
}

/* hold: the routed rows are one chunk each (n_embd == mvq_ch(TR)), so their activations stay in
 * registers (mvq_stream's HOLD); two blocks a multiprocessor (the registers that takes, and
 * the IQ2_XXS grid's 16 copies in shared memory). */
template <int TR, int TS>
__global__ void __launch_bounds__(MOE_FAST_WARPS *WARP, 2)
    moeq_up_stream(GPU_GRID_CONST const expert_mats m, const float *x, float *hg, float *hu,
                   int n_sh, unsigned blocks_r, int hold, bool early) {
    if (early && n_sh > 0 && blockIdx.x >= blocks_r) {
        /* The shared expert's rows do not depend on the routing: each of its blocks asks L2
         * for its share of them while the routing kernel (one block) runs. */
        cu_pdl_trigger();
        moeq_prefetch_share(m.gate_sh, (uint64_t)m.n_ff_sh * m.grb_sh, blockIdx.x - blocks_r,
                            gridDim.x - blocks_r);
        moeq_prefetch_share(m.up_sh, (uint64_t)m.n_ff_sh * m.urb_sh, blockIdx.x - blocks_r,
                            gridDim.x - blocks_r);
    }
    cu_pdl_entry();
    extern __shared__ __align__(16) uint8_t mv_dyn[];
    const int warp = threadIdx.x / WARP;
    uint8_t *stage = mv_dyn + warp * MV_STAGES * MV_STAGE;
    uint8_t *xq = mv_dyn + MOE_FAST_WARPS * MV_STAGES * MV_STAGE + 16;
    mvq_tabs *tab = (mvq_tabs *)(xq + mvq_act_bytes(m.n_embd));
    const int32_t n_items = m.act[0];
    const bool routed = blockIdx.x < blocks_r;
    const int32_t y0 = routed ? 0 : n_items - n_sh, n_y = routed ? n_items - n_sh : n_sh;
    const int64_t total = (int64_t)n_y * 2 * m.n_h;
    const int64_t b = routed ? blockIdx.x : blockIdx.x - blocks_r;
    const int64_t nb = routed ? blocks_r : gridDim.x - blocks_r;
    const moe_up_rows<1> r = {m, x, hg, hu, y0, 1, {}};
    if (routed) {
        moeq_up_rows<TR> rows = {r, x, xq, tab, m.n_embd};
        if (hold == 2) /* two rows at a time (mvq_stream's TWO) */
            mvq_stream<TR, true, moeq_up_rows<TR>, true>(rows, b * MOE_FAST_WARPS + warp,
                                                         nb * MOE_FAST_WARPS, total, stage,
                                                         mvq_grid_at(tab, m.g));
        else if (hold)
            mvq_stream<TR, true>(rows, b * MOE_FAST_WARPS + warp, nb * MOE_FAST_WARPS, total, stage,
                                 mvq_grid_at(tab, m.g));
        else
            mvq_stream<TR>(rows, b * MOE_FAST_WARPS + warp, nb * MOE_FAST_WARPS, total, stage,
                           mvq_grid_at(tab, m.g));
    } else {
        moeq_up_rows<TS> rows = {r, x, xq, tab, m.n_embd};
        mvq_stream<TS>(rows, b * MOE_FAST_WARPS + warp, nb * MOE_FAST_WARPS, total, stage,
                       mvq_grid_at(tab, m.g));
    }
}

template <int TR, int TS>
__global__ void __launch_bounds__(MOE_FAST_WARPS *WARP, 3)
    moeq_down_stream(GPU_GRID_CONST const expert_mats m, const uint8_t *xq, float *y, int n_sh,
                     unsigned blocks_r, bool early) {
    if (early && n_sh > 0 && blockIdx.x >= blocks_r) { /* as moeq_up_stream */
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
    const int64_t total = (int64_t)n_y * m.n_embd;
    const int64_t b = routed ? blockIdx.x : blockIdx.x - blocks_r;
    const int64_t nb = routed ? blocks_r : gridDim.x - blocks_r;
    const moe_down_rows<1> r = {m, NULL, y, y0, 1, {}};
    if (routed) {
        moeq_down_rows<TR> rows = {r, xq, tab};
        mvq_stream<TR>(rows, b * MOE_FAST_WARPS + warp, nb * MOE_FAST_WARPS, total, stage,
                       mvq_grid_at(tab, m.g));
    } else {
        moeq_down_rows<TS> rows = {r, xq, tab};
        mvq_stream<TS>(rows, b * MOE_FAST_WARPS + warp, nb * MOE_FAST_WARPS, total, stage,
                       mvq_grid_at(tab, m.g));
    }
}

#include "backend/cuda/moe_dn.cuh"
#include "backend/cuda/moe_gu.cuh"
#include "backend/cuda/moe_dec.cuh"

/* One block a pair: h = silu(min(g, c)) · clamp(u, ±c) (as moe_swiglu_kernel, kept in hg),
 * quantized for the down projection of the pair's expert (Q8_K when kr / ks, else Q8_0). */
__global__ void moeq_swiglu_kernel(float *hg, const float *hu, uint8_t *xq, int64_t n_h, uint32_t k,
                                   uint32_t slots, int64_t n_ff, int64_t n_ff_sh, float clamp_exp,
                                   float clamp_sh, bool kr, bool ks) {
    cu_pdl_entry();
    const int64_t p = blockIdx.x;
    const bool shared = (uint32_t)(p % slots) >= k;
    const int64_t n = shared ? n_ff_sh : n_ff;
    const float c = shared ? clamp_sh : clamp_exp;
    const bool K = shared ? ks : kr;
    const int lane = threadIdx.x % WARP, warp = threadIdx.x / WARP, nw = blockDim.x / WARP;
    uint8_t *base = xq + p * mvq_act_bytes(n_h);
    for (int64_t ch = warp; ch < n / 256; ch += nw) {
        float *g = hg + p * n_h + 256 * ch + 8 * lane;
        const float *u = hu + p * n_h + 256 * ch + 8 * lane;
        float v[8];
#pragma unroll
        for (int i = 0; i < 8; i++) {
            float a = g[i], b = u[i];
            if (c > 0) {
                a = a > c ? c : a;
                b = b > c ? c : b < -c ? -c : b;
            }
            v[i] = a / (1.0f + expf(-a)) * b;
            g[i] = v[i];
        }
        if (K)
            mvq_quant256<true>(v, 256 * ch, base, n_h);
        else
            mvq_quant256<false>(v, 256 * ch, base, n_h);
    }
}

/* The type quadruples (routed gate/up, shared gate/up, routed down, shared down) with int8
 * kernels: ds4's q2 mix, and Q8_0 throughout. */
#define MOEQ_PAIRS(X)                                                                              \
    X(HALO_TYPE_IQ2_XXS, HALO_TYPE_Q8_0, HALO_TYPE_Q2_K, HALO_TYPE_Q8_0)                           \
    X(HALO_TYPE_Q8_0, HALO_TYPE_Q8_0, HALO_TYPE_Q8_0, HALO_TYPE_Q8_0)

/* Whether one token's experts take the int8 path: their types are a quadruple above and the
 * widths whole 256-value pieces (the activation of x in shared memory: at most 16384). */
static bool moeq_ok(const cu_backend *be, const expert_mats &m, uint32_t tr, uint32_t ts,
                    uint32_t tdr, uint32_t tds, const float *x) {
    if (!be->intdot || m.n_embd % 256 || m.n_embd > 16384 || m.n_ff % 256 || m.n_ff_sh % 256 ||
        m.n_h % 256 || ((uintptr_t)x & 15))
        return false;
#define Q_OK(a, b, c, d)                                                                           \
    if (tr == (a) && ts == (b) && tdr == (c) && tds == (d)) return true;
    MOEQ_PAIRS(Q_OK)
#undef Q_OK
    return false;
}

/* Relative time per weight on the int8 path, for sharing the blocks between the routed and
 * the shared expert: Q8_0 streams 1.06 bytes a weight and is bound by memory; IQ2_XXS (0.26
 * bytes) and Q2_K (0.33) are bound by their decoding, ~60 and ~50 instructions per 32 weights
 * against ~37 for Q8_0 (estimates from the instruction counts, not measured per part). The
 * f32 path's costs (moe_cost) had the 2-bit formats dearer; here the shared expert's Q8_0 rows
 * would be left to a sixteenth of the blocks and finish last. HALO_CUDA_QCOST=a,b,c replaces
 * the three (Q8_0, IQ2_XXS, Q2_K) to measure other splits. */
static double moeq_cost(const cu_backend *be, uint32_t t) {
    return t == HALO_TYPE_Q8_0 ? be->qcost[0] : t == HALO_TYPE_Q2_K ? be->qcost[2] : be->qcost[1];
}

/* sp with its blocks shared by the work of the routed experts (wr) and of the shared one. */
static moe_stream_plan moeq_plan(const moe_stream_plan &sp, double wr, double ws) {
    moe_stream_plan p = sp;
    if (sp.n_sh == 0) return p;
    unsigned bs = (unsigned)((double)sp.blocks * ws / (wr + ws) + 0.5);
    bs = bs < 1 ? 1 : bs >= sp.blocks ? sp.blocks - 1 : bs;
    p.blocks_r = sp.blocks - bs;
    return p;
}

/* Gate/up of every pair, then SwiGLU and h's quantization (moeq_ok said yes): in one launch
 * (moe_gu.cuh) when the backend allows it and h's chunks have counters enough, else two. Checks
 * its launches; false after a failure. */
static bool moeq_up(cu_backend *be, const expert_mats &m, uint32_t tr, uint32_t ts, uint32_t tdr,
                    uint32_t tds, const moe_stream_plan &sp, const float *x, float *hg, float *hu,
                    uint8_t *xq, int64_t n_pairs, uint32_t k, float clamp_exp, float clamp_sh,
                    const char *op) {
    const double ex = (double)((int64_t)k < m.n_expert ? (int64_t)k : m.n_expert);
    const double wr = ex * 2.0 * (double)(m.n_ff * m.n_embd) * moeq_cost(be, tr);
    const double ws = 2.0 * (double)(m.n_ff_sh * m.n_embd) * moeq_cost(be, ts);
    const bool iq = tr == HALO_TYPE_IQ2_XXS || ts == HALO_TYPE_IQ2_XXS;
    const int hold = be->hold && m.n_embd == mvq_ch((int)tr) ? (be->two ? 2 : 1) : 0;
    const int smem = MOE_FAST_WARPS * MV_STAGES * MV_STAGE + 16 + (int)mvq_act_bytes(m.n_embd) +
                     (iq ? mvq_tabs_bytes(be->grid_rep) : 0);
    const bool fuse = be->gufuse && n_pairs * (m.n_h / 256) <= CU_MOEQ_CTRS;
    /* moe_gu.cuh's IQ2_XXS decoder takes the 16-copy grid and two rows at a time; its own
     * kernel, so the other's registers are not sized by it */
    const bool own = hold == 2 && be->gufuse == 2 && tr == HALO_TYPE_IQ2_XXS && be->grid_rep == 4;
    /* The blocks as stay resident (the grid's copies can leave two a multiprocessor). */
#define Q_UP(a, b, c, d)                                                                           \
    if (tr == (a) && ts == (b) && tdr == (c) && tds == (d)) {                                      \
        if (fuse) {                                                                                \
            static int done_f[2]; /* the largest size the attribute was set for */                 \
            bool done = smem <= done_f[own];                                                       \
            auto kern = own ? moeq_gu_stream<a, b, true> : moeq_gu_stream<a, b, false>;            \
            if (!cu_smem_attr(be, kern, smem, &done, op)) return false;                            \
            if (smem > done_f[own]) done_f[own] = smem;                                            \
            moe_stream_plan spr = sp;                                                              \
            const int64_t res = cu_resident(be, kern, MOE_FAST_WARPS * WARP, smem);                \
            if ((int64_t)spr.blocks > res) spr.blocks = (unsigned)res;                             \
            const moe_stream_plan p = moeq_plan(spr, wr, ws);                                      \
            /* a warp an item at least; moe_div.h's bound on the item indices */                   \
            if ((int64_t)p.blocks_r * MOE_FAST_WARPS >= (int64_t)k &&                              \
                2 * ((int64_t)k + 1) * m.n_h + 2 * (int64_t)p.blocks * MOE_FAST_WARPS <            \
                    MOE_DIV_LIMIT) {                                                               \
                cu_launch(be, kern, p.blocks, MOE_FAST_WARPS *WARP, smem, m, x, hg, xq,            \
                          be->counters + CU_CTR_MOEQ, p.n_sh, p.blocks_r, hold, be->early,         \
                          mvq_k(c), mvq_k(d));                                                     \
                return CU_LAUNCHED(be, op, "moeq_gu_stream");                                      \
            }                                                                                      \
        }                                                                                          \
        static int done_bytes; /* the largest size the attribute was set for */                    \
        bool done = smem <= done_bytes;                                                            \
        if (!cu_smem_attr(be, moeq_up_stream<a, b>, smem, &done, op)) return false;                \
        if (smem > done_bytes) done_bytes = smem;                                                  \
        moe_stream_plan spr = sp;                                                                  \
        const int64_t res = cu_resident(be, moeq_up_stream<a, b>, MOE_FAST_WARPS * WARP, smem);    \
        if ((int64_t)spr.blocks > res) spr.blocks = (unsigned)res;                                 \
        const moe_stream_plan sp_up = moeq_plan(spr, wr, ws);                                      \
        cu_launch(be, moeq_up_stream<a, b>, sp_up.blocks, MOE_FAST_WARPS *WARP, smem, m, x, hg,    \
                  hu, sp_up.n_sh, sp_up.blocks_r, hold, be->early);                                \
        if (!CU_LAUNCHED(be, op, "moeq_up_stream")) return false;                                  \
        cu_launch(be, moeq_swiglu_kernel, (unsigned)n_pairs, 256, 0, hg, hu, xq, m.n_h, k,         \
                  m.slots, m.n_ff, m.n_ff_sh, clamp_exp, clamp_sh, mvq_k(c), mvq_k(d));            \
        return CU_LAUNCHED(be, op, "moeq_swiglu_kernel");                                          \
    }
    MOEQ_PAIRS(Q_UP)
#undef Q_UP
    return false;
}

/* The down projections of every pair over the quantized h (moeq_ok said yes). */
static void moeq_down(cu_backend *be, const expert_mats &m, uint32_t tr, uint32_t ts, uint32_t tdr,
                      uint32_t tds, const moe_stream_plan &sp, const uint8_t *xq, float *y,
                      uint32_t k, const char *op) {
    const double ex = (double)((int64_t)k < m.n_expert ? (int64_t)k : m.n_expert);
    const double wr = ex * (double)(m.n_embd * m.n_ff) * moeq_cost(be, tdr);
    const double ws = (double)(m.n_embd * m.n_ff_sh) * moeq_cost(be, tds);
    const bool iq = tdr == HALO_TYPE_IQ2_XXS || tds == HALO_TYPE_IQ2_XXS;
    const int smem =
        MOE_FAST_WARPS * MV_STAGES * MV_STAGE + 16 + (iq ? mvq_tabs_bytes(be->grid_rep) : 0);
#define Q_DN(a, b, c, d)                                                                           \
    if (tr == (a) && ts == (b) && tdr == (c) && tds == (d)) {                                      \
        if (be->dnhold && m.n_ff == mvq_ch(c)) {                                                   \
            static int done_h; /* the largest size the attribute was set for */                    \
            bool done = smem <= done_h;                                                            \
            if (!cu_smem_attr(be, moeq_dn_stream<c, d>, smem, &done, op)) return;                  \
            if (smem > done_h) done_h = smem;                                                      \
            moe_stream_plan spr = sp;                                                              \
            const int64_t res =                                                                    \
                cu_resident(be, moeq_dn_stream<c, d>, MOE_FAST_WARPS * WARP, smem);                \
            if ((int64_t)spr.blocks > res) spr.blocks = (unsigned)res;                             \
            const moe_stream_plan p = moeq_plan(spr, wr, ws);                                      \
            if ((int64_t)p.blocks_r * MOE_FAST_WARPS >= 8 * (int64_t)k && /* 8 warps an item */    \
                (int64_t)k * m.n_embd + (int64_t)p.blocks * MOE_FAST_WARPS < MOE_DIV_LIMIT) {      \
                cu_launch(be, moeq_dn_stream<c, d>, p.blocks, MOE_FAST_WARPS *WARP, smem, m, xq,   \
                          y, p.n_sh, p.blocks_r, be->early, be->dnhold);                           \
                return; /* checked by the caller */                                                \
            }                                                                                      \
        }                                                                                          \
        static int done_bytes; /* the largest size the attribute was set for */                    \
        bool done = smem <= done_bytes;                                                            \
        if (!cu_smem_attr(be, moeq_down_stream<c, d>, smem, &done, op)) return;                    \
        if (smem > done_bytes) done_bytes = smem;                                                  \
        moe_stream_plan spr = sp;                                                                  \
        const int64_t res = cu_resident(be, moeq_down_stream<c, d>, MOE_FAST_WARPS * WARP, smem);  \
        if ((int64_t)spr.blocks > res) spr.blocks = (unsigned)res;                                 \
        const moe_stream_plan sp_dn = moeq_plan(spr, wr, ws);                                      \
        cu_launch(be, moeq_down_stream<c, d>, sp_dn.blocks, MOE_FAST_WARPS *WARP, smem, m, xq, y,  \
                  sp_dn.n_sh, sp_dn.blocks_r, be->early); /* checked by the caller */              \
        return;                                                                                    \
    }
    MOEQ_PAIRS(Q_DN)
#undef Q_DN
}

#endif

__global__ void moe_sum_kernel(const float *y, const float *weight, uint32_t slots, int64_t n_embd,
                               int64_t n_tok, float *out) {
    cu_pdl_entry();
    int64_t id = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (id >= n_tok * n_embd) return;
    int64_t t = id / n_embd, d = id % n_embd;
    float s = 0.0f;
    for (uint32_t k = 0; k < slots; k++)
        s += weight[t * slots + k] * y[(t * slots + k) * n_embd + d];
    out[id] = s;
}

static char *carve(char **at, uint64_t bytes) {
    char *p = *at;
    *at += (bytes + 255) & ~255ull;
    return p;
}

void cu_moe(halo_backend *hbe, const halo_moe_args *a) {
    cu_backend *be = cu_of(hbe);
    const char *op = "moe";
    const int64_t n_tok = a->x->ne[1], n_embd = a->x->ne[0];
    const int64_t n_expert = a->gate_inp->ne[1], n_ff = a->gate_exps->ne[1];
    const int64_t n_ff_sh = a->gate_sh ? a->gate_sh->ne[1] : 0;
    const int64_t n_h = n_ff > n_ff_sh ? n_ff : n_ff_sh;
    const uint32_t k = a->n_used, slots = k + (a->gate_sh ? 1 : 0);
    const int64_t n_pairs = n_tok * slots;
    /* One token with the resident experts: the ffn norm (deferred by the rms_norm op), router
     * and routing may go in one kernel (routen_kernel); otherwise the norm runs first. */
    const cu_norm_pending np = be->np;
#ifndef HALO_HIP
    const bool fused = be->routefuse && n_tok == 1 && !a->experts && k < WARP && be->route1 &&
                       a->gate_inp->type == HALO_TYPE_F16 && n_embd % 256 == 0 &&
                       (((uintptr_t)cu_f32(a->x) | (uintptr_t)cu_ptr(a->gate_inp)) & 15) == 0;
#else
    const bool fused = false;
#endif
    const bool take_norm = fused && np.on && np.x == cu_f32(a->x) && np.rows == 1 &&
                           np.width == n_embd && np.w != NULL;
    if (take_norm)
        be->np.on = false; /* routen_kernel norms x */
    else
        cu_norm_flush(be);
    if (be->failed || n_tok <= 0) return;
    if (a->experts) return cu_moe_streamed(hbe, a); /* moe_stream.cu */
    uint32_t types[] = {a->gate_exps->type,
                        a->up_exps->type,
                        a->down_exps->type,
                        a->gate_sh ? a->gate_sh->type : (uint32_t)HALO_TYPE_F32,
                        a->up_sh ? a->up_sh->type : (uint32_t)HALO_TYPE_F32,
                        a->down_sh ? a->down_sh->type : (uint32_t)HALO_TYPE_F32};
    for (int i = 0; i < 6; i++)
        if (!cu_type_supported(be, types[i], op)) return;
    if (a->probs_bias && !cu_float_only(be, a->probs_bias->type, op, "expert bias")) return;
    /* Scratch, in order: tokens, router scores, choice, weights, grouping, h, y. */
    const uint64_t sizes[] = {(uint64_t)n_tok * 4,
                              (uint64_t)(n_tok * n_expert) * 4,
                              (uint64_t)(n_tok * k) * 4,
                              (uint64_t)n_pairs * 4,
                              (uint64_t)(n_expert + 2) * 4,
                              (uint64_t)(n_expert + 1) * 4,
                              (uint64_t)n_pairs * 4,
                              (uint64_t)(n_pairs * n_h) * 4,
                              (uint64_t)(n_pairs * n_embd) * 4,
                              (uint64_t)(3 * (n_expert + 2 + n_pairs / MOE_ITEM) + 1) * 4,
                              (uint64_t)(n_pairs * n_h) * 4,
                              n_tok == 1 ? (uint64_t)(n_pairs * mvq_act_bytes(n_h)) : 0};
    uint64_t total = 0;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        total += (sizes[i] + 255) & ~255ull;
    /* One token: room past the moe's part for the partial sums of the hc kernel that makes
     * the weighted sum (cu_sum_pending: the moe's part must survive until it ran). */
    const uint64_t reserve = n_tok == 1 && be->sumfuse ? 65536 : 0;
    char *at = cu_scratch(be, total + reserve, op);
    if (!at) return;
    int32_t *tokens = (int32_t *)carve(&at, sizes[0]);
    float *scores = (float *)carve(&at, sizes[1]);
    int32_t *sel = (int32_t *)carve(&at, sizes[2]);
    float *weight = (float *)carve(&at, sizes[3]);
    int32_t *first = (int32_t *)carve(&at, sizes[4]);
    int32_t *fill = (int32_t *)carve(&at, sizes[5]);
    int32_t *pairs = (int32_t *)carve(&at, sizes[6]);
    float *h = (float *)carve(&at, sizes[7]);
    float *y = (float *)carve(&at, sizes[8]);
    int32_t *act = (int32_t *)carve(&at, sizes[9]);
    float *hu = (float *)carve(&at, sizes[10]);     /* up projections (CUDA's expert streams) */
    uint8_t *xq = (uint8_t *)carve(&at, sizes[11]); /* h quantized (one token, int8 path) */
    (void)hu, (void)xq;

    uint64_t mark[2];
    cudaEvent_t ev = NULL;
    const bool prof = be->prof != NULL;
    if (prof) cu_prof_begin(be, mark, &ev);
    cu_ints tok_small;
    const int32_t *dtok = NULL;
    memset(&tok_small, 0, sizeof tok_small);
    if (a->tid2eid && !cu_ints_pass(be, tokens, a->tokens, n_tok, &tok_small, &dtok, op)) return;
    if (!fused)
        cu_matmul_launch(be, a->gate_inp->type, cu_ptr(a->gate_inp), n_embd, n_expert, 1,
                         cu_f32(a->x), n_embd, n_tok, scores, op);
    route_params rp = {scores,
                       a->probs_bias ? cu_ptr(a->probs_bias) : NULL,
                       a->probs_bias ? a->probs_bias->type : (uint32_t)HALO_TYPE_F32,
                       a->tid2eid ? (const int32_t *)cu_ptr(a->tid2eid) : NULL,
                       dtok,
                       n_expert,
                       k,
                       slots,
                       a->gating,
                       a->norm_weights,
                       a->weights_scale,
                       sel,
                       weight,
                       tok_small};
    if (be->failed) return;
#ifndef HALO_HIP
    if (fused) {
        cu_launch(be, routen_kernel, cu_blocks(n_expert, RN_WARPS), RN_THREADS,
                  (size_t)n_expert * 9, rp, (const uint16_t *)cu_ptr(a->gate_inp), cu_f32(a->x),
                  take_norm ? np.w : (const float *)NULL, np.eps, n_embd, scores, first, pairs,
                  act, be->counters + CU_CTR_ROUTE);
        if (!CU_LAUNCHED(be, op, "routen_kernel")) return;
    } else
#endif
    if (n_tok == 1 && k < WARP && be->route1) {
        cu_launch(be, route1_kernel, 1, 256, (size_t)n_expert * 9, rp, first, pairs, act);
        if (!CU_LAUNCHED(be, op, "route1_kernel")) return;
    } else {
        cu_launch(be, route_kernel, (unsigned)n_tok, 256, (size_t)n_expert * 9, rp);
        if (!CU_LAUNCHED(be, op, "route_kernel")) return;
        cu_launch(be, group_kernel, 1, 1024, (size_t)(2 * n_expert + 3) * sizeof(int32_t), sel,
                  n_pairs, k, slots, n_expert, first, fill, pairs, act);
        if (!CU_LAUNCHED(be, op, "group_kernel")) return;
    }
    /* Rows of h past an expert's width stay as they are: the down kernel reads only n_in. */
    expert_mats m = {cu_ptr(a->gate_exps),
                     cu_ptr(a->up_exps),
                     cu_ptr(a->down_exps),
                     types[0],
                     types[1],
                     types[2],
                     a->gate_sh ? cu_ptr(a->gate_sh) : NULL,
                     a->up_sh ? cu_ptr(a->up_sh) : NULL,
                     a->down_sh ? cu_ptr(a->down_sh) : NULL,
                     types[3],
                     types[4],
                     types[5],
                     n_embd,
                     n_ff,
                     n_ff_sh,
                     n_expert,
                     n_h,
                     slots,
                     a->clamp_exp,
                     a->clamp_shexp,
                     first,
                     pairs,
                     act,
                     cu_row_bytes(types[0], n_embd),
                     cu_row_bytes(types[1], n_embd),
                     cu_row_bytes(types[2], n_ff),
                     cu_row_bytes(types[3], n_embd),
                     cu_row_bytes(types[4], n_embd),
                     cu_row_bytes(types[5], n_ff_sh),
                     cu_grids_get(hbe)};
    if (prof) {
        cu_prof_end(be, CU_PROF_MOE_ROUTE, mark, ev);
        cu_prof_begin(be, mark, &ev);
    }
    /* grid.y: the work items (groups with pairs, at most one per pair, split into runs of
     * MOE_ITEM pairs), found on the device; a bound here. */
    const int64_t n_groups = (n_pairs < n_expert + 1 ? n_pairs : n_expert + 1) + n_pairs / MOE_ITEM;
    /* Fast kernels when gate and up share a type, every matrix suits them (mv.cuh) and the
     * types are a pair they were built for; without a shared expert its type is the routed. */
    const bool sh = a->gate_sh != NULL;
    const uint32_t tr = types[0], ts = sh ? types[3] : types[0];
    const uint32_t tdr = types[2], tds = sh ? types[5] : types[2];
    const bool fast_ok = !be->naive && ((uintptr_t)cu_f32(a->x) & 15) == 0 && n_embd % 4 == 0 &&
                         n_h % 4 == 0 && types[0] == types[1] && (!sh || types[3] == types[4]) &&
                         mv_shape_ok(types[0], m.gate, m.grb, n_embd) &&
                         mv_shape_ok(types[1], m.up, m.urb, n_embd) &&
                         mv_shape_ok(types[2], m.down, m.drb, n_ff) &&
                         (!sh || (mv_shape_ok(types[3], m.gate_sh, m.grb_sh, n_embd) &&
                                  mv_shape_ok(types[4], m.up_sh, m.urb_sh, n_embd) &&
                                  mv_shape_ok(types[5], m.down_sh, m.drb_sh, n_ff_sh)));
    const int nt = n_tok == 1 ? 1 : 8;
#ifndef HALO_HIP
    /* Prefill: each work item (an expert's pairs, at most MOE_ITEM of them) one tile of the
     * tensor-core kernels (gemm_mma.cu), weights decoded once per item. */
    static_assert(MOE_ITEM == 64, "gemm_mma.cu's tiles take 64 pairs");
    const cu_mma_experts mx = {m.gate,   m.up,     m.down, m.gate_sh, m.up_sh, m.down_sh, tr,
                               tdr,      ts,       tds,    m.grb,     m.urb,   m.drb,     m.grb_sh,
                               m.urb_sh, m.drb_sh, n_embd, n_ff,      n_ff_sh, n_expert,  n_h,
                               slots,    pairs,    act,    n_groups};
    if (types[0] == types[1] && (!sh || types[3] == types[4]) &&
        ((uintptr_t)cu_f32(a->x) & 15) == 0 && cu_mma_moe_ok(be, &mx, n_tok)) {
        if (!cu_mma_moe_up(be, &mx, cu_f32(a->x), h, hu, op)) return;
        cu_launch(be, moe_swiglu_kernel, cu_blocks(n_pairs * n_h, 256), 256, 0, h, hu, n_pairs, n_h,
                  k, slots, n_ff, n_ff_sh, a->clamp_exp, a->clamp_shexp);
        if (!CU_LAUNCHED(be, op, "moe_swiglu_kernel")) return;
        if (prof) {
            cu_prof_end(be, CU_PROF_MOE_GATE_UP, mark, ev);
            cu_prof_begin(be, mark, &ev);
        }
        if (!cu_mma_moe_down(be, &mx, h, y, op)) return;
        if (prof) {
            cu_prof_end(be, CU_PROF_MOE_DOWN, mark, ev);
            cu_prof_begin(be, mark, &ev);
        }
        cu_launch(be, moe_sum_kernel, cu_blocks(n_tok * n_embd, 256), 256, 0, y, weight, slots,
                  n_embd, n_tok, cu_f32(a->out));
        CU_LAUNCHED(be, op, "moe_sum_kernel");
        if (prof) cu_prof_end(be, CU_PROF_MOE_SUM, mark, ev);
        return;
    }
#endif
#ifdef HALO_HIP
    const bool fast_in = fast_ok, up_checked = false, dq_done = false;
    dim3 f1(cu_blocks(n_h, MOE_FAST_WARPS), (unsigned)n_groups);
    const bool up_fast = fast_in && moe_fast_gate_up(be, tr, ts, nt, f1, m, cu_f32(a->x), h);
#else
    /* Blocks as stay resident, shared between the routed experts' and the shared expert's
     * items by their weight bytes times pair groups. */
    moe_stream_plan sp;
    {
        const int64_t per = (int64_t)MOE_ITEM < n_tok ? (int64_t)MOE_ITEM : n_tok;
        sp.n_pg = (int)((per + nt - 1) / nt);
        sp.n_sh = sh ? (int)((n_tok + MOE_ITEM - 1) / MOE_ITEM) : 0;
        /* (three resident a multiprocessor for one pair per group: 80 registers) */
        sp.blocks = (unsigned)(be->sm_count > 0 ? be->sm_count : 132) * (nt == 1 ? 3 : 2);
        const int64_t routed_pairs = n_tok * k;
        const int64_t experts = routed_pairs < n_expert ? routed_pairs : n_expert;
        /* Work of each part: with one pair per group (decode) the weights decoded times the
         * type's decoding cost (the 2-bit formats take more instructions per byte than Q8_0;
         * measured better than bytes); with groups of eight the bytes read times the pair
         * groups (as measured before: the dots, not the decoding, dominate there). */
        const double gr = (double)((routed_pairs / experts + nt - 1) / nt);
        const double gs = (double)((n_tok + nt - 1) / nt);
        const double wr = nt == 1 ? (double)n_ff * (double)n_embd * 2.0 * moe_cost(tr)
                                  : (double)n_ff * (double)(m.grb + m.urb);
        const double ws = !sh       ? 0.0
                          : nt == 1 ? (double)n_ff_sh * (double)n_embd * 2.0 * moe_cost(ts)
                                    : (double)n_ff_sh * (double)(m.grb_sh + m.urb_sh);
        const double wr_all = wr * (double)experts * gr, ws_all = ws * gs;
        unsigned bs = sh ? (unsigned)((double)sp.blocks * ws_all / (wr_all + ws_all) + 0.5) : 0;
        if (sh && bs < 1) bs = 1;
        if (bs >= sp.blocks) bs = sp.blocks - 1;
        sp.blocks_r = sp.blocks - bs;
    }
    /* The streams index items in 32 bits. */
    const bool fast_in = fast_ok && (double)n_groups * 2 * sp.n_pg * (double)(n_h + n_embd) < 2e9;
    const bool q_ok = fast_in && nt == 1 && moeq_ok(be, m, tr, ts, tdr, tds, cu_f32(a->x));
    /* The kernels built for this shape (moe_dec.cuh), else the generic streams (moeq_*). */
    const int dq = q_ok && mdq_ok(be, m, tr, ts, tdr, tds, k)
                       ? mdq_run(be, m, tr, ts, tdr, tds, sel, cu_f32(a->x), h, y, k, 0, op)
                       : MDQ_NOT;
    if (dq == MDQ_FAIL) return;
    if (dq == MDQ_NOT && n_tok == 1 && mdq_must()) {
        be->failed = true;
        snprintf(be->fail, sizeof be->fail,
                 "%s: HALO_CUDA_MDQ=2 and moe_dec.cuh's kernels do not take this op", op);
        return;
    }
    const bool q_in = q_ok && dq == MDQ_NOT, dq_done = dq == MDQ_DONE;
    if (q_in && !moeq_up(be, m, tr, ts, tdr, tds, sp, cu_f32(a->x), h, hu, xq, n_pairs, k,
                         a->clamp_exp, a->clamp_shexp, op))
        return;
    const bool up_checked = q_ok; /* moeq_up and mdq_run checked their launches */
    const bool up_fast =
        q_ok || (fast_in && moe_stream_up(be, tr, ts, nt, sp, m, cu_f32(a->x), h, hu));
    if (up_fast && !q_ok) {
        if (!CU_LAUNCHED(be, op, "moe_up_stream")) return;
        cu_launch(be, moe_swiglu_kernel, cu_blocks(n_pairs * n_h, 256), 256, 0, h, hu, n_pairs, n_h,
                  k, slots, n_ff, n_ff_sh, a->clamp_exp, a->clamp_shexp);
    }
#endif
    if (up_fast) {
        if (!up_checked && !CU_LAUNCHED(be, op, "gate_up_fast")) return;
    } else {
        dim3 g1(cu_blocks(n_h, MOE_WARPS), (unsigned)n_groups);
        cu_launch(be, gate_up_kernel, g1, MOE_WARPS * WARP, 0, m, cu_f32(a->x), h);
        if (!CU_LAUNCHED(be, op, "gate_up_kernel")) return;
    }
    if (prof) {
        cu_prof_end(be, CU_PROF_MOE_GATE_UP, mark, ev);
        cu_prof_begin(be, mark, &ev);
    }
#ifdef HALO_HIP
    dim3 f2(cu_blocks(n_embd, MOE_FAST_WARPS), (unsigned)n_groups);
    if (fast_in && moe_fast_down(be, tdr, tds, nt, f2, m, h, y)) {
#else
    if (dq_done &&
        mdq_run(be, m, tr, ts, tdr, tds, sel, cu_f32(a->x), h, y, k, 1, op) != MDQ_DONE)
        return;
    if (q_in) moeq_down(be, m, tr, ts, tdr, tds, sp, xq, y, k, op);
    if (q_ok || (fast_in && moe_stream_down(be, tdr, tds, nt, sp, m, h, y))) {
#endif
        if (!dq_done && !CU_LAUNCHED(be, op, "down_fast")) return;
    } else {
        dim3 g2(cu_blocks(n_embd, MOE_WARPS), (unsigned)n_groups);
        cu_launch(be, down_kernel, g2, MOE_WARPS * WARP, 0, m, h, y);
        if (!CU_LAUNCHED(be, op, "down_kernel")) return;
    }
    if (prof) {
        cu_prof_end(be, CU_PROF_MOE_DOWN, mark, ev);
        cu_prof_begin(be, mark, &ev);
    }
    if (n_tok == 1 && be->sumfuse && slots <= 16 && n_embd % 64 == 0 &&
        (((uintptr_t)y | (uintptr_t)cu_f32(a->out)) & 15) == 0) {
        /* The hc_post of this output makes the sum (hc.cu), or cu_sum_flush runs it. */
        be->sp = {true, y, weight, slots, n_embd, cu_f32(a->out), total};
        if (prof) cu_prof_end(be, CU_PROF_MOE_SUM, mark, ev);
        return;
    }
    cu_launch(be, moe_sum_kernel, cu_blocks(n_tok * n_embd, 256), 256, 0, y, weight, slots, n_embd,
              n_tok, cu_f32(a->out));
    CU_LAUNCHED(be, op, "moe_sum_kernel");
    if (prof) cu_prof_end(be, CU_PROF_MOE_SUM, mark, ev);
}

void cu_sum_flush(cu_backend *be) {
    cu_sum_pending &p = be->sp;
    if (!p.on) return;
    p.on = false;
    if (be->failed) return;
    cu_launch(be, moe_sum_kernel, cu_blocks(p.n_embd, 256), 256, 0, p.y, p.weight, p.slots,
              p.n_embd, (int64_t)1, p.out);
    CU_LAUNCHED(be, "moe", "moe_sum_kernel");
}
