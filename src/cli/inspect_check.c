/* `halo inspect --check FILE`: tells a corrupted or hostile model file from a good one by
 * reading all of it. For every tensor: its data reads back, no block scale (f16, f32 or e8m0)
 * or float element is NaN or infinite, the type is one halo can decode, and index tensors (the
 * hash-routing tables) hold expert ids in range with no expert repeated in a row. For the model
 * as a whole (deepseek4 files): the hyperparameters, the weights' names and shapes and the
 * tokenizer data pass the checks halo applies when it opens a model. Tensors are read in chunks,
 * so an 81 GiB model needs a chunk of memory (plus one routing table), not the model's size. */
#include "cli/inspect_check.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "halo/quant.h"
#include "halo/text.h"
#include "model/hparams.h"
#include "model/validate.h"
#include "model/weights.h"

#define CHUNK (16u << 20)
#define MAX_TABLE_BYTES (1ull << 30)

typedef struct checker {
    const halo_gguf *g;
    bool json;
    cJSON *problems; /* --json: the list being built */
    uint64_t n_problems, bytes_read;
    bool have_hp;
    halo_hparams hp;
    FILE **shards;
    uint8_t *buf;
} checker;

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static void
report(checker *c, const char *tensor, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    c->n_problems++;
    if (c->json) {
        cJSON *o = cJSON_CreateObject();
        if (tensor)
            cJSON_AddStringToObject(o, "tensor", tensor);
        else
            cJSON_AddNullToObject(o, "tensor");
        cJSON_AddStringToObject(o, "problem", msg);
        cJSON_AddItemToArray(c->problems, o);
    } else {
        printf("%s: %s\n", tensor ? tensor : "model", msg);
    }
}

/* ---- the model as a whole ----------------------------------------------------------------- */

static void check_model(checker *c) {
    const halo_gguf_kv *arch = halo_gguf_find_kv(c->g, "general.architecture");
    halo_error err;
    /* A file without tensors is a vocabulary-only GGUF (as llama.cpp's ggml-vocab-*.gguf):
     * only its tokenizer is checked. */
    if (arch && arch->type == HALO_GGUF_STRING && !strcmp(arch->v.str.data, "deepseek4") &&
        halo_gguf_tensor_count(c->g) > 0) {
        if (halo_hparams_load(c->g, &c->hp, &err)) {
            report(c, NULL, "%s", err.message);
        } else {
            c->have_hp = true;
            halo_weights *w = malloc(sizeof *w);
            if (!w)
                report(c, NULL, "out of memory");
            else if (halo_weights_bind(c->g, &c->hp, w, &err))
                report(c, NULL, "%s", err.message);
            free(w);
        }
    }
    const halo_gguf_kv *model = halo_gguf_find_kv(c->g, "tokenizer.ggml.model");
    if (model && model->type == HALO_GGUF_STRING && !strcmp(model->v.str.data, "gpt2")) {
        halo_tokenizer *t = NULL;
        if (halo_tokenizer_load(c->g, &t, &err)) report(c, NULL, "%s", err.message);
        halo_tokenizer_free(t);
    }
}

/* ---- tensor data -------------------------------------------------------------------------- */

static bool read_at(checker *c, const halo_gguf_tensor *t, uint64_t at, void *dst, size_t n) {
    FILE *f = c->shards[t->shard];
    if (!f || fseeko(f, (off_t)(t->file_offset + at), SEEK_SET) || fread(dst, 1, n, f) != n) {
        report(c, t->name, "cannot read %zu bytes at file offset %" PRIu64 " (shard %u)", n,
               t->file_offset + at, t->shard);
        return false;
    }
    c->bytes_read += n;
    return true;
}

/* Counts the bad blocks (or float elements) of one chunk that failed validation as a whole. */
static void count_bad(uint32_t type, const halo_type_info *info, const uint8_t *p, size_t n,
                      uint64_t first_block, uint64_t *bad, uint64_t *first_bad) {
    for (size_t off = 0; off + info->block_bytes <= n; off += info->block_bytes)
        if (halo_quant_validate(type, p + off, info->block_bytes, NULL)) {
            if (!*bad) *first_bad = first_block + off / info->block_bytes;
            (*bad)++;
        }
}

static void check_values(checker *c, const halo_gguf_tensor *t, const halo_type_info *info) {
    uint64_t n_blocks = t->n_bytes / info->block_bytes, bad = 0, first_bad = 0;
    size_t chunk = CHUNK / info->block_bytes * info->block_bytes;
    for (uint64_t at = 0; at < t->n_bytes; at += chunk) {
        size_t n = t->n_bytes - at < chunk ? (size_t)(t->n_bytes - at) : chunk;
        if (!read_at(c, t, at, c->buf, n)) return;
        if (halo_quant_validate(t->type, c->buf, n, NULL))
            count_bad(t->type, info, c->buf, n, at / info->block_bytes, &bad, &first_bad);
    }
    if (!bad) return;
    if (info->quantized)
        report(c, t->name,
               "%" PRIu64 " of %" PRIu64 " %s blocks have a NaN or infinite scale; first: block "
               "%" PRIu64 " (elements %" PRIu64 "..%" PRIu64 ")",
               bad, n_blocks, info->name, first_bad, first_bad * info->block_size,
               (first_bad + 1) * info->block_size - 1);
    else
        report(c, t->name,
               "%" PRIu64 " of %" PRIu64 " %s values are NaN or infinite; first: element %" PRIu64,
               bad, n_blocks, info->name, first_bad);
}

/* Hash-routing tables: i32 [n_used, n_vocab], each row the experts of one token id. */
static void check_ids(checker *c, const halo_gguf_tensor *t) {
    if (!c->have_hp) {
        report(c, t->name, "expert ids not checked: the metadata above is unusable");
        return;
    }
    if (t->n_dims != 2 || t->n_bytes > MAX_TABLE_BYTES) {
        report(c, t->name, "a routing table is a 2-D i32 table of at most 1 GiB");
        return;
    }
    int32_t *ids = malloc(t->n_bytes ? t->n_bytes : 1);
    if (!ids) {
        report(c, t->name, "out of memory for %" PRIu64 " bytes", t->n_bytes);
        return;
    }
    halo_ids_scan s;
    if (read_at(c, t, 0, ids, t->n_bytes)) {
        if (!halo_tid2eid_scan(ids, t->ne[0], t->ne[1], c->hp.n_expert, &s))
            report(c, t->name, "out of memory");
        else if (s.bad_ids || s.dup_rows)
            report(c, t->name,
                   "%" PRIu64 " expert ids outside 0..%u and %" PRIu64 " of %" PRId64
                   " rows naming an expert twice; first: row %" PRId64 " (token %" PRId64
                   ") entry %" PRId64 " = %d%s",
                   s.bad_ids, c->hp.n_expert - 1, s.dup_rows, t->ne[1], s.first_row, s.first_row,
                   s.first_entry, s.first_value, s.first_dup ? " (repeated)" : " (out of range)");
    }
    free(ids);
}

static void check_tensor(checker *c, const halo_gguf_tensor *t) {
    const halo_type_info *info = halo_type_info_get(t->type);
    if (!info) {
        report(c, t->name, "unknown type %u: its blocks cannot be decoded", t->type);
        return;
    }
    if (t->type == HALO_TYPE_I32 && strstr(t->name, "tid2eid")) {
        check_ids(c, t);
        return;
    }
    if (t->type != HALO_TYPE_I32 && !halo_quant_supported(t->type))
        report(c, t->name, "type %s: halo cannot decode its blocks", info->name);
    else
        check_values(c, t, info);
}

int cli_inspect_check(const halo_gguf *g, bool json) {
    checker c = {.g = g, .json = json};
    uint32_t n_shards = halo_gguf_shard_count(g);
    c.shards = calloc(n_shards, sizeof *c.shards);
    c.buf = malloc(CHUNK);
    if (json) c.problems = cJSON_CreateArray();
    if (!c.shards || !c.buf || (json && !c.problems)) {
        fprintf(stderr, "halo inspect: out of memory\n");
        free(c.shards);
        free(c.buf);
        cJSON_Delete(c.problems);
        return 1;
    }
    for (uint32_t s = 0; s < n_shards; s++)
        c.shards[s] = fopen(halo_gguf_shard_path(g, s), "rb");
    check_model(&c);
    uint64_t n = halo_gguf_tensor_count(g), model_problems = c.n_problems, bad_tensors = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t before = c.n_problems;
        check_tensor(&c, halo_gguf_tensor_at(g, i));
        bad_tensors += c.n_problems > before;
    }
    for (uint32_t s = 0; s < n_shards; s++)
        if (c.shards[s]) fclose(c.shards[s]);
    free(c.shards);
    free(c.buf);

    const char *path = halo_gguf_shard_path(g, 0);
    char size[32];
    if (json) {
        cJSON *root = cJSON_CreateObject();
        cJSON_AddStringToObject(root, "file", path);
        cJSON_AddBoolToObject(root, "ok", c.n_problems == 0);
        cJSON_AddNumberToObject(root, "tensors_checked", (double)n);
        cJSON_AddNumberToObject(root, "tensors_with_problems", (double)bad_tensors);
        cJSON_AddNumberToObject(root, "model_problems", (double)model_problems);
        cJSON_AddNumberToObject(root, "bytes_read", (double)c.bytes_read);
        cJSON_AddItemToObject(root, "problems", c.problems);
        char *text = cJSON_Print(root);
        cJSON_Delete(root);
        if (text) puts(text);
        free(text);
    } else if (c.n_problems) {
        printf("%s: %" PRIu64 " tensors checked (%s read): %" PRIu64 " with problems, %" PRIu64
               " model problems\n",
               path, n, cli_bytes(c.bytes_read, size, sizeof size), bad_tensors, model_problems);
    } else {
        printf("%s: %" PRIu64 " tensors checked (%s read): no problems found\n", path, n,
               cli_bytes(c.bytes_read, size, sizeof size));
    }
    return c.n_problems ? 1 : 0;
}
