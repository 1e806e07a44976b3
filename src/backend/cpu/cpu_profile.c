/* HALO_CPU_PROFILE=1: the CPU backend's ops table with every op timed (cpu_profile.h). */
#include <stdio.h>
#include <stdlib.h>

#include "backend/cpu/cpu.h"
#include "halo/types.h"

#define TIMED(slot, call)                                                                          \
    do {                                                                                           \
        double t0_ = cpu_prof_now();                                                               \
        call;                                                                                      \
        cpu_prof_add(cpu_of(be)->prof, slot, t0_);                                                 \
    } while (0)

static void p_embed(halo_backend *be, const halo_tensor *table, const int32_t *tokens,
                    halo_tensor *out) {
    TIMED(PROF_EMBED, cpu_embed(be, table, tokens, out));
}

static void p_matmul(halo_backend *be, const halo_tensor *w, const halo_tensor *x, uint32_t groups,
                     halo_tensor *out) {
    int64_t n_out = w->ne[1] * w->ne[2] * w->ne[3];
    cpu_prof_slot s = x->ne[1] > 1                ? PROF_MATMUL_N
                      : n_out > 65536             ? PROF_MATMUL_HEAD
                      : w->type == HALO_TYPE_Q8_0 ? PROF_MATMUL_Q8_1
                                                  : PROF_MATMUL_1;
    double t0 = cpu_prof_now();
    cpu_matmul(be, w, x, groups, out);
    double ns = cpu_prof_now() - t0;
    cpu_profile *p = cpu_of(be)->prof;
    p->ns[s] += ns;
    p->calls[s]++;
    if (s == PROF_MATMUL_N) return;
    int k = 0;
    while (k < p->n_shapes &&
           !(p->shape[k].type == w->type && p->shape[k].in == w->ne[0] && p->shape[k].out == n_out))
        k++;
    if (k == PROF_SHAPES) return;
    if (k == p->n_shapes) {
        p->n_shapes++;
        p->shape[k] = (cpu_prof_shape){w->type, w->ne[0], n_out, halo_tensor_nbytes(w), 0, 0};
    }
    p->shape[k].ns += ns;
    p->shape[k].calls++;
}

static void p_rms_norm(halo_backend *be, halo_tensor *x, uint32_t width, const halo_tensor *wt,
                       float eps) {
    TIMED(PROF_RMS_NORM, cpu_rms_norm(be, x, width, wt, eps));
}

static void p_rope(halo_backend *be, halo_tensor *x, const int32_t *pos, const halo_rope *rope,
                   bool inverse) {
    TIMED(PROF_ROPE, cpu_rope(be, x, pos, rope, inverse));
}

static void p_hc_pre(halo_backend *be, const halo_hc_args *a) {
    TIMED(PROF_HC_PRE, cpu_hc_pre(be, a));
}

static void p_hc_post(halo_backend *be, halo_tensor *streams, const halo_tensor *y,
                      const halo_tensor *post, const halo_tensor *comb) {
    TIMED(PROF_HC_POST, cpu_hc_post(be, streams, y, post, comb));
}

static void p_attention(halo_backend *be, const halo_attn_args *a) {
    TIMED(PROF_ATTENTION, cpu_attention(be, a));
}

static void p_pool(halo_backend *be, const halo_pool_args *a) {
    TIMED(PROF_POOL, cpu_pool(be, a));
}

static void p_topk(halo_backend *be, const halo_topk_args *a) {
    TIMED(PROF_TOPK, cpu_topk(be, a));
}

static void p_moe(halo_backend *be, const halo_moe_args *a) {
    TIMED(PROF_MOE, cpu_moe(be, a));
}

static void p_copy(halo_backend *be, halo_tensor *dst, const halo_tensor *src) {
    TIMED(PROF_COPY, cpu_copy(be, dst, src));
}

static const char *const slot_names[PROF_SLOTS] = {
    "embed",
    "matmul head (1 tok)",
    "matmul q8_0 (1 tok)",
    "matmul other (1 tok)",
    "matmul (n tok)",
    "  activations",
    "rms_norm",
    "rope",
    "hc_pre",
    "hc_post",
    "attention",
    "pool",
    "topk",
    "moe",
    "  moe routing",
    "  moe gate/up",
    "  moe down",
    "  moe sum",
    "copy",
};

static void p_destroy(halo_backend *be) {
    cpu_backend *cb = cpu_of(be);
    cpu_profile *p = cb->prof;
    double total = 0;
    for (int s = 0; s < PROF_SLOTS; s++)
        if (slot_names[s][0] != ' ') total += p->ns[s];
    uint64_t runs = 0;
    double wait_ns = 0;
    halo_threadpool_stats(cb->pool, &runs, &wait_ns);
    fprintf(stderr, "cpu profile, %u threads: %.1f ms in ops\n", halo_threadpool_size(cb->pool),
            total / 1e6);
    for (int s = 0; s < PROF_SLOTS; s++)
        if (p->calls[s])
            fprintf(stderr, "  %-22s %9.2f ms %5.1f %% %8lld calls %8.1f us/call\n", slot_names[s],
                    p->ns[s] / 1e6, 100 * p->ns[s] / total, (long long)p->calls[s],
                    p->ns[s] / 1e3 / (double)p->calls[s]);
    for (int k = 0; k < p->n_shapes; k++) {
        const cpu_prof_shape *h = &p->shape[k];
        fprintf(stderr, "  1-token %-7s %6lld x %6lld: %6lld calls %8.1f us/call %6.1f GB/s\n",
                halo_type_info_get(h->type)->name, (long long)h->in, (long long)h->out,
                (long long)h->calls, h->ns / 1e3 / (double)h->calls,
                (double)h->bytes * (double)h->calls / h->ns);
    }
    fprintf(stderr, "  pool: %llu loops, caller waited %.2f ms after its own share (%.1f %%)\n",
            (unsigned long long)runs, wait_ns / 1e6, 100 * wait_ns / total);
    free(p);
    cb->prof = NULL;
    cpu_destroy(be);
}

halo_backend_ops cpu_profile_ops(const halo_backend_ops *base) {
    halo_backend_ops o = *base;
    o.destroy = p_destroy;
    o.embed = p_embed;
    o.matmul = p_matmul;
    o.rms_norm = p_rms_norm;
    o.rope = p_rope;
    o.hc_pre = p_hc_pre;
    o.hc_post = p_hc_post;
    o.attention = p_attention;
    o.pool = p_pool;
    o.topk = p_topk;
    o.moe = p_moe;
    o.copy = p_copy;
    return o;
}
