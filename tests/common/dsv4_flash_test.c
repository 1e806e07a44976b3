/* Writes DeepSeek V4 Flash's real tensor table as a sparse full-size GGUF (80.76 GiB of tensor
 * data in ds4's q2 mix, no weight bytes on disk) and inspects it back: count, total bytes,
 * shapes, types and the metadata llama.cpp's deepseek4 loader reads.
 *
 * Run from the repository root (CTest does). `dsv4_flash_test --keep DIR` leaves the files in
 * DIR for other tools (halo inspect, llama.cpp) to open. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>

#include "check.h"
#include "common/dsv4_flash.h"
#include "halo/gguf.h"

/* The q2 mix must add up to ds4's published 80.76 GiB (docs/dsv4-flash-table.md derives it). */
#define DS4_Q2_TENSOR_BYTES UINT64_C(86714775900)
#define LLAMA_CPP_TENSOR_BYTES UINT64_C(156373008732)

static const char *keep_dir;
static char tmp_dir[64];

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static const char *out_dir(void) {
    if (keep_dir) return keep_dir;
    if (!tmp_dir[0]) {
        snprintf(tmp_dir, sizeof(tmp_dir), "/tmp/halo-dsv4-XXXXXX");
        if (!mkdtemp(tmp_dir)) tmp_dir[0] = '\0';
    }
    return tmp_dir;
}

static void dsv4_flash_table_has_1328_tensors_in_both_mixes(void) {
    CHECK_INT(dsv4_flash_for_each_tensor(DSV4_MIX_DS4_Q2, NULL, NULL), DSV4_FLASH_TENSOR_COUNT);
    CHECK_INT(dsv4_flash_for_each_tensor(DSV4_MIX_LLAMA_CPP, NULL, NULL), DSV4_FLASH_TENSOR_COUNT);
}

static void dsv4_flash_q2_mix_adds_up_to_80_76_gib(void) {
    uint64_t b = dsv4_flash_tensor_bytes(DSV4_MIX_DS4_Q2);
    CHECK_INT(b, DS4_Q2_TENSOR_BYTES);
    double gib = (double)b / 1073741824.0;
    CHECK(gib > 80.755 && gib < 80.765);
    CHECK_INT(dsv4_flash_tensor_bytes(DSV4_MIX_LLAMA_CPP), LLAMA_CPP_TENSOR_BYTES);
}

static void dsv4_flash_add_to_writer_passes_writer_errors_on(void) {
    halo_gguf_writer *w = halo_gguf_writer_create();
    CHECK(w != NULL);
    if (!w) return;
    halo_error err = {0};
    CHECK_INT(dsv4_flash_add_to_writer(w, DSV4_MIX_DS4_Q2, &err), HALO_OK);
    /* A second table in the same writer repeats every key: the first duplicate is reported. */
    CHECK_INT(dsv4_flash_add_to_writer(w, DSV4_MIX_DS4_Q2, &err), HALO_E_DUPLICATE);
    CHECK_CONTAINS(err.message, "general.architecture");
    halo_gguf_writer_free(w);
}

/* Writes the sparse file for a mix, reopens it and checks the whole table against the source. */
typedef struct cmp_ctx {
    const halo_gguf *g;
    uint64_t index;
    uint64_t mismatches;
} cmp_ctx;

static int compare_one(const dsv4_tensor *t, void *user) {
    cmp_ctx *c = user;
    const halo_gguf_tensor *r = halo_gguf_tensor_at(c->g, c->index++);
    bool ok = r && strcmp(r->name, t->name) == 0 && r->type == t->type && r->n_dims == t->n_dims &&
              r->n_bytes == t->n_bytes;
    for (int d = 0; ok && d < HALO_GGUF_MAX_DIMS; d++)
        ok = r->ne[d] == t->ne[d];
    if (!ok && c->mismatches++ < 5)
        fprintf(stderr, "tensor %" PRIu64 " (%s) differs after reading back\n", c->index - 1,
                t->name);
    return 0;
}

static void write_and_inspect(dsv4_mix mix, const char *file, uint64_t want_bytes) {
    char path[256];
    snprintf(path, sizeof(path), "%s/%s", out_dir(), file);
    halo_error err = {0};

    double t0 = now_s();
    halo_gguf_writer *w = halo_gguf_writer_create();
    CHECK(w != NULL);
    if (!w) return;
    CHECK_INT(dsv4_flash_add_to_writer(w, mix, &err), HALO_OK);
    halo_status st = halo_gguf_writer_write_file(w, path, &err);
    CHECK_INT(st, HALO_OK);
    if (st != HALO_OK) fprintf(stderr, "write %s: %s\n", path, err.message);
    halo_gguf_writer_free(w);
    double t1 = now_s();

    halo_gguf *g = NULL;
    st = halo_gguf_open(path, &g, &err);
    CHECK_INT(st, HALO_OK);
    if (st != HALO_OK) {
        fprintf(stderr, "open %s: %s\n", path, err.message);
        return;
    }
    uint64_t n = halo_gguf_tensor_count(g), bytes = 0;
    for (uint64_t i = 0; i < n; i++)
        bytes += halo_gguf_tensor_at(g, i)->n_bytes;
    double t2 = now_s();

    CHECK_INT(n, DSV4_FLASH_TENSOR_COUNT);
    CHECK_INT(bytes, want_bytes);
    cmp_ctx c = {g, 0, 0};
    dsv4_flash_for_each_tensor(mix, compare_one, &c);
    CHECK_INT(c.mismatches, 0);

    /* The file's size covers all data, yet only the header occupies blocks. */
    struct stat sb;
    CHECK(stat(path, &sb) == 0);
    CHECK((uint64_t)sb.st_size >= halo_gguf_shard_data_offset(g, 0) + want_bytes);
    CHECK((uint64_t)sb.st_blocks * 512 < (uint64_t)64 << 20);

    /* A sample of the shapes and types, spelled out independently of the table code. */
    const halo_gguf_tensor *t = halo_gguf_find_tensor(g, "blk.42.ffn_down_exps.weight");
    CHECK(t && t->ne[0] == 2048 && t->ne[1] == 4096 && t->ne[2] == 256);
    if (t && mix == DSV4_MIX_DS4_Q2) CHECK_INT(t->type, HALO_TYPE_Q2_K);
    t = halo_gguf_find_tensor(g, "blk.2.indexer.attn_q_b.weight");
    CHECK(t && t->ne[0] == 1024 && t->ne[1] == 8192);
    t = halo_gguf_find_tensor(g, "blk.3.attn_compressor_ape.weight");
    CHECK(t && t->ne[0] == 512 && t->ne[1] == 128);
    CHECK(halo_gguf_find_tensor(g, "blk.3.indexer.proj.weight") == NULL);
    CHECK(halo_gguf_find_tensor(g, "blk.1.attn_compressor_kv.weight") == NULL);
    CHECK(halo_gguf_find_tensor(g, "blk.2.exp_probs_b.bias") == NULL);
    t = halo_gguf_find_tensor(g, "blk.2.ffn_gate_tid2eid.weight");
    CHECK(t && t->type == HALO_TYPE_I32 && t->ne[0] == 6 && t->ne[1] == 129280);
    t = halo_gguf_find_tensor(g, "output_hc_fn.weight");
    CHECK(t && t->ne[0] == 16384 && t->ne[1] == 4);

    uint32_t u = 0;
    CHECK_INT(halo_gguf_get_u32(g, "deepseek4.block_count", &u, &err), HALO_OK);
    CHECK_INT(u, 43);
    CHECK_INT(halo_gguf_get_u32(g, "deepseek4.embedding_length_out", &u, &err), HALO_OK);
    CHECK_INT(u, 16384);
    CHECK_INT(halo_gguf_get_u32(g, "deepseek4.expert_gating_func", &u, &err), HALO_OK);
    CHECK_INT(u, 4);
    const halo_gguf_kv *ratios = NULL;
    CHECK_INT(halo_gguf_get_array(g, "deepseek4.attention.compress_ratios", &ratios, &err),
              HALO_OK);
    if (ratios) {
        CHECK_INT(ratios->count, 44);
        uint64_t r2 = 0, r3 = 0, r43 = 1;
        halo_gguf_array_u64(ratios, 2, &r2, &err);
        halo_gguf_array_u64(ratios, 3, &r3, &err);
        halo_gguf_array_u64(ratios, 43, &r43, &err);
        CHECK(r2 == 4 && r3 == 128 && r43 == 0);
    }
    const char *s = NULL;
    CHECK_INT(halo_gguf_get_str(g, "tokenizer.ggml.model", &s, &err), HALO_OK);
    CHECK_STR(s, "no_vocab");

    printf("  %s: %" PRIu64 " tensors, %" PRIu64 " bytes (%.4f GiB), file %lld bytes, "
           "%lld on disk; write %.3f s, open+sum %.3f s\n",
           path, n, bytes, (double)bytes / 1073741824.0, (long long)sb.st_size,
           (long long)sb.st_blocks * 512, t1 - t0, t2 - t1);
    halo_gguf_close(g);
    if (!keep_dir) unlink(path);
}

static void dsv4_flash_q2_sparse_file_writes_and_reads_back(void) {
    write_and_inspect(DSV4_MIX_DS4_Q2, "dsv4-flash-q2-sparse.gguf", DS4_Q2_TENSOR_BYTES);
}

static void dsv4_flash_llama_cpp_sparse_file_writes_and_reads_back(void) {
    write_and_inspect(DSV4_MIX_LLAMA_CPP, "dsv4-flash-llamacpp-sparse.gguf",
                      LLAMA_CPP_TENSOR_BYTES);
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--keep") == 0) keep_dir = argv[2];
    RUN(dsv4_flash_table_has_1328_tensors_in_both_mixes);
    RUN(dsv4_flash_q2_mix_adds_up_to_80_76_gib);
    RUN(dsv4_flash_add_to_writer_passes_writer_errors_on);
    RUN(dsv4_flash_q2_sparse_file_writes_and_reads_back);
    RUN(dsv4_flash_llama_cpp_sparse_file_writes_and_reads_back);
    if (tmp_dir[0]) rmdir(tmp_dir);
    return check_report();
}
