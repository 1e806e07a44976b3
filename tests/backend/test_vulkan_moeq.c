/* Fast mode's routed experts on int8 activations (moeq.comp, HALO_VK_MOEQ): one decode MoE
 * call at DeepSeek V4 Flash's expert shapes (n_embd 4096, n_ff 2048, IQ2_XXS gate/up, Q2_K down,
 * 6 experts a token of 16, hash-routed, clamped SwiGLU) against the CPU backend's fast mode,
 * which quantizes x and h to Q8_K as moeq.comp does (halo_quantize_q8_K bit for bit), so the
 * integer sums are the same and only the float summation order differs: held to 1e-5 of the
 * output's range. Against the precise CPU the difference is the activations' quantization
 * error, far above that: the int8 path really ran. With HALO_VK_MOEQ=0 fast mode keeps
 * matvec_moe.comp's f32 path: the precise result (1e-4, the ops test's bound).
 *
 * The shared expert (Q8_0) is no part of moeq.comp: the Vulkan backend's decode projection of
 * it may be f32 (then its share of the reference is the precise CPU's: the difference of two
 * precise calls, with and without it) or int8 (then it is the fast CPU's); the check takes the
 * closer of the two references. 16 experts, not 256: only the router's width differs, and the
 * weights of 256 would not fit a test's memory three times. Skips (exit 77) without a Vulkan
 * device with integer dot products. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/vulkan/vulkan.h"
#include "check.h"
#include "halo/quant.h"
#include "halo/types.h"

enum { F = 2048, NE = 16, K = 6, V = 16 };
static int E = 4096; /* n_embd: 4096, and 1024 for the variants' one-step rows */

static uint32_t seed = 777;

static float frand(void) {
    seed = seed * 1664525u + 1013904223u;
    return (float)(seed >> 8) / 16777216.0f * 2.0f - 1.0f;
}

/* Weights of a type halo quantizes, from random rows. */
static void *quantized(uint32_t type, int64_t ne0, int64_t rows, float scale) {
    uint64_t rb = 0;
    halo_type_bytes(type, (uint64_t)ne0, &rb);
    unsigned char *w = malloc((size_t)(rb * (uint64_t)rows));
    float *x = malloc((size_t)ne0 * sizeof *x);
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t i = 0; i < ne0; i++)
            x[i] = frand() * scale;
        CHECK_INT(halo_quant_quantize_row(type, x, w + (uint64_t)r * rb, ne0, NULL), HALO_OK);
    }
    free(x);
    return w;
}

/* IQ2_XXS (halo does not quantize it): random bytes with a sane f16 scale a block. */
static void *iq2_xxs(int64_t ne0, int64_t rows, float scale) {
    uint64_t rb = 0;
    halo_type_bytes(HALO_TYPE_IQ2_XXS, (uint64_t)ne0, &rb);
    uint64_t n = rb * (uint64_t)rows;
    unsigned char *w = malloc((size_t)n);
    for (uint64_t i = 0; i < n; i++)
        w[i] = (unsigned char)(frand() * 127 + 128);
    float d = scale / 64;
    for (uint64_t b = 0; b < n / 66; b++)
        halo_quant_quantize_row(HALO_TYPE_F16, &d, w + b * 66, 1, NULL);
    return w;
}

typedef struct inputs {
    float *x;
    void *router, *g, *u, *d, *gs, *us, *ds;
    int32_t tid[V * K];
    int32_t tokens[4];
} inputs;

static halo_tensor put(halo_backend *be, uint32_t type, int64_t ne0, int64_t ne1, int64_t ne2,
                       const void *data) {
    halo_tensor t = {.type = type, .ne = {ne0, ne1, ne2, 1}};
    halo_error err = {0};
    CHECK_INT(be->ops->buf_alloc(be, halo_tensor_nbytes(&t), &t.buf, &err), HALO_OK);
    if (data && t.buf)
        CHECK_INT(be->ops->buf_write(be, t.buf, 0, data, halo_tensor_nbytes(&t), &err), HALO_OK);
    return t;
}

/* One MoE call of T tokens on be (with the shared expert or not); the output, caller frees. */
static float *moe(halo_backend *be, const inputs *in, uint32_t T, bool shared) {
    halo_tensor x = put(be, HALO_TYPE_F32, E, T, 1, in->x);
    halo_tensor r = put(be, HALO_TYPE_F16, E, NE, 1, in->router);
    halo_tensor g = put(be, HALO_TYPE_IQ2_XXS, E, F, NE, in->g);
    halo_tensor u = put(be, HALO_TYPE_IQ2_XXS, E, F, NE, in->u);
    halo_tensor d = put(be, HALO_TYPE_Q2_K, F, E, NE, in->d);
    halo_tensor gs = put(be, HALO_TYPE_Q8_0, E, F, 1, in->gs);
    halo_tensor us = put(be, HALO_TYPE_Q8_0, E, F, 1, in->us);
    halo_tensor ds = put(be, HALO_TYPE_Q8_0, F, E, 1, in->ds);
    halo_tensor tid = put(be, HALO_TYPE_I32, K, V, 1, in->tid);
    halo_tensor out = put(be, HALO_TYPE_F32, E, T, 1, NULL);
    halo_moe_args a = {.x = &x,
                       .gate_inp = &r,
                       .tid2eid = &tid,
                       .tokens = in->tokens,
                       .gate_exps = &g,
                       .up_exps = &u,
                       .down_exps = &d,
                       .gate_sh = shared ? &gs : NULL,
                       .up_sh = shared ? &us : NULL,
                       .down_sh = shared ? &ds : NULL,
                       .n_used = K,
                       .gating = HALO_GATING_SQRTSOFTPLUS,
                       .norm_weights = true,
                       .weights_scale = 1.5f,
                       .clamp_exp = 10.0f,
                       .clamp_shexp = 10.0f,
                       .out = &out};
    be->ops->moe(be, &a);
    halo_error err = {0};
    CHECK_INT(be->ops->sync(be, &err), HALO_OK);
    if (err.message[0]) printf("  sync: %s\n", err.message);
    float *y = malloc((size_t)E * T * sizeof *y);
    CHECK_INT(be->ops->buf_read(be, out.buf, 0, y, (uint64_t)E * T * 4, &err), HALO_OK);
    halo_tensor *all[] = {&x, &r, &g, &u, &d, &gs, &us, &ds, &tid, &out};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        be->ops->buf_free(be, all[i]->buf);
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

/* A fast-mode Vulkan backend with HALO_VK_MOEQ=moeq and (unless NULL) HALO_VK_MOEQ_VAR, _ROWS. */
static halo_backend *vk_var(const char *moeq, const char *var, const char *rows, halo_error *err) {
    halo_backend *be = NULL;
    setenv("HALO_VK_FAST", "1", 1);
    setenv("HALO_VK_MOEQ", moeq, 1);
    if (var) setenv("HALO_VK_MOEQ_VAR", var, 1);
    if (rows) setenv("HALO_VK_MOEQ_ROWS", rows, 1);
    halo_status st = halo_backend_vulkan_create(-1, &be, err);
    unsetenv("HALO_VK_FAST");
    unsetenv("HALO_VK_MOEQ");
    if (var) unsetenv("HALO_VK_MOEQ_VAR");
    if (rows) unsetenv("HALO_VK_MOEQ_ROWS");
    return st ? NULL : be;
}

static halo_backend *vk_with(const char *moeq, halo_error *err) {
    return vk_var(moeq, NULL, NULL, err);
}

static halo_backend *vk_q, *vk_f32, *fast, *precise;

static void check_tokens(const inputs *in, uint32_t T) {
    size_t n = (size_t)E * T;
    /* without the shared expert: the routed experts alone */
    float *vq = moe(vk_q, in, T, false), *vf = moe(vk_f32, in, T, false);
    float *cf = moe(fast, in, T, false), *cp = moe(precise, in, T, false);
    double q_fast = rel(vq, cf, n), q_prec = rel(vq, cp, n), f32_prec = rel(vf, cp, n);
    double fast_err = rel(cf, cp, n);
    printf("  %u token(s), routed only: moeq vs cpu fast %.2e, vs cpu precise %.2e; "
           "moeq=0 vs cpu precise %.2e (cpu fast vs precise %.2e)\n",
           T, q_fast, q_prec, f32_prec, fast_err);
    CHECK(q_fast <= 1e-5);
    CHECK(q_prec > 1e-5);
    CHECK(f32_prec <= 1e-4);
    CHECK(q_prec <= 2 * fast_err);
    /* with it: the closer of its two possible references */
    float *vqs = moe(vk_q, in, T, true), *cfs = moe(fast, in, T, true);
    float *cps = moe(precise, in, T, true);
    float *mix = malloc(n * sizeof *mix);
    for (size_t i = 0; i < n; i++)
        mix[i] = cf[i] + (cps[i] - cp[i]); /* routed fast + shared precise */
    double to_mix = rel(vqs, mix, n), to_fast = rel(vqs, cfs, n);
    printf("  %u token(s), with the shared expert: moeq vs routed fast + shared precise %.2e, "
           "vs cpu fast %.2e\n",
           T, to_mix, to_fast);
    CHECK(fmin(to_mix, to_fast) <= 1e-5);
    free(vq), free(vf), free(cf), free(cp), free(vqs), free(cfs), free(cps), free(mix);
}

static inputs make_inputs(void) {
    inputs in;
    in.x = malloc((size_t)E * 4 * sizeof *in.x);
    for (int i = 0; i < E * 4; i++)
        in.x[i] = frand() * (i % 97 == 0 ? 4.0f : 1.0f);
    in.router = quantized(HALO_TYPE_F16, E, NE, 0.05f);
    in.g = iq2_xxs(E, (int64_t)F * NE, 0.05f);
    in.u = iq2_xxs(E, (int64_t)F * NE, 0.05f);
    in.d = quantized(HALO_TYPE_Q2_K, F, (int64_t)E * NE, 0.05f);
    in.gs = quantized(HALO_TYPE_Q8_0, E, F, 0.05f);
    in.us = quantized(HALO_TYPE_Q8_0, E, F, 0.05f);
    in.ds = quantized(HALO_TYPE_Q8_0, F, E, 0.05f);
    for (int i = 0; i < V; i++) /* distinct experts per row, as real tables */
        for (int j = 0; j < K; j++)
            in.tid[i * K + j] = (int32_t)((i * 3 + j * 5) % NE);
    int32_t tokens[4] = {3, 15, 0, 7};
    memcpy(in.tokens, tokens, sizeof tokens);
    return in;
}

static void free_inputs(inputs *in) {
    free(in->x), free(in->router), free(in->g), free(in->u), free(in->d), free(in->gs),
        free(in->us), free(in->ds);
}

/* The variants (HALO_VK_MOEQ_VAR: the sign-mask table, the codebook's copies, x held in
 * registers, the next row's loads ahead) and other rows a workgroup (partial last workgroups):
 * the same integer sums and the same lane order of each row's float sums, so the same bits as
 * the defaults. At n_embd 4096 a subgroup of fewer than 32 lanes (lavapipe's 8) takes a
 * gate/up row in several steps, so the held-x variants run their one-step rows only at 1024. */
static void variants_give_the_defaults_bits(const inputs *in) {
    static const char *const vars[][2] = {{"1", "5:7"},   {"2", "64:3"},  {"3", "32:16"},
                                          {"4", "32:16"}, {"12", "16:16"}, {"15", "7:16"},
                                          {"16", "32:5"}, {"32", "32:16"}, {"63", "9:33"}};
    float *ref = moe(vk_q, in, 3, false);
    for (size_t v = 0; v < sizeof vars / sizeof *vars; v++) {
        halo_error err = {0};
        halo_backend *be = vk_var("1", vars[v][0], vars[v][1], &err);
        CHECK(be != NULL);
        if (!be) continue;
        float *y = moe(be, in, 3, false);
        bool same = memcmp(y, ref, (size_t)E * 3 * sizeof *y) == 0;
        printf("  n_embd %d HALO_VK_MOEQ_VAR=%s HALO_VK_MOEQ_ROWS=%s: %s the defaults' bits\n", E,
               vars[v][0], vars[v][1], same ? "equal to" : "NOT equal to");
        CHECK(same);
        free(y);
        be->ops->destroy(be);
    }
    free(ref);
}

static void routed_experts_match_cpu_fast_mode(void) {
    inputs in = make_inputs();
    check_tokens(&in, 1);
    check_tokens(&in, 3);
    variants_give_the_defaults_bits(&in);
    free_inputs(&in);
    E = 1024;
    in = make_inputs();
    check_tokens(&in, 1);
    variants_give_the_defaults_bits(&in);
    free_inputs(&in);
    E = 4096;
}

int main(void) {
    halo_error err = {0};
    vk_q = vk_with("1", &err);
    if (!vk_q) {
        printf("skipped: %s\n", err.message);
        return 77;
    }
    vk_f32 = vk_with("0", &err);
    if (!vk_f32 || halo_backend_cpu_create(2, false, &fast, &err) ||
        halo_backend_cpu_create(2, true, &precise, &err)) {
        fprintf(stderr, "backends: %s\n", err.message);
        return 1;
    }
    printf("device: %s\n", halo_backend_vulkan_device_name(vk_q));
    RUN(routed_experts_match_cpu_fast_mode);
    vk_q->ops->destroy(vk_q);
    vk_f32->ops->destroy(vk_f32);
    fast->ops->destroy(fast);
    precise->ops->destroy(precise);
    return check_report();
}
