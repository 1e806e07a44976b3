/* One test per corruption class: a valid image is built with the writer, one field is broken,
 * and the reader must refuse it with that class's status and a message naming the culprit. */
#include "check.h"
#include "gguf_test_util.h"

typedef struct image {
    unsigned char *p;
    size_t size;
} image;

/* A small valid model: keys of several types and three tensors (f32, q8_0, f16). */
static image build(void) {
    halo_gguf_writer *w = halo_gguf_writer_create();
    halo_gguf_writer_set_str(w, "general.architecture", "deepseek4");
    halo_gguf_writer_set_u32(w, "deepseek4.block_count", 43);
    halo_gguf_writer_set_u32(w, "deepseek4.xyz", 1);
    halo_gguf_writer_set_bool(w, "deepseek4.flag", true);
    const char *toks[2] = {"a", "b"};
    halo_gguf_writer_set_str_array(w, "tokenizer.ggml.tokens", toks, 2);
    int32_t arr[3] = {0, 4, 128};
    halo_gguf_writer_set_array(w, "deepseek4.ratios", HALO_GGUF_I32, arr, 3);
    static float f32[64];
    static unsigned char q8[2 * 34];
    static unsigned short f16[32];
    int64_t ne_a[2] = {16, 4}, ne_b[1] = {64}, ne_c[1] = {32};
    halo_gguf_writer_add_tensor(w, "t.aaa", HALO_TYPE_F32, 2, ne_a, f32);
    halo_gguf_writer_add_tensor(w, "t.bbb", HALO_TYPE_Q8_0, 1, ne_b, q8);
    halo_gguf_writer_add_tensor(w, "t.ccc", HALO_TYPE_F16, 1, ne_c, f16);
    image img = {0};
    halo_error err = {0};
    if (halo_gguf_writer_write_memory(w, (void **)&img.p, &img.size, &err)) {
        fprintf(stderr, "build failed: %s\n", err.message);
        exit(2);
    }
    halo_gguf_writer_free(w);
    return img;
}

/* Opens the image and checks the status and a fragment of the message. */
static void expect(image img, halo_status want, const char *fragment) {
    halo_gguf *g = NULL;
    halo_error err = {0};
    halo_status st = halo_gguf_open_memory(img.p, img.size, &g, &err);
    CHECK_INT(st, want);
    if (st != want) fprintf(stderr, "  message: %s\n", err.message);
    if (fragment) CHECK_CONTAINS(err.message, fragment);
    CHECK(g == NULL);
    halo_gguf_close(g);
    free(img.p);
}

/* Offset of a tensor info's fields: n_dims, then ne[], type, offset. */
static size_t tensor_field(image img, const char *name) { return after_string(img.p, img.size, name); }

static void valid_image_opens(void) {
    image img = build();
    halo_gguf *g = NULL;
    halo_error err = {0};
    CHECK_INT(halo_gguf_open_memory(img.p, img.size, &g, &err), HALO_OK);
    CHECK_INT(halo_gguf_tensor_count(g), 3);
    halo_gguf_close(g);
    free(img.p);
}

static void rejects_bad_magic(void) {
    image img = build();
    memcpy(img.p, "GGML", 4);
    expect(img, HALO_E_BAD_MAGIC, "not a GGUF file");
}

static void rejects_unsupported_versions(void) {
    image img = build();
    patch_u32(img.p, 4, 1);
    expect(img, HALO_E_BAD_VERSION, "version 1 is not supported");
    img = build();
    patch_u32(img.p, 4, 4);
    expect(img, HALO_E_BAD_VERSION, "version 4");
    img = build();
    patch_u32(img.p, 4, 0x03000000u);
    expect(img, HALO_E_BAD_VERSION, "big-endian");
}

/* Cutting the file at any byte inside the header must be reported as truncation; cutting inside
 * the tensor data as data out of bounds. Never a crash, never success. */
static void rejects_truncation_at_every_offset(void) {
    image img = build();
    halo_gguf *g = NULL;
    halo_error err = {0};
    CHECK_INT(halo_gguf_open_memory(img.p, img.size, &g, &err), HALO_OK);
    size_t data_start = (size_t)halo_gguf_shard_data_offset(g, 0);
    uint64_t last_end = 0;
    for (uint64_t i = 0; i < halo_gguf_tensor_count(g); i++) {
        const halo_gguf_tensor *t = halo_gguf_tensor_at(g, i);
        if (t->file_offset + t->n_bytes > last_end) last_end = t->file_offset + t->n_bytes;
    }
    halo_gguf_close(g);
    int wrong = 0;
    for (size_t len = 0; len < last_end; len++) {
        unsigned char *cut = malloc(len ? len : 1);
        memcpy(cut, img.p, len);
        halo_status st = halo_gguf_open_memory(cut, len, &g, &err);
        halo_status want = len < data_start ? HALO_E_TRUNCATED : HALO_E_OUT_OF_BOUNDS;
        /* Padding between header and data: the header is complete, the data is what's short. */
        if (st != want && !(len >= data_start - 32 && st == HALO_E_OUT_OF_BOUNDS)) {
            if (wrong++ < 5)
                fprintf(stderr, "  cut at %zu: got %s (%s)\n", len, halo_status_name(st),
                        err.message);
        }
        if (!st) halo_gguf_close(g);
        free(cut);
    }
    CHECK_INT(wrong, 0);
    free(img.p);
}

static void rejects_counts_larger_than_the_file(void) {
    image img = build();
    patch_u64(img.p, 16, 1ull << 40); /* n_kv */
    expect(img, HALO_E_TRUNCATED, "declares 1099511627776 metadata entries");
    img = build();
    patch_u64(img.p, 8, UINT64_MAX); /* n_tensors */
    expect(img, HALO_E_TRUNCATED, "declares 18446744073709551615 tensors");
}

static void rejects_lengths_larger_than_the_file(void) {
    image img = build();
    size_t at = find_gguf_string(img.p, img.size, "deepseek4"); /* the architecture value */
    patch_u64(img.p, at, UINT64_MAX);
    expect(img, HALO_E_TRUNCATED, "string value needs 18446744073709551615 bytes");
    img = build();
    at = find_gguf_string(img.p, img.size, "general.architecture");
    patch_u64(img.p, at, 1ull << 33);
    expect(img, HALO_E_TRUNCATED, "key of metadata entry 0");
}

static void rejects_arrays_whose_size_overflows(void) {
    image img = build();
    size_t at = after_string(img.p, img.size, "deepseek4.ratios") + 4 + 4; /* type, elem type */
    patch_u64(img.p, at, (UINT64_MAX / 4) + 2); /* count * 4 wraps around */
    expect(img, HALO_E_TRUNCATED, "array 'deepseek4.ratios'");
    img = build();
    at = after_string(img.p, img.size, "tokenizer.ggml.tokens") + 4 + 4;
    patch_u64(img.p, at, 1ull << 61);
    expect(img, HALO_E_TRUNCATED, "array 'tokenizer.ggml.tokens'");
}

static void rejects_unknown_value_and_tensor_types(void) {
    image img = build();
    patch_u32(img.p, after_string(img.p, img.size, "deepseek4.block_count"), 13);
    expect(img, HALO_E_UNKNOWN_TYPE, "'deepseek4.block_count': unknown value type 13");
    img = build();
    patch_u32(img.p, after_string(img.p, img.size, "deepseek4.ratios") + 4, 99);
    expect(img, HALO_E_UNKNOWN_TYPE, "unknown array element type 99");
    img = build();
    patch_u32(img.p, tensor_field(img, "t.ccc") + 4 + 8, 5); /* Q4_3: removed from ggml */
    expect(img, HALO_E_UNKNOWN_TYPE, "tensor 't.ccc': unknown tensor type 5");
}

static void rejects_nested_arrays(void) {
    image img = build();
    patch_u32(img.p, after_string(img.p, img.size, "deepseek4.ratios") + 4, HALO_GGUF_ARRAY);
    expect(img, HALO_E_UNSUPPORTED, "nested arrays");
}

static void rejects_invalid_bools(void) {
    image img = build();
    img.p[after_string(img.p, img.size, "deepseek4.flag") + 4] = 7;
    expect(img, HALO_E_BAD_VALUE, "bool value 7");
}

static void rejects_duplicate_keys(void) {
    /* Keys of equal length, so renaming one in place keeps the layout intact. */
    halo_gguf_writer *w = halo_gguf_writer_create();
    halo_gguf_writer_set_u32(w, "dup.aaa", 1);
    halo_gguf_writer_set_u32(w, "dup.bbb", 2);
    image img = {0};
    halo_error err = {0};
    halo_gguf_writer_write_memory(w, (void **)&img.p, &img.size, &err);
    halo_gguf_writer_free(w);
    memcpy(img.p + find_gguf_string(img.p, img.size, "dup.bbb") + 8, "dup.aaa", 7);
    expect(img, HALO_E_DUPLICATE, "duplicate metadata key 'dup.aaa'");
}

static void rejects_duplicate_tensor_names(void) {
    image img = build();
    memcpy(img.p + find_gguf_string(img.p, img.size, "t.ccc") + 8, "t.aaa", 5);
    expect(img, HALO_E_DUPLICATE, "duplicate tensor name 't.aaa'");
}

static void rejects_too_many_dimensions(void) {
    image img = build();
    patch_u32(img.p, tensor_field(img, "t.aaa"), 5);
    expect(img, HALO_E_BAD_VALUE, "tensor 't.aaa': n_dims 5 > 4");
}

static void rejects_dimension_products_that_overflow(void) {
    image img = build();
    size_t at = tensor_field(img, "t.aaa") + 4;
    patch_u64(img.p, at, 1ull << 40);
    patch_u64(img.p, at + 8, 1ull << 40);
    expect(img, HALO_E_OVERFLOW, "tensor 't.aaa': element count overflows");
    img = build();
    patch_u64(img.p, tensor_field(img, "t.aaa") + 4, UINT64_MAX);
    expect(img, HALO_E_OVERFLOW, "t.aaa");
}

static void rejects_rows_that_split_a_block(void) {
    image img = build();
    patch_u64(img.p, tensor_field(img, "t.bbb") + 4, 48);
    expect(img, HALO_E_BAD_VALUE, "row of 48 elements is not a multiple of the q8_0 block size 32");
}

static void rejects_data_out_of_bounds(void) {
    image img = build();
    size_t off = tensor_field(img, "t.ccc") + 4 + 8 + 4;
    patch_u64(img.p, off, 1ull << 20);
    expect(img, HALO_E_OUT_OF_BOUNDS, "tensor 't.ccc': data [1048576, +64) lies outside");
    img = build();
    patch_u64(img.p, tensor_field(img, "t.ccc") + 4 + 8 + 4, UINT64_MAX - 31);
    expect(img, HALO_E_OUT_OF_BOUNDS, "t.ccc");
}

static void rejects_misaligned_data(void) {
    image img = build();
    size_t off = tensor_field(img, "t.bbb") + 4 + 8 + 4;
    uint64_t v;
    memcpy(&v, img.p + off, 8);
    patch_u64(img.p, off, v + 2);
    expect(img, HALO_E_MISALIGNED, "tensor 't.bbb': data offset");
}

static void rejects_overlapping_tensors(void) {
    image img = build();
    size_t off = tensor_field(img, "t.ccc") + 4 + 8 + 4;
    patch_u64(img.p, off, 32); /* t.aaa occupies [0, 256) */
    expect(img, HALO_E_OVERLAP, "tensors 't.aaa' and 't.ccc' overlap at offset 32");
}

static void rejects_bad_alignment(void) {
    halo_gguf_writer *w = halo_gguf_writer_create();
    halo_gguf_writer_set_alignment(w, 64);
    image img = {0};
    halo_error err = {0};
    halo_gguf_writer_write_memory(w, (void **)&img.p, &img.size, &err);
    halo_gguf_writer_free(w);
    patch_u32(img.p, after_string(img.p, img.size, "general.alignment") + 4, 48);
    expect(img, HALO_E_BAD_VALUE, "general.alignment 48 is not a power of two");

    w = halo_gguf_writer_create();
    halo_gguf_writer_set_alignment(w, 64);
    halo_gguf_writer_write_memory(w, (void **)&img.p, &img.size, &err);
    halo_gguf_writer_free(w);
    patch_u32(img.p, after_string(img.p, img.size, "general.alignment"), HALO_GGUF_I32);
    expect(img, HALO_E_TYPE_MISMATCH, "general.alignment has type i32");
}

static void rejects_empty_and_nul_names(void) {
    image img = build();
    img.p[find_gguf_string(img.p, img.size, "t.bbb") + 8 + 1] = 0;
    expect(img, HALO_E_BAD_VALUE, "name of tensor 1 contains a NUL byte");
}

/* GGUF spec: tensor names are at most 64 bytes. Lengthening a 64-byte name by one pulls the
 * next byte (n_dims = 1) into it. */
static void rejects_tensor_names_over_64_bytes(void) {
    char name[65];
    memset(name, 'x', 64);
    name[64] = 0;
    halo_gguf_writer *w = halo_gguf_writer_create();
    int64_t ne[1] = {8};
    static float data[8];
    CHECK_INT(halo_gguf_writer_add_tensor(w, name, HALO_TYPE_F32, 1, ne, data), HALO_OK);
    image img = {0};
    halo_error err = {0};
    halo_gguf_writer_write_memory(w, (void **)&img.p, &img.size, &err);
    halo_gguf_writer_free(w);
    halo_gguf *g = NULL;
    CHECK_INT(halo_gguf_open_memory(img.p, img.size, &g, &err), HALO_OK);
    halo_gguf_close(g);
    patch_u64(img.p, find_gguf_string(img.p, img.size, name), 65);
    expect(img, HALO_E_BAD_VALUE, "is 65 bytes, over the 64-byte limit");
}

static void error_names_the_file(void) {
    char *dir = tmpdir_make();
    char path[600];
    snprintf(path, sizeof path, "%s/broken.gguf", dir);
    image img = build();
    FILE *f = fopen(path, "wb");
    fwrite(img.p, 1, 40, f);
    fclose(f);
    free(img.p);
    halo_gguf *g = NULL;
    halo_error err = {0};
    CHECK_INT(halo_gguf_open(path, &g, &err), HALO_E_TRUNCATED);
    CHECK_CONTAINS(err.message, path);
    snprintf(path, sizeof path, "%s/absent.gguf", dir);
    CHECK_INT(halo_gguf_open(path, &g, &err), HALO_E_IO);
    CHECK_CONTAINS(err.message, "absent.gguf: cannot open");
    CHECK_INT(halo_gguf_open(dir, &g, &err), HALO_E_IO);
    CHECK_CONTAINS(err.message, "not a regular file");
    tmpdir_remove(dir);
}

int main(void) {
    RUN(valid_image_opens);
    RUN(rejects_bad_magic);
    RUN(rejects_unsupported_versions);
    RUN(rejects_truncation_at_every_offset);
    RUN(rejects_counts_larger_than_the_file);
    RUN(rejects_lengths_larger_than_the_file);
    RUN(rejects_arrays_whose_size_overflows);
    RUN(rejects_unknown_value_and_tensor_types);
    RUN(rejects_nested_arrays);
    RUN(rejects_invalid_bools);
    RUN(rejects_duplicate_keys);
    RUN(rejects_duplicate_tensor_names);
    RUN(rejects_too_many_dimensions);
    RUN(rejects_dimension_products_that_overflow);
    RUN(rejects_rows_that_split_a_block);
    RUN(rejects_data_out_of_bounds);
    RUN(rejects_misaligned_data);
    RUN(rejects_overlapping_tensors);
    RUN(rejects_bad_alignment);
    RUN(rejects_empty_and_nul_names);
    RUN(rejects_tensor_names_over_64_bytes);
    RUN(error_names_the_file);
    return check_report();
}
