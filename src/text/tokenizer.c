/* Byte-level BPE (GPT-2 style, as DeepSeek V3/V4 use it) read from GGUF metadata.
 *
 * Encoding follows HF tokenizers' pipeline for DeepSeek's tokenizer.json:
 *   1. added tokens (GGUF types CONTROL and USER_DEFINED) are matched in the raw text, leftmost
 *      longest (HF's AddedVocabulary uses Aho-Corasick LeftmostLongest); the text between them
 *      goes on;
 *   2. the pre-tokenizer is a Sequence of three Split(behavior=Isolated) regexes, each applied to
 *      every piece the previous one produced; matches and the gaps between them both become
 *      pieces (pretok.c);
 *   3. each piece is mapped to byte symbols and merged by rank (lowest first, leftmost on ties).
 * Token text in GGUF is stored byte-level encoded (bytes 0-32, 127-160, 173 shifted to U+0100..)
 * for the BPE vocabulary and as plain UTF-8 for added tokens; both are turned into raw bytes at
 * load so decoding is a table lookup. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/strmap.h"
#include "text/text_internal.h"
#include "text/vocab_check.h"

/* ---- hashing ------------------------------------------------------------------------------ */

static uint64_t hash_bytes(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

static uint64_t hash_u64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

static size_t pow2_at_least(size_t n) {
    size_t c = 16;
    while (c < n)
        c <<= 1;
    return c;
}

static void piece_index_put(halo_tokenizer *t, int32_t id) {
    size_t mask = t->piece_index_cap - 1;
    size_t i = hash_bytes(t->bytes + t->piece_off[id], t->piece_len[id]) & mask;
    while (t->piece_index[i] >= 0) {
        int32_t o = t->piece_index[i];
        /* Duplicate byte strings (e.g. an added token spelling a BPE token) keep the first. */
        if (t->piece_len[o] == t->piece_len[id] &&
            !memcmp(t->bytes + t->piece_off[o], t->bytes + t->piece_off[id], t->piece_len[id]))
            return;
        i = (i + 1) & mask;
    }
    t->piece_index[i] = id;
}

int32_t halo_tokenizer_find_bytes(const halo_tokenizer *t, const char *s, size_t n) {
    size_t mask = t->piece_index_cap - 1;
    size_t i = hash_bytes(s, n) & mask;
    while (t->piece_index[i] >= 0) {
        int32_t o = t->piece_index[i];
        if (t->piece_len[o] == n && !memcmp(t->bytes + t->piece_off[o], s, n)) return o;
        i = (i + 1) & mask;
    }
    return -1;
}

static bool merge_put(halo_tokenizer *t, int32_t a, int32_t b, uint32_t rank, int32_t result) {
    uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    size_t mask = t->merge_cap - 1;
    size_t i = hash_u64(key) & mask;
    while (t->merges[i].rank != UINT32_MAX) {
        if (t->merges[i].key == key) return false; /* first (lowest) rank wins */
        i = (i + 1) & mask;
    }
    t->merges[i] = (halo_merge){key, rank, result};
    return true;
}

const halo_merge *halo_tokenizer_merge(const halo_tokenizer *t, int32_t a, int32_t b) {
    uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    size_t mask = t->merge_cap - 1;
    size_t i = hash_u64(key) & mask;
    while (t->merges[i].rank != UINT32_MAX) {
        if (t->merges[i].key == key) return &t->merges[i];
        i = (i + 1) & mask;
    }
    return NULL;
}

/* ---- byte-level alphabet ------------------------------------------------------------------ */

/* GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves, the other 68 bytes are
 * shifted to U+0100 upwards in byte order. */
static void byte_level_table(uint32_t cp_of_byte[256]) {
    uint32_t next = 256;
    for (int b = 0; b < 256; b++) {
        bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
        cp_of_byte[b] = printable ? (uint32_t)b : next++;
    }
}

static uint32_t utf8_decode(const unsigned char *s, size_t n, unsigned *len) {
    unsigned l = halo_utf8_seq_len(s, n);
    *len = l ? l : 1;
    if (!l) return 0xFFFFFFFFu;
    if (l == 1) return s[0];
    if (l == 2) return (uint32_t)(s[0] & 0x1F) << 6 | (s[1] & 0x3F);
    if (l == 3) return (uint32_t)(s[0] & 0x0F) << 12 | (uint32_t)(s[1] & 0x3F) << 6 | (s[2] & 0x3F);
    return (uint32_t)(s[0] & 0x07) << 18 | (uint32_t)(s[1] & 0x3F) << 12 |
           (uint32_t)(s[2] & 0x3F) << 6 | (s[3] & 0x3F);
}

/* Byte-level text -> raw bytes into dst (room for n bytes: never longer). Returns the length, or
 * -1 when a character is outside the alphabet (then the token is kept as its UTF-8 text). */
static long byte_level_decode(const int16_t byte_of_cp[324], const char *s, size_t n, char *dst) {
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        unsigned l;
        uint32_t cp = utf8_decode((const unsigned char *)s + i, n - i, &l);
        if (cp >= 324 || byte_of_cp[cp] < 0) return -1;
        dst[o++] = (char)byte_of_cp[cp];
        i += l;
    }
    return (long)o;
}

/* ---- loading ------------------------------------------------------------------------------ */

static halo_status get_str_array(const halo_gguf *g, const char *key, const halo_gguf_kv **kv,
                                 halo_error *err) {
    halo_status st = halo_gguf_get_array(g, key, kv, err);
    if (st) return st;
    if ((*kv)->elem_type != HALO_GGUF_STRING)
        return halo_fail(err, HALO_E_TYPE_MISMATCH, "%s: expected an array of strings, got %s", key,
                         halo_gguf_vtype_name((*kv)->elem_type));
    return HALO_OK;
}

static int32_t optional_id(const halo_gguf *g, const char *key, uint32_t n_vocab) {
    uint32_t v;
    if (!halo_gguf_find_kv(g, key) || halo_gguf_get_u32(g, key, &v, NULL) || v >= n_vocab)
        return -1;
    return (int32_t)v;
}

static halo_status load_pieces(halo_tokenizer *t, const halo_gguf_kv *tokens,
                               const halo_gguf_kv *types, halo_error *err) {
    const halo_gguf_str *tok = tokens->v.array;
    size_t total = 0;
    for (uint32_t i = 0; i < t->n_vocab; i++)
        total += tok[i].len;
    t->bytes = malloc(total + 1);
    t->piece_off = malloc(sizeof *t->piece_off * t->n_vocab);
    t->piece_len = malloc(sizeof *t->piece_len * t->n_vocab);
    t->types = malloc(t->n_vocab);
    if (!t->bytes || !t->piece_off || !t->piece_len || !t->types)
        return halo_fail(err, HALO_E_NOMEM, "tokenizer: out of memory for %u tokens", t->n_vocab);

    uint32_t cp_of_byte[256];
    int16_t byte_of_cp[324];
    byte_level_table(cp_of_byte);
    memset(byte_of_cp, 0xff, sizeof byte_of_cp);
    for (int b = 0; b < 256; b++)
        byte_of_cp[cp_of_byte[b]] = (int16_t)b;
    for (int b = 0; b < 256; b++)
        t->byte_token[b] = -1;

    size_t at = 0;
    for (uint32_t i = 0; i < t->n_vocab; i++) {
        uint64_t ty = HALO_TOKEN_NORMAL;
        if (types && halo_gguf_array_u64(types, i, &ty, err)) return err ? err->status : 1;
        t->types[i] = (uint8_t)(ty <= 6 ? ty : HALO_TOKEN_NORMAL);
        t->piece_off[i] = (uint32_t)at;
        long n = -1;
        if (t->types[i] == HALO_TOKEN_NORMAL)
            n = byte_level_decode(byte_of_cp, tok[i].data, tok[i].len, t->bytes + at);
        if (n < 0) { /* added tokens are stored as UTF-8 text */
            memcpy(t->bytes + at, tok[i].data, tok[i].len);
            n = (long)tok[i].len;
        }
        t->piece_len[i] = (uint32_t)n;
        at += (size_t)n;
        if (t->types[i] == HALO_TOKEN_NORMAL && n == 1) {
            unsigned char b = (unsigned char)t->bytes[t->piece_off[i]];
            if (t->byte_token[b] < 0) t->byte_token[b] = (int32_t)i;
        }
    }
    /* A vocabulary may lack bytes that valid UTF-8 never holds (0xC0, 0xC1, 0xF5-0xFF); text
     * needing a missing byte fails to encode, naming it. */
    int missing = 0;
    for (int b = 0; b < 256; b++)
        missing += t->byte_token[b] < 0;
    if (missing > 13)
        return halo_fail(err, HALO_E_BAD_VALUE,
                         "tokenizer.ggml.tokens: %d of the 256 bytes have "
                         "no token; a byte-level vocabulary has them all",
                         missing);
    t->piece_index_cap = pow2_at_least((size_t)t->n_vocab * 2);
    t->piece_index = malloc(sizeof *t->piece_index * t->piece_index_cap);
    if (!t->piece_index) return halo_fail(err, HALO_E_NOMEM, "tokenizer: out of memory");
    memset(t->piece_index, 0xff, sizeof *t->piece_index * t->piece_index_cap);
    for (uint32_t i = 0; i < t->n_vocab; i++)
        piece_index_put(t, (int32_t)i);
    return HALO_OK;
}

static halo_status load_merges(halo_tokenizer *t, const halo_gguf_kv *tokens,
                               const halo_gguf_kv *merges, halo_error *err) {
    const halo_gguf_str *tok = tokens->v.array;
    halo_strmap by_text = {0};
    halo_status st = HALO_OK;
    for (uint32_t i = 0; i < t->n_vocab; i++)
        if (t->types[i] == HALO_TOKEN_NORMAL && halo_strmap_put(&by_text, tok[i].data, i) < 0) {
            st = halo_fail(err, HALO_E_NOMEM, "tokenizer: out of memory");
            goto done;
        }
    t->merge_cap = pow2_at_least((size_t)merges->count * 2);
    t->merges = malloc(sizeof *t->merges * t->merge_cap);
    if (!t->merges) {
        st = halo_fail(err, HALO_E_NOMEM, "tokenizer: out of memory for merges");
        goto done;
    }
    for (size_t i = 0; i < t->merge_cap; i++)
        t->merges[i].rank = UINT32_MAX;
    const halo_gguf_str *m = merges->v.array;
    char buf[1024];
    for (uint64_t r = 0; r < merges->count; r++) {
        const char *sp = memchr(m[r].data, ' ', m[r].len);
        /* A merge "a b": a and b non-empty, and "ab" must fit our scratch buffer. */
        if (!sp || sp == m[r].data || sp + 1 == m[r].data + m[r].len || m[r].len >= sizeof buf) {
            st = halo_fail(err, HALO_E_BAD_VALUE,
                           "tokenizer.ggml.merges[%llu]: \"%.*s\" is not "
                           "two tokens separated by a space",
                           (unsigned long long)r, (int)(m[r].len > 64 ? 64 : m[r].len), m[r].data);
            goto done;
        }
        size_t la = (size_t)(sp - m[r].data), lb = m[r].len - la - 1;
        uint64_t a, b, ab;
        memcpy(buf, m[r].data, la);
        buf[la] = 0;
        bool ok = halo_strmap_get(&by_text, buf, &a);
        memcpy(buf, sp + 1, lb);
        buf[lb] = 0;
        ok = ok && halo_strmap_get(&by_text, buf, &b);
        memcpy(buf, m[r].data, la);
        memcpy(buf + la, sp + 1, lb);
        buf[la + lb] = 0;
        ok = ok && halo_strmap_get(&by_text, buf, &ab);
        if (!ok) {
            st = halo_fail(err, HALO_E_BAD_VALUE,
                           "tokenizer.ggml.merges[%llu]: \"%.*s\" names a "
                           "token missing from tokenizer.ggml.tokens",
                           (unsigned long long)r, (int)(m[r].len > 64 ? 64 : m[r].len), m[r].data);
            goto done;
        }
        merge_put(t, (int32_t)a, (int32_t)b, (uint32_t)r, (int32_t)ab);
    }
done:
    halo_strmap_free(&by_text);
    return st;
}

halo_status halo_tokenizer_load(const halo_gguf *g, halo_tokenizer **out, halo_error *err) {
    *out = NULL;
    const char *model = NULL, *pre = NULL;
    halo_status st = halo_gguf_get_str(g, "tokenizer.ggml.model", &model, err);
    if (st) return st;
    if (strcmp(model, "gpt2"))
        return halo_fail(err, HALO_E_UNSUPPORTED,
                         "tokenizer.ggml.model is \"%s\": halo reads "
                         "byte-level BPE (\"gpt2\") tokenizers only",
                         model);
    if (halo_gguf_find_kv(g, "tokenizer.ggml.pre") &&
        (st = halo_gguf_get_str(g, "tokenizer.ggml.pre", &pre, err)))
        return st;
    halo_pretok_kind kind;
    if ((st = halo_pretok_kind_of(pre, &kind, err))) return st;

    const halo_gguf_kv *tokens, *merges, *types = NULL;
    if ((st = get_str_array(g, "tokenizer.ggml.tokens", &tokens, err))) return st;
    if ((st = get_str_array(g, "tokenizer.ggml.merges", &merges, err))) return st;
    if (halo_gguf_find_kv(g, "tokenizer.ggml.token_type")) {
        if ((st = halo_gguf_get_array(g, "tokenizer.ggml.token_type", &types, err))) return st;
        if (types->count != tokens->count)
            return halo_fail(err, HALO_E_BAD_VALUE,
                             "tokenizer.ggml.token_type has %llu entries "
                             "for %llu tokens",
                             (unsigned long long)types->count, (unsigned long long)tokens->count);
    }
    if (tokens->count == 0 || tokens->count > INT32_MAX / 2)
        return halo_fail(err, HALO_E_BAD_VALUE, "tokenizer.ggml.tokens: %llu tokens",
                         (unsigned long long)tokens->count);
    if ((st = halo_vocab_check(g, tokens, types, err))) return st;

    halo_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return halo_fail(err, HALO_E_NOMEM, "tokenizer: out of memory");
    t->n_vocab = (uint32_t)tokens->count;
    if ((st = load_pieces(t, tokens, types, err)) || (st = load_merges(t, tokens, merges, err)) ||
        (st = halo_specials_build(t, err)) || (st = halo_pretok_init(&t->pretok, kind, err))) {
        halo_tokenizer_free(t);
        return st;
    }
    t->bos = optional_id(g, "tokenizer.ggml.bos_token_id", t->n_vocab);
    t->eos = optional_id(g, "tokenizer.ggml.eos_token_id", t->n_vocab);
    t->eot = optional_id(g, "tokenizer.ggml.eot_token_id", t->n_vocab);
    *out = t;
    return HALO_OK;
}

halo_status halo_tokenizer_open(const char *path, halo_tokenizer **out, halo_error *err) {
    halo_gguf *g = NULL;
    *out = NULL;
    halo_status st = halo_gguf_open(path, &g, err);
    if (!st) st = halo_tokenizer_load(g, out, err);
    if (st) halo_error_prefix(err, "%s: ", path);
    halo_gguf_close(g);
    return st;
}

void halo_tokenizer_free(halo_tokenizer *t) {
    if (!t) return;
    halo_pretok_free(&t->pretok);
    free(t->specials);
    free(t->merges);
    free(t->piece_index);
    free(t->types);
    free(t->piece_len);
    free(t->piece_off);
    free(t->bytes);
    free(t);
}

uint32_t halo_tokenizer_n_vocab(const halo_tokenizer *t) {
    return t->n_vocab;
}
int32_t halo_tokenizer_bos(const halo_tokenizer *t) {
    return t->bos;
}
int32_t halo_tokenizer_eos(const halo_tokenizer *t) {
    return t->eos;
}

bool halo_tokenizer_is_eog(const halo_tokenizer *t, int32_t id) {
    return id >= 0 && (id == t->eos || id == t->eot);
}

int halo_tokenizer_type(const halo_tokenizer *t, int32_t id) {
    return id >= 0 && (uint32_t)id < t->n_vocab ? t->types[id] : 0;
}

int32_t halo_tokenizer_find(const halo_tokenizer *t, const char *text) {
    return halo_tokenizer_find_bytes(t, text, strlen(text));
}

const char *halo_tokenizer_piece(const halo_tokenizer *t, int32_t id, size_t *len) {
    if (id < 0 || (uint32_t)id >= t->n_vocab) return NULL;
    *len = t->piece_len[id];
    return t->bytes + t->piece_off[id];
}

/* ---- token lists -------------------------------------------------------------------------- */

halo_status halo_tokens_push(halo_tokens *t, int32_t id, halo_error *err) {
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 64;
        int32_t *ids = realloc(t->ids, cap * sizeof *ids);
        if (!ids) return halo_fail(err, HALO_E_NOMEM, "out of memory for %zu tokens", cap);
        t->ids = ids;
        t->cap = cap;
    }
    t->ids[t->n++] = id;
    return HALO_OK;
}

void halo_tokens_free(halo_tokens *t) {
    if (!t) return;
    free(t->ids);
    t->ids = NULL;
    t->n = t->cap = 0;
}

/* ---- encoding ----------------------------------------------------------------------------- */

halo_status halo_tokenizer_encode(const halo_tokenizer *t, const char *text, size_t len,
                                  unsigned flags, halo_tokens *out, halo_error *err) {
    halo_status st;
    if ((flags & HALO_TOKENIZE_BOS) && t->bos >= 0 && (st = halo_tokens_push(out, t->bos, err)))
        return st;
    halo_encoder enc = {.t = t, .out = out, .err = err};
    if ((st = halo_encoder_begin(&enc))) return st;
    size_t at = 0;
    while (at < len) {
        size_t start = len, match_len = 0;
        int32_t id = -1;
        if (flags & HALO_TOKENIZE_SPECIAL)
            id = halo_specials_next(t, text, len, at, &start, &match_len);
        if (start > at && (st = halo_pretok_run(&enc, text + at, start - at))) break;
        if (id < 0) break;
        if ((st = halo_tokens_push(out, id, err))) break;
        at = start + match_len;
    }
    halo_encoder_end(&enc);
    return st;
}

halo_status halo_tokenizer_decode(const halo_tokenizer *t, const int32_t *ids, size_t n,
                                  unsigned flags, char **out, size_t *out_len, halo_error *err) {
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || (uint32_t)ids[i] >= t->n_vocab)
            return halo_fail(err, HALO_E_INVALID_ARG,
                             "token %d at index %zu is outside the "
                             "vocabulary of %u",
                             ids[i], i, t->n_vocab);
        total += t->piece_len[ids[i]];
    }
    char *s = malloc(total + 1);
    if (!s) return halo_fail(err, HALO_E_NOMEM, "out of memory decoding %zu tokens", n);
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        uint8_t ty = t->types[ids[i]];
        if ((ty == HALO_TOKEN_CONTROL || ty == HALO_TOKEN_UNUSED) &&
            !(flags & HALO_TOKENIZE_SPECIAL))
            continue;
        memcpy(s + o, t->bytes + t->piece_off[ids[i]], t->piece_len[ids[i]]);
        o += t->piece_len[ids[i]];
    }
    s[o] = 0;
    *out = s;
    if (out_len) *out_len = o;
    return HALO_OK;
}
