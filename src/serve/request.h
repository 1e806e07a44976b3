/* What the HTTP layer, the API mappings and the scheduler share: a request reduced to what
 * generation needs (prompt tokens, sampling, limits, how to read the reply), the events a reply
 * is made of, and errors that carry their HTTP status. The API files (openai.c, anthropic.c,
 * responses.c) turn JSON bodies into serve_request values and events back into JSON; they never
 * touch the engine, so the fuzz target drives them without a model. */
#ifndef HALO_SERVE_REQUEST_H
#define HALO_SERVE_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "halo/sample.h"
#include "halo/text.h"
#include "serve/sbuf.h"

typedef enum serve_api {
    SERVE_OPENAI_CHAT,        /* POST /v1/chat/completions */
    SERVE_OPENAI_COMPLETIONS, /* POST /v1/completions */
    SERVE_OPENAI_RESPONSES,   /* POST /v1/responses */
    SERVE_ANTHROPIC,          /* POST /v1/messages */
    SERVE_ANTHROPIC_COUNT,    /* POST /v1/messages/count_tokens */
} serve_api;

/* An error for the client: the HTTP status, the API's error type ("invalid_request_error") and
 * a message naming the field at fault. */
typedef struct serve_fail {
    int http;
    const char *type;
    char message[512];
} serve_fail;

/* Fills f and returns false, so parsers can `return fail(...)`. */
bool serve_failf(serve_fail *f, int http, const char *type, const char *fmt, ...) HALO_PRINTF(4, 5);
#define SERVE_BAD(f, ...) serve_failf((f), 400, "invalid_request_error", __VA_ARGS__)

/* What the parsers need to know about the model. */
typedef struct serve_model_info {
    const halo_tokenizer *tok;
    halo_chat_format format;
    bool add_bos;
    uint32_t n_ctx;
    const char *name; /* the id /v1/models lists */
    bool test_hooks;  /* accept "halo_test_reply" (tests only; see docs/serve.md) */
} serve_model_info;

typedef struct serve_request {
    serve_api api;
    bool stream, include_usage;
    char *model; /* as the client named it (echoed back) */
    halo_tokens prompt;
    halo_sampler_params sp;
    uint32_t max_tokens; /* after clamping to the room left in the context */
    bool ignore_eos;
    bool thinking; /* the prompt ends inside <think>: the reply starts with reasoning */
    bool tools;    /* tools were rendered: DSML blocks in the reply are tool calls */
    char **stop;   /* stop strings (content only) */
    size_t n_stop;
    int32_t *bias_ids; /* logit_bias */
    float *bias;
    size_t n_bias;
    halo_tokens forced; /* test hook: the reply's tokens, instead of sampling */
} serve_request;

void serve_request_free(serve_request *r);

/* Parses a body for api into r (zeroed first). False with f filled when the request is bad. */
bool serve_parse(serve_api api, const char *body, size_t len, const serve_model_info *mi,
                 serve_request *r, serve_fail *f);

/* ---- the reply -------------------------------------------------------------------------- */

/* A tool call is a head (SERVE_EV_TOOL: index and name) and the pieces of its arguments
 * (SERVE_EV_TOOL_ARGS, same index), streamed as the model writes them: concatenated they are
 * a JSON object, unless the reply was cut short inside the call (SERVE_FIN_LENGTH). */
typedef enum serve_ev_kind {
    SERVE_EV_REASONING,
    SERVE_EV_CONTENT,
    SERVE_EV_TOOL,
    SERVE_EV_TOOL_ARGS,
} serve_ev_kind;

typedef struct serve_event {
    serve_ev_kind kind;
    char *text; /* reasoning or content (valid UTF-8), or a piece of a call's arguments */
    char *name; /* tool name (SERVE_EV_TOOL) */
    unsigned tool_index;
} serve_event;

typedef enum serve_finish {
    SERVE_FIN_STOP,   /* end of turn or a stop string */
    SERVE_FIN_LENGTH, /* max_tokens or the context */
    SERVE_FIN_TOOLS,  /* the reply ended with tool calls */
    SERVE_FIN_CANCEL, /* the client left */
    SERVE_FIN_ERROR,  /* the engine failed */
} serve_finish;

typedef struct serve_usage {
    uint32_t prompt, cached, completion, reasoning;
} serve_usage;

/* A finished (or finishing) reply as the formatters see it. */
typedef struct serve_reply {
    const serve_event *events;
    size_t n_events;
    bool started; /* a slot took the request: usage.prompt and usage.cached are known */
    bool done;
    serve_finish finish;
    const char *stop_sequence; /* the stop string that ended it, or NULL */
    serve_usage usage;
    const char *error; /* SERVE_FIN_ERROR's message */
} serve_reply;

/* ---- formatting ------------------------------------------------------------------------- */

/* Per-response state of a streaming formatter. */
typedef struct serve_stream {
    serve_api api;
    const serve_request *req;
    const char *model;
    char id[48]; /* response id */
    long created;
    size_t n_sent; /* events already formatted */
    int block;     /* Anthropic: index of the open content block, -1 none */
    serve_ev_kind block_kind;
    unsigned n_blocks, seq;
    bool started;
    sbuf acc;              /* Responses API: text of the open item, for its .done event */
    const char *item_name; /* Responses API: the open function_call item's name */
    uint32_t n_items;
} serve_stream;

void serve_stream_init(serve_stream *s, serve_api api, const serve_request *req);
void serve_stream_free(serve_stream *s);
/* Appends the SSE frames for what reply has that s has not sent yet; with reply->done the
 * closing frames too ([DONE], message_stop, response.completed). */
void serve_stream_format(serve_stream *s, const serve_reply *reply, sbuf *out);
/* The whole non-streaming response body. */
void serve_format_reply(serve_api api, const serve_request *req, const serve_reply *reply,
                        sbuf *out);
/* An error body in the API's shape. */
void serve_format_error(serve_api api, const serve_fail *f, sbuf *out);
/* An error inside an open stream. */
void serve_stream_error(serve_stream *s, const serve_fail *f, sbuf *out);

/* The arguments of tool call `index` (its SERVE_EV_TOOL_ARGS pieces together), into out. */
void serve_reply_tool_args(const serve_reply *reply, unsigned index, sbuf *out);
/* The JSON object of a call's arguments; pieces cut short (a reply that reached max_tokens
 * inside the call) lose the member whose value is unfinished and are closed, as the Anthropic
 * SDK's partial-JSON reader takes them. Caller cJSON_Deletes; NULL when that does not parse. */
struct cJSON *serve_args_json(const char *args);

/* Random id with a prefix ("chatcmpl-", "msg_", "toolu_", "call_"), into out[48]. */
void serve_new_id(const char *prefix, char *out);

/* Per-API helpers (openai.c, anthropic.c, responses.c). */
bool serve_parse_openai_chat(const char *body, size_t len, const serve_model_info *mi,
                             serve_request *r, serve_fail *f);
bool serve_parse_openai_completions(const char *body, size_t len, const serve_model_info *mi,
                                    serve_request *r, serve_fail *f);
bool serve_parse_responses(const char *body, size_t len, const serve_model_info *mi,
                           serve_request *r, serve_fail *f);
bool serve_parse_anthropic(const char *body, size_t len, const serve_model_info *mi,
                           serve_request *r, serve_fail *f);
void serve_openai_stream(serve_stream *s, const serve_reply *reply, sbuf *out);
void serve_openai_reply(serve_api api, const serve_request *req, const serve_reply *reply,
                        sbuf *out);
void serve_anthropic_stream(serve_stream *s, const serve_reply *reply, sbuf *out);
void serve_anthropic_reply(const serve_request *req, const serve_reply *reply, sbuf *out);
void serve_responses_stream(serve_stream *s, const serve_reply *reply, sbuf *out);
void serve_responses_reply(const serve_request *req, const serve_reply *reply, sbuf *out);

#endif
