/* The moe op's routing on the GPU (included by moe.cu only): per token the scores
 * (sqrt-softplus, sigmoid or softmax), the choice of experts (biased top-k with the lowest index
 * winning ties, or the hash table) and their weights (route_kernel), the (token, slot) pairs
 * grouped by expert into work items (group_kernel), and both for one token in one kernel
 * (route1_kernel, decode). Needs MOE_ITEM (pairs per work item) defined before it. */
#ifndef HALO_BACKEND_CUDA_MOE_ROUTE_CUH
#define HALO_BACKEND_CUDA_MOE_ROUTE_CUH

#include "backend/cuda/cuda.cuh"

typedef struct route_params {
    const float *score_in; /* [n_tok][n_expert] router logits */
    const char *bias;      /* [n_expert] or NULL */
    uint32_t bias_type;
    const int32_t *tid2eid; /* [n_vocab][k] or NULL */
    const int32_t *tokens;
    int64_t n_expert;
    uint32_t k, slots, gating;
    bool norm_weights;
    float weights_scale;
    int32_t *sel;         /* [n_tok][k] */
    float *weight;        /* [n_tok][slots] */
    cu_ints tokens_small; /* tokens by value when NULL */
    /* route1_body: the k choices by rank (every expert counts the experts that beat it, in
     * parallel) instead of k arg-max rounds on one warp (HALO_CUDA_ROUTERANK=0) */
    bool rank;
} route_params;

static __device__ float score_fn(uint32_t gating, float x) {
    if (gating == HALO_GATING_SIGMOID) return 1.0f / (1.0f + expf(-x));
    if (gating == HALO_GATING_SQRTSOFTPLUS) return sqrtf(x > 20.0f ? x : log1pf(expf(x)));
    return x;
}

/* Whether candidate (ov, oi) beats (bv, bi) in the CPU's sequential scan (the first of the
 * largest values wins, so equal values go to the lower index); -1 is no candidate. */
static __device__ __forceinline__ bool route_better(float ov, int oi, float bv, int bi) {
    if (oi < 0) return false;
    if (bi < 0) return true;
    return ov > bv || (ov == bv && oi < bi);
}

/* One token per block: scores in parallel; each of the k choices an arg-max over the block
 * with the CPU's tie rule (the lowest index), so the same experts are chosen as there. */
__global__ void route_kernel(route_params a) {
    cu_pdl_entry();
    extern __shared__ float sm[]; /* score[n_expert], selection value[n_expert], taken flags */
    __shared__ float red_v[32];
    __shared__ int red_i[32];
    float *score = sm, *selv = sm + a.n_expert;
    unsigned char *taken = (unsigned char *)(selv + a.n_expert);
    const int64_t t = blockIdx.x;
    const int lane = threadIdx.x % WARP, wid = threadIdx.x / WARP, nw = blockDim.x / WARP;
    const float *in = a.score_in + t * a.n_expert;
    for (int64_t e = threadIdx.x; e < a.n_expert; e += blockDim.x) {
        score[e] = a.gating == HALO_GATING_SOFTMAX ? in[e] : score_fn(a.gating, in[e]);
        taken[e] = 0;
    }
    __syncthreads();
    if (a.gating == HALO_GATING_SOFTMAX && threadIdx.x == 0) {
        float mx = score[0], sum = 0;
        for (int64_t e = 1; e < a.n_expert; e++)
            mx = score[e] > mx ? score[e] : mx;
        for (int64_t e = 0; e < a.n_expert; e++)
            sum += score[e] = expf(score[e] - mx);
        for (int64_t e = 0; e < a.n_expert; e++)
            score[e] /= sum;
    }
    __syncthreads();
    for (int64_t e = threadIdx.x; e < a.n_expert; e += blockDim.x)
        selv[e] = score[e] + (a.bias ? load_float(a.bias_type, a.bias, e) : 0.0f);
    __syncthreads();
    int32_t *sel = a.sel + t * a.k;
    if (a.tid2eid) {
        if (threadIdx.x == 0)
            for (uint32_t i = 0; i < a.k; i++)
                sel[i] = a.tid2eid[(int64_t)cu_int_at(a.tokens, a.tokens_small, t) * a.k + i];
    } else {
        for (uint32_t i = 0; i < a.k; i++) {
            int best = -1;
            float bv = 0.0f;
            for (int64_t e = threadIdx.x; e < a.n_expert; e += blockDim.x)
                if (!taken[e] && (best < 0 || selv[e] > bv)) {
                    best = (int)e;
                    bv = selv[e];
                }
            for (int m = WARP / 2; m > 0; m >>= 1) {
                float ov = gpu_shfl_xor(bv, m);
                int oi = gpu_shfl_xor_i(best, m);
                if (route_better(ov, oi, bv, best)) bv = ov, best = oi;
            }
            if (lane == 0) red_v[wid] = bv, red_i[wid] = best;
            __syncthreads();
            if (threadIdx.x == 0) {
                for (int w = 1; w < nw; w++)
                    if (route_better(red_v[w], red_i[w], bv, best)) bv = red_v[w], best = red_i[w];
                if (best >= 0) taken[best] = 1;
                sel[i] = best;
            }
            __syncthreads();
        }
    }
    if (threadIdx.x != 0) return;
    float *w = a.weight + t * a.slots, sum = 0;
    for (uint32_t i = 0; i < a.k; i++) {
        int32_t e = sel[i];
        /* A hash table row naming an expert out of range: weight 0, the expert clamped. */
        if (e < 0 || e >= a.n_expert)
            sel[i] = e = 0, w[i] = 0.0f;
        else
            w[i] = score[e];
        sum += w[i];
    }
    for (uint32_t i = 0; i < a.k; i++) {
        if (a.norm_weights) w[i] /= sum + 1e-20f;
        w[i] *= a.weights_scale;
    }
    if (a.slots > a.k) w[a.k] = 1.0f;
}

/* Groups the (token, slot) pairs by expert (the shared expert is group n_expert): pairs of
 * group e are pairs[first[e] .. first[e+1]). The order inside a group does not matter: every
 * pair's result is computed on its own. One block. */
__global__ void group_kernel(const int32_t *sel, int64_t n_pairs, uint32_t k, uint32_t slots,
                             int64_t n_expert, int32_t *first, int32_t *fill, int32_t *pairs,
                             int32_t *act) {
    cu_pdl_entry();
    extern __shared__ int32_t gsm[]; /* first[groups + 1], fill[groups] */
    const int64_t groups = n_expert + 1;
    int32_t *first_s = gsm, *fill_s = gsm + groups + 1;
    for (int64_t e = threadIdx.x; e <= groups; e += blockDim.x)
        first_s[e] = 0;
    for (int64_t e = threadIdx.x; e < groups; e += blockDim.x)
        fill_s[e] = 0;
    __syncthreads();
    for (int64_t p = threadIdx.x; p < n_pairs; p += blockDim.x) {
        uint32_t s = (uint32_t)(p % slots);
        int64_t e = s < k ? sel[(p / slots) * k + s] : n_expert;
        atomicAdd(&first_s[e + 1], 1);
    }
    __syncthreads();
    /* act: the count of work items, then (group, first pair, end pair) of each: every group
     * with pairs, split into runs of at most MOE_ITEM pairs (the projections' grid.y). */
    if (threadIdx.x == 0) {
        int32_t n_act = 0;
        for (int64_t e = 0; e < groups; e++) {
            first_s[e + 1] += first_s[e];
            for (int32_t i0 = first_s[e]; i0 < first_s[e + 1]; i0 += MOE_ITEM) {
                int32_t *it = act + 1 + 3 * n_act++;
                it[0] = (int32_t)e;
                it[1] = i0;
                it[2] = first_s[e + 1] - i0 < MOE_ITEM ? first_s[e + 1] : i0 + MOE_ITEM;
            }
        }
        act[0] = n_act;
    }
    __syncthreads();
    for (int64_t e = threadIdx.x; e <= groups; e += blockDim.x)
        first[e] = first_s[e];
    for (int64_t p = threadIdx.x; p < n_pairs; p += blockDim.x) {
        uint32_t s = (uint32_t)(p % slots);
        int64_t e = s < k ? sel[(p / slots) * k + s] : n_expert;
        pairs[first_s[e] + atomicAdd(&fill_s[e], 1)] = (int32_t)p;
    }
    (void)fill;
}

/* One token (decode): route_kernel's choice and weights, then group_kernel's grouping, in one
 * warp and one launch. The per-expert scores and the k arg-max rounds are route_kernel's (the
 * same expressions, each lane scanning experts lane, lane + 32, ... in order, the lanes combined
 * by route_better), so the same experts are chosen; the weights are summed by one lane in slot
 * order as there. The grouping needs no scan for k <= 32 pairs: a pair's place among the pairs
 * sorted by expert is the count of pairs with a lower expert (or the same expert and a lower
 * slot), and the work items are the distinct experts in ascending order, the shared expert's
 * last, as group_kernel lays them out. */
/* The router's logits of another block are read past L1 (routen_kernel's last block reads
 * what the other blocks wrote). */
static __device__ __forceinline__ float route_in(const float *p) {
#ifdef HALO_HIP
    return *p;
#else
    return __ldcg(p);
#endif
}

static __device__ void route1_body(const route_params &a, int32_t *first, int32_t *pairs,
                                   int32_t *act) {
    extern __shared__ float sm[]; /* score[n_expert], selection value[n_expert], taken flags */
    __shared__ int32_t sel_s[WARP];
    float *score = sm, *selv = sm + a.n_expert;
    unsigned char *taken = (unsigned char *)(selv + a.n_expert);
    const int lane = threadIdx.x % WARP;
    const int64_t n = a.n_expert;
    /* The scores on the whole block (sqrt-softplus is a chain of expf and log1pf: on one warp
     * eight in a row took most of the kernel's ~10 us, H200 request cd-2), the rest on warp 0. */
    const bool softmax = a.gating == HALO_GATING_SOFTMAX;
    const bool by_rank = a.rank && !softmax && !a.tid2eid; /* below */
    for (int64_t e = threadIdx.x; e < n; e += blockDim.x) {
        const float in = route_in(a.score_in + e);
        const float sc = softmax ? in : score_fn(a.gating, in);
        score[e] = sc;
        taken[e] = 0;
        if (!softmax) {
            const float v = sc + (a.bias ? load_float(a.bias_type, a.bias, e) : 0.0f);
            selv[e] = by_rank && v != v ? -INFINITY : v; /* the ranks need a total order */
        }
    }
    if (threadIdx.x < WARP) sel_s[threadIdx.x] = -1; /* no expert (fewer experts than k) */
    __syncthreads();
    /* The choices by rank: expert e is choice r when r experts beat it in route_better's order
     * (a larger value, or the same value and a lower index: a strict order, so the ranks are
     * distinct), which is the expert the r-th arg-max round takes. The whole block, one expert
     * a thread, against every expert's value in shared memory (broadcast reads): ~n^2 compares
     * in parallel instead of k rounds of a warp's scan and butterfly (H200 cd-2 trace, 43
     * layers: route1 12.3-13.3 us a scored layer against 6.5-7 us a hash-routed one). A NaN
     * value ranks as -inf here (the rounds' order with NaNs depends on the scan). The experts
     * below e beat it when not smaller, those above when larger. */
    if (by_rank) {
        for (int64_t e = threadIdx.x; e < n; e += blockDim.x) {
            const float me = selv[e];
            int c = 0;
            if (n % 4 == 0 && ((uintptr_t)selv & 15) == 0) { /* four values a load */
                const float4 *s4 = (const float4 *)selv;
                const int64_t e4 = e / 4;
                for (int64_t q = 0; q < e4; q++) {
                    const float4 v = s4[q];
                    c += (v.x >= me) + (v.y >= me) + (v.z >= me) + (v.w >= me);
                }
                const float4 v = s4[e4];
                const float vq[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    const int64_t j = 4 * e4 + i;
                    c += j < e ? vq[i] >= me : j > e ? vq[i] > me : 0;
                }
                for (int64_t q = e4 + 1; q < n / 4; q++) {
                    const float4 w = s4[q];
                    c += (w.x > me) + (w.y > me) + (w.z > me) + (w.w > me);
                }
            } else {
                for (int64_t j = 0; j < e; j++)
                    c += selv[j] >= me;
                for (int64_t j = e + 1; j < n; j++)
                    c += selv[j] > me;
            }
            if (c < (int)a.k) sel_s[c] = (int32_t)e;
        }
        __syncthreads();
    }
    if (threadIdx.x >= WARP) return;
    if (softmax) {
        if (lane == 0) {
            float mx = score[0], sum = 0;
            for (int64_t e = 1; e < n; e++)
                mx = score[e] > mx ? score[e] : mx;
            for (int64_t e = 0; e < n; e++)
                sum += score[e] = expf(score[e] - mx);
            for (int64_t e = 0; e < n; e++)
                score[e] /= sum;
        }
        gpu_syncwarp();
        for (int64_t e = lane; e < n; e += WARP)
            selv[e] = score[e] + (a.bias ? load_float(a.bias_type, a.bias, e) : 0.0f);
        gpu_syncwarp();
    }
    if (a.tid2eid) {
        if (lane < (int)a.k)
            sel_s[lane] = a.tid2eid[(int64_t)cu_int_at(a.tokens, a.tokens_small, 0) * a.k + lane];
    } else if (!by_rank) {
        for (uint32_t i = 0; i < a.k; i++) {
            int best = -1;
            float bv = 0.0f;
            for (int64_t e = lane; e < n; e += WARP)
                if (!taken[e] && (best < 0 || selv[e] > bv)) {
                    best = (int)e;
                    bv = selv[e];
                }
            for (int m = WARP / 2; m > 0; m >>= 1) {
                float ov = gpu_shfl_xor(bv, m);
                int oi = gpu_shfl_xor_i(best, m);
                if (route_better(ov, oi, bv, best)) bv = ov, best = oi;
            }
            /* every lane holds the same winner now */
            if (lane == 0) {
                if (best >= 0) taken[best] = 1;
                sel_s[i] = best;
            }
            gpu_syncwarp();
        }
    }
    gpu_syncwarp();
    if (lane == 0) {
        float *w = a.weight, sum = 0;
        for (uint32_t i = 0; i < a.k; i++) {
            int32_t e = sel_s[i];
            if (e < 0 || e >= n) /* a hash table row naming an expert out of range */
                sel_s[i] = e = 0, w[i] = 0.0f;
            else
                w[i] = score[e];
            sum += w[i];
            a.sel[i] = e;
        }
        for (uint32_t i = 0; i < a.k; i++) {
            if (a.norm_weights) w[i] /= sum + 1e-20f;
            w[i] *= a.weights_scale;
        }
        if (a.slots > a.k) w[a.k] = 1.0f;
    }
    gpu_syncwarp();
    /* Grouping: pair i (slot i of token 0) of expert e_i. */
    const int k = (int)a.k;
    const int32_t ei = lane < k ? sel_s[lane] : INT32_MAX;
    int below = 0, same_before = 0, same = 0, distinct_below = 0, n_distinct = 0;
    for (int j = 0; j < k; j++) {
        const int32_t ej = sel_s[j];
        bool first_of_value = true; /* j is the lowest slot holding ej */
        for (int q = 0; q < j; q++)
            first_of_value = first_of_value && sel_s[q] != ej;
        below += ej < ei;
        same += ej == ei;
        same_before += ej == ei && j < lane;
        distinct_below += ej < ei && first_of_value;
        n_distinct += first_of_value;
    }
    if (lane < k) {
        pairs[below + same_before] = lane;
        if (same_before == 0) {
            int32_t *it = act + 1 + 3 * distinct_below;
            it[0] = ei;
            it[1] = below;
            it[2] = below + same;
        }
    }
    if (lane == 0) {
        int n_act = n_distinct;
        if (a.slots > a.k) {
            pairs[k] = k;
            int32_t *it = act + 1 + 3 * n_act++;
            it[0] = (int32_t)n;
            it[1] = k;
            it[2] = k + 1;
        }
        act[0] = n_act;
    }
    /* first[e]: the pairs of groups below e (group n_expert: the shared expert). */
    for (int64_t e = lane; e <= n + 1; e += WARP) {
        int c = 0;
        for (int j = 0; j < k; j++)
            c += sel_s[j] < e;
        first[e] = e == n + 1 ? (int32_t)a.slots : c;
    }
}

__global__ void route1_kernel(route_params a, int32_t *first, int32_t *pairs, int32_t *act) {
    cu_pdl_entry();
    route1_body(a, first, pairs, act);
}

#ifndef HALO_HIP
/* One token's ffn norm, router projection (F16 rows, a warp a row) and route1 in one launch:
 * each block adds to a device counter when its rows are written, and the block that finishes
 * last (every other block has read x by then) writes the normed x in place and runs route1_body
 * on the logits. It resets the counter, so a graph replays the kernel. Replaces three launches
 * (rms_norm, the router's matmul, route1) with one; the logits sum in another order than the
 * matmul kernel's.
 *
 * The norm is a scale: logit_e = r · sum_i w_ei (x_i g_i), so the blocks dot the rows with x·g
 * and only the last block sums x's squares for r (session 6's version had every block reduce x
 * first). Only the last block lets the next kernel launch (PDL: the others exit): the experts'
 * gate/up blocks take the whole register file of a multiprocessor two at a time, so a resident
 * router block would hold one of them back on its multiprocessor (session 6's version
 * triggered at entry, on 32 blocks, and measured 6-10 % slower than the three launches). A
 * warp's 16 row loads of a 4096 row are issued together (one memory round trip a row). */
enum { RN_WARPS = 4, RN_THREADS = RN_WARPS * WARP };
__global__ void __launch_bounds__(RN_THREADS)
    routen_kernel(route_params a, const uint16_t *w, float *x, const float *norm, float eps,
                  int64_t n_embd, float *logits, int32_t *first, int32_t *pairs, int32_t *act,
                  unsigned *counter) {
    cu_pdl_wait();
    __shared__ float red[32];
    __shared__ bool last;
    const int lane = threadIdx.x % WARP, warp = threadIdx.x / WARP;
    const float4 *x4 = (const float4 *)x, *g4 = (const float4 *)norm;
    for (int64_t row = (int64_t)blockIdx.x * RN_WARPS + warp; row < a.n_expert;
         row += (int64_t)gridDim.x * RN_WARPS) {
        const uint4 *wr = (const uint4 *)(w + row * n_embd);
        float acc = 0.0f;
#pragma unroll 16
        for (int64_t e = 8 * lane; e < n_embd; e += 8 * WARP) {
            const uint4 q = wr[e / 8];
            float4 v0 = x4[e / 4], v1 = x4[e / 4 + 1];
            if (norm) {
                const float4 g0 = g4[e / 4], g1 = g4[e / 4 + 1];
                v0.x *= g0.x, v0.y *= g0.y, v0.z *= g0.z, v0.w *= g0.w;
                v1.x *= g1.x, v1.y *= g1.y, v1.z *= g1.z, v1.w *= g1.w;
            }
            const uint32_t h[4] = {q.x, q.y, q.z, q.w};
            const float xv[8] = {v0.x, v0.y, v0.z, v0.w, v1.x, v1.y, v1.z, v1.w};
#pragma unroll
            for (int j = 0; j < 4; j++) {
                acc += f16_to_f32((uint16_t)h[j]) * xv[2 * j];
                acc += f16_to_f32((uint16_t)(h[j] >> 16)) * xv[2 * j + 1];
            }
        }
        acc = warp_sum(acc);
        if (lane == 0) logits[row] = acc;
    }
    __threadfence(); /* the logits before the count */
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd(counter, 1u) == gridDim.x - 1;
    __syncthreads();
    if (!last) return;
    cu_pdl_trigger();
    __threadfence();
    if (threadIdx.x == 0) *counter = 0;
    if (norm) { /* rms_norm4_kernel's sum: a thread's float4 values, then the block sum */
        float ss = 0.0f;
        for (int64_t i = threadIdx.x; i < n_embd / 4; i += blockDim.x) {
            const float4 v = x4[i];
            ss += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
        }
        ss = block_sum(ss, red);
        const float r = 1.0f / sqrtf(ss / (float)n_embd + eps);
        __syncthreads(); /* every thread has read x */
        float4 *xo = (float4 *)x;
        for (int64_t i = threadIdx.x; i < n_embd / 4; i += blockDim.x) {
            float4 v = x4[i];
            const float4 g = g4[i];
            v.x *= r, v.y *= r, v.z *= r, v.w *= r;
            v.x *= g.x, v.y *= g.y, v.z *= g.z, v.w *= g.w;
            xo[i] = v;
        }
        float *lg = logits;
        for (int64_t e = threadIdx.x; e < a.n_expert; e += blockDim.x)
            lg[e] = __ldcg(lg + e) * r;
        __syncthreads(); /* the scaled logits before route1_body reads them */
    }
    route1_body(a, first, pairs, act);
}
#endif

#endif
