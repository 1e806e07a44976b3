/* A small JSON reader that keeps number lexemes, and a writer that prints values exactly as
 * Python's json.dumps(ensure_ascii=False) does. The chat templates serialise tool schemas and
 * tool-call arguments with `tojson`; matching that byte for byte needs "100.0" to stay a float
 * and 12345678901234567890 to stay exact, which a parser that turns numbers into doubles (cJSON)
 * cannot give back. Used only by the chat encoding. */
#ifndef HALO_TEXT_JSON_H
#define HALO_TEXT_JSON_H

#include <stdbool.h>
#include <stddef.h>

#include "halo/status.h"

typedef enum pj_type { PJ_NULL, PJ_FALSE, PJ_TRUE, PJ_NUM, PJ_STR, PJ_ARR, PJ_OBJ } pj_type;

typedef struct pj {
    pj_type type;
    char *s; /* PJ_STR: decoded UTF-8 (NUL-terminated, may hold NULs); PJ_NUM: the lexeme */
    size_t len;
    struct pj **items; /* PJ_ARR / PJ_OBJ values, in order */
    char **keys;       /* PJ_OBJ keys (decoded, NUL-terminated) */
    size_t *key_lens;
    size_t n;
} pj;

/* Parses one JSON value filling the whole text (whitespace around it allowed). Duplicate object
 * keys keep their first position and the last value, as a Python dict does. */
halo_status pj_parse(const char *text, size_t len, pj **out, halo_error *err);
void pj_free(pj *v);
const pj *pj_get(const pj *obj, const char *key); /* NULL when absent or not an object */

/* A growable byte buffer; `oom` latches the first allocation failure. */
typedef struct pj_buf {
    char *p;
    size_t n, cap;
    bool oom;
} pj_buf;

void pj_buf_add(pj_buf *b, const char *s, size_t n);
void pj_buf_adds(pj_buf *b, const char *s);
/* Appends json.dumps(v, ensure_ascii=False). */
void pj_dump_py(pj_buf *b, const pj *v);
/* Appends json.dumps of a string of n bytes. */
void pj_dump_py_string(pj_buf *b, const char *s, size_t n);

#endif
