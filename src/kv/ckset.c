#include "kv/ckset.h"

#include <stdlib.h>

#include "core/error.h"

uint32_t halo_kv_ckset_default_interval(const halo_hparams *hp, uint32_t forward_tokens) {
    uint32_t r = 0;
    for (uint32_t il = 0; il < hp->n_layer; il++)
        if (hp->compress_ratio[il] > r) r = hp->compress_ratio[il];
    uint32_t i = r + hp->sliding_window, f = forward_tokens;
    /* A prompt is split where a checkpoint is due: at 256 positions a GPU ran every forward at
     * half its tokens and prefilled 1.43x slower (43-layer q2 on the H200, pp2048 1,374 -> 1,972
     * tok/s at 512, bench/cuda/RESULTS.md), so checkpoints fall on forward boundaries. */
    return f ? (i + f - 1) / f * f : i;
}

void halo_kv_ckset_configure(halo_kv_ckset *set, uint32_t interval, uint64_t max_bytes) {
    halo_kv_ckset_clear(set);
    set->interval = set->base_interval = interval;
    set->max_bytes = max_bytes;
    set->n_thinned = 0;
}

void halo_kv_ckset_clear(halo_kv_ckset *set) {
    for (uint32_t i = 0; i < set->n; i++)
        halo_kv_ckpt_free(set->c[i]);
    set->n = 0;
    set->bytes = 0;
}

void halo_kv_ckset_drop_after(halo_kv_ckset *set, int64_t pos) {
    while (set->n && set->c[set->n - 1]->pos > pos) {
        set->bytes -= halo_kv_ckpt_size(set->c[set->n - 1]);
        halo_kv_ckpt_free(set->c[--set->n]);
    }
}

const halo_kv_ckpt *halo_kv_ckset_best(const halo_kv_ckset *set, int64_t pos) {
    for (uint32_t i = set->n; i-- > 0;)
        if (set->c[i]->pos <= pos) return set->c[i];
    return NULL;
}

int64_t halo_kv_ckset_next(const halo_kv_ckset *set, int64_t n_past) {
    if (!set->interval) return INT64_MAX;
    return (n_past / set->interval + 1) * set->interval;
}

/* Doubles the interval and keeps only the checkpoints on the new grid. */
static void thin(halo_kv_ckset *set) {
    set->interval *= 2;
    set->n_thinned++;
    uint32_t kept = 0;
    for (uint32_t i = 0; i < set->n; i++) {
        if (set->c[i]->pos % set->interval == 0) {
            set->c[kept++] = set->c[i];
        } else {
            set->bytes -= halo_kv_ckpt_size(set->c[i]);
            halo_kv_ckpt_free(set->c[i]);
        }
    }
    set->n = kept;
}

halo_status halo_kv_ckset_add(halo_kv_ckset *set, halo_kv_ckpt *c, halo_error *err) {
    if (set->n == set->cap) {
        uint32_t cap = set->cap ? 2 * set->cap : 16;
        halo_kv_ckpt **grown = realloc(set->c, cap * sizeof *grown);
        if (!grown) {
            halo_kv_ckpt_free(c);
            set->n_failed++;
            return halo_fail(err, HALO_E_NOMEM, "out of memory for checkpoints");
        }
        set->c = grown;
        set->cap = cap;
    }
    set->c[set->n++] = c;
    set->bytes += halo_kv_ckpt_size(c);
    /* Stop doubling once the interval would pass any position the set can hold. */
    while (set->bytes > set->max_bytes && set->n && set->interval < (1u << 30))
        thin(set);
    return HALO_OK;
}
