/* libFuzzer target over `halo serve`'s request bodies and reply handling, without a network or
 * an engine: the first byte picks the API (chat, completions, responses, messages,
 * count_tokens) and two flags; the rest is the body. A body that parses becomes a request; the
 * body's bytes are then fed as the model's reply (reasoning, content, DSML tool-call blocks,
 * stop strings) in pieces whose sizes the body's bytes decide, and the reply is formatted both
 * streamed and whole. Error bodies are formatted for rejected requests. Everything formatted
 * must be valid JSON where JSON is promised.
 *
 * Tokenizer: the embedded model's (models/kjv-tiny.gguf, or $HALO_FUZZ_MODEL). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "serve/output.h"
#include "serve/request.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static halo_tokenizer *tok;

static const halo_tokenizer *tokenizer(void) {
    if (tok) return tok;
    const char *path = getenv("HALO_FUZZ_MODEL");
    halo_error err = {0};
    if (halo_tokenizer_open(path ? path : HALO_SOURCE_DIR "/models/kjv-tiny.gguf", &tok, &err)) {
        fprintf(stderr, "fuzz_serve: %s\n", err.message);
        abort();
    }
    return tok;
}

static void check_utf8(const char *s) {
    size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        unsigned k =
            (unsigned char)s[i] < 0x80 ? 1 : halo_utf8_seq_len((const unsigned char *)s + i, n - i);
        if (!k) abort();
        i += k;
    }
}

typedef struct events {
    serve_event *e;
    size_t n, cap;
    unsigned n_tools;
} events;

static void on_event(void *user, serve_ev_kind kind, const char *text, const char *name,
                     unsigned tool_index) {
    events *ev = user;
    if (ev->n == ev->cap) {
        ev->cap = ev->cap ? ev->cap * 2 : 16;
        ev->e = realloc(ev->e, ev->cap * sizeof *ev->e);
        if (!ev->e) abort();
    }
    serve_event *e = &ev->e[ev->n++];
    e->kind = kind;
    e->text = strdup(text);
    e->name = name ? strdup(name) : NULL;
    e->tool_index = tool_index;
    if (!e->text) abort();
    /* Argument pieces follow their call's head; every text is valid UTF-8. */
    if (kind == SERVE_EV_TOOL && (!name || *text)) abort();
    if (kind == SERVE_EV_TOOL_ARGS && (ev->n < 2 || tool_index + 1 != ev->n_tools)) abort();
    if (kind == SERVE_EV_TOOL && tool_index != ev->n_tools++) abort();
    check_utf8(e->text);
}

/* Each call's pieces make a JSON object, but a call the reply was cut inside of, whose pieces
 * still close into one (serve_args_json). */
static void check_calls(const events *ev, const serve_output *o) {
    serve_reply r = {.events = ev->e, .n_events = ev->n};
    for (unsigned i = 0; i < ev->n_tools; i++) {
        sbuf args = {0};
        serve_reply_tool_args(&r, i, &args);
        bool open = o->cut && i + 1 == ev->n_tools;
        cJSON *j = open ? serve_args_json(args.p ? args.p : "") : cJSON_Parse(args.p ? args.p : "");
        if ((!j || !cJSON_IsObject(j)) && !args.oom) abort();
        if (!open && !o->broken && args.p && args.p[args.n - 1] != '}') abort();
        cJSON_Delete(j);
        sbuf_free(&args);
    }
}

static void check_json(const sbuf *b) {
    cJSON *j = cJSON_ParseWithLength(b->p ? b->p : "", b->n);
    if (!j && !b->oom) abort();
    cJSON_Delete(j);
}

static const serve_api apis[] = {SERVE_OPENAI_CHAT, SERVE_OPENAI_COMPLETIONS,
                                 SERVE_OPENAI_RESPONSES, SERVE_ANTHROPIC, SERVE_ANTHROPIC_COUNT};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    serve_api api = apis[data[0] % 5];
    bool thinking = data[0] & 0x10, tools = data[0] & 0x20;
    const char *body = (const char *)data + 1;
    size_t len = size - 1;
    serve_model_info mi = {.tok = tokenizer(),
                           .format = HALO_CHAT_V4,
                           .add_bos = true,
                           .n_ctx = 4096,
                           .name = "fuzz",
                           .test_hooks = data[0] & 0x40};
    serve_request r;
    serve_fail f;
    sbuf out = {0};
    if (!serve_parse(api, body, len, &mi, &r, &f)) {
        if (f.http < 400 || f.http > 599) abort();
        serve_format_error(api, &f, &out);
        check_json(&out);
        sbuf_free(&out);
        return 0;
    }
    if (r.prompt.n == 0 || (api != SERVE_ANTHROPIC_COUNT && r.prompt.n >= mi.n_ctx)) abort();
    r.thinking |= thinking;
    r.tools |= tools;

    /* The body's bytes as the model's reply, fed in pieces of 1..16 bytes. */
    events ev = {0};
    serve_output o;
    serve_output_init(&o, tok, &r, on_event, &ev);
    for (size_t i = 0; i < len;) {
        size_t n = 1 + (size_t)((unsigned char)body[i] % 16);
        if (n > len - i) n = len - i;
        if (!serve_output_text(&o, body + i, n)) break;
        i += n;
    }
    serve_output_finish(&o);
    /* The streamed calls always equal halo_dsml_parse's reading of the block. */
    if (o.dsml.mismatch) abort();
    if (!o.broken) check_calls(&ev, &o);
    bool cut = o.cut, broken = o.broken;
    serve_output_free(&o);

    serve_reply reply = {.events = ev.e,
                         .n_events = ev.n,
                         .started = true,
                         .done = true,
                         .finish = cut          ? SERVE_FIN_LENGTH
                                   : ev.n_tools ? SERVE_FIN_TOOLS
                                                : SERVE_FIN_STOP,
                         .usage = {.prompt = (uint32_t)r.prompt.n, .completion = 3}};
    serve_format_reply(api, &r, &reply, &out);
    check_json(&out);
    out.n = 0;
    serve_stream s;
    serve_stream_init(&s, api, &r);
    serve_reply partial = reply;
    partial.done = false;
    partial.n_events = ev.n / 2;
    serve_stream_format(&s, &partial, &out);
    if (broken) {
        serve_fail f2;
        serve_failf(&f2, 500, "api_error", "%s", "a broken tool call");
        serve_stream_error(&s, &f2, &out);
    } else {
        serve_stream_format(&s, &reply, &out);
    }
    serve_stream_free(&s);
    /* Every SSE data line holds one JSON value (or [DONE]). */
    for (char *line = out.p; line && *line;) {
        char *end = strstr(line, "\n");
        if (!end) abort();
        if (!strncmp(line, "data: ", 6) && strncmp(line, "data: [DONE]", 12)) {
            cJSON *j = cJSON_ParseWithLength(line + 6, (size_t)(end - line - 6));
            if (!j) abort();
            cJSON_Delete(j);
        }
        line = end + 1;
    }
    sbuf_free(&out);
    for (size_t i = 0; i < ev.n; i++) {
        free(ev.e[i].text);
        free(ev.e[i].name);
    }
    free(ev.e);
    serve_request_free(&r);
    return 0;
}
