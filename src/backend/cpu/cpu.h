/* Internals of the CPU backend: the reference implementation of backend.h. Buffers are host
 * memory; every op is threaded over rows or tokens with the backend's pool and accumulates in
 * f32 (weights go through src/quant's dot products, paired with their activation format). */
#ifndef HALO_BACKEND_CPU_H
#define HALO_BACKEND_CPU_H

#include <stdatomic.h>

#include "backend/backend.h"
#include "backend/cpu/cpu_profile.h"
#include "core/threadpool.h"

struct halo_buf {
    unsigned char *data;
    uint64_t size;
    bool owned;     /* false for wrapped host memory */
    size_t map_len; /* owned and mapped (large buffers): the mapping's length; 0: malloc'd */
};

typedef struct cpu_backend {
    halo_backend base;
    halo_threadpool *pool;
    bool precise;          /* f32 activations for every weight type (no integer dot products) */
    atomic_bool failed;    /* an op could not allocate its scratch since the last sync */
    const char *failed_op; /* which one (a string literal) */
    /* An op's own error with its message (a streamed expert that could not be read): set with
     * failed, reported by the next sync instead of the scratch message. */
    halo_status op_status;
    halo_error op_error;
    /* Fault injection for tests (HALO_TEST_FAIL_SCRATCH=N): the N-th scratch allocation fails. */
    int64_t fail_at;
    atomic_int_fast64_t n_scratch;
    /* HALO_CPU_PROFILE=1: per-op times (cpu_profile.h); NULL otherwise. */
    cpu_profile *prof;
    /* Most rows per task of a one-token projection (64; HALO_CPU_ROWS1 for A/B runs). */
    int64_t rows1_max;
    halo_backend_ops prof_ops;
} cpu_backend;

/* Scratch memory for an op: malloc, and on failure the backend remembers the op for the next
 * sync and the caller skips its work. */
void *cpu_scratch(cpu_backend *be, size_t bytes, const char *op);

/* The ops table with every op timed into be->prof (cpu_profile.c). */
halo_backend_ops cpu_profile_ops(const halo_backend_ops *base);
/* Frees the backend (the plain table's destroy). */
void cpu_destroy(halo_backend *be);

static inline cpu_backend *cpu_of(halo_backend *be) {
    return (cpu_backend *)be;
}

/* Host pointer of a view (valid for CPU buffers only). */
static inline void *cpu_ptr(const halo_tensor *t) {
    return t->buf->data + t->offset;
}
static inline float *cpu_f32(const halo_tensor *t) {
    return (float *)cpu_ptr(t);
}

/* Bytes of one row (ne[0] elements) of a view. */
uint64_t cpu_row_bytes(const halo_tensor *t);

void cpu_embed(halo_backend *be, const halo_tensor *table, const int32_t *tokens, halo_tensor *out);
void cpu_matmul(halo_backend *be, const halo_tensor *w, const halo_tensor *x, uint32_t groups,
                halo_tensor *out);
void cpu_copy(halo_backend *be, halo_tensor *dst, const halo_tensor *src);
void cpu_rms_norm(halo_backend *be, halo_tensor *x, uint32_t width, const halo_tensor *weight,
                  float eps);
void cpu_rope(halo_backend *be, halo_tensor *x, const int32_t *pos, const halo_rope *rope,
              bool inverse);
void cpu_hc_pre(halo_backend *be, const halo_hc_args *a);
void cpu_hc_post(halo_backend *be, halo_tensor *streams, const halo_tensor *y,
                 const halo_tensor *post, const halo_tensor *comb);
void cpu_attention(halo_backend *be, const halo_attn_args *a);
void cpu_pool(halo_backend *be, const halo_pool_args *a);
void cpu_topk(halo_backend *be, const halo_topk_args *a);
void cpu_moe(halo_backend *be, const halo_moe_args *a);

/* Shared scalar helpers. */
void cpu_rms_norm_row(float *x, int64_t n, const float *weight, float eps);
/* Rotation angles' inverse frequencies for n_rot/2 pairs (YaRN applied when configured). */
void cpu_rope_inv_freq(const halo_rope *rope, float *inv_freq);
void cpu_rope_row(float *head_tail, uint32_t n_rot, const float *inv_freq, float pos, bool inverse);
/* Activation rows: in the fast mode an f32 row is converted to the format the weight type's
 * dot product pairs with (Q8_0, Q8_K), as ggml does; in the precise mode it stays f32 and each
 * weight row is dequantized before an f32 dot. */
/* The format activations take for a weight type: f32 when precise, else ggml's vec_dot type. */
uint32_t cpu_act_type(bool precise, uint32_t wtype);
uint64_t cpu_act_bytes(bool precise, uint32_t wtype, int64_t n);
void cpu_make_act(bool precise, uint32_t wtype, const float *x, int64_t n, void *buf);
/* y[o] = Σ_i w[i, o]·x[i] for rows [o0, o1) of a weight matrix (at byte offset w_offset of the
 * view, for one expert of a stacked tensor), act made by cpu_make_act. */
void cpu_dot_rows(bool precise, const halo_tensor *w, int64_t o0, int64_t o1, const void *act,
                  float *y, uint64_t w_offset);
/* The same for nt <= HALO_GEMM_MAX_TOK tokens at once, y[t][o - o0] for act[t]: a tiled matrix
 * product (src/quant/gemm.h) that reads each weight block once for all of them, bit-identical
 * to cpu_dot_rows per token. */
void cpu_dot_rows_tok(bool precise, const halo_tensor *w, int64_t o0, int64_t o1,
                      const void *const *act, int nt, float *const *y, uint64_t w_offset);

#endif
