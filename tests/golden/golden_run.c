/* Running halo on the golden fixtures: the evaluation loop every golden test shares. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "golden/golden.h"

halo_status halo_golden_eval(halo_engine *e, const int32_t *tokens, int32_t n, int32_t chunk,
                             float **out, halo_error *err) {
    uint32_t V = halo_engine_n_vocab(e);
    float *all = calloc((size_t)n * V, sizeof *all);
    *out = all;
    if (!all) return halo_fail(err, HALO_E_NOMEM, "no memory for %d rows of logits", n);
    halo_session *s = NULL;
    halo_status st = halo_session_create(e, (uint32_t)n, &s, err);
    if (!chunk) chunk = n;
    for (int32_t at = 0; !st && at < n; at += chunk) {
        int32_t m = n - at < chunk ? n - at : chunk;
        st = halo_session_eval(s, tokens + at, (uint32_t)m, true, err);
        if (!st)
            memcpy(all + (size_t)at * V, halo_session_logits(s, NULL), (size_t)m * V * sizeof *all);
    }
    halo_session_free(s);
    return st;
}

int halo_golden_argmax(const float *row, uint32_t n) {
    uint32_t best = 0;
    for (uint32_t i = 1; i < n; i++)
        if (row[i] > row[best]) best = i;
    return (int)best;
}
