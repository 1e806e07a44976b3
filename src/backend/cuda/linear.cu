/* Embedding lookup and projections (matmul) on the GPU. A projection is one warp per output
 * row, each lane decoding 32-weight chunks of the row (quant.cuh) and dotting them with up to
 * MM_TOK token rows at once, so each weight is read once per MM_TOK tokens; f32 accumulation. */
#include "backend/cuda/quant.cuh"

#define MM_WARPS 4
#define MM_TOK 8
static const int64_t MAX_GRID_Y = 65535;

__global__ void matmul_kernel(uint32_t type, const char *w, uint64_t row_bytes, int64_t n_in,
                              int64_t n_out, int64_t out_per_group, const float *x,
                              int64_t x_stride, int64_t n_tok, float *out, cu_grids g) {
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

void cu_matmul_launch(cu_backend *be, uint32_t type, const char *w, int64_t n_in, int64_t n_out,
                      uint32_t groups, const float *x, int64_t x_stride, int64_t n_tok, float *out,
                      const char *op) {
    if (be->failed || !cu_type_supported(be, type, op) || n_out <= 0 || n_tok <= 0) return;
    int64_t ty = (n_tok + MM_TOK - 1) / MM_TOK;
    dim3 grid(cu_blocks(n_out, MM_WARPS), (unsigned)(ty < MAX_GRID_Y ? ty : MAX_GRID_Y));
    matmul_kernel<<<grid, MM_WARPS * WARP, 0, be->stream>>>(type, w, cu_row_bytes(type, n_in), n_in,
                                                            n_out, n_out / groups, x, x_stride,
                                                            n_tok, out, cu_grids_get(&be->base));
    CU_LAUNCHED(be, op, "matmul_kernel");
}

void cu_matmul(halo_backend *hbe, const halo_tensor *w, const halo_tensor *x, uint32_t groups,
               halo_tensor *out) {
    int64_t n_out = w->ne[1] * w->ne[2] * w->ne[3];
    cu_matmul_launch(cu_of(hbe), w->type, cu_ptr(w), w->ne[0], n_out, groups, cu_f32(x), x->ne[0],
                     x->ne[1], cu_f32(out), "matmul");
}

/* One token per block: its table row decoded to f32. */
__global__ void embed_kernel(uint32_t type, const char *table, uint64_t row_bytes, int64_t n,
                             const int32_t *tokens, float *out, cu_grids g) {
    const char *row = table + (uint64_t)tokens[blockIdx.x] * row_bytes;
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
    int32_t *dtok = (int32_t *)cu_scratch(be, (uint64_t)n_tok * sizeof(int32_t), "embed");
    if (!dtok || !cu_upload(be, dtok, tokens, (uint64_t)n_tok * sizeof(int32_t), "embed")) return;
    embed_kernel<<<(unsigned)n_tok, 128, 0, be->stream>>>(table->type, cu_ptr(table),
                                                          cu_row_bytes(table->type, n), n, dtok,
                                                          cu_f32(out), cu_grids_get(hbe));
    CU_LAUNCHED(be, "embed", "embed_kernel");
}

/* n elements of any supported type (whole blocks, contiguous) to f32: for small weights an op
 * reads element by element, such as a compressor's ape, which quantized mixes store in a block
 * format. */
__global__ void to_f32_kernel(uint32_t type, const char *src, int64_t n, float *dst, cu_grids g) {
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
    to_f32_kernel<<<cu_blocks(n, 256), 256, 0, be->stream>>>(type, src, n, dst,
                                                             cu_grids_get(&be->base));
    CU_LAUNCHED(be, op, "to_f32_kernel");
}
