/* The DeepSeek V3/V4 tokenizer against HF tokenizers' ids on the committed corpus
 * (tests/tokenizer/), round trips, added tokens, streaming UTF-8 and bad metadata.
 * `test_tokenizer --bench [SECONDS]` measures single-core encode speed on the corpus instead. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "check.h"
#include "halo/text.h"

#define TOK_GGUF "tests/tokenizer/deepseek-v3-tokenizer.gguf"

static halo_tokenizer *tok;

typedef struct line {
    char *text;
    size_t len;
    int32_t *ids;
    size_t n_ids;
} line;

static char **read_lines(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char **lines = NULL, *buf = NULL;
    size_t cap = 0, count = 0;
    ssize_t r;
    while ((r = getline(&buf, &cap, f)) > 0) {
        lines = realloc(lines, (count + 1) * sizeof *lines);
        lines[count++] = strdup(buf);
    }
    free(buf);
    fclose(f);
    *n = count;
    return lines;
}

static line *load_corpus(size_t *n_lines) {
    size_t nt = 0, ni = 0;
    char **texts = read_lines("tests/tokenizer/corpus.jsonl", &nt);
    char **ids = read_lines("tests/tokenizer/corpus.ids.jsonl", &ni);
    CHECK(texts && ids);
    CHECK_INT(nt, ni);
    if (!texts || !ids || nt != ni) return NULL;
    line *out = calloc(nt, sizeof *out);
    for (size_t i = 0; i < nt; i++) {
        cJSON *t = cJSON_Parse(texts[i]), *a = cJSON_Parse(ids[i]);
        CHECK(cJSON_IsString(t) && cJSON_IsArray(a));
        /* cJSON strings stop at NUL; the corpus has no U+0000 (the byte is written \u0000 only
         * if present, which the length check below would catch). */
        out[i].text = strdup(t->valuestring);
        out[i].len = strlen(out[i].text);
        out[i].n_ids = (size_t)cJSON_GetArraySize(a);
        out[i].ids = malloc((out[i].n_ids + 1) * sizeof *out[i].ids);
        for (size_t k = 0; k < out[i].n_ids; k++)
            out[i].ids[k] = (int32_t)cJSON_GetArrayItem(a, (int)k)->valuedouble;
        cJSON_Delete(t);
        cJSON_Delete(a);
        free(texts[i]);
        free(ids[i]);
    }
    free(texts);
    free(ids);
    *n_lines = nt;
    return out;
}

static void free_corpus(line *c, size_t n) {
    for (size_t i = 0; c && i < n; i++) {
        free(c[i].text);
        free(c[i].ids);
    }
    free(c);
}

static void matches_hf_tokenizers_on_the_corpus_and_round_trips(void) {
    size_t n = 0, agree = 0, round = 0, shown = 0, total_ids = 0;
    line *c = load_corpus(&n);
    CHECK_INT(n, 2374);
    for (size_t i = 0; c && i < n; i++) {
        halo_tokens got = {0};
        halo_error err = {0};
        CHECK_INT(
            halo_tokenizer_encode(tok, c[i].text, c[i].len, HALO_TOKENIZE_SPECIAL, &got, &err),
            HALO_OK);
        bool same =
            got.n == c[i].n_ids && (!got.n || !memcmp(got.ids, c[i].ids, got.n * sizeof *got.ids));
        agree += same;
        total_ids += got.n;
        if (!same && shown++ < 5) {
            fprintf(stderr, "line %zu differs (%zu vs %zu ids): %.80s\n", i + 1, got.n, c[i].n_ids,
                    c[i].text);
            for (size_t k = 0; k < got.n || k < c[i].n_ids; k++) {
                int32_t a = k < got.n ? got.ids[k] : -1, b = k < c[i].n_ids ? c[i].ids[k] : -1;
                if (a != b) {
                    fprintf(stderr, "  first difference at %zu: halo %d, HF %d\n", k, a, b);
                    break;
                }
            }
        }
        char *back = NULL;
        size_t back_len = 0;
        CHECK_INT(halo_tokenizer_decode(tok, got.ids, got.n, HALO_TOKENIZE_SPECIAL, &back,
                                        &back_len, &err),
                  HALO_OK);
        round += back && back_len == c[i].len && !memcmp(back, c[i].text, back_len);
        free(back);
        halo_tokens_free(&got);
    }
    printf("  corpus: %zu/%zu lines identical to HF (%zu ids), %zu/%zu round trips\n", agree, n,
           total_ids, round, n);
    CHECK_INT(agree, n);
    CHECK_INT(round, n);
    free_corpus(c, n);
}

static void reads_the_vocabulary_metadata(void) {
    CHECK_INT(halo_tokenizer_n_vocab(tok), 129280);
    CHECK_INT(halo_tokenizer_bos(tok), 0);
    CHECK_INT(halo_tokenizer_eos(tok), 1);
    CHECK(halo_tokenizer_is_eog(tok, 1));
    CHECK(!halo_tokenizer_is_eog(tok, 2));
    CHECK_INT(halo_tokenizer_find(tok, HALO_CHAT_USER_TAG), 128803);
    CHECK_INT(halo_tokenizer_find(tok, HALO_CHAT_ASSISTANT_TAG), 128804);
    CHECK_INT(halo_tokenizer_type(tok, 0), HALO_TOKEN_CONTROL);
    CHECK_INT(halo_tokenizer_type(tok, 129279), HALO_TOKEN_UNUSED);
    CHECK_INT(halo_tokenizer_type(tok, 129280), 0);
    size_t len = 0;
    const char *p = halo_tokenizer_piece(tok, halo_tokenizer_find(tok, " the"), &len);
    CHECK(p && len == 4 && !memcmp(p, " the", 4));
    CHECK(halo_tokenizer_piece(tok, -1, &len) == NULL);
}

static void special_tokens_are_text_unless_asked(void) {
    const char *s = "<｜User｜>hi<｜Assistant｜>";
    halo_tokens a = {0}, b = {0};
    halo_error err;
    CHECK_INT(halo_tokenizer_encode(tok, s, strlen(s), HALO_TOKENIZE_SPECIAL | HALO_TOKENIZE_BOS,
                                    &a, &err),
              HALO_OK);
    CHECK_INT(a.n, 4);
    if (a.n == 4) {
        CHECK_INT(a.ids[0], 0);
        CHECK_INT(a.ids[1], 128803);
        CHECK_INT(a.ids[3], 128804);
    }
    CHECK_INT(halo_tokenizer_encode(tok, s, strlen(s), 0, &b, &err), HALO_OK);
    CHECK(b.n > 4);
    for (size_t i = 0; i < b.n; i++)
        CHECK(halo_tokenizer_type(tok, b.ids[i]) == HALO_TOKEN_NORMAL);
    /* Decoding skips control tokens unless asked. */
    char *out = NULL;
    CHECK_INT(halo_tokenizer_decode(tok, a.ids, a.n, 0, &out, NULL, &err), HALO_OK);
    CHECK_STR(out, "hi");
    free(out);
    int32_t bad = 129280;
    CHECK_INT(halo_tokenizer_decode(tok, &bad, 1, 0, &out, NULL, &err), HALO_E_INVALID_ARG);
    CHECK_CONTAINS(err.message, "token 129280 at index 0 is outside the vocabulary");
    halo_tokens_free(&a);
    halo_tokens_free(&b);
}

/* Issue 19: the text of every control token, alone and inside other text, encoded without
 * special parsing gives llama.cpp v0.5.0's ids with parse_special = false (tests/tokenizer/
 * added_as_text.*.jsonl, made by tools/oracle/added_tokens_as_text.py; the same prebuilt
 * llama.cpp reproduces all 2374 lines of corpus.ids.jsonl), in both vocabularies. */
static size_t plain_matches_llama_cpp(const char *vocab, const char *path) {
    halo_tokenizer *t = NULL;
    halo_error err;
    CHECK_INT(halo_tokenizer_open(vocab, &t, &err), HALO_OK);
    size_t n = 0, agree = 0;
    char **lines = read_lines(path, &n);
    CHECK(lines != NULL);
    for (size_t i = 0; t && i < n; i++) {
        cJSON *j = cJSON_Parse(lines[i]);
        const cJSON *text = cJSON_GetObjectItem(j, "text"), *ids = cJSON_GetObjectItem(j, "ids");
        CHECK(cJSON_IsString(text) && cJSON_IsArray(ids));
        halo_tokens got = {0};
        if (cJSON_IsString(text) &&
            !halo_tokenizer_encode(t, text->valuestring, strlen(text->valuestring), 0, &got,
                                   &err)) {
            bool same = (size_t)cJSON_GetArraySize(ids) == got.n;
            for (size_t k = 0; same && k < got.n; k++)
                same = cJSON_GetArrayItem(ids, (int)k)->valueint == got.ids[k];
            for (size_t k = 0; k < got.n; k++)
                same = same && halo_tokenizer_type(t, got.ids[k]) == HALO_TOKEN_NORMAL;
            if (!same && agree + 5 > i) fprintf(stderr, "%s: line %zu differs\n", path, i + 1);
            agree += same;
        }
        halo_tokens_free(&got);
        cJSON_Delete(j);
        free(lines[i]);
    }
    free(lines);
    CHECK_INT(agree, n);
    halo_tokenizer_free(t);
    return n;
}

static void control_token_text_encodes_like_llama_cpp_without_special_parsing(void) {
    CHECK_INT(plain_matches_llama_cpp(TOK_GGUF, "tests/tokenizer/added_as_text."
                                                "deepseek-v3-tokenizer.jsonl"),
              818 * 4);
    CHECK_INT(plain_matches_llama_cpp("models/kjv-tiny.gguf",
                                      "tests/tokenizer/added_as_text.kjv-tiny.jsonl"),
              10 * 4);
}

static void any_bytes_round_trip(void) {
    /* Invalid UTF-8, NULs, lone continuation bytes, truncated sequences, surrogates. */
    const char cases[][16] = {"\xff\xfe", "a\x80 b",          "\xe4\xb8",        "x\xed\xa0\x80y",
                              "\xc0\xaf", "\xf4\x90\x80\x80", "\xe2\x82\xac\xe2"};
    unsigned seed = 12345;
    char buf[512];
    for (int round = 0; round < 300; round++) {
        size_t n;
        if (round < (int)(sizeof cases / sizeof cases[0])) {
            n = strlen(cases[round]);
            memcpy(buf, cases[round], n);
        } else {
            n = (size_t)(round % 97) + 1;
            for (size_t i = 0; i < n; i++) {
                seed = seed * 1103515245u + 12345u;
                unsigned r = seed >> 16;
                /* Mix ASCII, spaces, digits and high bytes so every regex branch is reached. */
                buf[i] = (char)(r % 4 == 0   ? ' '
                                : r % 4 == 1 ? 'a' + r % 26
                                : r % 4 == 2 ? r
                                             : '7');
            }
        }
        halo_tokens t = {0};
        halo_error err;
        CHECK_INT(halo_tokenizer_encode(tok, buf, n, HALO_TOKENIZE_SPECIAL, &t, &err), HALO_OK);
        char *back = NULL;
        size_t bl = 0;
        CHECK_INT(halo_tokenizer_decode(tok, t.ids, t.n, HALO_TOKENIZE_SPECIAL, &back, &bl, &err),
                  HALO_OK);
        CHECK(back && bl == n && !memcmp(back, buf, n));
        free(back);
        halo_tokens_free(&t);
    }
}

static void streaming_never_splits_a_character(void) {
    const char *s = "a€b😀\xe4\xb8\xad"; /* 1, 3, 1, 4, 3 bytes */
    size_t n = strlen(s);
    halo_utf8_stream st = {0};
    char out[64], all[64];
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        size_t k = halo_utf8_stream_push(&st, s + i, 1, out);
        /* Whatever comes out is whole characters. */
        for (size_t j = 0; j < k;) {
            unsigned l = halo_utf8_seq_len((const unsigned char *)out + j, k - j);
            CHECK(l > 0);
            j += l ? l : 1;
        }
        memcpy(all + total, out, k);
        total += k;
    }
    total += halo_utf8_stream_flush(&st, all + total);
    CHECK(total == n && !memcmp(all, s, n));
    /* An interrupted sequence is let through when the next byte cannot continue it. */
    halo_utf8_stream st2 = {0};
    size_t k = halo_utf8_stream_push(&st2,
                                     "\xe2\x82"
                                     "A",
                                     3, out);
    CHECK(k == 3 && !memcmp(out,
                            "\xe2\x82"
                            "A",
                            3));
    k = halo_utf8_stream_push(&st2, "\xf0\x9f", 2, out);
    CHECK_INT(k, 0);
    CHECK_INT(halo_utf8_stream_flush(&st2, out), 2);
}

static void sanitize_replaces_invalid_sequences(void) {
    char *out = NULL;
    size_t len = 0, bad = 0;
    halo_error err;
    const char in[] = "ok\xff"
                      "caf\xc3\xa9 \xe2\x82"
                      "x\xed\xa0\x80";
    CHECK_INT(halo_utf8_sanitize(in, sizeof in - 1, &out, &len, &bad, &err), HALO_OK);
    /* \xff -> 1, \xe2\x82 (truncated) -> 1, \xed then \xa0 \x80 (surrogate: each invalid) -> 3 */
    CHECK_INT(bad, 5);
    CHECK_STR(out, "ok\xEF\xBF\xBD"
                   "caf\xc3\xa9 \xEF\xBF\xBD"
                   "x\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
    free(out);
    CHECK_INT(halo_utf8_sanitize("plain", 5, &out, &len, &bad, &err), HALO_OK);
    CHECK_INT(bad, 0);
    CHECK_STR(out, "plain");
    free(out);
}

static void rejects_unusable_metadata(void) {
    halo_tokenizer *t = NULL;
    halo_error err = {0};
    CHECK(halo_tokenizer_open("tests/golden/models/tiny-a-f32.gguf", &t, &err) != HALO_OK);
    CHECK(t == NULL);
    CHECK_CONTAINS(err.message, "tiny-a-f32.gguf: ");
    CHECK_INT(halo_tokenizer_open("tests/tokenizer/missing.gguf", &t, &err), HALO_E_IO);
}

static int bench(double seconds) {
    size_t n = 0;
    line *c = load_corpus(&n);
    if (!c) return 1;
    size_t bytes = 0, ids = 0;
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    double el = 0;
    do {
        for (size_t i = 0; i < n; i++) {
            halo_tokens t = {0};
            halo_tokenizer_encode(tok, c[i].text, c[i].len, HALO_TOKENIZE_SPECIAL, &t, NULL);
            bytes += c[i].len;
            ids += t.n;
            halo_tokens_free(&t);
        }
        clock_gettime(CLOCK_MONOTONIC, &b);
        el = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) * 1e-9;
    } while (el < seconds);
    printf("encode: %.2f MB/s, %.0f tokens/s (%zu bytes in %.2f s, one thread)\n",
           (double)bytes / el / 1e6, (double)ids / el, bytes, el);
    free_corpus(c, n);
    return 0;
}

int main(int argc, char **argv) {
    halo_error err = {0};
    if (halo_tokenizer_open(TOK_GGUF, &tok, &err)) {
        fprintf(stderr, "%s\n", err.message);
        return 1;
    }
    if (argc > 1 && !strcmp(argv[1], "--bench")) {
        int rc = bench(argc > 2 ? atof(argv[2]) : 3.0);
        halo_tokenizer_free(tok);
        return rc;
    }
    RUN(reads_the_vocabulary_metadata);
    RUN(matches_hf_tokenizers_on_the_corpus_and_round_trips);
    RUN(special_tokens_are_text_unless_asked);
    RUN(control_token_text_encodes_like_llama_cpp_without_special_parsing);
    RUN(any_bytes_round_trip);
    RUN(streaming_never_splits_a_character);
    RUN(sanitize_replaces_invalid_sequences);
    RUN(rejects_unusable_metadata);
    halo_tokenizer_free(tok);
    return check_report();
}
