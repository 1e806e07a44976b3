/* Quantizers for the formats halo writes: Q8_0 and Q8_K (activations), Q2_K, Q4_K, Q6_K
 * (weights) and MXFP4. They follow ggml's reference quantizers step for step -- the same
 * candidate scales, the same float operations in the same order, round-half-even via
 * halo_nearest_int where ggml uses nearest_int and roundf where it uses roundf -- because the
 * goal is files that match llama.cpp's byte for byte, not a better quantizer. */
#include "quant/blocks.h"
#include "quant/fp.h"
#include "quant/kernels.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

#define GROUP_MAX_EPS 1e-15f

static inline int clampi(int v, int lo, int hi) {
    return v < lo ? lo : v > hi ? hi : v;
}

void halo_quantize_q8_0(const float *x, void *dst, int64_t n) {
    block_q8_0 *y = dst;
    for (int64_t i = 0; i < n / QK32; i++, x += QK32) {
        float amax = 0.0f;
        for (int j = 0; j < QK32; j++)
            amax = fmaxf(amax, fabsf(x[j]));
        float d = amax / 127.0f;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = halo_f32_to_f16(d);
        for (int j = 0; j < QK32; j++) {
            /* Activations a broken model produces can leave int8's range here: NaN or inf
             * inputs (NaN times id), or a subnormal amax whose inverse is inf. Casting those is
             * undefined behaviour, so NaN is stored as 0 and the rest clamped (finite normal
             * inputs never reach the clamp, and stay bit-exact with ggml). */
            float v = roundf(x[j] * id);
            v = v != v ? 0.0f : v > 127.0f ? 127.0f : v < -127.0f ? -127.0f : v;
            y[i].qs[j] = (int8_t)v;
        }
    }
}

/* Q8_K: the scale maps the signed extreme to -127 (not -128) so that 127 * 2 fits the int16 sums
 * some i-quant kernels form; bsums cache the 16-element sums used for mins. */
void halo_quantize_q8_K(const float *x, void *dst, int64_t n) {
    block_q8_K *y = dst;
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        float max = 0.0f, amax = 0.0f;
        for (int j = 0; j < QK_K; j++) {
            float ax = fabsf(x[j]);
            if (ax > amax) {
                amax = ax;
                max = x[j];
            }
        }
        if (amax == 0.0f) {
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        float iscale = -127.0f / max;
        for (int j = 0; j < QK_K; j++) {
            int v = halo_nearest_int(iscale * x[j]);
            y[i].qs[j] = (int8_t)(v < 127 ? v : 127);
        }
        for (int g = 0; g < QK_K / 16; g++) {
            int s = 0;
            for (int j = 0; j < 16; j++)
                s += y[i].qs[16 * g + j];
            y[i].bsums[g] = (int16_t)s;
        }
        y[i].d = 1.0f / iscale;
    }
}

/* Weighted least-squares fit of x ~ scale * L - min with L in [0, nmax], trying nstep + 1
 * candidate inverse scales (rmin + rdelta * is + nmax) / (max - min) and keeping the one with the
 * smallest weighted error (absolute with use_mad). Returns scale and writes -min to *the_min.
 * This is ggml's make_qkx2_quants search. */
static float fit_scale_min(int n, int nmax, const float *x, const float *w, uint8_t *L,
                           float *the_min, float rmin, float rdelta, int nstep, bool use_mad) {
    float min = x[0], max = x[0];
    float sum_w = w[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (min > 0) min = 0;
    if (max == min) {
        memset(L, 0, (size_t)n);
        *the_min = -min;
        return 0.0f;
    }
    float iscale = (float)nmax / (max - min);
    float scale = 1 / iscale;
    float best_error = 0;
    for (int i = 0; i < n; i++) {
        L[i] = (uint8_t)clampi(halo_nearest_int(iscale * (x[i] - min)), 0, nmax);
        float diff = scale * (float)L[i] + min - x[i];
        diff = use_mad ? fabsf(diff) : diff * diff;
        best_error += w[i] * diff;
    }
    uint8_t Laux[32];
    for (int is = 0; is <= nstep; is++) {
        iscale = (rmin + rdelta * (float)is + (float)nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            int l = clampi(halo_nearest_int(iscale * (x[i] - min)), 0, nmax);
            Laux[i] = (uint8_t)l;
            float fl = (float)l;
            sum_l += w[i] * fl;
            sum_l2 += w[i] * fl * fl;
            sum_xl += w[i] * fl * x[i];
        }
        float D = sum_w * sum_l2 - sum_l * sum_l;
        if (!(D > 0)) continue;
        float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
        float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
        if (this_min > 0) {
            this_min = 0;
            this_scale = sum_xl / sum_l2;
        }
        float cur_error = 0;
        for (int i = 0; i < n; i++) {
            float diff = this_scale * (float)Laux[i] + this_min - x[i];
            diff = use_mad ? fabsf(diff) : diff * diff;
            cur_error += w[i] * diff;
        }
        if (cur_error < best_error) {
            memcpy(L, Laux, (size_t)n);
            best_error = cur_error;
            scale = this_scale;
            min = this_min;
        }
    }
    *the_min = -min;
    return scale;
}

void halo_quantize_q2_K(const float *x, void *dst, int64_t n) {
    block_q2_K *y = dst;
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        uint8_t L[QK_K];
        float scales[16], mins[16], w[16];
        float max_scale = 0, max_min = 0;
        for (int g = 0; g < 16; g++) {
            for (int l = 0; l < 16; l++)
                w[l] = fabsf(x[16 * g + l]);
            scales[g] =
                fit_scale_min(16, 3, x + 16 * g, w, L + 16 * g, &mins[g], -0.5f, 0.1f, 15, true);
            if (scales[g] > max_scale) max_scale = scales[g];
            if (mins[g] > max_min) max_min = mins[g];
        }
        memset(y[i].scales, 0, sizeof y[i].scales);
        if (max_scale > 0) {
            float iscale = 15.f / max_scale;
            for (int g = 0; g < 16; g++)
                y[i].scales[g] = (uint8_t)halo_nearest_int(iscale * scales[g]);
            y[i].d = halo_f32_to_f16(max_scale / 15.f);
        } else {
            y[i].d = halo_f32_to_f16(0.f);
        }
        if (max_min > 0) {
            float iscale = 15.f / max_min;
            for (int g = 0; g < 16; g++)
                y[i].scales[g] |= (uint8_t)(halo_nearest_int(iscale * mins[g]) << 4);
            y[i].dmin = halo_f32_to_f16(max_min / 15.f);
        } else {
            y[i].dmin = halo_f32_to_f16(0.f);
        }
        /* Re-quantize every weight against the rounded sub-block scale and min. */
        for (int g = 0; g < 16; g++) {
            float d = halo_f16_to_f32(y[i].d) * (float)(y[i].scales[g] & 0xf);
            if (d == 0.0f) continue;
            float dm = halo_f16_to_f32(y[i].dmin) * (float)(y[i].scales[g] >> 4);
            for (int l = 0; l < 16; l++)
                L[16 * g + l] = (uint8_t)clampi(halo_nearest_int((x[16 * g + l] + dm) / d), 0, 3);
        }
        for (int c = 0; c < QK_K; c += 128)
            for (int l = 0; l < 32; l++)
                y[i].qs[c / 4 + l] = (uint8_t)(L[c + l] | (L[c + l + 32] << 2) |
                                               (L[c + l + 64] << 4) | (L[c + l + 96] << 6));
    }
}

void halo_quantize_q4_K(const float *x, void *dst, int64_t n) {
    block_q4_K *y = dst;
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        uint8_t L[QK_K];
        float scales[8], mins[8], w[32];
        float max_scale = 0, max_min = 0;
        for (int g = 0; g < 8; g++) {
            const float *xg = x + 32 * g;
            float sum_x2 = 0;
            for (int l = 0; l < 32; l++)
                sum_x2 += xg[l] * xg[l];
            float av_x = sqrtf(sum_x2 / 32);
            for (int l = 0; l < 32; l++)
                w[l] = av_x + fabsf(xg[l]);
            scales[g] = fit_scale_min(32, 15, xg, w, L + 32 * g, &mins[g], -1.f, 0.1f, 20, false);
            if (scales[g] > max_scale) max_scale = scales[g];
            if (mins[g] > max_min) max_min = mins[g];
        }
        float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
        float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
        for (int g = 0; g < 8; g++) {
            /* ggml stores nearest_int's result in a uint8 before clamping to 63. */
            uint8_t ls = (uint8_t)halo_nearest_int(inv_scale * scales[g]);
            uint8_t lm = (uint8_t)halo_nearest_int(inv_min * mins[g]);
            ls = ls < 63 ? ls : 63;
            lm = lm < 63 ? lm : 63;
            if (g < 4) {
                y[i].scales[g] = ls;
                y[i].scales[g + 4] = lm;
            } else {
                y[i].scales[g + 4] = (uint8_t)((ls & 0xf) | ((lm & 0xf) << 4));
                y[i].scales[g - 4] |= (uint8_t)((ls >> 4) << 6);
                y[i].scales[g] |= (uint8_t)((lm >> 4) << 6);
            }
        }
        y[i].d = halo_f32_to_f16(max_scale / 63.f);
        y[i].dmin = halo_f32_to_f16(max_min / 63.f);
        for (int g = 0; g < 8; g++) {
            uint8_t sc, m;
            halo_k4_scale_min(g, y[i].scales, &sc, &m);
            float d = halo_f16_to_f32(y[i].d) * (float)sc;
            if (d == 0.0f) continue;
            float dm = halo_f16_to_f32(y[i].dmin) * (float)m;
            for (int l = 0; l < 32; l++)
                L[32 * g + l] = (uint8_t)clampi(halo_nearest_int((x[32 * g + l] + dm) / d), 0, 15);
        }
        for (int c = 0; c < QK_K; c += 64)
            for (int l = 0; l < 32; l++)
                y[i].qs[c / 2 + l] = (uint8_t)(L[c + l] | (L[c + l + 32] << 4));
    }
}

/* Symmetric fit x ~ scale * (L - nmax), L in [0, 2 nmax), weights x^2: ggml's make_qx_quants
 * with rmse_type 1, trying 18 inverse scales around nmax / max. */
static float fit_scale_sym(int n, int nmax, const float *x, int8_t *L) {
    float max = 0, amax = 0;
    for (int i = 0; i < n; i++) {
        float ax = fabsf(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    if (amax < GROUP_MAX_EPS) {
        memset(L, 0, (size_t)n);
        return 0.f;
    }
    float iscale = -(float)nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = clampi(halo_nearest_int(iscale * x[i]), -nmax, nmax - 1);
        L[i] = (int8_t)(l + nmax);
        float w = x[i] * x[i];
        sumlx += w * x[i] * (float)l;
        suml2 += w * (float)l * (float)l;
    }
    float scale = suml2 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; is++) {
        if (is == 0) continue;
        iscale = -((float)nmax + 0.1f * (float)is) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; i++) {
            int l = clampi(halo_nearest_int(iscale * x[i]), -nmax, nmax - 1);
            float w = x[i] * x[i];
            sumlx += w * x[i] * (float)l;
            suml2 += w * (float)l * (float)l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; i++)
                L[i] = (int8_t)(nmax + clampi(halo_nearest_int(iscale * x[i]), -nmax, nmax - 1));
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

void halo_quantize_q6_K(const float *x, void *dst, int64_t n) {
    block_q6_K *y = dst;
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        int8_t L[QK_K];
        float scales[16];
        float max_scale = 0, max_abs_scale = 0;
        for (int g = 0; g < 16; g++) {
            scales[g] = fit_scale_sym(16, 32, x + 16 * g, L + 16 * g);
            if (fabsf(scales[g]) > max_abs_scale) {
                max_abs_scale = fabsf(scales[g]);
                max_scale = scales[g];
            }
        }
        if (max_abs_scale < GROUP_MAX_EPS) {
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        float iscale = -128.f / max_scale;
        y[i].d = halo_f32_to_f16(1 / iscale);
        for (int g = 0; g < 16; g++) {
            int s = halo_nearest_int(iscale * scales[g]);
            y[i].scales[g] = (int8_t)(s < 127 ? s : 127);
        }
        for (int g = 0; g < 16; g++) {
            float d = halo_f16_to_f32(y[i].d) * (float)y[i].scales[g];
            if (d == 0.0f) continue;
            for (int l = 0; l < 16; l++)
                L[16 * g + l] = (int8_t)(clampi(halo_nearest_int(x[16 * g + l] / d), -32, 31) + 32);
        }
        for (int c = 0; c < QK_K; c += 128) {
            uint8_t *ql = y[i].ql + c / 2, *qh = y[i].qh + c / 4;
            for (int l = 0; l < 32; l++) {
                int q1 = L[c + l], q2 = L[c + l + 32], q3 = L[c + l + 64], q4 = L[c + l + 96];
                ql[l] = (uint8_t)((q1 & 0xf) | ((q3 & 0xf) << 4));
                ql[l + 32] = (uint8_t)((q2 & 0xf) | ((q4 & 0xf) << 4));
                qh[l] =
                    (uint8_t)((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6));
            }
        }
    }
}

/* MXFP4 (OCP MX): the shared exponent puts the block's largest magnitude in the top binade of
 * e2m1 (max 6 = 1.5 * 2^2, hence the -2); each weight takes the nearest of the 16 code values,
 * the first one on ties. */
void halo_quantize_mxfp4(const float *x, void *dst, int64_t n) {
    block_mxfp4 *y = dst;
    for (int64_t i = 0; i < n / QK32; i++, x += QK32) {
        float amax = 0.0f;
        for (int j = 0; j < QK32; j++)
            if (amax < fabsf(x[j])) amax = fabsf(x[j]);
        float ef = amax > 0.0f ? floorf(log2f(amax)) - 2 + 127 : 0.0f;
        uint8_t e = (uint8_t)(ef < 0.0f ? 0.0f : ef > 254.0f ? 254.0f : ef);
        float d = halo_e8m0_half_to_f32(e);
        y[i].e = e;
        for (int j = 0; j < 16; j++) {
            int code[2];
            for (int h = 0; h < 2; h++) {
                float v = x[j + 16 * h];
                int best = 0;
                float best_err = fabsf((float)halo_kvalues_mxfp4[0] * d - v);
                for (int k = 1; k < 16; k++) {
                    float err = fabsf((float)halo_kvalues_mxfp4[k] * d - v);
                    if (err < best_err) {
                        best = k;
                        best_err = err;
                    }
                }
                code[h] = best;
            }
            y[i].qs[j] = (uint8_t)(code[0] | (code[1] << 4));
        }
    }
}
