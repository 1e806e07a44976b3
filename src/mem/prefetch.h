/* Prefetch of the hash-routed layers' experts (DeepSeek V4's first layers route by token id
 * through a table, ffn_gate_tid2eid): at the start of a forward step the token ids fix those
 * layers' experts exactly, so their reads start then and run while the layers before compute.
 * Score-routed layers are known only once their router has run; for them the expert cache
 * overlaps the reads with the experts it holds and the shared expert (expert_cache.c). */
#ifndef HALO_MEM_PREFETCH_H
#define HALO_MEM_PREFETCH_H

#include "mem/expert_cache.h"
#include "model/weights.h"

typedef struct halo_prefetch halo_prefetch;

/* Reads the hash tables of w's streamed layers from g into host memory (n_used·n_vocab·4 bytes
 * each: 3 MiB a layer for DeepSeek V4 Flash). *out is NULL when no streamed layer routes by
 * hash. The tables were validated at open (src/model/validate.c): ids are in range. Layers whose
 * source is no longer this cache (a GPU cache above it) are not prefetched. */
halo_status halo_prefetch_create(const halo_gguf *g, const halo_weights *w, halo_expert_cache *c,
                                 halo_prefetch **out, halo_error *err);
void halo_prefetch_free(halo_prefetch *p);

/* A step over tokens[0..n) begins (no MoE of the last step still running): starts the reads of
 * every hash-routed layer's experts for these tokens, first layer first. */
void halo_prefetch_step(halo_prefetch *p, const int32_t *tokens, uint32_t n);

#endif
