/* Fast mode's integer dot products (HALO_VK_FAST=1: Q8_0 projections over activations
 * quantized to Q8_0, summed by VK_KHR_shader_integer_dot_product's packed 4x8-bit dot, declared
 * through GL_EXT_spirv_intrinsics since Debian 12's glslc lacks GL_EXT_integer_dot_product)
 * against the CPU backend's non-precise mode, which is ggml's Q8_0 x Q8_0 dot bit for bit: the
 * same quantized activations and integer sums, so only the float summation order differs (held
 * to 1e-5 of the output's range). Against the precise CPU the difference is the activations'
 * quantization error, far above that, which shows the integer path really ran. Plain and
 * grouped projections, 5 to 13 columns (matmul_q8.comp after a quantizing dispatch). Up to 4
 * columns (decode): with HALO_VK_MVQ8I on, matvec_q8i.comp (x quantized inside each workgroup)
 * at the decode step's real shapes, in each variant, with each fold it takes (the RMS norm of
 * matmul_multi, the inverse rope of out_a, the shared expert's SwiGLU), against the CPU's fast
 * mode the same way; with HALO_VK_MVQ8I=0 the f32 path, equal to the precise CPU. Skips (exit
 * 77) without a Vulkan device, or when the device has no integer dot products. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/vulkan/vulkan.h"
#include "check.h"
#include "halo/quant.h"
#include "halo/types.h"

static halo_backend *vk, *vki, *fast, *precise;
static uint32_t seed = 4242;

static float frand(void) {
    seed = seed * 1664525u + 1013904223u;
    return (float)(seed >> 8) / 16777216.0f * 2.0f - 1.0f;
}

static float *run(halo_backend *be, const void *wq, uint64_t w_bytes, int64_t K, int64_t N,
                  const float *x, int64_t n_in, uint32_t cols, uint32_t groups) {
    halo_error err = {0};
    halo_tensor w = {.type = HALO_TYPE_Q8_0, .ne = {K, N, 1, 1}};
    halo_tensor xt = {.type = HALO_TYPE_F32, .ne = {n_in, cols, 1, 1}};
    halo_tensor o = {.type = HALO_TYPE_F32, .ne = {N, cols, 1, 1}};
    CHECK_INT(be->ops->buf_alloc(be, w_bytes, &w.buf, &err), HALO_OK);
    CHECK_INT(be->ops->buf_alloc(be, halo_tensor_nbytes(&xt), &xt.buf, &err), HALO_OK);
    CHECK_INT(be->ops->buf_alloc(be, halo_tensor_nbytes(&o), &o.buf, &err), HALO_OK);
    CHECK_INT(be->ops->buf_write(be, w.buf, 0, wq, w_bytes, &err), HALO_OK);
    CHECK_INT(be->ops->buf_write(be, xt.buf, 0, x, halo_tensor_nbytes(&xt), &err), HALO_OK);
    be->ops->matmul(be, &w, &xt, groups, &o);
    CHECK_INT(be->ops->sync(be, &err), HALO_OK);
    float *y = malloc(halo_tensor_nbytes(&o));
    CHECK_INT(be->ops->buf_read(be, o.buf, 0, y, halo_tensor_nbytes(&o), &err), HALO_OK);
    be->ops->buf_free(be, w.buf);
    be->ops->buf_free(be, xt.buf);
    be->ops->buf_free(be, o.buf);
    return y;
}

static double rel(const float *a, const float *ref, size_t n) {
    double d = 0, range = 0;
    for (size_t i = 0; i < n; i++) {
        d = fmax(d, fabs((double)a[i] - ref[i]));
        range = fmax(range, fabs((double)ref[i]));
    }
    return range > 0 ? d / range : d;
}

/* be's projection of a random x by random Q8_0 weights against both CPU modes; int_path: be
 * takes an integer path (within 1e-5 of the CPU's fast mode, away from precise) or not (within
 * 1e-5 of precise). */
static void check_on(halo_backend *be, const char *name, int64_t K, int64_t N, uint32_t groups,
                     uint32_t cols, bool int_path) {
    int64_t n_in = K * groups;
    float *wf = malloc((size_t)(K * N) * sizeof *wf), *x = malloc((size_t)(n_in * cols) * 4);
    for (int64_t i = 0; i < K * N; i++)
        wf[i] = frand();
    for (int64_t i = 0; i < n_in * cols; i++)
        x[i] = frand() * (i % 97 == 0 ? 8.0f : 1.0f);
    uint64_t rb = 0;
    halo_type_bytes(HALO_TYPE_Q8_0, (uint64_t)K, &rb);
    unsigned char *wq = malloc((size_t)(rb * (uint64_t)N));
    for (int64_t r = 0; r < N; r++)
        halo_quant_quantize_row(HALO_TYPE_Q8_0, wf + r * K, wq + r * rb, K, NULL);
    uint64_t wb = rb * (uint64_t)N;
    float *v = run(be, wq, wb, K, N, x, n_in, cols, groups);
    float *cf = run(fast, wq, wb, K, N, x, n_in, cols, groups);
    float *cp = run(precise, wq, wb, K, N, x, n_in, cols, groups);
    size_t n = (size_t)N * cols;
    double to_fast = rel(v, cf, n), to_precise = rel(v, cp, n), fast_err = rel(cf, cp, n);
    printf("  %s K %lld N %lld groups %u cols %u: vulkan fast vs cpu fast %.2e, vs cpu precise "
           "%.2e (cpu fast vs precise %.2e)\n",
           name, (long long)K, (long long)N, groups, cols, to_fast, to_precise, fast_err);
    if (int_path && to_fast > 1e-5) { /* where (one row: its weights; all: x) */
        size_t worst = 0;
        for (size_t i = 0; i < n; i++)
            if (fabs(v[i] - cf[i]) > fabs(v[worst] - cf[worst])) worst = i;
        printf("    worst at output %zu: vulkan %.9g, cpu fast %.9g, precise %.9g\n", worst,
               v[worst], cf[worst], cp[worst]);
    }
    if (!int_path) {
        CHECK(to_precise <= 1e-5);
        CHECK(to_fast > 1e-5);
    } else {
        CHECK(to_fast <= 1e-5);
        CHECK(to_precise > 1e-5);
    }
    CHECK(to_precise <= 2 * fast_err); /* no worse than ggml's own quantization error */
    free(wf), free(x), free(wq), free(v), free(cf), free(cp);
}

/* vk (HALO_VK_MVQ8I=0): integer dots over 5 or more columns only. */
static void check_shape(int64_t K, int64_t N, uint32_t groups, uint32_t cols) {
    check_on(vk, "", K, N, groups, cols, cols > 4);
}

/* 8 or more columns take matmul_q8t.comp (tiles of 64 rows x 32 columns; 70: a partial last
 * tile), fewer matmul_q8.comp. */
static void q8_0_projection_matches_cpu_fast_mode(void) {
    check_shape(4096, 256, 1, 13);
    check_shape(4096, 512, 1, 5);
    check_shape(1024, 640, 1, 70);
}

static void grouped_q8_0_projection_matches_cpu_fast_mode(void) {
    check_shape(512, 1024, 8, 5);
    check_shape(512, 1024, 8, 9);
}

/* One column (a decode step) in fast mode with HALO_VK_MVQ8I=0: the f32 path, the precise
 * result (the old path, kept for A/B). */
static void decode_sized_q8_0_projection_is_precise(void) {
    check_shape(4096, 512, 1, 1);
    check_shape(512, 1024, 8, 1);
}

/* matvec_q8i.comp at the decode step's Q8_0 shapes (DeepSeek V4 Flash, 1 column): q_a, kv, q_b,
 * out_a (8 groups of 4096 inputs), out_b, the shared expert's gate and down, and a vocabulary
 * cut to 4100 rows (a partial last workgroup); then 2 to 4 columns. */
static void decode_q8_0_projections_match_cpu_fast_mode(void) {
    static const struct {
        const char *name;
        int64_t K, N;
        uint32_t groups;
    } shapes[] = {{"q_a", 4096, 1024, 1},       {"kv", 4096, 512, 1},
                  {"q_b", 1024, 32768, 1},      {"out_a", 4096, 1024 * 8, 8},
                  {"out_b", 8192, 4096, 1},     {"ffn_gate_shexp", 4096, 2048, 1},
                  {"ffn_down_shexp", 2048, 4096, 1}, {"output (4100 rows)", 4096, 4100, 1}};
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++)
        check_on(vki, shapes[i].name, shapes[i].K, shapes[i].N, shapes[i].groups, 1, true);
    for (uint32_t c = 2; c <= 4; c++)
        check_on(vki, "cols", 4096, 1000, 1, c, true);
    check_on(vki, "cols", 4096, 1024 * 8, 8, 3, true);
}

static halo_backend *make_vk(const char *mvq8i);

/* HALO_VK_MVQ8I=1: only the projections of 32 Mi weights or more take matvec_q8i (q_a does not,
 * out_b and q_b do). */
static void q8i_auto_takes_the_large_projections(void) {
    halo_backend *be = make_vk("1");
    if (!be) return;
    check_on(be, "auto q_a", 4096, 1024, 1, 1, false);
    check_on(be, "auto out_b", 8192, 4096, 1, 1, true);
    check_on(be, "auto q_b", 1024, 32768, 1, 1, true);
    be->ops->destroy(be);
}

/* A fast-mode backend with HALO_VK_MVQ8I=v. */
static halo_backend *make_vk(const char *mvq8i) {
    halo_error err = {0};
    halo_backend *be = NULL;
    setenv("HALO_VK_FAST", "1", 1);
    setenv("HALO_VK_MVQ8I", mvq8i, 1);
    CHECK_INT(halo_backend_vulkan_create(-1, &be, &err), HALO_OK);
    unsetenv("HALO_VK_FAST");
    unsetenv("HALO_VK_MVQ8I");
    return be;
}

/* Every variant of matvec_q8i.comp (1 or 2 rows a subgroup at once, weights a block ahead or
 * not, rows staged through shared memory or not, a subgroup or the workgroup per row group, rows
 * a workgroup forced from 1 to 64) over row counts that leave partial row groups and
 * workgroups, K of 1, 2 and 4 units a lane (lavapipe's subgroups of 8: more), grouped. */
static void q8i_variants_match_cpu_fast_mode(void) {
    static const char *const variants[] = {"1x0", "2",     "1p", "2p", "1x1", "2x2", "2px64",
                                           "2px16", "1s", "2s", "2sx64", "1w", "2pw", "2wx16"};
    const char *only = getenv("HALO_VK_TEST_MVQ8I"); /* one variant (a device run's choice) */
    for (size_t v = 0; v < sizeof variants / sizeof *variants; v++) {
        if (only && strcmp(only, variants[v])) continue;
        halo_backend *be = make_vk(variants[v]);
        if (!be) continue;
        char name[32];
        snprintf(name, sizeof name, "mvq8i=%s", variants[v]);
        check_on(be, name, 4096, 1001, 1, 1, true);
        check_on(be, name, 2048, 70, 1, 2, true);
        check_on(be, name, 1024, 515, 1, 1, true);
        check_on(be, name, 8192, 33, 1, 1, true);
        check_on(be, name, 4096, 96 * 8, 8, 1, true);
        be->ops->destroy(be);
    }
}

static halo_tensor tensor(halo_backend *be, uint32_t type, int64_t ne0, int64_t ne1, int64_t ne2,
                          const void *data) {
    halo_error err = {0};
    halo_tensor t = {.type = type, .ne = {ne0, ne1, ne2, 1}};
    CHECK_INT(be->ops->buf_alloc(be, halo_tensor_nbytes(&t), &t.buf, &err), HALO_OK);
    if (data) CHECK_INT(be->ops->buf_write(be, t.buf, 0, data, halo_tensor_nbytes(&t), &err), HALO_OK);
    return t;
}

static float *read_back(halo_backend *be, const halo_tensor *t) {
    halo_error err = {0};
    CHECK_INT(be->ops->sync(be, &err), HALO_OK);
    float *y = malloc(halo_tensor_nbytes(t));
    CHECK_INT(be->ops->buf_read(be, t->buf, 0, y, halo_tensor_nbytes(t), &err), HALO_OK);
    return y;
}

static void *q8_weights(int64_t K, int64_t N, float scale) {
    uint64_t rb = 0;
    halo_type_bytes(HALO_TYPE_Q8_0, (uint64_t)K, &rb);
    unsigned char *wq = malloc((size_t)(rb * (uint64_t)N));
    float *row = malloc((size_t)K * sizeof *row);
    for (int64_t r = 0; r < N; r++) {
        for (int64_t i = 0; i < K; i++)
            row[i] = frand() * scale;
        halo_quant_quantize_row(HALO_TYPE_Q8_0, row, wq + r * rb, K, NULL);
    }
    free(row);
    return wq;
}

/* The RMS norm folded into the projections of matmul_multi (the attention's q_a and kv at 4096
 * inputs, 1 and 3 tokens): each workgroup norms x before quantizing it, as the CPU's fast mode
 * quantizes the normed x. */
static void q8i_norm_fold_matches_cpu_fast_mode(void) {
    enum { K = 4096, NA = 1024, NB = 512 };
    float *x = malloc(K * 3 * sizeof *x), *g = malloc(K * sizeof *g);
    for (int i = 0; i < K * 3; i++)
        x[i] = frand() * (i % 97 == 0 ? 8.0f : 1.0f);
    for (int i = 0; i < K; i++)
        g[i] = 1.5f + frand();
    void *wa = q8_weights(K, NA, 1.0f), *wb = q8_weights(K, NB, 1.0f);
    halo_backend *bes[3] = {vki, fast, precise};
    for (int t = 1; t <= 3; t += 2) {
        float *ya[3], *yb[3];
        for (int i = 0; i < 3; i++) {
            halo_backend *be = bes[i];
            halo_tensor xt = tensor(be, HALO_TYPE_F32, K, t, 1, x);
            halo_tensor gt = tensor(be, HALO_TYPE_F32, K, 1, 1, g);
            halo_tensor w0 = tensor(be, HALO_TYPE_Q8_0, K, NA, 1, wa);
            halo_tensor w1 = tensor(be, HALO_TYPE_Q8_0, K, NB, 1, wb);
            halo_tensor o0 = tensor(be, HALO_TYPE_F32, NA, t, 1, NULL);
            halo_tensor o1 = tensor(be, HALO_TYPE_F32, NB, t, 1, NULL);
            const halo_tensor *w[2] = {&w0, &w1};
            halo_tensor *o[2] = {&o0, &o1};
            if (be->ops->matmul_multi) {
                be->ops->matmul_multi(be, &xt, &gt, 1e-6f, 2, w, o);
            } else { /* the CPU: the norm in place, then the projections */
                be->ops->rms_norm(be, &xt, K, &gt, 1e-6f);
                be->ops->matmul(be, &w0, &xt, 1, &o0);
                be->ops->matmul(be, &w1, &xt, 1, &o1);
            }
            ya[i] = read_back(be, &o0), yb[i] = read_back(be, &o1);
            halo_tensor *all[6] = {&xt, &gt, &w0, &w1, &o0, &o1};
            for (int k = 0; k < 6; k++)
                be->ops->buf_free(be, all[k]->buf);
        }
        double fa = rel(ya[0], ya[1], (size_t)NA * t), pa = rel(ya[0], ya[2], (size_t)NA * t);
        double fb = rel(yb[0], yb[1], (size_t)NB * t), pb = rel(yb[0], yb[2], (size_t)NB * t);
        printf("  norm + q_a / kv x %d: vulkan fast vs cpu fast %.2e / %.2e, vs precise %.2e / "
               "%.2e\n",
               t, fa, fb, pa, pb);
        CHECK(fa <= 1e-5 && fb <= 1e-5);
        CHECK(pa > 1e-5 && pb > 1e-5);
        for (int i = 0; i < 3; i++)
            free(ya[i]), free(yb[i]);
    }
    free(x), free(g), free(wa), free(wb);
}

/* The attention output's inverse rope folded into out_a (64 heads of 512, 64-channel rope tail,
 * 8 groups of 4096 inputs, 1024 rows each; 1 and 3 tokens): quantized after the rotation. */
static void q8i_rope_fold_matches_cpu_fast_mode(void) {
    enum { HD = 512, H = 64, G = 8, K = HD * H / G, NG = 1024 };
    float *o = malloc((size_t)HD * H * 3 * sizeof *o);
    for (int i = 0; i < HD * H * 3; i++)
        o[i] = frand();
    void *w = q8_weights(K, G * NG, 1.0f);
    halo_rope r = {.n_rot = 64, .base = 10000};
    int32_t pos[3] = {7, 70000, 1234};
    halo_backend *bes[3] = {vki, fast, precise};
    for (int t = 1; t <= 3; t += 2) {
        float *y[3];
        for (int i = 0; i < 3; i++) {
            halo_backend *be = bes[i];
            halo_tensor ot = tensor(be, HALO_TYPE_F32, HD, H, t, o);
            halo_tensor wt = tensor(be, HALO_TYPE_Q8_0, K, G * NG, 1, w);
            halo_tensor out = tensor(be, HALO_TYPE_F32, G * NG, t, 1, NULL);
            halo_tensor o2 = ot; /* the forward's reshape to [HD * H, t] */
            o2.ne[0] = HD * H, o2.ne[1] = t, o2.ne[2] = 1;
            be->ops->rope(be, &ot, pos, &r, true);
            be->ops->matmul(be, &wt, &o2, G, &out);
            y[i] = read_back(be, &out);
            be->ops->buf_free(be, ot.buf), be->ops->buf_free(be, wt.buf);
            be->ops->buf_free(be, out.buf);
        }
        size_t n = (size_t)G * NG * t;
        double f = rel(y[0], y[1], n), p = rel(y[0], y[2], n);
        printf("  rope^-1 + out_a x %d: vulkan fast vs cpu fast %.2e, vs precise %.2e\n", t, f, p);
        CHECK(f <= 1e-5);
        CHECK(p > 1e-5);
        for (int i = 0; i < 3; i++)
            free(y[i]);
    }
    free(o), free(w);
}

/* One MoE call (4096 wide, 8 Q8_0 experts of 2048 hash-routed top-6, the Q8_0 shared expert, 3
 * tokens) on be; returns the output. The shared expert's down takes the SwiGLU on its load
 * (HALO_VK_FUSE_MOE=2, the default) or after a SwiGLU dispatch (0). */
static float *moe_on(halo_backend *be, const float *x, const void *const w[6], const int32_t *tid) {
    enum { E = 4096, F = 2048, X = 8, KU = 6, T = 3, V = 16 };
    halo_tensor xt = tensor(be, HALO_TYPE_F32, E, T, 1, x);
    halo_tensor gi = tensor(be, HALO_TYPE_Q8_0, E, X, 1, w[0]);
    halo_tensor ge = tensor(be, HALO_TYPE_Q8_0, E, F, X, w[1]);
    halo_tensor ue = tensor(be, HALO_TYPE_Q8_0, E, F, X, w[2]);
    halo_tensor de = tensor(be, HALO_TYPE_Q8_0, F, E, X, w[3]);
    halo_tensor gs = tensor(be, HALO_TYPE_Q8_0, E, F, 1, w[4]);
    halo_tensor us = tensor(be, HALO_TYPE_Q8_0, E, F, 1, w[4]);
    halo_tensor ds = tensor(be, HALO_TYPE_Q8_0, F, E, 1, w[5]);
    halo_tensor tt = tensor(be, HALO_TYPE_I32, KU, V, 1, tid);
    halo_tensor out = tensor(be, HALO_TYPE_F32, E, T, 1, NULL);
    int32_t tokens[T] = {3, 15, 0};
    halo_moe_args a = {.x = &xt,
                       .gate_inp = &gi,
                       .tid2eid = &tt,
                       .tokens = tokens,
                       .gate_exps = &ge,
                       .up_exps = &ue,
                       .down_exps = &de,
                       .gate_sh = &gs,
                       .up_sh = &us,
                       .down_sh = &ds,
                       .n_used = KU,
                       .gating = HALO_GATING_SQRTSOFTPLUS,
                       .norm_weights = true,
                       .weights_scale = 1.5f,
                       .clamp_exp = 10.0f,
                       .clamp_shexp = 10.0f,
                       .out = &out};
    be->ops->moe(be, &a);
    float *y = read_back(be, &out);
    halo_tensor *all[10] = {&xt, &gi, &ge, &ue, &de, &gs, &us, &ds, &tt, &out};
    for (int k = 0; k < 10; k++)
        be->ops->buf_free(be, all[k]->buf);
    return y;
}

/* The shared expert's SwiGLU folded into its down projection's quantization: the same as with
 * the SwiGLU dispatched first (HALO_VK_FUSE_MOE=0, whose down then quantizes the stored SwiGLU,
 * the plain path the shapes above check against the CPU), both in fast mode with matvec_q8i. The
 * routed experts (f32 path: expert-selected columns) differ from the CPU's fast mode, so the
 * whole call is only printed against it. */
static void q8i_swiglu_fold_matches_the_dispatched_swiglu(void) {
    enum { E = 4096, F = 2048, X = 8, T = 3 };
    float *x = malloc(E * T * sizeof *x);
    for (int i = 0; i < E * T; i++)
        x[i] = frand();
    const void *w[6] = {q8_weights(E, X, 0.05f),     q8_weights(E, (int64_t)F * X, 0.05f),
                        q8_weights(E, (int64_t)F * X, 0.05f), q8_weights(F, (int64_t)E * X, 0.05f),
                        q8_weights(E, F, 0.05f),     q8_weights(F, E, 0.05f)};
    int32_t tid[16 * 6];
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 6; j++)
            tid[i * 6 + j] = (i * 3 + j * 5) % X;
    setenv("HALO_VK_FUSE_MOE", "0", 1);
    halo_backend *unfused = make_vk("all");
    unsetenv("HALO_VK_FUSE_MOE");
    if (unfused) {
        float *a = moe_on(vki, x, w, tid), *b = moe_on(unfused, x, w, tid);
        float *c = moe_on(fast, x, w, tid), *p = moe_on(precise, x, w, tid);
        double ab = rel(a, b, E * T), ac = rel(a, c, E * T), ap = rel(a, p, E * T);
        printf("  moe, SwiGLU folded vs dispatched (both mvq8i) %.2e; vs cpu fast %.2e, precise "
               "%.2e\n",
               ab, ac, ap);
        CHECK(ab <= 1e-5);
        CHECK(ac <= 1e-2);
        free(a), free(b), free(c), free(p);
        unfused->ops->destroy(unfused);
    }
    for (int i = 0; i < 6; i++)
        free((void *)w[i]);
    free(x);
}

int main(void) {
    halo_error err = {0};
    setenv("HALO_VK_FAST", "1", 1);
    setenv("HALO_VK_MVQ8I", "0", 1);
    halo_status st = halo_backend_vulkan_create(-1, &vk, &err);
    unsetenv("HALO_VK_FAST");
    unsetenv("HALO_VK_MVQ8I");
    if (st) {
        printf("skipped: %s\n", err.message);
        return 77;
    }
    vki = make_vk("all");
    if (halo_backend_cpu_create(2, false, &fast, &err) ||
        halo_backend_cpu_create(2, true, &precise, &err)) {
        fprintf(stderr, "cpu: %s\n", err.message);
        return 1;
    }
    printf("device: %s\n", halo_backend_vulkan_device_name(vk));
    RUN(q8_0_projection_matches_cpu_fast_mode);
    RUN(grouped_q8_0_projection_matches_cpu_fast_mode);
    RUN(decode_sized_q8_0_projection_is_precise);
    if (vki) {
        RUN(decode_q8_0_projections_match_cpu_fast_mode);
        RUN(q8i_auto_takes_the_large_projections);
        RUN(q8i_variants_match_cpu_fast_mode);
        RUN(q8i_norm_fold_matches_cpu_fast_mode);
        RUN(q8i_rope_fold_matches_cpu_fast_mode);
        RUN(q8i_swiglu_fold_matches_the_dispatched_swiglu);
        vki->ops->destroy(vki);
    }
    vk->ops->destroy(vk);
    fast->ops->destroy(fast);
    precise->ops->destroy(precise);
    return check_report();
}
