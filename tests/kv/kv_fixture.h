/* Shared by the tests/kv tests: golden models (tests/golden) and their uninterrupted
 * evaluation, the expected values for every rewind, reload and cache path (that evaluation is
 * itself checked against transformers in tests/model/test_forward_golden.c). */
#ifndef HALO_TESTS_KV_FIXTURE_H
#define HALO_TESTS_KV_FIXTURE_H

#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "golden/golden.h"
#include "halo/cache.h"
#include "halo/halo.h"

static halo_golden *fixture_golden(void) {
    static halo_golden *g;
    halo_error err = {0};
    if (!g && halo_golden_open("tests/golden", &g, &err)) {
        fprintf(stderr, "  %s\n", err.message);
        check_failures++;
    }
    return g;
}

/* One thread: the CI machine is small and shared; the pool degrades badly when loaded. */
static halo_engine *fixture_engine(const char *model, const char *variant) {
    const halo_golden_variant *v = NULL;
    halo_engine *e = NULL;
    halo_error err = {0};
    halo_golden *g = fixture_golden();
    if (!g || halo_golden_variant_get(g, model, variant, &v, &err)) {
        fprintf(stderr, "  %s\n", err.message);
        check_failures++;
        return NULL;
    }
    halo_engine_params p = {.model_path = v->gguf_path, .threads = 1};
    if (halo_engine_open(&p, &e, &err)) {
        fprintf(stderr, "  %s\n", err.message);
        check_failures++;
    }
    return e;
}

static const halo_golden_seq *fixture_seq(const char *name) {
    halo_golden *g = fixture_golden();
    const halo_golden_seq *s = g ? halo_golden_seq_find(g, name) : NULL;
    if (!s) {
        fprintf(stderr, "  no golden sequence %s\n", name);
        check_failures++;
    }
    return s;
}

/* Logits of every position of tokens[0..n) evaluated in one call (caller frees). */
static float *fixture_uninterrupted(halo_engine *e, const int32_t *tokens, uint32_t n) {
    uint32_t V = halo_engine_n_vocab(e);
    halo_session *s = NULL;
    halo_error err = {0};
    float *all = NULL;
    if (halo_session_create(e, n, &s, &err) || halo_session_eval(s, tokens, n, true, &err)) {
        fprintf(stderr, "  %s\n", err.message);
        check_failures++;
    } else {
        all = malloc((size_t)n * V * sizeof *all);
        memcpy(all, halo_session_logits(s, NULL), (size_t)n * V * sizeof *all);
    }
    halo_session_free(s);
    return all;
}

/* Bitwise equality of logit rows; prints the first difference. */
static bool fixture_same(const float *got, const float *want, size_t n_floats, const char *what) {
    if (memcmp(got, want, n_floats * sizeof *got) == 0) return true;
    for (size_t i = 0; i < n_floats; i++)
        if (memcmp(&got[i], &want[i], sizeof *got) != 0) {
            fprintf(stderr, "  %s: first difference at float %zu: %.9g vs %.9g\n", what, i,
                    (double)got[i], (double)want[i]);
            break;
        }
    check_failures++;
    return false;
}

#endif
