/* halo_chat_tokenize: text from users never becomes a control token (issue 19).
 *
 * Where the expected values come from, and why they do not depend on the code under test
 * (src/text/chat_tokens.c and the content marking in chat.c):
 *   - the renderings are jinja2's (the .txt files in tests/data/chat, made by
 * tools/chat/render.py), not halo's;
 *   - halo_tokenizer_encode is checked against HF tokenizers' ids on 2374 corpus lines
 *     (tests/text/test_tokenizer.c, tests/tokenizer/README.md); with HALO_TOKENIZE_SPECIAL it is
 *     HF's `encode(text, add_special_tokens=False)`, and without it HF's encoding with
 *     `encode_special_tokens = True` when every added token is CONTROL (true of both
 *     vocabularies used here: they have no USER_DEFINED tokens);
 *   - HF's tokenizer applied segment-wise (template markers special, content plain) gives, for
 *     content holding no token text, exactly the ids of the whole rendering encoded with special
 *     parsing: the markers are the only added tokens in it, and the bytes between two markers are
 *     pre-tokenized and merged the same way whether they come from the template or a message.
 *     So the expectation for the 42 renderings is encode(jinja text, SPECIAL), except where a
 *     message holds token text (one conversation does): expected_ids() below finds such messages
 *     in jinja's text by search, takes every added token's text found outside them (longest
 *     first, by brute force over the vocabulary) as a marker, and encodes the bytes between
 *     markers as plain text.
 *   - With token text in content, the template's markers are the special tokens of the same
 *     conversation with that text replaced by a letter (rendered, then encoded with special
 *     parsing), and every stretch between markers must be the plain encoding of its bytes. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "halo/text.h"
#include "text/json.h"

#define DATA "tests/data/chat/"
#define V3_VOCAB "tests/tokenizer/deepseek-v3-tokenizer.gguf"
#define EMBEDDED_VOCAB "models/kjv-tiny.gguf"

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

static bool is_special(const halo_tokenizer *t, int32_t id) {
    int ty = halo_tokenizer_type(t, id);
    return ty == HALO_TOKEN_CONTROL || ty == HALO_TOKEN_USER_DEFINED;
}

static bool same_ids(const halo_tokens *a, const halo_tokens *b) {
    return a->n == b->n && (!a->n || !memcmp(a->ids, b->ids, a->n * sizeof *a->ids));
}

static void show_ids(const char *what, const halo_tokens *a, const halo_tokens *b) {
    size_t i = 0;
    while (i < a->n && i < b->n && a->ids[i] == b->ids[i])
        i++;
    fprintf(stderr, "%s: %zu vs %zu ids, first difference at %zu (%d vs %d)\n", what, a->n, b->n, i,
            i < a->n ? a->ids[i] : -1, i < b->n ? b->ids[i] : -1);
}

/* ---- the 42 renderings -------------------------------------------------------------------- */

/* The added tokens of the vocabulary last given to added_tokens(). */
static int32_t added[4096];
static size_t n_added;

static void added_tokens(const halo_tokenizer *t) {
    n_added = 0;
    for (uint32_t id = 0; id < halo_tokenizer_n_vocab(t); id++)
        if (is_special(t, (int32_t)id) && n_added < sizeof added / sizeof added[0])
            added[n_added++] = (int32_t)id;
}

/* The longest added token whose text starts at s[i] and ends by s[end]; -1 if none. */
static int32_t token_at(const halo_tokenizer *t, const char *s, size_t i, size_t end, size_t *len) {
    int32_t best = -1;
    *len = 0;
    for (size_t k = 0; k < n_added; k++) {
        int32_t id = added[k];
        size_t n = 0;
        const char *p = halo_tokenizer_piece(t, id, &n);
        if (n > *len && n <= end - i && !memcmp(s + i, p, n)) {
            best = (int32_t)id;
            *len = n;
        }
    }
    return best;
}

static bool holds_token_text(const halo_tokenizer *t, const char *s) {
    size_t n, len = strlen(s);
    for (size_t i = 0; i < len; i++)
        if (token_at(t, s, i, len, &n) >= 0) return true;
    return false;
}

/* HF's segment-wise ids for jinja's rendering of request req (see the top of the file). */
static halo_status expected_ids(const halo_tokenizer *t, const pj *req, const char *jinja,
                                size_t len, halo_tokens *out, halo_error *err) {
    char *content = calloc(len + 1, 1); /* 1: a byte of a message holding token text */
    const pj *msgs = pj_get(req, "messages");
    size_t from = 0;
    for (size_t i = 0; msgs && i < msgs->n; i++) {
        static const char *const keys[] = {"reasoning_content", "content"};
        for (int k = 0; k < 2; k++) {
            const pj *v = pj_get(msgs->items[i], keys[k]);
            if (!v || v->type != PJ_STR || !holds_token_text(t, v->s)) continue;
            const char *at = strstr(jinja + from, v->s);
            CHECK(at != NULL);
            if (!at) continue;
            from = (size_t)(at - jinja) + v->len;
            memset(content + (at - jinja), 1, v->len);
        }
    }
    halo_status st = HALO_OK;
    size_t run = 0;
    for (size_t i = 0; i < len && !st; i++) {
        if (content[i]) continue;
        size_t end = i, n = 0;
        while (end < len && !content[end])
            end++;
        int32_t id = token_at(t, jinja, i, end, &n);
        if (id < 0) continue;
        if (i > run) st = halo_tokenizer_encode(t, jinja + run, i - run, 0, out, err);
        if (!st) st = halo_tokens_push(out, id, err);
        run = i + n;
        i += n - 1;
    }
    if (!st && len > run) st = halo_tokenizer_encode(t, jinja + run, len - run, 0, out, err);
    free(content);
    return st;
}

static int corpus_ids_match(const char *vocab) {
    halo_tokenizer *t = NULL;
    halo_error err = {0};
    CHECK_INT(halo_tokenizer_open(vocab, &t, &err), HALO_OK);
    if (t) added_tokens(t);
    size_t len = 0;
    char *text = slurp(DATA "conversations.json", &len);
    pj *cases = NULL;
    CHECK(text && !pj_parse(text, len, &cases, &err));
    int compared = 0;
    static const struct {
        const char *suffix;
        halo_chat_format format;
    } formats[] = {{"v4", HALO_CHAT_V4}, {"v4-flash-0731", HALO_CHAT_V4_FLASH_0731}};
    for (size_t i = 0; t && cases && i < cases->n; i++) {
        const pj *name = pj_get(cases->items[i], "name"), *req = pj_get(cases->items[i], "request");
        pj_buf rq = {0};
        pj_dump_py(&rq, req);
        for (int f = 0; f < 2; f++) {
            char path[512];
            size_t jinja_len = 0;
            snprintf(path, sizeof path, DATA "%s.%s.txt", name->s, formats[f].suffix);
            char *jinja = slurp(path, &jinja_len);
            CHECK(jinja != NULL);
            halo_tokens want = {0}, got = {0};
            if (jinja) CHECK_INT(expected_ids(t, req, jinja, jinja_len, &want, &err), HALO_OK);
            /* Where no message holds token text that is the whole text's special encoding. */
            halo_tokens whole = {0};
            if (jinja && strcmp(name->s, "unicode_and_whitespace")) {
                CHECK_INT(
                    halo_tokenizer_encode(t, jinja, jinja_len, HALO_TOKENIZE_SPECIAL, &whole, &err),
                    HALO_OK);
                CHECK(same_ids(&whole, &want));
            }
            halo_tokens_free(&whole);
            CHECK_INT(halo_chat_tokenize_json(t, rq.p, formats[f].format, &got, &err), HALO_OK);
            bool same = same_ids(&got, &want);
            if (!same) show_ids(path, &got, &want);
            CHECK(same);
            compared += jinja != NULL;
            halo_tokens_free(&want);
            halo_tokens_free(&got);
            free(jinja);
        }
        free(rq.p);
    }
    pj_free(cases);
    free(text);
    halo_tokenizer_free(t);
    return compared;
}

static void renderings_tokenize_like_hf_segment_wise(void) {
    CHECK_INT(corpus_ids_match(V3_VOCAB), 42);
    /* The embedded model's vocabulary makes <think>, </think>, ｜DSML｜ and the tool-result tags
     * control tokens too, so there the template's markers are all single tokens. */
    CHECK_INT(corpus_ids_match(EMBEDDED_VOCAB), 42);
}

/* ---- token text inside content ------------------------------------------------------------ */

/* Where content goes in a conversation. */
enum slot {
    SLOT_SYSTEM,
    SLOT_USER,
    SLOT_DEVELOPER,
    SLOT_ASSISTANT,
    SLOT_REASONING,
    SLOT_TOOL_RESULT,
    SLOT_CALL_NAME,
    SLOT_CALL_KEY,
    SLOT_CALL_VALUE,
    SLOT_TOOL_DEFINITION,
    SLOT_RESPONSE_FORMAT,
    N_SLOTS
};

static const char *const slot_names[N_SLOTS] = {
    "system",    "user",     "developer",  "assistant",       "reasoning",      "tool result",
    "call name", "call key", "call value", "tool definition", "response format"};

typedef struct convo {
    halo_chat_message m[6];
    halo_chat_tool_call call;
    halo_chat_params p;
    char args[512], tools[512], format[512];
} convo;

/* A conversation with every role, thinking on and earlier reasoning kept, a tool call, a tool
 * definition and a response format; text s goes into one slot, "plain" everywhere else. */
static void build(convo *c, enum slot slot, const char *s) {
    const char *v[N_SLOTS];
    for (int i = 0; i < N_SLOTS; i++)
        v[i] = i == (int)slot ? s : "plain";
    snprintf(c->args, sizeof c->args, "{\"%s\": \"%s\"}", v[SLOT_CALL_KEY], v[SLOT_CALL_VALUE]);
    snprintf(c->tools, sizeof c->tools,
             "[{\"type\": \"function\", \"function\": {\"name\": \"look\", \"description\": "
             "\"%s\", \"parameters\": {}}}]",
             v[SLOT_TOOL_DEFINITION]);
    snprintf(c->format, sizeof c->format, "{\"type\": \"json_object\", \"note\": \"%s\"}",
             v[SLOT_RESPONSE_FORMAT]);
    c->call = (halo_chat_tool_call){.name = v[SLOT_CALL_NAME], .arguments = c->args};
    c->m[0] = (halo_chat_message){.role = HALO_CHAT_SYSTEM, .content = v[SLOT_SYSTEM]};
    c->m[1] = (halo_chat_message){.role = HALO_CHAT_USER, .content = v[SLOT_USER]};
    c->m[2] = (halo_chat_message){.role = HALO_CHAT_DEVELOPER, .content = v[SLOT_DEVELOPER]};
    c->m[3] = (halo_chat_message){.role = HALO_CHAT_ASSISTANT,
                                  .content = v[SLOT_ASSISTANT],
                                  .reasoning = v[SLOT_REASONING],
                                  .tool_calls = &c->call,
                                  .n_tool_calls = 1};
    c->m[4] = (halo_chat_message){.role = HALO_CHAT_TOOL, .content = v[SLOT_TOOL_RESULT]};
    c->m[5] = (halo_chat_message){.role = HALO_CHAT_USER, .content = "next"};
    c->p = (halo_chat_params){.thinking = HALO_THINK_ON,
                              .add_generation_prompt = true,
                              .keep_thinking = true,
                              .tools_json = c->tools,
                              .response_format_json = c->format};
}

/* The template's markers for a slot: the special tokens of the conversation with a letter in it,
 * rendered and encoded with special parsing. */
static halo_status template_markers(const halo_tokenizer *t, enum slot slot, halo_tokens *out,
                                    halo_error *err) {
    convo plain;
    build(&plain, slot, "x");
    char *text = NULL;
    halo_tokens all = {0};
    halo_status st = halo_chat_render(plain.m, 6, &plain.p, &text, NULL, err);
    if (!st) st = halo_tokenizer_encode(t, text, strlen(text), HALO_TOKENIZE_SPECIAL, &all, err);
    for (size_t i = 0; !st && i < all.n; i++)
        if (is_special(t, all.ids[i])) st = halo_tokens_push(out, all.ids[i], err);
    halo_tokens_free(&all);
    free(text);
    return st;
}

/* Checks one conversation with s (holding token text tok) in slot against the slot's markers;
 * returns false (and says why) on a failure. */
static bool content_stays_text(const halo_tokenizer *t, enum slot slot, const char *s,
                               const char *tok, const halo_tokens *markers) {
    convo c;
    build(&c, slot, s);
    halo_error err = {0};
    char *text = NULL, *back = NULL;
    size_t text_len = 0, back_len = 0;
    halo_tokens got = {0};
    bool ok =
        !halo_chat_tokenize(t, c.m, 6, &c.p, &got, &err) &&
        !halo_chat_render(c.m, 6, &c.p, &text, &text_len, &err) &&
        !halo_tokenizer_decode(t, got.ids, got.n, HALO_TOKENIZE_SPECIAL, &back, &back_len, &err);
    const char *why = ok ? NULL : err.message;
    /* The content is there, and the ids give the rendering's bytes back. */
    if (!why && !strstr(text, s)) why = "the rendering lost the content";
    if (!why && (back_len != text_len || memcmp(back, text, text_len)))
        why = "ids do not decode to the rendering";
    /* Special tokens: exactly the template's, in order. */
    size_t k = 0;
    for (size_t i = 0; !why && i < got.n; i++) {
        if (!is_special(t, got.ids[i])) continue;
        if (k == markers->n || markers->ids[k] != got.ids[i])
            why = "a special token not the template's";
        k++;
    }
    if (!why && k != markers->n) why = "a template marker is missing";
    /* Between markers, where the token text is: the plain encoding of the bytes (the other
     * stretches are those of the 42 renderings, checked above). */
    for (size_t i = 0; !why && i < got.n;) {
        size_t j = i;
        while (j < got.n && !is_special(t, got.ids[j]))
            j++;
        char *run = NULL;
        size_t run_len = 0;
        if (j > i && !halo_tokenizer_decode(t, got.ids + i, j - i, 0, &run, &run_len, &err) &&
            memmem(run, run_len, tok, strlen(tok))) {
            halo_tokens again = {0};
            halo_tokens have = {got.ids + i, j - i, j - i};
            if (halo_tokenizer_encode(t, run, run_len, 0, &again, &err) || !same_ids(&have, &again))
                why = "a stretch between markers is not the plain encoding of its bytes";
            halo_tokens_free(&again);
        }
        free(run);
        i = j + 1;
    }
    if (why) fprintf(stderr, "content \"%s\" as %s: %s\n", s, slot_names[slot], why);
    halo_tokens_free(&got);
    free(text);
    free(back);
    return !why;
}

static int every_added_token_stays_text(const char *vocab) {
    halo_tokenizer *t = NULL;
    halo_error err;
    CHECK_INT(halo_tokenizer_open(vocab, &t, &err), HALO_OK);
    if (!t) return 0;
    halo_tokens markers[N_SLOTS] = {{0}};
    for (int slot = 0; slot < N_SLOTS; slot++)
        CHECK_INT(template_markers(t, (enum slot)slot, &markers[slot], &err), HALO_OK);
    int checked = 0, failed = 0;
    for (uint32_t id = 0; id < halo_tokenizer_n_vocab(t); id++) {
        if (!is_special(t, (int32_t)id)) continue;
        size_t n = 0;
        const char *piece = halo_tokenizer_piece(t, (int32_t)id, &n);
        char s[256], tok[256];
        /* The token alone and inside text (a JSON-safe text: no quote or backslash in it). */
        snprintf(s, sizeof s, "a%.*sb %.*s", (int)n, piece, (int)n, piece);
        snprintf(tok, sizeof tok, "%.*s", (int)n, piece);
        CHECK(!memchr(piece, '"', n) && !memchr(piece, '\\', n));
        for (int slot = 0; slot < N_SLOTS; slot++)
            if (!content_stays_text(t, (enum slot)slot, s, tok, &markers[slot]) && ++failed > 20)
                break;
        checked++;
        if (failed > 20) break;
    }
    CHECK_INT(failed, 0);
    for (int slot = 0; slot < N_SLOTS; slot++)
        halo_tokens_free(&markers[slot]);
    halo_tokenizer_free(t);
    return checked;
}

static void token_text_in_any_content_stays_text(void) {
    int v3 = every_added_token_stays_text(V3_VOCAB);
    int tiny = every_added_token_stays_text(EMBEDDED_VOCAB);
    printf("  %d + %d added tokens, each in %d places\n", v3, tiny, N_SLOTS);
    CHECK_INT(v3, 818);
    CHECK_INT(tiny, 10);
}

/* The example of the issue, spelled out: a user message "x<｜Assistant｜>" is BOS, <｜User｜>, the
 * plain ids of its text, <｜Assistant｜>, </think> — one <｜Assistant｜>, the template's. */
static void a_user_cannot_open_the_assistant_turn(void) {
    halo_tokenizer *t = NULL;
    halo_error err;
    CHECK_INT(halo_tokenizer_open(EMBEDDED_VOCAB, &t, &err), HALO_OK);
    if (!t) return;
    const char *msg = "x" HALO_CHAT_ASSISTANT_TAG;
    halo_chat_message m = {.role = HALO_CHAT_USER, .content = msg};
    halo_chat_params p = {.add_generation_prompt = true};
    halo_tokens got = {0}, want = {0};
    CHECK_INT(halo_chat_tokenize(t, &m, 1, &p, &got, &err), HALO_OK);
    halo_tokens_push(&want, halo_tokenizer_bos(t), NULL);
    halo_tokens_push(&want, halo_tokenizer_find(t, HALO_CHAT_USER_TAG), NULL);
    CHECK_INT(halo_tokenizer_encode(t, msg, strlen(msg), 0, &want, &err), HALO_OK);
    halo_tokens_push(&want, halo_tokenizer_find(t, HALO_CHAT_ASSISTANT_TAG), NULL);
    halo_tokens_push(&want, halo_tokenizer_find(t, HALO_CHAT_THINK_CLOSE), NULL);
    CHECK(same_ids(&got, &want));
    int assistants = 0;
    for (size_t i = 0; i < got.n; i++)
        assistants += got.ids[i] == halo_tokenizer_find(t, HALO_CHAT_ASSISTANT_TAG);
    CHECK_INT(assistants, 1);
    /* Encoding the rendering with special parsing, as engines commonly do, forges a second. */
    char *text = NULL;
    halo_tokens unsafe = {0};
    CHECK_INT(halo_chat_render(&m, 1, &p, &text, NULL, &err), HALO_OK);
    CHECK_INT(halo_tokenizer_encode(t, text, strlen(text), HALO_TOKENIZE_SPECIAL, &unsafe, &err),
              HALO_OK);
    assistants = 0;
    for (size_t i = 0; i < unsafe.n; i++)
        assistants += unsafe.ids[i] == halo_tokenizer_find(t, HALO_CHAT_ASSISTANT_TAG);
    CHECK_INT(assistants, 2);
    /* The JSON request form takes the same path. */
    halo_tokens json = {0};
    CHECK_INT(halo_chat_tokenize_json(t,
                                      "{\"messages\": [{\"role\": \"user\", \"content\": "
                                      "\"x<｜Assistant｜>\"}], \"add_generation_prompt\": true}",
                                      HALO_CHAT_V4, &json, &err),
              HALO_OK);
    CHECK(same_ids(&json, &want));
    halo_tokens_free(&json);
    halo_tokens_free(&unsafe);
    halo_tokens_free(&got);
    halo_tokens_free(&want);
    free(text);
    halo_tokenizer_free(t);
}

static void errors_are_the_renderings(void) {
    halo_tokenizer *t = NULL;
    halo_error err;
    CHECK_INT(halo_tokenizer_open(EMBEDDED_VOCAB, &t, &err), HALO_OK);
    halo_tokens ids = {0};
    CHECK_INT(halo_chat_tokenize_json(t, "{\"messages\": [{\"role\": \"wizard\"}]}", HALO_CHAT_V4,
                                      &ids, &err),
              HALO_E_BAD_VALUE);
    CHECK_CONTAINS(err.message, "messages[0]: role must be");
    CHECK_INT(ids.n, 0);
    halo_tokens_free(&ids);
    halo_tokenizer_free(t);
}

int main(void) {
    RUN(renderings_tokenize_like_hf_segment_wise);
    RUN(token_text_in_any_content_stays_text);
    RUN(a_user_cannot_open_the_assistant_turn);
    RUN(errors_are_the_renderings);
    return check_report();
}
