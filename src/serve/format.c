/* Dispatch from an API to its formatters, error bodies in each API's shape, and ids. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "serve/request.h"

void serve_new_id(const char *prefix, char *out) {
    static atomic_uint counter;
    unsigned char r[8] = {0};
    FILE *u = fopen("/dev/urandom", "rb");
    if (u) {
        if (fread(r, 1, sizeof r, u) != sizeof r) memset(r, 0, sizeof r);
        fclose(u);
    }
    unsigned c = atomic_fetch_add(&counter, 1);
    snprintf(out, 48, "%s%02x%02x%02x%02x%02x%02x%02x%02x%04x", prefix, r[0], r[1], r[2], r[3],
             r[4], r[5], r[6], r[7], c & 0xffff);
}

static const char *id_prefix(serve_api api) {
    switch (api) {
    case SERVE_OPENAI_CHAT:
        return "chatcmpl-";
    case SERVE_OPENAI_COMPLETIONS:
        return "cmpl-";
    case SERVE_OPENAI_RESPONSES:
        return "resp_";
    default:
        return "msg_";
    }
}

void serve_stream_init(serve_stream *s, serve_api api, const serve_request *req) {
    memset(s, 0, sizeof *s);
    s->api = api;
    s->req = req;
    s->model = req->model ? req->model : "";
    s->block = -1;
    s->created = (long)time(NULL);
    serve_new_id(id_prefix(api), s->id);
}

void serve_stream_free(serve_stream *s) {
    sbuf_free(&s->acc);
}

void serve_stream_format(serve_stream *s, const serve_reply *reply, sbuf *out) {
    switch (s->api) {
    case SERVE_OPENAI_CHAT:
    case SERVE_OPENAI_COMPLETIONS:
        serve_openai_stream(s, reply, out);
        break;
    case SERVE_OPENAI_RESPONSES:
        serve_responses_stream(s, reply, out);
        break;
    default:
        serve_anthropic_stream(s, reply, out);
        break;
    }
}

void serve_format_reply(serve_api api, const serve_request *req, const serve_reply *reply,
                        sbuf *out) {
    switch (api) {
    case SERVE_OPENAI_CHAT:
    case SERVE_OPENAI_COMPLETIONS:
        serve_openai_reply(api, req, reply, out);
        break;
    case SERVE_OPENAI_RESPONSES:
        serve_responses_reply(req, reply, out);
        break;
    default:
        serve_anthropic_reply(req, reply, out);
        break;
    }
}

static cJSON *error_json(serve_api api, const serve_fail *f) {
    cJSON *o = cJSON_CreateObject(), *e = cJSON_CreateObject();
    if (api == SERVE_ANTHROPIC || api == SERVE_ANTHROPIC_COUNT) {
        /* {"type":"error","error":{"type":...,"message":...}} */
        cJSON_AddStringToObject(o, "type", "error");
        cJSON_AddStringToObject(e, "type", f->type);
        cJSON_AddStringToObject(e, "message", f->message);
    } else {
        /* {"error":{"message","type","param","code"}}; OpenAI names a too-large body an
         * invalid request. */
        const char *type = strcmp(f->type, "request_too_large") ? f->type : "invalid_request_error";
        cJSON_AddStringToObject(e, "message", f->message);
        cJSON_AddStringToObject(e, "type", type);
        cJSON_AddNullToObject(e, "param");
        if (f->http == 401)
            cJSON_AddStringToObject(e, "code", "invalid_api_key");
        else
            cJSON_AddNullToObject(e, "code");
    }
    cJSON_AddItemToObject(o, "error", e);
    return o;
}

void serve_format_error(serve_api api, const serve_fail *f, sbuf *out) {
    cJSON *o = error_json(api, f);
    char *s = cJSON_PrintUnformatted(o);
    if (s)
        sbuf_adds(out, s);
    else
        out->oom = true;
    cJSON_free(s);
    cJSON_Delete(o);
}

void serve_stream_error(serve_stream *s, const serve_fail *f, sbuf *out) {
    if (s->api == SERVE_ANTHROPIC)
        sbuf_adds(out, "event: error\ndata: ");
    else if (s->api == SERVE_OPENAI_RESPONSES)
        sbuf_adds(out, "event: error\ndata: ");
    else
        sbuf_adds(out, "data: ");
    serve_format_error(s->api, f, out);
    sbuf_adds(out, "\n\n");
}

void serve_reply_tool_args(const serve_reply *reply, unsigned index, sbuf *out) {
    for (size_t i = 0; i < reply->n_events; i++) {
        const serve_event *e = &reply->events[i];
        if (e->kind == SERVE_EV_TOOL_ARGS && e->tool_index == index) sbuf_adds(out, e->text);
    }
}

cJSON *serve_args_json(const char *args) {
    cJSON *o = cJSON_Parse(args);
    if (o) return o;
    /* Cut short: the pieces end between members or inside a string value (dsml_stream.c sends
     * a member's key with its value's opening quote, escapes whole). A member whose value is
     * unfinished is dropped, as the Anthropic SDK's partial-JSON reader drops it; then what is
     * open is closed. */
    char stack[64];
    size_t depth = 0, keep = strlen(args), member[64] = {0};
    bool in_string = false, escape = false;
    for (size_t i = 0; args[i]; i++) {
        char c = args[i];
        if (in_string) {
            if (escape)
                escape = false;
            else if (c == '\\')
                escape = true;
            else if (c == '"')
                in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if ((c == '{' || c == '[') && depth < sizeof stack) {
            member[depth] = i + 1;
            stack[depth++] = c == '{' ? '}' : ']';
        } else if ((c == '}' || c == ']') && depth) {
            depth--;
        } else if (c == ',' && depth) {
            member[depth - 1] = i; /* a cut member goes with its comma */
        }
    }
    if (in_string && depth) keep = member[depth - 1];
    sbuf b = {0};
    sbuf_add(&b, args, keep);
    while (depth)
        sbuf_add(&b, &stack[--depth], 1);
    o = b.oom ? NULL : cJSON_Parse(b.p ? b.p : "");
    sbuf_free(&b);
    return o;
}
