/* `halo inspect FILE [--json] [--tensors] [--check]`: what a GGUF holds, without reading tensor
 * data (--check reads all of it: inspect_check.c).
 * Architecture and its hyperparameters (every `<arch>.*` key), tensor count, bytes by type,
 * bytes per layer, the largest tensors and a per-shard summary. */
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/inspect_check.h"
#include "halo/gguf.h"

enum { TOP_TENSORS = 10, ARRAY_PREVIEW = 8, JSON_ARRAY_MAX = 256 };

typedef struct layer_bytes {
    int64_t layer; /* -1: tensors outside blk.N (embeddings, output head, ...) */
    uint64_t bytes, tensors;
} layer_bytes;

typedef struct summary {
    const char *arch;
    uint64_t total_bytes;
    uint64_t type_bytes[HALO_TYPE_ID_LIMIT], type_tensors[HALO_TYPE_ID_LIMIT];
    layer_bytes *layers; /* index 0: non-layer; i+1: blk.i */
    int64_t n_layers;
    uint64_t *by_size;   /* tensor indices, largest first */
    uint64_t *shard_tensors, *shard_bytes; /* per shard */
} summary;

const char *cli_bytes(uint64_t bytes, char *buf, unsigned size) {
    static const char *units[] = {"KiB", "MiB", "GiB", "TiB"};
    if (bytes < 1024) {
        snprintf(buf, size, "%" PRIu64 " B", bytes);
        return buf;
    }
    double v = (double)bytes / 1024;
    int u = 0;
    while (v >= 1024 && u < 3) {
        v /= 1024;
        u++;
    }
    snprintf(buf, size, "%.2f %s", v, units[u]);
    return buf;
}

/* Layer number of a `blk.N.` tensor name, or -1. */
static int64_t layer_of(const char *name) {
    if (strncmp(name, "blk.", 4) != 0) return -1;
    char *end;
    long long n = strtoll(name + 4, &end, 10);
    return (end != name + 4 && *end == '.' && n >= 0 && n < (1 << 20)) ? n : -1;
}

static const halo_gguf *sort_model;
static int by_size_desc(const void *a, const void *b) {
    uint64_t x = halo_gguf_tensor_at(sort_model, *(const uint64_t *)a)->n_bytes;
    uint64_t y = halo_gguf_tensor_at(sort_model, *(const uint64_t *)b)->n_bytes;
    return x < y ? 1 : x > y ? -1 : 0;
}

static int summarize(const halo_gguf *g, summary *s) {
    memset(s, 0, sizeof *s);
    const halo_gguf_kv *kv = halo_gguf_find_kv(g, "general.architecture");
    s->arch = kv && kv->type == HALO_GGUF_STRING ? kv->v.str.data : NULL;
    uint64_t n = halo_gguf_tensor_count(g);
    for (uint64_t i = 0; i < n; i++) {
        int64_t l = layer_of(halo_gguf_tensor_at(g, i)->name);
        if (l + 1 > s->n_layers) s->n_layers = l + 1;
    }
    s->layers = calloc((size_t)s->n_layers + 1, sizeof *s->layers);
    s->by_size = malloc((n ? n : 1) * sizeof *s->by_size);
    s->shard_tensors = calloc(halo_gguf_shard_count(g), sizeof *s->shard_tensors);
    s->shard_bytes = calloc(halo_gguf_shard_count(g), sizeof *s->shard_bytes);
    if (!s->layers || !s->by_size || !s->shard_tensors || !s->shard_bytes) return -1;
    for (int64_t l = 0; l <= s->n_layers; l++) s->layers[l].layer = l - 1;
    for (uint64_t i = 0; i < n; i++) {
        const halo_gguf_tensor *t = halo_gguf_tensor_at(g, i);
        s->total_bytes += t->n_bytes;
        s->type_bytes[t->type] += t->n_bytes;
        s->type_tensors[t->type]++;
        layer_bytes *lb = &s->layers[layer_of(t->name) + 1];
        lb->bytes += t->n_bytes;
        lb->tensors++;
        s->shard_tensors[t->shard]++;
        s->shard_bytes[t->shard] += t->n_bytes;
        s->by_size[i] = i;
    }
    sort_model = g;
    qsort(s->by_size, n, sizeof *s->by_size, by_size_desc);
    return 0;
}

static void summary_free(summary *s) {
    free(s->layers);
    free(s->by_size);
    free(s->shard_tensors);
    free(s->shard_bytes);
}

static void shape_str(const halo_gguf_tensor *t, char *buf, size_t size) {
    size_t at = 0;
    buf[0] = 0;
    for (uint32_t d = 0; d < t->n_dims && at < size; d++)
        at += (size_t)snprintf(buf + at, size - at, d ? " x %" PRId64 : "%" PRId64, t->ne[d]);
}

/* One metadata value for people; arrays show their type, length and first elements. */
static void value_str(const halo_gguf_kv *kv, char *buf, size_t size) {
    switch (kv->type) {
    case HALO_GGUF_U8: snprintf(buf, size, "%u", kv->v.u8); return;
    case HALO_GGUF_I8: snprintf(buf, size, "%d", kv->v.i8); return;
    case HALO_GGUF_U16: snprintf(buf, size, "%u", kv->v.u16); return;
    case HALO_GGUF_I16: snprintf(buf, size, "%d", kv->v.i16); return;
    case HALO_GGUF_U32: snprintf(buf, size, "%" PRIu32, kv->v.u32); return;
    case HALO_GGUF_I32: snprintf(buf, size, "%" PRId32, kv->v.i32); return;
    case HALO_GGUF_U64: snprintf(buf, size, "%" PRIu64, kv->v.u64); return;
    case HALO_GGUF_I64: snprintf(buf, size, "%" PRId64, kv->v.i64); return;
    case HALO_GGUF_F32: snprintf(buf, size, "%g", kv->v.f32); return;
    case HALO_GGUF_F64: snprintf(buf, size, "%g", kv->v.f64); return;
    case HALO_GGUF_BOOL: snprintf(buf, size, "%s", kv->v.b ? "true" : "false"); return;
    case HALO_GGUF_STRING: snprintf(buf, size, "%.200s", kv->v.str.data); return;
    default: break;
    }
    size_t at = (size_t)snprintf(buf, size, "[%" PRIu64 " x %s]", kv->count,
                                 halo_gguf_vtype_name(kv->elem_type));
    for (uint64_t i = 0; i < kv->count && i < ARRAY_PREVIEW && at < size; i++) {
        if (kv->elem_type == HALO_GGUF_STRING) {
            const halo_gguf_str *s = (const halo_gguf_str *)kv->v.array + i;
            at += (size_t)snprintf(buf + at, size - at, " \"%.24s\"", s->data);
            continue;
        }
        double v = 0;
        halo_gguf_array_f64(kv, i, &v, NULL);
        at += (size_t)snprintf(buf + at, size - at, " %g", v);
    }
    if (kv->count > ARRAY_PREVIEW && at < size) snprintf(buf + at, size - at, " ...");
}

static bool is_hparam(const char *arch, const char *key) {
    size_t n = arch ? strlen(arch) : 0;
    return arch && strncmp(key, arch, n) == 0 && key[n] == '.';
}

static void print_text(const halo_gguf *g, const summary *s, bool tensors) {
    char a[32], b[32], val[512], shape[96];
    uint32_t shards = halo_gguf_shard_count(g);
    printf("file:         %s%s\n", halo_gguf_shard_path(g, 0), shards > 1 ? " (split)" : "");
    printf("format:       GGUF v%u, alignment %u, %" PRIu64 " metadata keys, %" PRIu64
           " tensors\n", halo_gguf_version(g), halo_gguf_alignment(g), halo_gguf_kv_count(g),
           halo_gguf_tensor_count(g));
    printf("architecture: %s\n", s->arch ? s->arch : "(none: general.architecture missing)");
    const halo_gguf_kv *name = halo_gguf_find_kv(g, "general.name");
    if (name && name->type == HALO_GGUF_STRING) printf("name:         %s\n", name->v.str.data);
    printf("tensor data:  %s (%" PRIu64 " bytes)\n", cli_bytes(s->total_bytes, a, sizeof a),
           s->total_bytes);

    printf("\nhyperparameters:\n");
    size_t prefix = s->arch ? strlen(s->arch) + 1 : 0;
    for (uint64_t i = 0; i < halo_gguf_kv_count(g); i++) {
        const halo_gguf_kv *kv = halo_gguf_kv_at(g, i);
        if (!is_hparam(s->arch, kv->key.data)) continue;
        value_str(kv, val, sizeof val);
        printf("  %-40s %s\n", kv->key.data + prefix, val);
    }
    const halo_gguf_kv *tok = halo_gguf_find_kv(g, "tokenizer.ggml.model");
    const halo_gguf_kv *toks = halo_gguf_find_kv(g, "tokenizer.ggml.tokens");
    if (tok && tok->type == HALO_GGUF_STRING) {
        if (toks && toks->type == HALO_GGUF_ARRAY)
            printf("\ntokenizer:    %s, %" PRIu64 " tokens\n", tok->v.str.data, toks->count);
        else
            printf("\ntokenizer:    %s (no token list)\n", tok->v.str.data);
    }

    printf("\nbytes by type:\n");
    for (uint32_t t = 0; t < HALO_TYPE_ID_LIMIT; t++) {
        if (!s->type_tensors[t]) continue;
        printf("  %-8s %6" PRIu64 " tensors  %12s  %5.1f%%\n", halo_type_name(t),
               s->type_tensors[t], cli_bytes(s->type_bytes[t], a, sizeof a),
               s->total_bytes ? 100.0 * (double)s->type_bytes[t] / (double)s->total_bytes : 0.0);
    }
    if (s->n_layers > 0) {
        printf("\nbytes per layer:\n");
        for (int64_t l = 1; l <= s->n_layers; l++)
            printf("  blk.%-4" PRId64 " %4" PRIu64 " tensors  %12s\n", s->layers[l].layer,
                   s->layers[l].tensors, cli_bytes(s->layers[l].bytes, a, sizeof a));
        printf("  other    %4" PRIu64 " tensors  %12s\n", s->layers[0].tensors,
               cli_bytes(s->layers[0].bytes, a, sizeof a));
    }
    uint64_t n = halo_gguf_tensor_count(g);
    printf("\nlargest tensors:\n");
    for (uint64_t i = 0; i < n && i < TOP_TENSORS; i++) {
        const halo_gguf_tensor *t = halo_gguf_tensor_at(g, s->by_size[i]);
        shape_str(t, shape, sizeof shape);
        printf("  %-40s %-8s %-24s %12s\n", t->name, halo_type_name(t->type), shape,
               cli_bytes(t->n_bytes, a, sizeof a));
    }
    printf("\nshards:\n");
    for (uint32_t sh = 0; sh < shards; sh++) {
        uint64_t count = s->shard_tensors[sh], bytes = s->shard_bytes[sh];
        printf("  %u/%u  %s  file %s, %" PRIu64 " tensors, data %s\n", sh + 1, shards,
               halo_gguf_shard_path(g, sh), cli_bytes(halo_gguf_shard_size(g, sh), a, sizeof a),
               count, cli_bytes(bytes, b, sizeof b));
    }
    if (!tensors) return;
    printf("\ntensors:\n");
    for (uint64_t i = 0; i < n; i++) {
        const halo_gguf_tensor *t = halo_gguf_tensor_at(g, i);
        shape_str(t, shape, sizeof shape);
        printf("  %-40s %-8s %-24s %12s  shard %u offset %" PRIu64 "\n", t->name,
               halo_type_name(t->type), shape, cli_bytes(t->n_bytes, a, sizeof a), t->shard + 1,
               t->file_offset);
    }
}

/* JSON numbers are doubles: integers beyond 2^53 go out as strings so nothing is rounded. */
static cJSON *json_u64(uint64_t v) {
    if (v <= (1ull << 53)) return cJSON_CreateNumber((double)v);
    char buf[24];
    snprintf(buf, sizeof buf, "%" PRIu64, v);
    return cJSON_CreateString(buf);
}

static cJSON *json_i64(int64_t v) {
    if (v >= -(1ll << 53) && v <= (1ll << 53)) return cJSON_CreateNumber((double)v);
    char buf[24];
    snprintf(buf, sizeof buf, "%" PRId64, v);
    return cJSON_CreateString(buf);
}

static cJSON *json_value(const halo_gguf_kv *kv) {
    switch (kv->type) {
    case HALO_GGUF_U8: return cJSON_CreateNumber(kv->v.u8);
    case HALO_GGUF_I8: return cJSON_CreateNumber(kv->v.i8);
    case HALO_GGUF_U16: return cJSON_CreateNumber(kv->v.u16);
    case HALO_GGUF_I16: return cJSON_CreateNumber(kv->v.i16);
    case HALO_GGUF_U32: return cJSON_CreateNumber(kv->v.u32);
    case HALO_GGUF_I32: return cJSON_CreateNumber(kv->v.i32);
    case HALO_GGUF_U64: return json_u64(kv->v.u64);
    case HALO_GGUF_I64: return json_i64(kv->v.i64);
    case HALO_GGUF_F32: return cJSON_CreateNumber(kv->v.f32);
    case HALO_GGUF_F64: return cJSON_CreateNumber(kv->v.f64);
    case HALO_GGUF_BOOL: return cJSON_CreateBool(kv->v.b);
    case HALO_GGUF_STRING: return cJSON_CreateString(kv->v.str.data);
    default: break;
    }
    /* Arrays: values in full when short (per-layer arrays), else type and length only. */
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "array_of", halo_gguf_vtype_name(kv->elem_type));
    cJSON_AddItemToObject(o, "length", json_u64(kv->count));
    if (kv->count > JSON_ARRAY_MAX) return o;
    cJSON *vals = cJSON_AddArrayToObject(o, "values");
    for (uint64_t i = 0; i < kv->count; i++) {
        if (kv->elem_type == HALO_GGUF_STRING) {
            cJSON_AddItemToArray(vals,
                                 cJSON_CreateString(((const halo_gguf_str *)kv->v.array)[i].data));
        } else if (kv->elem_type == HALO_GGUF_BOOL) {
            cJSON_AddItemToArray(vals, cJSON_CreateBool(((const uint8_t *)kv->v.array)[i]));
        } else {
            double v = 0;
            halo_gguf_array_f64(kv, i, &v, NULL);
            cJSON_AddItemToArray(vals, cJSON_CreateNumber(v));
        }
    }
    return o;
}

static cJSON *json_tensor(const halo_gguf_tensor *t) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", t->name);
    cJSON_AddStringToObject(o, "type", halo_type_name(t->type));
    cJSON *shape = cJSON_AddArrayToObject(o, "shape");
    for (uint32_t d = 0; d < t->n_dims; d++) cJSON_AddItemToArray(shape, json_i64(t->ne[d]));
    cJSON_AddItemToObject(o, "bytes", json_u64(t->n_bytes));
    cJSON_AddNumberToObject(o, "shard", t->shard);
    cJSON_AddItemToObject(o, "offset", json_u64(t->file_offset));
    return o;
}

static int print_json(const halo_gguf *g, const summary *s, bool tensors) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "file", halo_gguf_shard_path(g, 0));
    cJSON_AddNumberToObject(root, "gguf_version", halo_gguf_version(g));
    cJSON_AddNumberToObject(root, "alignment", halo_gguf_alignment(g));
    if (s->arch) cJSON_AddStringToObject(root, "architecture", s->arch);
    else cJSON_AddNullToObject(root, "architecture");
    cJSON_AddItemToObject(root, "tensor_count", json_u64(halo_gguf_tensor_count(g)));
    cJSON_AddItemToObject(root, "tensor_bytes", json_u64(s->total_bytes));

    cJSON *hp = cJSON_AddObjectToObject(root, "hyperparameters");
    cJSON *meta = cJSON_AddObjectToObject(root, "metadata");
    size_t prefix = s->arch ? strlen(s->arch) + 1 : 0;
    for (uint64_t i = 0; i < halo_gguf_kv_count(g); i++) {
        const halo_gguf_kv *kv = halo_gguf_kv_at(g, i);
        cJSON_AddItemToObject(meta, kv->key.data, json_value(kv));
        if (is_hparam(s->arch, kv->key.data))
            cJSON_AddItemToObject(hp, kv->key.data + prefix, json_value(kv));
    }
    cJSON *types = cJSON_AddObjectToObject(root, "bytes_by_type");
    for (uint32_t t = 0; t < HALO_TYPE_ID_LIMIT; t++) {
        if (!s->type_tensors[t]) continue;
        cJSON *o = cJSON_AddObjectToObject(types, halo_type_name(t));
        cJSON_AddItemToObject(o, "tensors", json_u64(s->type_tensors[t]));
        cJSON_AddItemToObject(o, "bytes", json_u64(s->type_bytes[t]));
    }
    cJSON *layers = cJSON_AddArrayToObject(root, "bytes_per_layer");
    for (int64_t l = 1; l <= s->n_layers; l++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "layer", (double)s->layers[l].layer);
        cJSON_AddItemToObject(o, "tensors", json_u64(s->layers[l].tensors));
        cJSON_AddItemToObject(o, "bytes", json_u64(s->layers[l].bytes));
        cJSON_AddItemToArray(layers, o);
    }
    cJSON *other = cJSON_AddObjectToObject(root, "bytes_outside_layers");
    cJSON_AddItemToObject(other, "tensors", json_u64(s->layers[0].tensors));
    cJSON_AddItemToObject(other, "bytes", json_u64(s->layers[0].bytes));

    uint64_t n = halo_gguf_tensor_count(g);
    cJSON *largest = cJSON_AddArrayToObject(root, "largest_tensors");
    for (uint64_t i = 0; i < n && i < TOP_TENSORS; i++)
        cJSON_AddItemToArray(largest, json_tensor(halo_gguf_tensor_at(g, s->by_size[i])));
    cJSON *shards = cJSON_AddArrayToObject(root, "shards");
    for (uint32_t sh = 0; sh < halo_gguf_shard_count(g); sh++) {
        cJSON *o = cJSON_CreateObject();
        uint64_t count = s->shard_tensors[sh], bytes = s->shard_bytes[sh];
        cJSON_AddStringToObject(o, "path", halo_gguf_shard_path(g, sh));
        cJSON_AddItemToObject(o, "file_bytes", json_u64(halo_gguf_shard_size(g, sh)));
        cJSON_AddItemToObject(o, "tensors", json_u64(count));
        cJSON_AddItemToObject(o, "tensor_bytes", json_u64(bytes));
        cJSON_AddItemToArray(shards, o);
    }
    if (tensors) {
        cJSON *all = cJSON_AddArrayToObject(root, "tensors");
        for (uint64_t i = 0; i < n; i++)
            cJSON_AddItemToArray(all, json_tensor(halo_gguf_tensor_at(g, i)));
    }
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    if (!text) {
        fprintf(stderr, "halo inspect: out of memory\n");
        return 1;
    }
    puts(text);
    free(text);
    return 0;
}

static void inspect_usage(FILE *out) {
    fprintf(out, "usage: halo inspect FILE [--json] [--tensors] [--check]\n"
                 "  Shows a GGUF model's architecture, hyperparameters, tensor sizes by type and\n"
                 "  layer, the largest tensors and its shards. Reads the header only.\n"
                 "  --json     machine-readable output\n"
                 "  --tensors  list every tensor (name, type, shape, bytes, shard, offset)\n"
                 "  --check    read every tensor and report NaN/infinite scales or values,\n"
                 "             expert ids out of range, undecodable types and metadata, weight\n"
                 "             and tokenizer problems; exit 1 when anything is wrong\n");
}

int cli_inspect(int argc, char **argv) {
    const char *path = NULL;
    bool json = false, tensors = false, check = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) json = true;
        else if (!strcmp(argv[i], "--tensors")) tensors = true;
        else if (!strcmp(argv[i], "--check")) check = true;
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            inspect_usage(stdout);
            return 0;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "halo inspect: unknown option '%s'\n", argv[i]);
            inspect_usage(stderr);
            return 2;
        } else if (path) {
            fprintf(stderr, "halo inspect: one FILE only (got '%s' and '%s')\n", path, argv[i]);
            return 2;
        } else {
            path = argv[i];
        }
    }
    if (!path) {
        inspect_usage(stderr);
        return 2;
    }
    halo_gguf *g = NULL;
    halo_error err;
    if (halo_gguf_open(path, &g, &err) != HALO_OK) {
        fprintf(stderr, "halo inspect: %s\n", err.message);
        return 1;
    }
    if (check) {
        int check_rc = cli_inspect_check(g, json);
        halo_gguf_close(g);
        return check_rc;
    }
    summary s;
    int rc = 1;
    if (summarize(g, &s) == 0) {
        if (json) {
            rc = print_json(g, &s, tensors);
        } else {
            print_text(g, &s, tensors);
            rc = 0;
        }
    } else {
        fprintf(stderr, "halo inspect: out of memory\n");
    }
    summary_free(&s);
    halo_gguf_close(g);
    return rc;
}
