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
} mvq_args;

/* The rows of output group blockIdx.y, the activation quantized in shared memory. */
template <int T> struct mvq_dense_rows {
    const mvq_args &a;
    int64_t o0; /* the group's first row */
    uint8_t *xq;
    mvq_tabs *tab;
    __device__ int64_t row(int64_t i, const char **r) const {
        *r = a.w + (uint64_t)(o0 + i) * a.row_bytes;
        return a.n_in;
    }
    __device__ void prepare() const {
        if constexpr (T == HALO_TYPE_IQ2_XXS) mvq_tabs_load(tab, a.g);
        mvq_quant_block<mvq_k(T)>(a.x + (o0 / a.out_per_group) * a.n_in, a.n_in, xq);
        __syncthreads();
    }
    __device__ int64_t begin(int64_t) const {
        return a.n_in;
    }
    __device__ q8act act() const {
        return mvq_act_at(xq, a.n_in);
    }
    __device__ void end(int64_t i, float sum) const {
        if (threadIdx.x % WARP == 0) a.out[o0 + i] = sum;
    }
};

template <int T>
__global__ void __launch_bounds__(MVQ_WARPS *WARP, 3)
    mvq_dense_kernel(GPU_GRID_CONST const mvq_args a) {
    cu_pdl_entry();
    extern __shared__ __align__(16) uint8_t mvq_dyn[];
    const int warp = threadIdx.x / WARP;
    uint8_t *stage = mvq_dyn + warp * MV_STAGES * MV_STAGE;
    uint8_t *act = mvq_dyn + MVQ_WARPS * MV_STAGES * MV_STAGE + 16;
    mvq_tabs *tab = (mvq_tabs *)(act + mvq_act_bytes(a.n_in));
    mvq_dense_rows<T> rows = {a, (int64_t)blockIdx.y * a.out_per_group, act, tab};
    mvq_stream<T>(rows, (int64_t)blockIdx.x * MVQ_WARPS + warp, (int64_t)gridDim.x * MVQ_WARPS,
                  a.out_per_group, stage, tab);
}

template <int T>
static void mvq_launch_t(cu_backend *be, const mvq_args &a, uint32_t groups, const char *op) {
    /* As many blocks as stay resident (three a multiprocessor), shared by the groups. */
    const int64_t resident = (int64_t)(be->sm_count > 0 ? be->sm_count : 132) * 3;
    int64_t per = (resident + groups - 1) / groups;
    const int64_t need = (a.out_per_group + MVQ_WARPS - 1) / MVQ_WARPS;
    if (per > need) per = need;
    const int smem = mvq_smem_bytes(T, MVQ_WARPS, a.n_in);
    static int done_bytes; /* the largest size the attribute was set for */
    if (smem > done_bytes) {
        bool done = false;
        if (!cu_smem_attr(be, mvq_dense_kernel<T>, smem, &done, op)) return;
        done_bytes = smem;
    }
    cu_launch(be, mvq_dense_kernel<T>, dim3((unsigned)per, groups), MVQ_WARPS * WARP, smem, a);
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
    mvq_args a = {w, row_bytes, n_in, n_out / groups, x, out, cu_grids_get(&be->base)};
    switch (type) {
    case HALO_TYPE_Q8_0:
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
