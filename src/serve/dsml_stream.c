/* Incremental DSML tool-call reader (dsml_stream.h). It follows halo_dsml_parse's grammar step
 * by step (src/text/dsml.c): whitespace between tags skipped, a parameter tag ending in
 * ` string="true">`, ` string="false">` or `>`, the block ending at the first
 * </｜DSML｜tool_calls> whatever comes before it. A step that needs bytes not yet written waits
 * (SERVE_DSML_MORE) while what is there could still be the start of what the grammar expects;
 * else the block is malformed. */
#include "serve/dsml_stream.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "halo/text.h"
#include "text/json.h"

#define DSML "｜DSML｜"
#define OPEN "<" DSML "tool_calls>"
#define CLOSE "</" DSML "tool_calls>"
#define INVOKE "<" DSML "invoke name=\""
#define INVOKE_END "</" DSML "invoke>"
#define PARAM "<" DSML "parameter name=\""
#define PARAM_END "</" DSML "parameter>"

enum { S_CALLS, S_NAME, S_PARAMS, S_KEY, S_STR, S_RAW, S_DONE, S_BAD };

void serve_dsml_stream_init(serve_dsml_stream *s, serve_dsml_head_fn head, serve_dsml_args_fn args,
                            void *user) {
    memset(s, 0, sizeof *s);
    s->head = head;
    s->args = args;
    s->user = user;
    s->state = S_CALLS;
}

void serve_dsml_stream_free(serve_dsml_stream *s) {
    sbuf_free(&s->in);
    sbuf_free(&s->names);
    sbuf_free(&s->calls);
}

const char *serve_dsml_stream_text(const serve_dsml_stream *s, size_t *len) {
    *len = s->in.n;
    return s->in.p ? s->in.p : "";
}

static serve_dsml_status bad(serve_dsml_stream *s, const char *why) {
    snprintf(s->why, sizeof s->why, "tool call %u: %s", s->n_calls ? s->n_calls - 1 : 0, why);
    s->state = S_BAD;
    return SERVE_DSML_BAD;
}

/* 1 when p[0..n) starts with lit, 0 when it cannot (or the block has ended), -1 when it is a
 * proper prefix of lit and more bytes may complete it. */
static int starts(const serve_dsml_stream *s, const char *p, size_t n, const char *lit) {
    size_t m = strlen(lit);
    if (n >= m) return !memcmp(p, lit, m);
    return !s->end && !memcmp(p, lit, n) ? -1 : 0;
}

/* Length of the longest suffix of p[0..n) that is a proper prefix of lit. */
static size_t partial(const char *p, size_t n, const char *lit) {
    size_t m = strlen(lit);
    for (size_t k = m - 1 < n ? m - 1 : n; k > 0; k--)
        if (!memcmp(p + n - k, lit, k)) return k;
    return 0;
}

static void emit(serve_dsml_stream *s, const char *json, size_t n) {
    if (!n) return;
    char *piece = malloc(n + 1);
    if (!piece) {
        s->oom = true;
        return;
    }
    memcpy(piece, json, n);
    piece[n] = 0;
    sbuf_add(&s->calls, json, n);
    s->args(s->user, s->n_calls - 1, piece);
    free(piece);
}

/* Emits json.dumps(text) without its quotes: the escaped bytes of a piece of a string. */
static void emit_string_piece(serve_dsml_stream *s, const char *text, size_t n) {
    if (!n) return;
    pj_buf b = {0};
    pj_dump_py_string(&b, text, n);
    if (b.oom) s->oom = true;
    if (!b.oom) emit(s, b.p + 1, b.n - 2);
    free(b.p);
}

/* `, "key": ` (the comma from the second parameter on). */
static void emit_key(serve_dsml_stream *s, pj_buf *b) {
    if (s->any_param) pj_buf_adds(b, ", ");
    pj_dump_py_string(b, s->in.p + s->key_at, s->key_len);
    pj_buf_adds(b, ": ");
}

/* Parses the closed block with halo_dsml_parse and compares its calls with the streamed ones. */
static void verify(serve_dsml_stream *s) {
    sbuf whole = {0};
    sbuf_adds(&whole, OPEN);
    sbuf_add(&whole, s->in.p, s->end);
    halo_dsml_reply r = {0};
    if (whole.oom || halo_dsml_parse(whole.p, whole.n, &r, NULL) || r.n_calls != s->n_calls) {
        s->mismatch = !whole.oom;
    } else {
        const char *name = s->names.p, *args = s->calls.p;
        for (size_t i = 0; i < r.n_calls; i++) {
            if (strcmp(name, r.calls[i].name) || strcmp(args, r.calls[i].arguments))
                s->mismatch = true;
            name += strlen(name) + 1;
            args += strlen(args) + 1;
        }
    }
    halo_dsml_reply_free(&r);
    sbuf_free(&whole);
}

/* Reads as far as the bytes allow. */
static serve_dsml_status step(serve_dsml_stream *s) {
    for (;;) {
        size_t lim = s->end ? s->end : s->in.n;
        const char *p = s->in.p + s->at;
        size_t n = lim - s->at;
        if (s->state == S_CALLS || s->state == S_PARAMS) {
            while (n && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t'))
                p++, n--, s->at++;
            if (!n) return SERVE_DSML_MORE;
        }
        switch (s->state) {
        case S_CALLS: {
            int done = starts(s, p, n, CLOSE), call = starts(s, p, n, INVOKE);
            if (done == 1) {
                s->at += strlen(CLOSE);
                s->state = S_DONE;
                verify(s);
                return SERVE_DSML_DONE;
            }
            if (call == 1) {
                s->at += strlen(INVOKE);
                s->state = S_NAME;
                continue;
            }
            if (done || call) return SERVE_DSML_MORE;
            return bad(s, "expected <" DSML "invoke name=\" or the end of the block");
        }
        case S_NAME: {
            const char *q = memmem(p, n, "\">", 2);
            if (!q) return s->end ? bad(s, "unterminated name") : SERVE_DSML_MORE;
            size_t len = (size_t)(q - p);
            sbuf_add(&s->names, p, len);
            sbuf_add(&s->names, "", 1);
            if (s->names.oom) s->oom = true;
            s->n_calls++;
            s->in_call = true;
            s->any_param = false;
            s->at += len + 2;
            s->state = S_PARAMS;
            s->head(s->user, s->n_calls - 1, s->names.p + s->names.n - len - 1);
            emit(s, "{", 1);
            continue;
        }
        case S_PARAMS: {
            int end = starts(s, p, n, INVOKE_END), param = starts(s, p, n, PARAM);
            if (end == 1) {
                s->at += strlen(INVOKE_END);
                emit(s, "}", 1);
                sbuf_add(&s->calls, "", 1);
                s->in_call = false;
                s->state = S_CALLS;
                continue;
            }
            if (param == 1) {
                s->at += strlen(PARAM);
                s->state = S_KEY;
                continue;
            }
            if (end || param) return SERVE_DSML_MORE;
            return bad(s, "expected a parameter or </" DSML "invoke>");
        }
        case S_KEY: {
            const char *q = memchr(p, '"', n);
            if (!q) return s->end ? bad(s, "malformed or unclosed parameter") : SERVE_DSML_MORE;
            static const char *const tags[] = {" string=\"true\">", " string=\"false\">", ">"};
            const char *t = q + 1;
            size_t m = (size_t)(p + n - t);
            int hit = -1, maybe = 0;
            for (int i = 0; i < 3; i++) {
                int r = starts(s, t, m, tags[i]);
                if (r == 1) hit = i;
                if (r == -1) maybe = 1;
            }
            /* ` string="` that goes on with neither true"> nor false"> is malformed, as in
             * halo_dsml_parse: it does not fall back to `>`. */
            if (hit < 0) return maybe ? SERVE_DSML_MORE : bad(s, "malformed parameter tag");
            s->key_at = s->at;
            s->key_len = (size_t)(q - p);
            s->at += (size_t)(t - p) + strlen(tags[hit]);
            if (hit == 1) {
                s->state = S_RAW;
                continue;
            }
            pj_buf b = {0};
            emit_key(s, &b);
            pj_buf_adds(&b, "\"");
            if (b.oom) s->oom = true;
            if (!b.oom) emit(s, b.p, b.n);
            free(b.p);
            s->state = S_STR;
            continue;
        }
        case S_STR: {
            const char *q = memmem(p, n, PARAM_END, strlen(PARAM_END));
            if (q) {
                emit_string_piece(s, p, (size_t)(q - p));
                emit(s, "\"", 1);
                s->any_param = true;
                s->at += (size_t)(q - p) + strlen(PARAM_END);
                s->state = S_PARAMS;
                continue;
            }
            if (s->end) return bad(s, "unclosed parameter");
            /* Hold back what may begin the closing tag (or the block's end: it cuts the value). */
            size_t hold = partial(p, n, PARAM_END), k = partial(p, n, CLOSE);
            if (k > hold) hold = k;
            emit_string_piece(s, p, n - hold);
            s->at += n - hold;
            return SERVE_DSML_MORE;
        }
        case S_RAW: {
            const char *q = memmem(p, n, PARAM_END, strlen(PARAM_END));
            if (!q) return s->end ? bad(s, "unclosed parameter") : SERVE_DSML_MORE;
            pj_buf b = {0};
            emit_key(s, &b);
            pj *v = NULL;
            if (!pj_parse(p, (size_t)(q - p), &v, NULL))
                pj_dump_py(&b, v);
            else
                pj_dump_py_string(&b, p, (size_t)(q - p)); /* not JSON: the text, as a string */
            pj_free(v);
            if (b.oom) s->oom = true;
            if (!b.oom) emit(s, b.p, b.n);
            free(b.p);
            s->any_param = true;
            s->at += (size_t)(q - p) + strlen(PARAM_END);
            s->state = S_PARAMS;
            continue;
        }
        case S_DONE:
            return SERVE_DSML_DONE;
        default:
            return SERVE_DSML_BAD;
        }
    }
}

serve_dsml_status serve_dsml_stream_push(serve_dsml_stream *s, const char *text, size_t len) {
    if (s->state == S_DONE) return SERVE_DSML_DONE;
    if (s->state == S_BAD) return SERVE_DSML_BAD;
    char *clean = NULL;
    size_t n = 0, replaced = 0;
    if (halo_utf8_sanitize(text, len, &clean, &n, &replaced, NULL)) {
        s->oom = true;
        return bad(s, "out of memory");
    }
    size_t old = s->in.n;
    sbuf_add(&s->in, clean, n);
    free(clean);
    if (s->in.oom) {
        s->oom = true;
        return bad(s, "out of memory");
    }
    if (!s->end) {
        /* The block ends at the first closing marker, wherever the grammar is. */
        size_t from = old >= strlen(CLOSE) ? old - strlen(CLOSE) + 1 : 0;
        const char *c = memmem(s->in.p + from, s->in.n - from, CLOSE, strlen(CLOSE));
        if (c) s->end = (size_t)(c - s->in.p) + strlen(CLOSE);
    }
    serve_dsml_status st = step(s);
    if (st == SERVE_DSML_MORE && s->end) return bad(s, "the block ended early");
    return st;
}
