/* RMS norm and DeepSeek V4's rotary embedding on the CPU. */
#include <math.h>

#include "backend/cpu/cpu.h"

void cpu_rms_norm_row(float *x, int64_t n, const float *weight, float eps) {
    double ss = 0; /* the mean of squares in double: n is up to hc·n_embd = 16384 */
    for (int64_t i = 0; i < n; i++) ss += (double)x[i] * x[i];
    float r = 1.0f / sqrtf((float)(ss / (double)n) + eps);
    for (int64_t i = 0; i < n; i++) x[i] = weight ? weight[i] * (x[i] * r) : x[i] * r;
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

static void rope_task(void *p, int64_t t) {
    rope_ctx *c = p;
    for (int64_t h = 0; h < c->n_head; h++) {
        float *head = c->x + (t * c->n_head + h) * c->head_dim;
        cpu_rope_row(head + c->head_dim - c->n_rot, c->n_rot, c->inv_freq, (float)c->pos[t],
                     c->inverse);
    }
}

void cpu_rope(halo_backend *be, halo_tensor *x, const int32_t *pos, const halo_rope *rope,
              bool inverse) {
    float inv_freq[512];
    cpu_rope_inv_freq(rope, inv_freq);
    rope_ctx c = {cpu_f32(x), x->ne[0], x->ne[1], pos, rope->n_rot, inv_freq, inverse};
    halo_threadpool_run(cpu_of(be)->pool, x->ne[2], rope_task, &c);
}
