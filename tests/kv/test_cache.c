/* The prefix cache: an agent-like session of 20 turns (the prompt grows, its end changes on
 * some turns) gives, from the cache, the logits of evaluating every prompt uninterrupted while
 * prefilling a fraction of the tokens; the disk cache serves a prefix to a second process; bad
 * files in the cache directory (flipped bytes, truncated, another model's, another version's,
 * unfinished writes) are removed with a log line and never loaded; RAM and disk stay within
 * their budgets, oldest entries first out; a file that cannot serve the longest prefix does not
 * hide a shorter one that can. */
#include <dirent.h>
#include <errno.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kv/kv_fixture.h"

extern char **environ;

static char dir[64];
static int log_lines;
static char last_log[768];

static void logger(void *user, const char *line) {
    (void)user;
    log_lines++;
    snprintf(last_log, sizeof last_log, "%s", line);
    printf("    log: %s\n", line);
}

/* Turn t's prompt: the previous prompt, its last 24 tokens replaced on every third turn (an
 * agent editing the end of its context), then 45 new tokens. Tokens come from two golden
 * sequences so edits are real changes. */
static uint32_t build_prompt(const halo_golden_seq *a, const halo_golden_seq *b, int turn,
                             int32_t *out, uint32_t n_prev) {
    uint32_t n = n_prev;
    if (turn > 0 && turn % 3 == 0 && n > 24) {
        n -= 24;
        for (uint32_t i = 0; i < 24; i++)
            out[n + i] = b->tokens[(turn * 31 + i) % b->length];
        n += 24;
    }
    for (uint32_t i = 0; i < 45; i++)
        out[n + i] = a->tokens[(n + i) % a->length];
    return n + 45;
}

static void agent_session_prefills_less_with_the_cache(void) {
    halo_engine *e = fixture_engine("tiny-a", "f32");
    const halo_golden_seq *a = fixture_seq("L1100"), *b = fixture_seq("L520");
    if (!e || !a || !b) return;
    uint32_t V = halo_engine_n_vocab(e), n_ctx = 1100;
    halo_cache *c = NULL;
    halo_error err = {0};
    halo_cache_params p = {.ram_bytes = 64u << 20, .log = logger};
    CHECK_INT(halo_cache_open(e, &p, &c, &err), HALO_OK);
    int32_t *prompt = calloc(n_ctx, sizeof *prompt);
    uint32_t n = 0;
    uint64_t with = 0, without = 0, replayed = 0;
    int identical = 0;
    for (int turn = 0; turn < 20 && c; turn++) {
        n = build_prompt(a, b, turn, prompt, n);
        /* Without the cache: the whole prompt, uninterrupted: the expected logits. */
        float *want = fixture_uninterrupted(e, prompt, n);
        without += n;
        /* With it: a fresh session per request, as a server slot would be. */
        halo_session *s = NULL;
        CHECK_INT(halo_session_create(e, n_ctx, &s, &err), HALO_OK);
        uint32_t got = 0;
        CHECK_INT(halo_cache_restore(c, s, prompt, n - 1, &got, &err), HALO_OK);
        CHECK_INT(halo_session_n_past(s), got);
        halo_checkpoint_stats cs;
        halo_session_checkpoint_stats(s, &cs);
        CHECK_INT(halo_session_eval(s, prompt + got, n - got, false, &err), HALO_OK);
        with += n - got;
        replayed += cs.replayed_total;
        if (want)
            identical += fixture_same(halo_session_logits(s, NULL), want + (size_t)(n - 1) * V, V,
                                      "turn's last logits");
        CHECK_INT(halo_cache_insert(c, s, &err), HALO_OK);
        halo_session_free(s);
        free(want);
    }
    halo_cache_stats st;
    if (c) halo_cache_get_stats(c, &st);
    printf("  20 turns, prompt 45 -> %u tokens, the end edited on 6 turns: prefilled %llu tokens "
           "with the RAM cache, %llu without (%.1fx fewer); last logits bitwise equal on %d/20 "
           "turns; cache %u entries, %.1f MiB\n",
           n, (unsigned long long)(with + replayed), (unsigned long long)without,
           (double)without / (double)(with + replayed), identical, c ? st.ram_entries : 0,
           c ? (double)st.ram_bytes / (1 << 20) : 0.0);
    CHECK_INT(identical, 20);
    CHECK(with + replayed < without / 5);
    free(prompt);
    halo_cache_close(c);
    halo_engine_close(e);
}

/* Each entry here is ~1.6 MiB: a RAM budget for two keeps the two newest, and a used one
 * counts as new. */
static void ram_cache_evicts_least_recently_used(void) {
    halo_engine *e = fixture_engine("tiny-a", "f32");
    const halo_golden_seq *a = fixture_seq("L1100");
    if (!e || !a) return;
    halo_error err = {0};
    halo_session *s = NULL;
    CHECK_INT(halo_session_create(e, 1100, &s, &err), HALO_OK);
    CHECK_INT(halo_session_eval(s, a->tokens, 100, false, &err), HALO_OK);
    halo_cache *probe = NULL, *c = NULL;
    halo_cache_params p = {.ram_bytes = 1ull << 30};
    CHECK_INT(halo_cache_open(e, &p, &probe, &err), HALO_OK);
    CHECK_INT(halo_cache_insert(probe, s, &err), HALO_OK);
    halo_cache_stats st;
    halo_cache_get_stats(probe, &st);
    halo_cache_close(probe);
    p.ram_bytes = st.ram_bytes * 5 / 2;
    p.log = logger;
    CHECK_INT(halo_cache_open(e, &p, &c, &err), HALO_OK);
    /* three sequences of 100 tokens: a[0..100), a[100..200), a[200..300) */
    for (int k = 0; k < 3; k++) {
        CHECK_INT(halo_session_rewind(s, 0, &err), HALO_OK);
        CHECK_INT(halo_session_eval(s, a->tokens + 100 * k, 100, false, &err), HALO_OK);
        CHECK_INT(halo_cache_insert(c, s, &err), HALO_OK);
        if (k == 1) { /* use the first one: the second becomes the oldest */
            halo_session *t = NULL;
            uint32_t got = 0;
            CHECK_INT(halo_session_create(e, 1100, &t, &err), HALO_OK);
            CHECK_INT(halo_cache_restore(c, t, a->tokens, 100, &got, &err), HALO_OK);
            CHECK_INT(got, 100);
            halo_session_free(t);
        }
    }
    halo_cache_get_stats(c, &st);
    CHECK_INT(st.ram_entries, 2);
    CHECK(st.ram_bytes <= st.ram_max_bytes);
    halo_session *t = NULL;
    uint32_t got = 0;
    CHECK_INT(halo_session_create(e, 1100, &t, &err), HALO_OK);
    CHECK_INT(halo_cache_restore(c, t, a->tokens + 100, 100, &got, &err), HALO_OK);
    CHECK_INT(got, 0); /* evicted */
    CHECK_INT(halo_cache_restore(c, t, a->tokens, 100, &got, &err), HALO_OK);
    CHECK_INT(got, 100);
    CHECK_INT(halo_cache_restore(c, t, a->tokens + 200, 100, &got, &err), HALO_OK);
    CHECK_INT(got, 100);
    printf("  RAM budget %.1f MiB: %u entries, %.1f MiB; the least recently used one went\n",
           (double)st.ram_max_bytes / (1 << 20), st.ram_entries, (double)st.ram_bytes / (1 << 20));
    halo_session_free(t);
    halo_session_free(s);
    halo_cache_close(c);
    halo_engine_close(e);
}

static int count_files(const char *fragment) {
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL)
        n += strstr(de->d_name, fragment) != NULL;
    if (d) closedir(d);
    return n;
}

/* Second process: the disk cache restores the 700-token prefix of L1100 and the rest is
 * evaluated; then a sequence that shares only 600 tokens with it resumes from the saved
 * checkpoint before 600. Both give the uninterrupted logits. */
static int child(void) {
    halo_engine *e = fixture_engine("tiny-a", "f32");
    const halo_golden_seq *a = fixture_seq("L1100"), *b = fixture_seq("L520");
    if (!e || !a || !b) return 2;
    uint32_t V = halo_engine_n_vocab(e), n = (uint32_t)a->length;
    halo_cache *c = NULL;
    halo_error err = {0};
    halo_cache_params p = {.dir = dir, .log = logger};
    if (halo_cache_open(e, &p, &c, &err)) return 3;
    halo_session *s = NULL;
    uint32_t got = 0;
    if (halo_session_create(e, n, &s, &err) ||
        halo_cache_restore(c, s, a->tokens, n - 1, &got, &err))
        return 4;
    printf("  child: the disk cache restored %u tokens of %u\n", got, n);
    if (got != 700) return 5;
    float *want = fixture_uninterrupted(e, a->tokens, n);
    if (!want || halo_session_eval(s, a->tokens + got, n - got, true, &err)) return 6;
    if (!fixture_same(halo_session_logits(s, NULL), want + (size_t)got * V, (size_t)(n - got) * V,
                      "from the disk cache"))
        return 7;
    free(want);
    int32_t mixed[700];
    memcpy(mixed, a->tokens, 600 * sizeof *mixed);
    memcpy(mixed + 600, b->tokens, 100 * sizeof *mixed);
    halo_session *t = NULL;
    if (halo_session_create(e, n, &t, &err) || halo_cache_restore(c, t, mixed, 699, &got, &err))
        return 8;
    printf("  child: a sequence sharing 600 tokens resumed at %u\n", got);
    if (got != 512) return 9;
    want = fixture_uninterrupted(e, mixed, 700);
    if (!want || halo_session_eval(t, mixed + got, 700 - got, true, &err)) return 10;
    if (!fixture_same(halo_session_logits(t, NULL), want + (size_t)got * V, (size_t)(700 - got) * V,
                      "from a disk checkpoint"))
        return 11;
    free(want);
    halo_session_free(s);
    halo_session_free(t);
    halo_cache_close(c);
    halo_engine_close(e);
    halo_golden_close(fixture_golden());
    return 0;
}

static void copy_file(const char *from, const char *to, long cut, long flip) {
    FILE *f = fopen(from, "rb"), *g = fopen(to, "wb");
    if (!f || !g) {
        check_failures++;
        if (f) fclose(f);
        if (g) fclose(g);
        return;
    }
    int ch;
    for (long i = 0; (ch = fgetc(f)) != EOF && (cut < 0 || i < cut); i++)
        fputc(i == flip ? ch ^ 0x10 : ch, g);
    fclose(f);
    fclose(g);
}

static void disk_cache_serves_another_process_and_drops_bad_files(const char *self) {
    halo_engine *e = fixture_engine("tiny-a", "f32");
    halo_engine *other = fixture_engine("tiny-yarn", "f32");
    const halo_golden_seq *a = fixture_seq("L1100");
    if (!e || !other || !a) return;
    halo_error err = {0};
    halo_cache *c = NULL;
    halo_cache_params p = {.dir = dir, .log = logger};
    CHECK_INT(halo_cache_open(e, &p, &c, &err), HALO_OK);
    halo_session *s = NULL;
    CHECK_INT(halo_session_create(e, 1100, &s, &err), HALO_OK);
    CHECK_INT(halo_session_eval(s, a->tokens, 700, false, &err), HALO_OK);
    CHECK_INT(halo_cache_insert(c, s, &err), HALO_OK);
    halo_cache_close(c); /* waits for the background write */
    CHECK_INT(count_files(".halokv"), 1);
    /* Bad files under this model's names, as a crash, a disk error or a careless copy leave
     * them: every one must be removed on open or on load, never restored. */
    DIR *d = opendir(dir);
    struct dirent *de;
    char good[512] = "", prefix[17] = "";
    while (d && (de = readdir(d)) != NULL)
        if (strstr(de->d_name, ".halokv")) snprintf(good, sizeof good, "%s/%s", dir, de->d_name);
    if (d) closedir(d);
    memcpy(prefix, strrchr(good, '/') + 1, 16);
    char bad[6][600];
    const char *kinds[] = {"flip", "cut", "version", "model", "tmp", "header"};
    for (int k = 0; k < 6; k++)
        snprintf(bad[k], sizeof bad[k], "%s/%s-%016d.halokv%s", dir, prefix, k + 1,
                 k == 4 ? ".tmp-1-0" : "");
    copy_file(good, bad[0], -1, 5000); /* a flipped byte in the state */
    copy_file(good, bad[1], 4000, -1); /* truncated */
    copy_file(good, bad[2], -1, 10);   /* version field: 1 -> 0x00100001... */
    copy_file(good, bad[4], 3000, -1); /* an unfinished write */
    copy_file(good, bad[5], -1, 100);  /* a flipped byte in the header */
    halo_session *t = NULL;
    CHECK_INT(halo_session_create(other, 1100, &t, &err), HALO_OK);
    CHECK_INT(halo_session_eval(t, a->tokens, 50, false, &err), HALO_OK);
    CHECK_INT(halo_session_save_file(t, bad[3], &err), HALO_OK); /* another model's state */
    log_lines = 0;
    CHECK_INT(halo_cache_open(e, &p, &c, &err), HALO_OK);
    halo_cache_stats st;
    if (c) halo_cache_get_stats(c, &st);
    printf("  opening the directory: %d log lines, %u files rejected, %u indexed\n", log_lines,
           c ? st.files_rejected : 0, c ? st.disk_files : 0);
    CHECK_INT(count_files(".tmp-"), 0);
    CHECK(c && st.files_rejected == 4); /* cut, version, model, header */
    CHECK(c && st.disk_files == 2);     /* the good one and the one with a bad state byte */
    CHECK_CONTAINS(last_log, "removed");
    halo_cache_close(c);
    /* The file with a bad state byte passes the header checks at open; alone in the
     * directory, a lookup tries it: it is refused, removed, and nothing is restored. */
    char keep[620];
    snprintf(keep, sizeof keep, "%s.keep", good);
    CHECK_INT(rename(good, keep), 0);
    CHECK_INT(halo_cache_open(e, &p, &c, &err), HALO_OK);
    halo_session *r = NULL;
    uint32_t got = 99;
    CHECK_INT(halo_session_create(e, 1100, &r, &err), HALO_OK);
    log_lines = 0;
    if (c) CHECK_INT(halo_cache_restore(c, r, a->tokens, 1099, &got, &err), HALO_OK);
    CHECK_INT(got, 0);
    CHECK_INT(log_lines, 1);
    CHECK_CONTAINS(last_log, "state checksum mismatch");
    CHECK(access(bad[0], F_OK) != 0);
    if (c) halo_cache_get_stats(c, &st);
    CHECK(c && st.files_rejected == 1 && st.disk_files == 0);
    halo_cache_close(c);
    CHECK_INT(rename(keep, good), 0);
    /* A second process restores through the disk cache; it meets the bad state first or not:
     * whichever it tries, it must end with the good file's 700 tokens. */
    char *args[] = {(char *)self, "--child", dir, NULL};
    pid_t pid;
    int status = 0;
    CHECK_INT(posix_spawn(&pid, "/proc/self/exe", NULL, NULL, args, environ), 0);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status))
        fprintf(stderr, "  child exit status %d\n", WEXITSTATUS(status));
    for (int k = 0; k < 6; k++)
        if (access(bad[k], F_OK) == 0) {
            fprintf(stderr, "  the %s file is still there\n", kinds[k]);
            check_failures++;
        }
    halo_session_free(r);
    halo_session_free(s);
    halo_session_free(t);
    halo_engine_close(e);
    halo_engine_close(other);
}

/* A disk budget for two files: the third insert removes the oldest file. */
static void disk_cache_stays_within_its_budget(void) {
    halo_engine *e = fixture_engine("tiny-a", "f32");
    const halo_golden_seq *a = fixture_seq("L1100");
    if (!e || !a) return;
    char sub[128];
    snprintf(sub, sizeof sub, "%s/lru", dir);
    halo_error err = {0};
    halo_session *s = NULL;
    CHECK_INT(halo_session_create(e, 1100, &s, &err), HALO_OK);
    halo_cache *c = NULL;
    halo_cache_params p = {.dir = sub, .dir_bytes = 1ull << 30};
    uint64_t one = 0;
    for (int k = 0; k < 3; k++) {
        if (k == 1) { /* now that one file's size is known */
            halo_cache_stats st;
            halo_cache_get_stats(c, &st);
            one = st.disk_bytes;
            halo_cache_close(c);
            p.dir_bytes = one * 5 / 2;
            p.log = logger;
            CHECK_INT(halo_cache_open(e, &p, &c, &err), HALO_OK);
        } else if (k == 0) {
            CHECK_INT(halo_cache_open(e, &p, &c, &err), HALO_OK);
        }
        CHECK_INT(halo_session_rewind(s, 0, &err), HALO_OK);
        CHECK_INT(halo_session_eval(s, a->tokens + 100 * k, 100, false, &err), HALO_OK);
        CHECK_INT(halo_cache_insert(c, s, &err), HALO_OK);
    }
    halo_cache_flush(c);
    halo_cache_stats st;
    halo_cache_get_stats(c, &st);
    CHECK_INT(st.disk_files, 2);
    CHECK(st.disk_bytes <= st.disk_max_bytes);
    halo_session *t = NULL;
    uint32_t got = 0;
    CHECK_INT(halo_session_create(e, 1100, &t, &err), HALO_OK);
    CHECK_INT(halo_cache_restore(c, t, a->tokens, 100, &got, &err), HALO_OK);
    CHECK_INT(got, 0); /* the oldest went */
    CHECK_INT(halo_cache_restore(c, t, a->tokens + 200, 100, &got, &err), HALO_OK);
    CHECK_INT(got, 100);
    printf("  disk budget %.1f MiB: %u files, %.1f MiB\n", (double)st.disk_max_bytes / (1 << 20),
           st.disk_files, (double)st.disk_bytes / (1 << 20));
    halo_session_free(t);
    halo_session_free(s);
    halo_cache_close(c);
    halo_engine_close(e);
}

/* Two files on disk: A shares 200 tokens with the request but holds its only state at 300, past
 * the shared prefix; B shares 150 and holds a state at 150. A is tried first (the longer
 * prefix), cannot be used, and B must still be found. */
static void disk_cache_passes_over_a_longer_prefix_it_cannot_use(void) {
    halo_engine *e = fixture_engine("tiny-a", "f32");
    const halo_golden_seq *a = fixture_seq("L1100"), *b = fixture_seq("L520");
    if (!e || !a || !b) return;
    char sub[128];
    snprintf(sub, sizeof sub, "%s/skip", dir);
    halo_error err = {0};
    halo_cache *c = NULL;
    halo_cache_params p = {.dir = sub, .dir_bytes = 1ull << 30};
    CHECK_INT(halo_cache_open(e, &p, &c, &err), HALO_OK);
    const halo_checkpoint_policy none = {.interval = UINT32_MAX};
    for (uint32_t len = 300; len >= 150 && c; len -= 150) {
        halo_session *s = NULL;
        CHECK_INT(halo_session_create(e, 1100, &s, &err), HALO_OK);
        CHECK_INT(halo_session_set_checkpoints(s, &none, &err), HALO_OK);
        CHECK_INT(halo_session_eval(s, a->tokens, len, false, &err), HALO_OK);
        CHECK_INT(halo_cache_insert(c, s, &err), HALO_OK);
        halo_session_free(s);
    }
    halo_cache_close(c); /* the files are written; a new cache knows them from the directory */
    CHECK_INT(halo_cache_open(e, &p, &c, &err), HALO_OK);
    uint32_t n = 260, got = 0;
    int32_t prompt[260];
    memcpy(prompt, a->tokens, 200 * sizeof *prompt);
    memcpy(prompt + 200, b->tokens, 60 * sizeof *prompt); /* the request leaves A at 200 */
    halo_session *t = NULL;
    CHECK_INT(halo_session_create(e, 1100, &t, &err), HALO_OK);
    if (c) CHECK_INT(halo_cache_restore(c, t, prompt, n - 1, &got, &err), HALO_OK);
    CHECK_INT(got, 150);
    float *want = fixture_uninterrupted(e, prompt, n);
    CHECK_INT(halo_session_eval(t, prompt + got, n - got, false, &err), HALO_OK);
    if (want)
        CHECK(fixture_same(halo_session_logits(t, NULL), want + (size_t)(n - 1) *
                           halo_engine_n_vocab(e), halo_engine_n_vocab(e), "last logits"));
    printf("  a longer prefix whose state lies beyond it was passed over: %u tokens restored\n",
           got);
    free(want);
    halo_session_free(t);
    halo_cache_close(c);
    halo_engine_close(e);
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--child") == 0) {
        snprintf(dir, sizeof dir, "%s", argv[2]);
        return child();
    }
    snprintf(dir, sizeof dir, "/tmp/halo-kvcache-test-XXXXXX");
    if (!mkdtemp(dir)) return 1;
    agent_session_prefills_less_with_the_cache();
    ram_cache_evicts_least_recently_used();
    disk_cache_serves_another_process_and_drops_bad_files(argv[0]);
    disk_cache_stays_within_its_budget();
    disk_cache_passes_over_a_longer_prefix_it_cannot_use();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) check_failures++;
    halo_golden_close(fixture_golden());
    return check_failures ? 1 : 0;
}
