/* `halo run -m MODEL -p PROMPT [options]`: one prompt in, streamed text out, then one line with
 * the speed. The prompt goes through DeepSeek V4's chat encoding unless --raw; either way it is
 * text (token text in it stays text) unless --raw --special asks for control tokens. */
#include <errno.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/cli_cache.h"
#include "cli/load_progress.h"
#include "cli/run.h"
#include "core/threadpool.h"
#include "halo/halo.h"
#include "halo/load.h"
#include "halo/sample.h"
#include "halo/text.h"

#define DEFAULT_CTX 4096

static void usage(FILE *out) {
    fprintf(out,
            "usage: halo run [-m MODEL] (-p PROMPT | -p - | -f FILE) [options]\n"
            "  Generates a reply to PROMPT, streaming it to stdout, then prints a line with the\n"
            "  prompt and generated token counts and speeds to stderr.\n"
            "  -m, --model PATH     GGUF model (default: $HALO_MODEL, else models/*.gguf)\n"
            "  -p, --prompt TEXT    the prompt; '-' reads it from stdin\n"
            "  -f, --file PATH      read the prompt from a file\n"
            "  -n, --n-predict N    generate at most N tokens (default: until the model stops)\n"
            "  --system TEXT        system prompt (chat encoding only)\n"
            "  --think | --nothink | --think-max\n"
            "                       thinking mode (default --nothink)\n"
            "  --raw                no chat encoding: BOS (when the model adds one) + the prompt\n"
            "  --special            with --raw: control tokens written in the prompt\n"
            "                       (<｜User｜>, <think>, ...) become tokens; without it they\n"
            "                       are text, as they always are in chat-encoded prompts\n"
            "  --temp T             temperature (default 1; 0 is greedy)\n"
            "  --top-k K            keep the K most likely tokens (default 0: off)\n"
            "  --top-p P            nucleus sampling (default 1: off)\n"
            "  --min-p P            drop tokens below P x the best one's probability "
            "(default 0.05)\n"
            "  --repeat-penalty R   penalise the last 64 tokens (default 1: off)\n"
            "  --frequency-penalty F, --presence-penalty F   (default 0)\n"
            "  --seed S             sampling seed (default: from the clock)\n"
            "  --ignore-eos         keep generating past the end-of-turn token\n"
            "  --ctx N              context size (default: %d or the model's, if smaller)\n"
            "  --threads N          CPU threads (default and most: the cores available)\n"
            "  --backend B          cpu|cuda|vulkan|auto (default cpu; auto: the GPU when usable)\n"
            "  --prompt-cache FILE  reuse the prompt's state saved in FILE, save it there\n"
            "  --kv-dir DIR [--kv-dir-size SIZE]   prefix cache on disk (default size 16G)\n"
            CLI_STREAM_USAGE,
            DEFAULT_CTX);
}

/* ---- shared with chat.c (run.h) ---------------------------------------------------------- */

bool cli_parse_u32(const char *s, uint32_t *out) {
    if (!s || !*s || s[0] == '-') return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end || errno || v > UINT32_MAX) return false;
    *out = (uint32_t)v;
    return true;
}

static bool parse_float(const char *s, float *out) {
    if (!s || !*s) return false;
    char *end;
    errno = 0;
    float v = strtof(s, &end);
    if (*end || errno) return false;
    *out = v;
    return true;
}

static bool parse_u64(const char *s, uint64_t *out) {
    if (!s || !*s || s[0] == '-') return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end || errno) return false;
    *out = v;
    return true;
}

const char *cli_default_model(void) {
    static char path[4096];
    const char *env = getenv("HALO_MODEL");
    if (env && *env) return env;
    glob_t g;
    if (glob("models/*.gguf", 0, NULL, &g) == 0 && g.gl_pathc > 0) {
        snprintf(path, sizeof path, "%s", g.gl_pathv[0]);
        globfree(&g);
        return path;
    }
    globfree(&g);
    return NULL;
}

int cli_common_option(const char *cmd, int argc, char **argv, int *i, cli_common *c) {
    const char *a = argv[*i], *v = *i + 1 < argc ? argv[*i + 1] : NULL;
    bool ok;
    const char *want = "number";
    int sr = cli_stream_option(cmd, argc, argv, i, &c->stream);
    if (sr) return sr;
    if (!strcmp(a, "-m") || !strcmp(a, "--model"))
        ok = (c->model = v) != NULL, want = "path";
    else if (!strcmp(a, "--temp"))
        ok = parse_float(v, &c->sp.temperature);
    else if (!strcmp(a, "--top-k"))
        ok = cli_parse_u32(v, &c->sp.top_k), want = "non-negative integer";
    else if (!strcmp(a, "--top-p"))
        ok = parse_float(v, &c->sp.top_p);
    else if (!strcmp(a, "--min-p"))
        ok = parse_float(v, &c->sp.min_p);
    else if (!strcmp(a, "--repeat-penalty"))
        ok = parse_float(v, &c->sp.repeat_penalty);
    else if (!strcmp(a, "--frequency-penalty"))
        ok = parse_float(v, &c->sp.frequency_penalty);
    else if (!strcmp(a, "--presence-penalty"))
        ok = parse_float(v, &c->sp.presence_penalty);
    else if (!strcmp(a, "--seed"))
        ok = parse_u64(v, &c->sp.seed) && (c->seed_set = true), want = "non-negative integer";
    else if (!strcmp(a, "--ctx"))
        ok = cli_parse_u32(v, &c->ctx) && c->ctx > 0, want = "positive integer";
    else if (!strcmp(a, "--threads"))
        ok = cli_parse_u32(v, &c->threads), want = "non-negative integer";
    else if (!strcmp(a, "--backend"))
        ok = (c->backend = v) != NULL, want = "backend name";
    else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict"))
        ok = cli_parse_u32(v, &c->n_predict), want = "non-negative integer";
    else if (!strcmp(a, "--system"))
        ok = (c->system = v) != NULL, want = "text value";
    else if (!strcmp(a, "--think"))
        return c->thinking = HALO_THINK_HIGH, 1;
    else if (!strcmp(a, "--think-max"))
        return c->thinking = HALO_THINK_MAX, 1;
    else if (!strcmp(a, "--nothink"))
        return c->thinking = HALO_THINK_NONE, 1;
    else if (!strcmp(a, "--ignore-eos"))
        return c->ignore_eos = true, 1;
    else
        return 0;
    if (!ok) {
        fprintf(stderr, "halo %s: option '%s' needs a %s\n", cmd, a, want);
        return -1;
    }
    (*i)++;
    return 1;
}

void cli_common_init(cli_common *c) {
    memset(c, 0, sizeof *c);
    c->sp = halo_sampler_defaults();
}

static void prefix_path(halo_error *err, const char *path) {
    char msg[sizeof err->message + 4096];
    int n = snprintf(msg, sizeof msg, "%s: %s", path, err->message);
    size_t len = n < 0 ? 0 : (size_t)n < sizeof err->message ? (size_t)n : sizeof err->message - 1;
    memcpy(err->message, msg, len);
    err->message[len] = 0;
}

/* The model's training context from its metadata (<arch>.context_length), 0 if absent. */
static uint32_t ctx_train_of(const halo_gguf *g) {
    const char *arch = NULL;
    char key[128];
    uint32_t v = 0;
    if (halo_gguf_find_kv(g, "general.architecture") &&
        !halo_gguf_get_str(g, "general.architecture", &arch, NULL)) {
        snprintf(key, sizeof key, "%s.context_length", arch);
        if (halo_gguf_find_kv(g, key) && halo_gguf_get_u32(g, key, &v, NULL)) v = 0;
    }
    return v;
}

int cli_open(const char *cmd, cli_common *c, cli_model *m) {
    memset(m, 0, sizeof *m);
    if (!c->model) c->model = cli_default_model();
    if (!c->model) {
        fprintf(stderr, "halo %s: no model: pass -m MODEL (or set HALO_MODEL)\n", cmd);
        return 2;
    }
    if (!c->seed_set) c->sp.seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
    /* Threads beyond the cores only wait for each other (the pool's threads spin while they
     * wait): 1,000 threads on 2 cores decoded 300x slower than 2. */
    uint32_t cores = halo_threadpool_cores();
    if (c->threads > cores) {
        fprintf(stderr,
                "halo %s: --threads %u is more than the %u core%s this process may run on: "
                "using %u threads\n",
                cmd, c->threads, cores, cores == 1 ? "" : "s", cores);
        c->threads = cores;
    }
    halo_error err = {0};
    halo_gguf *g = NULL;
    if (halo_gguf_open(c->model, &g, &err) || halo_tokenizer_load(g, &m->tok, &err)) {
        if (g) prefix_path(&err, c->model);
        fprintf(stderr, "halo %s: %s\n", cmd, err.message);
        halo_gguf_close(g);
        return 1;
    }
    m->format = halo_chat_format_of(g);
    bool add_bos = true;
    if (halo_gguf_find_kv(g, "tokenizer.ggml.add_bos_token"))
        halo_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &add_bos, NULL);
    m->add_bos = add_bos;
    uint32_t train = ctx_train_of(g);
    halo_gguf_close(g);
    /* Everything that can be refused is checked before the weights load (minutes for a real
     * model): sampler values, the context size. */
    halo_sampler *probe = NULL;
    if (halo_sampler_create(&c->sp, 1, &probe, &err)) {
        fprintf(stderr, "halo %s: %s\n", cmd, err.message);
        cli_close(m);
        return 1;
    }
    halo_sampler_free(probe);
    if (c->ctx > train && train) {
        fprintf(stderr, "halo %s: --ctx %u is beyond the model's training context of %u\n", cmd,
                c->ctx, train);
        cli_close(m);
        return 1;
    }
    m->n_ctx = c->ctx ? c->ctx : (train && train < DEFAULT_CTX ? train : DEFAULT_CTX);
    return 0;
}

int cli_load(const char *cmd, cli_common *c, cli_model *m) {
    halo_error err = {0};
    halo_engine_params ep = {.model_path = c->model, .threads = c->threads, .n_ctx = m->n_ctx,
                             .backend = c->backend};
    cli_stream_params(&c->stream, &ep);
    if (halo_engine_open_progress(&ep, cli_load_progress, (void *)cmd, &m->engine, &err)) {
        fprintf(stderr, "halo %s: %s\n", cmd, err.message);
        return 1;
    }
    cli_stream_report(cmd, m->engine, false);
    uint32_t n_vocab = halo_engine_n_vocab(m->engine), train = halo_engine_n_ctx_train(m->engine);
    if (halo_tokenizer_n_vocab(m->tok) > n_vocab) {
        fprintf(stderr,
                "halo %s: %s: the tokenizer has %u tokens but the model's vocabulary is %u\n", cmd,
                c->model, halo_tokenizer_n_vocab(m->tok), n_vocab);
        return 1;
    }
    if (train && m->n_ctx > train) {
        fprintf(stderr, "halo %s: the context of %u is beyond the model's training context of %u\n",
                cmd, m->n_ctx, train);
        return 1;
    }
    if (halo_session_create(m->engine, m->n_ctx, &m->session, &err) ||
        halo_sampler_create(&c->sp, n_vocab, &m->sampler, &err)) {
        fprintf(stderr, "halo %s: %s\n", cmd, err.message);
        return 1;
    }
    return 0;
}

void cli_close(cli_model *m) {
    halo_sampler_free(m->sampler);
    halo_session_free(m->session);
    halo_engine_close(m->engine);
    halo_tokenizer_free(m->tok);
    memset(m, 0, sizeof *m);
}

void cli_print_stats(const halo_gen_stats *st) {
    double pf = st->prefill_s > 0 ? st->n_prompt / st->prefill_s : 0;
    double dc = st->decode_s > 0 ? st->n_generated / st->decode_s : 0;
    fprintf(stderr,
            "prompt: %u tokens, %.2f tok/s prefill | generated: %u tokens, %.2f tok/s "
            "decode\n",
            st->n_prompt, pf, st->n_generated, dc);
}

bool cli_print_text(void *user, const char *text, size_t len) {
    bool *ends_with_newline = user;
    if (len) {
        fwrite(text, 1, len, stdout);
        fflush(stdout);
        *ends_with_newline = text[len - 1] == '\n';
    }
    return true;
}

/* ---- halo run ------------------------------------------------------------------------------ */

static char *read_all(FILE *f, size_t *len) {
    size_t cap = 4096, n = 0;
    char *s = malloc(cap);
    while (s) {
        n += fread(s + n, 1, cap - n, f);
        if (n < cap) break;
        char *t = realloc(s, cap *= 2);
        if (!t) free(s);
        s = t;
    }
    if (s && ferror(f)) {
        free(s);
        return NULL;
    }
    if (s) s[n] = 0;
    *len = n;
    return s;
}

static char *read_prompt(const char *prompt, const char *file, size_t *len) {
    if (prompt && strcmp(prompt, "-")) {
        *len = strlen(prompt);
        return strdup(prompt);
    }
    FILE *f = prompt ? stdin : fopen(file, "rb");
    if (!f) {
        fprintf(stderr, "halo run: cannot open %s: %s\n", file, strerror(errno));
        return NULL;
    }
    char *s = read_all(f, len);
    if (!s) fprintf(stderr, "halo run: cannot read %s\n", prompt ? "stdin" : file);
    if (f != stdin) fclose(f);
    return s;
}

int cli_run(int argc, char **argv) {
    cli_common c;
    cli_common_init(&c);
    const char *prompt = NULL, *file = NULL;
    bool raw = false, special = false;
    cli_cache cc = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        }
        int r = cli_common_option("run", argc, argv, &i, &c);
        if (r < 0) return 2;
        if (r > 0) continue;
        if ((r = cli_cache_option("run", argc, argv, &i, &cc))) {
            if (r < 0) return 2;
            continue;
        }
        if (!strcmp(a, "--raw"))
            raw = true;
        else if (!strcmp(a, "--special"))
            special = true;
        else if ((!strcmp(a, "-p") || !strcmp(a, "--prompt")) && i + 1 < argc)
            prompt = argv[++i];
        else if ((!strcmp(a, "-f") || !strcmp(a, "--file")) && i + 1 < argc)
            file = argv[++i];
        else {
            fprintf(stderr, "halo run: %s '%s'\n",
                    a[0] == '-' && strcmp(a, "-p") && strcmp(a, "-f") ? "unknown option"
                                                                      : "missing value after",
                    a);
            usage(stderr);
            return 2;
        }
    }
    if (!prompt == !file) {
        fprintf(stderr, "halo run: give the prompt with one of -p PROMPT, -p - or -f FILE\n");
        return 2;
    }
    if (special && !raw) {
        fprintf(stderr, "halo run: --special needs --raw (the chat encoding keeps the prompt as "
                        "text, always)\n");
        return 2;
    }
    size_t len = 0;
    char *text = read_prompt(prompt, file, &len);
    if (!text) return 1;
    if (len == 0) {
        fprintf(stderr, "halo run: the prompt is empty\n");
        free(text);
        return 1;
    }
    char *clean = NULL;
    size_t bad = 0;
    halo_error err = {0};
    if (halo_utf8_sanitize(text, len, &clean, &len, &bad, &err)) {
        fprintf(stderr, "halo run: %s\n", err.message);
        free(text);
        return 1;
    }
    free(text);
    if (bad)
        fprintf(stderr,
                "halo run: the prompt is not valid UTF-8: replaced %zu invalid "
                "sequence%s with U+FFFD\n",
                bad, bad == 1 ? "" : "s");

    cli_model m;
    int rc = cli_open("run", &c, &m);
    if (rc) {
        free(clean);
        return rc;
    }
    halo_tokens ids = {0};
    halo_status st;
    if (raw) {
        /* BOS when the model adds one, unless the prompt spells it already (--special). */
        int32_t bos = halo_tokenizer_bos(m.tok);
        st = halo_tokenizer_encode(m.tok, clean, len, special ? HALO_TOKENIZE_SPECIAL : 0, &ids,
                                   &err);
        if (!st && m.add_bos && bos >= 0 && (!ids.n || ids.ids[0] != bos) &&
            !(st = halo_tokens_push(&ids, bos, &err))) {
            memmove(ids.ids + 1, ids.ids, (ids.n - 1) * sizeof *ids.ids);
            ids.ids[0] = bos;
        }
    } else {
        halo_chat_message msgs[2] = {{.role = HALO_CHAT_SYSTEM, .content = c.system},
                                     {.role = HALO_CHAT_USER, .content = clean}};
        halo_chat_params cp = {
            .format = m.format, .thinking = c.thinking, .add_generation_prompt = true};
        st = halo_chat_tokenize(m.tok, c.system ? msgs : msgs + 1, c.system ? 2 : 1, &cp, &ids,
                                &err);
    }
    rc = 1;
    if (st) {
        fprintf(stderr, "halo run: %s\n", err.message);
        goto done;
    }
    if (ids.n >= m.n_ctx || (uint64_t)ids.n + c.n_predict > m.n_ctx) {
        fprintf(stderr,
                "halo run: %zu prompt tokens%s do not fit the context of %u tokens; use "
                "a shorter prompt%s or a larger --ctx\n",
                ids.n, c.n_predict ? " plus -n" : "", m.n_ctx, c.n_predict ? ", a smaller -n" : "");
        goto done;
    }
    if ((rc = cli_load("run", &c, &m)) || (rc = cli_cache_open("run", &cc, m.engine))) goto done;
    rc = 1;
    int64_t held = cli_cache_prepare("run", &cc, m.session, ids.ids, (uint32_t)ids.n);
    if (held < 0) goto done;
    bool newline = true;
    halo_gen_params gp = {.n_ctx = m.n_ctx,
                          .max_new = c.n_predict,
                          .ignore_eos = c.ignore_eos,
                          .on_text = cli_print_text,
                          .user = &newline};
    halo_gen_stop why;
    halo_gen_stats stats;
    st = halo_generate(m.session, m.sampler, m.tok, ids.ids + held, ids.n - (size_t)held, &gp, NULL,
                       &why, &stats, &err);
    if (!newline) putchar('\n');
    fflush(stdout);
    if (st) {
        fprintf(stderr, "halo run: %s\n", err.message);
        goto done;
    }
    if (why == HALO_GEN_CONTEXT_FULL)
        fprintf(stderr, "halo run: stopped: the context of %u tokens is full\n", m.n_ctx);
    cli_print_stats(&stats);
    cli_stream_report("run", m.engine, true);
    rc = 0;
done:
    cli_cache_close(&cc);
    halo_tokens_free(&ids);
    free(clean);
    cli_close(&m);
    return rc;
}
