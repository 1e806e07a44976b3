/* A session's whole state in host memory: its tokens, the compressed rows, and its checkpoints
 * (the last one at the end of the tokens). What the RAM cache keeps and what a file holds
 * (src/kv/file.c adds the header). Restoring it at any of its checkpoints gives the state at
 * that checkpoint's position. */
#ifndef HALO_KV_IMAGE_H
#define HALO_KV_IMAGE_H

#include "kv/ckset.h"

typedef struct halo_kv_image {
    uint32_t n_layer;
    uint32_t n_tokens;
    int32_t *tokens;
    unsigned char *rows; /* every series' rows, laid out for the last checkpoint's counts */
    uint64_t rows_bytes;
    uint32_t n_ckpt; /* >= 1; ascending positions; ckpt[n_ckpt-1]->pos == n_tokens */
    halo_kv_ckpt **ckpt;
} halo_kv_image;

/* Copies kv's state, tokens[0..n_past) and the checkpoints of set (may be NULL). */
halo_status halo_kv_image_capture(halo_kv *kv, const int32_t *tokens, const halo_kv_ckset *set,
                                  halo_kv_image **out, halo_error *err);
/* Puts the state at checkpoint `at` into kv and the checkpoints up to it into set (cleared
 * first; may be NULL). On failure kv may be half written: the caller resets it. */
halo_status halo_kv_image_apply(halo_kv *kv, const halo_kv_image *img, uint32_t at,
                                halo_kv_ckset *set, halo_error *err);
uint64_t halo_kv_image_size(const halo_kv_image *img); /* heap bytes */
void halo_kv_image_free(halo_kv_image *img);

/* The serialized form (file payload): see docs/cache.md. */
uint64_t halo_kv_image_payload_bytes(const halo_kv_image *img);
void halo_kv_image_encode(const halo_kv_image *img, unsigned char *dst);
/* Parses and checks a payload against kv's shapes (every count, size and position), so a
 * payload that passes its checksum but was made elsewhere still cannot write out of place. */
halo_status halo_kv_image_decode(const halo_kv *kv, const unsigned char *src, uint64_t n,
                                 const int32_t *tokens, uint32_t n_tokens, halo_kv_image **out,
                                 halo_error *err);

#endif
