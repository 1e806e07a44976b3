/* The Vulkan backend op by op against the CPU backend (precise mode: f32 activations, the
 * reference), at DeepSeek V4 Flash's shapes: hidden 4096, 64 heads of 512 with a 64-channel
 * rope tail, hc 4, 256 experts of width 2048 (top-6, sqrt-softplus, shared expert), indexer 64
 * heads of 128 with top-k 512, grouped output projection in 8 groups. Rows of the large
 * projections are sampled (a few hundred of thousands) so lavapipe finishes in CI's time; one
 * test keeps a weight larger than a storage-buffer descriptor to check it is split. Every
 * weight type of the golden fixtures and both DeepSeek V4 mixes is decoded. Tolerances are
 * max |vulkan - cpu| / max |cpu| per op: 1e-4 for long f32 dots (summation order), tighter
 * where nothing is summed. The projections run twice: matvec.comp with a workgroup per row
 * (HALO_VK_MATVEC_ROWS=1: a GPU's choice for few rows) and with a subgroup per row (=4: what
 * many rows, and lavapipe, take). Skips (exit 77) when no Vulkan device works. */
#include <math.h>
#include <stdlib.h>

#include "backend/backend.h"
#include "backend/vulkan/vulkan.h"
#include "check.h"
#include "halo/quant.h"
#include "halo/types.h"

static halo_backend *cpu, *vk;
/* For the folds' tests, made once: every fold of this session off (each op recorded as the
 * forward calls it: HALO_VK_FUSE_MOE=0, HALO_VK_DEFER_NORM/POST/ROPE=0, HALO_VK_COPY_FWD=0), and
 * the defaults (every fold on). */
static halo_backend *vk_off, *vk_def;

/* A Vulkan backend made with the variables "NAME=VALUE", ... (NULL-terminated) set, and no time
 * bound on a submission: a long-lived backend on a loaded lavapipe learns that its dispatches
 * are slow (a short one timed under load can make the estimate jump) and would otherwise
 * split the work into more submissions, each ending in a barrier, which blurred the barrier
 * counts the fold tests compare (seen once: 13 where 6 are recorded). */
static halo_backend *vk_env(const char *const *vars) {
    char name[64];
    setenv("HALO_VK_SUBMIT_MS", "inf", 1);
    for (const char *const *v = vars; *v; v++) {
        size_t n = strcspn(*v, "=");
        snprintf(name, sizeof name, "%.*s", (int)n, *v);
        setenv(name, *v + n + 1, 1);
    }
    halo_backend *be = NULL;
    halo_error err = {0};
    CHECK_INT(halo_backend_vulkan_create(-1, &be, &err), HALO_OK);
    unsetenv("HALO_VK_SUBMIT_MS");
    for (const char *const *v = vars; *v; v++) {
        size_t n = strcspn(*v, "=");
        snprintf(name, sizeof name, "%.*s", (int)n, *v);
        unsetenv(name);
    }
    return be;
}
static uint32_t seed = 12345;

static float frand(void) {
    seed = seed * 1664525u + 1013904223u;
    return (float)(seed >> 8) / 16777216.0f * 2.0f - 1.0f;
}

static float *rnd(int64_t n, float scale) {
    float *x = malloc((size_t)n * sizeof *x);
    for (int64_t i = 0; i < n; i++)
        x[i] = frand() * scale;
    return x;
}

/* A tensor of the same bytes on both backends. */
typedef struct both {
    halo_tensor c, v;
} both;

static halo_tensor make1(halo_backend *be, uint32_t type, int64_t ne0, int64_t ne1, int64_t ne2,
                         const void *data) {
    halo_tensor t = {.type = type, .ne = {ne0, ne1, ne2, 1}};
    halo_error err = {0};
    CHECK_INT(be->ops->buf_alloc(be, halo_tensor_nbytes(&t), &t.buf, &err), HALO_OK);
    if (data && t.buf)
        CHECK_INT(be->ops->buf_write(be, t.buf, 0, data, halo_tensor_nbytes(&t), &err), HALO_OK);
    return t;
}

static both make(uint32_t type, int64_t ne0, int64_t ne1, int64_t ne2, const void *data) {
    return (both){make1(cpu, type, ne0, ne1, ne2, data), make1(vk, type, ne0, ne1, ne2, data)};
}

static void drop(both *b) {
    cpu->ops->buf_free(cpu, b->c.buf);
    vk->ops->buf_free(vk, b->v.buf);
}

/* Weights of `type` from random values. Types halo does not quantize (IQ2_XXS, Q4_0 .. Q5_1):
 * random blocks whose leading f16 scale (and min) are set to a sane value; every other byte
 * pattern is a valid block. Caller frees. */
static void *weights(uint32_t type, int64_t ne0, int64_t rows, float scale) {
    uint64_t rb = 0;
    halo_type_bytes(type, (uint64_t)ne0, &rb);
    unsigned char *w = malloc((size_t)(rb * (uint64_t)rows));
    if (!halo_quant_can_quantize(type)) {
        const halo_type_info *ti = halo_type_info_get(type);
        int n_f16 =
            type == HALO_TYPE_Q4_1 || type == HALO_TYPE_Q5_1 || type == HALO_TYPE_Q5_K ? 2 : 1;
        for (uint64_t i = 0; i < rb * (uint64_t)rows; i++)
            w[i] = (unsigned char)(frand() * 127 + 128);
        for (uint64_t b = 0; b < rb * (uint64_t)rows / ti->block_bytes; b++)
            for (int f = 0; f < n_f16; f++) {
                float d = scale / 64;
                halo_quant_quantize_row(HALO_TYPE_F16, &d, w + b * ti->block_bytes + 2 * f, 1,
                                        NULL);
            }
        return w;
    }
    float *x = rnd(ne0, scale);
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t i = 0; i < ne0; i++)
            x[i] = frand() * scale;
        halo_error err;
        CHECK_INT(halo_quant_quantize_row(type, x, w + (uint64_t)r * rb, ne0, &err), HALO_OK);
    }
    free(x);
    return w;
}

static float *read_all(halo_backend *be, const halo_tensor *t) {
    uint64_t n = halo_tensor_nbytes(t);
    float *x = malloc((size_t)n + 4);
    halo_error err = {0};
    halo_status st = be->ops->sync(be, &err);
    if (st) fprintf(stderr, "  %s: %s\n", be->ops->name, err.message);
    CHECK_INT(st, HALO_OK);
    CHECK_INT(be->ops->buf_read(be, t->buf, t->offset, x, n, &err), HALO_OK);
    return x;
}

/* max |vk - cpu| / max |cpu| of an f32 output, printed and checked against tol. */
static void expect_close(const char *what, both *t, double tol) {
    float *a = read_all(cpu, &t->c), *b = read_all(vk, &t->v);
    int64_t n = halo_tensor_nelements(&t->c);
    double d = 0, m = 0;
    int64_t worst = 0;
    for (int64_t i = 0; i < n; i++) {
        double x = fabs((double)a[i] - b[i]);
        if (x > d || isnan(x)) worst = i;
        d = x > d || isnan(x) ? x : d;
        m = fabs(a[i]) > m ? fabs(a[i]) : m;
    }
    double rel = m > 0 ? d / m : d;
    printf("  %-44s max|d| %.2e rel %.2e\n", what, d, rel);
    if (rel > tol)
        printf("    worst at element %lld: cpu %g, vulkan %g\n", (long long)worst, a[worst],
               b[worst]);
    CHECK(rel <= tol);
    free(a);
    free(b);
}

/* HALO_VK_TEST_ONLY=a,b,...: only the tests whose names contain one of the words (a device
 * run with little time takes the decode kernels' tests alone). */
static bool wanted(const char *name) {
    const char *only = getenv("HALO_VK_TEST_ONLY");
    if (!only || !*only) return true;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", only);
    for (char *t = strtok(buf, ","); t; t = strtok(NULL, ","))
        if (strstr(name, t)) return true;
    return false;
}
#define RUN_SOME(test)                                                                             \
    do {                                                                                           \
        if (wanted(#test)) RUN(test);                                                              \
    } while (0)

static void matmul_decodes_every_weight_type(void) {
    static const uint32_t types[] = {
        HALO_TYPE_F32,  HALO_TYPE_F16,  HALO_TYPE_BF16,    HALO_TYPE_Q8_0,  HALO_TYPE_Q2_K,
        HALO_TYPE_Q4_K, HALO_TYPE_Q6_K, HALO_TYPE_IQ2_XXS, HALO_TYPE_MXFP4, HALO_TYPE_Q4_0,
        HALO_TYPE_Q4_1, HALO_TYPE_Q5_0, HALO_TYPE_Q5_1,    HALO_TYPE_Q5_K};
    enum { K = 4096, N = 72, T = 3 }; /* q_a's input; 72 of its 1024 rows */
    float *x = rnd(K * T, 1.0f);
    both bx = make(HALO_TYPE_F32, K, T, 1, x);
    for (size_t i = 0; i < sizeof types / sizeof *types; i++) {
        void *w = weights(types[i], K, N, 0.05f);
        both bw = make(types[i], K, N, 1, w), out = make(HALO_TYPE_F32, N, T, 1, NULL);
        cpu->ops->matmul(cpu, &bw.c, &bx.c, 1, &out.c);
        vk->ops->matmul(vk, &bw.v, &bx.v, 1, &out.v);
        char what[64];
        snprintf(what, sizeof what, "matmul %s [4096 x %d] x %d tokens", halo_type_name(types[i]),
                 N, T);
        expect_close(what, &out, 1e-4);
        drop(&bw);
        drop(&out);
        free(w);
    }
    drop(&bx);
    free(x);
}

/* The decode shaders' types (Q8_0 by matvec_q8.comp where the backend takes it, IQ2_XXS and
 * Q2_K by matvec_moe.comp) at 1 and 3 columns: the variants' runs below (fewer types than
 * matmul_decodes_every_weight_type, to keep the H200 run short). */
static void decode_types_match_the_cpu(void) {
    static const uint32_t types[] = {HALO_TYPE_Q8_0, HALO_TYPE_Q2_K, HALO_TYPE_IQ2_XXS};
    enum { K = 4096, N = 72 };
    float *x = rnd(K * 3, 1.0f);
    for (size_t i = 0; i < sizeof types / sizeof *types; i++) {
        void *w = weights(types[i], K, N, 0.05f);
        both bw = make(types[i], K, N, 1, w);
        for (int t = 1; t <= 3; t += 2) {
            both bx = make(HALO_TYPE_F32, K, t, 1, x), out = make(HALO_TYPE_F32, N, t, 1, NULL);
            cpu->ops->matmul(cpu, &bw.c, &bx.c, 1, &out.c);
            vk->ops->matmul(vk, &bw.v, &bx.v, 1, &out.v);
            char what[64];
            snprintf(what, sizeof what, "decode %s [4096 x %d] x %d", halo_type_name(types[i]), N,
                     t);
            expect_close(what, &out, 1e-4);
            drop(&bx), drop(&out);
        }
        drop(&bw);
        free(w);
    }
    free(x);
}

/* matvec_q8.comp (HALO_VK_MVQ8: a GPU takes it for Q8_0 decode; lavapipe only when asked),
 * every variant: 1..4 rows per subgroup or per workgroup, one or two units in flight, row counts
 * that leave a partial last group or that R does not divide (its fallback to 1 row), 1..5 columns
 * (a second tile of one), and the grouped projection. "sN": matvec_q8s.comp with N rows a
 * workgroup (HALO_VK_MVQ8S; 8 and 16 take K = 4096 in 2 and 4 stages; 12 rows a group: 4),
 * "s4c" with the conversion instructions (HALO_VK_CVT=0). */
static void q8_0_decode_variants_match_the_cpu(void) {
    static const char *const variants[] = {"1",  "2",  "3",  "4u", "1w", "2wu", "3w",
                                           "4w", "s1", "s2", "s4", "s8", "s16", "s4c"};
    enum { K = 4096, G = 8, KG = 1024, NG = 12 };
    static const int rows[] = {72, 70, 1};
    float *x = rnd(K * 5, 1.0f), *xg = rnd(G * KG * 2, 1.0f);
    void *w = weights(HALO_TYPE_Q8_0, K, 72, 0.05f);
    void *wg = weights(HALO_TYPE_Q8_0, KG, G * NG, 0.05f);
    halo_backend *keep = vk;
    for (size_t v = 0; v < sizeof variants / sizeof *variants; v++) {
        halo_error err = {0};
        bool staged = variants[v][0] == 's';
        setenv("HALO_VK_MVQ8", staged ? "1" : variants[v], 1);
        if (staged) setenv("HALO_VK_MVQ8S", variants[v] + 1, 1); /* atoi: "4c" is 4 */
        if (strchr(variants[v], 'c')) setenv("HALO_VK_CVT", "0", 1);
        CHECK_INT(halo_backend_vulkan_create(-1, &vk, &err), HALO_OK);
        unsetenv("HALO_VK_MVQ8"), unsetenv("HALO_VK_MVQ8S"), unsetenv("HALO_VK_CVT");
        for (int t = 1; t <= 5; t += 2)
            for (size_t r = 0; r < sizeof rows / sizeof *rows; r++) {
                both bx = make(HALO_TYPE_F32, K, t, 1, x);
                both bw = make(HALO_TYPE_Q8_0, K, rows[r], 1, w);
                both out = make(HALO_TYPE_F32, rows[r], t, 1, NULL);
                cpu->ops->matmul(cpu, &bw.c, &bx.c, 1, &out.c);
                vk->ops->matmul(vk, &bw.v, &bx.v, 1, &out.v);
                char what[64];
                snprintf(what, sizeof what, "mvq8=%s q8_0 [4096 x %d] x %d", variants[v], rows[r],
                         t);
                expect_close(what, &out, 1e-4);
                drop(&bx), drop(&bw), drop(&out);
            }
        /* the same with an RMS norm of x folded in (matmul_multi, decode's columns) */
        for (int t = 1; t <= 3; t += 2)
            for (size_t r = 0; r < 2; r++) {
                both bx = make(HALO_TYPE_F32, K, t, 1, x), bn = make(HALO_TYPE_F32, K, 1, 1, x);
                both bw = make(HALO_TYPE_Q8_0, K, rows[r], 1, w);
                both out = make(HALO_TYPE_F32, rows[r], t, 1, NULL);
                cpu->ops->rms_norm(cpu, &bx.c, K, &bn.c, 1e-6f);
                cpu->ops->matmul(cpu, &bw.c, &bx.c, 1, &out.c);
                const halo_tensor *wv = &bw.v;
                halo_tensor *ov = &out.v;
                vk->ops->matmul_multi(vk, &bx.v, &bn.v, 1e-6f, 1, &wv, &ov);
                char what[64];
                snprintf(what, sizeof what, "mvq8=%s +norm q8_0 [4096 x %d] x %d", variants[v],
                         rows[r], t);
                expect_close(what, &out, 1e-4);
                drop(&bx), drop(&bn), drop(&bw), drop(&out);
            }
        both bx = make(HALO_TYPE_F32, G * KG, 2, 1, xg);
        both bw = make(HALO_TYPE_Q8_0, KG, G * NG, 1, wg);
        both out = make(HALO_TYPE_F32, G * NG, 2, 1, NULL);
        cpu->ops->matmul(cpu, &bw.c, &bx.c, G, &out.c);
        vk->ops->matmul(vk, &bw.v, &bx.v, G, &out.v);
        char what[64];
        snprintf(what, sizeof what, "mvq8=%s q8_0 grouped 8 x [1024 x 12] x 2", variants[v]);
        expect_close(what, &out, 1e-4);
        drop(&bx), drop(&bw), drop(&out);
        vk->ops->destroy(vk);
    }
    vk = keep;
    free(x), free(xg), free(w), free(wg);
}

/* matmul_multi (the attention's projections of one input with its norm first) against the
 * CPU's rms_norm then one matmul each: the q2 mix's types (Q8_0 and F16 together, so one call
 * takes matvec_q8.comp or matvec.comp and matvec.comp's F16 path), 1 to 5 columns (5: past
 * matvec's tile, where the norm runs first instead of folded in), with and without the norm. */
static void matmul_multi_matches_norm_then_matmul(void) {
    enum { K = 4096, NQ = 72, NF = 40, T_MAX = 5 };
    float *x = rnd(K * T_MAX, 1.0f), *g = rnd(K, 1.0f);
    for (int i = 0; i < K; i++)
        g[i] += 1.5f; /* a norm weight around 1, as trained ones are */
    void *wq = weights(HALO_TYPE_Q8_0, K, NQ, 0.05f), *wf = weights(HALO_TYPE_F16, K, NF, 0.05f);
    both bg = make(HALO_TYPE_F32, K, 1, 1, g);
    both bq = make(HALO_TYPE_Q8_0, K, NQ, 1, wq), bf = make(HALO_TYPE_F16, K, NF, 1, wf);
    CHECK(vk->ops->matmul_multi != NULL);
    for (int t = 1; t <= T_MAX && vk->ops->matmul_multi; t += 2)
        for (int norm = 0; norm < 2; norm++) {
            both bx = make(HALO_TYPE_F32, K, t, 1, x);
            both oq = make(HALO_TYPE_F32, NQ, t, 1, NULL), of = make(HALO_TYPE_F32, NF, t, 1, NULL);
            if (norm) cpu->ops->rms_norm(cpu, &bx.c, K, &bg.c, 1e-6f);
            cpu->ops->matmul(cpu, &bq.c, &bx.c, 1, &oq.c);
            cpu->ops->matmul(cpu, &bf.c, &bx.c, 1, &of.c);
            const halo_tensor *w[2] = {&bq.v, &bf.v};
            halo_tensor *o[2] = {&oq.v, &of.v};
            vk->ops->matmul_multi(vk, &bx.v, norm ? &bg.v : NULL, 1e-6f, 2, w, o);
            char what[80];
            snprintf(what, sizeof what, "matmul_multi%s q8_0 [4096 x %d] x %d", norm ? "+norm" : "",
                     NQ, t);
            expect_close(what, &oq, 1e-4);
            snprintf(what, sizeof what, "matmul_multi%s f16 [4096 x %d] x %d", norm ? "+norm" : "",
                     NF, t);
            expect_close(what, &of, 1e-4);
            drop(&bx), drop(&oq), drop(&of);
        }
    drop(&bg), drop(&bq), drop(&bf);
    free(x), free(g), free(wq), free(wf);
}

static void grouped_matmul_reads_its_group_slice(void) {
    enum { G = 8, K = 4096, NG = 12, T = 2 }; /* attn_output_a: 8 groups of 4096 inputs */
    float *x = rnd((int64_t)G * K * T, 1.0f);
    void *w = weights(HALO_TYPE_Q8_0, K, G * NG, 0.05f);
    both bx = make(HALO_TYPE_F32, G * K, T, 1, x), bw = make(HALO_TYPE_Q8_0, K, G * NG, 1, w);
    both out = make(HALO_TYPE_F32, G * NG, T, 1, NULL);
    cpu->ops->matmul(cpu, &bw.c, &bx.c, G, &out.c);
    vk->ops->matmul(vk, &bw.v, &bx.v, G, &out.v);
    expect_close("matmul q8_0 grouped 8 x [4096 x 12]", &out, 1e-4);
    drop(&bx), drop(&bw), drop(&out);
    free(x), free(w);
}

static void weight_larger_than_a_descriptor_is_split(void) {
    /* 4096 x 8704 f32 = 142.6 MB: over lavapipe's 128 MiB maxStorageBufferRange. */
    enum { K = 4096, N = 8704, T = 2 };
    float *x = rnd(K * T, 1.0f), *w = rnd((int64_t)K * N, 0.05f);
    both bx = make(HALO_TYPE_F32, K, T, 1, x), bw = make(HALO_TYPE_F32, K, N, 1, w);
    both out = make(HALO_TYPE_F32, N, T, 1, NULL);
    cpu->ops->matmul(cpu, &bw.c, &bx.c, 1, &out.c);
    vk->ops->matmul(vk, &bw.v, &bx.v, 1, &out.v);
    expect_close("matmul f32 [4096 x 8704] (142.6 MB weight)", &out, 1e-4);
    drop(&bx), drop(&bw), drop(&out);
    free(x), free(w);
}

static void embed_rows_of_a_quantized_table(void) {
    enum { E = 4096, V = 300, T = 3 };
    void *w = weights(HALO_TYPE_Q8_0, E, V, 1.0f);
    both tab = make(HALO_TYPE_Q8_0, E, V, 1, w), out = make(HALO_TYPE_F32, E, T, 1, NULL);
    int32_t tok[T] = {5, 0, V - 1};
    cpu->ops->embed(cpu, &tab.c, tok, &out.c);
    vk->ops->embed(vk, &tab.v, tok, &out.v);
    expect_close("embed q8_0 [4096 x 300]", &out, 1e-6);
    drop(&tab), drop(&out);
    free(w);
}

static void norms_and_rope(void) {
    enum { E = 4096, HD = 512, H = 64, T = 3 };
    float *x = rnd(E * T, 2.0f), *wt = rnd(E, 1.0f);
    both bx = make(HALO_TYPE_F32, E, T, 1, x), bw = make(HALO_TYPE_F32, E, 1, 1, wt);
    cpu->ops->rms_norm(cpu, &bx.c, E, &bw.c, 1e-6f);
    vk->ops->rms_norm(vk, &bx.v, E, &bw.v, 1e-6f);
    expect_close("rms_norm [4096] x 3 with weight", &bx, 1e-5);
    float *q = rnd((int64_t)HD * H * T, 1.0f);
    both bq = make(HALO_TYPE_F32, HD, H, T, q);
    cpu->ops->rms_norm(cpu, &bq.c, HD, NULL, 1e-6f);
    vk->ops->rms_norm(vk, &bq.v, HD, NULL, 1e-6f);
    expect_close("rms_norm per head [512] x 64 x 3", &bq, 1e-5);
    halo_rope r = {.n_rot = 64,
                   .base = 160000,
                   .yarn = true,
                   .yarn_factor = 16,
                   .yarn_beta_fast = 32,
                   .yarn_beta_slow = 1,
                   .yarn_orig_ctx = 65536};
    int32_t pos[T] = {0, 70000, 1000000};
    cpu->ops->rope(cpu, &bq.c, pos, &r, false);
    vk->ops->rope(vk, &bq.v, pos, &r, false);
    expect_close("rope yarn [512] x 64 heads at 0, 7e4, 1e6", &bq, 1e-5);
    cpu->ops->rope(cpu, &bq.c, pos, &r, true);
    vk->ops->rope(vk, &bq.v, pos, &r, true);
    expect_close("rope inverse", &bq, 1e-5);
    drop(&bx), drop(&bw), drop(&bq);
    free(x), free(wt), free(q);
}

/* The attention's per-head norms each followed by a rope of the same tensor (q without a
 * weight, kv with one), with nothing read between them: the deferred norm is folded into the
 * rope (norm_rope.comp) by default, recorded as called with HALO_VK_DEFER_NORM=0; both within
 * the CPU's norm then rope, and the folded run without the barrier between the two. */
static void norm_then_rope_folds(void) {
    enum { HD = 512, H = 64, T = 3 };
    float *q = rnd((int64_t)HD * H * T, 1.0f), *wt = rnd(HD, 1.0f);
    halo_rope r = {.n_rot = 64, .base = 10000};
    int32_t pos[T] = {5, 70000, 17};
    uint64_t nb[2] = {0};
    halo_backend *keep = vk;
    for (int d = 0; d < 2; d++) {
        vk = d ? vk_def : vk_off;
        for (int w = 0; w < 2; w++) {
            int64_t heads = w ? 1 : H; /* kv: one head, with its norm weight */
            both bq = make(HALO_TYPE_F32, HD, heads, T, q), bw = make(HALO_TYPE_F32, HD, 1, 1, wt);
            cpu->ops->rms_norm(cpu, &bq.c, HD, w ? &bw.c : NULL, 1e-6f);
            cpu->ops->rope(cpu, &bq.c, pos, &r, false);
            uint64_t b0 = halo_backend_vulkan_barriers(vk);
            vk->ops->rms_norm(vk, &bq.v, HD, w ? &bw.v : NULL, 1e-6f);
            vk->ops->rope(vk, &bq.v, pos, &r, false);
            char what[64];
            snprintf(what, sizeof what, "norm+rope %s, defer_norm=%d", w ? "kv" : "q", d);
            expect_close(what, &bq, 1e-5);
            nb[d] += halo_backend_vulkan_barriers(vk) - b0;
            drop(&bq), drop(&bw);
        }
    }
    vk = keep;
    printf("  barriers: %llu as called, %llu folded\n", (unsigned long long)nb[0],
           (unsigned long long)nb[1]);
    CHECK(nb[1] < nb[0]);
    free(q), free(wt);
}

static void hyper_connections(void) {
    enum { E = 4096, HC = 4, T = 3, MIX = (2 + HC) * HC };
    float *s = rnd((int64_t)E * HC * T, 1.0f), *base = rnd(MIX, 0.5f),
          scale[3] = {0.7f, 0.4f, 1.3f};
    void *fn = weights(HALO_TYPE_F16, E * HC, MIX, 0.05f);
    both bs = make(HALO_TYPE_F32, E, HC, T, s), bfn = make(HALO_TYPE_F16, E * HC, MIX, 1, fn);
    both bb = make(HALO_TYPE_F32, MIX, 1, 1, base), bsc = make(HALO_TYPE_F32, 3, 1, 1, scale);
    both col = make(HALO_TYPE_F32, E, T, 1, NULL), post = make(HALO_TYPE_F32, HC, T, 1, NULL);
    both comb = make(HALO_TYPE_F32, HC, HC, T, NULL);
    halo_hc_args a = {.streams = &bs.c,
                      .fn = &bfn.c,
                      .base = &bb.c,
                      .scale = &bsc.c,
                      .hc = HC,
                      .sinkhorn_iters = 20,
                      .eps = 1e-6f,
                      .norm_eps = 1e-6f,
                      .collapsed = &col.c,
                      .post = &post.c,
                      .comb = &comb.c};
    cpu->ops->hc_pre(cpu, &a);
    a = (halo_hc_args){.streams = &bs.v,
                       .fn = &bfn.v,
                       .base = &bb.v,
                       .scale = &bsc.v,
                       .hc = HC,
                       .sinkhorn_iters = 20,
                       .eps = 1e-6f,
                       .norm_eps = 1e-6f,
                       .collapsed = &col.v,
                       .post = &post.v,
                       .comb = &comb.v};
    vk->ops->hc_pre(vk, &a);
    expect_close("hc_pre collapsed [4096] (fn f16 [16384 x 24])", &col, 1e-4);
    expect_close("hc_pre post", &post, 1e-4);
    expect_close("hc_pre comb (Sinkhorn 20)", &comb, 1e-4);
    float *y = rnd(E * T, 1.0f);
    both by = make(HALO_TYPE_F32, E, T, 1, y);
    cpu->ops->hc_post(cpu, &bs.c, &by.c, &post.c, &comb.c);
    vk->ops->hc_post(vk, &bs.v, &by.v, &post.v, &comb.v);
    expect_close("hc_post streams", &bs, 1e-4);
    drop(&bs), drop(&bfn), drop(&bb), drop(&bsc), drop(&col), drop(&post), drop(&comb), drop(&by);
    free(s), free(base), free(fn), free(y);
}

/* hc_post then the next site's hc_pre of the same streams, with the forward's aliasing (the
 * block's output y in the collapsed tensor, the new post and comb over the old ones): the
 * hc_post deferred and folded into hc_pre's two dispatches (HALO_VK_DEFER_POST, the default)
 * and recorded as called, both within the CPU's, the folded one with fewer barriers; and
 * folded with hc_pre in 4 workgroups a token (HALO_VK_HC_SLICES, a GPU's 16; 1 on lavapipe). */
static void hc_post_folds_into_the_next_hc_pre(void) {
    enum { E = 4096, HC = 4, T = 3, MIX = (2 + HC) * HC };
    float *s = rnd((int64_t)E * HC * T, 1.0f), *base = rnd(MIX, 0.5f), *y = rnd(E * T, 1.0f),
          scale[3] = {0.7f, 0.4f, 1.3f};
    void *fn = weights(HALO_TYPE_F16, E * HC, MIX, 0.05f);
    static const char *const sl[] = {"HALO_VK_HC_SLICES=4", NULL};
    halo_backend *bes[3] = {vk_off, vk_def, vk_env(sl)};
    uint64_t nb[3] = {0};
    halo_backend *keep = vk;
    for (int d = 0; d < 3; d++) {
        halo_error err = {0};
        vk = bes[d];
        both bs = make(HALO_TYPE_F32, E, HC, T, s), bfn = make(HALO_TYPE_F16, E * HC, MIX, 1, fn);
        both bb = make(HALO_TYPE_F32, MIX, 1, 1, base), bsc = make(HALO_TYPE_F32, 3, 1, 1, scale);
        both col = make(HALO_TYPE_F32, E, T, 1, NULL), post = make(HALO_TYPE_F32, HC, T, 1, NULL);
        both comb = make(HALO_TYPE_F32, HC, HC, T, NULL);
        halo_backend *be[2] = {cpu, vk};
        for (int b = 0; b < 2; b++) {
            bool v = b == 1;
            halo_hc_args a = {.streams = v ? &bs.v : &bs.c,
                              .fn = v ? &bfn.v : &bfn.c,
                              .base = v ? &bb.v : &bb.c,
                              .scale = v ? &bsc.v : &bsc.c,
                              .hc = HC,
                              .sinkhorn_iters = 20,
                              .eps = 1e-6f,
                              .norm_eps = 1e-6f,
                              .collapsed = v ? &col.v : &col.c,
                              .post = v ? &post.v : &post.c,
                              .comb = v ? &comb.v : &comb.c};
            be[b]->ops->hc_pre(be[b], &a);
            halo_tensor *c = a.collapsed; /* the block's output, where the forward leaves it */
            CHECK_INT(be[b]->ops->buf_write(be[b], c->buf, c->offset, y, E * T * 4, &err), HALO_OK);
            uint64_t b0 = v ? halo_backend_vulkan_barriers(vk) : 0;
            be[b]->ops->hc_post(be[b], (halo_tensor *)a.streams, c, a.post, a.comb);
            be[b]->ops->hc_pre(be[b], &a);
            CHECK_INT(be[b]->ops->sync(be[b], &err), HALO_OK);
            if (v) nb[d] = halo_backend_vulkan_barriers(vk) - b0;
        }
        char what[64];
        snprintf(what, sizeof what, "hc_post + hc_pre collapsed, %s",
                 d == 0   ? "as called"
                 : d == 1 ? "folded"
                          : "folded, 4 slices");
        expect_close(what, &col, 1e-4);
        expect_close("  post", &post, 1e-4);
        expect_close("  comb", &comb, 1e-4);
        expect_close("  streams", &bs, 1e-4);
        drop(&bs), drop(&bfn), drop(&bb), drop(&bsc), drop(&col), drop(&post), drop(&comb);
    }
    vk = keep;
    bes[2]->ops->destroy(bes[2]);
    printf("  barriers: %llu as called, %llu %llu folded\n", (unsigned long long)nb[0],
           (unsigned long long)nb[1], (unsigned long long)nb[2]);
    CHECK(nb[2] < nb[0]);
    CHECK(nb[1] < nb[0]);
    free(s), free(base), free(fn), free(y);
}

/* The attention output's inverse rope then the grouped projection of it (out_a's shape, 16
 * heads of 512 in 2 groups), 1 and 3 tokens: the rope deferred and folded into the projection's
 * loads (HALO_VK_DEFER_ROPE, the default) and recorded as called, through matvec.comp, a
 * matvec_q8.comp variant and matvec_q8s.comp (4 rows a workgroup); within the CPU's rope then
 * matmul, the folded runs with fewer barriers. */
static void inverse_rope_folds_into_the_projection(void) {
    enum { HD = 512, H = 16, G = 2, K = HD * H / G, NG = 24 };
    static const char *const q8[] = {"HALO_VK_MVQ8=4u", NULL};
    static const char *const q8s[] = {"HALO_VK_MVQ8=1", "HALO_VK_MVQ8S=4", NULL};
    halo_backend *bes[4] = {vk_off, vk_def, vk_env(q8), vk_env(q8s)};
    static const char *const names[4] = {"as called", "folded", "folded, mvq8=4u",
                                         "folded, mvq8s=4"};
    float *o = rnd((int64_t)HD * H * 3, 1.0f);
    void *w = weights(HALO_TYPE_Q8_0, K, G * NG, 0.05f);
    halo_rope r = {.n_rot = 64, .base = 10000};
    int32_t pos[3] = {7, 70000, 1234};
    uint64_t nb[4] = {0};
    halo_backend *keep = vk;
    for (size_t c = 0; c < 4; c++) {
        vk = bes[c];
        for (int t = 1; t <= 3; t += 2) {
            both bo = make(HALO_TYPE_F32, HD, H, t, o), bw = make(HALO_TYPE_Q8_0, K, G * NG, 1, w);
            both out = make(HALO_TYPE_F32, G * NG, t, 1, NULL);
            halo_tensor o2c = bo.c, o2v = bo.v; /* the forward's reshape to [HD * H, t] */
            o2c.ne[0] = o2v.ne[0] = HD * H, o2c.ne[1] = o2v.ne[1] = t, o2c.ne[2] = o2v.ne[2] = 1;
            cpu->ops->rope(cpu, &bo.c, pos, &r, true);
            cpu->ops->matmul(cpu, &bw.c, &o2c, G, &out.c);
            uint64_t b0 = halo_backend_vulkan_barriers(vk);
            vk->ops->rope(vk, &bo.v, pos, &r, true);
            vk->ops->matmul(vk, &bw.v, &o2v, G, &out.v);
            char what[80];
            snprintf(what, sizeof what, "rope^-1 + matmul x %d, %s", t, names[c]);
            expect_close(what, &out, 1e-4);
            nb[c] += halo_backend_vulkan_barriers(vk) - b0;
            drop(&bo), drop(&bw), drop(&out);
        }
        if (c > 0) CHECK(nb[c] < nb[0]);
    }
    vk = keep;
    bes[2]->ops->destroy(bes[2]);
    bes[3]->ops->destroy(bes[3]);
    printf("  barriers: %llu as called, %llu %llu %llu folded\n", (unsigned long long)nb[0],
           (unsigned long long)nb[1], (unsigned long long)nb[2], (unsigned long long)nb[3]);
    free(o), free(w);
}

static void attention_window_and_compressed_rows_on(const char *cfg) {
    enum { HD = 512, H = 64, T = 2, W = 128, NC = 300, K = 512 };
    char what[64];
    float *q = rnd((int64_t)HD * H * T, 1.0f), *win = rnd((int64_t)HD * W, 1.0f);
    float *comp = rnd((int64_t)HD * NC, 1.0f), *sinks = rnd(H, 1.0f);
    int32_t sel[K * T];
    for (int i = 0; i < K * T; i++)
        sel[i] = i % 7 == 3 ? -1 : (int32_t)((seed = seed * 1103515245u + 12345u) >> 8) % NC;
    both bq = make(HALO_TYPE_F32, HD, H, T, q), bw = make(HALO_TYPE_F32, HD, W, 1, win);
    both bc = make(HALO_TYPE_F32, HD, NC, 1, comp), bs = make(HALO_TYPE_F32, H, 1, 1, sinks);
    both bsel = make(HALO_TYPE_I32, K, T, 1, sel), out = make(HALO_TYPE_F32, HD, H, T, NULL);
    int32_t pos[T] = {1000, 1001};
    for (int mode = 0; mode < 2; mode++) {
        halo_attn_args a = {.q = &bq.c,
                            .pos = pos,
                            .window = &bw.c,
                            .win_pos0 = 874,
                            .sliding_window = 128,
                            .comp = &bc.c,
                            .ratio = mode ? 128 : 4,
                            .select = mode ? NULL : &bsel.c,
                            .sinks = &bs.c,
                            .scale = 1.0f / sqrtf(HD),
                            .out = &out.c};
        cpu->ops->attention(cpu, &a);
        a.q = &bq.v, a.window = &bw.v, a.comp = &bc.v, a.select = mode ? NULL : &bsel.v;
        a.sinks = &bs.v, a.out = &out.v;
        vk->ops->attention(vk, &a);
        snprintf(what, sizeof what, "%s [split %s]",
                 mode ? "attention ratio 128 (all visible)" : "attention ratio 4, top-512", cfg);
        expect_close(what, &out, 1e-4);
    }
    drop(&bq), drop(&bw), drop(&bc), drop(&bs), drop(&bsel), drop(&out);
    free(q), free(win), free(comp), free(sinks);
}

/* Decode tokens (vk_attn_split.c's split-K path): n_tok tokens at pos, pos + 1, ... with H heads
 * of HD, n_win window rows from win_pos0 (sliding window 128), n_comp compressed rows of
 * `ratio`, k_sel selected a token (0: all visible), sinks of type st. */
typedef struct attn_shape {
    int hd, h, n_tok;
} attn_shape;

static void attention_decode_case(const char *what, attn_shape sh, int32_t pos, int64_t win_pos0,
                                  int n_win, int n_comp, uint32_t ratio, int k_sel, uint32_t st) {
    int HD = sh.hd, H = sh.h, T = sh.n_tok, ks = k_sel ? k_sel : 1;
    float *q = rnd((int64_t)HD * H * T, 1.0f), *win = rnd((int64_t)HD * n_win, 1.0f);
    float *comp = rnd((int64_t)HD * n_comp, 1.0f), *sinks = rnd(H, 1.0f);
    uint16_t *s16 = malloc((size_t)H * sizeof *s16);
    halo_quant_quantize_row(HALO_TYPE_F16, sinks, s16, H, NULL);
    int32_t *sel = malloc((size_t)(ks * T) * sizeof *sel), tpos[4];
    for (int t = 0; t < T; t++) {
        tpos[t] = pos + t;
        int visible = (tpos[t] + 1) / (int)ratio;
        for (int i = 0; i < k_sel; i++) { /* -1 (too few rows for the indexer), some invisible */
            int32_t *e = &sel[t * k_sel + i];
            seed = seed * 1103515245u + 12345u;
            *e = visible + i % 3;
            if (visible > 0 && i % 13) *e = (int32_t)((seed >> 8) % (uint32_t)visible);
            if (i % 9 == 4) *e = -1;
        }
    }
    both bq = make(HALO_TYPE_F32, HD, H, T, q), bw = make(HALO_TYPE_F32, HD, n_win, 1, win);
    both bc = make(HALO_TYPE_F32, HD, n_comp, 1, comp);
    both bs = make(st, H, 1, 1, st == HALO_TYPE_F16 ? (void *)s16 : (void *)sinks);
    both bsel = make(HALO_TYPE_I32, ks, T, 1, sel), out = make(HALO_TYPE_F32, HD, H, T, NULL);
    halo_attn_args a = {.q = &bq.c,
                        .pos = tpos,
                        .window = &bw.c,
                        .win_pos0 = win_pos0,
                        .sliding_window = 128,
                        .comp = &bc.c,
                        .ratio = ratio,
                        .select = k_sel ? &bsel.c : NULL,
                        .sinks = &bs.c,
                        .scale = 1.0f / sqrtf((float)HD),
                        .out = &out.c};
    cpu->ops->attention(cpu, &a);
    a.q = &bq.v, a.window = &bw.v, a.comp = &bc.v, a.select = k_sel ? &bsel.v : NULL;
    a.sinks = &bs.v, a.out = &out.v;
    vk->ops->attention(vk, &a);
    expect_close(what, &out, 1e-4);
    drop(&bq), drop(&bw), drop(&bc), drop(&bs), drop(&bsel), drop(&out);
    free(q), free(win), free(comp), free(sinks), free(s16), free(sel);
}

/* Attention through each HALO_VK_ATTN_SPLIT setting: the default (chunks by row count, from 256
 * candidate rows: the depth-24,576 cases; attention.comp below), 0
 * (attention.comp, the old path for decode too), and forced chunk counts and heads a
 * workgroup: 16 chunks (position 5's six rows leave ten empty), one chunk of 640 rows (five
 * blocks of candidates), 7 chunks (partial four-row steps), 64 chunks of one head. */
static void attention_window_and_compressed_rows(void) {
    static const char *const cfgs[] = {"auto", "0", "16", "1:4", "7:2", "64:1"};
    halo_backend *keep = vk;
    char what[64];
    for (size_t c = 0; c < sizeof cfgs / sizeof *cfgs; c++) {
        char var[64];
        snprintf(var, sizeof var, "HALO_VK_ATTN_SPLIT=%s", cfgs[c]);
        const char *const vars[] = {var, NULL};
        vk = vk_env(vars);
        attention_window_and_compressed_rows_on(cfgs[c]);
        attn_shape flash = {512, 64, 1}, small = {96, 6, 3};
        snprintf(what, sizeof what, "attn 1 tok r4 512/6144 + 128 [split %s]", cfgs[c]);
        attention_decode_case(what, flash, 24575, 24448, 128, 6144, 4, 512, HALO_TYPE_F32);
        snprintf(what, sizeof what, "attn 1 tok r128 192 + 128, f16 sink [split %s]", cfgs[c]);
        attention_decode_case(what, flash, 24575, 24448, 128, 192, 128, 0, HALO_TYPE_F16);
        snprintf(what, sizeof what, "attn 1 tok pos 5 r128 6 + 0 [split %s]", cfgs[c]);
        attention_decode_case(what, flash, 5, 0, 6, 4, 128, 0, HALO_TYPE_F32);
        snprintf(what, sizeof what, "attn 1 tok pos 5 r4 6 + 1 of 512 [split %s]", cfgs[c]);
        attention_decode_case(what, flash, 5, 0, 6, 4, 4, 512, HALO_TYPE_F32);
        snprintf(what, sizeof what, "attn 3 tok 6 x 96 r4 64/300 [split %s]", cfgs[c]);
        attention_decode_case(what, small, 1100, 980, 128, 300, 4, 64, HALO_TYPE_F32);
        vk->ops->destroy(vk);
    }
    vk = keep;
}

static void compressor_pooling(void) {
    enum { D = 512 };
    halo_rope r = {.n_rot = 64,
                   .base = 160000,
                   .yarn = true,
                   .yarn_factor = 16,
                   .yarn_beta_fast = 32,
                   .yarn_beta_slow = 1,
                   .yarn_orig_ctx = 65536};
    for (int mode = 0; mode < 2; mode++) {
        uint32_t ratio = mode ? 128 : 4, width = mode ? D : 2 * D, n_win = mode ? 2 : 3;
        float *kv = rnd((int64_t)width * n_win * ratio, 1.0f);
        float *g = rnd((int64_t)width * n_win * ratio, 2.0f);
        float *ape = rnd((int64_t)width * ratio, 1.0f), *nw = rnd(D, 1.0f);
        float *pk = rnd((int64_t)D * ratio, 1.0f), *pg = rnd((int64_t)D * ratio, 1.0f);
        both bkv = make(HALO_TYPE_F32, width, n_win * ratio, 1, kv);
        both bg = make(HALO_TYPE_F32, width, n_win * ratio, 1, g);
        both ba = make(HALO_TYPE_F32, width, ratio, 1, ape), bn = make(HALO_TYPE_F32, D, 1, 1, nw);
        both bpk = make(HALO_TYPE_F32, D, ratio, 1, pk), bpg = make(HALO_TYPE_F32, D, ratio, 1, pg);
        both out = make(HALO_TYPE_F32, D, n_win, 1, NULL);
        halo_pool_args a = {.kv = &bkv.c,
                            .gate = &bg.c,
                            .ape = &ba.c,
                            .norm = &bn.c,
                            .eps = 1e-6f,
                            .overlap = !mode,
                            .prev_kv = &bpk.c,
                            .prev_gate = &bpg.c,
                            .have_prev = true,
                            .pos0 = 4000,
                            .ratio = ratio,
                            .dim = D,
                            .rope = &r,
                            .out = &out.c};
        cpu->ops->pool(cpu, &a);
        a.kv = &bkv.v, a.gate = &bg.v, a.ape = &ba.v, a.norm = &bn.v, a.prev_kv = &bpk.v;
        a.prev_gate = &bpg.v, a.out = &out.v;
        vk->ops->pool(vk, &a);
        expect_close(mode ? "pool ratio 128 [512]" : "pool ratio 4 overlap [2 x 512]", &out, 1e-4);
        if (!mode) {
            expect_close("pool saved previous kv", &bpk, 1e-6);
            expect_close("pool saved previous gate (+ape)", &bpg, 1e-6);
        }
        drop(&bkv), drop(&bg), drop(&ba), drop(&bn), drop(&bpk), drop(&bpg), drop(&out);
        free(kv), free(g), free(ape), free(nw), free(pk), free(pg);
    }
}

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* One indexer top-k (64 heads of 128, top-512) on the CPU and on vk: how many of the T tokens
 * select the same rows (as sets: the backends may list them in other orders). Keys repeat every
 * `period` rows, so equal scores straddle the top-k boundary and the tie rule decides (the
 * lower row wins). */
static int topk_case(int64_t rows, int64_t T, const int32_t *pos, int64_t period) {
    enum { HD = 128, H = 64, K = 512 };
    float *q = rnd((int64_t)HD * H * T, 1.0f), *w = rnd(H * T, 1.0f);
    float *keys = rnd((int64_t)HD * rows, 1.0f);
    for (int64_t s = period; s < rows; s++)
        memcpy(keys + s * HD, keys + (s % period) * HD, HD * sizeof *keys);
    both bq = make(HALO_TYPE_F32, HD, H, T, q), bw = make(HALO_TYPE_F32, H, T, 1, w);
    both bk = make(HALO_TYPE_F32, HD, rows, 1, keys), out = make(HALO_TYPE_I32, K, T, 1, NULL);
    halo_topk_args a = {
        .q = &bq.c, .w = &bw.c, .keys = &bk.c, .pos = pos, .ratio = 4, .top_k = K, .out = &out.c};
    cpu->ops->topk(cpu, &a);
    a.q = &bq.v, a.w = &bw.v, a.keys = &bk.v, a.out = &out.v;
    vk->ops->topk(vk, &a);
    int32_t *c = (int32_t *)read_all(cpu, &out.c), *g = (int32_t *)read_all(vk, &out.v);
    int same = 0;
    for (int64_t t = 0; t < T; t++) {
        qsort(c + t * K, K, sizeof *c, cmp_i32);
        qsort(g + t * K, K, sizeof *g, cmp_i32);
        same += !memcmp(c + t * K, g + t * K, K * sizeof *c);
    }
    free(c), free(g);
    drop(&bq), drop(&bw), drop(&bk), drop(&out);
    free(q), free(w), free(keys);
    return same;
}

/* Prefill-like (2, 525 and all 1,500 rows visible), then a decode token at depth 24,575 (6,144
 * rows, keys repeating every 1,000 rows: six or seven equal scores at the boundary), each by
 * the default scores (topk_score_row.comp) and by topk_score.comp (HALO_VK_SCORE_ROW=0). */
static void indexer_topk_selects_the_same_rows(void) {
    static const char *const old[] = {"HALO_VK_SCORE_ROW=0", NULL};
    halo_backend *keep = vk, *by_wg = vk_env(old);
    for (int k = 0; k < 2; k++) {
        vk = k ? by_wg : keep;
        const char *how = k ? "score by workgroup" : "score by row";
        int32_t pos3[3] = {9, 2100, 7000}, pos1[1] = {24575};
        int same = topk_case(1500, 3, pos3, 1500);
        printf("  %-44s %d/3 tokens select the same rows (%s)\n", "topk of 1500", same, how);
        CHECK_INT(same, 3);
        same = topk_case(6144, 1, pos1, 1000);
        printf("  %-44s %d/1 tokens select the same rows (%s)\n",
               "topk of 6144, ties at the boundary", same, how);
        CHECK_INT(same, 1);
    }
    vk = keep;
    by_wg->ops->destroy(by_wg);
}

/* One MoE call of T tokens (at most 64) on both backends: routed experts of gate/up type gu,
 * down type dn. Returns the barriers the Vulkan backend recorded for it. */
static uint64_t moe_case_tok(const char *what, uint32_t n_expert, uint32_t n_ff, uint32_t k,
                             bool hash, uint32_t gu, uint32_t dn, bool norm_first, uint32_t T) {
    enum { E = 4096, V = 16 };
    float *x = rnd((int64_t)E * T, 1.0f), *bias = rnd(n_expert, 0.1f);
    void *router = weights(HALO_TYPE_F16, E, n_expert, 0.05f);
    void *g = weights(gu, E, (int64_t)n_ff * n_expert, 0.05f);
    void *u = weights(gu, E, (int64_t)n_ff * n_expert, 0.05f);
    void *d = weights(dn, n_ff, (int64_t)E * n_expert, 0.05f);
    void *gs = weights(HALO_TYPE_Q8_0, E, n_ff, 0.05f),
         *us = weights(HALO_TYPE_Q8_0, E, n_ff, 0.05f);
    void *ds = weights(HALO_TYPE_Q8_0, n_ff, E, 0.05f);
    int32_t tid[V * 8];
    for (int i = 0; i < V; i++) /* distinct experts per row, as real tables */
        for (uint32_t j = 0; j < k; j++)
            tid[i * k + j] = (int32_t)((i * 3 + j * 5) % n_expert);
    both bx = make(HALO_TYPE_F32, E, T, 1, x), bb = make(HALO_TYPE_F32, n_expert, 1, 1, bias);
    both br = make(HALO_TYPE_F16, E, n_expert, 1, router);
    both bg = make(gu, E, n_ff, n_expert, g), bu = make(gu, E, n_ff, n_expert, u);
    both bd = make(dn, n_ff, E, n_expert, d);
    both bgs = make(HALO_TYPE_Q8_0, E, n_ff, 1, gs), bus = make(HALO_TYPE_Q8_0, E, n_ff, 1, us);
    both bds = make(HALO_TYPE_Q8_0, n_ff, E, 1, ds), bt = make(HALO_TYPE_I32, k, V, 1, tid);
    both out = make(HALO_TYPE_F32, E, T, 1, NULL);
    int32_t tokens[64] = {3, 15, 0};
    for (uint32_t t = 3; t < T && t < 64; t++)
        tokens[t] = (int32_t)((t * 7) % V);
    halo_moe_args a = {.x = &bx.c,
                       .gate_inp = &br.c,
                       .probs_bias = hash ? NULL : &bb.c,
                       .tid2eid = hash ? &bt.c : NULL,
                       .tokens = tokens,
                       .gate_exps = &bg.c,
                       .up_exps = &bu.c,
                       .down_exps = &bd.c,
                       .gate_sh = &bgs.c,
                       .up_sh = &bus.c,
                       .down_sh = &bds.c,
                       .n_used = k,
                       .gating = HALO_GATING_SQRTSOFTPLUS,
                       .norm_weights = true,
                       .weights_scale = 1.5f,
                       .clamp_exp = 10.0f,
                       .clamp_shexp = 10.0f,
                       .out = &out.c};
    float *nw = rnd(E, 1.0f);
    both bn = make(HALO_TYPE_F32, E, 1, 1, nw);
    if (norm_first) cpu->ops->rms_norm(cpu, &bx.c, E, &bn.c, 1e-6f);
    cpu->ops->moe(cpu, &a);
    a.x = &bx.v, a.gate_inp = &br.v, a.probs_bias = hash ? NULL : &bb.v;
    a.tid2eid = hash ? &bt.v : NULL, a.gate_exps = &bg.v, a.up_exps = &bu.v, a.down_exps = &bd.v;
    a.gate_sh = &bgs.v, a.up_sh = &bus.v, a.down_sh = &bds.v, a.out = &out.v;
    uint64_t b0 = halo_backend_vulkan_barriers(vk);
    if (norm_first) vk->ops->rms_norm(vk, &bx.v, E, &bn.v, 1e-6f);
    vk->ops->moe(vk, &a);
    expect_close(what, &out, 1e-4);
    uint64_t barriers = halo_backend_vulkan_barriers(vk) - b0;
    drop(&bx), drop(&bb), drop(&br), drop(&bg), drop(&bu), drop(&bd), drop(&bgs), drop(&bus);
    drop(&bds), drop(&bt), drop(&out), drop(&bn);
    free(nw), free(x), free(bias), free(router), free(g), free(u), free(d), free(gs), free(us),
        free(ds);
    return barriers;
}

static uint64_t moe_case_norm(const char *what, uint32_t n_expert, uint32_t n_ff, uint32_t k,
                              bool hash, uint32_t gu, uint32_t dn, bool norm_first) {
    return moe_case_tok(what, n_expert, n_ff, k, hash, gu, dn, norm_first, 3);
}

static uint64_t moe_case(const char *what, uint32_t n_expert, uint32_t n_ff, uint32_t k, bool hash,
                         uint32_t gu, uint32_t dn) {
    return moe_case_norm(what, n_expert, n_ff, k, hash, gu, dn, false);
}

/* A prefill's routed experts (24 tokens, 144 pairs over 8 experts of ds4's q2 mix at the real
 * width, routed by the biased top-6: each expert's pairs fill one or more column tiles, the
 * last partial) by the grouped products (moe_bucket.comp, moe_mm.comp), against the CPU. (The
 * pair-by-pair path, HALO_VK_MOE_MM=0, is matvec_moe.comp's, checked at 3 tokens by
 * moe_routes_and_mixes_like_the_cpu.) */
static void moe_prefill_grouped_matches_the_cpu(void) {
    moe_case_tok("moe prefill 24 tokens, grouped", 8, 2048, 6, false, HALO_TYPE_IQ2_XXS,
                 HALO_TYPE_Q2_K, false, 24);
}

static void moe_routes_and_mixes_like_the_cpu(void) {
    /* 256 experts, top-6 with bias (sampled expert width 64) in the MXFP4 mix; the real width
     * 2048 with 8 experts, hash-routed, in ds4's mix (IQ2_XXS gate/up, Q2_K down). */
    moe_case("moe 256 experts top-6 biased, mxfp4", 256, 64, 6, false, HALO_TYPE_MXFP4,
             HALO_TYPE_MXFP4);
    moe_case("moe 8 experts of 2048, hash top-6, iq2_xxs/q2_K", 8, 2048, 6, true, HALO_TYPE_IQ2_XXS,
             HALO_TYPE_Q2_K);
}

/* HALO_VK_FUSE_MOE: 0 (SwiGLU and the weighted sum by their own dispatches), 1 (the SwiGLU
 * folded into the down projections' loads), 2 (the default: the weighted sum into the routed
 * down too), each against the CPU (3 tokens); each level records fewer barriers than the one
 * before (the dependent steps it removes), so the fused shaders ran. With HALO_VK_MVQ8 the
 * shared expert's down takes matvec_q8.comp's SwiGLU load (and with HALO_VK_MVQ8S=auto
 * matvec_q8s.comp's at 16 rows). Each also after the FFN's norm:
 * folded into the MoE's first projections by default (no barrier of its own), recorded as
 * called with the folds off (one). */
static void moe_fusions_match_the_cpu(void) {
    static const char *const f1[] = {"HALO_VK_FUSE_MOE=1", NULL};
    static const char *const q8[] = {"HALO_VK_MVQ8=1w", NULL};
    static const char *const q8s[] = {"HALO_VK_MVQ8=1", "HALO_VK_MVQ8S=auto", NULL};
    halo_backend *bes[5] = {vk_off, vk_env(f1), vk_def, vk_env(q8), vk_env(q8s)};
    static const char *const names[5] = {"fuse=0", "fuse=1", "fuse=2", "fuse=2 mvq8=1w",
                                         "fuse=2 mvq8s=auto"};
    uint64_t nb[5] = {0}, nbn[5] = {0};
    halo_backend *keep = vk;
    for (int c = 0; c < 5; c++) { /* first uses (scratch, pipelines) out of the counts */
        vk = bes[c];
        moe_case("moe warm-up", 8, 2048, 6, true, HALO_TYPE_IQ2_XXS, HALO_TYPE_Q2_K);
    }
    for (int c = 0; c < 5; c++) {
        vk = bes[c];
        char what[80];
        snprintf(what, sizeof what, "moe %s iq2_xxs/q2_K", names[c]);
        nb[c] = moe_case(what, 8, 2048, 6, true, HALO_TYPE_IQ2_XXS, HALO_TYPE_Q2_K);
        /* the FFN's norm first: deferred and folded (defaults) or recorded as called */
        snprintf(what, sizeof what, "norm + moe %s", names[c]);
        nbn[c] = moe_case_norm(what, 8, 2048, 6, true, HALO_TYPE_IQ2_XXS, HALO_TYPE_Q2_K, true);
        printf("  %-44s %llu barriers, with the norm first %llu\n", names[c],
               (unsigned long long)nb[c], (unsigned long long)nbn[c]);
    }
    vk = keep;
    CHECK(nb[1] < nb[0] && nb[2] < nb[1]); /* fuse 0 -> 1 -> 2 */
    CHECK_INT(nbn[0], nb[0] + 1);          /* as called: the norm, a barrier, the MoE */
    CHECK_INT(nbn[2], nb[2]);              /* folded: no barrier of its own */
    bes[1]->ops->destroy(bes[1]);
    bes[3]->ops->destroy(bes[3]);
    bes[4]->ops->destroy(bes[4]);
}

static void moe_q2_mix_matches_the_cpu(void) {
    moe_case("moe 8 experts of 2048, hash top-6, iq2_xxs/q2_K", 8, 2048, 6, true, HALO_TYPE_IQ2_XXS,
             HALO_TYPE_Q2_K);
}

static void an_unsupported_weight_type_is_an_error_at_sync(void) {
    enum { K = 256, N = 4 };
    void *w = calloc(1, 110 * N);
    halo_tensor bw = make1(vk, HALO_TYPE_Q3_K, K, N, 1, w);
    halo_tensor bx = make1(vk, HALO_TYPE_F32, K, 1, 1, NULL),
                out = make1(vk, HALO_TYPE_F32, N, 1, 1, NULL);
    vk->ops->matmul(vk, &bw, &bx, 1, &out);
    halo_error err = {0};
    CHECK(vk->ops->sync(vk, &err) != HALO_OK);
    printf("  %-44s %s\n", "q3_K weight:", err.message);
    CHECK(strstr(err.message, "q3_K") != NULL);
    CHECK_INT(vk->ops->sync(vk, &err), HALO_OK); /* reported once */
    vk->ops->buf_free(vk, bw.buf), vk->ops->buf_free(vk, bx.buf), vk->ops->buf_free(vk, out.buf);
    free(w);
}

static void a_failed_allocation_is_an_error_naming_its_size(void) {
    halo_buf *b = NULL;
    halo_error err = {0};
    CHECK(vk->ops->buf_alloc(vk, 1ull << 50, &b, &err) != HALO_OK); /* 1 PiB */
    CHECK(b == NULL);
    printf("  %-44s %s\n", "1 PiB buffer:", err.message);
    CHECK(strstr(err.message, "1125899906842624") != NULL);
}

static void a_missing_device_is_an_error_naming_it(void) {
    halo_backend *be = NULL;
    halo_error err = {0};
    CHECK(halo_backend_vulkan_create(99, &be, &err) != HALO_OK);
    CHECK(be == NULL);
    printf("  %-44s %s\n", "device 99:", err.message);
    CHECK(strstr(err.message, "device 99") != NULL);
}

int main(void) {
    halo_error err = {0};
    setenv("HALO_VK_MATVEC_ROWS", "1", 1); /* a workgroup per row (a GPU's choice for these) */
    halo_status st = halo_backend_vulkan_create(-1, &vk, &err);
    unsetenv("HALO_VK_MATVEC_ROWS");
    if (st) {
        printf("skipped: %s\n", err.message);
        return 77;
    }
    printf("device: %s\n", halo_backend_vulkan_device_name(vk));
    CHECK_INT(halo_backend_cpu_create(2, true, &cpu, &err), HALO_OK);
    /* HALO_VK_TEST_SEED varies the random inputs (the default is fixed). */
    if (getenv("HALO_VK_TEST_SEED")) seed = (uint32_t)atoi(getenv("HALO_VK_TEST_SEED"));
    static const char *const off[] = {"HALO_VK_FUSE_MOE=0",   "HALO_VK_DEFER_NORM=0",
                                      "HALO_VK_DEFER_POST=0", "HALO_VK_DEFER_ROPE=0",
                                      "HALO_VK_COPY_FWD=0",   NULL};
    static const char *const none[] = {NULL};
    vk_off = vk_env(off);
    vk_def = vk_env(none);
    RUN_SOME(matmul_decodes_every_weight_type);
    RUN_SOME(matmul_multi_matches_norm_then_matmul);
    RUN_SOME(grouped_matmul_reads_its_group_slice);
    RUN_SOME(weight_larger_than_a_descriptor_is_split);
    RUN_SOME(embed_rows_of_a_quantized_table);
    RUN_SOME(norms_and_rope);
    RUN_SOME(norm_then_rope_folds);
    RUN_SOME(hyper_connections);
    RUN_SOME(hc_post_folds_into_the_next_hc_pre);
    RUN_SOME(inverse_rope_folds_into_the_projection);
    RUN_SOME(attention_window_and_compressed_rows);
    RUN_SOME(compressor_pooling);
    RUN_SOME(indexer_topk_selects_the_same_rows);
    RUN_SOME(moe_routes_and_mixes_like_the_cpu);
    RUN_SOME(moe_prefill_grouped_matches_the_cpu);
    RUN_SOME(an_unsupported_weight_type_is_an_error_at_sync);
    RUN_SOME(a_failed_allocation_is_an_error_naming_its_size);
    RUN_SOME(a_missing_device_is_an_error_naming_it);
    RUN_SOME(q8_0_decode_variants_match_the_cpu);
    /* Projections again through matvec's other variant, a subgroup per row (what projections
     * with many rows take; the shapes above are small enough for a workgroup per row). */
    halo_backend *wide = vk;
    setenv("HALO_VK_MATVEC_ROWS", "4", 1);
    CHECK_INT(halo_backend_vulkan_create(-1, &vk, &err), HALO_OK);
    unsetenv("HALO_VK_MATVEC_ROWS");
    printf("matvec by a subgroup per row:\n");
    RUN_SOME(matmul_decodes_every_weight_type);
    RUN_SOME(matmul_multi_matches_norm_then_matmul);
    RUN_SOME(grouped_matmul_reads_its_group_slice);
    RUN_SOME(moe_routes_and_mixes_like_the_cpu);
    vk->ops->destroy(vk);
    /* The defaults: matvec_moe.comp takes IQ2_XXS and Q2_K, plain and expert-selected (the
     * runs above keep matvec.comp: HALO_VK_MATVEC_ROWS); on a GPU matvec_q8.comp takes Q8_0. */
    CHECK_INT(halo_backend_vulkan_create(-1, &vk, &err), HALO_OK);
    printf("defaults:\n");
    RUN_SOME(matmul_decodes_every_weight_type);
    RUN_SOME(matmul_multi_matches_norm_then_matmul);
    RUN_SOME(moe_routes_and_mixes_like_the_cpu);
    RUN_SOME(moe_fusions_match_the_cpu);
    vk->ops->destroy(vk);
    /* The decode shaders' other variants: weight bytes by conversion instructions
     * (HALO_VK_CVT=0; the default puts them under a float's exponent, cvt.glsl) in
     * matvec_moe.comp and matvec_q8.comp, and matvec_moe's pieces loaded one (the old kernel)
     * or three at a time (HALO_VK_MOE_UNROLL; 3 leaves a partial last step), two or four rows
     * a subgroup (HALO_VK_MOE_R), each subgroup's first pieces loaded ahead of the codebook's
     * and the staged SwiGLU's barriers (the default) or not (HALO_VK_MOE_PRE=0). */
    static const char *const cvt_vars[][4] = {
        {"0", "1", "2", "0"}, {"1", "3", "4", "1"}, {"1", "2", "2", "0"}};
    for (int i = 0; i < 3; i++) {
        setenv("HALO_VK_CVT", cvt_vars[i][0], 1);
        setenv("HALO_VK_MOE_UNROLL", cvt_vars[i][1], 1);
        setenv("HALO_VK_MOE_R", cvt_vars[i][2], 1);
        setenv("HALO_VK_MOE_PRE", cvt_vars[i][3], 1);
        setenv("HALO_VK_MVQ8", "2u", 1);
        CHECK_INT(halo_backend_vulkan_create(-1, &vk, &err), HALO_OK);
        unsetenv("HALO_VK_CVT");
        unsetenv("HALO_VK_MOE_UNROLL");
        unsetenv("HALO_VK_MOE_R");
        unsetenv("HALO_VK_MOE_PRE");
        unsetenv("HALO_VK_MVQ8");
        printf("cvt=%s moe_unroll=%s moe_r=%s moe_pre=%s mvq8=2u:\n", cvt_vars[i][0],
               cvt_vars[i][1], cvt_vars[i][2], cvt_vars[i][3]);
        RUN_SOME(decode_types_match_the_cpu);
        RUN_SOME(moe_q2_mix_matches_the_cpu); /* the fused down (SwiGLU, sum) included */
        vk->ops->destroy(vk);
    }
    vk = wide;
    vk->ops->destroy(vk);
    vk_off->ops->destroy(vk_off);
    vk_def->ops->destroy(vk_def);
    cpu->ops->destroy(cpu);
    return check_report();
}
