/* The reply reader of halo serve (src/serve/output.c), fed text in awkward pieces: stop strings
 * and DSML markers split across pieces, the blank line before a tool-call block, a block left
 * unfinished, DSML without tools, invalid UTF-8. Expected values are written from the DSML
 * format the chat encoding teaches (src/text/chat.c's tools header) and the APIs' stop rules. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "serve/output.h"

#define D "｜DSML｜"
#define BLOCK                                                                                      \
    "<" D "tool_calls>\n<" D "invoke name=\"get_weather\">\n<" D                                   \
    "parameter name=\"city\" string=\"true\">Paris</" D "parameter>\n</" D "invoke>\n</" D         \
    "tool_calls>"

typedef struct got {
    char content[1024], reasoning[256], name[64], args[1024], args2[256];
    int n_tools, n_events, n_arg_pieces;
    bool cut, broken;
} got;

static void on_event(void *user, serve_ev_kind kind, const char *text, const char *name,
                     unsigned index) {
    got *g = user;
    g->n_events++;
    if (kind == SERVE_EV_CONTENT)
        strncat(g->content, text, sizeof g->content - 1 - strlen(g->content));
    if (kind == SERVE_EV_REASONING)
        strncat(g->reasoning, text, sizeof g->reasoning - 1 - strlen(g->reasoning));
    if (kind == SERVE_EV_TOOL) {
        CHECK_INT(index, g->n_tools);
        CHECK_STR(text, "");
        g->n_tools++;
        if (!index) snprintf(g->name, sizeof g->name, "%s", name);
    }
    if (kind == SERVE_EV_TOOL_ARGS) {
        CHECK_INT(index + 1, g->n_tools); /* pieces of the call whose head came last */
        char *to = index ? g->args2 : g->args;
        size_t size = index ? sizeof g->args2 : sizeof g->args;
        strncat(to, text, size - 1 - strlen(to));
        g->n_arg_pieces += !index;
    }
}

/* Feeds text in pieces of `piece` bytes; returns whether the reader asked to stop. */
static bool feed(const char *text, size_t piece, bool tools, const char *stop, got *g,
                 const char **stop_hit) {
    char *stops[1] = {(char *)stop};
    serve_request r = {.tools = tools, .stop = stop ? stops : NULL, .n_stop = stop ? 1 : 0};
    serve_output o;
    memset(g, 0, sizeof *g);
    serve_output_init(&o, NULL, &r, on_event, g);
    bool stopped = false;
    for (size_t i = 0, n = strlen(text); i < n && !stopped; i += piece)
        stopped = !serve_output_text(&o, text + i, n - i < piece ? n - i : piece);
    serve_output_finish(&o);
    if (stop_hit) *stop_hit = o.stop_hit;
    g->cut = o.cut;
    g->broken = o.broken;
    serve_output_free(&o);
    return stopped;
}

static void stop_string_split_across_pieces_ends_the_reply(void) {
    got g;
    const char *hit = NULL;
    for (size_t piece = 1; piece <= 4; piece++) {
        CHECK(feed("Hello world, and more", piece, false, "o w", &g, &hit));
        CHECK_STR(g.content, "Hell");
        CHECK_STR(hit, "o w");
    }
    CHECK(!feed("Hello", 2, false, "lo!", &g, &hit));
    CHECK_STR(g.content, "Hello"); /* a held prefix of a stop string comes out at the end */
    CHECK(hit == NULL);
}

static void tool_call_block_becomes_a_call_whatever_the_pieces(void) {
    got g;
    for (size_t piece = 1; piece <= 7; piece++) {
        CHECK(feed("Let me look.\n\n" BLOCK, piece, true, NULL, &g, NULL));
        CHECK_STR(g.content, "Let me look.");
        CHECK_INT(g.n_tools, 1);
        CHECK_STR(g.name, "get_weather");
        CHECK_STR(g.args, "{\"city\": \"Paris\"}");
    }
}

static void newlines_not_before_a_block_are_kept(void) {
    got g;
    feed("a\n\nb\n", 1, true, NULL, &g, NULL);
    CHECK_STR(g.content, "a\n\nb\n");
}

static void unfinished_block_is_text(void) {
    got g;
    const char *cut = "Look.\n\n<" D "tool_calls>\n<" D "invoke name=\"get_wea";
    CHECK(!feed(cut, 3, true, NULL, &g, NULL));
    CHECK_INT(g.n_tools, 0);
    CHECK(!g.cut && !g.broken);
    CHECK_STR(g.content, "Look."
                         "<" D "tool_calls>\n<" D "invoke name=\"get_wea");
}

/* Arguments as Python's json.dumps(ensure_ascii=False) writes them (what the chat template's
 * tojson renders on the next turn): `, ` and `: ` separators, \" \\ \n escaped, other text
 * as is; a string="false" value re-printed as JSON. */
#define LONG_TEXT "He said \"hi\"\\ then\nleft: caf\xc3\xa9 \xe2\x86\x92 done. "
#define LONG_JSON "He said \\\"hi\\\"\\\\ then\\nleft: caf\xc3\xa9 \xe2\x86\x92 done. "
#define TWO_CALLS                                                                                  \
    "<" D "tool_calls>\n<" D "invoke name=\"write\">\n<" D                                         \
    "parameter name=\"path\" string=\"true\">a.txt</" D "parameter>\n<" D                          \
    "parameter name=\"text\" string=\"true\">" LONG_TEXT LONG_TEXT LONG_TEXT "</" D                \
    "parameter>\n<" D "parameter name=\"opts\" string=\"false\">{\"n\":[1,2.50, true]}</" D        \
    "parameter>\n</" D "invoke>\n<" D "invoke name=\"ls\">\n<" D                                   \
    "parameter name=\"all\" string=\"false\">nope</" D "parameter>\n</" D "invoke>\n</" D          \
    "tool_calls>"

static void tool_arguments_stream_in_pieces_that_add_up_to_the_call(void) {
    for (size_t piece = 1; piece <= 9; piece++) {
        got g;
        CHECK(feed(TWO_CALLS, piece, true, NULL, &g, NULL));
        CHECK_INT(g.n_tools, 2);
        CHECK(!g.cut && !g.broken);
        CHECK_STR(g.name, "write");
        CHECK_STR(g.args, "{\"path\": \"a.txt\", \"text\": \"" LONG_JSON LONG_JSON LONG_JSON
                          "\", \"opts\": {\"n\": [1, 2.5, true]}}");
        CHECK_STR(g.args2, "{\"all\": \"nope\"}");
        /* The long value comes as the pieces come, not in one piece at its end. */
        CHECK(g.n_arg_pieces >= (int)(100 / piece));
    }
}

static void a_reply_cut_inside_a_call_leaves_it_open(void) {
    got g;
    const char *cut = "<" D "tool_calls>\n<" D "invoke name=\"write\">\n<" D
                      "parameter name=\"text\" string=\"true\">half a li";
    CHECK(!feed(cut, 2, true, NULL, &g, NULL));
    CHECK_INT(g.n_tools, 1);
    CHECK(g.cut && !g.broken);
    CHECK_STR(g.args, "{\"text\": \"half a li");
    CHECK_STR(g.content, "");
}

static void a_call_malformed_after_its_head_is_broken_not_text(void) {
    got g;
    const char *bad = "<" D "tool_calls>\n<" D "invoke name=\"write\">\n<" D
                      "parameter name=\"a\" string=\"maybe\">x</" D "parameter>";
    CHECK(feed(bad, 4, true, NULL, &g, NULL));
    CHECK_INT(g.n_tools, 1);
    CHECK(g.broken);
    CHECK_STR(g.content, "");
}

static void a_closing_tag_split_across_pieces_is_not_argument_text(void) {
    got g;
    /* Piece boundaries inside "</｜DSML｜parameter>": nothing of it may leak into the value. */
    for (size_t piece = 1; piece <= 12; piece++) {
        CHECK(feed(BLOCK, piece, true, NULL, &g, NULL));
        CHECK_STR(g.args, "{\"city\": \"Paris\"}");
    }
}

static void malformed_block_is_text(void) {
    got g;
    const char *bad = "<" D "tool_calls>\n<" D "invoke>oops</" D "tool_calls>";
    feed(bad, 5, true, NULL, &g, NULL);
    CHECK_INT(g.n_tools, 0);
    CHECK_STR(g.content, bad);
}

static void dsml_without_tools_is_text(void) {
    got g;
    feed("x\n\n" BLOCK, 4, false, NULL, &g, NULL);
    CHECK_INT(g.n_tools, 0);
    CHECK_STR(g.content, "x\n\n" BLOCK);
}

static void invalid_utf8_becomes_replacement_characters(void) {
    got g;
    feed("a\xff"
         "b\xc3",
         1, false, NULL, &g, NULL);
    CHECK_STR(g.content, "a\xef\xbf\xbd"
                         "b\xef\xbf\xbd");
}

static void thinking_starts_in_reasoning(void) {
    got g;
    serve_request r = {.thinking = true};
    serve_output o;
    memset(&g, 0, sizeof g);
    serve_output_init(&o, NULL, &r, on_event, &g);
    CHECK(serve_output_in_reasoning(&o));
    serve_output_text(&o, "hmm", 3);
    serve_output_finish(&o);
    serve_output_free(&o);
    CHECK_STR(g.reasoning, "hmm");
    CHECK_STR(g.content, "");
}

int main(void) {
    RUN(stop_string_split_across_pieces_ends_the_reply);
    RUN(tool_call_block_becomes_a_call_whatever_the_pieces);
    RUN(newlines_not_before_a_block_are_kept);
    RUN(unfinished_block_is_text);
    RUN(tool_arguments_stream_in_pieces_that_add_up_to_the_call);
    RUN(a_reply_cut_inside_a_call_leaves_it_open);
    RUN(a_call_malformed_after_its_head_is_broken_not_text);
    RUN(a_closing_tag_split_across_pieces_is_not_argument_text);
    RUN(malformed_block_is_text);
    RUN(dsml_without_tools_is_text);
    RUN(invalid_utf8_becomes_replacement_characters);
    RUN(thinking_starts_in_reasoning);
    return check_report();
}
