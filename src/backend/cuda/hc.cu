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

/* The same for hc = 4 on the 16 lanes of a warp, one element each (row j = lane / 4, column
 * k = lane % 4): row sums over lanes differing in bits 0-1, column sums over bits 2-3. The
 * iterations are a chain of dependent steps; on one thread with the matrix in memory they cost
 * tens of microseconds a call. Lanes 16-31 mirror 0-15. Sums of four pair up, (a + b) + (c + d),
 * where the CPU adds in order: f32 rounding apart, the same. */
static __device__ float sinkhorn4_warp(float v, uint32_t iters, float eps) {
    float mx = fmaxf(v, gpu_shfl_xor(v, 1));
    mx = fmaxf(mx, gpu_shfl_xor(mx, 2));
    float ex = expf(v - mx);
    float sum = ex + gpu_shfl_xor(ex, 1);
    sum += gpu_shfl_xor(sum, 2);
    v = ex / sum + eps;
    for (uint32_t it = 0; it < iters; it++) {
        if (it > 0) {
            sum = v + gpu_shfl_xor(v, 1);
            sum += gpu_shfl_xor(sum, 2);
            v /= sum + eps;
        }
        sum = v + gpu_shfl_xor(v, 4);
        sum += gpu_shfl_xor(sum, 8);
        v /= sum + eps;
    }
    return v;
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

__global__ void __launch_bounds__(1024) hc_mix_kernel(hc_mix_args a) {
    cu_pdl_entry();
    __shared__ float pre[HC_MAX];
    __shared__ float red[32];
    __shared__ float comb_s[HC_MAX * HC_MAX];
    const int64_t t = blockIdx.x;
    const uint32_t hc = a.hc;
    const float *raw = a.mix + t * a.n_mix;
    const float *xs = a.streams + t * hc * a.n_embd;
    const int64_t width = (int64_t)hc * a.n_embd;
    float ss = 0.0f;
    if (width % 4 == 0 && ((uintptr_t)xs & 15) == 0) { /* a token's 64 KiB in one round */
        const float4 *x4 = (const float4 *)xs;
        for (int64_t i = threadIdx.x; i < width / 4; i += blockDim.x) {
            float4 v = x4[i];
            ss += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
        }
    } else {
        for (int64_t i = threadIdx.x; i < width; i += blockDim.x)
            ss += xs[i] * xs[i];
    }
    ss = block_sum(ss, red);
    const float r = 1.0f / sqrtf(ss / (float)width + a.norm_eps);
    /* One thread per mixing logit (they are independent); the loads of the scales and biases
     * in parallel rather than one after another on one thread. */
    for (uint32_t i = threadIdx.x; i < a.n_mix; i += blockDim.x) {
        const float v = raw[i] * r, b = load_float(a.base_type, a.base, i);
        if (i < hc)
            pre[i] = sigmoidf_(v * load_float(a.scale_type, a.scale, 0) + b) + a.eps;
        else if (i < 2 * hc)
            a.post[t * hc + i - hc] =
                2.0f * sigmoidf_(v * load_float(a.scale_type, a.scale, 1) + b);
        else
            comb_s[i - 2 * hc] = v * load_float(a.scale_type, a.scale, 2) + b;
    }
    __syncthreads();
    if (a.post && hc != 4 && threadIdx.x == 0) sinkhorn(comb_s, hc, a.sinkhorn_iters, a.eps);
    __syncthreads();
    if (a.post && threadIdx.x < WARP) {
        float *comb = a.comb + t * hc * hc;
        if (hc == 4) {
            float v = sinkhorn4_warp(comb_s[threadIdx.x % 16], a.sinkhorn_iters, a.eps);
            if (threadIdx.x < 16) comb[threadIdx.x] = v;
        } else {
            for (uint32_t i = threadIdx.x; i < hc * hc; i += WARP)
                comb[i] = comb_s[i];
        }
    }
    const float *x = a.streams + t * hc * a.n_embd;
    float *out = a.collapsed + t * a.n_embd;
    for (int64_t d = threadIdx.x; d < a.n_embd; d += blockDim.x) {
        float s = 0;
        for (uint32_t k = 0; k < hc; k++)
            s += pre[k] * x[k * a.n_embd + d];
        out[d] = s;
    }
}

/* ---- one token -------------------------------------------------------------------------------
 * A decode step's hc_pre in two kernels that spread over the GPU. hc1: a block per HC1_SLICE
 * values of the token's streams (hc·n_embd of them) computes its slice of every mixing row's dot
 * and of the sum of squares, as partial sums. hc2: HC2_BLOCKS blocks each add the partials in
 * slice order (the same sums in every block), make pre as hc_mix_kernel does, and collapse their
 * part of the embedding; block 0 also writes post and the Sinkhorn-normalised comb. The general
 * path (the matmul kernel: 24 rows split over 24 blocks, then hc_mix_kernel on one block that
 * reads the 64 KiB of streams twice and runs the Sinkhorn chain before the collapse) took ~17 us
 * a call on the H200 (request cd-2, ncu). */
enum { HC1_SLICE = 256, HC1_ROWS = 4 /* mixing rows per warp */, HC2_BLOCKS = 16 };
enum { HC1_WARPS = 8, HC1_MAX_MIX = HC1_WARPS * HC1_ROWS };

/* A block's part of one token's hc_pre mix: its slice (x, 8 values a lane at stream offset i)
 * of every mixing row's dot, and of the sum of squares, written to the block's partials (the
 * tail hc1_kernel and hcpost1_kernel share). */
static __device__ __forceinline__ void hc1_slice_sums(const float (&x)[8], int64_t i,
                                                      const char *fn, uint32_t fn_type,
                                                      int64_t width, uint32_t n_mix, float *part,
                                                      int warp, int lane) {
    float *out = part + (int64_t)blockIdx.x * (n_mix + 1);
    float w[HC1_ROWS][8];
#pragma unroll
    for (int q = 0; q < HC1_ROWS; q++) { /* every row's loads first, then the sums */
        const uint32_t r = (uint32_t)(warp + HC1_WARPS * q);
        if (r >= n_mix) continue;
        if (fn_type == HALO_TYPE_F16) {
            const uint4 v = *(const uint4 *)(fn + ((int64_t)r * width + i) * 2);
            const uint32_t h[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
            for (int j = 0; j < 4; j++) {
                w[q][2 * j] = f16_to_f32((uint16_t)h[j]);
                w[q][2 * j + 1] = f16_to_f32((uint16_t)(h[j] >> 16));
            }
        } else {
#pragma unroll
            for (int j = 0; j < 8; j++)
                w[q][j] = load_float(fn_type, fn, (int64_t)r * width + i + j);
        }
    }
#pragma unroll
    for (int q = 0; q < HC1_ROWS; q++) {
        const uint32_t r = (uint32_t)(warp + HC1_WARPS * q);
        if (r >= n_mix) continue;
        float s = 0.0f;
#pragma unroll
        for (int j = 0; j < 8; j++)
            s += w[q][j] * x[j];
        s = warp_sum(s);
        if (lane == 0) out[r] = s;
    }
    if (warp == HC1_WARPS - 1) {
        float ss = 0.0f;
#pragma unroll
        for (int j = 0; j < 8; j++)
            ss += x[j] * x[j];
        ss = warp_sum(ss);
        if (lane == 0) out[n_mix] = ss;
    }
}

__global__ void __launch_bounds__(HC1_WARPS *WARP)
    hc1_kernel(const float *xs, const char *fn, uint32_t fn_type, int64_t width, uint32_t n_mix,
               float *part) {
    cu_pdl_entry();
    const int64_t i = (int64_t)blockIdx.x * HC1_SLICE + 8 * (threadIdx.x % WARP);
    const int lane = threadIdx.x % WARP, warp = threadIdx.x / WARP;
    const float4 xa = *(const float4 *)(xs + i), xb = *(const float4 *)(xs + i + 4);
    const float x[8] = {xa.x, xa.y, xa.z, xa.w, xb.x, xb.y, xb.z, xb.w};
    hc1_slice_sums(x, i, fn, fn_type, width, n_mix, part, warp, lane);
}

/* hc_post of the sublayer before, then hc1 over the new streams, in one kernel (hc = 4): block b
 * owns embedding columns 64b .. 64b + 63 of all four streams (256 values: lane l takes stream
 * l / 8, columns 8 (l % 8) .. + 7), so no other block reads the old values it overwrites.
 * Every warp computes the same new values (the mixing is 20 FMAs per value: cheaper than
 * passing them through shared memory), waits until all have read the old ones, warp 0 writes
 * them; then each warp dots them with its mixing rows as hc1 does. The new values are
 * hc_post_kernel's (same expressions); the partial sums cover other slices than hc1's, so the
 * mixing logits differ from the unfused path's by f32 rounding. Saves a launch and its ramp a
 * sublayer. */
enum { HCP_COLS = 64 };

/* The new values of block blockIdx.x's columns (lane l: stream l / 8, columns d .. d + 7), for
 * hcpost1_kernel and hcpost2_kernel: every warp computes them, warp 0 writes them to xs (and
 * y, with the moe's slots) once every warp has read the old ones. */
static __device__ __forceinline__ void hcpost_cols(float (&x)[8], float *xs, float *y,
                                                   const float *post, const float *comb,
                                                   int64_t n_embd, const float *ys,
                                                   const float *yw, uint32_t slots, int warp,
                                                   int lane, int64_t d) {
    const int k = lane >> 3;
    float old[4][8], yv[8];
    if (slots) {
        /* y is the moe's weighted sum of its slots (moe_sum_kernel's order), written too. */
#pragma unroll
        for (int i = 0; i < 8; i++)
            yv[i] = 0.0f;
        for (uint32_t q = 0; q < slots; q++) {
            const float wq = yw[q];
            const float4 a = *(const float4 *)(ys + q * n_embd + d);
            const float4 b = *(const float4 *)(ys + q * n_embd + d + 4);
            yv[0] += wq * a.x, yv[1] += wq * a.y, yv[2] += wq * a.z, yv[3] += wq * a.w;
            yv[4] += wq * b.x, yv[5] += wq * b.y, yv[6] += wq * b.z, yv[7] += wq * b.w;
        }
        if (warp == 0 && k == 0) {
            *(float4 *)(y + d) = make_float4(yv[0], yv[1], yv[2], yv[3]);
            *(float4 *)(y + d + 4) = make_float4(yv[4], yv[5], yv[6], yv[7]);
        }
    } else {
        const float4 a = *(const float4 *)(y + d), b = *(const float4 *)(y + d + 4);
        yv[0] = a.x, yv[1] = a.y, yv[2] = a.z, yv[3] = a.w;
        yv[4] = b.x, yv[5] = b.y, yv[6] = b.z, yv[7] = b.w;
    }
#pragma unroll
    for (int j = 0; j < 4; j++) {
        const float4 a = *(const float4 *)(xs + j * n_embd + d);
        const float4 b = *(const float4 *)(xs + j * n_embd + d + 4);
        old[j][0] = a.x, old[j][1] = a.y, old[j][2] = a.z, old[j][3] = a.w;
        old[j][4] = b.x, old[j][5] = b.y, old[j][6] = b.z, old[j][7] = b.w;
    }
    const float pk = post[k];
    float c[4];
#pragma unroll
    for (int j = 0; j < 4; j++)
        c[j] = comb[j * 4 + k];
#pragma unroll
    for (int i = 0; i < 8; i++) {
        float s = pk * yv[i];
#pragma unroll
        for (int j = 0; j < 4; j++)
            s += c[j] * old[j][i];
        x[i] = s;
    }
    const int64_t i0 = k * n_embd + d;
    __syncthreads(); /* every warp has read the old values */
    if (warp == 0) {
        *(float4 *)(xs + i0) = make_float4(x[0], x[1], x[2], x[3]);
        *(float4 *)(xs + i0 + 4) = make_float4(x[4], x[5], x[6], x[7]);
    }
}

/* hc_post of the sublayer before, then hc1 over the new streams, in one kernel (hc = 4): block b
 * owns embedding columns 64b .. 64b + 63 of all four streams (256 values: lane l takes stream
 * l / 8, columns 8 (l % 8) .. + 7), so no other block reads the old values it overwrites.
 * Every warp computes the same new values (the mixing is 20 FMAs per value: cheaper than
 * passing them through shared memory), waits until all have read the old ones, warp 0 writes
 * them; then each warp dots them with its mixing rows as hc1 does. The new values are
 * hc_post_kernel's (same expressions); the partial sums cover other slices than hc1's, so the
 * mixing logits differ from the unfused path's by f32 rounding. Saves a launch and its ramp a
 * sublayer. */
__global__ void __launch_bounds__(HC1_WARPS *WARP)
    hcpost1_kernel(float *xs, float *y, const float *post, const float *comb, const char *fn,
                   uint32_t fn_type, int64_t n_embd, uint32_t n_mix, float *part, const float *ys,
                   const float *yw, uint32_t slots) {
    cu_pdl_entry();
    const int lane = threadIdx.x % WARP, warp = threadIdx.x / WARP, k = lane >> 3;
    const int64_t d = (int64_t)blockIdx.x * HCP_COLS + 8 * (lane & 7);
    float x[8];
    hcpost_cols(x, xs, y, post, comb, n_embd, ys, yw, slots, warp, lane, d);
    hc1_slice_sums(x, k * n_embd + d, fn, fn_type, 4 * n_embd, n_mix, part, warp, lane);
}

/* From the summed mixing values (mix[n_mix]: the sum of squares) in shared memory: pre for
 * every block; the lead block also writes post and the Sinkhorn-normalised comb (warp 0, after
 * the block's last barrier here: the other warps go on). hc2_kernel and hcpost2_kernel. */
static __device__ __forceinline__ void hc2_logits(const hc_mix_args &a, const float *mix,
                                                  float *pre, float *comb_s, bool lead) {
    const uint32_t hc = a.hc, n_mix = a.n_mix;
    const float r = 1.0f / sqrtf(mix[n_mix] / (float)((int64_t)hc * a.n_embd) + a.norm_eps);
    for (uint32_t i = threadIdx.x; i < n_mix; i += blockDim.x) {
        const float v = mix[i] * r, b = load_float(a.base_type, a.base, i);
        if (i < hc)
            pre[i] = sigmoidf_(v * load_float(a.scale_type, a.scale, 0) + b) + a.eps;
        else if (!lead)
            continue;
        else if (i < 2 * hc)
            a.post[i - hc] = 2.0f * sigmoidf_(v * load_float(a.scale_type, a.scale, 1) + b);
        else
            comb_s[i - 2 * hc] = v * load_float(a.scale_type, a.scale, 2) + b;
    }
    __syncthreads();
}
static __device__ __forceinline__ void hc2_comb(const hc_mix_args &a, float *comb_s, bool lead) {
    const uint32_t hc = a.hc;
    if (lead && hc != 4 && threadIdx.x == 0) sinkhorn(comb_s, hc, a.sinkhorn_iters, a.eps);
    __syncthreads();
    if (lead && threadIdx.x < WARP) {
        if (hc == 4) {
            float v = sinkhorn4_warp(comb_s[threadIdx.x % 16], a.sinkhorn_iters, a.eps);
            if (threadIdx.x < 16) a.comb[threadIdx.x] = v;
        } else {
            for (uint32_t i = threadIdx.x; i < hc * hc; i += WARP)
                a.comb[i] = comb_s[i];
        }
    }
}
static __device__ __forceinline__ void hc2_weights(const hc_mix_args &a, const float *mix,
                                                   float *pre, float *comb_s, bool lead) {
    hc2_logits(a, mix, pre, comb_s, lead);
    hc2_comb(a, comb_s, lead);
}

/* n_coll: the blocks that collapse (the first n_coll). The lead block, which also writes post
 * and comb, is block n_coll when the grid has one more (it then collapses nothing: the chain of
 * the Sinkhorn steps, ~2-4 us, runs beside the collapse instead of before block 0's part of it),
 * else block 0. */
/* hc2's loads issued at once (issue): a warp's HC2_V values of HC2_B slices a lane, and the
 * one embedding column each thread collapses (hc = 4), right after the wait, so the kernel
 * waits for L2 once instead of once a value and again for the collapse (cuda-decode-1's trace:
 * hc2 ~7 us a call, two a layer). The same sums in the same order. */
enum { HC2_V = 4, HC2_B = 2 };

__global__ void __launch_bounds__(256)
    hc2_kernel(hc_mix_args a, const float *part, int64_t n_part, unsigned n_coll, bool issue) {
    cu_pdl_entry();
    __shared__ float mix[HC1_MAX_MIX + 1];
    __shared__ float pre[HC_MAX];
    __shared__ float comb_s[HC_MAX * HC_MAX];
    const uint32_t hc = a.hc, n_mix = a.n_mix;
    const int lane = threadIdx.x % WARP, warp = threadIdx.x / WARP, nw = blockDim.x / WARP;
    const int64_t per = (a.n_embd + n_coll - 1) / n_coll, d0 = blockIdx.x * per;
    const int64_t d1 = d0 + per < a.n_embd ? d0 + per : a.n_embd;
    issue = issue && n_part <= HC2_B * WARP && n_mix + 1 <= (uint32_t)(HC2_V * nw) && hc == 4 &&
            per <= (int64_t)blockDim.x;
    float sv[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    if (issue) {
        float pv[HC2_V][HC2_B];
#pragma unroll
        for (int i = 0; i < HC2_V; i++) {
            const uint32_t v = (uint32_t)(warp + nw * i);
#pragma unroll
            for (int b = 0; b < HC2_B; b++) {
                const int64_t bi = lane + WARP * b;
                pv[i][b] = v <= n_mix && bi < n_part ? part[bi * (n_mix + 1) + v] : 0.0f;
            }
        }
        const int64_t d = d0 + threadIdx.x;
        if (blockIdx.x < n_coll && d < d1) {
#pragma unroll
            for (int k = 0; k < 4; k++)
                sv[k] = a.streams[k * a.n_embd + d];
        }
#pragma unroll
        for (int i = 0; i < HC2_V; i++) {
            const uint32_t v = (uint32_t)(warp + nw * i);
            if (v > n_mix) break; /* uniform across the warp */
            float s = 0.0f;
#pragma unroll
            for (int b = 0; b < HC2_B; b++)
                if (lane + WARP * b < n_part) s += pv[i][b];
            s = warp_sum(s);
            if (lane == 0) mix[v] = s;
        }
    } else {
        /* Value v (a mixing logit, or the sum of squares at n_mix) summed over the slices by a
         * warp: lane l takes slices l, l + 32, ... in order, then the warp's fixed butterfly. */
        for (uint32_t v = (uint32_t)warp; v <= n_mix; v += (uint32_t)nw) {
            float s = 0.0f;
            for (int64_t b = lane; b < n_part; b += WARP)
                s += part[b * (n_mix + 1) + v];
            s = warp_sum(s);
            if (lane == 0) mix[v] = s;
        }
    }
    __syncthreads();
    const bool lead = blockIdx.x == (n_coll < gridDim.x ? n_coll : 0) && a.post;
    hc2_weights(a, mix, pre, comb_s, lead);
    if (blockIdx.x >= n_coll) return;
    if (issue) {
        const int64_t d = d0 + threadIdx.x;
        if (d < d1) {
            float s = 0;
#pragma unroll
            for (int k = 0; k < 4; k++)
                s += pre[k] * sv[k];
            a.collapsed[d] = s;
        }
        return;
    }
    for (int64_t d = d0 + threadIdx.x; d < d1; d += blockDim.x) {
        float s = 0;
        for (uint32_t k = 0; k < hc; k++)
            s += pre[k] * a.streams[k * a.n_embd + d];
        a.collapsed[d] = s;
    }
}

#ifndef HALO_HIP
/* Every block of the grid past this point once all have reached it (their writes before it
 * visible): an arrival count the last block resets, and a generation the waiting blocks watch.
 * Only for grids whose blocks are all resident at once (hc_pre_one: at most one a
 * multiprocessor); PDL cannot starve them, since the next kernel launches only once every block
 * of this one has started. The count is 0 between launches, so graphs replay it. */
static __device__ __forceinline__ void hc_grid_barrier(unsigned *ctr) {
    __threadfence(); /* this thread's writes, before the block's arrival */
    __syncthreads();
    if (threadIdx.x == 0) {
        volatile unsigned *gen = ctr + 1;
        const unsigned g = *gen; /* cannot move before this block arrives */
        if (atomicAdd(ctr, 1u) == gridDim.x - 1) {
            atomicExch(ctr, 0u);
            __threadfence();
            atomicAdd(ctr + 1, 1u);
        } else {
            while (*gen == g) __nanosleep(32);
        }
        __threadfence();
    }
    __syncthreads();
}

/* hcpost1_kernel then hc2_kernel in one launch (hc = 4, one block per 64 columns, at most one a
 * multiprocessor): after its partial sums every block waits for all the others (hc_grid_barrier)
 * instead of a second kernel starting, adds the partials in hc2's order (lane l: slices l and
 * l + 32, then the warp's butterfly), makes pre, and collapses its own columns from the new
 * values it still holds; block 0 also writes post and comb. The same expressions in the same
 * order as the two launches, so the same bits (test_backend_cuda_ops checks it against
 * HALO_CUDA_HCPOST2=0). Why: in cuda-decode-1's trace hc2 took ~7 us a call after hcpost1 (a
 * kernel boundary, then a chain of L2 loads, sums and the collapse's loads), twice a layer. */
/* hc2_args: the rest of hcpost2_kernel's arguments (cu_hc2_pending keeps them while the launch
 * waits for the next op). */
typedef struct hc2_args {
    float *y;
    const float *post, *comb;
    const char *fn;
    uint32_t fn_type;
    float *part; /* n_part x (n_mix + 1) partial sums, then n_part for the norm */
    const float *ys, *yw;
    uint32_t slots;
    unsigned *ctr;
    /* The rms_norm of the collapsed row that follows (the ffn site), done here (nw: its
     * weight, NULL for none): every block's sum of its 64 squares, a second barrier, the sum of
     * those in block order, then the norm of its columns (rms_norm4_kernel's expressions; the
     * squares summed in another order than its block reduction). */
    bool norm;
    const float *nw;
    float eps;
} hc2_args;

__global__ void __launch_bounds__(HC1_WARPS *WARP) hcpost2_kernel(hc_mix_args m, hc2_args h) {
    cu_pdl_entry();
    __shared__ float mix[HC1_MAX_MIX + 1];
    __shared__ float pre[HC_MAX];
    __shared__ float comb_s[HC_MAX * HC_MAX];
    const int lane = threadIdx.x % WARP, warp = threadIdx.x / WARP, k = lane >> 3;
    const int64_t n_embd = m.n_embd, n_part = gridDim.x;
    const uint32_t n_mix = m.n_mix;
    const int64_t d = (int64_t)blockIdx.x * HCP_COLS + 8 * (lane & 7);
    float *xs = (float *)m.streams, *part = h.part;
    float x[8];
    hcpost_cols(x, xs, h.y, h.post, h.comb, n_embd, h.ys, h.yw, h.slots, warp, lane, d);
    hc1_slice_sums(x, k * n_embd + d, h.fn, h.fn_type, 4 * n_embd, n_mix, part, warp, lane);
    hc_grid_barrier(h.ctr);
    float pv[HC2_V][HC2_B];
#pragma unroll
    for (int i = 0; i < HC2_V; i++) {
        const uint32_t v = (uint32_t)(warp + HC1_WARPS * i);
#pragma unroll
        for (int b = 0; b < HC2_B; b++) {
            const int64_t bi = lane + WARP * b;
            pv[i][b] = v <= n_mix && bi < n_part ? __ldcg(part + bi * (n_mix + 1) + v) : 0.0f;
        }
    }
#pragma unroll
    for (int i = 0; i < HC2_V; i++) {
        const uint32_t v = (uint32_t)(warp + HC1_WARPS * i);
        if (v > n_mix) break; /* uniform across the warp */
        float s = 0.0f;
#pragma unroll
        for (int b = 0; b < HC2_B; b++)
            if (lane + WARP * b < n_part) s += pv[i][b];
        s = warp_sum(s);
        if (lane == 0) mix[v] = s;
    }
    __syncthreads();
    const bool lead = blockIdx.x == 0 && m.post;
    hc2_logits(m, mix, pre, comb_s, lead);
    /* Warp 1's lanes 0-7 collapse columns d .. d + 7 from the four streams' lanes c, c + 8,
     * c + 16, c + 24 as hc2 does: s = pre[0] x0 + ... + pre[3] x3, in order. */
    float o[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    if (warp == 1) {
        float v[4][8];
#pragma unroll
        for (int j = 0; j < 4; j++)
#pragma unroll
            for (int i = 0; i < 8; i++)
                v[j][i] = __shfl_sync(0xffffffffu, x[i], (lane & 7) + 8 * j);
#pragma unroll
        for (int i = 0; i < 8; i++) {
            float s = 0;
#pragma unroll
            for (int j = 0; j < 4; j++)
                s += pre[j] * v[j][i];
            o[i] = s;
        }
    }
    if (h.norm) {
        float *sq = part + n_part * (n_mix + 1);
        if (warp == 1) {
            float ss = 0.0f;
#pragma unroll
            for (int i = 0; i < 8; i++)
                ss += lane < 8 ? o[i] * o[i] : 0.0f;
            ss += __shfl_xor_sync(0xffffffffu, ss, 1);
            ss += __shfl_xor_sync(0xffffffffu, ss, 2);
            ss += __shfl_xor_sync(0xffffffffu, ss, 4);
            if (lane == 0) sq[blockIdx.x] = ss;
        }
        hc_grid_barrier(h.ctr);
        if (warp == 1) {
            float ss = 0.0f;
            for (int64_t b = lane; b < n_part; b += WARP)
                ss += __ldcg(sq + b);
            ss = warp_sum(ss);
            const float r = 1.0f / sqrtf(ss / (float)n_embd + h.eps);
#pragma unroll
            for (int i = 0; i < 8; i++) {
                o[i] *= r;
                if (h.nw) o[i] *= h.nw[d + i];
            }
        }
    }
    hc2_comb(m, comb_s, lead); /* block 0's warp 0 then runs the Sinkhorn chain */
    if (warp != 1 || lane >= 8) return;
    *(float4 *)(m.collapsed + d) = make_float4(o[0], o[1], o[2], o[3]);
    *(float4 *)(m.collapsed + d + 4) = make_float4(o[4], o[5], o[6], o[7]);
}

/* A one-token hc_pre's hcpost2 launch, waiting for the next op (HALO_CUDA_HCNORM): an rms_norm
 * of its collapsed row runs inside it (cu_hc2_norm); anything else launches it first
 * (cu_hc_flush). */
struct cu_hc2_pending {
    bool on;
    unsigned n_part;
    hc_mix_args m;
    hc2_args h;
};

static void hc2_launch(cu_backend *be, const cu_hc2_pending &q) {
    cu_launch(be, hcpost2_kernel, q.n_part, HC1_WARPS * WARP, 0, q.m, q.h);
    CU_LAUNCHED(be, "hc_pre", "hcpost2_kernel");
}

static void hc2_flush(cu_backend *be) {
    cu_hc2_pending *q = be->h2p;
    if (!q || !q->on) return;
    q->on = false;
    if (!be->failed) hc2_launch(be, *q);
}

bool cu_hc2_norm(cu_backend *be, float *x, int64_t rows, int64_t width, bool w_f32,
                 const float *w, float eps) {
    cu_hc2_pending *q = be->h2p;
    if (!q || !q->on) return false;
    if (x != q->m.collapsed || rows != 1 || width != q->m.n_embd || !w_f32) {
        hc2_flush(be);
        return false;
    }
    q->on = false;
    q->h.norm = true;
    q->h.nw = w;
    q->h.eps = eps;
    if (!be->failed) hc2_launch(be, *q);
    return true;
}

void cu_hc_free(cu_backend *be) {
    free(be->h2p);
    be->h2p = NULL;
}
#else
bool cu_hc2_norm(cu_backend *be, float *x, int64_t rows, int64_t width, bool w_f32,
                 const float *w, float eps) {
    (void)be, (void)x, (void)rows, (void)width, (void)w_f32, (void)w, (void)eps;
    return false;
}
void cu_hc_free(cu_backend *be) {
    (void)be;
}
#endif

/* The one-token path above, when the shapes suit it; false leaves the op to the general path. */
static bool hc_pre_one(cu_backend *be, const halo_hc_args *a, const hc_mix_args &m) {
    const int64_t width = (int64_t)a->hc * m.n_embd;
    const uint32_t t = a->fn->type;
    if (!be->hc1 || (t != HALO_TYPE_F16 && t != HALO_TYPE_F32 && t != HALO_TYPE_BF16) ||
        width % HC1_SLICE || width / HC1_SLICE > 65535 || m.n_mix > HC1_MAX_MIX ||
        ((uintptr_t)m.streams & 15) || ((uintptr_t)cu_ptr(a->fn) & 15))
        return false;
    const cu_hc_pending p = be->hcp;
    const cu_sum_pending sp = be->sp;
    bool fuse = p.on && p.streams == m.streams && p.n_embd == m.n_embd && a->hc == 4 &&
                m.n_embd % HCP_COLS == 0 && m.n_embd / HCP_COLS <= 65535;
    const int64_t n_part = fuse ? m.n_embd / HCP_COLS : width / HC1_SLICE;
    /* + n_part for hcpost2's norm (HALO_CUDA_HCNORM) */
    const uint64_t part_bytes = (uint64_t)(n_part * (m.n_mix + 2)) * sizeof(float);
    /* With the moe's sum, the partials go past the moe's scratch (still to be read), and only
     * where the scratch need not grow (growing it would drop that data). */
    const uint64_t off = fuse && p.sum ? (sp.scratch_end + 255) & ~255ull : 0;
    if (fuse && p.sum && (!sp.on || off + part_bytes > be->scratch_cap)) fuse = false;
    if (fuse) {
        be->hcp.on = false; /* run below */
        be->sp.on = false;
    } else {
        cu_hc_flush(be);
    }
    char *base = cu_scratch(be, (fuse ? off : 0) + part_bytes, "hc_pre");
    if (!base) return true; /* the failure is recorded */
    float *part = (float *)(base + (fuse ? off : 0));
    /* hcpost1 and hc2 in one launch: every block resident at once (one a multiprocessor) and
     * hc2's one-batch sums (n_part <= 64, n_mix < 32) */
    const bool one = fuse && be->hcpost2 && n_part <= be->sm_count &&
                     n_part <= (int64_t)HC2_B * WARP && m.n_mix + 1 <= HC2_V * HC1_WARPS &&
                     ((uintptr_t)m.collapsed & 15) == 0;
    if (one) {
#ifndef HALO_HIP
        const bool s = p.sum;
        cu_hc2_pending q = {true,
                            (unsigned)n_part,
                            m,
                            {(float *)p.y, p.post, p.comb, cu_ptr(a->fn), t, part,
                             s ? sp.y : (const float *)NULL, s ? sp.weight : (const float *)NULL,
                             s ? sp.slots : 0u, be->counters + CU_CTR_HC, false, NULL, 0.0f}};
        /* With a post (not the head's), the ffn site's norm may follow: wait for it. */
        if (be->hcnorm && m.post && !be->h2p)
            be->h2p = (cu_hc2_pending *)calloc(1, sizeof(cu_hc2_pending));
        if (be->hcnorm && m.post && be->h2p)
            *be->h2p = q;
        else
            hc2_launch(be, q);
#endif
        return true;
    }
    if (fuse) {
        const bool s = p.sum;
        cu_launch(be, hcpost1_kernel, (unsigned)n_part, HC1_WARPS * WARP, 0, p.streams,
                  (float *)p.y, p.post, p.comb, cu_ptr(a->fn), t, m.n_embd, m.n_mix, part,
                  s ? sp.y : (const float *)NULL, s ? sp.weight : (const float *)NULL,
                  s ? sp.slots : 0u);
        if (!CU_LAUNCHED(be, "hc_pre", "hcpost1_kernel")) return true;
    } else {
        cu_launch(be, hc1_kernel, (unsigned)n_part, HC1_WARPS * WARP, 0, m.streams, cu_ptr(a->fn),
                  t, width, m.n_mix, part);
        if (!CU_LAUNCHED(be, "hc_pre", "hc1_kernel")) return true;
    }
    const unsigned n2 = HC2_BLOCKS + (m.post && be->hclead ? 1 : 0);
    cu_launch(be, hc2_kernel, n2, 256, 0, m, (const float *)part, n_part, (unsigned)HC2_BLOCKS,
              be->hc2issue);
    CU_LAUNCHED(be, "hc_pre", "hc2_kernel");
    return true;
}

void cu_hc_pre(halo_backend *hbe, const halo_hc_args *a) {
    cu_backend *be = cu_of(hbe);
#ifndef HALO_HIP
    hc2_flush(be); /* a pending hc_pre before this one */
#endif
    const int64_t n_tok = a->collapsed->ne[1], n_embd = a->collapsed->ne[0];
    const int64_t width = (int64_t)a->hc * n_embd;
    const bool head = a->post == NULL;
    const uint32_t n_mix = head ? a->hc : (2 + a->hc) * a->hc;
    if (!(be->hcp.on && be->hcp.sum)) cu_sum_flush(be); /* a moe sum no pending post takes */
    if (be->failed || n_tok <= 0 || !cu_float_only(be, a->base->type, "hc_pre", "base") ||
        !cu_float_only(be, a->scale->type, "hc_pre", "scale") || a->hc > HC_MAX) {
        cu_hc_flush(be);
        if (a->hc > HC_MAX) cu_check(be, "hc_pre", "hc count above 16", cudaErrorInvalidValue);
        return;
    }
    hc_mix_args m = {cu_f32(a->streams),
                     NULL,
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
    if (n_tok == 1 && hc_pre_one(be, a, m)) return;
    cu_hc_flush(be);
    float *mix = (float *)cu_scratch(be, (uint64_t)(n_tok * n_mix) * sizeof(float), "hc_pre");
    if (!mix) return;
    m.mix = mix;
    cu_matmul_launch(be, a->fn->type, cu_ptr(a->fn), width, n_mix, 1, cu_f32(a->streams), width,
                     n_tok, mix, "hc_pre");
    if (be->failed) return;
    cu_launch(be, hc_mix_kernel, (unsigned)n_tok, 1024, 0, m);
    CU_LAUNCHED(be, "hc_pre", "hc_mix_kernel");
}

__global__ void hc_post_kernel(float *streams, const float *y, const float *post, const float *comb,
                               int64_t n_embd, uint32_t hc, int64_t n_tok) {
    cu_pdl_entry();
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
    cu_hc_flush(be);
    float *xs = cu_f32(streams);
    const float *yp = cu_f32(y);
    const bool sum = be->sp.on && be->sp.out == yp && be->sp.n_embd == n_embd;
    if (be->hcfuse && n_tok == 1 && hc == 4 && (((uintptr_t)xs | (uintptr_t)yp) & 15) == 0) {
        if (!sum) cu_sum_flush(be);
        be->hcp = {true, xs, yp, cu_f32(post), cu_f32(comb), n_embd, sum};
        return; /* the next hc_pre runs it (hcpost1_kernel), or cu_hc_flush */
    }
    cu_sum_flush(be);
    cu_launch(be, hc_post_kernel, cu_blocks(n_tok * n_embd, 256), 256, 0, xs, yp, cu_f32(post),
              cu_f32(comb), n_embd, hc, n_tok);
    CU_LAUNCHED(be, "hc_post", "hc_post_kernel");
}

void cu_hc_flush(cu_backend *be) {
#ifndef HALO_HIP
    hc2_flush(be); /* older than a pending post (a post launches it first) */
#endif
    cu_hcp_flush(be);
}

void cu_hcp_flush(cu_backend *be) {
    cu_hc_pending &p = be->hcp;
    if (!p.on) return;
    p.on = false;
    if (p.sum) cu_sum_flush(be); /* y first */
    if (be->failed) return;
    cu_launch(be, hc_post_kernel, cu_blocks(p.n_embd, 256), 256, 0, p.streams, p.y, p.post,
              p.comb, p.n_embd, 4u, (int64_t)1);
    CU_LAUNCHED(be, "hc_post", "hc_post_kernel");
}
