/* DeepSeek V4 chat encoding: byte-identical to jinja2's renderings of the committed
 * conversations (tests/data/chat/, made by tools/chat/render.py) in both template versions, the
 * C API (no JSON) agreeing with them, and bad requests failing with a message. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "halo/text.h"
#include "text/json.h"

#define DATA "tests/data/chat/"

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
        free(s);
        s = NULL;
    }
    if (s) s[n] = 0;
    if (len) *len = (size_t)n;
    fclose(f);
    return s;
}

/* Index of the first differing byte, for a readable failure. */
static void show_difference(const char *name, const char *got, size_t gl, const char *want,
                            size_t wl) {
    size_t i = 0;
    while (i < gl && i < wl && got[i] == want[i])
        i++;
    size_t from = i > 40 ? i - 40 : 0;
    fprintf(stderr,
            "%s: differs at byte %zu (got %zu bytes, want %zu)\n  got:  %.80s\n  want: "
            "%.80s\n",
            name, i, gl, wl, got + from, want + from);
}

static void renders_every_conversation_like_jinja2(void) {
    size_t len = 0;
    char *text = slurp(DATA "conversations.json", &len);
    CHECK(text != NULL);
    if (!text) return;
    pj *cases = NULL;
    halo_error err = {0};
    CHECK_INT(pj_parse(text, len, &cases, &err), HALO_OK);
    int compared = 0;
    static const struct {
        const char *suffix;
        halo_chat_format format;
    } formats[] = {{"v4", HALO_CHAT_V4}, {"v4-flash-0731", HALO_CHAT_V4_FLASH_0731}};
    for (size_t i = 0; cases && i < cases->n; i++) {
        const pj *name = pj_get(cases->items[i], "name"), *req = pj_get(cases->items[i], "request");
        CHECK(name && req);
        if (!name || !req) continue;
        pj_buf rq = {0};
        pj_dump_py(&rq, req);
        for (int f = 0; f < 2; f++) {
            char path[512], *got = NULL;
            size_t want_len = 0, got_len = 0;
            snprintf(path, sizeof path, DATA "%s.%s.txt", name->s, formats[f].suffix);
            char *want = slurp(path, &want_len);
            CHECK(want != NULL);
            halo_status st = halo_chat_render_json(rq.p, formats[f].format, &got, &got_len, &err);
            CHECK_INT(st, HALO_OK);
            if (st) fprintf(stderr, "%s: %s\n", path, err.message);
            if (want && got) {
                bool same = got_len == want_len && !memcmp(got, want, want_len);
                if (!same) show_difference(path, got, got_len, want, want_len);
                CHECK(same);
                compared++;
            }
            free(want);
            free(got);
        }
        free(rq.p);
    }
    printf("  %d renderings compared\n", compared);
    CHECK_INT(compared, 42);
    pj_free(cases);
    free(text);
}

static void c_api_matches_the_reference(void) {
    /* multi_turn_think_drops_earlier_reasoning, built without JSON. */
    halo_chat_message m[] = {
        {.role = HALO_CHAT_USER, .content = "Is 17 prime?"},
        {.role = HALO_CHAT_ASSISTANT,
         .reasoning = "Check divisors up to 4: 2, 3 do not divide.",
         .content = "Yes."},
        {.role = HALO_CHAT_USER, .content = "And 21?"},
    };
    halo_chat_params p = {.thinking = HALO_THINK_ON, .add_generation_prompt = true};
    char *got = NULL;
    size_t len = 0;
    halo_error err;
    CHECK_INT(halo_chat_render(m, 3, &p, &got, &len, &err), HALO_OK);
    char *want = slurp(DATA "multi_turn_think_drops_earlier_reasoning.v4.txt", NULL);
    CHECK_STR(got, want);
    free(got);
    free(want);
    /* Thinking on keeps reasoning when asked (drop_thinking=false). */
    p.keep_thinking = true;
    m[1].reasoning = "Divisors 2, 3: no.";
    CHECK_INT(halo_chat_render(m, 3, &p, &got, &len, &err), HALO_OK);
    want = slurp(DATA "think_drop_thinking_false.v4.txt", NULL);
    CHECK_STR(got, want);
    free(got);
    free(want);
}

static void rendering_tokenizes_special_tags_as_single_tokens(void) {
    halo_tokenizer *t = NULL;
    halo_error err;
    CHECK_INT(halo_tokenizer_open("tests/tokenizer/deepseek-v3-tokenizer.gguf", &t, &err), HALO_OK);
    if (!t) return;
    halo_chat_message m[] = {{.role = HALO_CHAT_USER, .content = "Hi"}};
    halo_chat_params p = {.add_generation_prompt = true};
    char *s = NULL;
    CHECK_INT(halo_chat_render(m, 1, &p, &s, NULL, &err), HALO_OK);
    halo_tokens ids = {0};
    CHECK_INT(halo_tokenizer_encode(t, s, strlen(s), HALO_TOKENIZE_SPECIAL, &ids, &err), HALO_OK);
    /* BOS, <｜User｜>, "Hi", <｜Assistant｜>, then "</think>" (text in this vocabulary) */
    CHECK(ids.n >= 4);
    if (ids.n >= 4) {
        CHECK_INT(ids.ids[0], halo_tokenizer_bos(t));
        CHECK_INT(ids.ids[1], halo_tokenizer_find(t, HALO_CHAT_USER_TAG));
        CHECK_INT(ids.ids[3], halo_tokenizer_find(t, HALO_CHAT_ASSISTANT_TAG));
    }
    halo_tokens_free(&ids);
    free(s);
    halo_tokenizer_free(t);
}

static void bad_requests_fail_with_a_message(void) {
    char *out = NULL;
    halo_error err = {0};
    CHECK_INT(halo_chat_render_json("{\"messages\": [{\"role\": \"wizard\"}]}", HALO_CHAT_V4, &out,
                                    NULL, &err),
              HALO_E_BAD_VALUE);
    CHECK_CONTAINS(err.message, "messages[0]: role must be");
    CHECK_INT(halo_chat_render_json("{\"messages\": 3}", HALO_CHAT_V4, &out, NULL, &err),
              HALO_E_BAD_VALUE);
    CHECK_CONTAINS(err.message, "\"messages\" must be an array");
    CHECK_INT(halo_chat_render_json("{\"messages\": [}", HALO_CHAT_V4, &out, NULL, &err),
              HALO_E_BAD_VALUE);
    CHECK_CONTAINS(err.message, "chat request: JSON:");
    CHECK_INT(
        halo_chat_render_json("{\"messages\": [{\"role\": \"assistant\", \"tool_calls\": "
                              "[{\"function\": {\"name\": \"f\", \"arguments\": \"[1]\"}}]}]}",
                              HALO_CHAT_V4, &out, NULL, &err),
        HALO_E_BAD_VALUE);
    CHECK_CONTAINS(err.message, "messages[0].tool_calls[0]: arguments are not a JSON object");
    CHECK_INT(halo_chat_render_json("{\"messages\": [], \"thinking\": \"yes\"}", HALO_CHAT_V4, &out,
                                    NULL, &err),
              HALO_E_BAD_VALUE);
    CHECK_CONTAINS(err.message, "thinking: expected true or false");
    CHECK(out == NULL);
}

static void python_json_numbers_and_strings(void) {
    static const char *const cases[][2] = {
        {"[1, -0, 1.0, -0.0, 100.0, 1e16, 1.5e16, 1e-05, 0.0001, 123456789012345678901234]",
         "[1, 0, 1.0, -0.0, 100.0, 1e+16, 1.5e+16, 1e-05, 0.0001, 123456789012345678901234]"},
        {"[0.1, 2.5E+3, 1e400, 3.14159265358979, 1234567890123456.7]",
         "[0.1, 2500.0, Infinity, 3.14159265358979, 1234567890123456.8]"},
        {"{\"a\":\"\\u00e9\\ud83d\\ude00\\n\\u0007\\/\",\"b\":{}, \"a\": []}",
         "{\"a\": [], \"b\": {}}"},
        {"\"\\u00e9\\ud83d\\ude00\\n\\u0007\\/\\\"\"", "\"é😀\\n\\u0007/\\\"\""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pj *v = NULL;
        halo_error err;
        CHECK_INT(pj_parse(cases[i][0], strlen(cases[i][0]), &v, &err), HALO_OK);
        pj_buf b = {0};
        if (v) pj_dump_py(&b, v);
        CHECK_STR(b.p, cases[i][1]);
        free(b.p);
        pj_free(v);
    }
}

/* Every assistant turn of the tool conversations' renderings parses into content and calls that
 * render back to the same bytes. */
static void dsml_tool_calls_parse_and_render_back(void) {
    static const char *const files[] = {DATA "tools_think_full_exchange.v4.txt",
                                        DATA "tools_nothink_no_system_empty_args.v4.txt",
                                        DATA "tool_results_make_reasoning_kept.v4.txt"};
    int replies = 0, calls = 0;
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        char *text = slurp(files[f], NULL);
        CHECK(text != NULL);
        for (char *at = text; text && (at = strstr(at, HALO_CHAT_ASSISTANT_TAG));) {
            at += strlen(HALO_CHAT_ASSISTANT_TAG);
            char *close = strstr(at, HALO_CHAT_THINK_CLOSE), *end = strstr(at, HALO_CHAT_EOS);
            if (!close || !end || close > end) continue;
            const char *reply = close + strlen(HALO_CHAT_THINK_CLOSE);
            size_t len = (size_t)(end - reply);
            halo_dsml_reply r;
            halo_error err;
            CHECK_INT(halo_dsml_parse(reply, len, &r, &err), HALO_OK);
            halo_chat_tool_call tc[8];
            for (size_t i = 0; i < r.n_calls && i < 8; i++)
                tc[i] = (halo_chat_tool_call){r.calls[i].name, r.calls[i].arguments};
            halo_chat_message m = {.role = HALO_CHAT_ASSISTANT,
                                   .content = r.content,
                                   .tool_calls = tc,
                                   .n_tool_calls = r.n_calls};
            halo_chat_params p = {0};
            char *again = NULL;
            CHECK_INT(halo_chat_render(&m, 1, &p, &again, NULL, &err), HALO_OK);
            const char *body = again ? strstr(again, HALO_CHAT_THINK_CLOSE) : NULL;
            CHECK(body &&
                  strlen(body) == strlen(HALO_CHAT_THINK_CLOSE) + len + strlen(HALO_CHAT_EOS) &&
                  !memcmp(body + strlen(HALO_CHAT_THINK_CLOSE), reply, len));
            replies++;
            calls += (int)r.n_calls;
            free(again);
            halo_dsml_reply_free(&r);
        }
        free(text);
    }
    CHECK_INT(replies, 5);
    CHECK_INT(calls, 6);

    /* The values come back typed. */
    const char *out =
        "Let me look.\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n"
        "<｜DSML｜parameter name=\"city\" string=\"true\">Zürich \"Nord\"</｜DSML｜"
        "parameter>\n<｜DSML｜parameter name=\"days\" string=\"false\">3</｜DSML｜"
        "parameter>\n<｜DSML｜parameter name=\"opts\" string=\"false\">{not json}"
        "</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>";
    halo_dsml_reply r;
    halo_error err;
    CHECK_INT(halo_dsml_parse(out, strlen(out), &r, &err), HALO_OK);
    CHECK_STR(r.content, "Let me look.");
    CHECK_INT(r.n_calls, 1);
    if (r.n_calls == 1) {
        CHECK_STR(r.calls[0].name, "get_weather");
        CHECK_STR(r.calls[0].arguments,
                  "{\"city\": \"Zürich \\\"Nord\\\"\", \"days\": 3, \"opts\": \"{not json}\"}");
    }
    halo_dsml_reply_free(&r);
    /* Plain text is all content; a block cut short is an error. */
    CHECK_INT(halo_dsml_parse("just text", 9, &r, &err), HALO_OK);
    CHECK_STR(r.content, "just text");
    CHECK_INT(r.n_calls, 0);
    halo_dsml_reply_free(&r);
    const char *cut =
        "<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"a\" "
        "string=\"true\">x";
    CHECK_INT(halo_dsml_parse(cut, strlen(cut), &r, &err), HALO_E_BAD_VALUE);
    CHECK_CONTAINS(err.message, "tool call 0 (f): malformed or unclosed parameter");
    CHECK(r.calls == NULL && r.content == NULL);
    const char *junk = "<｜DSML｜tool_calls>\n<｜DSML｜nonsense>";
    CHECK_INT(halo_dsml_parse(junk, strlen(junk), &r, &err), HALO_E_BAD_VALUE);
    CHECK_CONTAINS(err.message, "expected <｜DSML｜invoke name=\" or the end of the block");
}

int main(void) {
    RUN(renders_every_conversation_like_jinja2);
    RUN(c_api_matches_the_reference);
    RUN(rendering_tokenizes_special_tags_as_single_tokens);
    RUN(bad_requests_fail_with_a_message);
    RUN(python_json_numbers_and_strings);
    RUN(dsml_tool_calls_parse_and_render_back);
    return check_report();
}
