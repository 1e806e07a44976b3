/* Prefill attention on tensor cores (see attention_mma.h).
 *
 * attention.cu's prefill kernel gives a block one token and 8 heads and works in f32 on CUDA
 * cores, its rows staged in shared memory: each row is read from shared memory twice per head
 * (dot, then weighted sum), so a ratio-4 layer's 640 candidates x 64 heads x 512 dims at 512
 * tokens are ~2.9 ms of shared-memory traffic per layer (about 12 % of the 4-layer prefill
 * profile, bench/cuda/RESULTS.md run 24), the same at depth 0 (rows of -1 entries were zeros,
 * still multiplied) as at depth.
 *
 * Here a block is one token and AM_H = 32 heads (the heads share the candidate rows: one KV
 * head), 8 warps. The token's candidate list is built first (window rows, then the indexer's
 * valid entries compacted in order, or every visible compressed row), then chunks of AM_N rows
 * go through shared memory as f16 (the next chunk's f32 loaded into registers while this one is
 * used). Per chunk: S = Q K^T (32 heads x 32 rows, mma.sync m16n8k16, each warp one 16 x 8
 * part over the 512 dims), an online softmax per head in f32, then O += P V with each warp
 * owning 16 heads x 128 output dims (64 f32 accumulators a thread: head_dim 512 leaves no room
 * for a whole head row a thread, as flash attention would keep). Masked rows (past the list)
 * score -inf. The sink joins at the end as in the f32 kernels.
 *
 * Numerics: q, rows and the probabilities rounded to f16 (q and rows saturated at ±65504),
 * products and sums in f32: the fast mode's precision class (the op test holds it to 2e-3 of
 * the output's range). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/attention_mma.h"

#ifndef HALO_HIP
#include <cuda_fp16.h>

enum {
    AM_HD = 512,       /* head_dim */
    AM_H = 32,         /* heads of a block */
    AM_N = 32,         /* candidate rows of a chunk */
    AM_THREADS = 256,  /* 8 warps */
    AM_LD = AM_HD + 8, /* f16 per q / row line: +16 bytes so ldmatrix's 8 lines hit 8 bank
                          groups */
    AM_PLD = AM_N + 8, /* f16 per probability line */
    AM_SLD = AM_N + 1, /* f32 per score line */
    AM_MAX_SEL = 4096, /* indexer entries a token can have (the list is in shared memory) */
};

/* Shared memory, in bytes from the start (all offsets multiples of 16). */
enum {
    AM_OFF_Q = 0,
    AM_OFF_KV = AM_OFF_Q + AM_H * AM_LD * 2,
    AM_OFF_S = AM_OFF_KV + AM_N * AM_LD * 2,
    AM_OFF_P = AM_OFF_S + ((AM_H * AM_SLD * 4 + 15) / 16) * 16,
    AM_OFF_STAT = AM_OFF_P + AM_H * AM_PLD * 2, /* m, l, corr per head; valid per row */
    AM_OFF_SCAN = AM_OFF_STAT + (3 * AM_H + AM_N) * 4,
    AM_OFF_LIST = AM_OFF_SCAN + 16 * 4,
};

static __device__ __forceinline__ void am_ldm_x4(uint32_t r[4], const __half *p) {
    const uint32_t a = (uint32_t)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}
static __device__ __forceinline__ void am_ldm_x4_t(uint32_t r[4], const __half *p) {
    const uint32_t a = (uint32_t)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}
static __device__ __forceinline__ void am_mma(float c[4], const uint32_t a[4], uint32_t b0,
                                              uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
                 "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* Four floats to f16 (saturated) at dst (8-byte aligned). */
static __device__ __forceinline__ void am_put4(__half *dst, float4 v) {
    __half2 h[2];
    h[0] = __floats2half2_rn(fminf(fmaxf(v.x, -65504.0f), 65504.0f),
                             fminf(fmaxf(v.y, -65504.0f), 65504.0f));
    h[1] = __floats2half2_rn(fminf(fmaxf(v.z, -65504.0f), 65504.0f),
                             fminf(fmaxf(v.w, -65504.0f), 65504.0f));
    *(uint2 *)dst = *(const uint2 *)h;
}

__global__ void __launch_bounds__(AM_THREADS, 1) attention_mma_kernel(cu_attn_mma_args a) {
    cu_pdl_entry();
    extern __shared__ __align__(16) unsigned char am_sm[];
    __half(*qs)[AM_LD] = (__half(*)[AM_LD])(am_sm + AM_OFF_Q);
    __half(*kv)[AM_LD] = (__half(*)[AM_LD])(am_sm + AM_OFF_KV);
    float(*ss)[AM_SLD] = (float(*)[AM_SLD])(am_sm + AM_OFF_S);
    __half(*ps)[AM_PLD] = (__half(*)[AM_PLD])(am_sm + AM_OFF_P);
    float *m_s = (float *)(am_sm + AM_OFF_STAT), *l_s = m_s + AM_H, *c_s = l_s + AM_H;
    int *valid_s = (int *)(c_s + AM_H);
    int *scan_s = (int *)(am_sm + AM_OFF_SCAN);
    int32_t *list = (int32_t *)(am_sm + AM_OFF_LIST);

    const int tid = threadIdx.x, lane = tid % WARP, warp = tid / WARP;
    const int64_t t = blockIdx.x, h0 = (int64_t)blockIdx.y * AM_H;
    const int64_t pos = cu_int_at(a.pos, a.pos_small, t);
    int64_t lo = pos - (int64_t)a.sliding_window + 1 - a.win_pos0, hi = pos - a.win_pos0;
    lo = lo < 0 ? 0 : lo;
    hi = hi > a.n_win - 1 ? a.n_win - 1 : hi;
    const int64_t n_wv = hi >= lo ? hi - lo + 1 : 0;
    int64_t visible = a.comp ? (pos + 1) / a.ratio : 0;
    if (visible > a.n_comp) visible = a.n_comp;

    /* The indexer's valid entries, compacted in their order (a warp ballot, then the warps'
     * counts in order): at depth 0 most of a token's 512 entries are -1. */
    int64_t n_extra = 0;
    if (a.comp && a.select) {
        const int32_t *sel = a.select + t * a.k_sel;
        int base = 0;
        for (int64_t i0 = 0; i0 < a.k_sel; i0 += AM_THREADS) {
            const int64_t i = i0 + tid;
            const int32_t s = i < a.k_sel ? sel[i] : -1;
            const bool ok = s >= 0 && s < visible;
            const unsigned bal = __ballot_sync(0xffffffffu, ok);
            if (lane == 0) scan_s[warp] = __popc(bal);
            __syncthreads();
            int before = base, total = 0;
            for (int w = 0; w < AM_THREADS / WARP; w++) {
                before += w < warp ? scan_s[w] : 0;
                total += scan_s[w];
            }
            if (ok) list[before + __popc(bal & ((1u << lane) - 1u))] = s;
            base += total;
            __syncthreads();
        }
        n_extra = base;
    } else if (a.comp) {
        n_extra = visible;
    }
    const int64_t n_cand = n_wv + n_extra, n_ch = (n_cand + AM_N - 1) / AM_N;

    /* The block's 32 query rows as f16. */
    const float *qg = a.q + (t * a.n_head + h0) * AM_HD;
    for (int idx = tid; idx < AM_H * AM_HD / 4; idx += AM_THREADS) {
        const int r = idx / (AM_HD / 4), c4 = idx % (AM_HD / 4);
        am_put4(&qs[r][4 * c4], __ldg((const float4 *)(qg + (int64_t)r * AM_HD) + c4));
    }
    if (tid < AM_H) {
        m_s[tid] = -INFINITY;
        l_s[tid] = 0.0f;
    }

    /* Loader: row lr of a chunk, float4s lj + 8k of it (k < 16): a warp's load covers four rows
     * of 128 contiguous bytes each. */
    const int lr = tid >> 3, lj = tid & 7;
    float4 pre[AM_HD / 32];
    int pre_ok = 0;
    auto fetch = [&](int64_t c) {
        const int64_t i = c * AM_N + lr;
        const float *src = NULL;
        if (i < n_wv)
            src = a.window + (lo + i) * AM_HD;
        else if (i < n_cand)
            src = a.comp + (int64_t)(a.select ? list[i - n_wv] : (int32_t)(i - n_wv)) * AM_HD;
        pre_ok = src != NULL;
#pragma unroll
        for (int k = 0; k < AM_HD / 32; k++)
            pre[k] = src ? __ldg((const float4 *)src + lj + 8 * k) : make_float4(0, 0, 0, 0);
    };
    __syncthreads(); /* the list */
    if (n_ch > 0) fetch(0);

    const int g = lane >> 2, tq = lane & 3;
    const int mt = warp & 1;  /* this warp's 16 heads */
    const int nf = warp >> 1; /* S: rows 8nf .. 8nf + 7 of the chunk; PV: dims 128nf .. + 127 */
    float o[16][4];
#pragma unroll
    for (int j = 0; j < 16; j++)
        o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;

    for (int64_t c = 0; c < n_ch; c++) {
#pragma unroll
        for (int k = 0; k < AM_HD / 32; k++)
            am_put4(&kv[lr][4 * (lj + 8 * k)], pre[k]);
        if (lj == 0) valid_s[lr] = pre_ok;
        __syncthreads();
        if (c + 1 < n_ch) fetch(c + 1);

        /* S part: heads 16mt.., rows 8nf.. */
        float sacc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll 4
        for (int kk = 0; kk < AM_HD; kk += 32) {
            uint32_t a0[4], a1[4], b[4];
            am_ldm_x4(a0, &qs[16 * mt + (lane & 15)][kk + 8 * (lane >> 4)]);
            am_ldm_x4(a1, &qs[16 * mt + (lane & 15)][kk + 16 + 8 * (lane >> 4)]);
            am_ldm_x4(b, &kv[8 * nf + (lane & 7)][kk + 8 * (lane >> 3)]);
            am_mma(sacc, a0, b[0], b[1]);
            am_mma(sacc, a1, b[2], b[3]);
        }
        {
            const int col = 8 * nf + 2 * tq;
            const bool v0 = valid_s[col], v1 = valid_s[col + 1];
            ss[16 * mt + g][col] = v0 ? sacc[0] * a.scale : -INFINITY;
            ss[16 * mt + g][col + 1] = v1 ? sacc[1] * a.scale : -INFINITY;
            ss[16 * mt + g + 8][col] = v0 ? sacc[2] * a.scale : -INFINITY;
            ss[16 * mt + g + 8][col + 1] = v1 ? sacc[3] * a.scale : -INFINITY;
        }
        __syncthreads();

        /* Online softmax: head hr, rows 4part .. 4part + 3 (8 lanes a head). */
        {
            const int hr = tid >> 3, part = tid & 7;
            float sv[4], cm = -INFINITY;
#pragma unroll
            for (int u = 0; u < 4; u++) {
                sv[u] = ss[hr][4 * part + u];
                cm = fmaxf(cm, sv[u]);
            }
            cm = fmaxf(cm, gpu_shfl_xor(cm, 1));
            cm = fmaxf(cm, gpu_shfl_xor(cm, 2));
            cm = fmaxf(cm, gpu_shfl_xor(cm, 4));
            const float m_old = m_s[hr], m_new = fmaxf(m_old, cm);
            float corr = 1.0f, p[4] = {0.0f, 0.0f, 0.0f, 0.0f}, psum = 0.0f;
            if (m_new != -INFINITY) {
                corr = expf(m_old - m_new);
#pragma unroll
                for (int u = 0; u < 4; u++) {
                    p[u] = expf(sv[u] - m_new);
                    psum += p[u];
                }
            }
            psum += gpu_shfl_xor(psum, 1);
            psum += gpu_shfl_xor(psum, 2);
            psum += gpu_shfl_xor(psum, 4);
            __half2 hp[2] = {__floats2half2_rn(p[0], p[1]), __floats2half2_rn(p[2], p[3])};
            *(uint2 *)&ps[hr][4 * part] = *(const uint2 *)hp;
            __syncwarp();
            if (part == 0) {
                m_s[hr] = m_new;
                l_s[hr] = l_s[hr] * corr + psum;
                c_s[hr] = corr;
            }
        }
        __syncthreads();

        /* O += P V: heads 16mt.., dims 128nf.. */
        {
            const float c0 = c_s[16 * mt + g], c1 = c_s[16 * mt + g + 8];
#pragma unroll
            for (int j = 0; j < 16; j++) {
                o[j][0] *= c0, o[j][1] *= c0;
                o[j][2] *= c1, o[j][3] *= c1;
            }
#pragma unroll
            for (int ks = 0; ks < AM_N; ks += 16) {
                uint32_t pa[4];
                am_ldm_x4(pa, &ps[16 * mt + (lane & 15)][ks + 8 * (lane >> 4)]);
#pragma unroll
                for (int np = 0; np < 8; np++) {
                    uint32_t vb[4];
                    am_ldm_x4_t(vb, &kv[ks + (lane & 7) + 8 * ((lane >> 3) & 1)]
                                       [128 * nf + 16 * np + 8 * (lane >> 4)]);
                    am_mma(o[2 * np], pa, vb[0], vb[1]);
                    am_mma(o[2 * np + 1], pa, vb[2], vb[3]);
                }
            }
        }
        __syncthreads(); /* kv and ps are refilled by the next chunk */
    }

    /* The sink joins the softmax: out = O · e^(m - mx) / (l · e^(m - mx) + e^(sink - mx)). */
#pragma unroll
    for (int half = 0; half < 2; half++) {
        const int hl = 16 * mt + g + 8 * half;
        const float m = m_s[hl], l = l_s[hl];
        const float sink = load_float(a.sinks_type, a.sinks, h0 + hl);
        const float mx = fmaxf(m, sink);
        const float fr = m == -INFINITY ? 0.0f : expf(m - mx);
        const float inv = fr / (l * fr + expf(sink - mx));
        float *orow = a.out + (t * a.n_head + h0 + hl) * AM_HD + 128 * nf + 2 * tq;
#pragma unroll
        for (int j = 0; j < 16; j++)
            *(float2 *)(orow + 8 * j) = make_float2(o[j][2 * half] * inv, o[j][2 * half + 1] * inv);
    }
}

bool cu_attention_mma(cu_backend *be, const cu_attn_mma_args *a, int64_t n_tok) {
    static int off = -1;
    if (off < 0) {
        const char *e = getenv("HALO_CUDA_ATTMMA");
        off = e && strcmp(e, "0") == 0;
    }
    const uintptr_t al =
        (uintptr_t)a->q | (uintptr_t)a->window | (uintptr_t)a->comp | (uintptr_t)a->out;
    if (off || be->naive || !be->mma || n_tok < 16 || a->head_dim != AM_HD || a->n_head % AM_H ||
        (al & 15) || n_tok > 0x7fffffff || a->n_head / AM_H > 65535 ||
        (a->select && a->k_sel > AM_MAX_SEL))
        return false;
    const int smem = AM_OFF_LIST + 4 * (a->select ? (int)a->k_sel : 0);
    static bool done; /* the attribute once, for the largest list */
    if (!cu_smem_attr(be, attention_mma_kernel, AM_OFF_LIST + 4 * AM_MAX_SEL, &done, "attention"))
        return true;
    dim3 grid((unsigned)n_tok, (unsigned)(a->n_head / AM_H));
    cu_launch(be, attention_mma_kernel, grid, AM_THREADS, smem, *a);
    CU_LAUNCHED(be, "attention", "attention_mma_kernel");
    return true;
}

#else /* HIP: no mma.sync */

bool cu_attention_mma(cu_backend *, const cu_attn_mma_args *, int64_t) {
    return false;
}

#endif
