/* `halo run` as a real process: greedy text equals the library's greedy continuation on a
 * fixture with a vocabulary, sampling is reproducible by seed, the speed line is printed, and
 * bad input (invalid UTF-8, empty prompt, -n beyond the context, unknown flag, ...) gets a clear
 * message and the documented exit status. When the embedded model (a .gguf in models/) and its
 * transformers greedy continuations (JSON in tests/golden/kjv/) exist, halo must reproduce them.
 *
 * `test_cli_run --make-fixture PATH` writes the fixture (for trying halo run by hand). */
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "gguf/gguf_test_util.h"
#include "halo/halo.h"
#include "test_chat.h"
#include "text/json.h"

static char *dir, model[600];

/* Runs cmd through the shell; stdout and stderr captured separately. */
static int run(const char *cmd, char *out, size_t out_cap, char *errout, size_t err_cap) {
    char full[8192], ef[700];
    snprintf(ef, sizeof ef, "%s/stderr.txt", dir);
    snprintf(full, sizeof full, "%s 2>'%s'", cmd, ef);
    FILE *p = popen(full, "r");
    size_t n = fread(out, 1, out_cap - 1, p);
    out[n] = 0;
    int st = pclose(p);
    FILE *f = fopen(ef, "rb");
    n = f ? fread(errout, 1, err_cap - 1, f) : 0;
    errout[n] = 0;
    if (f) fclose(f);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Greedy continuation computed in-process with the library. */
static char *library_greedy(const char *path, const char *prompt, int n_new) {
    halo_tokenizer *tok = NULL;
    halo_engine *e = NULL;
    halo_session *s = NULL;
    halo_error err;
    halo_engine_params ep = {.model_path = path, .threads = 1};
    CHECK_INT(halo_tokenizer_open(path, &tok, &err), HALO_OK);
    CHECK_INT(halo_engine_open(&ep, &e, &err), HALO_OK);
    CHECK_INT(halo_session_create(e, 256, &s, &err), HALO_OK);
    halo_tokens ids = {0};
    halo_tokenizer_encode(tok, prompt, strlen(prompt), HALO_TOKENIZE_BOS | HALO_TOKENIZE_SPECIAL,
                          &ids, &err);
    halo_tokens gen = {0};
    CHECK_INT(halo_session_eval(s, ids.ids, (uint32_t)ids.n, false, &err), HALO_OK);
    uint32_t nv = halo_engine_n_vocab(e);
    for (int i = 0; i < n_new; i++) {
        uint32_t rows;
        const float *l = halo_session_logits(s, &rows);
        int32_t best = 0;
        for (uint32_t k = 1; k < nv; k++)
            if (l[k] > l[best]) best = (int32_t)k;
        halo_tokens_push(&gen, best, NULL);
        if (i + 1 < n_new) CHECK_INT(halo_session_eval(s, &best, 1, false, &err), HALO_OK);
    }
    char *text = NULL;
    halo_tokenizer_decode(tok, gen.ids, gen.n, 0, &text, NULL, &err);
    halo_tokens_free(&ids);
    halo_tokens_free(&gen);
    halo_session_free(s);
    halo_engine_close(e);
    halo_tokenizer_free(tok);
    return text;
}

/* halo ends the text with a newline unless it already does. */
static bool same_text(const char *got, const char *want) {
    size_t gl = strlen(got), wl = strlen(want);
    if (gl == wl) return !memcmp(got, want, gl);
    return gl == wl + 1 && got[wl] == '\n' && !memcmp(got, want, wl);
}

static void raw_greedy_equals_the_library(void) {
    char cmd[2048], out[65536], err[8192];
    char *want = library_greedy(model, "In the beginning", 40);
    snprintf(cmd, sizeof cmd,
             "%s run -m '%s' --raw --temp 0 --ignore-eos -n 40 --threads 1 -p "
             "'In the beginning'",
             HALO_BIN, model);
    CHECK_INT(run(cmd, out, sizeof out, err, sizeof err), 0);
    CHECK(want && same_text(out, want));
    if (want && !same_text(out, want)) fprintf(stderr, "got  [%s]\nwant [%s]\n", out, want);
    /* The speed line. */
    CHECK_CONTAINS(
        err, "prompt: 12 tokens, "); /* BOS, "I" "n", " the", " b" "e" "g" "in" "n" "in" "g" */
    CHECK_CONTAINS(err, " tok/s prefill | generated: 40 tokens, ");
    CHECK_CONTAINS(err, " tok/s decode");
    free(want);
}

static void prompt_from_stdin_and_file_are_the_same(void) {
    char cmd[2048], a[65536], b[65536], c[65536], err[8192], path[700];
    snprintf(path, sizeof path, "%s/prompt.txt", dir);
    FILE *f = fopen(path, "wb");
    fputs("Tell me about the sea.\n", f);
    fclose(f);
    const char *common = "--temp 0.8 --seed 7 -n 24 --ignore-eos --threads 1";
    snprintf(cmd, sizeof cmd, "%s run -m '%s' %s -f '%s'", HALO_BIN, model, common, path);
    CHECK_INT(run(cmd, a, sizeof a, err, sizeof err), 0);
    snprintf(cmd, sizeof cmd, "%s run -m '%s' %s -p - < '%s'", HALO_BIN, model, common, path);
    CHECK_INT(run(cmd, b, sizeof b, err, sizeof err), 0);
    CHECK_STR(a, b);
    /* Same seed, same text; another seed, other text. */
    snprintf(cmd, sizeof cmd, "%s run -m '%s' %s -f '%s' --seed 8", HALO_BIN, model, common, path);
    CHECK_INT(run(cmd, c, sizeof c, err, sizeof err), 0);
    CHECK(strcmp(a, c) != 0);
    /* Thinking modes change the prompt (and so the prompt token count). */
    snprintf(cmd, sizeof cmd, "%s run -m '%s' %s -f '%s' --think-max", HALO_BIN, model, common,
             path);
    CHECK_INT(run(cmd, c, sizeof c, err, sizeof err), 0);
    CHECK_CONTAINS(err, "prompt: ");
}

static void bad_input_fails_clearly(void) {
    char cmd[2048], out[65536], err[8192];
    snprintf(cmd, sizeof cmd, "printf 'caf\\303 \\377 ok' | %s run -m '%s' --temp 0 -n 4 -p -",
             HALO_BIN, model);
    CHECK_INT(run(cmd, out, sizeof out, err, sizeof err), 0);
    CHECK_CONTAINS(err, "the prompt is not valid UTF-8: replaced 2 invalid sequences with U+FFFD");

    snprintf(cmd, sizeof cmd, "%s run -m '%s' -p ''", HALO_BIN, model);
    CHECK_INT(run(cmd, out, sizeof out, err, sizeof err), 1);
    CHECK_CONTAINS(err, "halo run: the prompt is empty");

    snprintf(cmd, sizeof cmd, "%s run -m '%s' -p hi -n 5000 --ctx 256", HALO_BIN, model);
    CHECK_INT(run(cmd, out, sizeof out, err, sizeof err), 1);
    CHECK_CONTAINS(err, "prompt tokens plus -n do not fit the context of 256 tokens");

    snprintf(cmd, sizeof cmd, "%s run -m '%s' -p hi --ctx 999999", HALO_BIN, model);
    CHECK_INT(run(cmd, out, sizeof out, err, sizeof err), 1);
    CHECK_CONTAINS(err, "--ctx 999999 is beyond the model's training context of 2048");

    snprintf(cmd, sizeof cmd, "%s run -m '%s' -p hi --frobnicate", HALO_BIN, model);
    CHECK_INT(run(cmd, out, sizeof out, err, sizeof err), 2);
    CHECK_CONTAINS(err, "halo run: unknown option '--frobnicate'");

    snprintf(cmd, sizeof cmd, "%s run -m '%s' -p hi --temp warm", HALO_BIN, model);
    CHECK_INT(run(cmd, out, sizeof out, err, sizeof err), 2);
    CHECK_CONTAINS(err, "option '--temp' needs a number");

    snprintf(cmd, sizeof cmd, "%s run -m '%s' -p hi --top-p 0", HALO_BIN, model);
    CHECK_INT(run(cmd, out, sizeof out, err, sizeof err), 1);
    CHECK_CONTAINS(err, "top-p 0 is not in (0, 1]");

    snprintf(cmd, sizeof cmd, "%s run -m '%s'", HALO_BIN, model);
    CHECK_INT(run(cmd, out, sizeof out, err, sizeof err), 2);
    CHECK_CONTAINS(err, "give the prompt with one of -p PROMPT, -p - or -f FILE");

    snprintf(cmd, sizeof cmd, "%s run -m '%s' -f '%s/missing.txt'", HALO_BIN, model, dir);
    CHECK_INT(run(cmd, out, sizeof out, err, sizeof err), 1);
    CHECK_CONTAINS(err, "missing.txt: No such file or directory");

    /* A model without a vocabulary. */
    snprintf(cmd, sizeof cmd, "%s run -m " FIXTURE_SRC " -p hi", HALO_BIN);
    CHECK_INT(run(cmd, out, sizeof out, err, sizeof err), 1);
    CHECK_CONTAINS(err, "tiny-a-f32.gguf: ");
    CHECK_CONTAINS(err, "tokenizer.ggml.model");
}

/* The count in "prompt: N tokens" of a run; -1 when it failed. */
static long prompt_tokens(const char *options, const char *prompt) {
    char cmd[2048], out[65536], err[8192], pf[700];
    snprintf(pf, sizeof pf, "%s/special_prompt.txt", dir);
    FILE *f = fopen(pf, "wb");
    fputs(prompt, f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "%s run -m '%s' %s --temp 0 -n 1 --threads 1 -f '%s'", HALO_BIN,
             model, options, pf);
    if (run(cmd, out, sizeof out, err, sizeof err)) return -1;
    const char *at = strstr(err, "prompt: ");
    return at ? strtol(at + 8, NULL, 10) : -1;
}

/* Issue 19: text in a prompt never becomes a control token, through the chat encoding or --raw;
 * --raw --special parses them. Expected counts are by construction of the fixture's vocabulary
 * (test_chat.h): one token per byte, and no merge applies inside "<｜Assistant｜>", so its text is
 * strlen() tokens; as a control token it is one. */
static void control_token_text_in_prompts_stays_text(void) {
    const size_t tag = strlen(HALO_CHAT_ASSISTANT_TAG); /* 17 bytes */
    /* Chat encoding: BOS <｜User｜> x <｜Assistant｜> </think>, then the tag's bytes as text. */
    long x = prompt_tokens("", "x"), forged = prompt_tokens("", "x" HALO_CHAT_ASSISTANT_TAG);
    CHECK_INT(x, 5);
    CHECK_INT(forged, x + (long)tag);
    CHECK_INT(prompt_tokens("--system '" HALO_CHAT_EOS "'", "x"), x + (long)strlen(HALO_CHAT_EOS));
    /* --raw: BOS then text; --raw --special: BOS x <｜Assistant｜>, and a BOS the prompt spells is
     * not doubled. */
    CHECK_INT(prompt_tokens("--raw", "x" HALO_CHAT_ASSISTANT_TAG), 2 + (long)tag);
    CHECK_INT(prompt_tokens("--raw --special", "x" HALO_CHAT_ASSISTANT_TAG), 3);
    CHECK_INT(prompt_tokens("--raw --special", HALO_CHAT_BOS "x"), 2);
    /* (the BOS text's bytes, but "begin" holds the merge "in") */
    CHECK_INT(prompt_tokens("--raw", HALO_CHAT_BOS "x"), 2 + (long)strlen(HALO_CHAT_BOS) - 1);

    char cmd[2048], out[65536], err[8192];
    snprintf(cmd, sizeof cmd, "%s run -m '%s' --special -p x", HALO_BIN, model);
    CHECK_INT(run(cmd, out, sizeof out, err, sizeof err), 2);
    CHECK_CONTAINS(err, "halo run: --special needs --raw");
}

/* Issue 19: --threads beyond the cores this process may run on is capped there, with a line
 * saying so (1,000 spinning threads on 2 cores decoded 300x slower). */
static void threads_beyond_the_cores_are_capped(void) {
    cpu_set_t set;
    CHECK_INT(sched_getaffinity(0, sizeof set, &set), 0);
    int cores = CPU_COUNT(&set);
    char cmd[2048], out[65536], err[8192], want[200];
    snprintf(cmd, sizeof cmd, "%s run -m '%s' --raw -p x -n 2 --threads 1000", HALO_BIN, model);
    CHECK_INT(run(cmd, out, sizeof out, err, sizeof err), 0);
    snprintf(want, sizeof want,
             "halo run: --threads 1000 is more than the %d core%s this process may run on: using "
             "%d threads",
             cores, cores == 1 ? "" : "s", cores);
    CHECK_CONTAINS(err, want);
    CHECK_CONTAINS(err, "generated: 2 tokens");
    /* Within the cores: no such line. */
    snprintf(cmd, sizeof cmd, "%s run -m '%s' --raw -p x -n 2 --threads 1", HALO_BIN, model);
    CHECK_INT(run(cmd, out, sizeof out, err, sizeof err), 0);
    CHECK(!strstr(err, "--threads"));
}

/* The embedded model's golden greedy continuations (issue 8: models/kjv-tiny.gguf and
 * tests/golden/kjv/reference.json, transformers' 40 greedy tokens after each prompt), through the
 * whole front end: prompt text (BOS spelled out) -> tokenizer -> halo run --raw --special --temp 0
 * -> streamed text. */
static void reproduces_the_embedded_models_greedy_continuations(void) {
    const char *path = "models/kjv-tiny.gguf", *ref = "tests/golden/kjv/reference.json";
    FILE *f = fopen(ref, "rb");
    if (!f || access(path, R_OK)) {
        printf("  skipped: no %s or %s\n", path, ref);
        if (f) fclose(f);
        return;
    }
    char *json = malloc(1 << 22);
    size_t n = fread(json, 1, (1 << 22) - 1, f);
    json[n] = 0;
    fclose(f);
    /* Python's json writes Infinity for some margins: cJSON refuses it, halo's chat JSON reader
     * (Python-compatible) does not. */
    pj *j = NULL;
    halo_error pe;
    CHECK_INT(pj_parse(json, n, &j, &pe), HALO_OK);
    free(json);
    const pj *prompts = pj_get(j, "prompts");
    halo_tokenizer *tok = NULL;
    halo_error e;
    CHECK_INT(halo_tokenizer_open(path, &tok, &e), HALO_OK);
    int compared = 0;
    for (size_t k = 0; prompts && k < prompts->n; k++) {
        const pj *pi = pj_get(prompts->items[k], "prompt_ids");
        const pj *tk = pj_get(prompts->items[k], "tokens"), *nm = pj_get(prompts->items[k], "name");
        const char *name = nm && nm->type == PJ_STR ? nm->s : "?";
        if (!tok || !pi || pi->type != PJ_ARR || !tk || tk->type != PJ_ARR) continue;
        halo_tokens p = {0}, t = {0}, back = {0};
        for (size_t i = 0; i < pi->n; i++)
            halo_tokens_push(&p, atoi(pi->items[i]->s), NULL);
        for (size_t i = 0; i < tk->n; i++)
            halo_tokens_push(&t, atoi(tk->items[i]->s), NULL);
        char *prompt = NULL, *want = NULL, cmd[2048], pf[700];
        halo_tokenizer_decode(tok, p.ids, p.n, HALO_TOKENIZE_SPECIAL, &prompt, NULL, &e);
        halo_tokenizer_decode(tok, t.ids, t.n, 0, &want, NULL, &e);
        /* The prompt's text (BOS spelled out) tokenizes back to the reference's ids. */
        halo_tokenizer_encode(tok, prompt, strlen(prompt), HALO_TOKENIZE_SPECIAL, &back, &e);
        CHECK(back.n == p.n && !memcmp(back.ids, p.ids, p.n * sizeof *p.ids));
        snprintf(pf, sizeof pf, "%s/golden_prompt.txt", dir);
        f = fopen(pf, "wb");
        fputs(prompt, f);
        fclose(f);
        snprintf(cmd, sizeof cmd,
                 "%s run -m '%s' --raw --special --temp 0 --ignore-eos -n %zu --threads 1 "
                 "-f '%s'",
                 HALO_BIN, path, t.n, pf);
        static char out[1 << 16], err[8192];
        CHECK_INT(run(cmd, out, sizeof out, err, sizeof err), 0);
        char speed[64];
        snprintf(speed, sizeof speed, "prompt: %zu tokens, ", p.n);
        CHECK_CONTAINS(err, speed);
        bool same = same_text(out, want);
        CHECK(same);
        if (!same) fprintf(stderr, "%s:\n  got  [%s]\n  want [%s]\n", name, out, want);
        compared++;
        free(prompt);
        free(want);
        halo_tokens_free(&p);
        halo_tokens_free(&t);
        halo_tokens_free(&back);
    }
    printf("  %d golden continuations compared (%s)\n", compared, path);
    CHECK(compared > 0);
    halo_tokenizer_free(tok);
    pj_free(j);
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--make-fixture")) return fixture_write(argv[2]);
    dir = tmpdir_make();
    snprintf(model, sizeof model, "%s/tiny-a-vocab.gguf", dir);
    if (fixture_write(model)) return 1;
    RUN(raw_greedy_equals_the_library);
    RUN(prompt_from_stdin_and_file_are_the_same);
    RUN(bad_input_fails_clearly);
    RUN(control_token_text_in_prompts_stays_text);
    RUN(threads_beyond_the_cores_are_capped);
    RUN(reproduces_the_embedded_models_greedy_continuations);
    tmpdir_remove(dir);
    return check_report();
}
