/* Manifold-constrained hyper-connections (DeepSeek V4 §2.2) on the GPU: pre = RMS-normalise the
 * hc streams of each token, project them to the mixing logits (the matmul kernel), then per
 * token the pre/post weights, the Sinkhorn-normalised comb mixer and the collapsed input; post
 * writes the sublayer output back into the streams. The arithmetic of the CPU backend, except
 * that the projection runs on the raw streams and the mixing kernel scales its result by the
 * token's 1/rms (the same value up to f32 rounding, without writing the normalised copy). */
#include "backend/cuda/cuda.cuh"

enum { HC_MAX = 16 };

static __device__ float sigmoidf_(float x) {
    return 1.0f / (1.0f + expf(-x));
}

/* Sinkhorn-Knopp as the CPU backend (and the reference) does it: softmax rows, then column and
 * row normalisations, eps keeping every division finite. */
static __device__ void sinkhorn(float *m, uint32_t hc, uint32_t iters, float eps) {
    for (uint32_t j = 0; j < hc; j++) {
        float *row = m + j * hc, mx = row[0], sum = 0;
        for (uint32_t k = 1; k < hc; k++)
            mx = row[k] > mx ? row[k] : mx;
        for (uint32_t k = 0; k < hc; k++)
            sum += row[k] = expf(row[k] - mx);
        for (uint32_t k = 0; k < hc; k++)
            row[k] = row[k] / sum + eps;
    }
    for (uint32_t it = 0; it < iters; it++) {
        if (it > 0) {
            for (uint32_t j = 0; j < hc; j++) {
                float sum = 0;
                for (uint32_t k = 0; k < hc; k++)
                    sum += m[j * hc + k];
                for (uint32_t k = 0; k < hc; k++)
                    m[j * hc + k] /= sum + eps;
            }
        }
        for (uint32_t k = 0; k < hc; k++) {
            float sum = 0;
            for (uint32_t j = 0; j < hc; j++)
                sum += m[j * hc + k];
            for (uint32_t j = 0; j < hc; j++)
                m[j * hc + k] /= sum + eps;
        }
    }
}

typedef struct hc_mix_args {
    const float *streams, *mix;
    const char *base, *scale;
    uint32_t base_type, scale_type;
    uint32_t hc, n_mix, sinkhorn_iters;
    int64_t n_embd;
    float eps, norm_eps;
    float *collapsed, *post, *comb; /* post/comb NULL for the head */
} hc_mix_args;

__global__ void hc_mix_kernel(hc_mix_args a) {
    __shared__ float pre[HC_MAX];
    __shared__ float red[32];
    const int64_t t = blockIdx.x;
    const uint32_t hc = a.hc;
    const float *raw = a.mix + t * a.n_mix;
    const float *xs = a.streams + t * hc * a.n_embd;
    const int64_t width = (int64_t)hc * a.n_embd;
    float ss = 0.0f;
    for (int64_t i = threadIdx.x; i < width; i += blockDim.x)
        ss += xs[i] * xs[i];
    ss = block_sum(ss, red);
    const float r = 1.0f / sqrtf(ss / (float)width + a.norm_eps);
    if (threadIdx.x == 0) {
        float mix[(2 + HC_MAX) * HC_MAX];
        for (uint32_t i = 0; i < a.n_mix; i++)
            mix[i] = raw[i] * r;
        float s0 = load_float(a.scale_type, a.scale, 0);
        for (uint32_t k = 0; k < hc; k++)
            pre[k] = sigmoidf_(mix[k] * s0 + load_float(a.base_type, a.base, k)) + a.eps;
        if (a.post) {
            float s1 = load_float(a.scale_type, a.scale, 1);
            float s2 = load_float(a.scale_type, a.scale, 2);
            for (uint32_t k = 0; k < hc; k++)
                a.post[t * hc + k] =
                    2.0f * sigmoidf_(mix[hc + k] * s1 + load_float(a.base_type, a.base, hc + k));
            float *comb = a.comb + t * hc * hc;
            for (uint32_t i = 0; i < hc * hc; i++)
                comb[i] = mix[2 * hc + i] * s2 + load_float(a.base_type, a.base, 2 * hc + i);
            sinkhorn(comb, hc, a.sinkhorn_iters, a.eps);
        }
    }
    __syncthreads();
    const float *x = a.streams + t * hc * a.n_embd;
    float *out = a.collapsed + t * a.n_embd;
    for (int64_t d = threadIdx.x; d < a.n_embd; d += blockDim.x) {
        float s = 0;
        for (uint32_t k = 0; k < hc; k++)
            s += pre[k] * x[k * a.n_embd + d];
        out[d] = s;
    }
}

void cu_hc_pre(halo_backend *hbe, const halo_hc_args *a) {
    cu_backend *be = cu_of(hbe);
    const int64_t n_tok = a->collapsed->ne[1], n_embd = a->collapsed->ne[0];
    const int64_t width = (int64_t)a->hc * n_embd;
    const bool head = a->post == NULL;
    const uint32_t n_mix = head ? a->hc : (2 + a->hc) * a->hc;
    if (be->failed || n_tok <= 0 || !cu_float_only(be, a->base->type, "hc_pre", "base") ||
        !cu_float_only(be, a->scale->type, "hc_pre", "scale"))
        return;
    if (a->hc > HC_MAX) {
        cu_check(be, "hc_pre", "hc count above 16", cudaErrorInvalidValue);
        return;
    }
    float *mix = (float *)cu_scratch(be, (uint64_t)(n_tok * n_mix) * sizeof(float), "hc_pre");
    if (!mix) return;
    cu_matmul_launch(be, a->fn->type, cu_ptr(a->fn), width, n_mix, 1, cu_f32(a->streams), width,
                     n_tok, mix, "hc_pre");
    hc_mix_args m = {cu_f32(a->streams),
                     mix,
                     cu_ptr(a->base),
                     cu_ptr(a->scale),
                     a->base->type,
                     a->scale->type,
                     a->hc,
                     n_mix,
                     a->sinkhorn_iters,
                     n_embd,
                     a->eps,
                     a->norm_eps,
                     cu_f32(a->collapsed),
                     head ? NULL : cu_f32(a->post),
                     head ? NULL : cu_f32(a->comb)};
    if (be->failed) return;
    hc_mix_kernel<<<(unsigned)n_tok, 256, 0, be->stream>>>(m);
    CU_LAUNCHED(be, "hc_pre", "hc_mix_kernel");
}

__global__ void hc_post_kernel(float *streams, const float *y, const float *post, const float *comb,
                               int64_t n_embd, uint32_t hc, int64_t n_tok) {
    int64_t id = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (id >= n_tok * n_embd) return;
    int64_t t = id / n_embd, d = id % n_embd;
    float *x = streams + t * hc * n_embd;
    const float *p = post + t * hc, *c = comb + t * hc * hc;
    float mixed[HC_MAX];
    for (uint32_t k = 0; k < hc; k++) {
        float s = p[k] * y[t * n_embd + d];
        for (uint32_t j = 0; j < hc; j++)
            s += c[j * hc + k] * x[j * n_embd + d];
        mixed[k] = s;
    }
    for (uint32_t k = 0; k < hc; k++)
        x[k * n_embd + d] = mixed[k];
}

void cu_hc_post(halo_backend *hbe, halo_tensor *streams, const halo_tensor *y,
                const halo_tensor *post, const halo_tensor *comb) {
    cu_backend *be = cu_of(hbe);
    int64_t n_embd = y->ne[0], n_tok = y->ne[1];
    uint32_t hc = (uint32_t)post->ne[0];
    if (be->failed || n_tok <= 0) return;
    if (hc > HC_MAX) {
        cu_check(be, "hc_post", "hc count above 16", cudaErrorInvalidValue);
        return;
    }
    hc_post_kernel<<<cu_blocks(n_tok * n_embd, 256), 256, 0, be->stream>>>(
        cu_f32(streams), cu_f32(y), cu_f32(post), cu_f32(comb), n_embd, hc, n_tok);
    CU_LAUNCHED(be, "hc_post", "hc_post_kernel");
}
