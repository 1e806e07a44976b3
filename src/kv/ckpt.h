/* Checkpoints of a session's state and the pieces a saved state is made of.
 *
 * The state at position p (src/kv/kv.h) splits in two:
 *   - compressed rows (both series of every compressed layer): append-only. Row r at ratio R
 *     depends only on positions < (r+1)·R, so after going back to position p the rows below
 *     p/R are still the ones evaluation would produce, and need not be saved again;
 *   - the "light" part that evaluation keeps overwriting: the raw window ring, the source rows
 *     of the open compressor windows, the overlap state (ratio 4), and the counters.
 * A checkpoint is the light part plus the counters (which say how many compressed rows it
 * relies on). Restoring it into the buffer it was taken from, while the rows below its counts
 * are unchanged, gives back the state at its position exactly. A full state (for a file or a
 * cache) is the rows plus one checkpoint. */
#ifndef HALO_KV_CKPT_H
#define HALO_KV_CKPT_H

#include "kv/kv.h"

typedef struct halo_kv_count {
    int64_t n_rows, n_pend;
    int64_t have_prev; /* 0 or 1 (an int64 so the on-disk form is three int64) */
} halo_kv_count;

typedef struct halo_kv_ckpt {
    int64_t pos; /* n_past at the checkpoint */
    uint32_t n_layer;
    halo_kv_count *count; /* [n_layer][2]: compressed series, indexer series */
    unsigned char *bytes; /* the light part, layer by layer (see ckpt.c) */
    uint64_t n_bytes;
} halo_kv_ckpt;

/* Copies the light part of kv's current state (caller frees with halo_kv_ckpt_free). */
halo_status halo_kv_ckpt_take(halo_kv *kv, halo_kv_ckpt **out, halo_error *err);
/* Puts a checkpoint back. The rows below its counts must hold what they held when it was
 * taken (the same buffer since, with no rewind below it; or rows written by
 * halo_kv_rows_write). Refuses a checkpoint that does not fit kv's shapes. */
halo_status halo_kv_ckpt_restore(halo_kv *kv, const halo_kv_ckpt *c, halo_error *err);
void halo_kv_ckpt_free(halo_kv_ckpt *c);
/* A deep copy (NULL when out of memory). */
halo_kv_ckpt *halo_kv_ckpt_dup(const halo_kv_ckpt *c);
/* Heap bytes a checkpoint holds. */
uint64_t halo_kv_ckpt_size(const halo_kv_ckpt *c);
/* Builds an empty checkpoint with the given counts and allocates its light bytes (size from
 * the counts): for readers of saved states. Refuses counts that kv's shapes cannot hold. */
halo_status halo_kv_ckpt_alloc(const halo_kv *kv, int64_t pos, const halo_kv_count *count,
                               halo_kv_ckpt **out, halo_error *err);

/* Bytes of the compressed rows the counts cover (every series, layer order). */
uint64_t halo_kv_rows_bytes(const halo_kv *kv, const halo_kv_count *count);
/* Reads the rows the counts cover into dst (halo_kv_rows_bytes bytes). */
halo_status halo_kv_rows_read(halo_kv *kv, const halo_kv_count *count, unsigned char *dst,
                              halo_error *err);
/* Writes the first `upto` counts' rows from src, laid out for `layout` counts (a saved state
 * holds the rows of its last checkpoint; an earlier checkpoint needs only a prefix of them). */
halo_status halo_kv_rows_write(halo_kv *kv, const halo_kv_count *layout, const halo_kv_count *upto,
                               const unsigned char *src, halo_error *err);

#endif
