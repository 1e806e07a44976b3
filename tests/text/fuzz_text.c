/* Robustness of the text layer on arbitrary bytes: the tokenizer (with and without special
 * tokens) must round-trip any input exactly, UTF-8 sanitizing must give valid UTF-8, the streaming
 * hold-back must pass every byte through once, and the chat JSON reader / renderer must fail
 * cleanly or render (and tokenize to ids that decode to the rendering). A libFuzzer target
 * (`fuzz_text`, built with -DHALO_FUZZ=ON) and, without libFuzzer, a deterministic replay
 * (`test_text_fuzz_replay`) of mutated corpus lines for CI. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "halo/text.h"
#include "text/json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static halo_tokenizer *tok;

static void fail(const char *what) {
    fprintf(stderr, "fuzz_text: %s\n", what);
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    halo_error err;
    if (!tok && halo_tokenizer_open("tests/tokenizer/deepseek-v3-tokenizer.gguf", &tok, &err))
        fail(err.message);
    const char *text = (const char *)data;
    for (unsigned flags = 0; flags <= HALO_TOKENIZE_SPECIAL; flags += HALO_TOKENIZE_SPECIAL) {
        halo_tokens ids = {0};
        if (halo_tokenizer_encode(tok, text, size, flags, &ids, &err)) fail(err.message);
        char *back = NULL;
        size_t len = 0;
        if (halo_tokenizer_decode(tok, ids.ids, ids.n, HALO_TOKENIZE_SPECIAL, &back, &len, &err))
            fail(err.message);
        if (len != size || (size && memcmp(back, data, size))) fail("round trip differs");
        free(back);
        halo_tokens_free(&ids);
    }
    char *clean = NULL;
    size_t clean_len = 0, bad = 0;
    if (halo_utf8_sanitize(text, size, &clean, &clean_len, &bad, &err)) fail(err.message);
    for (size_t i = 0; i < clean_len;) {
        unsigned l = halo_utf8_seq_len((const unsigned char *)clean + i, clean_len - i);
        if (!l) fail("sanitized text is not valid UTF-8");
        i += l;
    }
    free(clean);
    halo_utf8_stream st = {0};
    char *out = malloc(size + 8);
    size_t n = 0;
    for (size_t i = 0; i < size; i += 3) /* in 3-byte pieces */
        n += halo_utf8_stream_push(&st, text + i, size - i < 3 ? size - i : 3, out + n);
    n += halo_utf8_stream_flush(&st, out + n);
    if (n != size || (size && memcmp(out, data, size))) fail("stream lost or changed bytes");
    free(out);
    halo_dsml_reply dr;
    if (!halo_dsml_parse(text, size, &dr, &err)) halo_dsml_reply_free(&dr);
    /* As a chat request (NUL-terminated copy). */
    char *req = malloc(size + 1);
    memcpy(req, data, size);
    req[size] = 0;
    char *rendered = NULL;
    size_t rendered_len = 0;
    bool ok = !halo_chat_render_json(req, HALO_CHAT_V4, &rendered, &rendered_len, &err);
    if (ok && !rendered) fail("render succeeded without output");
    /* Straight to ids: the same outcome, and the ids give the rendering's bytes back. */
    halo_tokens ids = {0};
    if (ok != !halo_chat_tokenize_json(tok, req, HALO_CHAT_V4, &ids, &err))
        fail("tokenize and render disagree on a request");
    if (ok) {
        char *back = NULL;
        size_t len = 0;
        if (halo_tokenizer_decode(tok, ids.ids, ids.n, HALO_TOKENIZE_SPECIAL, &back, &len, &err))
            fail(err.message);
        if (len != rendered_len || memcmp(back, rendered, len)) fail("chat ids differ from text");
        free(back);
    }
    halo_tokens_free(&ids);
    free(rendered);
    pj *v = NULL;
    if (!pj_parse(req, strlen(req), &v, &err)) {
        pj_buf b = {0};
        pj_dump_py(&b, v);
        free(b.p);
        pj_free(v);
    }
    free(req);
    return 0;
}

#ifndef HALO_LIBFUZZER
/* Replay: every corpus line and conversation, then seeded mutations of them (bytes flipped,
 * inserted, deleted, spliced with special tokens and JSON fragments). */
static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t next(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    *len = fread(s, 1, (size_t)n, f);
    s[*len] = 0;
    fclose(f);
    return s;
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 20000;
    size_t clen = 0, jlen = 0;
    char *corpus = slurp("tests/tokenizer/corpus.jsonl", &clen);
    char *convs = slurp("tests/data/chat/conversations.json", &jlen);
    if (!corpus || !convs) fail("cannot read the corpus");
    static const char *const frags[] = {"<｜User｜>",
                                        "<｜Assistant｜>",
                                        "<｜end▁of▁sentence｜>",
                                        "{\"messages\": [",
                                        "{\"role\": \"tool\"}",
                                        "\\u",
                                        "\xf0\x9f",
                                        "\xe4\xb8\xad",
                                        "   \n\n",
                                        "12345678",
                                        "\"tool_calls\": [{\"function\": {\"name\": 1}}]",
                                        "<｜DSML｜tool_calls>",
                                        "<｜DSML｜invoke name=\"",
                                        "<｜DSML｜parameter name=\"",
                                        "\" string=\"false\">",
                                        "</｜DSML｜parameter>",
                                        "</｜DSML｜invoke>"};
    LLVMFuzzerTestOneInput((const uint8_t *)convs, jlen);
    char *buf = malloc(1 << 16);
    for (int r = 0; r < rounds; r++) {
        /* A random window of the corpus or the conversations. */
        const char *src = r % 3 ? corpus : convs;
        size_t slen = r % 3 ? clen : jlen;
        size_t at = next() % slen, n = next() % 400;
        if (at + n > slen) n = slen - at;
        memcpy(buf, src + at, n);
        for (int m = next() % 6; m > 0; m--) {
            size_t pos = n ? next() % (n + 1) : 0;
            switch (next() % 4) {
            case 0:
                if (n) buf[pos % n] = (char)next();
                break;
            case 1:
                if (n) {
                    memmove(buf + pos % n, buf + pos % n + 1, n - pos % n - 1);
                    n--;
                }
                break;
            default: {
                const char *f = frags[next() % (sizeof frags / sizeof frags[0])];
                size_t fl = strlen(f);
                if (n + fl < (1 << 16)) {
                    memmove(buf + pos + fl, buf + pos, n - pos);
                    memcpy(buf + pos, f, fl);
                    n += fl;
                }
            }
            }
        }
        LLVMFuzzerTestOneInput((const uint8_t *)buf, n);
    }
    printf("fuzz_text replay: %d inputs, no failures\n", rounds + 1);
    free(buf);
    free(corpus);
    free(convs);
    halo_tokenizer_free(tok);
    return 0;
}
#endif
