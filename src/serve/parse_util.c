/* Shared request-parsing helpers (parse_util.h) and the entry point serve_parse. */
#include "serve/parse_util.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool serve_failf(serve_fail *f, int http, const char *type, const char *fmt, ...) {
    f->http = http;
    f->type = type;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->message, sizeof f->message, fmt, ap);
    va_end(ap);
    return false;
}

void serve_request_free(serve_request *r) {
    if (!r) return;
    free(r->model);
    halo_tokens_free(&r->prompt);
    halo_tokens_free(&r->forced);
    for (size_t i = 0; i < r->n_stop; i++)
        free(r->stop[i]);
    free(r->stop);
    free(r->bias_ids);
    free(r->bias);
    memset(r, 0, sizeof *r);
}

/* JSON is UTF-8 (RFC 8259 section 8.1); cJSON copies bytes through unchecked, so a body with
 * invalid sequences is refused here rather than echoed into prompts and replies. */
static bool valid_utf8(const char *s, size_t n, size_t *bad_at) {
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x80) {
            if (!c) {
                *bad_at = i;
                return false; /* a NUL would cut strings short */
            }
            i++;
            continue;
        }
        unsigned k = halo_utf8_seq_len((const unsigned char *)s + i, n - i);
        if (!k) {
            *bad_at = i;
            return false;
        }
        i += k;
    }
    return true;
}

bool serve_parse(serve_api api, const char *body, size_t len, const serve_model_info *mi,
                 serve_request *r, serve_fail *f) {
    memset(r, 0, sizeof *r);
    r->api = api;
    r->sp = halo_sampler_defaults();
    size_t bad = 0;
    if (!valid_utf8(body, len, &bad))
        return SERVE_BAD(f, "the request body is not valid UTF-8 (byte %zu)", bad);
    bool ok;
    switch (api) {
    case SERVE_OPENAI_CHAT:
        ok = serve_parse_openai_chat(body, len, mi, r, f);
        break;
    case SERVE_OPENAI_COMPLETIONS:
        ok = serve_parse_openai_completions(body, len, mi, r, f);
        break;
    case SERVE_OPENAI_RESPONSES:
        ok = serve_parse_responses(body, len, mi, r, f);
        break;
    default:
        ok = serve_parse_anthropic(body, len, mi, r, f);
        break;
    }
    if (!ok) serve_request_free(r);
    return ok;
}

/* ---- typed members ----------------------------------------------------------------------- */

static const cJSON *member(const cJSON *obj, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    return v && !cJSON_IsNull(v) ? v : NULL;
}

bool pu_str(const cJSON *obj, const char *key, const char **out, serve_fail *f) {
    const cJSON *v = member(obj, key);
    if (!v) return true;
    if (!cJSON_IsString(v)) return SERVE_BAD(f, "%s: expected a string", key);
    *out = v->valuestring;
    return true;
}

bool pu_bool(const cJSON *obj, const char *key, bool *out, serve_fail *f) {
    const cJSON *v = member(obj, key);
    if (!v) return true;
    if (!cJSON_IsBool(v)) return SERVE_BAD(f, "%s: expected true or false", key);
    *out = cJSON_IsTrue(v);
    return true;
}

bool pu_num(const cJSON *obj, const char *key, double lo, double hi, float *out, serve_fail *f) {
    const cJSON *v = member(obj, key);
    if (!v) return true;
    if (!cJSON_IsNumber(v)) return SERVE_BAD(f, "%s: expected a number", key);
    double d = v->valuedouble;
    if (!(d >= lo && d <= hi)) return SERVE_BAD(f, "%s: %g is not in [%g, %g]", key, d, lo, hi);
    *out = (float)d;
    return true;
}

bool pu_uint(const cJSON *obj, const char *key, uint32_t lo, uint32_t *out, bool *set,
             serve_fail *f) {
    const cJSON *v = member(obj, key);
    if (!v) return true;
    double d = cJSON_IsNumber(v) ? v->valuedouble : NAN;
    if (!(d == floor(d)) || d < lo) return SERVE_BAD(f, "%s: expected an integer >= %u", key, lo);
    *out = d > UINT32_MAX ? UINT32_MAX : (uint32_t)d;
    if (set) *set = true;
    return true;
}

bool pu_sampling(const cJSON *req, const serve_model_info *mi, serve_request *r, serve_fail *f) {
    halo_sampler_params *sp = &r->sp;
    if (!pu_num(req, "temperature", 0, 2, &sp->temperature, f) ||
        !pu_num(req, "top_p", 0, 1, &sp->top_p, f) || !pu_num(req, "min_p", 0, 1, &sp->min_p, f) ||
        !pu_num(req, "frequency_penalty", -2, 2, &sp->frequency_penalty, f) ||
        !pu_num(req, "presence_penalty", -2, 2, &sp->presence_penalty, f) ||
        !pu_num(req, "repetition_penalty", 0.01, 10, &sp->repeat_penalty, f) ||
        !pu_num(req, "repeat_penalty", 0.01, 10, &sp->repeat_penalty, f) ||
        !pu_uint(req, "top_k", 0, &sp->top_k, NULL, f) ||
        !pu_bool(req, "ignore_eos", &r->ignore_eos, f))
        return false;
    if (sp->top_p == 0) sp->top_p = 1e-6f; /* OpenAI allows 0: keep only the top token */
    const cJSON *seed = member(req, "seed");
    if (seed) {
        if (!cJSON_IsNumber(seed) || seed->valuedouble != floor(seed->valuedouble))
            return SERVE_BAD(f, "seed: expected an integer");
        sp->seed = (uint64_t)(int64_t)seed->valuedouble;
    } else {
        FILE *u = fopen("/dev/urandom", "rb");
        if (!u || fread(&sp->seed, sizeof sp->seed, 1, u) != 1) sp->seed ^= (uint64_t)(size_t)r;
        if (u) fclose(u);
    }
    const cJSON *lb = member(req, "logit_bias");
    if (!lb) return true;
    if (!cJSON_IsObject(lb)) return SERVE_BAD(f, "logit_bias: expected an object");
    size_t n = (size_t)cJSON_GetArraySize(lb);
    r->bias_ids = calloc(n + 1, sizeof *r->bias_ids);
    r->bias = calloc(n + 1, sizeof *r->bias);
    if (!r->bias_ids || !r->bias) return serve_failf(f, 500, "api_error", "out of memory");
    uint32_t n_vocab = halo_tokenizer_n_vocab(mi->tok);
    const cJSON *e;
    cJSON_ArrayForEach(e, lb) {
        char *end;
        long id = strtol(e->string, &end, 10);
        if (!*e->string || *end || id < 0 || (unsigned long)id >= n_vocab)
            return SERVE_BAD(f, "logit_bias: \"%.40s\" is not a token id below %u", e->string,
                             n_vocab);
        if (!cJSON_IsNumber(e) || !(e->valuedouble >= -100 && e->valuedouble <= 100))
            return SERVE_BAD(f, "logit_bias[\"%.40s\"]: expected a number in [-100, 100]",
                             e->string);
        r->bias_ids[r->n_bias] = (int32_t)id;
        r->bias[r->n_bias++] = (float)e->valuedouble;
    }
    return true;
}

bool pu_stops(const cJSON *req, const char *key, serve_request *r, serve_fail *f) {
    const cJSON *v = member(req, key);
    if (!v) return true;
    if (!cJSON_IsString(v) && !cJSON_IsArray(v))
        return SERVE_BAD(f, "%s: expected a string or an array of strings", key);
    size_t n = cJSON_IsString(v) ? 1 : (size_t)cJSON_GetArraySize(v);
    if (n > 16) return SERVE_BAD(f, "%s: at most 16 stop strings", key);
    r->stop = calloc(n + 1, sizeof *r->stop);
    if (!r->stop) return serve_failf(f, 500, "api_error", "out of memory");
    const cJSON *e = cJSON_IsString(v) ? v : v->child;
    for (size_t i = 0; i < n; i++, e = e->next) {
        if (!cJSON_IsString(e)) return SERVE_BAD(f, "%s[%zu]: expected a string", key, i);
        if (!*e->valuestring) continue; /* an empty stop string would end every reply at once */
        if (!(r->stop[r->n_stop] = strdup(e->valuestring)))
            return serve_failf(f, 500, "api_error", "out of memory");
        r->n_stop++;
    }
    return true;
}

/* ---- conversations ----------------------------------------------------------------------- */

halo_chat_message *pu_chat_add(pu_chat *c, halo_chat_role role) {
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 8;
        halo_chat_message *m = realloc(c->msgs, cap * sizeof *m);
        if (!m) {
            c->oom = true;
            return NULL;
        }
        c->msgs = m;
        c->cap = cap;
    }
    halo_chat_message *m = &c->msgs[c->n++];
    memset(m, 0, sizeof *m);
    m->role = role;
    return m;
}

void *pu_chat_own(pu_chat *c, void *p) {
    if (!p) {
        c->oom = true;
        return NULL;
    }
    if (c->n_owned == c->cap_owned) {
        size_t cap = c->cap_owned ? c->cap_owned * 2 : 8;
        void **o = realloc(c->owned, cap * sizeof *o);
        if (!o) {
            free(p);
            c->oom = true;
            return NULL;
        }
        c->owned = o;
        c->cap_owned = cap;
    }
    return c->owned[c->n_owned++] = p;
}

void pu_chat_add_id(pu_chat *c, const char *id) {
    if (!id) return;
    if (c->n_ids == c->cap_ids) {
        size_t cap = c->cap_ids ? c->cap_ids * 2 : 8;
        const char **p = realloc(c->ids, cap * sizeof *p);
        if (!p) {
            c->oom = true;
            return;
        }
        c->ids = p;
        c->cap_ids = cap;
    }
    c->ids[c->n_ids++] = id;
}

bool pu_chat_has_id(const pu_chat *c, const char *id) {
    for (size_t i = 0; i < c->n_ids; i++)
        if (!strcmp(c->ids[i], id)) return true;
    return false;
}

void pu_chat_free(pu_chat *c) {
    for (size_t i = 0; i < c->n_owned; i++)
        free(c->owned[i]);
    free(c->owned);
    free(c->msgs);
    free(c->ids);
    memset(c, 0, sizeof *c);
}

bool pu_content_text(pu_chat *c, const cJSON *content, const char *where, const char **out,
                     serve_fail *f) {
    *out = NULL;
    if (!content || cJSON_IsNull(content)) return true;
    if (cJSON_IsString(content)) {
        *out = content->valuestring;
        return true;
    }
    if (!cJSON_IsArray(content))
        return SERVE_BAD(f, "%s.content: expected a string or an array of parts", where);
    sbuf b = {0};
    size_t i = 0;
    const cJSON *part;
    cJSON_ArrayForEach(part, content) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(part, "type");
        const cJSON *text = cJSON_GetObjectItemCaseSensitive(part, "text");
        if (!cJSON_IsString(type)) {
            sbuf_free(&b);
            return SERVE_BAD(f, "%s.content[%zu].type: expected a string", where, i);
        }
        if (strcmp(type->valuestring, "text") && strcmp(type->valuestring, "input_text") &&
            strcmp(type->valuestring, "output_text")) {
            sbuf_free(&b);
            return SERVE_BAD(f,
                             "%s.content[%zu]: parts of type \"%.40s\" are not supported "
                             "(text only)",
                             where, i, type->valuestring);
        }
        if (!cJSON_IsString(text)) {
            sbuf_free(&b);
            return SERVE_BAD(f, "%s.content[%zu].text: expected a string", where, i);
        }
        if (i++) sbuf_adds(&b, "\n");
        sbuf_adds(&b, text->valuestring);
    }
    if (b.oom) {
        sbuf_free(&b);
        return serve_failf(f, 500, "api_error", "out of memory");
    }
    *out = b.p ? pu_chat_own(c, b.p) : "";
    return true;
}

bool pu_render(pu_chat *c, const serve_model_info *mi, halo_chat_thinking thinking,
               const char *tools_json, const char *response_format_json, serve_request *r,
               serve_fail *f) {
    if (c->oom) return serve_failf(f, 500, "api_error", "out of memory");
    halo_chat_params p = {.format = mi->format,
                          .thinking = thinking,
                          .add_generation_prompt = true,
                          .tools_json = tools_json,
                          .response_format_json = response_format_json};
    halo_error err = {0};
    /* Straight to token ids, as `halo run` does: the template's markers are special tokens and
     * every message is plain text, so no request can forge a turn or a tool call. */
    if (halo_chat_tokenize(mi->tok, c->msgs, c->n, &p, &r->prompt, &err))
        return SERVE_BAD(f, "%s", err.message);
    r->thinking = thinking != HALO_THINK_NONE;
    r->tools = tools_json != NULL;
    return true;
}

bool pu_fit(const serve_model_info *mi, uint32_t max_tokens, serve_request *r, serve_fail *f) {
    if (!r->prompt.n) return SERVE_BAD(f, "the prompt is empty");
    if (r->prompt.n >= mi->n_ctx)
        return SERVE_BAD(f,
                         "prompt is too long: %zu tokens, the context holds %u (the server's "
                         "--ctx)",
                         r->prompt.n, mi->n_ctx);
    /* Agents ask for 32k tokens whatever the model: clamp to the room left, do not refuse. */
    uint32_t room = mi->n_ctx - (uint32_t)r->prompt.n;
    r->max_tokens = max_tokens && max_tokens < room ? max_tokens : room;
    return true;
}

bool pu_test_reply(const cJSON *req, const serve_model_info *mi, serve_request *r, serve_fail *f) {
    const char *reply = NULL;
    if (!mi->test_hooks) return true;
    if (!pu_str(req, "halo_test_reply", &reply, f)) return false;
    if (!reply) return true;
    halo_error err = {0};
    if (halo_tokenizer_encode(mi->tok, reply, strlen(reply), HALO_TOKENIZE_SPECIAL, &r->forced,
                              &err))
        return SERVE_BAD(f, "halo_test_reply: %s", err.message);
    return true;
}
