/* Prediction of a score-routed layer's experts one layer ahead (speculative prefetch): once layer
 * L's experts have run, layer L+1's router is applied to layer L's FFN input, and the experts it
 * would choose start reading while layer L+1's attention computes. The residual stream changes
 * little from one layer to the next, so in trained models the two inputs route alike; a wrong
 * guess costs a read and a slot until the next step, never a result (the layer still asks for
 * what its own router chose). Off by default (HALO_STREAM_PREFETCH=...,predict turns it on):
 * bench/stream/RESULTS.md has what it measured. Decode-sized batches only (up to 4 tokens). */
#ifndef HALO_MEM_PREDICT_H
#define HALO_MEM_PREDICT_H

#include "backend/backend.h"
#include "mem/expert_cache.h"
#include "model/weights.h"

typedef struct halo_predict halo_predict;

/* Reads the gating function, experts per token and every layer's selection bias from g;
 * allocates the router output in be. */
halo_status halo_predict_create(const halo_gguf *g, const halo_weights *w, halo_backend *be,
                                halo_expert_cache *c, halo_predict **out, halo_error *err);
void halo_predict_free(halo_predict *p, halo_backend *be);

/* After the MoE of a (its input a->x, the streamed layer a->experts->layer) has run: predicts
 * and starts reading the next layer's experts when that layer is score-routed. */
void halo_predict_after_moe(halo_predict *p, halo_backend *be, const halo_moe_args *a);

#endif
