/* A session's checkpoints (src/kv/ckpt.h), taken every `interval` positions as the sequence
 * grows, within a memory budget. Rewinding to position p restores the last checkpoint at or
 * before p and re-evaluates fewer than `interval` tokens; by default the interval is the
 * largest compression ratio plus the sliding window, so a rewind re-evaluates at most one
 * compressor window plus the sliding window. When the checkpoints would exceed the budget the
 * interval doubles and every other one is dropped (never silently: the stats say so). */
#ifndef HALO_KV_CKSET_H
#define HALO_KV_CKSET_H

#include "kv/ckpt.h"

typedef struct halo_kv_ckset {
    halo_kv_ckpt **c; /* ascending positions, all > 0 */
    uint32_t n, cap;
    uint32_t interval, base_interval; /* 0: checkpoints off */
    uint64_t bytes, max_bytes;
    uint32_t n_thinned;      /* times the budget doubled the interval */
    uint32_t last_replayed;  /* tokens re-evaluated by the last rewind */
    uint64_t replayed_total; /* by every rewind of the session */
    uint32_t n_failed;       /* checkpoints not taken (out of memory): rewinds got slower */
} halo_kv_ckset;

/* The default interval for a model: largest compression ratio + sliding window, rounded up to
 * a multiple of the engine's forward size (forward_tokens; 0: not rounded), so checkpoints
 * never split a prompt's forwards. */
uint32_t halo_kv_ckset_default_interval(const halo_hparams *hp, uint32_t forward_tokens);
void halo_kv_ckset_configure(halo_kv_ckset *set, uint32_t interval, uint64_t max_bytes);
void halo_kv_ckset_clear(halo_kv_ckset *set);
/* Drops the checkpoints after position pos (they describe tokens that are being replaced). */
void halo_kv_ckset_drop_after(halo_kv_ckset *set, int64_t pos);
/* The last checkpoint at or before pos, or NULL. */
const halo_kv_ckpt *halo_kv_ckset_best(const halo_kv_ckset *set, int64_t pos);
/* The next position after n_past where a checkpoint is due (INT64_MAX when off). */
int64_t halo_kv_ckset_next(const halo_kv_ckset *set, int64_t n_past);
/* Adds a checkpoint (the set owns it; positions must ascend), thinning to stay in budget. */
halo_status halo_kv_ckset_add(halo_kv_ckset *set, halo_kv_ckpt *c, halo_error *err);

#endif
