/* Embedding lookup and projections (matmul) on the GPU. A projection is one warp per output
 * row, each lane decoding 32-weight chunks of the row (quant.cuh) and dotting them with up to
 * MM_TOK token rows at once, so each weight is read once per MM_TOK tokens; f32 accumulation. */
#include "backend/cuda/gemm_mma.h"
#include "backend/cuda/mv.cuh"

#define MM_WARPS 4
#define MM_TOK 8
static const int64_t MAX_GRID_Y = 65535;

__global__ void matmul_kernel(uint32_t type, const char *w, uint64_t row_bytes, int64_t n_in,
                              int64_t n_out, int64_t out_per_group, const float *x,
                              int64_t x_stride, int64_t n_tok, float *out, cu_grids g) {
    cu_pdl_entry();
    const int64_t o = (int64_t)blockIdx.x * MM_WARPS + threadIdx.x / WARP;
    if (o >= n_out) return; /* whole warps leave together */
    const int64_t grp = o / out_per_group;
    for (int64_t t0 = (int64_t)blockIdx.y * MM_TOK; t0 < n_tok; t0 += (int64_t)gridDim.y * MM_TOK) {
        int nt = n_tok - t0 < MM_TOK ? (int)(n_tok - t0) : MM_TOK;
        float acc[MM_TOK];
        warp_dot_rows<MM_TOK>(type, w + (uint64_t)o * row_bytes, n_in,
                              x + t0 * x_stride + grp * n_in, x_stride, nt, acc, g);
        if (threadIdx.x % WARP == 0)
            for (int k = 0; k < nt; k++)
                out[(t0 + k) * n_out + o] = acc[k];
    }
}

/* ---- the fast projections (mv.cuh) ---------------------------------------------------------
 * Blocks of MV_WARPS warps; each warp one row, or with split-K (ks > 1) ks warps one row, each
 * a range of k_per weights, summed in a fixed order through shared memory. grid.x: groups of NT
 * tokens (the fast index, so the blocks that read the same rows run together and find them in
 * L2), grid.y: blocks of rows. */
enum { MV_WARPS = 8 };

typedef struct mv_args {
    const char *w;
    uint64_t row_bytes;
    int64_t n_in, n_out, out_per_group;
    const float *x;
    int64_t x_stride, n_tok;
    float *out;
    int ks;
    int64_t k_per;
    cu_grids g;
} mv_args;

#ifndef HALO_HIP
/* The rows of a projection as a stream (mv_stream): row o for the token group at t0. */
template <int NT> struct mv_dense_rows {
    const mv_args &a;
    int64_t t0;
    int nt;
    __device__ int64_t row(int64_t o, const char **r) const {
        *r = a.w + (uint64_t)o * a.row_bytes;
        return a.n_in;
    }
    __device__ int64_t begin(int64_t o, const float **xs, int &n) const {
        const int64_t grp = a.out_per_group == a.n_out ? 0 : o / a.out_per_group;
        n = nt;
#pragma unroll
        for (int k = 0; k < NT; k++)
            xs[k] = a.x + (t0 + (k < nt ? k : 0)) * a.x_stride + grp * a.n_in;
        return a.n_in;
    }
    __device__ void end(int64_t o, const float *acc, int n) const {
        if (threadIdx.x % WARP == 0)
            for (int k = 0; k < n; k++)
                a.out[(t0 + k) * a.n_out + o] = acc[k];
    }
};
#endif

template <int T, int NT>
__global__ void __launch_bounds__(MV_WARPS *WARP, NT == 1 ? 3 : 2)
    mv_kernel(GPU_GRID_CONST const mv_args a) {
    cu_pdl_entry();
    extern __shared__ __align__(16) uint8_t mv_dyn[]; /* MV_STAGES chunk slots per warp */
    __shared__ float part[MV_WARPS][NT];
    const int warp = threadIdx.x / WARP, lane = threadIdx.x % WARP;
    uint8_t *stage = mv_dyn + warp * MV_STAGES * MV_STAGE;
    const int ks = a.ks, R = MV_WARPS / ks, r_in = warp / ks, piece = warp % ks;
#ifndef HALO_HIP
    if (ks == 1) { /* every warp a stream of whole rows */
        for (int64_t t0 = (int64_t)blockIdx.x * NT; t0 < a.n_tok; t0 += (int64_t)gridDim.x * NT) {
            mv_dense_rows<NT> rows = {a, t0, a.n_tok - t0 < NT ? (int)(a.n_tok - t0) : NT};
            mv_stream<T, NT>(rows, (int64_t)blockIdx.y * MV_WARPS + warp,
                             (int64_t)gridDim.y * MV_WARPS, a.n_out, stage, a.g);
        }
        return;
    }
#endif
    for (int64_t rb = blockIdx.y; rb * R < a.n_out; rb += gridDim.y) {
        const int64_t o = rb * R + r_in;
        const bool live = o < a.n_out;
        const int64_t grp = live ? o / a.out_per_group : 0;
        const int64_t k0 = (int64_t)piece * a.k_per;
        const int64_t k1 = a.n_in < k0 + a.k_per ? a.n_in : k0 + a.k_per;
        for (int64_t t0 = (int64_t)blockIdx.x * NT; t0 < a.n_tok; t0 += (int64_t)gridDim.x * NT) {
            const int nt = a.n_tok - t0 < NT ? (int)(a.n_tok - t0) : NT;
            float acc[NT];
#pragma unroll
            for (int k = 0; k < NT; k++)
                acc[k] = 0.0f;
            if (live && k0 < k1) {
                const float *xs[NT];
#pragma unroll
                for (int k = 0; k < NT; k++)
                    xs[k] = a.x + (t0 + (k < nt ? k : 0)) * a.x_stride + grp * a.n_in;
                mv_row<T, NT>(a.w + (uint64_t)o * a.row_bytes, k0, k1, xs, nt, acc, stage, a.g);
            }
            if (ks == 1) {
                if (live && lane == 0)
                    for (int k = 0; k < nt; k++)
                        a.out[(t0 + k) * a.n_out + o] = acc[k];
            } else {
                if (lane == 0)
#pragma unroll
                    for (int k = 0; k < NT; k++)
                        part[warp][k] = acc[k];
                __syncthreads();
                if (live && piece == 0 && lane == 0)
                    for (int k = 0; k < nt; k++) {
                        float sum = 0.0f;
                        for (int p = 0; p < ks; p++)
                            sum += part[warp + p][k];
                        a.out[(t0 + k) * a.n_out + o] = sum;
                    }
                __syncthreads();
            }
        }
    }
}

template <int T>
static void mv_launch_t(cu_backend *be, const mv_args &a, int64_t n_tok, const char *op) {
    const int nt = n_tok == 1 ? 1 : 8;
    const int64_t groups = (n_tok + nt - 1) / nt;
    int64_t rblocks = (a.n_out + MV_WARPS / a.ks - 1) / (MV_WARPS / a.ks);
#ifndef HALO_HIP
    /* Streams: as many blocks as stay resident (three per multiprocessor for one token, two
     * for eight: __launch_bounds__), each warp many rows. */
    const int64_t resident = (int64_t)(be->sm_count > 0 ? be->sm_count : 132) * (nt == 1 ? 3 : 2);
    if (a.ks == 1 && rblocks > resident) rblocks = resident;
#endif
    dim3 grid((unsigned)(groups < 0x7fffffff ? groups : 0x7fffffff),
              (unsigned)(rblocks < 65535 ? rblocks : 65535));
    const int smem = mv_smem_bytes(T, MV_WARPS);
    static bool done1, done8;
    if (nt == 1) {
        if (!cu_smem_attr(be, mv_kernel<T, 1>, smem, &done1, op)) return;
        cu_launch(be, mv_kernel<T, 1>, grid, MV_WARPS * WARP, smem, a);
    } else {
        if (!cu_smem_attr(be, mv_kernel<T, 8>, smem, &done8, op)) return;
        cu_launch(be, mv_kernel<T, 8>, grid, MV_WARPS * WARP, smem, a);
    }
    CU_LAUNCHED(be, op, "mv_kernel");
}

/* The fast kernel for this projection, or false (the generic kernel then runs). */
static bool mv_launch(cu_backend *be, uint32_t type, const char *w, int64_t n_in, int64_t n_out,
                      uint32_t groups, const float *x, int64_t x_stride, int64_t n_tok, float *out,
                      const char *op) {
    const uint64_t row_bytes = cu_row_bytes(type, n_in);
    if (be->naive || !mv_shape_ok(type, w, row_bytes, n_in) || ((uintptr_t)x & 15) ||
        (x_stride & 3) || (n_in & 3) || n_out % groups)
        return false;
    /* Split-K when rows x token groups would leave the GPU idle (hc mixers: 24 rows). */
    /* K is split in whole chunks (MV_CH weights) for the block formats, in pieces of 512 for the
     * float types (their loop takes any multiple of 8): the 64- to 256-row F16 projections of a
     * decode step (router, indexer) then spread over 4-8 warps a row instead of 2. */
    const bool fl = type == HALO_TYPE_F32 || type == HALO_TYPE_F16 || type == HALO_TYPE_BF16;
    const int64_t unit = fl ? 512 : MV_CH;
    const int64_t tgroups = (n_tok + 7) / 8, chunks = (n_in + unit - 1) / unit;
    int ks = 1;
#ifndef HALO_HIP
    /* Row streams (ks = 1) keep every warp busy from about a thousand rows. */
    const int64_t enough = 1024;
#else
    const int64_t enough = (int64_t)(be->sm_count > 0 ? be->sm_count : 132) * 32;
#endif
    while (ks < MV_WARPS && n_out * tgroups * ks < enough && ks < chunks)
        ks *= 2;
    mv_args a = {w,
                 row_bytes,
                 n_in,
                 n_out,
                 n_out / groups,
                 x,
                 x_stride,
                 n_tok,
                 out,
                 ks,
                 (chunks + ks - 1) / ks * unit,
                 cu_grids_get(&be->base)};
    switch (type) {
#define MV_CASE(t)                                                                                 \
    case t:                                                                                        \
        mv_launch_t<t>(be, a, n_tok, op);                                                          \
        return true;
        MV_CASE(HALO_TYPE_F32)
        MV_CASE(HALO_TYPE_F16)
        MV_CASE(HALO_TYPE_BF16)
        MV_CASE(HALO_TYPE_Q8_0)
        MV_CASE(HALO_TYPE_Q4_0)
        MV_CASE(HALO_TYPE_Q5_0)
        MV_CASE(HALO_TYPE_MXFP4)
        MV_CASE(HALO_TYPE_Q2_K)
        MV_CASE(HALO_TYPE_Q4_K)
        MV_CASE(HALO_TYPE_Q6_K)
        MV_CASE(HALO_TYPE_IQ2_XXS)
#undef MV_CASE
    default:
        return false;
    }
}

void cu_matmul_launch(cu_backend *be, uint32_t type, const char *w, int64_t n_in, int64_t n_out,
                      uint32_t groups, const float *x, int64_t x_stride, int64_t n_tok, float *out,
                      const char *op) {
    if (be->failed || !cu_type_supported(be, type, op) || n_out <= 0 || n_tok <= 0) return;
    if (n_tok == 1 && cu_mvq_matmul(be, type, w, n_in, n_out, groups, x, out, op)) return;
    if (mv_launch(be, type, w, n_in, n_out, groups, x, x_stride, n_tok, out, op)) return;
    int64_t ty = (n_tok + MM_TOK - 1) / MM_TOK;
    dim3 grid(cu_blocks(n_out, MM_WARPS), (unsigned)(ty < MAX_GRID_Y ? ty : MAX_GRID_Y));
    cu_launch(be, matmul_kernel, grid, MM_WARPS * WARP, 0, type, w, cu_row_bytes(type, n_in), n_in,
              n_out, n_out / groups, x, x_stride, n_tok, out, cu_grids_get(&be->base));
    CU_LAUNCHED(be, op, "matmul_kernel");
}

void cu_matmul(halo_backend *hbe, const halo_tensor *w, const halo_tensor *x, uint32_t groups,
               halo_tensor *out) {
    int64_t n_out = w->ne[1] * w->ne[2] * w->ne[3];
    /* Batches of many tokens (prefill) on tensor cores (gemm_mma.cu) where it takes them. */
    cu_backend *be = cu_of(hbe);
    if (!be->failed && n_out > 0 &&
        cu_mma_matmul(be, w->type, cu_ptr(w), w->ne[0], n_out, groups, cu_f32(x), x->ne[0],
                      x->ne[1], cu_f32(out), "matmul"))
        return;
    cu_matmul_launch(be, w->type, cu_ptr(w), w->ne[0], n_out, groups, cu_f32(x), x->ne[0], x->ne[1],
                     cu_f32(out), "matmul");
}

/* One token per block: its table row decoded to f32. */
__global__ void embed_kernel(uint32_t type, const char *table, uint64_t row_bytes, int64_t n,
                             const int32_t *tokens, cu_ints tok_small, float *out, cu_grids g) {
    cu_pdl_entry();
    const char *row = table + (uint64_t)cu_int_at(tokens, tok_small, blockIdx.x) * row_bytes;
    float *y = out + (int64_t)blockIdx.x * n;
    if (is_float_type(type)) {
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
            y[i] = load_float(type, row, i);
        return;
    }
    float v[32];
    for (int64_t c = threadIdx.x; c < n / 32; c += blockDim.x) {
        deq32(type, (const uint8_t *)row, c, v, g);
        for (int j = 0; j < 32; j++)
            y[32 * c + j] = v[j];
    }
}

void cu_embed(halo_backend *hbe, const halo_tensor *table, const int32_t *tokens,
              halo_tensor *out) {
    cu_backend *be = cu_of(hbe);
    int64_t n_tok = out->ne[1], n = table->ne[0];
    if (be->failed || !cu_type_supported(be, table->type, "embed") || n_tok <= 0) return;
    int32_t *stok = (int32_t *)cu_scratch(be, (uint64_t)n_tok * sizeof(int32_t), "embed");
    cu_ints ts;
    const int32_t *dtok = NULL;
    if (!stok || !cu_ints_pass(be, stok, tokens, n_tok, &ts, &dtok, "embed")) return;
    cu_launch(be, embed_kernel, (unsigned)n_tok, 128, 0, table->type, cu_ptr(table),
              cu_row_bytes(table->type, n), n, dtok, ts, cu_f32(out), cu_grids_get(hbe));
    CU_LAUNCHED(be, "embed", "embed_kernel");
}

/* n elements of any supported type (whole blocks, contiguous) to f32: for small weights an op
 * reads element by element, such as a compressor's ape, which quantized mixes store in a block
 * format. */
__global__ void to_f32_kernel(uint32_t type, const char *src, int64_t n, float *dst, cu_grids g) {
    cu_pdl_entry();
    int64_t id = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (is_float_type(type)) {
        if (id < n) dst[id] = load_float(type, src, id);
        return;
    }
    if (id >= n / 32) return;
    float v[32];
    deq32(type, (const uint8_t *)src, id, v, g);
    for (int j = 0; j < 32; j++)
        dst[32 * id + j] = v[j];
}

void cu_to_f32(cu_backend *be, uint32_t type, const char *src, int64_t n, float *dst,
               const char *op) {
    if (be->failed || !cu_type_supported(be, type, op) || n <= 0) return;
    cu_launch(be, to_f32_kernel, cu_blocks(n, 256), 256, 0, type, src, n, dst,
              cu_grids_get(&be->base));
    CU_LAUNCHED(be, op, "to_f32_kernel");
}
