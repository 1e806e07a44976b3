#include "core/strmap.h"

#include <stdlib.h>
#include <string.h>

static uint64_t hash_str(const char *s) {
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a 64 */
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

static size_t find_slot(const char *const *keys, size_t cap, const char *key) {
    size_t i = (size_t)hash_str(key) & (cap - 1);
    while (keys[i] && strcmp(keys[i], key) != 0) i = (i + 1) & (cap - 1);
    return i;
}

static int grow(halo_strmap *m) {
    size_t cap = m->cap ? m->cap * 2 : 64;
    const char **keys = calloc(cap, sizeof *keys);
    uint64_t *values = calloc(cap, sizeof *values);
    if (!keys || !values) {
        free(keys);
        free(values);
        return -1;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->keys[i]) continue;
        size_t j = find_slot(keys, cap, m->keys[i]);
        keys[j] = m->keys[i];
        values[j] = m->values[i];
    }
    free(m->keys);
    free(m->values);
    m->keys = keys;
    m->values = values;
    m->cap = cap;
    return 0;
}

int halo_strmap_put(halo_strmap *m, const char *key, uint64_t value) {
    if ((m->count + 1) * 2 > m->cap && grow(m) != 0) return -1;
    size_t i = find_slot(m->keys, m->cap, key);
    if (m->keys[i]) return 0;
    m->keys[i] = key;
    m->values[i] = value;
    m->count++;
    return 1;
}

bool halo_strmap_get(const halo_strmap *m, const char *key, uint64_t *value) {
    if (!m->cap) return false;
    size_t i = find_slot(m->keys, m->cap, key);
    if (!m->keys[i]) return false;
    if (value) *value = m->values[i];
    return true;
}

void halo_strmap_free(halo_strmap *m) {
    free(m->keys);
    free(m->values);
    memset(m, 0, sizeof *m);
}
