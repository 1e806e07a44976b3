/* Internals shared by the tokenizer's files: tokenizer.c (vocabulary, merges, encode/decode),
 * specials.c (added-token matching), pretok.c (PCRE2 pre-tokenizer and BPE). */
#ifndef HALO_TEXT_INTERNAL_H
#define HALO_TEXT_INTERNAL_H

#include <stdint.h>

#include "halo/text.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

typedef enum halo_pretok_kind {
    HALO_PRETOK_DEEPSEEK3, /* tokenizer.ggml.pre "deepseek-v3" (DeepSeek V3, V3.2, V4) */
    HALO_PRETOK_GPT2,      /* "gpt2" / "default": GPT-2's single regex */
} halo_pretok_kind;

#define HALO_PRETOK_MAX_LEVELS 3

typedef struct halo_pretok {
    unsigned n_levels;
    pcre2_code *re[HALO_PRETOK_MAX_LEVELS];
} halo_pretok;

typedef struct halo_merge {
    uint64_t key;  /* left id << 32 | right id */
    uint32_t rank; /* UINT32_MAX: empty slot */
    int32_t result;
} halo_merge;

/* Trie of added tokens (control and user-defined) for leftmost-longest matching. */
typedef struct halo_special_node {
    int32_t child, sibling, token;
    unsigned char byte;
} halo_special_node;

struct halo_tokenizer {
    uint32_t n_vocab;
    int32_t bos, eos, eot;
    char *bytes; /* all pieces' raw bytes */
    uint32_t *piece_off, *piece_len;
    uint8_t *types;
    int32_t byte_token[256];
    int32_t *piece_index; /* open addressing over raw bytes -> id */
    size_t piece_index_cap;
    halo_merge *merges;
    size_t merge_cap;
    halo_special_node *specials;
    size_t n_specials;
    int32_t special_root[256];
    halo_pretok pretok;
};

/* Per-call encoding state: match data and BPE scratch, so a tokenizer is shared read-only. */
typedef struct halo_encoder {
    const halo_tokenizer *t;
    halo_tokens *out;
    halo_error *err;
    pcre2_match_data *md[HALO_PRETOK_MAX_LEVELS];
    int32_t *sym;
    size_t sym_cap;
} halo_encoder;

int32_t halo_tokenizer_find_bytes(const halo_tokenizer *t, const char *s, size_t n);
const halo_merge *halo_tokenizer_merge(const halo_tokenizer *t, int32_t a, int32_t b);

halo_status halo_specials_build(halo_tokenizer *t, halo_error *err);
/* Finds the leftmost-longest added token in text[at..len): returns its id and sets *start and
 * *match_len, or returns -1 (with *start = len) when there is none. */
int32_t halo_specials_next(const halo_tokenizer *t, const char *text, size_t len, size_t at,
                           size_t *start, size_t *match_len);

halo_status halo_pretok_kind_of(const char *pre, halo_pretok_kind *kind, halo_error *err);
halo_status halo_pretok_init(halo_pretok *p, halo_pretok_kind kind, halo_error *err);
void halo_pretok_free(halo_pretok *p);
halo_status halo_encoder_begin(halo_encoder *e);
void halo_encoder_end(halo_encoder *e);
/* Pre-tokenizes n bytes of plain text (no added tokens) and appends their BPE ids. */
halo_status halo_pretok_run(halo_encoder *e, const char *s, size_t n);

#endif
