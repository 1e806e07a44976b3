/* Tiled matrix products: dispatch to the SIMD kernels (gemm_avx512.c) and a per-pair fallback
 * that still keeps each weight row in L1 across the tokens. */
#include "quant/gemm.h"

#include "halo/types.h"
#include "quant/kernels.h"

typedef void (*gemm_fn)(int64_t n, const void *w, size_t w_stride, int64_t nr,
                        const void *const *act, int nt, float *const *y);

/* The AVX-512 level's tiled kernels, by type (NULL: the fallback loop). */
static gemm_fn avx512_kernel(uint32_t type) {
#ifdef HALO_HAVE_X86
    switch (type) {
    case HALO_TYPE_Q8_0:
        return halo_gemm_q8_0_avx512;
    case HALO_TYPE_Q2_K:
        return halo_gemm_q2_K_avx512;
    case HALO_TYPE_IQ2_XXS:
        return halo_quant_vbmi() ? halo_gemm_iq2_xxs_vbmi : halo_gemm_iq2_xxs_avx512;
    case HALO_TYPE_Q4_K:
        return halo_gemm_q4_K_avx512;
    case HALO_TYPE_MXFP4:
        return halo_gemm_mxfp4_avx512;
    case HALO_TYPE_F16:
        return halo_gemm_f16_avx512;
    default:
        return NULL;
    }
#else
    (void)type;
    return NULL;
#endif
}

static gemm_fn kernel_at(halo_quant_level level, uint32_t type) {
    halo_quant_level best = halo_quant_level_best();
    if (level > best) level = best;
    return level == HALO_QUANT_AVX512 ? avx512_kernel(type) : NULL;
}

void halo_quant_gemm_at(halo_quant_level level, uint32_t type, int64_t n, const void *w,
                        size_t w_stride, int64_t nr, const void *const *act, int nt,
                        float *const *y) {
    gemm_fn k = kernel_at(level, type);
    if (k) {
        k(n, w, w_stride, nr, act, nt, y);
        return;
    }
    const unsigned char *row = w;
    for (int64_t r = 0; r < nr; r++, row += w_stride)
        for (int t = 0; t < nt; t++)
            y[t][r] = halo_quant_vec_dot_at(level, type, n, row, act[t]);
}

void halo_quant_gemm(uint32_t type, int64_t n, const void *w, size_t w_stride, int64_t nr,
                     const void *const *act, int nt, float *const *y) {
    halo_quant_gemm_at(halo_quant_level_best(), type, n, w, w_stride, nr, act, nt, y);
}

int halo_quant_gemm_tiled(uint32_t type) {
    return kernel_at(halo_quant_level_best(), type) != NULL;
}
