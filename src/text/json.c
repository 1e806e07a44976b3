/* JSON in, Python-style JSON out (see json.h for why not cJSON). */
#include "text/json.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

#define PJ_MAX_DEPTH 256

/* ---- buffer ------------------------------------------------------------------------------- */

void pj_buf_add(pj_buf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

void pj_buf_adds(pj_buf *b, const char *s) {
    pj_buf_add(b, s, strlen(s));
}

/* ---- parser ------------------------------------------------------------------------------- */

typedef struct parser {
    const char *s;
    size_t n, at;
    halo_error *err;
    halo_status st;
} parser;

static pj *fail(parser *p, const char *what) {
    if (!p->st) p->st = halo_fail(p->err, HALO_E_BAD_VALUE, "JSON: %s at byte %zu", what, p->at);
    return NULL;
}

static void skip_ws(parser *p) {
    while (p->at < p->n && (p->s[p->at] == ' ' || p->s[p->at] == '\t' || p->s[p->at] == '\n' ||
                            p->s[p->at] == '\r'))
        p->at++;
}

static pj *new_value(parser *p, pj_type t) {
    pj *v = calloc(1, sizeof *v);
    if (!v && !p->st) p->st = halo_fail(p->err, HALO_E_NOMEM, "JSON: out of memory");
    if (v) v->type = t;
    return v;
}

static int hex4(const char *s) {
    int v = 0;
    for (int i = 0; i < 4; i++) {
        char c = s[i];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= c - '0';
        else if (c >= 'a' && c <= 'f')
            v |= c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            v |= c - 'A' + 10;
        else
            return -1;
    }
    return v;
}

static size_t put_utf8(char *d, unsigned cp) {
    if (cp < 0x80) {
        d[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        d[0] = (char)(0xC0 | cp >> 6);
        d[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        d[0] = (char)(0xE0 | cp >> 12);
        d[1] = (char)(0x80 | (cp >> 6 & 0x3F));
        d[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    d[0] = (char)(0xF0 | cp >> 18);
    d[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    d[2] = (char)(0x80 | (cp >> 6 & 0x3F));
    d[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Decodes the string at p->at (on the opening quote) into a malloc'd buffer. */
static char *parse_string(parser *p, size_t *len) {
    size_t start = ++p->at, end = start;
    while (end < p->n && p->s[end] != '"')
        end += p->s[end] == '\\' ? 2 : 1;
    if (end >= p->n) return (char *)fail(p, "unterminated string");
    char *d = malloc(end - start + 1); /* decoding never grows the text */
    if (!d) return (char *)fail(p, "out of memory");
    size_t o = 0;
    while (p->at < end) {
        unsigned char c = (unsigned char)p->s[p->at];
        if (c < 0x20) {
            free(d);
            return (char *)fail(p, "control character in string");
        }
        if (c != '\\') {
            d[o++] = (char)c;
            p->at++;
            continue;
        }
        char e = p->s[p->at + 1];
        p->at += 2;
        switch (e) {
        case '"':
            d[o++] = '"';
            break;
        case '\\':
            d[o++] = '\\';
            break;
        case '/':
            d[o++] = '/';
            break;
        case 'b':
            d[o++] = '\b';
            break;
        case 'f':
            d[o++] = '\f';
            break;
        case 'n':
            d[o++] = '\n';
            break;
        case 'r':
            d[o++] = '\r';
            break;
        case 't':
            d[o++] = '\t';
            break;
        case 'u': {
            int u = p->at + 4 <= end ? hex4(p->s + p->at) : -1;
            if (u < 0) {
                free(d);
                return (char *)fail(p, "bad \\u escape");
            }
            p->at += 4;
            unsigned cp = (unsigned)u;
            if (cp >= 0xD800 && cp < 0xDC00 && p->at + 6 <= end && p->s[p->at] == '\\' &&
                p->s[p->at + 1] == 'u') {
                int lo = hex4(p->s + p->at + 2);
                if (lo >= 0xDC00 && lo < 0xE000) {
                    cp = 0x10000 + ((cp - 0xD800) << 10) + ((unsigned)lo - 0xDC00);
                    p->at += 6;
                }
            }
            if (cp >= 0xD800 && cp < 0xE000) cp = 0xFFFD; /* a lone surrogate has no UTF-8 */
            o += put_utf8(d + o, cp);
            break;
        }
        default:
            free(d);
            return (char *)fail(p, "bad escape");
        }
    }
    p->at = end + 1;
    d[o] = 0;
    *len = o;
    return d;
}

static pj *parse_value(parser *p, int depth);

static bool push_item(parser *p, pj *v, pj *item, char *key, size_t key_len) {
    if (key) { /* a duplicate key keeps its place and takes the new value */
        for (size_t i = 0; i < v->n; i++)
            if (v->key_lens[i] == key_len && !memcmp(v->keys[i], key, key_len)) {
                pj_free(v->items[i]);
                v->items[i] = item;
                free(key);
                return true;
            }
    }
    pj **items = realloc(v->items, (v->n + 1) * sizeof *items);
    if (items) v->items = items;
    if (items && key) {
        char **keys = realloc(v->keys, (v->n + 1) * sizeof *keys);
        if (keys) v->keys = keys;
        size_t *kl = keys ? realloc(v->key_lens, (v->n + 1) * sizeof *kl) : NULL;
        if (kl) v->key_lens = kl;
        if (!kl) items = NULL;
    }
    if (!items) {
        pj_free(item);
        free(key);
        fail(p, "out of memory");
        return false;
    }
    v->items[v->n] = item;
    if (key) {
        v->keys[v->n] = key;
        v->key_lens[v->n] = key_len;
    }
    v->n++;
    return true;
}

static pj *parse_container(parser *p, int depth, bool object) {
    pj *v = new_value(p, object ? PJ_OBJ : PJ_ARR);
    if (!v) return NULL;
    p->at++;
    skip_ws(p);
    char close = object ? '}' : ']';
    if (p->at < p->n && p->s[p->at] == close) {
        p->at++;
        return v;
    }
    for (;;) {
        char *key = NULL;
        size_t key_len = 0;
        skip_ws(p);
        if (object) {
            if (p->at >= p->n || p->s[p->at] != '"') break;
            if (!(key = parse_string(p, &key_len))) break;
            skip_ws(p);
            if (p->at >= p->n || p->s[p->at] != ':') {
                free(key);
                break;
            }
            p->at++;
        }
        pj *item = parse_value(p, depth + 1);
        if (!item) {
            free(key);
            break;
        }
        if (!push_item(p, v, item, key, key_len)) break;
        skip_ws(p);
        if (p->at < p->n && p->s[p->at] == ',') {
            p->at++;
            continue;
        }
        if (p->at < p->n && p->s[p->at] == close) {
            p->at++;
            return v;
        }
        break;
    }
    pj_free(v);
    return fail(p, object ? "expected a member, ',' or '}'" : "expected a value, ',' or ']'");
}

static pj *parse_number(parser *p) {
    size_t start = p->at;
    const char *s = p->s;
    static const char *const specials[] = {"NaN", "Infinity", "-Infinity"};
    for (int i = 0; i < 3; i++) {
        size_t l = strlen(specials[i]);
        if (p->n - start >= l && !memcmp(s + start, specials[i], l)) {
            p->at += l;
            goto done;
        }
    }
    if (p->at < p->n && s[p->at] == '-') p->at++;
    if (p->at < p->n && s[p->at] == '0')
        p->at++;
    else if (p->at < p->n && s[p->at] >= '1' && s[p->at] <= '9')
        while (p->at < p->n && s[p->at] >= '0' && s[p->at] <= '9')
            p->at++;
    else
        return fail(p, "bad number");
    if (p->at < p->n && s[p->at] == '.') {
        size_t d = ++p->at;
        while (p->at < p->n && s[p->at] >= '0' && s[p->at] <= '9')
            p->at++;
        if (p->at == d) return fail(p, "bad number");
    }
    if (p->at < p->n && (s[p->at] == 'e' || s[p->at] == 'E')) {
        p->at++;
        if (p->at < p->n && (s[p->at] == '+' || s[p->at] == '-')) p->at++;
        size_t d = p->at;
        while (p->at < p->n && s[p->at] >= '0' && s[p->at] <= '9')
            p->at++;
        if (p->at == d) return fail(p, "bad number");
    }
done:;
    pj *v = new_value(p, PJ_NUM);
    if (!v) return NULL;
    v->len = p->at - start;
    v->s = malloc(v->len + 1);
    if (!v->s) {
        pj_free(v);
        return fail(p, "out of memory");
    }
    memcpy(v->s, s + start, v->len);
    v->s[v->len] = 0;
    return v;
}

static pj *parse_value(parser *p, int depth) {
    if (depth > PJ_MAX_DEPTH) return fail(p, "nested too deeply");
    skip_ws(p);
    if (p->at >= p->n) return fail(p, "unexpected end");
    char c = p->s[p->at];
    if (c == '{' || c == '[') return parse_container(p, depth, c == '{');
    if (c == '"') {
        pj *v = new_value(p, PJ_STR);
        if (v && !(v->s = parse_string(p, &v->len))) {
            pj_free(v);
            return NULL;
        }
        return v;
    }
    static const struct {
        const char *word;
        pj_type type;
    } words[] = {{"null", PJ_NULL}, {"true", PJ_TRUE}, {"false", PJ_FALSE}};
    for (int i = 0; i < 3; i++) {
        size_t l = strlen(words[i].word);
        if (p->n - p->at >= l && !memcmp(p->s + p->at, words[i].word, l)) {
            p->at += l;
            return new_value(p, words[i].type);
        }
    }
    return parse_number(p);
}

halo_status pj_parse(const char *text, size_t len, pj **out, halo_error *err) {
    parser p = {.s = text, .n = len, .err = err};
    pj *v = parse_value(&p, 0);
    if (v) {
        skip_ws(&p);
        if (p.at != p.n) {
            pj_free(v);
            v = fail(&p, "extra text after the value");
        }
    }
    *out = v;
    return v ? HALO_OK : p.st;
}

void pj_free(pj *v) {
    if (!v) return;
    for (size_t i = 0; i < v->n; i++) {
        pj_free(v->items[i]);
        if (v->keys) free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    free(v->key_lens);
    free(v->s);
    free(v);
}

const pj *pj_get(const pj *obj, const char *key) {
    if (!obj || obj->type != PJ_OBJ) return NULL;
    size_t l = strlen(key);
    for (size_t i = 0; i < obj->n; i++)
        if (obj->key_lens[i] == l && !memcmp(obj->keys[i], key, l)) return obj->items[i];
    return NULL;
}

/* ---- Python-style output ------------------------------------------------------------------ */

/* json.dumps string escaping with ensure_ascii=False: only '"', '\\' and C0 controls. */
void pj_dump_py_string(pj_buf *b, const char *s, size_t n) {
    pj_buf_add(b, "\"", 1);
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *esc = NULL;
        char u[8];
        switch (c) {
        case '"':
            esc = "\\\"";
            break;
        case '\\':
            esc = "\\\\";
            break;
        case '\n':
            esc = "\\n";
            break;
        case '\r':
            esc = "\\r";
            break;
        case '\t':
            esc = "\\t";
            break;
        case '\b':
            esc = "\\b";
            break;
        case '\f':
            esc = "\\f";
            break;
        default:
            if (c < 0x20) {
                snprintf(u, sizeof u, "\\u%04x", c);
                esc = u;
            }
        }
        if (!esc) continue;
        pj_buf_add(b, s + run, i - run);
        pj_buf_adds(b, esc);
        run = i + 1;
    }
    pj_buf_add(b, s + run, n - run);
    pj_buf_add(b, "\"", 1);
}

/* repr(float(lexeme)): the shortest digits that round-trip, fixed notation for decimal
 * exponents in [-4, 16), else d.ddde±XX; integral values keep ".0". */
static void dump_float(pj_buf *b, const char *lexeme) {
    double v = strtod(lexeme, NULL);
    if (isnan(v)) {
        pj_buf_adds(b, "NaN");
        return;
    }
    if (isinf(v)) {
        pj_buf_adds(b, v < 0 ? "-Infinity" : "Infinity");
        return;
    }
    char tmp[40];
    int prec = 1;
    for (; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*e", prec - 1, v);
        if (strtod(tmp, NULL) == v) break;
    }
    /* tmp = [-]d[.ddd]e±XX */
    const char *t = tmp;
    bool neg = *t == '-';
    if (neg) t++;
    char digits[24];
    size_t nd = 0;
    for (; *t && *t != 'e'; t++)
        if (*t != '.') digits[nd++] = *t;
    int exp = atoi(t + 1);
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    char out[64];
    size_t o = 0;
    if (neg) out[o++] = '-';
    if (exp >= -4 && exp < 16) {
        if (exp < 0) {
            out[o++] = '0';
            out[o++] = '.';
            for (int i = 0; i < -exp - 1; i++)
                out[o++] = '0';
            memcpy(out + o, digits, nd);
            o += nd;
        } else {
            for (int i = 0; i <= exp; i++)
                out[o++] = (size_t)i < nd ? digits[i] : '0';
            out[o++] = '.';
            if ((size_t)exp + 1 < nd) {
                memcpy(out + o, digits + exp + 1, nd - (size_t)exp - 1);
                o += nd - (size_t)exp - 1;
            } else {
                out[o++] = '0';
            }
        }
        out[o] = 0;
    } else {
        out[o++] = digits[0];
        if (nd > 1) {
            out[o++] = '.';
            memcpy(out + o, digits + 1, nd - 1);
            o += nd - 1;
        }
        snprintf(out + o, sizeof out - o, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    }
    pj_buf_adds(b, out);
}

static void dump_number(pj_buf *b, const pj *v) {
    if (strpbrk(v->s, ".eEIN")) {
        dump_float(b, v->s);
        return;
    }
    if (!strcmp(v->s, "-0"))
        pj_buf_adds(b, "0"); /* int("-0") == 0 */
    else
        pj_buf_add(b, v->s, v->len);
}

void pj_dump_py(pj_buf *b, const pj *v) {
    switch (v->type) {
    case PJ_NULL:
        pj_buf_adds(b, "null");
        break;
    case PJ_TRUE:
        pj_buf_adds(b, "true");
        break;
    case PJ_FALSE:
        pj_buf_adds(b, "false");
        break;
    case PJ_NUM:
        dump_number(b, v);
        break;
    case PJ_STR:
        pj_dump_py_string(b, v->s, v->len);
        break;
    case PJ_ARR:
    case PJ_OBJ:
        pj_buf_adds(b, v->type == PJ_ARR ? "[" : "{");
        for (size_t i = 0; i < v->n; i++) {
            if (i) pj_buf_adds(b, ", ");
            if (v->type == PJ_OBJ) {
                pj_dump_py_string(b, v->keys[i], v->key_lens[i]);
                pj_buf_adds(b, ": ");
            }
            pj_dump_py(b, v->items[i]);
        }
        pj_buf_adds(b, v->type == PJ_ARR ? "]" : "}");
        break;
    }
}
