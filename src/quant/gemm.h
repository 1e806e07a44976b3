/* Tiled matrix products for the CPU backend: a block of weight rows against several tokens'
 * activation rows, each weight block decoded and loaded once for all the tokens.
 *
 * Every result is bit-identical to halo_quant_vec_dot_at at the same level for the same pair
 * (row, activation): the tiled kernels keep each pair's integer sums (exact, in any order) and
 * its float operations in the single-row kernel's order; they only share the weight decoding,
 * loads and scales between tokens. So prefill (many tokens) and decode (one) agree bitwise. */
#ifndef HALO_QUANT_GEMM_H
#define HALO_QUANT_GEMM_H

#include <stddef.h>
#include <stdint.h>

#include "halo/quant.h"

/* Most tokens one call takes; callers loop over larger batches. */
enum { HALO_GEMM_MAX_TOK = 8 };

/* y[t][r] = halo_quant_vec_dot_at(level, type, n, w + r * w_stride, act[t]) for r < nr and
 * t < nt (1 <= nt <= HALO_GEMM_MAX_TOK). act[t] are activation rows of the type
 * halo_quant_act_type(type) gives. */
void halo_quant_gemm_at(halo_quant_level level, uint32_t type, int64_t n, const void *w,
                        size_t w_stride, int64_t nr, const void *const *act, int nt,
                        float *const *y);
/* The same at halo_quant_level_best(). */
void halo_quant_gemm(uint32_t type, int64_t n, const void *w, size_t w_stride, int64_t nr,
                     const void *const *act, int nt, float *const *y);
/* Whether a tiled kernel (not the per-pair loop) serves type at the best level. */
int halo_quant_gemm_tiled(uint32_t type);

#endif
