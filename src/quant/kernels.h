/* Internal kernel prototypes. Each family file (float.c, legacy.c, kquants.c, iquants.c) defines
 * the scalar reference kernels; simd_avx2.c and simd_avx512.c define faster ones for some types.
 * quant.c holds the one dispatch table that maps (type, level) to a kernel. */
#ifndef HALO_QUANT_KERNELS_H
#define HALO_QUANT_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef void (*halo_dequant_fn)(const void *src, float *dst, int64_t n);
typedef float (*halo_dot_fn)(int64_t n, const void *w, const void *act);

#define HALO_DECLARE_SCALAR(name)                                                                  \
    void halo_dequant_##name(const void *src, float *dst, int64_t n);                              \
    float halo_dot_##name(int64_t n, const void *w, const void *act)

HALO_DECLARE_SCALAR(f32);
HALO_DECLARE_SCALAR(f16);
HALO_DECLARE_SCALAR(bf16);
HALO_DECLARE_SCALAR(q4_0);
HALO_DECLARE_SCALAR(q4_1);
HALO_DECLARE_SCALAR(q5_0);
HALO_DECLARE_SCALAR(q5_1);
HALO_DECLARE_SCALAR(q8_0);
HALO_DECLARE_SCALAR(iq4_nl);
HALO_DECLARE_SCALAR(mxfp4);
HALO_DECLARE_SCALAR(q2_K);
HALO_DECLARE_SCALAR(q3_K);
HALO_DECLARE_SCALAR(q4_K);
HALO_DECLARE_SCALAR(q5_K);
HALO_DECLARE_SCALAR(q6_K);
HALO_DECLARE_SCALAR(iq2_xxs);
HALO_DECLARE_SCALAR(iq2_xs);
HALO_DECLARE_SCALAR(iq2_s);
HALO_DECLARE_SCALAR(iq3_xxs);
HALO_DECLARE_SCALAR(iq3_s);
HALO_DECLARE_SCALAR(iq1_s);
HALO_DECLARE_SCALAR(iq1_m);
HALO_DECLARE_SCALAR(iq4_xs);
void halo_dequant_q8_K(const void *src, float *dst, int64_t n);

/* Quantizers (reference algorithms; see quantize.c). */
void halo_quantize_q8_0(const float *x, void *dst, int64_t n);
void halo_quantize_q8_K(const float *x, void *dst, int64_t n);
void halo_quantize_q2_K(const float *x, void *dst, int64_t n);
void halo_quantize_q4_K(const float *x, void *dst, int64_t n);
void halo_quantize_q6_K(const float *x, void *dst, int64_t n);
void halo_quantize_mxfp4(const float *x, void *dst, int64_t n);

/* Whether the AVX-512 VBMI kernels serve (quant.c: the CPU has VBMI, their tables are built). */
bool halo_quant_vbmi(void);

/* How one token meets Q8_0 rows at the AVX-512 level (quant.c picks it per CPU; the variable
 * HALO_Q8_ROW1=row256|row512|tile2 overrides it for A/B benchmarks). All give the same bits. */
typedef enum halo_q8_row1_mode {
    HALO_Q8_ROW256, /* one row at a time, 256-bit operations */
    HALO_Q8_ROW512, /* one row at a time, 512-bit operations */
    HALO_Q8_TILE2,  /* two rows side by side (the 2-row tile), 512-bit */
} halo_q8_row1_mode;
halo_q8_row1_mode halo_quant_q8_row1_mode(void);
/* Bytes ahead of the data being read that the one-token kernels prefetch (0: none): Q8_0
 * rows (HALO_Q8_PREFETCH overrides), and IQ2_XXS and Q2_K rows (HALO_ROW_PREFETCH). 2048 on
 * Intel CPUs, 8192 on AMD family 0x1A (Zen 5), 0 on others (quant.c says why). */
int halo_quant_q8_prefetch(void);
int halo_quant_row_prefetch(void);
/* Benchmarks only (bench/cpu/bench_matvec alternates settings within one process): sets the
 * one-token kernel and the two prefetch distances (bytes, 0 = none) until the next call. */
void halo_quant_set_one_token(halo_q8_row1_mode mode, int q8_prefetch, int row_prefetch);
/* Prefetches the bytes [p, p + n) (whole lines; no fault past a mapping's end). */
static inline void halo_prefetch_span(const void *p, size_t n) {
    for (size_t k = 0; k < n; k += 64)
        __builtin_prefetch((const char *)p + k, 0, 3);
}

/* SIMD kernels: defined only when the compiler targets x86-64. */
#if defined(__x86_64__)
#define HALO_HAVE_X86 1
#define HALO_DECLARE_SIMD(name, isa)                                                               \
    void halo_dequant_##name##_##isa(const void *src, float *dst, int64_t n);                      \
    float halo_dot_##name##_##isa(int64_t n, const void *w, const void *act)
HALO_DECLARE_SIMD(f32, avx2);
HALO_DECLARE_SIMD(f16, avx2);
HALO_DECLARE_SIMD(bf16, avx2);
HALO_DECLARE_SIMD(q4_0, avx2);
HALO_DECLARE_SIMD(q8_0, avx2);
HALO_DECLARE_SIMD(iq4_nl, avx2);
HALO_DECLARE_SIMD(mxfp4, avx2);
HALO_DECLARE_SIMD(q2_K, avx2);
HALO_DECLARE_SIMD(q4_K, avx2);
HALO_DECLARE_SIMD(q6_K, avx2);
HALO_DECLARE_SIMD(iq2_xxs, avx2);
void halo_dequant_q3_K_avx2(const void *src, float *dst, int64_t n);
void halo_dequant_q5_K_avx2(const void *src, float *dst, int64_t n);
/* simd_avx2_more.c: dots (the i-quant dequantizers stay scalar, as fast as ggml's) */
float halo_dot_q4_1_avx2(int64_t n, const void *w, const void *act);
float halo_dot_q5_0_avx2(int64_t n, const void *w, const void *act);
float halo_dot_q5_1_avx2(int64_t n, const void *w, const void *act);
float halo_dot_q3_K_avx2(int64_t n, const void *w, const void *act);
float halo_dot_q5_K_avx2(int64_t n, const void *w, const void *act);
float halo_dot_iq4_xs_avx2(int64_t n, const void *w, const void *act);
float halo_dot_iq2_xs_avx2(int64_t n, const void *w, const void *act);
float halo_dot_iq2_s_avx2(int64_t n, const void *w, const void *act);
float halo_dot_iq3_xxs_avx2(int64_t n, const void *w, const void *act);
float halo_dot_iq3_s_avx2(int64_t n, const void *w, const void *act);
float halo_dot_iq1_s_avx2(int64_t n, const void *w, const void *act);
float halo_dot_iq1_m_avx2(int64_t n, const void *w, const void *act);
float halo_dot_q8_0_avx512(int64_t n, const void *w, const void *act);
float halo_dot_q4_0_avx512(int64_t n, const void *w, const void *act);
float halo_dot_iq4_nl_avx512(int64_t n, const void *w, const void *act);
float halo_dot_mxfp4_avx512(int64_t n, const void *w, const void *act);
float halo_dot_q2_K_avx512(int64_t n, const void *w, const void *act);
float halo_dot_q4_K_avx512(int64_t n, const void *w, const void *act);
float halo_dot_q6_K_avx512(int64_t n, const void *w, const void *act);
float halo_dot_f32_avx512(int64_t n, const void *w, const void *act);
float halo_dot_f16_avx512(int64_t n, const void *w, const void *act);
float halo_dot_bf16_avx512(int64_t n, const void *w, const void *act);
/* gemm_avx512.c: tiled products (gemm.h), bit-identical to the level's dot per pair */
#define HALO_DECLARE_GEMM(name)                                                                    \
    void halo_gemm_##name##_avx512(int64_t n, const void *w, size_t w_stride, int64_t nr,          \
                                   const void *const *act, int nt, float *const *y)
HALO_DECLARE_GEMM(q8_0);
HALO_DECLARE_GEMM(q2_K);
HALO_DECLARE_GEMM(iq2_xxs);
HALO_DECLARE_GEMM(q4_K);
HALO_DECLARE_GEMM(mxfp4);
HALO_DECLARE_GEMM(f16);
/* gemm_iq2_vbmi.c: IQ2_XXS with AVX-512 VBMI (init builds its code table; false: unusable) */
bool halo_iq2_xxs_vbmi_init(void);
void halo_gemm_iq2_xxs_vbmi(int64_t n, const void *w, size_t w_stride, int64_t nr,
                            const void *const *act, int nt, float *const *y);
/* quantize_avx512.c: bit-identical to halo_quantize_q8_0 / _q8_K (finite inputs) */
void halo_quantize_q8_0_avx512(const float *x, void *dst, int64_t n);
void halo_quantize_q8_K_avx512(const float *x, void *dst, int64_t n);
int halo_all_finite_avx512(const float *x, int64_t n);
/* f32rows_avx512.c (f32rows.h) */
void halo_f32_dots_avx512(int64_t n, const float *q, const float *const *rows, int64_t nr,
                          float *out);
void halo_f32_axpys_avx512(int64_t n, float *y, const float *const *rows, const float *w,
                           int64_t nr);
#endif

#endif
