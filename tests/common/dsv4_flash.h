/* DeepSeek V4 Flash's real GGUF layout as data: every metadata key llama.cpp v0.5.0's deepseek4
 * loader reads, with the released model's values, and every tensor with its real shape, in one
 * of two type mixes. Tests write it with data NULL to get a sparse full-size file (no weights
 * exist on these machines); later work (memory planner, loader) opens the same table.
 *
 * Every number and its source is in docs/dsv4-flash-table.md. */
#ifndef HALO_TESTS_DSV4_FLASH_H
#define HALO_TESTS_DSV4_FLASH_H

#include <stdint.h>

#include "halo/gguf.h"

/* Hyperparameters of deepseek-ai/DeepSeek-V4-Flash (its config.json). */
#define DSV4_FLASH_N_LAYER 43
#define DSV4_FLASH_N_EMBD 4096
#define DSV4_FLASH_N_VOCAB 129280
#define DSV4_FLASH_N_HEAD 64
#define DSV4_FLASH_HEAD_DIM 512 /* key length = value length; one KV head */
#define DSV4_FLASH_ROPE_DIM 64
#define DSV4_FLASH_Q_LORA_RANK 1024
#define DSV4_FLASH_O_GROUPS 8
#define DSV4_FLASH_O_LORA_RANK 1024
#define DSV4_FLASH_N_EXPERT 256
#define DSV4_FLASH_N_EXPERT_USED 6
#define DSV4_FLASH_N_EXPERT_SHARED 1
#define DSV4_FLASH_N_FF_EXP 2048
#define DSV4_FLASH_N_HASH_LAYER 3
#define DSV4_FLASH_HC 4
#define DSV4_FLASH_INDEXER_N_HEAD 64
#define DSV4_FLASH_INDEXER_HEAD_DIM 128
#define DSV4_FLASH_INDEXER_TOP_K 512
#define DSV4_FLASH_SLIDING_WINDOW 128
/* config.json's compress_ratios has one entry per layer plus one for the MTP layer. */
#define DSV4_FLASH_N_COMPRESS_RATIOS 44

/* Tensor count of the main model (no MTP layer): 6 global + 43 x 23 per layer + 3 hash tables
 * + 40 routing biases + 41 x 4 compressor + 21 x 6 indexer tensors. */
#define DSV4_FLASH_TENSOR_COUNT 1328

typedef enum dsv4_mix {
    /* ds4's q2 file, DeepSeek-V4-Flash-IQ2XXS-w2Q2K-AProjQ8-SExpQ8-OutQ8-chat-v2.gguf: IQ2_XXS
     * routed gate/up, Q2_K routed down, Q8_0 attention projections / shared experts / output,
     * F16 embedding / router / compressor / indexer / HC mixers, F32 norms / sinks / biases. */
    DSV4_MIX_DS4_Q2 = 0,
    /* llama.cpp v0.5.0 conversion/deepseek.py: routed experts repacked to MXFP4, FP8 matrices
     * dequantized to Q8_0, BF16 matrices kept BF16, F32 tensors and every 1-D tensor F32. */
    DSV4_MIX_LLAMA_CPP = 1,
} dsv4_mix;

typedef struct dsv4_tensor {
    char name[64];
    uint32_t type; /* halo_type id */
    uint32_t n_dims;
    int64_t ne[HALO_GGUF_MAX_DIMS]; /* ggml order; unused = 1 */
    uint64_t n_bytes;
} dsv4_tensor;

/* Compression ratio of a layer (0, 4 or 128), as in config.json; il < 44. */
uint32_t dsv4_flash_compress_ratio(uint32_t il);

/* Calls fn for every tensor in file order; fn returns non-zero to stop. Returns the number of
 * tensors visited. */
typedef int (*dsv4_tensor_fn)(const dsv4_tensor *t, void *user);
uint64_t dsv4_flash_for_each_tensor(dsv4_mix mix, dsv4_tensor_fn fn, void *user);

/* Sum of every tensor's n_bytes (no alignment padding). */
uint64_t dsv4_flash_tensor_bytes(dsv4_mix mix);

/* general.file_type as llama.cpp numbers it (19 = MOSTLY_IQ2_XXS, 38 = MOSTLY_MXFP4_MOE). */
uint32_t dsv4_flash_file_type(dsv4_mix mix);

/* Sets the general.*, deepseek4.* and tokenizer ("no_vocab" + vocab_size) metadata. */
halo_status dsv4_flash_add_metadata(halo_gguf_writer *w, dsv4_mix mix, halo_error *err);

/* Adds every tensor with data NULL: written out, the file is sparse. */
halo_status dsv4_flash_add_tensors(halo_gguf_writer *w, dsv4_mix mix, halo_error *err);

/* Both of the above. */
halo_status dsv4_flash_add_to_writer(halo_gguf_writer *w, dsv4_mix mix, halo_error *err);

/* ---- size variants of the ds4 q2 mix (routed experts retyped), for the memory planner ------- */

typedef enum dsv4_variant {
    DSV4_VARIANT_Q2 = 0,        /* the q2 mix unchanged: 80.76 GiB */
    /* the seeds' "Flash Q2-Q4 (L37-42 Q4K)": routed gate/up/down of layers 37-42 in Q4_K:
     * 97,586,411,868 bytes = 90.884 GiB (the seeds' 90.88 GiB) */
    DSV4_VARIANT_Q2_Q4K_L37_42 = 1,
    /* a stand-in for unsloth's UD-IQ3_XXS (97.05 GiB; its exact recipe is not public in the
     * seeds): routed gate/up IQ3_XXS, routed down IQ2_XXS, except down Q2_K in layers 37-42:
     * 104,213,412,188 bytes = 97.056 GiB (unsloth's file: 97.05 GiB) */
    DSV4_VARIANT_IQ3_XXS = 2,
} dsv4_variant;

/* Like dsv4_flash_for_each_tensor on the q2 mix, with the variant's routed-expert types. */
uint64_t dsv4_flash_variant_for_each_tensor(dsv4_variant v, dsv4_tensor_fn fn, void *user);
uint64_t dsv4_flash_variant_tensor_bytes(dsv4_variant v);
/* Metadata (as the q2 mix) and every tensor of the variant with data NULL. */
halo_status dsv4_flash_add_variant_to_writer(halo_gguf_writer *w, dsv4_variant v, halo_error *err);

#endif
