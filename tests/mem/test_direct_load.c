/* The direct loader (src/mem/direct_load.c) on the CPU with a fake sink standing in for device
 * memory: its reads are block-aligned and cover exactly the wanted tensors, every byte reaches
 * the sink once and equals the file's, staging buffers are aligned and pinned/unpinned in pairs,
 * the page cache is dropped behind the reads, and short files and failing sinks are errors that
 * name the tensor. */
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"
#include "core/error.h"
#include "gguf/gguf_test_util.h"
#include "mem/direct_load.h"
#include "mem/shard_files.h"

enum { N_TENSORS = 12 };

static char *dir;

/* Sizes that cross chunk boundaries, leave padding between tensors and gaps over 1 MiB. */
static const int64_t sizes[N_TENSORS] = {1000,    4 << 20, 37,      3 << 20, 5 << 20, 1,
                                         6 << 20, 12345,   2 << 20, 7 << 20, 999,     4 << 20};

static void fill(uint8_t *p, uint64_t n, uint64_t seed) {
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    for (uint64_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        p[i] = (uint8_t)x;
    }
}

static void write_fixture(const char *path) {
    halo_gguf_writer *w = halo_gguf_writer_create();
    halo_gguf_writer_set_str(w, "general.architecture", "direct-load-test");
    uint8_t *data[N_TENSORS];
    for (int i = 0; i < N_TENSORS; i++) {
        char name[32];
        snprintf(name, sizeof name, "t%d", i);
        data[i] = malloc((size_t)sizes[i]);
        fill(data[i], (uint64_t)sizes[i], (uint64_t)i + 3);
        halo_gguf_writer_add_tensor(w, name, HALO_TYPE_I8, 1, &sizes[i], data[i]);
    }
    halo_error err = {0};
    CHECK_INT(halo_gguf_writer_write_file(w, path, &err), HALO_OK);
    halo_gguf_writer_free(w);
    for (int i = 0; i < N_TENSORS; i++)
        free(data[i]);
    int fd = open(path, O_RDONLY);
    fsync(fd); /* clean pages, so the loader can drop them */
    close(fd);
}

/* The fake sink: one host buffer per tensor, and a count of writes per byte. */
typedef struct fake {
    const halo_gguf *g;
    uint8_t *bytes[N_TENSORS];
    uint8_t *writes[N_TENSORS];
    int pins, unpins, misaligned_pins;
    int fail_at; /* the n-th write fails (0: none) */
    int n_writes;
    uint64_t progress_done, progress_total;
    int progress_calls;
} fake;

static halo_status fake_write(void *user, uint64_t i, uint64_t off, const void *src, uint64_t n,
                              halo_error *err) {
    fake *f = user;
    if (++f->n_writes == f->fail_at)
        return halo_fail(err, HALO_E_IO, "fake device: copy failed (injected)");
    if (i >= N_TENSORS || off + n > halo_gguf_tensor_at(f->g, i)->n_bytes)
        return halo_fail(err, HALO_E_OUT_OF_BOUNDS, "fake device: write past tensor end");
    memcpy(f->bytes[i] + off, src, n);
    for (uint64_t k = 0; k < n; k++)
        f->writes[i][off + k]++;
    return HALO_OK;
}

static halo_status fake_pin(void *user, void *mem, uint64_t bytes, void **handle, halo_error *err) {
    fake *f = user;
    (void)err;
    f->pins++;
    if ((uintptr_t)mem % 4096 || bytes % 4096) f->misaligned_pins++;
    *handle = mem;
    return HALO_OK;
}

static void fake_unpin(void *user, void *handle) {
    fake *f = user;
    f->unpins += handle != NULL;
}

static void fake_progress(const halo_load_progress *p, void *user) {
    fake *f = user;
    f->progress_calls++;
    f->progress_done = p->done;
    f->progress_total = p->total;
}

static void fake_init(fake *f, const halo_gguf *g) {
    memset(f, 0, sizeof *f);
    f->g = g;
    for (int i = 0; i < N_TENSORS; i++) {
        f->bytes[i] = calloc((size_t)sizes[i], 1);
        f->writes[i] = calloc((size_t)sizes[i], 1);
    }
}

static void fake_free(fake *f) {
    for (int i = 0; i < N_TENSORS; i++) {
        free(f->bytes[i]);
        free(f->writes[i]);
    }
}

/* The file's bytes, read without leaving them in the page cache (the loads after measure it). */
static uint8_t *file_bytes(const char *path) {
    int fd = open(path, O_RDONLY);
    off_t size = fd >= 0 ? lseek(fd, 0, SEEK_END) : 0;
    uint8_t *img = malloc(size > 0 ? (size_t)size : 1);
    CHECK(fd >= 0 && size > 0 && img && pread(fd, img, (size_t)size, 0) == (ssize_t)size);
    if (fd >= 0) {
        posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        close(fd);
    }
    return img;
}

/* Wanted tensors arrived whole and once, equal to the file; the others not at all. */
static void check_sink(fake *f, const bool *want, const uint8_t *img) {
    for (int i = 0; i < N_TENSORS; i++) {
        const halo_gguf_tensor *t = halo_gguf_tensor_at(f->g, (uint64_t)i);
        uint64_t bad = 0;
        for (uint64_t k = 0; k < t->n_bytes; k++)
            bad += f->writes[i][k] != (want[i] ? 1 : 0);
        CHECK(bad == 0);
        if (want[i]) CHECK(memcmp(img + t->file_offset, f->bytes[i], t->n_bytes) == 0);
    }
}

static void direct_plan_reads_are_block_aligned_and_cover_only_wanted_tensors(void) {
    char path[600];
    snprintf(path, sizeof path, "%s/fixture.gguf", dir);
    halo_gguf *g = NULL;
    halo_error err = {0};
    CHECK_INT(halo_gguf_open(path, &g, &err), HALO_OK);
    if (!g) return;
    bool want[N_TENSORS];
    for (int i = 0; i < N_TENSORS; i++)
        want[i] = i != 4 && i != 9; /* 5 and 7 MiB holes: past the 1 MiB read-through gap */
    const uint64_t chunk = 256 << 10;
    halo_direct_plan p;
    CHECK_INT(halo_direct_plan_make(g, want, chunk, &p, &err), HALO_OK);
    uint64_t wanted = 0;
    for (int i = 0; i < N_TENSORS; i++)
        wanted += want[i] ? (uint64_t)sizes[i] : 0;
    CHECK(p.tensor_bytes == wanted);
    CHECK(p.n_order == N_TENSORS - 2);
    uint64_t prev_end = 0;
    for (uint64_t c = 0; c < p.n_chunks; c++) {
        const halo_direct_chunk *k = &p.chunks[c];
        CHECK(k->off % 4096 == 0 && k->len % 4096 == 0 && k->len && k->len <= chunk);
        CHECK(k->need <= k->off + k->len && k->need > k->off);
        CHECK(k->off >= prev_end); /* no byte read twice */
        prev_end = k->off + k->len;
    }
    /* Every wanted byte inside some chunk; no chunk inside a skipped tensor's interior. */
    for (int i = 0; i < N_TENSORS; i++) {
        const halo_gguf_tensor *t = halo_gguf_tensor_at(g, (uint64_t)i);
        uint64_t covered = 0;
        for (uint64_t c = 0; c < p.n_chunks; c++) {
            const halo_direct_chunk *k = &p.chunks[c];
            uint64_t a = t->file_offset > k->off ? t->file_offset : k->off;
            uint64_t b =
                t->file_offset + t->n_bytes < k->need ? t->file_offset + t->n_bytes : k->need;
            covered += b > a ? b - a : 0;
        }
        if (want[i])
            CHECK(covered == t->n_bytes);
        else
            CHECK(covered < 8192); /* only the blocks shared with a neighbour */
    }
    CHECK(p.read_bytes < wanted + 6 * 4096 + (1 << 20));
    halo_direct_plan_free(&p);
    CHECK_INT(halo_direct_plan_make(g, NULL, 1000, &p, &err), HALO_E_INVALID_ARG);
    halo_gguf_close(g);
}

static void direct_load_delivers_each_byte_once_and_drops_page_cache(void) {
    char path[600];
    snprintf(path, sizeof path, "%s/fixture.gguf", dir);
    halo_gguf *g = NULL;
    halo_error err = {0};
    CHECK_INT(halo_gguf_open(path, &g, &err), HALO_OK);
    if (!g) return;
    uint8_t *img = file_bytes(path);
    bool all[N_TENSORS], some[N_TENSORS];
    for (int i = 0; i < N_TENSORS; i++) {
        all[i] = true;
        some[i] = i % 3 != 1;
    }
    /* Default staging (one 64 MiB chunk here); small staging with tensors spanning many chunks
     * and fewer buffers than chunks; buffered reads. */
    const halo_direct_options opts[] = {
        {0},
        {.staging_bytes = 64 << 10, .buffers = 3},
        {.staging_bytes = 1 << 20, .buffers = 2, .no_direct = true},
    };
    for (size_t k = 0; k < sizeof opts / sizeof opts[0]; k++)
        for (int sel = 0; sel < 2; sel++) {
            fake f;
            fake_init(&f, g);
            halo_direct_options o = opts[k];
            o.progress = fake_progress;
            o.user = &f;
            halo_direct_sink sink = {fake_write, fake_pin, fake_unpin, &f};
            halo_direct_stats st;
            const bool *want = sel ? some : all;
            CHECK_INT(halo_direct_load(g, want, &sink, &o, &st, &err), HALO_OK);
            uint64_t file = 0, cached = halo_file_cached_bytes(path, &file);
            CHECK(file > 0 && cached * 50 < file);
            if (cached * 50 >= file)
                fprintf(stderr, "  run %zu/%d: %llu of %llu bytes cached after\n", k, sel,
                        (unsigned long long)cached, (unsigned long long)file);
            check_sink(&f, want, img);
            CHECK(f.pins >= 2 && f.pins == f.unpins && f.misaligned_pins == 0);
            CHECK(f.progress_calls >= 1 && f.progress_done == f.progress_total);
            CHECK(f.progress_total == st.tensor_bytes);
            CHECK(st.staging_bytes <=
                  (uint64_t)f.pins * (o.staging_bytes ? o.staging_bytes : 64ull << 20));
            if (o.no_direct) CHECK(!st.direct);
            if (k == 1 && sel == 0)
                printf("%llu tensor bytes in %llu reads of <= 64 KiB (%s), %d staging buffers; "
                       "%llu of %llu file bytes cached after\n",
                       (unsigned long long)st.tensor_bytes, (unsigned long long)st.chunks,
                       st.direct ? "O_DIRECT" : "buffered", f.pins, (unsigned long long)cached,
                       (unsigned long long)file);
            fake_free(&f);
        }
    free(img);
    halo_gguf_close(g);
}

static void direct_load_reports_failures_naming_the_tensor(void) {
    char path[600];
    snprintf(path, sizeof path, "%s/trunc.gguf", dir);
    write_fixture(path);
    halo_gguf *g = NULL;
    halo_error err = {0};
    CHECK_INT(halo_gguf_open(path, &g, &err), HALO_OK);
    if (!g) return;
    fake f;
    fake_init(&f, g);
    halo_direct_sink sink = {fake_write, fake_pin, fake_unpin, &f};
    /* A failing sink (a device copy): the error names the tensor, buffers are unpinned. */
    f.fail_at = 5;
    halo_direct_options o = {.staging_bytes = 1 << 20, .buffers = 3};
    CHECK_INT(halo_direct_load(g, NULL, &sink, &o, NULL, &err), HALO_E_IO);
    CHECK_CONTAINS(err.message, "copy failed (injected)");
    CHECK_CONTAINS(err.message, "tensor t");
    CHECK(f.pins == f.unpins);
    f.fail_at = 0;
    /* The file shrinks after it was opened: the first tensor cut off is named. */
    const halo_gguf_tensor *t9 = halo_gguf_find_tensor(g, "t9");
    CHECK_INT(truncate(path, (off_t)(t9->file_offset + 1000)), 0);
    for (int direct = 0; direct < 2; direct++) {
        halo_direct_options od = {.staging_bytes = 1 << 20, .no_direct = direct == 0};
        CHECK_INT(halo_direct_load(g, NULL, &sink, &od, NULL, &err), HALO_E_TRUNCATED);
        CHECK_CONTAINS(err.message, "tensor t9");
        CHECK_CONTAINS(err.message, "trunc.gguf");
    }
    CHECK(f.pins == f.unpins);
    fake_free(&f);
    /* Gone after opening. */
    CHECK_INT(unlink(path), 0);
    CHECK_INT(halo_direct_load(g, NULL, &sink, NULL, NULL, &err), HALO_E_IO);
    CHECK_CONTAINS(err.message, "cannot open");
    halo_gguf_close(g);
}

int main(void) {
    dir = tmpdir_make();
    char path[600];
    snprintf(path, sizeof path, "%s/fixture.gguf", dir);
    write_fixture(path);
    RUN(direct_plan_reads_are_block_aligned_and_cover_only_wanted_tensors);
    RUN(direct_load_delivers_each_byte_once_and_drops_page_cache);
    RUN(direct_load_reports_failures_naming_the_tensor);
    tmpdir_remove(dir);
    return check_report();
}
