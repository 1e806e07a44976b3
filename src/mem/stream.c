/* Expert streaming for an engine (see stream.h) and its statistics (halo/stream.h). */
#include "mem/stream.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "halo/stream.h"
#include "mem/expert_cache.h"
#include "mem/predict.h"
#include "mem/prefetch.h"
#include "model/engine_internal.h"

struct halo_engine_stream {
    /* The backend's ops with embed wrapped to start the step's prefetch, and moe to predict
     * the next layer's experts: the forward pass (src/model/forward.c) has no per-step or
     * per-layer hook; embed is its first op, called once per step with the step's token ids.
     * be->ops points here while the stream lives. */
    halo_backend_ops ops;
    const halo_backend_ops *inner;
    halo_backend *be;
    halo_prefetch *prefetch;
    halo_predict *predict;
    halo_expert_cache *cache;
    halo_buf *buf;
    uint64_t requested, admitted, expert_bytes;
    char note[384];
};

bool halo_stream_planned(const halo_plan *plan) {
    for (uint64_t i = 0; i < plan->n_tensors; i++)
        if (plan->tensor_pool[i] == HALO_POOL_DISK) return true;
    return false;
}

/* HALO_STREAM_PREFETCH, words joined by commas: "overlap" (cached experts and the shared
 * expert compute while the misses read), "hash" (the hash-routed layers' experts read from the
 * step's start), "predict" (the next score-routed layer's experts guessed, predict.h), "all"
 * (overlap and hash: the default), "none" (reads only when a layer asks, all of them before any
 * of its experts computes). */
static void prefetch_from_env(bool *overlap, bool *hash, bool *predict) {
    const char *p = getenv("HALO_STREAM_PREFETCH");
    if (!p || !*p) p = "all";
    bool all = strstr(p, "all") != NULL;
    *overlap = all || strstr(p, "overlap");
    *hash = all || strstr(p, "hash");
    *predict = strstr(p, "predict") != NULL;
}

static halo_engine_stream *stream_of(halo_backend *be) {
    return (halo_engine_stream *)(void *)((char *)be->ops - offsetof(halo_engine_stream, ops));
}

static void embed_and_prefetch(halo_backend *be, const halo_tensor *table, const int32_t *tokens,
                               halo_tensor *out) {
    halo_engine_stream *s = stream_of(be);
    if (s->prefetch)
        halo_prefetch_step(s->prefetch, tokens, (uint32_t)out->ne[1]);
    else
        halo_expert_cache_step(s->cache);
    s->inner->embed(be, table, tokens, out);
}

static void moe_and_predict(halo_backend *be, const halo_moe_args *a) {
    halo_engine_stream *s = stream_of(be);
    s->inner->moe(be, a);
    if (a->experts) halo_predict_after_moe(s->predict, be, a);
}

static halo_expert_policy policy_from_env(void) {
    const char *p = getenv("HALO_EXPERT_POLICY");
    for (int k = 0; p && k < HALO_EXPERT_POLICY_COUNT; k++)
        if (!strcmp(p, halo_expert_policy_name((halo_expert_policy)k)))
            return (halo_expert_policy)k;
    return HALO_EXPERT_LRU_LAYER; /* measured best: bench/stream/RESULTS.md */
}

halo_status halo_stream_create(const halo_gguf *g, halo_weights *w, const halo_plan *plan,
                               halo_backend *be, halo_engine_stream **out, halo_error *err) {
    *out = NULL;
    if (plan->expert_cache_pool != HALO_POOL_HOST)
        return halo_fail(err, HALO_E_UNSUPPORTED,
                         "expert cache planned in the %s pool: only host memory (the CPU "
                         "backend) streams today",
                         halo_pool_name(plan->expert_cache_pool));
    halo_engine_stream *s = calloc(1, sizeof *s);
    halo_expert_layer *layers = calloc(w->n_layer ? w->n_layer : 1, sizeof *layers);
    if (!s || !layers) {
        free(s);
        free(layers);
        return halo_fail(err, HALO_E_NOMEM, "out of memory");
    }
    s->requested = plan->expert_cache_requested;
    s->admitted = plan->expert_cache_admitted;
    for (size_t i = 0; i < plan->n_notes; i++)
        if (strstr(plan->notes[i], "expert cache")) {
            snprintf(s->note, sizeof s->note, "%s", plan->notes[i]);
            break;
        }
    for (uint32_t l = 0; l < w->n_layer; l++) {
        const halo_layer_weights *L = &w->layer[l];
        if (!L->gate_exps.src) continue;
        layers[l] = (halo_expert_layer){L->gate_exps.src, L->up_exps.src, L->down_exps.src};
        s->expert_bytes +=
            L->gate_exps.src->n_bytes + L->up_exps.src->n_bytes + L->down_exps.src->n_bytes;
    }
    bool overlap, hash, predict;
    prefetch_from_env(&overlap, &hash, &predict);
    halo_expert_cache_options o = {
        .bytes = s->admitted, .policy = policy_from_env(), .no_overlap = !overlap};
    halo_status st = halo_expert_cache_create(g, layers, w->n_layer, &o, &s->cache, err);
    free(layers);
    if (!st) {
        uint64_t bytes;
        void *mem = halo_expert_cache_memory(s->cache, &bytes);
        st = be->ops->buf_wrap_host(be, mem, bytes, &s->buf, err);
    }
    if (st) {
        halo_stream_free(s, be);
        return st;
    }
    halo_expert_cache_bind(s->cache, s->buf);
    for (uint32_t l = 0; l < w->n_layer; l++)
        w->layer[l].experts = halo_expert_cache_source(s->cache, l);
    if (hash) st = halo_prefetch_create(g, w, s->cache, &s->prefetch, err);
    if (!st && predict) st = halo_predict_create(g, w, be, s->cache, &s->predict, err);
    if (st) {
        halo_stream_free(s, be);
        return st;
    }
    if (s->prefetch || s->predict) {
        s->be = be;
        s->inner = be->ops;
        s->ops = *be->ops;
        s->ops.embed = embed_and_prefetch;
        if (s->predict) s->ops.moe = moe_and_predict;
        be->ops = &s->ops;
    }
    *out = s;
    return HALO_OK;
}

void halo_stream_free(halo_engine_stream *s, halo_backend *be) {
    if (!s) return;
    if (s->be && s->be->ops == &s->ops) s->be->ops = s->inner;
    halo_prefetch_free(s->prefetch);
    halo_predict_free(s->predict, be);
    if (s->buf) be->ops->buf_free(be, s->buf);
    halo_expert_cache_free(s->cache);
    free(s);
}

bool halo_engine_stream_stats(const halo_engine *e, halo_stream_stats *out) {
    memset(out, 0, sizeof *out);
    out->policy = out->note = out->reader = "";
    const halo_engine_stream *s = e->stream;
    if (!s) return false;
    halo_expert_stats cs;
    halo_expert_cache_stats(s->cache, &cs);
    out->cache_requested = s->requested;
    out->cache_admitted = s->admitted;
    out->cache_allocated = cs.bytes_allocated;
    out->expert_bytes = s->expert_bytes;
    out->slots = cs.slots;
    out->policy = halo_expert_policy_name(cs.policy);
    out->note = s->note;
    out->requests = cs.requests;
    out->hits = cs.hits;
    out->misses = cs.misses;
    out->bytes_read = cs.bytes_read;
    out->read_seconds = cs.read_seconds;
    out->waited = cs.waited;
    out->prefetched = cs.prefetched;
    out->prefetch_used = cs.prefetch_used;
    out->predicted = cs.predicted;
    out->predicted_used = cs.predicted_used;
    out->direct = cs.direct;
    out->reader = cs.reader;
    return true;
}
