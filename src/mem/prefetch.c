/* Prefetch of the hash-routed layers' experts (see prefetch.h). */
#include "mem/prefetch.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"

typedef struct hash_layer {
    uint32_t layer;
    int32_t *table; /* [n_vocab][n_used] */
} hash_layer;

struct halo_prefetch {
    halo_expert_cache *cache;
    const halo_weights *w;
    hash_layer *layers;
    uint32_t n_layers, n_used, n_vocab;
    int32_t *ids; /* a layer's experts for the step, in first-use order */
    uint32_t cap;
};

void halo_prefetch_free(halo_prefetch *p) {
    if (!p) return;
    for (uint32_t i = 0; i < p->n_layers; i++)
        free(p->layers[i].table);
    free(p->layers);
    free(p->ids);
    free(p);
}

halo_status halo_prefetch_create(const halo_gguf *g, const halo_weights *w, halo_expert_cache *c,
                                 halo_prefetch **out, halo_error *err) {
    *out = NULL;
    halo_prefetch *p = calloc(1, sizeof *p);
    if (!p || !(p->layers = calloc(w->n_layer ? w->n_layer : 1, sizeof *p->layers))) {
        free(p);
        return halo_fail(err, HALO_E_NOMEM, "expert prefetch: out of memory");
    }
    p->cache = c;
    p->w = w;
    for (uint32_t l = 0; l < w->n_layer; l++) {
        const halo_layer_weights *L = &w->layer[l];
        if (!L->tid2eid.src || !L->experts) continue;
        const halo_gguf_tensor *t = L->tid2eid.src;
        if (t->type != HALO_TYPE_I32 || t->ne[0] < 1 || t->ne[1] < 1 ||
            t->n_bytes != (uint64_t)t->ne[0] * (uint64_t)t->ne[1] * 4 ||
            (p->n_layers && (t->ne[0] != p->n_used || t->ne[1] != p->n_vocab))) {
            halo_prefetch_free(p);
            return halo_fail(err, HALO_E_BAD_VALUE,
                             "expert prefetch: %s is not an i32 table like the other layers'",
                             L->tid2eid.src->name);
        }
        p->n_used = (uint32_t)t->ne[0];
        p->n_vocab = (uint32_t)t->ne[1];
        uint64_t bytes = t->n_bytes;
        hash_layer *h = &p->layers[p->n_layers];
        h->layer = l;
        h->table = malloc(bytes);
        if (!h->table) {
            halo_prefetch_free(p);
            return halo_fail(err, HALO_E_NOMEM, "expert prefetch: out of memory");
        }
        p->n_layers++;
        /* From the file, as the loader read it: the engine places weights after this. */
        halo_status st = halo_gguf_read_tensor(g, t, h->table, bytes, err);
        if (st) {
            halo_prefetch_free(p);
            return st;
        }
    }
    if (!p->n_layers) {
        halo_prefetch_free(p);
        return HALO_OK;
    }
    *out = p;
    return HALO_OK;
}

void halo_prefetch_step(halo_prefetch *p, const int32_t *tokens, uint32_t n) {
    halo_expert_cache_step(p->cache);
    uint64_t need = (uint64_t)n * p->n_used;
    if (need > p->cap) {
        int32_t *ids = realloc(p->ids, need * sizeof *ids);
        if (!ids) return; /* no prefetch this step: the layers read their experts themselves */
        p->ids = ids;
        p->cap = (uint32_t)need;
    }
    for (uint32_t i = 0; i < p->n_layers; i++) {
        const hash_layer *h = &p->layers[i];
        /* A cache above this one (the GPU's, src/mem/expert_device.c) asks this one only for
         * what it lacks: prefetching here would read experts it already holds. */
        if (p->w->layer[h->layer].experts != halo_expert_cache_source(p->cache, h->layer)) continue;
        uint32_t k = 0;
        for (uint32_t t = 0; t < n; t++) {
            if (tokens[t] < 0 || (uint32_t)tokens[t] >= p->n_vocab) continue;
            memcpy(p->ids + k, h->table + (uint64_t)tokens[t] * p->n_used,
                   p->n_used * sizeof *p->ids);
            k += p->n_used;
        }
        halo_expert_cache_prefetch(p->cache, h->layer, p->ids, k); /* duplicates skipped */
    }
}
