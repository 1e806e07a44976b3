/* The CLI's caches on the embedded KJV model: `halo run --prompt-cache FILE` prints what the
 * same command prints without it, reuses the saved prompt on the second run, and shrugs off a
 * damaged file; `halo chat` /save, /reset, /load, then a turn, replies as the chat that never
 * left; `--kv-dir` serves a second chat process. (The plain outputs are pinned against
 * transformers in tests/cli/test_run.c.) */
#include <stdlib.h>
#include <unistd.h>

#include "check.h"

static char dir[64];

/* Runs a shell command; returns its stdout (caller frees); stderr goes to err_path. */
static char *run(const char *cmd, const char *err_path) {
    char full[4096];
    snprintf(full, sizeof full, "%s 2>%s", cmd, err_path);
    FILE *p = popen(full, "r");
    if (!p) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *out = calloc(1, cap);
    while (out && n + 1 < cap) {
        size_t got = fread(out + n, 1, cap - 1 - n, p);
        if (!got) break;
        n += got;
    }
    int rc = pclose(p);
    if (rc != 0) {
        fprintf(stderr, "  '%s' exited with %d\n", cmd, rc);
        check_failures++;
    }
    return out;
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    char *s = calloc(1, 1 << 16);
    if (f && s) fread(s, 1, (1 << 16) - 1, f);
    if (f) fclose(f);
    return s;
}

static void run_prompt_cache(void) {
    char base[512], cmd[1024], err[128], file[128];
    snprintf(base, sizeof base,
             "%s run -m models/kjv-tiny.gguf --raw -n 16 --temp 0 --threads 1 -p 'And God said, "
             "Let there be light: and there was light. And God saw the light'",
             HALO_BIN);
    snprintf(err, sizeof err, "%s/err.txt", dir);
    snprintf(file, sizeof file, "%s/prompt.halokv", dir);
    char *plain = run(base, err);
    snprintf(cmd, sizeof cmd, "%s --prompt-cache %s", base, file);
    char *first = run(cmd, err), *first_err = slurp(err);
    char *second = run(cmd, err), *second_err = slurp(err);
    CHECK_STR(first, plain);
    CHECK_STR(second, plain);
    CHECK_CONTAINS(first_err, "0 of ");
    CHECK_CONTAINS(second_err, " prompt tokens reused from the prompt cache");
    CHECK(strstr(second_err, "0 of ") == NULL);
    /* Damage the file: the run warns, evaluates everything, prints the same, saves anew. */
    FILE *f = fopen(file, "r+b");
    CHECK(f != NULL);
    if (f) {
        fseek(f, 2000, SEEK_SET);
        fputc(0x5a, f);
        fclose(f);
    }
    char *third = run(cmd, err), *third_err = slurp(err);
    CHECK_STR(third, plain);
    CHECK_CONTAINS(third_err, "not using the prompt cache");
    CHECK_CONTAINS(third_err, "checksum mismatch");
    char *fourth = run(cmd, err), *fourth_err = slurp(err);
    CHECK_STR(fourth, plain);
    CHECK(strstr(fourth_err, "not using") == NULL);
    printf("  halo run --prompt-cache: same text fresh, reused and after damage (%s)\n",
           second_err ? strtok(second_err, "\n") : "");
    free(plain);
    free(first);
    free(second);
    free(third);
    free(fourth);
    free(first_err);
    free(second_err);
    free(third_err);
    free(fourth_err);
}

static void chat_save_reset_load(void) {
    char cmd[1024], err[128];
    snprintf(err, sizeof err, "%s/err.txt", dir);
    snprintf(cmd, sizeof cmd,
             "printf 'Who begat Enos?\\nAnd then?\\n' | %s chat -m models/kjv-tiny.gguf -n 12 "
             "--temp 0 --threads 1",
             HALO_BIN);
    char *plain = run(cmd, err);
    snprintf(cmd, sizeof cmd,
             "printf 'Who begat Enos?\\n/save %s/chat.halokv\\n/reset\\n/load %s/chat.halokv\\n"
             "And then?\\n' | %s chat -m models/kjv-tiny.gguf -n 12 --temp 0 --threads 1",
             dir, dir, HALO_BIN);
    char *saved = run(cmd, err);
    CHECK_CONTAINS(saved ? saved : "", "(saved");
    CHECK_CONTAINS(saved ? saved : "", "(loaded");
    /* Remove the (saved ...) (conversation cleared) (loaded ...) lines: the rest must match. */
    char *kept = calloc(1, strlen(saved ? saved : "") + 1);
    for (char *line = saved ? strtok(saved, "\n") : NULL; line; line = strtok(NULL, "\n"))
        if (line[0] != '(') strcat(strcat(kept, line), "\n");
    CHECK_STR(kept, plain);
    /* A second process with --kv-dir: the first chat's prompt comes from the disk cache. */
    snprintf(cmd, sizeof cmd,
             "printf 'Who begat Enos?\\nAnd then?\\n' | %s chat -m models/kjv-tiny.gguf -n 12 "
             "--temp 0 --threads 1 --kv-dir %s/kv",
             HALO_BIN, dir);
    char *a = run(cmd, err), *b = run(cmd, err), *b_err = slurp(err);
    CHECK_STR(a, plain);
    CHECK_STR(b, plain);
    CHECK_CONTAINS(b_err, "states (");
    CHECK(strstr(b_err, " 0 states") == NULL);
    printf("  halo chat: /save, /reset, /load continues as the chat that never left; --kv-dir "
           "serves a second process\n");
    free(plain);
    free(saved);
    free(kept);
    free(a);
    free(b);
    free(b_err);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/halo-kv-cli-XXXXXX");
    if (!mkdtemp(dir)) return 1;
    run_prompt_cache();
    chat_save_reset_load();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) check_failures++;
    return check_failures ? 1 : 0;
}
