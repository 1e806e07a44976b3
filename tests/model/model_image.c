/* See model_image.h. The layout walked is GGUF v2/v3: magic, version, tensor count, kv count,
 * the kvs (key string, type, value), the tensor infos (name, n_dims, ne[n_dims], type, offset)
 * and the data section at the next multiple of general.alignment. */
#include "model_image.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct cursor {
    const model_image *m;
    uint64_t at;
    int bad;
} cursor;

static uint64_t rd(cursor *c, unsigned n) {
    uint64_t v = 0;
    if (c->bad || c->at + n > c->m->size) {
        c->bad = 1;
        return 0;
    }
    memcpy(&v, c->m->data + c->at, n); /* little-endian hosts only, as halo itself */
    c->at += n;
    return v;
}

static void skip_str(cursor *c) {
    uint64_t n = rd(c, 8);
    if (n > c->m->size)
        c->bad = 1;
    else
        c->at += n;
}

static unsigned scalar_size(uint32_t t) {
    static const unsigned size[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    return t < sizeof size / sizeof size[0] ? size[t] : 0;
}

static int walk(model_image *m) {
    cursor c = {m, 4, 0};
    rd(&c, 4); /* version */
    m->n_tensors = rd(&c, 8);
    m->n_kv = rd(&c, 8);
    if (c.bad || m->n_kv > m->size || m->n_tensors > m->size) return -1;
    m->kv = calloc(m->n_kv + 1, sizeof *m->kv);
    m->tensors = calloc(m->n_tensors + 1, sizeof *m->tensors);
    if (!m->kv || !m->tensors) return -1;
    uint64_t alignment = 32;
    for (uint64_t i = 0; i < m->n_kv && !c.bad; i++) {
        image_kv *kv = &m->kv[i];
        kv->key_len = rd(&c, 8);
        kv->key_off = c.at;
        kv->key = (const char *)m->data + c.at;
        c.at += kv->key_len;
        kv->type = (uint32_t)rd(&c, 4);
        kv->value_off = c.at;
        if (kv->type == HALO_GGUF_STRING) {
            skip_str(&c);
        } else if (kv->type == HALO_GGUF_ARRAY) {
            kv->elem_type = (uint32_t)rd(&c, 4);
            kv->count = rd(&c, 8);
            kv->value_off = c.at;
            if (kv->elem_type == HALO_GGUF_STRING) {
                if (kv->count > m->size) return -1;
                kv->elem_off = malloc((kv->count + 1) * sizeof *kv->elem_off);
                if (!kv->elem_off) return -1;
                for (uint64_t j = 0; j < kv->count && !c.bad; j++) {
                    kv->elem_off[j] = c.at;
                    skip_str(&c);
                }
            } else {
                unsigned es = scalar_size(kv->elem_type);
                if (!es || kv->count > m->size) return -1;
                c.at += kv->count * es;
            }
        } else {
            unsigned s = scalar_size(kv->type);
            if (!s) return -1;
            if (kv->key_len == 17 && !memcmp(kv->key, "general.alignment", 17))
                memcpy(&alignment, m->data + c.at, 4), alignment &= 0xffffffffu;
            c.at += s;
        }
    }
    uint64_t *rel = calloc(m->n_tensors + 1, sizeof *rel);
    if (!rel) return -1;
    for (uint64_t i = 0; i < m->n_tensors && !c.bad; i++) {
        image_tensor *t = &m->tensors[i];
        uint64_t len = rd(&c, 8);
        if (len > 4096 || c.at + len > m->size) {
            c.bad = 1;
            break;
        }
        char *name = malloc(len + 1);
        if (!name) break;
        memcpy(name, m->data + c.at, len);
        name[len] = 0;
        t->name = name;
        c.at += len;
        t->info_off = c.at;
        t->n_dims = (uint32_t)rd(&c, 4);
        uint64_t n = 1;
        for (uint32_t d = 0; d < t->n_dims && d < 4; d++)
            n *= rd(&c, 8);
        uint32_t type = (uint32_t)rd(&c, 4);
        rel[i] = rd(&c, 8);
        uint64_t bytes = 0;
        t->n_bytes = halo_type_bytes(type, n, &bytes) ? bytes : 0;
    }
    uint64_t data = (c.at + alignment - 1) / alignment * alignment;
    for (uint64_t i = 0; i < m->n_tensors; i++)
        m->tensors[i].data_off = data + rel[i];
    free(rel);
    return c.bad ? -1 : 0;
}

int model_image_load(model_image *m, const char *path) {
    memset(m, 0, sizeof *m);
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    int rc = -1;
    if (fseek(f, 0, SEEK_END) == 0) {
        long n = ftell(f);
        if (n > 24 && fseek(f, 0, SEEK_SET) == 0 && (m->data = malloc((size_t)n))) {
            m->size = (size_t)n;
            if (fread(m->data, 1, m->size, f) == m->size) rc = walk(m);
        }
    }
    fclose(f);
    if (rc) model_image_free(m);
    return rc;
}

void model_image_free(model_image *m) {
    if (m->kv)
        for (uint64_t i = 0; i < m->n_kv; i++)
            free(m->kv[i].elem_off);
    if (m->tensors)
        for (uint64_t i = 0; i < m->n_tensors; i++)
            free((char *)m->tensors[i].name);
    free(m->kv);
    free(m->tensors);
    free(m->data);
    memset(m, 0, sizeof *m);
}

int model_image_copy(model_image *dst, const model_image *src) {
    memset(dst, 0, sizeof *dst);
    dst->data = malloc(src->size);
    if (!dst->data) return -1;
    memcpy(dst->data, src->data, src->size);
    dst->size = src->size;
    if (walk(dst)) {
        model_image_free(dst);
        return -1;
    }
    return 0;
}

const image_kv *model_image_kv(const model_image *m, const char *key) {
    size_t n = strlen(key);
    for (uint64_t i = 0; i < m->n_kv; i++)
        if (m->kv[i].key_len == n && !memcmp(m->kv[i].key, key, n)) return &m->kv[i];
    return NULL;
}

const image_tensor *model_image_tensor(const model_image *m, const char *name) {
    for (uint64_t i = 0; i < m->n_tensors; i++)
        if (m->tensors[i].name && !strcmp(m->tensors[i].name, name)) return &m->tensors[i];
    return NULL;
}

int model_image_set_int(model_image *m, const char *key, int64_t i, int64_t v) {
    const image_kv *kv = model_image_kv(m, key);
    if (!kv) return -1;
    uint32_t type = kv->type;
    uint64_t off = kv->value_off;
    if (i >= 0) {
        if (type != HALO_GGUF_ARRAY || (uint64_t)i >= kv->count) return -1;
        type = kv->elem_type;
        off += (uint64_t)i * scalar_size(type);
    }
    unsigned s = scalar_size(type);
    if (!s || type == HALO_GGUF_F32 || type == HALO_GGUF_F64) return -1;
    memcpy(m->data + off, &v, s);
    return 0;
}

int model_image_set_f32(model_image *m, const char *key, float v) {
    const image_kv *kv = model_image_kv(m, key);
    if (!kv || kv->type != HALO_GGUF_F32) return -1;
    memcpy(m->data + kv->value_off, &v, 4);
    return 0;
}

int model_image_set_str(model_image *m, const char *key, uint64_t i, const char *s) {
    const image_kv *kv = model_image_kv(m, key);
    if (!kv || kv->type != HALO_GGUF_ARRAY || !kv->elem_off || i >= kv->count) return -1;
    uint64_t len;
    memcpy(&len, m->data + kv->elem_off[i], 8);
    if (len != strlen(s)) return -1;
    memcpy(m->data + kv->elem_off[i] + 8, s, len);
    return 0;
}

void *model_image_tensor_data(model_image *m, const char *name) {
    const image_tensor *t = model_image_tensor(m, name);
    return t && t->data_off + t->n_bytes <= m->size ? m->data + t->data_off : NULL;
}

int model_image_write(const model_image *m, const char *path) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    int ok = fwrite(m->data, 1, m->size, f) == m->size;
    return (fclose(f) == 0 && ok) ? 0 : -1;
}
