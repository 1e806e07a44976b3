/* The ops interface every backend implements (cpu, later cuda/hip/vulkan). The DeepSeek V4
 * forward (src/model/forward.c) is written once as calls to these ops; backends implement ops,
 * they do not re-implement the model. Ops are at the level of model primitives — projection,
 * norm, rope, hyper-connection pre/post, compressor pooling, indexer top-k, mixed attention,
 * MoE — so a backend can fuse inside an op.
 *
 * Data lives in backend buffers (opaque: device memory on a GPU). A halo_tensor is a view of
 * contiguous rows in a buffer: ne[0] elements per row (the contiguous dimension, as in GGUF),
 * rows counted by ne[1..3]. Activations are f32; weights are any type src/quant knows.
 * Token batches are laid out one token per row (ne[1] = tokens) unless an op says otherwise.
 * Everything that depends only on positions (how many compressor windows close, which rows a
 * query sees) is decided on the host from integers, so a decode step needs no data read-back. */
#ifndef HALO_BACKEND_H
#define HALO_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "halo/status.h"

/* Expert gating functions, numbered as llama.cpp's `expert_gating_func`. */
enum { HALO_GATING_SOFTMAX = 1, HALO_GATING_SIGMOID = 2, HALO_GATING_SQRTSOFTPLUS = 4 };

typedef struct halo_buf halo_buf;
typedef struct halo_backend halo_backend;

typedef struct halo_tensor {
    halo_buf *buf;
    uint64_t offset; /* bytes from the buffer's start */
    uint32_t type;   /* halo_type */
    int64_t ne[4];   /* unused dimensions are 1 */
} halo_tensor;

/* Rotary embedding on the trailing n_rot channels of each head, consecutive channels paired
 * (DeepSeek V4's interleaved layout), optionally with YaRN frequency interpolation. */
typedef struct halo_rope {
    uint32_t n_rot;  /* rotated channels at the end of each head (even) */
    float base;
    bool yarn;       /* YaRN with attention factor 1 (the V4 reference does not rescale) */
    float yarn_factor, yarn_beta_fast, yarn_beta_slow;
    uint32_t yarn_orig_ctx;
} halo_rope;

/* One attention call: queries of a token batch against a window of raw KV rows and a set of
 * compressed KV rows (K = V: one shared KV head), with a learned sink logit per head. */
typedef struct halo_attn_args {
    const halo_tensor *q;      /* [head_dim, n_head, n_tok] */
    const int32_t *pos;        /* host: absolute position of each query token */
    const halo_tensor *window; /* [head_dim, n_win] raw rows at positions win_pos0 .. +n_win-1 */
    int64_t win_pos0;
    uint32_t sliding_window;   /* a query at t sees raw rows at t-sliding_window+1 .. t */
    const halo_tensor *comp;   /* [head_dim, n_comp] compressed rows, or NULL */
    uint32_t ratio;            /* compression ratio of comp (row w covers positions < (w+1)·ratio) */
    const halo_tensor *select; /* i32 [top_k, n_tok] rows chosen per query (-1 = none); NULL: all
                                  causally visible rows */
    const halo_tensor *sinks;  /* f32 [n_head] */
    float scale;
    halo_tensor *out;          /* [head_dim, n_head, n_tok] */
} halo_attn_args;

/* Compressor pooling: each closed window of `ratio` source rows becomes one compressed row,
 * softmax(gate + ape)-weighted over the window, RMS-normed and roped at the window's first
 * position. With overlap (ratio-4 layers), rows carry two series [Ca | Cb] of width dim each
 * and row w pools window w's Cb with window w-1's Ca (the first window takes the Ca/gate rows
 * saved from the previous call in `prev`, or nothing at the start of the sequence). */
typedef struct halo_pool_args {
    const halo_tensor *kv;     /* [width, n_win·ratio] projected source rows (width = dim or 2·dim) */
    const halo_tensor *gate;   /* same shape */
    const halo_tensor *ape;    /* [width, ratio] learned position bias */
    const halo_tensor *norm;   /* [dim] RMS norm weight */
    float eps;
    bool overlap;
    halo_tensor *prev_kv, *prev_gate; /* [dim, ratio]: in: previous window's Ca; out: the last
                                         window's Ca (overlap only) */
    bool have_prev;
    int64_t pos0;              /* absolute position of the first source row */
    uint32_t ratio, dim;
    const halo_rope *rope;
    halo_tensor *out;          /* [dim, n_win] */
} halo_pool_args;

/* Lightning-indexer top-k: score(t, s) = Σ_h w[t,h] · relu(q[t,h] · k[s]) · head_dim^-½ ·
 * n_head^-½ over compressed rows s visible to t (s < (pos_t+1)/ratio); keep the top_k. */
typedef struct halo_topk_args {
    const halo_tensor *q;      /* [head_dim, n_head, n_tok] roped indexer queries */
    const halo_tensor *w;      /* [n_head, n_tok] head weights */
    const halo_tensor *keys;   /* [head_dim, n_rows] compressed indexer keys */
    const int32_t *pos;        /* host positions */
    uint32_t ratio, top_k;
    halo_tensor *out;          /* i32 [top_k, n_tok]; -1 pads when fewer rows are visible */
} halo_topk_args;

/* Routed experts that are not resident: streamed from the model file through an expert cache
 * (src/mem/expert_cache.h), one source per layer. The cache's memory comes from the pool the
 * plan names (host memory for the CPU; GPU-visible host or device memory for a GPU backend), so
 * the views it returns are ordinary tensors of a backend buffer.
 *
 * resolve: the backend routes the batch, then asks for the distinct experts it chose,
 * ids[0..n). The source reorders ids so that the first *n_ready (>= 1 on success) are
 * available — those already cached first, then misses read together, as many as the cache
 * holds at once — and fills views[i] for ids[i], i < *n_ready. The views stay valid until the
 * next resolve on any layer of the same cache; the backend computes those experts for every
 * token routed to them (expert-major: each expert is read at most once per batch) and calls
 * again with the rest. A read failure is an error naming the tensor and the expert; a GPU
 * backend reads its routing back and calls the same function. */
typedef struct halo_expert_view {
    halo_tensor gate, up; /* [n_embd, n_ff] */
    halo_tensor down;     /* [n_ff, n_embd] */
} halo_expert_view;

typedef struct halo_expert_source halo_expert_source;
struct halo_expert_source {
    halo_status (*resolve)(const halo_expert_source *src, int32_t *ids, uint32_t n,
                           halo_expert_view *views, uint32_t *n_ready, halo_error *err);
    void *impl;
    uint32_t layer;
};

/* Routed + shared experts for a token batch (DeepSeek V4 MoE). */
typedef struct halo_moe_args {
    const halo_tensor *x;          /* [n_embd, n_tok] */
    const halo_tensor *gate_inp;   /* router [n_embd, n_expert] */
    const halo_tensor *probs_bias; /* [n_expert] selection bias, or NULL */
    const halo_tensor *tid2eid;    /* i32 [n_used, n_vocab] hash routing table, or NULL */
    const int32_t *tokens;         /* host token ids (hash routing) */
    const halo_tensor *gate_exps, *up_exps, *down_exps; /* [n_embd, n_ff, n_expert], [n_ff, n_embd, n_expert] */
    const halo_tensor *gate_sh, *up_sh, *down_sh;       /* shared expert */
    uint32_t n_used, gating;       /* HALO_GATING_* */
    bool norm_weights;
    float weights_scale, clamp_exp, clamp_shexp;        /* clamp 0 = none */
    halo_tensor *out;              /* [n_embd, n_tok] */
    /* NULL: the routed experts are resident in gate_exps/up_exps/down_exps. Otherwise those
     * three give only types and shapes, and each chosen expert's matrices come from here. */
    const halo_expert_source *experts;
} halo_moe_args;

/* Hyper-connection mixing of hc residual streams (mHC): from the streams [n_embd, hc, n_tok]
 * compute pre (collapse), post and comb (Sinkhorn-normalised) weights and the collapsed input. */
typedef struct halo_hc_args {
    const halo_tensor *streams;    /* [n_embd, hc, n_tok] */
    const halo_tensor *fn;         /* [hc·n_embd, (2+hc)·hc] (head: [hc·n_embd, hc]) */
    const halo_tensor *base, *scale;
    uint32_t hc, sinkhorn_iters;
    float eps, norm_eps;
    halo_tensor *collapsed;        /* [n_embd, n_tok] */
    halo_tensor *post;             /* [hc, n_tok] (NULL for the head) */
    halo_tensor *comb;             /* [hc, hc, n_tok] (NULL for the head) */
} halo_hc_args;

typedef struct halo_backend_ops {
    const char *name;
    void (*destroy)(halo_backend *be);

    /* The backend's working memory (device memory on a GPU): activations, KV state. */
    halo_status (*buf_alloc)(halo_backend *be, uint64_t bytes, halo_buf **out, halo_error *err);
    /* Memory in one pool of the plan (halo_pool_kind: device, gpu-host, managed, host), for
     * weights placed there: the backend never picks a pool itself. A pool the backend cannot
     * use is HALO_E_UNSUPPORTED naming it (the CPU backend computes on host memory, so it takes
     * host and gpu-host and refuses device and managed). */
    halo_status (*buf_alloc_pool)(halo_backend *be, uint32_t pool, uint64_t bytes,
                                  halo_buf **out, halo_error *err);
    void (*buf_free)(halo_backend *be, halo_buf *buf);
    /* A buffer over host memory the caller owns and keeps alive (e.g. the loader's arena), so
     * weights read once into their place are used there without a copy. Freeing the buffer
     * leaves the memory alone. A GPU backend pins and maps the range (cudaHostRegister) so its
     * kernels read it over the bus: the gpu-host pool made from the loader's arena. */
    halo_status (*buf_wrap_host)(halo_backend *be, void *data, uint64_t bytes, halo_buf **out,
                                 halo_error *err);
    halo_status (*buf_write)(halo_backend *be, halo_buf *buf, uint64_t offset, const void *src,
                             uint64_t n, halo_error *err);
    halo_status (*buf_read)(halo_backend *be, const halo_buf *buf, uint64_t offset, void *dst,
                            uint64_t n, halo_error *err);

    /* out[:, t] = rows tokens[t] of table (any type), as f32. */
    void (*embed)(halo_backend *be, const halo_tensor *table, const int32_t *tokens,
                  halo_tensor *out);
    /* out[o, t] = Σ_i w[i, o] · x[i, t]: a projection by weights of any supported type. With
     * groups > 1, input and output split into that many equal slices, slice g of the output
     * using only slice g of the input (grouped output projection). */
    void (*matmul)(halo_backend *be, const halo_tensor *w, const halo_tensor *x, uint32_t groups,
                   halo_tensor *out);
    /* Optional (NULL: the forward norms x in place, then calls matmul once per projection).
     * Several projections of one input x [n_in, n_tok]: out[i] = w[i] · x', where x' = x, or
     * with norm != NULL x' = each column of x RMS-normed (eps) times norm [n_in]. Each w[i] has
     * ne[0] == n_in (groups 1); their types may differ. With a norm, x's contents afterwards are
     * unspecified (a backend may normalize it in place): callers do not read it again. One call
     * lets a GPU pay a launch's fixed cost once for all of them and fold the norm into the
     * activation load. */
    void (*matmul_multi)(halo_backend *be, const halo_tensor *x, const halo_tensor *norm,
                         float eps, uint32_t n, const halo_tensor *const *w,
                         halo_tensor *const *out);
    /* RMS norm over each run of `width` elements of x (in place), times weight (NULL: none). */
    void (*rms_norm)(halo_backend *be, halo_tensor *x, uint32_t width, const halo_tensor *weight,
                     float eps);
    /* Rotates the tail of every head of x [head_dim, n_head, n_tok] by its token's position;
     * inverse rotates by -position (undoing it on an attention output). */
    void (*rope)(halo_backend *be, halo_tensor *x, const int32_t *pos, const halo_rope *rope,
                 bool inverse);
    void (*hc_pre)(halo_backend *be, const halo_hc_args *a);
    /* streams[:, k, t] = post[k, t] · y[:, t] + Σ_j comb[j, k, t] · streams[:, j, t] */
    void (*hc_post)(halo_backend *be, halo_tensor *streams, const halo_tensor *y,
                    const halo_tensor *post, const halo_tensor *comb);
    void (*attention)(halo_backend *be, const halo_attn_args *a);
    void (*pool)(halo_backend *be, const halo_pool_args *a);
    void (*topk)(halo_backend *be, const halo_topk_args *a);
    void (*moe)(halo_backend *be, const halo_moe_args *a);
    /* dst = src (same shape and type): row copies between buffers. */
    void (*copy)(halo_backend *be, halo_tensor *dst, const halo_tensor *src);

    /* Ops return nothing, so a backend can queue them (a GPU stream, a captured graph). sync
     * waits for what was submitted and reports the first failure since the last sync (an op
     * that could not get its scratch memory, a device error), naming the op; the outputs of
     * the ops after it are not to be used. */
    halo_status (*sync)(halo_backend *be, halo_error *err);
    /* check reports a failure already recorded (an op that could not launch or get its scratch)
     * without waiting for queued work: the forward checks after every layer, and a GPU queue
     * drained there 43 times a token would idle between layers (and could not be captured as
     * one graph). A backend that records commands may submit them here. */
    halo_status (*check)(halo_backend *be, halo_error *err);
} halo_backend_ops;

struct halo_backend {
    const halo_backend_ops *ops;
};

/* Creates the CPU backend with `threads` worker threads (0: one per core). precise keeps
 * activations f32 for quantized weights (dequantize, then f32 dot); otherwise activations are
 * quantized to the weight type's pair format for integer dot products, as ggml does. */
halo_status halo_backend_cpu_create(uint32_t threads, bool precise, halo_backend **out,
                                    halo_error *err);

/* Creates the CUDA backend (HIP when built with -DHALO_HIP=ON) on GPU `device`, in precise
 * mode. HALO_E_UNSUPPORTED when halo was built without it, or when no usable GPU or driver is
 * found (the message says which), so a caller can fall back to the CPU. */
halo_status halo_backend_cuda_create(int device, halo_backend **out, halo_error *err);
/* Precise or fast, as the engine's `precise` says for every backend. Precise: activations stay
 * f32 for every weight type (the CPU's precise mode). Fast: batches of many tokens (prefill) run
 * on tensor cores with weights and activations rounded to f16 and f32 sums (cuda/gemm_mma.cu),
 * and one-token steps take int8 activations for Q8_0, IQ2_XXS and Q2_K weights, quantized as the
 * CPU's fast mode does (cuda/mvq.cu). HALO_CUDA_MMA=1 (or 0) and HALO_CUDA_INTDOT=1 (or 0) in the
 * environment force each part on (or off) whatever is set here, for measuring; HIP builds have
 * no fast path. False for a backend not made by
 * halo_backend_cuda_create (and always in a build without it). */
bool halo_backend_cuda_set_precise(halo_backend *be, bool precise);
/* "cuda", "hip", or NULL when halo was built without a GPU backend of this family. */
const char *halo_backend_cuda_flavor(void);

/* Element count and byte size of a view. */
int64_t halo_tensor_nelements(const halo_tensor *t);
uint64_t halo_tensor_nbytes(const halo_tensor *t);

#endif
