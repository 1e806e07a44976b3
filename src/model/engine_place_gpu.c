/* A GPU backend's weights, placed as the plan says. Tensors planned in device or managed memory
 * go into one buffer per pool: read straight from the file through a few pinned staging buffers
 * (src/mem/direct_load.c: O_DIRECT reads overlapped with the copies into the GPU), so no host
 * copy of them exists at any time and the page cache stays empty; a synthetic model's are made in
 * its host arena a batch at a time and copied from there. Tensors planned in GPU-visible host
 * memory stay where the arena loader read them, the arena's range pinned and mapped for the GPU
 * (cudaHostRegister); with none, the arena is freed. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "backend/vulkan/vulkan.h"
#include "core/error.h"
#include "mem/direct_load.h"
#include "mem/expert_device.h"
#include "mem/stream.h"
#include "model/engine_place.h"
#include "model/synthetic.h"

void halo_load_meter_report(const halo_load_progress *p, void *user) {
    halo_load_meter *m = user;
    if (!m->fn || m->finished) return;
    uint64_t in_phase =
        p->total ? (uint64_t)((double)p->done / (double)p->total * (double)m->phase) : m->phase;
    uint64_t done = m->base + (in_phase < m->phase ? in_phase : m->phase);
    if (done > m->total) done = m->total;
    /* A phase's last report is not the load's: only the last phase ends the bar. */
    if (done == m->total) m->finished = true;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    double t = (double)(now.tv_sec - m->t0.tv_sec) + (double)(now.tv_nsec - m->t0.tv_nsec) * 1e-9;
    halo_load_progress q = {done, m->total, t};
    m->fn(&q, m->user);
}

void halo_load_meter_next(halo_load_meter *m, uint64_t next) {
    m->base += m->phase;
    m->phase = next;
}

static bool in_host(uint8_t pool) {
    return pool == HALO_POOL_HOST || pool == HALO_POOL_GPU_HOST;
}
static bool in_gpu(uint8_t pool) {
    return pool == HALO_POOL_DEVICE || pool == HALO_POOL_MANAGED;
}

uint8_t *halo_engine_arena_pools(const halo_gguf *g, const halo_plan *plan, uint64_t *arena_bytes) {
    uint64_t n = halo_gguf_tensor_count(g);
    uint8_t *pools = malloc(n ? n : 1);
    *arena_bytes = 0;
    for (uint64_t i = 0; pools && i < n; i++) {
        bool host = in_host(plan->tensor_pool[i]);
        pools[i] = host ? HALO_POOL_HOST : HALO_POOL_DISK;
        if (host) *arena_bytes += halo_gguf_tensor_at(g, i)->n_bytes;
    }
    return pools;
}

uint64_t halo_engine_gpu_bytes(const halo_gguf *g, const halo_plan *plan) {
    uint64_t bytes = 0;
    for (uint64_t i = 0; i < halo_gguf_tensor_count(g); i++)
        if (in_gpu(plan->tensor_pool[i])) bytes += halo_gguf_tensor_at(g, i)->n_bytes;
    return bytes;
}

bool *halo_engine_host_tensors(const halo_gguf *g, const halo_plan *plan) {
    uint64_t n = halo_gguf_tensor_count(g);
    bool *host = calloc(n ? n : 1, sizeof *host);
    for (uint64_t i = 0; host && i < n; i++)
        host[i] = !in_gpu(plan->tensor_pool[i]);
    return host;
}

typedef struct gpu_place {
    halo_engine *e;
    const halo_plan *plan;
    halo_buf **buf; /* per tensor (gguf order) */
    uint64_t *off;
} gpu_place;

static halo_status bind_one(halo_weight *w, void *user, halo_error *err) {
    gpu_place *g = user;
    uint64_t i = (uint64_t)(w->src - halo_gguf_tensor_at(g->e->gguf, 0));
    /* A streamed expert tensor: no resident bytes (the layer's expert source has them). */
    if (g->plan->tensor_pool[i] == HALO_POOL_DISK && g->e->stream) return HALO_OK;
    if (!g->buf[i])
        return halo_fail(err, HALO_E_NOT_FOUND, "tensor '%s' was not placed", w->src->name);
    w->t.buf = g->buf[i];
    w->t.offset = g->off[i];
    return HALO_OK;
}

/* ---- the direct loader's sink: the backend's buffers ---------------------------------------- */

static halo_status sink_write(void *user, uint64_t i, uint64_t offset, const void *src, uint64_t n,
                              halo_error *err) {
    gpu_place *g = user;
    halo_backend *be = g->e->be;
    return be->ops->buf_write(be, g->buf[i], g->off[i] + offset, src, n, err);
}

/* Pinned staging: the backend's copies from it are DMA at full bus speed, not staged again. */
static halo_status sink_pin(void *user, void *mem, uint64_t bytes, void **handle, halo_error *err) {
    gpu_place *g = user;
    halo_backend *be = g->e->be;
    return be->ops->buf_wrap_host(be, mem, bytes, (halo_buf **)handle, err);
}

static void sink_unpin(void *user, void *handle) {
    gpu_place *g = user;
    g->e->be->ops->buf_free(g->e->be, handle);
}

/* ---- layout: pools split into buffers the backend can make ------------------------------- */

halo_status halo_engine_layout(const uint64_t *bytes, const uint8_t *pool, uint64_t n, uint64_t cap,
                               halo_gpu_layout *l, uint64_t *too_big) {
    int64_t open[HALO_POOL_COUNT];
    for (int k = 0; k < HALO_POOL_COUNT; k++)
        open[k] = -1;
    l->n_bufs = 0;
    if (!cap) cap = UINT64_MAX;
    for (uint64_t i = 0; i < n; i++) {
        l->buf_of[i] = UINT32_MAX;
        if (!bytes[i]) continue;
        uint8_t k = pool[i];
        /* 256-byte aligned starts: every backend's offset alignment (Vulkan's
         * minStorageBufferOffsetAlignment is at most 256). */
        uint64_t need = (bytes[i] + 255) & ~255ull;
        if (bytes[i] > cap) {
            *too_big = i;
            return HALO_E_NOMEM;
        }
        if (open[k] < 0 || l->size[open[k]] > cap - bytes[i]) {
            open[k] = (int64_t)l->n_bufs++;
            l->size[open[k]] = 0;
            l->pool[open[k]] = k;
        }
        l->buf_of[i] = (uint32_t)open[k];
        l->off[i] = l->size[open[k]];
        l->size[open[k]] += need;
        if (l->size[open[k]] > cap) l->size[open[k]] = cap; /* the last tensor's padding */
    }
    return HALO_OK;
}

/* The gpu-host tensors where the arena loader read them, wrapped in as few ranges as the
 * backend's largest buffer allows (an import is page-aligned outward: ranges stay 64 KiB under
 * the cap), each range whole tensors in address order. */
typedef struct host_span {
    const unsigned char *p;
    uint64_t n, i;
} host_span;

static int by_address(const void *a, const void *b) {
    const host_span *x = a, *y = b;
    return x->p < y->p ? -1 : x->p > y->p;
}

#define WRAP_SLACK (64ull << 10)

static halo_status wrap_arena(gpu_place *g, host_span *sp, uint64_t n_sp, uint64_t cap,
                              halo_error *err) {
    halo_engine *e = g->e;
    qsort(sp, n_sp, sizeof *sp, by_address);
    uint64_t limit = cap > 4 * WRAP_SLACK ? cap - WRAP_SLACK : cap;
    for (uint64_t a = 0; a < n_sp;) {
        const unsigned char *lo = sp[a].p, *hi = sp[a].p + sp[a].n;
        uint64_t b = a + 1;
        while (b < n_sp) {
            const unsigned char *end = sp[b].p + sp[b].n > hi ? sp[b].p + sp[b].n : hi;
            if ((uint64_t)(end - lo) > limit) break;
            hi = end;
            b++;
        }
        halo_buf *buf = NULL;
        halo_status st =
            e->be->ops->buf_wrap_host(e->be, (void *)lo, (uint64_t)(hi - lo), &buf, err);
        if (st)
            return halo_error_prefix(err,
                                     "weights in GPU-visible host memory (%.2f GiB from '%s'): ",
                                     (double)(hi - lo) / (double)(1ull << 30),
                                     halo_gguf_tensor_at(e->gguf, sp[a].i)->name);
        e->tensor_bufs[e->n_bufs++] = buf;
        for (uint64_t k = a; k < b; k++) {
            g->buf[sp[k].i] = buf;
            g->off[sp[k].i] = (uint64_t)(sp[k].p - lo);
        }
        a = b;
    }
    return HALO_OK;
}

/* The largest buffer the backend makes in one piece; 0: no limit (CUDA, HIP). Only Vulkan has
 * one today (maxMemoryAllocationSize); a backend.h query would serve every backend. */
static uint64_t buffer_cap(const halo_backend *be) {
    return halo_backend_vulkan_max_buffer(be);
}

/* ---- a synthetic model's device tensors ---------------------------------------------------- */

/* Made in the arena about 1 GiB at a time (one fill keeps every core busy), copied up, and their
 * pages given back: the host holds one batch beyond the host pools' tensors. HALO_SYNTH_BATCH_MIB
 * sets the batch (tests use a small one, so a small model takes several). */
static uint64_t synth_batch_bytes(void) {
    const char *v = getenv("HALO_SYNTH_BATCH_MIB");
    long mib = v ? strtol(v, NULL, 10) : 0;
    return (mib > 0 ? (uint64_t)mib : 1024) << 20;
}

static void give_back_pages(const void *p, uint64_t n) {
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t a = ((uintptr_t)p + page - 1) & ~(page - 1), b = ((uintptr_t)p + n) & ~(page - 1);
    if (b > a) madvise((void *)a, b - a, MADV_DONTNEED); /* a hint: failure only costs memory */
}

static halo_status synth_upload(gpu_place *g, const uint64_t *bytes, const halo_engine_params *p,
                                halo_load_meter *meter, halo_error *err) {
    halo_engine *e = g->e;
    uint64_t n = halo_gguf_tensor_count(e->gguf), total = 0, done = 0, cap = synth_batch_bytes();
    for (uint64_t i = 0; i < n; i++)
        total += bytes[i];
    bool *batch = calloc(n ? n : 1, sizeof *batch);
    halo_status st = batch ? HALO_OK : halo_fail(err, HALO_E_NOMEM, "out of memory");
    for (uint64_t first = 0; !st && first < n;) {
        uint64_t last = first, sum = 0;
        memset(batch, 0, n * sizeof *batch);
        for (; last < n && sum < cap; last++)
            if (bytes[last]) {
                batch[last] = true;
                sum += bytes[last];
            }
        st = halo_synth_fill_arena(p->model_path, e->gguf, e->arena, batch, p->threads, NULL,
                                   NULL, err);
        for (uint64_t i = first; !st && i < last; i++) {
            if (!batch[i]) continue;
            const unsigned char *src = halo_mem_arena_tensor(e->arena, i);
            st = e->be->ops->buf_write(e->be, g->buf[i], g->off[i], src, bytes[i], err);
            if (st) halo_error_prefix(err, "tensor '%s': ", halo_gguf_tensor_at(e->gguf, i)->name);
            give_back_pages(src, bytes[i]);
        }
        done += sum;
        halo_load_meter_report(&(halo_load_progress){done, total, 0}, meter);
        first = last;
    }
    free(batch);
    return st;
}

halo_status halo_engine_place_gpu(halo_engine *e, const halo_plan *plan,
                                  const halo_engine_params *synth, halo_load_meter *meter,
                                  halo_error *err) {
    const halo_backend_ops *op = e->be->ops;
    uint64_t n = halo_gguf_tensor_count(e->gguf), n_sp = 0, bad = 0, cap = buffer_cap(e->be);
    gpu_place g = {.e = e,
                   .plan = plan,
                   .buf = calloc(n + 1, sizeof *g.buf),
                   .off = calloc(n + 1, sizeof *g.off)};
    bool *want = calloc(n + 1, sizeof *want), direct = false;
    uint64_t *bytes = calloc(n + 1, sizeof *bytes), *size = calloc(n + 1, sizeof *size);
    uint32_t *buf_of = calloc(n + 1, sizeof *buf_of);
    uint8_t *buf_pool = calloc(n + 1, 1);
    host_span *sp = calloc(n + 1, sizeof *sp);
    halo_gpu_layout l = {.buf_of = buf_of, .off = g.off, .size = size, .pool = buf_pool};
    halo_status st = g.buf && g.off && want && bytes && size && buf_of && buf_pool && sp
                         ? HALO_OK
                         : halo_fail(err, HALO_E_NOMEM, "out of memory");
    for (uint64_t i = 0; !st && i < n; i++) {
        const halo_gguf_tensor *t = halo_gguf_tensor_at(e->gguf, i);
        const unsigned char *p = halo_mem_arena_tensor(e->arena, i);
        uint8_t pool = plan->tensor_pool[i];
        if (in_host(pool) && p) {
            sp[n_sp++] = (host_span){p, t->n_bytes, i};
        } else if (in_gpu(pool) && t->n_bytes) {
            bytes[i] = t->n_bytes;
            want[i] = !p; /* not in the arena: straight from the file */
            direct = direct || want[i];
        }
    }
    if (!st && halo_engine_layout(bytes, plan->tensor_pool, n, cap, &l, &bad))
        st = halo_fail(err, HALO_E_NOMEM,
                       "tensor '%s' (%llu bytes) is larger than the largest buffer the %s backend "
                       "can make (%llu bytes)",
                       halo_gguf_tensor_at(e->gguf, bad)->name, (unsigned long long)bytes[bad],
                       op->name, (unsigned long long)cap);
    for (uint32_t k = 0; !st && k < l.n_bufs; k++) {
        halo_buf *pb = NULL;
        st = op->buf_alloc_pool(e->be, buf_pool[k], size[k], &pb, err);
        if (st)
            halo_error_prefix(err, "weights in the %s pool (buffer %u, %.2f GiB): ",
                              halo_pool_name((halo_pool_kind)buf_pool[k]), k,
                              (double)size[k] / (double)(1ull << 30));
        else
            e->tensor_bufs[e->n_bufs++] = pb;
        for (uint64_t i = 0; !st && i < n; i++)
            if (buf_of[i] == k) g.buf[i] = pb;
    }
    /* Before the arena is pinned: copied after it, the mxfp4 mix's last shared-expert tensor
     * (pageable, its neighbours pinned) failed with cudaMemcpy's "invalid argument". */
    if (!st && synth) st = synth_upload(&g, bytes, synth, meter, err);
    if (!st && n_sp) st = wrap_arena(&g, sp, n_sp, cap ? cap : UINT64_MAX, err);
    if (!st && direct) {
        halo_direct_sink sink = {sink_write, sink_pin, sink_unpin, &g};
        halo_direct_options o = {.progress = halo_load_meter_report, .user = meter};
        st = halo_direct_load(e->gguf, want, &sink, &o, NULL, err);
    }
    if (!st) st = halo_weights_for_each(&e->w, bind_one, &g, err);
    /* Nothing stays in the arena: give its host memory back. */
    if (!st && !n_sp) {
        halo_mem_arena_free(e->arena);
        e->arena = NULL;
    }
    free(want);
    free(bytes);
    free(size);
    free(buf_of);
    free(buf_pool);
    free(sp);
    free(g.buf);
    free(g.off);
    return st;
}

/* ---- streamed experts --------------------------------------------------------------------- */

/* The host expert cache becomes staging between the file and the GPU's cache: big enough for two
 * tokens' experts of a layer (a miss round reads them together), at least 1 GiB when the plan's
 * cache is that large (more reads in flight), never more than the plan admitted. */
static uint64_t host_staging_bytes(const halo_engine *e, const halo_plan *plan) {
    uint64_t expert = halo_expert_device_slot_bytes(&e->w);
    uint64_t want = 2ull * e->hp.n_expert_used * expert;
    if (want < (1ull << 30)) want = 1ull << 30;
    return want < plan->expert_cache_admitted ? want : plan->expert_cache_admitted;
}

halo_status halo_engine_stream_gpu(halo_engine *e, const halo_plan *plan, halo_error *err) {
    /* The host cache is host memory (stream.c takes that pool only); the plan's expert cache,
     * in its pool (device memory on a discrete GPU), is the GPU's cache above it. */
    halo_plan host = *plan;
    host.expert_cache_pool = HALO_POOL_HOST;
    host.expert_cache_admitted = host_staging_bytes(e, plan);
    halo_status st = halo_stream_create(e->gguf, &e->w, &host, e->be, &e->stream, err);
    if (st) return st;
    halo_expert_device *d = NULL;
    halo_buf *buf = NULL;
    st = halo_expert_device_create(e->be, &e->w, plan->expert_cache_pool,
                                   plan->expert_cache_admitted, e->hp.n_expert_used, &buf, &d, err);
    if (st) return halo_error_prefix(err, "%s pool: ", halo_pool_name(plan->expert_cache_pool));
    e->tensor_bufs[e->n_bufs++] = buf;
    return HALO_OK;
}

void halo_engine_stream_gpu_free(halo_engine *e) {
    halo_expert_device_free(halo_expert_device_of(&e->w));
}
