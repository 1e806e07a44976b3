/* Slot admission (admit.h): the engine's admission (src/model/engine.c) with n_seq = slots.
 * The options are resolved the way the engine resolves them (HALO_WEIGHTS and friends first,
 * then the caller's weights policy; host weights mean auto on the CPU) and a plan that would
 * stream is refused unless streaming was allowed, as the engine (given n_seq) refuses it; here it
 * happens before the server listens, with the most slots that fit as the fix. */
#include "serve/admit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "halo/gguf.h"
#include "halo/plan.h"
#include "mem/stream.h"
#include "model/synthetic.h"

static const char *size_str(uint64_t b, char *out, size_t n) {
    if (b >= (1ull << 30))
        snprintf(out, n, "%.2f GiB", (double)b / (double)(1ull << 30));
    else
        snprintf(out, n, "%.1f MiB", (double)b / (double)(1ull << 20));
    return out;
}

/* What a plan of k slots says: fits, or why not. The engine refuses a plan that streams
 * routed experts unless the caller allowed streaming (weights "auto"/"stream" or HALO_WEIGHTS),
 * so a slot count that only fits by streaming does not fit here either. */
typedef struct {
    const halo_gguf *g;
    const halo_machine *m;
    halo_plan_options o;
    bool may_stream;
} slot_planner;

static halo_status plan_slots(const slot_planner *sp, uint32_t k, halo_plan **out,
                              halo_error *err) {
    halo_plan_options o = sp->o;
    o.n_seq = k;
    return halo_plan_build(sp->g, sp->m, &o, out, err);
}

static bool plan_fits(const slot_planner *sp, const halo_plan *plan) {
    return !plan->refused && (sp->may_stream || !halo_stream_planned(plan));
}

/* The most slots in [1, below) that fit (plans grow with k), or 0. */
static uint32_t most_slots(const slot_planner *sp, uint32_t below, halo_error *err) {
    uint32_t lo = 0, hi = below; /* lo fits (or is 0), hi does not */
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        halo_plan *plan = NULL;
        if (plan_slots(sp, mid, &plan, err)) return 0;
        bool fits = plan_fits(sp, plan);
        halo_plan_free(plan);
        if (fits)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

/* The planner for ep's model on this machine (or $HALO_PROFILE's); *g to close after. */
static halo_status planner_for(const halo_engine_params *ep, uint32_t n_ctx, slot_planner *sp,
                               halo_machine *m, halo_gguf **g, halo_error *err) {
    const char *backend = ep->backend ? ep->backend : getenv("HALO_BACKEND");
    *sp = (slot_planner){.o = {.n_ctx = n_ctx,
                               .weights = HALO_WEIGHTS_AUTO,
                               .expert_cache = ep->expert_cache_bytes},
                         .may_stream = ep->weights || getenv("HALO_WEIGHTS")};
    halo_status st = halo_backend_parse(backend && *backend ? backend : "cpu", &sp->o.backend, err);
    if (!st) st = halo_plan_options_from_env(&sp->o, err);
    if (!st && ep->weights) st = halo_weights_parse(ep->weights, &sp->o.weights, err);
    if (st) return st;
    if (sp->o.backend == HALO_BACKEND_CPU && sp->o.weights == HALO_WEIGHTS_HOST)
        sp->o.weights = HALO_WEIGHTS_AUTO;
    const char *profile = getenv("HALO_PROFILE");
    st = profile && *profile ? halo_machine_load_profile(profile, m, err)
                             : halo_machine_probe("/", ep->model_path, m, err);
    if (st) return halo_error_prefix(err, "cannot check memory for the slots: ");
    sp->m = m;
    st = halo_gguf_open(ep->model_path, g, err);
    sp->g = *g;
    return st ? halo_error_prefix(err, "%s: ", ep->model_path) : HALO_OK;
}

bool serve_split_host(uint64_t host_left, uint64_t cache_ram, uint32_t n_slots,
                      uint64_t default_ckpt, uint64_t *ckpt_per_slot) {
    *ckpt_per_slot = default_ckpt;
    if (host_left == UINT64_MAX) return true; /* not planned: the defaults */
    if (cache_ram > host_left) return false;
    uint64_t each = (host_left - cache_ram) / (n_slots ? n_slots : 1);
    if (each < *ckpt_per_slot) *ckpt_per_slot = each;
    return true;
}

halo_status serve_admit(const halo_engine_params *ep, uint32_t n_slots, uint32_t n_ctx,
                        char *summary, size_t size, uint64_t *host_left, halo_error *err) {
    if (size) summary[0] = 0;
    if (host_left) *host_left = UINT64_MAX;
    if (halo_synth_is_path(ep->model_path)) return HALO_OK;
    slot_planner sp;
    halo_machine m;
    halo_gguf *g = NULL;
    halo_plan *plan = NULL;
    halo_status st = planner_for(ep, n_ctx, &sp, &m, &g, err);
    if (!st && (st = plan_slots(&sp, n_slots, &plan, err)))
        halo_error_prefix(err, "%s: ", ep->model_path);
    if (st) {
        halo_gguf_close(g);
        return st;
    }
    char a[32], b[32], c[32];
    if (!plan_fits(&sp, plan)) {
        char why[640];
        if (plan->refused)
            snprintf(why, sizeof why, "%s", plan->reason);
        else
            snprintf(why, sizeof why,
                     "%s of weights would have to stream from disk to leave room for the slots, "
                     "which needs --weights auto or stream",
                     size_str(plan->weight_bytes, a, sizeof a));
        uint32_t most = n_slots > 1 ? most_slots(&sp, n_slots, err) : 0;
        if (most)
            st = halo_fail(err, HALO_E_NOMEM,
                           "-np %u --ctx %u: refused before loading: %s; fix: -np %u: the most "
                           "slots of %u tokens that fit (requested %u)",
                           n_slots, n_ctx, why, most, n_ctx, n_slots);
        else
            st = halo_fail(err, HALO_E_NOMEM, "-np %u --ctx %u: refused before loading: %s%s%s",
                           n_slots, n_ctx, why, plan->n_fixes ? "; fix: " : "",
                           plan->n_fixes ? plan->fixes[0] : "");
    } else if (size) {
        if (host_left) *host_left = plan->host_headroom;
        snprintf(
            summary, size,
            "planned %u slot%s of %u tokens: context state %s, weights %s, host headroom %s",
            n_slots, n_slots == 1 ? "" : "s", n_ctx, size_str(plan->context_bytes, a, sizeof a),
            size_str(plan->weight_bytes, b, sizeof b), size_str(plan->host_headroom, c, sizeof c));
    }
    halo_plan_free(plan);
    halo_gguf_close(g);
    return st;
}
