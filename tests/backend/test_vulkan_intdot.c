/* Fast mode's integer dot products (HALO_VK_FAST=1: Q8_0 projections over activations
 * quantized to Q8_0, summed by VK_KHR_shader_integer_dot_product's packed 4x8-bit dot, declared
 * through GL_EXT_spirv_intrinsics since Debian 12's glslc lacks GL_EXT_integer_dot_product)
 * against the CPU backend's non-precise mode, which is ggml's Q8_0 x Q8_0 dot bit for bit: the
 * same quantized activations and integer sums, so only the float summation order differs (held
 * to 1e-5 of the output's range). Against the precise CPU the difference is the activations'
 * quantization error, far above that, which shows the integer path really ran. Plain and
 * grouped projections, 5 to 70 columns (matmul_q8.comp, and from 8 columns matmul_q8t.comp,
 * after a quantizing dispatch). Up to 4 columns (decode): the f32 path, equal to the precise
 * CPU. (matvec_q8i.comp, decode on int8 activations behind HALO_VK_MVQ8I, was removed in
 * session 11: some of its variants gave a wrong row on the H200 now and then, and it was never
 * faster in the step.) Skips (exit 77) without a Vulkan device, or when the device has no
 * integer dot products. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/vulkan/vulkan.h"
#include "check.h"
#include "halo/quant.h"
#include "halo/types.h"

static halo_backend *vk, *fast, *precise;
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

/* vk: integer dots over 5 or more columns only. */
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

/* One column (a decode step) in fast mode: the f32 path, the precise result. */
static void decode_sized_q8_0_projection_is_precise(void) {
    check_shape(4096, 512, 1, 1);
    check_shape(512, 1024, 8, 1);
}

int main(void) {
    halo_error err = {0};
    setenv("HALO_VK_FAST", "1", 1);
    halo_status st = halo_backend_vulkan_create(-1, &vk, &err);
    unsetenv("HALO_VK_FAST");
    if (st) {
        printf("skipped: %s\n", err.message);
        return 77;
    }
    if (halo_backend_cpu_create(2, false, &fast, &err) ||
        halo_backend_cpu_create(2, true, &precise, &err)) {
        fprintf(stderr, "cpu: %s\n", err.message);
        return 1;
    }
    printf("device: %s\n", halo_backend_vulkan_device_name(vk));
    RUN(q8_0_projection_matches_cpu_fast_mode);
    RUN(grouped_q8_0_projection_matches_cpu_fast_mode);
    RUN(decode_sized_q8_0_projection_is_precise);
    vk->ops->destroy(vk);
    fast->ops->destroy(fast);
    precise->ops->destroy(precise);
    return check_report();
}
