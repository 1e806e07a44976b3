/* Anthropic's Messages API (POST /v1/messages, POST /v1/messages/count_tokens): request bodies
 * to serve_request, replies to JSON and SSE events. Shapes and the event order follow the
 * @anthropic-ai/sdk package (resources/messages/messages.ts, lib/MessageStream.ts):
 * message_start, then per content block content_block_start, content_block_delta...,
 * content_block_stop, then message_delta (stop_reason and usage) and message_stop.
 * Usage counts as Anthropic's do: input_tokens excludes the prompt tokens read from the cache,
 * which cache_read_input_tokens reports. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve/parse_util.h"

/* ---- requests ------------------------------------------------------------------------------ */

/* A tool_result's content: a string or text blocks. */
static bool result_text(pu_chat *c, const cJSON *block, const char *where, const char **out,
                        serve_fail *f) {
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(block, "content");
    if (cJSON_IsArray(content)) {
        /* Images inside tool results cannot be shown to a text model: keep the text parts. */
        sbuf b = {0};
        const cJSON *part;
        cJSON_ArrayForEach(part, content) {
            const cJSON *text = cJSON_GetObjectItemCaseSensitive(part, "text");
            if (!cJSON_IsString(text)) continue;
            if (b.n) sbuf_adds(&b, "\n");
            sbuf_adds(&b, text->valuestring);
        }
        if (b.oom) return serve_failf(f, 500, "api_error", "out of memory");
        *out = b.p ? pu_chat_own(c, b.p) : "";
        return true;
    }
    return pu_content_text(c, content, where, out, f);
}

static bool user_blocks(pu_chat *c, const cJSON *content, const char *where, serve_fail *f) {
    sbuf text = {0};
    size_t k = 0;
    const cJSON *b;
    cJSON_ArrayForEach(b, content) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(b, "type");
        if (!cJSON_IsString(type)) {
            sbuf_free(&text);
            return SERVE_BAD(f, "%s.content[%zu].type: expected a string", where, k);
        }
        const char *t = type->valuestring;
        if (!strcmp(t, "text")) {
            const cJSON *s = cJSON_GetObjectItemCaseSensitive(b, "text");
            if (!cJSON_IsString(s)) {
                sbuf_free(&text);
                return SERVE_BAD(f, "%s.content[%zu].text: expected a string", where, k);
            }
            if (text.n) sbuf_adds(&text, "\n");
            sbuf_adds(&text, s->valuestring);
        } else if (!strcmp(t, "tool_result")) {
            const char *id = NULL, *body = NULL;
            char w[64];
            snprintf(w, sizeof w, "%s.content[%zu]", where, k);
            if (!pu_str(b, "tool_use_id", &id, f) || !result_text(c, b, w, &body, f)) {
                sbuf_free(&text);
                return false;
            }
            if (!id || !pu_chat_has_id(c, id)) {
                sbuf_free(&text);
                return SERVE_BAD(f,
                                 "%s.tool_use_id: \"%.60s\" answers no tool_use block of an "
                                 "earlier assistant message",
                                 w, id ? id : "");
            }
            halo_chat_message *m = pu_chat_add(c, HALO_CHAT_TOOL);
            if (m) m->content = body;
        } else if (!strcmp(t, "image") || !strcmp(t, "document")) {
            sbuf_free(&text);
            return SERVE_BAD(f, "%s.content[%zu]: %s blocks are not supported (text only)", where,
                             k, t);
        }
        /* Other blocks (search results, cache-control-only blocks, newer types) carry nothing
         * this model reads: ignored, as unknown fields are. */
        k++;
    }
    if (text.oom) return serve_failf(f, 500, "api_error", "out of memory");
    if (text.n) {
        halo_chat_message *m = pu_chat_add(c, HALO_CHAT_USER);
        if (m) m->content = pu_chat_own(c, text.p);
    } else {
        sbuf_free(&text);
    }
    return true;
}

static bool assistant_blocks(pu_chat *c, halo_chat_message *m, const cJSON *content,
                             const char *where, serve_fail *f) {
    sbuf text = {0}, reasoning = {0};
    size_t n_calls = 0, k = 0;
    const cJSON *b;
    cJSON_ArrayForEach(b, content) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(b, "type");
        if (cJSON_IsString(type) && !strcmp(type->valuestring, "tool_use")) n_calls++;
    }
    halo_chat_tool_call *calls = pu_chat_own(c, calloc(n_calls + 1, sizeof *calls));
    if (!calls) return serve_failf(f, 500, "api_error", "out of memory");
    bool ok = true;
    cJSON_ArrayForEach(b, content) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(b, "type");
        const char *t = cJSON_IsString(type) ? type->valuestring : "";
        if (!strcmp(t, "text") || !strcmp(t, "thinking")) {
            const char *key = t[1] == 'e' ? "text" : "thinking";
            const cJSON *s = cJSON_GetObjectItemCaseSensitive(b, key);
            if (!cJSON_IsString(s)) {
                ok = SERVE_BAD(f, "%s.content[%zu].%s: expected a string", where, k, key);
                break;
            }
            sbuf *into = t[1] == 'e' ? &text : &reasoning;
            sbuf_adds(into, s->valuestring);
        } else if (!strcmp(t, "tool_use")) {
            const cJSON *id = cJSON_GetObjectItemCaseSensitive(b, "id");
            const cJSON *name = cJSON_GetObjectItemCaseSensitive(b, "name");
            const cJSON *input = cJSON_GetObjectItemCaseSensitive(b, "input");
            if (!cJSON_IsString(id) || !cJSON_IsString(name) || !cJSON_IsObject(input)) {
                ok = SERVE_BAD(f,
                               "%s.content[%zu]: a tool_use block needs a string id and name "
                               "and an object input",
                               where, k);
                break;
            }
            pu_chat_add_id(c, id->valuestring);
            halo_chat_tool_call *call = &calls[m->n_tool_calls++];
            call->name = name->valuestring;
            call->arguments = pu_chat_own(c, cJSON_PrintUnformatted(input));
        }
        k++;
    }
    if (ok && (text.oom || reasoning.oom)) ok = serve_failf(f, 500, "api_error", "out of memory");
    if (!ok) {
        sbuf_free(&text);
        sbuf_free(&reasoning);
        return false;
    }
    m->tool_calls = calls;
    m->content = text.p ? pu_chat_own(c, text.p) : NULL;
    m->reasoning = reasoning.p ? pu_chat_own(c, reasoning.p) : NULL;
    return true;
}

static bool read_messages(pu_chat *c, const cJSON *req, serve_fail *f) {
    const cJSON *system = cJSON_GetObjectItemCaseSensitive(req, "system");
    if (system && !cJSON_IsNull(system)) {
        const char *text = NULL;
        if (!pu_content_text(c, system, "system", &text, f)) return false;
        halo_chat_message *m = pu_chat_add(c, HALO_CHAT_SYSTEM);
        if (m) m->content = text;
    }
    const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(req, "messages");
    if (!cJSON_IsArray(msgs)) return SERVE_BAD(f, "messages: expected an array");
    if (!cJSON_GetArraySize(msgs)) return SERVE_BAD(f, "messages: must not be empty");
    size_t i = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, msgs) {
        char where[48];
        snprintf(where, sizeof where, "messages[%zu]", i++);
        if (!cJSON_IsObject(m)) return SERVE_BAD(f, "%s: expected an object", where);
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(m, "content");
        if (!cJSON_IsString(role)) return SERVE_BAD(f, "%s.role: expected a string", where);
        bool user = !strcmp(role->valuestring, "user");
        if (!user && strcmp(role->valuestring, "assistant"))
            return SERVE_BAD(f, "%s.role: unknown role \"%.40s\" (user or assistant)", where,
                             role->valuestring);
        if (cJSON_IsString(content)) {
            halo_chat_message *out = pu_chat_add(c, user ? HALO_CHAT_USER : HALO_CHAT_ASSISTANT);
            if (out) out->content = content->valuestring;
            continue;
        }
        if (!cJSON_IsArray(content))
            return SERVE_BAD(f, "%s.content: expected a string or an array of blocks", where);
        if (user) {
            if (!user_blocks(c, content, where, f)) return false;
        } else {
            halo_chat_message *out = pu_chat_add(c, HALO_CHAT_ASSISTANT);
            if (!out) return serve_failf(f, 500, "api_error", "out of memory");
            if (!assistant_blocks(c, out, content, where, f)) return false;
        }
    }
    return true;
}

/* tools: [{"name","description","input_schema"}] in the template's OpenAI-like shape. Server
 * tools (typed, without input_schema) are not run by this server and are left out. */
static bool read_tools(const cJSON *req, char **tools_json, serve_fail *f) {
    *tools_json = NULL;
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(req, "tools");
    if (!tools || cJSON_IsNull(tools)) return true;
    if (!cJSON_IsArray(tools)) return SERVE_BAD(f, "tools: expected an array");
    const cJSON *choice = cJSON_GetObjectItemCaseSensitive(req, "tool_choice");
    const cJSON *ctype = cJSON_GetObjectItemCaseSensitive(choice, "type");
    if (cJSON_IsString(ctype) && !strcmp(ctype->valuestring, "none")) return true;
    cJSON *out = cJSON_CreateArray();
    size_t i = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, tools) {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(t, "name");
        const cJSON *schema = cJSON_GetObjectItemCaseSensitive(t, "input_schema");
        const cJSON *desc = cJSON_GetObjectItemCaseSensitive(t, "description");
        if (!cJSON_IsString(name)) {
            cJSON_Delete(out);
            return SERVE_BAD(f, "tools[%zu].name: expected a string", i);
        }
        i++;
        if (!cJSON_IsObject(schema)) continue;
        cJSON *o = cJSON_CreateObject(), *fn = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "type", "function");
        cJSON_AddItemToObject(o, "function", fn);
        cJSON_AddStringToObject(fn, "name", name->valuestring);
        if (cJSON_IsString(desc)) cJSON_AddStringToObject(fn, "description", desc->valuestring);
        cJSON_AddItemToObject(fn, "parameters", cJSON_Duplicate(schema, true));
        cJSON_AddItemToArray(out, o);
    }
    if (cJSON_GetArraySize(out)) *tools_json = cJSON_PrintUnformatted(out);
    bool oom = cJSON_GetArraySize(out) && !*tools_json;
    cJSON_Delete(out);
    return oom ? serve_failf(f, 500, "api_error", "out of memory") : true;
}

bool serve_parse_anthropic(const char *body, size_t len, const serve_model_info *mi,
                           serve_request *r, serve_fail *f) {
    cJSON *req = cJSON_ParseWithLength(body, len);
    if (!req) return SERVE_BAD(f, "the body is not valid JSON");
    pu_chat c = {0};
    char *tools = NULL;
    bool ok = false, has_max = false;
    uint32_t max_tokens = 0;
    const char *model = NULL;
    if (!cJSON_IsObject(req)) {
        SERVE_BAD(f, "the body must be a JSON object");
        goto done;
    }
    if (!pu_str(req, "model", &model, f) || !pu_bool(req, "stream", &r->stream, f) ||
        !pu_uint(req, "max_tokens", 1, &max_tokens, &has_max, f) || !pu_sampling(req, mi, r, f) ||
        !pu_stops(req, "stop_sequences", r, f) || !pu_test_reply(req, mi, r, f))
        goto done;
    if (r->api == SERVE_ANTHROPIC && !has_max) {
        SERVE_BAD(f, "max_tokens: Field required");
        goto done;
    }
    if (!(r->model = strdup(model ? model : mi->name))) {
        serve_failf(f, 500, "api_error", "out of memory");
        goto done;
    }
    /* thinking: {"type": "enabled", "budget_tokens": N} or "adaptive": on; "disabled" or
     * absent: off. A budget is not enforced (the model decides when to close </think>). */
    halo_chat_thinking thinking = HALO_THINK_NONE;
    const cJSON *th = cJSON_GetObjectItemCaseSensitive(req, "thinking");
    if (th && !cJSON_IsNull(th)) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(th, "type");
        if (!cJSON_IsObject(th) || !cJSON_IsString(type)) {
            SERVE_BAD(f, "thinking: expected an object with a string type");
            goto done;
        }
        if (strcmp(type->valuestring, "disabled")) thinking = HALO_THINK_HIGH;
    }
    if (!read_messages(&c, req, f) || !read_tools(req, &tools, f)) goto done;
    ok = pu_render(&c, mi, thinking, tools, NULL, r, f) &&
         (r->api == SERVE_ANTHROPIC_COUNT || pu_fit(mi, max_tokens, r, f));
done:
    cJSON_free(tools);
    pu_chat_free(&c);
    cJSON_Delete(req);
    return ok;
}

/* ---- replies ------------------------------------------------------------------------------- */

static const char *stop_reason(const serve_reply *reply) {
    switch (reply->finish) {
    case SERVE_FIN_LENGTH:
        return "max_tokens";
    case SERVE_FIN_TOOLS:
        return "tool_use";
    default:
        return reply->stop_sequence ? "stop_sequence" : "end_turn";
    }
}

static void add_usage(cJSON *o, const serve_usage *u, bool input) {
    cJSON *us = cJSON_AddObjectToObject(o, "usage");
    if (input) {
        cJSON_AddNumberToObject(us, "input_tokens", (double)u->prompt - u->cached);
        cJSON_AddNumberToObject(us, "cache_creation_input_tokens", 0);
        cJSON_AddNumberToObject(us, "cache_read_input_tokens", u->cached);
    }
    cJSON_AddNumberToObject(us, "output_tokens", u->completion);
}

static void tool_id(const char *msg_id, unsigned index, char *out, size_t size) {
    const char *us = strchr(msg_id, '_');
    snprintf(out, size, "toolu_%s%u", us ? us + 1 : msg_id, index);
}

/* A content block; a tool_use block's input is parsed from args (NULL: {}). */
static cJSON *block_json(const serve_event *e, const char *msg_id, bool with_body,
                         const char *args) {
    cJSON *b = cJSON_CreateObject();
    if (e->kind == SERVE_EV_TOOL) {
        char id[96];
        tool_id(msg_id, e->tool_index, id, sizeof id);
        cJSON_AddStringToObject(b, "type", "tool_use");
        cJSON_AddStringToObject(b, "id", id);
        cJSON_AddStringToObject(b, "name", e->name);
        cJSON *input = with_body && args ? serve_args_json(args) : NULL;
        cJSON_AddItemToObject(b, "input", input ? input : cJSON_CreateObject());
    } else if (e->kind == SERVE_EV_REASONING) {
        cJSON_AddStringToObject(b, "type", "thinking");
        cJSON_AddStringToObject(b, "thinking", with_body ? e->text : "");
        cJSON_AddStringToObject(b, "signature", "");
    } else {
        cJSON_AddStringToObject(b, "type", "text");
        cJSON_AddStringToObject(b, "text", with_body ? e->text : "");
    }
    return b;
}

static cJSON *message_head(const char *id, const char *model) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", id);
    cJSON_AddStringToObject(o, "type", "message");
    cJSON_AddStringToObject(o, "role", "assistant");
    cJSON_AddStringToObject(o, "model", model ? model : "");
    return o;
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

void serve_anthropic_reply(const serve_request *req, const serve_reply *reply, sbuf *out) {
    char id[48];
    serve_new_id("msg_", id);
    cJSON *o = message_head(id, req->model), *content = cJSON_AddArrayToObject(o, "content");
    /* Consecutive deltas of one kind form one block. */
    sbuf acc = {0};
    for (size_t i = 0; i < reply->n_events; i++) {
        const serve_event *e = &reply->events[i];
        if (e->kind == SERVE_EV_TOOL_ARGS) continue;
        if (e->kind == SERVE_EV_TOOL) {
            sbuf args = {0};
            serve_reply_tool_args(reply, e->tool_index, &args);
            if (args.oom) out->oom = true;
            cJSON_AddItemToArray(content, block_json(e, id, true, args.p ? args.p : ""));
            sbuf_free(&args);
            continue;
        }
        sbuf_adds(&acc, e->text);
        if (i + 1 < reply->n_events && reply->events[i + 1].kind == e->kind) continue;
        serve_event merged = {.kind = e->kind, .text = acc.p ? acc.p : ""};
        cJSON_AddItemToArray(content, block_json(&merged, id, true, NULL));
        acc.n = 0;
    }
    if (acc.oom) out->oom = true;
    sbuf_free(&acc);
    cJSON_AddStringToObject(o, "stop_reason", stop_reason(reply));
    if (reply->stop_sequence)
        cJSON_AddStringToObject(o, "stop_sequence", reply->stop_sequence);
    else
        cJSON_AddNullToObject(o, "stop_sequence");
    add_usage(o, &reply->usage, true);
    add_json(out, o);
}

static void event(sbuf *out, const char *name, cJSON *data) {
    sbuf_printf(out, "event: %s\ndata: ", name);
    cJSON_AddStringToObject(data, "type", name);
    /* "type" first, as Anthropic writes it: move it to the front. */
    cJSON *type = cJSON_DetachItemFromObjectCaseSensitive(data, "type");
    type->next = data->child;
    if (data->child) data->child->prev = type;
    data->child = type;
    add_json(out, data);
    sbuf_adds(out, "\n\n");
}

static void close_block(serve_stream *s, sbuf *out) {
    if (s->block < 0) return;
    cJSON *d = cJSON_CreateObject();
    cJSON_AddNumberToObject(d, "index", s->block);
    event(out, "content_block_stop", d);
    s->block = -1;
}

void serve_anthropic_stream(serve_stream *s, const serve_reply *reply, sbuf *out) {
    if (!reply->started && !reply->done) return;
    if (!s->started) {
        s->started = true;
        cJSON *m = message_head(s->id, s->model), *d = cJSON_CreateObject();
        cJSON_AddArrayToObject(m, "content");
        cJSON_AddNullToObject(m, "stop_reason");
        cJSON_AddNullToObject(m, "stop_sequence");
        serve_usage u = reply->usage;
        u.completion = 0;
        add_usage(m, &u, true);
        cJSON_AddItemToObject(d, "message", m);
        event(out, "message_start", d);
        event(out, "ping", cJSON_CreateObject());
    }
    for (; s->n_sent < reply->n_events; s->n_sent++) {
        const serve_event *e = &reply->events[s->n_sent];
        /* A call's argument pieces continue its tool_use block (its head opened it). */
        bool args = e->kind == SERVE_EV_TOOL_ARGS;
        if (args && (s->block < 0 || s->block_kind != SERVE_EV_TOOL)) continue;
        if (s->block >= 0 && !args && (s->block_kind != e->kind || e->kind == SERVE_EV_TOOL))
            close_block(s, out);
        if (s->block < 0) {
            s->block = (int)s->n_blocks++;
            s->block_kind = e->kind;
            cJSON *d = cJSON_CreateObject();
            cJSON_AddNumberToObject(d, "index", s->block);
            cJSON_AddItemToObject(d, "content_block", block_json(e, s->id, false, NULL));
            event(out, "content_block_start", d);
        }
        if (e->kind == SERVE_EV_TOOL) continue; /* the head: its input comes as deltas */
        cJSON *d = cJSON_CreateObject(), *delta = cJSON_CreateObject();
        cJSON_AddNumberToObject(d, "index", s->block);
        if (args) {
            cJSON_AddStringToObject(delta, "type", "input_json_delta");
            cJSON_AddStringToObject(delta, "partial_json", e->text);
        } else if (e->kind == SERVE_EV_REASONING) {
            cJSON_AddStringToObject(delta, "type", "thinking_delta");
            cJSON_AddStringToObject(delta, "thinking", e->text);
        } else {
            cJSON_AddStringToObject(delta, "type", "text_delta");
            cJSON_AddStringToObject(delta, "text", e->text);
        }
        cJSON_AddItemToObject(d, "delta", delta);
        event(out, "content_block_delta", d);
    }
    if (!reply->done) return;
    close_block(s, out);
    cJSON *d = cJSON_CreateObject(), *delta = cJSON_CreateObject();
    cJSON_AddStringToObject(delta, "stop_reason", stop_reason(reply));
    if (reply->stop_sequence)
        cJSON_AddStringToObject(delta, "stop_sequence", reply->stop_sequence);
    else
        cJSON_AddNullToObject(delta, "stop_sequence");
    cJSON_AddItemToObject(d, "delta", delta);
    add_usage(d, &reply->usage, true);
    event(out, "message_delta", d);
    event(out, "message_stop", cJSON_CreateObject());
}
