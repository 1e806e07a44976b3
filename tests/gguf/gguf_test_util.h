/* Helpers shared by the GGUF tests: temp directories and byte patching of encoded images. */
#ifndef HALO_TESTS_GGUF_UTIL_H
#define HALO_TESTS_GGUF_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "halo/gguf.h"

/* A fresh directory under $TMPDIR (or /tmp); the caller removes it with tmpdir_remove. */
static inline char *tmpdir_make(void) {
    const char *base = getenv("TMPDIR");
    char *path = malloc(512);
    snprintf(path, 512, "%s/halo-test-XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(path)) {
        perror("mkdtemp");
        exit(2);
    }
    return path;
}

static inline void tmpdir_remove(char *path) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", path);
    free(path);
}

/* Offset of the first occurrence of a GGUF-encoded string (u64 length + bytes) in an image. */
static inline size_t find_gguf_string(const unsigned char *img, size_t size, const char *s) {
    uint64_t len = strlen(s);
    for (size_t i = 0; i + 8 + len <= size; i++)
        if (memcmp(img + i, &len, 8) == 0 && memcmp(img + i + 8, s, len) == 0) return i;
    fprintf(stderr, "pattern '%s' not found in image\n", s);
    exit(2);
}

/* Offset just past a key or tensor name's encoded string: the value type or n_dims field. */
static inline size_t after_string(const unsigned char *img, size_t size, const char *s) {
    return find_gguf_string(img, size, s) + 8 + strlen(s);
}

static inline void patch_u32(unsigned char *img, size_t at, uint32_t v) { memcpy(img + at, &v, 4); }
static inline void patch_u64(unsigned char *img, size_t at, uint64_t v) { memcpy(img + at, &v, 8); }

#endif
