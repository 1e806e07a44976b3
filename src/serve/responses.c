/* OpenAI's Responses API (POST /v1/responses), which Codex CLI and newer OpenAI clients speak:
 * input items (messages, function_call, function_call_output, reasoning) to a conversation;
 * the reply as output items (reasoning, message, function_call) and, streaming, the typed
 * events of the openai package's resources/responses/responses.ts (response.created ...
 * response.output_text.delta ... response.completed, each with a sequence_number). An output
 * item is a run of events of one kind, or one tool call; its id is derived from the response id
 * and its index so the streamed items and the final response agree. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "serve/parse_util.h"

/* ---- requests ------------------------------------------------------------------------------ */

static bool read_input(pu_chat *c, const cJSON *req, serve_fail *f) {
    const char *instructions = NULL;
    if (!pu_str(req, "instructions", &instructions, f)) return false;
    if (instructions) {
        halo_chat_message *m = pu_chat_add(c, HALO_CHAT_SYSTEM);
        if (m) m->content = instructions;
    }
    const cJSON *input = cJSON_GetObjectItemCaseSensitive(req, "input");
    if (cJSON_IsString(input)) {
        halo_chat_message *m = pu_chat_add(c, HALO_CHAT_USER);
        if (m) m->content = input->valuestring;
        return true;
    }
    if (!cJSON_IsArray(input)) return SERVE_BAD(f, "input: expected a string or an array");
    size_t n_calls = 0, i = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, input) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(it, "type");
        if (cJSON_IsString(type) && !strcmp(type->valuestring, "function_call")) n_calls++;
    }
    halo_chat_tool_call *calls = pu_chat_own(c, calloc(n_calls + 1, sizeof *calls));
    if (!calls) return serve_failf(f, 500, "api_error", "out of memory");
    size_t k = 0;
    const char *reasoning = NULL;
    cJSON_ArrayForEach(it, input) {
        char where[48];
        snprintf(where, sizeof where, "input[%zu]", i++);
        if (!cJSON_IsObject(it)) return SERVE_BAD(f, "%s: expected an object", where);
        const char *type = "message", *role = NULL;
        if (!pu_str(it, "type", &type, f) || !pu_str(it, "role", &role, f)) return false;
        halo_chat_message *last = c->n ? &c->msgs[c->n - 1] : NULL;
        if (!strcmp(type, "message")) {
            static const struct {
                const char *name;
                halo_chat_role role;
            } roles[] = {{"system", HALO_CHAT_SYSTEM},
                         {"developer", HALO_CHAT_DEVELOPER},
                         {"user", HALO_CHAT_USER},
                         {"assistant", HALO_CHAT_ASSISTANT}};
            size_t r = 0;
            while (role && r < 4 && strcmp(role, roles[r].name))
                r++;
            if (!role || r == 4)
                return SERVE_BAD(f, "%s.role: unknown role \"%.40s\"", where, role ? role : "");
            halo_chat_message *m = pu_chat_add(c, roles[r].role);
            if (!m) return serve_failf(f, 500, "api_error", "out of memory");
            if (!pu_content_text(c, cJSON_GetObjectItemCaseSensitive(it, "content"), where,
                                 &m->content, f))
                return false;
            if (roles[r].role == HALO_CHAT_ASSISTANT) m->reasoning = reasoning, reasoning = NULL;
        } else if (!strcmp(type, "function_call")) {
            const char *id = NULL, *name = NULL, *args = NULL;
            if (!pu_str(it, "call_id", &id, f) || !pu_str(it, "name", &name, f) ||
                !pu_str(it, "arguments", &args, f))
                return false;
            if (!id || !name) return SERVE_BAD(f, "%s: call_id and name are required", where);
            pu_chat_add_id(c, id);
            /* Consecutive calls belong to one assistant turn. */
            if (!last || last->role != HALO_CHAT_ASSISTANT ||
                (last->n_tool_calls && last->tool_calls + last->n_tool_calls != calls + k)) {
                if (!(last = pu_chat_add(c, HALO_CHAT_ASSISTANT)))
                    return serve_failf(f, 500, "api_error", "out of memory");
                last->reasoning = reasoning, reasoning = NULL;
            }
            if (!last->n_tool_calls) last->tool_calls = calls + k;
            last->n_tool_calls++;
            calls[k].name = name;
            calls[k++].arguments = args && *args ? args : "{}";
        } else if (!strcmp(type, "function_call_output")) {
            const char *id = NULL;
            const cJSON *output = cJSON_GetObjectItemCaseSensitive(it, "output");
            if (!pu_str(it, "call_id", &id, f)) return false;
            if (!id || !pu_chat_has_id(c, id))
                return SERVE_BAD(f, "%s.call_id: \"%.60s\" answers no earlier function_call", where,
                                 id ? id : "");
            halo_chat_message *m = pu_chat_add(c, HALO_CHAT_TOOL);
            if (!m) return serve_failf(f, 500, "api_error", "out of memory");
            if (!pu_content_text(c, output, where, &m->content, f)) return false;
        } else if (!strcmp(type, "reasoning")) {
            const cJSON *parts = cJSON_GetObjectItemCaseSensitive(it, "content");
            if (!cJSON_IsArray(parts)) parts = cJSON_GetObjectItemCaseSensitive(it, "summary");
            const cJSON *p0 = cJSON_IsArray(parts) ? parts->child : NULL;
            const cJSON *text = cJSON_GetObjectItemCaseSensitive(p0, "text");
            if (cJSON_IsString(text)) reasoning = text->valuestring;
        }
        /* item_reference, web search calls and newer item types: nothing to render */
    }
    return true;
}

static bool read_tools(const cJSON *req, char **tools_json, serve_fail *f) {
    *tools_json = NULL;
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(req, "tools");
    if (!tools || cJSON_IsNull(tools)) return true;
    if (!cJSON_IsArray(tools)) return SERVE_BAD(f, "tools: expected an array");
    const cJSON *choice = cJSON_GetObjectItemCaseSensitive(req, "tool_choice");
    if (cJSON_IsString(choice) && !strcmp(choice->valuestring, "none")) return true;
    cJSON *out = cJSON_CreateArray();
    size_t i = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, tools) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(t, "type");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(t, "name");
        i++;
        if (!cJSON_IsString(type) || strcmp(type->valuestring, "function")) continue;
        if (!cJSON_IsString(name)) {
            cJSON_Delete(out);
            return SERVE_BAD(f, "tools[%zu].name: expected a string", i - 1);
        }
        cJSON *o = cJSON_CreateObject(), *fn = cJSON_Duplicate(t, true);
        cJSON_DeleteItemFromObjectCaseSensitive(fn, "type");
        cJSON_DeleteItemFromObjectCaseSensitive(fn, "strict");
        cJSON_AddStringToObject(o, "type", "function");
        cJSON_AddItemToObject(o, "function", fn);
        cJSON_AddItemToArray(out, o);
    }
    if (cJSON_GetArraySize(out)) *tools_json = cJSON_PrintUnformatted(out);
    bool oom = cJSON_GetArraySize(out) && !*tools_json;
    cJSON_Delete(out);
    return oom ? serve_failf(f, 500, "api_error", "out of memory") : true;
}

bool serve_parse_responses(const char *body, size_t len, const serve_model_info *mi,
                           serve_request *r, serve_fail *f) {
    cJSON *req = cJSON_ParseWithLength(body, len);
    if (!req) return SERVE_BAD(f, "the body is not valid JSON");
    pu_chat c = {0};
    char *tools = NULL;
    bool ok = false;
    uint32_t max_tokens = 0;
    const char *model = NULL;
    halo_chat_thinking thinking = HALO_THINK_NONE;
    if (!cJSON_IsObject(req)) {
        SERVE_BAD(f, "the body must be a JSON object");
        goto done;
    }
    if (!pu_str(req, "model", &model, f) || !pu_bool(req, "stream", &r->stream, f) ||
        !pu_uint(req, "max_output_tokens", 1, &max_tokens, NULL, f) ||
        !pu_sampling(req, mi, r, f) || !pu_test_reply(req, mi, r, f))
        goto done;
    if (!(r->model = strdup(model ? model : mi->name))) {
        serve_failf(f, 500, "api_error", "out of memory");
        goto done;
    }
    const cJSON *reasoning = cJSON_GetObjectItemCaseSensitive(req, "reasoning");
    const cJSON *effort = cJSON_GetObjectItemCaseSensitive(reasoning, "effort");
    if (cJSON_IsString(effort) && strcmp(effort->valuestring, "none") &&
        strcmp(effort->valuestring, "minimal"))
        thinking = HALO_THINK_HIGH;
    if (!read_input(&c, req, f) || !read_tools(req, &tools, f)) goto done;
    ok = pu_render(&c, mi, thinking, tools, NULL, r, f) && pu_fit(mi, max_tokens, r, f);
done:
    cJSON_free(tools);
    pu_chat_free(&c);
    cJSON_Delete(req);
    return ok;
}

/* ---- replies ------------------------------------------------------------------------------- */

static void item_id(const char *resp_id, const char *prefix, unsigned index, char *out,
                    size_t size) {
    const char *us = strchr(resp_id, '_');
    snprintf(out, size, "%s_%s%u", prefix, us ? us + 1 : resp_id, index);
}

static const char *prefix_of(serve_ev_kind k) {
    return k == SERVE_EV_TOOL ? "fc" : k == SERVE_EV_REASONING ? "rs" : "msg";
}

/* An output item; text is the whole text (message, reasoning) or the arguments. */
static cJSON *item_json(const char *resp_id, unsigned index, serve_ev_kind kind, const char *name,
                        const char *text, bool done) {
    char id[96], call[96];
    item_id(resp_id, prefix_of(kind), index, id, sizeof id);
    cJSON *o = cJSON_CreateObject();
    if (kind == SERVE_EV_TOOL) {
        item_id(resp_id, "call", index, call, sizeof call);
        cJSON_AddStringToObject(o, "type", "function_call");
        cJSON_AddStringToObject(o, "id", id);
        cJSON_AddStringToObject(o, "call_id", call);
        cJSON_AddStringToObject(o, "name", name ? name : "");
        cJSON_AddStringToObject(o, "arguments", done ? text : "");
        cJSON_AddStringToObject(o, "status", done ? "completed" : "in_progress");
    } else if (kind == SERVE_EV_REASONING) {
        cJSON_AddStringToObject(o, "type", "reasoning");
        cJSON_AddStringToObject(o, "id", id);
        cJSON_AddArrayToObject(o, "summary");
        if (done) {
            cJSON *content = cJSON_AddArrayToObject(o, "content"), *p = cJSON_CreateObject();
            cJSON_AddStringToObject(p, "type", "reasoning_text");
            cJSON_AddStringToObject(p, "text", text);
            cJSON_AddItemToArray(content, p);
        }
    } else {
        cJSON_AddStringToObject(o, "type", "message");
        cJSON_AddStringToObject(o, "id", id);
        cJSON_AddStringToObject(o, "status", done ? "completed" : "in_progress");
        cJSON_AddStringToObject(o, "role", "assistant");
        cJSON *content = cJSON_AddArrayToObject(o, "content");
        if (done) {
            cJSON *p = cJSON_CreateObject();
            cJSON_AddStringToObject(p, "type", "output_text");
            cJSON_AddStringToObject(p, "text", text);
            cJSON_AddArrayToObject(p, "annotations");
            cJSON_AddItemToArray(content, p);
        }
    }
    return o;
}

static cJSON *response_json(const char *id, long created, const serve_request *req,
                            const serve_reply *reply) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", id);
    cJSON_AddStringToObject(o, "object", "response");
    cJSON_AddNumberToObject(o, "created_at", (double)created);
    bool incomplete = reply->done && reply->finish == SERVE_FIN_LENGTH;
    cJSON_AddStringToObject(o, "status",
                            !reply->done ? "in_progress"
                            : incomplete ? "incomplete"
                                         : "completed");
    if (incomplete) {
        cJSON *d = cJSON_AddObjectToObject(o, "incomplete_details");
        cJSON_AddStringToObject(d, "reason", "max_output_tokens");
    } else {
        cJSON_AddNullToObject(o, "incomplete_details");
    }
    cJSON_AddNullToObject(o, "error");
    cJSON_AddStringToObject(o, "model", req->model ? req->model : "");
    cJSON *output = cJSON_AddArrayToObject(o, "output");
    if (reply->done) {
        sbuf acc = {0};
        unsigned index = 0;
        for (size_t i = 0; i < reply->n_events; i++) {
            const serve_event *e = &reply->events[i];
            if (e->kind == SERVE_EV_TOOL_ARGS) continue;
            if (e->kind == SERVE_EV_TOOL) {
                sbuf args = {0};
                serve_reply_tool_args(reply, e->tool_index, &args);
                cJSON_AddItemToArray(
                    output, item_json(id, index++, e->kind, e->name, args.p ? args.p : "", true));
                sbuf_free(&args);
                continue;
            }
            sbuf_adds(&acc, e->text);
            if (i + 1 < reply->n_events && reply->events[i + 1].kind == e->kind) continue;
            cJSON_AddItemToArray(output,
                                 item_json(id, index++, e->kind, NULL, acc.p ? acc.p : "", true));
            acc.n = 0;
        }
        sbuf_free(&acc);
        const serve_usage *u = &reply->usage;
        cJSON *us = cJSON_AddObjectToObject(o, "usage");
        cJSON_AddNumberToObject(us, "input_tokens", u->prompt);
        cJSON_AddNumberToObject(cJSON_AddObjectToObject(us, "input_tokens_details"),
                                "cached_tokens", u->cached);
        cJSON_AddNumberToObject(us, "output_tokens", u->completion);
        cJSON_AddNumberToObject(cJSON_AddObjectToObject(us, "output_tokens_details"),
                                "reasoning_tokens", u->reasoning);
        cJSON_AddNumberToObject(us, "total_tokens", (double)u->prompt + u->completion);
    } else {
        cJSON_AddNullToObject(o, "usage");
    }
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

void serve_responses_reply(const serve_request *req, const serve_reply *reply, sbuf *out) {
    char id[48];
    serve_new_id("resp_", id);
    add_json(out, response_json(id, (long)time(NULL), req, reply));
}

static void event(serve_stream *s, sbuf *out, const char *type, cJSON *data) {
    cJSON_AddStringToObject(data, "type", type);
    cJSON_AddNumberToObject(data, "sequence_number", s->seq++);
    sbuf_printf(out, "event: %s\ndata: ", type);
    add_json(out, data);
    sbuf_adds(out, "\n\n");
}

static cJSON *at(serve_stream *s, bool with_content) {
    char id[96];
    item_id(s->id, prefix_of(s->block_kind), (unsigned)s->block, id, sizeof id);
    cJSON *d = cJSON_CreateObject();
    cJSON_AddStringToObject(d, "item_id", id);
    cJSON_AddNumberToObject(d, "output_index", s->block);
    if (with_content) cJSON_AddNumberToObject(d, "content_index", 0);
    return d;
}

static void close_item(serve_stream *s, sbuf *out) {
    if (s->block < 0) return;
    const char *text = s->acc.p ? s->acc.p : "";
    cJSON *d;
    if (s->block_kind == SERVE_EV_CONTENT) {
        d = at(s, true);
        cJSON_AddStringToObject(d, "text", text);
        event(s, out, "response.output_text.done", d);
        d = at(s, true);
        cJSON *part = cJSON_AddObjectToObject(d, "part");
        cJSON_AddStringToObject(part, "type", "output_text");
        cJSON_AddStringToObject(part, "text", text);
        cJSON_AddArrayToObject(part, "annotations");
        event(s, out, "response.content_part.done", d);
    } else if (s->block_kind == SERVE_EV_REASONING) {
        d = at(s, true);
        cJSON_AddStringToObject(d, "text", text);
        event(s, out, "response.reasoning_text.done", d);
    } else {
        d = at(s, false);
        cJSON_AddStringToObject(d, "arguments", text);
        event(s, out, "response.function_call_arguments.done", d);
    }
    d = cJSON_CreateObject();
    cJSON_AddNumberToObject(d, "output_index", s->block);
    cJSON_AddItemToObject(
        d, "item", item_json(s->id, (unsigned)s->block, s->block_kind, s->item_name, text, true));
    event(s, out, "response.output_item.done", d);
    s->block = -1;
    s->acc.n = 0;
}

void serve_responses_stream(serve_stream *s, const serve_reply *reply, sbuf *out) {
    if (!reply->started && !reply->done) return;
    if (!s->started) {
        s->started = true;
        serve_reply empty = {0};
        cJSON *d = cJSON_CreateObject();
        cJSON_AddItemToObject(d, "response", response_json(s->id, s->created, s->req, &empty));
        event(s, out, "response.created", d);
        d = cJSON_CreateObject();
        cJSON_AddItemToObject(d, "response", response_json(s->id, s->created, s->req, &empty));
        event(s, out, "response.in_progress", d);
    }
    for (; s->n_sent < reply->n_events; s->n_sent++) {
        const serve_event *e = &reply->events[s->n_sent];
        /* A call's argument pieces continue its function_call item (its head opened it). */
        bool args = e->kind == SERVE_EV_TOOL_ARGS;
        if (args && (s->block < 0 || s->block_kind != SERVE_EV_TOOL)) continue;
        if (s->block >= 0 && !args && (s->block_kind != e->kind || e->kind == SERVE_EV_TOOL))
            close_item(s, out);
        if (s->block < 0) {
            s->block = (int)s->n_items++;
            s->block_kind = e->kind;
            s->item_name = e->name;
            cJSON *d = cJSON_CreateObject();
            cJSON_AddNumberToObject(d, "output_index", s->block);
            cJSON_AddItemToObject(
                d, "item", item_json(s->id, (unsigned)s->block, e->kind, e->name, "", false));
            event(s, out, "response.output_item.added", d);
            if (e->kind == SERVE_EV_CONTENT) {
                d = at(s, true);
                cJSON *part = cJSON_AddObjectToObject(d, "part");
                cJSON_AddStringToObject(part, "type", "output_text");
                cJSON_AddStringToObject(part, "text", "");
                cJSON_AddArrayToObject(part, "annotations");
                event(s, out, "response.content_part.added", d);
            }
        }
        if (e->kind == SERVE_EV_TOOL) continue; /* the head: its arguments come as deltas */
        sbuf_adds(&s->acc, e->text);
        cJSON *d = at(s, !args);
        cJSON_AddStringToObject(d, "delta", e->text);
        event(s, out,
              args                            ? "response.function_call_arguments.delta"
              : e->kind == SERVE_EV_REASONING ? "response.reasoning_text.delta"
                                              : "response.output_text.delta",
              d);
    }
    if (!reply->done) return;
    close_item(s, out);
    cJSON *d = cJSON_CreateObject();
    cJSON_AddItemToObject(d, "response", response_json(s->id, s->created, s->req, reply));
    event(s, out, reply->finish == SERVE_FIN_LENGTH ? "response.incomplete" : "response.completed",
          d);
}
