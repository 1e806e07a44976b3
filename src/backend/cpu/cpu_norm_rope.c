/* RMS norm and DeepSeek V4's rotary embedding on the CPU. */
#include <math.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "backend/cpu/cpu.h"

/* Sum of squares in double in eight running sums s[0..7] (element i goes to s[i % 8]),
 * combined ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7)), then the tail in order: one
 * chain of dependent additions took ~27 us of a single thread for the hyper-connections'
 * 16,384-wide rows, a serial step of every decode layer (bench/cpu/RESULTS.md, 2026-12-01
 * 04:53). Each square is exact in double. SSE2 (every x86-64) holds s[2j], s[2j + 1] in one
 * register: the same sums in the same order as the portable loop. */
static double sum_squares(const float *x, int64_t n) {
    int64_t i = 0;
    double ss;
#if defined(__SSE2__)
    __m128d a0 = _mm_setzero_pd(), a1 = a0, a2 = a0, a3 = a0; /* named: kept in registers */
    for (; i + 8 <= n; i += 8) {
        __m128 lo = _mm_loadu_ps(x + i), hi = _mm_loadu_ps(x + i + 4);
        __m128d d0 = _mm_cvtps_pd(lo), d1 = _mm_cvtps_pd(_mm_movehl_ps(lo, lo));
        __m128d d2 = _mm_cvtps_pd(hi), d3 = _mm_cvtps_pd(_mm_movehl_ps(hi, hi));
        a0 = _mm_add_pd(a0, _mm_mul_pd(d0, d0));
        a1 = _mm_add_pd(a1, _mm_mul_pd(d1, d1));
        a2 = _mm_add_pd(a2, _mm_mul_pd(d2, d2));
        a3 = _mm_add_pd(a3, _mm_mul_pd(d3, d3));
    }
    double s[8];
    _mm_storeu_pd(s, a0);
    _mm_storeu_pd(s + 2, a1);
    _mm_storeu_pd(s + 4, a2);
    _mm_storeu_pd(s + 6, a3);
#else
    double s[8] = {0};
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++)
            s[k] += (double)x[i + k] * x[i + k];
#endif
    ss = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
    for (; i < n; i++)
        ss += (double)x[i] * x[i];
    return ss;
}

void cpu_rms_norm_row(float *x, int64_t n, const float *weight, float eps) {
    float r = 1.0f / sqrtf((float)(sum_squares(x, n) / (double)n) + eps);
    int64_t i = 0;
#if defined(__SSE2__)
    __m128 rv = _mm_set1_ps(r);
    for (; i + 4 <= n; i += 4) {
        __m128 v = _mm_mul_ps(_mm_loadu_ps(x + i), rv);
        _mm_storeu_ps(x + i, weight ? _mm_mul_ps(_mm_loadu_ps(weight + i), v) : v);
    }
#endif
    for (; i < n; i++)
        x[i] = weight ? weight[i] * (x[i] * r) : x[i] * r;
}

typedef struct norm_ctx {
    float *x;
    uint32_t width;
    const float *w;
    float eps;
} norm_ctx;

static void norm_task(void *p, int64_t i) {
    norm_ctx *c = p;
    cpu_rms_norm_row(c->x + i * c->width, c->width, c->w, c->eps);
}

void cpu_rms_norm(halo_backend *be, halo_tensor *x, uint32_t width, const halo_tensor *weight,
                  float eps) {
    norm_ctx c = {cpu_f32(x), width, weight ? cpu_f32(weight) : NULL, eps};
    halo_threadpool_run(cpu_of(be)->pool, halo_tensor_nelements(x) / width, norm_task, &c);
}

/* YaRN (Peng et al. 2023, §3.2 "NTK-by-parts"): pairs rotating fewer than beta_slow times over
 * the original context are interpolated by 1/factor, pairs rotating more than beta_fast times
 * keep their frequency, with a linear ramp between. The V4 reference leaves the attention
 * factor at 1 (no cos/sin rescaling). Frequencies are computed in f32 like the reference. */
static double corr_dim(double n_rot_turns, uint32_t dim, double base, uint32_t orig_ctx) {
    return (double)dim * log((double)orig_ctx / (n_rot_turns * 2.0 * M_PI)) / (2.0 * log(base));
}

void cpu_rope_inv_freq(const halo_rope *rope, float *inv_freq) {
    uint32_t dim = rope->n_rot, half = dim / 2;
    float low = 0, high = 0;
    if (rope->yarn) {
        low = (float)floor(corr_dim(rope->yarn_beta_fast, dim, rope->base, rope->yarn_orig_ctx));
        high = (float)ceil(corr_dim(rope->yarn_beta_slow, dim, rope->base, rope->yarn_orig_ctx));
        if (low < 0) low = 0;
        if (high > (float)(dim - 1)) high = (float)(dim - 1);
        if (low == high) high += 0.001f;
    }
    for (uint32_t i = 0; i < half; i++) {
        float pos_freq = powf(rope->base, (float)(2 * i) / (float)dim);
        float extrap = 1.0f / pos_freq;
        if (!rope->yarn) {
            inv_freq[i] = extrap;
            continue;
        }
        float ramp = ((float)i - low) / (high - low);
        ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
        float keep = 1.0f - ramp; /* share of the extrapolated (original) frequency */
        float interp = 1.0f / (rope->yarn_factor * pos_freq);
        inv_freq[i] = interp * (1.0f - keep) + extrap * keep;
    }
}

/* Rotates consecutive pairs (x[2i], x[2i+1]) of a head's rope tail by pos·inv_freq[i]. */
void cpu_rope_row(float *x, uint32_t n_rot, const float *inv_freq, float pos, bool inverse) {
    for (uint32_t i = 0; i < n_rot / 2; i++) {
        float angle = pos * inv_freq[i];
        float c = cosf(angle), s = sinf(angle);
        if (inverse) s = -s;
        float a = x[2 * i], b = x[2 * i + 1];
        x[2 * i] = a * c - b * s;
        x[2 * i + 1] = b * c + a * s;
    }
}

typedef struct rope_ctx {
    float *x;
    int64_t head_dim, n_head;
    const int32_t *pos;
    uint32_t n_rot;
    const float *inv_freq;
    bool inverse;
} rope_ctx;

/* One token's heads: the angles' cosines and sines are the same for every head, so they are
 * taken once (cpu_rope_row's values, so the same results): 64 heads took ~15 us of one thread
 * with a cosf and sinf per pair and head, a serial step of a decode token's attention. */
static void rope_task(void *p, int64_t t) {
    rope_ctx *c = p;
    float cs[512], sn[512];
    uint32_t half = c->n_rot / 2;
    for (uint32_t i = 0; i < half; i++) {
        float angle = (float)c->pos[t] * c->inv_freq[i];
        cs[i] = cosf(angle);
        sn[i] = c->inverse ? -sinf(angle) : sinf(angle);
    }
    for (int64_t h = 0; h < c->n_head; h++) {
        float *x = c->x + (t * c->n_head + h) * c->head_dim + c->head_dim - c->n_rot;
        for (uint32_t i = 0; i < half; i++) {
            float a = x[2 * i], b = x[2 * i + 1];
            x[2 * i] = a * cs[i] - b * sn[i];
            x[2 * i + 1] = b * cs[i] + a * sn[i];
        }
    }
}

void cpu_rope(halo_backend *be, halo_tensor *x, const int32_t *pos, const halo_rope *rope,
              bool inverse) {
    float inv_freq[512];
    cpu_rope_inv_freq(rope, inv_freq);
    rope_ctx c = {cpu_f32(x), x->ne[0], x->ne[1], pos, rope->n_rot, inv_freq, inverse};
    halo_threadpool_run(cpu_of(be)->pool, x->ne[2], rope_task, &c);
}
