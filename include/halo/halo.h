/* halo's public API: open an engine on a GGUF model, create sessions (a context of positions
 * with its KV state), evaluate tokens and read logits. The CLI and the tests use only this. */
#ifndef HALO_HALO_H
#define HALO_HALO_H

#include <stdbool.h>
#include <stdint.h>

#include "halo/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct halo_engine halo_engine;
typedef struct halo_session halo_session;

typedef struct halo_engine_params {
    const char *model_path;
    /* "cpu" (default when NULL), "cuda" (HIP builds: also "hip"), "vulkan", or "auto": the GPU
     * backend when this halo has one and a GPU is usable (CUDA/HIP first, then a Vulkan GPU),
     * else the CPU with one line on stderr saying why. NULL: $HALO_BACKEND, else "cpu". Every
     * backend follows `precise` (HIP has no fast path: always precise). */
    const char *backend;
    uint32_t threads;    /* 0: one per core */
    /* Keep activations f32 for quantized weights (slower; the reference for comparisons).
     * Off: activations are quantized for integer dot products, as ggml's CPU backend does. */
    bool precise;
    /* The largest context the sessions will use, for the admission check: before anything is
     * allocated, the model and that much session state are planned on this machine's memory
     * (src/mem), and a model that does not fit is refused with the reason. 0: 4096, or the
     * model's trained context if smaller. */
    uint32_t n_ctx;
    /* How many sessions of n_ctx will live at once (a server's slots): the admission plans
     * that much state, so the weights' placement leaves room for it. 0: 1. */
    uint32_t n_seq;
    /* Where the weights go (as `halo plan --weights`): "auto" (fastest pool that fits; routed
     * experts stream from disk when the plan says they do not fit), "device" (GPU memory, or
     * refuse before loading), "host" (GPU-visible host memory: the loader's arena pinned and
     * mapped), "managed" (only when asked), "stream" (routed experts always stream:
     * docs/streaming.md). NULL: as "auto" but a model that would have to stream is refused.
     * The HALO_WEIGHTS and HALO_FORCE_DEVICE_MEM variables apply first; this field wins. */
    const char *weights;
    /* Expert cache for streamed experts, in bytes; 0: as large as fits. The plan admits it
     * (never silently less: halo_engine_stream_stats tells what was admitted and why). */
    uint64_t expert_cache_bytes;
} halo_engine_params;

/* Opens the model: reads and checks hyperparameters and every tensor's shape, plans the
 * weights and session state on this machine's memory (refusing, before allocating anything,
 * what does not fit), then loads the weights into the backend. */
halo_status halo_engine_open(const halo_engine_params *params, halo_engine **out, halo_error *err);
void halo_engine_close(halo_engine *e);
uint32_t halo_engine_n_vocab(const halo_engine *e);
uint32_t halo_engine_n_ctx_train(const halo_engine *e);

/* Bytes of session state (KV, compressed rows, indexer keys) for n_ctx positions. */
uint64_t halo_engine_session_bytes(const halo_engine *e, uint32_t n_ctx);

halo_status halo_session_create(halo_engine *e, uint32_t n_ctx, halo_session **out,
                                halo_error *err);
void halo_session_free(halo_session *s);

/* Evaluates n tokens after the ones already evaluated. With all_logits the logits of every
 * token are kept (n rows), else only the last token's (1 row). */
halo_status halo_session_eval(halo_session *s, const int32_t *tokens, uint32_t n,
                              bool all_logits, halo_error *err);
/* Evaluates tokens for several sessions of one engine in one step, so a server's concurrent
 * requests read the weights once per step (projections and experts batched over every
 * session's tokens; attention per session). Item i evaluates n[i] tokens in sessions[i] as
 * halo_session_eval(sessions[i], tokens[i], n[i], false) would, with the same logits (the last
 * token's row). A session appears at most once. On failure the first error is returned and
 * each session is either advanced by its tokens or as before the call (halo_session_n_past
 * tells which). */
halo_status halo_session_eval_many(halo_session *const *sessions, const int32_t *const *tokens,
                                   const uint32_t *n, uint32_t count, halo_error *err);
/* Logits of the last eval: n_rows rows of n_vocab floats; valid until the next eval. */
const float *halo_session_logits(const halo_session *s, uint32_t *n_rows);
uint32_t halo_session_n_past(const halo_session *s);

/* Goes back to position n_past (<= the current one): the session continues as if only the
 * first n_past tokens had been evaluated. Compressed attention state cannot be cut back in
 * place, so this re-evaluates those tokens from the nearest earlier snapshot taken with
 * halo_session_snapshot (or from the start). */
halo_status halo_session_rewind(halo_session *s, uint32_t n_past, halo_error *err);

/* In-memory snapshots of a session's whole state (KV and token history). A snapshot restores
 * into the session it came from or another session of the same engine and context size. */
typedef struct halo_snapshot halo_snapshot;
halo_status halo_session_snapshot(halo_session *s, halo_snapshot **out, halo_error *err);
halo_status halo_session_restore(halo_session *s, const halo_snapshot *snap, halo_error *err);
void halo_snapshot_free(halo_snapshot *snap);

#ifdef __cplusplus
}
#endif
#endif
