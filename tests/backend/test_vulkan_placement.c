/* Where the Vulkan backend puts weights: each pool of the plan in its memory (device → device-
 * local, gpu-host → host-visible, managed refused), host memory the caller owns imported in
 * place with VK_EXT_external_memory_host (the GPU reads the caller's bytes: no copy), the copy
 * fallback when import is off, and device memory reached through the staging buffer (the
 * discrete-GPU path, forced on lavapipe with HALO_VK_STAGING=1). Then the plan's pools for the
 * tiny model under --weights device|host|auto on an APU and a discrete-GPU profile, placed as
 * the engine places a GPU backend's weights, with the embedding table read back through each
 * placement against the CPU backend. Skips (exit 77) when no Vulkan device works. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "backend/backend.h"
#include "backend/vulkan/vulkan.h"
#include "check.h"
#include "halo/gguf.h"
#include "halo/plan.h"
#include "halo/types.h"

static halo_backend *cpu;

/* A Vulkan backend made under the given HALO_VK_STAGING / HALO_VK_IMPORT (NULL: unset). */
static halo_backend *vk_open(const char *staging, const char *import) {
    if (staging)
        setenv("HALO_VK_STAGING", staging, 1);
    else
        unsetenv("HALO_VK_STAGING");
    if (import)
        setenv("HALO_VK_IMPORT", import, 1);
    else
        unsetenv("HALO_VK_IMPORT");
    halo_backend *be = NULL;
    halo_error err = {0};
    if (halo_backend_vulkan_create(-1, &be, &err) != HALO_OK) {
        fprintf(stderr, "vulkan: %s\n", err.message);
        return NULL;
    }
    return be;
}

/* lavapipe offers VK_EXT_external_memory_host; other drivers are not required to. */
static bool is_lavapipe(halo_backend *vk) {
    return strstr(halo_backend_vulkan_device_name(vk), "llvmpipe") != NULL;
}

/* rows `ids` of an f32 table [n, rows] in buffer b through the backend. */
static void embed_f32(halo_backend *be, halo_buf *b, uint64_t off, int64_t n, int64_t rows,
                      const int32_t *ids, uint32_t n_ids, float *out) {
    halo_tensor table = {.buf = b, .offset = off, .type = HALO_TYPE_F32, .ne = {n, rows, 1, 1}};
    halo_tensor o = {.type = HALO_TYPE_F32, .ne = {n, n_ids, 1, 1}};
    halo_error err = {0};
    CHECK_INT(be->ops->buf_alloc(be, halo_tensor_nbytes(&o), &o.buf, &err), HALO_OK);
    be->ops->embed(be, &table, ids, &o);
    CHECK_INT(be->ops->sync(be, &err), HALO_OK);
    CHECK_INT(be->ops->buf_read(be, o.buf, 0, out, halo_tensor_nbytes(&o), &err), HALO_OK);
    be->ops->buf_free(be, o.buf);
}

static void test_pools_map_to_memory_kinds(halo_backend *vk) {
    halo_error err = {0};
    halo_buf *b = NULL;
    CHECK_INT(vk->ops->buf_alloc_pool(vk, HALO_POOL_DEVICE, 4096, &b, &err), HALO_OK);
    halo_vk_memory m = halo_backend_vulkan_buf_memory(b, NULL);
    CHECK(m == HALO_VK_MEM_DEVICE_MAPPED || m == HALO_VK_MEM_DEVICE_STAGED);
    if (is_lavapipe(vk)) CHECK_INT(m, HALO_VK_MEM_DEVICE_MAPPED); /* one host-visible heap */
    vk->ops->buf_free(vk, b);
    CHECK_INT(vk->ops->buf_alloc_pool(vk, HALO_POOL_GPU_HOST, 4096, &b, &err), HALO_OK);
    CHECK_INT(halo_backend_vulkan_buf_memory(b, NULL), HALO_VK_MEM_HOST);
    vk->ops->buf_free(vk, b);
    CHECK_INT(vk->ops->buf_alloc_pool(vk, HALO_POOL_HOST, 4096, &b, &err), HALO_OK);
    CHECK_INT(halo_backend_vulkan_buf_memory(b, NULL), HALO_VK_MEM_HOST);
    vk->ops->buf_free(vk, b);
    CHECK_INT(vk->ops->buf_alloc_pool(vk, HALO_POOL_MANAGED, 4096, &b, &err), HALO_E_UNSUPPORTED);
    CHECK(strstr(err.message, "managed") != NULL);
    CHECK(b == NULL);
}

/* An f32 table of `rows` rows of n in fresh anonymous pages (as the loader's arena), starting
 * `skew` bytes into a page so the import has to start before it. */
enum { N = 256, ROWS = 12, SKEW = 96 };

static unsigned char *make_pages(size_t *len) {
    *len = 4 * 4096;
    unsigned char *p = mmap(NULL, *len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(p != MAP_FAILED);
    float *t = (float *)(p + SKEW);
    for (int i = 0; i < N * ROWS; i++)
        t[i] = (float)i * 0.25f - 100.0f;
    return p;
}

/* wrap_host: imported (lavapipe), copied into host-visible memory (import off) or into device
 * memory (a discrete GPU); either way the shader reads the caller's values. Imported, a later
 * change to the caller's bytes is what the GPU reads next (no copy). */
static void test_wrap_host(halo_backend *vk, halo_vk_memory want) {
    bool want_import = want == HALO_VK_MEM_IMPORTED;
    size_t len;
    unsigned char *p = make_pages(&len);
    float *t = (float *)(p + SKEW);
    halo_buf *b = NULL;
    halo_error err = {0};
    CHECK_INT(vk->ops->buf_wrap_host(vk, t, N * ROWS * 4, &b, &err), HALO_OK);
    const void *host = NULL;
    halo_vk_memory m = halo_backend_vulkan_buf_memory(b, &host);
    CHECK_INT(m, want);
    CHECK(want_import ? host == (const void *)t : host != (const void *)t);
    int32_t ids[3] = {0, 7, ROWS - 1};
    float out[3 * N];
    embed_f32(vk, b, 0, N, ROWS, ids, 3, out);
    for (int k = 0; k < 3; k++)
        CHECK(!memcmp(out + k * N, t + ids[k] * N, N * 4));
    /* a view at an offset inside the wrapped range */
    embed_f32(vk, b, 2 * N * 4, N, ROWS - 2, ids, 2, out);
    CHECK(!memcmp(out + N, t + (2 + 7) * N, N * 4));
    float before = t[7 * N + 3];
    t[7 * N + 3] = 12345.0f;
    embed_f32(vk, b, 0, N, ROWS, ids, 3, out);
    CHECK(out[N + 3] == (want_import ? 12345.0f : before));
    float got = 0;
    CHECK_INT(vk->ops->buf_read(vk, b, 7 * N * 4 + 12, &got, 4, &err), HALO_OK);
    CHECK(got == (want_import ? 12345.0f : before));
    vk->ops->buf_free(vk, b);
    munmap(p, len);
}

/* Staged device memory: writes and reads larger than the staging buffer (32 MiB) land intact,
 * at offsets, and shaders read and write it. */
/* A write from host memory the backend imported (the direct loader pins its staging buffers
 * so) is one GPU copy out of those pages, not through the staging buffer: the bytes arrive, the
 * pinned count says which path took them, and a write from memory not imported keeps the
 * staging path. Where import is off or refused, every write is staged. */
static void pinned_writes_copy_from_the_callers_pages(halo_backend *vk, halo_buf *b, uint64_t n,
                                                      const unsigned char *src,
                                                      unsigned char *dst) {
    halo_error err = {0};
    const uint64_t m = 3ull << 20; /* a few pages, written at odd offsets on both sides */
    unsigned char *pages = NULL;
    if (posix_memalign((void **)&pages, 4096, m + 8192)) return;
    halo_buf *pin = NULL;
    CHECK_INT(vk->ops->buf_wrap_host(vk, pages, m + 8192, &pin, &err), HALO_OK);
    bool imported = pin && halo_backend_vulkan_buf_memory(pin, NULL) == HALO_VK_MEM_IMPORTED;
    for (uint64_t i = 0; i < m; i++)
        pages[100 + i] = (unsigned char)~src[i];
    uint64_t before = halo_backend_vulkan_pinned_bytes(vk);
    CHECK_INT(vk->ops->buf_write(vk, b, n - m - 3, pages + 100, m, &err), HALO_OK);
    CHECK(halo_backend_vulkan_pinned_bytes(vk) - before == (imported ? m : 0));
    CHECK_INT(vk->ops->buf_read(vk, b, n - m - 3, dst, m, &err), HALO_OK);
    CHECK(!memcmp(dst, pages + 100, m));
    before = halo_backend_vulkan_pinned_bytes(vk);
    CHECK_INT(vk->ops->buf_write(vk, b, n - m - 3, src, m, &err), HALO_OK); /* not imported */
    CHECK(halo_backend_vulkan_pinned_bytes(vk) == before);
    CHECK_INT(vk->ops->buf_read(vk, b, n - m - 3, dst, m, &err), HALO_OK);
    CHECK(!memcmp(dst, src, m));
    printf("  pinned write: %s\n",
           imported ? "one copy from the imported pages" : "not imported: staged");
    vk->ops->buf_free(vk, pin);
    free(pages);
}

static void test_staged_device_memory(halo_backend *vk) {
    halo_error err = {0};
    halo_buf *b = NULL;
    const uint64_t n = (40ull << 20) + 12;
    CHECK_INT(vk->ops->buf_alloc_pool(vk, HALO_POOL_DEVICE, n, &b, &err), HALO_OK);
    if (!b) return;
    const void *host = (const void *)1;
    CHECK_INT(halo_backend_vulkan_buf_memory(b, &host), HALO_VK_MEM_DEVICE_STAGED);
    CHECK(host == NULL);
    unsigned char *src = malloc(n), *dst = malloc(n);
    for (uint64_t i = 0; i < n; i++)
        src[i] = (unsigned char)(i * 2654435761u >> 13);
    uint64_t zero[4] = {1, 1, 1, 1};
    CHECK_INT(vk->ops->buf_read(vk, b, n - 32, zero, 32, &err), HALO_OK); /* zeroed at birth */
    CHECK(zero[0] == 0 && zero[3] == 0);
    CHECK_INT(vk->ops->buf_write(vk, b, 0, src, n, &err), HALO_OK);
    CHECK_INT(vk->ops->buf_read(vk, b, 0, dst, n, &err), HALO_OK);
    CHECK(!memcmp(src, dst, n));
    CHECK_INT(vk->ops->buf_read(vk, b, (33ull << 20) + 5, dst, 1000, &err), HALO_OK);
    CHECK(!memcmp(src + (33ull << 20) + 5, dst, 1000));
    CHECK_INT(vk->ops->buf_write(vk, b, n + 1, src, 1, &err), HALO_E_OUT_OF_BOUNDS);
    pinned_writes_copy_from_the_callers_pages(vk, b, n, src, dst);
    /* an f32 table in staged memory through a shader, and its output in staged memory */
    float *t = (float *)src;
    for (int i = 0; i < N * ROWS; i++)
        t[i] = (float)i - 7.5f;
    CHECK_INT(vk->ops->buf_write(vk, b, 4096, t, N * ROWS * 4, &err), HALO_OK);
    int32_t ids[2] = {3, ROWS - 1};
    float out[2 * N];
    embed_f32(vk, b, 4096, N, ROWS, ids, 2, out);
    CHECK(!memcmp(out, t + 3 * N, N * 4) && !memcmp(out + N, t + (ROWS - 1) * N, N * 4));
    halo_tensor from = {.buf = b, .offset = 4096, .type = HALO_TYPE_F32, .ne = {N, 2, 1, 1}};
    halo_tensor to = {
        .buf = b, .offset = 4096 + 100 * N * 4, .type = HALO_TYPE_F32, .ne = {N, 2, 1, 1}};
    vk->ops->copy(vk, &to, &from);
    CHECK_INT(vk->ops->buf_read(vk, b, to.offset, out, 2 * N * 4, &err), HALO_OK);
    CHECK(!memcmp(out, t, 2 * N * 4));
    free(src);
    free(dst);
    vk->ops->buf_free(vk, b);
}

/* ---- the plan's pools for the tiny model ------------------------------------------------- */

/* Places every tensor in the pool the plan names, as the engine places a GPU backend's weights
 * (src/model/engine.c place_on_gpu): one buffer per device-side pool the tensors are copied
 * into, and the arena's range wrapped for gpu-host. Returns per-tensor buffers and offsets. */
typedef struct placed {
    halo_buf *pool_buf[HALO_POOL_COUNT], *arena_buf;
    halo_buf **buf;
    uint64_t *off;
} placed;

static void place(halo_backend *vk, const halo_gguf *g, const halo_mem_arena *a, const halo_plan *p,
                  placed *pl) {
    uint64_t n = halo_gguf_tensor_count(g), used[HALO_POOL_COUNT] = {0};
    const unsigned char *lo = NULL, *hi = NULL;
    memset(pl, 0, sizeof *pl);
    pl->buf = calloc(n, sizeof *pl->buf);
    pl->off = calloc(n, sizeof *pl->off);
    for (uint64_t i = 0; i < n; i++) {
        const halo_gguf_tensor *t = halo_gguf_tensor_at(g, i);
        const unsigned char *d = halo_mem_arena_tensor(a, i);
        if (p->tensor_pool[i] == HALO_POOL_GPU_HOST) {
            lo = !lo || d < lo ? d : lo;
            hi = !hi || d + t->n_bytes > hi ? d + t->n_bytes : hi;
        } else {
            pl->off[i] = used[p->tensor_pool[i]];
            used[p->tensor_pool[i]] += (t->n_bytes + 255) & ~255ull;
        }
    }
    halo_error err = {0};
    for (int k = 0; k < HALO_POOL_COUNT; k++)
        if (used[k])
            CHECK_INT(vk->ops->buf_alloc_pool(vk, (uint32_t)k, used[k], &pl->pool_buf[k], &err),
                      HALO_OK);
    if (lo)
        CHECK_INT(vk->ops->buf_wrap_host(vk, (void *)lo, (uint64_t)(hi - lo), &pl->arena_buf, &err),
                  HALO_OK);
    for (uint64_t i = 0; i < n; i++) {
        const halo_gguf_tensor *t = halo_gguf_tensor_at(g, i);
        const unsigned char *d = halo_mem_arena_tensor(a, i);
        if (p->tensor_pool[i] == HALO_POOL_GPU_HOST) {
            pl->buf[i] = pl->arena_buf;
            pl->off[i] = (uint64_t)(d - lo);
        } else {
            pl->buf[i] = pl->pool_buf[p->tensor_pool[i]];
            if (pl->buf[i])
                CHECK_INT(vk->ops->buf_write(vk, pl->buf[i], pl->off[i], d, t->n_bytes, &err),
                          HALO_OK);
        }
    }
}

static void unplace(halo_backend *vk, const halo_gguf *g, placed *pl) {
    (void)g;
    for (int k = 0; k < HALO_POOL_COUNT; k++)
        vk->ops->buf_free(vk, pl->pool_buf[k]);
    vk->ops->buf_free(vk, pl->arena_buf);
    free(pl->buf);
    free(pl->off);
}

/* The plan on `profile` under `weights`: every weight in the pool it names, in the memory that
 * pool means, and the embedding rows read through it equal to the CPU backend's. */
static void check_plan(halo_backend *vk, const halo_gguf *g, const halo_mem_arena *a,
                       const char *profile, const char *weights, halo_pool_kind want) {
    halo_machine m;
    halo_error err = {0};
    CHECK_INT(halo_machine_load_profile(profile, &m, &err), HALO_OK);
    halo_plan_options o = {.backend = HALO_BACKEND_VULKAN, .n_ctx = 4096};
    CHECK_INT(halo_weights_parse(weights, &o.weights, &err), HALO_OK);
    halo_plan *p = NULL;
    CHECK_INT(halo_plan_build(g, &m, &o, &p, &err), HALO_OK);
    if (!p) return;
    CHECK(!p->refused);
    uint64_t n = halo_gguf_tensor_count(g), emb = n;
    for (uint64_t i = 0; i < n; i++) {
        CHECK_INT(p->tensor_pool[i], want);
        if (!strcmp(halo_gguf_tensor_at(g, i)->name, "token_embd.weight")) emb = i;
    }
    placed pl;
    place(vk, g, a, p, &pl);
    halo_vk_memory kind = halo_backend_vulkan_buf_memory(pl.buf[0], NULL);
    if (want == HALO_POOL_DEVICE)
        CHECK(kind == HALO_VK_MEM_DEVICE_MAPPED || kind == HALO_VK_MEM_DEVICE_STAGED);
    else
        CHECK(kind == (is_lavapipe(vk) ? HALO_VK_MEM_IMPORTED : kind));
    CHECK(emb < n);
    if (emb < n && pl.buf[emb]) {
        const halo_gguf_tensor *t = halo_gguf_tensor_at(g, emb);
        halo_tensor tv = {.buf = pl.buf[emb],
                          .offset = pl.off[emb],
                          .type = t->type,
                          .ne = {t->ne[0], t->ne[1], 1, 1}};
        halo_tensor tc = tv, ov = {.type = HALO_TYPE_F32, .ne = {t->ne[0], 4, 1, 1}}, oc = ov;
        CHECK_INT(cpu->ops->buf_wrap_host(cpu, (void *)halo_mem_arena_tensor(a, emb), t->n_bytes,
                                          &tc.buf, &err),
                  HALO_OK);
        tc.offset = 0;
        uint64_t ob = halo_tensor_nbytes(&ov);
        CHECK_INT(vk->ops->buf_alloc(vk, ob, &ov.buf, &err), HALO_OK);
        CHECK_INT(cpu->ops->buf_alloc(cpu, ob, &oc.buf, &err), HALO_OK);
        int32_t ids[4] = {0, 1, (int32_t)t->ne[1] / 2, (int32_t)t->ne[1] - 1};
        vk->ops->embed(vk, &tv, ids, &ov);
        cpu->ops->embed(cpu, &tc, ids, &oc);
        CHECK_INT(vk->ops->sync(vk, &err), HALO_OK);
        CHECK_INT(cpu->ops->sync(cpu, &err), HALO_OK);
        float *x = malloc(ob), *y = malloc(ob);
        CHECK_INT(vk->ops->buf_read(vk, ov.buf, 0, x, ob, &err), HALO_OK);
        CHECK_INT(cpu->ops->buf_read(cpu, oc.buf, 0, y, ob, &err), HALO_OK);
        CHECK(!memcmp(x, y, ob)); /* a row decode is exact on both backends */
        free(x);
        free(y);
        vk->ops->buf_free(vk, ov.buf);
        cpu->ops->buf_free(cpu, oc.buf);
        cpu->ops->buf_free(cpu, tc.buf);
    }
    unplace(vk, g, &pl);
    halo_plan_free(p);
}

static void test_plan_pools(halo_backend *vk) {
    halo_gguf *g = NULL;
    halo_mem_arena *a = NULL;
    halo_error err = {0};
    CHECK_INT(halo_gguf_open("models/kjv-tiny.gguf", &g, &err), HALO_OK);
    if (!g) return;
    CHECK_INT(halo_mem_arena_load(g, NULL, NULL, &a, NULL, &err), HALO_OK);
    if (!a) {
        halo_gguf_close(g);
        return;
    }
    const char *apu = "strix-halo-128-stock", *dgpu = "rtx4090-24-host128";
    check_plan(vk, g, a, apu, "device", HALO_POOL_DEVICE);
    check_plan(vk, g, a, apu, "host", HALO_POOL_GPU_HOST);
    check_plan(vk, g, a, apu, "auto", HALO_POOL_DEVICE);
    check_plan(vk, g, a, dgpu, "auto", HALO_POOL_DEVICE);
    check_plan(vk, g, a, dgpu, "host", HALO_POOL_GPU_HOST);
    halo_mem_arena_free(a);
    halo_gguf_close(g);
}

static halo_backend *vk, *copy, *staged, *discrete;

/* The planner's view of the device, read without creating it, agrees with what the backend
 * does (lavapipe: one 2 GiB heap, device-local and host-visible, import and integer dots). */
static void test_probe_reads_the_heaps(void) {
    halo_vk_probe p;
    halo_error err = {0};
    CHECK_INT(halo_backend_vulkan_probe(-1, &p, &err), HALO_OK);
    CHECK_STR(p.name, halo_backend_vulkan_device_name(vk));
    CHECK(p.device_local > 0 && p.max_alloc > 0);
    /* (device memory as activations get it: a discrete GPU's weights may be staged anyway,
     * HALO_VK_WEIGHT_MEM) */
    halo_buf *b = NULL;
    CHECK_INT(vk->ops->buf_alloc(vk, 64, &b, &err), HALO_OK);
    CHECK(p.device_mapped ==
          (halo_backend_vulkan_buf_memory(b, NULL) == HALO_VK_MEM_DEVICE_MAPPED));
    vk->ops->buf_free(vk, b);
    if (is_lavapipe(vk)) {
        CHECK(!p.discrete && p.device_mapped && p.host_import && p.int_dot);
        CHECK(p.host_visible == 0); /* its one heap is device-local */
        CHECK(p.device_local >= (1ull << 30));
    }
    setenv("HALO_VK_DEVICE", "99", 1);
    CHECK_INT(halo_backend_vulkan_probe(-1, &p, &err), HALO_E_INVALID_ARG);
    CHECK_CONTAINS(err.message, "device 99");
    unsetenv("HALO_VK_DEVICE");
}

static void test_pools_map_to_memory(void) {
    test_pools_map_to_memory_kinds(vk);
}
static void test_wrap_host_imports_the_callers_pages(void) {
    if (is_lavapipe(vk)) test_wrap_host(vk, HALO_VK_MEM_IMPORTED);
}
static void test_wrap_host_copies_with_import_off(void) {
    test_wrap_host(copy, HALO_VK_MEM_HOST);
}
static void test_wrap_host_copies_to_a_discrete_gpus_memory(void) {
    test_wrap_host(discrete, HALO_VK_MEM_DEVICE_STAGED);
}
static void test_plan_pools_placed(void) {
    test_plan_pools(vk);
}
static void test_staged_device_memory_round_trips(void) {
    test_staged_device_memory(staged);
}
static void test_plan_pools_placed_staged(void) {
    test_plan_pools(staged);
}

/* A discrete GPU's BAR memory is mapped but uncached: large reads go through a GPU copy into
 * the staging buffer (HALO_VK_STAGED_READ=1 makes any mapped device memory read so). Bytes
 * a shader wrote and bytes the host wrote come back the same, at any offset, across the 32 MiB
 * staging buffer. */
static void test_mapped_reads_through_staging(void) {
    setenv("HALO_VK_STAGED_READ", "1", 1);
    halo_backend *be = vk_open(NULL, NULL);
    unsetenv("HALO_VK_STAGED_READ");
    CHECK(be != NULL);
    if (!be) return;
    halo_error err = {0};
    halo_buf *b = NULL;
    const uint64_t n = (33ull << 20) + 20;
    CHECK_INT(be->ops->buf_alloc(be, n, &b, &err), HALO_OK);
    bool mapped = halo_backend_vulkan_buf_memory(b, NULL) == HALO_VK_MEM_DEVICE_MAPPED;
    if (!mapped) printf("  (device memory is staged here: every read is a copy anyway)\n");
    unsigned char *src = malloc(n), *dst = malloc(n);
    for (uint64_t i = 0; i < n; i++)
        src[i] = (unsigned char)(i * 2654435761u >> 11);
    CHECK_INT(be->ops->buf_write(be, b, 0, src, n, &err), HALO_OK);
    memset(dst, 0, n);
    uint64_t before = halo_backend_vulkan_submissions(be);
    CHECK_INT(be->ops->buf_read(be, b, 0, dst, n, &err), HALO_OK);
    CHECK(!memcmp(src, dst, n));
    /* the read went through the 32 MiB staging buffer: two GPU copies, two submissions */
    CHECK(halo_backend_vulkan_submissions(be) >= before + 2);
    CHECK_INT(be->ops->buf_read(be, b, (32ull << 20) - 3, dst, 70000, &err), HALO_OK);
    CHECK(!memcmp(src + (32ull << 20) - 3, dst, 70000));
    /* a shader's output, read back staged */
    float *t = (float *)src;
    for (int i = 0; i < N * ROWS; i++)
        t[i] = (float)i * 0.25f;
    CHECK_INT(be->ops->buf_write(be, b, 8192, t, N * ROWS * 4, &err), HALO_OK);
    int32_t ids[2] = {1, ROWS - 2};
    float out[2 * N];
    embed_f32(be, b, 8192, N, ROWS, ids, 2, out);
    CHECK(!memcmp(out, t + N, N * 4) && !memcmp(out + N, t + (ROWS - 2) * N, N * 4));
    free(src);
    free(dst);
    be->ops->buf_free(be, b);
    be->ops->destroy(be);
}

int main(void) {
    halo_error err = {0};
    vk = vk_open(NULL, NULL);
    if (!vk) return 77;
    copy = vk_open(NULL, "0");
    staged = vk_open("1", NULL);
    discrete = vk_open("1", "device");
    unsetenv("HALO_VK_STAGING");
    unsetenv("HALO_VK_IMPORT");
    if (!copy || !staged || !discrete || halo_backend_cpu_create(1, true, &cpu, &err) != HALO_OK) {
        fprintf(stderr, "a second backend did not start: %s\n", err.message);
        return 1;
    }
    printf("device: %s\n", halo_backend_vulkan_device_name(vk));
    RUN(test_probe_reads_the_heaps);
    RUN(test_pools_map_to_memory);
    RUN(test_wrap_host_imports_the_callers_pages);
    RUN(test_wrap_host_copies_with_import_off);
    RUN(test_wrap_host_copies_to_a_discrete_gpus_memory);
    RUN(test_plan_pools_placed);
    RUN(test_staged_device_memory_round_trips);
    RUN(test_plan_pools_placed_staged);
    RUN(test_mapped_reads_through_staging);
    discrete->ops->destroy(discrete);
    staged->ops->destroy(staged);
    copy->ops->destroy(copy);
    vk->ops->destroy(vk);
    cpu->ops->destroy(cpu);
    return check_report();
}
