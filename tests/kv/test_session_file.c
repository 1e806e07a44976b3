/* Session files: saved, loaded into a fresh process (a real second process: this test runs
 * itself with --child), continued with logits bit for bit those of the uninterrupted
 * evaluation; rewinds after loading use the saved checkpoints; a writer killed with SIGKILL
 * at random points during saves never leaves a file that loads wrong; flipped bytes,
 * truncation, another model and another format version are refused and leave the session
 * as it was. */
#include <errno.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kv/kv_fixture.h"

extern char **environ;

static char dir[64];

static char *path_in(const char *name) {
    static char buf[8][128];
    static int k;
    char *p = buf[k++ % 8];
    snprintf(p, 128, "%s/%s", dir, name);
    return p;
}

static bool write_floats(const char *path, const float *v, size_t n) {
    FILE *f = fopen(path, "wb");
    bool ok = f && fwrite(v, sizeof *v, n, f) == n;
    if (f) ok &= fclose(f) == 0;
    return ok;
}

static float *read_floats(const char *path, size_t n) {
    float *v = malloc(n * sizeof *v);
    FILE *f = fopen(path, "rb");
    if (!v || !f || fread(v, sizeof *v, n, f) != n) {
        free(v);
        v = NULL;
    }
    if (f) fclose(f);
    return v;
}

/* The second process: load FILE, evaluate the rest of L1100 from there, then rewind to
 * `back` (through the loaded checkpoints) and evaluate from there to the end again. */
static int child(const char *file, const char *out1, const char *out2, uint32_t back) {
    halo_engine *e = fixture_engine("tiny-a", "f32");
    const halo_golden_seq *seq = fixture_seq("L1100");
    if (!e || !seq) return 2;
    uint32_t n = (uint32_t)seq->length, V = halo_engine_n_vocab(e);
    halo_session *s = NULL;
    halo_error err = {0};
    if (halo_session_create(e, n, &s, &err) || halo_session_load_file(s, file, &err)) {
        fprintf(stderr, "child: %s\n", err.message);
        return 3;
    }
    uint32_t at = halo_session_n_past(s);
    if (memcmp(halo_session_tokens(s), seq->tokens, (size_t)at * 4) != 0) return 4;
    if (halo_session_eval(s, seq->tokens + at, n - at, true, &err)) return 5;
    if (!write_floats(out1, halo_session_logits(s, NULL), (size_t)(n - at) * V)) return 6;
    if (halo_session_rewind(s, back, &err)) return 7;
    halo_checkpoint_stats cs;
    halo_session_checkpoint_stats(s, &cs);
    printf("  child: loaded %u tokens; rewind to %u re-evaluated %u tokens\n", at, back,
           cs.last_replayed);
    if (cs.last_replayed >= cs.interval) return 8;
    if (halo_session_eval(s, seq->tokens + back, n - back, true, &err)) return 9;
    if (!write_floats(out2, halo_session_logits(s, NULL), (size_t)(n - back) * V)) return 10;
    halo_session_free(s);
    halo_engine_close(e);
    halo_golden_close(fixture_golden());
    return 0;
}

static int run_child(const char *self, char *const args[]) {
    (void)self;
    pid_t pid;
    if (posix_spawn(&pid, "/proc/self/exe", NULL, NULL, args, environ) != 0) return -1;
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static void saved_session_continues_in_a_fresh_process(const char *self) {
    halo_engine *e = fixture_engine("tiny-a", "f32");
    const halo_golden_seq *seq = fixture_seq("L1100");
    if (!e || !seq) return;
    uint32_t n = (uint32_t)seq->length, V = halo_engine_n_vocab(e), at = 700, back = 530;
    float *want = fixture_uninterrupted(e, seq->tokens, n);
    halo_session *s = NULL;
    halo_error err = {0};
    CHECK_INT(halo_session_create(e, n, &s, &err), HALO_OK);
    CHECK_INT(halo_session_eval(s, seq->tokens, at, false, &err), HALO_OK);
    char *file = path_in("s700.halokv");
    CHECK_INT(halo_session_save_file(s, file, &err), HALO_OK);
    char *out1 = path_in("out1.f32"), *out2 = path_in("out2.f32"), back_s[16];
    snprintf(back_s, sizeof back_s, "%u", back);
    char *args[] = {(char *)self, "--child", file, out1, out2, back_s, NULL};
    int rc = run_child(self, args);
    CHECK_INT(rc, 0);
    float *got1 = rc ? NULL : read_floats(out1, (size_t)(n - at) * V);
    float *got2 = rc ? NULL : read_floats(out2, (size_t)(n - back) * V);
    CHECK(got1 && got2);
    if (got1 && got2 && want) {
        bool a = fixture_same(got1, want + (size_t)at * V, (size_t)(n - at) * V, "after load");
        bool b = fixture_same(got2, want + (size_t)back * V, (size_t)(n - back) * V,
                              "rewind after load");
        printf("  saved at %u, continued in another process to %u: %s; rewound there to %u "
               "and continued: %s\n",
               at, n, a ? "bitwise equal" : "DIFFERENT", back, b ? "bitwise equal" : "DIFFERENT");
    }
    free(got1);
    free(got2);
    free(want);
    halo_session_free(s);
    halo_engine_close(e);
}

static unsigned char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(*n ? *n : 1);
    if (b && fread(b, 1, *n, f) != *n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    return b;
}

static void spill(const char *path, const unsigned char *b, size_t n) {
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(b, 1, n, f) == n);
    if (f) fclose(f);
}

/* A refused load leaves the session where it was. */
static void expect_refused(halo_session *s, const char *path, halo_status want,
                           const char *fragment, const char *what) {
    halo_error err = {0};
    uint32_t before = halo_session_n_past(s);
    halo_status st = halo_session_load_file(s, path, &err);
    if (st != want || (fragment && !strstr(err.message, fragment))) {
        fprintf(stderr, "  %s: status %d (want %d): %s\n", what, st, want, err.message);
        check_failures++;
    }
    CHECK_INT(halo_session_n_past(s), before);
}

static void damaged_files_are_refused(void) {
    halo_engine *e = fixture_engine("tiny-a", "f32");
    halo_engine *other = fixture_engine("tiny-yarn", "f32");
    const halo_golden_seq *seq = fixture_seq("L1100");
    if (!e || !other || !seq) return;
    halo_session *s = NULL, *t = NULL;
    halo_error err = {0};
    CHECK_INT(halo_session_create(e, 1100, &s, &err), HALO_OK);
    CHECK_INT(halo_session_create(other, 1100, &t, &err), HALO_OK);
    CHECK_INT(halo_session_eval(s, seq->tokens, 300, false, &err), HALO_OK);
    char *good = path_in("good.halokv"), *bad = path_in("bad.halokv");
    CHECK_INT(halo_session_save_file(s, good, &err), HALO_OK);
    size_t n = 0;
    unsigned char *b = slurp(good, &n);
    if (!b) {
        check_failures++;
        return;
    }
    CHECK_INT(halo_session_eval(s, seq->tokens + 300, 5, false, &err), HALO_OK);
    /* Flipped bytes anywhere: the header, the tokens, every part of the state. */
    srand(1234);
    int flips = 0;
    for (int i = 0; i < 64; i++) {
        size_t at = i < 16 ? (size_t)i * 8 : (size_t)rand() % n;
        unsigned char bit = (unsigned char)(1u << (rand() % 8));
        b[at] ^= bit;
        spill(bad, b, n);
        b[at] ^= bit;
        char what[64];
        snprintf(what, sizeof what, "flip at byte %zu", at);
        halo_error e2 = {0};
        halo_status st = halo_session_load_file(s, bad, &e2);
        if (st == HALO_OK) {
            fprintf(stderr, "  %s was loaded\n", what);
            check_failures++;
        }
        CHECK_INT(halo_session_n_past(s), 305);
        flips++;
    }
    /* Truncation at the header, inside the tokens, inside the state, one byte short. */
    size_t cuts[] = {0, 7, 127, 128, 130, 128 + 300 * 4 + 3, n / 2, n - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        spill(bad, b, cuts[i]);
        expect_refused(s, bad, HALO_E_TRUNCATED, NULL, "truncated");
    }
    /* A byte too many. */
    unsigned char *longer = malloc(n + 1);
    memcpy(longer, b, n);
    longer[n] = 0;
    spill(bad, longer, n + 1);
    expect_refused(s, bad, HALO_E_BAD_VALUE, "header says", "one byte too many");
    free(longer);
    /* Another version (a later format halo does not read). */
    b[8] = 2;
    spill(bad, b, n);
    b[8] = 1;
    expect_refused(s, bad, HALO_E_BAD_VERSION, "format version 2", "another version");
    /* Not a session file at all. */
    spill(bad, (const unsigned char *)"GGUF\3\0\0\0", 8);
    expect_refused(s, bad, HALO_E_TRUNCATED, NULL, "short");
    /* Another model: a file of tiny-a into a tiny-yarn session, and back. */
    expect_refused(t, good, HALO_E_BAD_VALUE, "another model", "another model");
    /* A context too small for the file's tokens. */
    halo_session *small = NULL;
    CHECK_INT(halo_session_create(e, 200, &small, &err), HALO_OK);
    expect_refused(small, good, HALO_E_BAD_VALUE, NULL, "small context");
    /* The good file still loads. */
    CHECK_INT(halo_session_load_file(s, good, &err), HALO_OK);
    CHECK_INT(halo_session_n_past(s), 300);
    printf("  %d flipped bytes, %zu truncations, a longer file, another version, another "
           "model, a small context: all refused, session unchanged\n",
           flips, sizeof cuts / sizeof cuts[0]);
    free(b);
    halo_session_free(small);
    halo_session_free(s);
    halo_session_free(t);
    halo_engine_close(e);
    halo_engine_close(other);
}

/* A child saves two states of different lengths over the same path in a loop; it is killed
 * with SIGKILL after a random delay. Whatever is at the path then is a complete earlier save
 * (loads, holds 300 or 700 tokens, and continues with the reference logits) or nothing. */
static void killed_writer_never_leaves_a_loadable_bad_file(void) {
    halo_engine *e = fixture_engine("tiny-a", "f32");
    const halo_golden_seq *seq = fixture_seq("L1100");
    if (!e || !seq) return;
    uint32_t V = halo_engine_n_vocab(e);
    float *want = fixture_uninterrupted(e, seq->tokens, 701);
    halo_session *a = NULL, *b = NULL, *r = NULL;
    halo_error err = {0};
    CHECK_INT(halo_session_create(e, 1100, &a, &err), HALO_OK);
    CHECK_INT(halo_session_create(e, 1100, &b, &err), HALO_OK);
    CHECK_INT(halo_session_create(e, 1100, &r, &err), HALO_OK);
    CHECK_INT(halo_session_eval(a, seq->tokens, 300, false, &err), HALO_OK);
    CHECK_INT(halo_session_eval(b, seq->tokens, 700, false, &err), HALO_OK);
    char *file = path_in("crash.halokv");
    srand(42);
    int kills = 0, loaded = 0, absent = 0, mid = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < 120; i++) {
        pid_t pid = fork();
        if (pid == 0) {
            for (unsigned k = 0;; k++)
                halo_session_save_file(k % 2 ? b : a, file, NULL);
        }
        struct timespec d = {0, (long)(rand() % 40000) * 1000}; /* 0-40 ms */
        nanosleep(&d, NULL);
        kill(pid, SIGKILL);
        int status;
        waitpid(pid, &status, 0);
        kills++;
        /* Leftover temporary files: count writes that were cut off, then remove them. */
        char cmd[256];
        snprintf(cmd, sizeof cmd, "ls %s | grep -c tmp- >/dev/null && rm -f %s/*.tmp-*", dir, dir);
        mid += system(cmd) == 0;
        halo_status st = halo_session_load_file(r, file, &err);
        if (st == HALO_E_NOT_FOUND) {
            absent++;
            continue;
        }
        if (st) {
            fprintf(stderr, "  kill %d: the file at the path does not load: %s\n", i, err.message);
            check_failures++;
            continue;
        }
        uint32_t at = halo_session_n_past(r);
        CHECK(at == 300 || at == 700);
        CHECK(memcmp(halo_session_tokens(r), seq->tokens, (size_t)at * 4) == 0);
        CHECK_INT(halo_session_eval(r, seq->tokens + at, 1, false, &err), HALO_OK);
        if (want)
            fixture_same(halo_session_logits(r, NULL), want + (size_t)at * V, V, "after a kill");
        loaded++;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("  %d writers killed at random points: %d left a complete file that loaded and "
           "continued exactly, %d no file yet, %d cut a write short (its temporary file "
           "ignored); %.1f s\n",
           kills, loaded, absent, mid,
           (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
    CHECK(kills >= 100);
    CHECK(mid > 0); /* some kills landed inside a write */
    free(want);
    halo_session_free(a);
    halo_session_free(b);
    halo_session_free(r);
    halo_engine_close(e);
}

/* The caller's bytes travel with the state, under their own checksum. */
static void user_bytes_round_trip_and_are_checked(void) {
    halo_engine *e = fixture_engine("tiny-a", "f32");
    const halo_golden_seq *seq = fixture_seq("L1100");
    if (!e || !seq) return;
    halo_session *s = NULL;
    halo_error err = {0};
    CHECK_INT(halo_session_create(e, 1100, &s, &err), HALO_OK);
    CHECK_INT(halo_session_eval(s, seq->tokens, 40, false, &err), HALO_OK);
    char *file = path_in("user.halokv");
    const char note[] = "{\"messages\": []}";
    CHECK_INT(halo_session_save_file_user(s, file, note, sizeof note - 1, &err), HALO_OK);
    char *got = NULL;
    size_t len = 0;
    CHECK_INT(halo_session_rewind(s, 0, &err), HALO_OK);
    CHECK_INT(halo_session_load_file_user(s, file, &got, &len, &err), HALO_OK);
    CHECK_INT(len, sizeof note - 1);
    CHECK_STR(got, note);
    CHECK_INT(halo_session_n_past(s), 40);
    free(got);
    size_t n = 0;
    unsigned char *b = slurp(file, &n);
    if (b) {
        b[n - 3] ^= 1; /* inside the user bytes */
        spill(file, b, n);
        expect_refused(s, file, HALO_E_BAD_VALUE, "user data checksum", "flipped user byte");
        free(b);
    }
    halo_session_free(s);
    halo_engine_close(e);
}

int main(int argc, char **argv) {
    if (argc == 6 && strcmp(argv[1], "--child") == 0)
        return child(argv[2], argv[3], argv[4], (uint32_t)atoi(argv[5]));
    snprintf(dir, sizeof dir, "/tmp/halo-kv-test-XXXXXX");
    if (!mkdtemp(dir)) return 1;
    saved_session_continues_in_a_fresh_process(argv[0]);
    damaged_files_are_refused();
    user_bytes_round_trip_and_are_checked();
    killed_writer_never_leaves_a_loadable_bad_file();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) check_failures++;
    halo_golden_close(fixture_golden());
    return check_failures ? 1 : 0;
}
