/* Writes a "medium" DeepSeek V4 model for CPU benchmarks: DeepSeek V4 Flash's real metadata and
 * per-layer tensor shapes (hidden 4096, 256 experts of width 2048, 64 heads of 512, ...) in
 * ds4's q2 type mix, but only the first N layers (N >= 4 keeps every layer kind: window-only,
 * ratio 4 with the indexer, ratio 128), filled with random valid blocks: quantized blocks get
 * random bits with small finite scales, float tensors small values, norms 1, hash tables
 * distinct experts. usage: make_medium OUT.gguf [N_LAYERS] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/dsv4_flash.h"
#include "halo/quant.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t next(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

static uint16_t f16_of(float f) {
    uint16_t h;
    halo_quant_quantize_row(HALO_TYPE_F16, &f, &h, 1, NULL);
    return h;
}

/* Random bytes, then the block scale fields (ggml block layouts) set to small values. */
static void fill(const dsv4_tensor *t, unsigned char *p) {
    for (uint64_t i = 0; i < t->n_bytes; i++) p[i] = (unsigned char)next();
    int64_t n = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
    const halo_type_info *info = halo_type_info_get(t->type);
    uint64_t blocks = (uint64_t)n / info->block_size;
    uint16_t d = f16_of(0.002f), dmin = f16_of(0.001f);
    switch (t->type) {
    case HALO_TYPE_Q8_0:
    case HALO_TYPE_IQ2_XXS:
        for (uint64_t b = 0; b < blocks; b++) memcpy(p + b * info->block_bytes, &d, 2);
        break;
    case HALO_TYPE_Q2_K:
        for (uint64_t b = 0; b < blocks; b++) {
            memcpy(p + b * info->block_bytes + 80, &d, 2);
            memcpy(p + b * info->block_bytes + 82, &dmin, 2);
        }
        break;
    case HALO_TYPE_F16:
        for (int64_t i = 0; i < n; i++) {
            uint16_t h = f16_of(((float)(next() % 2001) - 1000.0f) * 2e-5f);
            memcpy(p + 2 * i, &h, 2);
        }
        break;
    case HALO_TYPE_F32: {
        bool norm = strstr(t->name, "norm") != NULL;
        for (int64_t i = 0; i < n; i++) {
            float v = norm ? 1.0f : ((float)(next() % 2001) - 1000.0f) * 1e-4f;
            memcpy(p + 4 * i, &v, 4);
        }
        break;
    }
    case HALO_TYPE_I32: /* hash table: t->ne[0] distinct experts per token */
        for (int64_t tok = 0; tok < t->ne[1]; tok++)
            for (int64_t k = 0; k < t->ne[0]; k++) {
                int32_t e = (int32_t)((tok * 7 + k * 41) % DSV4_FLASH_N_EXPERT);
                memcpy(p + 4 * (tok * t->ne[0] + k), &e, 4);
            }
        break;
    default:
        fprintf(stderr, "make_medium: no filler for %s\n", info->name);
        exit(1);
    }
}

typedef struct job {
    halo_gguf_writer *w;
    uint32_t n_layer;
} job;

static int keep(const dsv4_tensor *t, uint32_t n_layer) {
    if (strncmp(t->name, "blk.", 4) != 0) return 1;
    return (uint32_t)atoi(t->name + 4) < n_layer;
}

/* Pass 1: the header, with every tensor's data left as a hole. */
static int add(const dsv4_tensor *t, void *user) {
    job *j = user;
    if (keep(t, j->n_layer)) halo_gguf_writer_add_tensor(j->w, t->name, t->type, t->n_dims, t->ne, NULL);
    return 0;
}

/* Pass 2: each tensor's random blocks written at its offset, one tensor in memory at a time. */
typedef struct filler {
    FILE *f;
    const halo_gguf *g;
    uint32_t n_layer;
} filler;

static int write_data(const dsv4_tensor *t, void *user) {
    filler *fl = user;
    if (!keep(t, fl->n_layer)) return 0;
    const halo_gguf_tensor *gt = halo_gguf_find_tensor(fl->g, t->name);
    unsigned char *p = malloc(t->n_bytes);
    if (!p || !gt) {
        fprintf(stderr, "make_medium: out of memory or tensor lost: %s\n", t->name);
        exit(1);
    }
    fill(t, p);
    if (fseeko(fl->f, (off_t)gt->file_offset, SEEK_SET) != 0 || fwrite(p, 1, t->n_bytes, fl->f) != t->n_bytes) {
        fprintf(stderr, "make_medium: write failed at %s\n", t->name);
        exit(1);
    }
    free(p);
    return 0;
}

/* Copies the real metadata, with block_count set to the layers kept. */
static void add_metadata(halo_gguf_writer *w, uint32_t n_layer) {
    halo_gguf_writer *m = halo_gguf_writer_create();
    halo_error err;
    void *img;
    size_t size;
    halo_gguf *g;
    if (dsv4_flash_add_metadata(m, DSV4_MIX_DS4_Q2, &err) ||
        halo_gguf_writer_write_memory(m, &img, &size, &err) ||
        halo_gguf_open_memory(img, size, &g, &err)) {
        fprintf(stderr, "make_medium: %s\n", err.message);
        exit(1);
    }
    for (uint64_t i = 0; i < halo_gguf_kv_count(g); i++) {
        const halo_gguf_kv *kv = halo_gguf_kv_at(g, i);
        const char *k = kv->key.data;
        if (!strcmp(k, "deepseek4.block_count")) halo_gguf_writer_set_u32(w, k, n_layer);
        else if (!strcmp(k, "general.name")) halo_gguf_writer_set_str(w, k, "halo bench medium");
        else if (kv->type == HALO_GGUF_STRING) halo_gguf_writer_set_str(w, k, kv->v.str.data);
        else if (kv->type == HALO_GGUF_U32) halo_gguf_writer_set_u32(w, k, kv->v.u32);
        else if (kv->type == HALO_GGUF_F32) halo_gguf_writer_set_f32(w, k, kv->v.f32);
        else if (kv->type == HALO_GGUF_BOOL) halo_gguf_writer_set_bool(w, k, kv->v.b);
        else if (kv->type == HALO_GGUF_ARRAY && kv->elem_type != HALO_GGUF_STRING)
            /* per-layer arrays: llama.cpp wants exactly block_count entries */
            halo_gguf_writer_set_array(w, k, kv->elem_type, kv->v.array,
                                       kv->count >= DSV4_FLASH_N_LAYER ? n_layer : kv->count);
        else {
            fprintf(stderr, "make_medium: unexpected metadata type for %s\n", k);
            exit(1);
        }
    }
    halo_gguf_close(g);
    free(img);
    halo_gguf_writer_free(m);
}

int main(int argc, char **argv) {
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: %s OUT.gguf [N_LAYERS (default 4)]\n", argv[0]);
        return 2;
    }
    uint32_t n_layer = argc == 3 ? (uint32_t)atoi(argv[2]) : 4;
    if (n_layer < 1 || n_layer > DSV4_FLASH_N_LAYER) {
        fprintf(stderr, "make_medium: N_LAYERS must be 1..%d\n", DSV4_FLASH_N_LAYER);
        return 2;
    }
    job j = {.w = halo_gguf_writer_create(), .n_layer = n_layer};
    add_metadata(j.w, n_layer);
    dsv4_flash_for_each_tensor(DSV4_MIX_DS4_Q2, add, &j);
    halo_error err;
    halo_status st = halo_gguf_writer_write_file(j.w, argv[1], &err);
    halo_gguf_writer_free(j.w);
    halo_gguf *g = NULL;
    if (!st) st = halo_gguf_open(argv[1], &g, &err);
    if (st) {
        fprintf(stderr, "make_medium: %s\n", err.message);
        return 1;
    }
    filler fl = {fopen(argv[1], "r+b"), g, n_layer};
    if (!fl.f) {
        perror(argv[1]);
        return 1;
    }
    dsv4_flash_for_each_tensor(DSV4_MIX_DS4_Q2, write_data, &fl);
    int rc = fclose(fl.f) == 0 ? 0 : 1;
    halo_gguf_close(g);
    return rc;
}
