/* Validation of tensors whose values are indices. DeepSeek V4's hash layers route token t to
 * the n_used experts listed in row t of ffn_gate_tid2eid (an i32 table [n_used, n_vocab]); the
 * MoE kernels index expert weights with those ids directly. The released tables hold ids in
 * range and no row names an expert twice (0 duplicates in 387,840 rows of the real model), so
 * both are required here: a duplicate would be summed twice, silently changing the routing
 * weights, and llama.cpp's CUDA prefill faults on one. */
#include "model/validate.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"

bool halo_tid2eid_scan(const int32_t *ids, int64_t n_used, int64_t n_rows, uint32_t n_expert,
                       halo_ids_scan *out) {
    *out = (halo_ids_scan){.first_row = -1, .first_entry = -1};
    /* seen[e] holds row + 1 when expert e was met in this row: one pass per row, no clearing. */
    int64_t *seen = calloc(n_expert ? n_expert : 1, sizeof *seen);
    if (!seen) return false;
    for (int64_t r = 0; r < n_rows; r++) {
        const int32_t *row = ids + r * n_used;
        bool dup = false;
        for (int64_t j = 0; j < n_used; j++) {
            int32_t id = row[j];
            bool bad = id < 0 || (uint32_t)id >= n_expert;
            bool again = !bad && seen[id] == r + 1;
            if ((bad || again) && out->first_row < 0) {
                out->first_row = r;
                out->first_entry = j;
                out->first_value = id;
                out->first_dup = again;
            }
            if (bad)
                out->bad_ids++;
            else if (again)
                dup = true;
            else
                seen[id] = r + 1;
        }
        out->dup_rows += dup;
    }
    free(seen);
    return true;
}

halo_status halo_tid2eid_check(const char *name, const int32_t *ids, int64_t n_used, int64_t n_rows,
                               uint32_t n_expert, halo_error *err) {
    halo_ids_scan s;
    if (!halo_tid2eid_scan(ids, n_used, n_rows, n_expert, &s))
        return halo_fail(err, HALO_E_NOMEM, "tensor '%s': out of memory", name);
    if (s.first_row < 0) return HALO_OK;
    if (s.first_dup)
        return halo_fail(err, HALO_E_BAD_VALUE,
                         "tensor '%s' row %lld (token %lld) entry %lld: expert id %d is already "
                         "in this row; a token routes to distinct experts",
                         name, (long long)s.first_row, (long long)s.first_row,
                         (long long)s.first_entry, s.first_value);
    return halo_fail(err, HALO_E_BAD_VALUE,
                     "tensor '%s' row %lld (token %lld) entry %lld: expert id %d is outside "
                     "0..%u (expert_count %u)",
                     name, (long long)s.first_row, (long long)s.first_row, (long long)s.first_entry,
                     s.first_value, n_expert ? n_expert - 1 : 0, n_expert);
}

static halo_status check_table(const halo_gguf *g, const halo_hparams *hp, const halo_weight *w,
                               halo_error *err) {
    const halo_gguf_tensor *t = w->src;
    /* Binding checked the type and shape; checked again here because an overflowing product
     * below would make the reads lie. */
    if (t->type != HALO_TYPE_I32 || t->ne[0] != (int64_t)hp->n_expert_used ||
        t->ne[1] != (int64_t)hp->n_vocab || t->n_bytes != (uint64_t)t->ne[0] * t->ne[1] * 4)
        return halo_fail(err, HALO_E_BAD_VALUE, "tensor '%s': expected i32 [%u, %u]", t->name,
                         hp->n_expert_used, hp->n_vocab);
    int32_t *ids = malloc(t->n_bytes ? t->n_bytes : 1);
    if (!ids) return halo_fail(err, HALO_E_NOMEM, "tensor '%s': out of memory", t->name);
    halo_status st = halo_gguf_read_tensor(g, t, ids, t->n_bytes, err);
    if (!st) st = halo_tid2eid_check(t->name, ids, t->ne[0], t->ne[1], hp->n_expert, err);
    free(ids);
    return st;
}

halo_status halo_model_validate(const halo_gguf *g, const halo_hparams *hp, const halo_weights *w,
                                halo_error *err) {
    halo_status st = HALO_OK;
    for (uint32_t il = 0; il < w->n_layer && !st; il++)
        if (w->layer[il].tid2eid.src) st = check_table(g, hp, &w->layer[il].tid2eid, err);
    return st;
}
