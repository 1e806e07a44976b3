/* What the engine and its sessions hold, shared by engine.c (opening a model) and session.c
 * (evaluating, snapshots, rewind). Not part of the public API. */
#ifndef HALO_MODEL_ENGINE_INTERNAL_H
#define HALO_MODEL_ENGINE_INTERNAL_H

#include <pthread.h>

#include "halo/halo.h"
#include "halo/plan.h"
#include "model/forward.h"

struct halo_engine {
    halo_gguf *gguf;
    halo_backend *be;
    halo_hparams hp;
    halo_weights w;
    halo_mem_arena *arena;  /* every tensor, read once into its final place (src/mem) */
    halo_buf **tensor_bufs; /* backend buffers wrapping the arena, one per bound tensor */
    uint32_t n_bufs;
    struct halo_engine_stream *stream; /* routed experts streamed from disk (NULL: resident) */
    /* Steps (session_batch.c): one at a time, with activations carved from one scratch buffer
     * sized for n_ubatch tokens on first use, so no step allocates. */
    pthread_mutex_t step_lock;
    halo_buf *scratch;
    uint64_t scratch_bytes;
    uint32_t n_ubatch;
};

struct halo_session {
    halo_engine *e;
    halo_kv *kv;
    float *logits;
    uint32_t n_rows, cap_rows;
    int32_t *tokens; /* every evaluated token, for rewinding [n_ctx] */
    halo_snapshot *anchor; /* latest snapshot taken on this session, a rewind starting point */
    struct halo_kv_ckset *ckpts; /* checkpoints for cheap rewinds (src/kv/ckset.h) */
    bool broken;           /* the state may not match tokens[0..n_past): rebuild before use */
    bool replaying;        /* inside replay_to: a failure is reported, not repaired again */
};

struct halo_snapshot {
    halo_kv_snapshot *kv;
    int32_t *tokens;
    uint32_t n_tokens;
};

/* Tokens a forward takes at most (e->n_ubatch once the scratch is sized, else the default). */
uint32_t halo_engine_forward_tokens(const halo_engine *e);

/* Evaluates items (distinct sessions' KV states) as halo_forward does, in steps of at most
 * e->n_ubatch tokens: long inputs are split, which gives the same logits. Writes each item's
 * last-token logits row (or, with all_logits and one item, every token's). Serialized per
 * engine. On failure the first error is returned and *done (per item, may be NULL) tells how
 * many of each item's tokens were evaluated; the KV state past those may be partly updated. */
halo_status halo_engine_step(halo_engine *e, const halo_fwd_item *items, uint32_t n_items,
                             bool all_logits, float *logits, uint32_t *done, halo_error *err);
/* Releases the step scratch (engine close). */
void halo_engine_step_free(halo_engine *e);

#endif
