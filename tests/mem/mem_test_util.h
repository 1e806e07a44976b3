/* Shared by the memory tests: sparse full-size DeepSeek V4 Flash files in a temp directory. */
#ifndef HALO_TESTS_MEM_UTIL_H
#define HALO_TESTS_MEM_UTIL_H

#include "common/dsv4_flash.h"
#include "gguf/gguf_test_util.h"

/* Writes the variant as a sparse GGUF (header only on disk) to dir/name; exits on failure. */
static inline void write_variant(const char *dir, const char *name, dsv4_variant v, char *path,
                                 size_t size) {
    snprintf(path, size, "%s/%s", dir, name);
    halo_gguf_writer *w = halo_gguf_writer_create();
    halo_error err = {0};
    if (!w || dsv4_flash_add_variant_to_writer(w, v, &err) != HALO_OK ||
        halo_gguf_writer_write_file(w, path, &err) != HALO_OK) {
        fprintf(stderr, "writing %s: %s\n", path, err.message);
        exit(2);
    }
    halo_gguf_writer_free(w);
}

#endif
