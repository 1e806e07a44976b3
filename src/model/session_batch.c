/* Several sessions evaluated in one step (halo_session_eval_many). */
#include "core/error.h"
#include "model/engine_internal.h"

/* First cut: each session in turn. The batched forward replaces this loop without changing
 * the contract in halo.h. */
halo_status halo_session_eval_many(halo_session *const *sessions, const int32_t *const *tokens,
                                   const uint32_t *n, uint32_t count, halo_error *err) {
    for (uint32_t i = 0; i < count; i++) {
        halo_status st = halo_session_eval(sessions[i], tokens[i], n[i], false, err);
        if (st) return halo_error_prefix(err, "session %u of %u: ", i, count);
    }
    return HALO_OK;
}
