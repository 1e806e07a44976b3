/* Every op of the CUDA backend against the CPU backend (precise mode: f32 activations, the
 * reference) on random inputs at DeepSeek V4 Flash's real shapes: hidden 4096, 64 heads of 512
 * with a 64-channel rope tail, hc 4, 8 output groups, 256 experts of width 2048 (top-6 plus a
 * shared expert), 64 indexer heads of 128 with top-k 512, compressor windows of 4 (overlapping)
 * and 128, at positions that close windows. Every weight type the model's mixes use is
 * decoded bit-exactly (embed) and multiplied (matmul). Tolerances are stated per op, as max |Δ|
 * over max |reference|: the two backends sum in different orders, so f32 rounding (~1e-7 per
 * add) is all that separates them.
 *
 * Without a GPU (or a build without CUDA) the test prints one line saying why and is skipped
 * (exit code 77). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#if defined(HALO_CUDA) || defined(HALO_HIP)
#include "backend/cuda/graph.h"
#endif
#include "check.h"
#include "core/error.h"
#include "halo/plan.h"
#include "halo/types.h"

static halo_backend *cpu, *gpu;
/* Set: moe_once norms x (the forward's ffn norm) on both backends right before the moe, and
 * checks the normed x afterwards too. */
static bool moe_norm_first;
static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}
static float frand(void) {
    return (float)(next() >> 40) / 16777216.0f * 2.0f - 1.0f;
}

/* A tensor with the same bytes on both backends. */
typedef struct both {
    halo_tensor c, g;
} both;

static both make(uint32_t type, int64_t ne0, int64_t ne1, int64_t ne2, const void *data) {
    both b = {{.type = type, .ne = {ne0, ne1, ne2, 1}}, {.type = type, .ne = {ne0, ne1, ne2, 1}}};
    uint64_t n = halo_tensor_nbytes(&b.c);
    halo_error err;
    CHECK_INT(cpu->ops->buf_alloc(cpu, n, &b.c.buf, &err), HALO_OK);
    CHECK_INT(gpu->ops->buf_alloc(gpu, n, &b.g.buf, &err), HALO_OK);
    if (data) {
        CHECK_INT(cpu->ops->buf_write(cpu, b.c.buf, 0, data, n, &err), HALO_OK);
        CHECK_INT(gpu->ops->buf_write(gpu, b.g.buf, 0, data, n, &err), HALO_OK);
    }
    return b;
}

static void drop(both *b) {
    cpu->ops->buf_free(cpu, b->c.buf);
    gpu->ops->buf_free(gpu, b->g.buf);
}

static float *randf(int64_t n, float scale) {
    float *x = malloc((size_t)n * sizeof *x);
    for (int64_t i = 0; i < n; i++)
        x[i] = frand() * scale;
    return x;
}

static both rand_f32(int64_t ne0, int64_t ne1, int64_t ne2, float scale) {
    float *x = randf(ne0 * ne1 * ne2, scale);
    both b = make(HALO_TYPE_F32, ne0, ne1, ne2, x);
    free(x);
    return b;
}

static uint16_t f16_bits(float f) { /* small normal positive values only */
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)((((u >> 23) & 0xff) - 112) << 10 | ((u >> 13) & 0x3ff));
}

/* Random blocks of a weight type: random bytes (every code of these formats is valid), with
 * each block's f16 scales set to a small value so the weights are of order `scale`. */
static void *rand_weights(uint32_t type, int64_t n, float scale, uint64_t *bytes_out) {
    uint64_t bytes = 0;
    halo_type_bytes(type, (uint64_t)n, &bytes);
    unsigned char *p = malloc(bytes + 8);
    for (uint64_t i = 0; i < bytes; i += 8) {
        uint64_t r = next();
        memcpy(p + i, &r, 8);
    }
    *bytes_out = bytes;
    if (type == HALO_TYPE_F32) {
        for (int64_t i = 0; i < n; i++)
            ((float *)p)[i] = frand() * scale;
        return p;
    }
    if (type == HALO_TYPE_F16 || type == HALO_TYPE_BF16) {
        for (int64_t i = 0; i < n; i++) {
            float f = frand() * scale;
            uint32_t u;
            memcpy(&u, &f, 4);
            uint16_t h = type == HALO_TYPE_BF16
                             ? (uint16_t)(u >> 16)
                             : (uint16_t)(f16_bits(fabsf(f) + 1e-4f) | (f < 0 ? 0x8000 : 0));
            memcpy(p + 2 * i, &h, 2);
        }
        return p;
    }
    const halo_type_info *ti = halo_type_info_get(type);
    int offs[2] = {-1, -1};
    switch (type) {
    case HALO_TYPE_Q4_1:
    case HALO_TYPE_Q5_1:
    case HALO_TYPE_Q4_K:
    case HALO_TYPE_Q5_K:
        offs[0] = 0, offs[1] = 2;
        break;
    case HALO_TYPE_Q2_K:
        offs[0] = 80, offs[1] = 82;
        break;
    case HALO_TYPE_Q3_K:
        offs[0] = 108;
        break;
    case HALO_TYPE_Q6_K:
        offs[0] = 208;
        break;
    case HALO_TYPE_MXFP4:
    case HALO_TYPE_IQ1_M: /* its f16 scale is spread over four top nibbles: set below */
        break;
    default:
        offs[0] = 0;
        break;
    }
    uint16_t d = f16_bits(scale / (ti->block_size == 256 ? 32.0f : 64.0f));
    for (uint64_t b = 0; b < bytes / ti->block_bytes; b++) {
        unsigned char *blk = p + b * ti->block_bytes;
        if (type == HALO_TYPE_MXFP4) blk[0] = (unsigned char)(120 + next() % 4);
        for (int k = 0; type == HALO_TYPE_IQ1_M && k < 4; k++) /* nibble k of d: word k's top */
            blk[48 + 2 * k + 1] =
                (unsigned char)((blk[48 + 2 * k + 1] & 0x0f) | (((d >> (4 * k)) & 0xf) << 4));
        for (int k = 0; k < 2; k++)
            if (offs[k] >= 0) memcpy(blk + offs[k], &d, 2);
    }
    return p;
}

static both rand_w(uint32_t type, int64_t ne0, int64_t ne1, int64_t ne2, float scale) {
    uint64_t bytes;
    void *p = rand_weights(type, ne0 * ne1 * ne2, scale, &bytes);
    both b = make(type, ne0, ne1, ne2, p);
    free(p);
    return b;
}

static void *fetch(halo_backend *be, const halo_tensor *t) {
    uint64_t n = halo_tensor_nbytes(t);
    void *p = malloc(n + 4);
    halo_error err = {0};
    halo_status st = be->ops->sync(be, &err);
    if (st) fprintf(stderr, "  sync: %s\n", err.message);
    CHECK_INT(st, HALO_OK);
    CHECK_INT(be->ops->buf_read(be, t->buf, t->offset, p, n, &err), HALO_OK);
    return p;
}

/* max |gpu - cpu| / max |cpu| over a tensor, checked against tol and printed. */
static double compare(const char *what, const both *b, double tol) {
    float *c = fetch(cpu, &b->c), *g = fetch(gpu, &b->g);
    int64_t n = halo_tensor_nelements(&b->c);
    double md = 0, mr = 0;
    bool finite = true;
    for (int64_t i = 0; i < n; i++) {
        finite &= isfinite(g[i]) && isfinite(c[i]);
        double d = fabs((double)g[i] - c[i]);
        if (d > md || d != d) md = d;
        if (fabs(c[i]) > mr) mr = fabs(c[i]);
    }
    double rel = mr > 0 ? md / mr : md;
    printf("  %-44s max|d| %.2e  rel %.2e  (tol %.0e)\n", what, md, rel, tol);
    CHECK(finite);
    CHECK(rel <= tol);
    free(c);
    free(g);
    return rel;
}

/* Runs `op` again with env=0 and checks the output equals what `out` holds now, bit for bit;
 * `pair` names the two paths in the line printed. */
static void same_with_it_off(const char *env, const char *pair, const char *what,
                             const halo_tensor *out, void (*op)(void *), void *ctx) {
    uint64_t n = halo_tensor_nbytes(out);
    void *with = fetch(gpu, out);
    setenv(env, "0", 1);
    op(ctx);
    void *without = fetch(gpu, out);
    unsetenv(env);
    bool same = memcmp(with, without, n) == 0;
    printf("  %-44s %s %s\n", what, pair, same ? "bitwise equal" : "DIFFER");
    CHECK(same);
    free(with);
    free(without);
}

/* Fast mode's IQ2_XXS, Q2_K and Q8_0 tiles take their weights through a cp.async ring in shared
 * memory (gemm_mma.cu's gm_tile_sb) or, with HALO_CUDA_MMA_SB=0, from registers: the same
 * decoders and sums, so the two must agree bit for bit. */
static void same_without_the_ring(const char *what, const halo_tensor *out, void (*op)(void *),
                                  void *ctx) {
    same_with_it_off("HALO_CUDA_MMA_SB", "ring and register fetch", what, out, op, ctx);
}

static const uint32_t weight_types[] = {
    HALO_TYPE_F32,     HALO_TYPE_F16,     HALO_TYPE_BF16,   HALO_TYPE_Q8_0,   HALO_TYPE_Q4_0,
    HALO_TYPE_Q5_0,    HALO_TYPE_Q4_1,    HALO_TYPE_Q5_1,   HALO_TYPE_IQ4_NL, HALO_TYPE_MXFP4,
    HALO_TYPE_Q2_K,    HALO_TYPE_Q3_K,    HALO_TYPE_Q4_K,   HALO_TYPE_Q5_K,   HALO_TYPE_Q6_K,
    HALO_TYPE_IQ2_XXS, HALO_TYPE_IQ3_XXS, HALO_TYPE_IQ2_XS, HALO_TYPE_IQ2_S,  HALO_TYPE_IQ3_S,
    HALO_TYPE_IQ1_S,   HALO_TYPE_IQ1_M,   HALO_TYPE_IQ4_XS};
#define N_TYPES (sizeof weight_types / sizeof weight_types[0])

/* Decoding is bit-exact: the embedding rows of every type equal the CPU's to the bit. */
static void embed_decodes_every_type_bit_exactly(void) {
    int32_t tokens[7] = {0, 5, 63, 17, 17, 40, 2};
    for (size_t i = 0; i < N_TYPES; i++) {
        both table = rand_w(weight_types[i], 4096, 64, 1, 1.0f);
        both out = make(HALO_TYPE_F32, 4096, 7, 1, NULL);
        cpu->ops->embed(cpu, &table.c, tokens, &out.c);
        gpu->ops->embed(gpu, &table.g, tokens, &out.g);
        float *c = fetch(cpu, &out.c), *g = fetch(gpu, &out.g);
        int64_t bad = 0;
        for (int64_t k = 0; k < 4096 * 7; k++)
            bad += memcmp(&c[k], &g[k], 4) != 0;
        printf("  embed %-10s %lld of %d values differ in any bit\n",
               halo_type_name(weight_types[i]), (long long)bad, 4096 * 7);
        CHECK_INT(bad, 0);
        free(c);
        free(g);
        drop(&table);
        drop(&out);
    }
}

/* Projections of every type, for 1 token (decode), 5 and 37 tokens (prefill tiles). */
static void matmul_matches_the_cpu_for_every_type(void) {
    const int64_t n_toks[] = {1, 5, 37};
    for (size_t i = 0; i < N_TYPES; i++)
        for (size_t k = 0; k < 3; k++) {
            int64_t n = n_toks[k];
            both w = rand_w(weight_types[i], 4096, 384, 1, 1.0f);
            both x = rand_f32(4096, n, 1, 1.0f), y = make(HALO_TYPE_F32, 384, n, 1, NULL);
            cpu->ops->matmul(cpu, &w.c, &x.c, 1, &y.c);
            gpu->ops->matmul(gpu, &w.g, &x.g, 1, &y.g);
            char what[64];
            snprintf(what, sizeof what, "matmul %s 4096x384, %lld tok",
                     halo_type_name(weight_types[i]), (long long)n);
            compare(what, &y, 1e-5);
            drop(&w);
            drop(&x);
            drop(&y);
        }
    /* Tall projections (1536 rows: the GPU's row streams, each warp many rows, rather than the
     * split rows of the shape above), for a decode token and a prefill tile. */
    const int64_t tall_toks[] = {1, 37};
    for (size_t i = 0; i < N_TYPES; i++)
        for (size_t k = 0; k < 2; k++) {
            int64_t n = tall_toks[k];
            both w = rand_w(weight_types[i], 2048, 1536, 1, 1.0f);
            both x = rand_f32(2048, n, 1, 1.0f), y = make(HALO_TYPE_F32, 1536, n, 1, NULL);
            cpu->ops->matmul(cpu, &w.c, &x.c, 1, &y.c);
            gpu->ops->matmul(gpu, &w.g, &x.g, 1, &y.g);
            char what[64];
            snprintf(what, sizeof what, "matmul %s 2048x1536, %lld tok",
                     halo_type_name(weight_types[i]), (long long)n);
            compare(what, &y, 1e-5);
            drop(&w);
            drop(&x);
            drop(&y);
        }
    /* Grouped output projection: 8 groups of 64·512 inputs (64 heads of 512 in 8 groups). */
    both w = rand_w(HALO_TYPE_Q8_0, 4096, 8 * 128, 1, 1.0f);
    both x = rand_f32(8 * 4096, 3, 1, 1.0f), y = make(HALO_TYPE_F32, 8 * 128, 3, 1, NULL);
    cpu->ops->matmul(cpu, &w.c, &x.c, 8, &y.c);
    gpu->ops->matmul(gpu, &w.g, &x.g, 8, &y.g);
    compare("matmul q8_0 grouped (8 groups), 3 tok", &y, 1e-5);
    drop(&w);
    drop(&x);
    drop(&y);
}

typedef struct mm_ctx {
    const halo_tensor *w, *x;
    uint32_t groups;
    halo_tensor *y;
} mm_ctx;
static void mm_run(void *p) {
    mm_ctx *c = p;
    gpu->ops->matmul(gpu, c->w, c->x, c->groups, c->y);
}

/* Fast mode (halo_backend_cuda_set_precise): prefill batches (64 tokens and more) of the types
 * gemm_mma.cu decodes go to tensor cores, weights and activations rounded to f16 and f32 sums, so
 * they are held to 2e-3 of the output's range (the class of ggml's f16/q8_1 prefill), not 1e-5; 200
 * tokens leave a partial tile and the grouped projection keeps each tile in one group. A type
 * without a tile decoder (Q6_K) stays on the f32 kernels at 1e-5. Precise mode (the default)
 * keeps f32 at the same sizes, and fast mode really rounds (so the path is taken). */
static void matmul_on_tensor_cores_matches_the_cpu(void) {
    {
        both w = rand_w(HALO_TYPE_Q8_0, 4096, 384, 1, 1.0f);
        both x = rand_f32(4096, 512, 1, 1.0f), y = make(HALO_TYPE_F32, 384, 512, 1, NULL);
        cpu->ops->matmul(cpu, &w.c, &x.c, 1, &y.c);
        gpu->ops->matmul(gpu, &w.g, &x.g, 1, &y.g);
        compare("matmul q8_0 4096x384, 512 tok, precise mode", &y, 1e-5);
        CHECK(halo_backend_cuda_set_precise(gpu, false));
        gpu->ops->matmul(gpu, &w.g, &x.g, 1, &y.g);
        CHECK(compare("matmul q8_0 4096x384, 512 tok, fast mode", &y, 2e-3) > 1e-6);
        drop(&w);
        drop(&x);
        drop(&y);
    }
    const uint32_t types[] = {HALO_TYPE_Q8_0,    HALO_TYPE_F16,  HALO_TYPE_BF16,  HALO_TYPE_Q2_K,
                              HALO_TYPE_IQ2_XXS, HALO_TYPE_Q4_K, HALO_TYPE_MXFP4, HALO_TYPE_Q6_K};
    const int64_t n_toks[] = {64, 200, 512};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        for (size_t k = 0; k < 3; k++) {
            int64_t n = n_toks[k];
            both w = rand_w(types[i], 4096, 384, 1, 1.0f);
            both x = rand_f32(4096, n, 1, 1.0f), y = make(HALO_TYPE_F32, 384, n, 1, NULL);
            cpu->ops->matmul(cpu, &w.c, &x.c, 1, &y.c);
            gpu->ops->matmul(gpu, &w.g, &x.g, 1, &y.g);
            char what[64];
            snprintf(what, sizeof what, "matmul %s 4096x384, %lld tok", halo_type_name(types[i]),
                     (long long)n);
            compare(what, &y, types[i] == HALO_TYPE_Q6_K ? 1e-5 : 2e-3);
            if (types[i] == HALO_TYPE_Q8_0 || types[i] == HALO_TYPE_Q2_K ||
                types[i] == HALO_TYPE_IQ2_XXS) {
                mm_ctx c = {&w.g, &x.g, 1, &y.g};
                same_without_the_ring(what, &y.g, mm_run, &c);
            }
            drop(&w);
            drop(&x);
            drop(&y);
        }
    both w = rand_w(HALO_TYPE_Q8_0, 4096, 8 * 128, 1, 1.0f);
    both x = rand_f32(8 * 4096, 200, 1, 1.0f), y = make(HALO_TYPE_F32, 8 * 128, 200, 1, NULL);
    cpu->ops->matmul(cpu, &w.c, &x.c, 8, &y.c);
    gpu->ops->matmul(gpu, &w.g, &x.g, 8, &y.g);
    compare("matmul q8_0 grouped (8 groups), 200 tok", &y, 2e-3);
    mm_ctx c = {&w.g, &x.g, 8, &y.g};
    same_without_the_ring("matmul q8_0 grouped (8 groups), 200 tok", &y.g, mm_run, &c);
    drop(&w);
    drop(&x);
    drop(&y);
    CHECK(halo_backend_cuda_set_precise(gpu, true));
}

/* matmul_multi (several projections of one input, its RMS norm folded in: one launch for a
 * decode token) against the CPU's rms_norm and then one matmul per projection, the path the
 * forward takes without the op. Shapes of a ratio-4 layer's attention (the normed x into q_a,
 * kv, the compressor's and the indexer's projections; the normed qr into q_b and the indexer's
 * q_b, here 8192 rows of each), one without a norm, one with types the fused launch leaves to
 * the per-projection path (Q4_K; BF16 beside F16), and a 5-token batch (no fusion). In precise
 * mode the fused launch takes the float rows and the Q8_0 rows fall back; fast mode's int8
 * rows are checked against the CPU's integer sums in test_cuda_intdot. */
static void multi_once(const char *what, int64_t n_in, int64_t n_tok, bool with_norm, int n,
                       const uint32_t *types, const int64_t *rows) {
    both x = rand_f32(n_in, n_tok, 1, 3.0f), nw = rand_f32(n_in, 1, 1, 1.0f);
    both w[8], y[8];
    const halo_tensor *wg[8];
    halo_tensor *yg[8];
    for (int i = 0; i < n; i++) {
        w[i] = rand_w(types[i], n_in, rows[i], 1, 1.0f);
        y[i] = make(HALO_TYPE_F32, rows[i], n_tok, 1, NULL);
        wg[i] = &w[i].g;
        yg[i] = &y[i].g;
    }
    if (with_norm) cpu->ops->rms_norm(cpu, &x.c, (uint32_t)n_in, &nw.c, 1e-6f);
    for (int i = 0; i < n; i++)
        cpu->ops->matmul(cpu, &w[i].c, &x.c, 1, &y[i].c);
    gpu->ops->matmul_multi(gpu, &x.g, with_norm ? &nw.g : NULL, 1e-6f, (uint32_t)n, wg, yg);
    for (int i = 0; i < n; i++) {
        char name[80];
        snprintf(name, sizeof name, "multi %s: %s %lldx%lld", what, halo_type_name(types[i]),
                 (long long)n_in, (long long)rows[i]);
        compare(name, &y[i], 1e-5);
        drop(&w[i]);
        drop(&y[i]);
    }
    drop(&x);
    drop(&nw);
}

static void matmul_multi_matches_the_cpus_norm_then_matmul(void) {
    CHECK(gpu->ops->matmul_multi != NULL);
    if (!gpu->ops->matmul_multi) return;
    const uint32_t Q = HALO_TYPE_Q8_0, F = HALO_TYPE_F16;
    const uint32_t att_t[7] = {Q, Q, F, F, F, F, F};
    const int64_t att_r[7] = {1024, 512, 1024, 1024, 256, 256, 64};
    const uint32_t qr_t[2] = {Q, F};
    const int64_t qr_r[2] = {8192, 8192};
    const uint32_t mix_t[4] = {Q, HALO_TYPE_Q4_K, F, HALO_TYPE_BF16};
    const int64_t mix_r[4] = {384, 384, 384, 384};
    const int64_t head_r[1] = {2048};
    multi_once("attn x", 4096, 1, true, 7, att_t, att_r);
    multi_once("qr", 1024, 1, true, 2, qr_t, qr_r);
    multi_once("no norm", 4096, 1, false, 1, qr_t, head_r);
    multi_once("no norm", 4096, 1, false, 1, qr_t + 1, head_r);
    multi_once("mixed types", 4096, 1, true, 4, mix_t, mix_r);
    const uint32_t f32_t[3] = {HALO_TYPE_F32, Q, HALO_TYPE_F32};
    multi_once("f32 rows", 2048, 1, true, 3, f32_t, mix_r);
    multi_once("5 tokens", 4096, 5, true, 4, mix_t, mix_r);
}

static void norm_rope_and_hc_match_the_cpu(void) {
    both x = rand_f32(4096, 9, 1, 3.0f), nw = rand_f32(4096, 1, 1, 1.0f);
    cpu->ops->rms_norm(cpu, &x.c, 4096, &nw.c, 1e-6f);
    gpu->ops->rms_norm(gpu, &x.g, 4096, &nw.g, 1e-6f);
    compare("rms_norm 4096 x 9, weighted", &x, 1e-6);
    both q = rand_f32(512, 64, 4, 1.0f);
    cpu->ops->rms_norm(cpu, &q.c, 512, NULL, 1e-6f);
    gpu->ops->rms_norm(gpu, &q.g, 512, NULL, 1e-6f);
    compare("rms_norm per head 512 x 64 x 4, no weight", &q, 1e-6);
    int32_t pos[4] = {0, 127, 4099, 65535};
    halo_rope plain = {.n_rot = 64, .base = 10000.0f};
    halo_rope yarn = {.n_rot = 64,
                      .base = 160000.0f,
                      .yarn = true,
                      .yarn_factor = 16.0f,
                      .yarn_beta_fast = 32.0f,
                      .yarn_beta_slow = 1.0f,
                      .yarn_orig_ctx = 65536};
    cpu->ops->rope(cpu, &q.c, pos, &plain, false);
    gpu->ops->rope(gpu, &q.g, pos, &plain, false);
    compare("rope 64 of 512, 64 heads, pos up to 65535", &q, 1e-5);
    cpu->ops->rope(cpu, &q.c, pos, &yarn, true);
    gpu->ops->rope(gpu, &q.g, pos, &yarn, true);
    compare("rope yarn inverse", &q, 1e-5);
    drop(&x);
    drop(&nw);
    drop(&q);

    /* hc 4 over hidden 4096: pre (with post and comb), the head's pre, then post. */
    const int64_t E = 4096, HC = 4, T = 5;
    both streams = rand_f32(E, HC, T, 1.0f);
    both fn = rand_w(HALO_TYPE_F16, HC * E, (2 + HC) * HC, 1, 0.05f);
    both fn_head = rand_w(HALO_TYPE_F16, HC * E, HC, 1, 0.05f);
    both base = rand_f32((2 + HC) * HC, 1, 1, 0.5f), scale = rand_f32(3, 1, 1, 1.0f);
    both col = make(HALO_TYPE_F32, E, T, 1, NULL), post = make(HALO_TYPE_F32, HC, T, 1, NULL);
    both comb = make(HALO_TYPE_F32, HC, HC, T, NULL);
    halo_hc_args a = {.fn = &fn.c,
                      .streams = &streams.c,
                      .base = &base.c,
                      .scale = &scale.c,
                      .hc = HC,
                      .sinkhorn_iters = 20,
                      .eps = 1e-6f,
                      .norm_eps = 1e-6f,
                      .collapsed = &col.c,
                      .post = &post.c,
                      .comb = &comb.c};
    cpu->ops->hc_pre(cpu, &a);
    a = (halo_hc_args){.fn = &fn.g,
                       .streams = &streams.g,
                       .base = &base.g,
                       .scale = &scale.g,
                       .hc = HC,
                       .sinkhorn_iters = 20,
                       .eps = 1e-6f,
                       .norm_eps = 1e-6f,
                       .collapsed = &col.g,
                       .post = &post.g,
                       .comb = &comb.g};
    gpu->ops->hc_pre(gpu, &a);
    compare("hc_pre collapsed (hc 4 x 4096, f16 mixer)", &col, 1e-5);
    compare("hc_pre post", &post, 1e-5);
    compare("hc_pre comb (Sinkhorn, 20 iterations)", &comb, 1e-5);
    both y = rand_f32(E, T, 1, 1.0f);
    cpu->ops->hc_post(cpu, &streams.c, &y.c, &post.c, &comb.c);
    gpu->ops->hc_post(gpu, &streams.g, &y.g, &post.g, &comb.g);
    compare("hc_post streams", &streams, 1e-5);
    a = (halo_hc_args){.fn = &fn_head.c,
                       .streams = &streams.c,
                       .base = &base.c,
                       .scale = &scale.c,
                       .hc = HC,
                       .eps = 1e-6f,
                       .norm_eps = 1e-6f,
                       .collapsed = &col.c};
    cpu->ops->hc_pre(cpu, &a);
    a = (halo_hc_args){.fn = &fn_head.g,
                       .streams = &streams.g,
                       .base = &base.g,
                       .scale = &scale.g,
                       .hc = HC,
                       .eps = 1e-6f,
                       .norm_eps = 1e-6f,
                       .collapsed = &col.g};
    gpu->ops->hc_pre(gpu, &a);
    compare("hc_pre head (collapse only)", &col, 1e-5);
    both *all[] = {&streams, &fn, &fn_head, &base, &scale, &col, &post, &comb, &y};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        drop(all[i]);
}

/* Set: tests keep some GPU outputs here (in order, KEEP_MAX at most; the caller frees them), for
 * same_bits_without (a fused path against the unfused one on a second backend). */
enum { KEEP_MAX = 16 };
static void **gpu_keep;
static uint64_t gpu_keep_bytes[KEEP_MAX];
static int gpu_kept;
static void keep_gpu(const both *t) {
    if (!gpu_keep || gpu_kept >= KEEP_MAX) return;
    gpu_keep_bytes[gpu_kept] = halo_tensor_nbytes(&t->g);
    gpu_keep[gpu_kept++] = fetch(gpu, &t->g);
}

/* A decode step's per-head norm then rope of q, and the weighted norm then rope of the kv row,
 * with nothing read between (the GPU runs each pair as one kernel, HALO_CUDA_NORMROPE), then a
 * norm followed by another norm (the first runs at the second). */
static void norm_then_rope_match_the_cpu(void) {
    both q = rand_f32(512, 64, 1, 1.0f), kv = rand_f32(512, 1, 1, 2.0f);
    both nw = rand_f32(512, 1, 1, 1.0f), x = rand_f32(4096, 1, 1, 3.0f);
    both xw = rand_f32(4096, 1, 1, 1.0f);
    int32_t pos[1] = {4099};
    halo_rope yarn = {.n_rot = 64,
                      .base = 160000.0f,
                      .yarn = true,
                      .yarn_factor = 16.0f,
                      .yarn_beta_fast = 32.0f,
                      .yarn_beta_slow = 1.0f,
                      .yarn_orig_ctx = 65536};
    for (int g = 0; g < 2; g++) {
        halo_backend *be = g ? gpu : cpu;
        be->ops->rms_norm(be, g ? &q.g : &q.c, 512, NULL, 1e-6f);
        be->ops->rope(be, g ? &q.g : &q.c, pos, &yarn, false);
        be->ops->rms_norm(be, g ? &kv.g : &kv.c, 512, g ? &nw.g : &nw.c, 1e-6f);
        be->ops->rope(be, g ? &kv.g : &kv.c, pos, &yarn, false);
        be->ops->rms_norm(be, g ? &x.g : &x.c, 4096, g ? &xw.g : &xw.c, 1e-6f);
        be->ops->rms_norm(be, g ? &kv.g : &kv.c, 512, NULL, 1e-6f);
    }
    compare("1 token: per-head norm, then rope (q)", &q, 1e-5);
    compare("1 token: norm, rope, norm (kv row)", &kv, 1e-5);
    keep_gpu(&q), keep_gpu(&kv);
    compare("1 token: a norm followed by a norm", &x, 1e-6);
    both *all[] = {&q, &kv, &nw, &x, &xw};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        drop(all[i]);
}

/* After a decode step's attention: the new kv row copied into its ring slot (a queued copy),
 * then the inverse rope of the attention output (the GPU runs both in one launch,
 * HALO_CUDA_ROPECOPY), then a copy the rope's output feeds and a rope of the copied row (which
 * must wait for the copy: two launches). */
static void copy_then_rope_match_the_cpu(void) {
    both o = rand_f32(512, 64, 1, 1.0f), ring = rand_f32(512, 128, 1, 1.0f);
    both kv = rand_f32(512, 1, 1, 1.0f);
    int32_t pos[1] = {4099};
    halo_rope yarn = {.n_rot = 64,
                      .base = 160000.0f,
                      .yarn = true,
                      .yarn_factor = 16.0f,
                      .yarn_beta_fast = 32.0f,
                      .yarn_beta_slow = 1.0f,
                      .yarn_orig_ctx = 65536};
    for (int g = 0; g < 2; g++) {
        halo_backend *be = g ? gpu : cpu;
        halo_tensor slot = g ? ring.g : ring.c, row0 = slot;
        slot.ne[1] = 1;
        slot.offset += 5 * 512 * sizeof(float);
        row0.ne[1] = 1;
        be->ops->copy(be, &slot, g ? &kv.g : &kv.c);
        be->ops->rope(be, g ? &o.g : &o.c, pos, &yarn, true);
        halo_tensor head0 = g ? o.g : o.c;
        head0.ne[1] = 1;
        be->ops->copy(be, &row0, &head0); /* ring row 0 <- the roped head 0 */
        be->ops->rope(be, &row0, pos, &yarn, false);
    }
    compare("1 token: ring copy, then the output's inverse rope", &o, 1e-6);
    compare("1 token: the ring after both copies and the last rope", &ring, 1e-6);
    keep_gpu(&o), keep_gpu(&ring);
    drop(&o), drop(&ring), drop(&kv);
}

/* hc_pre of both backends over the same tensors (head: collapse only). */
static void hc_pre_both(both *streams, both *fn, both *base, both *scale, both *col, both *post,
                        both *comb) {
    for (int g = 0; g < 2; g++) {
        halo_backend *be = g ? gpu : cpu;
        halo_hc_args a = {.fn = g ? &fn->g : &fn->c,
                          .streams = g ? &streams->g : &streams->c,
                          .base = g ? &base->g : &base->c,
                          .scale = g ? &scale->g : &scale->c,
                          .hc = 4,
                          .sinkhorn_iters = 20,
                          .eps = 1e-6f,
                          .norm_eps = 1e-6f,
                          .collapsed = g ? &col->g : &col->c,
                          .post = post ? (g ? &post->g : &post->c) : NULL,
                          .comb = comb ? (g ? &comb->g : &comb->c) : NULL};
        be->ops->hc_pre(be, &a);
    }
}


/* A decode step's hc sites back to back, one token: pre, post, the next site's pre of the same
 * streams with nothing read between (the GPU then runs the post inside that pre's first kernel,
 * HALO_CUDA_HCFUSE), writing the post and comb the post just read (as the forward's scratch
 * does), another post and the head's pre. */
static void hc_sites_of_one_token_match_the_cpu(void) {
    const int64_t E = 4096, HC = 4;
    both streams = rand_f32(E, HC, 1, 1.0f);
    both fn = rand_w(HALO_TYPE_F16, HC * E, (2 + HC) * HC, 1, 0.05f);
    both fn_head = rand_w(HALO_TYPE_F16, HC * E, HC, 1, 0.05f);
    both base = rand_f32((2 + HC) * HC, 1, 1, 0.5f), scale = rand_f32(3, 1, 1, 1.0f);
    both col = make(HALO_TYPE_F32, E, 1, 1, NULL), post = make(HALO_TYPE_F32, HC, 1, 1, NULL);
    both comb = make(HALO_TYPE_F32, HC, HC, 1, NULL);
    both y1 = rand_f32(E, 1, 1, 1.0f), y2 = rand_f32(E, 1, 1, 1.0f);
    hc_pre_both(&streams, &fn, &base, &scale, &col, &post, &comb);
    compare("1 token: hc_pre collapsed", &col, 1e-5);
    compare("1 token: hc_pre comb", &comb, 1e-5);
    for (int g = 0; g < 2; g++) {
        halo_backend *be = g ? gpu : cpu;
        be->ops->hc_post(be, g ? &streams.g : &streams.c, g ? &y1.g : &y1.c, g ? &post.g : &post.c,
                         g ? &comb.g : &comb.c);
    }
    hc_pre_both(&streams, &fn, &base, &scale, &col, &post, &comb);
    compare("1 token: post, then pre: collapsed", &col, 1e-5);
    compare("1 token: post, then pre: post", &post, 1e-5);
    compare("1 token: post, then pre: comb", &comb, 1e-5);
    compare("1 token: post, then pre: streams", &streams, 1e-5);
    keep_gpu(&col), keep_gpu(&post), keep_gpu(&comb), keep_gpu(&streams);
    for (int g = 0; g < 2; g++) {
        halo_backend *be = g ? gpu : cpu;
        be->ops->hc_post(be, g ? &streams.g : &streams.c, g ? &y2.g : &y2.c, g ? &post.g : &post.c,
                         g ? &comb.g : &comb.c);
    }
    hc_pre_both(&streams, &fn_head, &base, &scale, &col, NULL, NULL);
    compare("1 token: post, then the head's pre", &col, 1e-5);
    compare("1 token: the streams at the end", &streams, 1e-5);
    keep_gpu(&col), keep_gpu(&streams);
    /* A post followed by a read, no pre: it runs at the read. */
    for (int g = 0; g < 2; g++) {
        halo_backend *be = g ? gpu : cpu;
        be->ops->hc_post(be, g ? &streams.g : &streams.c, g ? &y1.g : &y1.c, g ? &post.g : &post.c,
                         g ? &comb.g : &comb.c);
    }
    compare("1 token: a post alone", &streams, 1e-5);
    both *all[] = {&streams, &fn, &fn_head, &base, &scale, &col, &post, &comb, &y1, &y2};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        drop(all[i]);
}

/* Attention with 64 heads of 512: a window of 128 raw rows, and either the indexer's selection
 * of 512 among ratio-4 compressed rows (with -1 and out-of-range entries) or every visible
 * ratio-128 row; 3 tokens (one block per token and head) and 40 (prefill: a block per token and
 * 8 heads sharing the rows). */
/* Set: attention_once keeps the GPU's outputs of both passes here (malloc'd). */
static float **att_keep;

static void attention_once(int64_t T) {
    const int64_t HD = 512, H = 64, W = 128;
    int32_t pos[40];
    for (int64_t t = 0; t < T; t++)
        pos[t] = (int32_t)(4100 - T + t);
    both q = rand_f32(HD, H, T, 1.0f), win = rand_f32(HD, W + T - 1, 1, 1.0f);
    both sinks = rand_f32(H, 1, 1, 1.0f), out = make(HALO_TYPE_F32, HD, H, T, NULL);
    both comp4 = rand_f32(HD, 1025, 1, 1.0f), comp128 = rand_f32(HD, 32, 1, 1.0f);
    int32_t *sel = malloc(sizeof(int32_t) * 512 * (size_t)T);
    for (int64_t i = 0; i < 512 * T; i++)
        sel[i] = (int32_t)(next() % 1100) - 40; /* some -1, some past */
    both s = make(HALO_TYPE_I32, 512, T, 1, sel);
    for (int pass = 0; pass < 2; pass++) {
        both *comp = pass == 0 ? &comp4 : &comp128;
        halo_attn_args a = {.q = &q.c,
                            .pos = pos,
                            .window = &win.c,
                            .win_pos0 = pos[0] - 127,
                            .sliding_window = W,
                            .comp = &comp->c,
                            .ratio = pass ? 128 : 4,
                            .select = pass ? NULL : &s.c,
                            .sinks = &sinks.c,
                            .scale = 0.044f,
                            .out = &out.c};
        cpu->ops->attention(cpu, &a);
        a.q = &q.g, a.window = &win.g, a.comp = &comp->g, a.select = pass ? NULL : &s.g;
        a.sinks = &sinks.g, a.out = &out.g;
        gpu->ops->attention(gpu, &a);
        char what[96];
        snprintf(what, sizeof what, "attention window + %s, %lld tok",
                 pass ? "all ratio-128 rows" : "512 selected ratio-4 rows", (long long)T);
        if (att_keep) att_keep[pass] = fetch(gpu, &out.g);
        compare(what, &out, 1e-5);
        if (T >= 16) {
            /* fast mode: the tensor-core kernel (attention_mma.cu, f16 q and rows); it really
             * rounds, so the path is taken */
            CHECK(halo_backend_cuda_set_precise(gpu, false));
            gpu->ops->attention(gpu, &a);
            snprintf(what, sizeof what, "attention fast, %s, %lld tok",
                     pass ? "ratio-128" : "ratio-4 selected", (long long)T);
            CHECK(compare(what, &out, 2e-3) > 1e-7);
            CHECK(halo_backend_cuda_set_precise(gpu, true));
        }
    }
    free(sel);
    both *all[] = {&q, &win, &sinks, &out, &comp4, &comp128, &s};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        drop(all[i]);
}

static void attention_matches_the_cpu(void) {
    attention_once(3);
    attention_once(40);
}

/* Decode attention loading two rows ahead (the default) and one (HALO_CUDA_AHEAD2=0, a second
 * backend) on the same inputs: bitwise the same outputs (the same rows in the same order). */
static void attention_two_rows_ahead_gives_the_same_sums(void) {
    halo_backend *keep = gpu, *one = NULL;
    halo_error err = {0};
    setenv("HALO_CUDA_AHEAD2", "0", 1);
    CHECK_INT(halo_backend_cuda_create(0, &one, &err), HALO_OK);
    unsetenv("HALO_CUDA_AHEAD2");
    if (!one) return;
    float *two[2] = {NULL, NULL}, *one_ahead[2] = {NULL, NULL};
    const uint64_t seed = rng;
    att_keep = two;
    attention_once(3);
    rng = seed;
    gpu = one;
    att_keep = one_ahead;
    attention_once(3);
    gpu = keep;
    att_keep = NULL;
    for (int pass = 0; pass < 2; pass++) {
        int differ = 0;
        for (int64_t i = 0; two[pass] && one_ahead[pass] && i < 512 * 64 * 3; i++)
            differ += memcmp(&two[pass][i], &one_ahead[pass][i], sizeof(float)) != 0;
        printf("  two rows ahead vs one, pass %d: %d outputs differ\n", pass, differ);
        CHECK_INT(differ, 0);
        free(two[pass]);
        free(one_ahead[pass]);
    }
    one->ops->destroy(one);
}

/* Decode attention split over several blocks a head (HALO_CUDA_ATTSPLIT: a block per N valid
 * rows, 4 at most, merged by the last block), against the CPU (in attention_once) and against
 * one block a head (HALO_CUDA_ATTSPLIT=0, a second backend): the splits group the rows' sums
 * differently, so some outputs differ in their last bits, which shows the split ran. With
 * N = 1 both passes take 4 blocks; with the default (160) the ratio-4 pass (128 window rows
 * and 512 selection entries, as the host counts them) takes 4 and the ratio-128 pass (128 + 32
 * rows) one. */
static void attention_split_matches_the_cpu(void) {
    halo_backend *keep = gpu, *one = NULL, *four = NULL;
    halo_error err = {0};
    setenv("HALO_CUDA_ATTSPLIT", "0", 1);
    CHECK_INT(halo_backend_cuda_create(0, &one, &err), HALO_OK);
    setenv("HALO_CUDA_ATTSPLIT", "1", 1);
    CHECK_INT(halo_backend_cuda_create(0, &four, &err), HALO_OK);
    unsetenv("HALO_CUDA_ATTSPLIT");
    if (!one || !four) return;
    float *outs[3][2] = {{NULL, NULL}, {NULL, NULL}, {NULL, NULL}};
    halo_backend *bes[3] = {one, keep, four};
    const uint64_t seed = rng;
    for (int b = 0; b < 3; b++) {
        rng = seed;
        gpu = bes[b];
        att_keep = outs[b];
        attention_once(3);
    }
    gpu = keep;
    att_keep = NULL;
    for (int b = 1; b < 3; b++)
        for (int pass = 0; pass < 2; pass++) {
            int differ = 0;
            for (int64_t i = 0; outs[0][pass] && outs[b][pass] && i < 512 * 64 * 3; i++)
                differ += memcmp(&outs[0][pass][i], &outs[b][pass][i], sizeof(float)) != 0;
            printf("  split (%s) vs one block a head, pass %d: %d outputs differ\n",
                   b == 1 ? "default" : "4 blocks", pass, differ);
            /* the default leaves the ratio-128 pass (160 rows) on one block: bitwise equal */
            if (b == 1 && pass == 1)
                CHECK_INT(differ, 0);
            else
                CHECK(differ > 0);
        }
    for (int b = 0; b < 3; b++)
        for (int pass = 0; pass < 2; pass++)
            free(outs[b][pass]);
    one->ops->destroy(one);
    four->ops->destroy(four);
}

/* Compressor pooling: ratio 4 with overlap (dim 512 and the indexer's 128), with and without
 * the previous window's saved series; ratio 128 without overlap. */
static void pool_matches_the_cpu(void) {
    halo_rope yarn = {.n_rot = 64,
                      .base = 160000.0f,
                      .yarn = true,
                      .yarn_factor = 16.0f,
                      .yarn_beta_fast = 32.0f,
                      .yarn_beta_slow = 1.0f,
                      .yarn_orig_ctx = 65536};
    /* ape in the types the mixes store it in (F16, F32; Q8_0 and Q5_0 after llama-quantize) */
    const struct {
        uint32_t ratio, dim;
        bool overlap, prev;
        int64_t n_win;
        uint32_t ape;
    } cases[] = {{4, 512, true, false, 3, HALO_TYPE_F16},
                 {4, 512, true, true, 2, HALO_TYPE_Q8_0},
                 {4, 128, true, true, 5, HALO_TYPE_Q5_0},
                 {128, 512, false, false, 2, HALO_TYPE_F32}};
    for (size_t i = 0; i < 4; i++) {
        uint32_t r = cases[i].ratio, dim = cases[i].dim, width = cases[i].overlap ? 2 * dim : dim;
        int64_t nw = cases[i].n_win;
        both kv = rand_f32(width, nw * r, 1, 1.0f), gate = rand_f32(width, nw * r, 1, 2.0f);
        both ape = rand_w(cases[i].ape, width, r, 1, 1.0f), norm = rand_f32(dim, 1, 1, 1.0f);
        both pk = rand_f32(dim, r, 1, 1.0f), pg = rand_f32(dim, r, 1, 1.0f);
        both out = make(HALO_TYPE_F32, dim, nw, 1, NULL);
        halo_pool_args a = {.kv = &kv.c,
                            .gate = &gate.c,
                            .ape = &ape.c,
                            .norm = &norm.c,
                            .eps = 1e-6f,
                            .overlap = cases[i].overlap,
                            .prev_kv = &pk.c,
                            .prev_gate = &pg.c,
                            .have_prev = cases[i].prev,
                            .pos0 = 4096,
                            .ratio = r,
                            .dim = dim,
                            .rope = &yarn,
                            .out = &out.c};
        cpu->ops->pool(cpu, &a);
        a.kv = &kv.g, a.gate = &gate.g, a.ape = &ape.g, a.norm = &norm.g, a.prev_kv = &pk.g;
        a.prev_gate = &pg.g, a.out = &out.g;
        gpu->ops->pool(gpu, &a);
        char what[80];
        snprintf(what, sizeof what, "pool ratio %u dim %u%s%s, %lld windows, ape %s", r, dim,
                 cases[i].overlap ? " overlap" : "", cases[i].prev ? " +prev" : "", (long long)nw,
                 halo_type_name(cases[i].ape));
        compare(what, &out, 1e-5);
        if (cases[i].overlap) {
            compare("  saved series (kv)", &pk, 0);
            compare("  saved series (gate + ape)", &pg, 0);
        }
        both *all[] = {&kv, &gate, &ape, &norm, &pk, &pg, &out};
        for (size_t k = 0; k < sizeof all / sizeof all[0]; k++)
            drop(all[k]);
    }
}

/* The indexer's score of key row s for token t, in double: relu(q.k / sqrt(HD)) weighted by
 * w / sqrt(H), summed over the heads (the oracle of the top-k tests below). */
static double topk_score_f64(const float *q, const float *w, const float *keys, int64_t t,
                             int64_t s, int64_t H, int64_t HD) {
    double acc = 0;
    for (int64_t h = 0; h < H; h++) {
        double d = 0;
        for (int64_t i = 0; i < HD; i++)
            d += (double)q[(t * H + h) * HD + i] * keys[s * HD + i];
        acc += (d > 0 ? d / sqrt((double)HD) : 0) * (w[t * H + h] / sqrt((double)H));
    }
    return acc;
}

/* What a token's K selected rows are against the scores of its visible rows: how many were
 * chosen, chosen twice, or not visible; the weakest chosen and the best left unchosen. */
typedef struct topk_tally {
    int64_t n, dup, bad;
    double weakest, best_left;
} topk_tally;

static topk_tally topk_tally_of(const int32_t *sel, int64_t K, const double *score,
                                int64_t visible, unsigned char *chosen) {
    topk_tally c = {.weakest = INFINITY, .best_left = -INFINITY};
    memset(chosen, 0, (size_t)visible);
    for (int64_t i = 0; i < K; i++) {
        int32_t r = sel[i];
        if (r < 0) continue;
        if (r >= visible) {
            c.bad++;
            continue;
        }
        c.dup += chosen[r];
        chosen[r] = 1;
        c.n++;
        c.weakest = score[r] < c.weakest ? score[r] : c.weakest;
    }
    for (int64_t s = 0; s < visible; s++)
        if (!chosen[s] && score[s] > c.best_left) c.best_left = score[s];
    return c;
}

/* Indexer top-k (64 heads of 128, top 512) against scores computed in double on the host: every
 * chosen row is visible, no row is chosen twice, and no unchosen visible row scores more than
 * the weakest chosen one by more than f32 rounding; -1 pads when fewer rows are visible. */
static void topk_selects_the_best_rows(void) {
    const int64_t HD = 128, H = 64, T = 4, ROWS = 3000, K = 512;
    int32_t pos[4] = {1000, 2047, 2051, 11999}; /* 250, 512, 513 and 3000 visible rows */
    float *q = randf(HD * H * T, 1.0f), *w = randf(H * T, 1.0f), *keys = randf(HD * ROWS, 1.0f);
    both tq = make(HALO_TYPE_F32, HD, H, T, q), tw = make(HALO_TYPE_F32, H, T, 1, w);
    both tk = make(HALO_TYPE_F32, HD, ROWS, 1, keys), out = make(HALO_TYPE_I32, K, T, 1, NULL);
    halo_topk_args ag = {
        .q = &tq.g, .w = &tw.g, .keys = &tk.g, .pos = pos, .ratio = 4, .top_k = K, .out = &out.g};
    gpu->ops->topk(gpu, &ag);
    int32_t *sel = fetch(gpu, &out.g);
    double *score = malloc(sizeof(double) * ROWS);
    unsigned char *chosen = malloc(ROWS);
    for (int64_t t = 0; t < T; t++) {
        int64_t visible = (pos[t] + 1) / 4 < ROWS ? (pos[t] + 1) / 4 : ROWS;
        for (int64_t s = 0; s < visible; s++)
            score[s] = topk_score_f64(q, w, keys, t, s, H, HD);
        topk_tally c = topk_tally_of(sel + t * K, K, score, visible, chosen);
        int64_t want = visible < K ? visible : K;
        printf("  topk token at %5d: %lld visible, %lld chosen, weakest chosen %.6f, best left "
               "%.6f\n",
               pos[t], (long long)visible, (long long)c.n, c.weakest, c.best_left);
        CHECK_INT(c.n, want);
        CHECK_INT(c.dup, 0);
        CHECK_INT(c.bad, 0);
        CHECK(c.best_left <= c.weakest + 1e-5 * fabs(c.weakest) + 1e-6);
    }
    free(sel);
    free(score);
    free(chosen);
    free(q);
    free(w);
    free(keys);
    both *all[] = {&tq, &tw, &tk, &out};
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++)
        drop(all[k]);
}

/* The decode score kernel with head_dim fixed at compile time (the default) and the general
 * one (HALO_CUDA_SCORENJ=0, a second backend) on the same inputs: the same sums in the same
 * order, so the same rows in the same order (checked against double scores above). */
static void topk_score_kernels_choose_the_same_rows(void) {
    halo_backend *gen = NULL;
    halo_error err = {0};
    setenv("HALO_CUDA_SCORENJ", "0", 1);
    CHECK_INT(halo_backend_cuda_create(0, &gen, &err), HALO_OK);
    unsetenv("HALO_CUDA_SCORENJ");
    if (!gen) return;
    const int64_t HD = 128, H = 64, T = 4, ROWS = 3000, K = 512;
    int32_t pos[4] = {1000, 2047, 2051, 11999};
    float *q = randf(HD * H * T, 1.0f), *w = randf(H * T, 1.0f), *keys = randf(HD * ROWS, 1.0f);
    int32_t *sel[2] = {NULL, NULL};
    for (int b = 0; b < 2; b++) {
        halo_backend *keep = gpu;
        gpu = b ? gen : keep;
        both tq = make(HALO_TYPE_F32, HD, H, T, q), tw = make(HALO_TYPE_F32, H, T, 1, w);
        both tk = make(HALO_TYPE_F32, HD, ROWS, 1, keys), out = make(HALO_TYPE_I32, K, T, 1, NULL);
        halo_topk_args ag = {.q = &tq.g,
                             .w = &tw.g,
                             .keys = &tk.g,
                             .pos = pos,
                             .ratio = 4,
                             .top_k = K,
                             .out = &out.g};
        gpu->ops->topk(gpu, &ag);
        sel[b] = fetch(gpu, &out.g);
        both *all[] = {&tq, &tw, &tk, &out};
        for (size_t k = 0; k < sizeof all / sizeof all[0]; k++)
            drop(all[k]);
        gpu = keep;
    }
    int differ = 0;
    for (int64_t i = 0; sel[0] && sel[1] && i < K * T; i++)
        differ += sel[0][i] != sel[1][i];
    printf("  topk score kernels (fixed head_dim vs general): %d of %lld entries differ\n", differ,
           (long long)(K * T));
    CHECK(sel[0] && sel[1]);
    CHECK_INT(differ, 0);
    free(sel[0]);
    free(sel[1]);
    free(q);
    free(w);
    free(keys);
    gen->ops->destroy(gen);
}

/* Indexer top-k for a prefill batch of 24 tokens at 0 to 3000 visible rows, against double
 * scores: every chosen row is visible and distinct, the count is min(visible, 512), and no
 * unchosen row beats the weakest chosen one by more than the mode's bound of the scores'
 * range. Fast mode (topk_mma.cu: q and keys rounded to f16, f32 sums): 2e-3. Precise mode with
 * the f32 kernel's launches sliced to 5,000 (token, row) pairs (HALO_CUDA_TOPK_PAIRS; 2^20 by
 * default, so no launch runs long at depth): 1e-5. */
static void topk_batch_once(bool fast) {
    enum { T = 24 };
    const int64_t HD = 128, H = 64, ROWS = 3000, K = 512;
    int32_t pos[T];
    for (int t = 0; t < T; t++)
        pos[t] = t == 0 ? 2 : 530 * t - 1; /* 0, 132 .. 3000 visible (ratio 4) */
    float *q = randf(HD * H * T, 1.0f), *w = randf(H * T, 1.0f), *keys = randf(HD * ROWS, 1.0f);
    both tq = make(HALO_TYPE_F32, HD, H, T, q), tw = make(HALO_TYPE_F32, H, T, 1, w);
    both tk = make(HALO_TYPE_F32, HD, ROWS, 1, keys), out = make(HALO_TYPE_I32, K, T, 1, NULL);
    halo_topk_args ag = {
        .q = &tq.g, .w = &tw.g, .keys = &tk.g, .pos = pos, .ratio = 4, .top_k = K, .out = &out.g};
    CHECK(halo_backend_cuda_set_precise(gpu, !fast));
    if (!fast) setenv("HALO_CUDA_TOPK_PAIRS", "5000", 1);
    gpu->ops->topk(gpu, &ag);
    int32_t *sel = fetch(gpu, &out.g);
    unsetenv("HALO_CUDA_TOPK_PAIRS");
    CHECK(halo_backend_cuda_set_precise(gpu, true));
    const double tol = fast ? 2e-3 : 1e-5;
    double *score = malloc(sizeof(double) * ROWS);
    unsigned char *chosen = malloc(ROWS);
    double worst_gap = 0;
    for (int64_t t = 0; t < T; t++) {
        int64_t visible = (pos[t] + 1) / 4 < ROWS ? (pos[t] + 1) / 4 : ROWS;
        double lo = INFINITY, hi = -INFINITY;
        for (int64_t s = 0; s < visible; s++) {
            double acc = topk_score_f64(q, w, keys, t, s, H, HD);
            score[s] = acc;
            lo = acc < lo ? acc : lo;
            hi = acc > hi ? acc : hi;
        }
        topk_tally c = topk_tally_of(sel + t * K, K, score, visible, chosen);
        CHECK_INT(c.n, visible < K ? visible : K);
        CHECK_INT(c.dup, 0);
        CHECK_INT(c.bad, 0);
        if (visible > K) {
            double gap = (c.best_left - c.weakest) / (hi - lo);
            worst_gap = gap > worst_gap ? gap : worst_gap;
            CHECK(gap <= tol);
        }
    }
    printf("  topk %s, %d tokens: best unchosen over weakest chosen %.2e of the range "
           "(tol %.0e)\n",
           fast ? "fast" : "precise, sliced launches", T, worst_gap, tol);
    free(sel);
    free(score);
    free(chosen);
    free(q);
    free(w);
    free(keys);
    both *all[] = {&tq, &tw, &tk, &out};
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++)
        drop(all[k]);
}

static void topk_of_a_prefill_batch_selects_the_best_rows(void) {
    topk_batch_once(true);
    topk_batch_once(false);
}

/* MoE at full width (4096 hidden, 256 experts of 2048, top 6 of sqrt-softplus scores with the
 * selection bias, a shared expert, clamped SwiGLU), in the q2 mix's types, for 1 and 19
 * tokens; then hash routing (tid2eid) and a smaller model in the q4 and mxfp4 mixes' types. */
static void moe_run(void *p) {
    gpu->ops->moe(gpu, (const halo_moe_args *)p);
}

static void moe_once(const char *what, int64_t E, int64_t NE, int64_t FF, uint32_t k, uint32_t tg,
                     uint32_t td, uint32_t ts, bool hash, int64_t T) {
    both x = rand_f32(E, T, 1, 1.0f), router = rand_w(HALO_TYPE_F16, E, NE, 1, 0.05f);
    both nw = rand_f32(E, 1, 1, 1.0f);
    both bias = rand_f32(NE, 1, 1, 0.05f);
    both gate = rand_w(tg, E, FF, NE, 0.05f), up = rand_w(tg, E, FF, NE, 0.05f);
    both down = rand_w(td, FF, E, NE, 0.05f);
    both gs = rand_w(ts, E, FF, 1, 0.05f), us = rand_w(ts, E, FF, 1, 0.05f);
    both ds = rand_w(ts, FF, E, 1, 0.05f), out = make(HALO_TYPE_F32, E, T, 1, NULL);
    const int64_t V = 64;
    int32_t *table = malloc(sizeof(int32_t) * (size_t)(k * V)), tokens[512];
    for (int64_t v = 0; v < V; v++) /* distinct experts per token, as real tables */
        for (uint32_t i = 0; i < k; i++)
            table[v * k + i] = (int32_t)((v * 7 + i * 37) % NE);
    for (int64_t t = 0; t < T; t++)
        tokens[t] = (int32_t)(next() % V);
    if (hash && T >= 64) { /* the work items the routing gives: runs of at most 64 pairs */
        int count[256] = {0}, small = 0, large = 0;
        for (int64_t t = 0; t < T; t++)
            for (uint32_t i = 0; i < k; i++)
                count[table[tokens[t] * k + i]]++;
        for (int64_t e = 0; e < NE; e++) {
            large += count[e] / 64 + (count[e] % 64 > 16);
            small += count[e] % 64 > 0 && count[e] % 64 <= 16;
        }
        printf("  %s, %lld tok: %d routed items of <= 16 pairs, %d larger\n", what, (long long)T,
               small, large);
        if (NE <= 64) CHECK(small > 0 && large > 0); /* the case for both tile widths at once */
    }
    both tid = make(HALO_TYPE_I32, k, V, 1, table);
    halo_moe_args a = {.x = &x.c,
                       .gate_inp = &router.c,
                       .probs_bias = hash ? NULL : &bias.c,
                       .tid2eid = hash ? &tid.c : NULL,
                       .tokens = tokens,
                       .gate_exps = &gate.c,
                       .up_exps = &up.c,
                       .down_exps = &down.c,
                       .gate_sh = &gs.c,
                       .up_sh = &us.c,
                       .down_sh = &ds.c,
                       .n_used = k,
                       .gating = HALO_GATING_SQRTSOFTPLUS,
                       .norm_weights = true,
                       .weights_scale = 1.5f,
                       .clamp_exp = 10.0f,
                       .clamp_shexp = 10.0f,
                       .out = &out.c};
    if (moe_norm_first) cpu->ops->rms_norm(cpu, &x.c, (uint32_t)E, &nw.c, 1e-6f);
    cpu->ops->moe(cpu, &a);
    a.x = &x.g, a.gate_inp = &router.g, a.probs_bias = hash ? NULL : &bias.g;
    a.tid2eid = hash ? &tid.g : NULL, a.gate_exps = &gate.g, a.up_exps = &up.g;
    a.down_exps = &down.g, a.gate_sh = &gs.g, a.up_sh = &us.g, a.down_sh = &ds.g;
    a.out = &out.g;
    CHECK(halo_backend_cuda_set_precise(gpu, T < 64)); /* fast mode for prefill batches */
    if (moe_norm_first) gpu->ops->rms_norm(gpu, &x.g, (uint32_t)E, &nw.g, 1e-6f);
    gpu->ops->moe(gpu, &a);
    char line[128];
    snprintf(line, sizeof line, "moe %s, %lld tok", what, (long long)T);
    /* The default path against the CPU first, before other runs leave their values in the
     * backend's scratch buffers. 64 tokens and more: the experts on tensor cores (f16, see
     * matmul above). */
    compare(line, &out, T >= 64 ? 2e-3 : 1e-5);
    if (moe_norm_first) compare("  x normed in place", &x, 1e-6);
    if (T >= 64) same_without_the_ring(line, &out.g, moe_run, &a);
    /* The q2 mix's routed items of at most 16 pairs in tiles of 16 (gm_moe16), or with
     * HALO_CUDA_MMA_N16=0 in gm_moe's of 64: the same decoders and mma.sync steps in the same
     * order for each (row, pair), so the same bits; gm_moe16's other build (3 blocks a
     * multiprocessor, HALO_CUDA_MMA_N16=3) likewise. */
    if (T >= 64 && tg == HALO_TYPE_IQ2_XXS) {
        moe_run(&a);
        same_with_it_off("HALO_CUDA_MMA_N16", "16- and 64-pair tiles", line, &out.g, moe_run, &a);
        setenv("HALO_CUDA_MMA_N16", "3", 1);
        moe_run(&a);
        same_with_it_off("HALO_CUDA_MMA_N16", "16-pair (3 blocks) and 64", line, &out.g, moe_run,
                         &a);
    }
    CHECK(halo_backend_cuda_set_precise(gpu, true));
    free(table);
    both *all[] = {&x, &router, &bias, &gate, &up, &down, &gs, &us, &ds, &out, &tid, &nw};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        drop(all[i]);
}

/* One token's moe, then the hc_post of its output and the next hc_pre with nothing read between
 * (the GPU makes the moe's weighted sum inside the hc kernel, HALO_CUDA_SUMFUSE), against the
 * CPU; the moe's output is checked afterwards too (the hc kernel writes it). */
static void moe_then_hc_sites_match_the_cpu(void) {
    const int64_t E = 4096, NE = 256, FF = 2048, HC = 4;
    const uint32_t k = 6;
    both streams = rand_f32(E, HC, 1, 1.0f);
    both fn = rand_w(HALO_TYPE_F16, HC * E, (2 + HC) * HC, 1, 0.05f);
    both base = rand_f32((2 + HC) * HC, 1, 1, 0.5f), scale = rand_f32(3, 1, 1, 1.0f);
    both col = make(HALO_TYPE_F32, E, 1, 1, NULL), post = make(HALO_TYPE_F32, HC, 1, 1, NULL);
    both comb = make(HALO_TYPE_F32, HC, HC, 1, NULL);
    both x = rand_f32(E, 1, 1, 1.0f), router = rand_w(HALO_TYPE_F16, E, NE, 1, 0.05f);
    both bias = rand_f32(NE, 1, 1, 0.05f), out = make(HALO_TYPE_F32, E, 1, 1, NULL);
    both gate = rand_w(HALO_TYPE_IQ2_XXS, E, FF, NE, 0.05f);
    both up = rand_w(HALO_TYPE_IQ2_XXS, E, FF, NE, 0.05f);
    both down = rand_w(HALO_TYPE_Q2_K, FF, E, NE, 0.05f);
    both gs = rand_w(HALO_TYPE_Q8_0, E, FF, 1, 0.05f), us = rand_w(HALO_TYPE_Q8_0, E, FF, 1, 0.05f);
    both ds = rand_w(HALO_TYPE_Q8_0, FF, E, 1, 0.05f);
    hc_pre_both(&streams, &fn, &base, &scale, &col, &post, &comb);
    compare("the site's hc_pre before the moe: comb", &comb, 1e-5);
    int32_t tokens[1] = {0};
    for (int g = 0; g < 2; g++) {
        halo_backend *be = g ? gpu : cpu;
#define B(t) (g ? &(t).g : &(t).c)
        halo_moe_args a = {.x = B(x),
                           .gate_inp = B(router),
                           .probs_bias = B(bias),
                           .tokens = tokens,
                           .gate_exps = B(gate),
                           .up_exps = B(up),
                           .down_exps = B(down),
                           .gate_sh = B(gs),
                           .up_sh = B(us),
                           .down_sh = B(ds),
                           .n_used = k,
                           .gating = HALO_GATING_SQRTSOFTPLUS,
                           .norm_weights = true,
                           .weights_scale = 1.5f,
                           .clamp_exp = 10.0f,
                           .clamp_shexp = 10.0f,
                           .out = B(out)};
        be->ops->moe(be, &a);
        be->ops->hc_post(be, B(streams), B(out), B(post), B(comb));
#undef B
    }
    hc_pre_both(&streams, &fn, &base, &scale, &col, &post, &comb);
    compare("moe, then hc_post + hc_pre: collapsed", &col, 2e-5);
    compare("moe, then hc_post + hc_pre: comb", &comb, 2e-5);
    compare("moe, then hc_post + hc_pre: streams", &streams, 2e-5);
    compare("moe, then hc_post + hc_pre: the moe's output", &out, 1e-5);
    keep_gpu(&col), keep_gpu(&comb), keep_gpu(&streams), keep_gpu(&out);
    both *all[] = {&streams, &fn,  &base, &scale, &col,  &post, &comb, &x, &router,
                   &bias,    &out, &gate, &up,    &down, &gs,   &us,   &ds};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        drop(all[i]);
}

/* The ffn site: pre, post, the next pre of the same streams, then the rms_norm of its collapsed
 * row with nothing read between (the GPU runs the norm inside the hc kernel, HALO_CUDA_HCNORM,
 * with a second grid barrier); the outputs against the CPU. */
static void hc_then_norm_match_the_cpu(void) {
    const int64_t E = 4096, HC = 4;
    both streams = rand_f32(E, HC, 1, 1.0f);
    both fn = rand_w(HALO_TYPE_F16, HC * E, (2 + HC) * HC, 1, 0.05f);
    both base = rand_f32((2 + HC) * HC, 1, 1, 0.5f), scale = rand_f32(3, 1, 1, 1.0f);
    both col = make(HALO_TYPE_F32, E, 1, 1, NULL), post = make(HALO_TYPE_F32, HC, 1, 1, NULL);
    both comb = make(HALO_TYPE_F32, HC, HC, 1, NULL);
    both y1 = rand_f32(E, 1, 1, 1.0f), nw = rand_f32(E, 1, 1, 1.0f);
    hc_pre_both(&streams, &fn, &base, &scale, &col, &post, &comb);
    for (int g = 0; g < 2; g++) {
        halo_backend *be = g ? gpu : cpu;
        be->ops->hc_post(be, g ? &streams.g : &streams.c, g ? &y1.g : &y1.c, g ? &post.g : &post.c,
                         g ? &comb.g : &comb.c);
    }
    hc_pre_both(&streams, &fn, &base, &scale, &col, &post, &comb);
    for (int g = 0; g < 2; g++) {
        halo_backend *be = g ? gpu : cpu;
        be->ops->rms_norm(be, g ? &col.g : &col.c, (uint32_t)E, g ? &nw.g : &nw.c, 1e-6f);
    }
    compare("1 token: post, pre, then the norm: normed row", &col, 1e-5);
    compare("1 token: post, pre, then the norm: comb", &comb, 1e-5);
    compare("1 token: post, pre, then the norm: streams", &streams, 1e-5);
    keep_gpu(&col), keep_gpu(&post), keep_gpu(&comb), keep_gpu(&streams);
    both *all[] = {&streams, &fn, &base, &scale, &col, &post, &comb, &y1, &nw};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        drop(all[i]);
}

/* Runs `run` on the GPU backend and again on a second one made with env=0 (the same inputs:
 * the random state is replayed), and checks that every output the tests kept is bitwise the
 * same and that the second backend launched `fewer` kernels more (which shows the fused path
 * ran; HIP builds have none of these paths, so the same number there). */
static void same_bits_with(const char *env, const char *val, void (*run)(void), int fewer,
                           const char *what, double tol, bool must_differ);
static void same_bits_without(const char *env, void (*run)(void), int fewer, const char *what) {
    same_bits_with(env, "0", run, fewer, what, 0.0, false);
}
/* tol > 0: float outputs within tol (max |d| over max |value|) instead of bitwise; must_differ:
 * and some bits differ (the only sign that the other path ran, where the kernel count is the
 * same). */
/* Set (NAME, VALUE): both backends are made with it (an opt-in path the compared switch needs). */
static const char *same_base_name, *same_base_val;
static void same_bits_with(const char *env, const char *val, void (*run)(void), int fewer,
                           const char *what, double tol, bool must_differ) {
    halo_backend *keep = gpu, *base = NULL, *other = NULL;
    halo_error err = {0};
    if (same_base_name) {
        setenv(same_base_name, same_base_val, 1);
        CHECK_INT(halo_backend_cuda_create(0, &base, &err), HALO_OK);
        if (!base) return;
    }
    setenv(env, val, 1);
    CHECK_INT(halo_backend_cuda_create(0, &other, &err), HALO_OK);
    unsetenv(env);
    if (same_base_name) unsetenv(same_base_name);
    if (!other) return;
    halo_backend *first = base ? base : keep;
    void *outs[2][KEEP_MAX];
    int kept[2] = {0, 0};
    uint64_t launched[2] = {0, 0};
    const uint64_t seed = rng;
    for (int b = 0; b < 2; b++) {
        rng = seed;
        gpu = b ? other : first;
        gpu_keep = outs[b];
        gpu_kept = 0;
#if defined(HALO_CUDA) || defined(HALO_HIP)
        halo_cuda_graph_stats s0, s1;
        CHECK(halo_backend_cuda_graph_stats(gpu, &s0));
        run();
        CHECK(halo_backend_cuda_graph_stats(gpu, &s1));
        launched[b] = s1.launches - s0.launches;
#else
        run();
#endif
        kept[b] = gpu_kept;
    }
    gpu = keep;
    gpu_keep = NULL;
    CHECK(kept[0] > 0 && kept[0] == kept[1]);
    int differ = 0, bits = 0;
    for (int i = 0; i < kept[0] && i < kept[1]; i++) {
        bits += memcmp(outs[0][i], outs[1][i], gpu_keep_bytes[i]) != 0;
        if (tol <= 0.0) {
            differ += memcmp(outs[0][i], outs[1][i], gpu_keep_bytes[i]) != 0;
            continue;
        }
        const float *a = outs[0][i], *b = outs[1][i];
        double md = 0.0, mx = 0.0;
        for (uint64_t j = 0; j < gpu_keep_bytes[i] / sizeof(float); j++) {
            const double dd = fabs((double)a[j] - (double)b[j]);
            md = dd > md ? dd : md;
            mx = fabs((double)b[j]) > mx ? fabs((double)b[j]) : mx;
        }
        differ += !(md <= tol * mx);
    }
    for (int b = 0; b < 2; b++)
        for (int i = 0; i < kept[b]; i++)
            free(outs[b][i]);
    printf("  %s: %d of %d outputs differ from %s=%s's%s; %llu kernels launched against %llu\n",
           what, differ, kept[0], env, val, tol > 0.0 ? " beyond the tolerance" : "",
           (unsigned long long)launched[0], (unsigned long long)launched[1]);
    CHECK_INT(differ, 0);
    if (must_differ) CHECK(bits > 0);
#ifdef HALO_HIP
    fewer = 0;
#endif
    CHECK_INT((int64_t)(launched[1] - launched[0]), fewer);
    other->ops->destroy(other);
    if (base) base->ops->destroy(base);
}

/* One token's Q8_0 projection of 8,192 inputs in fast mode (int8 activations, mvq_dense_kernel),
 * its output kept. */
static void q8_projection_of_one_token(void) {
    both w = rand_w(HALO_TYPE_Q8_0, 8192, 4096, 1, 0.05f), x = rand_f32(8192, 1, 1, 1.0f);
    both y = make(HALO_TYPE_F32, 4096, 1, 1, NULL);
    CHECK(halo_backend_cuda_set_precise(gpu, false));
    gpu->ops->matmul(gpu, &w.g, &x.g, 1, &y.g);
    CHECK(halo_backend_cuda_set_precise(gpu, true));
    float *out = fetch(gpu, &y.g);
    int nonzero = 0;
    for (int i = 0; i < 4096; i++)
        nonzero += out[i] != 0.0f && out[i] == out[i];
    free(out);
    CHECK(nonzero > 4000); /* a real result, not an untouched buffer */
    keep_gpu(&y);
    drop(&w), drop(&x), drop(&y);
}

/* The int8 projection's warps with seven chunk slots (HALO_CUDA_MVQRING=7, for measuring)
 * against six: the same rows and sums, bitwise (test_backend_cuda_intdot checks six against the
 * CPU). */
static void mvq_ring_of_seven_same_bits(void) {
    same_bits_with("HALO_CUDA_MVQRING", "7", q8_projection_of_one_token, 0,
                   "Q8_0 projection, 7 chunk slots a warp", 0.0, false);
}

/* out_b's shape (4,096 rows of 8,192 over ~3,168 warps) in half rows (opt-in,
 * HALO_CUDA_MVQSPLIT=1) against whole rows: each row's two halves summed apart then added, so
 * within float rounding of it, and some bits differ (the kernel count is the same). */
static void mvq_half_rows_close_to_whole(void) {
    same_bits_with("HALO_CUDA_MVQSPLIT", "1", q8_projection_of_one_token, 0,
                   "Q8_0 projection in half rows", 1e-5, true);
}

static void hc_sites_then_moe_sites(void) {
    hc_sites_of_one_token_match_the_cpu();
    moe_then_hc_sites_match_the_cpu();
}

/* One token's hc_post then hc_pre in one launch with a grid barrier (hcpost2_kernel, opt-in:
 * HALO_CUDA_HCPOST2=1) against the two launches (hcpost1 then hc2, the default): the hc sites
 * above (post then pre, post then the head's pre) and the moe's sum folded in, one launch fewer
 * at each of the three sites where a pre follows a post. */
static void hcpost2_same_bits(void) {
    same_bits_with("HALO_CUDA_HCPOST2", "1", hc_sites_then_moe_sites, -3,
                   "hc_post + hc_pre in one launch", 0.0, false);
}

/* The ffn site's norm inside the hc kernel against its own launch (HALO_CUDA_HCNORM=0): one
 * launch fewer, every output within 1e-6 of it (the normed row's squares are summed in
 * another order; post, comb and the streams are the same values). */
static void hc_norm_close_to_its_launch(void) {
    same_base_name = "HALO_CUDA_HCPOST2", same_base_val = "1"; /* both with hcpost2 */
    same_bits_with("HALO_CUDA_HCNORM", "0", hc_then_norm_match_the_cpu, 1,
                   "the ffn norm inside hcpost2", 1e-6, false);
    same_base_name = same_base_val = NULL;
}

/* Reads back of 64 KiB .. 64 MiB through a pinned staging buffer (HALO_CUDA_PINREAD=1, opt-in):
 * every byte read equals the byte written, for a small read, two sizes that grow the staging, a
 * read at an offset, and the same on the default backend (straight into pageable memory). */
static void large_reads_return_what_was_written(void) {
    const uint64_t n = 3u << 20; /* bytes */
    unsigned char *src = malloc(n), *got = malloc(n);
    for (uint64_t i = 0; i < n; i++)
        src[i] = (unsigned char)(next() >> 56);
    halo_backend *bes[2] = {gpu, NULL};
    halo_error err = {0};
    setenv("HALO_CUDA_PINREAD", "1", 1);
    CHECK_INT(halo_backend_cuda_create(0, &bes[1], &err), HALO_OK);
    unsetenv("HALO_CUDA_PINREAD");
    const uint64_t reads[4][2] = {{0, 4096}, {0, 600000}, {0, n}, {12345, n - 12345}};
    for (int b = 0; b < 2 && bes[b]; b++) {
        halo_buf *buf = NULL;
        CHECK_INT(bes[b]->ops->buf_alloc(bes[b], n, &buf, &err), HALO_OK);
        if (!buf) continue;
        CHECK_INT(bes[b]->ops->buf_write(bes[b], buf, 0, src, n, &err), HALO_OK);
        int bad = 0;
        for (int r = 0; r < 4; r++) {
            memset(got, 0, n);
            CHECK_INT(bes[b]->ops->buf_read(bes[b], buf, reads[r][0], got, reads[r][1], &err),
                      HALO_OK);
            bad += memcmp(got, src + reads[r][0], reads[r][1]) != 0;
        }
        printf("  reads back (%s): %d of 4 differ from what was written\n",
               b ? "HALO_CUDA_PINREAD=1, pinned staging" : "default, pageable", bad);
        CHECK_INT(bad, 0);
        bes[b]->ops->buf_free(bes[b], buf);
    }
    if (bes[1]) bes[1]->ops->destroy(bes[1]);
    free(src);
    free(got);
}

/* One token's k choices by rank (route1_body, the default) against k arg-max rounds
 * (HALO_CUDA_ROUTERANK=0): the same experts, so the moe and the hc site after it the same bits;
 * the moe's outputs are checked against the CPU in that test too. */
static void route_rank_same_bits(void) {
    same_bits_without("HALO_CUDA_ROUTERANK", moe_then_hc_sites_match_the_cpu, 0,
                      "one token's expert choice by rank");
}

/* The ring copy and the output's rope in one launch (rope_copy_kernel) against two
 * (HALO_CUDA_ROPECOPY=0): one launch fewer; the second copy and rope (the rope reads what the
 * copy writes) stay two launches on both. */
static void rope_copy_same_bits(void) {
    same_bits_without("HALO_CUDA_ROPECOPY", copy_then_rope_match_the_cpu, 1,
                      "a queued copy and a rope in one launch");
}

/* q's norm + rope and the kv row's in one launch (norm_rope2_kernel) against one each
 * (HALO_CUDA_NRPAIR=0): one launch fewer. */
static void norm_rope_pair_same_bits(void) {
    same_bits_without("HALO_CUDA_NRPAIR", norm_then_rope_match_the_cpu, 1,
                      "q's and kv's norm + rope in one launch");
}

/* One token's ffn norm, router projection and routing in one kernel (HALO_CUDA_ROUTEFUSE=1, off
 * by default): a backend made with it, the norm then the moe, scored and hash-routed, against
 * the CPU's norm then moe; then the moe without a norm before it. */
static void moe_with_the_norm_in_the_router_matches_the_cpu(void) {
    halo_backend *keep = gpu, *fused = NULL;
    halo_error err = {0};
    setenv("HALO_CUDA_ROUTEFUSE", "1", 1);
    CHECK_INT(halo_backend_cuda_create(0, &fused, &err), HALO_OK);
    unsetenv("HALO_CUDA_ROUTEFUSE");
    if (!fused) return;
    gpu = fused;
    moe_norm_first = true;
    moe_once("norm + router + routing fused, iq2_xxs/q2_K", 4096, 256, 2048, 6, HALO_TYPE_IQ2_XXS,
             HALO_TYPE_Q2_K, HALO_TYPE_Q8_0, false, 1);
    moe_once("norm + router + routing fused, hash-routed", 4096, 256, 2048, 6, HALO_TYPE_IQ2_XXS,
             HALO_TYPE_Q2_K, HALO_TYPE_Q8_0, true, 1);
    moe_norm_first = false;
    moe_once("router + routing fused, no norm before", 4096, 256, 2048, 6, HALO_TYPE_IQ2_XXS,
             HALO_TYPE_Q2_K, HALO_TYPE_Q8_0, false, 1);
    gpu = keep;
    fused->ops->destroy(fused);
}

static void moe_matches_the_cpu(void) {
    moe_once("256x2048 iq2_xxs/q2_K, shared q8_0", 4096, 256, 2048, 6, HALO_TYPE_IQ2_XXS,
             HALO_TYPE_Q2_K, HALO_TYPE_Q8_0, false, 1);
    moe_once("256x2048 iq2_xxs/q2_K, shared q8_0", 4096, 256, 2048, 6, HALO_TYPE_IQ2_XXS,
             HALO_TYPE_Q2_K, HALO_TYPE_Q8_0, false, 19);
    moe_once("hash-routed 256x2048 iq2_xxs/q2_K", 4096, 256, 2048, 6, HALO_TYPE_IQ2_XXS,
             HALO_TYPE_Q2_K, HALO_TYPE_Q8_0, true, 11);
    moe_once("16x512 q4_K/q6_K, shared q5_0", 4096, 16, 512, 6, HALO_TYPE_Q4_K, HALO_TYPE_Q6_K,
             HALO_TYPE_Q5_0, false, 23);
    moe_once("16x512 mxfp4/mxfp4, shared q8_0", 4096, 16, 512, 6, HALO_TYPE_MXFP4, HALO_TYPE_MXFP4,
             HALO_TYPE_Q8_0, false, 23);
    moe_once("16x512 iq3_xxs/q3_K, shared bf16", 4096, 16, 512, 6, HALO_TYPE_IQ3_XXS,
             HALO_TYPE_Q3_K, HALO_TYPE_BF16, false, 9);
    /* Prefill: the experts grouped into tiles of an expert's pairs on tensor cores; 200 tokens
     * give the shared expert several items and some routed experts more than one pair. */
    moe_once("256x2048 iq2_xxs/q2_K, shared q8_0", 4096, 256, 2048, 6, HALO_TYPE_IQ2_XXS,
             HALO_TYPE_Q2_K, HALO_TYPE_Q8_0, false, 64);
    moe_once("256x2048 iq2_xxs/q2_K, shared q8_0", 4096, 256, 2048, 6, HALO_TYPE_IQ2_XXS,
             HALO_TYPE_Q2_K, HALO_TYPE_Q8_0, false, 200);
    /* Items of at most 16 pairs (gm_moe16) beside larger ones (gm_moe) in the same launch pair:
     * each expert is in 12 of the 64 table rows, so ~18 pairs an expert (sd ~4) at 96 tokens;
     * hash routing, so the test counts them. The 256-expert cases' items are all small. */
    moe_once("hash-routed 32x1024 iq2_xxs/q2_K", 4096, 32, 1024, 6, HALO_TYPE_IQ2_XXS,
             HALO_TYPE_Q2_K, HALO_TYPE_Q8_0, true, 96);
    moe_once("hash-routed 256x2048 iq2_xxs/q2_K", 4096, 256, 2048, 6, HALO_TYPE_IQ2_XXS,
             HALO_TYPE_Q2_K, HALO_TYPE_Q8_0, true, 130);
    moe_once("16x512 mxfp4/mxfp4, shared q8_0", 4096, 16, 512, 6, HALO_TYPE_MXFP4, HALO_TYPE_MXFP4,
             HALO_TYPE_Q8_0, false, 100);
}

/* A failure inside an op (a weight type the GPU does not decode) surfaces at sync, naming the
 * op; the next ops and sync work again. */
static void a_failing_op_is_reported_at_sync_by_name(void) {
    both w = rand_w(HALO_TYPE_Q8_0, 256, 8, 1, 1.0f);
    w.g.type = HALO_TYPE_TQ2_0; /* same bytes, a type the GPU kernels do not decode */
    w.g.ne[0] = 256;
    both x = rand_f32(256, 2, 1, 1.0f), y = make(HALO_TYPE_F32, 8, 2, 1, NULL);
    gpu->ops->matmul(gpu, &w.g, &x.g, 1, &y.g);
    halo_error err = {0};
    CHECK_INT(gpu->ops->sync(gpu, &err), HALO_E_UNSUPPORTED);
    CHECK_CONTAINS(err.message, "matmul: weights of type tq2_0 are not supported");
    printf("  %s\n", err.message);
    CHECK_INT(gpu->ops->sync(gpu, &err), HALO_OK);
    w.g.type = HALO_TYPE_Q8_0;
    cpu->ops->matmul(cpu, &w.c, &x.c, 1, &y.c);
    gpu->ops->matmul(gpu, &w.g, &x.g, 1, &y.g);
    compare("matmul after a reported failure", &y, 1e-5);
    drop(&w);
    drop(&x);
    drop(&y);
}

/* The pools: device, gpu-host (cudaHostAlloc mapped) and managed buffers hold weights the
 * kernels read; wrapped host memory (cudaHostRegister) too. Same results from each. */
static void weights_in_every_pool_give_the_same_result(void) {
    uint64_t bytes;
    void *wb = rand_weights(HALO_TYPE_Q4_K, 4096 * 256, 1.0f, &bytes);
    both x = rand_f32(4096, 3, 1, 1.0f), y = make(HALO_TYPE_F32, 256, 3, 1, NULL);
    halo_tensor wc = {.type = HALO_TYPE_Q4_K, .ne = {4096, 256, 1, 1}};
    halo_error err = {0};
    CHECK_INT(cpu->ops->buf_wrap_host(cpu, wb, bytes, &wc.buf, &err), HALO_OK);
    cpu->ops->matmul(cpu, &wc, &x.c, 1, &y.c);
    float *ref = fetch(cpu, &y.c);
    const uint32_t pools[] = {HALO_POOL_DEVICE, HALO_POOL_GPU_HOST, HALO_POOL_MANAGED, 99};
    for (int i = 0; i < 4; i++) {
        halo_tensor wg = wc;
        halo_status st = pools[i] == 99
                             ? gpu->ops->buf_wrap_host(gpu, wb, bytes, &wg.buf, &err)
                             : gpu->ops->buf_alloc_pool(gpu, pools[i], bytes, &wg.buf, &err);
        CHECK_INT(st, HALO_OK);
        if (st) {
            fprintf(stderr, "  %s\n", err.message);
            continue;
        }
        if (pools[i] != 99)
            CHECK_INT(gpu->ops->buf_write(gpu, wg.buf, 0, wb, bytes, &err), HALO_OK);
        gpu->ops->matmul(gpu, &wg, &x.g, 1, &y.g);
        float *got = fetch(gpu, &y.g);
        double md = 0;
        for (int k = 0; k < 256 * 3; k++)
            md = fmax(md, fabs((double)got[k] - ref[k]));
        printf("  weights in %-28s max|d| vs cpu %.2e\n",
               pools[i] == 99 ? "registered host memory" : halo_pool_name(pools[i]), md);
        CHECK(md < 1e-3);
        free(got);
        gpu->ops->buf_free(gpu, wg.buf);
    }
    halo_buf *bad = NULL;
    CHECK_INT(gpu->ops->buf_alloc_pool(gpu, HALO_POOL_HOST, 64, &bad, &err), HALO_E_UNSUPPORTED);
    CHECK_INT(cpu->ops->buf_alloc_pool(cpu, HALO_POOL_DEVICE, 64, &bad, &err), HALO_E_UNSUPPORTED);
    free(ref);
    free(wb);
    cpu->ops->buf_free(cpu, wc.buf);
    drop(&x);
    drop(&y);
}

/* A stand-in for the expert cache: views into the stacked (resident) GPU tensors, at most `cap`
 * experts per resolve, so the backend computes the batch in several rounds; or a read failure. */
typedef struct fake_source {
    const halo_tensor *gate, *up, *down;
    uint32_t cap, calls, fail_at;
} fake_source;

static halo_tensor expert_view(const halo_tensor *t, int32_t e) {
    halo_tensor v = *t;
    v.ne[2] = 1;
    v.offset += (uint64_t)e * halo_tensor_nbytes(&v);
    return v;
}

static halo_status fake_resolve(const halo_expert_source *src, int32_t *ids, uint32_t n,
                                halo_expert_view *views, uint32_t *n_ready, halo_error *err) {
    fake_source *f = src->impl;
    if (++f->calls == f->fail_at)
        return halo_fail(err, HALO_E_IO, "model.gguf: reading blk.%u expert %d (injected)",
                         src->layer, ids[0]);
    uint32_t ready = n < f->cap ? n : f->cap;
    for (uint32_t i = 0; i < ready; i++) {
        views[i].gate = expert_view(f->gate, ids[i]);
        views[i].up = expert_view(f->up, ids[i]);
        views[i].down = expert_view(f->down, ids[i]);
    }
    *n_ready = ready;
    return HALO_OK;
}

/* Streamed experts (halo_moe_args.experts) on the GPU against the CPU with the experts
 * resident: score-routed and hash-routed, resolved a few experts per round; a failing source
 * is reported at sync naming the op and the read. */
static void moe_streamed_matches_the_cpu_resident(void) {
    const int64_t E = 4096, NE = 64, FF = 512, V = 64;
    const uint32_t k = 6;
    for (int hash = 0; hash < 2; hash++) {
        const int64_t T = hash ? 5 : 13;
        both x = rand_f32(E, T, 1, 1.0f), router = rand_w(HALO_TYPE_F16, E, NE, 1, 0.05f);
        both bias = rand_f32(NE, 1, 1, 0.05f);
        both gate = rand_w(HALO_TYPE_IQ2_XXS, E, FF, NE, 0.05f);
        both up = rand_w(HALO_TYPE_IQ2_XXS, E, FF, NE, 0.05f);
        both down = rand_w(HALO_TYPE_Q2_K, FF, E, NE, 0.05f);
        both gs = rand_w(HALO_TYPE_Q8_0, E, FF, 1, 0.05f),
             us = rand_w(HALO_TYPE_Q8_0, E, FF, 1, 0.05f);
        both ds = rand_w(HALO_TYPE_Q8_0, FF, E, 1, 0.05f), out = make(HALO_TYPE_F32, E, T, 1, NULL);
        int32_t table[6 * 64], tokens[16];
        for (int64_t v = 0; v < V; v++)
            for (uint32_t i = 0; i < k; i++)
                table[v * k + i] = (int32_t)((v * 5 + i * 11) % NE);
        for (int64_t t = 0; t < T; t++)
            tokens[t] = (int32_t)(next() % V);
        both tid = make(HALO_TYPE_I32, k, V, 1, table);
        halo_moe_args a = {.x = &x.c,
                           .gate_inp = &router.c,
                           .probs_bias = hash ? NULL : &bias.c,
                           .tid2eid = hash ? &tid.c : NULL,
                           .tokens = tokens,
                           .gate_exps = &gate.c,
                           .up_exps = &up.c,
                           .down_exps = &down.c,
                           .gate_sh = &gs.c,
                           .up_sh = &us.c,
                           .down_sh = &ds.c,
                           .n_used = k,
                           .gating = HALO_GATING_SQRTSOFTPLUS,
                           .norm_weights = true,
                           .weights_scale = 1.5f,
                           .clamp_exp = 10.0f,
                           .clamp_shexp = 10.0f,
                           .out = &out.c};
        cpu->ops->moe(cpu, &a);
        fake_source f = {&gate.g, &up.g, &down.g, 7, 0, 0};
        halo_expert_source src = {fake_resolve, &f, 3};
        a.x = &x.g, a.gate_inp = &router.g, a.probs_bias = hash ? NULL : &bias.g;
        a.tid2eid = hash ? &tid.g : NULL, a.gate_exps = &gate.g, a.up_exps = &up.g;
        a.down_exps = &down.g, a.gate_sh = &gs.g, a.up_sh = &us.g, a.down_sh = &ds.g;
        a.out = &out.g;
        a.experts = &src;
        gpu->ops->moe(gpu, &a);
        char line[128];
        snprintf(line, sizeof line, "moe streamed, %s, %lld tok, %u rounds",
                 hash ? "hash-routed" : "scored", (long long)T, f.calls);
        compare(line, &out, 1e-5);
        CHECK(f.calls >= 2); /* more distinct experts than one round holds */
        if (hash) {
            f.calls = 0;
            f.fail_at = 2;
            gpu->ops->moe(gpu, &a);
            halo_error err = {0};
            CHECK_INT(gpu->ops->sync(gpu, &err), HALO_E_IO);
            CHECK_CONTAINS(err.message, "moe: model.gguf: reading blk.3 expert");
            printf("  %s\n", err.message);
            CHECK_INT(gpu->ops->sync(gpu, &err), HALO_OK);
        }
        both *all[] = {&x, &router, &bias, &gate, &up, &down, &gs, &us, &ds, &out, &tid};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
            drop(all[i]);
    }
}

/* HALO_TEST_ONLY=a,b: only the tests whose names contain one of those (a device run that
 * rechecks a few paths); unset: all. */
static bool selected(const char *name) {
    const char *only = getenv("HALO_TEST_ONLY");
    if (!only || !*only) return true;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", only);
    for (char *t = strtok(buf, ","); t; t = strtok(NULL, ","))
        if (strstr(name, t)) return true;
    return false;
}
#define RUN_SEL(test)                                                                            \
    do {                                                                                         \
        if (selected(#test)) RUN(test);                                                          \
    } while (0)

int main(void) {
    halo_error err = {0};
    unsetenv("HALO_CUDA_MMA"); /* they would override the modes the tests set */
    unsetenv("HALO_CUDA_INTDOT");
    if (halo_backend_cuda_create(0, &gpu, &err)) {
        printf("skipped: no GPU backend here: %s\n", err.message);
        return 77;
    }
    if (halo_backend_cpu_create(0, true, &cpu, &err)) {
        fprintf(stderr, "%s\n", err.message);
        return 1;
    }
    RUN_SEL(embed_decodes_every_type_bit_exactly);
    RUN_SEL(matmul_matches_the_cpu_for_every_type);
    RUN_SEL(matmul_on_tensor_cores_matches_the_cpu);
    RUN_SEL(matmul_multi_matches_the_cpus_norm_then_matmul);
    RUN_SEL(norm_rope_and_hc_match_the_cpu);
    RUN_SEL(hc_sites_of_one_token_match_the_cpu);
    RUN_SEL(norm_then_rope_match_the_cpu);
    RUN_SEL(attention_matches_the_cpu);
    RUN_SEL(attention_two_rows_ahead_gives_the_same_sums);
    RUN_SEL(attention_split_matches_the_cpu);
    RUN_SEL(pool_matches_the_cpu);
    RUN_SEL(topk_selects_the_best_rows);
    RUN_SEL(topk_score_kernels_choose_the_same_rows);
    RUN_SEL(topk_of_a_prefill_batch_selects_the_best_rows);
    RUN_SEL(moe_matches_the_cpu);
    RUN_SEL(moe_with_the_norm_in_the_router_matches_the_cpu);
    RUN_SEL(moe_then_hc_sites_match_the_cpu);
    RUN_SEL(hcpost2_same_bits);
    RUN_SEL(hc_then_norm_match_the_cpu);
    RUN_SEL(hc_norm_close_to_its_launch);
    RUN_SEL(route_rank_same_bits);
    RUN_SEL(large_reads_return_what_was_written);
    RUN_SEL(norm_rope_pair_same_bits);
    RUN_SEL(copy_then_rope_match_the_cpu);
    RUN_SEL(rope_copy_same_bits);
    RUN_SEL(mvq_ring_of_seven_same_bits);
    RUN_SEL(mvq_half_rows_close_to_whole);
    RUN_SEL(moe_streamed_matches_the_cpu_resident);
    RUN_SEL(a_failing_op_is_reported_at_sync_by_name);
    RUN_SEL(weights_in_every_pool_give_the_same_result);
    cpu->ops->destroy(cpu);
    gpu->ops->destroy(gpu);
    return check_report();
}
