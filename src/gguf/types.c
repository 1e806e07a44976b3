/* Block geometry of every ggml tensor type that appears in GGUF files. Sizes are format facts
 * (ggml-common.h block structs): e.g. Q2_K = 16 scale bytes + 64 quant bytes + f16 d + f16 dmin. */
#include "halo/types.h"

#include <stddef.h>
#include <strings.h>

#define QK_K 256

static const halo_type_info type_table[HALO_TYPE_ID_LIMIT] = {
    [HALO_TYPE_F32] = {"f32", 1, 4, false},
    [HALO_TYPE_F16] = {"f16", 1, 2, false},
    [HALO_TYPE_Q4_0] = {"q4_0", 32, 2 + 16, true},
    [HALO_TYPE_Q4_1] = {"q4_1", 32, 2 + 2 + 16, true},
    [HALO_TYPE_Q5_0] = {"q5_0", 32, 2 + 4 + 16, true},
    [HALO_TYPE_Q5_1] = {"q5_1", 32, 2 + 2 + 4 + 16, true},
    [HALO_TYPE_Q8_0] = {"q8_0", 32, 2 + 32, true},
    [HALO_TYPE_Q8_1] = {"q8_1", 32, 2 + 2 + 32, true},
    [HALO_TYPE_Q2_K] = {"q2_K", QK_K, QK_K / 16 + QK_K / 4 + 2 + 2, true},
    [HALO_TYPE_Q3_K] = {"q3_K", QK_K, QK_K / 8 + QK_K / 4 + 12 + 2, true},
    [HALO_TYPE_Q4_K] = {"q4_K", QK_K, 2 + 2 + 12 + QK_K / 2, true},
    [HALO_TYPE_Q5_K] = {"q5_K", QK_K, 2 + 2 + 12 + QK_K / 8 + QK_K / 2, true},
    [HALO_TYPE_Q6_K] = {"q6_K", QK_K, QK_K / 2 + QK_K / 4 + QK_K / 16 + 2, true},
    [HALO_TYPE_Q8_K] = {"q8_K", QK_K, 4 + QK_K + QK_K / 16 * 2, true},
    [HALO_TYPE_IQ2_XXS] = {"iq2_xxs", QK_K, 2 + QK_K / 4, true},
    [HALO_TYPE_IQ2_XS] = {"iq2_xs", QK_K, 2 + QK_K / 4 + QK_K / 32, true},
    [HALO_TYPE_IQ3_XXS] = {"iq3_xxs", QK_K, 2 + 3 * QK_K / 8, true},
    [HALO_TYPE_IQ1_S] = {"iq1_s", QK_K, 2 + QK_K / 8 + QK_K / 16, true},
    [HALO_TYPE_IQ4_NL] = {"iq4_nl", 32, 2 + 16, true},
    [HALO_TYPE_IQ3_S] = {"iq3_s", QK_K, 2 + QK_K / 4 + QK_K / 32 + QK_K / 8 + QK_K / 64, true},
    [HALO_TYPE_IQ2_S] = {"iq2_s", QK_K, 2 + QK_K / 4 + QK_K / 32 + QK_K / 32, true},
    [HALO_TYPE_IQ4_XS] = {"iq4_xs", QK_K, 2 + 2 + QK_K / 64 + QK_K / 2, true},
    [HALO_TYPE_I8] = {"i8", 1, 1, false},
    [HALO_TYPE_I16] = {"i16", 1, 2, false},
    [HALO_TYPE_I32] = {"i32", 1, 4, false},
    [HALO_TYPE_I64] = {"i64", 1, 8, false},
    [HALO_TYPE_F64] = {"f64", 1, 8, false},
    [HALO_TYPE_IQ1_M] = {"iq1_m", QK_K, QK_K / 8 + QK_K / 16 + QK_K / 32, true},
    [HALO_TYPE_BF16] = {"bf16", 1, 2, false},
    [HALO_TYPE_TQ1_0] = {"tq1_0", QK_K, (QK_K - 4 * QK_K / 64) / 5 + QK_K / 64 + 2, true},
    [HALO_TYPE_TQ2_0] = {"tq2_0", QK_K, 2 + QK_K / 4, true},
    [HALO_TYPE_MXFP4] = {"mxfp4", 32, 1 + 16, true},
    [HALO_TYPE_NVFP4] = {"nvfp4", 64, 4 + 32, true},
    [HALO_TYPE_Q1_0] = {"q1_0", 128, 2 + 16, true},
    [HALO_TYPE_Q2_0] = {"q2_0", 64, 2 + 16, true},
};

const halo_type_info *halo_type_info_get(uint32_t type) {
    if (type >= HALO_TYPE_ID_LIMIT || type_table[type].name == NULL) return NULL;
    return &type_table[type];
}

const char *halo_type_name(uint32_t type) {
    const halo_type_info *info = halo_type_info_get(type);
    return info ? info->name : "unknown";
}

int halo_type_from_name(const char *name) {
    for (uint32_t t = 0; t < HALO_TYPE_ID_LIMIT; t++)
        if (type_table[t].name && strcasecmp(type_table[t].name, name) == 0) return (int)t;
    return -1;
}

bool halo_type_bytes(uint32_t type, uint64_t n, uint64_t *bytes) {
    const halo_type_info *info = halo_type_info_get(type);
    if (!info || n % info->block_size != 0) return false;
    uint64_t blocks = n / info->block_size;
    if (blocks > UINT64_MAX / info->block_bytes) return false;
    *bytes = blocks * info->block_bytes;
    return true;
}
