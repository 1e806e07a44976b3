/* Reply reading (output.h). The DSML markers are DeepSeek V4's (src/text/chat.c writes them in
 * the tools header); a block is read as it comes by dsml_stream.c, so tool calls' arguments
 * stream as they are written. A block that is malformed or unfinished before its first call's
 * head becomes plain content; after it, the reply cannot be text any more and is an error
 * (broken), or, cut short by a limit, a call left open (cut). */
#include "serve/output.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DSML_OPEN "<｜DSML｜tool_calls>"
#define DSML_CLOSE "</｜DSML｜tool_calls>"

void serve_output_init(serve_output *o, const halo_tokenizer *tok, const serve_request *req,
                       serve_output_fn fn, void *user) {
    memset(o, 0, sizeof *o);
    o->tok = tok;
    o->req = req;
    o->fn = fn;
    o->user = user;
    o->state = req->thinking ? OUT_REASONING : OUT_CONTENT;
}

void serve_output_free(serve_output *o) {
    sbuf_free(&o->pend);
    sbuf_free(&o->block);
    serve_dsml_stream_free(&o->dsml);
}

bool serve_output_in_reasoning(const serve_output *o) {
    return o->state == OUT_REASONING;
}

static void emit(serve_output *o, serve_ev_kind kind, const char *text, size_t len) {
    if (!len) return;
    char *clean = NULL;
    size_t n = 0, bad = 0;
    if (halo_utf8_sanitize(text, len, &clean, &n, &bad, NULL)) {
        o->oom = true;
        return;
    }
    o->fn(o->user, kind, clean, NULL, 0);
    free(clean);
}

static const char *find(const char *hay, size_t n, const char *needle) {
    size_t m = strlen(needle);
    if (m > n) return NULL;
    return memmem(hay, n, needle, m);
}

/* Length of the longest suffix of s[0..n) that is a proper prefix of needle. */
static size_t partial(const char *s, size_t n, const char *needle) {
    size_t m = strlen(needle);
    for (size_t k = m - 1 < n ? m - 1 : n; k > 0; k--)
        if (!memcmp(s + n - k, needle, k)) return k;
    return 0;
}

/* A raw (malformed) block ends as text at its closing marker, as the model wrote it. */
static bool raw_block(serve_output *o) {
    const char *end = find(o->block.p, o->block.n, DSML_CLOSE);
    if (!end) return true;
    emit(o, SERVE_EV_CONTENT, o->block.p, (size_t)(end - o->block.p) + strlen(DSML_CLOSE));
    o->block.n = 0;
    o->state = OUT_AFTER;
    return false;
}

static void on_head(void *user, unsigned index, const char *name) {
    serve_output *o = user;
    o->fn(o->user, SERVE_EV_TOOL, "", name, index);
    o->n_tools = index + 1;
}

static void on_args(void *user, unsigned index, const char *json) {
    serve_output *o = user;
    o->fn(o->user, SERVE_EV_TOOL_ARGS, json, NULL, index);
}

/* Bytes of the open tool-call block to the incremental reader. */
static bool tools(serve_output *o, const char *text, size_t len) {
    if (o->raw) {
        sbuf_add(&o->block, text, len);
        if (o->block.oom) o->oom = true;
        return raw_block(o);
    }
    serve_dsml_status st = serve_dsml_stream_push(&o->dsml, text, len);
    if (o->dsml.oom) o->oom = true;
    if (st == SERVE_DSML_MORE) return true;
    if (st == SERVE_DSML_DONE && !o->dsml.mismatch) {
        o->state = OUT_AFTER;
        return false;
    }
    if (st == SERVE_DSML_DONE || o->dsml.n_calls) {
        /* A call's head is out: the reply cannot turn into text any more. */
        o->broken = true;
        snprintf(o->why, sizeof o->why, "the model wrote a malformed tool call (%s)",
                 o->dsml.mismatch ? "the streamed call differs from the parsed block"
                                  : o->dsml.why);
        o->state = OUT_AFTER;
        return false;
    }
    /* Malformed before any call: the block is text, up to its closing marker. */
    size_t n;
    const char *read = serve_dsml_stream_text(&o->dsml, &n);
    o->raw = true;
    sbuf_adds(&o->block, DSML_OPEN);
    sbuf_add(&o->block, read, n);
    if (o->block.oom) o->oom = true;
    return raw_block(o);
}

/* Emits the content that can no longer be part of a stop string or a block's opening. */
static bool scan(serve_output *o) {
    const serve_request *r = o->req;
    const char *p = o->pend.p;
    size_t n = o->pend.n;
    const char *stop = NULL, *stop_at = NULL;
    for (size_t i = 0; i < r->n_stop; i++) {
        const char *at = find(p, n, r->stop[i]);
        if (at && (!stop_at || at < stop_at)) stop_at = at, stop = r->stop[i];
    }
    const char *block = r->tools ? find(p, n, DSML_OPEN) : NULL;
    if (stop_at && (!block || stop_at < block)) {
        emit(o, SERVE_EV_CONTENT, p, (size_t)(stop_at - p));
        o->stop_hit = stop;
        o->pend.n = 0;
        o->state = OUT_AFTER;
        return false;
    }
    if (block) {
        /* The blank line that separates text from the block belongs to the format. */
        size_t text = (size_t)(block - p), keep = text;
        while (keep > 0 && text - keep < 2 && p[keep - 1] == '\n')
            keep--;
        emit(o, SERVE_EV_CONTENT, p, keep);
        size_t after = text + strlen(DSML_OPEN);
        sbuf_consume(&o->pend, after);
        o->state = OUT_TOOLS;
        serve_dsml_stream_init(&o->dsml, on_head, on_args, o);
        bool go = tools(o, o->pend.p ? o->pend.p : "", o->pend.n);
        o->pend.n = 0;
        return go;
    }
    size_t hold = 0;
    for (size_t i = 0; i < r->n_stop; i++) {
        size_t k = partial(p, n, r->stop[i]);
        if (k > hold) hold = k;
    }
    if (r->tools) {
        size_t k = partial(p, n, DSML_OPEN), extra = 0;
        while (extra < 2 && k + extra < n && p[n - k - extra - 1] == '\n')
            extra++;
        if (k + extra > hold) hold = k + extra;
    }
    emit(o, SERVE_EV_CONTENT, p, n - hold);
    sbuf_consume(&o->pend, n - hold);
    return true;
}

/* Text in whole UTF-8 characters to the current part of the reply. */
static bool route(serve_output *o, const char *text, size_t len) {
    switch (o->state) {
    case OUT_REASONING:
        emit(o, SERVE_EV_REASONING, text, len);
        return true;
    case OUT_CONTENT:
        sbuf_add(&o->pend, text, len);
        if (o->pend.oom) o->oom = true;
        return scan(o);
    case OUT_TOOLS:
        return tools(o, text, len);
    default:
        return false;
    }
}

bool serve_output_token(serve_output *o, int32_t id) {
    size_t len = 0;
    const char *piece = halo_tokenizer_piece(o->tok, id, &len);
    if (!piece) return true;
    int type = halo_tokenizer_type(o->tok, id);
    if (type == HALO_TOKEN_CONTROL || type == HALO_TOKEN_UNUSED) {
        /* Control tokens are not text (as in `halo run`) except the markers that structure a
         * reply: </think> ends the reasoning, and DSML markers may be tokens of their own. */
        if (len == strlen(HALO_CHAT_THINK_CLOSE) && !memcmp(piece, HALO_CHAT_THINK_CLOSE, len)) {
            if (o->state == OUT_REASONING) o->state = OUT_CONTENT;
            return true;
        }
        if (!memmem(piece, len, "DSML", 4)) return true;
    }
    return serve_output_text(o, piece, len);
}

bool serve_output_text(serve_output *o, const char *text, size_t len) {
    char buf[512], *out = len + 4 <= sizeof buf ? buf : malloc(len + 4);
    if (!out) {
        o->oom = true;
        return true;
    }
    size_t n = halo_utf8_stream_push(&o->u, text, len, out);
    bool go = route(o, out, n);
    if (out != buf) free(out);
    return go;
}

void serve_output_finish(serve_output *o) {
    char tail[4];
    size_t n = halo_utf8_stream_flush(&o->u, tail);
    if (n && o->state != OUT_AFTER) route(o, tail, n);
    if (o->state == OUT_CONTENT) {
        emit(o, SERVE_EV_CONTENT, o->pend.p, o->pend.n);
        o->pend.n = 0;
    } else if (o->state == OUT_TOOLS && (o->raw || !o->dsml.n_calls)) {
        size_t len;
        const char *read = serve_dsml_stream_text(&o->dsml, &len);
        if (!o->raw) {
            sbuf_adds(&o->block, DSML_OPEN);
            sbuf_add(&o->block, read, len);
        }
        emit(o, SERVE_EV_CONTENT, o->block.p, o->block.n);
        o->block.n = 0;
    } else if (o->state == OUT_TOOLS && o->dsml.in_call) {
        /* (Calls all closed but not the block: they are whole, and stay calls.) */
        o->cut = true;
        snprintf(o->why, sizeof o->why,
                 "the reply ended inside tool call %u: its arguments are unfinished",
                 o->dsml.n_calls - 1);
    }
    o->state = OUT_AFTER;
}
