/* Open-addressing hash map from NUL-terminated string keys (not owned: they must outlive the
 * map) to 64-bit values. Used for O(1) lookup and duplicate detection of GGUF keys and tensor
 * names (a real DeepSeek V4 file has ~1,330 tensors and ~60 keys). */
#ifndef HALO_CORE_STRMAP_H
#define HALO_CORE_STRMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct halo_strmap {
    const char **keys;
    uint64_t *values;
    size_t cap, count;
} halo_strmap;

/* Inserts key -> value. Returns 1 when inserted, 0 when the key was already there (value left
 * unchanged), -1 when out of memory. */
int halo_strmap_put(halo_strmap *m, const char *key, uint64_t value);
bool halo_strmap_get(const halo_strmap *m, const char *key, uint64_t *value);
void halo_strmap_free(halo_strmap *m);

#endif
