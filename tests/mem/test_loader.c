/* The loader on a real (non-sparse) fixture written by halo's writer: bytes identical to the
 * file, the file's page cache dropped behind the reads (mincore), peak RSS within the model's
 * bytes + 5 %, and clean errors for a file truncated or made unreadable after it was opened. */
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "gguf/gguf_test_util.h"
#include "halo/plan.h"

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif

enum { N_TENSORS = 12 };

static char *dir;

/* Sizes chosen to cross chunk boundaries and leave alignment padding between tensors. */
static const int64_t sizes[N_TENSORS] = {1000,    4 << 20, 37,      3 << 20, 5 << 20, 1,
                                         6 << 20, 12345,   2 << 20, 7 << 20, 999,     4 << 20};

static uint64_t fill(uint8_t *p, uint64_t n, uint64_t seed) {
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    for (uint64_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        p[i] = (uint8_t)x;
    }
    return n;
}

/* Writes the fixture (I8 tensors of random bytes, ~39 MiB) and syncs it to disk so its pages are
 * clean (dirty pages cannot be dropped). Returns the tensor bytes. */
static uint64_t write_fixture(const char *path) {
    halo_gguf_writer *w = halo_gguf_writer_create();
    halo_gguf_writer_set_str(w, "general.architecture", "loader-test");
    uint8_t *data[N_TENSORS];
    uint64_t total = 0;
    for (int i = 0; i < N_TENSORS; i++) {
        char name[32];
        snprintf(name, sizeof name, "t%d", i);
        data[i] = malloc((size_t)sizes[i]);
        total += fill(data[i], (uint64_t)sizes[i], (uint64_t)i + 7);
        halo_gguf_writer_add_tensor(w, name, HALO_TYPE_I8, 1, &sizes[i], data[i]);
    }
    halo_error err = {0};
    CHECK_INT(halo_gguf_writer_write_file(w, path, &err), HALO_OK);
    halo_gguf_writer_free(w);
    for (int i = 0; i < N_TENSORS; i++)
        free(data[i]);
    int fd = open(path, O_RDONLY);
    fsync(fd);
    close(fd);
    return total;
}

static uint64_t status_kb(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    uint64_t v = 0;
    size_t n = strlen(key);
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, key, n)) v = strtoull(line + n + 1, NULL, 10);
    if (f) fclose(f);
    return v;
}

typedef struct progress_log {
    int calls;
    uint64_t last_done, total;
} progress_log;

static void on_progress(const halo_load_progress *p, void *user) {
    progress_log *log = user;
    log->calls++;
    log->last_done = p->done;
    log->total = p->total;
}

static void loader_reads_bytes_identical_and_drops_page_cache(void) {
    char path[600];
    snprintf(path, sizeof path, "%s/fixture.gguf", dir);
    uint64_t total = write_fixture(path);
    halo_gguf *g = NULL;
    halo_error err = {0};
    CHECK_INT(halo_gguf_open(path, &g, &err), HALO_OK);
    if (!g) return;

    /* Reset the peak RSS (Linux: clear_refs 5), so VmHWM measures the load alone. */
    FILE *cr = fopen("/proc/self/clear_refs", "w");
    bool hwm = cr && fputs("5", cr) >= 0;
    if (cr) fclose(cr);
    uint64_t before = status_kb("VmRSS:");

    progress_log log = {0};
    halo_load_options o = {.threads = 3, .progress = on_progress, .user = &log};
    halo_load_stats stats;
    halo_mem_arena *a = NULL;
    CHECK_INT(halo_mem_arena_load(g, NULL, &o, &a, &stats, &err), HALO_OK);
    uint64_t peak = status_kb("VmHWM:");
    if (!a) {
        fprintf(stderr, "%s\n", err.message);
        halo_gguf_close(g);
        return;
    }
#ifndef UNDER_ASAN
    if (hwm && peak > before)
        CHECK((double)(peak - before) * 1024 <= (double)total * 1.05 + 4096 * 1024.0);
    else
        fprintf(stderr, "note: VmHWM reset unavailable; peak RSS not checked\n");
#else
    (void)peak;
    (void)before;
    (void)hwm;
#endif
    printf("loaded %llu bytes (%s, %u threads): peak RSS +%llu KiB, %llu of %llu file bytes "
           "cached after\n",
           (unsigned long long)stats.bytes_read, stats.direct ? "O_DIRECT" : "buffered",
           stats.threads, (unsigned long long)(peak > before ? peak - before : 0),
           (unsigned long long)stats.cached_after, (unsigned long long)stats.file_bytes);
    /* The file's pages in the page cache after loading: < 2 % of its size. */
    CHECK(stats.file_bytes > total);
    CHECK(stats.cached_after * 50 < stats.file_bytes);
    if (stats.cached_after * 50 >= stats.file_bytes)
        fprintf(stderr, "cached after load: %llu of %llu bytes\n",
                (unsigned long long)stats.cached_after, (unsigned long long)stats.file_bytes);
    CHECK(stats.bytes_read >= total && stats.bytes_read < total + 64 * 1024);
    CHECK_INT(stats.threads, 3);
    CHECK(log.calls >= 1);
    CHECK(log.last_done == log.total && log.total == stats.bytes_read);

    for (uint64_t i = 0; i < halo_gguf_tensor_count(g); i++) {
        const halo_gguf_tensor *t = halo_gguf_tensor_at(g, i);
        uint8_t *want = malloc(t->n_bytes);
        CHECK_INT(halo_gguf_read_tensor(g, t, want, t->n_bytes, &err), HALO_OK);
        const void *got = halo_mem_arena_tensor(a, i);
        CHECK(got && memcmp(got, want, t->n_bytes) == 0);
        free(want);
    }
    CHECK(halo_mem_arena_tensor(a, halo_gguf_tensor_count(g)) == NULL);
    halo_mem_arena_free(a);
    halo_gguf_close(g);
}

/* Tensors planned for disk are not read; a GPU pool cannot be loaded yet. */
static void loader_skips_streamed_tensors_and_refuses_gpu_pools(void) {
    char path[600];
    snprintf(path, sizeof path, "%s/fixture.gguf", dir);
    halo_gguf *g = NULL;
    halo_error err = {0};
    CHECK_INT(halo_gguf_open(path, &g, &err), HALO_OK);
    if (!g) return;
    uint8_t pools[N_TENSORS];
    for (int i = 0; i < N_TENSORS; i++)
        pools[i] = i % 2 ? HALO_POOL_DISK : HALO_POOL_HOST;
    halo_mem_arena *a = NULL;
    halo_load_stats stats;
    CHECK_INT(halo_mem_arena_load(g, pools, NULL, &a, &stats, &err), HALO_OK);
    for (int i = 0; i < N_TENSORS; i++)
        CHECK((halo_mem_arena_tensor(a, (uint64_t)i) != NULL) == (i % 2 == 0));
    CHECK(stats.bytes_read < 20 << 20);
    halo_mem_arena_free(a);
    pools[3] = HALO_POOL_DEVICE;
    CHECK_INT(halo_mem_arena_load(g, pools, NULL, &a, &stats, &err), HALO_E_UNSUPPORTED);
    CHECK_CONTAINS(err.message, "t3");
    CHECK(a == NULL);
    halo_gguf_close(g);
}

/* The file shrinks between opening and loading: the error names the first tensor cut off. */
static void loader_reports_truncated_file_naming_the_tensor(void) {
    char path[600];
    snprintf(path, sizeof path, "%s/trunc.gguf", dir);
    write_fixture(path);
    halo_gguf *g = NULL;
    halo_error err = {0};
    CHECK_INT(halo_gguf_open(path, &g, &err), HALO_OK);
    if (!g) return;
    const halo_gguf_tensor *t9 = halo_gguf_find_tensor(g, "t9");
    CHECK_INT(truncate(path, (off_t)(t9->file_offset + 1000)), 0);
    halo_mem_arena *a = NULL;
    for (int direct = 0; direct < 2; direct++) {
        halo_load_options o = {.threads = 2, .no_direct = direct == 0};
        CHECK_INT(halo_mem_arena_load(g, NULL, &o, &a, NULL, &err), HALO_E_TRUNCATED);
        CHECK_CONTAINS(err.message, "tensor t9");
        CHECK_CONTAINS(err.message, "trunc.gguf");
        CHECK(a == NULL);
    }
    halo_gguf_close(g);
}

/* The file disappears, or becomes something unreadable, after opening. */
static void loader_reports_unreadable_file(void) {
    char path[600];
    snprintf(path, sizeof path, "%s/gone.gguf", dir);
    write_fixture(path);
    halo_gguf *g = NULL;
    halo_error err = {0};
    CHECK_INT(halo_gguf_open(path, &g, &err), HALO_OK);
    if (!g) return;
    halo_mem_arena *a = NULL;
    CHECK_INT(unlink(path), 0);
    CHECK_INT(halo_mem_arena_load(g, NULL, NULL, &a, NULL, &err), HALO_E_IO);
    CHECK_CONTAINS(err.message, "gone.gguf: cannot open");
    CHECK_INT(mkdir(path, 0700), 0);
    CHECK_INT(halo_mem_arena_load(g, NULL, NULL, &a, NULL, &err), HALO_E_IO);
    CHECK_CONTAINS(err.message, "not a regular file");
    CHECK(a == NULL);
    rmdir(path);
    halo_gguf_close(g);
}

int main(void) {
    dir = tmpdir_make();
    RUN(loader_reads_bytes_identical_and_drops_page_cache);
    RUN(loader_skips_streamed_tensors_and_refuses_gpu_pools);
    RUN(loader_reports_truncated_file_naming_the_tensor);
    RUN(loader_reports_unreadable_file);
    tmpdir_remove(dir);
    return check_report();
}
