/* Reading a reply as it is generated, token by token: reasoning (up to </think>), content, and
 * a DSML tool-call block, with stop strings. Text comes out in whole UTF-8 characters (invalid
 * bytes become U+FFFD); content that might begin a stop string or a tool-call block is held
 * back until it is clear that it does not. */
#ifndef HALO_SERVE_OUTPUT_H
#define HALO_SERVE_OUTPUT_H

#include "serve/request.h"

/* Receives each piece of the reply; text is NUL-terminated, name only for tool calls. */
typedef void (*serve_output_fn)(void *user, serve_ev_kind kind, const char *text, const char *name,
                                unsigned tool_index);

typedef struct serve_output {
    const halo_tokenizer *tok;
    const serve_request *req;
    serve_output_fn fn;
    void *user;
    enum { OUT_REASONING, OUT_CONTENT, OUT_TOOLS, OUT_AFTER } state;
    halo_utf8_stream u;
    sbuf pend, block;
    unsigned n_tools;
    const char *stop_hit; /* the stop string that ended the reply */
    bool oom;
} serve_output;

void serve_output_init(serve_output *o, const halo_tokenizer *tok, const serve_request *req,
                       serve_output_fn fn, void *user);
/* Feeds one generated token (not an end-of-generation one). False: the reply is complete (a
 * stop string, or a closed tool-call block); stop generating. */
bool serve_output_token(serve_output *o, int32_t id);
/* Feeds text directly (tests and the fuzz target). */
bool serve_output_text(serve_output *o, const char *text, size_t len);
/* Emits what is held back; a tool-call block left open becomes content text. */
void serve_output_finish(serve_output *o);
bool serve_output_in_reasoning(const serve_output *o);
void serve_output_free(serve_output *o);

#endif
