/* Validation reports NaN/Inf scales by block instead of letting them flow into activations;
 * MXFP4 repacking from DeepSeek's e2m1 layout; quantize argument errors. */
#include "check.h"
#include "quant_testutil.h"

#include <stdlib.h>

/* Byte offset of the block scale d for formats whose d is a plain f16. */
static int d_offset(uint32_t t) {
    switch (t) {
    case HALO_TYPE_Q2_K:
        return 80;
    case HALO_TYPE_Q3_K:
        return 108;
    case HALO_TYPE_Q6_K:
        return 208;
    default:
        return 0;
    }
}

/* Makes block blk's scale (or, for float types, its element) NaN (bad = 0) or infinite. */
static void poison(uint32_t t, uint8_t *blk, int bad) {
    if (t == HALO_TYPE_MXFP4) {
        blk[0] = 0xff; /* e8m0's only non-number */
    } else if (t == HALO_TYPE_F32) {
        float f = bad ? INFINITY : NAN;
        memcpy(blk, &f, 4);
    } else if (t == HALO_TYPE_BF16) {
        put16(blk, bad ? 0x7f80 : 0x7fc1);
    } else if (t == HALO_TYPE_IQ1_M) {
        uint16_t w[4], v = bad ? 0x7c00 : 0x7e01;
        memcpy(w, blk + 48, 8);
        for (int j = 0; j < 4; j++)
            w[j] = (uint16_t)((w[j] & 0x0fff) | (((v >> (4 * j)) & 0xf) << 12));
        memcpy(blk + 48, w, 8);
    } else {
        put16(blk + d_offset(t), bad ? 0xfc00 : 0x7e01); /* -inf, NaN */
    }
}

static void quant_validate_reports_nan_and_inf_scales_by_block(void) {
    for (size_t k = 0; k < N_QUANT_TEST_TYPES; k++) {
        uint32_t t = quant_test_types[k];
        const halo_type_info *info = halo_type_info_get(t);
        const int n_blocks = 6;
        size_t bytes = (size_t)n_blocks * info->block_bytes;
        uint8_t *buf = malloc(bytes);
        for (int bad = -1; bad < 2; bad++) {
            for (int b = 0; b < n_blocks; b++)
                random_block(t, buf + (size_t)b * info->block_bytes, SCALE_TYPICAL);
            halo_error err = {0};
            if (bad < 0) {
                CHECK_INT(halo_quant_validate(t, buf, bytes, &err), HALO_OK);
                continue;
            }
            poison(t, buf + 4 * info->block_bytes, bad);
            CHECK_INT(halo_quant_validate(t, buf, bytes, &err), HALO_E_BAD_VALUE);
            CHECK_CONTAINS(err.message, info->name);
            CHECK_CONTAINS(err.message, info->quantized ? "block 4 " : "element 4 ");
        }
        free(buf);
    }
}

static void quant_validate_reports_nan_min_scale(void) {
    uint8_t blk[144];
    random_block(HALO_TYPE_Q4_K, blk, SCALE_TYPICAL);
    put16(blk + 2, 0x7c00); /* dmin = +inf */
    halo_error err = {0};
    CHECK_INT(halo_quant_validate(HALO_TYPE_Q4_K, blk, sizeof blk, &err), HALO_E_BAD_VALUE);
    CHECK_CONTAINS(err.message, "block 0 (elements 0..255): min scale");
}

static void quant_validate_rejects_partial_blocks_and_unknown_types(void) {
    uint8_t buf[64] = {0};
    halo_error err = {0};
    CHECK_INT(halo_quant_validate(HALO_TYPE_Q8_0, buf, 35, &err), HALO_E_BAD_VALUE);
    CHECK_CONTAINS(err.message, "not a whole number of 34-byte blocks");
    CHECK_INT(halo_quant_validate(4, buf, 18, &err), HALO_E_UNKNOWN_TYPE);
    CHECK_INT(halo_quant_validate(HALO_TYPE_Q8_0, buf, 34, &err), HALO_OK); /* zero is finite */
}

/* DeepSeek's checkpoints store element 2i in the low nibble of byte i; MXFP4 blocks hold element
 * j and j + 16 in byte j. The values must survive unchanged. */
static void quant_mxfp4_from_deepseek_layout_keeps_values(void) {
    enum { N = 128 };
    uint8_t codes[N / 2], scales[N / 32], blocks[N / 32 * 17];
    int8_t code_of[N];
    for (int i = 0; i < N; i++)
        code_of[i] = (int8_t)(rng_next() & 0xf);
    for (int i = 0; i < N / 2; i++)
        codes[i] = (uint8_t)(code_of[2 * i] | (code_of[2 * i + 1] << 4));
    for (int b = 0; b < N / 32; b++)
        scales[b] = (uint8_t)(120 + b);
    halo_error err = {0};
    CHECK_INT(halo_quant_mxfp4_from_e2m1(codes, scales, blocks, N, &err), HALO_OK);
    float y[N];
    halo_quant_dequantize_row(HALO_TYPE_MXFP4, blocks, y, N);
    static const float e2m1[16] = {0,     0.5f,  1,  1.5f,  2,  3,  4,  6,
                                   -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6};
    int bad = 0;
    for (int i = 0; i < N; i++) {
        float want = e2m1[code_of[i]] * ldexpf(1.0f, scales[i / 32] - 127);
        if (y[i] != want) bad++;
    }
    CHECK_INT(bad, 0);
    CHECK_INT(halo_quant_mxfp4_from_e2m1(codes, scales, blocks, 33, &err), HALO_E_INVALID_ARG);
}

static void quant_quantize_rejects_types_it_cannot_write(void) {
    float x[256] = {0};
    uint8_t out[512];
    halo_error err = {0};
    CHECK_INT(halo_quant_quantize_row(HALO_TYPE_IQ2_XXS, x, out, 256, &err), HALO_E_UNSUPPORTED);
    CHECK_CONTAINS(err.message, "iq2_xxs");
    CHECK_INT(halo_quant_quantize_row(HALO_TYPE_Q4_K, x, out, 100, &err), HALO_E_INVALID_ARG);
    CHECK_CONTAINS(err.message, "block size 256");
    CHECK(!halo_quant_can_quantize(HALO_TYPE_IQ2_XXS));
    x[77] = NAN;
    CHECK_INT(halo_quant_quantize_row(HALO_TYPE_Q8_0, x, out, 256, &err), HALO_E_BAD_VALUE);
    CHECK_CONTAINS(err.message, "q8_0: element 77 is NaN");
    x[77] = -INFINITY;
    CHECK_INT(halo_quant_quantize_row(HALO_TYPE_Q8_K, x, out, 256, &err), HALO_E_BAD_VALUE);
    CHECK_CONTAINS(err.message, "infinite");
}

int main(void) {
    RUN(quant_validate_reports_nan_and_inf_scales_by_block);
    RUN(quant_validate_reports_nan_min_scale);
    RUN(quant_validate_rejects_partial_blocks_and_unknown_types);
    RUN(quant_mxfp4_from_deepseek_layout_keeps_values);
    RUN(quant_quantize_rejects_types_it_cannot_write);
    return check_report();
}
