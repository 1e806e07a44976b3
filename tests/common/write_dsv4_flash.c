/* Writes DeepSeek V4 Flash's real tensor table as a sparse GGUF (no weight bytes on disk), for
 * `make demo` and for trying tools on a full-size file. usage: write_dsv4_flash OUT.gguf [q2|llama|q2-q4k|iq3] (q2-q4k, iq3: the size
 * variants in dsv4_flash.h) */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "common/dsv4_flash.h"

int main(int argc, char **argv) {
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: %s OUT.gguf [q2|llama|q2-q4k|iq3]\n", argv[0]);
        return 2;
    }
    dsv4_mix mix = argc == 3 && !strcmp(argv[2], "llama") ? DSV4_MIX_LLAMA_CPP : DSV4_MIX_DS4_Q2;
    halo_gguf_writer *w = halo_gguf_writer_create();
    halo_error err = {0};
    const char *name = argc == 3 ? argv[2] : "q2";
    bool variant = !strcmp(name, "q2-q4k") || !strcmp(name, "iq3");
    dsv4_variant v = !strcmp(name, "iq3") ? DSV4_VARIANT_IQ3_XXS : DSV4_VARIANT_Q2_Q4K_L37_42;
    halo_status st = !w        ? HALO_E_NOMEM
                     : variant ? dsv4_flash_add_variant_to_writer(w, v, &err)
                               : dsv4_flash_add_to_writer(w, mix, &err);
    if (!st) st = halo_gguf_writer_write_file(w, argv[1], &err);
    halo_gguf_writer_free(w);
    if (st) {
        fprintf(stderr, "write_dsv4_flash: %s\n", err.message);
        return 1;
    }
    return 0;
}
