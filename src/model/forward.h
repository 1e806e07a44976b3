/* The DeepSeek V4 forward pass, written once over backend ops (backend/backend.h). */
#ifndef HALO_MODEL_FORWARD_H
#define HALO_MODEL_FORWARD_H

#include "kv/kv.h"
#include "model/weights.h"

/* One sequence of a step: n tokens evaluated at positions kv->n_past .. +n-1. */
typedef struct halo_fwd_item {
    halo_kv *kv;
    const int32_t *tokens;
    uint32_t n;
} halo_fwd_item;

/* Evaluates the tokens of n_items sequences (distinct KV states) in one step, updating each
 * KV state. Temporaries are carved from `scratch` (scratch_bytes, at least
 * halo_forward_scratch_bytes for the step's total token count); nothing is allocated on the
 * backend. Writes, as rows of n_vocab floats in host memory, the logits of every token in
 * batch order (all_logits) or of each sequence's last token. Bad input is refused before
 * any state changes; after a failure inside the step the KV states may be partly updated. */
halo_status halo_forward(halo_backend *be, const halo_hparams *hp, const halo_weights *w,
                         halo_buf *scratch, uint64_t scratch_bytes, const halo_fwd_item *items,
                         uint32_t n_items, bool all_logits, float *logits, halo_error *err);

/* The checks halo_forward makes before touching anything: tokens in the vocabulary, room in
 * each context, no sequence twice. */
halo_status halo_forward_check(const halo_hparams *hp, const halo_fwd_item *items,
                               uint32_t n_items, halo_error *err);

/* Ops that do nothing (measure_backend.c); buffers are one dummy address. */
extern const halo_backend_ops halo_measure_ops;

/* Scratch bytes for a step of up to n_tokens tokens in total (0 if it cannot be measured). */
uint64_t halo_forward_scratch_bytes(const halo_hparams *hp, const halo_weights *w,
                                    uint32_t n_tokens);

#endif
