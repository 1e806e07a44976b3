/* UTF-8 validation, U+FFFD replacement and the streaming hold-back used when printing tokens:
 * a token may end inside a character (byte-level BPE splits multi-byte characters freely). */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "halo/text.h"

/* Expected length from the lead byte; 0 for bytes that cannot start a sequence. */
static unsigned lead_len(unsigned char c) {
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) return 2;
    if (c >= 0xE0 && c <= 0xEF) return 3;
    if (c >= 0xF0 && c <= 0xF4) return 4;
    return 0;
}

/* Whether s[i] (i >= 1) may follow s[0..i) in a valid sequence (RFC 3629 table: overlongs,
 * surrogates and code points past U+10FFFF are excluded by the second byte's range). */
static bool cont_ok(const unsigned char *s, unsigned i) {
    unsigned char c = s[i];
    if (i == 1) {
        switch (s[0]) {
        case 0xE0:
            return c >= 0xA0 && c <= 0xBF;
        case 0xED:
            return c >= 0x80 && c <= 0x9F;
        case 0xF0:
            return c >= 0x90 && c <= 0xBF;
        case 0xF4:
            return c >= 0x80 && c <= 0x8F;
        default:
            break;
        }
    }
    return c >= 0x80 && c <= 0xBF;
}

unsigned halo_utf8_seq_len(const unsigned char *s, size_t n) {
    if (!n) return 0;
    unsigned l = lead_len(s[0]);
    if (!l || l > n) return 0;
    for (unsigned i = 1; i < l; i++)
        if (!cont_ok(s, i)) return 0;
    return l;
}

/* Length of the maximal prefix of s that is a valid start of a sequence (>= 1 for a bad lead:
 * that byte alone is the invalid subpart). */
static unsigned valid_prefix(const unsigned char *s, size_t n) {
    unsigned l = lead_len(s[0]), i = 1;
    if (!l) return 1;
    while (i < l && i < n && cont_ok(s, i))
        i++;
    return i;
}

halo_status halo_utf8_sanitize(const char *in, size_t n, char **out, size_t *out_len,
                               size_t *replaced, halo_error *err) {
    /* Each invalid byte becomes at most 3 bytes. */
    char *s = malloc(n * 3 + 1);
    if (!s) return halo_fail(err, HALO_E_NOMEM, "out of memory for %zu bytes of text", n);
    const unsigned char *u = (const unsigned char *)in;
    size_t o = 0, bad = 0;
    for (size_t i = 0; i < n;) {
        unsigned l = halo_utf8_seq_len(u + i, n - i);
        if (l) {
            memcpy(s + o, u + i, l);
            o += l;
            i += l;
        } else {
            memcpy(s + o, "\xEF\xBF\xBD", 3);
            o += 3;
            bad++;
            i += valid_prefix(u + i, n - i);
        }
    }
    s[o] = 0;
    *out = s;
    if (out_len) *out_len = o;
    if (replaced) *replaced = bad;
    return HALO_OK;
}

size_t halo_utf8_stream_push(halo_utf8_stream *st, const char *in, size_t n, char *out) {
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)in[i];
        if (st->n) {
            st->pending[st->n] = c;
            if (cont_ok(st->pending, st->n)) {
                if (++st->n == lead_len(st->pending[0])) {
                    memcpy(out + o, st->pending, st->n);
                    o += st->n;
                    st->n = 0;
                }
                continue;
            }
            /* The held sequence cannot complete: let its bytes through as they are. */
            memcpy(out + o, st->pending, st->n);
            o += st->n;
            st->n = 0;
        }
        unsigned l = lead_len(c);
        if (l > 1)
            st->pending[st->n++] = c;
        else
            out[o++] = (char)c;
    }
    return o;
}

size_t halo_utf8_stream_flush(halo_utf8_stream *st, char *out) {
    size_t n = st->n;
    memcpy(out, st->pending, n);
    st->n = 0;
    return n;
}
