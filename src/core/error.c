#include "core/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *halo_status_name(halo_status status) {
    switch (status) {
    case HALO_OK: return "ok";
    case HALO_E_INVALID_ARG: return "invalid-argument";
    case HALO_E_NOMEM: return "out-of-memory";
    case HALO_E_IO: return "io";
    case HALO_E_BAD_MAGIC: return "bad-magic";
    case HALO_E_BAD_VERSION: return "bad-version";
    case HALO_E_TRUNCATED: return "truncated";
    case HALO_E_OVERFLOW: return "overflow";
    case HALO_E_BAD_VALUE: return "bad-value";
    case HALO_E_UNKNOWN_TYPE: return "unknown-type";
    case HALO_E_DUPLICATE: return "duplicate";
    case HALO_E_OUT_OF_BOUNDS: return "out-of-bounds";
    case HALO_E_MISALIGNED: return "misaligned";
    case HALO_E_OVERLAP: return "overlap";
    case HALO_E_NOT_FOUND: return "not-found";
    case HALO_E_TYPE_MISMATCH: return "type-mismatch";
    case HALO_E_SHARDS: return "shards";
    case HALO_E_UNSUPPORTED: return "unsupported";
    }
    return "unknown-status";
}

halo_status halo_failv(halo_error *err, halo_status status, const char *fmt, va_list ap) {
    if (err) {
        err->status = status;
        vsnprintf(err->message, sizeof err->message, fmt, ap);
    }
    return status;
}

halo_status halo_fail(halo_error *err, halo_status status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    halo_failv(err, status, fmt, ap);
    va_end(ap);
    return status;
}

halo_status halo_error_prefix(halo_error *err, const char *fmt, ...) {
    if (!err) return HALO_OK;
    char prefix[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    /* Join by hand: snprintf into a same-size buffer trips -Wformat-truncation. */
    char joined[sizeof err->message];
    size_t plen = strlen(prefix), cap = sizeof joined - 1;
    if (plen > cap) plen = cap;
    memcpy(joined, prefix, plen);
    size_t mlen = strnlen(err->message, sizeof err->message - 1);
    if (mlen > cap - plen) mlen = cap - plen;
    memcpy(joined + plen, err->message, mlen);
    joined[plen + mlen] = 0;
    memcpy(err->message, joined, plen + mlen + 1);
    return err->status;
}
