/* Expert streaming through the engine: logits bitwise identical to resident experts on the
 * golden models (F32 and quantized mixes) at expert-cache sizes from the plan's minimum (one
 * token's experts per layer) to all of them, for a prefill and one-token decode steps, with
 * every prefetch mode (none, overlap, hash, all: HALO_STREAM_PREFETCH); the
 * admitted cache size is what is mapped, and the loud line appears when it is less than asked;
 * a machine profile too small for the model makes `auto` stream; read errors injected at
 * random reads (io_uring and reader threads) end the eval with an error naming the tensor and
 * expert, and the session then continues with the right logits. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gguf/gguf_test_util.h"
#include "halo/halo.h"
#include "halo/stream.h"

#define N_PREFILL 40
#define N_DECODE 6
#define N_TOK (N_PREFILL + N_DECODE)

static const char *models[] = {
    "tests/golden/models/tiny-a-f32.gguf",
    "tests/golden/models/tiny-q-ds4.gguf",
    "tests/golden/models/tiny-m-mxfp4.gguf",
    "tests/golden/models/tiny-q-q4km.gguf",
};

static void make_tokens(uint32_t n_vocab, int32_t *tok) {
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < N_TOK; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        tok[i] = (int32_t)((x >> 33) % n_vocab);
    }
}

static halo_engine *open_engine(const char *path, const char *weights, uint64_t cache,
                                halo_error *err) {
    halo_engine_params p = {.model_path = path,
                            .threads = 2,
                            .n_ctx = 256,
                            .weights = weights,
                            .expert_cache_bytes = cache};
    halo_engine *e = NULL;
    return halo_engine_open(&p, &e, err) ? NULL : e;
}

/* Prefill N_PREFILL tokens (every row kept), then N_DECODE single-token steps. Returns
 * [N_TOK][n_vocab] logits (caller frees), or NULL after an error (err filled). */
static float *run(halo_engine *e, const int32_t *tok, halo_error *err) {
    uint32_t V = halo_engine_n_vocab(e), rows;
    float *out = malloc((size_t)N_TOK * V * sizeof *out);
    halo_session *s = NULL;
    if (halo_session_create(e, 256, &s, err) || halo_session_eval(s, tok, N_PREFILL, true, err)) {
        halo_session_free(s);
        free(out);
        return NULL;
    }
    memcpy(out, halo_session_logits(s, &rows), (size_t)N_PREFILL * V * sizeof *out);
    for (int i = N_PREFILL; i < N_TOK; i++) {
        if (halo_session_eval(s, tok + i, 1, false, err)) {
            halo_session_free(s);
            free(out);
            return NULL;
        }
        memcpy(out + (size_t)i * V, halo_session_logits(s, &rows), V * sizeof *out);
    }
    halo_session_free(s);
    return out;
}

static const char *prefetch_modes[] = {"all", "none", "overlap", "hash", "all,predict"};
#define N_MODES (int)(sizeof prefetch_modes / sizeof *prefetch_modes)

static void streaming_logits_are_bitwise_resident_ones(void) {
    for (size_t m = 0; m < sizeof models / sizeof *models; m++) {
        /* One model with every expert read in 4 KiB pieces (real experts: 1 MiB pieces). */
        if (m == 1)
            setenv("HALO_TEST_READ_PIECE", "4096", 1);
        else
            unsetenv("HALO_TEST_READ_PIECE");
        halo_error err = {0};
        halo_engine *e = open_engine(models[m], NULL, 0, &err);
        CHECK(e != NULL);
        if (!e) {
            fprintf(stderr, "  %s\n", err.message);
            continue;
        }
        uint32_t V = halo_engine_n_vocab(e);
        int32_t tok[N_TOK];
        make_tokens(V, tok);
        halo_stream_stats ss;
        CHECK(!halo_engine_stream_stats(e, &ss)); /* resident: nothing streams */
        float *ref = run(e, tok, &err);
        halo_engine_close(e);
        CHECK(ref != NULL);
        /* "stream" with no size: a cache for every expert; then halvings down to the plan's
         * minimum (one token's experts in every layer), below which the plan refuses. */
        uint64_t all = 0;
        int sizes = 0;
        for (int k = 0; k < 12; k++) {
            uint64_t want = k ? all >> (k - 1) : 0;
            /* Each mode on every model and at large and small caches. */
            const char *mode = prefetch_modes[(k + m) % N_MODES];
            setenv("HALO_STREAM_PREFETCH", mode, 1);
            e = open_engine(models[m], "stream", want, &err);
            unsetenv("HALO_STREAM_PREFETCH");
            if (!e) {
                CHECK(k > 1); /* "all" and the first halvings must be admitted */
                CHECK_CONTAINS(err.message, "is less than one token's routed experts");
                break;
            }
            CHECK(halo_engine_stream_stats(e, &ss));
            if (!k) all = ss.expert_bytes;
            CHECK_INT(ss.cache_admitted, k ? want : all);
            CHECK_INT(ss.cache_allocated, ss.cache_admitted);
            float *got = run(e, tok, &err);
            CHECK(got != NULL);
            CHECK(got && ref && memcmp(got, ref, (size_t)N_TOK * V * sizeof *got) == 0);
            CHECK(halo_engine_stream_stats(e, &ss));
            CHECK_INT(ss.hits + ss.misses, ss.requests);
            CHECK(ss.misses > 0 && ss.bytes_read > 0);
            /* Every golden model routes its first layers by hash: "all" and "hash" read those
             * experts ahead, and every one of them is asked for in its step. */
            bool hash = strstr(mode, "all") || !strcmp(mode, "hash");
            CHECK(hash ? ss.prefetched > 0 : ss.prefetched == 0);
            /* Exact prefetches are all used; guesses (predict) may not be. */
            CHECK_INT(ss.prefetch_used - ss.predicted_used, ss.prefetched - ss.predicted);
            CHECK(ss.predicted_used <= ss.predicted);
            CHECK(strstr(mode, "predict") || ss.predicted == 0);
            CHECK(ss.waited <= ss.misses && ss.prefetch_used <= ss.misses);
            printf("  %s: cache %llu of %llu bytes, %u slots, prefetch %s: hit rate %.1f%% (%llu "
                   "of %llu), %llu prefetched, %llu waited on\n",
                   models[m] + 20, (unsigned long long)ss.cache_admitted, (unsigned long long)all,
                   ss.slots, mode,
                   100.0 * (double)ss.hits / (double)(ss.requests ? ss.requests : 1),
                   (unsigned long long)ss.hits, (unsigned long long)ss.requests,
                   (unsigned long long)ss.prefetched, (unsigned long long)ss.waited);
            if (ss.predicted)
                printf("    predicted %llu, used %llu\n", (unsigned long long)ss.predicted,
                       (unsigned long long)ss.predicted_used);
            free(got);
            halo_engine_close(e);
            sizes++;
        }
        CHECK(sizes >= 3);
        free(ref);
    }
    unsetenv("HALO_TEST_READ_PIECE");
}

static void cache_larger_than_the_experts_is_admitted_loudly(void) {
    halo_error err = {0};
    halo_engine *e = open_engine(models[0], "stream", 0, &err);
    CHECK(e != NULL);
    if (!e) return;
    halo_stream_stats ss;
    halo_engine_stream_stats(e, &ss);
    uint64_t all = ss.expert_bytes;
    halo_engine_close(e);
    e = open_engine(models[0], "stream", 3 * all, &err);
    CHECK(e != NULL);
    if (!e) return;
    CHECK(halo_engine_stream_stats(e, &ss));
    CHECK_INT(ss.cache_requested, 3 * all);
    CHECK_INT(ss.cache_admitted, all);
    CHECK_INT(ss.cache_allocated, all);
    CHECK_CONTAINS(ss.note, "expert cache: requested");
    printf("  %s\n", ss.note);
    halo_engine_close(e);
}

/* Machines of 1 GiB (the OS reserve) + a few MiB: the smallest that takes the tiny model (7.6
 * MiB of weights, ~9.5 MiB of context and scratch) at all must stream its experts under auto,
 * and refuse it with weights resident only. */
static void a_machine_too_small_makes_auto_stream(void) {
    char *dir = tmpdir_make(), path[600];
    snprintf(path, sizeof path, "%s/small.json", dir);
    setenv("HALO_PROFILE", path, 1);
    halo_error err = {0};
    halo_engine *e = NULL;
    for (int mib = 1030; mib < 1100 && !e; mib++) {
        FILE *f = fopen(path, "w");
        fprintf(f,
                "{\"name\": \"small\", \"description\": \"test\", \"sources\": [\"test\"],\n"
                " \"host\": {\"total_mib\": %d, \"available_mib\": %d, \"bandwidth_gbs\": 10},\n"
                " \"disk\": {\"kind\": \"nvme\", \"read_gbs\": 1}}\n",
                mib, mib);
        fclose(f);
        e = open_engine(models[0], "auto", 0, &err);
    }
    CHECK(e != NULL);
    halo_stream_stats ss;
    if (e) {
        CHECK(halo_engine_stream_stats(e, &ss));
        CHECK(ss.cache_admitted > 0 && ss.cache_admitted < ss.expert_bytes);
        CHECK_INT(ss.cache_allocated, ss.cache_admitted);
        printf("  auto streams: cache %llu of %llu bytes\n", (unsigned long long)ss.cache_admitted,
               (unsigned long long)ss.expert_bytes);
        halo_engine_close(e);
    } else {
        fprintf(stderr, "  %s\n", err.message);
    }
    e = open_engine(models[0], NULL, 0, &err); /* resident only: refused */
    CHECK(e == NULL);
    CHECK_CONTAINS(err.message, "stream");
    halo_engine_close(e);
    /* Asking for every expert there: admitted less, and said so. */
    e = open_engine(models[0], "stream", 64ull << 20, &err);
    CHECK(e != NULL);
    if (e) {
        CHECK(halo_engine_stream_stats(e, &ss));
        CHECK(ss.cache_admitted < ss.cache_requested);
        CHECK_INT(ss.cache_allocated, ss.cache_admitted);
        CHECK_CONTAINS(ss.note, "the room left");
        printf("  %s\n", ss.note);
        halo_engine_close(e);
    }
    unsetenv("HALO_PROFILE");
    remove(path);
    tmpdir_remove(dir);
}

static void read_errors_are_named_and_the_session_recovers(void) {
    const char *model = models[1];
    halo_error err = {0};
    halo_engine *e = open_engine(model, NULL, 0, &err);
    CHECK(e != NULL);
    if (!e) return;
    uint32_t V = halo_engine_n_vocab(e);
    int32_t tok[N_TOK];
    make_tokens(V, tok);
    float *ref = run(e, tok, &err);
    halo_engine_close(e);
    /* A small cache, so reads go on through the decode steps too. */
    e = open_engine(model, "stream", 0, &err);
    halo_stream_stats ss;
    halo_engine_stream_stats(e, &ss);
    uint64_t small = ss.expert_bytes / 2;
    halo_engine_close(e);
    uint64_t x = 12345;
    for (int trial = 0; trial < 6; trial++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        char at[32];
        snprintf(at, sizeof at, "%llu", (unsigned long long)(1 + (x >> 33) % 90));
        setenv("HALO_TEST_FAIL_READ", at, 1);
        if (trial % 2) setenv("HALO_STREAM_READER", "threads", 1); /* both ways of reading */
        /* failed prefetches and guesses too */
        setenv("HALO_STREAM_PREFETCH", prefetch_modes[trial % 3 ? trial % 3 : 4], 1);
        e = open_engine(model, "stream", small, &err);
        unsetenv("HALO_TEST_FAIL_READ");
        unsetenv("HALO_STREAM_READER");
        unsetenv("HALO_STREAM_PREFETCH");
        CHECK(e != NULL);
        if (!e) continue;
        halo_session *s = NULL;
        CHECK_INT(halo_session_create(e, 256, &s, &err), HALO_OK);
        float *got = malloc((size_t)N_TOK * V * sizeof *got);
        int failures = 0;
        uint32_t rows;
        for (int i = 0; i < N_TOK;) {
            uint32_t n = i == 0 ? N_PREFILL : 1, past = halo_session_n_past(s);
            halo_status st = halo_session_eval(s, tok + i, n, i == 0, &err);
            if (st) {
                failures++;
                CHECK_INT(st, HALO_E_IO);
                CHECK_CONTAINS(err.message, "expert");
                CHECK_CONTAINS(err.message, "ffn_");
                CHECK_CONTAINS(err.message, "_exps.weight");
                CHECK_CONTAINS(err.message, "Input/output error");
                if (failures == 1) printf("  read %s: %s\n", at, err.message);
                CHECK_INT(halo_session_n_past(s), past); /* as before the call */
                if (failures > 1) break;
                continue; /* the same tokens again */
            }
            const float *l = halo_session_logits(s, &rows);
            memcpy(got + (size_t)i * V, l, (size_t)rows * V * sizeof *l);
            i += (int)n;
        }
        /* A failed guess nobody asks for is never reported (it is read again if asked). */
        if (trial % 3)
            CHECK_INT(failures, 1);
        else
            CHECK(failures <= 1);
        CHECK(ref && memcmp(got, ref, (size_t)N_TOK * V * sizeof *got) == 0);
        free(got);
        halo_session_free(s);
        halo_engine_close(e);
    }
    free(ref);
}

int main(void) {
    RUN(streaming_logits_are_bitwise_resident_ones);
    RUN(cache_larger_than_the_experts_is_admitted_loudly);
    RUN(a_machine_too_small_makes_auto_stream);
    RUN(read_errors_are_named_and_the_session_recovers);
    return check_report();
}
