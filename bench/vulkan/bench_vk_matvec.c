/* Decode projections on the Vulkan backend, one op at a time, at DeepSeek V4 Flash's shapes:
 * how long one projection of one column takes when it is repeated back to back (each waits for
 * the one before: they write the same output), the weight bytes per second that makes, the
 * host's recording time per call, and the result against the CPU backend's (precise mode, the
 * reference). Each argument after the repetitions is one configuration: comma-separated
 * VAR=VALUE settings of the backend's environment knobs (docs/vulkan.md), applied for a fresh
 * backend; "-" is the defaults. Not a test: run by hand or by bench/vulkan/ops.sh on a GPU.
 *
 *   bench_vk_matvec [REPS] [CONFIG ...]
 *   bench_vk_matvec 200 - HALO_VK_MVQ8=0 HALO_VK_MVQ8=2 HALO_VK_MVQ8=1w
 *
 * The MoE call is timed twice: with one input (the same 6 experts each call: after the first,
 * much of its 71 MB is in the H200's 50 MB L2) and cycling through BENCH_VK_MOE_X inputs
 * (default 16: other experts each call, read from memory as in a decode step, where each layer's
 * experts were last read a token ago). BENCH_VK_MOE_PASSES=N repeats both N times (is a time
 * that differs between runs a property of the process or of the moment?); BENCH_VK_MOE_ONLY=1
 * skips the single projections (BENCH_VK_NO_MOE=1: the MoE call; BENCH_VK_ONLY=WORD[,WORD..]:
 * only the projections whose names contain one of the words), and =warm or =cold in a
 * configuration times only that kind of call (HALO_VK_PROFILE=1,BENCH_VK_MOE_ONLY=cold: the cold
 * calls' dispatches). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../bench_util.h"
#include "backend/backend.h"
#include "backend/vulkan/vulkan.h"
#include "core/error.h"
#include "halo/plan.h"
#include "halo/quant.h"
#include "halo/types.h"

typedef struct shape {
    const char *name;
    uint32_t type;
    int64_t K, N; /* per group: w is [K, N]; x has K·groups rows */
    uint32_t groups;
} shape;

static const shape shapes[] = {
    {"attn_q_a", HALO_TYPE_Q8_0, 4096, 1024, 1},
    {"attn_q_b", HALO_TYPE_Q8_0, 1024, 32768, 1},
    {"attn_kv", HALO_TYPE_Q8_0, 4096, 512, 1},
    {"attn_output_a (8 groups)", HALO_TYPE_Q8_0, 4096, 1024, 8},
    {"attn_output_b", HALO_TYPE_Q8_0, 8192, 4096, 1},
    {"ffn_gate_shexp", HALO_TYPE_Q8_0, 4096, 2048, 1},
    {"ffn_down_shexp", HALO_TYPE_Q8_0, 2048, 4096, 1},
    {"output", HALO_TYPE_Q8_0, 4096, 129280, 1},
    {"tiny (dispatch floor)", HALO_TYPE_Q8_0, 256, 64, 1},
    {"indexer.attn_q_b f16", HALO_TYPE_F16, 1024, 8192, 1},
    {"compressor_kv f16", HALO_TYPE_F16, 4096, 1024, 1},
    {"iq2_xxs 4096x2048 (plain)", HALO_TYPE_IQ2_XXS, 4096, 2048, 1},
    {"q2_K 2048x4096 (plain)", HALO_TYPE_Q2_K, 2048, 4096, 1},
};
enum { N_SHAPES = sizeof shapes / sizeof shapes[0] };

typedef struct host_shape {
    void *w;
    float *x, *ref;
    uint64_t w_bytes;
} host_shape;

/* Random blocks whose f16 scales (the first 2 bytes of each block, and Q2_K's d/dmin at its
 * end) are sane; F16 weights as random halves in [-1, 1). */
static void *make_weights(const shape *s, uint64_t *bytes) {
    uint64_t rb = 0;
    halo_type_bytes(s->type, (uint64_t)s->K, &rb);
    uint64_t n = rb * (uint64_t)s->N * s->groups;
    unsigned char *w = malloc(n);
    if (!w) return NULL;
    for (uint64_t i = 0; i < n; i += 8) {
        uint64_t r = bench_rand();
        memcpy(w + i, &r, n - i < 8 ? n - i : 8);
    }
    const halo_type_info *ti = halo_type_info_get(s->type);
    uint16_t h = 0x2000; /* f16 0.0078125 */
    if (s->type == HALO_TYPE_F16) {
        for (uint64_t i = 0; i < n; i += 2)
            w[i + 1] = (unsigned char)((w[i + 1] & 0x80) | 0x30 | (w[i + 1] & 0x07));
    } else {
        for (uint64_t b = 0; b < n / ti->block_bytes; b++) {
            unsigned char *blk = w + b * ti->block_bytes;
            if (s->type == HALO_TYPE_Q2_K) {
                memcpy(blk + 80, &h, 2);
                memcpy(blk + 82, &h, 2);
            } else {
                memcpy(blk, &h, 2);
            }
        }
    }
    *bytes = n;
    return w;
}

static halo_status tensor3(halo_backend *be, uint32_t pool, uint32_t type, int64_t ne0, int64_t ne1,
                           int64_t ne2, const void *data, halo_tensor *t, halo_error *err) {
    *t = (halo_tensor){.type = type, .ne = {ne0, ne1, ne2, 1}};
    uint64_t n = halo_tensor_nbytes(t);
    halo_status st = pool == HALO_POOL_COUNT ? be->ops->buf_alloc(be, n, &t->buf, err)
                                             : be->ops->buf_alloc_pool(be, pool, n, &t->buf, err);
    if (!st && data) st = be->ops->buf_write(be, t->buf, 0, data, n, err);
    return st;
}

static halo_status tensor(halo_backend *be, uint32_t pool, uint32_t type, int64_t ne0, int64_t ne1,
                          const void *data, halo_tensor *t, halo_error *err) {
    return tensor3(be, pool, type, ne0, ne1, 1, data, t, err);
}

/* ---- one MoE call: a decode step's routed (6 of 256, IQ2_XXS / Q2_K) and shared (Q8_0)
 * experts with the router, as the q2 model's layers ------------------------------------------ */

enum { ME = 4096, MF = 2048, MK = 6, MOE_T = 8 };
static int MX = 256; /* experts: BENCH_VK_EXPERTS lowers it (a small machine, lavapipe) */
/* N per expert for the stacked three; 0: MX */
static const shape moe_w[MOE_T] = {
    {"router", HALO_TYPE_F16, ME, 0, 1},       {"gate_exps", HALO_TYPE_IQ2_XXS, ME, MF, 1},
    {"up_exps", HALO_TYPE_IQ2_XXS, ME, MF, 1}, {"down_exps", HALO_TYPE_Q2_K, MF, ME, 1},
    {"gate_sh", HALO_TYPE_Q8_0, ME, MF, 1},    {"up_sh", HALO_TYPE_Q8_0, ME, MF, 1},
    {"down_sh", HALO_TYPE_Q8_0, MF, ME, 1},    {"bias", HALO_TYPE_F32, 0, 1, 1}};

enum { MOE_XMAX = 64 };
static int MOE_X = 16;

typedef struct moe_host {
    void *w[MOE_T];
    uint64_t bytes[MOE_T];
    float *x, *ref; /* x: MOE_X inputs of ME; ref: the first one's result */
} moe_host;

typedef struct moe_time {
    double us, host_us;           /* one input */
    double cold_us, cold_host_us; /* MOE_X inputs in turn */
} moe_time;

/* reps calls of a (its x cycling through n inputs), timed as run_shape. */
static halo_status time_moe(halo_backend *be, halo_moe_args *a, halo_tensor *xs, int n, int reps,
                            double *us, double *host_us, halo_error *err) {
    double t0 = bench_seconds(CLOCK_MONOTONIC);
    for (int r = 0; r < reps; r++) {
        a->x = &xs[r % n];
        be->ops->moe(be, a);
    }
    double t1 = bench_seconds(CLOCK_MONOTONIC);
    halo_status st = be->ops->sync(be, err);
    double t2 = bench_seconds(CLOCK_MONOTONIC);
    *us = 1e6 * (t2 - t0) / reps;
    *host_us = 1e6 * (t1 - t0) / reps;
    return st;
}

/* The call on be (weights in pool), timed with one input and with MOE_X in turn (*tm, passes
 * times); out compared with ref when given. */
static halo_status run_moe(halo_backend *be, uint32_t pool, moe_host *h, int reps, int passes,
                           moe_time *tm, double *rel, bool fill_ref, halo_error *err) {
    halo_tensor t[MOE_T] = {{0}}, xs[MOE_XMAX] = {{0}}, out = {0};
    halo_status st = HALO_OK;
    for (int i = 0; i < MOE_T && !st; i++) {
        const shape *s = &moe_w[i];
        bool stacked = i >= 1 && i <= 3;
        int64_t k = i == MOE_T - 1 ? MX : s->K, n = i == 0 ? MX : s->N;
        st = tensor3(be, i == MOE_T - 1 ? HALO_POOL_COUNT : pool, s->type, k, n, stacked ? MX : 1,
                     h->w[i], &t[i], err);
    }
    int nx = fill_ref ? 1 : MOE_X;
    for (int i = 0; i < nx && !st; i++)
        st = tensor(be, HALO_POOL_COUNT, HALO_TYPE_F32, ME, 1, h->x + (size_t)i * ME, &xs[i], err);
    if (!st) st = tensor(be, HALO_POOL_COUNT, HALO_TYPE_F32, ME, 1, NULL, &out, err);
    halo_moe_args a = {.x = &xs[0],
                       .gate_inp = &t[0],
                       .probs_bias = &t[7],
                       .gate_exps = &t[1],
                       .up_exps = &t[2],
                       .down_exps = &t[3],
                       .gate_sh = &t[4],
                       .up_sh = &t[5],
                       .down_sh = &t[6],
                       .n_used = MK,
                       .gating = HALO_GATING_SQRTSOFTPLUS,
                       .norm_weights = true,
                       .weights_scale = 1.5f,
                       .clamp_exp = 10.0f,
                       .clamp_shexp = 10.0f,
                       .out = &out};
    if (!st) {
        be->ops->moe(be, &a);
        st = be->ops->sync(be, err);
    }
    float got[ME];
    if (!st) st = be->ops->buf_read(be, out.buf, 0, got, sizeof got, err);
    if (!st && fill_ref) memcpy(h->ref, got, sizeof got);
    if (!st && !fill_ref) {
        double d = 0, m = 0;
        for (int i = 0; i < ME; i++) {
            double e = fabs((double)got[i] - h->ref[i]);
            d = e > d || isnan(e) ? e : d;
            m = fabs(h->ref[i]) > m ? fabs(h->ref[i]) : m;
        }
        *rel = m > 0 ? d / m : d;
    }
    /* BENCH_VK_MOE_ONLY=warm|cold (a configuration's setting): only that timing, so a
     * profile's percentiles are of one kind of call */
    const char *only = getenv("BENCH_VK_MOE_ONLY");
    bool warm = !only || strcmp(only, "cold"), cold = !only || strcmp(only, "warm");
    for (int p = 0; p < passes && !st && !fill_ref; p++) {
        tm[p] = (moe_time){0};
        if (warm) st = time_moe(be, &a, xs, 1, reps, &tm[p].us, &tm[p].host_us, err);
        if (!st && cold)
            st = time_moe(be, &a, xs, nx, reps, &tm[p].cold_us, &tm[p].cold_host_us, err);
    }
    for (int i = 0; i < MOE_T; i++)
        if (t[i].buf) be->ops->buf_free(be, t[i].buf);
    for (int i = 0; i < nx; i++)
        if (xs[i].buf) be->ops->buf_free(be, xs[i].buf);
    if (out.buf) be->ops->buf_free(be, out.buf);
    return st;
}

/* Cold calls: BENCH_VK_COLD_MB (default 256) MB of copies of a weight read in turn, so each call
 * reads its weights from memory, as a decode step does (a layer's weights were last read a token
 * ago), not from the 50 MB L2 the repeated call mostly hits; 0: not timed. */
static int COLD_MB = 256;
enum { COLD_MAX = 256 };

/* Runs one shape on be: *us per call (wall, after a sync) repeating one weight, *cold_us cycling
 * through copies (0: not timed), host recording us per call, and max |out - ref| / max |ref|. */
static halo_status run_shape(halo_backend *be, uint32_t pool, const shape *s, host_shape *h,
                             int reps, double *us, double *cold_us, double *host_us, double *rel,
                             halo_error *err) {
    halo_tensor w = {0}, x = {0}, out = {0};
    *cold_us = 0;
    int64_t K = s->K * s->groups, N = s->N * s->groups;
    halo_status st = tensor(be, pool, s->type, s->K, N, h->w, &w, err);
    if (!st) st = tensor(be, HALO_POOL_COUNT, HALO_TYPE_F32, K, 1, h->x, &x, err);
    if (!st) st = tensor(be, HALO_POOL_COUNT, HALO_TYPE_F32, N, 1, NULL, &out, err);
    if (!st) {
        be->ops->matmul(be, &w, &x, s->groups, &out);
        st = be->ops->sync(be, err);
    }
    float *got = st ? NULL : malloc((size_t)N * sizeof *got);
    if (!st && !got) st = halo_fail(err, HALO_E_NOMEM, "out of memory");
    if (!st) st = be->ops->buf_read(be, out.buf, 0, got, (uint64_t)N * 4, err);
    if (!st && h->ref) {
        double d = 0, m = 0;
        for (int64_t i = 0; i < N; i++) {
            double e = fabs((double)got[i] - h->ref[i]);
            d = e > d || isnan(e) ? e : d;
            m = fabs(h->ref[i]) > m ? fabs(h->ref[i]) : m;
        }
        *rel = m > 0 ? d / m : d;
    }
    free(got);
    if (!st) {
        double t0 = bench_seconds(CLOCK_MONOTONIC);
        for (int r = 0; r < reps; r++)
            be->ops->matmul(be, &w, &x, s->groups, &out);
        double t1 = bench_seconds(CLOCK_MONOTONIC);
        st = be->ops->sync(be, err);
        double t2 = bench_seconds(CLOCK_MONOTONIC);
        *us = 1e6 * (t2 - t0) / reps;
        *host_us = 1e6 * (t1 - t0) / reps;
    }
    uint64_t n_cold = h->w_bytes ? ((uint64_t)COLD_MB << 20) / h->w_bytes : 0;
    n_cold = n_cold > COLD_MAX ? COLD_MAX : n_cold;
    halo_tensor cw[COLD_MAX] = {{0}};
    cw[0] = w;
    for (uint64_t i = 1; i < n_cold && !st; i++)
        st = tensor(be, pool, s->type, s->K, N, h->w, &cw[i], err);
    if (!st && n_cold > 1) {
        double t0 = bench_seconds(CLOCK_MONOTONIC);
        for (int r = 0; r < reps; r++)
            be->ops->matmul(be, &cw[r % n_cold], &x, s->groups, &out);
        st = be->ops->sync(be, err);
        *cold_us = 1e6 * (bench_seconds(CLOCK_MONOTONIC) - t0) / reps;
    }
    for (uint64_t i = 1; i < n_cold; i++)
        if (cw[i].buf) be->ops->buf_free(be, cw[i].buf);
    be->ops->buf_free(be, w.buf);
    be->ops->buf_free(be, x.buf);
    be->ops->buf_free(be, out.buf);
    return st;
}

/* Whether name contains one of the comma-separated words of only (none given: yes). */
static bool wanted(const char *name, const char *only) {
    if (!only) return true;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", only);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ","))
        if (strstr(name, tok)) return true;
    return false;
}

/* Sets (or, for "-", leaves) the configuration's variables; *saved lists them for unset. */
static void apply(const char *config, char *saved, size_t n) {
    snprintf(saved, n, "%s", strcmp(config, "-") ? config : "");
    char buf[512];
    snprintf(buf, sizeof buf, "%s", saved);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        char *eq = strchr(tok, '=');
        if (!eq) continue;
        *eq = 0;
        setenv(tok, eq + 1, 1);
    }
}

static void unapply(const char *saved) {
    char buf[512];
    snprintf(buf, sizeof buf, "%s", saved);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        char *eq = strchr(tok, '=');
        if (eq) *eq = 0;
        unsetenv(tok);
    }
}

int main(int argc, char **argv) {
    int reps = argc > 1 ? atoi(argv[1]) : 100;
    if (reps < 1) reps = 100;
    const char *def[] = {"-"};
    const char **configs = argc > 2 ? (const char **)argv + 2 : def;
    int n_configs = argc > 2 ? argc - 2 : 1;
    halo_error err = {0};
    halo_backend *cpu = NULL;
    if (halo_backend_cpu_create(0, true, &cpu, &err)) {
        fprintf(stderr, "bench_vk_matvec: %s\n", err.message);
        return 1;
    }
    /* inputs and the CPU's results, once */
    host_shape hs[N_SHAPES] = {{0}};
    for (int i = 0; i < N_SHAPES; i++) {
        const shape *s = &shapes[i];
        int64_t K = s->K * s->groups, N = s->N * s->groups;
        hs[i].w = make_weights(s, &hs[i].w_bytes);
        hs[i].x = malloc((size_t)K * sizeof(float));
        hs[i].ref = malloc((size_t)N * sizeof(float));
        if (!hs[i].w || !hs[i].x || !hs[i].ref) {
            fprintf(stderr, "bench_vk_matvec: out of memory\n");
            return 1;
        }
        for (int64_t k = 0; k < K; k++)
            hs[i].x[k] = (float)((double)(bench_rand() >> 11) / 9007199254740992.0 * 2 - 1);
        halo_tensor w, x, out;
        if (tensor(cpu, HALO_POOL_HOST, s->type, s->K, N, hs[i].w, &w, &err) ||
            tensor(cpu, HALO_POOL_COUNT, HALO_TYPE_F32, K, 1, hs[i].x, &x, &err) ||
            tensor(cpu, HALO_POOL_COUNT, HALO_TYPE_F32, N, 1, NULL, &out, &err)) {
            fprintf(stderr, "bench_vk_matvec: cpu: %s\n", err.message);
            return 1;
        }
        cpu->ops->matmul(cpu, &w, &x, s->groups, &out);
        if (cpu->ops->sync(cpu, &err) ||
            cpu->ops->buf_read(cpu, out.buf, 0, hs[i].ref, (uint64_t)N * 4, &err)) {
            fprintf(stderr, "bench_vk_matvec: cpu: %s\n", err.message);
            return 1;
        }
        cpu->ops->buf_free(cpu, w.buf), cpu->ops->buf_free(cpu, x.buf);
        cpu->ops->buf_free(cpu, out.buf);
    }
    if (getenv("BENCH_VK_EXPERTS") && atoi(getenv("BENCH_VK_EXPERTS")) >= MK)
        MX = atoi(getenv("BENCH_VK_EXPERTS"));
    const char *ev = getenv("BENCH_VK_MOE_X");
    if (ev && atoi(ev) >= 1) MOE_X = atoi(ev) < MOE_XMAX ? atoi(ev) : MOE_XMAX;
    ev = getenv("BENCH_VK_MOE_PASSES");
    int passes = ev && atoi(ev) >= 1 ? (atoi(ev) < 8 ? atoi(ev) : 8) : 1;
    bool moe_only = getenv("BENCH_VK_MOE_ONLY") && atoi(getenv("BENCH_VK_MOE_ONLY"));
    bool no_moe = getenv("BENCH_VK_NO_MOE") && atoi(getenv("BENCH_VK_NO_MOE"));
    const char *only = getenv("BENCH_VK_ONLY"); /* the projections whose names contain it */
    ev = getenv("BENCH_VK_COLD_MB");
    if (ev) COLD_MB = atoi(ev) > 0 ? atoi(ev) : 0;
    moe_host mh = {.x = malloc((size_t)MOE_X * ME * sizeof(float)),
                   .ref = malloc(ME * sizeof(float))};
    uint64_t moe_bytes = 0; /* what one token reads: router, 6 experts, shared expert */
    for (int i = 0; i < MOE_T; i++) {
        if (moe_w[i].type == HALO_TYPE_F32) {
            mh.bytes[i] = MX * 4;
            mh.w[i] = malloc(mh.bytes[i]);
            for (int k = 0; mh.w[i] && k < MX; k++)
                ((float *)mh.w[i])[k] = (float)(bench_rand() % 1000) / 10000.0f;
        } else {
            shape sh = moe_w[i];
            sh.N = i == 0 ? MX : sh.N * (i <= 3 ? MX : 1);
            mh.w[i] = make_weights(&sh, &mh.bytes[i]);
        }
        if (!mh.w[i] || !mh.x || !mh.ref) {
            fprintf(stderr, "bench_vk_matvec: out of memory\n");
            return 1;
        }
        moe_bytes += i >= 1 && i <= 3 ? mh.bytes[i] / MX * MK : mh.bytes[i];
    }
    for (int k = 0; k < MOE_X * ME; k++)
        mh.x[k] = (float)((double)(bench_rand() >> 11) / 9007199254740992.0 * 2 - 1);
    double dummy = 0;
    moe_time tm[8];
    if (run_moe(cpu, HALO_POOL_HOST, &mh, 1, 1, tm, &dummy, true, &err)) {
        fprintf(stderr, "bench_vk_matvec: cpu moe: %s\n", err.message);
        return 1;
    }
    cpu->ops->destroy(cpu);
    printf("| config | projection | K x N | weight MB | us/call | GB/s | host us/call | rel err | "
           "cold us/call | cold GB/s |\n");
    printf("|---|---|---|---:|---:|---:|---:|---:|---:|---:|\n");
    for (int c = 0; c < n_configs; c++) {
        char saved[512];
        apply(configs[c], saved, sizeof saved);
        fprintf(stderr, "bench_vk_matvec: config %s\n", configs[c]); /* a profile's header */
        halo_backend *vk = NULL;
        if (halo_backend_vulkan_create(-1, &vk, &err)) {
            fprintf(stderr, "bench_vk_matvec: %s: %s\n", configs[c], err.message);
            unapply(saved);
            continue;
        }
        for (int i = 0; i < N_SHAPES && !moe_only; i++) {
            const shape *s = &shapes[i];
            if (!wanted(s->name, only)) continue;
            double us = 0, host_us = 0, rel = -1;
            double cold = 0;
            if (run_shape(vk, HALO_POOL_DEVICE, s, &hs[i], reps, &us, &cold, &host_us, &rel,
                          &err)) {
                printf("| %s | %s | error: %s |\n", configs[c], s->name, err.message);
                break;
            }
            double wmb = (double)hs[i].w_bytes / 1e6;
            printf("| %s | %s | %lld x %lld | %.2f | %.2f | %.1f | %.2f | %.1e |", configs[c],
                   s->name, (long long)(s->K * s->groups), (long long)(s->N * s->groups), wmb, us,
                   wmb / us * 1e3, host_us, rel);
            if (cold > 0)
                printf(" %.2f | %.1f |\n", cold, wmb / cold * 1e3);
            else
                printf(" | |\n");
            fflush(stdout);
        }
        double rel = -1;
        if (!no_moe && run_moe(vk, HALO_POOL_DEVICE, &mh, reps, passes, tm, &rel, false, &err))
            printf("| %s | moe | error: %s |\n", configs[c], err.message);
        for (int p = 0; p < passes && rel >= 0; p++) {
            if (tm[p].us > 0)
                printf("| %s | moe, 1 token (6 of %d experts + shared + router), one input | "
                       "4096 x 4096 | %.2f | %.2f | %.1f | %.2f | %.1e |\n",
                       configs[c], MX, (double)moe_bytes / 1e6, tm[p].us,
                       (double)moe_bytes / tm[p].us / 1e3, tm[p].host_us, rel);
            if (tm[p].cold_us > 0)
                printf("| %s | moe, the same, %d inputs in turn (other experts each call) | "
                       "4096 x 4096 | %.2f | %.2f | %.1f | %.2f | |\n",
                       configs[c], MOE_X, (double)moe_bytes / 1e6, tm[p].cold_us,
                       (double)moe_bytes / tm[p].cold_us / 1e3, tm[p].cold_host_us);
        }
        fflush(stdout);
        vk->ops->destroy(vk);
        unapply(saved);
    }
    for (int i = 0; i < N_SHAPES; i++)
        free(hs[i].w), free(hs[i].x), free(hs[i].ref);
    for (int i = 0; i < MOE_T; i++)
        free(mh.w[i]);
    free(mh.x), free(mh.ref);
    return 0;
}
