/* Internal helpers for filling halo_error values. */
#ifndef HALO_CORE_ERROR_H
#define HALO_CORE_ERROR_H

#include <stdarg.h>

#include "halo/status.h"

#if defined(__GNUC__)
#define HALO_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define HALO_PRINTF(a, b)
#endif

/* Sets err (which may be NULL) and returns status, so callers can `return halo_fail(...)`. */
halo_status halo_fail(halo_error *err, halo_status status, const char *fmt, ...) HALO_PRINTF(3, 4);

halo_status halo_failv(halo_error *err, halo_status status, const char *fmt, va_list ap);

/* Prefixes err's message with context ("file.gguf: "), keeping its status. */
halo_status halo_error_prefix(halo_error *err, const char *fmt, ...) HALO_PRINTF(2, 3);

#endif
