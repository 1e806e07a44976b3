/* Typed metadata getters. Writers disagree on integer widths for the same key (u32 in one
 * converter, i32 or u64 in another), so integer getters convert whenever the value fits. */
#include <math.h>
#include <string.h>

#include "core/error.h"
#include "gguf/internal.h"

const char *halo_gguf_vtype_name(halo_gguf_vtype type) {
    static const char *names[HALO_GGUF_VTYPE_COUNT] = {
        "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64",
        "f64"};
    return (unsigned)type < HALO_GGUF_VTYPE_COUNT ? names[type] : "unknown";
}

static halo_status find(const halo_gguf *g, const char *key, const halo_gguf_kv **kv,
                        halo_error *err) {
    *kv = halo_gguf_find_kv(g, key);
    if (!*kv) return halo_fail(err, HALO_E_NOT_FOUND, "metadata key '%s' is missing", key);
    return HALO_OK;
}

static halo_status mismatch(const char *key, halo_gguf_vtype have, const char *want,
                            halo_error *err) {
    return halo_fail(err, HALO_E_TYPE_MISMATCH, "metadata key '%s' has type %s, expected %s", key,
                     halo_gguf_vtype_name(have), want);
}

/* Reads one integer of `type` at p as a sign flag plus magnitude. */
static bool load_int(halo_gguf_vtype type, const void *p, bool *negative, uint64_t *mag) {
    int64_t s;
    *negative = false;
    switch (type) {
    case HALO_GGUF_U8: *mag = *(const uint8_t *)p; return true;
    case HALO_GGUF_U16: { uint16_t v; memcpy(&v, p, 2); *mag = v; return true; }
    case HALO_GGUF_U32: { uint32_t v; memcpy(&v, p, 4); *mag = v; return true; }
    case HALO_GGUF_U64: memcpy(mag, p, 8); return true;
    case HALO_GGUF_BOOL: *mag = *(const uint8_t *)p; return true;
    case HALO_GGUF_I8: s = *(const int8_t *)p; break;
    case HALO_GGUF_I16: { int16_t v; memcpy(&v, p, 2); s = v; break; }
    case HALO_GGUF_I32: { int32_t v; memcpy(&v, p, 4); s = v; break; }
    case HALO_GGUF_I64: memcpy(&s, p, 8); break;
    default: return false;
    }
    *negative = s < 0;
    *mag = s < 0 ? (uint64_t)0 - (uint64_t)s : (uint64_t)s;
    return true;
}

static bool load_float(halo_gguf_vtype type, const void *p, double *out) {
    if (type == HALO_GGUF_F32) {
        float f;
        memcpy(&f, p, 4);
        *out = f;
        return true;
    }
    if (type == HALO_GGUF_F64) {
        memcpy(out, p, 8);
        return true;
    }
    return false;
}

static const void *scalar_ptr(const halo_gguf_kv *kv) { return &kv->v; }

halo_status halo_gguf_get_u64(const halo_gguf *g, const char *key, uint64_t *out,
                              halo_error *err) {
    const halo_gguf_kv *kv;
    halo_status st = find(g, key, &kv, err);
    if (st) return st;
    bool neg;
    uint64_t mag;
    if (kv->type == HALO_GGUF_BOOL || !load_int(kv->type, scalar_ptr(kv), &neg, &mag))
        return mismatch(key, kv->type, "an integer", err);
    if (neg) return halo_fail(err, HALO_E_BAD_VALUE, "metadata key '%s' is negative", key);
    *out = mag;
    return HALO_OK;
}

halo_status halo_gguf_get_i64(const halo_gguf *g, const char *key, int64_t *out,
                              halo_error *err) {
    const halo_gguf_kv *kv;
    halo_status st = find(g, key, &kv, err);
    if (st) return st;
    bool neg;
    uint64_t mag;
    if (kv->type == HALO_GGUF_BOOL || !load_int(kv->type, scalar_ptr(kv), &neg, &mag))
        return mismatch(key, kv->type, "an integer", err);
    if (!neg && mag > INT64_MAX)
        return halo_fail(err, HALO_E_BAD_VALUE, "metadata key '%s' does not fit in i64", key);
    *out = neg ? (int64_t)(0 - mag) : (int64_t)mag;
    return HALO_OK;
}

halo_status halo_gguf_get_u32(const halo_gguf *g, const char *key, uint32_t *out,
                              halo_error *err) {
    uint64_t v = 0;
    halo_status st = halo_gguf_get_u64(g, key, &v, err);
    if (st) return st;
    if (v > UINT32_MAX)
        return halo_fail(err, HALO_E_BAD_VALUE, "metadata key '%s' = %llu does not fit in u32",
                         key, (unsigned long long)v);
    *out = (uint32_t)v;
    return HALO_OK;
}

halo_status halo_gguf_get_f64(const halo_gguf *g, const char *key, double *out,
                              halo_error *err) {
    const halo_gguf_kv *kv;
    halo_status st = find(g, key, &kv, err);
    if (st) return st;
    if (!load_float(kv->type, scalar_ptr(kv), out)) return mismatch(key, kv->type, "a float", err);
    return HALO_OK;
}

halo_status halo_gguf_get_f32(const halo_gguf *g, const char *key, float *out,
                              halo_error *err) {
    double v;
    halo_status st = halo_gguf_get_f64(g, key, &v, err);
    if (st) return st;
    *out = (float)v;
    return HALO_OK;
}

halo_status halo_gguf_get_bool(const halo_gguf *g, const char *key, bool *out,
                               halo_error *err) {
    const halo_gguf_kv *kv;
    halo_status st = find(g, key, &kv, err);
    if (st) return st;
    if (kv->type != HALO_GGUF_BOOL) return mismatch(key, kv->type, "bool", err);
    *out = kv->v.b;
    return HALO_OK;
}

halo_status halo_gguf_get_str(const halo_gguf *g, const char *key, const char **out,
                              halo_error *err) {
    const halo_gguf_kv *kv;
    halo_status st = find(g, key, &kv, err);
    if (st) return st;
    if (kv->type != HALO_GGUF_STRING) return mismatch(key, kv->type, "string", err);
    *out = kv->v.str.data;
    return HALO_OK;
}

halo_status halo_gguf_get_array(const halo_gguf *g, const char *key, const halo_gguf_kv **out,
                                halo_error *err) {
    halo_status st = find(g, key, out, err);
    if (st) return st;
    if ((*out)->type != HALO_GGUF_ARRAY) return mismatch(key, (*out)->type, "array", err);
    return HALO_OK;
}

static halo_status array_elem(const halo_gguf_kv *kv, uint64_t i, const void **p,
                              halo_error *err) {
    if (kv->type != HALO_GGUF_ARRAY || kv->elem_type == HALO_GGUF_STRING)
        return mismatch(kv->key.data, kv->type, "a numeric array", err);
    if (i >= kv->count)
        return halo_fail(err, HALO_E_INVALID_ARG, "metadata key '%s': index %llu >= length %llu",
                         kv->key.data, (unsigned long long)i, (unsigned long long)kv->count);
    *p = (const unsigned char *)kv->v.array + i * gguf_vtype_size(kv->elem_type);
    return HALO_OK;
}

halo_status halo_gguf_array_u64(const halo_gguf_kv *kv, uint64_t i, uint64_t *out,
                                halo_error *err) {
    const void *p = NULL;
    halo_status st = array_elem(kv, i, &p, err);
    if (st) return st;
    bool neg;
    if (!load_int(kv->elem_type, p, &neg, out))
        return mismatch(kv->key.data, kv->elem_type, "integer elements", err);
    if (neg)
        return halo_fail(err, HALO_E_BAD_VALUE, "metadata key '%s': element %llu is negative",
                         kv->key.data, (unsigned long long)i);
    return HALO_OK;
}

halo_status halo_gguf_array_f64(const halo_gguf_kv *kv, uint64_t i, double *out,
                                halo_error *err) {
    const void *p = NULL;
    halo_status st = array_elem(kv, i, &p, err);
    if (st) return st;
    if (load_float(kv->elem_type, p, out)) return HALO_OK;
    bool neg;
    uint64_t mag;
    if (kv->elem_type == HALO_GGUF_BOOL || !load_int(kv->elem_type, p, &neg, &mag))
        return mismatch(kv->key.data, kv->elem_type, "numeric elements", err);
    *out = neg ? -(double)mag : (double)mag;
    return HALO_OK;
}
