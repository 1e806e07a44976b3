/* Lightning-indexer top-k on the GPU: scores of every visible compressed row for each token
 * (score(t, s) = Σ_h w[t,h]·n_head^-½ · relu(q[t,h]·k[s]) · head_dim^-½, as the CPU backend),
 * then per token the top_k rows by an exact radix select on the scores' bits: four passes of 8 bits
 * find the k-th largest score T; rows above T and the lowest-numbered rows equal to T are
 * written in row order (the CPU's tie rule: equal scores select the lower row). */
#include <math.h>
#include <stdlib.h>

#include "backend/cuda/cuda.cuh"
#include "backend/cuda/topk_mma.h"

enum { SCORE_WARPS = 8, SELECT_THREADS = 1024 };

__global__ void score_kernel(const float *q, const float *w, const float *keys, int64_t hd,
                             int64_t n_head, int64_t n_rows, const int32_t *pos, cu_ints pos_small,
                             uint32_t ratio, float *score) {
    cu_pdl_entry();
    const int64_t t = blockIdx.y;
    const int64_t s = (int64_t)blockIdx.x * SCORE_WARPS + threadIdx.x / WARP;
    int64_t visible = (cu_int_at(pos, pos_small, t) + 1) / ratio;
    if (visible > n_rows) visible = n_rows;
    if (s >= visible) return;
    const int lane = threadIdx.x % WARP;
    const float qs = 1.0f / sqrtf((float)hd), ws = 1.0f / sqrtf((float)n_head);
    const float *qt = q + t * n_head * hd, *wt = w + t * n_head, *k = keys + s * hd;
    /* Eight heads' partial dots are loaded and summed before their eight warp sums, every load
     * of a group issued before the first is used (with head_dim up to 256, unrolled): a loop
     * over d with a run-time count issued each load after the previous one's sum, 64 x 4
     * dependent loads a row (~40 us a call on the H200). acc adds the heads in order as before,
     * each head's dot in d order as before. */
    float acc = 0.0f;
    const int nj = (int)(hd / WARP);
    const bool unrolled = hd % WARP == 0 && nj <= 8;
    float kv[8];
#pragma unroll
    for (int j = 0; j < 8; j++)
        kv[j] = unrolled && j < nj ? k[lane + WARP * j] : 0.0f;
    for (int64_t h0 = 0; h0 < n_head; h0 += 8) {
        float part[8];
#pragma unroll
        for (int u = 0; u < 8; u++) {
            part[u] = 0.0f;
            if (h0 + u >= n_head) continue;
            const float *qh = qt + (h0 + u) * hd;
            if (unrolled) {
#pragma unroll
                for (int j = 0; j < 8; j++)
                    if (j < nj) part[u] += qh[lane + WARP * j] * kv[j];
            } else {
                for (int64_t d = lane; d < hd; d += WARP)
                    part[u] += qh[d] * k[d];
            }
        }
#pragma unroll
        for (int u = 0; u < 8; u++) {
            if (h0 + u >= n_head) break;
            float dd = warp_sum(part[u]);
            acc += (dd > 0 ? dd * qs : 0) * (wt[h0 + u] * ws);
        }
    }
    if (lane == 0) score[t * n_rows + s] = acc;
}

/* The same scores with head_dim = 32·NJ known when compiling and heads in groups of SC_HG:
 * a group's q values (SC_HG·NJ a lane) and head weights are loaded into registers before the
 * first is used, so a row costs n_head / SC_HG dependent L2 round trips. score_kernel's guards
 * (`if (j < nj)`, a head past n_head) put every load in a basic block of its own right before
 * the multiply that uses it, so a warp waited for each of its 256 loads in turn: ~60 us a call
 * inside graphs whatever the depth (H200 request cuda-decode-1, HALO_CUDA_TRACE: a ratio-4
 * layer's score kernel 64 us at depth 0, 61 us at 8192 rows; ~1.2 ms of a 43-layer token).
 * Each head's dot and the sum over heads are added in score_kernel's order: the same bits. */
enum { SC_HG = 16 };
template <int NJ>
__global__ void score_nj_kernel(const float *q, const float *w, const float *keys, int64_t n_head,
                                int64_t n_rows, const int32_t *pos, cu_ints pos_small,
                                uint32_t ratio, float *score) {
    cu_pdl_entry();
    constexpr int HD = NJ * WARP;
    const int64_t t = blockIdx.y;
    const int64_t s = (int64_t)blockIdx.x * SCORE_WARPS + threadIdx.x / WARP;
    int64_t visible = (cu_int_at(pos, pos_small, t) + 1) / ratio;
    if (visible > n_rows) visible = n_rows;
    if (s >= visible) return;
    const int lane = threadIdx.x % WARP;
    const float qs = 1.0f / sqrtf((float)HD), ws = 1.0f / sqrtf((float)n_head);
    const float *qt = q + t * n_head * HD, *wt = w + t * n_head, *k = keys + s * HD;
    float kv[NJ];
#pragma unroll
    for (int j = 0; j < NJ; j++)
        kv[j] = k[lane + WARP * j];
    float acc = 0.0f;
    for (int64_t h0 = 0; h0 < n_head; h0 += SC_HG) {
        float qv[SC_HG][NJ], wv[SC_HG];
#pragma unroll
        for (int u = 0; u < SC_HG; u++) {
#pragma unroll
            for (int j = 0; j < NJ; j++)
                qv[u][j] = qt[(h0 + u) * HD + lane + WARP * j];
            wv[u] = wt[h0 + u];
        }
#pragma unroll
        for (int u = 0; u < SC_HG; u++) {
            float part = 0.0f;
#pragma unroll
            for (int j = 0; j < NJ; j++)
                part += qv[u][j] * kv[j];
            const float dd = warp_sum(part);
            acc += (dd > 0 ? dd * qs : 0) * (wv[u] * ws);
        }
    }
    if (lane == 0) score[t * n_rows + s] = acc;
}

/* Orders floats as unsigned integers (larger float, larger key); -0 counts as +0. */
static __device__ __forceinline__ uint32_t fkey(float f) {
    uint32_t u = __float_as_uint(f == 0.0f ? 0.0f : f);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

/* Exclusive prefix sum over the block of one int per thread; *total gets the sum. */
static __device__ int block_scan(int v, int *warp_tot, int *total) {
    const int lane = threadIdx.x % WARP, wid = threadIdx.x / WARP, nw = blockDim.x / WARP;
    int x = v;
    for (int d = 1; d < WARP; d <<= 1) {
        int y = gpu_shfl_up_i(x, d);
        if (lane >= d) x += y;
    }
    __syncthreads();
    if (lane == WARP - 1) warp_tot[wid] = x;
    __syncthreads();
    if (wid == 0) { /* the warps' totals scanned by warp 0 (nw <= 32) */
        const int tw = lane < nw ? warp_tot[lane] : 0;
        int inc = tw;
        for (int d = 1; d < WARP; d <<= 1) {
            int y = gpu_shfl_up_i(inc, d);
            if (lane >= d) inc += y;
        }
        if (lane < nw) warp_tot[lane] = inc - tw;
        if (lane == WARP - 1) *total = inc;
    }
    __syncthreads();
    return warp_tot[wid] + x - v;
}

__global__ void select_kernel(const float *score, int64_t n_rows, const int32_t *pos,
                              cu_ints pos_small, uint32_t ratio, uint32_t k, int32_t *out) {
    cu_pdl_entry();
    __shared__ unsigned hist[256];
    __shared__ int warp_tot[SELECT_THREADS / WARP];
    __shared__ int total;
    __shared__ uint32_t digit, krem_sh;
    const int64_t t = blockIdx.x;
    int32_t *o = out + t * k;
    const float *sc = score + t * n_rows;
    int64_t visible = (cu_int_at(pos, pos_small, t) + 1) / ratio;
    if (visible > n_rows) visible = n_rows;
    for (int64_t i = threadIdx.x; i < k; i += blockDim.x)
        o[i] = i < visible && visible <= (int64_t)k ? (int32_t)i : -1;
    if (visible <= (int64_t)k) return;
    uint32_t prefix = 0, mask = 0, krem = k;
    for (int shift = 24; shift >= 0; shift -= 8) {
        for (int i = threadIdx.x; i < 256; i += blockDim.x)
            hist[i] = 0;
        __syncthreads();
        for (int64_t s0 = 0; s0 < visible; s0 += blockDim.x) {
            const int64_t s = s0 + threadIdx.x;
            const uint32_t key = s < visible ? fkey(sc[s]) : 0;
            const bool in = s < visible && (key & mask) == prefix;
            const uint32_t bin = (key >> shift) & 255;
#ifndef HALO_HIP
            /* One atomic per distinct bin of the warp: the scores of a token are close, so in
             * the first pass most rows share one or two bins, and atomics on one address run
             * one after another (6,144 rows at depth 24,576; the gain is not measured yet).
             * The same counts. */
            const unsigned act = __ballot_sync(0xffffffffu, in);
            if (in) {
                const unsigned same = __match_any_sync(act, bin);
                if ((threadIdx.x % WARP) == (unsigned)(__ffs(same) - 1))
                    atomicAdd(&hist[bin], (unsigned)__popc(same));
            }
#else
            if (in) atomicAdd(&hist[bin], 1u);
#endif
        }
        __syncthreads();
        if (threadIdx.x < WARP) {
            /* The bin where the count from the top reaches krem, on one warp: lane l holds
             * bins 255 - 8l .. 248 - 8l, the lanes' sums are scanned, and the one lane whose
             * range crosses krem walks its eight bins (one thread walking all 256 bins took
             * ~4 us a pass). The same bin and remainder as that walk. */
            const int lane = threadIdx.x;
            uint32_t c[8], tot = 0;
#pragma unroll
            for (int i = 0; i < 8; i++) {
                c[i] = hist[255 - (8 * lane + i)];
                tot += c[i];
            }
            uint32_t inc = tot;
            for (int d = 1; d < WARP; d <<= 1) {
                uint32_t y = (uint32_t)gpu_shfl_up_i((int)inc, d);
                if (lane >= d) inc += y;
            }
            uint32_t cum = inc - tot;
            if (cum < krem && inc >= krem) {
#pragma unroll
                for (int i = 0; i < 8; i++) {
                    if (cum + c[i] >= krem) {
                        digit = (uint32_t)(255 - (8 * lane + i));
                        krem_sh = krem - cum;
                        break;
                    }
                    cum += c[i];
                }
            }
        }
        __syncthreads();
        prefix |= digit << shift;
        mask |= 255u << shift;
        krem = krem_sh;
        __syncthreads();
    }
    /* prefix is the k-th largest key; krem rows equal to it are taken, the lowest first. */
    int base = 0, eq_taken = 0;
    for (int64_t c0 = 0; c0 < visible; c0 += blockDim.x) {
        int64_t s = c0 + threadIdx.x;
        uint32_t key = s < visible ? fkey(sc[s]) : 0;
        int gt = s < visible && key > prefix, eq = s < visible && key == prefix;
        int eq_rank = block_scan(eq, warp_tot, &total);
        int eq_total = total;
        int take = gt || (eq && eq_taken + eq_rank < (int)krem);
        int at = block_scan(take, warp_tot, &total);
        if (take) o[base + at] = (int32_t)s;
        base += total;
        eq_taken += eq_total;
        __syncthreads();
    }
}

void cu_topk(halo_backend *hbe, const halo_topk_args *a) {
    cu_backend *be = cu_of(hbe);
    const int64_t n_tok = a->q->ne[2], n_rows = a->keys->ne[1];
    if (be->failed || n_tok <= 0) return;
    uint64_t pos_bytes = ((uint64_t)n_tok * sizeof(int32_t) + 255) & ~255ull;
    char *s = cu_scratch(be, pos_bytes + (uint64_t)(n_tok * n_rows) * sizeof(float) + 4, "topk");
    if (!s) return;
    int32_t *spos = (int32_t *)s;
    cu_ints ps;
    const int32_t *dpos = NULL;
    float *score = (float *)(s + pos_bytes);
    if (!cu_ints_pass(be, spos, a->pos, n_tok, &ps, &dpos, "topk")) return;
    if (n_rows > 0 &&
        !cu_topk_score_mma(be, cu_f32(a->q), cu_f32(a->w), cu_f32(a->keys), a->q->ne[0],
                           a->q->ne[1], n_rows, n_tok, dpos, ps, a->ratio, score)) {
        /* Slices of at most 2^20 (token, row) pairs a launch: this kernel takes ~15 ns a pair on
         * the H200 (session 6's base profile: 3.8 us a token at pp2048, ~256 rows), so a batch
         * of 512 tokens at 131,072 tokens of depth (32,768 rows) would be one ~250 ms launch;
         * sliced, each stays near 16 ms (issue 12: no kernel past 100 ms). */
        const char *lim = getenv("HALO_CUDA_TOPK_PAIRS"); /* the tests' smaller slices */
        const int64_t pairs = lim && atoll(lim) > 0 ? atoll(lim) : (int64_t)1 << 20;
        const int64_t hd = a->q->ne[0], nh = a->q->ne[1];
        const int64_t per =
            dpos && pairs / n_rows < n_tok ? (pairs / n_rows > 0 ? pairs / n_rows : 1) : n_tok;
        for (int64_t t0 = 0; t0 < n_tok; t0 += per) {
            const int64_t nt = n_tok - t0 < per ? n_tok - t0 : per;
            dim3 grid(cu_blocks(n_rows, SCORE_WARPS), (unsigned)nt);
            const float *qp = cu_f32(a->q) + t0 * nh * hd, *wp = cu_f32(a->w) + t0 * nh;
            const int32_t *pp = dpos ? dpos + t0 : dpos;
            float *sp = score + t0 * n_rows;
            const bool nj = be->score_nj && nh % SC_HG == 0 && (hd == 64 || hd == 128);
            if (nj && hd == 128) {
                cu_launch(be, score_nj_kernel<4>, grid, SCORE_WARPS * WARP, 0, qp, wp,
                          cu_f32(a->keys), nh, n_rows, pp, ps, a->ratio, sp);
                if (!CU_LAUNCHED(be, "topk", "score_nj_kernel")) return;
            } else if (nj) {
                cu_launch(be, score_nj_kernel<2>, grid, SCORE_WARPS * WARP, 0, qp, wp,
                          cu_f32(a->keys), nh, n_rows, pp, ps, a->ratio, sp);
                if (!CU_LAUNCHED(be, "topk", "score_nj_kernel")) return;
            } else {
                cu_launch(be, score_kernel, grid, SCORE_WARPS * WARP, 0, qp, wp, cu_f32(a->keys),
                          hd, nh, n_rows, pp, ps, a->ratio, sp);
                if (!CU_LAUNCHED(be, "topk", "score_kernel")) return;
            }
        }
    }
    cu_launch(be, select_kernel, (unsigned)n_tok, SELECT_THREADS, 0, score, n_rows, dpos, ps,
              a->ratio, a->top_k, (int32_t *)cu_ptr(a->out));
    CU_LAUNCHED(be, "topk", "select_kernel");
}
