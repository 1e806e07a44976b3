/* DSML tool calls in DeepSeek V4's output, the inverse of chat.c's rendering:
 *
 *   content\n\n<｜DSML｜tool_calls>\n
 *   <｜DSML｜invoke name="NAME">\n
 *   <｜DSML｜parameter name="KEY" string="true">raw text</｜DSML｜parameter>\n
 *   <｜DSML｜parameter name="KEY" string="false">JSON</｜DSML｜parameter>\n
 *   </｜DSML｜invoke>\n
 *   </｜DSML｜tool_calls>
 *
 * Whitespace between the tags is skipped, whatever the model wrote; text after the block (an
 * end token's text, stray newlines) is ignored. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "halo/text.h"
#include "text/json.h"

#define DSML "｜DSML｜"

typedef struct cursor {
    const char *s, *end;
} cursor;

static void skip_ws(cursor *c) {
    while (c->s < c->end && (*c->s == ' ' || *c->s == '\n' || *c->s == '\r' || *c->s == '\t'))
        c->s++;
}

static bool eat(cursor *c, const char *lit) {
    size_t n = strlen(lit);
    if ((size_t)(c->end - c->s) < n || memcmp(c->s, lit, n)) return false;
    c->s += n;
    return true;
}

/* Text up to `until` (consumed too); NULL when it never comes. */
static const char *upto(cursor *c, const char *until, size_t *len) {
    size_t n = strlen(until);
    const char *at = memmem(c->s, (size_t)(c->end - c->s), until, n);
    if (!at) return NULL;
    const char *start = c->s;
    *len = (size_t)(at - start);
    c->s = at + n;
    return start;
}

static char *dup_n(const char *s, size_t n) {
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = 0;
    }
    return d;
}

static halo_status parse_invoke(cursor *c, halo_dsml_call *call, size_t index, halo_error *err) {
    size_t len;
    const char *name = upto(c, "\">", &len);
    if (!name) return halo_fail(err, HALO_E_BAD_VALUE, "tool call %zu: unterminated name", index);
    call->name = dup_n(name, len);
    pj_buf args = {0};
    pj_buf_adds(&args, "{");
    bool first = true;
    for (;;) {
        skip_ws(c);
        if (eat(c, "</" DSML "invoke>")) break;
        if (!eat(c, "<" DSML "parameter name=\"")) {
            free(args.p);
            return halo_fail(err, HALO_E_BAD_VALUE,
                             "tool call %zu (%s): expected a parameter or "
                             "</" DSML "invoke>",
                             index, call->name ? call->name : "");
        }
        size_t klen, vlen;
        const char *key = upto(c, "\"", &klen), *value = NULL;
        bool is_string = true;
        if (key && eat(c, " string=\"")) {
            is_string = eat(c, "true\">");
            if (!is_string && !eat(c, "false\">")) key = NULL;
        } else if (key && !eat(c, ">")) {
            key = NULL;
        }
        if (key) value = upto(c, "</" DSML "parameter>", &vlen);
        if (!key || !value) {
            free(args.p);
            return halo_fail(err, HALO_E_BAD_VALUE,
                             "tool call %zu (%s): malformed or unclosed "
                             "parameter",
                             index, call->name ? call->name : "");
        }
        if (!first) pj_buf_adds(&args, ", ");
        first = false;
        pj_dump_py_string(&args, key, klen);
        pj_buf_adds(&args, ": ");
        pj *v = NULL;
        if (!is_string && !pj_parse(value, vlen, &v, NULL))
            pj_dump_py(&args, v);
        else
            pj_dump_py_string(&args, value, vlen); /* not JSON after all: keep the text */
        pj_free(v);
    }
    pj_buf_adds(&args, "}");
    call->arguments = args.p;
    if (args.oom || !call->name)
        return halo_fail(err, HALO_E_NOMEM, "out of memory parsing tool call %zu", index);
    return HALO_OK;
}

halo_status halo_dsml_parse(const char *text, size_t len, halo_dsml_reply *out, halo_error *err) {
    memset(out, 0, sizeof *out);
    static const char open[] = "<" DSML "tool_calls>";
    const char *block = memmem(text, len, open, sizeof open - 1);
    size_t content_len = block ? (size_t)(block - text) : len;
    /* The template separates content and block with a blank line. */
    if (block && content_len >= 2 && !memcmp(block - 2, "\n\n", 2)) content_len -= 2;
    out->content = dup_n(text, content_len);
    if (!out->content) return halo_fail(err, HALO_E_NOMEM, "out of memory");
    if (!block) return HALO_OK;
    cursor c = {block + sizeof open - 1, text + len};
    halo_status st = HALO_OK;
    for (;;) {
        skip_ws(&c);
        if (eat(&c, "</" DSML "tool_calls>")) break;
        if (!eat(&c, "<" DSML "invoke name=\"")) {
            st = halo_fail(err, HALO_E_BAD_VALUE,
                           "tool calls: expected <" DSML "invoke name=\""
                           " or the end of the block after %zu call%s",
                           out->n_calls, out->n_calls == 1 ? "" : "s");
            break;
        }
        halo_dsml_call *calls = realloc(out->calls, (out->n_calls + 1) * sizeof *calls);
        if (!calls) {
            st = halo_fail(err, HALO_E_NOMEM, "out of memory");
            break;
        }
        out->calls = calls;
        calls[out->n_calls] = (halo_dsml_call){0};
        st = parse_invoke(&c, &calls[out->n_calls], out->n_calls, err);
        out->n_calls++;
        if (st) break;
    }
    if (st) halo_dsml_reply_free(out);
    return st;
}

void halo_dsml_reply_free(halo_dsml_reply *r) {
    if (!r) return;
    for (size_t i = 0; i < r->n_calls; i++) {
        free(r->calls[i].name);
        free(r->calls[i].arguments);
    }
    free(r->calls);
    free(r->content);
    memset(r, 0, sizeof *r);
}
