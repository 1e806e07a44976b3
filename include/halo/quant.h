/* Quantized block formats: dequantize a row to f32, dot a quantized row with an activation row,
 * quantize f32 rows for the types halo writes, and validate a tensor's scales.
 *
 * Formats are ggml's (GGUF tensor types, numbered as halo_type). A row is n elements of one
 * type, n a multiple of the type's block size; rows are plain block arrays as stored in GGUF.
 * Dot products pair each weight type with an activation type (halo_quant_act_type): Q8_0 for
 * the 32-element formats, Q8_K for the 256-element k- and i-quants, F32 for float weights.
 * Kernels exist at several instruction-set levels; the default picks the best the CPU has at
 * run time, and the _at variants force one (tests compare them against the scalar reference). */
#ifndef HALO_QUANT_H
#define HALO_QUANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "halo/status.h"
#include "halo/types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum halo_quant_level {
    HALO_QUANT_SCALAR = 0, /* portable C; the reference every other level is tested against */
    HALO_QUANT_AVX2 = 1,   /* AVX2 + FMA + F16C */
    HALO_QUANT_AVX512 = 2, /* AVX-512 F/BW/VL/VNNI (Ice Lake, Zen 4 and later) */
    HALO_QUANT_LEVEL_COUNT
} halo_quant_level;

/* Best level this CPU runs (detected once); and the level's name ("scalar", "avx2", "avx512"). */
halo_quant_level halo_quant_level_best(void);
const char *halo_quant_level_name(halo_quant_level level);

/* True when halo can dequantize and dot rows of this type. */
bool halo_quant_supported(uint32_t type);

/* Activation type a weight type's dot product takes (HALO_TYPE_Q8_0, HALO_TYPE_Q8_K or
 * HALO_TYPE_F32), or -1 for an unsupported type. */
int halo_quant_act_type(uint32_t type);

/* Dequantizes n elements (a multiple of the block size) of a supported type into dst.
 * Results are bit-identical to ggml's dequantizers at every level. */
void halo_quant_dequantize_row(uint32_t type, const void *src, float *dst, int64_t n);
void halo_quant_dequantize_row_at(halo_quant_level level, uint32_t type, const void *src,
                                  float *dst, int64_t n);

/* Dot product of n elements: qrow of a supported type with act, a row of
 * halo_quant_act_type(type) (e.g. made by halo_quant_quantize_row). f32 accumulation. */
float halo_quant_vec_dot(uint32_t type, int64_t n, const void *qrow, const void *act);
float halo_quant_vec_dot_at(halo_quant_level level, uint32_t type, int64_t n, const void *qrow,
                            const void *act);

/* True when halo_quant_quantize_row writes this type: F32, F16, BF16, Q8_0, Q8_K, Q2_K, Q4_K,
 * Q6_K, MXFP4. (IQ2_XXS and the other i-quants need an importance-matrix quantizer: not yet.) */
bool halo_quant_can_quantize(uint32_t type);

/* Quantizes n f32 values (a multiple of the block size) into dst, which holds
 * halo_type_bytes(type, n) bytes. Q8_0, Q8_K, Q2_K, Q4_K, Q6_K and MXFP4 follow ggml's
 * reference quantizers, so quantize->dequantize matches ggml's bit for bit. A NaN or infinite
 * input is an error (HALO_E_BAD_VALUE) for the block formats; F16/BF16 convert it as IEEE does. */
halo_status halo_quant_quantize_row(uint32_t type, const float *src, void *dst, int64_t n,
                                    halo_error *err);

/* Builds MXFP4 blocks from DeepSeek's checkpoint layout: e2m1 codes packed two per byte (element
 * 2i in the low nibble of byte i) and one e8m0 scale byte per 32 elements. The conversion is
 * lossless: MXFP4 stores the same codes and exponents, only the nibble order differs. */
halo_status halo_quant_mxfp4_from_e2m1(const uint8_t *codes, const uint8_t *scales, void *dst,
                                       int64_t n, halo_error *err);

/* Checks a tensor's data: n_bytes is a whole number of blocks and every block scale (f16, f32 or
 * e8m0) is finite; for float types every element is. The error names the first bad block (or
 * element) index. */
halo_status halo_quant_validate(uint32_t type, const void *data, size_t n_bytes, halo_error *err);

#ifdef __cplusplus
}
#endif
#endif
