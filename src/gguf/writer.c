/* GGUF writer. Metadata values are encoded into a byte buffer as they are set; tensor data is
 * placed at aligned offsets when the file is written. Tensors without data become holes, which
 * lets tests write full-size (80+ GiB) model files that take no disk. */
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "core/strmap.h"
#include "gguf/internal.h"

typedef struct wtensor {
    char *name;
    uint32_t type, n_dims;
    int64_t ne[HALO_GGUF_MAX_DIMS];
    uint64_t n_bytes, offset;
    const void *data;
} wtensor;

typedef struct bytes {
    unsigned char *p;
    size_t len, cap;
} bytes;

struct halo_gguf_writer {
    uint32_t version, alignment;
    uint64_t n_kv;
    bytes kv_bytes;      /* encoded metadata entries */
    halo_strmap keys;    /* owned key copies in key_list */
    char **key_list;
    size_t key_cap;
    wtensor *tensors;
    uint64_t n_tensors, tensor_cap;
    halo_strmap names;
    halo_error error;    /* first failure, sticky */
};

static bool put(bytes *b, const void *data, size_t n) {
    if (n == 0) return true; /* data may be NULL for empty arrays */
    if (b->cap - b->len < n) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap - b->len < n) {
            if (cap > SIZE_MAX / 2) return false;
            cap *= 2;
        }
        unsigned char *p = realloc(b->p, cap);
        if (!p) return false;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, data, n);
    b->len += n;
    return true;
}

static bool put_u32(bytes *b, uint32_t v) { return put(b, &v, 4); }
static bool put_u64(bytes *b, uint64_t v) { return put(b, &v, 8); }
static bool put_str(bytes *b, const char *s) {
    uint64_t n = strlen(s);
    return put_u64(b, n) && put(b, s, n);
}

halo_gguf_writer *halo_gguf_writer_create(void) {
    halo_gguf_writer *w = calloc(1, sizeof *w);
    if (w) {
        w->version = 3;
        w->alignment = HALO_GGUF_DEFAULT_ALIGNMENT;
    }
    return w;
}

void halo_gguf_writer_free(halo_gguf_writer *w) {
    if (!w) return;
    for (uint64_t i = 0; i < w->n_kv; i++) free(w->key_list[i]);
    free(w->key_list);
    for (uint64_t i = 0; i < w->n_tensors; i++) free(w->tensors[i].name);
    free(w->tensors);
    free(w->kv_bytes.p);
    halo_strmap_free(&w->keys);
    halo_strmap_free(&w->names);
    free(w);
}

const halo_error *halo_gguf_writer_error(const halo_gguf_writer *w) { return &w->error; }

/* Records the first failure; later calls keep returning it. */
HALO_PRINTF(3, 4)
static halo_status fail(halo_gguf_writer *w, halo_status st, const char *fmt, ...) {
    if (!w->error.status) {
        va_list ap;
        va_start(ap, fmt);
        halo_failv(&w->error, st, fmt, ap);
        va_end(ap);
    }
    return st;
}

halo_status halo_gguf_writer_set_version(halo_gguf_writer *w, uint32_t version) {
    if (version != 2 && version != 3)
        return fail(w, HALO_E_BAD_VERSION, "GGUF version %u is not writable (2 or 3)", version);
    w->version = version;
    return HALO_OK;
}

/* Starts a metadata entry: checks the key and writes it with its value type. */
static halo_status begin_kv(halo_gguf_writer *w, const char *key, halo_gguf_vtype type) {
    if (w->error.status) return w->error.status;
    if (!key || !*key) return fail(w, HALO_E_INVALID_ARG, "empty metadata key");
    if (halo_strmap_get(&w->keys, key, NULL))
        return fail(w, HALO_E_DUPLICATE, "duplicate metadata key '%s'", key);
    if (w->n_kv == w->key_cap) {
        size_t cap = w->key_cap ? w->key_cap * 2 : 32;
        char **list = realloc(w->key_list, cap * sizeof *list);
        if (!list) return fail(w, HALO_E_NOMEM, "out of memory at key '%s'", key);
        w->key_list = list;
        w->key_cap = cap;
    }
    char *copy = strdup(key);
    if (!copy || halo_strmap_put(&w->keys, copy, w->n_kv) < 0) {
        free(copy);
        return fail(w, HALO_E_NOMEM, "out of memory at key '%s'", key);
    }
    w->key_list[w->n_kv++] = copy;
    if (!put_str(&w->kv_bytes, key) || !put_u32(&w->kv_bytes, type))
        return fail(w, HALO_E_NOMEM, "out of memory at key '%s'", key);
    return HALO_OK;
}

static halo_status set_scalar(halo_gguf_writer *w, const char *key, halo_gguf_vtype type,
                              const void *v) {
    halo_status st = begin_kv(w, key, type);
    if (st) return st;
    if (!put(&w->kv_bytes, v, gguf_vtype_size(type)))
        return fail(w, HALO_E_NOMEM, "out of memory at key '%s'", key);
    return HALO_OK;
}

halo_status halo_gguf_writer_set_alignment(halo_gguf_writer *w, uint32_t alignment) {
    if (alignment == 0 || (alignment & (alignment - 1)))
        return fail(w, HALO_E_BAD_VALUE, "alignment %u is not a power of two", alignment);
    halo_status st = set_scalar(w, "general.alignment", HALO_GGUF_U32, &alignment);
    if (!st) w->alignment = alignment;
    return st;
}

halo_status halo_gguf_writer_set_u8(halo_gguf_writer *w, const char *key, uint8_t v) {
    return set_scalar(w, key, HALO_GGUF_U8, &v);
}
halo_status halo_gguf_writer_set_i8(halo_gguf_writer *w, const char *key, int8_t v) {
    return set_scalar(w, key, HALO_GGUF_I8, &v);
}
halo_status halo_gguf_writer_set_u16(halo_gguf_writer *w, const char *key, uint16_t v) {
    return set_scalar(w, key, HALO_GGUF_U16, &v);
}
halo_status halo_gguf_writer_set_i16(halo_gguf_writer *w, const char *key, int16_t v) {
    return set_scalar(w, key, HALO_GGUF_I16, &v);
}
halo_status halo_gguf_writer_set_u32(halo_gguf_writer *w, const char *key, uint32_t v) {
    if (key && strcmp(key, "general.alignment") == 0) return halo_gguf_writer_set_alignment(w, v);
    return set_scalar(w, key, HALO_GGUF_U32, &v);
}
halo_status halo_gguf_writer_set_i32(halo_gguf_writer *w, const char *key, int32_t v) {
    return set_scalar(w, key, HALO_GGUF_I32, &v);
}
halo_status halo_gguf_writer_set_f32(halo_gguf_writer *w, const char *key, float v) {
    return set_scalar(w, key, HALO_GGUF_F32, &v);
}
halo_status halo_gguf_writer_set_bool(halo_gguf_writer *w, const char *key, bool v) {
    uint8_t b = v ? 1 : 0;
    return set_scalar(w, key, HALO_GGUF_BOOL, &b);
}
halo_status halo_gguf_writer_set_u64(halo_gguf_writer *w, const char *key, uint64_t v) {
    return set_scalar(w, key, HALO_GGUF_U64, &v);
}
halo_status halo_gguf_writer_set_i64(halo_gguf_writer *w, const char *key, int64_t v) {
    return set_scalar(w, key, HALO_GGUF_I64, &v);
}
halo_status halo_gguf_writer_set_f64(halo_gguf_writer *w, const char *key, double v) {
    return set_scalar(w, key, HALO_GGUF_F64, &v);
}

halo_status halo_gguf_writer_set_str(halo_gguf_writer *w, const char *key, const char *v) {
    if (!v) return fail(w, HALO_E_INVALID_ARG, "NULL string value for key '%s'", key ? key : "");
    halo_status st = begin_kv(w, key, HALO_GGUF_STRING);
    if (st) return st;
    if (!put_str(&w->kv_bytes, v)) return fail(w, HALO_E_NOMEM, "out of memory at key '%s'", key);
    return HALO_OK;
}

halo_status halo_gguf_writer_set_array(halo_gguf_writer *w, const char *key,
                                       halo_gguf_vtype elem_type, const void *values,
                                       uint64_t count) {
    size_t esz = gguf_vtype_size(elem_type);
    if (!esz)
        return fail(w, HALO_E_INVALID_ARG, "key '%s': array element type must be numeric or bool",
                    key ? key : "");
    if (count && !values) return fail(w, HALO_E_INVALID_ARG, "key '%s': NULL array", key);
    if (count > SIZE_MAX / esz) return fail(w, HALO_E_OVERFLOW, "key '%s': array too long", key);
    halo_status st = begin_kv(w, key, HALO_GGUF_ARRAY);
    if (st) return st;
    if (!put_u32(&w->kv_bytes, elem_type) || !put_u64(&w->kv_bytes, count) ||
        !put(&w->kv_bytes, values, count * esz))
        return fail(w, HALO_E_NOMEM, "out of memory at key '%s'", key);
    return HALO_OK;
}

halo_status halo_gguf_writer_set_str_array(halo_gguf_writer *w, const char *key,
                                           const char *const *values, uint64_t count) {
    if (count && !values) return fail(w, HALO_E_INVALID_ARG, "key '%s': NULL array", key);
    for (uint64_t i = 0; i < count; i++)
        if (!values[i]) return fail(w, HALO_E_INVALID_ARG, "key '%s': NULL string element", key);
    halo_status st = begin_kv(w, key, HALO_GGUF_ARRAY);
    if (st) return st;
    bool ok = put_u32(&w->kv_bytes, HALO_GGUF_STRING) && put_u64(&w->kv_bytes, count);
    for (uint64_t i = 0; ok && i < count; i++) ok = put_str(&w->kv_bytes, values[i]);
    if (!ok) return fail(w, HALO_E_NOMEM, "out of memory at key '%s'", key);
    return HALO_OK;
}

halo_status halo_gguf_writer_add_tensor(halo_gguf_writer *w, const char *name, uint32_t type,
                                        uint32_t n_dims, const int64_t *ne, const void *data) {
    if (w->error.status) return w->error.status;
    if (!name || !*name || strlen(name) > 64)
        return fail(w, HALO_E_INVALID_ARG, "tensor name '%s' must be 1 to 64 bytes",
                    name ? name : "");
    if (halo_strmap_get(&w->names, name, NULL))
        return fail(w, HALO_E_DUPLICATE, "duplicate tensor name '%s'", name);
    const halo_type_info *info = halo_type_info_get(type);
    if (!info) return fail(w, HALO_E_UNKNOWN_TYPE, "tensor '%s': unknown tensor type", name);
    if (n_dims < 1 || n_dims > HALO_GGUF_MAX_DIMS || !ne)
        return fail(w, HALO_E_BAD_VALUE, "tensor '%s': n_dims must be 1 to 4", name);
    wtensor t = {.type = type, .n_dims = n_dims, .ne = {1, 1, 1, 1}, .data = data};
    uint64_t n = 1;
    for (uint32_t d = 0; d < n_dims; d++) {
        if (ne[d] < 0 || (ne[d] && n > (uint64_t)INT64_MAX / (uint64_t)ne[d]))
            return fail(w, HALO_E_OVERFLOW, "tensor '%s': bad or overflowing shape", name);
        t.ne[d] = ne[d];
        n *= (uint64_t)ne[d];
    }
    if (t.ne[0] % info->block_size)
        return fail(w, HALO_E_BAD_VALUE, "tensor '%s': row length is not a multiple of the block",
                    name);
    if (!halo_type_bytes(type, n, &t.n_bytes))
        return fail(w, HALO_E_OVERFLOW, "tensor '%s': byte size overflows", name);
    if (w->n_tensors == w->tensor_cap) {
        uint64_t cap = w->tensor_cap ? w->tensor_cap * 2 : 64;
        wtensor *list = realloc(w->tensors, cap * sizeof *list);
        if (!list) return fail(w, HALO_E_NOMEM, "out of memory at tensor '%s'", name);
        w->tensors = list;
        w->tensor_cap = cap;
    }
    t.name = strdup(name);
    if (!t.name || halo_strmap_put(&w->names, t.name, w->n_tensors) < 0) {
        free(t.name);
        return fail(w, HALO_E_NOMEM, "out of memory at tensor '%s'", name);
    }
    w->tensors[w->n_tensors++] = t;
    return HALO_OK;
}

/* Encodes the header (everything before the data section, padded) and assigns offsets.
 * Returns the total file size through *total. */
static halo_status encode_header(halo_gguf_writer *w, bytes *h, uint64_t *total, halo_error *err) {
    if (w->error.status) {
        if (err) *err = w->error;
        return w->error.status;
    }
    bool ok = put_u32(h, GGUF_MAGIC) && put_u32(h, w->version) && put_u64(h, w->n_tensors) &&
              put_u64(h, w->n_kv) && put(h, w->kv_bytes.p, w->kv_bytes.len);
    uint64_t a = w->alignment, offset = 0;
    for (uint64_t i = 0; ok && i < w->n_tensors; i++) {
        wtensor *t = &w->tensors[i];
        t->offset = offset;
        ok = put_str(h, t->name) && put_u32(h, t->n_dims);
        for (uint32_t d = 0; ok && d < t->n_dims; d++) ok = put_u64(h, (uint64_t)t->ne[d]);
        ok = ok && put_u32(h, t->type) && put_u64(h, t->offset);
        uint64_t padded = (t->n_bytes + a - 1) / a * a;
        if (padded < t->n_bytes || offset > UINT64_MAX - padded)
            return halo_fail(err, HALO_E_OVERFLOW, "tensor data exceeds 2^64 bytes");
        offset += padded;
    }
    static const unsigned char zeros[256];
    while (ok && h->len % a) {
        size_t pad = a - h->len % a;
        ok = put(h, zeros, pad < sizeof zeros ? pad : sizeof zeros);
    }
    if (!ok) return halo_fail(err, HALO_E_NOMEM, "out of memory encoding the GGUF header");
    *total = h->len + offset;
    return HALO_OK;
}

static halo_status write_all(int fd, const void *data, uint64_t n, uint64_t offset,
                             const char *path, halo_error *err) {
    const unsigned char *p = data;
    while (n > 0) {
        size_t chunk = n > (1u << 30) ? (1u << 30) : (size_t)n;
        ssize_t put_n = pwrite(fd, p, chunk, (off_t)offset);
        if (put_n < 0 && errno == EINTR) continue;
        if (put_n <= 0)
            return halo_fail(err, HALO_E_IO, "%s: write failed: %s", path, strerror(errno));
        p += put_n;
        offset += (uint64_t)put_n;
        n -= (uint64_t)put_n;
    }
    return HALO_OK;
}

halo_status halo_gguf_writer_write_file(halo_gguf_writer *w, const char *path, halo_error *err) {
    bytes h = {0};
    uint64_t total;
    halo_status st = encode_header(w, &h, &total, err);
    if (st) {
        free(h.p);
        return st;
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        free(h.p);
        return halo_fail(err, HALO_E_IO, "%s: cannot create: %s", path, strerror(errno));
    }
    st = write_all(fd, h.p, h.len, 0, path, err);
    for (uint64_t i = 0; !st && i < w->n_tensors; i++) {
        const wtensor *t = &w->tensors[i];
        if (t->data) st = write_all(fd, t->data, t->n_bytes, h.len + t->offset, path, err);
    }
    /* Extending with ftruncate leaves unwritten tensors (and padding) as holes. */
    if (!st && ftruncate(fd, (off_t)total) != 0)
        st = halo_fail(err, HALO_E_IO, "%s: cannot size file to %llu bytes: %s", path,
                       (unsigned long long)total, strerror(errno));
    if (close(fd) != 0 && !st)
        st = halo_fail(err, HALO_E_IO, "%s: close failed: %s", path, strerror(errno));
    free(h.p);
    return st;
}

halo_status halo_gguf_writer_write_memory(halo_gguf_writer *w, void **out, size_t *size,
                                          halo_error *err) {
    *out = NULL;
    *size = 0;
    bytes h = {0};
    uint64_t total;
    halo_status st = encode_header(w, &h, &total, err);
    if (st) {
        free(h.p);
        return st;
    }
    unsigned char *img = total <= SIZE_MAX ? calloc(1, total ? (size_t)total : 1) : NULL;
    if (!img) {
        free(h.p);
        return halo_fail(err, HALO_E_NOMEM, "out of memory for a %llu-byte GGUF image",
                         (unsigned long long)total);
    }
    memcpy(img, h.p, h.len);
    for (uint64_t i = 0; i < w->n_tensors; i++) {
        const wtensor *t = &w->tensors[i];
        if (t->data) memcpy(img + h.len + t->offset, t->data, t->n_bytes);
    }
    free(h.p);
    *out = img;
    *size = (size_t)total;
    return HALO_OK;
}
