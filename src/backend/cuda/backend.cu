/* CUDA backend: creation, buffers in the plan's pools, the stream, op scratch, failures and
 * sync, and the ops table. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/cuda/graph.h"
#include "backend/cuda/quant.cuh"

extern "C" {
#include "halo/plan.h"
extern const uint64_t halo_iq2xxs_grid[256];
extern const uint32_t halo_iq3xxs_grid[256];
extern const uint64_t halo_iq2xs_grid[512];
extern const uint64_t halo_iq2s_grid[1024];
extern const uint32_t halo_iq3s_grid[512];
extern const uint64_t halo_iq1s_grid[2048];
void cpu_rope_inv_freq(const halo_rope *rope, float *inv_freq);
}

typedef struct cu_backend_full {
    cu_backend be;
    char *grids; /* the i-quant codebooks, in grid_table's order */
} cu_backend_full;

/* The codebooks copied to device memory once per backend (all sizes multiples of 8 bytes). */
static const struct {
    const void *host;
    size_t bytes;
} grid_table[] = {
    {halo_iq2xxs_grid, sizeof halo_iq2xxs_grid}, {halo_iq3xxs_grid, sizeof halo_iq3xxs_grid},
    {halo_iq2xs_grid, sizeof halo_iq2xs_grid},   {halo_iq2s_grid, sizeof halo_iq2s_grid},
    {halo_iq1s_grid, sizeof halo_iq1s_grid},     {halo_iq3s_grid, sizeof halo_iq3s_grid}};
enum { N_GRIDS = sizeof grid_table / sizeof grid_table[0] };

cu_grids cu_grids_get(halo_backend *be) {
    const char *p[N_GRIDS];
    const char *at = ((cu_backend_full *)be)->grids;
    for (int i = 0; i < N_GRIDS; i++) {
        p[i] = at;
        at += grid_table[i].bytes;
    }
    cu_grids out = {(const uint64_t *)p[0], (const uint32_t *)p[1], (const uint64_t *)p[2],
                    (const uint64_t *)p[3], (const uint64_t *)p[4], (const uint32_t *)p[5],
                    cu_of(be)->grid_rep};
    return out;
}

bool cu_check(cu_backend *be, const char *op, const char *call, cudaError_t e) {
    if (e == cudaSuccess) return true;
    if (!be->failed) {
        be->failed = true;
        snprintf(be->fail, sizeof be->fail, "%s: %s: %s (%s)", op, call, cudaGetErrorString(e),
                 cudaGetErrorName(e));
    }
    (void)cudaGetLastError(); /* clear a non-sticky error so the next op starts clean */
    return false;
}

uint64_t cu_row_bytes(uint32_t type, int64_t n) {
    uint64_t bytes = 0;
    halo_type_bytes(type, (uint64_t)n, &bytes);
    return bytes;
}

bool cu_type_supported(cu_backend *be, uint32_t type, const char *op) {
    switch (type) {
    case HALO_TYPE_F32:
    case HALO_TYPE_F16:
    case HALO_TYPE_BF16:
    case HALO_TYPE_Q4_0:
    case HALO_TYPE_Q4_1:
    case HALO_TYPE_Q5_0:
    case HALO_TYPE_Q5_1:
    case HALO_TYPE_Q8_0:
    case HALO_TYPE_IQ4_NL:
    case HALO_TYPE_MXFP4:
    case HALO_TYPE_Q2_K:
    case HALO_TYPE_Q3_K:
    case HALO_TYPE_Q4_K:
    case HALO_TYPE_Q5_K:
    case HALO_TYPE_Q6_K:
    case HALO_TYPE_IQ2_XXS:
    case HALO_TYPE_IQ3_XXS:
    case HALO_TYPE_IQ2_XS:
    case HALO_TYPE_IQ2_S:
    case HALO_TYPE_IQ3_S:
    case HALO_TYPE_IQ1_S:
    case HALO_TYPE_IQ1_M:
    case HALO_TYPE_IQ4_XS:
        return true;
    default:
        if (!be->failed) {
            be->failed = true;
            snprintf(be->fail, sizeof be->fail,
                     "%s: weights of type %s are not supported on the " GPU_RUNTIME " backend yet",
                     op, halo_type_name(type));
        }
        return false;
    }
}

bool cu_float_only(cu_backend *be, uint32_t type, const char *op, const char *what) {
    if (type == HALO_TYPE_F32 || type == HALO_TYPE_F16 || type == HALO_TYPE_BF16) return true;
    if (!be->failed) {
        be->failed = true;
        snprintf(be->fail, sizeof be->fail,
                 "%s: %s of type %s is not supported on the " GPU_RUNTIME
                 " backend (f32, f16 or bf16 only)",
                 op, what, halo_type_name(type));
    }
    return false;
}

char *cu_scratch(cu_backend *be, uint64_t bytes, const char *op) {
    if (be->failed) return NULL;
    if (be->fail_at && ++be->n_scratch == be->fail_at) {
        be->failed = true;
        snprintf(be->fail, sizeof be->fail, "%s: out of memory for %s's scratch (injected)", op,
                 op);
        return NULL;
    }
    if (bytes <= be->scratch_cap) return be->scratch;
    /* Grow between ops: the stream must be done with the old scratch before it is freed (and
     * a capturing stream cannot be waited on: what it captured is launched first). */
    uint64_t cap = bytes > 2 * be->scratch_cap ? bytes : 2 * be->scratch_cap;
    cu_graph_break(be);
    if (!CU_OK(be, op, cudaStreamSynchronize(be->stream))) return NULL;
    if (be->scratch && !CU_OK(be, op, cudaFree(be->scratch))) return NULL;
    be->scratch = NULL;
    be->scratch_cap = 0;
    if (!CU_OK(be, op, cudaMalloc((void **)&be->scratch, cap))) return NULL;
    be->scratch_cap = cap;
    return be->scratch;
}

bool cu_upload(cu_backend *be, void *dst, const void *src, uint64_t bytes, const char *op) {
    be->n_upload++;
    if (!be->ring || bytes > be->ring_cap) {
        cu_graph_break(be); /* from pageable memory: not in a graph */
        return CU_OK(be, op, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, be->stream));
    }
    if (be->ring_used + bytes > be->ring_cap) {
        /* The ring is full: wait until the stream has read it, then start over. */
        cu_graph_break(be);
        if (!CU_OK(be, op, cudaStreamSynchronize(be->stream))) return false;
        be->ring_used = 0;
    }
    char *slot = be->ring + be->ring_used;
    memcpy(slot, src, bytes);
    be->ring_used += (bytes + 15) & ~15ull;
    return CU_OK(be, op, cudaMemcpyAsync(dst, slot, bytes, cudaMemcpyHostToDevice, be->stream));
}

bool cu_ints_pass(cu_backend *be, int32_t *dst, const int32_t *src, int64_t n, cu_ints *small,
                  const int32_t **dev, const char *op) {
    memset(small, 0, sizeof *small);
    if (n <= CU_INTS && !be->naive) {
        memcpy(small->v, src, (size_t)n * sizeof(int32_t));
        *dev = NULL;
        return true;
    }
    *dev = dst;
    return cu_upload(be, dst, src, (uint64_t)n * sizeof(int32_t), op);
}

/* ---- queued row copies ---------------------------------------------------------------------- */

/* One block row per descriptor (grid.y), blocks of it striding over its bytes. */
__global__ void copy_batch_kernel(cu_copy_batch b) {
    cu_pdl_entry();
    cu_copy_part(b.d[blockIdx.y], (uint64_t)blockIdx.x * blockDim.x + threadIdx.x,
                 (uint64_t)gridDim.x * blockDim.x);
}

static void prof_begin(cu_backend *be, uint64_t mark[2], cudaEvent_t *ev);
static void prof_end(cu_backend *be, int op, const uint64_t mark[2], cudaEvent_t ev);
/* Ops, then parts of ops (CU_PROF_* in cuda.cuh, not counted in the totals). */
enum {
    P_EMBED,
    P_MATMUL,
    P_RMS,
    P_ROPE,
    P_HCPRE,
    P_HCPOST,
    P_ATTN,
    P_POOL,
    P_TOPK,
    P_MOE,
    P_COPY,
    P_N,
    P_ALL = P_N + CU_PROF_PARTS
};

/* Runs the queued copies (before any other op, a read, a write or a sync). */
static void flush_copies(cu_backend *be) {
    cu_copy_batch *b = &be->copies;
    if (b->n == 0) return;
    if (!be->failed) {
        uint64_t mark[2];
        cudaEvent_t ev = NULL;
        prof_begin(be, mark, &ev);
        dim3 grid(cu_copy_blocks(b), (unsigned)b->n);
        cu_launch(be, copy_batch_kernel, grid, 256, 0, *b);
        CU_LAUNCHED(be, "copy", "copy_batch_kernel");
        prof_end(be, P_COPY, mark, ev);
    }
    b->n = 0;
    b->max_n = 0;
}

void cu_flush_copies(cu_backend *be) {
    flush_copies(be);
}

static bool overlaps(const char *a, uint64_t an, const char *b, uint64_t bn) {
    return a < b + bn && b < a + an;
}

bool cu_copies_touch(const cu_backend *be, const char *p, uint64_t n) {
    for (int i = 0; i < be->copies.n; i++) {
        const cu_copy_desc *q = &be->copies.d[i];
        if (overlaps(p, n, q->dst, q->n) || overlaps(p, n, q->src, q->n)) return true;
    }
    return false;
}

void cu_copy(halo_backend *hbe, halo_tensor *dst, const halo_tensor *src) {
    cu_backend *be = cu_of(hbe);
    if (be->failed) return;
    char *d = cu_ptr(dst);
    const char *s = cu_ptr(src);
    uint64_t n = halo_tensor_nbytes(src);
    if (n == 0 || d == s) return;
    cu_copy_batch *b = &be->copies;
    /* The queued copies run at once: one that reads or writes what an earlier one writes (or
     * writes what an earlier one reads) must wait for them. */
    for (int i = 0; i < b->n; i++) {
        const cu_copy_desc *q = &b->d[i];
        if (overlaps(d, n, q->dst, q->n) || overlaps(d, n, q->src, q->n) ||
            overlaps(s, n, q->dst, q->n)) {
            flush_copies(be);
            break;
        }
    }
    if (b->n > 0) { /* the next rows of the last copy on both sides: extend it */
        cu_copy_desc *q = &b->d[b->n - 1];
        if (q->dst + q->n == d && q->src + q->n == s) {
            q->n += n;
            if (q->n > b->max_n) b->max_n = q->n;
            return;
        }
    }
    if (b->n == CU_COPY_MAX) flush_copies(be);
    b->d[b->n].dst = d;
    b->d[b->n].src = s;
    b->d[b->n].n = n;
    b->n++;
    if (n > b->max_n) b->max_n = n;
}

/* ---- profiling (HALO_CUDA_PROFILE=1) ------------------------------------------------------ */

static const char *const prof_names[P_ALL] = {
    "embed",       "matmul",        "rms_norm",   "rope",      "hc_pre",
    "hc_post",     "attention",     "pool",       "topk",      "moe",
    "copy",        ". mm q8_0",     ". mm f16",   ". mm head", ". mm other",
    ". moe route", ". moe gate_up", ". moe down", ". moe sum"};

typedef struct prof_pend {
    cudaEvent_t a, b;
    int op, phase;
} prof_pend;

struct cu_prof {
    cudaEvent_t *free_ev;
    int n_free, cap_free;
    prof_pend *pend;
    int n_pend, cap_pend;
    int phase; /* 0 decode (steps of at most 8 tokens), 1 prefill */
    double ms[2][P_ALL];
    uint64_t calls[2][P_ALL], launches[2][P_ALL], uploads[2][P_ALL], tokens[2], steps[2];
    cudaEvent_t last; /* the start event of the op in progress */
};

static cudaEvent_t prof_event(cu_prof *p) {
    if (p->n_free > 0) return p->free_ev[--p->n_free];
    cudaEvent_t e = NULL;
    if (cudaEventCreate(&e) != cudaSuccess) {
        (void)cudaGetLastError();
        return NULL;
    }
    return e;
}

static void prof_release(cu_prof *p, cudaEvent_t e) {
    if (!e) return;
    if (p->n_free == p->cap_free) {
        int cap = p->cap_free ? 2 * p->cap_free : 64;
        cudaEvent_t *n = (cudaEvent_t *)realloc(p->free_ev, (size_t)cap * sizeof *n);
        if (!n) {
            (void)cudaEventDestroy(e);
            return;
        }
        p->free_ev = n;
        p->cap_free = cap;
    }
    p->free_ev[p->n_free++] = e;
}

static void prof_begin(cu_backend *be, uint64_t mark[2], cudaEvent_t *ev) {
    mark[0] = be->n_launch;
    mark[1] = be->n_upload;
    *ev = NULL;
    if (!be->prof) return;
    *ev = prof_event(be->prof);
    if (*ev) (void)cudaEventRecord(*ev, be->stream);
}

static void prof_end(cu_backend *be, int op, const uint64_t mark[2], cudaEvent_t ev) {
    cu_prof *p = be->prof;
    if (!p) return;
    int ph = p->phase;
    p->calls[ph][op]++;
    p->launches[ph][op] += be->n_launch - mark[0];
    p->uploads[ph][op] += be->n_upload - mark[1];
    if (!ev) return;
    cudaEvent_t e2 = prof_event(p);
    if (!e2) {
        prof_release(p, ev);
        return;
    }
    (void)cudaEventRecord(e2, be->stream);
    if (p->n_pend == p->cap_pend) {
        int cap = p->cap_pend ? 2 * p->cap_pend : 256;
        prof_pend *n = (prof_pend *)realloc(p->pend, (size_t)cap * sizeof *n);
        if (!n) {
            prof_release(p, ev);
            prof_release(p, e2);
            return;
        }
        p->pend = n;
        p->cap_pend = cap;
    }
    p->pend[p->n_pend++] = (prof_pend){ev, e2, op, ph};
}

/* After a stream sync: the times of the ops recorded since the last one. */
static void prof_collect(cu_prof *p) {
    if (!p) return;
    for (int i = 0; i < p->n_pend; i++) {
        float ms = 0;
        if (cudaEventElapsedTime(&ms, p->pend[i].a, p->pend[i].b) == cudaSuccess)
            p->ms[p->pend[i].phase][p->pend[i].op] += ms;
        else
            (void)cudaGetLastError();
        prof_release(p, p->pend[i].a);
        prof_release(p, p->pend[i].b);
    }
    p->n_pend = 0;
}

static void prof_print(cu_prof *p) {
    static const char *const phase[2] = {"decode (steps of <= 8 tokens)", "prefill"};
    for (int ph = 0; ph < 2; ph++) {
        if (!p->tokens[ph]) continue;
        double tok = (double)p->tokens[ph], total = 0, launches = 0, uploads = 0;
        for (int o = 0; o < P_N; o++) {
            total += p->ms[ph][o];
            launches += (double)p->launches[ph][o];
            uploads += (double)p->uploads[ph][o];
        }
        fprintf(stderr,
                "halo cuda profile, %s: %llu steps, %llu tokens; per token: %.1f launches, "
                "%.1f uploads, %.1f us of device time in ops\n",
                phase[ph], (unsigned long long)p->steps[ph], (unsigned long long)p->tokens[ph],
                launches / tok, uploads / tok, 1000.0 * total / tok);
        fprintf(stderr, "  %-10s %10s %12s %10s %14s %7s\n", "op", "calls/tok", "launches/tok",
                "uploads/tok", "device us/tok", "share");
        for (int o = 0; o < P_ALL; o++) {
            if (!p->calls[ph][o]) continue;
            fprintf(stderr, "  %-10s %10.1f %12.1f %10.1f %14.1f %6.1f%%\n", prof_names[o],
                    (double)p->calls[ph][o] / tok, (double)p->launches[ph][o] / tok,
                    (double)p->uploads[ph][o] / tok, 1000.0 * p->ms[ph][o] / tok,
                    total > 0 ? 100.0 * p->ms[ph][o] / total : 0.0);
        }
    }
}

static void prof_free(cu_prof *p) {
    if (!p) return;
    prof_collect(p);
    for (int i = 0; i < p->n_free; i++)
        (void)cudaEventDestroy(p->free_ev[i]);
    free(p->free_ev);
    free(p->pend);
    free(p);
}

void cu_prof_begin(cu_backend *be, uint64_t mark[2], cudaEvent_t *ev) {
    prof_begin(be, mark, ev);
}
void cu_prof_end(cu_backend *be, int part, const uint64_t mark[2], cudaEvent_t ev) {
    prof_end(be, P_N + part, mark, ev);
}

/* ---- the ops, each after the queued copies, timed when profiling ------------------------- */

/* embed_tokens: the embed's token count (it may start a captured step), -1 for other ops. */
#define OP_BEGIN(hbe, op, embed_tokens)                                                            \
    cu_backend *be_ = cu_of(hbe);                                                                  \
    cu_graph_op(be_, prof_names[op], (embed_tokens));                                              \
    cu_ahead_op(be_);                                                                              \
    if ((op) == P_RMS)                                                                             \
        cu_hcp_flush(be_); /* a pending hc_pre may run the norm (cu_hc2_norm) */                   \
    else if ((op) != P_HCPRE)                                                                      \
        cu_hc_flush(be_); /* hc_pre may run them itself */                                         \
    if ((op) != P_HCPRE && (op) != P_HCPOST) cu_sum_flush(be_); /* or hc_post take it on */        \
    if ((op) == P_RMS)                                                                             \
        cu_np_flush(be_); /* a pending norm + rope may pair with this norm's rope (cu_rope) */    \
    else if ((op) == P_MOE)                                                                        \
        cu_nrp_flush(be_); /* the moe may run the pending norm itself */                          \
    else if ((op) != P_ROPE)                                                                       \
        cu_norm_flush(be_); /* rope may run them itself */                                         \
    if ((op) != P_ROPE) flush_copies(be_); /* a rope may run them (cu_rope) */                    \
    uint64_t mark_[2];                                                                             \
    cudaEvent_t ev_;                                                                               \
    prof_begin(be_, mark_, &ev_)
#define OP_END(op) prof_end(be_, (op), mark_, ev_)

static void op_embed(halo_backend *hbe, const halo_tensor *table, const int32_t *tokens,
                     halo_tensor *out) {
    cu_backend *be = cu_of(hbe);
    if (be->prof) {
        int ph = out->ne[1] <= 8 ? 0 : 1;
        be->prof->phase = ph;
        be->prof->tokens[ph] += (uint64_t)out->ne[1];
        be->prof->steps[ph]++;
    }
    OP_BEGIN(hbe, P_EMBED, out->ne[1]);
    cu_embed(hbe, table, tokens, out);
    OP_END(P_EMBED);
}
/* A decode projection of device-resident weights as a node of the L2 lookahead (ahead.cu):
 * 4 MiB of weights or more; the router and the indexer's small ones are not. */
static void ahead_weights(cu_backend *be, const halo_tensor *x, uint32_t n,
                          const halo_tensor *const *w) {
    if (!be->ahead || x->ne[1] != 1 || n == 0 || n > 8) return;
    const char *p[8];
    uint64_t b[8], total = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (w[i]->buf->kind != CU_DEVICE) return;
        p[i] = cu_ptr(w[i]);
        b[i] = halo_tensor_nbytes(w[i]);
        total += b[i];
    }
    if (total >= (4u << 20)) cu_ahead_node_(be, p[0], (int)n, p, b);
}

static void op_matmul(halo_backend *hbe, const halo_tensor *w, const halo_tensor *x,
                      uint32_t groups, halo_tensor *out) {
    OP_BEGIN(hbe, P_MATMUL, -1);
    uint64_t mark2[2];
    cudaEvent_t ev2 = NULL;
    if (be_->prof) prof_begin(be_, mark2, &ev2);
    cu_matmul(hbe, w, x, groups, out);
    ahead_weights(be_, x, 1, &w);
    if (be_->prof) {
        int part = w->ne[1] > 65536            ? CU_PROF_MM_HEAD
                   : w->type == HALO_TYPE_Q8_0 ? CU_PROF_MM_Q8
                   : w->type == HALO_TYPE_F16  ? CU_PROF_MM_F16
                                               : CU_PROF_MM_OTHER;
        prof_end(be_, P_N + part, mark2, ev2);
    }
    OP_END(P_MATMUL);
}
static void op_matmul_multi(halo_backend *hbe, const halo_tensor *x, const halo_tensor *norm,
                            float eps, uint32_t n, const halo_tensor *const *w,
                            halo_tensor *const *out) {
    OP_BEGIN(hbe, P_MATMUL, -1);
    cu_matmul_multi(hbe, x, norm, eps, n, w, out);
    ahead_weights(be_, x, n, w);
    OP_END(P_MATMUL);
}
static void op_rms_norm(halo_backend *hbe, halo_tensor *x, uint32_t width,
                        const halo_tensor *weight, float eps) {
    OP_BEGIN(hbe, P_RMS, -1);
    cu_rms_norm_op(hbe, x, width, weight, eps);
    OP_END(P_RMS);
}
static void op_rope(halo_backend *hbe, halo_tensor *x, const int32_t *pos, const halo_rope *rope,
                    bool inverse) {
    OP_BEGIN(hbe, P_ROPE, -1);
    cu_rope(hbe, x, pos, rope, inverse);
    OP_END(P_ROPE);
}
static void op_hc_pre(halo_backend *hbe, const halo_hc_args *a) {
    OP_BEGIN(hbe, P_HCPRE, -1);
    cu_hc_pre(hbe, a);
    OP_END(P_HCPRE);
}
static void op_hc_post(halo_backend *hbe, halo_tensor *streams, const halo_tensor *y,
                       const halo_tensor *post, const halo_tensor *comb) {
    OP_BEGIN(hbe, P_HCPOST, -1);
    cu_hc_post(hbe, streams, y, post, comb);
    OP_END(P_HCPOST);
}
static void op_attention(halo_backend *hbe, const halo_attn_args *a) {
    OP_BEGIN(hbe, P_ATTN, -1);
    cu_attention(hbe, a);
    OP_END(P_ATTN);
}
static void op_pool(halo_backend *hbe, const halo_pool_args *a) {
    OP_BEGIN(hbe, P_POOL, -1);
    cu_pool(hbe, a);
    OP_END(P_POOL);
}
static void op_topk(halo_backend *hbe, const halo_topk_args *a) {
    OP_BEGIN(hbe, P_TOPK, -1);
    cu_topk(hbe, a);
    OP_END(P_TOPK);
}
static void op_moe(halo_backend *hbe, const halo_moe_args *a) {
    OP_BEGIN(hbe, P_MOE, -1);
    cu_moe(hbe, a);
    /* A node of the lookahead's chain (the next layer's projections follow it); its experts
     * are the routing's, so nothing is prefetched for it. */
    if (be_->ahead && a->x->ne[1] == 1) cu_ahead_node_(be_, cu_ptr(a->gate_inp), 0, NULL, NULL);
    OP_END(P_MOE);
}
static void op_copy(halo_backend *hbe, halo_tensor *dst, const halo_tensor *src) {
    cu_backend *be = cu_of(hbe);
    cu_graph_op(be, "copy", -1);
    cu_hc_flush(be); /* a deferred hc_post or norm before the copies queued after it */
    cu_sum_flush(be);
    cu_norm_flush(be);
    if (be->naive) { /* the copies as they were: one memcpy each */
        flush_copies(be);
        if (!be->failed)
            CU_OK(be, "copy",
                  cudaMemcpyAsync(cu_ptr(dst), cu_ptr(src), halo_tensor_nbytes(src),
                                  cudaMemcpyDefault, be->stream));
        if (be->prof) be->prof->calls[be->prof->phase][P_COPY]++, be->n_upload++;
        return;
    }
    if (be->prof) be->prof->calls[be->prof->phase][P_COPY]++;
    cu_copy(hbe, dst, src);
}

bool cu_rope_freq_make(cu_backend *be, const halo_rope *rope, cu_rope_freq *f, const char *op) {
    if (rope->n_rot / 2 > CU_MAX_ROT_PAIRS || rope->n_rot % 2) {
        if (!be->failed) {
            be->failed = true;
            snprintf(be->fail, sizeof be->fail, "%s: %u rotated channels (at most %d)", op,
                     rope->n_rot, 2 * CU_MAX_ROT_PAIRS);
        }
        return false;
    }
    f->n_rot = rope->n_rot;
    cpu_rope_inv_freq(rope, f->inv_freq);
    return true;
}

/* ---- buffers ----------------------------------------------------------------------------- */

static halo_status fail_call(halo_error *err, halo_status st, const char *what, uint64_t bytes,
                             cudaError_t e) {
    return halo_fail(err, st, GPU_RUNTIME " backend: %s of %llu bytes: %s", what,
                     (unsigned long long)bytes, cudaGetErrorString(e));
}

static halo_status buf_alloc_pool(halo_backend *hbe, uint32_t pool, uint64_t bytes, halo_buf **out,
                                  halo_error *err) {
    cudaStream_t stream = cu_of(hbe)->stream;
    cu_graph_break(cu_of(hbe)); /* the allocation waits on the stream */
    halo_buf *b = (halo_buf *)calloc(1, sizeof *b);
    if (!b) return halo_fail(err, HALO_E_NOMEM, "out of memory");
    uint64_t n = bytes ? (bytes + 255) & ~255ull : 256;
    cudaError_t e = cudaSuccess;
    const char *what = "";
    switch (pool) {
    case HALO_POOL_DEVICE:
        what = "cudaMalloc";
        b->kind = CU_DEVICE;
        e = cudaMalloc((void **)&b->dev, n);
        /* On the backend's stream: our stream does not wait for the legacy default stream, so
         * a plain cudaMemset could land after the first write to the buffer. */
        if (e == cudaSuccess) e = cudaMemsetAsync(b->dev, 0, n, stream);
        if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
        break;
    case HALO_POOL_MANAGED: {
        /* More managed memory than the GPU has free can hang a discrete GPU under migration
         * pressure (not only this process): refuse it rather than oversubscribe. */
        size_t free_b = 0, total_b = 0;
        if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess && n > free_b) {
            free(b);
            return halo_fail(
                err, HALO_E_NOMEM,
                GPU_RUNTIME " backend: %.2f GiB of managed memory asked, more than the "
                            "GPU's %.2f GiB free: managed memory is not oversubscribed "
                            "(use --weights host for weights larger than the GPU)",
                (double)n / (double)(1ull << 30), (double)free_b / (double)(1ull << 30));
        }
        what = "cudaMallocManaged";
        b->kind = CU_MANAGED;
        e = cudaMallocManaged((void **)&b->dev, n, cudaMemAttachGlobal);
        if (e == cudaSuccess) e = cudaMemsetAsync(b->dev, 0, n, stream);
        if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
        break;
    }
    case HALO_POOL_GPU_HOST:
#ifdef HALO_HIP
        what = "hipHostMalloc";
#else
        what = "cudaHostAlloc";
#endif
        b->kind = CU_HOST_ALLOC;
        e = cudaHostAlloc(&b->host, n, cudaHostAllocMapped);
        if (e == cudaSuccess) e = cudaHostGetDevicePointer((void **)&b->dev, b->host, 0);
        if (e == cudaSuccess) memset(b->host, 0, n);
        break;
    default:
        free(b);
        return halo_fail(err, HALO_E_UNSUPPORTED,
                         GPU_RUNTIME " backend: cannot compute on memory of the %s pool",
                         halo_pool_name((halo_pool_kind)pool));
    }
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        if (b->kind == CU_HOST_ALLOC && b->host)
            (void)cudaFreeHost(b->host);
        else if (b->dev)
            (void)cudaFree(b->dev);
        free(b);
        return fail_call(err, e == cudaErrorMemoryAllocation ? HALO_E_NOMEM : HALO_E_IO, what,
                         bytes, e);
    }
    b->size = bytes;
    *out = b;
    return HALO_OK;
}

static halo_status buf_alloc(halo_backend *be, uint64_t bytes, halo_buf **out, halo_error *err) {
    return buf_alloc_pool(be, HALO_POOL_DEVICE, bytes, out, err);
}

static void buf_free(halo_backend *hbe, halo_buf *b) {
    if (!b) return;
    cu_backend *be = cu_of(hbe);
    cu_hc_flush(be);
    cu_sum_flush(be);
    cu_norm_flush(be);
    flush_copies(be);
    cu_graph_break(be);
    /* Frees wait for the device; a buffer may be freed right after the ops that used it. */
    (void)cudaStreamSynchronize(be->stream);
    switch (b->kind) {
    case CU_DEVICE:
    case CU_MANAGED:
        (void)cudaFree(b->dev);
        break;
    case CU_HOST_ALLOC:
        (void)cudaFreeHost(b->host);
        break;
    case CU_REGISTERED:
        (void)cudaHostUnregister(b->host);
        break;
    }
    free(b);
}

static halo_status buf_wrap_host(halo_backend *hbe, void *data, uint64_t bytes, halo_buf **out,
                                 halo_error *err) {
    cu_graph_break(cu_of(hbe));
    halo_buf *b = (halo_buf *)calloc(1, sizeof *b);
    if (!b) return halo_fail(err, HALO_E_NOMEM, "out of memory");
    /* Pin whole pages: registration works on page ranges. */
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    uintptr_t p0 = (uintptr_t)data / page * page;
    uintptr_t p1 = ((uintptr_t)data + bytes + page - 1) / page * page;
    void *dev = NULL;
    cudaError_t e = cudaHostRegister((void *)p0, p1 - p0, cudaHostRegisterMapped);
    if (e == cudaSuccess) e = cudaHostGetDevicePointer(&dev, (void *)p0, 0);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        if (dev) (void)cudaHostUnregister((void *)p0);
        free(b);
        return fail_call(err, HALO_E_NOMEM, "cudaHostRegister (GPU-visible host memory)", bytes, e);
    }
    b->kind = CU_REGISTERED;
    b->host = (void *)p0;
    b->dev = (char *)dev + ((uintptr_t)data - p0);
    b->size = bytes;
    *out = b;
    return HALO_OK;
}

static halo_status copy_sync(cu_backend *be, void *dst, const void *src, uint64_t n,
                             cudaMemcpyKind kind, const char *what, halo_error *err) {
    cudaError_t e = cudaMemcpyAsync(dst, src, n, kind, be->stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(be->stream);
    if (e != cudaSuccess)
        return halo_fail(err, HALO_E_IO, GPU_RUNTIME " backend: %s of %llu bytes: %s", what,
                         (unsigned long long)n, cudaGetErrorString(e));
    return HALO_OK;
}

static halo_status buf_write(halo_backend *hbe, halo_buf *b, uint64_t offset, const void *src,
                             uint64_t n, halo_error *err) {
    cu_hc_flush(cu_of(hbe));
    cu_sum_flush(cu_of(hbe));
    cu_norm_flush(cu_of(hbe));
    flush_copies(cu_of(hbe));
    cu_graph_break(cu_of(hbe));
    if (offset > b->size || n > b->size - offset)
        return halo_fail(err, HALO_E_OUT_OF_BOUNDS,
                         GPU_RUNTIME " backend: write past a buffer's end");
    return copy_sync(cu_of(hbe), b->dev + offset, src, n, cudaMemcpyHostToDevice, "buf_write", err);
}

/* Reads of RD_MIN .. RD_MAX bytes from device memory go through a pinned staging buffer
 * (be->rd, grown to the largest such read): a copy into pageable memory is staged by the
 * driver in pieces, and a decode step ends with one of 517 KB (the logits) right after its
 * sync, on the critical path between two steps. Opt-in (HALO_CUDA_PINREAD=1): by default
 * straight into dst (be->pinread says why). */
enum { RD_MIN = 64 << 10, RD_MAX = 64 << 20 };
static bool rd_room(cu_backend *be, uint64_t n) {
    if (be->rd && n <= be->rd_cap) return true;
    if (be->rd) (void)cudaFreeHost(be->rd);
    be->rd = NULL;
    be->rd_cap = 0;
    if (cudaHostAlloc((void **)&be->rd, n, cudaHostAllocMapped) != cudaSuccess) {
        (void)cudaGetLastError();
        be->rd = NULL;
        return false; /* straight into dst */
    }
    be->rd_cap = n;
    return true;
}

static halo_status buf_read(halo_backend *hbe, const halo_buf *b, uint64_t offset, void *dst,
                            uint64_t n, halo_error *err) {
    cu_hc_flush(cu_of(hbe));
    cu_sum_flush(cu_of(hbe));
    cu_norm_flush(cu_of(hbe));
    flush_copies(cu_of(hbe));
    cu_graph_break(cu_of(hbe));
    if (offset > b->size || n > b->size - offset)
        return halo_fail(err, HALO_E_OUT_OF_BOUNDS,
                         GPU_RUNTIME " backend: read past a buffer's end");
    cu_backend *be = cu_of(hbe);
    if (b->kind == CU_DEVICE && n >= RD_MIN && n <= RD_MAX && be->pinread && rd_room(be, n)) {
        halo_status st = copy_sync(be, be->rd, b->dev + offset, n, cudaMemcpyDeviceToHost,
                                   "buf_read", err);
        if (st == HALO_OK) memcpy(dst, be->rd, n);
        return st;
    }
    return copy_sync(be, dst, b->dev + offset, n, cudaMemcpyDeviceToHost, "buf_read", err);
}

/* The first failure since the last report, as an error (and cleared). */
static halo_status report(cu_backend *be, halo_error *err) {
    if (!be->failed) return HALO_OK;
    be->failed = false;
    bool nomem = strstr(be->fail, "out of memory") != NULL;
    bool unsupported = strstr(be->fail, "not supported") != NULL;
    return halo_fail(err,
                     nomem         ? HALO_E_NOMEM
                     : unsupported ? HALO_E_UNSUPPORTED
                                   : HALO_E_IO,
                     GPU_RUNTIME " backend: %s", be->fail);
}

static halo_status sync(halo_backend *hbe, halo_error *err) {
    cu_backend *be = cu_of(hbe);
    cu_hc_flush(be);
    cu_sum_flush(be);
    cu_norm_flush(be);
    flush_copies(be);
    cu_graph_piece_end(be); /* the step's last captured piece (the output head) */
    /* A kernel that faulted reports here, after the op that launched it returned. */
    const double t0 = cu_host_now();
    cu_check(be, "a queued kernel", "cudaStreamSynchronize", cudaStreamSynchronize(be->stream));
    cu_graph_step_done(be, cu_host_now() - t0);
    cu_trace_step(be);
    cu_ahead_sync(be);
    be->ring_used = 0; /* the stream has read every staged input */
    prof_collect(be->prof);
    return report(be, err);
}

/* Launch and scratch failures only: the stream keeps running ahead of the host. The forward
 * checks after every layer: a captured layer is launched here, so the GPU runs it while the
 * host captures the next. */
static halo_status check(halo_backend *hbe, halo_error *err) {
    cu_graph_piece_end(cu_of(hbe));
    return report(cu_of(hbe), err);
}

static void destroy(halo_backend *hbe) {
    if (!hbe) return;
    cu_backend *be = cu_of(hbe);
    cu_hc_flush(be);
    cu_sum_flush(be);
    cu_norm_flush(be);
    flush_copies(be);
    cu_graph_break(be);
    (void)cudaStreamSynchronize(be->stream);
    cu_graph_free(be);
    cu_ahead_free(be);
    cu_trace_free(be);
    cu_hc_free(be);
    if (be->prof) {
        prof_collect(be->prof);
        prof_print(be->prof);
        prof_free(be->prof);
    }
    if (be->ring) (void)cudaFreeHost(be->ring);
    if (be->rd) (void)cudaFreeHost(be->rd);
    (void)cudaFree(be->scratch);
    (void)cudaFree(((cu_backend_full *)be)->grids);
    (void)cudaStreamDestroy(be->stream);
    free(be);
}

static halo_backend_ops make_ops(void) {
    halo_backend_ops o;
    memset(&o, 0, sizeof o);
    o.name = GPU_RUNTIME;
    o.destroy = destroy;
    o.buf_alloc = buf_alloc;
    o.buf_alloc_pool = buf_alloc_pool;
    o.buf_free = buf_free;
    o.buf_wrap_host = buf_wrap_host;
    o.buf_write = buf_write;
    o.buf_read = buf_read;
    o.embed = op_embed;
    o.matmul = op_matmul;
    o.matmul_multi = op_matmul_multi;
    o.rms_norm = op_rms_norm;
    o.rope = op_rope;
    o.hc_pre = op_hc_pre;
    o.hc_post = op_hc_post;
    o.attention = op_attention;
    o.pool = op_pool;
    o.topk = op_topk;
    o.moe = op_moe;
    o.copy = op_copy;
    o.sync = sync;
    o.check = check;
    return o;
}

static const halo_backend_ops cu_ops = make_ops();

extern "C" bool halo_backend_cuda_graph_stats(halo_backend *hbe, halo_cuda_graph_stats *out) {
    memset(out, 0, sizeof *out);
    if (!hbe || hbe->ops != &cu_ops) return false;
    cu_graph_stats(cu_of(hbe), out);
    out->scratch_requests = (uint64_t)cu_of(hbe)->n_scratch;
    out->launches = cu_of(hbe)->n_launch;
    return true;
}

extern "C" bool halo_backend_cuda_set_precise(halo_backend *hbe, bool precise) {
    if (!hbe || hbe->ops != &cu_ops) return false;
    const char *env = getenv("HALO_CUDA_MMA");
    cu_of(hbe)->mma = env && *env ? strcmp(env, "0") != 0 : !precise;
    const char *q = getenv("HALO_CUDA_INTDOT"); /* the int8 one-token path (mvq.cu) */
    cu_of(hbe)->intdot = q && *q ? strcmp(q, "0") != 0 : !precise;
    return true;
}

extern "C" const char *halo_backend_cuda_flavor(void) {
    return GPU_RUNTIME;
}

/* A switch set to 0 in the environment (HALO_CUDA_X=0 turns a fast path off). */
static bool env_off(const char *name) {
    const char *v = getenv(name);
    return v && strcmp(v, "0") == 0;
}

extern "C" halo_status halo_backend_cuda_create(int device, halo_backend **out, halo_error *err) {
    *out = NULL;
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
        (void)cudaGetLastError();
        return halo_fail(err, HALO_E_UNSUPPORTED,
                         "no usable " GPU_RUNTIME " GPU: %s (" GPU_RUNTIME "GetDeviceCount: %s)",
                         e == cudaSuccess ? "the driver sees none"
                                          : "no GPU driver here, or one older than this runtime",
                         e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    }
    if (device < 0 || device >= count)
        return halo_fail(err, HALO_E_INVALID_ARG, GPU_RUNTIME " device %d: only %d present", device,
                         count);
    cu_backend_full *full = (cu_backend_full *)calloc(1, sizeof *full);
    if (!full) return halo_fail(err, HALO_E_NOMEM, "out of memory");
    cu_backend *be = &full->be;
    be->base.ops = &cu_ops;
    be->device = device;
    size_t grid_bytes = 0;
    for (int i = 0; i < N_GRIDS; i++)
        grid_bytes += grid_table[i].bytes;
    e = cudaSetDevice(device);
    if (e == cudaSuccess)
        e = cudaDeviceGetAttribute(&be->sm_count, cudaDevAttrMultiProcessorCount, device);
    if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&be->stream, cudaStreamNonBlocking);
    /* After the grids: CU_COUNTERS zeroed counters (kernels whose last block resets its own). */
    const size_t counters_at = (grid_bytes + 255) & ~(size_t)255;
    if (e == cudaSuccess)
        e = cudaMalloc((void **)&full->grids, counters_at + CU_COUNTERS * sizeof(unsigned));
    for (size_t i = 0, at = 0; e == cudaSuccess && i < N_GRIDS; at += grid_table[i++].bytes)
        e = cudaMemcpyAsync(full->grids + at, grid_table[i].host, grid_table[i].bytes,
                            cudaMemcpyHostToDevice, be->stream);
    if (e == cudaSuccess) {
        be->counters = (unsigned *)(full->grids + counters_at);
        e = cudaMemsetAsync(be->counters, 0, CU_COUNTERS * sizeof(unsigned), be->stream);
    }
    if (e == cudaSuccess) e = cudaStreamSynchronize(be->stream);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        if (full->grids) (void)cudaFree(full->grids);
        if (be->stream) (void)cudaStreamDestroy(be->stream);
        free(full);
        return halo_fail(err, HALO_E_UNSUPPORTED, GPU_RUNTIME " device %d: cannot start: %s",
                         device, cudaGetErrorString(e));
    }
    const char *fail = getenv("HALO_TEST_FAIL_SCRATCH");
    be->fail_at = fail ? strtoll(fail, NULL, 10) : 0;
    const char *naive = getenv("HALO_CUDA_NAIVE"), *prof = getenv("HALO_CUDA_PROFILE");
    be->naive = naive && *naive && strcmp(naive, "0") != 0;
    /* precise unless HALO_CUDA_MMA=1 / HALO_CUDA_INTDOT=1 */
    halo_backend_cuda_set_precise(&be->base, true);
    if (prof && *prof && strcmp(prof, "0") != 0) be->prof = (cu_prof *)calloc(1, sizeof(cu_prof));
#ifndef HALO_HIP
    /* Programmatic dependent launch where the GPU has it (sm_90+), not when profiling (the
     * events between ops would time overlapping kernels) nor in naive mode. */
    int major = 0;
    const char *pdl = getenv("HALO_CUDA_PDL");
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess)
        (void)cudaGetLastError(), major = 0;
    be->pdl = major >= 9 && !be->naive && !be->prof && !(pdl && strcmp(pdl, "0") == 0);
#endif
    const char *r1 = getenv("HALO_CUDA_ROUTE1");
    be->route1 = !be->naive && !(r1 && strcmp(r1, "0") == 0);
    be->route_rank = !env_off("HALO_CUDA_ROUTERANK");
    /* Opt-in: the session's final 43-layer A/B measured nothing for it (tg64 143.80 without,
     * 142.98 with; 85 us between steps either way, once the engine stopped allocating a fresh
     * logits row a token). */
    const char *pr = getenv("HALO_CUDA_PINREAD");
    be->pinread = !be->naive && pr && strcmp(pr, "1") == 0;
    const char *h1 = getenv("HALO_CUDA_HC1");
    be->hc1 = !be->naive && !(h1 && strcmp(h1, "0") == 0);
    /* The IQ2_XXS grid's copies in the int8 kernels' shared memory (mvq.cuh): 16 (log2 4)
     * unless HALO_CUDA_GRIDREP says 1, 2, 4 or 8. */
    const char *rep = getenv("HALO_CUDA_GRIDREP");
    const int rep_n = rep && *rep ? atoi(rep) : 16;
    be->grid_rep = rep_n >= 16 ? 4 : rep_n >= 8 ? 3 : rep_n >= 4 ? 2 : rep_n >= 2 ? 1 : 0;
    const char *mu = getenv("HALO_CUDA_MULTI");
    be->multi = !be->naive && !(mu && strcmp(mu, "0") == 0);
    const char *ho = getenv("HALO_CUDA_HOLD");
    be->hold = !(ho && strcmp(ho, "0") == 0);
    const char *ea = getenv("HALO_CUDA_EARLY");
    be->early = !(ea && strcmp(ea, "0") == 0);
    /* HALO_CUDA_EARLY=N (N > 1): N bytes of each warp's rows (rounded to 128), for measuring */
    be->early_bytes = 8192;
    if (ea && atol(ea) > 1) be->early_bytes = (uint32_t)((atol(ea) + 127) / 128 * 128);
    be->score_nj = !env_off("HALO_CUDA_SCORENJ");
    be->hc2issue = !env_off("HALO_CUDA_HC2ISSUE");
    be->pool_issue = !env_off("HALO_CUDA_POOLISSUE");
    be->qbatch = !env_off("HALO_CUDA_QBATCH");
    const char *asp = getenv("HALO_CUDA_ATTSPLIT");
    be->att_split = asp && *asp ? atoi(asp) : 160;
    if (be->att_split < 0 || be->naive) be->att_split = 0;
    const char *msm = getenv("HALO_CUDA_MVQSM");
    be->mvq_sm = msm && atoi(msm) > 0 ? atoi(msm) : 0;
    /* Opt-in (HALO_CUDA_MVQSPLIT=1): cuda-dense-2's 4-layer trace had mvq_dense at 14.84 us a
     * launch with it, 14.91 without (out_a and out_b together): no gain worth the atomics. */
    const char *msp = getenv("HALO_CUDA_MVQSPLIT");
    be->mvq_split = msp && strcmp(msp, "1") == 0;
    const char *mring = getenv("HALO_CUDA_MVQRING");
    be->mvq_ring = mring && atoi(mring) == 7 ? 7 : 0;
    /* Opt-in (HALO_CUDA_PDLFIRST=1): request cuda-decode-1 measured no gain (4L tg64 753 with
     * it against 768 without, in a run disturbed by a test still on the GPU). */
    const char *pf = getenv("HALO_CUDA_PDLFIRST");
    be->pdl_first = be->pdl && pf && strcmp(pf, "1") == 0;
    const char *at1 = getenv("HALO_CUDA_ATT1");
    be->att1 = !be->naive && !(at1 && strcmp(at1, "0") == 0);
    be->hclead = !be->naive && !env_off("HALO_CUDA_HCLEAD");
    be->normrope = !be->naive && !env_off("HALO_CUDA_NORMROPE");
    be->sumfuse = !be->naive && !env_off("HALO_CUDA_SUMFUSE");
    be->ahead2 = !env_off("HALO_CUDA_AHEAD2");
    be->two = !env_off("HALO_CUDA_TWO");
    const char *gf = getenv("HALO_CUDA_GUFUSE"); /* opt-in until measured faster */
    be->gufuse = gf && (strcmp(gf, "1") == 0 || strcmp(gf, "2") == 0) ? atoi(gf) : 0;
    const char *dh = getenv("HALO_CUDA_DNHOLD"); /* opt-in until measured */
    be->dnhold = dh && (strcmp(dh, "1") == 0 || strcmp(dh, "2") == 0) ? atoi(dh) : 0;
    const char *rf = getenv("HALO_CUDA_ROUTEFUSE"); /* opt-in until measured */
    be->routefuse = !be->naive && rf && strcmp(rf, "1") == 0;
    be->hcfuse = !be->naive && !env_off("HALO_CUDA_HCFUSE");
    be->nrpair = be->normrope && !env_off("HALO_CUDA_NRPAIR");
    be->ropecopy = !be->naive && !env_off("HALO_CUDA_ROPECOPY");
#ifndef HALO_HIP
    /* Opt-in (HALO_CUDA_HCPOST2=1): in cuda-dense-2's 43-layer trace hcpost2_kernel took 16.5 us
     * a launch against ~12 us for hcpost1 + hc2 (and 2.4 for the ffn norm it takes on): the grid
     * barrier costs more than the launch boundary it saves. */
    const char *h2 = getenv("HALO_CUDA_HCPOST2");
    be->hcpost2 = be->hcfuse && h2 && strcmp(h2, "1") == 0;
#endif
    be->hcnorm = be->hcpost2 && !env_off("HALO_CUDA_HCNORM"); /* after hcpost2 */
    be->qcost[0] = 2.0, be->qcost[1] = 1.0, be->qcost[2] = 0.8;
    const char *qc = getenv("HALO_CUDA_QCOST");
    double q0, q1, q2;
    if (qc && sscanf(qc, "%lf,%lf,%lf", &q0, &q1, &q2) == 3 && q0 > 0 && q1 > 0 && q2 > 0)
        be->qcost[0] = q0, be->qcost[1] = q1, be->qcost[2] = q2;
    cu_graph_init(be); /* after naive and prof, which run eagerly */
    /* The kernels' flags (cuda.cuh), with the trace when HALO_CUDA_TRACE=1. */
    if (!cu_trace_init(be) || !cu_ahead_init(be)) {
        (void)cudaGetLastError();
        cu_graph_free(be);
        (void)cudaFree(full->grids);
        (void)cudaStreamDestroy(be->stream);
        free(full);
        return halo_fail(err, HALO_E_UNSUPPORTED,
                         GPU_RUNTIME " device %d: cannot set the kernels' flags", device);
    }
    /* Without the ring (no pinned memory) uploads go from pageable memory, as before. */
    be->ring_cap = 8u << 20;
    if (be->naive ||
        cudaHostAlloc((void **)&be->ring, be->ring_cap, cudaHostAllocMapped) != cudaSuccess) {
        (void)cudaGetLastError();
        be->ring = NULL;
        be->ring_cap = 0;
    }
    *out = &be->base;
    return HALO_OK;
}
