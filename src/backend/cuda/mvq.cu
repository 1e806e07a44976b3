/* One-token projections over int8 activations (mvq.cuh), for the projections of a decode step
 * when the backend runs with HALO_CUDA_INTDOT=1. Each block quantizes the input slice of its
 * output group into shared memory once, then its warps stream rows (mvq_stream). */
#include "backend/cuda/mvq.cuh"

#ifndef HALO_HIP
enum { MVQ_WARPS = 8 };

typedef struct mvq_args {
    const char *w;
    uint64_t row_bytes;
    int64_t n_in, out_per_group;
    const float *x; /* the token's input: groups x n_in values */
    float *out;
    cu_grids g;
    /* Bytes of its rows a warp asks L2 for before the PDL wait (they are no kernel's output):
     * HALO_CUDA_EARLY, 8192 by default (3168 warps: ~25 MB), 0 none. */
    uint32_t early;
    bool qbatch; /* x's pieces loaded MVQ_QB at a time (mvq.cuh; HALO_CUDA_QBATCH=0: one) */
    /* Half rows (HALO_CUDA_MVQSPLIT): item i is half i % 2 of row i / 2, its sum kept in
     * parts[i]; the warp that ends a row's second half (ctr[row], which it resets) writes
     * parts[2 row] + parts[2 row + 1], in that order. */
    bool split;
    unsigned *ctr;
    float *parts;
} mvq_args;

/* The rows of output group blockIdx.y, the activation quantized in shared memory. */
template <int T> struct mvq_dense_rows {
    const mvq_args &a;
    int64_t o0; /* the group's first row */
    uint8_t *xq;
    mvq_tabs *tab;
    int64_t half; /* of the item begun last (split) */
    __device__ int64_t row(int64_t i, const char **r) const {
        if (a.split) {
            *r = a.w + (uint64_t)(o0 + i / 2) * a.row_bytes + (uint64_t)(i & 1) * (a.row_bytes / 2);
            return a.n_in / 2;
        }
        *r = a.w + (uint64_t)(o0 + i) * a.row_bytes;
        return a.n_in;
    }
    __device__ void prepare() const {
        cu_pdl_wait(a.early != 0); /* x is the previous kernel's output */
        if constexpr (T == HALO_TYPE_IQ2_XXS) mvq_tabs_load(tab, a.g);
        mvq_quant_block<mvq_k(T)>(a.x + (o0 / a.out_per_group) * a.n_in, a.n_in, xq, a.qbatch);
        __syncthreads();
    }
    __device__ int64_t begin(int64_t i) {
        half = a.split ? (i & 1) : 0;
        return a.split ? a.n_in / 2 : a.n_in;
    }
    __device__ q8act act() const {
        q8act q = mvq_act_at(xq, a.n_in);
        const int64_t off = half * (a.n_in / 2);
        q.qs += off, q.d += off / 32, q.bs += off / 16;
        return q;
    }
    __device__ void end(int64_t i, float sum) const {
        if (threadIdx.x % WARP) return;
        if (!a.split) {
            a.out[o0 + i] = sum;
            return;
        }
        const int64_t r = i / 2;
        a.parts[i] = sum;
        __threadfence(); /* the sum before the count */
        if (atomicAdd(a.ctr + r, 1u) == 1u) { /* the other half is in */
            atomicExch(a.ctr + r, 0u);
            const float other = __ldcg(a.parts + (i ^ 1));
            a.out[o0 + r] = (i & 1) ? other + sum : sum + other;
        }
    }
};

/* RING: a warp's bytes of chunk slots: MV_STAGES x MV_STAGE (six Q8_0 chunks of 1,024), or
 * seven (HALO_CUDA_MVQRING=7, Q8_0 only, for measuring: one chunk more in flight a warp, still
 * three blocks a multiprocessor). */
enum { MVQ_RING7 = 7 * 1088 };
template <int T, int RING = MV_STAGES * MV_STAGE>
__global__ void __launch_bounds__(MVQ_WARPS *WARP, 3)
    mvq_dense_kernel(GPU_GRID_CONST const mvq_args a) {
    /* With a.early the first chunks of every warp's rows are in flight before the previous
     * kernel has finished (prepare() waits): the fetch overlaps that kernel's tail. */
    extern __shared__ __align__(16) uint8_t mvq_dyn[];
    const int warp = threadIdx.x / WARP;
    if (a.early) {
        cu_pdl_trigger();
        /* The warp's rows towards L2, a.early bytes at most (a 562 MB head would thrash L2);
         * mvq_stream's first chunks come on top by cp.async. */
        const int64_t o0 = (int64_t)blockIdx.y * a.out_per_group;
        const int64_t items = a.split ? 2 * a.out_per_group : a.out_per_group;
        const uint64_t bytes = a.split ? a.row_bytes / 2 : a.row_bytes;
        uint64_t left = a.early;
        for (int64_t i = (int64_t)blockIdx.x * MVQ_WARPS + warp; i < items && left;
             i += (int64_t)gridDim.x * MVQ_WARPS) {
            const uint64_t n = bytes < left ? bytes : left;
            cu_prefetch_l2(a.w + (uint64_t)o0 * a.row_bytes + (uint64_t)i * bytes, n);
            left -= n;
        }
    } else {
        cu_pdl_entry();
    }
    uint8_t *stage = mvq_dyn + warp * RING;
    uint8_t *act = mvq_dyn + MVQ_WARPS * RING + 16;
    mvq_tabs *tab = (mvq_tabs *)(act + mvq_act_bytes(a.n_in));
    mvq_dense_rows<T> rows = {a, (int64_t)blockIdx.y * a.out_per_group, act, tab, 0};
    mvq_stream<T, false, mvq_dense_rows<T>, false, RING>(
        rows, (int64_t)blockIdx.x * MVQ_WARPS + warp, (int64_t)gridDim.x * MVQ_WARPS,
        a.split ? 2 * a.out_per_group : a.out_per_group, stage, mvq_grid_at(tab, a.g));
}

template <int T, int RING = MV_STAGES * MV_STAGE>
static void mvq_launch_t(cu_backend *be, mvq_args a, uint32_t groups, const char *op) {
    const int smem = mvq_smem_bytes(T, MVQ_WARPS, a.n_in, be->grid_rep, RING);
    static int done_bytes; /* the largest size the attribute was set for */
    if (smem > done_bytes) {
        bool done = false;
        if (!cu_smem_attr(be, mvq_dense_kernel<T, RING>, smem, &done, op)) return;
        done_bytes = smem;
    }
    /* As many blocks as stay resident (three a multiprocessor, two with IQ2_XXS's 16 grid
     * copies), shared by the groups: rounded down, so no block waits for a second wave (out_a's
     * 8 groups took 8 x 50 = 400 blocks against 396 resident). Each row is one warp's, so the
     * sums do not change. */
    int64_t resident = cu_resident(be, mvq_dense_kernel<T, RING>, MVQ_WARPS * WARP, smem);
    if (be->mvq_sm > 0 && be->mvq_sm * (int64_t)be->sm_count < resident)
        resident = be->mvq_sm * (int64_t)be->sm_count;
    int64_t per = resident / groups > 0 ? resident / groups : 1;
    /* Between one and two rows a warp (out_b: 4,096 rows of 8 chunks over 3,168 warps), the
     * warps with two finish last: half rows (2.6 a warp, 3 at most) shorten that tail. */
    const int64_t warps = per * MVQ_WARPS;
    a.split = be->mvq_split && T == HALO_TYPE_Q8_0 && groups == 1 && a.n_in % 2048 == 0 &&
              a.out_per_group > warps && a.out_per_group < 2 * warps &&
              a.out_per_group <= CU_ROW_CTRS;
    if (a.split) {
        a.ctr = be->counters + CU_CTR_ROWS;
        a.parts = (float *)(be->counters + CU_CTR_ROWS + CU_ROW_CTRS);
    }
    const int64_t items = a.split ? 2 * a.out_per_group : a.out_per_group;
    const int64_t need = (items + MVQ_WARPS - 1) / MVQ_WARPS;
    if (per > need) per = need;
    cu_launch(be, mvq_dense_kernel<T, RING>, dim3((unsigned)per, groups), MVQ_WARPS * WARP, smem,
              a);
    CU_LAUNCHED(be, op, "mvq_dense_kernel");
}
#endif

bool cu_mvq_matmul(cu_backend *be, uint32_t type, const char *w, int64_t n_in, int64_t n_out,
                   uint32_t groups, const float *x, float *out, const char *op) {
#ifdef HALO_HIP
    (void)be, (void)type, (void)w, (void)n_in, (void)n_out, (void)groups, (void)x, (void)out;
    (void)op;
    return false;
#else
    const uint64_t row_bytes = cu_row_bytes(type, n_in);
    /* The activation is quantized in 256-value pieces and held in shared memory (n_in <= 16384:
     * 22 KiB of it beside the 51 KiB of chunk slots). */
    if (!be->intdot || be->naive || !mvq_type((int)type) || n_in % 256 || n_in > 16384 ||
        n_out % groups || ((uintptr_t)x & 15) || !mv_shape_ok(type, w, row_bytes, n_in))
        return false;
    mvq_args a = {w,
                  row_bytes,
                  n_in,
                  n_out / groups,
                  x,
                  out,
                  cu_grids_get(&be->base),
                  be->early ? be->early_bytes : 0,
                  be->qbatch,
                  false,
                  NULL,
                  NULL};
    switch (type) {
    case HALO_TYPE_Q8_0:
        if (be->mvq_ring == 7)
            mvq_launch_t<HALO_TYPE_Q8_0, MVQ_RING7>(be, a, groups, op);
        else
            mvq_launch_t<HALO_TYPE_Q8_0>(be, a, groups, op);
        return true;
    case HALO_TYPE_IQ2_XXS:
        mvq_launch_t<HALO_TYPE_IQ2_XXS>(be, a, groups, op);
        return true;
    case HALO_TYPE_Q2_K:
        mvq_launch_t<HALO_TYPE_Q2_K>(be, a, groups, op);
        return true;
    default:
        return false;
    }
#endif
}

/* ---- several projections of one token's input, the RMS norm folded in (matmul_multi) --------
 * One launch for the projections of one input that a decode step would otherwise run one by one
 * after an rms_norm (attention: q_a, kv, the compressor's and the indexer's projections of the
 * normed x; then q_b and the indexer's q_b of the normed qr; the head): each projection paid a
 * launch's fixed cost (ramp, every block quantizing the input, tail: ~8 us, H200 request cd-3),
 * and the norm a launch of its own. Here every block computes the norm of x itself (a block
 * reduction over n_in values that L2 holds), so nothing is written back and no block waits for
 * another. The blocks are split in two parts over the concatenated rows of each: the int8 part
 * (Q8_0 rows in fast mode, as mvq_dense_kernel: x quantized in shared memory) and the float part
 * (F16/BF16/F32 rows: the normed x in f32 in shared memory, f32 sums as mv.cuh), blocks shared
 * in proportion to their bytes. Projections of other types (or Q8_0 in precise mode) take the
 * norm-then-matmul path after the launch. */
#ifndef HALO_HIP
enum { MM_MULTI = 8 };

typedef struct multi_part {
    int n;        /* projections in this part */
    int64_t rows; /* their rows, concatenated */
    uint64_t row_bytes;
    int64_t blocks; /* blocks of the grid given to this part */
    const char *w[MM_MULTI];
    float *out[MM_MULTI];
    int64_t start[MM_MULTI + 1]; /* first concatenated row of each, then rows */
} multi_part;

typedef struct multi_args {
    const float *x, *norm; /* norm NULL: x as it is */
    float eps;
    int64_t n_in;
    multi_part q, f; /* blocks [0, q.blocks) the int8 part, then the float part */
    cu_grids g;
    uint32_t early; /* bytes fetched before the PDL wait, as mvq_dense_kernel */
    bool two;    /* one-chunk int8 rows (q_b's 1024 inputs) two at a time, x held (HALO_CUDA_TWO) */
    bool qbatch; /* the normed x's pieces loaded MVQ_QB at a time (HALO_CUDA_QBATCH=0: one) */
} multi_args;

/* Projection j and row r of concatenated row i of a part. */
static __device__ __forceinline__ int multi_seg(const multi_part &p, int64_t i) {
    int j = 0;
    while (j + 1 < p.n && i >= p.start[j + 1])
        j++;
    return j;
}

/* 1 / rms(x) (the rms_norm kernel's formula), the same in every block of the launch: each block
 * sums in the same order. */
static __device__ float multi_rscale(const multi_args &a, float *red) {
    const float4 *x4 = (const float4 *)a.x;
    float ss = 0.0f;
    for (int64_t i = threadIdx.x; i < a.n_in / 4; i += blockDim.x) {
        const float4 v = x4[i];
        ss += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
    }
    ss = block_sum(ss, red);
    return 1.0f / sqrtf(ss / (float)a.n_in + a.eps);
}

/* Element i of the normed input: w · (x · r), as rms_norm4_kernel computes it. */
static __device__ __forceinline__ float4 multi_normed4(const multi_args &a, int64_t i4, float r) {
    float4 v = ((const float4 *)a.x)[i4];
    if (a.norm) {
        const float4 g = ((const float4 *)a.norm)[i4];
        v.x = g.x * (v.x * r), v.y = g.y * (v.y * r), v.z = g.z * (v.z * r), v.w = g.w * (v.w * r);
    }
    return v;
}

/* The int8 part's rows for mvq_stream: the normed x quantized in shared memory by prepare(). */
template <int T> struct multi_q_rows {
    const multi_args &a;
    uint8_t *xq;
    float *red;
    __device__ int64_t row(int64_t i, const char **r) const {
        const int j = multi_seg(a.q, i);
        *r = a.q.w[j] + (uint64_t)(i - a.q.start[j]) * a.q.row_bytes;
        return a.n_in;
    }
    __device__ void prepare() const {
        cu_pdl_wait(a.early != 0);
        const float r = a.norm ? multi_rscale(a, red) : 1.0f;
        const int lane = threadIdx.x % WARP, warp = threadIdx.x / WARP, nw = blockDim.x / WARP;
        /* MVQ_QB pieces' loads at once, as mvq_quant_block (HALO_CUDA_QBATCH=0: one) */
        const int qb = a.qbatch ? MVQ_QB : 1;
        for (int64_t c0 = warp; c0 < a.n_in / 256; c0 += (int64_t)qb * nw) {
            float4 p[MVQ_QB], q[MVQ_QB];
#pragma unroll
            for (int u = 0; u < MVQ_QB; u++) {
                const int64_t c = c0 + (int64_t)u * nw, i4 = (256 * c + 8 * lane) / 4;
                if (u < qb && c < a.n_in / 256)
                    p[u] = multi_normed4(a, i4, r), q[u] = multi_normed4(a, i4 + 1, r);
            }
#pragma unroll
            for (int u = 0; u < MVQ_QB; u++) {
                const int64_t c = c0 + (int64_t)u * nw;
                if (u >= qb || c >= a.n_in / 256) break; /* uniform across the warp */
                const float v[8] = {p[u].x, p[u].y, p[u].z, p[u].w, q[u].x, q[u].y, q[u].z, q[u].w};
                mvq_quant256<mvq_k(T)>(v, 256 * c, xq, a.n_in);
            }
        }
        __syncthreads();
    }
    __device__ int64_t begin(int64_t) const {
        return a.n_in;
    }
    __device__ q8act act() const {
        return mvq_act_at(xq, a.n_in);
    }
    __device__ void end(int64_t i, float sum) const {
        if (threadIdx.x % WARP == 0) {
            const int j = multi_seg(a.q, i);
            a.q.out[j][i - a.q.start[j]] = sum;
        }
    }
};

/* The float part: a warp a row at a time, 8 weights a lane per step with U 16-byte loads in
 * flight (mv_row's float loop), the activations from the normed x in shared memory. Lanes with
 * bit 2 set read the second half of their 8 activations first, so a quarter-warp's 16-byte
 * loads (lanes 32 bytes apart) fill the 32 banks once instead of twice. */
template <int T>
static __device__ __forceinline__ void multi_float_rows(const multi_args &a, const float *xs,
                                                        int64_t first, int64_t stride) {
    constexpr int W = T == HALO_TYPE_F32 ? 2 : 1; /* 16-byte loads per 8 weights */
    constexpr int U = W == 1 ? 8 : 4;
    const int lane = threadIdx.x % WARP, h = (lane >> 2) & 1;
    for (int64_t i = first; i < a.f.rows; i += stride) {
        const int j = multi_seg(a.f, i);
        const char *wrow = a.f.w[j] + (uint64_t)(i - a.f.start[j]) * a.f.row_bytes;
        float acc = 0.0f;
        for (int64_t base = 8 * lane; base < a.n_in; base += 8 * WARP * U) {
            uint4 r[U][W];
#pragma unroll
            for (int u = 0; u < U; u++) {
                const int64_t e = base + (int64_t)u * 8 * WARP;
                if (e < a.n_in) {
                    const uint4 *p = (const uint4 *)(wrow + e * (W == 2 ? 4 : 2));
#pragma unroll
                    for (int k = 0; k < W; k++)
                        r[u][k] = __ldg(p + k);
                }
            }
#pragma unroll
            for (int u = 0; u < U; u++) {
                const int64_t e = base + (int64_t)u * 8 * WARP;
                if (e < a.n_in) {
                    float w[8];
                    mv_float8<T>(r[u], w);
                    const float4 *xp = (const float4 *)(xs + e);
                    const float4 xa = xp[h], xb = xp[h ^ 1];
                    const float4 x0 = h ? xb : xa, x1 = h ? xa : xb;
                    acc += w[0] * x0.x + w[1] * x0.y + w[2] * x0.z + w[3] * x0.w + w[4] * x1.x +
                           w[5] * x1.y + w[6] * x1.z + w[7] * x1.w;
                }
            }
        }
        acc = warp_sum(acc);
        if (lane == 0) a.f.out[j][i - a.f.start[j]] = acc;
    }
}

template <int TQ, int TF>
__global__ void __launch_bounds__(MVQ_WARPS *WARP, 3)
    multi_kernel(GPU_GRID_CONST const multi_args a) {
    extern __shared__ __align__(16) uint8_t multi_dyn[];
    __shared__ float red[32];
    const int warp = threadIdx.x / WARP;
    const bool in_q = TQ >= 0 && blockIdx.x < a.q.blocks;
    if (a.early) { /* as mvq_dense_kernel: the warp's rows towards L2, then the wait */
        cu_pdl_trigger();
        const multi_part &p = in_q ? a.q : a.f;
        const int64_t b = in_q ? blockIdx.x : (int64_t)blockIdx.x - a.q.blocks;
        uint64_t left = a.early;
        for (int64_t i = b * MVQ_WARPS + warp; i < p.rows && left; i += p.blocks * MVQ_WARPS) {
            const int j = multi_seg(p, i);
            const uint64_t n = p.row_bytes < left ? p.row_bytes : left;
            cu_prefetch_l2(p.w[j] + (uint64_t)(i - p.start[j]) * p.row_bytes, n);
            left -= n;
        }
    } else {
        cu_pdl_entry();
    }
    if constexpr (TQ >= 0) {
        if (blockIdx.x < a.q.blocks) {
            uint8_t *stage = multi_dyn + warp * MV_STAGES * MV_STAGE;
            uint8_t *xq = multi_dyn + MVQ_WARPS * MV_STAGES * MV_STAGE + 16;
            multi_q_rows<TQ> rows = {a, xq, red};
            const int64_t first = (int64_t)blockIdx.x * MVQ_WARPS + warp;
            const int64_t stride = (int64_t)a.q.blocks * MVQ_WARPS;
            if (a.two && a.n_in == mvq_ch(TQ)) /* rows of one chunk over the same x */
                mvq_stream<TQ, true, multi_q_rows<TQ>, true>(rows, first, stride, a.q.rows, stage,
                                                             mvq_grid_at(nullptr, a.g));
            else
                mvq_stream<TQ>(rows, first, stride, a.q.rows, stage, mvq_grid_at(nullptr, a.g));
            return;
        }
    }
    if constexpr (TF >= 0) {
        float *xs = (float *)multi_dyn;
        const int64_t b = (int64_t)blockIdx.x - (TQ >= 0 ? a.q.blocks : 0);
        cu_pdl_wait(a.early != 0);
        const float r = a.norm ? multi_rscale(a, red) : 1.0f;
        for (int64_t i4 = threadIdx.x; i4 < a.n_in / 4; i4 += blockDim.x)
            ((float4 *)xs)[i4] = multi_normed4(a, i4, r);
        __syncthreads();
        multi_float_rows<TF>(a, xs, b * MVQ_WARPS + warp, a.f.blocks * MVQ_WARPS);
    }
}

template <int TQ, int TF>
static void multi_launch_t(cu_backend *be, const multi_args &a, int smem, const char *op) {
    static int done_bytes; /* the largest size the attribute was set for */
    if (smem > done_bytes) {
        bool done = false;
        if (!cu_smem_attr(be, multi_kernel<TQ, TF>, smem, &done, op)) return;
        done_bytes = smem;
    }
    const unsigned blocks = (unsigned)(a.q.blocks + a.f.blocks);
    cu_launch(be, multi_kernel<TQ, TF>, dim3(blocks), MVQ_WARPS * WARP, smem, a);
    CU_LAUNCHED(be, op, "multi_kernel");
}

/* Whether projection w of the input (n_in values) can join part p (type t). */
static bool multi_fits(const halo_tensor *w, const halo_tensor *out, int64_t n_in, uint32_t t,
                       const multi_part &p) {
    if (w->type != t || w->ne[0] != n_in || p.n == MM_MULTI) return false;
    const int64_t n_out = w->ne[1] * w->ne[2] * w->ne[3];
    return n_out > 0 && halo_tensor_nelements(out) == n_out && ((uintptr_t)cu_ptr(out) & 3) == 0 &&
           mv_shape_ok(t, cu_ptr(w), cu_row_bytes(t, n_in), n_in);
}

static void multi_add(multi_part &p, const halo_tensor *w, halo_tensor *out) {
    const int64_t n_out = w->ne[1] * w->ne[2] * w->ne[3];
    p.w[p.n] = cu_ptr(w);
    p.out[p.n] = cu_f32(out);
    p.start[p.n] = p.rows;
    p.rows += n_out;
    p.n++;
    p.start[p.n] = p.rows;
}
#endif

/* The projections of w it ran (done[i] set); the caller runs the others. */
static void multi_fused(cu_backend *be, const halo_tensor *x, const halo_tensor *norm, float eps,
                        uint32_t n, const halo_tensor *const *w, halo_tensor *const *out,
                        bool *done) {
#ifdef HALO_HIP
    (void)be, (void)x, (void)norm, (void)eps, (void)n, (void)w, (void)out, (void)done;
#else
    const int64_t n_in = x->ne[0];
    if (be->naive || halo_tensor_nelements(x) != n_in || n_in % 256 || n_in > 16384 ||
        ((uintptr_t)cu_f32(x) & 15) ||
        (norm && (norm->type != HALO_TYPE_F32 || halo_tensor_nelements(norm) != n_in ||
                  ((uintptr_t)cu_f32(norm) & 15))))
        return;
    multi_args a;
    memset(&a, 0, sizeof a);
    a.x = cu_f32(x);
    a.norm = norm ? cu_f32(norm) : NULL;
    a.eps = eps;
    a.n_in = n_in;
    a.g = cu_grids_get(&be->base);
    a.early = be->early ? be->early_bytes : 0;
    a.two = be->two;
    a.qbatch = be->qbatch;
    const uint32_t tq = HALO_TYPE_Q8_0; /* the int8 part's type, in fast mode */
    int tf = -1;                        /* the float part's type */
    for (uint32_t i = 0; i < n; i++) {
        if (be->intdot && multi_fits(w[i], out[i], n_in, tq, a.q)) {
            multi_add(a.q, w[i], out[i]);
            done[i] = true;
            continue;
        }
        const uint32_t t = w[i]->type;
        if (!cx_float((int)t) || (tf >= 0 && (int)t != tf)) continue;
        if (multi_fits(w[i], out[i], n_in, t, a.f)) {
            tf = (int)t;
            multi_add(a.f, w[i], out[i]);
            done[i] = true;
        }
    }
    if (a.q.n == 0 && a.f.n == 0) return;
    a.q.row_bytes = a.q.n ? cu_row_bytes(tq, n_in) : 0;
    a.f.row_bytes = a.f.n ? cu_row_bytes((uint32_t)tf, n_in) : 0;
    /* As many blocks as stay resident (three a multiprocessor), split by bytes, each part at
     * least one and at most a row a warp. */
    const int64_t resident = (int64_t)(be->sm_count > 0 ? be->sm_count : 132) *
                             (be->mvq_sm > 0 && be->mvq_sm < 3 ? be->mvq_sm : 3);
    const double qb = (double)a.q.rows * (double)a.q.row_bytes;
    const double fb = (double)a.f.rows * (double)a.f.row_bytes;
    int64_t nq = a.q.n ? (int64_t)((double)resident * qb / (qb + fb) + 0.5) : 0;
    if (a.q.n && nq < 1) nq = 1;
    if (a.f.n && nq > resident - 1) nq = resident - 1;
    int64_t nf = a.f.n ? resident - nq : 0;
    const int64_t need_q = (a.q.rows + MVQ_WARPS - 1) / MVQ_WARPS;
    const int64_t need_f = (a.f.rows + MVQ_WARPS - 1) / MVQ_WARPS;
    a.q.blocks = nq < need_q ? nq : need_q;
    a.f.blocks = nf < need_f ? nf : need_f;
    int smem = 0;
    if (a.q.n) smem = mvq_smem_bytes(HALO_TYPE_Q8_0, MVQ_WARPS, n_in, 0);
    if (a.f.n && (int)(4 * n_in) > smem) smem = (int)(4 * n_in);
    const char *op = "matmul_multi";
    /* Template arguments: the parts' types, -1 for a part without rows (HALO_TYPE_F32 is 0). */
    const int Q = HALO_TYPE_Q8_0, F16 = HALO_TYPE_F16, BF16 = HALO_TYPE_BF16, F32 = HALO_TYPE_F32;
    if (a.q.n && !a.f.n)
        multi_launch_t<Q, -1>(be, a, smem, op);
    else if (a.q.n && tf == F16)
        multi_launch_t<Q, F16>(be, a, smem, op);
    else if (a.q.n && tf == BF16)
        multi_launch_t<Q, BF16>(be, a, smem, op);
    else if (a.q.n)
        multi_launch_t<Q, F32>(be, a, smem, op);
    else if (tf == F16)
        multi_launch_t<-1, F16>(be, a, smem, op);
    else if (tf == BF16)
        multi_launch_t<-1, BF16>(be, a, smem, op);
    else
        multi_launch_t<-1, F32>(be, a, smem, op);
#endif
}

void cu_matmul_multi(halo_backend *hbe, const halo_tensor *x, const halo_tensor *norm, float eps,
                     uint32_t n, const halo_tensor *const *w, halo_tensor *const *out) {
    cu_backend *be = cu_of(hbe);
    if (be->failed) return;
    bool done[64] = {false};
    if (n > 64 || !be->multi) { /* more than the forward ever passes, or asked: one by one */
        if (norm) cu_rms_norm(hbe, (halo_tensor *)x, (uint32_t)x->ne[0], norm, eps);
        for (uint32_t i = 0; i < n; i++)
            cu_matmul(hbe, w[i], x, 1, out[i]);
        return;
    }
    multi_fused(be, x, norm, eps, n, w, out, done);
    bool rest = false;
    for (uint32_t i = 0; i < n; i++)
        rest |= !done[i];
    if (!rest) return;
    /* The others after the launch above has read x: the norm in place, then one by one. */
    if (norm) cu_rms_norm(hbe, (halo_tensor *)x, (uint32_t)x->ne[0], norm, eps);
    for (uint32_t i = 0; i < n; i++)
        if (!done[i]) cu_matmul(hbe, w[i], x, 1, out[i]);
}
