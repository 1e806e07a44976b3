/* Internal to src/mem: the model's own memory estimates and shared helpers. */
#ifndef HALO_MEM_MEM_H
#define HALO_MEM_MEM_H

#include <stdbool.h>
#include <stdint.h>

#include "halo/plan.h"
#include "model/hparams.h"

/* Bytes of DeepSeek V4 attention state for n_ctx tokens, at elem_size bytes per element (4 for
 * the CPU backend's f32). This is the model's own estimate, kept here until the KV module
 * (issue 5) owns it. Per layer, with one shared KV head of head_dim (key = value):
 *   raw sliding window:  min(window, n_ctx) rows of head_dim;
 *   compressed rows:     ceil(n_ctx / ratio) rows of head_dim for ratio 4 and 128 layers, plus
 *                        the window being pooled: kv and gate rows for ratio tokens, of width
 *                        2 x head_dim and over two windows for ratio 4 (its windows overlap);
 *   indexer (ratio 4):   ceil(n_ctx / 4) rows of indexer_head_dim, plus its own pooling window.
 */
uint64_t halo_mem_context_bytes(const halo_hparams *hp, uint64_t n_ctx, uint32_t elem_size);

/* Compute scratch for a forward of n_batch tokens at context n_ctx (f32 activations): the
 * hyper-connection streams, attention queries and scores over the visible rows (window +
 * indexer top-k compressed rows + all ratio-128 rows), indexer scores over every ratio-4 row
 * (summed over heads chunk by chunk), the routed experts' intermediate activations and the
 * logits of one token. An upper estimate of buffers live at once, not a sum over the graph. */
uint64_t halo_mem_scratch_bytes(const halo_hparams *hp, uint64_t n_ctx, uint32_t n_batch);

/* Fills m's GPU fields from the CUDA driver (probe_cuda.c) when an NVIDIA GPU and its driver
 * are present; false otherwise (m untouched). */
bool halo_mem_probe_cuda(halo_machine *m);

/* Role of a tensor by its GGUF name; *layer gets blk.N's N or -1. */
halo_group_role halo_mem_tensor_role(const char *name, int32_t *layer);

#endif
