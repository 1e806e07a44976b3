/* Helpers the API parsers share: typed access to JSON members with errors that name the
 * field, a conversation under construction, and rendering it to prompt tokens. */
#ifndef HALO_SERVE_PARSE_UTIL_H
#define HALO_SERVE_PARSE_UTIL_H

#include <cjson/cJSON.h>

#include "serve/request.h"

/* Each returns false with f filled when the member is present (and not null) but of the wrong
 * type or out of range; absent or null members leave *out as it was. */
bool pu_str(const cJSON *obj, const char *key, const char **out, serve_fail *f);
bool pu_bool(const cJSON *obj, const char *key, bool *out, serve_fail *f);
bool pu_num(const cJSON *obj, const char *key, double lo, double hi, float *out, serve_fail *f);
bool pu_uint(const cJSON *obj, const char *key, uint32_t lo, uint32_t *out, bool *set,
             serve_fail *f);

/* Sampling fields common to the APIs (temperature, top_p, top_k, min_p, seed, the penalties,
 * logit_bias, ignore_eos) into r->sp and r->bias*. */
bool pu_sampling(const cJSON *req, const serve_model_info *mi, serve_request *r, serve_fail *f);
/* "stop"/"stop_sequences": a string or an array of strings. */
bool pu_stops(const cJSON *req, const char *key, serve_request *r, serve_fail *f);

/* A conversation being built from a request. Strings point into the request's JSON tree or
 * into copies the builder owns. */
typedef struct pu_chat {
    halo_chat_message *msgs;
    size_t n, cap;
    void **owned;
    size_t n_owned, cap_owned;
    const char **ids; /* tool call ids seen so far, to check tool results against */
    size_t n_ids, cap_ids;
    bool oom;
} pu_chat;

halo_chat_message *pu_chat_add(pu_chat *c, halo_chat_role role);
/* Keeps p (malloc'd) until pu_chat_free; returns p. */
void *pu_chat_own(pu_chat *c, void *p);
void pu_chat_add_id(pu_chat *c, const char *id);
bool pu_chat_has_id(const pu_chat *c, const char *id);
void pu_chat_free(pu_chat *c);

/* Renders the conversation with the model's chat encoding, ending with the assistant's
 * opening, and tokenizes it into r->prompt. tools_json: the tools in the template's shape
 * ([{"type":"function","function":{...}}]) or NULL. */
bool pu_render(pu_chat *c, const serve_model_info *mi, halo_chat_thinking thinking,
               const char *tools_json, const char *response_format_json, serve_request *r,
               serve_fail *f);

/* Checks the prompt fits the context and clamps max_tokens (0: unset) to the room left. */
bool pu_fit(const serve_model_info *mi, uint32_t max_tokens, serve_request *r, serve_fail *f);

/* Test hook: "halo_test_reply" tokenized (specials on) into r->forced when mi allows it. */
bool pu_test_reply(const cJSON *req, const serve_model_info *mi, serve_request *r, serve_fail *f);

/* Text of a content value: a string, or an array of {"type":"text"|"input_text"|
 * "output_text", "text"} parts joined by newlines (a copy owned by c). NULL for null/absent.
 * Other part types are refused. */
bool pu_content_text(pu_chat *c, const cJSON *content, const char *where, const char **out,
                     serve_fail *f);

#endif
