/* Reply reading (output.h). The DSML markers are DeepSeek V4's (src/text/chat.c writes them in
 * the tools header); a block is handed whole to halo_dsml_parse once it closes, so a block the
 * model leaves malformed or unfinished becomes plain content, never a broken tool call. */
#include "serve/output.h"

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

static bool close_block(serve_output *o) {
    const char *end = find(o->block.p, o->block.n, DSML_CLOSE);
    if (!end) return true;
    size_t len = (size_t)(end - o->block.p) + strlen(DSML_CLOSE);
    halo_dsml_reply reply = {0};
    if (halo_dsml_parse(o->block.p, len, &reply, NULL) || reply.n_calls == 0) {
        /* Not a tool call after all: the model's bytes, as text. */
        emit(o, SERVE_EV_CONTENT, o->block.p, len);
    } else {
        if (reply.content && *reply.content)
            emit(o, SERVE_EV_CONTENT, reply.content, strlen(reply.content));
        for (size_t i = 0; i < reply.n_calls; i++)
            o->fn(o->user, SERVE_EV_TOOL, reply.calls[i].arguments, reply.calls[i].name,
                  o->n_tools++);
    }
    halo_dsml_reply_free(&reply);
    o->block.n = 0;
    o->state = OUT_AFTER;
    return false;
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
        sbuf_add(&o->block, block, n - text);
        o->pend.n = 0;
        o->state = OUT_TOOLS;
        return close_block(o);
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
        sbuf_add(&o->block, text, len);
        if (o->block.oom) o->oom = true;
        return close_block(o);
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
    } else if (o->state == OUT_TOOLS) {
        emit(o, SERVE_EV_CONTENT, o->block.p, o->block.n);
        o->block.n = 0;
    }
    o->state = OUT_AFTER;
}
