/* Per-layer attention state of a DeepSeek V4 session, in backend buffers:
 *   - the raw sliding window: the last `sliding_window` KV rows, a ring indexed by position;
 *   - compressed rows (ratio 4 and 128 layers): one per closed window of `ratio` positions,
 *     plus the source rows of the window still being filled and, for ratio 4, the previous
 *     window's first series (the windows overlap);
 *   - the lightning indexer's compressed keys (ratio 4 layers), with the same bookkeeping.
 * Sized from the context length at creation; nothing grows afterwards. */
#ifndef HALO_KV_H
#define HALO_KV_H

#include "backend/backend.h"
#include "model/hparams.h"

/* One compressed series: rows emitted so far, the partial window, the overlap state. */
typedef struct halo_kv_series {
    halo_tensor rows; /* [dim, capacity] */
    int64_t n_rows;
    halo_tensor pend_kv, pend_gate; /* [width, ratio]: source rows of the open window */
    int64_t n_pend;
    halo_tensor prev_kv, prev_gate; /* [dim, ratio]: previous window's Ca (overlap only) */
    bool have_prev;
    uint32_t dim, width, ratio;
} halo_kv_series;

typedef struct halo_kv_layer {
    halo_tensor window; /* [head_dim, sliding_window] ring: position p lives in row p % W */
    uint32_t ratio;
    halo_kv_series comp, index;
} halo_kv_layer;

typedef struct halo_kv {
    halo_backend *be;
    halo_buf *buf; /* one buffer holds every layer's state */
    uint64_t n_bytes;
    uint32_t n_ctx, n_layer;
    int64_t n_past; /* positions evaluated so far */
    halo_kv_layer layer[HALO_MAX_LAYERS];
} halo_kv;

/* Bytes of state for a context of n_ctx positions (f32 rows). */
uint64_t halo_kv_bytes(const halo_hparams *hp, uint32_t n_ctx);

/* Forgets every position (the buffers are reused; rows are rewritten before they are read). */
void halo_kv_reset(halo_kv *kv);

/* A host copy of the state: counters and the buffer's bytes. */
typedef struct halo_kv_snapshot {
    halo_kv meta;         /* counters and views at the time of the snapshot */
    unsigned char *bytes; /* the whole state buffer */
    uint64_t n_bytes;
} halo_kv_snapshot;

halo_status halo_kv_snapshot_take(halo_kv *kv, halo_kv_snapshot **out, halo_error *err);
/* Restores a snapshot taken from the same kv (same model and context size). */
halo_status halo_kv_snapshot_restore(halo_kv *kv, const halo_kv_snapshot *snap, halo_error *err);
void halo_kv_snapshot_free(halo_kv_snapshot *snap);

halo_status halo_kv_create(halo_backend *be, const halo_hparams *hp, uint32_t n_ctx, halo_kv **out,
                           halo_error *err);
void halo_kv_free(halo_kv *kv);

#endif
