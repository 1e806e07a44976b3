/* halo's CPU prefill and decode speed on a model, for comparison with llama-bench run the same
 * way (bench/cpu/run.sh). usage: bench_cpu MODEL [PROMPT_TOKENS] [DECODE_TOKENS] [THREADS] [REPS]
 * PROMPT_TOKENS may be a comma list (128,512). Each repetition prefills each prompt length in
 * one batch into a fresh session ("pp<N> <tok/s>"),
 * then decodes DECODE_TOKENS one at a time into another fresh session, from an empty context
 * as llama-bench's tg test does ("tg<N> <tok/s>"); a phase of 0 tokens is skipped. The model is
 * loaded once; tokens are a fixed pseudo-random sequence. Before the first repetition's runs,
 * unless HALO_BENCH_WARMUP=0, each test is warmed up as llama-bench warms up its tests (the
 * same prompt once, one decoded token), untimed. HALO_BENCH_TOKENS=1 prints each decoded
 * token's milliseconds to stderr. BENCH_AB="0:0,8192:0,row512/8192:0" cycles the repetitions
 * through one-token kernel settings ([row512/]Q8_0 prefetch bytes:IQ2_XXS/Q2_K prefetch bytes,
 * src/quant/kernels.h), so a decode A/B runs within one process (on this shared VM processes
 * run at one of two speeds). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "halo/halo.h"
#include "quant/kernels.h"

enum { MAX_AB = 8 };
typedef struct ab_variant {
    halo_q8_row1_mode mode;
    int q8_pf, row_pf;
} ab_variant;

/* Parses BENCH_AB (see the top); returns the number of variants. */
static int parse_ab(const char *s, ab_variant *v) {
    int n = 0;
    while (s && *s && n < MAX_AB) {
        v[n].mode = HALO_Q8_ROW256;
        if (!strncmp(s, "row512/", 7)) {
            v[n].mode = HALO_Q8_ROW512;
            s += 7;
        }
        char *end;
        v[n].q8_pf = (int)strtol(s, &end, 10);
        v[n].row_pf = *end == ':' ? (int)strtol(end + 1, &end, 10) : 0;
        n++;
        s = *end == ',' ? end + 1 : NULL;
    }
    return n;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int fail(const halo_error *err) {
    fprintf(stderr, "bench_cpu: %s\n", err->message);
    return 1;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL [PROMPT_TOKENS] [DECODE_TOKENS] [THREADS] [REPS]\n",
                argv[0]);
        return 2;
    }
    uint32_t pps[8], n_pp = 0, pp = 0;
    for (char *c = argc > 2 ? argv[2] : "512"; *c && n_pp < 8; c += *c == ',') {
        pps[n_pp] = (uint32_t)strtoul(c, &c, 10);
        if (pps[n_pp] > pp) pp = pps[n_pp];
        n_pp += pps[n_pp] > 0;
        if (*c && *c != ',') break;
    }
    uint32_t tg = argc > 3 ? (uint32_t)atoi(argv[3]) : 32;
    uint32_t threads = argc > 4 ? (uint32_t)atoi(argv[4]) : 0;
    int reps = argc > 5 ? atoi(argv[5]) : 1;
    const char *pt = getenv("HALO_BENCH_TOKENS"); /* each decode token's ms, to stderr */
    int per_token = pt && *pt && *pt != '0';
    halo_engine_params p = {.model_path = argv[1], .threads = threads};
    halo_engine *e = NULL;
    halo_error err;
    double t0 = now();
    if (halo_engine_open(&p, &e, &err)) return fail(&err);
    printf("load %.2f s\n", now() - t0);
    uint32_t V = halo_engine_n_vocab(e);
    int32_t *tok = malloc((pp + tg + 1) * sizeof *tok);
    for (uint32_t i = 0; i < pp + tg; i++)
        tok[i] = (int32_t)((i * 2654435761u) % V);
    /* As llama-bench does before each test unless --no-warmup (HALO_BENCH_WARMUP=0 here): a
     * prompt run of the same length into its own session, and one decoded token. */
    const char *wu = getenv("HALO_BENCH_WARMUP");
    bool warmup = !wu || !*wu || *wu != '0';
    ab_variant ab[MAX_AB];
    int n_ab = parse_ab(getenv("BENCH_AB"), ab);
    char tag[64] = "";
    for (int r = 0; r < reps; r++) {
        if (n_ab) {
            const ab_variant *v = &ab[r % n_ab];
            halo_quant_set_one_token(v->mode, v->q8_pf, v->row_pf);
            snprintf(tag, sizeof tag, " [%s q8pf %d rowpf %d]",
                     v->mode == HALO_Q8_ROW512 ? "row512" : "row256", v->q8_pf, v->row_pf);
        }
        halo_session *s = NULL;
        for (uint32_t k = 0; k < n_pp; k++) {
            for (int w = warmup && r == 0 ? 0 : 1; w < 2; w++) {
                if (halo_session_create(e, pps[k], &s, &err)) return fail(&err);
                t0 = now();
                if (halo_session_eval(s, tok, pps[k], false, &err)) return fail(&err);
                if (w) printf("pp%u %.2f tok/s%s\n", pps[k], pps[k] / (now() - t0), tag);
                halo_session_free(s);
            }
        }
        if (tg) {
            if (warmup && r == 0) {
                if (halo_session_create(e, 1, &s, &err)) return fail(&err);
                if (halo_session_eval(s, tok + pp, 1, false, &err)) return fail(&err);
                halo_session_free(s);
            }
            if (halo_session_create(e, tg, &s, &err)) return fail(&err);
            t0 = now();
            for (uint32_t i = 0; i < tg; i++) {
                double t1 = now();
                if (halo_session_eval(s, tok + pp + i, 1, false, &err)) return fail(&err);
                if (per_token)
                    fprintf(stderr, "%s%.1f", i ? " " : "token ms: ", (now() - t1) * 1e3);
            }
            if (per_token) fprintf(stderr, "\n");
            printf("tg%u %.2f tok/s%s\n", tg, tg / (now() - t0), tag);
            halo_session_free(s);
        }
        fflush(stdout);
    }
    free(tok);
    halo_engine_close(e);
    return 0;
}
