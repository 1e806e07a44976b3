/* A growable byte buffer for response bodies and SSE frames. Out of memory sets oom and makes
 * every later append a no-op, so callers check once at the end. */
#ifndef HALO_SERVE_SBUF_H
#define HALO_SERVE_SBUF_H

#include <stdbool.h>
#include <stddef.h>

#include "core/error.h"

typedef struct sbuf {
    char *p;
    size_t n, cap;
    bool oom;
} sbuf;

void sbuf_add(sbuf *b, const void *data, size_t n);
void sbuf_adds(sbuf *b, const char *s);
void sbuf_printf(sbuf *b, const char *fmt, ...) HALO_PRINTF(2, 3);
/* Removes the first n bytes. */
void sbuf_consume(sbuf *b, size_t n);
void sbuf_free(sbuf *b);

#endif
