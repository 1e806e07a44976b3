/* Engine: opening a model (gguf + hparams + weights + admission + backend + loading). */
#include <stdlib.h>
#include <string.h>

#include "backend/vulkan/vulkan.h"
#include "core/error.h"
#include "mem/stream.h"
#include "model/engine_internal.h"
#include "model/validate.h"
#include "model/synthetic.h"

/* Admission: plan the model and n_ctx positions of state on this machine before allocating
 * anything, so a model that cannot fit is refused with the planner's reason instead of being
 * killed by the OOM killer halfway through loading. */
static halo_status admit(const halo_engine_params *params, const halo_gguf *g,
                         const halo_hparams *hp, halo_plan **kept, halo_error *err) {
    /* HALO_PROFILE plans against a machine profile instead of this machine (as `halo plan
     * --profile` does): for trying a model's fit elsewhere, and for tests. */
    halo_machine m;
    const char *profile = getenv("HALO_PROFILE");
    halo_status st = profile && *profile ? halo_machine_load_profile(profile, &m, err)
                                         : halo_machine_probe("/", params->model_path, &m, err);
    if (st) return halo_error_prefix(err, "cannot check memory before loading: ");
    uint32_t n_ctx = params->n_ctx ? params->n_ctx : 4096;
    if (!params->n_ctx && hp->n_ctx_train && n_ctx > hp->n_ctx_train) n_ctx = hp->n_ctx_train;
    halo_plan_options o = {.n_ctx = n_ctx,
                           .backend = HALO_BACKEND_CPU,
                           .weights = HALO_WEIGHTS_AUTO,
                           .expert_cache = params->expert_cache_bytes};
    /* weights NULL: resident only (a plan that streams is refused, as before streaming). */
    if (params->weights && (st = halo_weights_parse(params->weights, &o.weights, err)))
        return st;
    halo_plan *plan = NULL;
    st = halo_plan_build(g, &m, &o, &plan, err);
    if (st) return st;
    bool streams = halo_stream_planned(plan);
    if (plan->refused)
        st = halo_fail(err, HALO_E_NOMEM, "%s: refused before loading: %s%s%s",
                       params->model_path, plan->reason, plan->n_fixes ? "; fix: " : "",
                       plan->n_fixes ? plan->fixes[0] : "");
    else if (streams && !params->weights)
        st = halo_fail(err, HALO_E_UNSUPPORTED,
                       "%s: %.2f GiB of weights do not fit in memory here (machine: %s) and "
                       "would have to stream from disk, which halo does not do yet (`halo plan "
                       "-m %s` shows the plan)", params->model_path,
                       (double)plan->weight_bytes / (double)(1ull << 30), m.name,
                       params->model_path);
    if (!st && streams) *kept = plan; /* the loader and the expert cache follow it */
    else halo_plan_free(plan);
    return st;
}

/* Points one bound weight at its bytes in the arena through a wrapped backend buffer. */
static halo_status place_one(halo_weight *w, void *user, halo_error *err) {
    halo_engine *e = user;
    uint64_t index = (uint64_t)(w->src - halo_gguf_tensor_at(e->gguf, 0));
    void *data = (void *)halo_mem_arena_tensor(e->arena, index);
    if (!data && e->stream) return HALO_OK; /* a streamed expert tensor: no resident bytes */
    if (!data) return halo_fail(err, HALO_E_NOT_FOUND, "tensor '%s' was not loaded", w->src->name);
    halo_buf *buf = NULL;
    halo_status st = e->be->ops->buf_wrap_host(e->be, data, w->src->n_bytes, &buf, err);
    if (st) return st;
    e->tensor_bufs[e->n_bufs++] = buf;
    w->t.buf = buf;
    w->t.offset = 0;
    return HALO_OK;
}

halo_status halo_engine_open(const halo_engine_params *params, halo_engine **out,
                             halo_error *err) {
    *out = NULL;
    bool vulkan = params->backend && strcmp(params->backend, "vulkan") == 0;
    if (params->backend && strcmp(params->backend, "cpu") != 0 && !vulkan)
        return halo_fail(err, HALO_E_UNSUPPORTED, "backend '%s' is not built; available: cpu",
                         params->backend);
    halo_engine *e = calloc(1, sizeof *e);
    if (!e) return halo_fail(err, HALO_E_NOMEM, "out of memory");
    pthread_mutex_init(&e->step_lock, NULL);
    /* "synthetic:dsv4-flash-q2:4": the model is made in place (src/model/synthetic.c) */
    const bool synth = halo_synth_is_path(params->model_path);
    halo_status st = synth ? halo_synth_open(params->model_path, &e->gguf, &e->arena, err)
                           : halo_gguf_open(params->model_path, &e->gguf, err);
    if (!st) {
        st = halo_hparams_load(e->gguf, &e->hp, err);
        if (!st) st = halo_weights_bind(e->gguf, &e->hp, &e->w, err);
        if (st) halo_error_prefix(err, "%s: ", params->model_path);
    }
    halo_plan *plan = NULL; /* kept only when routed experts stream */
    if (!st) st = admit(params, e->gguf, &e->hp, &plan, err);
    /* Index tensors are read from the file before any eval; a synthetic model has no file and
     * its generator draws distinct in-range rows by construction (test_model_synthetic). */
    if (!st && !synth && (st = halo_model_validate(e->gguf, &e->hp, &e->w, err)))
        halo_error_prefix(err, "%s: ", params->model_path);
    if (!st && vulkan) st = halo_backend_vulkan_create(-1, &e->be, err);
    if (!st && !vulkan) st = halo_backend_cpu_create(params->threads, params->precise, &e->be, err);
    /* The CPU backend computes on host memory, so the loader's host arena is the weights'
     * final place: each tensor is read once, with no staging copy. Streamed experts stay on
     * disk and go through the expert cache (src/mem/stream.c). */
    if (!st && synth)
        st = halo_synth_fill_arena(params->model_path, e->gguf, e->arena, params->threads, NULL,
                                   NULL, err);
    else if (!st)
        st = halo_mem_arena_load(e->gguf, plan ? plan->tensor_pool : NULL, NULL, &e->arena,
                                 NULL, err);
    if (!st && plan) st = halo_stream_create(e->gguf, &e->w, plan, e->be, &e->stream, err);
    halo_plan_free(plan);
    if (!st) {
        e->tensor_bufs = calloc(halo_gguf_tensor_count(e->gguf) + 1, sizeof *e->tensor_bufs);
        st = e->tensor_bufs ? halo_weights_for_each(&e->w, place_one, e, err)
                            : halo_fail(err, HALO_E_NOMEM, "out of memory");
    }
    if (st) {
        halo_engine_close(e);
        return st;
    }
    *out = e;
    return HALO_OK;
}

void halo_engine_close(halo_engine *e) {
    if (!e) return;
    halo_engine_step_free(e);
    pthread_mutex_destroy(&e->step_lock);
    for (uint32_t i = 0; i < e->n_bufs; i++) e->be->ops->buf_free(e->be, e->tensor_bufs[i]);
    free(e->tensor_bufs);
    halo_stream_free(e->stream, e->be);
    if (e->be) e->be->ops->destroy(e->be);
    halo_mem_arena_free(e->arena);
    halo_gguf_close(e->gguf);
    free(e);
}

uint32_t halo_engine_n_vocab(const halo_engine *e) { return e->hp.n_vocab; }
uint32_t halo_engine_n_ctx_train(const halo_engine *e) { return e->hp.n_ctx_train; }

uint64_t halo_engine_session_bytes(const halo_engine *e, uint32_t n_ctx) {
    return halo_kv_bytes(&e->hp, n_ctx);
}

