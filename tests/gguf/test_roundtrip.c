/* Writer -> reader round trips: every metadata type, every tensor type, both GGUF versions,
 * files on disk, sparse files and split models. */
#include <math.h>
#include <sys/stat.h>

#include "check.h"
#include "gguf_test_util.h"

static halo_gguf *open_image(halo_gguf_writer *w, void **img) {
    size_t size;
    halo_error err = {0};
    CHECK_INT(halo_gguf_writer_write_memory(w, img, &size, &err), HALO_OK);
    halo_gguf *g = NULL;
    halo_status st = halo_gguf_open_memory(*img, size, &g, &err);
    if (st) fprintf(stderr, "open failed: %s\n", err.message);
    CHECK_INT(st, HALO_OK);
    return g;
}

static void every_metadata_type_round_trips(void) {
    halo_gguf_writer *w = halo_gguf_writer_create();
    halo_gguf_writer_set_u8(w, "t.u8", 250);
    halo_gguf_writer_set_i8(w, "t.i8", -120);
    halo_gguf_writer_set_u16(w, "t.u16", 65000);
    halo_gguf_writer_set_i16(w, "t.i16", -32000);
    halo_gguf_writer_set_u32(w, "t.u32", 4000000000u);
    halo_gguf_writer_set_i32(w, "t.i32", -2000000000);
    halo_gguf_writer_set_f32(w, "t.f32", 0.1f);
    halo_gguf_writer_set_bool(w, "t.bool", true);
    halo_gguf_writer_set_str(w, "t.str", "DeepSeek V4 — ünïcode ✓");
    halo_gguf_writer_set_u64(w, "t.u64", UINT64_MAX);
    halo_gguf_writer_set_i64(w, "t.i64", INT64_MIN);
    halo_gguf_writer_set_f64(w, "t.f64", 1e-300);
    halo_gguf_writer_set_str(w, "t.empty", "");
    int32_t ratios[6] = {0, 0, 4, 128, 4, 128};
    halo_gguf_writer_set_array(w, "t.arr.i32", HALO_GGUF_I32, ratios, 6);
    float clamps[3] = {10.0f, -0.5f, INFINITY};
    halo_gguf_writer_set_array(w, "t.arr.f32", HALO_GGUF_F32, clamps, 3);
    uint8_t flags[3] = {1, 0, 1};
    halo_gguf_writer_set_array(w, "t.arr.bool", HALO_GGUF_BOOL, flags, 3);
    halo_gguf_writer_set_array(w, "t.arr.empty", HALO_GGUF_U64, NULL, 0);
    double f64s[2] = {-2.5, 1e308};
    halo_gguf_writer_set_array(w, "t.arr.f64", HALO_GGUF_F64, f64s, 2);
    const char *toks[4] = {"<｜begin▁of▁sentence｜>", "", "Ġhello", "\xe4\xb8\xad"};
    halo_gguf_writer_set_str_array(w, "t.arr.str", toks, 4);
    CHECK_INT(halo_gguf_writer_error(w)->status, HALO_OK);

    void *img = NULL;
    halo_gguf *g = open_image(w, &img);
    if (!g) goto done;
    halo_error err = {0};
    CHECK_INT(halo_gguf_kv_count(g), 19);
    CHECK_INT(halo_gguf_find_kv(g, "t.u8")->v.u8, 250);
    CHECK_INT(halo_gguf_find_kv(g, "t.u8")->type, HALO_GGUF_U8);
    CHECK_INT(halo_gguf_find_kv(g, "t.i8")->v.i8, -120);
    CHECK_INT(halo_gguf_find_kv(g, "t.u16")->v.u16, 65000);
    CHECK_INT(halo_gguf_find_kv(g, "t.i16")->v.i16, -32000);
    CHECK_INT(halo_gguf_find_kv(g, "t.u32")->v.u32, 4000000000u);
    CHECK_INT(halo_gguf_find_kv(g, "t.i32")->v.i32, -2000000000);
    CHECK(halo_gguf_find_kv(g, "t.f32")->v.f32 == 0.1f);
    CHECK(halo_gguf_find_kv(g, "t.bool")->v.b == true);
    CHECK_STR(halo_gguf_find_kv(g, "t.str")->v.str.data, "DeepSeek V4 — ünïcode ✓");
    CHECK(halo_gguf_find_kv(g, "t.u64")->v.u64 == UINT64_MAX);
    CHECK(halo_gguf_find_kv(g, "t.i64")->v.i64 == INT64_MIN);
    CHECK(halo_gguf_find_kv(g, "t.f64")->v.f64 == 1e-300);
    CHECK_INT(halo_gguf_find_kv(g, "t.empty")->v.str.len, 0);

    const halo_gguf_kv *a = NULL;
    CHECK_INT(halo_gguf_get_array(g, "t.arr.i32", &a, &err), HALO_OK);
    CHECK_INT(a->elem_type, HALO_GGUF_I32);
    CHECK_INT(a->count, 6);
    uint64_t u = 0;
    CHECK_INT(halo_gguf_array_u64(a, 3, &u, &err), HALO_OK);
    CHECK_INT(u, 128);
    CHECK_INT(halo_gguf_array_u64(a, 6, &u, &err), HALO_E_INVALID_ARG);
    double d = 0;
    CHECK_INT(halo_gguf_get_array(g, "t.arr.f32", &a, &err), HALO_OK);
    CHECK_INT(halo_gguf_array_f64(a, 1, &d, &err), HALO_OK);
    CHECK(d == -0.5);
    CHECK_INT(halo_gguf_array_f64(a, 2, &d, &err), HALO_OK);
    CHECK(isinf(d));
    CHECK_INT(halo_gguf_get_array(g, "t.arr.bool", &a, &err), HALO_OK);
    CHECK(memcmp(a->v.array, flags, 3) == 0);
    CHECK_INT(halo_gguf_get_array(g, "t.arr.empty", &a, &err), HALO_OK);
    CHECK_INT(a->count, 0);
    CHECK_INT(a->elem_type, HALO_GGUF_U64);
    CHECK_INT(halo_gguf_get_array(g, "t.arr.f64", &a, &err), HALO_OK);
    CHECK(memcmp(a->v.array, f64s, sizeof f64s) == 0);
    CHECK_INT(halo_gguf_get_array(g, "t.arr.str", &a, &err), HALO_OK);
    CHECK_INT(a->elem_type, HALO_GGUF_STRING);
    const halo_gguf_str *s = a->v.array;
    for (int i = 0; i < 4; i++) CHECK_STR(s[i].data, toks[i]);
    CHECK_INT(s[1].len, 0);
    halo_gguf_close(g);
done:
    free(img);
    halo_gguf_writer_free(w);
}

static void typed_getters_convert_and_name_the_key(void) {
    halo_gguf_writer *w = halo_gguf_writer_create();
    halo_gguf_writer_set_i32(w, "k.i32", 4096);
    halo_gguf_writer_set_i32(w, "k.neg", -1);
    halo_gguf_writer_set_u64(w, "k.big", 1ull << 40);
    halo_gguf_writer_set_f32(w, "k.f32", 1.5f);
    halo_gguf_writer_set_str(w, "k.str", "deepseek4");
    void *img = NULL;
    halo_gguf *g = open_image(w, &img);
    halo_error err = {0};
    uint32_t u32 = 0;
    uint64_t u64 = 0;
    int64_t i64 = 0;
    double f = 0;
    const char *str = NULL;
    CHECK_INT(halo_gguf_get_u32(g, "k.i32", &u32, &err), HALO_OK);
    CHECK_INT(u32, 4096);
    CHECK_INT(halo_gguf_get_i64(g, "k.neg", &i64, &err), HALO_OK);
    CHECK_INT(i64, -1);
    CHECK_INT(halo_gguf_get_u64(g, "k.neg", &u64, &err), HALO_E_BAD_VALUE);
    CHECK_CONTAINS(err.message, "k.neg");
    CHECK_INT(halo_gguf_get_u32(g, "k.big", &u32, &err), HALO_E_BAD_VALUE);
    CHECK_INT(halo_gguf_get_f64(g, "k.f32", &f, &err), HALO_OK);
    CHECK(f == 1.5);
    CHECK_INT(halo_gguf_get_u32(g, "k.f32", &u32, &err), HALO_E_TYPE_MISMATCH);
    CHECK_CONTAINS(err.message, "'k.f32' has type f32");
    CHECK_INT(halo_gguf_get_str(g, "k.str", &str, &err), HALO_OK);
    CHECK_STR(str, "deepseek4");
    CHECK_INT(halo_gguf_get_str(g, "k.missing", &str, &err), HALO_E_NOT_FOUND);
    CHECK_CONTAINS(err.message, "'k.missing' is missing");
    halo_gguf_close(g);
    free(img);
    halo_gguf_writer_free(w);
}

/* Deterministic filler so every tensor's bytes differ. */
static void fill(unsigned char *p, size_t n, uint32_t seed) {
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        p[i] = (unsigned char)(seed >> 24);
    }
}

static void every_tensor_type_round_trips(uint32_t version, uint32_t alignment) {
    halo_gguf_writer *w = halo_gguf_writer_create();
    CHECK_INT(halo_gguf_writer_set_version(w, version), HALO_OK);
    if (alignment) CHECK_INT(halo_gguf_writer_set_alignment(w, alignment), HALO_OK);
    unsigned char *data[HALO_TYPE_ID_LIMIT] = {0};
    int n_types = 0;
    for (uint32_t t = 0; t < HALO_TYPE_ID_LIMIT; t++) {
        const halo_type_info *info = halo_type_info_get(t);
        if (!info) continue;
        char name[64];
        snprintf(name, sizeof name, "tensor.%s", info->name);
        int64_t ne[3] = {2 * info->block_size, 3, 1 + t % 2};
        uint64_t bytes = 0;
        CHECK(halo_type_bytes(t, (uint64_t)ne[0] * ne[1] * ne[2], &bytes));
        data[t] = malloc(bytes);
        fill(data[t], bytes, t);
        CHECK_INT(halo_gguf_writer_add_tensor(w, name, t, 3, ne, data[t]), HALO_OK);
        n_types++;
    }
    void *img = NULL;
    halo_gguf *g = open_image(w, &img);
    if (g) {
        CHECK_INT(halo_gguf_version(g), version);
        CHECK_INT(halo_gguf_alignment(g), alignment ? alignment : 32);
        CHECK_INT(halo_gguf_tensor_count(g), n_types);
        for (uint32_t t = 0; t < HALO_TYPE_ID_LIMIT; t++) {
            const halo_type_info *info = halo_type_info_get(t);
            if (!info) continue;
            char name[64];
            snprintf(name, sizeof name, "tensor.%s", info->name);
            const halo_gguf_tensor *tt = halo_gguf_find_tensor(g, name);
            CHECK(tt != NULL);
            if (!tt) continue;
            CHECK_INT(tt->type, t);
            CHECK_INT(tt->n_dims, 3);
            CHECK_INT(tt->ne[0], 2 * info->block_size);
            CHECK_INT(tt->ne[1], 3);
            CHECK_INT(tt->ne[2], 1 + t % 2);
            CHECK_INT(tt->ne[3], 1);
            CHECK_INT(tt->file_offset % halo_gguf_alignment(g), 0);
            unsigned char *back = malloc(tt->n_bytes);
            halo_error err = {0};
            CHECK_INT(halo_gguf_read_tensor(g, tt, back, tt->n_bytes, &err), HALO_OK);
            CHECK(memcmp(back, data[t], tt->n_bytes) == 0);
            CHECK_INT(halo_gguf_read_tensor(g, tt, back, tt->n_bytes - 1, &err),
                      HALO_E_INVALID_ARG);
            free(back);
        }
        halo_gguf_close(g);
    }
    for (uint32_t t = 0; t < HALO_TYPE_ID_LIMIT; t++) free(data[t]);
    free(img);
    halo_gguf_writer_free(w);
}

static void every_tensor_type_round_trips_v3(void) { every_tensor_type_round_trips(3, 0); }
static void every_tensor_type_round_trips_v2_align64(void) { every_tensor_type_round_trips(2, 64); }
static void every_tensor_type_round_trips_align1(void) { every_tensor_type_round_trips(3, 1); }

static void file_round_trip_reads_tensor_bytes_from_disk(void) {
    char *dir = tmpdir_make();
    char path[600];
    snprintf(path, sizeof path, "%s/model.gguf", dir);
    halo_gguf_writer *w = halo_gguf_writer_create();
    halo_gguf_writer_set_str(w, "general.architecture", "deepseek4");
    float v[64];
    for (int i = 0; i < 64; i++) v[i] = (float)i * 0.25f;
    int64_t ne[2] = {16, 4};
    halo_gguf_writer_add_tensor(w, "blk.0.attn_norm.weight", HALO_TYPE_F32, 2, ne, v);
    halo_error err = {0};
    CHECK_INT(halo_gguf_writer_write_file(w, path, &err), HALO_OK);
    halo_gguf *g = NULL;
    CHECK_INT(halo_gguf_open(path, &g, &err), HALO_OK);
    if (g) {
        const halo_gguf_tensor *t = halo_gguf_find_tensor(g, "blk.0.attn_norm.weight");
        float back[64];
        CHECK(t != NULL);
        CHECK_INT(halo_gguf_read_tensor(g, t, back, sizeof back, &err), HALO_OK);
        CHECK(memcmp(back, v, sizeof v) == 0);
        CHECK_STR(halo_gguf_shard_path(g, 0), path);
        CHECK_INT(halo_gguf_shard_count(g), 1);
        halo_gguf_close(g);
    }
    halo_gguf_writer_free(w);
    tmpdir_remove(dir);
}

static void sparse_tensors_leave_holes(void) {
    char *dir = tmpdir_make();
    char path[600];
    snprintf(path, sizeof path, "%s/sparse.gguf", dir);
    halo_gguf_writer *w = halo_gguf_writer_create();
    int64_t ne[2] = {4096, 65536}; /* 1 GiB of f32 */
    halo_gguf_writer_add_tensor(w, "big", HALO_TYPE_F32, 2, ne, NULL);
    halo_error err = {0};
    CHECK_INT(halo_gguf_writer_write_file(w, path, &err), HALO_OK);
    struct stat sb;
    CHECK_INT(stat(path, &sb), 0);
    CHECK((uint64_t)sb.st_size > (1ull << 30));
    CHECK((uint64_t)sb.st_blocks * 512 < (1ull << 20)); /* holes take no disk */
    halo_gguf *g = NULL;
    CHECK_INT(halo_gguf_open(path, &g, &err), HALO_OK);
    if (g) {
        CHECK_INT(halo_gguf_find_tensor(g, "big")->n_bytes, 1ull << 30);
        halo_gguf_close(g);
    }
    halo_gguf_writer_free(w);
    tmpdir_remove(dir);
}

static void write_shard(const char *dir, int no, int count, int n_tensors_total,
                        const char *tensor, float value) {
    char path[600];
    snprintf(path, sizeof path, "%s/model-%05d-of-%05d.gguf", dir, no + 1, count);
    halo_gguf_writer *w = halo_gguf_writer_create();
    if (no == 0) halo_gguf_writer_set_str(w, "general.architecture", "deepseek4");
    halo_gguf_writer_set_u16(w, "split.no", (uint16_t)no);
    halo_gguf_writer_set_u16(w, "split.count", (uint16_t)count);
    halo_gguf_writer_set_i32(w, "split.tensors.count", n_tensors_total);
    float v[8];
    for (int i = 0; i < 8; i++) v[i] = value;
    int64_t ne[1] = {8};
    halo_gguf_writer_add_tensor(w, tensor, HALO_TYPE_F32, 1, ne, v);
    halo_error err = {0};
    CHECK_INT(halo_gguf_writer_write_file(w, path, &err), HALO_OK);
    halo_gguf_writer_free(w);
}

static void split_model_opens_as_one(void) {
    char *dir = tmpdir_make();
    write_shard(dir, 0, 3, 3, "a", 1.0f);
    write_shard(dir, 1, 3, 3, "b", 2.0f);
    write_shard(dir, 2, 3, 3, "c", 3.0f);
    char path[600];
    /* Any shard's name opens the whole model. */
    snprintf(path, sizeof path, "%s/model-00002-of-00003.gguf", dir);
    halo_gguf *g = NULL;
    halo_error err = {0};
    CHECK_INT(halo_gguf_open(path, &g, &err), HALO_OK);
    if (g) {
        CHECK_INT(halo_gguf_shard_count(g), 3);
        CHECK_INT(halo_gguf_tensor_count(g), 3);
        CHECK(halo_gguf_find_kv(g, "general.architecture") != NULL);
        const halo_gguf_tensor *c = halo_gguf_find_tensor(g, "c");
        CHECK(c && c->shard == 2);
        float back[8] = {0};
        CHECK_INT(halo_gguf_read_tensor(g, c, back, sizeof back, &err), HALO_OK);
        CHECK(back[7] == 3.0f);
        halo_gguf_close(g);
    }
    /* A missing shard is named. */
    snprintf(path, sizeof path, "%s/model-00003-of-00003.gguf", dir);
    remove(path);
    snprintf(path, sizeof path, "%s/model-00001-of-00003.gguf", dir);
    CHECK_INT(halo_gguf_open(path, &g, &err), HALO_E_SHARDS);
    CHECK_CONTAINS(err.message, "shard 3 of 3 is missing");
    CHECK_CONTAINS(err.message, "model-00003-of-00003.gguf");
    tmpdir_remove(dir);
}

static void split_model_with_inconsistent_counts_is_refused(void) {
    char *dir = tmpdir_make();
    write_shard(dir, 0, 2, 5, "a", 1.0f); /* declares 5 tensors, shards hold 2 */
    write_shard(dir, 1, 2, 5, "b", 2.0f);
    char path[600];
    snprintf(path, sizeof path, "%s/model-00001-of-00002.gguf", dir);
    halo_gguf *g = NULL;
    halo_error err = {0};
    CHECK_INT(halo_gguf_open(path, &g, &err), HALO_E_SHARDS);
    CHECK_CONTAINS(err.message, "split.tensors.count is 5 but the shards hold 2 tensors");
    write_shard(dir, 1, 2, 2, "a", 2.0f); /* same tensor name in two shards */
    write_shard(dir, 0, 2, 2, "a", 1.0f);
    CHECK_INT(halo_gguf_open(path, &g, &err), HALO_E_DUPLICATE);
    CHECK_CONTAINS(err.message, "'a' across shards");
    /* A shard renamed away from the pattern is refused rather than half-loaded. */
    char renamed[600];
    snprintf(renamed, sizeof renamed, "%s/model.gguf", dir);
    CHECK_INT(rename(path, renamed), 0);
    CHECK_INT(halo_gguf_open(renamed, &g, &err), HALO_E_SHARDS);
    CHECK_CONTAINS(err.message, "one of 2 shards");
    tmpdir_remove(dir);
}

static void writer_refuses_bad_input(void) {
    halo_gguf_writer *w = halo_gguf_writer_create();
    CHECK_INT(halo_gguf_writer_set_u32(w, "a", 1), HALO_OK);
    CHECK_INT(halo_gguf_writer_set_u32(w, "a", 2), HALO_E_DUPLICATE);
    CHECK_CONTAINS(halo_gguf_writer_error(w)->message, "'a'");
    halo_gguf_writer_free(w);

    int64_t ne[1] = {33};
    w = halo_gguf_writer_create();
    CHECK_INT(halo_gguf_writer_add_tensor(w, "q", HALO_TYPE_Q8_0, 1, ne, NULL), HALO_E_BAD_VALUE);
    void *img = NULL;
    size_t size = 0;
    halo_error err = {0};
    CHECK_INT(halo_gguf_writer_write_memory(w, &img, &size, &err), HALO_E_BAD_VALUE);
    CHECK(img == NULL);
    halo_gguf_writer_free(w);

    w = halo_gguf_writer_create();
    CHECK_INT(halo_gguf_writer_add_tensor(w, "x", 4, 1, ne, NULL), HALO_E_UNKNOWN_TYPE);
    halo_gguf_writer_free(w);
    w = halo_gguf_writer_create();
    CHECK_INT(halo_gguf_writer_set_alignment(w, 48), HALO_E_BAD_VALUE);
    halo_gguf_writer_free(w);
    halo_gguf_writer_free(NULL);
    halo_gguf_close(NULL);
}

int main(void) {
    RUN(every_metadata_type_round_trips);
    RUN(typed_getters_convert_and_name_the_key);
    RUN(every_tensor_type_round_trips_v3);
    RUN(every_tensor_type_round_trips_v2_align64);
    RUN(every_tensor_type_round_trips_align1);
    RUN(file_round_trip_reads_tensor_bytes_from_disk);
    RUN(sparse_tensors_leave_holes);
    RUN(split_model_opens_as_one);
    RUN(split_model_with_inconsistent_counts_is_refused);
    RUN(writer_refuses_bad_input);
    return check_report();
}
