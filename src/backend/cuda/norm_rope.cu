/* RMS norm and DeepSeek V4's rotary embedding on the GPU. */
#include "backend/cuda/cuda.cuh"

/* One row per block: x = x / sqrt(mean(x²) + eps) · weight. */
__global__ void rms_norm_kernel(float *x, int64_t width, const float *w, float eps) {
    cu_pdl_entry();
    __shared__ float red[32];
    float *row = x + (int64_t)blockIdx.x * width;
    float ss = 0.0f;
    for (int64_t i = threadIdx.x; i < width; i += blockDim.x)
        ss += row[i] * row[i];
    ss = block_sum(ss, red);
    float r = 1.0f / sqrtf(ss / (float)width + eps);
    for (int64_t i = threadIdx.x; i < width; i += blockDim.x)
        row[i] = w ? w[i] * (row[i] * r) : row[i] * r;
}

/* The same with float4 accesses and a block sized to the row (a decode step norms one row of
 * 4096: a quarter of the sequential loads of the kernel above). */
__global__ void rms_norm4_kernel(float *x, int64_t width, const float *w, float eps) {
    cu_pdl_entry();
    __shared__ float red[32];
    float4 *row = (float4 *)(x + (int64_t)blockIdx.x * width);
    const float4 *w4 = (const float4 *)w;
    const int64_t n4 = width / 4;
    float ss = 0.0f;
    for (int64_t i = threadIdx.x; i < n4; i += blockDim.x) {
        float4 v = row[i];
        ss += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
    }
    ss = block_sum(ss, red);
    float r = 1.0f / sqrtf(ss / (float)width + eps);
    for (int64_t i = threadIdx.x; i < n4; i += blockDim.x) {
        float4 v = row[i];
        v.x *= r, v.y *= r, v.z *= r, v.w *= r;
        if (w) {
            float4 g = w4[i];
            v.x *= g.x, v.y *= g.y, v.z *= g.z, v.w *= g.w;
        }
        row[i] = v;
    }
}

void cu_rms_norm(halo_backend *hbe, halo_tensor *x, uint32_t width, const halo_tensor *weight,
                 float eps) {
    cu_backend *be = cu_of(hbe);
    int64_t rows = halo_tensor_nelements(x) / width;
    if (be->failed || rows <= 0) return;
    const float *w = weight ? cu_f32(weight) : NULL;
    if (!be->naive && width % 4 == 0 && ((uintptr_t)cu_f32(x) & 15) == 0 &&
        ((uintptr_t)w & 15) == 0) {
        unsigned threads = (unsigned)((width / 4 + WARP - 1) / WARP * WARP);
        threads = threads > 1024 ? 1024 : threads;
        cu_launch(be, rms_norm4_kernel, (unsigned)rows, threads, 0, cu_f32(x), width, w, eps);
        CU_LAUNCHED(be, "rms_norm", "rms_norm4_kernel");
        return;
    }
    /* Rows go in grid.x (up to 2^31 - 1). */
    cu_launch(be, rms_norm_kernel, (unsigned)rows, 256, 0, cu_f32(x), width,
              weight ? cu_f32(weight) : NULL, eps);
    CU_LAUNCHED(be, "rms_norm", "rms_norm_kernel");
}

/* The rms_norm op (the forward's): a norm of at most NR_ROWS rows waits (be->np) for the op
 * after it, so that a rope of the same rows runs with it in one kernel (the forward norms then
 * ropes q and the kv row of every layer: two launches of ~3 us each saved a layer). */
enum { NR_ROWS = 4096 };
void cu_rms_norm_op(halo_backend *hbe, halo_tensor *x, uint32_t width, const halo_tensor *weight,
                    float eps) {
    cu_backend *be = cu_of(hbe);
    cu_np_flush(be); /* a pending norm + rope may pair with this norm's rope (cu_rope) */
    const int64_t rows = halo_tensor_nelements(x) / width;
    float *xp = cu_f32(x);
    const float *w = weight ? cu_f32(weight) : NULL;
    /* The ffn site's norm of the row a pending hc_pre collapses: in its kernel. */
    if (cu_hc2_norm(be, xp, rows, width, !weight || weight->type == HALO_TYPE_F32, w, eps)) return;
    if (be->failed || rows <= 0) return;
    if (be->normrope && width % 4 == 0 && width <= 4096 && rows <= NR_ROWS &&
        (((uintptr_t)xp | (uintptr_t)w) & 15) == 0 &&
        (!weight || weight->type == HALO_TYPE_F32)) {
        be->np = {true, xp, w, rows, (int64_t)width, eps};
        return;
    }
    cu_nrp_flush(be); /* launched in order: it may have written these rows */
    cu_rms_norm(hbe, x, width, weight, eps);
}

/* rms_norm4_kernel's norm of row `rowi`, then rope_kernel's rotation of its tail (rows are
 * (token, head) in order): the same arithmetic as the two kernels. */
static __device__ __forceinline__ void norm_rope_row(float *x, int64_t width, const float *w,
                                                     float eps, int64_t n_head, const int32_t *pos,
                                                     const cu_ints &pos_small,
                                                     const cu_rope_freq &f, bool inverse,
                                                     int64_t rowi, float *red) {
    float *rowf = x + rowi * width;
    float4 *row = (float4 *)rowf;
    const float4 *w4 = (const float4 *)w;
    const int64_t n4 = width / 4;
    float ss = 0.0f;
    for (int64_t i = threadIdx.x; i < n4; i += blockDim.x) {
        float4 v = row[i];
        ss += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
    }
    ss = block_sum(ss, red);
    float r = 1.0f / sqrtf(ss / (float)width + eps);
    for (int64_t i = threadIdx.x; i < n4; i += blockDim.x) {
        float4 v = row[i];
        v.x *= r, v.y *= r, v.z *= r, v.w *= r;
        if (w) {
            float4 g = w4[i];
            v.x *= g.x, v.y *= g.y, v.z *= g.z, v.w *= g.w;
        }
        row[i] = v;
    }
    __syncthreads(); /* the normed row is written */
    const int64_t half = f.n_rot / 2, t = rowi / n_head;
    for (int64_t i = threadIdx.x; i < half; i += blockDim.x) {
        float *p = rowf + width - f.n_rot + 2 * i;
        float angle = (float)cu_int_at(pos, pos_small, t) * f.inv_freq[i];
        float c = cosf(angle), s = sinf(angle);
        if (inverse) s = -s;
        float a = p[0], b = p[1];
        p[0] = a * c - b * s;
        p[1] = b * c + a * s;
    }
}

__global__ void norm_rope_kernel(float *x, int64_t width, const float *w, float eps, int64_t n_head,
                                 const int32_t *pos, cu_ints pos_small, cu_rope_freq f,
                                 bool inverse) {
    cu_pdl_entry();
    __shared__ float red[32];
    norm_rope_row(x, width, w, eps, n_head, pos, pos_small, f, inverse, blockIdx.x, red);
}

/* Two pending norm + rope pairs (cu_norm_rope_pending) in one launch: blocks [0, a.rows) run
 * the first, the rest the second, each row as norm_rope_kernel runs it (same block size, so the
 * same sums). The forward norms and ropes q (64 head rows) then the kv row (one block, a chain
 * of ~4 us in cuda-decode-1's trace: norm_rope 2.7 + 4.1 us a layer); here the kv row's block
 * runs beside q's. Positions by value only (nothing in scratch that a later op reuses). */
__global__ void norm_rope2_kernel(cu_norm_rope_pending a, cu_norm_rope_pending b) {
    cu_pdl_entry();
    __shared__ float red[32];
    const bool first = blockIdx.x < a.rows;
    const cu_norm_rope_pending &p = first ? a : b;
    norm_rope_row(p.x, p.width, p.w, p.eps, p.n_head, NULL, p.pos, p.f, p.inverse,
                  first ? blockIdx.x : blockIdx.x - a.rows, red);
}

static unsigned norm_threads(int64_t width) {
    return (unsigned)((width / 4 + WARP - 1) / WARP * WARP);
}

/* The pending norm + rope alone (norm_rope_kernel), as cu_rope would have launched it. */
void cu_nrp_flush(cu_backend *be) {
    cu_norm_rope_pending &p = be->nrp;
    if (!p.on) return;
    p.on = false;
    if (be->failed) return;
    cu_launch(be, norm_rope_kernel, p.rows, norm_threads(p.width), 0, p.x, p.width, p.w, p.eps,
              p.n_head, (const int32_t *)NULL, p.pos, p.f, p.inverse);
    CU_LAUNCHED(be, "rope", "norm_rope_kernel");
}

void cu_np_flush(cu_backend *be) {
    cu_norm_pending &p = be->np;
    if (!p.on) return;
    p.on = false;
    if (be->failed) return;
    unsigned threads = norm_threads(p.width);
    cu_launch(be, rms_norm4_kernel, (unsigned)p.rows, threads, 0, p.x, p.width, p.w, p.eps);
    CU_LAUNCHED(be, "rms_norm", "rms_norm4_kernel");
}

void cu_norm_flush(cu_backend *be) {
    cu_nrp_flush(be); /* recorded before the pending norm */
    cu_np_flush(be);
}

/* Thread id's pair (token, head, i): rotate (x[2i], x[2i+1]) of the head's tail. */
static __device__ __forceinline__ void rope_pair(float *x, int64_t head_dim, int64_t n_head,
                                                 int64_t n_tok, const int32_t *pos,
                                                 const cu_ints &pos_small, const cu_rope_freq &f,
                                                 bool inverse, int64_t id) {
    int64_t half = f.n_rot / 2;
    if (id >= n_tok * n_head * half) return;
    int64_t i = id % half, h = (id / half) % n_head, t = id / (half * n_head);
    float *p = x + (t * n_head + h) * head_dim + head_dim - f.n_rot + 2 * i;
    float angle = (float)cu_int_at(pos, pos_small, t) * f.inv_freq[i];
    float c = cosf(angle), s = sinf(angle);
    if (inverse) s = -s;
    float a = p[0], b = p[1];
    p[0] = a * c - b * s;
    p[1] = b * c + a * s;
}

/* One thread per (token, head, pair). */
__global__ void rope_kernel(float *x, int64_t head_dim, int64_t n_head, int64_t n_tok,
                            const int32_t *pos, cu_ints pos_small, cu_rope_freq f, bool inverse) {
    cu_pdl_entry();
    rope_pair(x, head_dim, n_head, n_tok, pos, pos_small, f, inverse,
              (int64_t)blockIdx.x * blockDim.x + threadIdx.x);
}

/* The queued row copies (blocks [0, cx · b.n): copy_batch_kernel's grid, flattened) and a rope
 * of other bytes (the rest: rope_kernel's grid) in one launch. After a decode step's attention
 * the forward writes the new kv row into the ring (a one-block copy) and ropes the output back
 * (8 blocks): ~2.8 and ~1.7 us one after the other in cuda-decode-1's trace, two chains. */
__global__ void rope_copy_kernel(cu_copy_batch b, unsigned cx, float *x, int64_t head_dim,
                                 int64_t n_head, int64_t n_tok, const int32_t *pos,
                                 cu_ints pos_small, cu_rope_freq f, bool inverse) {
    cu_pdl_entry();
    const unsigned nc = cx * (unsigned)b.n;
    if (blockIdx.x < nc) {
        cu_copy_part(b.d[blockIdx.x / cx],
                     (uint64_t)(blockIdx.x % cx) * blockDim.x + threadIdx.x,
                     (uint64_t)cx * blockDim.x);
        return;
    }
    rope_pair(x, head_dim, n_head, n_tok, pos, pos_small, f, inverse,
              (int64_t)(blockIdx.x - nc) * blockDim.x + threadIdx.x);
}

void cu_rope(halo_backend *hbe, halo_tensor *x, const int32_t *pos, const halo_rope *rope,
             bool inverse) {
    cu_backend *be = cu_of(hbe);
    int64_t n_tok = x->ne[2], n_head = x->ne[1];
    /* The queued copies (op_rope left them): run by this rope's kernel when they touch none of
     * x's bytes and the positions go by value (no scratch request with copies queued), else
     * launched first. A queued copy and a pending norm cannot both be there (a copy launches
     * the norms first, a norm the copies). */
    const bool with_copies = be->ropecopy && be->copies.n > 0 && !be->np.on && !be->nrp.on &&
                             n_tok <= CU_INTS &&
                             !cu_copies_touch(be, cu_ptr(x), halo_tensor_nbytes(x));
    if (!with_copies) cu_flush_copies(be);
    const cu_norm_pending np = be->np;
    const bool fuse = np.on && np.x == cu_f32(x) && np.width == x->ne[0] &&
                      np.rows == n_head * n_tok && x->ne[3] == 1 && rope->n_rot <= np.width;
    if (fuse)
        be->np.on = false; /* run below */
    else
        cu_norm_flush(be);
    cu_rope_freq f;
    if (be->failed || n_tok <= 0 || !cu_rope_freq_make(be, rope, &f, "rope")) return;
    int32_t *spos = with_copies ? NULL /* by value */
                                : (int32_t *)cu_scratch(be, (uint64_t)n_tok * sizeof(int32_t),
                                                        "rope");
    cu_ints ps;
    const int32_t *dpos = NULL;
    if ((!spos && !with_copies) || !cu_ints_pass(be, spos, pos, n_tok, &ps, &dpos, "rope"))
        return;
    if (fuse) {
        const cu_norm_rope_pending me = {true,   np.x, np.w, np.width, np.eps,
                                         n_head, ps,   f,    inverse,  (unsigned)np.rows};
        cu_norm_rope_pending &q = be->nrp;
        const char *qe = (const char *)(q.x + q.rows * q.width);
        const char *me_e = (const char *)(np.x + np.rows * np.width);
        const bool apart = qe <= (const char *)np.x || me_e <= (const char *)q.x;
        if (q.on && dpos == NULL && apart && norm_threads(q.width) == norm_threads(np.width)) {
            q.on = false;
            cu_launch(be, norm_rope2_kernel, q.rows + me.rows, norm_threads(np.width), 0, q, me);
            CU_LAUNCHED(be, "rope", "norm_rope2_kernel");
            return;
        }
        cu_nrp_flush(be);
        if (be->nrpair && dpos == NULL) {
            q = me; /* the next op's norm + rope may pair with it */
            return;
        }
        cu_launch(be, norm_rope_kernel, (unsigned)np.rows, norm_threads(np.width), 0, np.x,
                  np.width, np.w, np.eps, n_head, dpos, ps, f, inverse);
        CU_LAUNCHED(be, "rope", "norm_rope_kernel");
        return;
    }
    int64_t n = n_tok * n_head * (rope->n_rot / 2);
    if (with_copies) {
        cu_copy_batch &b = be->copies;
        const unsigned cx = cu_copy_blocks(&b);
        cu_launch(be, rope_copy_kernel, cx * (unsigned)b.n + (n ? cu_blocks(n, 256) : 0), 256, 0,
                  b, cx, cu_f32(x), x->ne[0], n_head, n_tok, dpos, ps, f, inverse);
        b.n = 0;
        b.max_n = 0;
        CU_LAUNCHED(be, "rope", "rope_copy_kernel");
        return;
    }
    if (n == 0) return;
    cu_launch(be, rope_kernel, cu_blocks(n, 256), 256, 0, cu_f32(x), x->ne[0], n_head, n_tok, dpos,
              ps, f, inverse);
    CU_LAUNCHED(be, "rope", "rope_kernel");
}
