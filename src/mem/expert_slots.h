/* Which routed experts the expert cache holds, and which one to evict: the policy alone, with no
 * memory or reads, so the benchmark's trace replay (bench/stream) measures the very code the
 * cache runs. Keys are (layer, expert); a slot holds one expert's three matrices. */
#ifndef HALO_MEM_EXPERT_SLOTS_H
#define HALO_MEM_EXPERT_SLOTS_H

#include <stdbool.h>
#include <stdint.h>

typedef enum halo_expert_policy {
    HALO_EXPERT_LRU = 0,   /* least recently used (ds4's choice) */
    HALO_EXPERT_LFU,       /* fewest uses, counts halved every n_slots uses (frequency-aware) */
    HALO_EXPERT_LRU_LAYER, /* LRU with an equal budget of slots per layer */
    HALO_EXPERT_POLICY_COUNT
} halo_expert_policy;

typedef struct halo_expert_slots {
    uint32_t n_layer, n_expert, n_slots;
    halo_expert_policy policy;
    int32_t *where;      /* [n_layer·n_expert] slot holding the expert, or -1 */
    int64_t *key;        /* [n_slots] layer·n_expert + expert, or -1 when free */
    uint64_t *last;      /* [n_slots] tick of the last use */
    uint32_t *freq;      /* [n_slots] decayed use count */
    uint64_t *pin;       /* [n_slots] round it is pinned in (in use by the backend) */
    uint32_t *per_layer; /* [n_layer] slots held per layer */
    uint8_t *hold;       /* [n_slots] never a victim while set: reads in flight, or prefetched
                          * and not yet asked for (the expert cache sets and clears it) */
    uint64_t tick, round, uses_since_decay;
} halo_expert_slots;

/* Returns false when out of memory. */
bool halo_expert_slots_init(halo_expert_slots *s, uint32_t n_layer, uint32_t n_expert,
                            uint32_t n_slots, halo_expert_policy policy);
void halo_expert_slots_free(halo_expert_slots *s);

/* A new round: every slot pinned so far may be evicted again. */
static inline void halo_expert_slots_new_round(halo_expert_slots *s) {
    s->round++;
}

/* The slot holding (layer, expert), or -1. */
static inline int32_t halo_expert_slots_find(const halo_expert_slots *s, uint32_t layer,
                                             uint32_t expert) {
    return s->where[(uint64_t)layer * s->n_expert + expert];
}

/* Records a use of slot and pins it for the current round. */
void halo_expert_slots_use(halo_expert_slots *s, int32_t slot);

/* The slot to load (layer, expert) into: a free one, else the policy's victim among the
 * unpinned ones, which is emptied; -1 when every slot is pinned this round. */
int32_t halo_expert_slots_victim(halo_expert_slots *s, uint32_t layer);

/* Puts (layer, expert) in slot (emptied by halo_expert_slots_victim), used and pinned. */
void halo_expert_slots_assign(halo_expert_slots *s, int32_t slot, uint32_t layer, uint32_t expert);

/* Keeps a slot from being chosen as a victim (on) or lets it be again (off). */
static inline void halo_expert_slots_hold(halo_expert_slots *s, int32_t slot, bool on) {
    s->hold[slot] = on;
}

/* Empties a slot (its load failed). */
void halo_expert_slots_drop(halo_expert_slots *s, int32_t slot);

const char *halo_expert_policy_name(halo_expert_policy p);

#endif
