/* A fixture for the text front-end tests (test_run.c, test_chat.c): the golden tiny-a model
 * (random weights, vocabulary 256, no tokenizer) copied with a 256-token byte-level BPE
 * tokenizer added to its metadata, so `halo run` and `halo chat` have text in and text out
 * before a trained model with a real vocabulary exists.
 *
 * Vocabulary: 0 BOS, 1 EOS, 2 <｜User｜>, 3 <｜Assistant｜> (control), 4 <think>, 5 </think>
 * (user-defined), 6..250 the bytes 0x00-0xF4 (0xF5-0xFF never occur in UTF-8), 251..255 five
 * merges (" t", "he", " the", "in", " a"). */
#ifndef HALO_TESTS_CLI_TEST_CHAT_H
#define HALO_TESTS_CLI_TEST_CHAT_H

#include <stdlib.h>
#include <string.h>

#include "halo/gguf.h"
#include "halo/text.h"

#define FIXTURE_SRC "tests/golden/models/tiny-a-f32.gguf"

static inline void fixture_byte_level(unsigned b, char *out) {
    /* GPT-2 bytes_to_unicode, as UTF-8 */
    unsigned cp = b;
    if (!((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174)) {
        unsigned n = 0;
        for (unsigned x = 0; x < b; x++)
            if (!((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || x >= 174)) n++;
        cp = 256 + n;
    }
    if (cp < 0x80) {
        out[0] = (char)cp;
        out[1] = 0;
    } else {
        out[0] = (char)(0xC0 | cp >> 6);
        out[1] = (char)(0x80 | (cp & 0x3F));
        out[2] = 0;
    }
}

static inline halo_status fixture_copy_kv(halo_gguf_writer *w, const halo_gguf_kv *kv) {
    const char *k = kv->key.data;
    switch (kv->type) {
    case HALO_GGUF_U8:
        return halo_gguf_writer_set_u8(w, k, kv->v.u8);
    case HALO_GGUF_I8:
        return halo_gguf_writer_set_i8(w, k, kv->v.i8);
    case HALO_GGUF_U16:
        return halo_gguf_writer_set_u16(w, k, kv->v.u16);
    case HALO_GGUF_I16:
        return halo_gguf_writer_set_i16(w, k, kv->v.i16);
    case HALO_GGUF_U32:
        return halo_gguf_writer_set_u32(w, k, kv->v.u32);
    case HALO_GGUF_I32:
        return halo_gguf_writer_set_i32(w, k, kv->v.i32);
    case HALO_GGUF_F32:
        return halo_gguf_writer_set_f32(w, k, kv->v.f32);
    case HALO_GGUF_BOOL:
        return halo_gguf_writer_set_bool(w, k, kv->v.b);
    case HALO_GGUF_U64:
        return halo_gguf_writer_set_u64(w, k, kv->v.u64);
    case HALO_GGUF_I64:
        return halo_gguf_writer_set_i64(w, k, kv->v.i64);
    case HALO_GGUF_F64:
        return halo_gguf_writer_set_f64(w, k, kv->v.f64);
    case HALO_GGUF_STRING:
        return halo_gguf_writer_set_str(w, k, kv->v.str.data);
    case HALO_GGUF_ARRAY:
        if (kv->elem_type == HALO_GGUF_STRING) {
            const halo_gguf_str *s = kv->v.array;
            const char **v = malloc(sizeof *v * (kv->count + 1));
            for (uint64_t i = 0; i < kv->count; i++)
                v[i] = s[i].data;
            halo_status st = halo_gguf_writer_set_str_array(w, k, v, kv->count);
            free(v);
            return st;
        }
        return halo_gguf_writer_set_array(w, k, kv->elem_type, kv->v.array, kv->count);
    default:
        return HALO_E_UNSUPPORTED;
    }
}

/* Writes the fixture to dst; returns 0 on success. */
static inline int fixture_write(const char *dst) {
    halo_gguf *g = NULL;
    halo_error err;
    if (halo_gguf_open(FIXTURE_SRC, &g, &err)) {
        fprintf(stderr, "%s\n", err.message);
        return 1;
    }
    halo_gguf_writer *w = halo_gguf_writer_create();
    halo_gguf_writer_set_alignment(w, halo_gguf_alignment(g));
    for (uint64_t i = 0; i < halo_gguf_kv_count(g); i++) {
        const halo_gguf_kv *kv = halo_gguf_kv_at(g, i);
        if (!strncmp(kv->key.data, "tokenizer.", 10) || !strcmp(kv->key.data, "general.alignment"))
            continue;
        fixture_copy_kv(w, kv);
    }
    static const char *const specials[] = {HALO_CHAT_BOS,        HALO_CHAT_EOS,
                                           HALO_CHAT_USER_TAG,   HALO_CHAT_ASSISTANT_TAG,
                                           HALO_CHAT_THINK_OPEN, HALO_CHAT_THINK_CLOSE};
    static const char *const merged[] = {"\xc4\xa0t", "he", "\xc4\xa0the", "in",
                                         "\xc4\xa0"
                                         "a"};
    static const char *const merges[] = {"\xc4\xa0 t", "h e", "\xc4\xa0t he", "i n", "\xc4\xa0 a"};
    char bytes[245][4];
    const char *tokens[256];
    int32_t types[256];
    for (int i = 0; i < 6; i++) {
        tokens[i] = specials[i];
        types[i] = i < 4 ? HALO_TOKEN_CONTROL : HALO_TOKEN_USER_DEFINED;
    }
    for (unsigned b = 0; b < 245; b++) {
        fixture_byte_level(b, bytes[b]);
        tokens[6 + b] = bytes[b];
        types[6 + b] = HALO_TOKEN_NORMAL;
    }
    for (int i = 0; i < 5; i++) {
        tokens[251 + i] = merged[i];
        types[251 + i] = HALO_TOKEN_NORMAL;
    }
    halo_gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2");
    halo_gguf_writer_set_str(w, "tokenizer.ggml.pre", "deepseek-v3");
    halo_gguf_writer_set_str_array(w, "tokenizer.ggml.tokens", tokens, 256);
    halo_gguf_writer_set_array(w, "tokenizer.ggml.token_type", HALO_GGUF_I32, types, 256);
    halo_gguf_writer_set_str_array(w, "tokenizer.ggml.merges", merges, 5);
    halo_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 0);
    halo_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 1);
    halo_gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", true);
    void **data = calloc(halo_gguf_tensor_count(g) + 1, sizeof *data);
    for (uint64_t i = 0; i < halo_gguf_tensor_count(g); i++) {
        const halo_gguf_tensor *t = halo_gguf_tensor_at(g, i);
        data[i] = malloc(t->n_bytes ? t->n_bytes : 1);
        halo_gguf_read_tensor(g, t, data[i], t->n_bytes, &err);
        halo_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, data[i]);
    }
    int rc = 0;
    const halo_error *we = halo_gguf_writer_error(w);
    if (we && we->status) {
        fprintf(stderr, "fixture: %s\n", we->message);
        rc = 1;
    } else if (halo_gguf_writer_write_file(w, dst, &err)) {
        fprintf(stderr, "fixture: %s\n", err.message);
        rc = 1;
    }
    for (uint64_t i = 0; i < halo_gguf_tensor_count(g); i++)
        free(data[i]);
    free(data);
    halo_gguf_writer_free(w);
    halo_gguf_close(g);
    return rc;
}

#endif
