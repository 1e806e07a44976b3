/* f32 row kernels for attention: one query against many key rows (dots) and a weighted sum of
 * value rows (axpys), the rows given by pointer (a sliding window plus selected compressed
 * rows are not one strided matrix).
 *
 * Both are bit-identical to the plain per-row forms at every level: halo_quant_f32_dots gives
 * halo_quant_vec_dot_at(level, HALO_TYPE_F32, n, q, rows[r]) for each row (the AVX-512 kernel
 * keeps that dot's four accumulators and reduction per row and shares the query's loads among
 * four rows); halo_quant_f32_axpys gives y[d] += w[r] * rows[r][d] for r in order, each
 * product rounded before the add (no fused multiply-add), with a block of y held in registers
 * across the rows. So attention's output does not depend on the instruction set's width. */
#ifndef HALO_QUANT_F32ROWS_H
#define HALO_QUANT_F32ROWS_H

#include <stdint.h>

#include "halo/quant.h"

/* out[r] = q · rows[r] (n floats each) for r < nr. */
void halo_quant_f32_dots_at(halo_quant_level level, int64_t n, const float *q,
                            const float *const *rows, int64_t nr, float *out);
void halo_quant_f32_dots(int64_t n, const float *q, const float *const *rows, int64_t nr,
                         float *out);

/* y[d] = (...((y[d] + w[0] * rows[0][d]) + w[1] * rows[1][d]) ...) for d < n. */
void halo_quant_f32_axpys_at(halo_quant_level level, int64_t n, float *y, const float *const *rows,
                             const float *w, int64_t nr);
void halo_quant_f32_axpys(int64_t n, float *y, const float *const *rows, const float *w,
                          int64_t nr);

#endif
