/* Dot products: every type at every SIMD level against dequantize-then-dot in double. */
#include "check.h"
#include "quant_testutil.h"

#include <stdlib.h>

/* Activation row of the type t pairs with, from x; and its exact dequantization. */
static void make_act(uint32_t t, const float *x, int64_t n, void *act, double *a) {
    int at = halo_quant_act_type(t);
    halo_error err = {0};
    CHECK_INT(halo_quant_quantize_row((uint32_t)at, x, act, n, &err), HALO_OK);
    if (at == HALO_TYPE_F32) {
        for (int64_t i = 0; i < n; i++)
            a[i] = x[i];
    } else if (at == HALO_TYPE_Q8_0) {
        float *f = malloc((size_t)n * 4);
        halo_quant_dequantize_row_at(HALO_QUANT_SCALAR, HALO_TYPE_Q8_0, act, f, n);
        for (int64_t i = 0; i < n; i++)
            a[i] = f[i]; /* d * q is exact in f32 */
        free(f);
    } else {
        const uint8_t *q = act;
        for (int64_t b = 0; b < n / 256; b++, q += 292) {
            float d;
            memcpy(&d, q, 4);
            for (int j = 0; j < 256; j++)
                a[b * 256 + j] = (double)d * (int8_t)q[4 + j];
        }
    }
}

static void quant_dot_matches_double_reference_at_every_level(void) {
    const int64_t n = 4096;
    float *x = malloc(n * 4), *w = malloc(n * 4);
    double *a = malloc(n * 8);
    uint8_t *act = malloc(n * 4 + 64), *row = malloc(n * 4 + 64);
    halo_quant_level best = halo_quant_level_best();
    for (size_t k = 0; k < N_QUANT_TEST_TYPES; k++) {
        uint32_t t = quant_test_types[k];
        const halo_type_info *info = halo_type_info_get(t);
        double worst = 0, worst_vs_scalar = 0;
        for (int rep = 0; rep < 20; rep++) {
            for (int64_t i = 0; i < n; i++)
                x[i] = rng_normal() * (rep % 2 ? 1.0f : 30.0f);
            make_act(t, x, n, act, a);
            for (int64_t b = 0; b < n / info->block_size; b++)
                random_block(t, row + b * info->block_bytes, SCALE_TYPICAL);
            halo_quant_dequantize_row_at(HALO_QUANT_SCALAR, t, row, w, n);
            double ref = 0, mag = 0;
            for (int64_t i = 0; i < n; i++) {
                ref += (double)w[i] * a[i];
                mag += fabs((double)w[i] * a[i]);
            }
            float scalar = halo_quant_vec_dot_at(HALO_QUANT_SCALAR, t, n, row, act);
            for (int lvl = 0; lvl <= (int)best; lvl++) {
                float got = halo_quant_vec_dot_at((halo_quant_level)lvl, t, n, row, act);
                /* relative to the sum of |terms|: the scale f32 accumulation error has */
                double rel = fabs(got - ref) / (mag > 0 ? mag : 1);
                double rel_s = fabs((double)got - scalar) / (mag > 0 ? mag : 1);
                if (rel > worst) worst = rel;
                if (rel_s > worst_vs_scalar) worst_vs_scalar = rel_s;
                if (rel > 1e-6 && rel == worst)
                    fprintf(stderr, "%s %s: dot %.9g, reference %.9g (rel %.3g)\n", info->name,
                            halo_quant_level_name((halo_quant_level)lvl), got, ref, rel);
            }
        }
        CHECK(worst <= 1e-6);
        CHECK(worst_vs_scalar <= 1e-6);
    }
    free(x);
    free(w);
    free(a);
    free(act);
    free(row);
}

static void quant_act_types_pair_like_ggml(void) {
    CHECK_INT(halo_quant_act_type(HALO_TYPE_Q8_0), HALO_TYPE_Q8_0);
    CHECK_INT(halo_quant_act_type(HALO_TYPE_MXFP4), HALO_TYPE_Q8_0);
    CHECK_INT(halo_quant_act_type(HALO_TYPE_IQ4_NL), HALO_TYPE_Q8_0);
    CHECK_INT(halo_quant_act_type(HALO_TYPE_Q2_K), HALO_TYPE_Q8_K);
    CHECK_INT(halo_quant_act_type(HALO_TYPE_IQ2_XXS), HALO_TYPE_Q8_K);
    CHECK_INT(halo_quant_act_type(HALO_TYPE_F16), HALO_TYPE_F32);
    CHECK_INT(halo_quant_act_type(HALO_TYPE_Q8_K), -1);
    CHECK_INT(halo_quant_act_type(HALO_TYPE_TQ1_0), -1);
    CHECK_INT(halo_quant_act_type(9999), -1);
    CHECK(!halo_quant_supported(HALO_TYPE_I32));
}

static void quant_level_names_are_stable(void) {
    CHECK_STR(halo_quant_level_name(HALO_QUANT_SCALAR), "scalar");
    CHECK_STR(halo_quant_level_name(HALO_QUANT_AVX2), "avx2");
    CHECK_STR(halo_quant_level_name(HALO_QUANT_AVX512), "avx512");
    printf("cpu level: %s\n", halo_quant_level_name(halo_quant_level_best()));
}

int main(void) {
    RUN(quant_act_types_pair_like_ggml);
    RUN(quant_level_names_are_stable);
    RUN(quant_dot_matches_double_reference_at_every_level);
    return check_report();
}
