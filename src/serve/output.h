/* Reading a reply as it is generated, token by token: reasoning (up to </think>), content, and
 * a DSML tool-call block, with stop strings. Text comes out in whole UTF-8 characters (invalid
 * bytes become U+FFFD); content that might begin a stop string or a tool-call block is held
 * back until it is clear that it does not. */
#ifndef HALO_SERVE_OUTPUT_H
#define HALO_SERVE_OUTPUT_H

#include "serve/dsml_stream.h"
#include "serve/request.h"

/* Receives each piece of the reply; text is NUL-terminated; name only for a tool call's head
 * (SERVE_EV_TOOL, text ""), whose arguments follow as SERVE_EV_TOOL_ARGS pieces. */
typedef void (*serve_output_fn)(void *user, serve_ev_kind kind, const char *text, const char *name,
                                unsigned tool_index);

typedef struct serve_output {
    const halo_tokenizer *tok;
    const serve_request *req;
    serve_output_fn fn;
    void *user;
    enum { OUT_REASONING, OUT_CONTENT, OUT_TOOLS, OUT_AFTER } state;
    halo_utf8_stream u;
    sbuf pend;
    serve_dsml_stream dsml; /* the open tool-call block */
    bool raw;               /* the block turned out malformed before a call's head: text */
    sbuf block;             /* the raw block's bytes */
    unsigned n_tools;
    const char *stop_hit; /* the stop string that ended the reply */
    /* The reply broke inside a tool call whose head was already sent (it cannot become text
     * any more): malformed, or (cut, from serve_output_finish) left open. */
    bool broken, cut;
    char why[256];
    bool oom;
} serve_output;

void serve_output_init(serve_output *o, const halo_tokenizer *tok, const serve_request *req,
                       serve_output_fn fn, void *user);
/* Feeds one generated token (not an end-of-generation one). False: the reply is complete (a
 * stop string, or a closed tool-call block); stop generating. */
bool serve_output_token(serve_output *o, int32_t id);
/* Feeds text directly (tests and the fuzz target). */
bool serve_output_text(serve_output *o, const char *text, size_t len);
/* Emits what is held back; a tool-call block left open before any call's head becomes content
 * text; one left open inside a call sets cut. */
void serve_output_finish(serve_output *o);
bool serve_output_in_reasoning(const serve_output *o);
void serve_output_free(serve_output *o);

#endif
