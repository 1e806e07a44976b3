/* One token's experts, int8 path (moe.cu's moeq_*): gate/up, the clamped SwiGLU and h's
 * quantization for the down projections in one launch (HALO_CUDA_GUFUSE=0: moeq_up_stream, then
 * moeq_swiglu_kernel). Included by moe.cu (CUDA only), after the moeq kernels.
 *
 * The part's warps are dealt to its work items (wpp = stride / items each, as moe_dn.cuh), and a
 * warp takes the gate row and the up row of the same (pair, r) one after the other: its k-th
 * item is row r = lw + wpp (k / 2) of its item (lw its place among the item's warps), gate for
 * even k, up for odd; with mvq_stream's TWO both go in one unrolled body. The up row's end then
 * has both sums and writes h = silu(min(g, c)) · clamp(u, ±c) as moeq_swiglu_kernel computes
 * it. A warp's item, pair, row bases and clamp are looked up once; a row's place is one
 * float-reciprocal quotient (moe_div.h), not the runtime divisions and item loads that were
 * most of the experts' kernels' instructions (cuda-moe-1's ncu).
 *
 * Quantizing h needs each 256-value chunk whole (Q8_K's scale is the chunk's largest value), and
 * its rows come from many warps of many blocks: each chunk has a device counter (CU_CTR_MOEQ),
 * a warp adds one per row it wrote, after a fence, and the warp whose add completes a chunk
 * quantizes it (mvq_quant256, the same lanes and values as moeq_swiglu_kernel, so the same bits)
 * and sets the counter back to zero, so a graph replays the kernel. The adds are deferred: a
 * lane keeps the chunk of one of the warp's rows and the warp adds for up to 32 rows at once
 * (at the stream's end, or when 32 are pending), so no row waits for an atomic's round trip.
 * Saves moeq_swiglu_kernel's launch (ncu, session 6 base: 4.4 us a layer cold) and the up sums'
 * store and reload. */
#include "backend/cuda/moe_div.h"

/* SH: the shared expert's part (its matrices and clamp), else the routed experts'. Values the
 * kernel's parameters hold are read from them where used (no registers held for them). */
template <int T, bool SH> struct moeq_gu_rows {
    const expert_mats &m;
    const float *x; /* the token's input */
    uint8_t *xq;    /* the block's quantized x (shared memory) */
    mvq_tabs *tab;
    uint8_t *hq;      /* every pair's quantized h, mvq_act_bytes(n_h) a pair */
    unsigned *ctr;    /* n_pairs * n_h / 256 zeroed counters */
    float *h;         /* h[pair, r], f32 (kept as moeq_swiglu_kernel keeps it in hg) */
    uint64_t eo;      /* the warp's expert's first row, in bytes past the routed matrices' */
    uint32_t rows;    /* the expert's rows; 0: an idle warp */
    uint32_t first;   /* the warp's first item index */
    uint32_t lw, wpp; /* its place among its item's warps, and their count */
    moe_divisor stride;
    int pair;
    bool K;      /* the part's down activation is Q8_K (else Q8_0) */
    float gate;  /* the gate row's sum, until its up row ends */
    int pending; /* rows written since the last count (the same on every lane) */
    int chunk;   /* this lane's pending row's chunk */
    uint32_t cur_r;
    int cur_mat;
    /* Item i's row and matrix (i = first + k stride: the items mvq_stream passes). */
    __device__ uint32_t k_of(int64_t i) const {
        return moe_quot((uint32_t)i - first, stride);
    }
    __device__ int64_t row(int64_t i, const char **r) const {
        const uint32_t k = k_of(i), rr = lw + wpp * (k >> 1);
        if (SH)
            *r = k & 1 ? m.up_sh + rr * m.urb_sh : m.gate_sh + rr * m.grb_sh;
        else
            *r = k & 1 ? m.up + eo + rr * m.urb : m.gate + eo + rr * m.grb;
        return rr < rows ? m.n_embd : 0;
    }
    __device__ void prepare() const {
        if constexpr (T == HALO_TYPE_IQ2_XXS) mvq_tabs_load(tab, m.g);
        mvq_quant_block<mvq_k(T)>(x, m.n_embd, xq);
        __syncthreads();
    }
    __device__ int64_t begin(int64_t i) {
        const uint32_t k = k_of(i);
        cur_r = lw + wpp * (k >> 1);
        cur_mat = (int)(k & 1);
        return cur_r < rows ? m.n_embd : 0;
    }
    __device__ q8act act() const {
        return mvq_act_at(xq, m.n_embd);
    }
    /* Every lane of the warp calls it (mvq_stream's end), after begin(i). */
    __device__ void end(int64_t, float sum) {
        if (cur_mat == 0) {
            gate = sum;
            return;
        }
        const float c = SH ? m.clamp_sh : m.clamp_exp;
        float a = gate, b = sum;
        if (c > 0) {
            a = a > c ? c : a;
            b = b > c ? c : b < -c ? -c : b;
        }
        if (threadIdx.x % WARP == pending) {
            h[(int64_t)pair * m.n_h + cur_r] = a / (1.0f + expf(-a)) * b;
            chunk = pair * (int)(m.n_h / 256) + (int)(cur_r / 256);
        }
        if (++pending == WARP) count();
    }
    /* The pending rows' counts; the warp that completes a chunk quantizes it. */
    __device__ void count() {
        const int lane = threadIdx.x % WARP;
        bool last = false;
        if (lane < pending) {
            __threadfence(); /* this lane's h value before its count */
            last = atomicAdd(ctr + chunk, 1u) == 255u;
        }
        pending = 0;
        unsigned done = __ballot_sync(0xffffffffu, last);
        while (done) {
            const int src = __ffs((int)done) - 1;
            done &= done - 1;
            const int c = __shfl_sync(0xffffffffu, chunk, src);
            __threadfence(); /* the other warps' values, counted before */
            const int64_t per = m.n_h / 256, pc = c / per, e0 = 256 * (c % per);
            const float4 *p = (const float4 *)(h + pc * m.n_h + e0 + 8 * lane);
            const float4 v0 = __ldcg(p), v1 = __ldcg(p + 1);
            const float v[8] = {v0.x, v0.y, v0.z, v0.w, v1.x, v1.y, v1.z, v1.w};
            uint8_t *base = hq + pc * mvq_act_bytes(m.n_h);
            if (K)
                mvq_quant256<true>(v, e0, base, m.n_h);
            else
                mvq_quant256<false>(v, e0, base, m.n_h);
            if (lane == 0) ctr[c] = 0; /* every add of this launch came before ours */
        }
    }
};

/* ---- the routed IQ2_XXS rows' decoder (HALO_CUDA_GUFUSE=1: mvq.cuh's) --------------------
 * The same integer sum per 32-weight unit as mvq_unit_x<IQ2_XXS>, in fewer instructions (PTX
 * counts below; the sum is an integer, so the order of its terms does not change it, and the
 * float expression after it is mvq_unit_x's):
 * - sign masks: the 4 sign bits of a half put at the bytes' top bits by one multiply (bit j of
 *   t & 15 times 2^7 + 2^14 + 2^21 + 2^28 lands at 7 + 7j + 8 (k - j) for term k: no two terms
 *   share a bit) and spread to 0xff / 0x00 bytes by prmt's sign-replicate mode; the upper half's
 *   fourth bit is the parity of the seven, added at bit 31 (popc << 31 keeps only its low bit);
 * - the signs applied as (g ^ m) with the lost +1 per negated byte subtracted once: m's bytes
 *   are -1 where negated, so dp4a(m, x) is minus the sum of those x (a second dp4a into c, in
 *   place of a multiply, an and and an add per four weights);
 * - the grid's row at a constant stride (16 copies: HALO_CUDA_GRIDREP unset), its index moved
 *   to byte 0 by prmt. */
static __device__ __forceinline__ uint32_t moe_prmt(uint32_t a, uint32_t sel) {
    uint32_t d;
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(0u), "r"(sel));
    return d;
}

/* grid: this lane's copy of the 16-copy grid (row i at grid[16 i]). */
static __device__ __forceinline__ float moe_iq2_unit(const uint8_t *slot, int u, const int xv[8],
                                                     const q8act &a, int64_t e, const uint2 *grid) {
    const int off = 66 * (u >> 3) + 2 + 8 * (u & 7);
    const uint32_t *wp = (const uint32_t *)(slot + (off & ~3));
    const uint32_t sel = off & 2 ? 0x5432u : 0x3210u;
    const uint32_t w0 = wp[0], w1 = wp[1], w2 = wp[2];
    const uint32_t qi = __byte_perm(w0, w1, sel), aux = __byte_perm(w1, w2, sel);
    int s = 0, c = 0;
#pragma unroll
    for (int l = 0; l < 4; l++) {
        const uint2 g = grid[moe_prmt(qi, 0x4440u + l) << 4];
        const uint32_t t = aux >> (7 * l);
        const uint32_t mlo = moe_prmt((t & 15u) * 0x10204080u, 0xba98u);
        const uint32_t mhi =
            moe_prmt((t & 0x70u) * 0x01020408u + ((uint32_t)__popc(t & 127u) << 31), 0xba98u);
        s = __dp4a((int)(g.x ^ mlo), xv[2 * l], s);
        c = __dp4a((int)mlo, xv[2 * l], c);
        s = __dp4a((int)(g.y ^ mhi), xv[2 * l + 1], s);
        c = __dp4a((int)mhi, xv[2 * l + 1], c);
    }
    s -= c;
    const int ls = 2 * (int)(aux >> 28) + 1;
    const float dw = __half2float(*(const __half *)(slot + 66 * (u >> 3))) * 0.125f;
    return dw * a.d[e >> 8] * (float)(s * ls);
}

/* mvq_stream<IQ2_XXS, HOLD, P, TWO> (mvq.cuh) with moe_iq2_unit: rows of one 4096-weight chunk
 * over the same activation, two at a time; the same rows, order and sums. */
template <class P>
static __device__ __forceinline__ void moe_iq2_stream(P &p, int64_t first, int64_t stride,
                                                      int64_t n_items, uint8_t *stage,
                                                      const uint2 *grid) {
    constexpr int T = HALO_TYPE_IQ2_XXS, CH = mvq_ch(T), SLOT = mvq_slot(T), S = mvq_stages(T);
    constexpr int NH = CH / 1024;
    const int lane = threadIdx.x % WARP;
    int64_t ii = first;
    int jn = 0;
    auto issue = [&]() {
        const char *irow = NULL;
        while (ii < n_items && p.row(ii, &irow) == 0)
            ii += stride;
        if (ii < n_items) {
            const uint4 *src = (const uint4 *)irow;
            uint8_t *dst = stage + (jn % S) * SLOT;
            for (int idx = lane; idx < SLOT / 16; idx += WARP)
                cp_async16(dst + 16 * idx, src + idx);
            jn++;
            ii += stride;
        }
        cp_async_commit();
    };
#pragma unroll
    for (int st = 0; st < S - 1; st++)
        issue();
    p.prepare();
    int xh[NH][8];
    const q8act a0 = p.act();
#pragma unroll
    for (int h = 0; h < NH; h++)
        mvq_xv(a0, 32 * (lane + WARP * h), xh[h]);
    int j = 0;
    int64_t it = first;
    for (;;) {
        while (it < n_items && p.begin(it) == 0)
            it += stride;
        if (it >= n_items) break;
        const int64_t ia = it;
        it += stride;
        while (it < n_items && p.begin(it) == 0)
            it += stride;
        const int64_t ib = it < n_items ? it : -1;
        if (ib >= 0) it += stride;
        if (ib >= 0)
            cp_async_wait<S - 3>(); /* chunks j and j + 1 are in */
        else
            cp_async_wait<S - 2>();
        __syncwarp();
        issue(); /* into the slot of chunk j - 1, read before */
        const uint8_t *sa = stage + (j % S) * SLOT;
        const uint8_t *sb = ib >= 0 ? stage + ((j + 1) % S) * SLOT : sa;
        float acc_a = 0.0f, acc_b = 0.0f;
#pragma unroll
        for (int h = 0; h < NH; h++) {
            const int u = lane + WARP * h;
            acc_a += moe_iq2_unit(sa, u, xh[h], a0, 32 * u, grid);
            acc_b += moe_iq2_unit(sb, u, xh[h], a0, 32 * u, grid);
        }
        __syncwarp();
        if (ib >= 0) issue(); /* into chunk j's slot, read now */
        acc_a = warp_sum(acc_a);
        acc_b = warp_sum(acc_b);
        p.begin(ia);
        p.end(ia, acc_a);
        if (ib >= 0) {
            p.begin(ib);
            p.end(ib, acc_b);
        }
        j += ib >= 0 ? 2 : 1;
    }
    cp_async_wait<0>();
}

template <int TR, int TS, bool OWN>
__global__ void __launch_bounds__(MOE_FAST_WARPS *WARP, 2)
    moeq_gu_stream(GPU_GRID_CONST const expert_mats m, const float *x, float *h, uint8_t *hq,
                   unsigned *ctr, int n_sh, unsigned blocks_r, int hold, bool early, bool kr,
                   bool ks) {
    if (early && n_sh > 0 && blockIdx.x >= blocks_r) { /* as moeq_up_stream */
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
    const uint32_t b = routed ? blockIdx.x : blockIdx.x - blocks_r;
    const uint32_t nb = routed ? blocks_r : gridDim.x - blocks_r;
    const uint32_t stride = nb * MOE_FAST_WARPS, first = b * MOE_FAST_WARPS + warp;
    /* The warp's item (the host gives each part at least one warp an item) and its rows. */
    const uint32_t per = n_y > 0 ? stride / (uint32_t)n_y : 1u, wpp = per > 0 ? per : 1u;
    const uint32_t it = first / wpp;
    const bool on = (int32_t)it < n_y;
    const int32_t *item = m.act + 1 + 3 * (y0 + (on ? (int32_t)it : 0));
    const int64_t e = on && routed ? item[0] : 0;
    const int pair = on ? m.pairs[item[1]] : 0;
    const uint32_t rows = on ? (uint32_t)(routed ? m.n_ff : m.n_ff_sh) : 0u;
    const int64_t total = (int64_t)stride * 2 * (((int64_t)m.n_h + wpp - 1) / wpp);
    const uint64_t eo = (uint64_t)e * m.n_ff * m.grb; /* gate and up share a type */
    const moe_divisor sd = moe_divisor_of(stride);
    if (routed) {
        moeq_gu_rows<TR, false> rows_ = {m,           x,   xq, tab,  hq, ctr,  h, eo, rows, first,
                                         first % wpp, wpp, sd, pair, kr, 0.0f, 0, 0,  0u,   0};
        const mvq_grid g = mvq_grid_at(tab, m.g);
        if constexpr (OWN && TR == HALO_TYPE_IQ2_XXS) {
            moe_iq2_stream(rows_, first, stride, total, stage, g.lane);
            rows_.count();
            return;
        }
        if (hold == 2)
            mvq_stream<TR, true, moeq_gu_rows<TR, false>, true>(rows_, first, stride, total, stage,
                                                                g);
        else if (hold)
            mvq_stream<TR, true>(rows_, first, stride, total, stage, g);
        else
            mvq_stream<TR>(rows_, first, stride, total, stage, g);
        rows_.count();
    } else {
        moeq_gu_rows<TS, true> rows_ = {m,           x,   xq, tab,  hq, ctr,  h, eo, rows, first,
                                        first % wpp, wpp, sd, pair, ks, 0.0f, 0, 0,  0u,   0};
        mvq_stream<TS>(rows_, first, stride, total, stage, mvq_grid_at(tab, m.g));
        rows_.count();
    }
}
