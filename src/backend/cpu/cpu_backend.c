/* CPU backend: creation, host buffers and the ops table. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "backend/cpu/cpu.h"
#include "core/error.h"
#include "halo/plan.h"
#include "halo/types.h"

int64_t halo_tensor_nelements(const halo_tensor *t) {
    return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
}

uint64_t halo_tensor_nbytes(const halo_tensor *t) {
    uint64_t bytes = 0;
    halo_type_bytes(t->type, (uint64_t)halo_tensor_nelements(t), &bytes);
    return bytes;
}

uint64_t cpu_row_bytes(const halo_tensor *t) {
    uint64_t bytes = 0;
    halo_type_bytes(t->type, (uint64_t)t->ne[0], &bytes);
    return bytes;
}

/* Buffers from 2 MiB up are mapped instead of malloc'd: the kernel's pages come zeroed, so
 * nothing is written until an op touches a page, and in huge pages where the system allows
 * them (THP on madvise): the engine's step scratch is sized for a 512-token batch (~0.3 GB on
 * DeepSeek V4 Flash's shapes), and setting it to zero through 4 KiB page faults took 0.3-1 s
 * of the first eval's time on the 2-core VM, while a decode step touches a small part of it. */
enum { MAP_MIN = 2u << 20, HUGE_PAGE = 2u << 20 };

static halo_status buf_alloc(halo_backend *be, uint64_t bytes, halo_buf **out, halo_error *err) {
    (void)be;
    halo_buf *b = calloc(1, sizeof *b);
    /* 64-byte alignment suits every SIMD load the quant kernels do. */
    size_t rounded = (size_t)((bytes + 63) & ~63ull);
    if (b && rounded >= MAP_MIN) {
        size_t len = (rounded + HUGE_PAGE - 1) & ~(size_t)(HUGE_PAGE - 1);
        void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m != MAP_FAILED) {
#ifdef MADV_HUGEPAGE
            madvise(m, len, MADV_HUGEPAGE); /* a hint: the buffer works without it */
#endif
            b->data = m;
            b->map_len = len;
        }
    } else if (b && rounded) {
        b->data = aligned_alloc(64, rounded);
        if (b->data) memset(b->data, 0, rounded);
    }
    if (!b || (rounded && !b->data)) {
        free(b);
        return halo_fail(err, HALO_E_NOMEM, "cpu backend: cannot allocate %llu bytes",
                         (unsigned long long)bytes);
    }
    b->size = bytes;
    b->owned = true;
    *out = b;
    return HALO_OK;
}

/* The CPU computes on host memory: host and gpu-host (which is host memory too) are the same
 * allocation here; device and managed memory belong to a GPU backend. */
static halo_status buf_alloc_pool(halo_backend *be, uint32_t pool, uint64_t bytes, halo_buf **out,
                                  halo_error *err) {
    if (pool != HALO_POOL_HOST && pool != HALO_POOL_GPU_HOST)
        return halo_fail(err, HALO_E_UNSUPPORTED, "cpu backend: cannot allocate in the %s pool",
                         halo_pool_name((halo_pool_kind)pool));
    return buf_alloc(be, bytes, out, err);
}

static void buf_free(halo_backend *be, halo_buf *b) {
    (void)be;
    if (!b) return;
    if (b->owned && b->map_len)
        munmap(b->data, b->map_len);
    else if (b->owned)
        free(b->data);
    free(b);
}

static halo_status buf_wrap_host(halo_backend *be, void *data, uint64_t bytes, halo_buf **out,
                                 halo_error *err) {
    (void)be;
    halo_buf *b = calloc(1, sizeof *b);
    if (!b) return halo_fail(err, HALO_E_NOMEM, "out of memory");
    b->data = data;
    b->size = bytes;
    *out = b;
    return HALO_OK;
}

static halo_status buf_write(halo_backend *be, halo_buf *b, uint64_t offset, const void *src,
                             uint64_t n, halo_error *err) {
    (void)be;
    if (offset > b->size || n > b->size - offset)
        return halo_fail(err, HALO_E_OUT_OF_BOUNDS, "cpu backend: write past a buffer's end");
    memcpy(b->data + offset, src, n);
    return HALO_OK;
}

static halo_status buf_read(halo_backend *be, const halo_buf *b, uint64_t offset, void *dst,
                            uint64_t n, halo_error *err) {
    (void)be;
    if (offset > b->size || n > b->size - offset)
        return halo_fail(err, HALO_E_OUT_OF_BOUNDS, "cpu backend: read past a buffer's end");
    memcpy(dst, b->data + offset, n);
    return HALO_OK;
}

void *cpu_scratch(cpu_backend *be, size_t bytes, const char *op) {
    void *p = malloc(bytes ? bytes : 1);
    if (p && be->fail_at && atomic_fetch_add(&be->n_scratch, 1) + 1 == be->fail_at) {
        free(p);
        p = NULL;
    }
    if (!p && !atomic_exchange(&be->failed, true)) be->failed_op = op;
    return p;
}

static halo_status sync(halo_backend *be, halo_error *err) {
    cpu_backend *cb = cpu_of(be);
    if (!atomic_load(&cb->failed)) return HALO_OK;
    const char *op = cb->failed_op ? cb->failed_op : "an op";
    atomic_store(&cb->failed, false);
    if (cb->op_status) {
        halo_status st = cb->op_status;
        if (err) *err = cb->op_error;
        cb->op_status = HALO_OK;
        return st;
    }
    return halo_fail(err, HALO_E_NOMEM, "cpu backend: out of memory for %s's scratch", op);
}

void cpu_destroy(halo_backend *be) {
    if (!be) return;
    halo_threadpool_free(cpu_of(be)->pool);
    free(cpu_of(be)->prof);
    free(be);
}

static const halo_backend_ops cpu_ops = {
    .name = "cpu",
    .destroy = cpu_destroy,
    .buf_alloc = buf_alloc,
    .buf_alloc_pool = buf_alloc_pool,
    .buf_free = buf_free,
    .buf_wrap_host = buf_wrap_host,
    .buf_write = buf_write,
    .buf_read = buf_read,
    .embed = cpu_embed,
    .matmul = cpu_matmul,
    .rms_norm = cpu_rms_norm,
    .rope = cpu_rope,
    .hc_pre = cpu_hc_pre,
    .hc_post = cpu_hc_post,
    .attention = cpu_attention,
    .pool = cpu_pool,
    .topk = cpu_topk,
    .moe = cpu_moe,
    .copy = cpu_copy,
    .sync = sync,
    .check = sync, /* ops run synchronously: nothing is queued */
};

halo_status halo_backend_cpu_create(uint32_t threads, bool precise, halo_backend **out,
                                    halo_error *err) {
    cpu_backend *be = calloc(1, sizeof *be);
    if (be) be->pool = halo_threadpool_create(threads);
    if (!be || !be->pool) {
        free(be);
        return halo_fail(err, HALO_E_NOMEM, "cpu backend: cannot start its thread pool");
    }
    be->base.ops = &cpu_ops;
    const char *rows1 = getenv("HALO_CPU_ROWS1");
    be->rows1_max = rows1 && atoi(rows1) >= 16 ? atoi(rows1) : 64;
    const char *pin = getenv("HALO_CPU_PIN");
    if (pin && *pin && *pin != '0') halo_threadpool_pin(be->pool);
    const char *prof = getenv("HALO_CPU_PROFILE");
    if (prof && *prof && *prof != '0' && (be->prof = calloc(1, sizeof *be->prof))) {
        be->prof_ops = cpu_profile_ops(&cpu_ops);
        be->base.ops = &be->prof_ops;
        halo_threadpool_set_stats(be->pool, true);
    }
    be->precise = precise;
    atomic_init(&be->failed, false);
    atomic_init(&be->n_scratch, 0);
    const char *fail = getenv("HALO_TEST_FAIL_SCRATCH");
    be->fail_at = fail ? strtoll(fail, NULL, 10) : 0;
    *out = &be->base;
    return HALO_OK;
}
