/* Chat renderings to token ids, the safe way (issue 19). Engines commonly tokenize the rendered
 * template with special-token parsing on, so a message holding the text "<｜Assistant｜>" forges
 * an assistant turn. Here the template's text is searched for added tokens and the content is
 * not: a special token can only come from the template. Between two special tokens the bytes
 * (template text and content together) form one BPE run, as in a whole-text tokenization, so a
 * conversation whose content holds no token text gets exactly the ids HF's tokenizer gives its
 * rendering (tests/text/test_chat_tokens.c checks both). */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "text/chat_internal.h"
#include "text/text_internal.h"

static void add_range(chat_text *o, size_t start, size_t end) {
    if (start == end) return;
    if (o->n_content && o->content[2 * o->n_content - 1] == start) {
        o->content[2 * o->n_content - 1] = end; /* adjacent content: one range */
        return;
    }
    if (o->n_content == o->cap) {
        size_t cap = o->cap ? o->cap * 2 : 16;
        size_t *c = realloc(o->content, 2 * cap * sizeof *c);
        if (!c) {
            o->oom = true;
            return;
        }
        o->content = c;
        o->cap = cap;
    }
    o->content[2 * o->n_content] = start;
    o->content[2 * o->n_content + 1] = end;
    o->n_content++;
}

void chat_text_content(chat_text *o, const char *s, size_t n) {
    if (!n) return;
    size_t start = o->b.n;
    pj_buf_add(&o->b, s, n);
    if (!o->b.oom) add_range(o, start, o->b.n);
}

void chat_text_contents(chat_text *o, const char *s) {
    chat_text_content(o, s, strlen(s));
}

void chat_text_append(chat_text *dst, const chat_text *src) {
    dst->oom |= src->oom || src->b.oom;
    if (!src->b.n) return; /* nothing written: src->b.p may be NULL */
    size_t base = dst->b.n;
    pj_buf_add(&dst->b, src->b.p, src->b.n);
    if (dst->b.oom) return;
    for (size_t i = 0; i < src->n_content; i++)
        add_range(dst, base + src->content[2 * i], base + src->content[2 * i + 1]);
}

void chat_text_free(chat_text *o) {
    free(o->b.p);
    free(o->content);
    memset(o, 0, sizeof *o);
}

halo_status chat_text_tokenize(const halo_tokenizer *t, const chat_text *o, halo_tokens *out,
                               halo_error *err) {
    const char *s = o->b.p;
    size_t len = o->b.n, run = 0; /* run: start of the plain bytes not yet encoded */
    halo_status st = HALO_OK;
    for (size_t r = 0; r <= o->n_content && !st; r++) {
        /* The template's text between content ranges r-1 and r. */
        size_t at = r ? o->content[2 * r - 1] : 0;
        size_t end = r < o->n_content ? o->content[2 * r] : len;
        while (at < end && !st) {
            size_t start = end, n = 0;
            int32_t id = halo_specials_next(t, s, end, at, &start, &n);
            if (id < 0) break;
            if (start > run) st = halo_tokenizer_encode(t, s + run, start - run, 0, out, err);
            if (!st) st = halo_tokens_push(out, id, err);
            at = run = start + n;
        }
    }
    if (!st && len > run) st = halo_tokenizer_encode(t, s + run, len - run, 0, out, err);
    return st;
}
