/* Activation quantizers (Q8_0, Q8_K) through halo_quant_quantize_row, which takes the AVX-512
 * forms where the CPU has them: byte-identical to the scalar reference kernels (quantize.c,
 * which test_quant_ggml holds to ggml) on rows built to hit the edge cases: exact halves after
 * scaling (roundf rounds them away from zero, Q8_K's nearest-int to even), the maximum reached
 * by both signs (Q8_K keeps the first), all-zero and subnormal blocks, and ordinary normals. */
#include "check.h"
#include "quant/kernels.h"
#include "quant_testutil.h"

#include <stdlib.h>

enum { N = 4096 };

/* Block kind k of row variant v, element j of a block of size bs. */
static float element(int v, int64_t blk, int j, int bs) {
    switch ((v + blk) % 6) {
    case 0: /* max 127 at j = 0: scale 1, so k + 0.5 is an exact half */
        return j == 0 ? 127.0f : (float)((j * 37) % 253 - 126) + (j % 2 ? 0.5f : 0.0f);
    case 1: /* both signs of the maximum, the negative first */
        return j == 3 ? -2.0f : j == bs - 2 ? 2.0f : rng_normal() * 0.5f;
    case 2:
        return 0.0f;
    case 3: /* subnormal: the inverse scale overflows */
        return (float)(j % 5) * 1e-41f;
    case 4:
        return rng_normal() * 30.0f;
    default: /* halves at a scale that is not 1 */
        return (float)((j * 11) % 64 - 32) * 0.25f + 0.125f;
    }
}

static void check_type(uint32_t type, void (*ref)(const float *, void *, int64_t)) {
    const halo_type_info *info = halo_type_info_get(type);
    uint64_t bytes = 0;
    halo_type_bytes(type, N, &bytes);
    float *x = malloc(N * sizeof *x);
    unsigned char *got = malloc(bytes), *want = malloc(bytes);
    int mismatches = 0;
    for (int v = 0; v < 6; v++) {
        for (int64_t i = 0; i < N; i++)
            x[i] = element(v, i / info->block_size, (int)(i % info->block_size),
                           (int)info->block_size);
        halo_error err = {0};
        memset(got, 0xa5, bytes);
        memset(want, 0x5a, bytes);
        CHECK_INT(halo_quant_quantize_row(type, x, got, N, &err), HALO_OK);
        ref(x, want, N);
        if (memcmp(got, want, bytes) != 0 && mismatches++ < 3)
            fprintf(stderr, "%s variant %d differs from the scalar quantizer\n", info->name, v);
    }
    CHECK_INT(mismatches, 0);
    free(x);
    free(got);
    free(want);
}

static void q8_0_activation_rows_match_the_scalar_quantizer(void) {
    check_type(HALO_TYPE_Q8_0, halo_quantize_q8_0);
}

static void q8_K_activation_rows_match_the_scalar_quantizer(void) {
    check_type(HALO_TYPE_Q8_K, halo_quantize_q8_K);
}

static void quantize_row_still_rejects_nan_and_infinity(void) {
    float x[64] = {0};
    unsigned char buf[256];
    for (int k = 0; k < 2; k++) {
        x[40] = k ? INFINITY : NAN;
        halo_error err = {0};
        CHECK_INT(halo_quant_quantize_row(HALO_TYPE_Q8_0, x, buf, 64, &err), HALO_E_BAD_VALUE);
        CHECK(strstr(err.message, "element 40") != NULL);
    }
}

int main(void) {
    RUN(q8_0_activation_rows_match_the_scalar_quantizer);
    RUN(q8_K_activation_rows_match_the_scalar_quantizer);
    RUN(quantize_row_still_rejects_nan_and_infinity);
    return check_report();
}
