/* A synthetic model on a GPU backend (Vulkan: Mesa lavapipe in CI): its device tensors are made in
 * the host arena a batch at a time, copied up and their pages given back (engine_place_gpu.c), so
 * the host never holds the whole model. Forced to small batches (HALO_SYNTH_BATCH_MIB=16), a
 * full-width one-layer model takes many; its logits must equal the CPU backend's on the same
 * model (which makes every tensor in its arena at once) within the Vulkan golden bound: a batch
 * made late, twice or not at all, or given back before its copy, changes them. The Vulkan
 * engine test covers file-backed models; this one covers only the synthetic upload.
 * Skips (exit 77) when no Vulkan device works. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/vulkan/vulkan.h"
#include "check.h"
#include "halo/halo.h"

#define MODEL "synthetic:dsv4-flash-q2:1/e8/v1024"
enum { N_TOK = 8 };

/* Every position's logits of one prefill (caller frees), NULL on failure. */
static float *logits(const char *backend, const char *weights, uint32_t *n_vocab) {
    halo_engine *e = NULL;
    halo_session *s = NULL;
    halo_error err = {0};
    halo_engine_params p = {
        .model_path = MODEL, .backend = backend, .weights = weights, .precise = true};
    float *all = NULL;
    if (!halo_engine_open(&p, &e, &err) && !halo_session_create(e, N_TOK, &s, &err)) {
        uint32_t V = *n_vocab = halo_engine_n_vocab(e);
        int32_t tok[N_TOK];
        for (int i = 0; i < N_TOK; i++)
            tok[i] = (int32_t)((i * 7919u + 13) % V);
        if (!halo_session_eval(s, tok, N_TOK, true, &err)) {
            all = malloc((size_t)N_TOK * V * sizeof *all);
            if (all) memcpy(all, halo_session_logits(s, NULL), (size_t)N_TOK * V * sizeof *all);
        }
    }
    if (!all) fprintf(stderr, "  %s: %s\n", backend, err.message);
    halo_session_free(s);
    halo_engine_close(e);
    return all;
}

static void device_tensors_made_in_batches_give_cpu_logits(void) {
    uint32_t V = 0, Vg = 0;
    float *ref = logits("cpu", NULL, &V);
    setenv("HALO_SYNTH_BATCH_MIB", "16", 1);
    float *got = logits("vulkan", "device", &Vg);
    unsetenv("HALO_SYNTH_BATCH_MIB");
    CHECK(ref && got && V == Vg);
    if (ref && got && V == Vg) {
        double range = 0, diff = 0;
        for (size_t i = 0; i < (size_t)N_TOK * V; i++) {
            range = fmax(range, fabs(ref[i]));
            diff = fmax(diff, fabs((double)got[i] - ref[i]));
        }
        printf("  max |delta| %.3g of range %.3g\n", diff, range);
        CHECK(range > 0 && diff <= 1e-3 * range);
    }
    free(ref);
    free(got);
}

int main(void) {
    halo_backend *be = NULL;
    halo_error err = {0};
    if (halo_backend_vulkan_create(-1, &be, &err)) {
        printf("skip: %s\n", err.message);
        return 77;
    }
    be->ops->destroy(be);
    RUN(device_tensors_made_in_batches_give_cpu_logits);
    return check_report();
}
