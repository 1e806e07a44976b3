/* halo's CPU prefill and decode speed on a model, for comparison with llama-bench run the same
 * way (bench/cpu/run.sh). usage: bench_cpu MODEL [PROMPT_TOKENS] [DECODE_TOKENS] [THREADS]
 * Prints "pp<N> <tok/s>" and "tg<N> <tok/s>"; tokens are a fixed pseudo-random sequence. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "halo/halo.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL [PROMPT_TOKENS] [DECODE_TOKENS] [THREADS]\n", argv[0]);
        return 2;
    }
    uint32_t pp = argc > 2 ? (uint32_t)atoi(argv[2]) : 512;
    uint32_t tg = argc > 3 ? (uint32_t)atoi(argv[3]) : 32;
    uint32_t threads = argc > 4 ? (uint32_t)atoi(argv[4]) : 0;
    halo_engine_params p = {.model_path = argv[1], .threads = threads};
    halo_engine *e = NULL;
    halo_session *s = NULL;
    halo_error err;
    double t0 = now();
    if (halo_engine_open(&p, &e, &err) || halo_session_create(e, pp + tg, &s, &err)) {
        fprintf(stderr, "bench_cpu: %s\n", err.message);
        return 1;
    }
    double t_load = now() - t0;
    uint32_t V = halo_engine_n_vocab(e);
    int32_t *tok = malloc((pp + tg) * sizeof *tok);
    for (uint32_t i = 0; i < pp + tg; i++) tok[i] = (int32_t)((i * 2654435761u) % V);
    t0 = now();
    if (halo_session_eval(s, tok, pp, false, &err)) {
        fprintf(stderr, "bench_cpu: %s\n", err.message);
        return 1;
    }
    double t_pp = now() - t0;
    t0 = now();
    for (uint32_t i = 0; i < tg; i++)
        if (halo_session_eval(s, tok + pp + i, 1, false, &err)) {
            fprintf(stderr, "bench_cpu: %s\n", err.message);
            return 1;
        }
    double t_tg = now() - t0;
    printf("load %.2f s\npp%u %.2f tok/s\ntg%u %.2f tok/s\n", t_load, pp, pp / t_pp, tg,
           tg / t_tg);
    free(tok);
    halo_session_free(s);
    halo_engine_close(e);
    return 0;
}
