/* f32 row kernels (f32rows.h): level dispatch and the portable forms. Built with
 * -ffp-contract=off (src/quant/CMakeLists.txt) so the axpy's product is rounded before its add,
 * as the SIMD kernel does it. */
#include "quant/f32rows.h"

#include "halo/types.h"
#include "quant/kernels.h"

static halo_quant_level clamp(halo_quant_level level) {
    halo_quant_level best = halo_quant_level_best();
    return level > best ? best : level;
}

void halo_quant_f32_dots_at(halo_quant_level level, int64_t n, const float *q,
                            const float *const *rows, int64_t nr, float *out) {
    level = clamp(level);
#ifdef HALO_HAVE_X86
    if (level == HALO_QUANT_AVX512) {
        halo_f32_dots_avx512(n, q, rows, nr, out);
        return;
    }
#endif
    for (int64_t r = 0; r < nr; r++)
        out[r] = halo_quant_vec_dot_at(level, HALO_TYPE_F32, n, q, rows[r]);
}

void halo_quant_f32_dots(int64_t n, const float *q, const float *const *rows, int64_t nr,
                         float *out) {
    halo_quant_f32_dots_at(halo_quant_level_best(), n, q, rows, nr, out);
}

void halo_quant_f32_axpys_at(halo_quant_level level, int64_t n, float *y, const float *const *rows,
                             const float *w, int64_t nr) {
    level = clamp(level);
#ifdef HALO_HAVE_X86
    if (level == HALO_QUANT_AVX512) {
        halo_f32_axpys_avx512(n, y, rows, w, nr);
        return;
    }
#endif
    for (int64_t r = 0; r < nr; r++)
        for (int64_t d = 0; d < n; d++)
            y[d] += w[r] * rows[r][d];
}

void halo_quant_f32_axpys(int64_t n, float *y, const float *const *rows, const float *w,
                          int64_t nr) {
    halo_quant_f32_axpys_at(halo_quant_level_best(), n, y, rows, w, nr);
}
