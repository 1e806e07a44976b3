/* A chat rendering that remembers which of its bytes are content (what users, tools and the
 * model wrote: messages, reasoning, tool definitions, tool calls, response formats) and which
 * are the template's own text. chat.c writes it; chat_tokens.c turns it into token ids with
 * special-token parsing in the template's text only, so content never becomes a control token. */
#ifndef HALO_TEXT_CHAT_INTERNAL_H
#define HALO_TEXT_CHAT_INTERNAL_H

#include "halo/text.h"
#include "text/json.h"

typedef struct chat_text {
    pj_buf b;         /* the rendered bytes; the template's text is written straight into it */
    size_t *content;  /* sorted, disjoint [start, end) pairs of content bytes in b */
    size_t n_content; /* pairs */
    size_t cap;
    bool oom; /* latched, like pj_buf's */
} chat_text;

/* Appends n bytes of content. */
void chat_text_content(chat_text *o, const char *s, size_t n);
void chat_text_contents(chat_text *o, const char *s); /* a NUL-terminated string */
/* Appends src (bytes and content ranges) to dst. */
void chat_text_append(chat_text *dst, const chat_text *src);
void chat_text_free(chat_text *o);

/* Appends the ids of the whole rendering to out: control and user-defined tokens are matched
 * only inside the template's text (each match lying wholly in it); every stretch between two
 * such matches, content and template text alike, is one plain BPE run, exactly as a tokenizer
 * given the whole text would split it when the content holds no token text. */
halo_status chat_text_tokenize(const halo_tokenizer *t, const chat_text *o, halo_tokens *out,
                               halo_error *err);

#endif
