/* OpenAI's Chat Completions (POST /v1/chat/completions) and legacy Completions
 * (POST /v1/completions): request bodies to serve_request, replies to JSON and SSE chunks.
 * Shapes follow the openai npm package's types (resources/chat/completions.ts,
 * resources/completions.ts): chunks end with `data: [DONE]`; with stream_options.include_usage
 * a last chunk with empty choices carries the usage; an error inside a stream is a data line
 * with an "error" object, which the SDK raises as an APIError. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "serve/parse_util.h"

/* ---- requests ------------------------------------------------------------------------------ */

static bool read_tool_calls(pu_chat *c, halo_chat_message *m, const cJSON *tc, size_t i,
                            serve_fail *f) {
    if (!tc || cJSON_IsNull(tc)) return true;
    if (!cJSON_IsArray(tc)) return SERVE_BAD(f, "messages[%zu].tool_calls: expected an array", i);
    size_t n = (size_t)cJSON_GetArraySize(tc);
    halo_chat_tool_call *calls = pu_chat_own(c, calloc(n + 1, sizeof *calls));
    if (!calls) return serve_failf(f, 500, "api_error", "out of memory");
    size_t k = 0;
    const cJSON *call;
    cJSON_ArrayForEach(call, tc) {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(call, "function");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(fn, "arguments");
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(call, "id");
        if (!cJSON_IsString(name))
            return SERVE_BAD(f, "messages[%zu].tool_calls[%zu].function.name: expected a string", i,
                             k);
        if (args && !cJSON_IsString(args) && !cJSON_IsNull(args))
            return SERVE_BAD(f,
                             "messages[%zu].tool_calls[%zu].function.arguments: expected a "
                             "string (JSON text)",
                             i, k);
        if (cJSON_IsString(id)) pu_chat_add_id(c, id->valuestring);
        calls[k].name = name->valuestring;
        calls[k].arguments = cJSON_IsString(args) && *args->valuestring ? args->valuestring : "{}";
        k++;
    }
    m->tool_calls = calls;
    m->n_tool_calls = n;
    return true;
}

static bool read_messages(pu_chat *c, const cJSON *msgs, serve_fail *f) {
    if (!cJSON_IsArray(msgs)) return SERVE_BAD(f, "messages: expected an array");
    if (!cJSON_GetArraySize(msgs)) return SERVE_BAD(f, "messages: must not be empty");
    size_t i = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, msgs) {
        char where[48];
        snprintf(where, sizeof where, "messages[%zu]", i);
        if (!cJSON_IsObject(m)) return SERVE_BAD(f, "%s: expected an object", where);
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
        if (!cJSON_IsString(role)) return SERVE_BAD(f, "%s.role: expected a string", where);
        static const struct {
            const char *name;
            halo_chat_role role;
        } roles[] = {{"system", HALO_CHAT_SYSTEM},
                     {"developer", HALO_CHAT_DEVELOPER},
                     {"user", HALO_CHAT_USER},
                     {"assistant", HALO_CHAT_ASSISTANT},
                     {"tool", HALO_CHAT_TOOL}};
        size_t r = 0;
        while (r < 5 && strcmp(role->valuestring, roles[r].name))
            r++;
        if (r == 5)
            return SERVE_BAD(f,
                             "%s.role: unknown role \"%.40s\" (system, developer, user, "
                             "assistant or tool)",
                             where, role->valuestring);
        /* A developer message is the system prompt for models without a developer role
         * (OpenAI's rule); DeepSeek V4's template treats it as a user turn, so keep that. */
        halo_chat_message *out = pu_chat_add(c, roles[r].role);
        if (!out) return serve_failf(f, 500, "api_error", "out of memory");
        if (!pu_content_text(c, cJSON_GetObjectItemCaseSensitive(m, "content"), where,
                             &out->content, f))
            return false;
        if (roles[r].role == HALO_CHAT_ASSISTANT) {
            const char *reasoning = NULL;
            if (!pu_str(m, "reasoning_content", &reasoning, f)) return false;
            out->reasoning = reasoning;
            if (!read_tool_calls(c, out, cJSON_GetObjectItemCaseSensitive(m, "tool_calls"), i, f))
                return false;
        } else if (roles[r].role == HALO_CHAT_TOOL) {
            const char *id = NULL;
            if (!pu_str(m, "tool_call_id", &id, f)) return false;
            if (!id) return SERVE_BAD(f, "%s.tool_call_id: required for a tool message", where);
            if (!pu_chat_has_id(c, id))
                return SERVE_BAD(f,
                                 "%s.tool_call_id: \"%.60s\" answers no tool call of an earlier "
                                 "assistant message",
                                 where, id);
        }
        i++;
    }
    return true;
}

/* tools: [{"type":"function","function":{"name",...}}], kept in that shape for the template. */
static bool read_tools(const cJSON *req, char **tools_json, serve_fail *f) {
    *tools_json = NULL;
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(req, "tools");
    if (!tools || cJSON_IsNull(tools)) return true;
    if (!cJSON_IsArray(tools)) return SERVE_BAD(f, "tools: expected an array");
    size_t i = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, tools) {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
        if (!cJSON_IsString(cJSON_GetObjectItemCaseSensitive(fn, "name")))
            return SERVE_BAD(f, "tools[%zu].function.name: expected a string", i);
        i++;
    }
    const cJSON *choice = cJSON_GetObjectItemCaseSensitive(req, "tool_choice");
    if (!i || (cJSON_IsString(choice) && !strcmp(choice->valuestring, "none"))) return true;
    if (!(*tools_json = cJSON_PrintUnformatted(tools)))
        return serve_failf(f, 500, "api_error", "out of memory");
    return true;
}

/* Thinking: reasoning_effort (none/minimal: off; low..high: on; max/xhigh: max), or the
 * DeepSeek/vLLM switches "thinking" (a bool or {"type":"enabled"}), "enable_thinking" and
 * chat_template_kwargs. Default off, as `halo run`. */
static bool read_thinking(const cJSON *req, halo_chat_thinking *out, serve_fail *f) {
    *out = HALO_THINK_NONE;
    bool on = false;
    const cJSON *kw = cJSON_GetObjectItemCaseSensitive(req, "chat_template_kwargs");
    const cJSON *th = cJSON_GetObjectItemCaseSensitive(req, "thinking");
    if (cJSON_IsObject(th)) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(th, "type");
        on = cJSON_IsString(type) && strcmp(type->valuestring, "disabled");
    } else if (!pu_bool(req, "thinking", &on, f)) {
        return false;
    }
    if (!pu_bool(req, "enable_thinking", &on, f)) return false;
    if (cJSON_IsObject(kw) &&
        (!pu_bool(kw, "thinking", &on, f) || !pu_bool(kw, "enable_thinking", &on, f)))
        return false;
    if (on) *out = HALO_THINK_HIGH;
    const char *effort = NULL;
    if (!pu_str(req, "reasoning_effort", &effort, f)) return false;
    if (effort) {
        if (!strcmp(effort, "none") || !strcmp(effort, "minimal"))
            *out = HALO_THINK_NONE;
        else if (!strcmp(effort, "max") || !strcmp(effort, "xhigh"))
            *out = HALO_THINK_MAX;
        else
            *out = HALO_THINK_HIGH;
    }
    return true;
}

static bool common_fields(const cJSON *req, const serve_model_info *mi, serve_request *r,
                          serve_fail *f) {
    const char *model = NULL;
    if (!pu_str(req, "model", &model, f) || !pu_bool(req, "stream", &r->stream, f)) return false;
    if (!(r->model = strdup(model ? model : mi->name)))
        return serve_failf(f, 500, "api_error", "out of memory");
    const cJSON *so = cJSON_GetObjectItemCaseSensitive(req, "stream_options");
    if (cJSON_IsObject(so) && !pu_bool(so, "include_usage", &r->include_usage, f)) return false;
    uint32_t n = 1;
    if (!pu_uint(req, "n", 1, &n, NULL, f)) return false;
    if (n != 1) return SERVE_BAD(f, "n: only 1 choice per request is supported");
    return pu_sampling(req, mi, r, f) && pu_stops(req, "stop", r, f) &&
           pu_test_reply(req, mi, r, f);
}

bool serve_parse_openai_chat(const char *body, size_t len, const serve_model_info *mi,
                             serve_request *r, serve_fail *f) {
    cJSON *req = cJSON_ParseWithLength(body, len);
    if (!req) return SERVE_BAD(f, "the body is not valid JSON");
    pu_chat c = {0};
    char *tools = NULL, *rf = NULL;
    halo_chat_thinking thinking;
    uint32_t max_tokens = 0;
    bool ok = false;
    if (!cJSON_IsObject(req)) {
        SERVE_BAD(f, "the body must be a JSON object");
        goto done;
    }
    if (!common_fields(req, mi, r, f) || !read_thinking(req, &thinking, f) ||
        !pu_uint(req, "max_tokens", 1, &max_tokens, NULL, f) ||
        !pu_uint(req, "max_completion_tokens", 1, &max_tokens, NULL, f) ||
        !read_messages(&c, cJSON_GetObjectItemCaseSensitive(req, "messages"), f) ||
        !read_tools(req, &tools, f))
        goto done;
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(req, "response_format");
    if (fmt && !cJSON_IsNull(fmt)) {
        if (!cJSON_IsObject(fmt)) {
            SERVE_BAD(f, "response_format: expected an object");
            goto done;
        }
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(fmt, "type");
        if (!cJSON_IsString(type) || strcmp(type->valuestring, "text")) {
            /* json_object / json_schema: the template writes the schema into the system
             * prompt; the reply is not constrained by a grammar. */
            const cJSON *schema = cJSON_GetObjectItemCaseSensitive(fmt, "json_schema");
            if (!(rf = cJSON_PrintUnformatted(schema ? schema : fmt))) {
                serve_failf(f, 500, "api_error", "out of memory");
                goto done;
            }
        }
    }
    ok = pu_render(&c, mi, thinking, tools, rf, r, f) && pu_fit(mi, max_tokens, r, f);
done:
    cJSON_free(tools);
    cJSON_free(rf);
    pu_chat_free(&c);
    cJSON_Delete(req);
    return ok;
}

bool serve_parse_openai_completions(const char *body, size_t len, const serve_model_info *mi,
                                    serve_request *r, serve_fail *f) {
    cJSON *req = cJSON_ParseWithLength(body, len);
    if (!req) return SERVE_BAD(f, "the body is not valid JSON");
    bool ok = false;
    uint32_t max_tokens = 16; /* OpenAI's documented default for this endpoint */
    if (!cJSON_IsObject(req)) {
        SERVE_BAD(f, "the body must be a JSON object");
        goto done;
    }
    if (!common_fields(req, mi, r, f) || !pu_uint(req, "max_tokens", 1, &max_tokens, NULL, f))
        goto done;
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(req, "prompt");
    if (cJSON_IsArray(p) && cJSON_GetArraySize(p) == 1 && cJSON_IsString(p->child)) p = p->child;
    if (!cJSON_IsString(p)) {
        SERVE_BAD(f, "prompt: expected a string (one prompt per request)");
        goto done;
    }
    /* As `halo run --raw`: the text as plain text (with "special": true, as --special, control
     * tokens written in it are matched), BOS first when the model adds one and the prompt does
     * not spell it. */
    bool special = false;
    if (!pu_bool(req, "special", &special, f)) goto done;
    halo_error err = {0};
    int32_t bos = halo_tokenizer_bos(mi->tok);
    if (mi->add_bos && bos >= 0 && halo_tokens_push(&r->prompt, bos, &err)) {
        serve_failf(f, 500, "api_error", "out of memory");
        goto done;
    }
    size_t at = r->prompt.n;
    if (halo_tokenizer_encode(mi->tok, p->valuestring, strlen(p->valuestring),
                              special ? HALO_TOKENIZE_SPECIAL : 0, &r->prompt, &err)) {
        SERVE_BAD(f, "prompt: %s", err.message);
        goto done;
    }
    if (at == 1 && r->prompt.n > 1 && r->prompt.ids[1] == bos) {
        memmove(r->prompt.ids, r->prompt.ids + 1, (r->prompt.n - 1) * sizeof *r->prompt.ids);
        r->prompt.n--;
    }
    if (r->prompt.n == at) {
        SERVE_BAD(f, "prompt: must not be empty");
        goto done;
    }
    ok = pu_fit(mi, max_tokens, r, f);
done:
    cJSON_Delete(req);
    return ok;
}

/* ---- replies ------------------------------------------------------------------------------- */

static const char *finish_name(serve_finish fin) {
    switch (fin) {
    case SERVE_FIN_LENGTH:
        return "length";
    case SERVE_FIN_TOOLS:
        return "tool_calls";
    default:
        return "stop";
    }
}

static cJSON *usage_json(const serve_usage *u) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "prompt_tokens", u->prompt);
    cJSON_AddNumberToObject(o, "completion_tokens", u->completion);
    cJSON_AddNumberToObject(o, "total_tokens", (double)u->prompt + u->completion);
    cJSON *pd = cJSON_AddObjectToObject(o, "prompt_tokens_details");
    cJSON_AddNumberToObject(pd, "cached_tokens", u->cached);
    cJSON *cd = cJSON_AddObjectToObject(o, "completion_tokens_details");
    cJSON_AddNumberToObject(cd, "reasoning_tokens", u->reasoning);
    return o;
}

static void tool_id(const char *resp_id, unsigned index, char *out, size_t size) {
    const char *dash = strchr(resp_id, '-');
    snprintf(out, size, "call_%s_%u", dash ? dash + 1 : resp_id, index);
}

static void add_json(sbuf *out, cJSON *o) {
    char *s = o ? cJSON_PrintUnformatted(o) : NULL;
    if (!s) {
        out->oom = true;
    } else {
        sbuf_adds(out, s);
        cJSON_free(s);
    }
    cJSON_Delete(o);
}

static void add_data(sbuf *out, cJSON *o) {
    sbuf_adds(out, "data: ");
    add_json(out, o);
    sbuf_adds(out, "\n\n");
}

void serve_openai_reply(serve_api api, const serve_request *req, const serve_reply *reply,
                        sbuf *out) {
    char id[48];
    serve_new_id(api == SERVE_OPENAI_CHAT ? "chatcmpl-" : "cmpl-", id);
    sbuf content = {0}, reasoning = {0};
    cJSON *o = cJSON_CreateObject(), *choices, *choice, *calls = NULL;
    cJSON_AddStringToObject(o, "id", id);
    cJSON_AddStringToObject(o, "object",
                            api == SERVE_OPENAI_CHAT ? "chat.completion" : "text_completion");
    cJSON_AddNumberToObject(o, "created", (double)time(NULL));
    cJSON_AddStringToObject(o, "model", req->model ? req->model : "");
    choices = cJSON_AddArrayToObject(o, "choices");
    cJSON_AddItemToArray(choices, choice = cJSON_CreateObject());
    cJSON_AddNumberToObject(choice, "index", 0);
    for (size_t i = 0; i < reply->n_events; i++) {
        const serve_event *e = &reply->events[i];
        if (e->kind == SERVE_EV_CONTENT) sbuf_adds(&content, e->text);
        if (e->kind == SERVE_EV_REASONING) sbuf_adds(&reasoning, e->text);
        if (e->kind == SERVE_EV_TOOL) {
            char cid[96];
            tool_id(id, e->tool_index, cid, sizeof cid);
            if (!calls) calls = cJSON_CreateArray();
            cJSON *c = cJSON_CreateObject(), *fn;
            cJSON_AddStringToObject(c, "id", cid);
            cJSON_AddStringToObject(c, "type", "function");
            cJSON_AddItemToObject(c, "function", fn = cJSON_CreateObject());
            cJSON_AddStringToObject(fn, "name", e->name);
            sbuf args = {0};
            serve_reply_tool_args(reply, e->tool_index, &args);
            if (args.oom) out->oom = true;
            cJSON_AddStringToObject(fn, "arguments", args.p ? args.p : "");
            sbuf_free(&args);
            cJSON_AddItemToArray(calls, c);
        }
    }
    if (api == SERVE_OPENAI_CHAT) {
        cJSON *m = cJSON_AddObjectToObject(choice, "message");
        cJSON_AddStringToObject(m, "role", "assistant");
        if (content.n || !calls)
            cJSON_AddStringToObject(m, "content", content.p ? content.p : "");
        else
            cJSON_AddNullToObject(m, "content");
        if (reasoning.n) cJSON_AddStringToObject(m, "reasoning_content", reasoning.p);
        if (calls) cJSON_AddItemToObject(m, "tool_calls", calls);
    } else {
        cJSON_AddStringToObject(choice, "text", content.p ? content.p : "");
        cJSON_Delete(calls);
    }
    cJSON_AddNullToObject(choice, "logprobs");
    cJSON_AddStringToObject(choice, "finish_reason", finish_name(reply->finish));
    cJSON_AddItemToObject(o, "usage", usage_json(&reply->usage));
    if (content.oom || reasoning.oom) out->oom = true;
    sbuf_free(&content);
    sbuf_free(&reasoning);
    add_json(out, o);
}

/* A chunk with one choice whose delta (chat) or text (completions) is given. */
static cJSON *chunk(serve_stream *s, cJSON *delta, const char *text, const char *finish) {
    bool chat = s->api == SERVE_OPENAI_CHAT;
    cJSON *o = cJSON_CreateObject(), *choices, *c;
    cJSON_AddStringToObject(o, "id", s->id);
    cJSON_AddStringToObject(o, "object", chat ? "chat.completion.chunk" : "text_completion");
    cJSON_AddNumberToObject(o, "created", (double)s->created);
    cJSON_AddStringToObject(o, "model", s->model);
    cJSON_AddItemToObject(o, "choices", choices = cJSON_CreateArray());
    cJSON_AddItemToArray(choices, c = cJSON_CreateObject());
    cJSON_AddNumberToObject(c, "index", 0);
    if (chat)
        cJSON_AddItemToObject(c, "delta", delta ? delta : cJSON_CreateObject());
    else
        cJSON_AddStringToObject(c, "text", text ? text : "");
    cJSON_AddNullToObject(c, "logprobs");
    if (finish)
        cJSON_AddStringToObject(c, "finish_reason", finish);
    else
        cJSON_AddNullToObject(c, "finish_reason");
    if (s->req->include_usage) cJSON_AddNullToObject(o, "usage");
    return o;
}

void serve_openai_stream(serve_stream *s, const serve_reply *reply, sbuf *out) {
    bool chat = s->api == SERVE_OPENAI_CHAT;
    if (!reply->started && !reply->done) return;
    if (!s->started) {
        s->started = true;
        if (chat) {
            cJSON *d = cJSON_CreateObject();
            cJSON_AddStringToObject(d, "role", "assistant");
            cJSON_AddStringToObject(d, "content", "");
            add_data(out, chunk(s, d, NULL, NULL));
        }
    }
    for (; s->n_sent < reply->n_events; s->n_sent++) {
        const serve_event *e = &reply->events[s->n_sent];
        if (!chat) {
            if (e->kind == SERVE_EV_CONTENT) add_data(out, chunk(s, NULL, e->text, NULL));
            continue;
        }
        cJSON *d = cJSON_CreateObject();
        if (e->kind == SERVE_EV_CONTENT) cJSON_AddStringToObject(d, "content", e->text);
        if (e->kind == SERVE_EV_REASONING) cJSON_AddStringToObject(d, "reasoning_content", e->text);
        if (e->kind == SERVE_EV_TOOL || e->kind == SERVE_EV_TOOL_ARGS) {
            /* The call's head (index, id, name, empty arguments), then pieces of its arguments
             * as the model writes them: clients concatenate them by index. */
            cJSON *calls = cJSON_AddArrayToObject(d, "tool_calls"), *c = cJSON_CreateObject(), *fn;
            cJSON_AddNumberToObject(c, "index", e->tool_index);
            if (e->kind == SERVE_EV_TOOL) {
                char cid[96];
                tool_id(s->id, e->tool_index, cid, sizeof cid);
                cJSON_AddStringToObject(c, "id", cid);
                cJSON_AddStringToObject(c, "type", "function");
            }
            cJSON_AddItemToObject(c, "function", fn = cJSON_CreateObject());
            if (e->kind == SERVE_EV_TOOL) cJSON_AddStringToObject(fn, "name", e->name);
            cJSON_AddStringToObject(fn, "arguments", e->text);
            cJSON_AddItemToArray(calls, c);
        }
        add_data(out, chunk(s, d, NULL, NULL));
    }
    if (!reply->done) return;
    add_data(out, chunk(s, NULL, NULL, finish_name(reply->finish)));
    if (s->req->include_usage) {
        cJSON *o = chunk(s, NULL, NULL, NULL);
        cJSON_ReplaceItemInObject(o, "choices", cJSON_CreateArray());
        cJSON_ReplaceItemInObject(o, "usage", usage_json(&reply->usage));
        add_data(out, o);
    }
    sbuf_adds(out, "data: [DONE]\n\n");
}
