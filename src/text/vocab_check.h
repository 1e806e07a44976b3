/* Checks a GGUF's tokenizer data (tokens, token types, special token ids) before the tokenizer
 * is built from it; see vocab_check.c for what is required. */
#ifndef HALO_TEXT_VOCAB_CHECK_H
#define HALO_TEXT_VOCAB_CHECK_H

#include "halo/gguf.h"
#include "halo/text.h"

/* tokens: the tokenizer.ggml.tokens string array; types: tokenizer.ggml.token_type (same
 * count) or NULL. Errors name the key, entry and value (HALO_E_BAD_VALUE). */
halo_status halo_vocab_check(const halo_gguf *g, const halo_gguf_kv *tokens,
                             const halo_gguf_kv *types, halo_error *err);

#endif
