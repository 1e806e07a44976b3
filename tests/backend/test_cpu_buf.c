/* The CPU backend's buffers: small ones come from the heap, ones from 2 MiB up are mapped
 * (cpu_backend.c). Either way a new buffer reads as zeros everywhere (the forward relies on
 * zeroed session state), holds what is written at its first and last bytes, and frees. */
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu.h"
#include "check.h"

static void buffers_start_zeroed_and_hold_writes(void) {
    halo_backend *be = NULL;
    halo_error err;
    CHECK_INT(halo_backend_cpu_create(1, false, &be, &err), HALO_OK);
    if (!be) return;
    /* below, at and above the mapping threshold; sizes that are not a page multiple */
    static const uint64_t sizes[] = {2, 100, 4096, (2u << 20) - 1, 2u << 20, (3u << 20) + 5,
                                     (64u << 20) + 4097};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        for (int round = 0; round < 2; round++) { /* a freed buffer's memory is not reused dirty */
            halo_buf *b = NULL;
            CHECK_INT(be->ops->buf_alloc(be, sizes[k], &b, &err), HALO_OK);
            if (!b) continue;
            CHECK(b->size == sizes[k]);
            uint64_t nonzero = 0;
            for (uint64_t i = 0; i < sizes[k]; i++) nonzero += b->data[i] != 0;
            CHECK_INT(nonzero, 0);
            CHECK(((uintptr_t)b->data & 63) == 0);
            unsigned char in[2] = {0x5a, 0xa5}, out[2] = {0, 0};
            CHECK_INT(be->ops->buf_write(be, b, 0, in, 1, &err), HALO_OK);
            CHECK_INT(be->ops->buf_write(be, b, sizes[k] - 1, in + 1, 1, &err), HALO_OK);
            CHECK_INT(be->ops->buf_read(be, b, 0, out, 1, &err), HALO_OK);
            CHECK_INT(be->ops->buf_read(be, b, sizes[k] - 1, out + 1, 1, &err), HALO_OK);
            CHECK_INT(out[0], 0x5a);
            CHECK_INT(out[1], 0xa5);
            memset(b->data, 0xff, (size_t)sizes[k]); /* dirty it for the next round */
            be->ops->buf_free(be, b);
        }
    }
    be->ops->destroy(be);
}

int main(void) {
    RUN(buffers_start_zeroed_and_hold_writes);
    return check_report();
}
