/* The public quant API: one dispatch table mapping (type, level) to kernels, CPU feature
 * detection, quantize entry points and tensor validation. */
#include "halo/quant.h"

#include "core/error.h"
#include "quant/blocks.h"
#include "quant/fp.h"
#include "quant/kernels.h"

#include <math.h>
#include <pthread.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#include <stdlib.h>
#include <string.h>

typedef struct kernel_set {
    int act; /* activation type id; 0 with no dequant = none */
    halo_dequant_fn dequant[HALO_QUANT_LEVEL_COUNT];
    halo_dot_fn dot[HALO_QUANT_LEVEL_COUNT];
} kernel_set;

#define SCALAR(name, act_type)                                                                     \
    {                                                                                              \
        act_type, {halo_dequant_##name}, {                                                         \
            halo_dot_##name                                                                        \
        }                                                                                          \
    }
#ifdef HALO_HAVE_X86
#define AVX2(name, act_type)                                                                       \
    {                                                                                              \
        act_type, {halo_dequant_##name, halo_dequant_##name##_avx2}, {                             \
            halo_dot_##name, halo_dot_##name##_avx2                                                \
        }                                                                                          \
    }
#define AVX2_DOT(name, act_type)                                                                   \
    {                                                                                              \
        act_type, {halo_dequant_##name}, {                                                         \
            halo_dot_##name, halo_dot_##name##_avx2                                                \
        }                                                                                          \
    }
#else
#define AVX2(name, act_type) SCALAR(name, act_type)
#define AVX2_DOT(name, act_type) SCALAR(name, act_type)
#endif

/* A NULL entry at a level falls back to the next lower level that has one. */
static kernel_set kernels[HALO_TYPE_ID_LIMIT] = {
    [HALO_TYPE_F32] = AVX2(f32, HALO_TYPE_F32),
    [HALO_TYPE_F16] = AVX2(f16, HALO_TYPE_F32),
    [HALO_TYPE_BF16] = AVX2(bf16, HALO_TYPE_F32),
    [HALO_TYPE_Q4_0] = AVX2(q4_0, HALO_TYPE_Q8_0),
    [HALO_TYPE_Q4_1] = AVX2_DOT(q4_1, HALO_TYPE_Q8_0),
    [HALO_TYPE_Q5_0] = AVX2_DOT(q5_0, HALO_TYPE_Q8_0),
    [HALO_TYPE_Q5_1] = AVX2_DOT(q5_1, HALO_TYPE_Q8_0),
    [HALO_TYPE_Q8_0] = AVX2(q8_0, HALO_TYPE_Q8_0),
    [HALO_TYPE_IQ4_NL] = AVX2(iq4_nl, HALO_TYPE_Q8_0),
    [HALO_TYPE_MXFP4] = AVX2(mxfp4, HALO_TYPE_Q8_0),
    [HALO_TYPE_Q2_K] = AVX2(q2_K, HALO_TYPE_Q8_K),
    [HALO_TYPE_Q3_K] = AVX2(q3_K, HALO_TYPE_Q8_K),
    [HALO_TYPE_Q4_K] = AVX2(q4_K, HALO_TYPE_Q8_K),
    [HALO_TYPE_Q5_K] = AVX2(q5_K, HALO_TYPE_Q8_K),
    [HALO_TYPE_Q6_K] = AVX2(q6_K, HALO_TYPE_Q8_K),
    [HALO_TYPE_IQ2_XXS] = AVX2(iq2_xxs, HALO_TYPE_Q8_K),
    [HALO_TYPE_IQ2_XS] = AVX2_DOT(iq2_xs, HALO_TYPE_Q8_K),
    [HALO_TYPE_IQ2_S] = AVX2_DOT(iq2_s, HALO_TYPE_Q8_K),
    [HALO_TYPE_IQ3_XXS] = AVX2_DOT(iq3_xxs, HALO_TYPE_Q8_K),
    [HALO_TYPE_IQ3_S] = AVX2_DOT(iq3_s, HALO_TYPE_Q8_K),
    [HALO_TYPE_IQ1_S] = AVX2_DOT(iq1_s, HALO_TYPE_Q8_K),
    [HALO_TYPE_IQ1_M] = AVX2_DOT(iq1_m, HALO_TYPE_Q8_K),
    [HALO_TYPE_IQ4_XS] = AVX2_DOT(iq4_xs, HALO_TYPE_Q8_K),
};

static void add_avx512_kernels(void) {
#ifdef HALO_HAVE_X86
    kernels[HALO_TYPE_Q8_0].dot[HALO_QUANT_AVX512] = halo_dot_q8_0_avx512;
    kernels[HALO_TYPE_Q4_0].dot[HALO_QUANT_AVX512] = halo_dot_q4_0_avx512;
    kernels[HALO_TYPE_IQ4_NL].dot[HALO_QUANT_AVX512] = halo_dot_iq4_nl_avx512;
    kernels[HALO_TYPE_MXFP4].dot[HALO_QUANT_AVX512] = halo_dot_mxfp4_avx512;
    kernels[HALO_TYPE_Q2_K].dot[HALO_QUANT_AVX512] = halo_dot_q2_K_avx512;
    kernels[HALO_TYPE_Q4_K].dot[HALO_QUANT_AVX512] = halo_dot_q4_K_avx512;
    kernels[HALO_TYPE_Q6_K].dot[HALO_QUANT_AVX512] = halo_dot_q6_K_avx512;
    kernels[HALO_TYPE_F32].dot[HALO_QUANT_AVX512] = halo_dot_f32_avx512;
    kernels[HALO_TYPE_F16].dot[HALO_QUANT_AVX512] = halo_dot_f16_avx512;
    kernels[HALO_TYPE_BF16].dot[HALO_QUANT_AVX512] = halo_dot_bf16_avx512;
    /* IQ2_XXS stays on AVX2: its cost is the codebook loads, which 512-bit registers (tried:
     * inserts, gathers) do not make cheaper; measured 0.97x of the AVX2 kernel. */
#endif
}

#ifdef HALO_HAVE_X86
/* F16C from CPUID leaf 1, ECX bit 29: clang 14's __builtin_cpu_supports does not know "f16c". */
static bool has_f16c(void) {
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29));
}
#endif

static halo_quant_level detect_level(void) {
#ifdef HALO_HAVE_X86
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma") || !has_f16c())
        return HALO_QUANT_SCALAR;
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni") &&
        __builtin_cpu_supports("bmi2")) /* every AVX-512 CPU has it; gemm_avx512.c uses it */
        return HALO_QUANT_AVX512;
    return HALO_QUANT_AVX2;
#else
    return HALO_QUANT_SCALAR;
#endif
}

static halo_quant_level best_level = HALO_QUANT_SCALAR;
static pthread_once_t level_once = PTHREAD_ONCE_INIT;

static bool vbmi_kernels;
static halo_q8_row1_mode q8_row1 = HALO_Q8_ROW256;
static int q8_prefetch, row_prefetch;

/* Bytes ahead to prefetch: the variable's value (a multiple of 64, 0 = none), else dflt. */
static int prefetch_env(const char *name, int dflt) {
    const char *v = getenv(name);
    if (!v || !*v) return dflt;
    int n = atoi(v);
    return n < 0 ? 0 : n / 64 * 64;
}

#ifdef HALO_HAVE_X86
/* The CPU's display family (base family, plus the extended family when the base is 15): 0x19
 * for AMD Zen 3/4, 0x1A for Zen 5. */
static unsigned cpu_family(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    unsigned base = (a >> 8) & 0xf;
    return base == 0xf ? base + ((a >> 20) & 0xff) : base;
}
#endif

/* The one-token kernels' choices. A thread streaming Q8_0 rows through the one-token kernel
 * keeps fewer lines in flight than a plain read of the same bytes (more instructions a line),
 * and the hardware prefetchers alone do not make up for it. On the H200 machine's 16-core Xeon
 * (Emerald Rapids class, bench/cpu/RESULTS.md 2026-12-01 04:53) the head's product read at
 * 0.81 of a plain read without software prefetch and at 1.03 with lines requested 2-4 KiB
 * ahead (tg32 at 16 threads +8-13 %). On the 2-core AMD VM (family 0x1A, Zen 5; RESULTS.md
 * 2026-12-01 evening) 2 KiB ahead barely helps and 8 KiB ahead brings one thread from 0.78 to
 * 0.99 of a plain read (decode in one process alternating the settings: 12.4-14.1 -> 15.6-17.7
 * tokens/s on a busy machine, 24-27 -> 30 quiet), and IQ2_XXS/Q2_K rows 8 KiB ahead add ~3 %
 * (28.5 -> 29.4 tokens/s, 4 of 4 cycles); 12 and 16 KiB were no better. Other AMD families
 * were not measured with this kernel (an earlier VM lost with 0.25-8 KiB ahead), so they do
 * without. */
static void init_row1(void) {
    const char *m = getenv("HALO_Q8_ROW1");
    if (m && !strcmp(m, "row512"))
        q8_row1 = HALO_Q8_ROW512;
    else if (m && !strcmp(m, "tile2"))
        q8_row1 = HALO_Q8_TILE2;
    int dflt = 0, dflt_row = 0;
#ifdef HALO_HAVE_X86
    if (__builtin_cpu_is("intel")) {
        dflt = dflt_row = 2048;
    } else if (__builtin_cpu_is("amd") && cpu_family() >= 0x1a) {
        dflt = dflt_row = 8192;
    }
#endif
    q8_prefetch = prefetch_env("HALO_Q8_PREFETCH", dflt);
    row_prefetch = prefetch_env("HALO_ROW_PREFETCH", dflt_row);
}

static void init_level(void) {
    add_avx512_kernels();
    best_level = detect_level();
#ifdef HALO_HAVE_X86
    /* HALO_QUANT_NO_VBMI=1 keeps the plain AVX-512 kernels (A/B benchmarks). */
    const char *off = getenv("HALO_QUANT_NO_VBMI");
    vbmi_kernels = best_level == HALO_QUANT_AVX512 && __builtin_cpu_supports("avx512vbmi") &&
                   !(off && *off && *off != '0') && halo_iq2_xxs_vbmi_init();
#endif
    init_row1();
}

halo_q8_row1_mode halo_quant_q8_row1_mode(void) {
    pthread_once(&level_once, init_level);
    return q8_row1;
}

int halo_quant_q8_prefetch(void) {
    pthread_once(&level_once, init_level);
    return q8_prefetch;
}

int halo_quant_row_prefetch(void) {
    pthread_once(&level_once, init_level);
    return row_prefetch;
}

void halo_quant_set_one_token(halo_q8_row1_mode mode, int q8, int row) {
    pthread_once(&level_once, init_level);
    q8_row1 = mode;
    q8_prefetch = q8 < 0 ? 0 : q8 / 64 * 64;
    row_prefetch = row < 0 ? 0 : row / 64 * 64;
}

bool halo_quant_vbmi(void) {
    pthread_once(&level_once, init_level);
    return vbmi_kernels;
}

halo_quant_level halo_quant_level_best(void) {
    pthread_once(&level_once, init_level);
    return best_level;
}

const char *halo_quant_level_name(halo_quant_level level) {
    switch (level) {
    case HALO_QUANT_SCALAR:
        return "scalar";
    case HALO_QUANT_AVX2:
        return "avx2";
    case HALO_QUANT_AVX512:
        return "avx512";
    default:
        return "unknown";
    }
}

static const kernel_set *kernels_for(uint32_t type) {
    if (type >= HALO_TYPE_ID_LIMIT || kernels[type].dequant[0] == NULL) return NULL;
    return &kernels[type];
}

bool halo_quant_supported(uint32_t type) {
    return kernels_for(type) != NULL;
}

int halo_quant_act_type(uint32_t type) {
    const kernel_set *k = kernels_for(type);
    return k ? k->act : -1;
}

/* Clamps a requested level to what the CPU runs; callers then walk down to the nearest level
 * that has a kernel. */
static int clamp_level(halo_quant_level level) {
    halo_quant_level best = halo_quant_level_best();
    return (int)(level > best ? best : level < 0 ? 0 : level);
}

void halo_quant_dequantize_row_at(halo_quant_level level, uint32_t type, const void *src,
                                  float *dst, int64_t n) {
    const kernel_set *k = kernels_for(type);
    if (!k) return;
    int l = clamp_level(level);
    while (l > 0 && k->dequant[l] == NULL)
        l--;
    k->dequant[l](src, dst, n);
}

void halo_quant_dequantize_row(uint32_t type, const void *src, float *dst, int64_t n) {
    halo_quant_dequantize_row_at(halo_quant_level_best(), type, src, dst, n);
}

float halo_quant_vec_dot_at(halo_quant_level level, uint32_t type, int64_t n, const void *qrow,
                            const void *act) {
    const kernel_set *k = kernels_for(type);
    if (!k) return NAN;
    int l = clamp_level(level);
    while (l > 0 && k->dot[l] == NULL)
        l--;
    return k->dot[l](n, qrow, act);
}

float halo_quant_vec_dot(uint32_t type, int64_t n, const void *qrow, const void *act) {
    return halo_quant_vec_dot_at(halo_quant_level_best(), type, n, qrow, act);
}

bool halo_quant_can_quantize(uint32_t type) {
    switch (type) {
    case HALO_TYPE_F32:
    case HALO_TYPE_F16:
    case HALO_TYPE_BF16:
    case HALO_TYPE_Q8_0:
    case HALO_TYPE_Q8_K:
    case HALO_TYPE_Q2_K:
    case HALO_TYPE_Q4_K:
    case HALO_TYPE_Q6_K:
    case HALO_TYPE_MXFP4:
        return true;
    default:
        return false;
    }
}

/* The activation quantizers at the AVX-512 level (quantize_avx512.c, bit-identical to the
 * scalar ones: a decode step quantizes each matmul's input on one thread). */
#ifdef HALO_HAVE_X86
#define quantize_q8_0_best halo_quantize_q8_0_avx512
#define quantize_q8_K_best halo_quantize_q8_K_avx512
static bool all_finite(const float *x, int64_t n) {
    return halo_all_finite_avx512(x, n);
}
#else
#define quantize_q8_0_best halo_quantize_q8_0
#define quantize_q8_K_best halo_quantize_q8_K
static bool all_finite(const float *x, int64_t n) {
    (void)x, (void)n;
    return false;
}
#endif

halo_status halo_quant_quantize_row(uint32_t type, const float *src, void *dst, int64_t n,
                                    halo_error *err) {
    const halo_type_info *info = halo_type_info_get(type);
    if (!halo_quant_can_quantize(type))
        return halo_fail(err, HALO_E_UNSUPPORTED, "quantize: halo does not write type %s",
                         halo_type_name(type));
    if (n < 0 || n % info->block_size != 0)
        return halo_fail(err, HALO_E_INVALID_ARG,
                         "quantize %s: %lld elements is not a multiple of the block size %u",
                         info->name, (long long)n, info->block_size);
    bool avx512 = false;
#ifdef HALO_HAVE_X86
    avx512 = halo_quant_level_best() == HALO_QUANT_AVX512;
#endif
    if (type != HALO_TYPE_F32 && type != HALO_TYPE_F16 && type != HALO_TYPE_BF16 &&
        !(avx512 && all_finite(src, n)))
        for (int64_t i = 0; i < n; i++)
            if (!isfinite(src[i])) /* would poison a whole block's scale */
                return halo_fail(err, HALO_E_BAD_VALUE, "quantize %s: element %lld is %s",
                                 info->name, (long long)i, isnan(src[i]) ? "NaN" : "infinite");
    switch (type) {
    case HALO_TYPE_F32:
        memcpy(dst, src, (size_t)n * 4);
        break;
    case HALO_TYPE_F16:
        for (int64_t i = 0; i < n; i++)
            ((uint16_t *)dst)[i] = halo_f32_to_f16(src[i]);
        break;
    case HALO_TYPE_BF16:
        for (int64_t i = 0; i < n; i++)
            ((uint16_t *)dst)[i] = halo_f32_to_bf16(src[i]);
        break;
    case HALO_TYPE_Q8_0:
        (avx512 ? quantize_q8_0_best : halo_quantize_q8_0)(src, dst, n);
        break;
    case HALO_TYPE_Q8_K:
        (avx512 ? quantize_q8_K_best : halo_quantize_q8_K)(src, dst, n);
        break;
    case HALO_TYPE_Q2_K:
        halo_quantize_q2_K(src, dst, n);
        break;
    case HALO_TYPE_Q4_K:
        halo_quantize_q4_K(src, dst, n);
        break;
    case HALO_TYPE_Q6_K:
        halo_quantize_q6_K(src, dst, n);
        break;
    case HALO_TYPE_MXFP4:
        halo_quantize_mxfp4(src, dst, n);
        break;
    }
    return HALO_OK;
}

halo_status halo_quant_mxfp4_from_e2m1(const uint8_t *codes, const uint8_t *scales, void *dst,
                                       int64_t n, halo_error *err) {
    if (n < 0 || n % QK32 != 0)
        return halo_fail(err, HALO_E_INVALID_ARG,
                         "mxfp4 repack: %lld elements is not a multiple of 32", (long long)n);
    block_mxfp4 *y = dst;
    for (int64_t i = 0; i < n / QK32; i++) {
        const uint8_t *c = codes + 16 * i;
        y[i].e = scales[i];
        /* Source element 2k / 2k+1 sit in byte k's low / high nibble; ggml's byte j holds
         * elements j (low) and j + 16 (high). */
        for (int j = 0; j < 16; j++) {
            uint8_t lo = (c[j / 2] >> (4 * (j % 2))) & 0xf;
            uint8_t hi = (c[(j + 16) / 2] >> (4 * (j % 2))) & 0xf;
            y[i].qs[j] = (uint8_t)(lo | (hi << 4));
        }
    }
    return HALO_OK;
}

/* Where a block keeps its scales: up to two fields, each an f16, an f32 or an e8m0 byte. */
typedef enum { SCALE_NONE, SCALE_F16, SCALE_F32, SCALE_E8M0, SCALE_IQ1M } scale_kind;
typedef struct scale_field {
    scale_kind kind;
    uint32_t offset;
} scale_field;

static void scale_fields(uint32_t type, scale_field f[2]) {
    f[0] = f[1] = (scale_field){SCALE_NONE, 0};
    switch (type) {
    case HALO_TYPE_Q4_0:
    case HALO_TYPE_Q5_0:
    case HALO_TYPE_Q8_0:
    case HALO_TYPE_IQ4_NL:
    case HALO_TYPE_IQ2_XXS:
    case HALO_TYPE_IQ2_XS:
    case HALO_TYPE_IQ2_S:
    case HALO_TYPE_IQ3_XXS:
    case HALO_TYPE_IQ3_S:
    case HALO_TYPE_IQ1_S:
    case HALO_TYPE_IQ4_XS:
        f[0] = (scale_field){SCALE_F16, 0};
        break;
    case HALO_TYPE_Q4_1:
    case HALO_TYPE_Q5_1:
    case HALO_TYPE_Q8_1:
    case HALO_TYPE_Q4_K:
    case HALO_TYPE_Q5_K:
        f[0] = (scale_field){SCALE_F16, 0};
        f[1] = (scale_field){SCALE_F16, 2};
        break;
    case HALO_TYPE_Q2_K:
        f[0] = (scale_field){SCALE_F16, offsetof(block_q2_K, d)};
        f[1] = (scale_field){SCALE_F16, offsetof(block_q2_K, dmin)};
        break;
    case HALO_TYPE_Q3_K:
        f[0] = (scale_field){SCALE_F16, offsetof(block_q3_K, d)};
        break;
    case HALO_TYPE_Q6_K:
        f[0] = (scale_field){SCALE_F16, offsetof(block_q6_K, d)};
        break;
    case HALO_TYPE_Q8_K:
        f[0] = (scale_field){SCALE_F32, 0};
        break;
    case HALO_TYPE_MXFP4:
        f[0] = (scale_field){SCALE_E8M0, 0};
        break;
    case HALO_TYPE_IQ1_M:
        f[0] = (scale_field){SCALE_IQ1M, offsetof(block_iq1_m, scales)};
        break;
    default:
        break;
    }
}

static bool scale_finite(const uint8_t *p, scale_kind kind) {
    uint16_t h;
    float f;
    switch (kind) {
    case SCALE_F16:
        memcpy(&h, p, 2);
        return (h & 0x7c00) != 0x7c00;
    case SCALE_F32:
        memcpy(&f, p, 4);
        return isfinite(f);
    case SCALE_E8M0:
        return *p != 0xff; /* the OCP MX NaN encoding */
    case SCALE_IQ1M: {
        uint16_t sc[4];
        memcpy(sc, p, 8);
        h = (uint16_t)((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) |
                       (sc[3] & 0xf000));
        return (h & 0x7c00) != 0x7c00;
    }
    default:
        return true;
    }
}

static bool element_finite(uint32_t type, const uint8_t *p) {
    uint16_t h;
    switch (type) {
    case HALO_TYPE_F32: {
        float f;
        memcpy(&f, p, 4);
        return isfinite(f);
    }
    case HALO_TYPE_F64: {
        double d;
        memcpy(&d, p, 8);
        return isfinite(d);
    }
    case HALO_TYPE_F16:
        memcpy(&h, p, 2);
        return (h & 0x7c00) != 0x7c00;
    case HALO_TYPE_BF16:
        memcpy(&h, p, 2);
        return (h & 0x7f80) != 0x7f80;
    default:
        return true;
    }
}

halo_status halo_quant_validate(uint32_t type, const void *data, size_t n_bytes, halo_error *err) {
    const halo_type_info *info = halo_type_info_get(type);
    if (!info) return halo_fail(err, HALO_E_UNKNOWN_TYPE, "unknown tensor type %u", type);
    if (n_bytes % info->block_bytes != 0)
        return halo_fail(err, HALO_E_BAD_VALUE,
                         "%s data of %zu bytes is not a whole number of %u-byte blocks", info->name,
                         n_bytes, info->block_bytes);
    const uint8_t *p = data;
    size_t n_blocks = n_bytes / info->block_bytes;
    if (!info->quantized) {
        for (size_t i = 0; i < n_blocks; i++, p += info->block_bytes)
            if (!element_finite(type, p))
                return halo_fail(err, HALO_E_BAD_VALUE, "%s element %zu is NaN or infinite",
                                 info->name, i);
        return HALO_OK;
    }
    scale_field f[2];
    scale_fields(type, f);
    for (size_t i = 0; i < n_blocks; i++, p += info->block_bytes)
        for (int k = 0; k < 2; k++)
            if (f[k].kind != SCALE_NONE && !scale_finite(p + f[k].offset, f[k].kind))
                return halo_fail(err, HALO_E_BAD_VALUE,
                                 "%s block %zu (elements %zu..%zu): %s scale is NaN or infinite",
                                 info->name, i, i * info->block_size,
                                 (i + 1) * info->block_size - 1, k == 0 ? "block" : "min");
    return HALO_OK;
}
