/* Slot admission (admit.h): the engine's admission (src/model/engine.c) with n_seq = slots.
 * The options are resolved the way the engine resolves them (HALO_WEIGHTS and friends first,
 * then the caller's weights policy; host weights mean auto on the CPU), so both plans agree on
 * everything but the number of contexts. */
#include "serve/admit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "halo/gguf.h"
#include "halo/plan.h"
#include "model/synthetic.h"

static const char *size_str(uint64_t b, char *out, size_t n) {
    if (b >= (1ull << 30))
        snprintf(out, n, "%.2f GiB", (double)b / (double)(1ull << 30));
    else
        snprintf(out, n, "%.1f MiB", (double)b / (double)(1ull << 20));
    return out;
}

halo_status serve_admit(const halo_engine_params *ep, uint32_t n_slots, uint32_t n_ctx,
                        char *summary, size_t size, halo_error *err) {
    if (size) summary[0] = 0;
    if (halo_synth_is_path(ep->model_path)) return HALO_OK;
    const char *backend = ep->backend ? ep->backend : getenv("HALO_BACKEND");
    halo_plan_options o = {.n_ctx = n_ctx,
                           .n_seq = n_slots,
                           .weights = HALO_WEIGHTS_AUTO,
                           .expert_cache = ep->expert_cache_bytes};
    halo_status st = halo_backend_parse(backend && *backend ? backend : "cpu", &o.backend, err);
    if (!st) st = halo_plan_options_from_env(&o, err);
    if (!st && ep->weights) st = halo_weights_parse(ep->weights, &o.weights, err);
    if (st) return st;
    if (o.backend == HALO_BACKEND_CPU && o.weights == HALO_WEIGHTS_HOST)
        o.weights = HALO_WEIGHTS_AUTO;
    halo_machine m;
    const char *profile = getenv("HALO_PROFILE");
    st = profile && *profile ? halo_machine_load_profile(profile, &m, err)
                             : halo_machine_probe("/", ep->model_path, &m, err);
    if (st) return halo_error_prefix(err, "cannot check memory for the slots: ");
    halo_gguf *g = NULL;
    st = halo_gguf_open(ep->model_path, &g, err);
    halo_plan *plan = NULL;
    if (!st) st = halo_plan_build(g, &m, &o, &plan, err);
    halo_gguf_close(g);
    if (st) return halo_error_prefix(err, "%s: ", ep->model_path);
    char a[32], b[32], c[32];
    if (plan->refused)
        st = halo_fail(err, HALO_E_NOMEM, "-np %u --ctx %u: refused before loading: %s%s%s",
                       n_slots, n_ctx, plan->reason, plan->n_fixes ? "; fix: " : "",
                       plan->n_fixes ? plan->fixes[0] : "");
    else if (size)
        snprintf(
            summary, size,
            "planned %u slot%s of %u tokens: context state %s, weights %s, host headroom %s",
            n_slots, n_slots == 1 ? "" : "s", n_ctx, size_str(plan->context_bytes, a, sizeof a),
            size_str(plan->weight_bytes, b, sizeof b), size_str(plan->host_headroom, c, sizeof c));
    halo_plan_free(plan);
    return st;
}
