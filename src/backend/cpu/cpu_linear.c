/* Embedding lookup, projections (matmul) and copies on the CPU. */
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu.h"
#include "halo/quant.h"
#include "halo/types.h"
#include "quant/gemm.h"

uint32_t cpu_act_type(bool precise, uint32_t wtype) {
    return precise ? HALO_TYPE_F32 : (uint32_t)halo_quant_act_type(wtype);
}

uint64_t cpu_act_bytes(bool precise, uint32_t wtype, int64_t n) {
    uint64_t bytes = 0;
    halo_type_bytes(cpu_act_type(precise, wtype), (uint64_t)n, &bytes);
    return bytes;
}

void cpu_make_act(bool precise, uint32_t wtype, const float *x, int64_t n, void *buf) {
    uint32_t act = cpu_act_type(precise, wtype);
    if (act == HALO_TYPE_F32) {
        memcpy(buf, x, (size_t)n * sizeof(float));
        return;
    }
    /* Activations here are finite (a NaN would already be a bug upstream); quantizing cannot
     * fail for finite input. */
    halo_quant_quantize_row(act, x, buf, n, NULL);
}

void cpu_dot_rows(bool precise, const halo_tensor *w, int64_t o0, int64_t o1, const void *act,
                  float *y, uint64_t w_offset) {
    uint64_t rb = cpu_row_bytes(w);
    const unsigned char *base = (const unsigned char *)cpu_ptr(w) + w_offset;
    if (!precise || halo_quant_act_type(w->type) == HALO_TYPE_F32) {
        for (int64_t o = o0; o < o1; o++)
            y[o - o0] = halo_quant_vec_dot(w->type, w->ne[0], base + (uint64_t)o * rb, act);
        return;
    }
    /* Dequantize in chunks of whole blocks into a stack buffer: no allocation per row. */
    enum { CHUNK = 4096 }; /* a multiple of every block size (32, 64, 128, 256) */
    float row[CHUNK];
    uint64_t chunk_bytes = 0;
    halo_type_bytes(w->type, CHUNK, &chunk_bytes);
    for (int64_t o = o0; o < o1; o++) {
        const unsigned char *src = base + (uint64_t)o * rb;
        float sum = 0;
        for (int64_t i = 0; i < w->ne[0]; i += CHUNK) {
            int64_t n = w->ne[0] - i < CHUNK ? w->ne[0] - i : CHUNK;
            halo_quant_dequantize_row(w->type, src + (uint64_t)(i / CHUNK) * chunk_bytes, row, n);
            sum += halo_quant_vec_dot(HALO_TYPE_F32, n, row, (const float *)act + i);
        }
        y[o - o0] = sum;
    }
}

void cpu_dot_rows_tok(bool precise, const halo_tensor *w, int64_t o0, int64_t o1,
                      const void *const *act, int nt, float *const *y, uint64_t w_offset) {
    if (precise && halo_quant_act_type(w->type) != HALO_TYPE_F32) {
        for (int t = 0; t < nt; t++)
            cpu_dot_rows(precise, w, o0, o1, act[t], y[t], w_offset);
        return;
    }
    uint64_t rb = cpu_row_bytes(w);
    const unsigned char *base = (const unsigned char *)cpu_ptr(w) + w_offset + (uint64_t)o0 * rb;
    halo_quant_gemm(w->type, w->ne[0], base, (size_t)rb, o1 - o0, act, nt, y);
}

typedef struct embed_ctx {
    const halo_tensor *table;
    const int32_t *tokens;
    halo_tensor *out;
} embed_ctx;

static void embed_task(void *p, int64_t t) {
    embed_ctx *c = p;
    int64_t n = c->table->ne[0];
    const unsigned char *row =
        (const unsigned char *)cpu_ptr(c->table) + (uint64_t)c->tokens[t] * cpu_row_bytes(c->table);
    halo_quant_dequantize_row(c->table->type, row, cpu_f32(c->out) + t * n, n);
}

void cpu_embed(halo_backend *be, const halo_tensor *table, const int32_t *tokens,
               halo_tensor *out) {
    embed_ctx c = {table, tokens, out};
    halo_threadpool_run(cpu_of(be)->pool, out->ne[1], embed_task, &c);
}

/* Rows per matmul task: from 16 up to 64, while there are still at least 4 tasks per thread
 * for a batch (so a tile's prepared tokens meet more rows) and 16 for one token (many tasks,
 * so every thread streams its share of the weights; larger ones spread the one-token kernel's
 * preparation of the activation, ~5 % of a 16-row task's work, over more rows). */
enum { ROWS_PER_TASK = 16, ROWS_PER_TASK_BATCH = 64 };

typedef struct matmul_ctx {
    bool precise;
    const halo_tensor *w;
    const unsigned char *acts;                 /* n_tok × groups activation rows */
    uint64_t act_bytes;                        /* one activation row (one group slice) */
    int64_t n_tok, n_out, out_per_group, rows; /* rows per task */
    uint32_t groups;
    float *out;
} matmul_ctx;

/* One task: a block of output rows for every token, tiled by HALO_GEMM_MAX_TOK tokens, so the
 * block stays in cache across the tokens and each weight block is decoded once per tile. */
static void matmul_task(void *p, int64_t block) {
    matmul_ctx *c = p;
    int64_t o0 = block * c->rows, o1 = o0 + c->rows;
    if (o1 > c->n_out) o1 = c->n_out;
    for (int64_t t0 = 0; t0 < c->n_tok; t0 += HALO_GEMM_MAX_TOK) {
        int nt = c->n_tok - t0 < HALO_GEMM_MAX_TOK ? (int)(c->n_tok - t0) : HALO_GEMM_MAX_TOK;
        /* A block never straddles groups when out_per_group is a multiple of the block size;
         * otherwise take rows one group at a time. */
        for (int64_t o = o0; o < o1;) {
            int64_t g = o / c->out_per_group, end = (g + 1) * c->out_per_group;
            if (end > o1) end = o1;
            const void *act[HALO_GEMM_MAX_TOK];
            float *y[HALO_GEMM_MAX_TOK];
            for (int j = 0; j < nt; j++) {
                uint64_t t = (uint64_t)(t0 + j);
                act[j] = c->acts + (t * c->groups + (uint64_t)g) * c->act_bytes;
                y[j] = c->out + (int64_t)t * c->n_out + o;
            }
            cpu_dot_rows_tok(c->precise, c->w, o, end, act, nt, y, 0);
            o = end;
        }
    }
}

typedef struct act_ctx {
    bool precise;
    const halo_tensor *w;
    const float *x;
    unsigned char *acts;
    uint64_t act_bytes;
    int64_t in;
    uint32_t groups;
} act_ctx;

static void act_task(void *p, int64_t i) {
    act_ctx *c = p;
    cpu_make_act(c->precise, c->w->type, c->x + i * c->in, c->in,
                 c->acts + (uint64_t)i * c->act_bytes);
}

void cpu_matmul(halo_backend *be, const halo_tensor *w, const halo_tensor *x, uint32_t groups,
                halo_tensor *out) {
    int64_t in = w->ne[0], n_out = w->ne[1] * w->ne[2] * w->ne[3], n_tok = x->ne[1];
    bool precise = cpu_of(be)->precise;
    act_ctx a = {precise, w, cpu_f32(x), NULL, cpu_act_bytes(precise, w->type, in), in, groups};
    a.acts = cpu_scratch(cpu_of(be), a.act_bytes * (uint64_t)n_tok * groups, "matmul");
    if (!a.acts) return;
    halo_threadpool *pool = cpu_of(be)->pool;
    double t0 = cpu_of(be)->prof ? cpu_prof_now() : 0;
    halo_threadpool_run(pool, n_tok * groups, act_task, &a);
    cpu_prof_add(cpu_of(be)->prof, PROF_ACT, t0);
    int64_t rows = ROWS_PER_TASK;
    int64_t max_rows = n_tok > 1 ? ROWS_PER_TASK_BATCH : cpu_of(be)->rows1_max;
    while (rows < max_rows &&
           n_out / (2 * rows) >= (n_tok > 1 ? 4 : 16) * (int64_t)halo_threadpool_size(pool))
        rows *= 2;
    matmul_ctx m = {precise,        w,    a.acts, a.act_bytes, n_tok, n_out,
                    n_out / groups, rows, groups, cpu_f32(out)};
    halo_threadpool_run(pool, (n_out + rows - 1) / rows, matmul_task, &m);
    free(a.acts);
}

void cpu_copy(halo_backend *be, halo_tensor *dst, const halo_tensor *src) {
    (void)be;
    memmove(cpu_ptr(dst), cpu_ptr(src), (size_t)halo_tensor_nbytes(src));
}
