/* What the engine and its sessions hold, shared by engine.c (opening a model) and session.c
 * (evaluating, snapshots, rewind). Not part of the public API. */
#ifndef HALO_MODEL_ENGINE_INTERNAL_H
#define HALO_MODEL_ENGINE_INTERNAL_H

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

#endif
