/* `halo serve -m MODEL`: the OpenAI and Anthropic HTTP APIs (src/serve). Listens first (with
 * /health answering 503 while the weights load), then serves until SIGINT or SIGTERM. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_cache.h"
#include "cli/load_progress.h"
#include "cli/run.h"
#include "cli/stream_opts.h"
#include "halo/cache.h"
#include "halo/load.h"
#include "serve/admit.h"
#include "serve/serve.h"

static void usage(FILE *out) {
    fprintf(
        out,
        "usage: halo serve [-m MODEL] [options]\n"
        "  Serves the model over HTTP: OpenAI (/v1/chat/completions, /v1/completions,\n"
        "  /v1/responses, /v1/models) and Anthropic (/v1/messages,\n"
        "  /v1/messages/count_tokens) APIs, /health and /metrics. See docs/serve.md.\n"
        "  -m, --model PATH      GGUF model (default: $HALO_MODEL, else models/*.gguf)\n"
        "  --host ADDR           address to listen on (default 127.0.0.1)\n"
        "  --port N              port (default 8080; 0 picks a free one)\n"
        "  -np, --parallel N     requests run at once, each in its own slot (default 1)\n"
        "  --ctx N               context size of each slot (default 4096 or the model's)\n"
        "  --api-key KEY         require this key (Authorization: Bearer or x-api-key)\n"
        "  --api-key-file F      read the key from the file's first line\n"
        "  --cors ORIGIN         allow browser requests from ORIGIN ('*' for any)\n"
        "  --queue N             requests waiting for a slot before 429 (default 64)\n"
        "  --max-body BYTES      largest request body (default 33554432)\n"
        "  --max-conn N          concurrent connections (default 256)\n"
        "  --keepalive S         SSE comment after S idle seconds, 0.1 or more (default 5)\n"
        "  --alias NAME          the model id /v1/models lists (default: file name)\n"
        "  --cache-ram SIZE      prefix cache in RAM: ended requests' states, for any slot\n"
        "  --kv-dir DIR [--kv-dir-size SIZE]  prefix cache on disk (kept across restarts)\n"
        "  --threads N           CPU threads (default: one per core)\n"
        "  --backend B           cpu|cuda|vulkan|auto, as for halo run (default cpu)\n"
        CLI_STREAM_USAGE
        "  --tokenizer GGUF      take the tokenizer and chat format from another GGUF (for\n"
        "                        synthetic models without a vocabulary, in benchmarks)\n"
        "  --test-hooks          accept \"halo_test_reply\" in requests (tests only)\n");
}

/* The stream loop wakes every 100 ms, so a shorter interval would not be kept. */
static bool parse_seconds(const char *s, double *out) {
    char *end;
    errno = 0;
    double v = s && *s ? strtod(s, &end) : 0;
    if (!s || !*s || *end || errno || !(v >= 0.1 && v <= 86400)) return false;
    *out = v;
    return true;
}

static bool parse_size(const char *s, size_t *out) {
    if (!s || !*s || s[0] == '-') return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end || errno) return false;
    *out = (size_t)v;
    return true;
}

static char *read_key(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "halo serve: cannot open --api-key-file %s: %s\n", path, strerror(errno));
        return NULL;
    }
    char line[4096];
    char *key = fgets(line, sizeof line, f) ? strdup(line) : NULL;
    fclose(f);
    if (key) key[strcspn(key, "\r\n")] = 0;
    if (!key || !*key) {
        fprintf(stderr, "halo serve: --api-key-file %s: the first line is empty\n", path);
        free(key);
        return NULL;
    }
    return key;
}

static char *model_id(const char *path) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t n = strlen(base);
    if (n > 5 && !strcmp(base + n - 5, ".gguf")) n -= 5;
    return strndup(base, n);
}

int cli_serve(int argc, char **argv) {
    cli_common c;
    cli_common_init(&c);
    serve_http_params hp = {.host = "127.0.0.1",
                            .port = 8080,
                            .max_body = 32u << 20,
                            .max_conn = 256,
                            .keepalive_s = 5};
    uint32_t n_slots = 1, queue = 64, port = 8080, conns = 256;
    cli_cache cc = {0};
    const char *key_file = NULL, *alias = NULL, *tokenizer = NULL;
    char *key = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        bool ok = true;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        }
        int sr = cli_stream_option("serve", argc, argv, &i, &c.stream);
        if (!sr) sr = cli_cache_option("serve", argc, argv, &i, &cc);
        if (sr < 0) {
            free(key);
            return 2;
        }
        if (sr > 0) continue;
        if (!strcmp(a, "-m") || !strcmp(a, "--model"))
            ok = (c.model = v) != NULL;
        else if (!strcmp(a, "--host"))
            ok = (hp.host = v) != NULL;
        else if (!strcmp(a, "--port"))
            ok = cli_parse_u32(v, &port) && port <= 65535;
        else if (!strcmp(a, "-np") || !strcmp(a, "--parallel"))
            ok = cli_parse_u32(v, &n_slots) && n_slots >= 1 && n_slots <= 256;
        else if (!strcmp(a, "--ctx"))
            ok = cli_parse_u32(v, &c.ctx) && c.ctx > 0;
        else if (!strcmp(a, "--threads"))
            ok = cli_parse_u32(v, &c.threads);
        else if (!strcmp(a, "--backend"))
            ok = (c.backend = v) != NULL;
        else if (!strcmp(a, "--api-key"))
            ok = v && *v && (key = strdup(v)) != NULL;
        else if (!strcmp(a, "--api-key-file"))
            ok = (key_file = v) != NULL;
        else if (!strcmp(a, "--cors"))
            ok = (hp.cors = v) != NULL;
        else if (!strcmp(a, "--queue"))
            ok = cli_parse_u32(v, &queue);
        else if (!strcmp(a, "--max-body"))
            ok = parse_size(v, &hp.max_body) && hp.max_body > 0;
        else if (!strcmp(a, "--max-conn"))
            ok = cli_parse_u32(v, &conns) && conns > 0;
        else if (!strcmp(a, "--keepalive"))
            ok = parse_seconds(v, &hp.keepalive_s);
        else if (!strcmp(a, "--alias"))
            ok = (alias = v) != NULL;
        else if (!strcmp(a, "--tokenizer"))
            ok = (tokenizer = v) != NULL;
        else if (!strcmp(a, "--test-hooks")) {
            hp.mi.test_hooks = true;
            continue;
        } else {
            fprintf(stderr, "halo serve: unknown option '%s'\n", a);
            usage(stderr);
            free(key);
            return 2;
        }
        if (!ok) {
            fprintf(stderr, "halo serve: bad or missing value after '%s'\n", a);
            free(key);
            return 2;
        }
        i++;
    }
    if (key_file) {
        free(key);
        if (!(key = read_key(key_file))) return 1;
    }
    hp.api_key = key;
    hp.port = (uint16_t)port;
    hp.max_conn = conns;

    /* Signals are taken by sigwait below; block them before any thread starts. */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    /* With --tokenizer, the tokenizer (and the training context the context is checked
     * against) come from that file; the weights from -m. */
    if (!c.model) c.model = cli_default_model();
    const char *weights = c.model;
    if (tokenizer) c.model = tokenizer;
    cli_model m;
    int rc = cli_open("serve", &c, &m);
    c.model = weights;
    if (!rc && !weights) {
        fprintf(stderr, "halo serve: no model: pass -m MODEL (or set HALO_MODEL)\n");
        cli_close(&m);
        rc = 2;
    }
    if (rc) {
        free(key);
        return rc;
    }
    char *name = alias ? strdup(alias) : model_id(c.model);
    hp.mi.tok = m.tok;
    hp.mi.format = m.format;
    hp.mi.add_bos = m.add_bos;
    hp.mi.n_ctx = m.n_ctx;
    hp.mi.name = name ? name : "halo";
    serve_http *http = NULL;
    serve_sched *sched = NULL;
    halo_error err = {0};
    uint16_t bound = 0;
    rc = 1;
    halo_engine_params ep = {
        .model_path = c.model,
        .threads = c.threads,
        .n_ctx = m.n_ctx,
        .n_seq = n_slots,
        .backend = c.backend};
    cli_stream_params(&c.stream, &ep);
    /* Every slot's context planned before anything listens or loads. */
    char planned[256];
    uint64_t host_left = 0, ckpt_bytes = 0;
    if (serve_admit(&ep, n_slots, m.n_ctx, planned, sizeof planned, &host_left, &err)) {
        fprintf(stderr, "halo serve: %s\n", err.message);
        goto done;
    }
    /* The plan holds the weights and the slots' state; the prefix cache's RAM and the slots'
     * checkpoints come out of what it leaves, so together they cannot run the host out. */
    if (!serve_split_host(host_left, cc.ram_bytes, n_slots, HALO_CHECKPOINT_DEFAULT_BYTES,
                          &ckpt_bytes)) {
        fprintf(stderr,
                "halo serve: --cache-ram %.2f GiB does not fit: the weights and %u slot%s leave "
                "%.2f GiB\n",
                (double)cc.ram_bytes / (1 << 30), n_slots, n_slots == 1 ? "" : "s",
                (double)host_left / (1 << 30));
        goto done;
    }
    if (*planned)
        fprintf(stderr, "halo serve: %s; checkpoints up to %.1f MiB per slot\n", planned,
                (double)ckpt_bytes / (1 << 20));
    if (serve_http_start(&hp, &http, &bound, &err)) {
        fprintf(stderr, "halo serve: %s\n", err.message);
        goto done;
    }
    fprintf(stderr, "halo serve: listening on http://%s:%u (loading %s)\n", hp.host, bound,
            c.model);
    if (halo_engine_open_progress(&ep, cli_load_progress, "serve", &m.engine, &err)) {
        fprintf(stderr, "halo serve: %s\n", err.message);
        goto done;
    }
    cli_stream_report("serve", m.engine, false);
    if (halo_tokenizer_n_vocab(m.tok) > halo_engine_n_vocab(m.engine)) {
        fprintf(stderr, "halo serve: %s: the tokenizer has more tokens than the model\n", c.model);
        goto done;
    }
    if (cli_cache_open("serve", &cc, m.engine)) goto done;
    serve_sched_params sp = {.engine = m.engine,
                             .tok = m.tok,
                             .n_slots = n_slots,
                             .n_ctx = m.n_ctx,
                             .queue_max = queue,
                             .ckpt_bytes = ckpt_bytes,
                             .cache = cc.cache};
    if (serve_sched_start(&sp, &sched, &err)) {
        fprintf(stderr, "halo serve: %s\n", err.message);
        goto done;
    }
    serve_http_ready(http, sched);
    fprintf(stderr, "halo serve: ready: model \"%s\", %u slot%s of %u tokens\n", hp.mi.name,
            n_slots, n_slots == 1 ? "" : "s", m.n_ctx);
    int sig = 0;
    sigwait(&sigs, &sig);
    fprintf(stderr, "halo serve: stopping (%s)\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    rc = 0;
done:
    /* Connections first (their sockets close, so waiting requests cancel), then the slots. */
    serve_http_stop(http);
    serve_sched_stop(sched);
    cli_cache_close(&cc); /* after the slots' last states went in; waits for disk writes */
    cli_close(&m);
    free(name);
    free(key);
    return rc;
}
