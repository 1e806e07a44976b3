/* bench_quant: dequantize and dot-product throughput per block format, halo against ggml's own
 * CPU kernels (llama.cpp v0.5.0 from scripts/fetch-ggml.sh) on the same data, same thread.
 * Throughput counts weight bytes (what decode is bound by). Prints a Markdown table.
 *
 * usage: bench_quant [working-set-MiB] [type ...]      (default 1 MiB: cache-resident, so the
 *        kernels' compute cost shows; 64 MiB or more measures the memory-bound regime) */
#include "../bench_util.h"
#include "ggml_lib.h"
#include "halo/quant.h"
#include "halo/types.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    return bench_seconds(CLOCK_THREAD_CPUTIME_ID); /* CPU time: robust to a loaded machine */
}
static uint64_t next(void) {
    return bench_rand();
}
static float gauss(void) {
    double u = ((double)(next() >> 11) + 0.5) * 0x1p-53, v = (double)(next() >> 11) * 0x1p-53;
    return (float)(sqrt(-2 * log(u)) * cos(6.283185307179586 * v));
}

/* Random bits with every f16 scale-like field made a sane magnitude: good enough for timing
 * (kernel speed does not depend on values), without NaN slow paths. */
static void fill(uint32_t t, uint8_t *p, size_t bytes) {
    for (size_t i = 0; i < bytes; i++)
        p[i] = (uint8_t)next();
    const halo_type_info *info = halo_type_info_get(t);
    if (!info->quantized) {
        size_t n = bytes / info->block_bytes;
        for (size_t i = 0; i < n; i++) {
            float f = gauss() * 0.02f;
            uint32_t u;
            memcpy(&u, &f, 4);
            if (t == HALO_TYPE_F32)
                memcpy(p + 4 * i, &f, 4);
            else if (t == HALO_TYPE_BF16) {
                uint16_t h = (uint16_t)(u >> 16);
                memcpy(p + 2 * i, &h, 2);
            } else {
                uint16_t h = (uint16_t)(0x2000 | (next() & 0x83ff));
                memcpy(p + 2 * i, &h, 2);
            }
        }
        return;
    }
    for (size_t off = 0; off < bytes; off += info->block_bytes) {
        uint8_t *b = p + off;
        uint16_t d = (uint16_t)(0x1c00 | (next() & 0x3ff));
        switch (t) {
        case HALO_TYPE_MXFP4:
            b[0] = (uint8_t)(118 + next() % 8);
            break;
        case HALO_TYPE_Q2_K:
            memcpy(b + 80, &d, 2);
            memcpy(b + 82, &d, 2);
            break;
        case HALO_TYPE_Q3_K:
            memcpy(b + 108, &d, 2);
            break;
        case HALO_TYPE_Q6_K:
            memcpy(b + 208, &d, 2);
            break;
        case HALO_TYPE_IQ1_M:
            break; /* scale spread over nibbles; random is fine for timing */
        case HALO_TYPE_Q4_1:
        case HALO_TYPE_Q5_1:
        case HALO_TYPE_Q4_K:
        case HALO_TYPE_Q5_K:
            memcpy(b + 2, &d, 2); /* fall through */
        default:
            memcpy(b, &d, 2);
            break;
        }
    }
}

typedef struct ctx {
    uint32_t t;
    const ggml_lib *g;
    int64_t n, rows;
    size_t row_bytes;
    uint8_t *w;
    float *out;
    void *act_halo, *act_ggml;
    volatile float sink;
} ctx;

typedef void (*bench_fn)(ctx *c);

static void deq_halo(ctx *c) {
    for (int64_t r = 0; r < c->rows; r++)
        halo_quant_dequantize_row(c->t, c->w + (size_t)r * c->row_bytes, c->out, c->n);
}
static void deq_ggml(ctx *c) {
    ggml_to_float_fn f = c->g->get_type_traits((int)c->t)->to_float;
    for (int64_t r = 0; r < c->rows; r++)
        f(c->w + (size_t)r * c->row_bytes, c->out, c->n);
}
static void dot_halo(ctx *c) {
    float s = 0;
    for (int64_t r = 0; r < c->rows; r++)
        s += halo_quant_vec_dot(c->t, c->n, c->w + (size_t)r * c->row_bytes, c->act_halo);
    c->sink = s;
}
static void dot_ggml(ctx *c) {
    ggml_vec_dot_fn f = c->g->get_type_traits_cpu((int)c->t)->vec_dot;
    float s = 0, v;
    for (int64_t r = 0; r < c->rows; r++) {
        f((int)c->n, &v, 0, c->w + (size_t)r * c->row_bytes, 0, c->act_ggml, 0, 1);
        s += v;
    }
    c->sink = s;
}

/* GB/s of weight bytes for one run of at least 40 ms. */
static double run_once(ctx *c, bench_fn f) {
    int iters = 0;
    double t0 = now(), t;
    do {
        f(c);
        iters++;
    } while ((t = now() - t0) < 0.04);
    return (double)iters * (double)c->rows * (double)c->row_bytes / t / 1e9;
}

/* Best of 7 runs each, halo and ggml interleaved so that load from other processes on the
 * machine hits both sides alike. */
static void measure_pair(ctx *c, bench_fn fh, bench_fn fg, double *gh, double *gg) {
    *gh = *gg = 0;
    fh(c);
    if (fg) fg(c);
    for (int rep = 0; rep < 7; rep++) {
        double h = run_once(c, fh), g = fg ? run_once(c, fg) : NAN;
        if (h > *gh) *gh = h;
        if (fg && g > *gg) *gg = g;
    }
    if (!fg) *gg = NAN;
}

static const uint32_t default_types[] = {
    HALO_TYPE_Q8_0,  HALO_TYPE_Q2_K,   HALO_TYPE_Q4_K,   HALO_TYPE_IQ2_XXS, HALO_TYPE_MXFP4,
    HALO_TYPE_Q6_K,  HALO_TYPE_Q4_0,   HALO_TYPE_IQ4_NL, HALO_TYPE_F16,     HALO_TYPE_BF16,
    HALO_TYPE_F32,   HALO_TYPE_Q4_1,   HALO_TYPE_Q5_0,   HALO_TYPE_Q5_1,    HALO_TYPE_Q3_K,
    HALO_TYPE_Q5_K,  HALO_TYPE_IQ2_XS, HALO_TYPE_IQ2_S,  HALO_TYPE_IQ3_XXS, HALO_TYPE_IQ3_S,
    HALO_TYPE_IQ1_S, HALO_TYPE_IQ1_M,  HALO_TYPE_IQ4_XS,
};

int main(int argc, char **argv) {
    ggml_lib g;
    if (!ggml_lib_open(&g, true)) return 1;
    double mib = argc > 1 ? atof(argv[1]) : 1.0;
    const uint32_t *types = default_types;
    size_t n_types = sizeof default_types / sizeof default_types[0];
    uint32_t picked[64];
    if (argc > 2) {
        n_types = 0;
        for (int i = 2; i < argc && n_types < 64; i++) {
            int t = halo_type_from_name(argv[i]);
            if (t < 0) {
                fprintf(stderr, "unknown type %s\n", argv[i]);
                return 1;
            }
            picked[n_types++] = (uint32_t)t;
        }
        types = picked;
    }
    printf("halo level %s, ggml CPU variant %s, working set %.1f MiB, rows of 4096, 1 thread\n\n",
           halo_quant_level_name(halo_quant_level_best()), g.cpu_variant, mib);
    printf("| type | dequant halo GB/s | dequant ggml GB/s | ratio | dot halo GB/s | dot ggml GB/s "
           "| ratio |\n");
    printf("|---|---:|---:|---:|---:|---:|---:|\n");
    for (size_t k = 0; k < n_types; k++) {
        ctx c = {.t = types[k], .g = &g, .n = 4096};
        const halo_type_info *info = halo_type_info_get(c.t);
        uint64_t rb;
        halo_type_bytes(c.t, (uint64_t)c.n, &rb);
        c.row_bytes = rb;
        c.rows = (int64_t)(mib * 1048576.0 / (double)rb);
        if (c.rows < 1) c.rows = 1;
        c.w = malloc(c.row_bytes * (size_t)c.rows);
        fill(c.t, c.w, c.row_bytes * (size_t)c.rows);
        c.out = malloc((size_t)c.n * 4);
        float *x = malloc((size_t)c.n * 4);
        for (int64_t i = 0; i < c.n; i++)
            x[i] = gauss();
        c.act_halo = malloc((size_t)c.n * 4 + 1024);
        c.act_ggml = malloc((size_t)c.n * 4 + 1024);
        halo_error err;
        halo_quant_quantize_row((uint32_t)halo_quant_act_type(c.t), x, c.act_halo, c.n, &err);
        const struct ggml_type_traits_cpu *ct = g.get_type_traits_cpu((int)c.t);
        const struct ggml_type_traits_cpu *at = g.get_type_traits_cpu(ct->vec_dot_type);
        if (ct->vec_dot_type == HALO_TYPE_F32)
            memcpy(c.act_ggml, x, (size_t)c.n * 4);
        else
            at->from_float(x, c.act_ggml, c.n);
        double dh, dg, vh, vg;
        measure_pair(&c, deq_halo, g.get_type_traits((int)c.t)->to_float ? deq_ggml : NULL, &dh,
                     &dg);
        measure_pair(&c, dot_halo, dot_ggml, &vh, &vg);
        printf("| %s | %.1f | %.1f | %.2f | %.1f | %.1f | %.2f |\n", info->name, dh, dg, dh / dg,
               vh, vg, vh / vg);
        fflush(stdout);
        free(c.w);
        free(c.out);
        free(x);
        free(c.act_halo);
        free(c.act_ggml);
    }
    ggml_lib_close(&g);
    return 0;
}
