/* Reads tests/data/gguf/ggufpy-mixed.gguf, written by llama.cpp's gguf-py (an independent
 * writer), and checks every key's type and value and every tensor's type, shape, size and data
 * checksum against ggufpy-mixed.expected.json, which the generating script
 * (tools/fixtures/make_ggufpy_fixture.py) wrote from its own inputs. Run from the repository
 * root. */
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>

#include "check.h"
#include "halo/gguf.h"

#define FIXTURE "tests/data/gguf/ggufpy-mixed.gguf"
#define EXPECTED "tests/data/gguf/ggufpy-mixed.expected.json"

static cJSON *expected;
static halo_gguf *gguf;

static char *read_text(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = NULL;
    long n = -1;
    if (fseek(f, 0, SEEK_END) == 0) n = ftell(f);
    if (n >= 0 && fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)n + 1)) != NULL) {
        if (fread(buf, 1, (size_t)n, f) != (size_t)n) {
            free(buf);
            buf = NULL;
        } else {
            buf[n] = '\0';
        }
    }
    fclose(f);
    return buf;
}

static uint64_t fnv1a64(const uint8_t *p, size_t n) {
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= UINT64_C(0x100000001b3);
    }
    return h;
}

/* 64-bit integers are decimal strings in the JSON (a JSON number is a double). */
static bool json_u64(const cJSON *j, uint64_t *out) {
    if (cJSON_IsString(j)) {
        char *end;
        *out = strtoull(j->valuestring, &end, 10);
        return *end == '\0';
    }
    if (cJSON_IsNumber(j)) {
        *out = (uint64_t)j->valuedouble;
        return true;
    }
    return false;
}

static bool json_i64(const cJSON *j, int64_t *out) {
    if (cJSON_IsString(j)) {
        char *end;
        *out = strtoll(j->valuestring, &end, 10);
        return *end == '\0';
    }
    if (cJSON_IsNumber(j)) {
        *out = (int64_t)j->valuedouble;
        return true;
    }
    return false;
}

/* Compares one value of scalar type `type` stored at p (packed little-endian, as in arrays and
 * as halo's union holds it) with its JSON form. */
static bool value_matches(halo_gguf_vtype type, const void *p, const cJSON *want) {
    uint64_t u = 0;
    int64_t s = 0;
    switch (type) {
    case HALO_GGUF_U8:
        return json_u64(want, &u) && *(const uint8_t *)p == u;
    case HALO_GGUF_I8:
        return json_i64(want, &s) && *(const int8_t *)p == s;
    case HALO_GGUF_U16: {
        uint16_t v;
        memcpy(&v, p, 2);
        return json_u64(want, &u) && v == u;
    }
    case HALO_GGUF_I16: {
        int16_t v;
        memcpy(&v, p, 2);
        return json_i64(want, &s) && v == s;
    }
    case HALO_GGUF_U32: {
        uint32_t v;
        memcpy(&v, p, 4);
        return json_u64(want, &u) && v == u;
    }
    case HALO_GGUF_I32: {
        int32_t v;
        memcpy(&v, p, 4);
        return json_i64(want, &s) && v == s;
    }
    case HALO_GGUF_U64: {
        uint64_t v;
        memcpy(&v, p, 8);
        return json_u64(want, &u) && v == u;
    }
    case HALO_GGUF_I64: {
        int64_t v;
        memcpy(&v, p, 8);
        return json_i64(want, &s) && v == s;
    }
    /* The JSON holds the exact stored value (float32 widened to double), so == is right. */
    case HALO_GGUF_F32: {
        float v;
        memcpy(&v, p, 4);
        return cJSON_IsNumber(want) && (double)v == want->valuedouble;
    }
    case HALO_GGUF_F64: {
        double v;
        memcpy(&v, p, 8);
        return cJSON_IsNumber(want) && v == want->valuedouble;
    }
    case HALO_GGUF_BOOL: {
        uint8_t v = *(const uint8_t *)p;
        return cJSON_IsBool(want) && v == (cJSON_IsTrue(want) ? 1 : 0);
    }
    case HALO_GGUF_STRING: {
        const halo_gguf_str *str = p;
        return cJSON_IsString(want) && str->len == strlen(want->valuestring) &&
               memcmp(str->data, want->valuestring, str->len) == 0;
    }
    default:
        return false;
    }
}

static size_t scalar_size(halo_gguf_vtype t) {
    switch (t) {
    case HALO_GGUF_U8:
    case HALO_GGUF_I8:
    case HALO_GGUF_BOOL:
        return 1;
    case HALO_GGUF_U16:
    case HALO_GGUF_I16:
        return 2;
    case HALO_GGUF_U32:
    case HALO_GGUF_I32:
    case HALO_GGUF_F32:
        return 4;
    case HALO_GGUF_U64:
    case HALO_GGUF_I64:
    case HALO_GGUF_F64:
        return 8;
    case HALO_GGUF_STRING:
        return sizeof(halo_gguf_str);
    default:
        return 0;
    }
}

static void ggufpy_fixture_opens_with_header_facts(void) {
    CHECK(gguf != NULL);
    if (!gguf) return;
    CHECK_INT(halo_gguf_version(gguf), cJSON_GetObjectItem(expected, "version")->valueint);
    CHECK_INT(halo_gguf_alignment(gguf), cJSON_GetObjectItem(expected, "alignment")->valueint);
    CHECK_INT(halo_gguf_shard_size(gguf, 0),
              (long long)cJSON_GetObjectItem(expected, "file_size")->valuedouble);
    CHECK_INT(halo_gguf_shard_data_offset(gguf, 0) % halo_gguf_alignment(gguf), 0);
}

static void ggufpy_fixture_keys_match_in_order_type_and_value(void) {
    if (!gguf) return;
    const cJSON *kvs = cJSON_GetObjectItem(expected, "kv");
    CHECK_INT(halo_gguf_kv_count(gguf), cJSON_GetArraySize(kvs));
    uint64_t i = 0;
    const cJSON *want;
    cJSON_ArrayForEach(want, kvs) {
        const char *key = cJSON_GetObjectItem(want, "key")->valuestring;
        int type = cJSON_GetObjectItem(want, "type")->valueint;
        const cJSON *value = cJSON_GetObjectItem(want, "value");
        const halo_gguf_kv *kv = halo_gguf_kv_at(gguf, i++);
        CHECK(kv != NULL);
        if (!kv) continue;
        /* The reader keeps file order, and find_kv reaches the same entry. */
        CHECK(kv->key.len == strlen(key) && memcmp(kv->key.data, key, kv->key.len) == 0);
        CHECK(halo_gguf_find_kv(gguf, key) == kv);
        CHECK_INT(kv->type, type);
        if (kv->type != (halo_gguf_vtype)type) continue;
        bool ok;
        if (type == HALO_GGUF_ARRAY) {
            int elem = cJSON_GetObjectItem(want, "elem_type")->valueint;
            CHECK_INT(kv->elem_type, elem);
            CHECK_INT(kv->count, cJSON_GetArraySize(value));
            ok = kv->elem_type == (halo_gguf_vtype)elem &&
                 kv->count == (uint64_t)cJSON_GetArraySize(value);
            size_t stride = scalar_size(kv->elem_type);
            uint64_t j = 0;
            const cJSON *item;
            cJSON_ArrayForEach(item, value) {
                if (!ok) break;
                ok =
                    value_matches(kv->elem_type, (const uint8_t *)kv->v.array + j++ * stride, item);
            }
        } else {
            ok = value_matches(kv->type, &kv->v, value);
        }
        if (!ok) fprintf(stderr, "value of %s differs from " EXPECTED "\n", key);
        CHECK(ok);
    }
}

static void ggufpy_fixture_tensors_match_shape_size_and_checksum(void) {
    if (!gguf) return;
    const cJSON *tensors = cJSON_GetObjectItem(expected, "tensors");
    CHECK_INT(halo_gguf_tensor_count(gguf), cJSON_GetArraySize(tensors));
    uint64_t i = 0;
    const cJSON *want;
    cJSON_ArrayForEach(want, tensors) {
        const char *name = cJSON_GetObjectItem(want, "name")->valuestring;
        const halo_gguf_tensor *t = halo_gguf_tensor_at(gguf, i++);
        CHECK(t != NULL);
        if (!t) continue;
        CHECK_STR(t->name, name);
        CHECK(halo_gguf_find_tensor(gguf, name) == t);
        CHECK_INT(t->type, cJSON_GetObjectItem(want, "type")->valueint);
        const cJSON *ne = cJSON_GetObjectItem(want, "ne");
        CHECK_INT(t->n_dims, cJSON_GetArraySize(ne));
        for (int d = 0; d < HALO_GGUF_MAX_DIMS; d++) {
            const cJSON *n = cJSON_GetArrayItem(ne, d);
            CHECK_INT(t->ne[d], (n ? n->valueint : 1));
        }
        uint64_t n_bytes = (uint64_t)cJSON_GetObjectItem(want, "n_bytes")->valuedouble;
        CHECK_INT(t->n_bytes, n_bytes);
        CHECK_INT(t->file_offset % halo_gguf_alignment(gguf), 0);

        uint8_t *buf = malloc(t->n_bytes ? t->n_bytes : 1);
        CHECK(buf != NULL);
        if (!buf) continue;
        halo_error err = {0};
        CHECK_INT(halo_gguf_read_tensor(gguf, t, buf, t->n_bytes, &err), HALO_OK);
        char hex[17];
        snprintf(hex, sizeof(hex), "%016" PRIx64, fnv1a64(buf, t->n_bytes));
        CHECK_STR(hex, cJSON_GetObjectItem(want, "fnv1a64")->valuestring);
        free(buf);
    }
}

int main(void) {
    char *text = read_text(EXPECTED);
    if (!text) {
        fprintf(stderr, "cannot read %s (run from the repository root)\n", EXPECTED);
        return 1;
    }
    expected = cJSON_Parse(text);
    free(text);
    if (!expected) {
        fprintf(stderr, "%s is not valid JSON\n", EXPECTED);
        return 1;
    }
    halo_error err = {0};
    if (halo_gguf_open(FIXTURE, &gguf, &err) != HALO_OK) {
        fprintf(stderr, "open %s: %s\n", FIXTURE, err.message);
        gguf = NULL;
    }
    RUN(ggufpy_fixture_opens_with_header_facts);
    RUN(ggufpy_fixture_keys_match_in_order_type_and_value);
    RUN(ggufpy_fixture_tensors_match_shape_size_and_checksum);
    halo_gguf_close(gguf);
    cJSON_Delete(expected);
    return check_report();
}
