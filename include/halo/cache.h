/* Keeping evaluated state: checkpoints for cheap rewinds, session files, and a prefix cache in
 * RAM and on disk (docs/cache.md has the file format and the guarantees). Include this header
 * next to halo/halo.h. */
#ifndef HALO_CACHE_H
#define HALO_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "halo/halo.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- checkpoints ------------------------------------------------------------------------
 * A session checkpoints its state every `interval` positions as it grows (the light part
 * only: compressed rows are append-only and stay in place). halo_session_rewind restores the
 * last checkpoint at or before the target and re-evaluates fewer than `interval` tokens. */
typedef struct halo_checkpoint_policy {
    /* Positions between checkpoints. 0: the model's default, its largest compression ratio
     * plus its sliding window rounded up to a multiple of the engine's forward size (512 for
     * DeepSeek V4 Flash: an evaluation is split where a checkpoint falls, and full forwards are
     * what makes a GPU's prefill fast). UINT32_MAX: no checkpoints. */
    uint32_t interval;
    /* Memory for checkpoints. 0: HALO_CHECKPOINT_DEFAULT_BYTES. Past it the interval doubles
     * and every other checkpoint is dropped (reported in the stats, never silent). */
    uint64_t max_bytes;
} halo_checkpoint_policy;

#define HALO_CHECKPOINT_DEFAULT_BYTES ((uint64_t)1 << 30)

/* Sets the policy (drops the checkpoints taken so far). Sessions start with the defaults. */
halo_status halo_session_set_checkpoints(halo_session *s, const halo_checkpoint_policy *p,
                                         halo_error *err);

typedef struct halo_checkpoint_stats {
    uint32_t count; /* checkpoints held */
    uint64_t bytes, max_bytes;
    uint32_t interval;       /* current spacing */
    uint32_t base_interval;  /* the policy's spacing (smaller when the budget thinned) */
    uint32_t n_thinned;      /* times the budget doubled the spacing */
    uint32_t last_replayed;  /* tokens re-evaluated by the last rewind */
    uint64_t replayed_total; /* by every rewind of the session */
} halo_checkpoint_stats;

void halo_session_checkpoint_stats(const halo_session *s, halo_checkpoint_stats *out);

/* The tokens the session's state holds (halo_session_n_past of them); valid until the next
 * call that changes the session. */
const int32_t *halo_session_tokens(const halo_session *s);

/* ---- session files ----------------------------------------------------------------------
 * A file holds the session's tokens, its state and its checkpoints, the model's identity and
 * a checksum. Saving writes a temporary file, syncs it and renames it over `path`, so `path`
 * is always either the old file or the complete new one. Loading verifies everything before
 * touching the session; a file of another model, another format version, or with a bad
 * checksum is refused (HALO_E_BAD_VALUE / HALO_E_BAD_VERSION / HALO_E_TRUNCATED) and the
 * session is left as it was. The session's context must hold the file's tokens. */
halo_status halo_session_save_file(halo_session *s, const char *path, halo_error *err);
halo_status halo_session_load_file(halo_session *s, const char *path, halo_error *err);
/* The same with the caller's own bytes kept in the file next to the state (halo chat keeps
 * the conversation there), covered by a checksum of their own. *user is NUL-terminated and
 * the caller frees it. */
halo_status halo_session_save_file_user(halo_session *s, const char *path, const void *user,
                                        size_t user_len, halo_error *err);
halo_status halo_session_load_file_user(halo_session *s, const char *path, char **user,
                                        size_t *user_len, halo_error *err);

/* ---- prefix cache -----------------------------------------------------------------------
 * States of earlier sequences kept by their tokens, in RAM (LRU within ram_bytes) and on disk
 * (one verified file per prefix in `dir`, LRU within dir_bytes, written in the background). A
 * server looks up each request's tokens, restores the longest cached prefix into the
 * request's session, evaluates the rest, and inserts the session's state afterwards. */
typedef struct halo_cache halo_cache;

typedef struct halo_cache_params {
    uint64_t ram_bytes; /* 0: no RAM cache */
    const char *dir;    /* NULL: no disk cache; created if missing */
    uint64_t dir_bytes; /* 0 with a dir: 16 GiB */
    /* Called with one line per notable event (a file rejected and removed, an entry evicted,
     * a background write that failed); NULL: silent. May be called from the writer thread. */
    void (*log)(void *user, const char *line);
    void *log_user;
} halo_cache_params;

halo_status halo_cache_open(halo_engine *e, const halo_cache_params *p, halo_cache **out,
                            halo_error *err);
/* Waits for background writes, then frees everything. Accepts NULL. */
void halo_cache_close(halo_cache *c);

/* Restores into s the longest cached state whose tokens are a prefix of tokens[0..max_len)
 * (a checkpoint inside a cached sequence counts: a sequence that shares only its beginning
 * with a cached one resumes from the cached checkpoint before they part). *n_restored is
 * the number of tokens the session then holds; 0 when nothing matched (the session is then
 * reset to position 0). Pass max_len = n - 1 to keep a token to evaluate for logits. */
halo_status halo_cache_restore(halo_cache *c, halo_session *s, const int32_t *tokens,
                               uint32_t max_len, uint32_t *n_restored, halo_error *err);
/* Records s's current state (its tokens, state and checkpoints) in RAM and, in the
 * background, on disk. An entry larger than the budget is refused with an error. */
halo_status halo_cache_insert(halo_cache *c, halo_session *s, halo_error *err);
/* Waits until every background write is on disk. */
void halo_cache_flush(halo_cache *c);

typedef struct halo_cache_stats {
    uint32_t ram_entries;
    uint64_t ram_bytes, ram_max_bytes;
    uint32_t disk_files;
    uint64_t disk_bytes, disk_max_bytes;
    uint64_t hits, misses, tokens_restored;
    uint32_t files_rejected; /* files that failed verification and were removed */
} halo_cache_stats;

void halo_cache_get_stats(halo_cache *c, halo_cache_stats *out);

#ifdef __cplusplus
}
#endif
#endif
