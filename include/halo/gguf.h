/* GGUF files: a strict, header-only reader (v2 and v3, split models as one) and a writer.
 *
 * Opening reads and validates the header (metadata and tensor infos) only; tensor bytes stay on
 * disk until halo_gguf_read_tensor or a loader reads them. All strings and arrays returned point
 * into the halo_gguf object and live until halo_gguf_close. */
#ifndef HALO_GGUF_H
#define HALO_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "halo/status.h"
#include "halo/types.h"

#ifdef __cplusplus
extern "C" {
#endif

#define HALO_GGUF_MAX_DIMS 4
#define HALO_GGUF_DEFAULT_ALIGNMENT 32

/* Metadata value types, numbered as in the GGUF specification. */
typedef enum halo_gguf_vtype {
    HALO_GGUF_U8 = 0,
    HALO_GGUF_I8 = 1,
    HALO_GGUF_U16 = 2,
    HALO_GGUF_I16 = 3,
    HALO_GGUF_U32 = 4,
    HALO_GGUF_I32 = 5,
    HALO_GGUF_F32 = 6,
    HALO_GGUF_BOOL = 7,
    HALO_GGUF_STRING = 8,
    HALO_GGUF_ARRAY = 9,
    HALO_GGUF_U64 = 10,
    HALO_GGUF_I64 = 11,
    HALO_GGUF_F64 = 12,
    HALO_GGUF_VTYPE_COUNT
} halo_gguf_vtype;

/* A GGUF string: `len` bytes at `data`, followed by a NUL halo adds (the string itself may hold
 * NULs; use len). */
typedef struct halo_gguf_str {
    uint64_t len;
    const char *data;
} halo_gguf_str;

typedef struct halo_gguf_kv {
    halo_gguf_str key;
    halo_gguf_vtype type;
    /* Arrays: element type and count; `v.array` holds `count` packed little-endian values of
     * elem_type, or `count` halo_gguf_str for string arrays. */
    halo_gguf_vtype elem_type;
    uint64_t count;
    union {
        uint8_t u8;
        int8_t i8;
        uint16_t u16;
        int16_t i16;
        uint32_t u32;
        int32_t i32;
        float f32;
        bool b;
        uint64_t u64;
        int64_t i64;
        double f64;
        halo_gguf_str str;
        const void *array;
    } v;
} halo_gguf_kv;

typedef struct halo_gguf_tensor {
    const char *name;
    uint32_t type;             /* halo_type id */
    uint32_t n_dims;
    int64_t ne[HALO_GGUF_MAX_DIMS]; /* ggml order: ne[0] is the contiguous dimension; unused = 1 */
    uint64_t n_elements;
    uint64_t n_bytes;
    uint32_t shard;            /* index of the file holding the data */
    uint64_t file_offset;      /* absolute byte offset of the data in that file */
} halo_gguf_tensor;

typedef struct halo_gguf halo_gguf;

/* Opens and validates a GGUF file. A path matching `*-00001-of-0000N.gguf` opens all N shards
 * as one model (tensors from every shard, metadata from the first). */
halo_status halo_gguf_open(const char *path, halo_gguf **out, halo_error *err);
/* Parses a GGUF image held in memory (not copied: it must outlive the object). */
halo_status halo_gguf_open_memory(const void *data, size_t size, halo_gguf **out, halo_error *err);
void halo_gguf_close(halo_gguf *g);

uint32_t halo_gguf_version(const halo_gguf *g);
uint32_t halo_gguf_alignment(const halo_gguf *g);

uint64_t halo_gguf_kv_count(const halo_gguf *g);
const halo_gguf_kv *halo_gguf_kv_at(const halo_gguf *g, uint64_t i);
const halo_gguf_kv *halo_gguf_find_kv(const halo_gguf *g, const char *key);

/* Typed getters. Integers convert between widths and signedness when the value fits
 * (HALO_E_BAD_VALUE otherwise); floats accept f32/f64. Missing keys give HALO_E_NOT_FOUND,
 * other types HALO_E_TYPE_MISMATCH, both naming the key. */
halo_status halo_gguf_get_u64(const halo_gguf *g, const char *key, uint64_t *out, halo_error *err);
halo_status halo_gguf_get_i64(const halo_gguf *g, const char *key, int64_t *out, halo_error *err);
halo_status halo_gguf_get_u32(const halo_gguf *g, const char *key, uint32_t *out, halo_error *err);
halo_status halo_gguf_get_f64(const halo_gguf *g, const char *key, double *out, halo_error *err);
halo_status halo_gguf_get_f32(const halo_gguf *g, const char *key, float *out, halo_error *err);
halo_status halo_gguf_get_bool(const halo_gguf *g, const char *key, bool *out, halo_error *err);
halo_status halo_gguf_get_str(const halo_gguf *g, const char *key, const char **out,
                              halo_error *err);
/* Array of any element type; elem_type and count describe it. */
halo_status halo_gguf_get_array(const halo_gguf *g, const char *key, const halo_gguf_kv **out,
                                halo_error *err);
/* Element i of a numeric array as u64/i64/f64 (with the same fit checks as the getters). */
halo_status halo_gguf_array_u64(const halo_gguf_kv *kv, uint64_t i, uint64_t *out, halo_error *err);
halo_status halo_gguf_array_f64(const halo_gguf_kv *kv, uint64_t i, double *out, halo_error *err);

uint64_t halo_gguf_tensor_count(const halo_gguf *g);
const halo_gguf_tensor *halo_gguf_tensor_at(const halo_gguf *g, uint64_t i);
const halo_gguf_tensor *halo_gguf_find_tensor(const halo_gguf *g, const char *name);

uint32_t halo_gguf_shard_count(const halo_gguf *g);
const char *halo_gguf_shard_path(const halo_gguf *g, uint32_t shard); /* "<memory>" for images */
uint64_t halo_gguf_shard_size(const halo_gguf *g, uint32_t shard);
uint64_t halo_gguf_shard_data_offset(const halo_gguf *g, uint32_t shard);

/* Reads a tensor's bytes into dst (dst_size must be at least t->n_bytes). */
halo_status halo_gguf_read_tensor(const halo_gguf *g, const halo_gguf_tensor *t, void *dst,
                                  size_t dst_size, halo_error *err);

const char *halo_gguf_vtype_name(halo_gguf_vtype type);

/* ---- writer ---------------------------------------------------------------------------- */

typedef struct halo_gguf_writer halo_gguf_writer;

halo_gguf_writer *halo_gguf_writer_create(void); /* NULL when out of memory */
void halo_gguf_writer_free(halo_gguf_writer *w);

/* GGUF version to write (2 or 3; default 3). v2 and v3 share one little-endian layout. */
halo_status halo_gguf_writer_set_version(halo_gguf_writer *w, uint32_t version);
/* Sets general.alignment (u32, power of two) and aligns the data section to it. */
halo_status halo_gguf_writer_set_alignment(halo_gguf_writer *w, uint32_t alignment);

/* Metadata setters: the key must not have been set before (HALO_E_DUPLICATE). */
halo_status halo_gguf_writer_set_u8(halo_gguf_writer *w, const char *key, uint8_t v);
halo_status halo_gguf_writer_set_i8(halo_gguf_writer *w, const char *key, int8_t v);
halo_status halo_gguf_writer_set_u16(halo_gguf_writer *w, const char *key, uint16_t v);
halo_status halo_gguf_writer_set_i16(halo_gguf_writer *w, const char *key, int16_t v);
halo_status halo_gguf_writer_set_u32(halo_gguf_writer *w, const char *key, uint32_t v);
halo_status halo_gguf_writer_set_i32(halo_gguf_writer *w, const char *key, int32_t v);
halo_status halo_gguf_writer_set_f32(halo_gguf_writer *w, const char *key, float v);
halo_status halo_gguf_writer_set_bool(halo_gguf_writer *w, const char *key, bool v);
halo_status halo_gguf_writer_set_u64(halo_gguf_writer *w, const char *key, uint64_t v);
halo_status halo_gguf_writer_set_i64(halo_gguf_writer *w, const char *key, int64_t v);
halo_status halo_gguf_writer_set_f64(halo_gguf_writer *w, const char *key, double v);
halo_status halo_gguf_writer_set_str(halo_gguf_writer *w, const char *key, const char *v);
/* Numeric array: `count` values of elem_type, packed, in host (little-endian) order. */
halo_status halo_gguf_writer_set_array(halo_gguf_writer *w, const char *key,
                                       halo_gguf_vtype elem_type, const void *values,
                                       uint64_t count);
halo_status halo_gguf_writer_set_str_array(halo_gguf_writer *w, const char *key,
                                           const char *const *values, uint64_t count);

/* Adds a tensor (ne in ggml order). `data` holds the tensor's n_bytes and is copied at write
 * time, so it must stay valid until then; NULL leaves the data as a hole (a sparse file: the
 * header is real and the size is right, but the bytes read back as zeros). */
halo_status halo_gguf_writer_add_tensor(halo_gguf_writer *w, const char *name, uint32_t type,
                                        uint32_t n_dims, const int64_t *ne, const void *data);

/* Writes the file. Tensors with data are written; holes are left by seeking past them. */
halo_status halo_gguf_writer_write_file(halo_gguf_writer *w, const char *path, halo_error *err);
/* Writes the image to a malloc'd buffer (caller frees *out); holes become zeros. */
halo_status halo_gguf_writer_write_memory(halo_gguf_writer *w, void **out, size_t *size,
                                          halo_error *err);

/* First error a setter or add_tensor met (they return it too); HALO_OK if none. The message
 * names the key or tensor. */
const halo_error *halo_gguf_writer_error(const halo_gguf_writer *w);

#ifdef __cplusplus
}
#endif
#endif
