/* Float weight formats (F32, F16, BF16): scalar reference kernels. Dots take F32 activations
 * (ggml pairs F16 with F16 and BF16 with BF16 activations; halo keeps activations in f32 for
 * float weights, which only adds accuracy). */
#include "quant/fp.h"
#include "quant/kernels.h"

#include <string.h>

void halo_dequant_f32(const void *src, float *dst, int64_t n) {
    memcpy(dst, src, (size_t)n * sizeof(float));
}

float halo_dot_f32(int64_t n, const void *w, const void *act) {
    const float *x = w, *a = act;
    float sum = 0.0f;
    for (int64_t i = 0; i < n; i++)
        sum += x[i] * a[i];
    return sum;
}

void halo_dequant_f16(const void *src, float *dst, int64_t n) {
    const uint16_t *x = src;
    for (int64_t i = 0; i < n; i++)
        dst[i] = halo_f16_to_f32(x[i]);
}

float halo_dot_f16(int64_t n, const void *w, const void *act) {
    const uint16_t *x = w;
    const float *a = act;
    float sum = 0.0f;
    for (int64_t i = 0; i < n; i++)
        sum += halo_f16_to_f32(x[i]) * a[i];
    return sum;
}

void halo_dequant_bf16(const void *src, float *dst, int64_t n) {
    const uint16_t *x = src;
    for (int64_t i = 0; i < n; i++)
        dst[i] = halo_bf16_to_f32(x[i]);
}

float halo_dot_bf16(int64_t n, const void *w, const void *act) {
    const uint16_t *x = w;
    const float *a = act;
    float sum = 0.0f;
    for (int64_t i = 0; i < n; i++)
        sum += halo_bf16_to_f32(x[i]) * a[i];
    return sum;
}
