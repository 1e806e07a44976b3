/* Expert cache policies (see expert_slots.h). A victim is found by a scan over the slots: with
 * ~1,700 slots for the 80 GiB model in a 12 GiB cache and ~260 misses per token at worst, the
 * scan costs well under a millisecond per token, against milliseconds of reads. */
#include "mem/expert_slots.h"

#include <stdlib.h>
#include <string.h>

bool halo_expert_slots_init(halo_expert_slots *s, uint32_t n_layer, uint32_t n_expert,
                            uint32_t n_slots, halo_expert_policy policy) {
    memset(s, 0, sizeof *s);
    s->n_layer = n_layer;
    s->n_expert = n_expert;
    s->n_slots = n_slots;
    s->policy = policy;
    uint64_t keys = (uint64_t)n_layer * n_expert;
    s->where = malloc((keys ? keys : 1) * sizeof *s->where);
    s->key = malloc((n_slots ? n_slots : 1) * sizeof *s->key);
    s->last = calloc(n_slots ? n_slots : 1, sizeof *s->last);
    s->freq = calloc(n_slots ? n_slots : 1, sizeof *s->freq);
    s->pin = calloc(n_slots ? n_slots : 1, sizeof *s->pin);
    s->per_layer = calloc(n_layer ? n_layer : 1, sizeof *s->per_layer);
    s->hold = calloc(n_slots ? n_slots : 1, sizeof *s->hold);
    if (!s->where || !s->key || !s->last || !s->freq || !s->pin || !s->per_layer || !s->hold) {
        halo_expert_slots_free(s);
        return false;
    }
    for (uint64_t i = 0; i < keys; i++)
        s->where[i] = -1;
    for (uint32_t i = 0; i < n_slots; i++)
        s->key[i] = -1;
    s->round = 1; /* pin 0 = never pinned */
    return true;
}

void halo_expert_slots_free(halo_expert_slots *s) {
    free(s->where);
    free(s->key);
    free(s->last);
    free(s->freq);
    free(s->pin);
    free(s->per_layer);
    free(s->hold);
    memset(s, 0, sizeof *s);
}

void halo_expert_slots_use(halo_expert_slots *s, int32_t slot) {
    s->last[slot] = ++s->tick;
    s->pin[slot] = s->round;
    s->freq[slot]++;
    /* Aging: without it, experts hot in the first prompt would stay forever. */
    if (s->policy == HALO_EXPERT_LFU && ++s->uses_since_decay >= s->n_slots) {
        s->uses_since_decay = 0;
        for (uint32_t i = 0; i < s->n_slots; i++)
            s->freq[i] >>= 1;
    }
}

void halo_expert_slots_drop(halo_expert_slots *s, int32_t slot) {
    int64_t k = s->key[slot];
    if (k < 0) return;
    s->where[k] = -1;
    s->per_layer[k / s->n_expert]--;
    s->key[slot] = -1;
    s->freq[slot] = 0;
}

/* Is a worse candidate than b for keeping (so a is evicted before b)? */
static bool worse(const halo_expert_slots *s, int32_t a, int32_t b) {
    if (s->policy == HALO_EXPERT_LFU && s->freq[a] != s->freq[b]) return s->freq[a] < s->freq[b];
    return s->last[a] < s->last[b];
}

int32_t halo_expert_slots_victim(halo_expert_slots *s, uint32_t layer) {
    int32_t best = -1, best_own = -1, best_over = -1;
    uint32_t budget = s->n_layer ? s->n_slots / s->n_layer : s->n_slots;
    for (uint32_t i = 0; i < s->n_slots; i++) {
        int32_t slot = (int32_t)i;
        if (s->key[i] < 0) {
            /* A free slot, unless per-layer budgets keep it for other layers. */
            if (s->policy != HALO_EXPERT_LRU_LAYER || budget == 0 || s->per_layer[layer] < budget)
                return slot;
            continue;
        }
        if (s->pin[i] == s->round || s->hold[i]) continue;
        if (best < 0 || worse(s, slot, best)) best = slot;
        uint32_t l = (uint32_t)(s->key[i] / s->n_expert);
        if (l == layer && (best_own < 0 || worse(s, slot, best_own))) best_own = slot;
        if (s->per_layer[l] > budget && (best_over < 0 || worse(s, slot, best_over)))
            best_over = slot;
    }
    int32_t v = best;
    if (s->policy == HALO_EXPERT_LRU_LAYER && budget > 0) {
        /* At its budget a layer replaces its own; below it, it takes from a layer above its
         * own budget; free slots held back for other layers are the last resort. */
        if (s->per_layer[layer] >= budget && best_own >= 0)
            v = best_own;
        else if (best_over >= 0)
            v = best_over;
        if (v < 0)
            for (uint32_t i = 0; i < s->n_slots; i++)
                if (s->key[i] < 0) return (int32_t)i;
    }
    if (v >= 0) halo_expert_slots_drop(s, v);
    return v;
}

void halo_expert_slots_assign(halo_expert_slots *s, int32_t slot, uint32_t layer, uint32_t expert) {
    int64_t k = (int64_t)layer * s->n_expert + expert;
    s->key[slot] = k;
    s->where[k] = slot;
    s->per_layer[layer]++;
    s->freq[slot] = 0;
    halo_expert_slots_use(s, slot);
}

const char *halo_expert_policy_name(halo_expert_policy p) {
    static const char *const names[] = {"lru", "lfu", "lru-per-layer"};
    return p < HALO_EXPERT_POLICY_COUNT ? names[p] : "?";
}
