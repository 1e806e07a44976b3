/* One token's experts on the int8 path, built for their one shape (n_embd 4096, n_ff 2048: ds4's
 * q2 mix, or Q8_0 throughout): gate/up with the clamped SwiGLU (mdq_gu_kernel), then down
 * (mdq_dn_kernel). HALO_CUDA_MDQ=0: moe.cu's moeq_* kernels (generic row streams), which also
 * take every other shape and type. Included by moe.cu (CUDA only), after moe_gu.cuh.
 *
 * Why: cuda-moe-1's ncu (session 7) counted ~900 warp instructions a routed IQ2_XXS row in
 * moeq_up_stream where its decoding is ~440, and ~530 a Q2_K down row for ~90 of decoding: the
 * rest was the generic stream's per-row bookkeeping (an item located by runtime divisions, the
 * item and pair loaded again, the cp.async ring and its waits, a 5-shuffle sum a row), with one
 * warp eligible a scheduler. Here a warp looks its pair, expert and first row up once and
 * steps its rows by a constant; each lane loads its own units' words straight into registers
 * (4-byte loads: the units are 2-byte aligned; a warp's loads of one word cover a few
 * contiguous 128-byte lines) and the activations of its units stay in registers; the next
 * row's loads are issued as soon as the current row's words are decoded; gate and up of the
 * same row are one warp's, so SwiGLU happens in registers and the two sums share one
 * reduction (6 shuffles for 2 rows), and down takes 4 rows a warp at once (6 shuffles).
 *
 * The same sums as moeq_*: a lane takes units lane + 32 i in order i (moeq's order), a unit's
 * integer sum is the same (the IQ2_XXS sign masks moe_gu.cuh's, from a table), its float
 * expression mvq.cuh's, and the reductions add the same pairs as warp_sum: the output is
 * bitwise the old path's (test_backend_cuda_intdot, H200 request cuda-moe-2, all three type
 * mixes) and within the CPU's bound. H200 4-layer trace (cuda-moe-2): gate/up + SwiGLU + down
 * 90.6 -> ~41 us a layer.
 *
 * h's quantization for down moves into the down kernel: a block works on one pair, so it
 * quantizes that pair's h (2048 values, one 256-value piece a warp) into shared memory, with
 * moeq_swiglu_kernel's lanes and values. x's quantization stays in every gate/up block (4096
 * values, two pieces a warp): the first rows' loads are issued before it. Blocks are split
 * between the routed pairs and the shared expert by a fixed fraction (HALO_CUDA_MDQSPLIT). */

enum { MDQ_WARPS = 8, MDQ_DR = 4 /* down rows a warp takes at once */ };
static_assert(MDQ_WARPS * 32 == 256, "mdq_tabs_load: a thread a grid row");

/* Words a lane loads for one 32-weight unit of type T. */
template <int T> static __host__ __device__ constexpr int mdq_nw() {
    return T == HALO_TYPE_IQ2_XXS ? 4 : T == HALO_TYPE_Q8_0 ? 9 : 10;
}

static __device__ __forceinline__ uint32_t mdq_ld(const char *p) {
    return __ldg((const unsigned int *)p);
}

/* Unit u's words of a row (4-byte aligned, as every row of these types is). */
template <int T>
static __device__ __forceinline__ void mdq_load(const char *row, int u, uint32_t *w) {
    if constexpr (T == HALO_TYPE_IQ2_XXS) {
        /* Super-block s = u / 8 at 66 s: d, then unit u % 8's 8 bytes at 2 + 8 (u % 8), at 2
         * mod 4 in an even super-block (three words) and aligned in an odd one (two: the third
         * load repeats the second, so the row's last unit reads nothing past the row). */
        const int s = u >> 3, off = 66 * s + 2 + 8 * (u & 7);
        const char *p = row + (off & ~3);
        w[0] = mdq_ld(p);
        w[1] = mdq_ld(p + 4);
        w[2] = mdq_ld(p + (off & 2 ? 8 : 4));
        w[3] = mdq_ld(row + ((66 * s) & ~3)); /* d: low half (s even) or high half */
    } else if constexpr (T == HALO_TYPE_Q8_0) {
        const char *p = row + ((34 * u) & ~3); /* block u at 34 u; ends at or before p + 36 */
#pragma unroll
        for (int i = 0; i < 9; i++)
            w[i] = mdq_ld(p + 4 * i);
    } else { /* Q2_K: scales[16] qs[64] d dmin, 84 bytes a super-block of 8 units */
        const char *b = row + 84 * (u >> 3);
        const int sub = u & 7;
#pragma unroll
        for (int i = 0; i < 8; i++)
            w[i] = mdq_ld(b + 16 + 32 * (sub >> 2) + 4 * i);
        w[8] = mdq_ld(b + 4 * (sub >> 1)); /* the unit's two scale bytes: half sub % 2 */
        w[9] = mdq_ld(b + 80);             /* d, dmin */
    }
}

/* The activation of one unit as a lane holds it: 32 int8 values (mvq_xv's order), the scale,
 * and (Q8_K for Q2_K) the sums of its two halves. */
typedef struct mdq_x {
    int v[8];
    float d;
    int b0, b1;
} mdq_x;

template <int T> static __device__ __forceinline__ mdq_x mdq_xload(const q8act &a, int u) {
    mdq_x x;
    const int64_t e = 32 * (int64_t)u;
    mvq_xv(a, e, x.v);
    x.d = a.d[T == HALO_TYPE_Q8_0 ? e >> 5 : e >> 8];
    x.b0 = T == HALO_TYPE_Q2_K ? a.bs[e >> 4] : 0;
    x.b1 = T == HALO_TYPE_Q2_K ? a.bs[(e >> 4) + 1] : 0;
    return x;
}

/* The IQ2_XXS tables a lane reads in shared memory, each in 16 copies side by side (lane l
 * reads copy l % 16: a half-warp's 8-byte reads hit 16 different bank pairs, two wavefronts a
 * read whatever the indices, as mvq.cuh's grid): grid row i at grid[16 i]; at sign[16 c] the
 * masks of the 7-bit sign code c (its 8th sign the parity), 0xff in each negated byte of the
 * low and the high four weights. The table takes the sign masks from ~9 instructions per 8
 * weights (moe_iq2_unit's multiplies, prmt and popc) to 3, of ~25 per 8 weights in all: the
 * routed gate/up rows are bound by issue, not by their bytes (session 7's ncu). */
typedef struct mdq_tab {
    const uint2 *grid, *sign;
} mdq_tab;

/* Both tables, by a block of 256 threads: a thread loads one grid row (one L2 round trip for
 * the block) and stores its 16 copies, and (STAB) computes half the copies of one sign code.
 * mvq_tabs_load's loop of 16 dependent-in-turn loads a thread was on the critical path of
 * cuda-moe-1's kernel: its first block reached the PDL wait ~0.03 us after the kernel before
 * had finished, though it had started ~10 us before. */
template <bool STAB>
static __device__ __forceinline__ void mdq_tabs_load(uint2 *grid, uint2 *sign, const cu_grids &g) {
    const uint32_t t = threadIdx.x;
    const uint64_t r = g.iq2xxs[t];
    const uint2 v = make_uint2((uint32_t)r, (uint32_t)(r >> 32));
#pragma unroll
    for (int c = 0; c < 16; c++)
        grid[16 * t + c] = v;
    if constexpr (STAB) {
        const uint32_t b = iq_signs(t >> 1);
        const uint2 m = make_uint2(mvq_sign_bytes(b & 15) * 0xffu, mvq_sign_bytes(b >> 4) * 0xffu);
#pragma unroll
        for (int c = 0; c < 8; c++)
            sign[16 * (t >> 1) + 8 * (t & 1) + c] = m;
    }
}

/* The dot of unit u (words w, mdq_load) with its activation: mvq_unit_x's value. STAB: the
 * IQ2_XXS sign masks from tab.sign (else computed as moe_iq2_unit computes them). */
template <int T, bool STAB>
static __device__ __forceinline__ float mdq_unit(const uint32_t *w, int u, const mdq_x &x,
                                                 const mdq_tab &tab) {
    if constexpr (T == HALO_TYPE_IQ2_XXS) {
        const bool even = ((u >> 3) & 1) == 0;
        const uint32_t sel = even ? 0x5432u : 0x3210u;
        const uint32_t qi = __byte_perm(w[0], w[1], sel), aux = __byte_perm(w[1], w[2], sel);
        int s = 0, c = 0;
#pragma unroll
        for (int l = 0; l < 4; l++) {
            const uint2 g = tab.grid[moe_prmt(qi, 0x4440u + l) << 4];
            uint32_t mlo, mhi;
            if constexpr (STAB) {
                const uint2 sm = tab.sign[((aux >> (7 * l)) & 127u) << 4];
                mlo = sm.x, mhi = sm.y;
            } else { /* moe_iq2_unit's masks (moe_gu.cuh) */
                const uint32_t t = aux >> (7 * l);
                mlo = moe_prmt((t & 15u) * 0x10204080u, 0xba98u);
                mhi = moe_prmt((t & 0x70u) * 0x01020408u + ((uint32_t)__popc(t & 127u) << 31),
                               0xba98u);
            }
            s = __dp4a((int)(g.x ^ mlo), x.v[2 * l], s);
            c = __dp4a((int)mlo, x.v[2 * l], c);
            s = __dp4a((int)(g.y ^ mhi), x.v[2 * l + 1], s);
            c = __dp4a((int)mhi, x.v[2 * l + 1], c);
        }
        s -= c;
        const int ls = 2 * (int)(aux >> 28) + 1;
        const unsigned short dh = (unsigned short)(even ? w[3] : w[3] >> 16);
        const float dw = __half2float(__ushort_as_half(dh)) * 0.125f;
        return dw * x.d * (float)(s * ls);
    } else if constexpr (T == HALO_TYPE_Q8_0) {
        const bool odd = u & 1; /* block at 2 mod 4: d in w[0]'s high half, qs from w[1] */
        const uint32_t sel = odd ? 0x7654u : 0x5432u;
        int s = 0;
#pragma unroll
        for (int i = 0; i < 8; i++)
            s = __dp4a((int)__byte_perm(w[i], w[i + 1], sel), x.v[i], s);
        const float dw = __half2float(__ushort_as_half((unsigned short)(odd ? w[0] >> 16 : w[0])));
        return dw * x.d * (float)s;
    } else {
        const int sub = u & 7, shift = 2 * (sub & 3);
        const uint32_t sc = (sub & 1 ? w[8] >> 16 : w[8]) & 0xffffu;
        int s0 = 0, s1 = 0;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            s0 = __dp4a((int)((w[i] >> shift) & 0x03030303u), x.v[i], s0);
            s1 = __dp4a((int)((w[i + 4] >> shift) & 0x03030303u), x.v[i + 4], s1);
        }
        const int isum = (int)(sc & 15) * s0 + (int)((sc >> 8) & 15) * s1;
        const int msum = (int)((sc >> 4) & 15) * x.b0 + (int)(sc >> 12) * x.b1;
        const float d = __half2float(__ushort_as_half((unsigned short)w[9]));
        const float dmin = __half2float(__ushort_as_half((unsigned short)(w[9] >> 16)));
        return x.d * (d * (float)isum - dmin * (float)msum);
    }
}

/* The warp sums of a and b (each as warp_sum adds it: the same pairs at every step), in one
 * 5-step butterfly: the first step sends each half-warp the other half's share of the value it
 * keeps. Every lane gets both. */
static __device__ __forceinline__ float2 mdq_sum2(float a, float b) {
    const bool hi = threadIdx.x & 16;
    float v = (hi ? b : a) + __shfl_xor_sync(0xffffffffu, hi ? a : b, 16);
#pragma unroll
    for (int m = 8; m > 0; m >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, m);
    const float o = __shfl_xor_sync(0xffffffffu, v, 16);
    return hi ? make_float2(o, v) : make_float2(v, o);
}

/* The warp sums of s[0..3] likewise: lanes 8 q .. 8 q + 7 end with s[q]'s. */
static __device__ __forceinline__ float mdq_sum4(const float s[4]) {
    const bool h16 = threadIdx.x & 16, h8 = threadIdx.x & 8;
    const float k0 = (h16 ? s[2] : s[0]) + __shfl_xor_sync(0xffffffffu, h16 ? s[0] : s[2], 16);
    const float k1 = (h16 ? s[3] : s[1]) + __shfl_xor_sync(0xffffffffu, h16 ? s[1] : s[3], 16);
    float v = (h8 ? k1 : k0) + __shfl_xor_sync(0xffffffffu, h8 ? k0 : k1, 8);
#pragma unroll
    for (int m = 4; m > 0; m >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, m);
    return v;
}

/* Asks L2 for rows r0, r0 + step, ... < rows of a and b (rb bytes each; b may be NULL): the
 * shared expert's later rows of a warp, before the PDL wait (its weights are no kernel's
 * output), so they stream in while the routing runs (HALO_CUDA_EARLY=0: off). The routed rows
 * are not prefetched: cuda-moe-2 measured that (after the routing), and down's routed blocks
 * reading the routing before their wait, as moving time between the two kernels (4-layer
 * trace, us a layer: gate/up 22.4 -> 24.0 / 24.7, down 18.6 -> 17.1 / 16.0) but not their sum
 * (40.95, 41.04, 40.69). */
static __device__ __forceinline__ void mdq_prefetch_rows(const char *a, const char *b, uint64_t rb,
                                                         uint32_t r0, uint32_t step,
                                                         uint32_t rows) {
    for (uint32_t r = r0; r < rows; r += step) {
        cu_prefetch_l2(a + r * rb, rb);
        if (b) cu_prefetch_l2(b + r * rb, rb);
    }
}

/* One warp's gate/up rows: warp w of nw of its part. Routed (SH false): the part's warps are
 * dealt to the k pairs, wpp = nw / k each, and warp w takes rows lw, lw + wpp, ... of pair
 * w / wpp (lw = w % wpp); the shared expert's warps all take its pair (slot k). U units a lane
 * (n_embd = 1024 U). HOLD: the activations in registers (else read per unit from shared
 * memory: the Q8_0 rows' words take twice the registers). Calls cu_pdl_entry. */
template <int T, int U, bool SH, bool HOLD, bool STAB>
static __device__ __forceinline__ void
mdq_gu_part(const expert_mats &m, const int32_t *sel, const float *x, float *h, uint8_t *xq,
            const mdq_tab tab, uint32_t w, uint32_t nw, uint32_t k, bool early) {
    constexpr int NW = mdq_nw<T>();
    const int lane = threadIdx.x % WARP;
    const uint32_t wpp = SH ? nw : nw / k, j = SH ? k : w / wpp, lw = SH ? w : w % wpp;
    const bool on = SH || j < k;
    const uint32_t rows = (uint32_t)(SH ? m.n_ff_sh : m.n_ff);
    const uint64_t rb = SH ? m.grb_sh : m.grb; /* gate and up share a type */
    uint32_t wg[U][NW], wu[U][NW];
    uint32_t r = lw;
    const bool any = on && r < rows;
    const char *g0 = m.gate_sh, *u0 = m.up_sh;
    if (SH) {
        /* The shared expert's rows are no kernel's output: its first rows' loads, and the
         * rest of its rows asked of L2, while the routing still runs. */
        if (any) {
#pragma unroll
            for (int i = 0; i < U; i++) {
                mdq_load<T>(g0 + r * rb, lane + WARP * i, wg[i]);
                mdq_load<T>(u0 + r * rb, lane + WARP * i, wu[i]);
            }
            if (early) mdq_prefetch_rows(g0, u0, rb, r + wpp, wpp, rows);
        }
        cu_pdl_entry();
    } else {
        cu_pdl_entry();
        const uint64_t e = any ? (uint64_t)sel[j] : 0;
        g0 = m.gate + e * rows * rb;
        u0 = m.up + e * rows * rb;
        if (any) {
#pragma unroll
            for (int i = 0; i < U; i++) {
                mdq_load<T>(g0 + r * rb, lane + WARP * i, wg[i]);
                mdq_load<T>(u0 + r * rb, lane + WARP * i, wu[i]);
            }
        }
    }
    /* The routed IQ2_XXS rows: both pieces a warp loaded at once (mvq_quant_block's batch:
     * one L2 round trip before any row, not two; with Q8_0 rows the kernel spills with it). */
    mvq_quant_block<mvq_k(T)>(x, m.n_embd, xq, T == HALO_TYPE_IQ2_XXS);
    __syncthreads(); /* x's quantization (and the grid's copies) */
    if (!any) return;
    const q8act a = mvq_act_at(xq, m.n_embd);
    mdq_x xs[HOLD ? U : 1];
#pragma unroll
    for (int i = 0; i < (HOLD ? U : 1); i++)
        xs[i] = mdq_xload<T>(a, lane + WARP * i);
    float *hp = h + (int64_t)j * m.n_h;
    const float c = SH ? m.clamp_sh : m.clamp_exp;
    for (;;) {
        const uint32_t rn = r + wpp;
        const bool more = rn < rows;
        float sg = 0.0f, su = 0.0f;
#pragma unroll
        for (int i = 0; i < U; i++)
            sg += mdq_unit<T, STAB>(wg[i], lane + WARP * i,
                                    HOLD ? xs[i] : mdq_xload<T>(a, lane + WARP * i), tab);
        if (more)
#pragma unroll
            for (int i = 0; i < U; i++)
                mdq_load<T>(g0 + rn * rb, lane + WARP * i, wg[i]);
#pragma unroll
        for (int i = 0; i < U; i++)
            su += mdq_unit<T, STAB>(wu[i], lane + WARP * i,
                                    HOLD ? xs[i] : mdq_xload<T>(a, lane + WARP * i), tab);
        if (more)
#pragma unroll
            for (int i = 0; i < U; i++)
                mdq_load<T>(u0 + rn * rb, lane + WARP * i, wu[i]);
        const float2 t = mdq_sum2(sg, su);
        if (lane == 0) { /* moeq_swiglu_kernel's expression */
            float ga = t.x, ub = t.y;
            if (c > 0) {
                ga = ga > c ? c : ga;
                ub = ub > c ? c : ub < -c ? -c : ub;
            }
            hp[r] = ga / (1.0f + expf(-ga)) * ub;
        }
        if (!more) break;
        r = rn;
    }
}

/* blocks_r blocks take the routed pairs (TR, with the IQ2_XXS tables in shared memory when TR
 * is IQ2_XXS), the rest the shared expert (TS). h[pair, r] as moeq_swiglu_kernel. */
template <int TR, int TS, bool STAB>
__global__ void __launch_bounds__(MDQ_WARPS *WARP, 2)
    mdq_gu_kernel(GPU_GRID_CONST const expert_mats m, const int32_t *sel, const float *x, float *h,
                  uint32_t k, unsigned blocks_r, bool early) {
    extern __shared__ __align__(16) uint8_t mv_dyn[];
    uint8_t *xq = mv_dyn;
    uint2 *grid = (uint2 *)(mv_dyn + mvq_act_bytes(m.n_embd)), *sign = grid + 256 * 16;
    const bool routed = blockIdx.x < blocks_r;
    const uint32_t warp = threadIdx.x / WARP;
    if constexpr (TR == HALO_TYPE_IQ2_XXS)
        if (routed) mdq_tabs_load<STAB>(grid, sign, m.g); /* constants: before the wait */
    const mdq_tab t = {grid + (threadIdx.x & 15), sign + (threadIdx.x & 15)};
    if (routed)
        mdq_gu_part<TR, 4, false, TR != HALO_TYPE_Q8_0, STAB>(
            m, sel, x, h, xq, t, blockIdx.x * MDQ_WARPS + warp, blocks_r * MDQ_WARPS, k, early);
    else
        mdq_gu_part<TS, 4, true, TS != HALO_TYPE_Q8_0, false>(
            m, sel, x, h, xq, t, (blockIdx.x - blocks_r) * MDQ_WARPS + warp,
            (gridDim.x - blocks_r) * MDQ_WARPS, k, early);
}

/* One block's down rows: block b of nb of its part. Routed: the blocks are dealt to the k
 * pairs, bpp = nb / k each; the shared expert's all take its pair. A block quantizes its pair's
 * h (as moeq_swiglu_kernel: Q8_K for K-types, Q8_0 for Q8_0) into hq, then its warps take
 * groups of MDQ_DR rows, lw, lw + W, ... (W = 8 bpp warps on the pair). U units a lane
 * (n_ff = 1024 U). Calls cu_pdl_entry. */
template <int T, int U, bool SH>
static __device__ __forceinline__ void
mdq_dn_part(const expert_mats &m, const int32_t *sel, const float *h, float *y, uint8_t *hq,
            uint32_t b, uint32_t nb, uint32_t k, bool early) {
    constexpr int NW = mdq_nw<T>(), R = MDQ_DR;
    const int lane = threadIdx.x % WARP, warp = threadIdx.x / WARP;
    const uint32_t bpp = SH ? nb : nb / k, j = SH ? k : b / bpp, lb = SH ? b : b % bpp;
    const bool on = SH || j < k;
    const int64_t width = SH ? m.n_ff_sh : m.n_ff;
    const uint64_t rb = SH ? m.drb_sh : m.drb;
    const uint32_t W = bpp * MDQ_WARPS, groups = (uint32_t)m.n_embd / R;
    uint32_t gi = lb * MDQ_WARPS + warp;
    const bool any = on && gi < groups;
    uint32_t wv[R][U][NW];
    const char *r0 = m.down_sh;
    if (SH) {
        if (any) {
#pragma unroll
            for (int q = 0; q < R; q++)
#pragma unroll
                for (int i = 0; i < U; i++)
                    mdq_load<T>(r0 + (R * gi + q) * rb, lane + WARP * i, wv[q][i]);
            if (early) mdq_prefetch_rows(r0, NULL, R * rb, gi + W, W, groups);
        }
        cu_pdl_entry();
    } else {
        cu_pdl_entry();
        const uint64_t e = on ? (uint64_t)sel[j] : 0;
        r0 = m.down + e * (uint64_t)m.n_embd * rb;
        if (any)
#pragma unroll
            for (int q = 0; q < R; q++)
#pragma unroll
                for (int i = 0; i < U; i++)
                    mdq_load<T>(r0 + (R * gi + q) * rb, lane + WARP * i, wv[q][i]);
    }
    if (on)
        for (int64_t ch = warp; ch < width / 256; ch += MDQ_WARPS) {
            const float4 *p = (const float4 *)(h + (int64_t)j * m.n_h + 256 * ch + 8 * lane);
            const float4 v0 = p[0], v1 = p[1];
            const float v[8] = {v0.x, v0.y, v0.z, v0.w, v1.x, v1.y, v1.z, v1.w};
            mvq_quant256<mvq_k(T)>(v, 256 * ch, hq, width);
        }
    __syncthreads();
    if (!any) return;
    const q8act a = mvq_act_at(hq, width);
    mdq_x xs[U];
#pragma unroll
    for (int i = 0; i < U; i++)
        xs[i] = mdq_xload<T>(a, lane + WARP * i);
    float *yp = y + (int64_t)j * m.n_embd;
    const mdq_tab none = {NULL, NULL};
    for (;;) {
        const uint32_t gn = gi + W;
        const bool more = gn < groups;
        float s[R];
#pragma unroll
        for (int q = 0; q < R; q++) {
            s[q] = 0.0f;
#pragma unroll
            for (int i = 0; i < U; i++)
                s[q] += mdq_unit<T, false>(wv[q][i], lane + WARP * i, xs[i], none);
            if (more)
#pragma unroll
                for (int i = 0; i < U; i++)
                    mdq_load<T>(r0 + (R * gn + q) * rb, lane + WARP * i, wv[q][i]);
        }
        const float v = mdq_sum4(s);
        if ((lane & 7) == 0) yp[R * gi + (lane >> 3)] = v;
        if (!more) break;
        gi = gn;
    }
}

/* y[pair, .] = down · h[pair] for every pair: blocks_r blocks take the routed pairs (TR), the
 * rest the shared expert (TS). */
template <int TR, int TS>
__global__ void __launch_bounds__(MDQ_WARPS *WARP, 2)
    mdq_dn_kernel(GPU_GRID_CONST const expert_mats m, const int32_t *sel, const float *h, float *y,
                  uint32_t k, unsigned blocks_r, bool early) {
    extern __shared__ __align__(16) uint8_t mv_dyn[];
    if (blockIdx.x < blocks_r)
        mdq_dn_part<TR, 2, false>(m, sel, h, y, mv_dyn, blockIdx.x, blocks_r, k, early);
    else
        mdq_dn_part<TS, 2, true>(m, sel, h, y, mv_dyn, blockIdx.x - blocks_r, gridDim.x - blocks_r,
                                 k, early);
}

/* ---- host ---------------------------------------------------------------------------------- */

/* The type quadruples (routed gate/up, shared gate/up, routed down, shared down) built here. */
#define MDQ_TYPES(X)                                                                               \
    X(HALO_TYPE_IQ2_XXS, HALO_TYPE_Q8_0, HALO_TYPE_Q2_K, HALO_TYPE_Q8_0)                           \
    X(HALO_TYPE_Q8_0, HALO_TYPE_Q8_0, HALO_TYPE_Q8_0, HALO_TYPE_Q8_0)

/* HALO_CUDA_MDQ=2 (tests): as the default, and a one-token experts op these kernels do not take
 * fails, so a test comparing them with HALO_CUDA_MDQ=0 shows they ran. */
static bool mdq_must(void) {
    const char *env = getenv("HALO_CUDA_MDQ");
    return env && strcmp(env, "2") == 0;
}

/* Whether one token's experts (moeq_ok said yes) take these kernels: the shape they are built
 * for, a shared expert of the same width or none, the grid's 16 copies (HALO_CUDA_GRIDREP
 * unset), and HALO_CUDA_MDQ not 0. Read at each call
 * (graphs capture it once), so a test can A/B it on one backend. */
static bool mdq_ok(const cu_backend *be, const expert_mats &m, uint32_t tr, uint32_t ts,
                   uint32_t tdr, uint32_t tds, uint32_t k) {
    const char *env = getenv("HALO_CUDA_MDQ");
    if (env && strcmp(env, "0") == 0) return false;
    if (tr == HALO_TYPE_IQ2_XXS && be->grid_rep != 4) return false; /* 16 copies (the default) */
    if (m.n_embd != 4096 || m.n_ff != 2048 || m.n_h != 2048 || k < 1 || k > 64 ||
        (m.gate_sh && m.n_ff_sh != 2048))
        return false;
#define MDQ_OK(a, b, c, d)                                                                         \
    if (tr == (a) && ts == (b) && tdr == (c) && tds == (d)) return true;
    MDQ_TYPES(MDQ_OK)
#undef MDQ_OK
    return false;
}

/* The shared expert's share of the blocks, percent (gate/up, down): HALO_CUDA_MDQSPLIT=a,b.
 * Between the parts' bytes (41 % and 35 % of each kernel's are the shared expert's) and their
 * instructions (~15 %). Request cuda-moe-1 (4-layer in-graph trace, us a launch, gate/up and
 * down): 30,30 24.2 and 18.9; 20,20 21.1 and 16.1; 40,40 26.6 and 16.1. */
static void mdq_split(int *gu, int *dn) {
    *gu = 20, *dn = 20;
    const char *env = getenv("HALO_CUDA_MDQSPLIT");
    int a, b;
    if (env && sscanf(env, "%d,%d", &a, &b) == 2 && a > 0 && a < 100 && b > 0 && b < 100)
        *gu = a, *dn = b;
}

/* blocks (all resident) with pct percent for the shared expert (none without one), at least
 * `least` routed ones. */
static unsigned mdq_blocks_r(int64_t blocks, int pct, bool sh, int64_t least) {
    int64_t bs = sh ? (blocks * pct + 50) / 100 : 0;
    if (sh && bs < 1) bs = 1;
    if (blocks - bs < least) bs = blocks - least;
    return (unsigned)(blocks - bs);
}

/* Stage 0: gate/up with SwiGLU into h; stage 1: down into y (mdq_ok said yes, and stage 0 was
 * launched). Checks its launches: MDQ_FAIL after a failure, MDQ_NOT (stage 0 only) when the GPU
 * holds too few blocks for the parts (moeq_* then). HALO_CUDA_MDQSIGN=0: the IQ2_XXS sign masks
 * computed, not read from the table. */
enum { MDQ_FAIL, MDQ_DONE, MDQ_NOT };
template <int TR, int TS, int TDR, int TDS>
static int mdq_launch(cu_backend *be, const expert_mats &m, const int32_t *sel, const float *x,
                      float *h, float *y, uint32_t k, int stage, const char *op) {
    const bool sh = m.gate_sh != NULL;
    int pg, pd;
    mdq_split(&pg, &pd);
    const char *sg = getenv("HALO_CUDA_MDQSIGN");
    const bool stab = TR == HALO_TYPE_IQ2_XXS && !(sg && strcmp(sg, "0") == 0);
    const int smem_gu = (int)mvq_act_bytes(m.n_embd) +
                        (TR == HALO_TYPE_IQ2_XXS ? 256 * 8 * 16 + (stab ? 128 * 8 * 16 : 0) : 0);
    const int smem_dn = (int)mvq_act_bytes(m.n_ff);
    void (*gu)(const expert_mats, const int32_t *, const float *, float *, uint32_t, unsigned,
               bool) = stab ? mdq_gu_kernel<TR, TS, true> : mdq_gu_kernel<TR, TS, false>;
    static int done_gu[2]; /* the largest size the attribute was set for */
    bool done = smem_gu <= done_gu[stab];
    if (!cu_smem_attr(be, gu, smem_gu, &done, op)) return MDQ_FAIL;
    if (smem_gu > done_gu[stab]) done_gu[stab] = smem_gu;
    const int64_t nb1 = cu_resident(be, gu, MDQ_WARPS * WARP, smem_gu);
    const int64_t nb2 = cu_resident(be, mdq_dn_kernel<TDR, TDS>, MDQ_WARPS * WARP, smem_dn);
    if (nb1 < 2 || (nb1 - 1) * MDQ_WARPS < (int64_t)k || nb2 < (int64_t)k + 1) return MDQ_NOT;
    if (stage == 0) {
        const int64_t least = ((int64_t)k + MDQ_WARPS - 1) / MDQ_WARPS;
        const unsigned br = mdq_blocks_r(nb1, pg, sh, least);
        cu_launch(be, gu, (unsigned)nb1, MDQ_WARPS * WARP, smem_gu, m, sel, x, h, k, br, be->early);
        return CU_LAUNCHED(be, op, "mdq_gu_kernel") ? MDQ_DONE : MDQ_FAIL;
    }
    const unsigned br = mdq_blocks_r(nb2, pd, sh, (int64_t)k);
    cu_launch(be, mdq_dn_kernel<TDR, TDS>, (unsigned)nb2, MDQ_WARPS * WARP, smem_dn, m, sel, h, y,
              k, br, be->early);
    return CU_LAUNCHED(be, op, "mdq_dn_kernel") ? MDQ_DONE : MDQ_FAIL;
}

static int mdq_run(cu_backend *be, const expert_mats &m, uint32_t tr, uint32_t ts, uint32_t tdr,
                   uint32_t tds, const int32_t *sel, const float *x, float *h, float *y, uint32_t k,
                   int stage, const char *op) {
#define MDQ_RUN(a, b, c, d)                                                                        \
    if (tr == (a) && ts == (b) && tdr == (c) && tds == (d))                                        \
        return mdq_launch<a, b, c, d>(be, m, sel, x, h, y, k, stage, op);
    MDQ_TYPES(MDQ_RUN)
#undef MDQ_RUN
    return stage == 0 ? MDQ_NOT : MDQ_FAIL;
}
