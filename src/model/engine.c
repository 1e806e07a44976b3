/* Engine: opening a model (gguf + hparams + weights + backend + admission + loading into the
 * plan's pools). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/vulkan/vulkan.h"
#include "core/error.h"
#include "mem/stream.h"
#include "model/engine_internal.h"
#include "model/synthetic.h"
#include "model/validate.h"

/* Admission: plan the model and n_ctx positions of state on this machine before allocating
 * anything, so a model that cannot fit is refused with the planner's reason instead of being
 * killed by the OOM killer halfway through loading. The plan (caller frees) says which pool
 * each tensor goes to; routed experts it leaves on disk stream through the expert cache (CPU
 * backend only for now) when the caller allows it (weights "auto" or "stream"). */
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
    if (st) return halo_error_prefix(err, "cannot check memory before loading: ");
    uint32_t n_ctx = params->n_ctx ? params->n_ctx : 4096;
    if (!params->n_ctx && hp->n_ctx_train && n_ctx > hp->n_ctx_train) n_ctx = hp->n_ctx_train;
    halo_plan_options o = {.n_ctx = n_ctx,
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
    else if (streams && (!may_stream || backend != HALO_BACKEND_CPU))
        st = halo_fail(
            err, HALO_E_UNSUPPORTED,
            "%s: %.2f GiB of weights do not fit in memory here (machine: %s) and "
            "would have to stream from disk, %s (`halo plan -m %s` shows the plan)",
            params->model_path, (double)plan->weight_bytes / (double)(1ull << 30), m.name,
            backend != HALO_BACKEND_CPU ? "which only the CPU backend does yet"
                                        : "which needs weights \"auto\" or \"stream\" (--weights)",
            params->model_path);
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
    /* Vulkan (src/backend/vulkan): weights are placed as for the CPU, one buffer per tensor that
     * the backend fills from the arena (docs/vulkan.md); the plan does not know its heaps yet. */
    if (!strcmp(name, "vulkan")) {
        *kind = HALO_BACKEND_CPU;
        return halo_backend_vulkan_create(-1, be, err);
    }
    if (want_gpu || is_auto) {
        halo_error why = {0};
        if (halo_backend_cuda_create(0, be, &why) == HALO_OK) {
            *kind = gpu && strcmp(gpu, "hip") == 0 ? HALO_BACKEND_HIP : HALO_BACKEND_CUDA;
            return HALO_OK;
        }
        if (want_gpu) {
            *err = why;
            return halo_error_prefix(err, "backend %s: ", name);
        }
        fprintf(stderr, "halo: running on the CPU: %s\n", why.message);
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

/* ---- a GPU backend: the plan's pools ------------------------------------------------------
 * Every tensor is read once into the loader's host arena; tensors the plan puts in device or
 * managed memory are then copied into one buffer per pool, and the gpu-host ones stay where the
 * loader put them, the arena's range pinned and mapped for the GPU (cudaHostRegister). With no
 * gpu-host tensor the arena is freed once copied. */

typedef struct gpu_place {
    halo_engine *e;
    halo_buf **buf; /* per tensor (gguf order) */
    uint64_t *off;
} gpu_place;

static halo_status bind_one(halo_weight *w, void *user, halo_error *err) {
    gpu_place *g = user;
    uint64_t i = (uint64_t)(w->src - halo_gguf_tensor_at(g->e->gguf, 0));
    if (!g->buf[i])
        return halo_fail(err, HALO_E_NOT_FOUND, "tensor '%s' was not placed", w->src->name);
    w->t.buf = g->buf[i];
    w->t.offset = g->off[i];
    return HALO_OK;
}

static halo_status place_on_gpu(halo_engine *e, const halo_plan *plan, halo_error *err) {
    const halo_backend_ops *op = e->be->ops;
    uint64_t n = halo_gguf_tensor_count(e->gguf), used[HALO_POOL_COUNT] = {0};
    gpu_place g = {
        .e = e, .buf = calloc(n + 1, sizeof *g.buf), .off = calloc(n + 1, sizeof *g.off)};
    halo_buf *pool_buf[HALO_POOL_COUNT] = {0};
    const unsigned char *lo = NULL, *hi = NULL; /* the gpu-host tensors' range in the arena */
    halo_status st = g.buf && g.off ? HALO_OK : halo_fail(err, HALO_E_NOMEM, "out of memory");
    for (uint64_t i = 0; !st && i < n; i++) {
        const halo_gguf_tensor *t = halo_gguf_tensor_at(e->gguf, i);
        const unsigned char *p = halo_mem_arena_tensor(e->arena, i);
        uint8_t pool = plan->tensor_pool[i];
        if (!p) continue;
        if (pool == HALO_POOL_GPU_HOST || pool == HALO_POOL_HOST) {
            lo = !lo || p < lo ? p : lo;
            hi = !hi || p + t->n_bytes > hi ? p + t->n_bytes : hi;
        } else {
            g.off[i] = used[pool];
            used[pool] += (t->n_bytes + 255) & ~255ull;
        }
    }
    for (int k = 0; !st && k < HALO_POOL_COUNT; k++) {
        if (!used[k]) continue;
        st = op->buf_alloc_pool(e->be, (uint32_t)k, used[k], &pool_buf[k], err);
        if (st)
            halo_error_prefix(
                err, "weights in the %s pool (%.2f GiB): ", halo_pool_name((halo_pool_kind)k),
                (double)used[k] / (double)(1ull << 30));
        else
            e->tensor_bufs[e->n_bufs++] = pool_buf[k];
    }
    halo_buf *arena_buf = NULL;
    if (!st && lo) {
        st = op->buf_wrap_host(e->be, (void *)lo, (uint64_t)(hi - lo), &arena_buf, err);
        if (st)
            halo_error_prefix(err, "weights in GPU-visible host memory: ");
        else
            e->tensor_bufs[e->n_bufs++] = arena_buf;
    }
    for (uint64_t i = 0; !st && i < n; i++) {
        const halo_gguf_tensor *t = halo_gguf_tensor_at(e->gguf, i);
        const unsigned char *p = halo_mem_arena_tensor(e->arena, i);
        uint8_t pool = plan->tensor_pool[i];
        if (!p) continue;
        if (pool == HALO_POOL_GPU_HOST || pool == HALO_POOL_HOST) {
            g.buf[i] = arena_buf;
            g.off[i] = (uint64_t)(p - lo);
        } else {
            g.buf[i] = pool_buf[pool];
            st = op->buf_write(e->be, pool_buf[pool], g.off[i], p, t->n_bytes, err);
            if (st) halo_error_prefix(err, "tensor '%s': ", t->name);
        }
    }
    if (!st) st = halo_weights_for_each(&e->w, bind_one, &g, err);
    /* Everything was copied out of the arena: give its host memory back. */
    if (!st && !lo) {
        halo_mem_arena_free(e->arena);
        e->arena = NULL;
    }
    free(g.buf);
    free(g.off);
    return st;
}

halo_status halo_engine_open(const halo_engine_params *params, halo_engine **out, halo_error *err) {
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
    /* Each tensor is read once into the host arena: the CPU backend computes there; a GPU
     * backend copies what the plan puts in its memory and maps the rest. Streamed experts stay
     * on disk and go through the expert cache (src/mem/stream.c). */
    bool streams = !st && halo_stream_planned(plan);
    if (!st && synth)
        st = halo_synth_fill_arena(params->model_path, e->gguf, e->arena, params->threads, NULL,
                                   NULL, err);
    else if (!st)
        st = halo_mem_arena_load(e->gguf, streams ? plan->tensor_pool : NULL, NULL, &e->arena, NULL,
                                 err);
    if (!st && streams) st = halo_stream_create(e->gguf, &e->w, plan, e->be, &e->stream, err);
    if (!st) {
        e->tensor_bufs = calloc(halo_gguf_tensor_count(e->gguf) + 8, sizeof *e->tensor_bufs);
        if (!e->tensor_bufs)
            st = halo_fail(err, HALO_E_NOMEM, "out of memory");
        else if (kind == HALO_BACKEND_CPU)
            st = halo_weights_for_each(&e->w, place_one, e, err);
        else
            st = place_on_gpu(e, plan, err);
    }
    halo_plan_free(plan);
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
    for (uint32_t i = 0; i < e->n_bufs; i++)
        e->be->ops->buf_free(e->be, e->tensor_bufs[i]);
    free(e->tensor_bufs);
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
