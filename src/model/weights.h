/* DeepSeek V4 weights: every tensor the forward uses, found by its GGUF name (llama.cpp's and
 * ds4's names) and checked against the shape the hyperparameters imply. Binding reads no
 * tensor data; loading copies each tensor once into a backend buffer. */
#ifndef HALO_MODEL_WEIGHTS_H
#define HALO_MODEL_WEIGHTS_H

#include "backend/backend.h"
#include "model/hparams.h"

typedef struct halo_weight {
    const halo_gguf_tensor *src; /* NULL: the tensor is absent (optional and not present) */
    halo_tensor t;               /* its view in backend memory once loaded */
} halo_weight;

typedef struct halo_layer_weights {
    halo_weight attn_norm, attn_sinks;
    halo_weight q_a, q_a_norm, q_b, kv, kv_norm, out_a, out_b;
    halo_weight hc_attn_fn, hc_attn_base, hc_attn_scale;
    halo_weight hc_ffn_fn, hc_ffn_base, hc_ffn_scale;
    /* compressor (ratio 4 and 128) */
    halo_weight comp_kv, comp_gate, comp_ape, comp_norm;
    /* lightning indexer (ratio 4) */
    halo_weight idx_proj, idx_q_b, idx_kv, idx_gate, idx_ape, idx_norm;
    /* mixture of experts */
    halo_weight ffn_norm, gate_inp, tid2eid, probs_b;
    halo_weight gate_exps, up_exps, down_exps, gate_sh, up_sh, down_sh;
    /* Streamed routed experts (src/mem/expert_cache.h); NULL: resident in gate/up/down_exps. */
    const halo_expert_source *experts;
} halo_layer_weights;

typedef struct halo_weights {
    halo_weight token_embd, output_norm, output;
    halo_weight out_hc_fn, out_hc_base, out_hc_scale;
    halo_layer_weights layer[HALO_MAX_LAYERS];
    uint32_t n_layer;
} halo_weights;

/* Finds every tensor and checks its shape and type; errors name the tensor, the expected shape
 * and what the file has. */
halo_status halo_weights_bind(const halo_gguf *g, const halo_hparams *hp, halo_weights *w,
                              halo_error *err);

/* Calls fn for every bound tensor (used by loaders and memory estimates). */
typedef halo_status (*halo_weight_fn)(halo_weight *w, void *user, halo_error *err);
halo_status halo_weights_for_each(halo_weights *w, halo_weight_fn fn, void *user,
                                  halo_error *err);

#endif
