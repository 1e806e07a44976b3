/* Opening GGUF files: single files, in-memory images and split models
 * (`name-00001-of-00003.gguf`, as llama.cpp's gguf-split writes them) presented as one model. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "gguf/internal.h"

halo_status gguf_source_read(const gguf_source *src, uint64_t offset, void *dst, uint64_t n,
                             halo_error *err) {
    if (offset > src->size || n > src->size - offset)
        return halo_fail(err, HALO_E_OUT_OF_BOUNDS, "read of %llu bytes at %llu is past the end",
                         (unsigned long long)n, (unsigned long long)offset);
    if (src->mem) {
        memcpy(dst, src->mem + offset, n);
        return HALO_OK;
    }
    unsigned char *out = dst;
    while (n > 0) {
        size_t chunk = n > (1u << 30) ? (1u << 30) : (size_t)n;
        ssize_t got = pread(src->fd, out, chunk, (off_t)offset);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0)
            return halo_fail(err, HALO_E_IO, "read at offset %llu failed: %s",
                             (unsigned long long)offset, strerror(errno));
        if (got == 0)
            return halo_fail(err, HALO_E_TRUNCATED, "file shrank: read at offset %llu hit EOF",
                             (unsigned long long)offset);
        out += got;
        offset += (uint64_t)got;
        n -= (uint64_t)got;
    }
    return HALO_OK;
}

static halo_status open_source(gguf_source *src, const char *path, halo_error *err) {
    src->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (src->fd < 0) return halo_fail(err, HALO_E_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(src->fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(src->fd);
        src->fd = -1;
        return halo_fail(err, HALO_E_IO, "%s: not a regular file", path);
    }
    src->size = (uint64_t)st.st_size;
    src->name = path;
    return HALO_OK;
}

/* Recognises `<prefix>-NNNNN-of-MMMMM.gguf`; fills the prefix length and shard count. */
static bool split_pattern(const char *path, size_t *prefix_len, uint32_t *count) {
    size_t len = strlen(path);
    const size_t tail = strlen("-00001-of-00003.gguf");
    if (len < tail) return false;
    const char *p = path + len - tail;
    unsigned no, total;
    char end[8];
    if (sscanf(p, "-%5u-of-%5u%7s", &no, &total, end) != 3 || strcmp(end, ".gguf") != 0)
        return false;
    for (int i = 1; i <= 5; i++)
        if (p[i] < '0' || p[i] > '9' || p[i + 9] < '0' || p[i + 9] > '9') return false;
    if (no < 1 || total < 1 || no > total) return false;
    *prefix_len = len - tail;
    *count = total;
    return true;
}

static const halo_gguf_kv *shard_kv(const gguf_shard *s, const char *key) {
    for (uint64_t i = 0; i < s->n_kv; i++)
        if (strcmp(s->kvs[i].key.data, key) == 0) return &s->kvs[i];
    return NULL;
}

/* split.* keys (gguf-split): integer values, compared when present. */
static bool shard_int(const gguf_shard *s, const char *key, uint64_t *v) {
    const halo_gguf_kv *kv = shard_kv(s, key);
    if (!kv) return false;
    switch (kv->type) {
    case HALO_GGUF_U8: *v = kv->v.u8; return true;
    case HALO_GGUF_U16: *v = kv->v.u16; return true;
    case HALO_GGUF_U32: *v = kv->v.u32; return true;
    case HALO_GGUF_U64: *v = kv->v.u64; return true;
    case HALO_GGUF_I16: *v = kv->v.i16 < 0 ? UINT64_MAX : (uint64_t)kv->v.i16; return true;
    case HALO_GGUF_I32: *v = kv->v.i32 < 0 ? UINT64_MAX : (uint64_t)kv->v.i32; return true;
    default: *v = UINT64_MAX; return true;
    }
}

static halo_status check_split_keys(halo_gguf *g, halo_error *err) {
    uint64_t declared;
    if (g->n_shards == 1 && shard_int(&g->shards[0], "split.count", &declared) && declared > 1)
        return halo_fail(err, HALO_E_SHARDS,
                         "%s: file is one of %llu shards but its name does not follow "
                         "'<name>-00001-of-%05llu.gguf'", g->shards[0].src.name,
                         (unsigned long long)declared, (unsigned long long)declared);
    for (uint32_t i = 0; i < g->n_shards; i++) {
        const gguf_shard *s = &g->shards[i];
        uint64_t v;
        if (shard_int(s, "split.no", &v) && v != i)
            return halo_fail(err, HALO_E_SHARDS, "%s: split.no is %llu, expected %u", s->src.name,
                             (unsigned long long)v, i);
        if (shard_int(s, "split.count", &v) && v != g->n_shards)
            return halo_fail(err, HALO_E_SHARDS, "%s: split.count is %llu but %u shards were found",
                             s->src.name, (unsigned long long)v, g->n_shards);
    }
    if (shard_int(&g->shards[0], "split.tensors.count", &declared) && declared != g->n_tensors)
        return halo_fail(err, HALO_E_SHARDS,
                         "%s: split.tensors.count is %llu but the shards hold %llu tensors",
                         g->shards[0].src.name, (unsigned long long)declared,
                         (unsigned long long)g->n_tensors);
    return HALO_OK;
}

/* Builds the model view: shard 0's metadata, every shard's tensors, and lookup indexes. */
static halo_status build_view(halo_gguf *g, halo_error *err) {
    g->kvs = g->shards[0].kvs;
    g->n_kv = g->shards[0].n_kv;
    for (uint32_t i = 0; i < g->n_shards; i++) g->n_tensors += g->shards[i].n_tensors;
    if (g->n_shards == 1) {
        g->tensors = g->shards[0].tensors;
    } else {
        g->tensors = halo_arena_alloc(&g->arena, g->n_tensors * sizeof *g->tensors);
        if (!g->tensors) return halo_fail(err, HALO_E_NOMEM, "out of memory");
        uint64_t at = 0;
        for (uint32_t i = 0; i < g->n_shards; i++) {
            memcpy(g->tensors + at, g->shards[i].tensors,
                   g->shards[i].n_tensors * sizeof *g->tensors);
            at += g->shards[i].n_tensors;
        }
    }
    for (uint64_t i = 0; i < g->n_kv; i++)
        if (halo_strmap_put(&g->kv_index, g->kvs[i].key.data, i) < 0)
            return halo_fail(err, HALO_E_NOMEM, "out of memory");
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        int r = halo_strmap_put(&g->tensor_index, g->tensors[i].name, i);
        if (r < 0) return halo_fail(err, HALO_E_NOMEM, "out of memory");
        if (r == 0)
            return halo_fail(err, HALO_E_DUPLICATE, "%s: duplicate tensor name '%s' across shards",
                             g->shards[g->tensors[i].shard].src.name, g->tensors[i].name);
    }
    return check_split_keys(g, err);
}

static halo_gguf *alloc_model(uint32_t n_shards) {
    halo_gguf *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->shards = calloc(n_shards, sizeof *g->shards);
    if (!g->shards) {
        free(g);
        return NULL;
    }
    for (uint32_t i = 0; i < n_shards; i++) g->shards[i].src.fd = -1;
    g->n_shards = n_shards;
    return g;
}

halo_status halo_gguf_open(const char *path, halo_gguf **out, halo_error *err) {
    *out = NULL;
    if (!path) return halo_fail(err, HALO_E_INVALID_ARG, "no GGUF path given");
    size_t prefix_len = 0;
    uint32_t n_shards = 1;
    bool split = split_pattern(path, &prefix_len, &n_shards);
    halo_gguf *g = alloc_model(n_shards);
    if (!g) return halo_fail(err, HALO_E_NOMEM, "out of memory");

    halo_status st = HALO_OK;
    for (uint32_t i = 0; i < n_shards && !st; i++) {
        size_t cap = strlen(path) + 1;
        char *shard_path = halo_arena_alloc(&g->arena, cap);
        if (!shard_path) {
            st = halo_fail(err, HALO_E_NOMEM, "out of memory");
            break;
        }
        if (split)
            snprintf(shard_path, cap, "%.*s-%05u-of-%05u.gguf", (int)prefix_len, path, i + 1,
                     n_shards);
        else
            memcpy(shard_path, path, cap);
        st = open_source(&g->shards[i].src, shard_path, err);
        if (st && split && err) {
            err->status = st = HALO_E_SHARDS;
            halo_error_prefix(err, "split model shard %u of %u is missing: ", i + 1, n_shards);
        }
        if (!st) {
            st = gguf_parse_shard(&g->shards[i], i, &g->arena, err);
            if (st) halo_error_prefix(err, "%s: ", shard_path);
        }
    }
    if (!st) st = build_view(g, err);
    if (st) {
        halo_gguf_close(g);
        return st;
    }
    *out = g;
    return HALO_OK;
}

halo_status halo_gguf_open_memory(const void *data, size_t size, halo_gguf **out,
                                  halo_error *err) {
    *out = NULL;
    if (!data && size) return halo_fail(err, HALO_E_INVALID_ARG, "NULL GGUF image");
    halo_gguf *g = alloc_model(1);
    if (!g) return halo_fail(err, HALO_E_NOMEM, "out of memory");
    static const unsigned char empty[1];
    g->shards[0].src = (gguf_source){.fd = -1, .mem = data ? data : empty, .size = size,
                                     .name = "<memory>"};
    halo_status st = gguf_parse_shard(&g->shards[0], 0, &g->arena, err);
    if (st) halo_error_prefix(err, "<memory>: ");
    if (!st) st = build_view(g, err);
    if (st) {
        halo_gguf_close(g);
        return st;
    }
    *out = g;
    return HALO_OK;
}

void halo_gguf_close(halo_gguf *g) {
    if (!g) return;
    for (uint32_t i = 0; i < g->n_shards; i++)
        if (g->shards[i].src.fd >= 0) close(g->shards[i].src.fd);
    free(g->shards);
    halo_strmap_free(&g->kv_index);
    halo_strmap_free(&g->tensor_index);
    halo_arena_free(&g->arena);
    free(g);
}

uint32_t halo_gguf_version(const halo_gguf *g) { return g->shards[0].version; }
uint32_t halo_gguf_alignment(const halo_gguf *g) { return g->shards[0].alignment; }
uint64_t halo_gguf_kv_count(const halo_gguf *g) { return g->n_kv; }
uint64_t halo_gguf_tensor_count(const halo_gguf *g) { return g->n_tensors; }
uint32_t halo_gguf_shard_count(const halo_gguf *g) { return g->n_shards; }

const halo_gguf_kv *halo_gguf_kv_at(const halo_gguf *g, uint64_t i) {
    return i < g->n_kv ? &g->kvs[i] : NULL;
}

const halo_gguf_kv *halo_gguf_find_kv(const halo_gguf *g, const char *key) {
    uint64_t i;
    return halo_strmap_get(&g->kv_index, key, &i) ? &g->kvs[i] : NULL;
}

const halo_gguf_tensor *halo_gguf_tensor_at(const halo_gguf *g, uint64_t i) {
    return i < g->n_tensors ? &g->tensors[i] : NULL;
}

const halo_gguf_tensor *halo_gguf_find_tensor(const halo_gguf *g, const char *name) {
    uint64_t i;
    return halo_strmap_get(&g->tensor_index, name, &i) ? &g->tensors[i] : NULL;
}

const char *halo_gguf_shard_path(const halo_gguf *g, uint32_t shard) {
    return shard < g->n_shards ? g->shards[shard].src.name : NULL;
}

uint64_t halo_gguf_shard_size(const halo_gguf *g, uint32_t shard) {
    return shard < g->n_shards ? g->shards[shard].src.size : 0;
}

uint64_t halo_gguf_shard_data_offset(const halo_gguf *g, uint32_t shard) {
    return shard < g->n_shards ? g->shards[shard].data_offset : 0;
}

halo_status halo_gguf_read_tensor(const halo_gguf *g, const halo_gguf_tensor *t, void *dst,
                                  size_t dst_size, halo_error *err) {
    if (!t || t->shard >= g->n_shards)
        return halo_fail(err, HALO_E_INVALID_ARG, "tensor does not belong to this model");
    if (dst_size < t->n_bytes)
        return halo_fail(err, HALO_E_INVALID_ARG, "tensor '%s' needs %llu bytes, buffer has %zu",
                         t->name, (unsigned long long)t->n_bytes, dst_size);
    halo_status st = gguf_source_read(&g->shards[t->shard].src, t->file_offset, dst, t->n_bytes,
                                      err);
    return st ? halo_error_prefix(err, "%s: tensor '%s': ", g->shards[t->shard].src.name, t->name)
              : HALO_OK;
}
