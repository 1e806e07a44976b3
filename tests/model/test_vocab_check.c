/* The tokenizer data of a model file is validated before the tokenizer is built: a merge naming
 * a missing token, a special token id outside the vocabulary, an empty, non-UTF-8 or
 * non-byte-level token and an unknown token type are each refused with an error naming the key,
 * the entry and the value. Each case copies the embedded model's tokenizer metadata
 * (models/kjv-tiny.gguf: 4096 tokens, 3830 merges, BOS 0, EOS 1, padding 2) with one value
 * changed. */
#include <stdlib.h>

#include "check.h"
#include "halo/gguf.h"
#include "halo/text.h"

#define MODEL "models/kjv-tiny.gguf"

static halo_gguf *base;

typedef struct edit {
    const char *key;
    int64_t index;   /* string arrays: the entry replaced by str; -1: a scalar */
    const char *str; /* new string entry */
    int64_t value;   /* new scalar value, or new token_type entry */
    int as_i32;      /* write the scalar as i32 instead of u32 */
} edit;

static void copy_kv(halo_gguf_writer *w, const halo_gguf_kv *kv, const edit *e) {
    const char *k = kv->key.data;
    bool hit = e && !strcmp(k, e->key);
    switch (kv->type) {
    case HALO_GGUF_U32:
        if (hit && e->as_i32)
            halo_gguf_writer_set_i32(w, k, (int32_t)e->value);
        else
            halo_gguf_writer_set_u32(w, k, hit ? (uint32_t)e->value : kv->v.u32);
        break;
    case HALO_GGUF_BOOL:
        halo_gguf_writer_set_bool(w, k, kv->v.b);
        break;
    case HALO_GGUF_STRING:
        halo_gguf_writer_set_str(w, k, kv->v.str.data);
        break;
    case HALO_GGUF_ARRAY:
        if (kv->elem_type == HALO_GGUF_STRING) {
            const halo_gguf_str *s = kv->v.array;
            const char **list = malloc(kv->count * sizeof *list);
            for (uint64_t i = 0; i < kv->count; i++)
                list[i] = s[i].data;
            if (hit) list[e->index] = e->str;
            halo_gguf_writer_set_str_array(w, k, list, kv->count);
            free(list);
        } else if (hit && kv->elem_type == HALO_GGUF_I32) {
            int32_t *v = malloc(kv->count * sizeof *v);
            memcpy(v, kv->v.array, kv->count * sizeof *v);
            v[e->index] = (int32_t)e->value;
            halo_gguf_writer_set_array(w, k, kv->elem_type, v, kv->count);
            free(v);
        } else {
            halo_gguf_writer_set_array(w, k, kv->elem_type, kv->v.array, kv->count);
        }
        break;
    default:
        break; /* the tokenizer reads none of the other types */
    }
}

/* Loads a tokenizer from the base model's tokenizer.* keys with e applied (NULL: unchanged). */
static halo_status load(const edit *e, halo_error *err) {
    halo_gguf_writer *w = halo_gguf_writer_create();
    for (uint64_t i = 0; i < halo_gguf_kv_count(base); i++) {
        const halo_gguf_kv *kv = halo_gguf_kv_at(base, i);
        if (!strncmp(kv->key.data, "tokenizer.", 10)) copy_kv(w, kv, e);
    }
    void *img = NULL;
    size_t size = 0;
    CHECK_INT(halo_gguf_writer_write_memory(w, &img, &size, err), HALO_OK);
    halo_gguf_writer_free(w);
    halo_gguf *g = NULL;
    CHECK_INT(halo_gguf_open_memory(img, size, &g, err), HALO_OK);
    halo_tokenizer *t = NULL;
    halo_status st = halo_tokenizer_load(g, &t, err);
    halo_tokenizer_free(t);
    halo_gguf_close(g);
    free(img);
    return st;
}

static void expect(edit e, const char *fragment) {
    halo_error err = {0};
    CHECK_INT(load(&e, &err), HALO_E_BAD_VALUE);
    CHECK_CONTAINS(err.message, fragment);
}

static void unedited_tokenizer_loads(void) {
    halo_error err = {0};
    CHECK_INT(load(NULL, &err), HALO_OK);
}

static void dangling_merges_are_refused(void) {
    expect((edit){"tokenizer.ggml.merges", 5, "zzqqzz t", 0, 0},
           "tokenizer.ggml.merges[5]: \"zzqqzz t\" names a token missing from "
           "tokenizer.ggml.tokens");
    expect((edit){"tokenizer.ggml.merges", 3829, "t", 0, 0},
           "tokenizer.ggml.merges[3829]: \"t\" is not two tokens separated by a space");
}

static void special_ids_outside_the_vocabulary_are_refused(void) {
    expect((edit){"tokenizer.ggml.bos_token_id", -1, NULL, 4096, 0},
           "tokenizer.ggml.bos_token_id = 4096: outside the vocabulary of 4096 tokens");
    expect((edit){"tokenizer.ggml.eos_token_id", -1, NULL, 0xffffffff, 0},
           "tokenizer.ggml.eos_token_id = 4294967295: outside the vocabulary");
    expect((edit){"tokenizer.ggml.padding_token_id", -1, NULL, 70000, 0},
           "tokenizer.ggml.padding_token_id = 70000");
    expect((edit){"tokenizer.ggml.bos_token_id", -1, NULL, -1, 1},
           "tokenizer.ggml.bos_token_id is not a token id");
}

static void bad_tokens_are_refused(void) {
    expect((edit){"tokenizer.ggml.tokens", 300, "", 0, 0}, "tokenizer.ggml.tokens[300] is empty");
    expect((edit){"tokenizer.ggml.tokens", 301, "ab\xff", 0, 0},
           "tokenizer.ggml.tokens[301] is not valid UTF-8");
    expect((edit){"tokenizer.ggml.tokens", 302, "\xe2\x82\xac", 0, 0},
           "tokenizer.ggml.tokens[302] \"\xe2\x82\xac\" is a normal token with a character "
           "outside the byte-level alphabet");
    expect((edit){"tokenizer.ggml.token_type", 7, NULL, 9, 0},
           "tokenizer.ggml.token_type[7] = 9: token types are 0 to 6");
}

int main(void) {
    halo_error err;
    if (halo_gguf_open(MODEL, &base, &err)) {
        fprintf(stderr, "%s\n", err.message);
        return 1;
    }
    RUN(unedited_tokenizer_loads);
    RUN(dangling_merges_are_refused);
    RUN(special_ids_outside_the_vocabulary_are_refused);
    RUN(bad_tokens_are_refused);
    halo_gguf_close(base);
    return check_report();
}
