/* The CPU's RMS norm row (cpu_rms_norm_row: the backend's rms_norm op and the hyper-connection
 * and attention norms) against a long-double reference: the mean of squares summed exactly
 * enough that only its final float rounding remains, then the same float steps. Lengths cover
 * the 8-wide main loop, every tail length and the hyper-connections' 16,384 channels; rows
 * with and without a weight. */
#include <math.h>
#include <stdlib.h>

#include "backend/cpu/cpu.h"
#include "check.h"
#include "op_util.h"

static void rms_norm_row_matches_a_long_double_reference(void) {
    static const int64_t lengths[] = {1, 3, 7, 8, 9, 15, 16, 17, 31, 64, 100, 4096, 16384, 16389};
    uint32_t seed = 11;
    int bad = 0;
    for (size_t k = 0; k < sizeof lengths / sizeof lengths[0]; k++) {
        int64_t n = lengths[k];
        float *x = malloc(sizeof(float) * (size_t)n), *y = malloc(sizeof(float) * (size_t)n);
        float *w = malloc(sizeof(float) * (size_t)n);
        for (int with_w = 0; with_w < 2; with_w++) {
            long double ss = 0;
            for (int64_t i = 0; i < n; i++) {
                /* magnitudes over four decades, as residual streams have */
                x[i] = frand(&seed) * powf(10.0f, (float)(i % 4) - 1.0f);
                w[i] = 1.0f + frand(&seed);
                ss += (long double)x[i] * x[i];
                y[i] = x[i];
            }
            const float eps = 1e-6f;
            float r = 1.0f / sqrtf((float)(double)(ss / n) + eps);
            cpu_rms_norm_row(y, n, with_w ? w : NULL, eps);
            for (int64_t i = 0; i < n; i++) {
                float want = with_w ? w[i] * (x[i] * r) : x[i] * r;
                /* a few float ulps: the double sum may round the mean's float the other way */
                if (fabsf(y[i] - want) > 4e-7f * fabsf(want) && bad++ < 3)
                    fprintf(stderr, "n %lld weight %d element %lld: %.9g, want %.9g\n",
                            (long long)n, with_w, (long long)i, y[i], want);
            }
        }
        free(x);
        free(y);
        free(w);
    }
    CHECK_INT(bad, 0);
}

int main(void) {
    RUN(rms_norm_row_matches_a_long_double_reference);
    return check_report();
}
