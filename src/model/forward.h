/* The DeepSeek V4 forward pass, written once over backend ops (backend/backend.h). */
#ifndef HALO_MODEL_FORWARD_H
#define HALO_MODEL_FORWARD_H

#include "kv/kv.h"
#include "model/weights.h"

/* Evaluates n tokens at positions kv->n_past .. +n-1, updating the KV state. Writes logits of
 * every token (all_logits) or of the last one into `logits` (n or 1 rows of n_vocab floats,
 * host memory). */
halo_status halo_forward(halo_backend *be, const halo_hparams *hp, const halo_weights *w,
                         halo_kv *kv, const int32_t *tokens, uint32_t n, bool all_logits,
                         float *logits, halo_error *err);

#endif
