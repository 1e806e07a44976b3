/* The GPU's two-level expert cache (src/mem/expert_device.c over the host expert cache), run on
 * the CPU backend (HALO_TEST_DEVICE_EXPERTS=1) so its logic is pinned without a GPU: on the
 * golden models, with every routed expert streamed through caches from all the experts down to
 * the plan's minimum (one token's experts per layer), the logits of a prefill and decode steps
 * are bitwise the resident ones (the CPU computes a pair the same in whichever round it falls),
 * experts are copied into the upper level and found there again, and the host level reads them
 * from the file. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "halo/halo.h"
#include "halo/stream.h"
#include "mem/expert_device.h"
#include "model/engine_internal.h"

#define N_PREFILL 24
#define N_DECODE 4
#define N_TOK (N_PREFILL + N_DECODE)

static const char *models[] = {
    "tests/golden/models/tiny-a-f32.gguf",
    "tests/golden/models/tiny-q-ds4.gguf",
    "tests/golden/models/tiny-m-mxfp4.gguf",
};

static halo_engine *open_engine(const char *path, const char *weights, uint64_t cache,
                                halo_error *err) {
    halo_engine_params p = {.model_path = path,
                            .threads = 2,
                            .n_ctx = 64,
                            .weights = weights,
                            .expert_cache_bytes = cache};
    halo_engine *e = NULL;
    return halo_engine_open(&p, &e, err) ? NULL : e;
}

/* [N_TOK][n_vocab] logits of a prefill then one-token steps (caller frees), or NULL. */
static float *run(halo_engine *e, const int32_t *tok, halo_error *err) {
    uint32_t V = halo_engine_n_vocab(e);
    float *out = malloc((size_t)N_TOK * V * sizeof *out);
    halo_session *s = NULL;
    bool ok =
        !halo_session_create(e, 64, &s, err) && !halo_session_eval(s, tok, N_PREFILL, true, err);
    if (ok) memcpy(out, halo_session_logits(s, NULL), (size_t)N_PREFILL * V * sizeof *out);
    for (int i = N_PREFILL; ok && i < N_TOK; i++) {
        ok = !halo_session_eval(s, tok + i, 1, false, err);
        if (ok) memcpy(out + (size_t)i * V, halo_session_logits(s, NULL), V * sizeof *out);
    }
    halo_session_free(s);
    if (!ok) free(out);
    return ok ? out : NULL;
}

static void two_level_expert_cache_gives_the_resident_logits(void) {
    for (size_t m = 0; m < sizeof models / sizeof *models; m++) {
        halo_error err = {0};
        unsetenv("HALO_TEST_DEVICE_EXPERTS");
        halo_engine *e = open_engine(models[m], NULL, 0, &err);
        CHECK(e != NULL);
        if (!e) {
            fprintf(stderr, "  %s\n", err.message);
            continue;
        }
        uint32_t V = halo_engine_n_vocab(e);
        int32_t tok[N_TOK];
        uint64_t x = 0x2545F4914F6CDD1Dull;
        for (int i = 0; i < N_TOK; i++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            tok[i] = (int32_t)((x >> 33) % V);
        }
        float *ref = run(e, tok, &err);
        halo_engine_close(e);
        CHECK(ref != NULL);
        setenv("HALO_TEST_DEVICE_EXPERTS", "1", 1);
        uint64_t all = 0;
        int sizes = 0;
        for (int k = 0; k < 12; k++) {
            uint64_t want = k ? all >> (k - 1) : 0;
            e = open_engine(models[m], "stream", want, &err);
            if (!e) {
                CHECK(k > 1); /* refused only below the plan's minimum */
                break;
            }
            halo_stream_stats ss;
            CHECK(halo_engine_stream_stats(e, &ss));
            if (!k) all = ss.expert_bytes;
            const halo_expert_device *d = halo_expert_device_of(&e->w);
            CHECK(d != NULL);
            float *got = run(e, tok, &err);
            if (!got) fprintf(stderr, "  %s\n", err.message);
            CHECK(got && ref && memcmp(got, ref, (size_t)N_TOK * V * sizeof *got) == 0);
            halo_expert_device_stats ds;
            halo_expert_device_stats_get(d, &ds);
            CHECK_INT(halo_engine_stream_stats(e, &ss), true);
            /* Every expert the upper level lacked went through the host cache and was copied. */
            CHECK(ds.uploads > 0 && ds.uploads <= ss.requests && ss.misses > 0);
            CHECK(ds.hits > 0 && ds.hits + ds.uploads <= ds.requests);
            printf("  %s: %u slots above %u: %llu of %llu found in the upper level, %llu copied "
                   "up, %llu read from the file\n",
                   models[m] + 20, ds.slots, ss.slots, (unsigned long long)ds.hits,
                   (unsigned long long)ds.requests, (unsigned long long)ds.uploads,
                   (unsigned long long)ss.misses);
            free(got);
            halo_engine_close(e);
            sizes++;
        }
        CHECK(sizes >= 3);
        free(ref);
    }
    unsetenv("HALO_TEST_DEVICE_EXPERTS");
}

int main(void) {
    RUN(two_level_expert_cache_gives_the_resident_logits);
    return check_report();
}
