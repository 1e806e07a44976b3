/* Added tokens (GGUF types CONTROL and USER_DEFINED: "<｜User｜>", "<think>", ...) are found in
 * the raw text before pre-tokenization, leftmost-longest like HF's AddedVocabulary. A byte trie
 * keeps this cheap on text full of '<': a walk stops at the first byte no token continues with. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "text/text_internal.h"

static int32_t new_node(halo_tokenizer *t, size_t *cap, unsigned char byte) {
    if (t->n_specials == *cap) {
        size_t c = *cap ? *cap * 2 : 1024;
        halo_special_node *n = realloc(t->specials, c * sizeof *n);
        if (!n) return -1;
        t->specials = n;
        *cap = c;
    }
    t->specials[t->n_specials] = (halo_special_node){-1, -1, -1, byte};
    return (int32_t)t->n_specials++;
}

halo_status halo_specials_build(halo_tokenizer *t, halo_error *err) {
    size_t cap = 0;
    for (int b = 0; b < 256; b++)
        t->special_root[b] = -1;
    for (uint32_t id = 0; id < t->n_vocab; id++) {
        if (t->types[id] != HALO_TOKEN_CONTROL && t->types[id] != HALO_TOKEN_USER_DEFINED) continue;
        const unsigned char *s = (const unsigned char *)t->bytes + t->piece_off[id];
        uint32_t n = t->piece_len[id];
        if (!n) continue;
        int32_t node = t->special_root[s[0]];
        if (node < 0) {
            if ((node = new_node(t, &cap, s[0])) < 0) goto nomem;
            t->special_root[s[0]] = node;
        }
        for (uint32_t i = 1; i < n; i++) {
            int32_t c = t->specials[node].child;
            while (c >= 0 && t->specials[c].byte != s[i])
                c = t->specials[c].sibling;
            if (c < 0) {
                if ((c = new_node(t, &cap, s[i])) < 0) goto nomem;
                t->specials[c].sibling = t->specials[node].child;
                t->specials[node].child = c;
            }
            node = c;
        }
        if (t->specials[node].token < 0) t->specials[node].token = (int32_t)id;
    }
    return HALO_OK;
nomem:
    return halo_fail(err, HALO_E_NOMEM, "tokenizer: out of memory for added tokens");
}

int32_t halo_specials_next(const halo_tokenizer *t, const char *text, size_t len, size_t at,
                           size_t *start, size_t *match_len) {
    const unsigned char *s = (const unsigned char *)text;
    for (size_t i = at; i < len; i++) {
        int32_t node = t->special_root[s[i]];
        if (node < 0) continue;
        int32_t best = -1;
        size_t best_len = 0;
        for (size_t j = i;;) {
            if (t->specials[node].token >= 0) {
                best = t->specials[node].token;
                best_len = j - i + 1;
            }
            if (++j >= len) break;
            int32_t c = t->specials[node].child;
            while (c >= 0 && t->specials[c].byte != s[j])
                c = t->specials[c].sibling;
            if (c < 0) break;
            node = c;
        }
        if (best >= 0) {
            *start = i;
            *match_len = best_len;
            return best;
        }
    }
    *start = len;
    *match_len = 0;
    return -1;
}
