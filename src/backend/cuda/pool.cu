/* Compressor pooling on the GPU: each closed window of `ratio` source rows becomes one row,
 * softmax(gate + ape)-weighted per channel over the window's slots (with overlap, the previous
 * window's Ca series first), then RMS-normed and roped at the window's first position. One block
 * per window, one thread per channel; as the CPU backend (backend.h, halo_pool_args). */
#include <math.h>

#include "backend/cuda/cuda.cuh"

typedef struct pool_params {
    const float *kv, *gate, *norm;
    const char *ape;
    uint32_t ape_type;
    const float *prev_kv, *prev_gate; /* NULL without a previous window for window 0 */
    uint32_t ratio, dim, width;
    bool overlap;
    float eps;
    int64_t pos0;
    cu_rope_freq rope;
    float *out;
    bool issue; /* ratio 4: a channel's slots loaded before its softmax (HALO_CUDA_POOLISSUE) */
} pool_params;

/* Slot i's logit and value of one pass for channel chan (pass 0: the previous window's, when
 * the window overlaps), the loads only: the online softmax below uses them in slot order. */
enum { POOL_R = 4 };
struct pool_slots {
    float lg[2][POOL_R], v[2][POOL_R];
    bool on[2];
};

__global__ void pool_kernel(pool_params a) {
    cu_pdl_entry();
    extern __shared__ float row[]; /* [dim] */
    __shared__ float red[32];
    const int64_t w = blockIdx.x;
    const uint32_t r = a.ratio, dim = a.dim, width = a.width;
    const float *kv = a.kv + w * r * width, *gate = a.gate + w * r * width;
    const uint32_t cur = a.overlap ? dim : 0;
    /* Ratio 4 (a.issue): the 16-24 loads of a channel's slots issued before the softmax uses
     * the first, instead of each slot's three loads after the previous slot's exponentials
     * (a chain of L2 round trips: ~12 us for the 512-wide compressor, H200 cuda-decode-1's
     * trace). The same values in the same order. */
    for (uint32_t d = threadIdx.x; a.issue && r == POOL_R && d < dim; d += blockDim.x) {
        pool_slots ps;
        for (int pass = 0; pass < 2; pass++) {
            const float *pk = NULL, *pg = NULL;
            uint32_t stride = width, chan = d;
            bool add_ape = true;
            if (pass == 0) {
                if (a.overlap && w > 0) {
                    pk = kv - (int64_t)r * width;
                    pg = gate - (int64_t)r * width;
                } else if (a.overlap && a.prev_kv) {
                    pk = a.prev_kv;
                    pg = a.prev_gate;
                    stride = dim;
                    add_ape = false; /* saved gates include ape */
                }
            } else {
                pk = kv;
                pg = gate;
                chan = cur + d;
            }
            ps.on[pass] = pk != NULL;
            if (!pk) continue;
            float ap[POOL_R], g[POOL_R];
#pragma unroll
            for (int i = 0; i < POOL_R; i++) {
                ap[i] = add_ape ? load_float(a.ape_type, a.ape, (int64_t)i * width + chan) : 0.0f;
                g[i] = pg[i * stride + chan];
                ps.v[pass][i] = pk[i * stride + chan];
            }
#pragma unroll
            for (int i = 0; i < POOL_R; i++)
                ps.lg[pass][i] = g[i] + ap[i]; /* as the loop below: gate + (ape or 0) */
        }
        float m = -INFINITY, sum = 0.0f, acc = 0.0f;
        for (int pass = 0; pass < 2; pass++) {
            if (!ps.on[pass]) continue;
#pragma unroll
            for (int i = 0; i < POOL_R; i++) {
                const float lg = ps.lg[pass][i];
                float m_new = fmaxf(m, lg);
                float corr = expf(m - m_new), p = expf(lg - m_new);
                sum = sum * corr + p;
                acc = acc * corr + p * ps.v[pass][i];
                m = m_new;
            }
        }
        row[d] = acc / sum;
    }
    for (uint32_t d = threadIdx.x; !(a.issue && r == POOL_R) && d < dim; d += blockDim.x) {
        /* Online softmax over the slots, in the CPU's slot order. */
        float m = -INFINITY, sum = 0.0f, acc = 0.0f;
        for (int pass = 0; pass < 2; pass++) {
            const float *pk = NULL, *pg = NULL;
            uint32_t stride = width;
            bool add_ape = true;
            uint32_t chan = d;
            if (pass == 0) {
                if (!a.overlap) continue;
                if (w > 0) {
                    pk = kv - (int64_t)r * width;
                    pg = gate - (int64_t)r * width;
                } else if (a.prev_kv) {
                    pk = a.prev_kv;
                    pg = a.prev_gate;
                    stride = dim;
                    add_ape = false; /* saved gates include ape */
                } else {
                    continue;
                }
            } else {
                pk = kv;
                pg = gate;
                chan = cur + d;
            }
            for (uint32_t i = 0; i < r; i++) {
                float lg =
                    pg[i * stride + chan] +
                    (add_ape ? load_float(a.ape_type, a.ape, (int64_t)i * width + chan) : 0.0f);
                float m_new = fmaxf(m, lg);
                float corr = expf(m - m_new), p = expf(lg - m_new);
                sum = sum * corr + p;
                acc = acc * corr + p * pk[i * stride + chan];
                m = m_new;
            }
        }
        row[d] = acc / sum;
    }
    __syncthreads();
    float ss = 0.0f;
    for (uint32_t d = threadIdx.x; d < dim; d += blockDim.x)
        ss += row[d] * row[d];
    ss = block_sum(ss, red);
    float rr = 1.0f / sqrtf(ss / (float)dim + a.eps);
    for (uint32_t d = threadIdx.x; d < dim; d += blockDim.x)
        row[d] = a.norm[d] * (row[d] * rr);
    __syncthreads();
    float *out = a.out + w * dim;
    const uint32_t tail = dim - a.rope.n_rot;
    const float pos = (float)(a.pos0 + w * (int64_t)r);
    for (uint32_t d = threadIdx.x; d < dim; d += blockDim.x) {
        if (d < tail) {
            out[d] = row[d];
            continue;
        }
        uint32_t i = (d - tail) / 2;
        float angle = pos * a.rope.inv_freq[i];
        float c = cosf(angle), s = sinf(angle);
        float x0 = row[tail + 2 * i], x1 = row[tail + 2 * i + 1];
        out[d] = (d - tail) % 2 == 0 ? x0 * c - x1 * s : x1 * c + x0 * s;
    }
}

/* Keeps the last window's Ca series (gates with ape added) for the next call. */
__global__ void pool_save_kernel(const float *kv, const float *gate, const char *ape,
                                 uint32_t ape_type, uint32_t ratio, uint32_t dim, uint32_t width,
                                 float *prev_kv, float *prev_gate) {
    cu_pdl_entry();
    int64_t id = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (id >= (int64_t)ratio * dim) return;
    int64_t i = id / dim, d = id % dim;
    prev_kv[i * dim + d] = kv[i * width + d];
    prev_gate[i * dim + d] = gate[i * width + d] + load_float(ape_type, ape, i * width + d);
}

void cu_pool(halo_backend *hbe, const halo_pool_args *a) {
    cu_backend *be = cu_of(hbe);
    const int64_t n_win = a->out->ne[1];
    const uint32_t width = a->overlap ? 2 * a->dim : a->dim;
    pool_params p;
    if (be->failed || n_win <= 0 || !cu_rope_freq_make(be, a->rope, &p.rope, "pool")) return;
    p.kv = cu_f32(a->kv);
    p.gate = cu_f32(a->gate);
    p.norm = cu_f32(a->norm);
    p.ape = cu_ptr(a->ape);
    p.ape_type = a->ape->type;
    if (a->ape->type != HALO_TYPE_F32 && a->ape->type != HALO_TYPE_F16 &&
        a->ape->type != HALO_TYPE_BF16) {
        /* A block format (quantized mixes store ape as Q8_0, Q5_0, ...): decode it first. */
        int64_t n = (int64_t)width * a->ratio;
        float *f = (float *)cu_scratch(be, (uint64_t)n * sizeof(float), "pool");
        if (!f) return;
        cu_to_f32(be, a->ape->type, p.ape, n, f, "pool");
        p.ape = (const char *)f;
        p.ape_type = HALO_TYPE_F32;
    }
    p.prev_kv = a->overlap && a->have_prev ? cu_f32(a->prev_kv) : NULL;
    p.prev_gate = a->overlap && a->have_prev ? cu_f32(a->prev_gate) : NULL;
    p.ratio = a->ratio;
    p.dim = a->dim;
    p.width = width;
    p.overlap = a->overlap;
    p.eps = a->eps;
    p.pos0 = a->pos0;
    p.out = cu_f32(a->out);
    p.issue = be->pool_issue;
    unsigned threads = a->dim < 256 ? (a->dim + 31) / 32 * 32 : 256;
    cu_launch(be, pool_kernel, (unsigned)n_win, threads, a->dim * sizeof(float), p);
    if (!CU_LAUNCHED(be, "pool", "pool_kernel") || !a->overlap) return;
    const int64_t last = (n_win - 1) * a->ratio * width;
    cu_launch(be, pool_save_kernel, cu_blocks((int64_t)a->ratio * a->dim, 256), 256, 0, p.kv + last,
              p.gate + last, p.ape, p.ape_type, a->ratio, a->dim, width, cu_f32(a->prev_kv),
              cu_f32(a->prev_gate));
    CU_LAUNCHED(be, "pool", "pool_save_kernel");
}
