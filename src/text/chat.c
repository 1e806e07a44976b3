/* DeepSeek V4 prompt encoding, written from llama.cpp's
 * models/templates/deepseek-ai-DeepSeek-V4.jinja and deepseek-ai-DeepSeek-V4-Flash-0731.jinja
 * (copies in tools/chat/). Reading order follows the template:
 *   BOS, [reasoning-effort prefix], system prompt (all system messages joined by a blank line,
 *   then the tools block, then the response-format block), then the turns:
 *   user, developer: USER content (consecutive ones joined by "\n\n" under one tag)
 *   tool:            USER <tool_result>content</tool_result> (joined the same way)
 *   assistant:       ASSISTANT [<think>reasoning]</think>content [DSML tool calls] EOS
 *   generation:      ASSISTANT <think>, or ASSISTANT </think> without thinking
 * with USER, ASSISTANT and EOS the <｜User｜>, <｜Assistant｜> and <｜end▁of▁sentence｜> tokens.
 * An assistant turn keeps its reasoning only in thinking mode and only when it comes after the
 * last user/tool message, or tools are given, or any tool result exists, or drop_thinking is
 * off. tests/data/chat/ holds jinja2's renderings of 21 conversations in both templates;
 * tests/text/test_chat.c matches them byte for byte.
 * Everything a message supplies is written as content (chat_text_content) and the template's own
 * text straight into the buffer, so halo_chat_tokenize can parse special tokens in the latter
 * only (chat_tokens.c). */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "halo/text.h"
#include "text/chat_internal.h"
#include "text/json.h"

#define DSML "｜DSML｜"

static const char effort_v4_max[] =
    "Reasoning Effort: Absolute maximum with no shortcuts permitted.\n"
    "You MUST be very thorough in your thinking and comprehensively decompose the problem to "
    "resolve the root cause, rigorously stress-testing your logic against all potential paths, "
    "edge cases, and adversarial scenarios.\n"
    "Explicitly write out your entire deliberation process, documenting every intermediate step, "
    "considered alternative, and rejected hypothesis to ensure absolutely no assumption is left "
    "unchecked.\n\n";

/* In the 0731 template the text above became "high"'s and "max" got a new one. */
static const char effort_0731_max[] =
    "Reasoning Effort: Beyond maximum — exhaustive, relentless, and uncompromising.\n"
    "You MUST reason with the utmost depth and rigor, leaving absolutely nothing to chance: "
    "exhaustively decompose the problem into its most fundamental components, trace every causal "
    "chain to its root, and resolve the underlying cause rather than any surface symptom.\n"
    "Do not stop reasoning until you have independently verified the solution from multiple "
    "angles and are certain that no assumption remains unchecked and no error remains "
    "undiscovered.\n\n";

static const char response_format_header[] =
    "## Response Format:\n\nYou MUST strictly adhere to the following schema to reply:\n";

static const char tools_header[] =
    "## Tools\n\nYou have access to a set of tools to help answer the user's question. You can "
    "invoke tools by writing a \"<" DSML "tool_calls>\" block like the following:\n\n"
    "<" DSML "tool_calls>\n"
    "<" DSML "invoke name=\"$TOOL_NAME\">\n"
    "<" DSML "parameter name=\"$PARAMETER_NAME\" string=\"true|false\">$PARAMETER_VALUE</" DSML
    "parameter>\n...\n</" DSML "invoke>\n"
    "<" DSML "invoke name=\"$TOOL_NAME2\">\n...\n</" DSML "invoke>\n"
    "</" DSML "tool_calls>\n\n"
    "String parameters should be specified as is and set `string=\"true\"`. For all other types "
    "(numbers, booleans, arrays, objects), pass the value in JSON format and set "
    "`string=\"false\"`.\n\n"
    "If thinking_mode is enabled (triggered by <think>), you MUST output your complete reasoning "
    "inside <think>...</think> BEFORE any tool calls or final response.\n\n"
    "Otherwise, output directly after </think> with tool calls or final response.\n\n"
    "### Available Tool Schemas\n\n";

static const char tools_footer[] =
    "\nYou MUST strictly follow the above defined tool name and parameter schemas to invoke tool "
    "calls.\n";

static bool is_userish(halo_chat_role r) {
    return r == HALO_CHAT_USER || r == HALO_CHAT_DEVELOPER || r == HALO_CHAT_TOOL;
}

static bool nonempty(const char *s) {
    return s && *s;
}

/* Tool definitions: has_tools when the array is non-empty; schemas of type "function" only. */
static halo_status tools_block(const char *tools_json, chat_text *schemas, bool *has_tools,
                               halo_error *err) {
    *has_tools = false;
    if (!tools_json) return HALO_OK;
    pj *tools = NULL;
    halo_status st = pj_parse(tools_json, strlen(tools_json), &tools, err);
    if (st) return halo_error_prefix(err, "tools: ");
    if (tools->type != PJ_ARR) {
        pj_free(tools);
        return halo_fail(err, HALO_E_BAD_VALUE, "tools: expected a JSON array");
    }
    *has_tools = tools->n > 0;
    for (size_t i = 0; i < tools->n; i++) {
        const pj *type = pj_get(tools->items[i], "type");
        const pj *fn = pj_get(tools->items[i], "function");
        if (!type || type->type != PJ_STR || strcmp(type->s, "function")) continue;
        if (!fn) {
            pj_free(tools);
            return halo_fail(err, HALO_E_BAD_VALUE,
                             "tools[%zu]: a function tool without "
                             "\"function\"",
                             i);
        }
        pj_buf json = {0};
        pj_dump_py(&json, fn);
        chat_text_content(schemas, json.p, json.n);
        schemas->oom |= json.oom;
        free(json.p);
        pj_buf_adds(&schemas->b, "\n");
    }
    pj_free(tools);
    return HALO_OK;
}

static halo_status system_prompt(const halo_chat_message *msgs, size_t n, const halo_chat_params *p,
                                 chat_text *sp, bool *has_tools, halo_error *err) {
    bool first = true;
    for (size_t i = 0; i < n; i++) {
        if (msgs[i].role != HALO_CHAT_SYSTEM) continue;
        if (!first) pj_buf_adds(&sp->b, "\n\n");
        if (msgs[i].content) chat_text_contents(sp, msgs[i].content);
        first = false;
    }
    chat_text schemas = {0};
    halo_status st = tools_block(p->tools_json, &schemas, has_tools, err);
    if (!st && *has_tools) {
        if (sp->b.n) pj_buf_adds(&sp->b, "\n\n");
        pj_buf_adds(&sp->b, tools_header);
        chat_text_append(sp, &schemas);
        pj_buf_adds(&sp->b, tools_footer);
    }
    chat_text_free(&schemas);
    if (st || !p->response_format_json) return st;
    pj *rf = NULL;
    if ((st = pj_parse(p->response_format_json, strlen(p->response_format_json), &rf, err)))
        return halo_error_prefix(err, "response_format: ");
    if (sp->b.n) pj_buf_adds(&sp->b, "\n\n");
    pj_buf_adds(&sp->b, response_format_header);
    pj_buf json = {0};
    pj_dump_py(&json, rf);
    chat_text_content(sp, json.p, json.n);
    sp->oom |= json.oom;
    free(json.p);
    pj_free(rf);
    return HALO_OK;
}

/* <｜DSML｜tool_calls> block: each argument a parameter, strings as is, others as JSON. The
 * names and values are content; only the DSML framing is the template's. */
static halo_status tool_calls(const halo_chat_message *m, size_t index, chat_text *o,
                              halo_error *err) {
    pj_buf *b = &o->b;
    pj_buf_adds(b, "\n\n<" DSML "tool_calls>\n");
    for (size_t k = 0; k < m->n_tool_calls; k++) {
        const halo_chat_tool_call *c = &m->tool_calls[k];
        pj *args = NULL;
        const char *text = c->arguments ? c->arguments : "{}";
        if (pj_parse(text, strlen(text), &args, err) || args->type != PJ_OBJ) {
            pj_free(args);
            return halo_fail(err, HALO_E_BAD_VALUE,
                             "messages[%zu].tool_calls[%zu]: arguments "
                             "are not a JSON object",
                             index, k);
        }
        pj_buf_adds(b, "<" DSML "invoke name=\"");
        chat_text_contents(o, c->name ? c->name : "");
        pj_buf_adds(b, "\">\n");
        for (size_t i = 0; i < args->n; i++) {
            const pj *v = args->items[i];
            pj_buf_adds(b, "<" DSML "parameter name=\"");
            chat_text_content(o, args->keys[i], args->key_lens[i]);
            pj_buf_adds(b, v->type == PJ_STR ? "\" string=\"true\">" : "\" string=\"false\">");
            if (v->type == PJ_STR) {
                chat_text_content(o, v->s, v->len);
            } else {
                pj_buf json = {0};
                pj_dump_py(&json, v);
                chat_text_content(o, json.p, json.n);
                o->oom |= json.oom;
                free(json.p);
            }
            pj_buf_adds(b, "</" DSML "parameter>\n");
        }
        if (!args->n) pj_buf_adds(b, "\n");
        pj_buf_adds(b, "</" DSML "invoke>\n");
        pj_free(args);
    }
    pj_buf_adds(b, "</" DSML "tool_calls>");
    return HALO_OK;
}

/* The whole rendering, with the content's byte ranges marked in o. */
static halo_status render(const halo_chat_message *msgs, size_t n, const halo_chat_params *p,
                          chat_text *o, halo_error *err) {
    chat_text sp = {0};
    pj_buf *b = &o->b;
    bool has_tools = false;
    halo_status st = system_prompt(msgs, n, p, &sp, &has_tools, err);
    if (st) goto done;
    bool thinking = p->thinking != HALO_THINK_NONE;

    pj_buf_adds(b, HALO_CHAT_BOS);
    if (n && p->thinking == HALO_THINK_MAX)
        pj_buf_adds(b, p->format == HALO_CHAT_V4_FLASH_0731 ? effort_0731_max : effort_v4_max);
    else if (n && p->thinking == HALO_THINK_HIGH && p->format == HALO_CHAT_V4_FLASH_0731)
        pj_buf_adds(b, effort_v4_max);
    chat_text_append(o, &sp);

    size_t last_user = SIZE_MAX;
    bool has_tool_results = false;
    for (size_t i = 0; i < n; i++) {
        if (is_userish(msgs[i].role)) last_user = i;
        if (msgs[i].role == HALO_CHAT_TOOL) has_tool_results = true;
    }
    bool in_user = false;
    for (size_t i = 0; i < n; i++) {
        const halo_chat_message *m = &msgs[i];
        if (is_userish(m->role)) {
            pj_buf_adds(b, in_user ? "\n\n" : HALO_CHAT_USER_TAG);
            in_user = true;
            if (m->role == HALO_CHAT_TOOL) pj_buf_adds(b, "<tool_result>");
            if (m->content) chat_text_contents(o, m->content);
            if (m->role == HALO_CHAT_TOOL) pj_buf_adds(b, "</tool_result>");
        } else if (m->role == HALO_CHAT_ASSISTANT) {
            in_user = false;
            pj_buf_adds(b, HALO_CHAT_ASSISTANT_TAG);
            bool after_last_user = last_user == SIZE_MAX || i > last_user;
            bool keep =
                thinking && (p->keep_thinking || has_tools || after_last_user || has_tool_results);
            if (keep) {
                pj_buf_adds(b, HALO_CHAT_THINK_OPEN);
                if (nonempty(m->reasoning)) chat_text_contents(o, m->reasoning);
            }
            pj_buf_adds(b, HALO_CHAT_THINK_CLOSE);
            if (nonempty(m->content)) chat_text_contents(o, m->content);
            if (m->n_tool_calls && (st = tool_calls(m, i, o, err))) goto done;
            pj_buf_adds(b, HALO_CHAT_EOS);
        }
    }
    if (p->add_generation_prompt) {
        pj_buf_adds(b, HALO_CHAT_ASSISTANT_TAG);
        pj_buf_adds(b, thinking ? HALO_CHAT_THINK_OPEN : HALO_CHAT_THINK_CLOSE);
    }
    if (b->oom || o->oom || sp.b.oom || sp.oom)
        st = halo_fail(err, HALO_E_NOMEM, "chat: out of memory rendering %zu messages", n);
done:
    chat_text_free(&sp);
    return st;
}

halo_status halo_chat_render(const halo_chat_message *msgs, size_t n, const halo_chat_params *p,
                             char **out, size_t *out_len, halo_error *err) {
    *out = NULL;
    chat_text o = {0};
    halo_status st = render(msgs, n, p, &o, err);
    if (!st) {
        *out = o.b.p;
        if (out_len) *out_len = o.b.n;
        o.b.p = NULL;
    }
    chat_text_free(&o);
    return st;
}

halo_status halo_chat_tokenize(const halo_tokenizer *t, const halo_chat_message *msgs, size_t n,
                               const halo_chat_params *p, halo_tokens *out, halo_error *err) {
    chat_text o = {0};
    halo_status st = render(msgs, n, p, &o, err);
    if (!st) st = chat_text_tokenize(t, &o, out, err);
    chat_text_free(&o);
    return st;
}

/* ---- JSON requests ------------------------------------------------------------------------ */

static bool role_of(const char *s, halo_chat_role *r) {
    static const struct {
        const char *name;
        halo_chat_role role;
    } roles[] = {{"system", HALO_CHAT_SYSTEM},
                 {"user", HALO_CHAT_USER},
                 {"developer", HALO_CHAT_DEVELOPER},
                 {"assistant", HALO_CHAT_ASSISTANT},
                 {"tool", HALO_CHAT_TOOL}};
    for (size_t i = 0; i < sizeof roles / sizeof roles[0]; i++)
        if (!strcmp(s, roles[i].name)) {
            *r = roles[i].role;
            return true;
        }
    return false;
}

/* A string or null member; *out NULL for null or absent. */
static halo_status opt_str(const pj *obj, const char *key, const char *where, size_t i,
                           const char **out, halo_error *err) {
    const pj *v = pj_get(obj, key);
    *out = NULL;
    if (!v || v->type == PJ_NULL) return HALO_OK;
    if (v->type != PJ_STR)
        return halo_fail(err, HALO_E_BAD_VALUE, "%s[%zu].%s: expected a string or null", where, i,
                         key);
    *out = v->s;
    return HALO_OK;
}

static halo_status opt_bool(const pj *req, const char *key, bool *out, bool *present,
                            halo_error *err) {
    const pj *v = pj_get(req, key);
    if (present) *present = v && v->type != PJ_NULL;
    if (!v || v->type == PJ_NULL) return HALO_OK;
    if (v->type != PJ_TRUE && v->type != PJ_FALSE)
        return halo_fail(err, HALO_E_BAD_VALUE, "%s: expected true or false", key);
    *out = v->type == PJ_TRUE;
    return HALO_OK;
}

typedef struct request {
    halo_chat_message *msgs;
    halo_chat_tool_call *calls;
    char **owned; /* JSON texts made for tool-call arguments given as objects */
    size_t n_msgs, n_calls, n_owned;
} request;

static halo_status read_messages(const pj *arr, request *r, halo_error *err) {
    size_t total_calls = 0;
    for (size_t i = 0; i < arr->n; i++) {
        const pj *tc = pj_get(arr->items[i], "tool_calls");
        if (tc && tc->type == PJ_ARR) total_calls += tc->n;
    }
    r->msgs = calloc(arr->n + 1, sizeof *r->msgs);
    r->calls = calloc(total_calls + 1, sizeof *r->calls);
    r->owned = calloc(total_calls + 1, sizeof *r->owned);
    if (!r->msgs || !r->calls || !r->owned)
        return halo_fail(err, HALO_E_NOMEM, "chat: out of memory for %zu messages", arr->n);
    halo_status st;
    for (size_t i = 0; i < arr->n; i++) {
        const pj *m = arr->items[i], *role = pj_get(m, "role"), *tc = pj_get(m, "tool_calls");
        halo_chat_message *out = &r->msgs[r->n_msgs++];
        if (!role || role->type != PJ_STR || !role_of(role->s, &out->role))
            return halo_fail(err, HALO_E_BAD_VALUE,
                             "messages[%zu]: role must be system, user, "
                             "developer, assistant or tool",
                             i);
        if ((st = opt_str(m, "content", "messages", i, &out->content, err)) ||
            (st = opt_str(m, "reasoning_content", "messages", i, &out->reasoning, err)))
            return st;
        if (!tc || tc->type == PJ_NULL) continue;
        if (tc->type != PJ_ARR)
            return halo_fail(err, HALO_E_BAD_VALUE, "messages[%zu].tool_calls: expected an array",
                             i);
        out->tool_calls = r->calls + r->n_calls;
        out->n_tool_calls = tc->n;
        for (size_t k = 0; k < tc->n; k++) {
            const pj *fn = pj_get(tc->items[k], "function");
            const pj *name = pj_get(fn, "name"), *args = pj_get(fn, "arguments");
            halo_chat_tool_call *c = &r->calls[r->n_calls++];
            if (!name || name->type != PJ_STR)
                return halo_fail(err, HALO_E_BAD_VALUE,
                                 "messages[%zu].tool_calls[%zu]: "
                                 "function.name must be a string",
                                 i, k);
            c->name = name->s;
            if (args && args->type == PJ_STR) {
                c->arguments = args->s;
            } else if (args && args->type == PJ_OBJ) {
                pj_buf text = {0};
                pj_dump_py(&text, args);
                if (text.oom) return halo_fail(err, HALO_E_NOMEM, "chat: out of memory");
                r->owned[r->n_owned++] = text.p;
                c->arguments = text.p ? text.p : "{}";
            } else {
                return halo_fail(err, HALO_E_BAD_VALUE,
                                 "messages[%zu].tool_calls[%zu]: "
                                 "function.arguments must be an object or a JSON string",
                                 i, k);
            }
        }
    }
    return HALO_OK;
}

/* Reads a JSON request and renders it into o (with t: tokenizes it into ids as well). */
static halo_status render_json(const char *request_json, halo_chat_format format,
                               const halo_tokenizer *tok, chat_text *o, halo_tokens *ids,
                               halo_error *err) {
    pj *req = NULL;
    request r = {0};
    pj_buf tools = {0}, rf = {0};
    halo_status st = pj_parse(request_json, strlen(request_json), &req, err);
    if (st) return halo_error_prefix(err, "chat request: ");
    const pj *msgs = pj_get(req, "messages");
    if (!msgs || msgs->type != PJ_ARR) {
        st = halo_fail(err, HALO_E_BAD_VALUE, "chat request: \"messages\" must be an array");
        goto done;
    }
    halo_chat_params p = {.format = format};
    bool thinking = false, has_thinking = false, drop = true;
    if ((st = opt_bool(req, "thinking", &thinking, &has_thinking, err))) goto done;
    if (!has_thinking && (st = opt_bool(req, "enable_thinking", &thinking, NULL, err))) goto done;
    if ((st = opt_bool(req, "drop_thinking", &drop, NULL, err)) ||
        (st = opt_bool(req, "add_generation_prompt", &p.add_generation_prompt, NULL, err)))
        goto done;
    p.keep_thinking = !drop;
    const pj *effort = pj_get(req, "reasoning_effort");
    p.thinking = !thinking ? HALO_THINK_NONE : HALO_THINK_ON;
    if (thinking && effort && effort->type == PJ_STR && !strcmp(effort->s, "high"))
        p.thinking = HALO_THINK_HIGH;
    if (thinking && effort && effort->type == PJ_STR && !strcmp(effort->s, "max"))
        p.thinking = HALO_THINK_MAX;
    const pj *t = pj_get(req, "tools"), *f = pj_get(req, "response_format");
    if (t && t->type != PJ_NULL) {
        pj_dump_py(&tools, t);
        p.tools_json = tools.p;
    }
    if (f) { /* `response_format is defined`: even null is printed */
        pj_dump_py(&rf, f);
        p.response_format_json = rf.p;
    }
    if (tools.oom || rf.oom) {
        st = halo_fail(err, HALO_E_NOMEM, "chat: out of memory");
        goto done;
    }
    if ((st = read_messages(msgs, &r, err))) goto done;
    st = render(r.msgs, r.n_msgs, &p, o, err);
    if (!st && tok) st = chat_text_tokenize(tok, o, ids, err);
done:
    for (size_t i = 0; i < r.n_owned; i++)
        free(r.owned[i]);
    free(r.owned);
    free(r.calls);
    free(r.msgs);
    free(tools.p);
    free(rf.p);
    pj_free(req);
    return st;
}

halo_status halo_chat_render_json(const char *request_json, halo_chat_format format, char **out,
                                  size_t *out_len, halo_error *err) {
    *out = NULL;
    chat_text o = {0};
    halo_status st = render_json(request_json, format, NULL, &o, NULL, err);
    if (!st) {
        *out = o.b.p;
        if (out_len) *out_len = o.b.n;
        o.b.p = NULL;
    }
    chat_text_free(&o);
    return st;
}

halo_status halo_chat_tokenize_json(const halo_tokenizer *t, const char *request_json,
                                    halo_chat_format format, halo_tokens *out, halo_error *err) {
    chat_text o = {0};
    halo_status st = render_json(request_json, format, t, &o, out, err);
    chat_text_free(&o);
    return st;
}

halo_chat_format halo_chat_format_of(const halo_gguf *g) {
    const char *tpl = NULL;
    if (g && halo_gguf_find_kv(g, "tokenizer.chat_template") &&
        !halo_gguf_get_str(g, "tokenizer.chat_template", &tpl, NULL) && tpl &&
        strstr(tpl, "reasoning_effort_high"))
        return HALO_CHAT_V4_FLASH_0731;
    return HALO_CHAT_V4;
}
