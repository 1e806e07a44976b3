/* Continuing a long conversation after an edit of its end, with and without checkpoints and
 * the prefix cache, and session save/load throughput. Not a test: bench/cache/run.sh runs it
 * and RESULTS.md records the figures.
 *
 *   bench_cache MODEL.gguf [N_TOKENS=4096] [EDIT=200] [THREADS=2] [DIR=/tmp/kvcache-bench]
 *
 * The conversation is N_TOKENS seeded random tokens; the edit replaces its last EDIT tokens.
 * Every path must end with the same logits (bitwise) as evaluating the edited conversation
 * from scratch, which is the baseline "without". */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "halo/cache.h"
#include "halo/halo.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void die(const char *what, const halo_error *err) {
    fprintf(stderr, "bench_cache: %s: %s\n", what, err ? err->message : "");
    exit(1);
}

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint32_t next(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

static halo_session *session(halo_engine *e, uint32_t n_ctx, bool checkpoints) {
    halo_session *s = NULL;
    halo_error err = {0};
    if (halo_session_create(e, n_ctx, &s, &err)) die("session", &err);
    halo_checkpoint_policy p = {.interval = checkpoints ? 0 : UINT32_MAX};
    if (halo_session_set_checkpoints(s, &p, &err)) die("policy", &err);
    return s;
}

static void eval(halo_session *s, const int32_t *t, uint32_t n) {
    halo_error err = {0};
    if (halo_session_eval(s, t, n, false, &err)) die("eval", &err);
}

static bool same_logits(halo_session *a, halo_session *b, uint32_t V) {
    return memcmp(halo_session_logits(a, NULL), halo_session_logits(b, NULL),
                  (size_t)V * sizeof(float)) == 0;
}

static uint64_t file_size(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 ? (uint64_t)sb.st_size : 0;
}

/* Drops the file from the page cache, so a load reads the disk. */
static void evict(const char *path) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) return;
    fdatasync(fd);
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: bench_cache MODEL.gguf [N_TOKENS] [EDIT] [THREADS] [DIR]\n");
        return 2;
    }
    uint32_t n = argc > 2 ? (uint32_t)atoi(argv[2]) : 4096;
    uint32_t edit = argc > 3 ? (uint32_t)atoi(argv[3]) : 200;
    uint32_t threads = argc > 4 ? (uint32_t)atoi(argv[4]) : 2;
    const char *dir = argc > 5 ? argv[5] : "/tmp/kvcache-bench";
    halo_error err = {0};
    halo_engine *e = NULL;
    halo_engine_params ep = {.model_path = argv[1], .threads = threads, .n_ctx = n + 16};
    double t0 = now();
    if (halo_engine_open(&ep, &e, &err)) die("open", &err);
    printf("model %s (%.1f s to load), %u tokens, edit of the last %u, %u threads\n", argv[1],
           now() - t0, n, edit, threads);
    uint32_t V = halo_engine_n_vocab(e);
    int32_t *conv = malloc(n * sizeof *conv), *edited = malloc(n * sizeof *edited);
    for (uint32_t i = 0; i < n; i++)
        conv[i] = (int32_t)(next() % V);
    memcpy(edited, conv, n * sizeof *conv);
    for (uint32_t i = n - edit; i < n; i++)
        edited[i] = (int32_t)(next() % V);

    /* Without: the edited conversation evaluated from scratch (what a rewind without
     * checkpoints or a cache amounts to: the whole prefix again). */
    halo_session *base = session(e, n + 16, false);
    t0 = now();
    eval(base, edited, n);
    double t_without = now() - t0;
    printf("without checkpoints or cache: %.2f s (%u tokens evaluated, %.1f tok/s)\n", t_without, n,
           n / t_without);

    /* With checkpoints: the session that evaluated the conversation rewinds and continues. */
    halo_session *s = session(e, n + 16, true);
    t0 = now();
    eval(s, conv, n);
    double t_first = now() - t0;
    halo_checkpoint_stats cs;
    halo_session_checkpoint_stats(s, &cs);
    printf("first evaluation with checkpoints: %.2f s (%u checkpoints every %u tokens, %.1f MiB; "
           "%.2fx the time without)\n",
           t_first, cs.count, cs.interval, (double)cs.bytes / (1 << 20), t_first / t_without);
    t0 = now();
    if (halo_session_rewind(s, n - edit, &err)) die("rewind", &err);
    halo_session_checkpoint_stats(s, &cs);
    eval(s, edited + (n - edit), edit);
    double t_ckpt = now() - t0;
    printf("with checkpoints: %.3f s (re-evaluated %u + %u new tokens): %.1fx faster; logits "
           "%s\n",
           t_ckpt, cs.last_replayed, edit, t_without / t_ckpt,
           same_logits(s, base, V) ? "bitwise equal" : "DIFFERENT");

    /* Save / load throughput (the file holds the tokens, the state and the checkpoints). */
    if (halo_session_rewind(s, n, &err) && halo_session_n_past(s) != n) {
        /* n_past is already n after the eval above */
    }
    char path[512];
    snprintf(path, sizeof path, "%s/bench-session.halokv", dir);
    t0 = now();
    if (halo_session_save_file(s, path, &err)) die("save", &err);
    double t_save = now() - t0;
    uint64_t bytes = file_size(path);
    evict(path);
    halo_session *l = session(e, n + 16, true);
    t0 = now();
    if (halo_session_load_file(l, path, &err)) die("load", &err);
    double t_load = now() - t0;
    t0 = now();
    if (halo_session_load_file(l, path, &err)) die("load", &err);
    double t_load_warm = now() - t0;
    printf("save: %.1f MiB in %.3f s (%.0f MiB/s, fsync included); load: %.3f s (%.0f MiB/s) "
           "from disk, %.3f s (%.0f MiB/s) from the page cache; verified\n",
           (double)bytes / (1 << 20), t_save, bytes / t_save / (1 << 20), t_load,
           bytes / t_load / (1 << 20), t_load_warm, bytes / t_load_warm / (1 << 20));

    /* The prefix cache: a fresh session (another request) finds the conversation. */
    halo_cache *c = NULL;
    char kvdir[600];
    snprintf(kvdir, sizeof kvdir, "%s/kv", dir);
    halo_cache_params cp = {.ram_bytes = 8ull << 30, .dir = kvdir};
    if (halo_cache_open(e, &cp, &c, &err)) die("cache", &err);
    if (halo_cache_insert(c, l, &err)) die("insert", &err);
    halo_cache_flush(c);
    for (int from_disk = 0; from_disk < 2; from_disk++) {
        halo_cache *use = c;
        if (from_disk) {
            halo_cache_params dp = {.dir = kvdir};
            if (halo_cache_open(e, &dp, &use, &err)) die("cache", &err);
        }
        halo_session *r = session(e, n + 16, true);
        uint32_t got = 0;
        t0 = now();
        if (halo_cache_restore(use, r, edited, n - 1, &got, &err)) die("restore", &err);
        eval(r, edited + got, n - got);
        double t = now() - t0;
        printf("fresh session from the %s cache: %.3f s (restored %u tokens, evaluated %u): "
               "%.1fx faster; logits %s\n",
               from_disk ? "disk" : "RAM", t, got, n - got, t_without / t,
               same_logits(r, base, V) ? "bitwise equal" : "DIFFERENT");
        halo_session_free(r);
        if (from_disk) halo_cache_close(use);
    }
    halo_cache_close(c);
    halo_session_free(l);
    halo_session_free(s);
    halo_session_free(base);
    halo_engine_close(e);
    free(conv);
    free(edited);
    return 0;
}
