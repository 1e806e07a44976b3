/* Values inside tensors that the engine uses as indices (not as numbers to compute with) are
 * checked when a model is opened, before any eval: a model file is untrusted input, and an id
 * out of range there would become an out-of-bounds read deep inside a backend kernel. */
#ifndef HALO_MODEL_VALIDATE_H
#define HALO_MODEL_VALIDATE_H

#include <stdbool.h>

#include "model/weights.h"

/* Reads and checks every bound index tensor (today: the hash-routing tables
 * blk.N.ffn_gate_tid2eid.weight of the first hash_layer_count layers). Errors name the tensor,
 * the row and the value. */
halo_status halo_model_validate(const halo_gguf *g, const halo_hparams *hp, const halo_weights *w,
                                halo_error *err);

/* What a scan of one hash-routing table found: counts, and the first problem (row, entry, id;
 * first_dup tells whether it was a repeated expert rather than an id out of range). */
typedef struct halo_ids_scan {
    uint64_t bad_ids, dup_rows;
    int64_t first_row, first_entry; /* -1 when nothing was found */
    int32_t first_value;
    bool first_dup;
} halo_ids_scan;

/* Scans a whole table (n_rows rows of n_used ids) without stopping at the first problem; false
 * when out of memory. */
bool halo_tid2eid_scan(const int32_t *ids, int64_t n_used, int64_t n_rows, uint32_t n_expert,
                       halo_ids_scan *out);

/* One hash-routing table in memory: n_rows rows (one per token id) of n_used expert ids, each
 * in [0, n_expert) and distinct within its row. Shared with `halo inspect --check`. */
halo_status halo_tid2eid_check(const char *name, const int32_t *ids, int64_t n_used, int64_t n_rows,
                               uint32_t n_expert, halo_error *err);

#endif
