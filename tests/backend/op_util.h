/* Small helpers shared by the CPU op tests: a reproducible random stream and a tensor in a
 * backend buffer, optionally filled. Include after check.h. */
#ifndef HALO_TESTS_BACKEND_OP_UTIL_H
#define HALO_TESTS_BACKEND_OP_UTIL_H

#include "backend/backend.h"
#include "check.h"

/* Uniform in [-1, 1), from an LCG state. */
static inline float frand(uint32_t *s) {
    *s = *s * 1664525u + 1013904223u;
    return (float)(*s >> 8) / 16777216.0f * 2.0f - 1.0f;
}

static inline halo_tensor make(halo_backend *be, uint32_t type, int64_t ne0, int64_t ne1,
                               int64_t ne2, const void *data) {
    halo_tensor t = {.type = type, .ne = {ne0, ne1, ne2, 1}};
    halo_error err;
    CHECK_INT(be->ops->buf_alloc(be, halo_tensor_nbytes(&t), &t.buf, &err), HALO_OK);
    if (data) CHECK_INT(be->ops->buf_write(be, t.buf, 0, data, halo_tensor_nbytes(&t), &err), 0);
    return t;
}

#endif
