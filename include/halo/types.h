/* Tensor element types, numbered as ggml numbers them in GGUF files (ggml.h `enum ggml_type`).
 * The ids are a file-format fact: they must match what llama.cpp and ds4 write. */
#ifndef HALO_TYPES_H
#define HALO_TYPES_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum halo_type {
    HALO_TYPE_F32 = 0,
    HALO_TYPE_F16 = 1,
    HALO_TYPE_Q4_0 = 2,
    HALO_TYPE_Q4_1 = 3,
    /* 4 and 5 (Q4_2, Q4_3) were removed from ggml and never appear in GGUF files. */
    HALO_TYPE_Q5_0 = 6,
    HALO_TYPE_Q5_1 = 7,
    HALO_TYPE_Q8_0 = 8,
    HALO_TYPE_Q8_1 = 9,
    HALO_TYPE_Q2_K = 10,
    HALO_TYPE_Q3_K = 11,
    HALO_TYPE_Q4_K = 12,
    HALO_TYPE_Q5_K = 13,
    HALO_TYPE_Q6_K = 14,
    HALO_TYPE_Q8_K = 15,
    HALO_TYPE_IQ2_XXS = 16,
    HALO_TYPE_IQ2_XS = 17,
    HALO_TYPE_IQ3_XXS = 18,
    HALO_TYPE_IQ1_S = 19,
    HALO_TYPE_IQ4_NL = 20,
    HALO_TYPE_IQ3_S = 21,
    HALO_TYPE_IQ2_S = 22,
    HALO_TYPE_IQ4_XS = 23,
    HALO_TYPE_I8 = 24,
    HALO_TYPE_I16 = 25,
    HALO_TYPE_I32 = 26,
    HALO_TYPE_I64 = 27,
    HALO_TYPE_F64 = 28,
    HALO_TYPE_IQ1_M = 29,
    HALO_TYPE_BF16 = 30,
    /* 31..33 (Q4_0_4_4 ...) and 36..38 (IQ4_NL_4_4 ...) are repacked runtime layouts that
     * ggml no longer accepts in files. */
    HALO_TYPE_TQ1_0 = 34,
    HALO_TYPE_TQ2_0 = 35,
    HALO_TYPE_MXFP4 = 39,
    HALO_TYPE_NVFP4 = 40,
    HALO_TYPE_Q1_0 = 41,
    HALO_TYPE_Q2_0 = 42,
    HALO_TYPE_ID_LIMIT = 43 /* one past the largest id in the table (ggml v0.5.0's count) */
} halo_type;

typedef struct halo_type_info {
    const char *name;    /* ggml's name: "q8_0", "iq2_xxs", "mxfp4" ... */
    uint32_t block_size; /* elements per block */
    uint32_t block_bytes;/* bytes per block */
    bool quantized;
} halo_type_info;

/* Traits of a type id, or NULL for an id that is not a known GGUF tensor type. */
const halo_type_info *halo_type_info_get(uint32_t type);

/* Name of a type id; "unknown" for ids halo does not know. */
const char *halo_type_name(uint32_t type);

/* Type id for a ggml name (case-insensitive), or -1. */
int halo_type_from_name(const char *name);

/* Bytes of n elements of type; false when n is not a multiple of the block size, the type is
 * unknown, or the result would overflow. */
bool halo_type_bytes(uint32_t type, uint64_t n, uint64_t *bytes);

#ifdef __cplusplus
}
#endif
#endif
