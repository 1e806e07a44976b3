/* The CLI's use of src/kv (halo/cache.h): `halo run --prompt-cache FILE`, `--kv-dir DIR
 * [--kv-dir-size SIZE]`, `halo chat --cache-ram SIZE`, and chat's /save and /load. */
#ifndef HALO_CLI_CACHE_H
#define HALO_CLI_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "halo/cache.h"
#include "halo/text.h"

typedef struct cli_cache {
    const char *prompt_file; /* run --prompt-cache */
    uint64_t ram_bytes;      /* --cache-ram (chat) */
    const char *dir;         /* --kv-dir */
    uint64_t dir_bytes;      /* --kv-dir-size */
    halo_cache *cache;
} cli_cache;

/* Parses argv[*i] if it is a cache option for cmd: 1 (and *i advanced past its value), 0 when
 * it is not one, -1 when its value is bad (message printed). */
int cli_cache_option(const char *cmd, int argc, char **argv, int *i, cli_cache *cc);
/* Opens the RAM/disk cache when asked, printing what it admitted. 0 or an exit status. */
int cli_cache_open(const char *cmd, cli_cache *cc, halo_engine *e);
/* Brings the session as far into ids[0..n) as its own state, the prompt file or the cache
 * allow (at most n - 1 tokens, so one is left to evaluate for logits), and when a prompt file
 * or a cache is in use evaluates up to n - 1 and records that state there. Returns the number
 * of tokens the session then holds, or -1 on an evaluation error (printed). */
int64_t cli_cache_prepare(const char *cmd, cli_cache *cc, halo_session *s, const int32_t *ids,
                          uint32_t n);
/* Records the session's state in the cache (no-op without one). */
void cli_cache_insert(const char *cmd, cli_cache *cc, halo_session *s);
void cli_cache_close(cli_cache *cc);
/* chat: before a turn, resume the session from the cache when that saves work; *hist becomes
 * the tokens the session holds. */
void cli_cache_chat_resume(cli_cache *cc, halo_session *s, const int32_t *ids, uint32_t n,
                           halo_tokens *hist);

/* chat's /save and /load: the session's state with the conversation (as JSON) beside it. On
 * load, add is called for each saved message (in order) after the chat cleared its own. */
bool cli_chat_save(halo_session *s, const char *path, const halo_chat_message *msgs, size_t n,
                   int thinking);
typedef bool (*cli_chat_add_fn)(void *user, halo_chat_role role, const char *content,
                                const char *reasoning);
bool cli_chat_load(halo_session *s, const char *path, int *thinking, cli_chat_add_fn add,
                   void *user);

#endif
