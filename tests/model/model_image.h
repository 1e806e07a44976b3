/* A GGUF model file held in memory with the byte offset of every metadata value, array element
 * and tensor, so tests and the model fuzzer can change values in place (same size, so the rest
 * of the file stays valid) and write the result out as a new model. Only for the trusted
 * fixtures this repository ships: the walk assumes a well-formed file. */
#ifndef HALO_TESTS_MODEL_IMAGE_H
#define HALO_TESTS_MODEL_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#include "halo/gguf.h"

typedef struct image_kv {
    const char *key; /* points into the image (not terminated: key_len bytes) */
    uint64_t key_len, key_off;
    uint32_t type, elem_type;
    uint64_t value_off; /* scalars: the value; arrays: the first element; strings: the length */
    uint64_t count;     /* arrays: element count */
    uint64_t *elem_off; /* string arrays: offset of each element's length field; else NULL */
} image_kv;

typedef struct image_tensor {
    const char *name;  /* terminated copy */
    uint64_t info_off; /* the tensor info's n_dims field */
    uint32_t n_dims;
    uint64_t data_off, n_bytes;
} image_tensor;

typedef struct model_image {
    uint8_t *data; /* the file's bytes (owned) */
    size_t size;
    image_kv *kv;
    uint64_t n_kv;
    image_tensor *tensors;
    uint64_t n_tensors;
} model_image;

/* Reads path; 0 on success. */
int model_image_load(model_image *m, const char *path);
void model_image_free(model_image *m);
/* Deep copy (the offsets are shared by value); 0 on success. */
int model_image_copy(model_image *dst, const model_image *src);

const image_kv *model_image_kv(const model_image *m, const char *key);
const image_tensor *model_image_tensor(const model_image *m, const char *name);

/* Overwrites a scalar integer value (any integer width, truncated to it) or float value; an
 * integer array element when i >= 0. 0 on success, -1 when the key or type does not fit. */
int model_image_set_int(model_image *m, const char *key, int64_t i, int64_t v);
int model_image_set_f32(model_image *m, const char *key, float v);
/* Overwrites element i of a string array with s, which must have the element's length. */
int model_image_set_str(model_image *m, const char *key, uint64_t i, const char *s);
/* Pointer to a tensor's data in the image, or NULL. */
void *model_image_tensor_data(model_image *m, const char *name);

/* Writes the image to path; 0 on success. */
int model_image_write(const model_image *m, const char *path);

#endif
