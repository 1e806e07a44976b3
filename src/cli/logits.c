/* `halo logits -m MODEL --tokens IN.i32 --out OUT.f32 [--ctx N] [--chunk N] [--threads N]`:
 * evaluates little-endian int32 token ids and writes f32 logits for every position, row-major
 * [n_tokens x n_vocab]. For diagnostics and comparisons with reference implementations. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/stream_opts.h"
#include "halo/halo.h"

static void usage(FILE *out) {
    fprintf(out, "usage: halo logits -m MODEL --tokens IN.i32 --out OUT.f32 [--ctx N] [--chunk N]"
                 " [--threads N] [--precise]\n"
                 "  Writes f32 logits of every position, [n_tokens x n_vocab] row-major.\n"
                 "  --ctx N      context size (default: the number of tokens)\n"
                 "  --chunk N    evaluate N tokens per step (default: all at once)\n"
                 "  --threads N  CPU threads (default: one per core)\n"
                 "  --precise    f32 activations for quantized weights (no integer dots)\n"
                 "  --backend B  cpu|cuda|vulkan|auto (default cpu)\n" CLI_STREAM_USAGE);
}

/* Strict unsigned parse: digits only, no overflow. */
static bool parse_u32(const char *s, uint32_t *out) {
    if (!s || !*s) return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end || errno || v > UINT32_MAX || s[0] == '-') return false;
    *out = (uint32_t)v;
    return true;
}

static int32_t *read_tokens(const char *path, uint32_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "halo logits: cannot open %s: %s\n", path, strerror(errno));
        return NULL;
    }
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    if (size <= 0 || size % 4 != 0) {
        fprintf(stderr, "halo logits: %s: %ld bytes is not a non-empty list of int32 ids\n", path,
                size);
        fclose(f);
        return NULL;
    }
    int32_t *tokens = malloc((size_t)size);
    *n = (uint32_t)(size / 4);
    if (!tokens || fread(tokens, 4, *n, f) != *n) {
        fprintf(stderr, "halo logits: cannot read %s\n", path);
        free(tokens);
        tokens = NULL;
    }
    fclose(f);
    return tokens;
}

int cli_logits(int argc, char **argv) {
    const char *model = NULL, *in = NULL, *outp = NULL, *backend = NULL;
    uint32_t ctx = 0, chunk = 0, threads = 0;
    bool precise = false;
    cli_stream_opts so = {0};
    int r;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        bool ok = true;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model")) ok = (model = v) != NULL, i++;
        else if (!strcmp(a, "--tokens")) ok = (in = v) != NULL, i++;
        else if (!strcmp(a, "--out")) ok = (outp = v) != NULL, i++;
        else if (!strcmp(a, "--ctx")) ok = parse_u32(v, &ctx), i++;
        else if (!strcmp(a, "--chunk")) ok = parse_u32(v, &chunk), i++;
        else if (!strcmp(a, "--threads")) ok = parse_u32(v, &threads), i++;
        else if (!strcmp(a, "--precise")) precise = true;
        else if (!strcmp(a, "--backend")) ok = (backend = v) != NULL, i++;
        else if ((r = cli_stream_option("logits", argc, argv, &i, &so)) != 0) {
            if (r < 0) return 2;
        } else {
            fprintf(stderr, "halo logits: unknown option '%s'\n", a);
            usage(stderr);
            return 2;
        }
        if (!ok) {
            fprintf(stderr, "halo logits: option '%s' needs a %s\n", a,
                    strcmp(a, "-m") && strcmp(a, "--model") && strcmp(a, "--tokens") &&
                            strcmp(a, "--out") && strcmp(a, "--backend") &&
                            strcmp(a, "--weights") ? "non-negative integer" : "value");
            return 2;
        }
    }
    if (!model || !in || !outp) {
        usage(stderr);
        return 2;
    }
    uint32_t n = 0;
    int32_t *tokens = read_tokens(in, &n);
    if (!tokens) return 1;
    if (!ctx) ctx = n;
    if (!chunk) chunk = n;
    halo_engine *e = NULL;
    halo_session *s = NULL;
    halo_error err;
    halo_engine_params p = {.model_path = model, .threads = threads, .precise = precise,
                            .n_ctx = ctx, .backend = backend};
    cli_stream_params(&so, &p);
    int rc = 1;
    FILE *f = NULL;
    if (halo_engine_open(&p, &e, &err) || (cli_stream_report("logits", e, false),
                                               halo_session_create(e, ctx, &s, &err))) {
        fprintf(stderr, "halo logits: %s\n", err.message);
        goto done;
    }
    f = fopen(outp, "wb");
    if (!f) {
        fprintf(stderr, "halo logits: cannot create %s: %s\n", outp, strerror(errno));
        goto done;
    }
    for (uint32_t at = 0; at < n; at += chunk) {
        uint32_t m = n - at < chunk ? n - at : chunk;
        if (halo_session_eval(s, tokens + at, m, true, &err)) {
            fprintf(stderr, "halo logits: %s\n", err.message);
            goto done;
        }
        uint32_t rows;
        const float *l = halo_session_logits(s, &rows);
        if (fwrite(l, sizeof(float) * halo_engine_n_vocab(e), rows, f) != rows) {
            fprintf(stderr, "halo logits: write to %s failed\n", outp);
            goto done;
        }
    }
    cli_stream_report("logits", e, true);
    rc = 0;
done:
    if (f && fclose(f) != 0 && rc == 0) {
        fprintf(stderr, "halo logits: write to %s failed\n", outp);
        rc = 1;
    }
    halo_session_free(s);
    halo_engine_close(e);
    free(tokens);
    return rc;
}
