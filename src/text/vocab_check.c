/* Validation of the tokenizer data in a GGUF before the tokenizer is built from it: the file is
 * untrusted, and ids and strings in it become table indices and byte lengths. Each problem is
 * an error naming the key, the entry and the value:
 *   - tokenizer.ggml.tokens: every token non-empty valid UTF-8 (GGUF strings are UTF-8), and a
 *     NORMAL token spelled in GPT-2's byte-level alphabet, since its bytes are what it decodes
 *     to (DeepSeek V3/V4's 127,997 normal tokens all are; added tokens are plain text);
 *   - tokenizer.ggml.token_type: each a llama.cpp token type, 0 (undefined) to 6 (byte);
 *   - every special token id (tokenizer.ggml.*_token_id) an unsigned integer inside the
 *     vocabulary.
 * Merges naming tokens that are not in the vocabulary are refused by the merge loader itself
 * (tokenizer.c), where the merge strings are parsed. */
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "text/vocab_check.h"

#define PREVIEW 48

/* GPT-2's bytes_to_unicode image: the printable Latin-1 bytes and U+0100..U+0143. */
static bool byte_level_char(uint32_t cp) {
    return (cp >= 33 && cp <= 126) || (cp >= 161 && cp <= 172) || (cp >= 174 && cp <= 255) ||
           (cp >= 256 && cp < 256 + 68);
}

/* True when s is valid UTF-8; *byte_level tells whether every character is in the alphabet. */
static bool utf8_valid(const unsigned char *s, size_t n, bool *byte_level) {
    *byte_level = true;
    for (size_t i = 0; i < n;) {
        unsigned l = halo_utf8_seq_len(s + i, n - i);
        if (!l) return false;
        uint32_t cp = s[i];
        if (l == 2) cp = (uint32_t)(s[i] & 0x1F) << 6 | (s[i + 1] & 0x3F);
        if (l == 3)
            cp = (uint32_t)(s[i] & 0x0F) << 12 | (uint32_t)(s[i + 1] & 0x3F) << 6 |
                 (s[i + 2] & 0x3F);
        if (l == 4) cp = 0x10000; /* beyond the byte-level alphabet; its value does not matter */
        *byte_level &= byte_level_char(cp);
        i += l;
    }
    return true;
}

static halo_status check_tokens(const halo_gguf_kv *tokens, const halo_gguf_kv *types,
                                halo_error *err) {
    const halo_gguf_str *tok = tokens->v.array;
    for (uint64_t i = 0; i < tokens->count; i++) {
        uint64_t ty = 1;
        if (types && halo_gguf_array_u64(types, i, &ty, NULL))
            return halo_fail(err, HALO_E_BAD_VALUE,
                             "tokenizer.ggml.token_type[%llu] is not a token type (0 to 6)",
                             (unsigned long long)i);
        if (ty > 6)
            return halo_fail(err, HALO_E_BAD_VALUE,
                             "tokenizer.ggml.token_type[%llu] = %llu: token types are 0 to 6",
                             (unsigned long long)i, (unsigned long long)ty);
        if (tok[i].len == 0)
            return halo_fail(err, HALO_E_BAD_VALUE, "tokenizer.ggml.tokens[%llu] is empty",
                             (unsigned long long)i);
        bool byte_level;
        if (!utf8_valid((const unsigned char *)tok[i].data, tok[i].len, &byte_level))
            return halo_fail(err, HALO_E_BAD_VALUE,
                             "tokenizer.ggml.tokens[%llu] is not valid UTF-8",
                             (unsigned long long)i);
        if (ty == HALO_TOKEN_NORMAL && !byte_level)
            return halo_fail(err, HALO_E_BAD_VALUE,
                             "tokenizer.ggml.tokens[%llu] \"%.*s\" is a normal token with a "
                             "character outside the byte-level alphabet",
                             (unsigned long long)i,
                             (int)(tok[i].len > PREVIEW ? PREVIEW : tok[i].len), tok[i].data);
    }
    return HALO_OK;
}

static halo_status check_special_ids(const halo_gguf *g, uint64_t n_tokens, halo_error *err) {
    static const char prefix[] = "tokenizer.ggml.", suffix[] = "_token_id";
    for (uint64_t i = 0; i < halo_gguf_kv_count(g); i++) {
        const halo_gguf_kv *kv = halo_gguf_kv_at(g, i);
        const char *k = kv->key.data;
        size_t n = kv->key.len, ls = sizeof suffix - 1, lp = sizeof prefix - 1;
        if (n <= lp + ls || strncmp(k, prefix, lp) || strcmp(k + n - ls, suffix)) continue;
        uint64_t id;
        if (halo_gguf_get_u64(g, k, &id, NULL))
            return halo_fail(err, HALO_E_BAD_VALUE,
                             "%s is not a token id (an unsigned integer), it has type %s", k,
                             halo_gguf_vtype_name(kv->type));
        if (id >= n_tokens)
            return halo_fail(err, HALO_E_BAD_VALUE,
                             "%s = %llu: outside the vocabulary of %llu tokens", k,
                             (unsigned long long)id, (unsigned long long)n_tokens);
    }
    return HALO_OK;
}

halo_status halo_vocab_check(const halo_gguf *g, const halo_gguf_kv *tokens,
                             const halo_gguf_kv *types, halo_error *err) {
    halo_status st = check_tokens(tokens, types, err);
    if (!st) st = check_special_ids(g, tokens->count, err);
    return st;
}
