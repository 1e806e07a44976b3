/* libFuzzer target for the GGUF reader: any byte string must either open (and then every
 * accessor must work on it) or be refused with an error; never crash, leak or read out of
 * bounds. Built with clang -fsanitize=fuzzer by `make fuzz`; CI replays the committed corpus
 * through replay_main.c under ASan/UBSan. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "halo/gguf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    halo_gguf *g = NULL;
    halo_error err;
    if (halo_gguf_open_memory(data, size, &g, &err) != HALO_OK) {
        /* The message must be a terminated string. */
        volatile size_t n = strlen(err.message);
        (void)n;
        return 0;
    }
    uint64_t sum = 0;
    for (uint64_t i = 0; i < halo_gguf_kv_count(g); i++) {
        const halo_gguf_kv *kv = halo_gguf_kv_at(g, i);
        sum += kv->key.len;
        if (halo_gguf_find_kv(g, kv->key.data) == NULL) __builtin_trap();
        uint64_t u;
        double f;
        const char *s;
        halo_gguf_get_u64(g, kv->key.data, &u, NULL);
        halo_gguf_get_f64(g, kv->key.data, &f, NULL);
        halo_gguf_get_str(g, kv->key.data, &s, NULL);
        if (kv->type == HALO_GGUF_ARRAY && kv->count > 0) {
            halo_gguf_array_u64(kv, kv->count - 1, &u, NULL);
            halo_gguf_array_f64(kv, 0, &f, NULL);
        }
    }
    unsigned char buf[4096];
    for (uint64_t i = 0; i < halo_gguf_tensor_count(g); i++) {
        const halo_gguf_tensor *t = halo_gguf_tensor_at(g, i);
        if (halo_gguf_find_tensor(g, t->name) != t) __builtin_trap();
        if (t->file_offset + t->n_bytes > size) __builtin_trap();
        if (t->n_bytes <= sizeof buf) halo_gguf_read_tensor(g, t, buf, sizeof buf, NULL);
        sum += t->n_bytes;
    }
    halo_gguf_close(g);
    return (int)(sum & 0);
}
