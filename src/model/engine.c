/* Engine: opening a model (gguf + hparams + weights + backend + admission + loading into the
 * plan's pools). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/vulkan/vulkan.h"
#include "core/error.h"
#include "mem/stream.h"
#include "halo/load.h"
#include "model/engine_internal.h"
#include "model/engine_place.h"
#include "model/synthetic.h"
#include "model/validate.h"

/* Admission: plan the model and n_ctx positions of state on this machine before allocating
 * anything, so a model that cannot fit is refused with the planner's reason instead of being
 * killed by the OOM killer halfway through loading. The plan (caller frees) says which pool
 * each tensor goes to; routed experts it leaves on disk stream through the expert cache (on a
 * GPU, into the GPU's own cache above it) when the caller allows it (weights "auto" or
 * "stream"). */
static halo_status admit(const halo_engine_params *params, const halo_gguf *g,
                         const halo_hparams *hp, halo_backend_kind backend, halo_plan **out,
                         halo_error *err) {
    *out = NULL;
    /* HALO_PROFILE plans against a machine profile instead of this machine (as `halo plan
     * --profile` does): for trying a model's fit elsewhere, and for tests. */
    halo_machine m;
    const char *profile = getenv("HALO_PROFILE");
    halo_status st = profile && *profile ? halo_machine_load_profile(profile, &m, err)
                                         : halo_machine_probe("/", params->model_path, &m, err);
    /* A Vulkan device the probes do not know (lavapipe, Intel) is planned from its heaps; a
     * profile without a GPU gets this machine's Vulkan device (HALO_BACKEND=vulkan tests). */
    if (!st && backend == HALO_BACKEND_VULKAN &&
        (!(profile && *profile) || m.gpu_vendor == HALO_GPU_NONE))
        st = halo_backend_vulkan_machine(-1, &m, err);
    if (st) return halo_error_prefix(err, "cannot check memory before loading: ");
    uint32_t n_ctx = params->n_ctx ? params->n_ctx : 4096;
    if (!params->n_ctx && hp->n_ctx_train && n_ctx > hp->n_ctx_train) n_ctx = hp->n_ctx_train;
    halo_plan_options o = {.n_ctx = n_ctx,
                           .n_seq = params->n_seq ? params->n_seq : 1,
                           .backend = backend,
                           .weights = HALO_WEIGHTS_AUTO,
                           .expert_cache = params->expert_cache_bytes};
    st = halo_plan_options_from_env(&o, err);
    if (!st && params->weights) st = halo_weights_parse(params->weights, &o.weights, err);
    if (st) return halo_error_prefix(err, "%s: ", params->model_path);
    if (backend == HALO_BACKEND_CPU && o.weights == HALO_WEIGHTS_HOST)
        o.weights = HALO_WEIGHTS_AUTO;
    halo_plan *plan = NULL;
    st = halo_plan_build(g, &m, &o, &plan, err);
    if (st) return halo_error_prefix(err, "%s: ", params->model_path);
    bool streams = halo_stream_planned(plan);
    /* weights NULL (and no HALO_WEIGHTS): resident only, as before streaming existed. */
    bool may_stream = params->weights || getenv("HALO_WEIGHTS");
    if (plan->refused)
        st = halo_fail(err, HALO_E_NOMEM, "%s: refused before loading: %s%s%s", params->model_path,
                       plan->reason, plan->n_fixes ? "; fix: " : "",
                       plan->n_fixes ? plan->fixes[0] : "");
    else if (streams && !may_stream)
        st = halo_fail(err, HALO_E_UNSUPPORTED,
                       "%s: %.2f GiB of weights do not fit in memory here (machine: %s) and "
                       "would have to stream from disk, which needs weights \"auto\" or \"stream\" "
                       "(--weights; `halo plan -m %s` shows the plan)",
                       params->model_path, (double)plan->weight_bytes / (double)(1ull << 30),
                       m.name, params->model_path);
    if (st) {
        halo_plan_free(plan);
        return st;
    }
    *out = plan;
    return HALO_OK;
}

/* The backend the parameters name: HALO_BACKEND applies when the caller names none, so a test
 * suite or a script runs on another backend unchanged. */
static const char *backend_name(const halo_engine_params *params) {
    const char *env = getenv("HALO_BACKEND");
    return params->backend ? params->backend : env && *env ? env : "cpu";
}

/* A backend this build lacks is named before any file is opened (halo bench relies on it). */
static halo_status check_backend(const halo_engine_params *params, halo_error *err) {
    const char *name = backend_name(params), *gpu = halo_backend_cuda_flavor();
    if (!strcmp(name, "cpu") || !strcmp(name, "auto") || (gpu && !strcmp(name, gpu)))
        return HALO_OK;
    if (!strcmp(name, "cuda") || !strcmp(name, "hip"))
        return halo_fail(err, HALO_E_UNSUPPORTED,
                         "backend '%s' is not built into this halo (%s; configure with "
                         "-DHALO_CUDA=ON or -DHALO_HIP=ON)",
                         name, gpu ? "it was built for the other GPU family" : "no GPU backend");
    if (!strcmp(name, "vulkan") && halo_backend_vulkan_built()) return HALO_OK;
    if (!strcmp(name, "vulkan"))
        return halo_fail(err, HALO_E_UNSUPPORTED,
                         "backend 'vulkan' is not built into this halo (configure with "
                         "-DHALO_VULKAN=ON)");
    return halo_fail(err, HALO_E_UNSUPPORTED, "backend '%s' is not known; available: cpu%s%s, auto",
                     name, gpu ? ", " : "", gpu ? gpu : "");
}

/* Starts the backend check_backend accepted. "auto" takes the GPU backend when it starts and
 * says why not otherwise (one line on stderr: a fallback is not an error, but must not be
 * silent). */
static halo_status pick_backend(const halo_engine_params *params, halo_backend **be,
                                halo_backend_kind *kind, halo_error *err) {
    const char *name = backend_name(params), *gpu = halo_backend_cuda_flavor();
    bool want_gpu = gpu && !strcmp(name, gpu), is_auto = !strcmp(name, "auto");
    /* Vulkan (src/backend/vulkan) is placed by the plan as the GPU backends are. */
    const halo_vk_mode vk_mode = params->precise ? HALO_VK_PRECISE : HALO_VK_FAST;
    if (!strcmp(name, "vulkan")) {
        *kind = HALO_BACKEND_VULKAN;
        return halo_backend_vulkan_create_mode(-1, vk_mode, be, err);
    }
    if (want_gpu || is_auto) {
        halo_error why = {0};
        if (halo_backend_cuda_create(0, be, &why) == HALO_OK) {
            *kind = gpu && strcmp(gpu, "hip") == 0 ? HALO_BACKEND_HIP : HALO_BACKEND_CUDA;
            halo_backend_cuda_set_precise(*be, params->precise);
            return HALO_OK;
        }
        if (want_gpu) {
            *err = why;
            return halo_error_prefix(err, "backend %s: ", name);
        }
        /* No CUDA device: a Vulkan GPU (never a CPU implementation such as lavapipe). */
        halo_error vk_why = {0};
        if (halo_backend_vulkan_built() &&
            halo_backend_vulkan_create_gpu(vk_mode, be, &vk_why) == HALO_OK) {
            *kind = HALO_BACKEND_VULKAN;
            return HALO_OK;
        }
        fprintf(stderr, "halo: running on the CPU: %s%s%s\n", why.message,
                vk_why.message[0] ? "; " : "", vk_why.message);
    }
    *kind = HALO_BACKEND_CPU;
    return halo_backend_cpu_create(params->threads, params->precise, be, err);
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

/* Reads (or makes) the weights into the plan's pools, reporting progress through the meter:
 * the CPU computes on the host arena; a GPU backend gets its device and managed tensors straight
 * from the file (engine_place_gpu.c) and the arena only for what it reads from host memory.
 * Streamed experts stay on disk and go through the expert cache (src/mem/stream.c). */
static halo_status load_weights(halo_engine *e, const halo_engine_params *params,
                                const halo_plan *plan, halo_backend_kind kind, bool synth,
                                halo_load_meter *meter, halo_error *err) {
    const bool streams = halo_stream_planned(plan), gpu = kind != HALO_BACKEND_CPU;
    uint64_t n = halo_gguf_tensor_count(e->gguf), all = 0, arena_bytes = 0;
    for (uint64_t i = 0; i < n; i++)
        if (plan->tensor_pool[i] != HALO_POOL_DISK) all += halo_gguf_tensor_at(e->gguf, i)->n_bytes;
    clock_gettime(CLOCK_MONOTONIC, &meter->t0);
    meter->total = all;
    halo_status st = HALO_OK;
    if (synth) {
        /* A GPU backend's device tensors are made later, a batch at a time right before their
         * upload (engine_place_gpu.c), so the host never holds the whole model: the 145 GiB
         * mxfp4 mix fits a 128 GiB host that way. */
        bool *host_only = gpu ? halo_engine_host_tensors(e->gguf, plan) : NULL;
        if (gpu && !host_only) return halo_fail(err, HALO_E_NOMEM, "out of memory");
        uint64_t gpu_bytes = gpu ? halo_engine_gpu_bytes(e->gguf, plan) : 0;
        halo_load_meter_next(meter, all - gpu_bytes);
        st = halo_synth_fill_arena(params->model_path, e->gguf, e->arena, host_only,
                                   params->threads, halo_load_meter_report, meter, err);
        free(host_only);
        if (gpu) halo_load_meter_next(meter, gpu_bytes);
    } else {
        uint8_t *pools = gpu ? halo_engine_arena_pools(e->gguf, plan, &arena_bytes) : NULL;
        if (gpu && !pools) return halo_fail(err, HALO_E_NOMEM, "out of memory");
        halo_load_options lo = {.progress = halo_load_meter_report, .user = meter};
        halo_load_meter_next(meter, gpu ? arena_bytes : all);
        st = halo_mem_arena_load(e->gguf,
                                 gpu       ? pools
                                 : streams ? plan->tensor_pool
                                           : NULL,
                                 &lo, &e->arena, NULL, err);
        free(pools);
        if (gpu) halo_load_meter_next(meter, halo_engine_gpu_bytes(e->gguf, plan));
    }
    if (!st) {
        e->tensor_bufs = calloc(n + 8, sizeof *e->tensor_bufs);
        if (!e->tensor_bufs) st = halo_fail(err, HALO_E_NOMEM, "out of memory");
    }
    /* HALO_TEST_DEVICE_EXPERTS=1 puts the GPU's two-level expert cache on the CPU backend too,
     * so its logic is tested where there is no GPU (tests/mem/test_expert_device.c). */
    const bool two_level = gpu || getenv("HALO_TEST_DEVICE_EXPERTS");
    if (!st && streams)
        st = two_level ? halo_engine_stream_gpu(e, plan, err)
                       : halo_stream_create(e->gguf, &e->w, plan, e->be, &e->stream, err);
    if (!st) {
        if (!gpu)
            st = halo_weights_for_each(&e->w, place_one, e, err);
        else
            st = halo_engine_place_gpu(e, plan, synth ? params : NULL, meter, err);
    }
    /* The bar ends at 100 % even when the last phase had nothing to read. */
    if (!st && meter->fn && !meter->finished) {
        meter->finished = true;
        halo_load_progress done = {all, all, 0};
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        done.seconds = (double)(now.tv_sec - meter->t0.tv_sec) +
                       (double)(now.tv_nsec - meter->t0.tv_nsec) * 1e-9;
        meter->fn(&done, meter->user);
    }
    return st;
}

halo_status halo_engine_open_progress(const halo_engine_params *params,
                                      halo_load_progress_fn progress, void *user, halo_engine **out,
                                      halo_error *err) {
    *out = NULL;
    halo_status st = check_backend(params, err);
    if (st) return st;
    halo_engine *e = calloc(1, sizeof *e);
    if (!e) return halo_fail(err, HALO_E_NOMEM, "out of memory");
    pthread_mutex_init(&e->step_lock, NULL);
    halo_backend_kind kind = HALO_BACKEND_CPU;
    halo_plan *plan = NULL;
    /* "synthetic:dsv4-flash-q2:4": the model is made in place (src/model/synthetic.c) */
    const bool synth = halo_synth_is_path(params->model_path);
    st = synth ? halo_synth_open(params->model_path, &e->gguf, &e->arena, err)
               : halo_gguf_open(params->model_path, &e->gguf, err);
    if (!st) {
        st = halo_hparams_load(e->gguf, &e->hp, err);
        if (!st) st = halo_weights_bind(e->gguf, &e->hp, &e->w, err);
        if (st) halo_error_prefix(err, "%s: ", params->model_path);
    }
    /* The backend starts before admission (it decides which memory is planned) but allocates
     * nothing big: a refused model costs no GPU memory. */
    if (!st) st = pick_backend(params, &e->be, &kind, err);
    if (!st) st = admit(params, e->gguf, &e->hp, kind, &plan, err);
    /* Index tensors are read from the file before any eval; a synthetic model has no file and
     * its generator draws distinct in-range rows by construction (test_model_synthetic). */
    if (!st && !synth && (st = halo_model_validate(e->gguf, &e->hp, &e->w, err)))
        halo_error_prefix(err, "%s: ", params->model_path);
    halo_load_meter meter = {.fn = progress, .user = user};
    if (!st) st = load_weights(e, params, plan, kind, synth, &meter, err);
    halo_plan_free(plan);
    if (st) {
        halo_engine_close(e);
        return st;
    }
    *out = e;
    return HALO_OK;
}

halo_status halo_engine_open(const halo_engine_params *params, halo_engine **out, halo_error *err) {
    return halo_engine_open_progress(params, NULL, NULL, out, err);
}

void halo_engine_close(halo_engine *e) {
    if (!e) return;
    halo_engine_step_free(e);
    pthread_mutex_destroy(&e->step_lock);
    for (uint32_t i = 0; i < e->n_bufs; i++)
        e->be->ops->buf_free(e->be, e->tensor_bufs[i]);
    free(e->tensor_bufs);
    halo_engine_stream_gpu_free(e);
    halo_stream_free(e->stream, e->be);
    if (e->be) e->be->ops->destroy(e->be);
    halo_mem_arena_free(e->arena);
    halo_gguf_close(e->gguf);
    free(e);
}

uint32_t halo_engine_n_vocab(const halo_engine *e) {
    return e->hp.n_vocab;
}
uint32_t halo_engine_n_ctx_train(const halo_engine *e) {
    return e->hp.n_ctx_train;
}

uint64_t halo_engine_session_bytes(const halo_engine *e, uint32_t n_ctx) {
    return halo_kv_bytes(&e->hp, n_ctx);
}
