/* Prompt files, the RAM/disk prefix cache and chat's saved conversations for the CLI. */
#include "cli/cli_cache.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* "512M", "2G", "1.5GiB", "4096" (bytes). */
static bool parse_size(const char *s, uint64_t *out) {
    char *end = NULL;
    double v = strtod(s, &end);
    if (!s[0] || end == s || v < 0) return false;
    double mul = 1;
    if (*end) {
        char u = (char)(*end | 0x20);
        mul = u == 'k'   ? 1024.0
              : u == 'm' ? 1048576.0
              : u == 'g' ? 1073741824.0
              : u == 't' ? 1099511627776.0
              : u == 'b' ? 1
                         : 0;
        if (!mul) return false;
        const char *rest = end + (u == 'b' ? 1 : 1);
        if (*rest && strcasecmp(rest, "b") && strcasecmp(rest, "ib")) return false;
    }
    if (v * mul >= 1.8e19) return false;
    *out = (uint64_t)(v * mul);
    return true;
}

int cli_cache_option(const char *cmd, int argc, char **argv, int *i, cli_cache *cc) {
    const char *a = argv[*i], *v = *i + 1 < argc ? argv[*i + 1] : NULL;
    bool run = !strcmp(cmd, "run");
    bool size_opt = !strcmp(a, "--kv-dir-size") || (!run && !strcmp(a, "--cache-ram"));
    if (!(run && !strcmp(a, "--prompt-cache")) && strcmp(a, "--kv-dir") && !size_opt) return 0;
    if (!v) {
        fprintf(stderr, "halo %s: missing value after '%s'\n", cmd, a);
        return -1;
    }
    if (!strcmp(a, "--prompt-cache"))
        cc->prompt_file = v;
    else if (!strcmp(a, "--kv-dir"))
        cc->dir = v;
    else if (!parse_size(v, !strcmp(a, "--cache-ram") ? &cc->ram_bytes : &cc->dir_bytes)) {
        fprintf(stderr, "halo %s: %s '%s' is not a size (like 512M, 8G)\n", cmd, a, v);
        return -1;
    }
    (*i)++;
    return 1;
}

static void log_line(void *user, const char *line) {
    fprintf(stderr, "halo %s: %s\n", (const char *)user, line);
}

int cli_cache_open(const char *cmd, cli_cache *cc, halo_engine *e) {
    if (!cc->ram_bytes && !cc->dir) return 0;
    halo_cache_params p = {.ram_bytes = cc->ram_bytes,
                           .dir = cc->dir,
                           .dir_bytes = cc->dir_bytes,
                           .log = log_line,
                           .log_user = (void *)cmd};
    halo_error err = {0};
    if (halo_cache_open(e, &p, &cc->cache, &err)) {
        fprintf(stderr, "halo %s: %s\n", cmd, err.message);
        return 1;
    }
    halo_cache_stats st;
    halo_cache_get_stats(cc->cache, &st);
    if (st.ram_max_bytes)
        fprintf(stderr, "halo %s: prefix cache in RAM: %.2f GiB\n", cmd,
                (double)st.ram_max_bytes / (1 << 30));
    if (cc->dir)
        fprintf(stderr, "halo %s: prefix cache in %s: %.2f GiB, %u states (%.2f GiB) there\n", cmd,
                cc->dir, (double)st.disk_max_bytes / (1 << 30), st.disk_files,
                (double)st.disk_bytes / (1 << 30));
    return 0;
}

static uint32_t common(const int32_t *a, uint32_t na, const int32_t *b, uint32_t nb) {
    uint32_t n = na < nb ? na : nb, i = 0;
    while (i < n && a[i] == b[i])
        i++;
    return i;
}

int64_t cli_cache_prepare(const char *cmd, cli_cache *cc, halo_session *s, const int32_t *ids,
                          uint32_t n) {
    halo_error err = {0};
    uint32_t keep = n ? n - 1 : 0;
    if (cc->prompt_file) {
        halo_status st = halo_session_load_file(s, cc->prompt_file, &err);
        if (st && st != HALO_E_NOT_FOUND)
            fprintf(stderr, "halo %s: not using the prompt cache: %s\n", cmd, err.message);
    }
    if (cc->cache) {
        uint32_t got = 0;
        if (halo_cache_restore(cc->cache, s, ids, keep, &got, &err))
            fprintf(stderr, "halo %s: prefix cache: %s\n", cmd, err.message);
    }
    uint32_t held = halo_session_n_past(s);
    uint32_t l = common(halo_session_tokens(s), held, ids, keep);
    if (l < held && halo_session_rewind(s, l, &err)) {
        fprintf(stderr, "halo %s: %s\n", cmd, err.message);
        return -1;
    }
    halo_checkpoint_stats cs;
    halo_session_checkpoint_stats(s, &cs);
    if (cc->prompt_file || cc->cache)
        fprintf(stderr, "halo %s: %u of %u prompt tokens reused from the %s%s\n", cmd, l, n,
                cc->prompt_file ? "prompt cache" : "prefix cache",
                l < held ? " (rewound to where the prompt differs)" : "");
    if ((cc->prompt_file || cc->cache) && l < keep) {
        if (halo_session_eval(s, ids + l, keep - l, false, &err)) {
            fprintf(stderr, "halo %s: %s\n", cmd, err.message);
            return -1;
        }
        l = keep;
    }
    if (cc->prompt_file && halo_session_save_file(s, cc->prompt_file, &err))
        fprintf(stderr, "halo %s: the prompt cache was not saved: %s\n", cmd, err.message);
    cli_cache_insert(cmd, cc, s);
    return l;
}

void cli_cache_insert(const char *cmd, cli_cache *cc, halo_session *s) {
    halo_error err = {0};
    if (cc->cache && halo_session_n_past(s) && halo_cache_insert(cc->cache, s, &err))
        fprintf(stderr, "halo %s: prefix cache: %s\n", cmd, err.message);
}

void cli_cache_close(cli_cache *cc) {
    halo_cache_close(cc->cache);
    cc->cache = NULL;
}

/* ---- chat /save and /load ---------------------------------------------------------------- */

bool cli_chat_save(halo_session *s, const char *path, const halo_chat_message *msgs, size_t n,
                   int thinking) {
    cJSON *root = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(root, "messages");
    cJSON_AddNumberToObject(root, "thinking", thinking);
    for (size_t i = 0; arr && i < n; i++) {
        cJSON *m = cJSON_CreateObject();
        cJSON_AddNumberToObject(m, "role", msgs[i].role);
        cJSON_AddStringToObject(m, "content", msgs[i].content ? msgs[i].content : "");
        if (msgs[i].reasoning) cJSON_AddStringToObject(m, "reasoning", msgs[i].reasoning);
        cJSON_AddItemToArray(arr, m);
    }
    char *json = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    halo_error err = {0};
    bool ok = json && !halo_session_save_file_user(s, path, json, strlen(json), &err);
    if (!json)
        printf("(out of memory)\n");
    else if (!ok)
        printf("(not saved: %s)\n", err.message);
    else
        printf("(saved %u tokens and %zu messages to %s)\n", halo_session_n_past(s), n, path);
    free(json);
    return ok;
}

bool cli_chat_load(halo_session *s, const char *path, int *thinking, cli_chat_add_fn add,
                   void *user) {
    halo_error err = {0};
    char *json = NULL;
    if (halo_session_load_file_user(s, path, &json, NULL, &err)) {
        printf("(not loaded: %s)\n", err.message);
        return false;
    }
    cJSON *root = cJSON_Parse(json);
    cJSON *arr = cJSON_GetObjectItem(root, "messages");
    cJSON *th = cJSON_GetObjectItem(root, "thinking");
    bool ok = cJSON_IsArray(arr) && cJSON_IsNumber(th);
    if (ok) *thinking = th->valueint;
    size_t n = 0;
    for (cJSON *m = arr ? arr->child : NULL; ok && m; m = m->next, n++) {
        cJSON *role = cJSON_GetObjectItem(m, "role"), *c = cJSON_GetObjectItem(m, "content");
        cJSON *r = cJSON_GetObjectItem(m, "reasoning");
        ok = cJSON_IsNumber(role) && cJSON_IsString(c) &&
             add(user, (halo_chat_role)role->valueint, c->valuestring,
                 cJSON_IsString(r) ? r->valuestring : NULL);
    }
    cJSON_Delete(root);
    free(json);
    if (!ok) {
        printf("(%s holds a session but not a halo chat conversation)\n", path);
        halo_session_rewind(s, 0, &err);
        return false;
    }
    printf("(loaded %u tokens and %zu messages from %s)\n", halo_session_n_past(s), n, path);
    return true;
}

void cli_cache_chat_resume(cli_cache *cc, halo_session *s, const int32_t *ids, uint32_t n,
                           halo_tokens *hist) {
    halo_error err = {0};
    uint32_t got = 0;
    if (!cc->cache || n < 2) return;
    if (halo_cache_restore(cc->cache, s, ids, n - 1, &got, &err)) {
        fprintf(stderr, "halo chat: prefix cache: %s\n", err.message);
        return;
    }
    /* Record the prompt's state too (all but its last token), not only the state after the
     * reply: the next process that starts this conversation finds it. */
    if (got < n - 1 && !halo_session_eval(s, ids + got, n - 1 - got, false, &err))
        cli_cache_insert("chat", cc, s);
    hist->n = 0;
    const int32_t *held = halo_session_tokens(s);
    for (uint32_t i = 0; i < halo_session_n_past(s); i++)
        halo_tokens_push(hist, held[i], NULL);
}
