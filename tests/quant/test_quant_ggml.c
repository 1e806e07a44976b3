/* halo's block formats against ggml's own code (libggml-base.so from llama.cpp v0.5.0, loaded
 * with dlopen): the type table, dequantization bit for bit at every SIMD level, and the
 * quantizers halo shares with ggml. Fails (does not skip) when ggml is not installed. */
#include "check.h"
#include "ggml_lib.h"
#include "quant_testutil.h"

#include <stdlib.h>

static ggml_lib g;

static void quant_type_table_matches_ggml(void) {
    for (uint32_t t = 0; t < HALO_TYPE_ID_LIMIT; t++) {
        const halo_type_info *info = halo_type_info_get(t);
        const struct ggml_type_traits *tr = g.get_type_traits((int)t);
        if (!info) {
            /* ids halo leaves out must be ones ggml no longer has (block size 0) */
            if (tr->blck_size != 0)
                fprintf(stderr, "ggml type %u (%s) missing from halo\n", t, tr->type_name);
            CHECK(tr->blck_size == 0);
            continue;
        }
        CHECK_STR(info->name, tr->type_name);
        CHECK_INT(info->block_size, g.blck_size((int)t));
        CHECK_INT(info->block_bytes, g.type_size((int)t));
        CHECK_INT(info->quantized, tr->is_quantized);
    }
}

/* Dequantizes random rows in every scale regime with ggml and with halo at each level. */
static void quant_dequantize_is_bit_identical_to_ggml(void) {
    halo_quant_level best = halo_quant_level_best();
    for (size_t k = 0; k < N_QUANT_TEST_TYPES; k++) {
        uint32_t t = quant_test_types[k];
        const halo_type_info *info = halo_type_info_get(t);
        const struct ggml_type_traits *tr = g.get_type_traits((int)t);
        CHECK(halo_quant_supported(t));
        if (t == HALO_TYPE_F32) continue; /* ggml has no converter for f32: nothing to compare */
        if (!tr->to_float) {
            fprintf(stderr, "ggml has no to_float for %s\n", info->name);
            CHECK(0);
            continue;
        }
        const int n_blocks = info->block_size == 1 ? 512 : 2048 / (int)info->block_size + 3;
        const int64_t n = (int64_t)n_blocks * info->block_size;
        uint8_t *row = malloc((size_t)n_blocks * info->block_bytes);
        float *want = malloc((size_t)n * 4), *got = malloc((size_t)n * 4);
        int bad = 0;
        for (int mode = 0; mode < SCALE_MODES; mode++)
            for (int rep = 0; rep < 8; rep++) {
                for (int b = 0; b < n_blocks; b++)
                    random_block(t, row + (size_t)b * info->block_bytes, mode);
                tr->to_float(row, want, n);
                for (int lvl = 0; lvl <= (int)best; lvl++) {
                    memset(got, 0xa5, (size_t)n * 4);
                    halo_quant_dequantize_row_at((halo_quant_level)lvl, t, row, got, n);
                    int64_t first = -1;
                    for (int64_t i = 0; i < n && first < 0; i++)
                        if (!same_float(want[i], got[i])) first = i;
                    if (first >= 0 && bad++ < 3)
                        fprintf(stderr, "%s level %s mode %d: element %lld: ggml %a halo %a\n",
                                info->name, halo_quant_level_name((halo_quant_level)lvl), mode,
                                (long long)first, want[first], got[first]);
                    /* outside NaN regimes the match must be exact, NaN bits included */
                    if (first < 0 && mode != SCALE_RANDOM &&
                        memcmp(want, got, (size_t)n * 4) != 0) {
                        if (bad++ < 3) fprintf(stderr, "%s: NaN payloads differ\n", info->name);
                    }
                }
            }
        CHECK_INT(bad, 0);
        free(row);
        free(want);
        free(got);
    }
}

static double rms_error(const float *x, const float *y, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += ((double)x[i] - y[i]) * ((double)x[i] - y[i]);
    return sqrt(s / (double)n);
}

/* Data that exercises quantizers: Gaussian rows, rows with outliers, constant and zero stretches,
 * tiny and huge magnitudes. */
static void quantizer_input(float *x, int64_t n, int kind) {
    for (int64_t i = 0; i < n; i++) {
        float v = rng_normal();
        switch (kind) {
        case 0:
            x[i] = v * 0.02f;
            break;
        case 1:
            x[i] = (rng_next() % 97 == 0) ? v * 3.0f : v * 0.01f;
            break;
        case 2:
            x[i] = (i / 64) % 3 == 0 ? 0.0f : (i / 64) % 3 == 1 ? 0.5f : v;
            break;
        case 3:
            x[i] = v * 1e-6f;
            break;
        default:
            x[i] = v * 1e3f + 5.0f;
            break;
        }
    }
}

static void q8k_to_float(const uint8_t *q, float *y, int64_t n) {
    for (int64_t b = 0; b < n / 256; b++, q += 292) {
        float d;
        memcpy(&d, q, 4);
        for (int j = 0; j < 256; j++)
            *y++ = d * (float)(int8_t)q[4 + j];
    }
}

static void quant_quantizers_match_ggml(void) {
    const uint32_t types[] = {HALO_TYPE_Q8_0, HALO_TYPE_Q4_K,  HALO_TYPE_Q2_K, HALO_TYPE_Q6_K,
                              HALO_TYPE_Q8_K, HALO_TYPE_MXFP4, HALO_TYPE_F16,  HALO_TYPE_BF16};
    const int64_t n = 4096;
    float *x = malloc(n * 4), *yh = malloc(n * 4), *yg = malloc(n * 4);
    uint8_t *qh = malloc(n * 2 + 4096), *qg = malloc(n * 2 + 4096);
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        uint32_t t = types[k];
        const halo_type_info *info = halo_type_info_get(t);
        const struct ggml_type_traits *tr = g.get_type_traits((int)t);
        /* ggml keeps Q8_K's quantizer in the CPU backend only (there it is the reference one) */
        ggml_from_float_fn ggml_quantize =
            t == HALO_TYPE_Q8_K ? g.get_type_traits_cpu((int)t)->from_float : tr->from_float_ref;
        if (!ggml_quantize || (!tr->to_float && t != HALO_TYPE_Q8_K)) {
            fprintf(stderr, "ggml has no reference quantizer for %s\n", info->name);
            CHECK(0);
            continue;
        }
        uint64_t bytes;
        CHECK(halo_type_bytes(t, (uint64_t)n, &bytes));
        CHECK(halo_quant_can_quantize(t));
        int diff_rows = 0;
        for (int kind = 0; kind < 5; kind++)
            for (int rep = 0; rep < 3; rep++) {
                quantizer_input(x, n, kind);
                memset(qh, 0, bytes);
                memset(qg, 0, bytes);
                halo_error err = {0};
                CHECK_INT(halo_quant_quantize_row(t, x, qh, n, &err), HALO_OK);
                ggml_quantize(x, qg, n);
                if (memcmp(qh, qg, bytes) != 0) diff_rows++;
                if (t == HALO_TYPE_Q8_K) { /* activations only: x = d * q */
                    q8k_to_float(qh, yh, n);
                    q8k_to_float(qg, yg, n);
                } else {
                    halo_quant_dequantize_row_at(HALO_QUANT_SCALAR, t, qh, yh, n);
                    tr->to_float(qg, yg, n);
                }
                CHECK(memcmp(yh, yg, (size_t)n * 4) == 0);
                CHECK(rms_error(x, yh, n) <= rms_error(x, yg, n));
            }
        if (diff_rows)
            fprintf(stderr, "%s: %d rows quantize differently from ggml\n", info->name, diff_rows);
        CHECK_INT(diff_rows, 0);
    }
    free(x);
    free(yh);
    free(yg);
    free(qh);
    free(qg);
}

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0);
    if (!ggml_lib_open(&g, true)) {
        fprintf(stderr, "FAIL: ggml is required for this test\n");
        return 1;
    }
    RUN(quant_type_table_matches_ggml);
    RUN(quant_dequantize_is_bit_identical_to_ggml);
    RUN(quant_quantizers_match_ggml);
    ggml_lib_close(&g);
    return check_report();
}
