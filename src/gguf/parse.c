/* Parsing and validation of one GGUF image (GGUF specification, v2/v3 little-endian layout):
 *
 *   u32 magic "GGUF" | u32 version | u64 n_tensors | u64 n_kv
 *   n_kv × { string key | u32 value_type | value }
 *   n_tensors × { string name | u32 n_dims | u64 ne[n_dims] | u32 type | u64 offset }
 *   padding to general.alignment | tensor data (offsets relative to its start)
 *
 * Every length and count is checked against the bytes that remain before it is used, so a
 * corrupt file gives a precise error instead of a huge allocation or an out-of-bounds read. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "gguf/internal.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "halo's GGUF reader assumes a little-endian host (GGUF v2/v3 files are little-endian)"
#endif

enum { WINDOW_BYTES = 1 << 20 };

/* Smallest encodings, used to reject counts the remaining bytes cannot possibly hold. */
enum { MIN_KV_BYTES = 8 + 4 + 1, MIN_TENSOR_INFO_BYTES = 8 + 4 + 4 + 8 };

#define GGUF_MAX_NAME 64     /* GGUF spec: tensor names are at most 64 bytes */
#define GGUF_MAX_KEY 65535   /* GGUF spec: keys are at most 2^16-1 bytes */

typedef struct cursor {
    const gguf_source *src;
    uint64_t pos;
    unsigned char *window; /* read-ahead buffer for file sources */
    uint64_t win_start;
    size_t win_len;
    halo_error *err;
} cursor;

static uint64_t remaining(const cursor *c) {
    return c->src->size - c->pos;
}

static halo_status truncated(cursor *c, uint64_t need, const char *what) {
    return halo_fail(c->err, HALO_E_TRUNCATED,
                     "truncated: %s needs %llu bytes at offset %llu but the file ends at %llu",
                     what, (unsigned long long)need, (unsigned long long)c->pos,
                     (unsigned long long)c->src->size);
}

static halo_status read_bytes(cursor *c, void *dst, uint64_t n, const char *what) {
    if (n > remaining(c)) return truncated(c, n, what);
    unsigned char *out = dst;
    if (c->src->mem) {
        memcpy(out, c->src->mem + c->pos, n);
        c->pos += n;
        return HALO_OK;
    }
    while (n > 0) {
        if (c->pos >= c->win_start && c->pos < c->win_start + c->win_len) {
            uint64_t off = c->pos - c->win_start, take = c->win_len - off;
            if (take > n) take = n;
            memcpy(out, c->window + off, take);
            out += take;
            c->pos += take;
            n -= take;
        } else if (n >= WINDOW_BYTES) {
            halo_status st = gguf_source_read(c->src, c->pos, out, n, c->err);
            if (st) return st;
            c->pos += n;
            n = 0;
        } else {
            uint64_t len = remaining(c) < WINDOW_BYTES ? remaining(c) : WINDOW_BYTES;
            halo_status st = gguf_source_read(c->src, c->pos, c->window, len, c->err);
            if (st) return st;
            c->win_start = c->pos;
            c->win_len = len;
        }
    }
    return HALO_OK;
}

static halo_status read_u32(cursor *c, uint32_t *v, const char *what) {
    return read_bytes(c, v, sizeof *v, what);
}

static halo_status read_u64(cursor *c, uint64_t *v, const char *what) {
    return read_bytes(c, v, sizeof *v, what);
}

/* Reads a GGUF string into the arena, NUL-terminated. */
static halo_status read_string(cursor *c, halo_arena *arena, halo_gguf_str *s, const char *what) {
    uint64_t len;
    halo_status st = read_u64(c, &len, what);
    if (st) return st;
    if (len > remaining(c)) return truncated(c, len, what);
    if (len > GGUF_MAX_STRING_BYTES)
        return halo_fail(c->err, HALO_E_BAD_VALUE, "%s is %llu bytes, over the %llu-byte limit",
                         what, (unsigned long long)len, GGUF_MAX_STRING_BYTES);
    char *data = halo_arena_alloc(arena, len + 1);
    if (!data) return halo_fail(c->err, HALO_E_NOMEM, "out of memory reading %s", what);
    st = read_bytes(c, data, len, what);
    if (st) return st;
    data[len] = 0;
    s->len = len;
    s->data = data;
    return HALO_OK;
}

/* Keys and tensor names are looked up as C strings, so they must be non-empty and NUL-free. */
static halo_status check_name(cursor *c, const halo_gguf_str *s, uint64_t max, const char *what) {
    if (s->len == 0) return halo_fail(c->err, HALO_E_BAD_VALUE, "%s is empty", what);
    if (strlen(s->data) != s->len)
        return halo_fail(c->err, HALO_E_BAD_VALUE, "%s contains a NUL byte", what);
    if (s->len > max)
        return halo_fail(c->err, HALO_E_BAD_VALUE,
                         "%s '%.64s...' is %llu bytes, over the %llu-byte limit", what, s->data,
                         (unsigned long long)s->len, (unsigned long long)max);
    return HALO_OK;
}

size_t gguf_vtype_size(uint32_t type) {
    switch (type) {
    case HALO_GGUF_U8: case HALO_GGUF_I8: case HALO_GGUF_BOOL: return 1;
    case HALO_GGUF_U16: case HALO_GGUF_I16: return 2;
    case HALO_GGUF_U32: case HALO_GGUF_I32: case HALO_GGUF_F32: return 4;
    case HALO_GGUF_U64: case HALO_GGUF_I64: case HALO_GGUF_F64: return 8;
    default: return 0;
    }
}

static halo_status check_bools(cursor *c, const unsigned char *v, uint64_t n, const char *key) {
    for (uint64_t i = 0; i < n; i++)
        if (v[i] > 1)
            return halo_fail(c->err, HALO_E_BAD_VALUE, "key '%s': bool value %u is not 0 or 1",
                             key, v[i]);
    return HALO_OK;
}

static halo_status read_array(cursor *c, halo_arena *arena, halo_gguf_kv *kv) {
    const char *key = kv->key.data;
    uint32_t elem;
    uint64_t count;
    halo_status st = read_u32(c, &elem, "array element type");
    if (!st) st = read_u64(c, &count, "array length");
    if (st) return st;
    if (elem == HALO_GGUF_ARRAY)
        return halo_fail(c->err, HALO_E_UNSUPPORTED, "key '%s': nested arrays are not supported",
                         key);
    if (elem >= HALO_GGUF_VTYPE_COUNT)
        return halo_fail(c->err, HALO_E_UNKNOWN_TYPE, "key '%s': unknown array element type %u",
                         key, elem);
    kv->elem_type = (halo_gguf_vtype)elem;
    kv->count = count;

    /* Each element takes at least esz bytes in the file (8 for a string's length). */
    uint64_t esz = elem == HALO_GGUF_STRING ? 8 : gguf_vtype_size(elem);
    uint64_t mem_esz = elem == HALO_GGUF_STRING ? sizeof(halo_gguf_str) : esz;
    if (count > remaining(c) / esz) {
        char what[160];
        snprintf(what, sizeof what, "array '%s' of %llu %s", key, (unsigned long long)count,
                 halo_gguf_vtype_name(elem));
        return truncated(c, count > UINT64_MAX / esz ? UINT64_MAX : count * esz, what);
    }
    if (count * mem_esz > GGUF_MAX_ARRAY_BYTES)
        return halo_fail(c->err, HALO_E_BAD_VALUE,
                         "key '%s': array of %llu elements is over the %llu-byte limit", key,
                         (unsigned long long)count, GGUF_MAX_ARRAY_BYTES);
    void *values = halo_arena_alloc(arena, count * mem_esz);
    if (!values) return halo_fail(c->err, HALO_E_NOMEM, "out of memory reading array '%s'", key);
    kv->v.array = values;
    if (elem != HALO_GGUF_STRING) {
        st = read_bytes(c, values, count * esz, "array data");
        if (!st && elem == HALO_GGUF_BOOL) st = check_bools(c, values, count, key);
        return st;
    }
    halo_gguf_str *strs = values;
    for (uint64_t i = 0; i < count; i++) {
        st = read_string(c, arena, &strs[i], "string array element");
        if (st) return halo_error_prefix(c->err, "key '%s' element %llu: ", key,
                                         (unsigned long long)i);
    }
    return HALO_OK;
}

static halo_status read_kv(cursor *c, halo_arena *arena, halo_gguf_kv *kv, uint64_t index) {
    char what[64];
    snprintf(what, sizeof what, "key of metadata entry %llu", (unsigned long long)index);
    halo_status st = read_string(c, arena, &kv->key, what);
    if (!st) st = check_name(c, &kv->key, GGUF_MAX_KEY, what);
    if (st) return st;
    const char *key = kv->key.data;
    uint32_t type;
    st = read_u32(c, &type, "metadata value type");
    if (st) return st;
    if (type >= HALO_GGUF_VTYPE_COUNT)
        return halo_fail(c->err, HALO_E_UNKNOWN_TYPE, "key '%s': unknown value type %u", key,
                         type);
    kv->type = (halo_gguf_vtype)type;
    if (type == HALO_GGUF_STRING) {
        st = read_string(c, arena, &kv->v.str, "string value");
        return st ? halo_error_prefix(c->err, "key '%s': ", key) : HALO_OK;
    }
    if (type == HALO_GGUF_ARRAY) return read_array(c, arena, kv);
    kv->elem_type = kv->type;
    kv->count = 1;
    st = read_bytes(c, &kv->v, gguf_vtype_size(type), "metadata value");
    if (st) return halo_error_prefix(c->err, "key '%s': ", key);
    if (type == HALO_GGUF_BOOL) {
        unsigned char raw;
        memcpy(&raw, &kv->v, 1);
        st = check_bools(c, &raw, 1, key);
        kv->v.b = raw != 0;
    }
    return st;
}

static halo_status read_alignment(cursor *c, gguf_shard *s) {
    s->alignment = HALO_GGUF_DEFAULT_ALIGNMENT;
    for (uint64_t i = 0; i < s->n_kv; i++) {
        const halo_gguf_kv *kv = &s->kvs[i];
        if (strcmp(kv->key.data, "general.alignment") != 0) continue;
        if (kv->type != HALO_GGUF_U32)
            return halo_fail(c->err, HALO_E_TYPE_MISMATCH,
                             "general.alignment has type %s, expected u32",
                             halo_gguf_vtype_name(kv->type));
        uint32_t a = kv->v.u32;
        if (a == 0 || (a & (a - 1)) != 0)
            return halo_fail(c->err, HALO_E_BAD_VALUE,
                             "general.alignment %u is not a power of two", a);
        s->alignment = a;
    }
    return HALO_OK;
}

static halo_status read_tensor_info(cursor *c, halo_arena *arena, halo_gguf_tensor *t,
                                    uint64_t index) {
    char what[64];
    snprintf(what, sizeof what, "name of tensor %llu", (unsigned long long)index);
    halo_gguf_str name;
    halo_status st = read_string(c, arena, &name, what);
    if (!st) st = check_name(c, &name, GGUF_MAX_NAME, what);
    if (st) return st;
    t->name = name.data;
    st = read_u32(c, &t->n_dims, "tensor n_dims");
    if (st) return halo_error_prefix(c->err, "tensor '%s': ", t->name);
    if (t->n_dims > HALO_GGUF_MAX_DIMS)
        return halo_fail(c->err, HALO_E_BAD_VALUE, "tensor '%s': n_dims %u > %d", t->name,
                         t->n_dims, HALO_GGUF_MAX_DIMS);
    uint64_t dims[HALO_GGUF_MAX_DIMS] = {1, 1, 1, 1};
    st = read_bytes(c, dims, 8ull * t->n_dims, "tensor dimensions");
    uint32_t type = 0;
    if (!st) st = read_u32(c, &type, "tensor type");
    uint64_t offset = 0;
    if (!st) st = read_u64(c, &offset, "tensor data offset");
    if (st) return halo_error_prefix(c->err, "tensor '%s': ", t->name);

    uint64_t n = 1;
    for (int d = 0; d < HALO_GGUF_MAX_DIMS; d++) {
        if (dims[d] > INT64_MAX || (dims[d] && n > (uint64_t)INT64_MAX / dims[d]))
            return halo_fail(c->err, HALO_E_OVERFLOW,
                             "tensor '%s': element count overflows (dimension %d is %llu)",
                             t->name, d, (unsigned long long)dims[d]);
        t->ne[d] = (int64_t)dims[d];
        n *= dims[d];
    }
    const halo_type_info *info = halo_type_info_get(type);
    if (!info)
        return halo_fail(c->err, HALO_E_UNKNOWN_TYPE, "tensor '%s': unknown tensor type %u",
                         t->name, type);
    if (dims[0] % info->block_size != 0)
        return halo_fail(c->err, HALO_E_BAD_VALUE,
                         "tensor '%s': row of %llu elements is not a multiple of the %s block "
                         "size %u", t->name, (unsigned long long)dims[0], info->name,
                         info->block_size);
    t->type = type;
    t->n_elements = n;
    if (!halo_type_bytes(type, n, &t->n_bytes))
        return halo_fail(c->err, HALO_E_OVERFLOW, "tensor '%s': byte size overflows", t->name);
    t->file_offset = offset; /* relative until the data section's start is known */
    return HALO_OK;
}

typedef struct span {
    uint64_t start, bytes, index;
} span;

static int span_cmp(const void *a, const void *b) {
    const span *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

/* Offsets must be aligned, inside the file, and the tensors must not share bytes. */
static halo_status check_layout(cursor *c, gguf_shard *s) {
    if (s->n_tensors == 0) return HALO_OK;
    if (s->data_offset > s->src.size)
        return halo_fail(c->err, HALO_E_OUT_OF_BOUNDS,
                         "tensor data section starts at %llu, past the end of the %llu-byte file",
                         (unsigned long long)s->data_offset, (unsigned long long)s->src.size);
    span *spans = malloc(s->n_tensors * sizeof *spans);
    if (!spans) return halo_fail(c->err, HALO_E_NOMEM, "out of memory checking tensor layout");
    halo_status st = HALO_OK;
    uint64_t data_bytes = s->src.size - s->data_offset;
    for (uint64_t i = 0; i < s->n_tensors && !st; i++) {
        halo_gguf_tensor *t = &s->tensors[i];
        uint64_t rel = t->file_offset;
        if (rel % s->alignment != 0)
            st = halo_fail(c->err, HALO_E_MISALIGNED,
                           "tensor '%s': data offset %llu is not a multiple of the alignment %u",
                           t->name, (unsigned long long)rel, s->alignment);
        else if (rel > data_bytes || t->n_bytes > data_bytes - rel)
            st = halo_fail(c->err, HALO_E_OUT_OF_BOUNDS,
                           "tensor '%s': data [%llu, +%llu) lies outside the %llu-byte data "
                           "section", t->name, (unsigned long long)rel,
                           (unsigned long long)t->n_bytes, (unsigned long long)data_bytes);
        t->file_offset = s->data_offset + rel;
        spans[i] = (span){rel, t->n_bytes, i};
    }
    if (!st) qsort(spans, s->n_tensors, sizeof *spans, span_cmp);
    uint64_t end = 0, owner = 0;
    bool have = false;
    for (uint64_t i = 0; i < s->n_tensors && !st; i++) {
        if (spans[i].bytes == 0) continue;
        if (have && spans[i].start < end)
            st = halo_fail(c->err, HALO_E_OVERLAP, "tensors '%s' and '%s' overlap at offset %llu",
                           s->tensors[owner].name, s->tensors[spans[i].index].name,
                           (unsigned long long)spans[i].start);
        if (!have || spans[i].start + spans[i].bytes > end) {
            end = spans[i].start + spans[i].bytes;
            owner = spans[i].index;
        }
        have = true;
    }
    free(spans);
    return st;
}

static halo_status check_unique(cursor *c, const gguf_shard *s) {
    halo_strmap seen = {0};
    halo_status st = HALO_OK;
    for (uint64_t i = 0; i < s->n_kv && !st; i++) {
        int r = halo_strmap_put(&seen, s->kvs[i].key.data, i);
        if (r < 0) st = halo_fail(c->err, HALO_E_NOMEM, "out of memory indexing keys");
        if (r == 0)
            st = halo_fail(c->err, HALO_E_DUPLICATE, "duplicate metadata key '%s'",
                           s->kvs[i].key.data);
    }
    halo_strmap_free(&seen);
    for (uint64_t i = 0; i < s->n_tensors && !st; i++) {
        int r = halo_strmap_put(&seen, s->tensors[i].name, i);
        if (r < 0) st = halo_fail(c->err, HALO_E_NOMEM, "out of memory indexing tensors");
        if (r == 0)
            st = halo_fail(c->err, HALO_E_DUPLICATE, "duplicate tensor name '%s'",
                           s->tensors[i].name);
    }
    halo_strmap_free(&seen);
    return st;
}

static halo_status parse(cursor *c, gguf_shard *s, uint32_t shard_index, halo_arena *arena) {
    uint32_t magic;
    halo_status st = read_u32(c, &magic, "GGUF magic");
    if (st) return st;
    if (magic != GGUF_MAGIC) {
        const unsigned char *m = (const unsigned char *)&magic;
        return halo_fail(c->err, HALO_E_BAD_MAGIC,
                         "not a GGUF file: magic bytes %02x %02x %02x %02x, expected 'GGUF'",
                         m[0], m[1], m[2], m[3]);
    }
    st = read_u32(c, &s->version, "GGUF version");
    if (st) return st;
    if (s->version == 0x02000000u || s->version == 0x03000000u)
        return halo_fail(c->err, HALO_E_BAD_VERSION,
                         "big-endian GGUF files are not supported (version field %08x)",
                         s->version);
    if (s->version != 2 && s->version != 3)
        return halo_fail(c->err, HALO_E_BAD_VERSION,
                         "GGUF version %u is not supported (halo reads v2 and v3)", s->version);
    st = read_u64(c, &s->n_tensors, "tensor count");
    if (!st) st = read_u64(c, &s->n_kv, "metadata count");
    if (st) return st;

    if (s->n_kv > remaining(c) / MIN_KV_BYTES)
        return halo_fail(c->err, HALO_E_TRUNCATED,
                         "truncated: header declares %llu metadata entries but only %llu bytes "
                         "follow", (unsigned long long)s->n_kv,
                         (unsigned long long)remaining(c));
    if (s->n_tensors > remaining(c) / MIN_TENSOR_INFO_BYTES)
        return halo_fail(c->err, HALO_E_TRUNCATED,
                         "truncated: header declares %llu tensors but only %llu bytes follow",
                         (unsigned long long)s->n_tensors, (unsigned long long)remaining(c));
    if (s->n_kv * sizeof(halo_gguf_kv) > GGUF_MAX_ARRAY_BYTES ||
        s->n_tensors * sizeof(halo_gguf_tensor) > GGUF_MAX_ARRAY_BYTES)
        return halo_fail(c->err, HALO_E_BAD_VALUE, "header declares too many entries");

    s->kvs = halo_arena_alloc(arena, s->n_kv * sizeof *s->kvs);
    s->tensors = halo_arena_alloc(arena, s->n_tensors * sizeof *s->tensors);
    if (!s->kvs || !s->tensors) return halo_fail(c->err, HALO_E_NOMEM, "out of memory");
    memset(s->kvs, 0, s->n_kv * sizeof *s->kvs);
    memset(s->tensors, 0, s->n_tensors * sizeof *s->tensors);

    for (uint64_t i = 0; i < s->n_kv; i++)
        if ((st = read_kv(c, arena, &s->kvs[i], i))) return st;
    if ((st = read_alignment(c, s))) return st;
    for (uint64_t i = 0; i < s->n_tensors; i++) {
        if ((st = read_tensor_info(c, arena, &s->tensors[i], i))) return st;
        s->tensors[i].shard = shard_index;
    }
    if ((st = check_unique(c, s))) return st;

    uint64_t a = s->alignment;
    s->data_offset = (c->pos + a - 1) / a * a;
    return check_layout(c, s);
}

halo_status gguf_parse_shard(gguf_shard *shard, uint32_t shard_index, halo_arena *arena,
                             halo_error *err) {
    cursor c = {.src = &shard->src, .err = err};
    if (!shard->src.mem) {
        c.window = malloc(WINDOW_BYTES);
        if (!c.window) return halo_fail(err, HALO_E_NOMEM, "out of memory");
    }
    halo_status st = parse(&c, shard, shard_index, arena);
    free(c.window);
    return st;
}
