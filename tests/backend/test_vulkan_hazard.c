/* Barriers only between dependent commands (src/backend/vulkan/vk_hazard.c): projections that
 * read the same input and write different outputs go without a barrier between them, a command
 * that reads an output waits for it, one that rewrites what an earlier one read waits too, and
 * row copies between two buffers go out as one command. The values are the CPU backend's
 * (within 1e-5 of the range), with the barriers elided and with HALO_VK_BARRIERS=all, whose
 * count is one per command. lavapipe runs commands in order whatever the barriers, so the
 * values here show the bookkeeping is harmless and the counts that it elides; a GPU that
 * overlaps commands (the H200 run, bench/vulkan/RESULTS.md) checks the rest. Only the barrier
 * that ends each submission names the host (one a submission; all with HALO_VK_BARRIER_HOST=1,
 * same values), and only the barriers after a copy and those wait for the transfer stage (all
 * with HALO_VK_BARRIER_XFER=1, same values). Skips (exit 77) when no Vulkan device works. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/vulkan/vulkan.h"
#include "check.h"
#include "halo/types.h"

enum { K = 256, N = 96, ROWS = 16 };

static halo_backend *cpu;

static halo_tensor tensor(halo_backend *be, int64_t ne0, int64_t ne1, const float *data) {
    halo_tensor t = {.type = HALO_TYPE_F32, .ne = {ne0, ne1, 1, 1}};
    halo_error err = {0};
    CHECK_INT(be->ops->buf_alloc(be, halo_tensor_nbytes(&t), &t.buf, &err), HALO_OK);
    if (data) CHECK_INT(be->ops->buf_write(be, t.buf, 0, data, halo_tensor_nbytes(&t), &err), 0);
    return t;
}

static void read(halo_backend *be, const halo_tensor *t, float *out) {
    halo_error err = {0};
    CHECK_INT(be->ops->buf_read(be, t->buf, t->offset, out, halo_tensor_nbytes(t), &err), 0);
}

static double rel(const float *a, const float *ref, size_t n) {
    double d = 0, range = 0;
    for (size_t i = 0; i < n; i++) {
        d = fmax(d, fabs((double)a[i] - ref[i]));
        range = fmax(range, fabs((double)ref[i]));
    }
    return range > 0 ? d / range : d;
}

/* The sequence on backend be: y1 = W1 x, y2 = W2 x (independent), z = W3 y1 (reads y1),
 * rms_norm(x) in place (rewrites what the first two read), then 8 row copies ring -> window
 * and a projection of the window's rows. Outputs: z, y2, x, and the projection. Barriers
 * counted from before y1 to after each step into counts. */
static void sequence(halo_backend *be, const float *w, const float *xv, const float *ring,
                     float *out, uint64_t counts[9]) {
    halo_error err = {0};
    halo_tensor W1 = tensor(be, K, N, w), W2 = tensor(be, K, N, w + K * N);
    halo_tensor W3 = tensor(be, N, N, w + 2 * K * N);
    halo_tensor x = tensor(be, K, 1, xv), y1 = tensor(be, N, 1, NULL), y2 = tensor(be, N, 1, NULL);
    halo_tensor z = tensor(be, N, 1, NULL), r = tensor(be, K, ROWS, ring);
    halo_tensor win = tensor(be, K, 8, NULL), p = tensor(be, N, 8, NULL);
    CHECK_INT(be->ops->sync(be, &err), HALO_OK);
    bool vk = strcmp(be->ops->name, "cpu") != 0;
    uint64_t b0 = vk ? halo_backend_vulkan_barriers(be) : 0;
    uint64_t h0 = vk ? halo_backend_vulkan_host_barriers(be) : 0;
    uint64_t x0 = vk ? halo_backend_vulkan_xfer_barriers(be) : 0;
    uint64_t s0 = vk ? halo_backend_vulkan_submissions(be) : 0;
#define COUNT(i) counts[i] = vk ? halo_backend_vulkan_barriers(be) - b0 : 0
    be->ops->matmul(be, &W1, &x, 1, &y1);
    be->ops->matmul(be, &W2, &x, 1, &y2);
    COUNT(0);
    be->ops->matmul(be, &W3, &y1, 1, &z);
    COUNT(1);
    be->ops->rms_norm(be, &x, K, NULL, 1e-6f);
    COUNT(2);
    for (int i = 0; i < 8; i++) { /* ring rows 11, 12, ..., 15, 0, 1, 2 into the window */
        halo_tensor d = win, s = r;
        d.ne[1] = s.ne[1] = 1;
        d.offset = (uint64_t)i * K * 4;
        s.offset = (uint64_t)((11 + i) % ROWS) * K * 4;
        be->ops->copy(be, &d, &s);
    }
    COUNT(3);
    be->ops->matmul(be, &W1, &win, 1, &p);
    COUNT(4);
    CHECK_INT(be->ops->sync(be, &err), HALO_OK);
    COUNT(5); /* with the submissions' last barriers */
    counts[6] = vk ? halo_backend_vulkan_host_barriers(be) - h0 : 0;
    counts[7] = vk ? halo_backend_vulkan_submissions(be) - s0 : 0;
    counts[8] = vk ? halo_backend_vulkan_xfer_barriers(be) - x0 : 0;
#undef COUNT
    read(be, &z, out);
    read(be, &y2, out + N);
    read(be, &x, out + 2 * N);
    read(be, &p, out + 2 * N + K);
    halo_tensor all[] = {W1, W2, W3, x, y1, y2, z, r, win, p};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        be->ops->buf_free(be, all[i].buf);
}

static halo_backend *open_vk_env(const char *name, const char *value) {
    if (value)
        setenv(name, value, 1);
    else
        unsetenv(name);
    halo_backend *be = NULL;
    halo_error err = {0};
    halo_status st = halo_backend_vulkan_create(-1, &be, &err);
    unsetenv(name);
    return st ? NULL : be;
}

static halo_backend *open_vk(const char *barriers) {
    return open_vk_env("HALO_VK_BARRIERS", barriers);
}

static void barriers_only_between_dependent_commands(void) {
    size_t nw = 2 * K * N + N * N, no = 2 * N + K + 8 * N;
    float *w = malloc(nw * 4), *x = malloc(K * 4), *ring = malloc(K * ROWS * 4);
    float *ref = malloc(no * 4), *got = malloc(no * 4), *all = malloc(no * 4);
    uint32_t s = 99;
    for (size_t i = 0; i < nw; i++)
        w[i] = (float)((s = s * 1664525u + 1013904223u) >> 8) / 16777216.0f - 0.5f;
    for (size_t i = 0; i < K; i++)
        x[i] = (float)i / K - 0.3f;
    for (size_t i = 0; i < (size_t)K * ROWS; i++)
        ring[i] = (float)(i % 977) * 0.01f;
    uint64_t c_cpu[9], c[9], c_all[9], c_host[9], c_xfer[9], c_cmd[9];
    sequence(cpu, w, x, ring, ref, c_cpu);
    halo_backend *be = open_vk(NULL), *be_all = open_vk("all");
    halo_backend *be_host = open_vk_env("HALO_VK_BARRIER_HOST", "1");
    halo_backend *be_xfer = open_vk_env("HALO_VK_BARRIER_XFER", "1");
    halo_backend *be_cmd = open_vk_env("HALO_VK_COPY_SHADER", "0");
    CHECK(be && be_all && be_host && be_xfer && be_cmd);
    if (be && be_all && be_host && be_xfer && be_cmd) {
        sequence(be, w, x, ring, got, c);
        sequence(be_all, w, x, ring, all, c_all);
        float *hv = malloc(no * 4);
        sequence(be_host, w, x, ring, hv, c_host);
        double e_host = rel(hv, ref, no);
        sequence(be_xfer, w, x, ring, hv, c_xfer);
        double e_xfer = rel(hv, ref, no);
        sequence(be_cmd, w, x, ring, hv, c_cmd);
        double e_cmd = rel(hv, ref, no);
        free(hv);
        /* The transfer stage in a barrier's first scope: those that end a submission (each
         * names the host) and, with HALO_VK_COPY_SHADER=0, the one after the copy command
         * (by default the gathered copy is a compute dispatch, copy.comp); every one with
         * HALO_VK_BARRIER_XFER=1 (the hazard barriers and the submissions' last ones). */
        printf("  barriers waiting for transfers: %llu of %llu, with HALO_VK_COPY_SHADER=0 %llu "
               "of %llu (%.2e from the cpu), with HALO_VK_BARRIER_XFER=1 %llu of %llu (%.2e)\n",
               (unsigned long long)c[8], (unsigned long long)c[5], (unsigned long long)c_cmd[8],
               (unsigned long long)c_cmd[5], e_cmd, (unsigned long long)c_xfer[8],
               (unsigned long long)c_xfer[5], e_xfer);
        CHECK_INT(c[8], c[6]);
        CHECK_INT(c_cmd[8], c_cmd[6] + 1);
        CHECK(c_cmd[5] == c[5] && e_cmd <= 1e-5);
        CHECK(c[8] < c[5]);
        CHECK(c_xfer[8] >= c_xfer[5] && c_xfer[5] == c[5]);
        CHECK(e_xfer <= 1e-5);
        /* Only the barrier that ends a submission names the host (the host reads after its
         * fence): one a submission; with HALO_VK_BARRIER_HOST=1 every barrier does. */
        printf("  host barriers: %llu of %llu in %llu submissions, with HALO_VK_BARRIER_HOST=1 "
               "%llu of %llu (%.2e from the cpu)\n",
               (unsigned long long)c[6], (unsigned long long)c[5], (unsigned long long)c[7],
               (unsigned long long)c_host[6], (unsigned long long)c_host[5], e_host);
        CHECK(c[7] >= 1 && c[6] == c[7] && c[6] < c[5]);
        CHECK(c_host[6] == c_host[5] && c_host[5] == c[5]);
        CHECK(e_host <= 1e-5);
        double e = rel(got, ref, no), e_all = rel(all, ref, no);
        printf("  vs cpu: elided %.2e, all barriers %.2e; barriers after each step: elided "
               "%llu %llu %llu %llu %llu, all %llu %llu %llu %llu %llu\n",
               e, e_all, (unsigned long long)c[0], (unsigned long long)c[1],
               (unsigned long long)c[2], (unsigned long long)c[3], (unsigned long long)c[4],
               (unsigned long long)c_all[0], (unsigned long long)c_all[1],
               (unsigned long long)c_all[2], (unsigned long long)c_all[3],
               (unsigned long long)c_all[4]);
        CHECK(e <= 1e-5 && e_all <= 1e-5);
        CHECK_INT(c[0], 0);        /* y1 and y2 both read x: no barrier between them */
        CHECK_INT(c[1], 1);        /* z reads y1 */
        CHECK_INT(c[2], 1);        /* rms_norm rewrites x, whose readers z's barrier ordered */
        CHECK_INT(c[3] - c[2], 0); /* the copies are gathered, not yet recorded */
        CHECK_INT(c[4] - c[3], 1); /* one copy command touching nothing pending, then a barrier
                                      before the projection that reads what it wrote */
        CHECK(c_all[1] >= 2 && c_all[4] >= 5); /* all: one before every command */
    }
    if (be) be->ops->destroy(be);
    if (be_all) be_all->ops->destroy(be_all);
    if (be_host) be_host->ops->destroy(be_host);
    if (be_xfer) be_xfer->ops->destroy(be_xfer);
    if (be_cmd) be_cmd->ops->destroy(be_cmd);
    free(w), free(x), free(ring), free(ref), free(got), free(all);
}

/* Rows [d0, d0 + n) of dst = rows [s0, s0 + n) of src (both K wide). */
static void rows_copy(halo_backend *be, halo_tensor dst, int64_t d0, halo_tensor src, int64_t s0,
                      int64_t n) {
    dst.offset += (uint64_t)d0 * K * 4, src.offset += (uint64_t)s0 * K * 4;
    dst.ne[1] = src.ne[1] = n;
    be->ops->copy(be, &dst, &src);
}

/* The compressor's staging copies of a decode step (forward.c's compress(): stage = pend + the
 * new row, then pend = stage), then a copy whose source a dispatch rewrites in between (the
 * stage must be read then, not its source). Returns the barriers; pend and stage into out. */
static uint64_t staging(halo_backend *be, const float *pend0, const float *kv0, float *out) {
    halo_error err = {0};
    halo_tensor pend = tensor(be, K, 8, pend0), kv = tensor(be, K, 2, kv0);
    halo_tensor stage = tensor(be, K, 8, NULL);
    CHECK_INT(be->ops->sync(be, &err), HALO_OK);
    bool vk = strcmp(be->ops->name, "cpu") != 0;
    uint64_t b0 = vk ? halo_backend_vulkan_barriers(be) : 0;
    rows_copy(be, stage, 0, pend, 0, 3);
    rows_copy(be, stage, 3, kv, 1, 1);
    rows_copy(be, pend, 0, stage, 0, 4); /* forwarded: pend[3] = kv[1], the rest is in place */
    rows_copy(be, stage, 4, pend, 4, 2);
    halo_tensor p45 = pend;
    p45.offset += 4 * K * 4, p45.ne[1] = 2;
    be->ops->rms_norm(be, &p45, K, NULL, 1e-6f); /* rewrites the source of the copy above */
    rows_copy(be, pend, 6, stage, 4, 2);         /* the rows before the norm */
    CHECK_INT(be->ops->sync(be, &err), HALO_OK);
    uint64_t n = vk ? halo_backend_vulkan_barriers(be) - b0 : 0;
    read(be, &pend, out);
    read(be, &stage, out + 8 * K);
    be->ops->buf_free(be, pend.buf), be->ops->buf_free(be, kv.buf),
        be->ops->buf_free(be, stage.buf);
    return n;
}

static void copies_read_from_where_their_bytes_came(void) {
    float *pend = malloc(8 * K * 4), *kv = malloc(2 * K * 4), *ref = malloc(16 * K * 4);
    float *got = malloc(16 * K * 4);
    for (int i = 0; i < 8 * K; i++)
        pend[i] = (float)(i % 613) * 0.01f - 2.0f;
    for (int i = 0; i < 2 * K; i++)
        kv[i] = (float)(i % 101) * 0.03f + 1.0f;
    memset(ref, 0, 16 * K * 4);
    staging(cpu, pend, kv, ref);
    uint64_t nb[2] = {0};
    for (int f = 0; f < 2; f++) {
        setenv("HALO_VK_COPY_FWD", f ? "1" : "0", 1);
        halo_backend *be = open_vk(NULL);
        unsetenv("HALO_VK_COPY_FWD");
        CHECK(be != NULL);
        if (!be) continue;
        memset(got, 0, 16 * K * 4);
        nb[f] = staging(be, pend, kv, got);
        /* stage rows 5.. were never written on either backend: compare what both wrote */
        double e = rel(got, ref, 14 * K);
        printf("  staging copies, copy_fwd=%d: %.2e from the cpu, %llu barriers\n", f, e,
               (unsigned long long)nb[f]);
        CHECK(e <= 1e-5);
        be->ops->destroy(be);
    }
    CHECK(nb[1] < nb[0]);
    free(pend), free(kv), free(ref), free(got);
}

int main(void) {
    halo_error err = {0};
    halo_backend *probe = open_vk(NULL);
    if (!probe) {
        printf("skipped: no Vulkan device\n");
        return 77;
    }
    printf("device: %s\n", halo_backend_vulkan_device_name(probe));
    probe->ops->destroy(probe);
    if (halo_backend_cpu_create(1, true, &cpu, &err)) {
        fprintf(stderr, "cpu: %s\n", err.message);
        return 1;
    }
    RUN(barriers_only_between_dependent_commands);
    RUN(copies_read_from_where_their_bytes_came);
    cpu->ops->destroy(cpu);
    return check_report();
}
