/* Session files (docs/cache.md): a 128-byte header (magic, format version, byte order, the
 * model's identity, the hyperparameters that shape the state, the token count, checksums),
 * the tokens, then the state (src/kv/image.h's payload). Written atomically; verified
 * entirely before anything is restored. */
#ifndef HALO_KV_FILE_H
#define HALO_KV_FILE_H

#include "halo/gguf.h"
#include "kv/image.h"

enum { HALO_KV_FILE_VERSION = 1, HALO_KV_FILE_HEADER = 128 };

typedef struct halo_kv_file_id {
    uint64_t model_id; /* XXH3 of the GGUF metadata and tensor table */
    uint64_t shape_id; /* XXH3 of the hyperparameters that shape the state */
    uint32_t n_layer, head_dim, sliding_window, indexer_head_dim;
} halo_kv_file_id;

void halo_kv_file_identify(const halo_gguf *g, const halo_hparams *hp, halo_kv_file_id *id);

/* XXH3 of a token list: the disk cache's file key. */
uint64_t halo_kv_tokens_key(const int32_t *tokens, uint32_t n);

/* Header, tokens, payload and the caller's bytes (user, may be empty) in one buffer (caller
 * frees). */
halo_status halo_kv_file_encode(const halo_kv_file_id *id, const halo_kv_image *img,
                                const void *user, uint64_t user_len, unsigned char **out,
                                uint64_t *n, halo_error *err);
/* Writes data to path through a temporary file in the same directory, fsync, rename, and an
 * fsync of the directory: path is the old file or the whole new one, even after a crash. */
halo_status halo_kv_file_write_atomic(const char *path, const void *data, uint64_t n,
                                      halo_error *err);
/* Reads and verifies a file (header, checksums, model, shapes against kv) into an image, and
 * the caller's bytes into *user (NUL-terminated, caller frees; user may be NULL). */
halo_status halo_kv_file_read(const char *path, const halo_kv_file_id *id, const halo_kv *kv,
                              halo_kv_image **out, void **user, uint64_t *user_len,
                              halo_error *err);
/* Reads and verifies only the header and the tokens (caller frees *tokens): for indexing a
 * cache directory without reading every state. *file_bytes is the file's size. */
halo_status halo_kv_file_peek(const char *path, const halo_kv_file_id *id, int32_t **tokens,
                              uint32_t *n_tokens, uint64_t *file_bytes, halo_error *err);

#endif
