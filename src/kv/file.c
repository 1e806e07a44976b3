#include "kv/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "core/error.h"

static const char MAGIC[8] = {'H', 'A', 'L', 'O', '-', 'K', 'V', '\n'};
enum { BYTE_ORDER_MARK = 0x01020304 };

/* Header field offsets (docs/cache.md). */
enum {
    OFF_VERSION = 8,
    OFF_ORDER = 12,
    OFF_MODEL = 16,
    OFF_SHAPE = 24,
    OFF_N_LAYER = 32,
    OFF_HEAD_DIM = 36,
    OFF_WINDOW = 40,
    OFF_INDEX_DIM = 44,
    OFF_N_TOKENS = 48,
    OFF_PAYLOAD_BYTES = 56,
    OFF_TOKENS_HASH = 64,
    OFF_PAYLOAD_HASH = 72,
    OFF_USER_BYTES = 80,
    OFF_USER_HASH = 88,
    OFF_HEADER_HASH = 120
};

static void put32(unsigned char *h, int off, uint32_t v) {
    memcpy(h + off, &v, 4);
}
static void put64(unsigned char *h, int off, uint64_t v) {
    memcpy(h + off, &v, 8);
}
static uint32_t get32(const unsigned char *h, int off) {
    uint32_t v;
    memcpy(&v, h + off, 4);
    return v;
}
static uint64_t get64(const unsigned char *h, int off) {
    uint64_t v;
    memcpy(&v, h + off, 8);
    return v;
}

/* ---- identity -------------------------------------------------------------------------- */

static uint64_t elem_bytes(halo_gguf_vtype t) {
    switch (t) {
    case HALO_GGUF_U8:
    case HALO_GGUF_I8:
    case HALO_GGUF_BOOL:
        return 1;
    case HALO_GGUF_U16:
    case HALO_GGUF_I16:
        return 2;
    case HALO_GGUF_U32:
    case HALO_GGUF_I32:
    case HALO_GGUF_F32:
        return 4;
    case HALO_GGUF_U64:
    case HALO_GGUF_I64:
    case HALO_GGUF_F64:
        return 8;
    default:
        return 0;
    }
}

static void hash_str(XXH3_state_t *x, const halo_gguf_str *s) {
    XXH3_64bits_update(x, &s->len, sizeof s->len);
    XXH3_64bits_update(x, s->data, s->len);
}

/* Every metadata key with its type and value, and every tensor's name, type and shape: two
 * files with the same weights layout but another tokenizer or other hyperparameters differ. */
void halo_kv_file_identify(const halo_gguf *g, const halo_hparams *hp, halo_kv_file_id *id) {
    XXH3_state_t *x = XXH3_createState();
    memset(id, 0, sizeof *id);
    if (x) {
        XXH3_64bits_reset(x);
        for (uint64_t i = 0; i < halo_gguf_kv_count(g); i++) {
            const halo_gguf_kv *kv = halo_gguf_kv_at(g, i);
            hash_str(x, &kv->key);
            uint32_t types[2] = {kv->type, kv->elem_type};
            XXH3_64bits_update(x, types, sizeof types);
            if (kv->type == HALO_GGUF_STRING) {
                hash_str(x, &kv->v.str);
            } else if (kv->type == HALO_GGUF_ARRAY) {
                XXH3_64bits_update(x, &kv->count, sizeof kv->count);
                if (kv->elem_type == HALO_GGUF_STRING)
                    for (uint64_t k = 0; k < kv->count; k++)
                        hash_str(x, &((const halo_gguf_str *)kv->v.array)[k]);
                else
                    XXH3_64bits_update(x, kv->v.array, kv->count * elem_bytes(kv->elem_type));
            } else {
                XXH3_64bits_update(x, &kv->v, elem_bytes(kv->type));
            }
        }
        for (uint64_t i = 0; i < halo_gguf_tensor_count(g); i++) {
            const halo_gguf_tensor *t = halo_gguf_tensor_at(g, i);
            XXH3_64bits_update(x, t->name, strlen(t->name) + 1);
            XXH3_64bits_update(x, &t->type, sizeof t->type);
            XXH3_64bits_update(x, t->ne, sizeof t->ne);
            XXH3_64bits_update(x, &t->n_bytes, sizeof t->n_bytes);
        }
        id->model_id = XXH3_64bits_digest(x);
        XXH3_freeState(x);
    }
    uint32_t shape[4 + HALO_MAX_LAYERS] = {hp->n_layer, hp->head_dim, hp->sliding_window,
                                           hp->indexer_head_dim};
    for (uint32_t il = 0; il < hp->n_layer; il++)
        shape[4 + il] = hp->compress_ratio[il];
    id->shape_id = XXH3_64bits(shape, (4 + hp->n_layer) * sizeof *shape);
    id->n_layer = hp->n_layer;
    id->head_dim = hp->head_dim;
    id->sliding_window = hp->sliding_window;
    id->indexer_head_dim = hp->indexer_head_dim;
}

uint64_t halo_kv_tokens_key(const int32_t *tokens, uint32_t n) {
    return XXH3_64bits(tokens, (size_t)n * sizeof *tokens);
}

/* ---- writing --------------------------------------------------------------------------- */

halo_status halo_kv_file_encode(const halo_kv_file_id *id, const halo_kv_image *img,
                                const void *user, uint64_t user_len, unsigned char **out,
                                uint64_t *n, halo_error *err) {
    uint64_t tok_bytes = (uint64_t)img->n_tokens * 4, payload = halo_kv_image_payload_bytes(img);
    uint64_t total = HALO_KV_FILE_HEADER + tok_bytes + payload + user_len;
    unsigned char *buf = calloc(1, total);
    if (!buf)
        return halo_fail(err, HALO_E_NOMEM, "out of memory for a %llu-byte session file",
                         (unsigned long long)total);
    unsigned char *tok = buf + HALO_KV_FILE_HEADER, *pay = tok + tok_bytes;
    memcpy(tok, img->tokens, tok_bytes);
    halo_kv_image_encode(img, pay);
    if (user_len) memcpy(pay + payload, user, user_len);
    memcpy(buf, MAGIC, sizeof MAGIC);
    put32(buf, OFF_VERSION, HALO_KV_FILE_VERSION);
    put32(buf, OFF_ORDER, BYTE_ORDER_MARK);
    put64(buf, OFF_MODEL, id->model_id);
    put64(buf, OFF_SHAPE, id->shape_id);
    put32(buf, OFF_N_LAYER, id->n_layer);
    put32(buf, OFF_HEAD_DIM, id->head_dim);
    put32(buf, OFF_WINDOW, id->sliding_window);
    put32(buf, OFF_INDEX_DIM, id->indexer_head_dim);
    put32(buf, OFF_N_TOKENS, img->n_tokens);
    put64(buf, OFF_PAYLOAD_BYTES, payload);
    put64(buf, OFF_TOKENS_HASH, XXH3_64bits(tok, tok_bytes));
    put64(buf, OFF_PAYLOAD_HASH, XXH3_64bits(pay, payload));
    put64(buf, OFF_USER_BYTES, user_len);
    put64(buf, OFF_USER_HASH, XXH3_64bits(pay + payload, user_len));
    put64(buf, OFF_HEADER_HASH, XXH3_64bits(buf, OFF_HEADER_HASH));
    *out = buf;
    *n = total;
    return HALO_OK;
}

static halo_status sync_dir(const char *path, halo_error *err) {
    char *dir = strdup(path);
    if (!dir) return halo_fail(err, HALO_E_NOMEM, "out of memory");
    char *slash = strrchr(dir, '/');
    if (slash == dir)
        slash[1] = '\0';
    else if (slash)
        *slash = '\0';
    else
        strcpy(dir, ".");
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    halo_status st = HALO_OK;
    if (fd < 0 || fsync(fd) != 0)
        st = halo_fail(err, HALO_E_IO, "%s: cannot sync the directory: %s", dir, strerror(errno));
    if (fd >= 0) close(fd);
    free(dir);
    return st;
}

halo_status halo_kv_file_write_atomic(const char *path, const void *data, uint64_t n,
                                      halo_error *err) {
    static unsigned counter;
    size_t len = strlen(path) + 64;
    char *tmp = malloc(len);
    if (!tmp) return halo_fail(err, HALO_E_NOMEM, "out of memory");
    snprintf(tmp, len, "%s.tmp-%ld-%u", path, (long)getpid(),
             __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED));
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
        halo_status st = halo_fail(err, HALO_E_IO, "%s: %s", tmp, strerror(errno));
        free(tmp);
        return st;
    }
    const unsigned char *p = data;
    uint64_t left = n;
    while (left) {
        ssize_t w = write(fd, p, left > (1u << 30) ? (1u << 30) : (size_t)left);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) break;
        p += w;
        left -= (uint64_t)w;
    }
    halo_status st = HALO_OK;
    if (left)
        st = halo_fail(err, HALO_E_IO, "%s: write failed: %s", tmp, strerror(errno));
    else if (fsync(fd) != 0)
        st = halo_fail(err, HALO_E_IO, "%s: fsync: %s", tmp, strerror(errno));
    if (close(fd) != 0 && !st)
        st = halo_fail(err, HALO_E_IO, "%s: close: %s", tmp, strerror(errno));
    if (!st && rename(tmp, path) != 0)
        st = halo_fail(err, HALO_E_IO, "%s: rename to %s: %s", tmp, path, strerror(errno));
    if (st)
        unlink(tmp);
    else
        st = sync_dir(path, err);
    free(tmp);
    return st;
}

/* ---- reading --------------------------------------------------------------------------- */

/* Checks a header against the model; *tok_bytes and *payload get the section sizes. */
static halo_status check_header(const char *path, const unsigned char *h, uint64_t file_bytes,
                                const halo_kv_file_id *id, halo_error *err) {
    if (file_bytes < HALO_KV_FILE_HEADER)
        return halo_fail(err, HALO_E_TRUNCATED, "%s: %llu bytes, shorter than the header", path,
                         (unsigned long long)file_bytes);
    if (memcmp(h, MAGIC, sizeof MAGIC) != 0)
        return halo_fail(err, HALO_E_BAD_MAGIC, "%s: not a halo session file", path);
    if (get32(h, OFF_VERSION) != HALO_KV_FILE_VERSION)
        return halo_fail(err, HALO_E_BAD_VERSION, "%s: format version %u, halo reads %u", path,
                         get32(h, OFF_VERSION), HALO_KV_FILE_VERSION);
    if (get64(h, OFF_HEADER_HASH) != XXH3_64bits(h, OFF_HEADER_HASH))
        return halo_fail(err, HALO_E_BAD_VALUE, "%s: header checksum mismatch", path);
    if (get32(h, OFF_ORDER) != BYTE_ORDER_MARK)
        return halo_fail(err, HALO_E_UNSUPPORTED,
                         "%s: written on a machine of another byte "
                         "order",
                         path);
    if (get64(h, OFF_MODEL) != id->model_id || get64(h, OFF_SHAPE) != id->shape_id)
        return halo_fail(err, HALO_E_BAD_VALUE,
                         "%s: saved with another model (identity "
                         "%016llx, this model %016llx)",
                         path, (unsigned long long)get64(h, OFF_MODEL),
                         (unsigned long long)id->model_id);
    uint64_t want = HALO_KV_FILE_HEADER + (uint64_t)get32(h, OFF_N_TOKENS) * 4 +
                    get64(h, OFF_PAYLOAD_BYTES) + get64(h, OFF_USER_BYTES);
    if (get64(h, OFF_PAYLOAD_BYTES) > file_bytes || get64(h, OFF_USER_BYTES) > file_bytes ||
        file_bytes != want)
        return halo_fail(err, file_bytes < want ? HALO_E_TRUNCATED : HALO_E_BAD_VALUE,
                         "%s: %llu bytes, its header says %llu", path,
                         (unsigned long long)file_bytes, (unsigned long long)want);
    return HALO_OK;
}

/* Reads up to `limit` bytes of the file (0: all) after checking the header. */
static halo_status read_file(const char *path, const halo_kv_file_id *id, bool header_only,
                             unsigned char **out, uint64_t *file_bytes, halo_error *err) {
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return halo_fail(err, errno == ENOENT ? HALO_E_NOT_FOUND : HALO_E_IO, "%s: %s", path,
                         strerror(errno));
    struct stat sb;
    unsigned char h[HALO_KV_FILE_HEADER];
    halo_status st = HALO_OK;
    if (fstat(fd, &sb) != 0) st = halo_fail(err, HALO_E_IO, "%s: %s", path, strerror(errno));
    uint64_t size = st ? 0 : (uint64_t)sb.st_size;
    if (!st && size >= sizeof h && pread(fd, h, sizeof h, 0) != (ssize_t)sizeof h)
        st = halo_fail(err, HALO_E_IO, "%s: cannot read the header", path);
    if (!st) st = check_header(path, h, size, id, err);
    uint64_t want = header_only ? HALO_KV_FILE_HEADER + (uint64_t)get32(h, OFF_N_TOKENS) * 4 : size;
    unsigned char *buf = st ? NULL : malloc(want);
    if (!st && !buf)
        st = halo_fail(err, HALO_E_NOMEM, "%s: out of memory for %llu bytes", path,
                       (unsigned long long)want);
    for (uint64_t got = 0; !st && got < want;) {
        ssize_t r =
            pread(fd, buf + got, want - got > (1u << 30) ? (1u << 30) : want - got, (off_t)got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0)
            st = halo_fail(err, r ? HALO_E_IO : HALO_E_TRUNCATED,
                           "%s: read failed at byte "
                           "%llu",
                           path, (unsigned long long)got);
        else
            got += (uint64_t)r;
    }
    close(fd);
    if (!st) {
        uint32_t n_tokens = get32(buf, OFF_N_TOKENS);
        const unsigned char *tok = buf + HALO_KV_FILE_HEADER;
        if (XXH3_64bits(tok, (size_t)n_tokens * 4) != get64(buf, OFF_TOKENS_HASH))
            st = halo_fail(err, HALO_E_BAD_VALUE, "%s: token checksum mismatch", path);
        else if (!header_only &&
                 XXH3_64bits(tok + (size_t)n_tokens * 4, get64(buf, OFF_PAYLOAD_BYTES)) !=
                     get64(buf, OFF_PAYLOAD_HASH))
            st = halo_fail(err, HALO_E_BAD_VALUE, "%s: state checksum mismatch", path);
        else if (!header_only && XXH3_64bits(tok + (size_t)n_tokens * 4 +
                                                 get64(buf, OFF_PAYLOAD_BYTES),
                                             get64(buf, OFF_USER_BYTES)) !=
                                     get64(buf, OFF_USER_HASH))
            st = halo_fail(err, HALO_E_BAD_VALUE, "%s: user data checksum mismatch", path);
    }
    if (st) {
        free(buf);
        return st;
    }
    *out = buf;
    *file_bytes = size;
    return HALO_OK;
}

halo_status halo_kv_file_read(const char *path, const halo_kv_file_id *id, const halo_kv *kv,
                              halo_kv_image **out, void **user, uint64_t *user_len,
                              halo_error *err) {
    *out = NULL;
    if (user) *user = NULL;
    if (user_len) *user_len = 0;
    unsigned char *buf = NULL;
    uint64_t size = 0;
    halo_status st = read_file(path, id, false, &buf, &size, err);
    if (st) return st;
    uint32_t n_tokens = get32(buf, OFF_N_TOKENS);
    const unsigned char *tok = buf + HALO_KV_FILE_HEADER;
    int32_t *tokens = malloc((size_t)(n_tokens ? n_tokens : 1) * sizeof *tokens);
    if (!tokens)
        st = halo_fail(err, HALO_E_NOMEM, "out of memory");
    else {
        memcpy(tokens, tok, (size_t)n_tokens * 4);
        st = halo_kv_image_decode(kv, tok + (size_t)n_tokens * 4, get64(buf, OFF_PAYLOAD_BYTES),
                                  tokens, n_tokens, out, err);
        if (st) halo_error_prefix(err, "%s: ", path);
    }
    uint64_t n_user = get64(buf, OFF_USER_BYTES);
    if (!st && user) {
        *user = malloc(n_user + 1); /* NUL-terminated for text */
        if (!*user) {
            halo_kv_image_free(*out);
            *out = NULL;
            st = halo_fail(err, HALO_E_NOMEM, "out of memory");
        } else {
            memcpy(*user, tok + (size_t)n_tokens * 4 + get64(buf, OFF_PAYLOAD_BYTES), n_user);
            ((char *)*user)[n_user] = '\0';
            if (user_len) *user_len = n_user;
        }
    }
    free(tokens);
    free(buf);
    return st;
}

halo_status halo_kv_file_peek(const char *path, const halo_kv_file_id *id, int32_t **tokens,
                              uint32_t *n_tokens, uint64_t *file_bytes, halo_error *err) {
    *tokens = NULL;
    unsigned char *buf = NULL;
    halo_status st = read_file(path, id, true, &buf, file_bytes, err);
    if (st) return st;
    uint32_t n = get32(buf, OFF_N_TOKENS);
    int32_t *t = malloc((size_t)(n ? n : 1) * sizeof *t);
    if (!t) {
        free(buf);
        return halo_fail(err, HALO_E_NOMEM, "out of memory");
    }
    memcpy(t, buf + HALO_KV_FILE_HEADER, (size_t)n * 4);
    free(buf);
    *tokens = t;
    *n_tokens = n;
    return HALO_OK;
}
