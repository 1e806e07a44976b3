/* CUDA graph replay ≡ eager (issue 11). The same prompt is prefilled and then decoded greedily,
 * once with graphs off (HALO_CUDA_GRAPHS=0: every kernel launched as the forward enqueues it)
 * and once on (small steps captured per layer and replayed, src/backend/cuda/graph.cu): the
 * logits of every small step must be bitwise identical, since the same kernels run with the
 * same arguments in the same order. The graph run is fed the eager run's greedy ids, so a
 * difference shows at the step where it starts instead of cascading.
 *
 * The prompt goes in as a long chunk (over 16 tokens: eager in both runs) and a 7-token chunk
 * (a captured multi-token step), then at least 32 one-token steps. The counters prove the
 * second run really replayed graphs (a test that passes with graphs silently off is worth
 * nothing): every small step a graph step, executables updated in place, and none in the
 * eager run.
 *
 * Models: the embedded models/kjv-tiny.gguf (also two sessions decoding together through
 * halo_session_eval_many: per-sequence attention inside one captured step), and a synthetic
 * model at DeepSeek V4 Flash's real shapes (4 layers: window-only, ratio 4 with the indexer,
 * ratio 128, hash-routed; q2 mix; vocabulary cut to 8,192) decoded across position 127, where
 * the ratio-128 window closes and the 128-row raw window wraps, so pieces change shape and are
 * re-instantiated mid-decode; the same model again in fast mode (tensor-core prefill, int8
 * one-token steps). And a failure injected into a captured decode step (an op's
 * scratch request, HALO_TEST_FAIL_SCRATCH) fails that step only, with the op's error. Skipped (exit
 * 77) without a GPU; HIP builds (which run eagerly) skip too. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "check.h"
#include "halo/halo.h"
#include "model/engine_internal.h"
#if defined(HALO_CUDA) || defined(HALO_HIP)
#include "backend/cuda/graph.h"
#endif

#define CHUNK 7 /* the prompt's last chunk: a captured step of several tokens */
#define MAX_SEQ 2

#if defined(HALO_CUDA) || defined(HALO_HIP)

typedef struct run_cfg {
    const char *model;
    int n_seq, n_prompt, n_decode;
    bool fast; /* the engine's fast mode (precise = false) rather than precise */
} run_cfg;

typedef struct run_out {
    float *logits; /* per sequence: CHUNK rows, then one row per decode step; [seq][row][V] */
    uint32_t V;
    int32_t *ids; /* decoded ids [seq][n_decode]: out of the eager run, into the graph run */
    halo_cuda_graph_stats st;
} run_out;

static uint32_t argmax(const float *r, uint32_t n) {
    uint32_t b = 0;
    for (uint32_t i = 1; i < n; i++)
        if (r[i] > r[b]) b = i;
    return b;
}

static int rows_per_seq(const run_cfg *c) {
    return CHUNK + c->n_decode;
}

/* One run; greedy picks the ids (eager run), else o->ids are fed. false on an error (counted). */
static bool run(const run_cfg *c, bool graphs, bool greedy, run_out *o) {
    setenv("HALO_CUDA_GRAPHS", graphs ? "1" : "0", 1);
    halo_engine *e = NULL;
    halo_session *s[MAX_SEQ] = {0};
    halo_error err = {0};
    uint32_t n_ctx = (uint32_t)(c->n_prompt + c->n_decode);
    halo_engine_params p = {.model_path = c->model,
                            .backend = "cuda",
                            .precise = !c->fast,
                            .n_ctx = n_ctx,
                            .n_seq = (uint32_t)c->n_seq};
    halo_status st = halo_engine_open(&p, &e, &err);
    for (int q = 0; !st && q < c->n_seq; q++)
        st = halo_session_create(e, n_ctx, &s[q], &err);
    uint32_t V = st ? 0 : halo_engine_n_vocab(e);
    o->V = V;
    size_t row = V, per_seq = (size_t)rows_per_seq(c) * row;
    if (!st) {
        o->logits = calloc((size_t)c->n_seq * per_seq, sizeof(float));
        if (!o->ids) o->ids = calloc((size_t)c->n_seq * c->n_decode, sizeof(int32_t));
        if (!o->logits || !o->ids) st = HALO_E_NOMEM;
    }
    /* The prompts: fixed pseudo-random ids, different per sequence. */
    for (int q = 0; !st && q < c->n_seq; q++) {
        int32_t prompt[512];
        uint32_t seed = 12345u + 777u * (uint32_t)q;
        for (int i = 0; i < c->n_prompt; i++) {
            seed = seed * 1664525u + 1013904223u;
            prompt[i] = (int32_t)((seed >> 8) % V);
        }
        st = halo_session_eval(s[q], prompt, (uint32_t)(c->n_prompt - CHUNK), false, &err);
        if (!st) st = halo_session_eval(s[q], prompt + c->n_prompt - CHUNK, CHUNK, true, &err);
        if (!st)
            memcpy(o->logits + q * per_seq, halo_session_logits(s[q], NULL),
                   CHUNK * row * sizeof(float));
    }
    for (int i = 0; !st && i < c->n_decode; i++) {
        int32_t next[MAX_SEQ];
        const int32_t *toks[MAX_SEQ];
        uint32_t ones[MAX_SEQ];
        for (int q = 0; q < c->n_seq; q++) {
            const float *last = o->logits + q * per_seq + (size_t)(CHUNK - 1 + i) * row;
            int32_t *id = &o->ids[q * c->n_decode + i];
            if (greedy) *id = (int32_t)argmax(last, V);
            next[q] = *id;
            toks[q] = &next[q];
            ones[q] = 1;
        }
        st = c->n_seq == 1 ? halo_session_eval(s[0], next, 1, false, &err)
                           : halo_session_eval_many(s, toks, ones, (uint32_t)c->n_seq, &err);
        for (int q = 0; !st && q < c->n_seq; q++)
            memcpy(o->logits + q * per_seq + (size_t)(CHUNK + i) * row,
                   halo_session_logits(s[q], NULL), row * sizeof(float));
    }
    if (!st && !halo_backend_cuda_graph_stats(e->be, &o->st)) {
        st = HALO_E_UNSUPPORTED;
        snprintf(err.message, sizeof err.message, "the engine's backend is not the cuda backend");
    }
    if (st) fprintf(stderr, "  %s, graphs %s: %s\n", c->model, graphs ? "on" : "off", err.message);
    CHECK_INT(st, HALO_OK);
    for (int q = 0; q < c->n_seq; q++)
        halo_session_free(s[q]);
    halo_engine_close(e);
    return st == HALO_OK;
}

static void replay_equals_eager(const run_cfg *c) {
    run_out eager = {0}, graph = {0};
    if (run(c, false, true, &eager)) {
        graph.ids = eager.ids; /* the graph run decodes the eager run's choices */
        if (run(c, true, false, &graph)) {
            int rows = c->n_seq * rows_per_seq(c), first_diff = -1, n_diff = 0;
            double worst = 0;
            for (int r = 0; r < rows; r++) {
                const float *a = eager.logits + (size_t)r * eager.V;
                const float *b = graph.logits + (size_t)r * eager.V;
                if (!memcmp(a, b, eager.V * sizeof(float))) continue;
                n_diff++;
                if (first_diff < 0) first_diff = r;
                for (uint32_t i = 0; i < eager.V; i++) {
                    double d = a[i] > b[i] ? (double)a[i] - b[i] : (double)b[i] - a[i];
                    worst = d > worst ? d : worst;
                }
            }
            const halo_cuda_graph_stats *g = &graph.st, *off = &eager.st;
            printf("  %s%s, %d sequence(s), %d prompt + %d decode: %d of %d logit rows differ "
                   "(first: row %d, max |d| %.3g); graphs: %llu of %llu small steps, %llu "
                   "graphs, %llu instantiated, %llu updated, %llu refused, %llu breaks, %llu "
                   "kernel launches in the last step\n",
                   c->model, c->fast ? " (fast mode)" : "", c->n_seq, c->n_prompt, c->n_decode,
                   n_diff, rows, first_diff, worst, (unsigned long long)g->graph_steps,
                   (unsigned long long)g->steps, (unsigned long long)g->graphs,
                   (unsigned long long)g->instantiated, (unsigned long long)g->updated,
                   (unsigned long long)g->refused, (unsigned long long)g->breaks,
                   (unsigned long long)g->last_step_kernels);
            CHECK_INT(n_diff, 0);
            if (n_diff) { /* diagnosis: are eager launches themselves reproducible? */
                run_out again = {.ids = eager.ids};
                if (run(c, false, false, &again)) {
                    int n_again = 0;
                    for (int r = 0; r < rows; r++)
                        n_again += memcmp(eager.logits + (size_t)r * eager.V,
                                          again.logits + (size_t)r * eager.V,
                                          eager.V * sizeof(float)) != 0;
                    printf("  a second eager run differs from the first in %d of %d rows%s\n",
                           n_again, rows, n_again ? ": the kernels are not deterministic" : "");
                }
                free(again.logits);
            }
            /* The eager run had graphs off, the graph run replayed every small step. */
            CHECK(!off->enabled);
            CHECK(off->graph_steps == 0 && off->graphs == 0);
            CHECK(g->enabled);
            CHECK(g->graph_steps >= 30);
            CHECK(g->graph_steps == (uint64_t)c->n_decode + (uint64_t)c->n_seq);
            CHECK(g->steps == g->graph_steps);
            CHECK(g->breaks == 0);
            CHECK(g->updated > 0);
            CHECK(g->graphs > g->graph_steps); /* a graph per layer and one for the head */
            /* HALO_CUDA_GRAPH_FIRST=1 (ctest's test_backend_cuda_graphs_first): the first
             * layer of every step in pieces of 1, 2, 4, ... ops, at least two before its end */
            const char *first = getenv("HALO_CUDA_GRAPH_FIRST");
            if (first && atoi(first) > 0)
                CHECK(g->early >= 2 * g->graph_steps);
            else
                CHECK(g->early == 0);
            CHECK(g->last_step_kernels > 0);
        }
    }
    free(eager.logits);
    free(graph.logits);
    free(eager.ids);
}

static void graph_replay_equals_eager_on_the_embedded_model(void) {
    run_cfg c = {"models/kjv-tiny.gguf", 1, 40, 40, false};
    replay_equals_eager(&c);
}

static void graph_replay_equals_eager_with_two_sequences_per_step(void) {
    run_cfg c = {"models/kjv-tiny.gguf", 2, 30, 34, false};
    replay_equals_eager(&c);
}

static void graph_replay_equals_eager_at_full_width(void) {
    /* Positions 0..139: decode crosses 127 (a ratio-128 window closes, the raw window of 128
     * rows wraps) and closes a ratio-4 window every 4 steps. */
    run_cfg c = {"synthetic:dsv4-flash-q2:4/v8192", 1, 100, 40, false};
    replay_equals_eager(&c);
}

/* Fast mode (the engine's default): the prompt's long chunk on tensor cores (eager), the
 * one-token steps over int8 activations (mvq.cu), captured and replayed. */
static void graph_replay_equals_eager_in_fast_mode(void) {
    run_cfg c = {"synthetic:dsv4-flash-q2:4/v8192", 1, 100, 40, true};
    replay_equals_eager(&c);
}

/* ---- a failure inside a captured step ------------------------------------------------------ */

#define FAULT_MODEL "models/kjv-tiny.gguf"
#define FAULT_PROMPT 40
#define FAULT_DECODE 16

typedef struct fault_out {
    float *rows; /* [FAULT_DECODE][V]: each decode step's logits */
    uint32_t V;
    uint64_t req_prefill, req_all; /* scratch requests after the prompt, after everything */
    int failed_at;                 /* the decode step that failed (-1: none) */
    halo_status fail_status;
    halo_error fail; /* its error */
    halo_cuda_graph_stats st;
} fault_out;

/* The prompt then FAULT_DECODE fixed ids; the N-th scratch request fails (fail_at). A failed
 * step leaves the session where it was and is evaluated again. */
static bool fault_run(bool graphs, const char *fail_at, fault_out *o) {
    setenv("HALO_CUDA_GRAPHS", graphs ? "1" : "0", 1);
    setenv("HALO_TEST_FAIL_SCRATCH", fail_at, 1);
    halo_engine *e = NULL;
    halo_session *s = NULL;
    halo_error err = {0};
    halo_engine_params p = {.model_path = FAULT_MODEL,
                            .backend = "cuda",
                            .precise = true,
                            .n_ctx = FAULT_PROMPT + FAULT_DECODE};
    halo_status st = halo_engine_open(&p, &e, &err);
    unsetenv("HALO_TEST_FAIL_SCRATCH");
    if (!st) st = halo_session_create(e, FAULT_PROMPT + FAULT_DECODE, &s, &err);
    o->failed_at = -1;
    o->V = st ? 0 : halo_engine_n_vocab(e);
    if (!st && !(o->rows = calloc((size_t)FAULT_DECODE * o->V, sizeof(float)))) st = HALO_E_NOMEM;
    int32_t ids[FAULT_PROMPT + FAULT_DECODE];
    uint32_t seed = 4242u;
    for (int i = 0; i < FAULT_PROMPT + FAULT_DECODE; i++) {
        seed = seed * 1664525u + 1013904223u;
        ids[i] = o->V ? (int32_t)((seed >> 8) % o->V) : 0;
    }
    if (!st) st = halo_session_eval(s, ids, FAULT_PROMPT - CHUNK, false, &err);
    if (!st) st = halo_session_eval(s, ids + FAULT_PROMPT - CHUNK, CHUNK, false, &err);
    halo_cuda_graph_stats gs;
    if (!st && !halo_backend_cuda_graph_stats(e->be, &gs)) st = HALO_E_UNSUPPORTED;
    if (!st) o->req_prefill = gs.scratch_requests;
    for (int i = 0; !st && i < FAULT_DECODE; i++) {
        st = halo_session_eval(s, ids + FAULT_PROMPT + i, 1, false, &err);
        if (st && o->failed_at < 0) {
            o->failed_at = i;
            o->fail_status = st;
            o->fail = err;
            printf("  step %d failed as injected: %s\n", i, err.message);
            CHECK_INT(halo_session_n_past(s), FAULT_PROMPT + i);               /* where it was */
            st = halo_session_eval(s, ids + FAULT_PROMPT + i, 1, false, &err); /* again */
        }
        if (!st)
            memcpy(o->rows + (size_t)i * o->V, halo_session_logits(s, NULL), o->V * sizeof(float));
    }
    if (!st && !halo_backend_cuda_graph_stats(e->be, &o->st)) st = HALO_E_UNSUPPORTED;
    if (!st) o->req_all = o->st.scratch_requests;
    if (st) fprintf(stderr, "  fault run, graphs %s: %s\n", graphs ? "on" : "off", err.message);
    CHECK_INT(st, HALO_OK);
    halo_session_free(s);
    halo_engine_close(e);
    return st == HALO_OK;
}

/* A failing op inside a captured decode step fails that step with the op's error (never a
 * crash, never logits): the session stays where it was, the step evaluated again succeeds, the
 * steps before it are bitwise the eager ones and those after within rounding of them (the
 * session rebuilt its state by evaluating its tokens again, in other chunks). */
static void a_failure_inside_a_captured_step_fails_only_that_step(void) {
    fault_out ref = {0}, got = {0};
    /* Count the scratch requests (a fail_at never reached), then aim at mid-decode. */
    if (fault_run(false, "1000000000000", &ref)) {
        CHECK_INT(ref.failed_at, -1);
        char at[32];
        snprintf(at, sizeof at, "%llu",
                 (unsigned long long)(ref.req_prefill + (ref.req_all - ref.req_prefill) / 2 + 1));
        if (fault_run(true, at, &got)) {
            CHECK(got.failed_at > 0);
            CHECK_INT(got.fail_status, HALO_E_NOMEM);
            CHECK_CONTAINS(got.fail.message, "out of memory for");
            /* the steps before it ran as graphs, so the failure hit a captured step */
            CHECK(got.st.graph_steps >= (uint64_t)got.failed_at);
            double worst = 0;
            for (int i = 0; got.failed_at >= 0 && i < FAULT_DECODE; i++) {
                const float *a = ref.rows + (size_t)i * ref.V, *b = got.rows + (size_t)i * ref.V;
                if (i < got.failed_at) {
                    CHECK(!memcmp(a, b, ref.V * sizeof(float)));
                    continue;
                }
                float lo = a[0], hi = a[0];
                double md = 0;
                for (uint32_t j = 0; j < ref.V; j++) {
                    lo = a[j] < lo ? a[j] : lo;
                    hi = a[j] > hi ? a[j] : hi;
                    double d = a[j] > b[j] ? (double)a[j] - b[j] : (double)b[j] - a[j];
                    md = d > md ? d : md;
                }
                double rel = md / (hi - lo > 0 ? hi - lo : 1);
                worst = rel > worst ? rel : worst;
            }
            printf("  failed at decode step %d (scratch request %s); after it: max rel %.2e "
                   "against eager\n",
                   got.failed_at, at, worst);
            CHECK(worst <= 1e-3);
        }
    }
    free(ref.rows);
    free(got.rows);
}

int main(void) {
    halo_backend *probe = NULL;
    halo_error err = {0};
    unsetenv("HALO_CUDA_GRAPHS"); /* the default: on */
    if (halo_backend_cuda_create(0, &probe, &err)) {
        printf("skipped: no GPU backend here: %s\n", err.message);
        return 77;
    }
    halo_cuda_graph_stats st;
    bool ours = halo_backend_cuda_graph_stats(probe, &st);
    probe->ops->destroy(probe);
    if (!ours || !st.enabled) {
        printf("skipped: this build runs the GPU eagerly (HIP, HALO_CUDA_PROFILE or "
               "HALO_CUDA_NAIVE)\n");
        return 77;
    }
    RUN(graph_replay_equals_eager_on_the_embedded_model);
    RUN(graph_replay_equals_eager_with_two_sequences_per_step);
    RUN(graph_replay_equals_eager_at_full_width);
    RUN(graph_replay_equals_eager_in_fast_mode);
    RUN(a_failure_inside_a_captured_step_fails_only_that_step);
    return check_report();
}

#else

int main(void) {
    printf("skipped: this halo was built without a GPU backend\n");
    return 77;
}

#endif
