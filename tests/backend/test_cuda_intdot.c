/* The CUDA backend's int8 one-token path (HALO_CUDA_INTDOT=1, src/backend/cuda/mvq.cu: Q8_0,
 * IQ2_XXS and Q2_K projections over activations quantized as Q8_0 / Q8_K) against the CPU
 * backend's non-precise mode, which quantizes the activations the same way and sums the same
 * integers (src/quant): only the float summation order differs, so projections are held to
 * 1e-5 of the output's range. Against the precise CPU the difference is the activations'
 * quantization error, far above that, which shows the integer path really ran. The experts
 * (moe op, one token) are held to 2e-3 of the range: their h passes through expf, whose last
 * bit can differ between the GPU and the C library, and a value on a rounding boundary of h's
 * quantization then moves by one step (a quantization step of one of 2048 inputs is ~5e-4 of
 * the range at most). Skipped (exit 77) without a GPU. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "check.h"
#include "halo/types.h"

static halo_backend *gpu, *cpu_fast, *cpu_precise;
static uint64_t rng = 0x2545f4914f6cdd1dull;

static uint64_t next(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}
static float frand(void) {
    return (float)(next() >> 40) / 16777216.0f * 2.0f - 1.0f;
}

/* The same bytes on the GPU and on both CPU backends. */
typedef struct trio {
    halo_tensor t[3]; /* gpu, cpu fast, cpu precise */
} trio;

static halo_backend *be_of(int i) {
    return i == 0 ? gpu : i == 1 ? cpu_fast : cpu_precise;
}

static trio make(uint32_t type, int64_t ne0, int64_t ne1, int64_t ne2, const void *data) {
    trio r;
    for (int i = 0; i < 3; i++) {
        halo_backend *be = be_of(i);
        r.t[i] = (halo_tensor){.type = type, .ne = {ne0, ne1, ne2, 1}};
        uint64_t n = halo_tensor_nbytes(&r.t[i]);
        halo_error err;
        CHECK_INT(be->ops->buf_alloc(be, n, &r.t[i].buf, &err), HALO_OK);
        if (data) CHECK_INT(be->ops->buf_write(be, r.t[i].buf, 0, data, n, &err), HALO_OK);
    }
    return r;
}

static void drop(trio *r) {
    for (int i = 0; i < 3; i++)
        be_of(i)->ops->buf_free(be_of(i), r->t[i].buf);
}

static trio rand_f32(int64_t ne0, int64_t ne1, float scale) {
    float *x = malloc((size_t)(ne0 * ne1) * sizeof *x);
    for (int64_t i = 0; i < ne0 * ne1; i++)
        x[i] = frand() * scale;
    trio r = make(HALO_TYPE_F32, ne0, ne1, 1, x);
    free(x);
    return r;
}

static uint16_t f16_bits(float f) { /* small normal positive values only */
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)((((u >> 23) & 0xff) - 112) << 10 | ((u >> 13) & 0x3ff));
}

/* Random blocks (every code of these formats is valid) with small f16 scales; float types
 * uniform in ±scale. */
static trio rand_w(uint32_t type, int64_t ne0, int64_t ne1, int64_t ne2, float scale) {
    halo_tensor t = {.type = type, .ne = {ne0, ne1, ne2, 1}};
    uint64_t bytes = halo_tensor_nbytes(&t);
    unsigned char *p = malloc(bytes + 8);
    for (uint64_t i = 0; i < bytes; i += 8) {
        uint64_t r = next();
        memcpy(p + i, &r, 8);
    }
    if (type == HALO_TYPE_F32) {
        for (int64_t i = 0; i < ne0 * ne1 * ne2; i++)
            ((float *)p)[i] = frand() * scale;
        trio r = make(type, ne0, ne1, ne2, p);
        free(p);
        return r;
    }
    if (type == HALO_TYPE_F16) {
        for (int64_t i = 0; i < ne0 * ne1 * ne2; i++) {
            float f = frand() * scale;
            uint16_t h = (uint16_t)(f16_bits(fabsf(f) + 1e-4f) | (f < 0 ? 0x8000 : 0));
            memcpy(p + 2 * i, &h, 2);
        }
        trio r = make(type, ne0, ne1, ne2, p);
        free(p);
        return r;
    }
    const halo_type_info *ti = halo_type_info_get(type);
    const int off0 = type == HALO_TYPE_Q2_K ? 80 : 0, off1 = type == HALO_TYPE_Q2_K ? 82 : -1;
    uint16_t d = f16_bits(scale / (ti->block_size == 256 ? 32.0f : 64.0f));
    for (uint64_t b = 0; b < bytes / ti->block_bytes; b++) {
        memcpy(p + b * ti->block_bytes + off0, &d, 2);
        if (off1 >= 0) memcpy(p + b * ti->block_bytes + off1, &d, 2);
    }
    trio r = make(type, ne0, ne1, ne2, p);
    free(p);
    return r;
}

static float *fetch(int i, const halo_tensor *t) {
    halo_backend *be = be_of(i);
    uint64_t n = halo_tensor_nbytes(t);
    float *p = malloc(n + 4);
    halo_error err = {0};
    halo_status st = be->ops->sync(be, &err);
    if (st) fprintf(stderr, "  sync: %s\n", err.message);
    CHECK_INT(st, HALO_OK);
    CHECK_INT(be->ops->buf_read(be, t->buf, t->offset, p, n, &err), HALO_OK);
    return p;
}

/* max |gpu - cpu_i| / max |cpu_i|. */
static double rel_to(const trio *r, int i) {
    float *g = fetch(0, &r->t[0]), *c = fetch(i, &r->t[i]);
    int64_t n = halo_tensor_nelements(&r->t[0]);
    double md = 0, mr = 0;
    for (int64_t k = 0; k < n; k++) {
        double d = fabs((double)g[k] - c[k]);
        if (d > md || d != d || !isfinite(g[k])) md = isfinite(g[k]) ? d : INFINITY;
        if (fabs(c[k]) > mr) mr = fabs(c[k]);
    }
    free(g);
    free(c);
    return mr > 0 ? md / mr : md;
}

/* Within tol of the non-precise CPU, and at least `shows` from the precise one (the integer
 * path ran: the activations' quantization shows against f32 activations). */
static void check_pair(const char *what, const trio *y, double tol, double shows) {
    double fast = rel_to(y, 1), precise = rel_to(y, 2);
    printf("  %-46s vs non-precise %.2e (tol %.0e)  vs precise %.2e\n", what, fast, tol, precise);
    CHECK(fast <= tol);
    CHECK(precise >= shows);
}

static void matmul_once(uint32_t type, int64_t n_in, int64_t n_out, uint32_t groups) {
    trio w = rand_w(type, n_in, n_out, 1, 1.0f);
    trio x = rand_f32(n_in * groups, 1, 1.0f), y = make(HALO_TYPE_F32, n_out, 1, 1, NULL);
    for (int i = 0; i < 3; i++)
        be_of(i)->ops->matmul(be_of(i), &w.t[i], &x.t[i], groups, &y.t[i]);
    char what[80];
    snprintf(what, sizeof what, "matmul %s %lldx%lld%s, 1 tok", halo_type_name(type),
             (long long)n_in, (long long)n_out, groups > 1 ? " (8 groups)" : "");
    check_pair(what, &y, 1e-5, 1e-4);
    drop(&w);
    drop(&x);
    drop(&y);
}

/* Q8_0 at the model's shapes (q_b: short rows, many of them; out_a: grouped; out_b: long rows;
 * the head's width), IQ2_XXS and Q2_K (experts' types, as plain projections). */
static void one_token_projections_sum_the_cpus_integers(void) {
    matmul_once(HALO_TYPE_Q8_0, 4096, 384, 1);
    matmul_once(HALO_TYPE_Q8_0, 1024, 8192, 1);
    matmul_once(HALO_TYPE_Q8_0, 8192, 1536, 1);
    matmul_once(HALO_TYPE_Q8_0, 4096, 8 * 128, 8);
    matmul_once(HALO_TYPE_IQ2_XXS, 4096, 2048, 1);
    matmul_once(HALO_TYPE_Q2_K, 2048, 4096, 1);
    matmul_once(HALO_TYPE_Q2_K, 1024, 77, 1);
}

/* matmul_multi in fast mode (one launch: the Q8_0 rows over the normed x quantized per block,
 * the F16 rows over the normed x in f32) against the non-precise CPU's rms_norm and then one
 * matmul per projection. The norm is summed in another order than the CPU's (f32 on the GPU,
 * f64 there), so an activation on a rounding boundary of its quantization can move by one step:
 * the Q8_0 rows are held to 2e-3 of the range as the experts above (a step of one of 4096 inputs
 * is ~5e-4 at most), and must show the quantization against the precise CPU; F16 rows have f32
 * activations in both CPU modes and are held to 1e-5. */
/* Set: multi_once keeps the GPU's first output here (malloc'd, rows[0] floats). */
static float **multi_keep;

static void multi_once(const char *what, int64_t n_in, bool with_norm, int n, const uint32_t *types,
                       const int64_t *rows) {
    trio x = rand_f32(n_in, 1, 3.0f), nw = rand_f32(n_in, 1, 1.0f);
    trio w[8], y[8];
    for (int i = 0; i < n; i++) {
        w[i] = rand_w(types[i], n_in, rows[i], 1, 1.0f);
        y[i] = make(HALO_TYPE_F32, rows[i], 1, 1, NULL);
    }
    for (int b = 1; b < 3; b++) {
        halo_backend *be = be_of(b);
        if (with_norm) be->ops->rms_norm(be, &x.t[b], (uint32_t)n_in, &nw.t[b], 1e-6f);
        for (int i = 0; i < n; i++)
            be->ops->matmul(be, &w[i].t[b], &x.t[b], 1, &y[i].t[b]);
    }
    const halo_tensor *wg[8];
    halo_tensor *yg[8];
    for (int i = 0; i < n; i++)
        wg[i] = &w[i].t[0], yg[i] = &y[i].t[0];
    gpu->ops->matmul_multi(gpu, &x.t[0], with_norm ? &nw.t[0] : NULL, 1e-6f, (uint32_t)n, wg, yg);
    if (multi_keep) {
        halo_error err = {0};
        *multi_keep = malloc((size_t)rows[0] * sizeof(float));
        CHECK_INT(gpu->ops->sync(gpu, &err), HALO_OK);
        CHECK_INT(gpu->ops->buf_read(gpu, y[0].t[0].buf, y[0].t[0].offset, *multi_keep,
                                     (uint64_t)rows[0] * sizeof(float), &err),
                  HALO_OK);
    }
    for (int i = 0; i < n; i++) {
        char name[80];
        snprintf(name, sizeof name, "multi %s: %s %lldx%lld", what, halo_type_name(types[i]),
                 (long long)n_in, (long long)rows[i]);
        const bool q = types[i] == HALO_TYPE_Q8_0;
        check_pair(name, &y[i], q ? 2e-3 : 1e-5, q ? 1e-4 : 0.0);
        drop(&w[i]);
        drop(&y[i]);
    }
    drop(&x);
    drop(&nw);
}

static void several_projections_of_a_normed_token_in_one_launch(void) {
    CHECK(gpu->ops->matmul_multi != NULL);
    if (!gpu->ops->matmul_multi) return;
    const uint32_t Q = HALO_TYPE_Q8_0, F = HALO_TYPE_F16;
    const uint32_t att_t[7] = {Q, Q, F, F, F, F, F};
    const int64_t att_r[7] = {1024, 512, 1024, 1024, 256, 256, 64};
    const uint32_t qr_t[2] = {Q, F};
    const int64_t qr_r[2] = {32768, 8192};
    const int64_t head_r[1] = {16384};
    multi_once("attn x", 4096, true, 7, att_t, att_r);
    multi_once("qr", 1024, true, 2, qr_t, qr_r);
    multi_once("head", 4096, true, 1, qr_t, head_r);
    multi_once("no norm", 4096, false, 2, qr_t, att_r);
    const uint32_t f32_t[3] = {HALO_TYPE_F32, Q, HALO_TYPE_F32};
    multi_once("f32 rows", 2048, true, 3, f32_t, att_r + 4);
}

/* Set: moe_once keeps the GPU's output here (malloc'd, E floats). */
static float **moe_keep;
/* The experts moe_once makes (ds4's 256; fewer make a test faster: the random experts are most
 * of this file's time). */
static int64_t moe_experts = 256;

static void moe_once(const char *what, uint32_t tg, uint32_t td, uint32_t ts, bool hash) {
    const int64_t E = 4096, NE = moe_experts, FF = 2048, V = 64;
    const uint32_t k = 6;
    trio x = rand_f32(E, 1, 1.0f), router = rand_w(HALO_TYPE_F16, E, NE, 1, 0.05f);
    trio bias = rand_f32(NE, 1, 0.05f);
    trio gate = rand_w(tg, E, FF, NE, 0.05f), up = rand_w(tg, E, FF, NE, 0.05f);
    trio down = rand_w(td, FF, E, NE, 0.05f);
    trio gs = rand_w(ts, E, FF, 1, 0.05f), us = rand_w(ts, E, FF, 1, 0.05f);
    trio ds = rand_w(ts, FF, E, 1, 0.05f), out = make(HALO_TYPE_F32, E, 1, 1, NULL);
    int32_t table[6 * 64], tokens[1] = {(int32_t)(next() % V)};
    for (int64_t v = 0; v < V; v++)
        for (uint32_t i = 0; i < k; i++)
            table[v * k + i] = (int32_t)((v * 7 + i * 37) % NE);
    trio tid = make(HALO_TYPE_I32, k, V, 1, table);
    for (int i = 0; i < 3; i++) {
        halo_moe_args a = {.x = &x.t[i],
                           .gate_inp = &router.t[i],
                           .probs_bias = hash ? NULL : &bias.t[i],
                           .tid2eid = hash ? &tid.t[i] : NULL,
                           .tokens = tokens,
                           .gate_exps = &gate.t[i],
                           .up_exps = &up.t[i],
                           .down_exps = &down.t[i],
                           .gate_sh = &gs.t[i],
                           .up_sh = &us.t[i],
                           .down_sh = &ds.t[i],
                           .n_used = k,
                           .gating = HALO_GATING_SQRTSOFTPLUS,
                           .norm_weights = true,
                           .weights_scale = 1.5f,
                           .clamp_exp = 10.0f,
                           .clamp_shexp = 10.0f,
                           .out = &out.t[i]};
        be_of(i)->ops->moe(be_of(i), &a);
    }
    check_pair(what, &out, 2e-3, 1e-4);
    if (moe_keep) {
        halo_error err = {0};
        *moe_keep = malloc((size_t)E * sizeof(float));
        CHECK_INT(gpu->ops->sync(gpu, &err), HALO_OK);
        CHECK_INT(gpu->ops->buf_read(gpu, out.t[0].buf, out.t[0].offset, *moe_keep,
                                     (uint64_t)E * sizeof(float), &err),
                  HALO_OK);
    }
    trio *all[] = {&x, &router, &bias, &gate, &up, &down, &gs, &us, &ds, &out, &tid};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        drop(all[i]);
}

static void one_token_experts_match_the_cpus_integer_mode(void) {
    moe_once("moe 256x2048 iq2_xxs/q2_K, shared q8_0", HALO_TYPE_IQ2_XXS, HALO_TYPE_Q2_K,
             HALO_TYPE_Q8_0, false);
    moe_once("moe hash-routed iq2_xxs/q2_K, shared q8_0", HALO_TYPE_IQ2_XXS, HALO_TYPE_Q2_K,
             HALO_TYPE_Q8_0, true);
    moe_once("moe 256x2048 q8_0 throughout", HALO_TYPE_Q8_0, HALO_TYPE_Q8_0, HALO_TYPE_Q8_0, false);
}

/* Bitwise the same output from a and b, n floats each (both freed). */
static void same_bits(const char *what, float *a, float *b, int64_t n) {
    int differ = 0;
    for (int64_t i = 0; a && b && i < n; i++)
        differ += memcmp(&a[i], &b[i], sizeof(float)) != 0;
    printf("  %s: %d of %lld outputs differ\n", what, differ, (long long)n);
    CHECK(a && b);
    CHECK_INT(differ, 0);
    free(a);
    free(b);
}

/* Rows two at a time with the activation held (the default: the experts' IQ2_XXS gate/up, and
 * q_b's one-chunk Q8_0 rows in matmul_multi) and one at a time (HALO_CUDA_TWO=0, a second
 * backend) on the same inputs: bitwise the same outputs, as the rows and each row's sum are the
 * same. */
static void two_rows_at_a_time_give_the_same_sums(void) {
    halo_backend *keep = gpu, *one = NULL;
    halo_error err = {0};
    setenv("HALO_CUDA_TWO", "0", 1);
    CHECK_INT(halo_backend_cuda_create(0, &one, &err), HALO_OK);
    unsetenv("HALO_CUDA_TWO");
    if (!one) return;
    float *two_out = NULL, *one_out = NULL;
    const uint64_t seed = rng;
    moe_keep = &two_out;
    moe_once("moe iq2_xxs/q2_K, two rows at a time", HALO_TYPE_IQ2_XXS, HALO_TYPE_Q2_K,
             HALO_TYPE_Q8_0, false);
    rng = seed;
    gpu = one;
    moe_keep = &one_out;
    moe_once("moe iq2_xxs/q2_K, one row at a time", HALO_TYPE_IQ2_XXS, HALO_TYPE_Q2_K,
             HALO_TYPE_Q8_0, false);
    gpu = keep;
    moe_keep = NULL;
    same_bits("moe, two rows vs one at a time", two_out, one_out, 4096);
    const uint32_t qr_t[2] = {HALO_TYPE_Q8_0, HALO_TYPE_F16};
    const int64_t qr_r[2] = {32768, 8192};
    const uint64_t seed2 = rng;
    multi_keep = &two_out;
    multi_once("qr, two rows at a time", 1024, true, 2, qr_t, qr_r);
    rng = seed2;
    gpu = one;
    multi_keep = &one_out;
    multi_once("qr, one row at a time", 1024, true, 2, qr_t, qr_r);
    gpu = keep;
    multi_keep = NULL;
    same_bits("multi q_b rows, two vs one at a time", two_out, one_out, 32768);
    one->ops->destroy(one);
}

/* The experts' SwiGLU and h's quantization inside the gate/up kernel (opt-in,
 * HALO_CUDA_GUFUSE=1 with mvq.cuh's IQ2_XXS decoder, =2 with moe_gu.cuh's: backends made with
 * it) against the default (two launches) on the same inputs: bitwise the same outputs (the
 * same row sums, the same SwiGLU expression, the same 256 values a quantized chunk on the same
 * lanes), scored (both) then hash-routed (=2). The fused kernel's chunk counters must be back at
 * zero after each launch: the second round runs on the same backend, and a counter left over
 * would have it quantize a chunk before it is whole. */
static void swiglu_in_the_gate_up_kernel_gives_the_same_sums(void) {
    halo_backend *keep = gpu, *fused[2] = {NULL, NULL};
    halo_error err = {0};
    for (int i = 0; i < 2; i++) {
        setenv("HALO_CUDA_GUFUSE", i ? "2" : "1", 1);
        CHECK_INT(halo_backend_cuda_create(0, &fused[i], &err), HALO_OK);
    }
    unsetenv("HALO_CUDA_GUFUSE");
    if (!fused[0] || !fused[1]) return;
    for (int round = 0; round < 2; round++) {
        float *base = NULL, *got[2] = {NULL, NULL};
        const uint64_t seed = rng;
        const bool hash = round == 1;
        moe_keep = &base;
        moe_once("moe iq2_xxs/q2_K, SwiGLU apart", HALO_TYPE_IQ2_XXS, HALO_TYPE_Q2_K,
                 HALO_TYPE_Q8_0, hash);
        for (int i = round; i < 2; i++) { /* the hash-routed round: the own decoder's only */
            rng = seed;
            gpu = fused[i];
            moe_keep = &got[i];
            moe_once(i ? "moe iq2_xxs/q2_K, SwiGLU in gate/up, own decoder"
                       : "moe iq2_xxs/q2_K, SwiGLU in gate/up",
                     HALO_TYPE_IQ2_XXS, HALO_TYPE_Q2_K, HALO_TYPE_Q8_0, hash);
        }
        gpu = keep;
        moe_keep = NULL;
        float *copy = base ? malloc(4096 * sizeof(float)) : NULL;
        if (copy) memcpy(copy, base, 4096 * sizeof(float));
        if (round == 0)
            same_bits("moe, SwiGLU in gate/up vs apart", got[0], base, 4096);
        else
            free(base);
        same_bits("moe, SwiGLU in gate/up (own decoder) vs apart", got[1], copy, 4096);
    }
    for (int i = 0; i < 2; i++)
        fused[i]->ops->destroy(fused[i]);
}

/* The experts' down rows with each warp in one pair and the pair's h in registers (opt-in,
 * HALO_CUDA_DNHOLD=1, =2 two rows at a time: backends made with it) against the default
 * backend on the same inputs: bitwise the same outputs (the same rows, each row's units in the
 * same order). */
static void down_rows_held_by_pair_give_the_same_sums(void) {
    halo_backend *keep = gpu, *held[2] = {NULL, NULL};
    halo_error err = {0};
    for (int i = 0; i < 2; i++) {
        setenv("HALO_CUDA_DNHOLD", i ? "2" : "1", 1);
        CHECK_INT(halo_backend_cuda_create(0, &held[i], &err), HALO_OK);
    }
    unsetenv("HALO_CUDA_DNHOLD");
    if (!held[0] || !held[1]) return;
    float *base = NULL, *got[2] = {NULL, NULL};
    const uint64_t seed = rng;
    moe_keep = &base;
    moe_once("moe iq2_xxs/q2_K, default down", HALO_TYPE_IQ2_XXS, HALO_TYPE_Q2_K, HALO_TYPE_Q8_0,
             false);
    for (int i = 0; i < 2; i++) {
        rng = seed;
        gpu = held[i];
        moe_keep = &got[i];
        moe_once(i ? "moe iq2_xxs/q2_K, down held, two rows" : "moe iq2_xxs/q2_K, down held",
                 HALO_TYPE_IQ2_XXS, HALO_TYPE_Q2_K, HALO_TYPE_Q8_0, false);
    }
    gpu = keep;
    moe_keep = NULL;
    float *copy = base ? malloc(4096 * sizeof(float)) : NULL;
    if (copy) memcpy(copy, base, 4096 * sizeof(float));
    same_bits("moe, down held by pair vs default", got[0], base, 4096);
    same_bits("moe, down held, two rows vs default", got[1], copy, 4096);
    for (int i = 0; i < 2; i++)
        held[i]->ops->destroy(held[i]);
}

/* The experts' kernels built for this shape (moe_dec.cuh, the default) against the generic
 * streams (HALO_CUDA_MDQ=0, read at each call) on the same inputs and backend. Each is held to
 * the CPU's bound by moe_once; with HALO_CUDA_MDQ=2 the op fails unless the new kernels take
 * it, so this is not the old path against itself. The outputs are bitwise the same: the same
 * units a lane in the same order, the same unit values, reductions adding the same pairs, the
 * same SwiGLU expression and h quantized on the same lanes. Scored and hash-routed q2, and
 * Q8_0 throughout (a second instantiation), 16 experts. The new path runs twice, the second
 * time with other shares of blocks for the shared expert (HALO_CUDA_MDQSPLIT) and the IQ2_XXS
 * sign masks computed (HALO_CUDA_MDQSIGN=0): the same bits (the same masks; no result depends
 * on which warp computes it, and nothing left behind changes the next call). */
static void experts_kernels_for_the_shape_give_the_generic_streams_sums(void) {
    static const uint32_t t[3][3] = {{HALO_TYPE_IQ2_XXS, HALO_TYPE_Q2_K, HALO_TYPE_Q8_0},
                                     {HALO_TYPE_IQ2_XXS, HALO_TYPE_Q2_K, HALO_TYPE_Q8_0},
                                     {HALO_TYPE_Q8_0, HALO_TYPE_Q8_0, HALO_TYPE_Q8_0}};
    static const char *name[3] = {"iq2_xxs/q2_K", "iq2_xxs/q2_K hash-routed", "q8_0"};
    moe_experts = 16; /* 6 routed of 16: the kernels see the same shape, 16x fewer bytes */
    for (int c = 0; c < 3; c++) {
        float *old_out = NULL, *new_out = NULL, *again = NULL;
        char what[96];
        const uint64_t seed = rng;
        setenv("HALO_CUDA_MDQ", "0", 1);
        moe_keep = &old_out;
        snprintf(what, sizeof what, "moe %s, generic streams", name[c]);
        moe_once(what, t[c][0], t[c][1], t[c][2], c == 1);
        setenv("HALO_CUDA_MDQ", "2", 1); /* the op fails unless the new kernels take it */
        for (int r = 0; r < 2; r++) {
            rng = seed;
            if (r) {
                setenv("HALO_CUDA_MDQSPLIT", "12,55", 1);
                setenv("HALO_CUDA_MDQSIGN", "0", 1);
            }
            moe_keep = r ? &again : &new_out;
            snprintf(what, sizeof what, "moe %s, built for the shape%s", name[c],
                     r ? ", other split, signs computed" : "");
            moe_once(what, t[c][0], t[c][1], t[c][2], c == 1);
        }
        unsetenv("HALO_CUDA_MDQ");
        unsetenv("HALO_CUDA_MDQSPLIT");
        unsetenv("HALO_CUDA_MDQSIGN");
        moe_keep = NULL;
        float *copy = new_out ? malloc(4096 * sizeof(float)) : NULL;
        if (copy) memcpy(copy, new_out, 4096 * sizeof(float));
        snprintf(what, sizeof what, "moe %s, built for the shape vs generic", name[c]);
        same_bits(what, new_out, old_out, 4096);
        snprintf(what, sizeof what, "moe %s, other split, signs computed", name[c]);
        same_bits(what, again, copy, 4096);
    }
    moe_experts = 256;
}

int main(void) {
    halo_error err = {0};
    setvbuf(stdout, NULL, _IOLBF, 0); /* lines so far survive a timeout's kill */
    setenv("HALO_CUDA_INTDOT", "1", 1);
    if (halo_backend_cuda_create(0, &gpu, &err)) {
        printf("skipped: no GPU backend here: %s\n", err.message);
        return 77;
    }
    if (halo_backend_cpu_create(0, false, &cpu_fast, &err) ||
        halo_backend_cpu_create(0, true, &cpu_precise, &err)) {
        fprintf(stderr, "%s\n", err.message);
        return 1;
    }
    /* HALO_TEST_ONLY=word: only the tests whose names contain it (the whole file takes ~90 s
     * on an H200, most of it making random experts). */
    const char *only = getenv("HALO_TEST_ONLY");
#define RUN_IF(t)                                                                                  \
    if (!only || strstr(#t, only)) RUN(t)
    RUN_IF(one_token_projections_sum_the_cpus_integers);
    RUN_IF(several_projections_of_a_normed_token_in_one_launch);
    RUN_IF(one_token_experts_match_the_cpus_integer_mode);
    RUN_IF(experts_kernels_for_the_shape_give_the_generic_streams_sums);
    setenv("HALO_CUDA_MDQ", "0", 1); /* these three compare the generic streams' variants */
    RUN_IF(two_rows_at_a_time_give_the_same_sums);
    RUN_IF(swiglu_in_the_gate_up_kernel_gives_the_same_sums);
    RUN_IF(down_rows_held_by_pair_give_the_same_sums);
    unsetenv("HALO_CUDA_MDQ");
    gpu->ops->destroy(gpu);
    cpu_fast->ops->destroy(cpu_fast);
    cpu_precise->ops->destroy(cpu_precise);
    return check_report();
}
