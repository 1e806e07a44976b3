/* Writes valid GGUF images as fuzzing seeds: every metadata type, small tensors of every type,
 * v2 and v3, non-default alignment. Usage: fuzz_gguf_seeds DIR */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "halo/gguf.h"

static void save(halo_gguf_writer *w, const char *dir, const char *name) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    halo_error err;
    if (halo_gguf_writer_write_file(w, path, &err)) {
        fprintf(stderr, "%s\n", err.message);
        exit(1);
    }
    halo_gguf_writer_free(w);
}

static halo_gguf_writer *with_metadata(uint32_t version, uint32_t alignment) {
    halo_gguf_writer *w = halo_gguf_writer_create();
    halo_gguf_writer_set_version(w, version);
    if (alignment) halo_gguf_writer_set_alignment(w, alignment);
    halo_gguf_writer_set_str(w, "general.architecture", "deepseek4");
    halo_gguf_writer_set_u8(w, "a.u8", 1);
    halo_gguf_writer_set_i8(w, "a.i8", -1);
    halo_gguf_writer_set_u16(w, "a.u16", 2);
    halo_gguf_writer_set_i16(w, "a.i16", -2);
    halo_gguf_writer_set_u32(w, "deepseek4.block_count", 6);
    halo_gguf_writer_set_i32(w, "a.i32", -3);
    halo_gguf_writer_set_f32(w, "a.f32", 0.5f);
    halo_gguf_writer_set_bool(w, "a.bool", true);
    halo_gguf_writer_set_u64(w, "a.u64", 4);
    halo_gguf_writer_set_i64(w, "a.i64", -4);
    halo_gguf_writer_set_f64(w, "a.f64", 0.25);
    int32_t ratios[6] = {0, 0, 4, 128, 4, 128};
    halo_gguf_writer_set_array(w, "deepseek4.attention.compress_ratios", HALO_GGUF_I32, ratios, 6);
    const char *toks[3] = {"<s>", "a", "b"};
    halo_gguf_writer_set_str_array(w, "tokenizer.ggml.tokens", toks, 3);
    return w;
}

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    save(with_metadata(3, 0), argv[1], "meta-v3");
    save(with_metadata(2, 64), argv[1], "meta-v2-align64");
    static unsigned char data[4096];
    for (size_t i = 0; i < sizeof data; i++) data[i] = (unsigned char)(i * 37);
    for (uint32_t t = 0; t < HALO_TYPE_ID_LIMIT; t++) {
        const halo_type_info *info = halo_type_info_get(t);
        if (!info) continue;
        halo_gguf_writer *w = with_metadata(3, t % 3 == 0 ? 16 : 0);
        int64_t ne[2] = {info->block_size, 2};
        halo_gguf_writer_add_tensor(w, "blk.0.a", t, 2, ne, data);
        int64_t ne1[1] = {info->block_size};
        halo_gguf_writer_add_tensor(w, "blk.0.b", t, 1, ne1, data);
        char name[64];
        snprintf(name, sizeof name, "tensors-%s", info->name);
        save(w, argv[1], name);
    }
    return 0;
}
