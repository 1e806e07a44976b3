/* DeepSeek V4 attention on the GPU: for each (token, head), the raw window rows the token sees
 * plus the compressed rows (all causally visible ones, or the indexer's selection), softmax
 * with the head's sink as an extra logit, K = V. One block per (token, head); each of its warps
 * takes every ATT_WARPS-th candidate row with an online softmax (running max, sum and weighted
 * rows), and the warps' partial results are merged at the end with the sink, so no logit array
 * is kept whatever the context length. */
#include <math.h>

#include "backend/cuda/attention_mma.h"
#include "backend/cuda/cuda.cuh"

enum { ATT_WARPS = 4, ATT_MAX_J = 32 }; /* head_dim up to 32·32 = 1024, a multiple of 32 */

typedef struct attn_params {
    const float *q, *window, *comp;
    const int32_t *pos, *select;
    const char *sinks;
    uint32_t sinks_type;
    int64_t head_dim, n_head, n_win, n_comp, k_sel, win_pos0;
    uint32_t sliding_window, ratio;
    float scale;
    float *out;
    cu_ints pos_small; /* pos by value when NULL */
    /* Decode split over gridDim.z > 1 blocks a (token, head): each block's (m, l, acc) here
     * (head_dim + 2 floats), merged by the last one to finish (its counter in ctr). */
    float *part;
    unsigned *ctr;
} attn_params;

__global__ void attention_kernel(attn_params a) {
    cu_pdl_entry();
    __shared__ float sm_m[ATT_WARPS], sm_l[ATT_WARPS];
    __shared__ float sm_acc[ATT_WARPS][ATT_MAX_J * WARP];
    const int64_t t = blockIdx.x, h = blockIdx.y;
    const int lane = threadIdx.x % WARP, w = threadIdx.x / WARP;
    const int nj = (int)(a.head_dim / WARP);
    const int64_t pos = cu_int_at(a.pos, a.pos_small, t);
    const float *q = a.q + (t * a.n_head + h) * a.head_dim;
    float qv[ATT_MAX_J], acc[ATT_MAX_J];
#pragma unroll
    for (int j = 0; j < ATT_MAX_J; j++) {
        qv[j] = j < nj ? q[lane + WARP * j] : 0.0f;
        acc[j] = 0.0f;
    }
    float m = -INFINITY, l = 0.0f;
    int64_t visible = a.comp ? (pos + 1) / a.ratio : 0;
    if (visible > a.n_comp) visible = a.n_comp;
    const int64_t n_extra = a.comp ? (a.select ? a.k_sel : visible) : 0;
    /* The warp's candidates i = w, w + ATT_WARPS, ... in batches of 32: lane j loads the
     * indexer's entry of the batch's j-th candidate at once, so the entries (512 per token, most
     * of them -1 early in a sequence) cost one load a batch, not a dependent load each. */
    const int64_t n_all = a.n_win + n_extra;
    for (int64_t i0 = w; i0 < n_all; i0 += (int64_t)ATT_WARPS * WARP) {
        const int64_t il = i0 + (int64_t)ATT_WARPS * lane;
        int32_t sel_l = -1;
        if (a.select && il >= a.n_win && il < n_all) sel_l = a.select[t * a.k_sel + (il - a.n_win)];
        const int64_t left = (n_all - i0 + ATT_WARPS - 1) / ATT_WARPS;
        const int jn = left < WARP ? (int)left : WARP;
        for (int j = 0; j < jn; j++) {
            const int64_t i = i0 + (int64_t)ATT_WARPS * j;
            const int32_t sel = __float_as_int(gpu_shfl(__int_as_float(sel_l), j));
            const float *row = NULL;
            if (i < a.n_win) {
                int64_t kp = a.win_pos0 + i;
                if (kp <= pos && pos - kp < (int64_t)a.sliding_window)
                    row = a.window + i * a.head_dim;
            } else if (a.select) {
                if (sel >= 0 && sel < visible) row = a.comp + (int64_t)sel * a.head_dim;
            } else {
                row = a.comp + (i - a.n_win) * a.head_dim;
            }
            if (!row) continue; /* uniform across the warp */
            float part = 0.0f;
#pragma unroll
            for (int j = 0; j < ATT_MAX_J; j++)
                if (j < nj) part += qv[j] * row[lane + WARP * j];
            float s = warp_sum(part) * a.scale;
            float m_new = fmaxf(m, s);
            float corr = expf(m - m_new), p = expf(s - m_new);
            l = l * corr + p;
#pragma unroll
            for (int j = 0; j < ATT_MAX_J; j++)
                if (j < nj) acc[j] = acc[j] * corr + p * row[lane + WARP * j];
            m = m_new;
        }
    }
    if (lane == 0) {
        sm_m[w] = m;
        sm_l[w] = l;
    }
#pragma unroll
    for (int j = 0; j < ATT_MAX_J; j++)
        if (j < nj) sm_acc[w][lane + WARP * j] = acc[j];
    __syncthreads();
    const float sink = load_float(a.sinks_type, a.sinks, h);
    float mx = sink;
    for (int k = 0; k < ATT_WARPS; k++)
        mx = fmaxf(mx, sm_m[k]);
    float sum = expf(sink - mx), f[ATT_WARPS];
    for (int k = 0; k < ATT_WARPS; k++) {
        f[k] = sm_l[k] > 0.0f ? expf(sm_m[k] - mx) : 0.0f;
        sum += sm_l[k] * f[k];
    }
    float *out = a.out + (t * a.n_head + h) * a.head_dim;
    for (int64_t d = threadIdx.x; d < a.head_dim; d += blockDim.x) {
        float o = 0.0f;
        for (int k = 0; k < ATT_WARPS; k++)
            o += sm_acc[k][d] * f[k];
        out[d] = o / sum;
    }
}

#ifndef HALO_HIP
/* ---- prefill: rows shared by the heads of a block -------------------------------------------
 * With many tokens the kernel above is bound by reading rows: each (token, head) block reads its
 * ~640 rows of 2 KB on its own, once per head although every head reads the same rows (one
 * shared KV head), one row per warp at a time. Here a block is one token and AP_HEADS heads
 * (a warp each): chunks of AP_ROWS rows go to shared memory by cp.async (the next chunk in
 * flight while one is used), each warp dots its query with the chunk's rows, sums the AP_ROWS
 * partial dots across the warp in one transposing butterfly (16 shuffles instead of 80), and
 * updates its online softmax once per chunk. f32 throughout: the CPU's results to f32 rounding. */
enum { AP_HEADS = 8, AP_ROWS = 16 };

static __device__ __forceinline__ void ap_cp16(void *smem, const void *gmem) {
    const unsigned sa = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(sa), "l"(gmem));
}

/* Candidate row i of token t (window rows lo.. first, then the compressed ones), NULL when the
 * indexer's entry is -1 or not yet visible. */
static __device__ __forceinline__ const float *ap_row(const attn_params &a, int64_t t, int64_t i,
                                                      int64_t lo, int64_t n_wv, int64_t visible) {
    if (i < n_wv) return a.window + (lo + i) * a.head_dim;
    i -= n_wv;
    if (!a.select) return a.comp + i * a.head_dim;
    const int32_t s = a.select[t * a.k_sel + i];
    return s >= 0 && s < visible ? a.comp + (int64_t)s * a.head_dim : NULL;
}

template <int F4> /* float4s per lane: head_dim = 128·F4 */
__global__ void __launch_bounds__(AP_HEADS *WARP) attention_prefill_kernel(attn_params a) {
    cu_pdl_entry();
    extern __shared__ __align__(16) float ap_sm[]; /* [2][AP_ROWS][head_dim] */
    constexpr int HD = 128 * F4;
    const int64_t t = blockIdx.x;
    const int lane = threadIdx.x % WARP, w = threadIdx.x / WARP;
    const int64_t h = (int64_t)blockIdx.y * AP_HEADS + w;
    const int64_t pos = cu_int_at(a.pos, a.pos_small, t);
    /* Visible raw rows: positions pos - sliding_window + 1 .. pos, a contiguous index range. */
    int64_t lo = pos - (int64_t)a.sliding_window + 1 - a.win_pos0, hi = pos - a.win_pos0;
    lo = lo < 0 ? 0 : lo;
    hi = hi > a.n_win - 1 ? a.n_win - 1 : hi;
    const int64_t n_wv = hi >= lo ? hi - lo + 1 : 0;
    int64_t visible = a.comp ? (pos + 1) / a.ratio : 0;
    if (visible > a.n_comp) visible = a.n_comp;
    const int64_t n_cand = n_wv + (a.comp ? (a.select ? a.k_sel : visible) : 0);
    const int64_t n_ch = (n_cand + AP_ROWS - 1) / AP_ROWS;

    const float4 *q4 = (const float4 *)(a.q + (t * a.n_head + h) * HD);
    float4 qv[F4], acc[F4];
#pragma unroll
    for (int f = 0; f < F4; f++) {
        qv[f] = q4[lane + WARP * f];
        acc[f] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
    float m = -INFINITY, l = 0.0f;
    /* Chunk c into buffer c & 1: 16-byte copies, zeros for a missing row (so a masked row
     * multiplies by 0, never by stale bytes). */
    auto issue = [&](int64_t c) {
        float *buf = ap_sm + (c & 1) * AP_ROWS * HD;
        for (int idx = threadIdx.x; idx < AP_ROWS * HD / 4; idx += AP_HEADS * WARP) {
            const int r = idx / (HD / 4), col = idx % (HD / 4);
            const int64_t i = c * AP_ROWS + r;
            const float *src = i < n_cand ? ap_row(a, t, i, lo, n_wv, visible) : NULL;
            if (src)
                ap_cp16(buf + r * HD + 4 * col, src + 4 * col);
            else
                *(float4 *)(buf + r * HD + 4 * col) = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        }
        asm volatile("cp.async.commit_group;\n" ::);
    };
    if (n_ch > 0) issue(0);
    for (int64_t c = 0; c < n_ch; c++) {
        if (c + 1 < n_ch)
            issue(c + 1);
        else
            asm volatile("cp.async.commit_group;\n" ::);
        asm volatile("cp.async.wait_group 1;\n" ::);
        __syncthreads();
        const float *buf = ap_sm + (c & 1) * AP_ROWS * HD;
        float part[AP_ROWS];
#pragma unroll
        for (int r = 0; r < AP_ROWS; r++) {
            const float4 *rw = (const float4 *)(buf + r * HD);
            float sum = 0.0f;
#pragma unroll
            for (int f = 0; f < F4; f++) {
                const float4 x = rw[lane + WARP * f];
                sum += qv[f].x * x.x + qv[f].y * x.y + qv[f].z * x.z + qv[f].w * x.w;
            }
            part[r] = sum;
        }
        /* Transposing butterfly: after it lane L holds the whole sum of row (L >> 1) & 15. */
#pragma unroll
        for (int mk = 16, n = AP_ROWS / 2; mk >= 2; mk >>= 1, n >>= 1) {
            const bool upper = lane & mk;
#pragma unroll
            for (int i = 0; i < n; i++) {
                const float send = upper ? part[i] : part[i + n];
                const float keep = upper ? part[i + n] : part[i];
                part[i] = keep + gpu_shfl_xor(send, mk);
            }
        }
        part[0] += gpu_shfl_xor(part[0], 1);
        const int my_r = (lane >> 1) & (AP_ROWS - 1);
        const int64_t my_i = c * AP_ROWS + my_r;
        const bool valid = my_i < n_cand && ap_row(a, t, my_i, lo, n_wv, visible) != NULL;
        const float score = valid ? part[0] * a.scale : -INFINITY;
        const float m_new = fmaxf(m, warp_max(score));
        if (m_new != -INFINITY) { /* uniform across the warp */
            const float corr = expf(m - m_new), p = valid ? expf(score - m_new) : 0.0f;
            l = l * corr + warp_sum(lane & 1 ? 0.0f : p);
#pragma unroll
            for (int f = 0; f < F4; f++)
                acc[f].x *= corr, acc[f].y *= corr, acc[f].z *= corr, acc[f].w *= corr;
#pragma unroll
            for (int r = 0; r < AP_ROWS; r++) {
                const float pr = __shfl_sync(0xffffffffu, p, 2 * r);
                const float4 *rw = (const float4 *)(buf + r * HD);
#pragma unroll
                for (int f = 0; f < F4; f++) {
                    const float4 x = rw[lane + WARP * f];
                    acc[f].x += pr * x.x, acc[f].y += pr * x.y;
                    acc[f].z += pr * x.z, acc[f].w += pr * x.w;
                }
            }
            m = m_new;
        }
        __syncthreads(); /* buffer c & 1 is refilled by the next iteration's issue */
    }
    asm volatile("cp.async.wait_group 0;\n" ::);
    const float sink = load_float(a.sinks_type, a.sinks, h);
    const float mx = fmaxf(m, sink);
    const float fr = m == -INFINITY ? 0.0f : expf(m - mx);
    const float inv = fr / (l * fr + expf(sink - mx));
    float4 *out = (float4 *)(a.out + (t * a.n_head + h) * HD);
#pragma unroll
    for (int f = 0; f < F4; f++)
        out[lane + WARP * f] =
            make_float4(acc[f].x * inv, acc[f].y * inv, acc[f].z * inv, acc[f].w * inv);
}

/* ---- decode: more warps per (token, head), the next row loaded while one is used ------------
 * The kernel above gives a (token, head) four warps, each taking every fourth candidate row and
 * loading a row only after the previous row's sum and softmax step: at depth 24,576 a ratio-4
 * layer's 640 rows (128 raw, 512 selected) were 160 dependent row loads a warp, ~110 us a layer
 * (H200 request cd-3: tg64 58.6 there against 90.1 at depth 0). Here AD_WARPS warps take every
 * AD_WARPS-th candidate; a batch of 32 candidates per warp is resolved at once (the indexer's
 * entries loaded by the lanes together), the valid rows are walked by ballot, and each row's
 * values are loaded into registers while the previous row is summed. NJ = head_dim / 32. */
enum { AD_WARPS = 16 };

/* The split decode's tail (S = gridDim.z blocks a head, ATT_SPLIT_MAX at most): the block's
 * warps folded into one (m, l, acc) without the sink, written to a.part; the last block of the
 * head to finish (a counter, reset by it so graphs replay) folds the S partials in block order
 * with the sink and writes the output. Deterministic: the same sums in the same order whichever
 * block ends last; not bitwise the one-block kernel's (the warps are grouped differently). */
enum { ATT_SPLIT_MAX = 4 };

template <int NJ>
static __device__ void attention_decode_merge(const attn_params &a, int64_t t, int64_t h,
                                              const float *sm_acc, const float *sm_m,
                                              const float *sm_l) {
    __shared__ bool last;
    const int S = (int)gridDim.z, z = (int)blockIdx.z;
    constexpr int HD = NJ * WARP;
    float mb = -INFINITY;
    for (int k = 0; k < AD_WARPS; k++)
        mb = fmaxf(mb, sm_m[k]);
    float lb = 0.0f, f[AD_WARPS];
#pragma unroll
    for (int k = 0; k < AD_WARPS; k++) {
        f[k] = sm_l[k] > 0.0f ? expf(sm_m[k] - mb) : 0.0f;
        lb += sm_l[k] * f[k];
    }
    const int64_t th = t * a.n_head + h;
    float *pp = a.part + (th * S + z) * (HD + 2);
    for (int d = threadIdx.x; d < HD; d += blockDim.x) {
        float o = 0.0f;
#pragma unroll
        for (int k = 0; k < AD_WARPS; k++)
            o += sm_acc[k * HD + d] * f[k];
        pp[2 + d] = o;
    }
    if (threadIdx.x == 0) pp[0] = mb, pp[1] = lb;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd(a.ctr + th, 1u) == (unsigned)S - 1;
    __syncthreads();
    if (!last) return;
    __threadfence();
    const float *p0 = a.part + th * S * (HD + 2);
    const float sink = load_float(a.sinks_type, a.sinks, h);
    float mx = sink, g[ATT_SPLIT_MAX];
    for (int k = 0; k < S; k++)
        mx = fmaxf(mx, __ldcg(p0 + k * (HD + 2)));
    float sum = expf(sink - mx);
#pragma unroll
    for (int k = 0; k < ATT_SPLIT_MAX; k++) {
        const float lk = k < S ? __ldcg(p0 + k * (HD + 2) + 1) : 0.0f;
        g[k] = lk > 0.0f ? expf(__ldcg(p0 + k * (HD + 2)) - mx) : 0.0f;
        sum += lk * g[k];
    }
    float *out = a.out + th * HD;
    for (int d = threadIdx.x; d < HD; d += blockDim.x) {
        float o = 0.0f;
#pragma unroll
        for (int k = 0; k < ATT_SPLIT_MAX; k++)
            if (k < S) o += __ldcg(p0 + k * (HD + 2) + 2 + d) * g[k];
        out[d] = o / sum;
    }
    if (threadIdx.x == 0) a.ctr[th] = 0;
}

template <int NJ, bool AHEAD2>
__global__ void __launch_bounds__(AD_WARPS *WARP) attention_decode_kernel(attn_params a) {
    cu_pdl_entry();
    extern __shared__ float ad_sm[]; /* acc [AD_WARPS][NJ * 32], then m, l [AD_WARPS] */
    float *sm_acc = ad_sm, *sm_m = ad_sm + AD_WARPS * NJ * WARP, *sm_l = sm_m + AD_WARPS;
    const int64_t t = blockIdx.x, h = blockIdx.y;
    const int lane = threadIdx.x % WARP, w = threadIdx.x / WARP;
    const int64_t pos = cu_int_at(a.pos, a.pos_small, t);
    const float *q = a.q + (t * a.n_head + h) * a.head_dim;
    float qv[NJ], acc[NJ], rv[NJ];
#pragma unroll
    for (int j = 0; j < NJ; j++) {
        qv[j] = q[lane + WARP * j];
        acc[j] = 0.0f;
    }
    float m = -INFINITY, l = 0.0f;
    int64_t visible = a.comp ? (pos + 1) / a.ratio : 0;
    if (visible > a.n_comp) visible = a.n_comp;
    const int64_t n_all = a.n_win + (a.comp ? (a.select ? a.k_sel : visible) : 0);
    /* With S = gridDim.z blocks a head, block z's warps are warps z·AD_WARPS .. of S·AD_WARPS
     * (S = 1: as before, the same rows in the same order). */
    const int64_t nw = (int64_t)AD_WARPS * gridDim.z;
    for (int64_t i0 = w + (int64_t)AD_WARPS * blockIdx.z; i0 < n_all; i0 += nw * WARP) {
        /* lane j resolves the batch's j-th candidate of this warp */
        const int64_t i = i0 + nw * lane;
        const float *rp = NULL;
        if (i < a.n_win) {
            const int64_t kp = a.win_pos0 + i;
            if (kp <= pos && pos - kp < (int64_t)a.sliding_window) rp = a.window + i * a.head_dim;
        } else if (i < n_all) {
            if (a.select) {
                const int32_t sel = a.select[t * a.k_sel + (i - a.n_win)];
                if (sel >= 0 && sel < visible) rp = a.comp + (int64_t)sel * a.head_dim;
            } else {
                rp = a.comp + (i - a.n_win) * a.head_dim;
            }
        }
        unsigned valid = __ballot_sync(0xffffffffu, rp != NULL);
        if (!valid) continue;
        const float *row =
            (const float *)__shfl_sync(0xffffffffu, (unsigned long long)rp, __ffs(valid) - 1);
        valid &= valid - 1;
#pragma unroll
        for (int j = 0; j < NJ; j++)
            rv[j] = row[lane + WARP * j];
        /* AHEAD2: the row after the next one is loaded too (its loads wait on L2 for longer
         * than a row's sum and softmax step take; at depth a warp walks ~40 rows). */
        bool more = valid != 0;
        float rn[NJ];
        if (more) {
            const float *next =
                (const float *)__shfl_sync(0xffffffffu, (unsigned long long)rp, __ffs(valid) - 1);
            valid &= valid - 1;
#pragma unroll
            for (int j = 0; j < NJ; j++)
                rn[j] = next[lane + WARP * j];
        }
        for (;;) {
            const bool more2 = AHEAD2 && valid != 0;
            float rn2[NJ];
            if (more2) {
                const float *next = (const float *)__shfl_sync(0xffffffffu, (unsigned long long)rp,
                                                               __ffs(valid) - 1);
                valid &= valid - 1;
#pragma unroll
                for (int j = 0; j < NJ; j++)
                    rn2[j] = next[lane + WARP * j];
            }
            float part = 0.0f;
#pragma unroll
            for (int j = 0; j < NJ; j++)
                part += qv[j] * rv[j];
            const float sc = warp_sum(part) * a.scale;
            const float m_new = fmaxf(m, sc);
            const float corr = expf(m - m_new), p = expf(sc - m_new);
            l = l * corr + p;
#pragma unroll
            for (int j = 0; j < NJ; j++)
                acc[j] = acc[j] * corr + p * rv[j];
            m = m_new;
            if (!more) break;
#pragma unroll
            for (int j = 0; j < NJ; j++)
                rv[j] = rn[j];
            if (AHEAD2) {
#pragma unroll
                for (int j = 0; j < NJ; j++)
                    rn[j] = rn2[j];
                more = more2;
            } else {
                more = valid != 0;
                if (more) {
                    const float *next = (const float *)__shfl_sync(
                        0xffffffffu, (unsigned long long)rp, __ffs(valid) - 1);
                    valid &= valid - 1;
#pragma unroll
                    for (int j = 0; j < NJ; j++)
                        rn[j] = next[lane + WARP * j];
                }
            }
        }
    }
    if (lane == 0) {
        sm_m[w] = m;
        sm_l[w] = l;
    }
#pragma unroll
    for (int j = 0; j < NJ; j++)
        sm_acc[w * NJ * WARP + lane + WARP * j] = acc[j];
    __syncthreads();
    if (gridDim.z > 1) {
        attention_decode_merge<NJ>(a, t, h, sm_acc, sm_m, sm_l);
        return;
    }
    const float sink = load_float(a.sinks_type, a.sinks, h);
    float mx = sink;
    for (int k = 0; k < AD_WARPS; k++)
        mx = fmaxf(mx, sm_m[k]);
    float sum = expf(sink - mx), f[AD_WARPS];
#pragma unroll
    for (int k = 0; k < AD_WARPS; k++) {
        f[k] = sm_l[k] > 0.0f ? expf(sm_m[k] - mx) : 0.0f;
        sum += sm_l[k] * f[k];
    }
    float *out = a.out + (t * a.n_head + h) * a.head_dim;
    for (int d = threadIdx.x; d < NJ * WARP; d += blockDim.x) {
        float o = 0.0f;
#pragma unroll
        for (int k = 0; k < AD_WARPS; k++)
            o += sm_acc[k * NJ * WARP + d] * f[k];
        out[d] = o / sum;
    }
}

/* Blocks a head for the decode kernel: one more per be->att_split valid rows (window rows
 * and visible compressed or selected ones, the most of any token), ATT_SPLIT_MAX at most. At
 * depth 24,576 a ratio-4 layer has 640 (64 heads: 64 blocks on 132 multiprocessors, 40 rows a
 * warp walked one after another), at depth 0 ~100. */
static int attention_splits(const cu_backend *be, const halo_attn_args *a, int64_t n_tok) {
    const int64_t n_head = a->q->ne[1];
    if (be->att_split <= 0 || !be->att1 || n_tok * n_head > CU_ATT_CTRS || !a->pos) return 1;
    int64_t most = 0;
    for (int64_t t = 0; t < n_tok; t++) {
        const int64_t pos = a->pos[t];
        int64_t rows = pos + 1 < (int64_t)a->sliding_window ? pos + 1 : a->sliding_window;
        if (a->comp && a->comp->ne[1] > 0) {
            int64_t vis = (pos + 1) / (a->ratio ? a->ratio : 1);
            if (vis > a->comp->ne[1]) vis = a->comp->ne[1];
            if (a->select && vis > a->select->ne[0]) vis = a->select->ne[0];
            rows += vis;
        }
        if (rows > most) most = rows;
    }
    const int64_t s = most / be->att_split;
    return s < 1 ? 1 : s > ATT_SPLIT_MAX ? ATT_SPLIT_MAX : (int)s;
}

/* The decode kernel for head_dim 128 or 512 (HALO_CUDA_ATT1=0: the general kernel). */
static bool attention_decode(cu_backend *be, const attn_params &p, int64_t n_tok, int splits) {
    if (!be->att1 || (p.head_dim != 128 && p.head_dim != 512) || n_tok > 65535 || p.n_head > 65535)
        return false;
    const int smem = (AD_WARPS * (int)p.head_dim + 2 * AD_WARPS) * (int)sizeof(float);
    dim3 grid((unsigned)n_tok, (unsigned)p.n_head, p.part ? (unsigned)splits : 1u);
    if (p.head_dim == 128 && be->ahead2)
        cu_launch(be, attention_decode_kernel<4, true>, grid, AD_WARPS * WARP, smem, p);
    else if (p.head_dim == 128)
        cu_launch(be, attention_decode_kernel<4, false>, grid, AD_WARPS * WARP, smem, p);
    else if (be->ahead2)
        cu_launch(be, attention_decode_kernel<16, true>, grid, AD_WARPS * WARP, smem, p);
    else
        cu_launch(be, attention_decode_kernel<16, false>, grid, AD_WARPS * WARP, smem, p);
    CU_LAUNCHED(be, "attention", "attention_decode_kernel");
    return true;
}

/* The prefill kernel when it takes the shape (head_dim 128 or 512, heads in blocks of 8, 16-byte
 * aligned rows, at least AP_MIN_TOK tokens: decode keeps the kernel above, whose 64 blocks a
 * token fill more of the GPU than 8 would). */
enum { AP_MIN_TOK = 16 };
static bool attention_prefill(cu_backend *be, const attn_params &p, int64_t n_tok) {
    const uintptr_t al =
        (uintptr_t)p.q | (uintptr_t)p.window | (uintptr_t)p.comp | (uintptr_t)p.out;
    if (be->naive || n_tok < AP_MIN_TOK || p.n_head % AP_HEADS || (al & 15) ||
        (p.head_dim != 128 && p.head_dim != 512) || p.n_head / AP_HEADS > 65535)
        return false;
    const int smem = 2 * AP_ROWS * (int)p.head_dim * (int)sizeof(float);
    dim3 grid((unsigned)n_tok, (unsigned)(p.n_head / AP_HEADS));
    static bool done1, done4;
    if (p.head_dim == 128) {
        if (!cu_smem_attr(be, attention_prefill_kernel<1>, smem, &done1, "attention")) return true;
        cu_launch(be, attention_prefill_kernel<1>, grid, AP_HEADS * WARP, smem, p);
    } else {
        if (!cu_smem_attr(be, attention_prefill_kernel<4>, smem, &done4, "attention")) return true;
        cu_launch(be, attention_prefill_kernel<4>, grid, AP_HEADS * WARP, smem, p);
    }
    CU_LAUNCHED(be, "attention", "attention_prefill_kernel");
    return true;
}
#endif

void cu_attention(halo_backend *hbe, const halo_attn_args *a) {
    cu_backend *be = cu_of(hbe);
    const int64_t hd = a->q->ne[0], n_head = a->q->ne[1], n_tok = a->q->ne[2];
    if (be->failed || n_tok <= 0 || !cu_float_only(be, a->sinks->type, "attention", "sinks"))
        return;
    if (hd % WARP || hd > ATT_MAX_J * WARP) {
        cu_check(be, "attention", "head_dim not a multiple of 32 up to 1024",
                 cudaErrorInvalidValue);
        return;
    }
    /* Decode at depth: blocks a head by the valid rows (the host has the positions). */
#ifndef HALO_HIP
    const int splits = attention_splits(be, a, n_tok);
#else
    const int splits = 1;
#endif
    const uint64_t pos_bytes = ((uint64_t)n_tok * sizeof(int32_t) + 255) & ~(uint64_t)255;
    const uint64_t part_bytes =
        splits > 1 ? (uint64_t)(n_tok * n_head * splits * (hd + 2)) * sizeof(float) : 0;
    char *scr = cu_scratch(be, pos_bytes + part_bytes, "attention");
    int32_t *spos = (int32_t *)scr;
    cu_ints ps;
    const int32_t *dpos = NULL;
    if (!spos || !cu_ints_pass(be, spos, a->pos, n_tok, &ps, &dpos, "attention")) return;
    attn_params p = {cu_f32(a->q),
                     cu_f32(a->window),
                     a->comp ? cu_f32(a->comp) : NULL,
                     dpos,
                     a->select ? (const int32_t *)cu_ptr(a->select) : NULL,
                     cu_ptr(a->sinks),
                     a->sinks->type,
                     hd,
                     n_head,
                     a->window->ne[1],
                     a->comp ? a->comp->ne[1] : 0,
                     a->select ? a->select->ne[0] : 0,
                     a->win_pos0,
                     a->sliding_window,
                     a->ratio ? a->ratio : 1,
                     a->scale,
                     cu_f32(a->out),
                     ps,
                     splits > 1 ? (float *)(scr + pos_bytes) : NULL,
                     be->counters + CU_CTR_ATT};
    if (a->comp && a->comp->ne[1] == 0) p.comp = NULL;
#ifndef HALO_HIP
    const cu_attn_mma_args am = {p.q,      p.window, p.comp,       p.pos,      p.pos_small,
                                 p.select, p.sinks,  p.sinks_type, p.head_dim, p.n_head,
                                 p.n_win,  p.n_comp, p.k_sel,      p.win_pos0, p.sliding_window,
                                 p.ratio,  p.scale,  p.out};
    if (cu_attention_mma(be, &am, n_tok)) return; /* fast mode: tensor cores */
    if (attention_prefill(be, p, n_tok)) return;
    if (attention_decode(be, p, n_tok, splits)) return;
#endif
    dim3 grid((unsigned)n_tok, (unsigned)n_head);
    cu_launch(be, attention_kernel, grid, ATT_WARPS * WARP, 0, p);
    CU_LAUNCHED(be, "attention", "attention_kernel");
}
