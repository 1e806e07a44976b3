/* Pre-tokenizer (PCRE2, UTF-8 + Unicode properties, JIT) and byte-level BPE merging.
 *
 * DeepSeek V3's tokenizer.json pre-tokenizer is a Sequence of three Split(Isolated) regexes;
 * each splits every piece of the previous one into its matches and the gaps between them, and
 * both become pieces. The patterns below are tokenizer.json's, with PCRE2 escapes for its raw
 * CR/LF and the CJK range written as code points. Each piece is matched as its own subject,
 * as HF does, so `\s+(?!\S)` sees a piece's end as the end of input.
 *
 * PCRE2_MATCH_INVALID_UTF lets any bytes through: invalid sequences match no character class,
 * fall into gaps and are encoded byte by byte, so decode(encode(x)) == x for every input. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "text/text_internal.h"

static const char *const deepseek3_patterns[] = {
    "\\p{N}{1,3}",
    "[\\x{4e00}-\\x{9fa5}\\x{3040}-\\x{309f}\\x{30a0}-\\x{30ff}]+",
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+"
    "|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+"
    "| ?[\\p{P}\\p{S}]+[\\r\\n]*"
    "|\\s*[\\r\\n]+"
    "|\\s+(?!\\S)"
    "|\\s+",
};

static const char *const gpt2_patterns[] = {
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+",
};

halo_status halo_pretok_kind_of(const char *pre, halo_pretok_kind *kind, halo_error *err) {
    if (!pre || !strcmp(pre, "gpt2") || !strcmp(pre, "default")) {
        *kind = HALO_PRETOK_GPT2;
        return HALO_OK;
    }
    if (!strcmp(pre, "deepseek-v3") || !strcmp(pre, "deepseek-v4") || !strcmp(pre, "deepseek4")) {
        *kind = HALO_PRETOK_DEEPSEEK3;
        return HALO_OK;
    }
    return halo_fail(err, HALO_E_UNSUPPORTED,
                     "tokenizer.ggml.pre is \"%s\": halo knows the "
                     "\"deepseek-v3\" and \"gpt2\" pre-tokenizers",
                     pre);
}

halo_status halo_pretok_init(halo_pretok *p, halo_pretok_kind kind, halo_error *err) {
    const char *const *pats = kind == HALO_PRETOK_DEEPSEEK3 ? deepseek3_patterns : gpt2_patterns;
    p->n_levels = kind == HALO_PRETOK_DEEPSEEK3 ? 3 : 1;
    for (unsigned i = 0; i < p->n_levels; i++) {
        int code;
        PCRE2_SIZE at;
        p->re[i] = pcre2_compile((PCRE2_SPTR)pats[i], PCRE2_ZERO_TERMINATED,
                                 PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &code, &at, NULL);
        if (!p->re[i]) {
            char msg[256];
            pcre2_get_error_message(code, (PCRE2_UCHAR *)msg, sizeof msg);
            return halo_fail(err, HALO_E_UNSUPPORTED, "pre-tokenizer regex %u: %s at offset %zu", i,
                             msg, (size_t)at);
        }
        /* Without JIT (an unsupported CPU) pcre2_match interprets the same pattern. */
        (void)pcre2_jit_compile(p->re[i], PCRE2_JIT_COMPLETE);
    }
    return HALO_OK;
}

void halo_pretok_free(halo_pretok *p) {
    for (unsigned i = 0; i < HALO_PRETOK_MAX_LEVELS; i++) {
        pcre2_code_free(p->re[i]);
        p->re[i] = NULL;
    }
}

halo_status halo_encoder_begin(halo_encoder *e) {
    for (unsigned i = 0; i < e->t->pretok.n_levels; i++) {
        e->md[i] = pcre2_match_data_create_from_pattern(e->t->pretok.re[i], NULL);
        if (!e->md[i]) {
            halo_encoder_end(e);
            return halo_fail(e->err, HALO_E_NOMEM, "tokenizer: out of memory for match data");
        }
    }
    return HALO_OK;
}

void halo_encoder_end(halo_encoder *e) {
    for (unsigned i = 0; i < HALO_PRETOK_MAX_LEVELS; i++) {
        pcre2_match_data_free(e->md[i]);
        e->md[i] = NULL;
    }
    free(e->sym);
    e->sym = NULL;
    e->sym_cap = 0;
}

/* Merges one piece: start from one symbol per byte and repeatedly merge the adjacent pair of
 * lowest rank, leftmost on ties, until no pair has a merge. Pieces are short (a word, a run of
 * spaces), so the quadratic scan beats a heap here. */
static halo_status bpe(halo_encoder *e, const unsigned char *s, size_t n) {
    const halo_tokenizer *t = e->t;
    for (size_t i = 0; i < n; i++)
        if (t->byte_token[s[i]] < 0)
            return halo_fail(e->err, HALO_E_UNSUPPORTED,
                             "byte 0x%02x has no token in this "
                             "vocabulary",
                             s[i]);
    if (n == 1) return halo_tokens_push(e->out, t->byte_token[s[0]], e->err);
    if (n > e->sym_cap) {
        size_t cap = n < 256 ? 256 : n;
        int32_t *sym = realloc(e->sym, cap * sizeof *sym);
        if (!sym) return halo_fail(e->err, HALO_E_NOMEM, "tokenizer: out of memory");
        e->sym = sym;
        e->sym_cap = cap;
    }
    int32_t *sym = e->sym;
    for (size_t i = 0; i < n; i++)
        sym[i] = t->byte_token[s[i]];
    size_t m = n;
    while (m > 1) {
        uint32_t best_rank = UINT32_MAX;
        size_t best = 0;
        int32_t result = -1;
        for (size_t i = 0; i + 1 < m; i++) {
            const halo_merge *mg = halo_tokenizer_merge(t, sym[i], sym[i + 1]);
            if (mg && mg->rank < best_rank) {
                best_rank = mg->rank;
                best = i;
                result = mg->result;
            }
        }
        if (result < 0) break;
        sym[best] = result;
        memmove(sym + best + 1, sym + best + 2, (m - best - 2) * sizeof *sym);
        m--;
    }
    for (size_t i = 0; i < m; i++) {
        halo_status st = halo_tokens_push(e->out, sym[i], e->err);
        if (st) return st;
    }
    return HALO_OK;
}

static halo_status split(halo_encoder *e, unsigned level, const char *s, size_t n) {
    const halo_pretok *p = &e->t->pretok;
    if (level == p->n_levels) return bpe(e, (const unsigned char *)s, n);
    pcre2_match_data *md = e->md[level];
    size_t off = 0;
    halo_status st;
    while (off < n) {
        int rc = pcre2_match(p->re[level], (PCRE2_SPTR)s, n, off, 0, md, NULL);
        if (rc < 0) break; /* PCRE2_ERROR_NOMATCH; the rest is one gap */
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        size_t ms = ov[0], me = ov[1];
        if (me <= ms) break; /* the patterns cannot match empty; never loop on it */
        if (ms > off && (st = split(e, level + 1, s + off, ms - off))) return st;
        if ((st = split(e, level + 1, s + ms, me - ms))) return st;
        off = me;
    }
    if (off < n) return split(e, level + 1, s + off, n - off);
    return HALO_OK;
}

halo_status halo_pretok_run(halo_encoder *e, const char *s, size_t n) {
    return n ? split(e, 0, s, n) : HALO_OK;
}
