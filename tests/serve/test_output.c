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
    char content[1024], reasoning[256], name[64], args[256];
    int n_tools, n_events;
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
        g->n_tools++;
        snprintf(g->name, sizeof g->name, "%s", name);
        snprintf(g->args, sizeof g->args, "%s", text);
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
    const char *cut = "Look.\n\n<" D "tool_calls>\n<" D "invoke name=\"get_weather\">\n";
    CHECK(!feed(cut, 3, true, NULL, &g, NULL));
    CHECK_INT(g.n_tools, 0);
    CHECK_STR(g.content, "Look."
                         "<" D "tool_calls>\n<" D "invoke name=\"get_weather\">\n");
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
    RUN(malformed_block_is_text);
    RUN(dsml_without_tools_is_text);
    RUN(invalid_utf8_becomes_replacement_characters);
    RUN(thinking_starts_in_reasoning);
    return check_report();
}
