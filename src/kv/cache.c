/* The prefix cache: session images by their tokens, in RAM (LRU within a budget) and on disk
 * (one verified file per sequence, LRU within a budget, written by a background thread).
 *
 * A lookup picks the starting point that leaves the least to evaluate among: the session's own
 * state (rewound through its checkpoints), every RAM entry and every disk file. An entry is
 * usable up to the last of its checkpoints inside the prefix it shares with the request, so a
 * request that changes the end of an earlier one resumes shortly before the change. Disk
 * files are named <model identity>-<tokens hash>.halokv, so models can share a directory. */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "kv/session_state.h"

enum { DEFAULT_DIR_GIB = 16 };

typedef struct ram_entry {
    halo_kv_image *img;
    uint64_t bytes, tick;
} ram_entry;

typedef struct disk_entry {
    char *name; /* file name inside the directory */
    int32_t *tokens;
    uint32_t n_tokens;
    uint64_t bytes, tick;
} disk_entry;

typedef struct job {
    char *path;          /* file to write or remove */
    unsigned char *data; /* NULL: remove */
    uint64_t n;
    struct job *next;
} job;

struct halo_cache {
    halo_engine *e;
    halo_kv_file_id id;
    uint64_t tick;
    ram_entry *ram;
    uint32_t n_ram, cap_ram;
    uint64_t ram_bytes, ram_max;
    char *dir;
    disk_entry *disk;
    uint32_t n_disk, cap_disk;
    uint64_t disk_bytes, disk_max;
    halo_cache_stats stats;
    void (*log)(void *user, const char *line);
    void *log_user;
    /* the writer thread and its queue; mu also guards the disk index */
    pthread_t writer;
    bool have_writer, stop;
    pthread_mutex_t mu;
    pthread_cond_t wake, idle;
    job *head, *tail;
    int busy;
};

static void say(halo_cache *c, const char *fmt, ...) HALO_PRINTF(2, 3);
static void say(halo_cache *c, const char *fmt, ...) {
    if (!c->log) return;
    char line[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    c->log(c->log_user, line);
}

static char *join(const char *dir, const char *name) {
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", dir, name);
    return p;
}

static uint32_t common_prefix(const int32_t *a, uint32_t na, const int32_t *b, uint32_t nb) {
    uint32_t n = na < nb ? na : nb, i = 0;
    while (i < n && a[i] == b[i])
        i++;
    return i;
}

/* The last checkpoint of img at or before `limit` (its index), or -1. */
static int usable_ckpt(const halo_kv_image *img, uint32_t limit) {
    for (uint32_t i = img->n_ckpt; i-- > 0;)
        if (img->ckpt[i]->pos <= limit) return (int)i;
    return -1;
}

/* ---- the writer thread ------------------------------------------------------------------ */

static void forget_disk(halo_cache *c, const char *path);

static void *writer_main(void *arg) {
    halo_cache *c = arg;
    pthread_mutex_lock(&c->mu);
    for (;;) {
        while (!c->head && !c->stop)
            pthread_cond_wait(&c->wake, &c->mu);
        if (!c->head) break;
        job *j = c->head;
        c->head = j->next;
        if (!c->head) c->tail = NULL;
        c->busy++;
        pthread_mutex_unlock(&c->mu);
        halo_error err = {0};
        halo_status st = HALO_OK;
        if (j->data)
            st = halo_kv_file_write_atomic(j->path, j->data, j->n, &err);
        else if (unlink(j->path) != 0 && errno != ENOENT)
            st = halo_fail(&err, HALO_E_IO, "%s: %s", j->path, strerror(errno));
        pthread_mutex_lock(&c->mu);
        if (st) {
            say(c, "kv cache: %s", err.message);
            if (j->data) forget_disk(c, j->path);
        }
        c->busy--;
        free(j->path);
        free(j->data);
        free(j);
        if (!c->head && !c->busy) pthread_cond_broadcast(&c->idle);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

static bool enqueue(halo_cache *c, char *path, unsigned char *data, uint64_t n) {
    job *j = calloc(1, sizeof *j);
    if (!j) {
        free(path);
        free(data);
        return false;
    }
    *j = (job){.path = path, .data = data, .n = n};
    pthread_mutex_lock(&c->mu);
    if (c->tail)
        c->tail->next = j;
    else
        c->head = j;
    c->tail = j;
    pthread_cond_signal(&c->wake);
    pthread_mutex_unlock(&c->mu);
    return true;
}

void halo_cache_flush(halo_cache *c) {
    if (!c || !c->have_writer) return;
    pthread_mutex_lock(&c->mu);
    while (c->head || c->busy)
        pthread_cond_wait(&c->idle, &c->mu);
    pthread_mutex_unlock(&c->mu);
}

/* ---- the disk index (under mu) ------------------------------------------------------------ */

static void drop_disk_at(halo_cache *c, uint32_t i) {
    c->disk_bytes -= c->disk[i].bytes;
    free(c->disk[i].name);
    free(c->disk[i].tokens);
    c->disk[i] = c->disk[--c->n_disk];
}

static int find_disk(halo_cache *c, const char *name) {
    for (uint32_t i = 0; i < c->n_disk; i++)
        if (strcmp(c->disk[i].name, name) == 0) return (int)i;
    return -1;
}

static void forget_disk(halo_cache *c, const char *path) {
    const char *name = strrchr(path, '/');
    int i = find_disk(c, name ? name + 1 : path);
    if (i >= 0) drop_disk_at(c, (uint32_t)i);
}

static bool add_disk(halo_cache *c, char *name, int32_t *tokens, uint32_t n, uint64_t bytes,
                     uint64_t tick) {
    if (c->n_disk == c->cap_disk) {
        uint32_t cap = c->cap_disk ? 2 * c->cap_disk : 16;
        disk_entry *d = realloc(c->disk, cap * sizeof *d);
        if (!d) return false;
        c->disk = d;
        c->cap_disk = cap;
    }
    c->disk[c->n_disk++] = (disk_entry){name, tokens, n, bytes, tick};
    c->disk_bytes += bytes;
    return true;
}

/* Removes a file that failed verification, with a line saying why. */
static void reject_file(halo_cache *c, const char *path, const char *why) {
    say(c, "kv cache: removed a file that failed verification: %s", why); /* why names it */
    unlink(path);
    c->stats.files_rejected++;
}

static char *model_prefix(const halo_cache *c) {
    char *p = malloc(24);
    if (p) snprintf(p, 24, "%016llx-", (unsigned long long)c->id.model_id);
    return p;
}

/* Indexes the directory: this model's files are verified (header, tokens) and listed,
 * oldest first by modification time; bad ones and temporaries left by a crash are removed. */
static halo_status scan_dir(halo_cache *c, halo_error *err) {
    DIR *d = opendir(c->dir);
    if (!d) return halo_fail(err, HALO_E_IO, "%s: %s", c->dir, strerror(errno));
    char *prefix = model_prefix(c);
    struct dirent *de;
    while (prefix && (de = readdir(d)) != NULL) {
        if (strncmp(de->d_name, prefix, strlen(prefix)) != 0) continue;
        char *path = join(c->dir, de->d_name);
        if (!path) break;
        size_t len = strlen(de->d_name);
        if (strstr(de->d_name, ".tmp-")) {
            say(c, "kv cache: removed %s: a write that did not finish", path);
            unlink(path);
        } else if (len > 7 && strcmp(de->d_name + len - 7, ".halokv") == 0) {
            int32_t *tokens = NULL;
            uint32_t n = 0;
            uint64_t bytes = 0;
            halo_error e2 = {0};
            struct stat sb;
            if (halo_kv_file_peek(path, &c->id, &tokens, &n, &bytes, &e2)) {
                reject_file(c, path, e2.message);
            } else {
                uint64_t tick = stat(path, &sb) == 0 ? (uint64_t)sb.st_mtime : 0;
                char *name = strdup(de->d_name);
                if (!name || !add_disk(c, name, tokens, n, bytes, tick)) {
                    free(name);
                    free(tokens);
                }
            }
        }
        free(path);
    }
    closedir(d);
    free(prefix);
    /* Ticks so far are mtimes; renumber them in that order below the live clock. */
    for (uint32_t i = 0; i < c->n_disk; i++)
        for (uint32_t k = i + 1; k < c->n_disk; k++)
            if (c->disk[k].tick < c->disk[i].tick) {
                disk_entry t = c->disk[i];
                c->disk[i] = c->disk[k];
                c->disk[k] = t;
            }
    for (uint32_t i = 0; i < c->n_disk; i++)
        c->disk[i].tick = ++c->tick;
    return HALO_OK;
}

/* ---- open / close ------------------------------------------------------------------------- */

halo_status halo_cache_open(halo_engine *e, const halo_cache_params *p, halo_cache **out,
                            halo_error *err) {
    *out = NULL;
    halo_cache *c = calloc(1, sizeof *c);
    if (!c) return halo_fail(err, HALO_E_NOMEM, "out of memory");
    c->e = e;
    halo_engine_identify(e, &c->id);
    c->ram_max = p->ram_bytes;
    c->log = p->log;
    c->log_user = p->log_user;
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->wake, NULL);
    pthread_cond_init(&c->idle, NULL);
    halo_status st = HALO_OK;
    if (p->dir && *p->dir) {
        c->disk_max = p->dir_bytes ? p->dir_bytes : (uint64_t)DEFAULT_DIR_GIB << 30;
        c->dir = strdup(p->dir);
        if (!c->dir)
            st = halo_fail(err, HALO_E_NOMEM, "out of memory");
        else if (mkdir(c->dir, 0755) != 0 && errno != EEXIST)
            st = halo_fail(err, HALO_E_IO, "%s: cannot create: %s", c->dir, strerror(errno));
        if (!st) st = scan_dir(c, err);
        if (!st && pthread_create(&c->writer, NULL, writer_main, c) != 0)
            st = halo_fail(err, HALO_E_IO, "cannot start the cache writer thread");
        c->have_writer = !st;
    }
    if (st) {
        halo_cache_close(c);
        return st;
    }
    *out = c;
    return HALO_OK;
}

void halo_cache_close(halo_cache *c) {
    if (!c) return;
    if (c->have_writer) {
        pthread_mutex_lock(&c->mu);
        c->stop = true;
        pthread_cond_signal(&c->wake);
        pthread_mutex_unlock(&c->mu);
        pthread_join(c->writer, NULL);
    }
    for (uint32_t i = 0; i < c->n_ram; i++)
        halo_kv_image_free(c->ram[i].img);
    free(c->ram);
    while (c->n_disk)
        drop_disk_at(c, c->n_disk - 1);
    free(c->disk);
    free(c->dir);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->wake);
    pthread_cond_destroy(&c->idle);
    free(c);
}

/* ---- RAM ---------------------------------------------------------------------------------- */

static void drop_ram_at(halo_cache *c, uint32_t i) {
    c->ram_bytes -= c->ram[i].bytes;
    halo_kv_image_free(c->ram[i].img);
    c->ram[i] = c->ram[--c->n_ram];
}

static bool same_tokens(const halo_kv_image *a, const int32_t *t, uint32_t n) {
    return a->n_tokens == n && memcmp(a->tokens, t, (size_t)n * sizeof *t) == 0;
}

/* Takes ownership of img (freed when it does not fit). */
static bool ram_insert(halo_cache *c, halo_kv_image *img) {
    uint64_t bytes = halo_kv_image_size(img);
    for (uint32_t i = 0; i < c->n_ram; i++)
        if (same_tokens(c->ram[i].img, img->tokens, img->n_tokens)) drop_ram_at(c, i--);
    if (bytes > c->ram_max) {
        halo_kv_image_free(img);
        return false;
    }
    while (c->ram_bytes + bytes > c->ram_max && c->n_ram) {
        uint32_t old = 0;
        for (uint32_t i = 1; i < c->n_ram; i++)
            if (c->ram[i].tick < c->ram[old].tick) old = i;
        say(c, "kv cache: RAM full, evicted a %u-token state (%.1f MiB)", c->ram[old].img->n_tokens,
            (double)c->ram[old].bytes / (1 << 20));
        drop_ram_at(c, old);
    }
    if (c->n_ram == c->cap_ram) {
        uint32_t cap = c->cap_ram ? 2 * c->cap_ram : 16;
        ram_entry *r = realloc(c->ram, cap * sizeof *r);
        if (!r) {
            halo_kv_image_free(img);
            return false;
        }
        c->ram = r;
        c->cap_ram = cap;
    }
    c->ram[c->n_ram++] = (ram_entry){img, bytes, ++c->tick};
    c->ram_bytes += bytes;
    return true;
}

/* ---- insert ------------------------------------------------------------------------------- */

static char *file_name(const halo_cache *c, const int32_t *tokens, uint32_t n) {
    char *name = malloc(64);
    if (name)
        snprintf(name, 64, "%016llx-%016llx.halokv", (unsigned long long)c->id.model_id,
                 (unsigned long long)halo_kv_tokens_key(tokens, n));
    return name;
}

static halo_status disk_insert(halo_cache *c, const halo_kv_image *img, halo_error *err) {
    unsigned char *data = NULL;
    uint64_t n = 0;
    halo_status st = halo_kv_file_encode(&c->id, img, NULL, 0, &data, &n, err);
    if (st) return st;
    if (n > c->disk_max) {
        free(data);
        return halo_fail(err, HALO_E_NOMEM,
                         "a %.1f MiB state does not fit the %.1f MiB disk "
                         "cache",
                         (double)n / (1 << 20), (double)c->disk_max / (1 << 20));
    }
    char *name = file_name(c, img->tokens, img->n_tokens);
    char *path = name ? join(c->dir, name) : NULL;
    int32_t *tokens = malloc((size_t)(img->n_tokens ? img->n_tokens : 1) * sizeof *tokens);
    if (!name || !path || !tokens) {
        free(name);
        free(path);
        free(tokens);
        free(data);
        return halo_fail(err, HALO_E_NOMEM, "out of memory");
    }
    memcpy(tokens, img->tokens, (size_t)img->n_tokens * sizeof *tokens);
    pthread_mutex_lock(&c->mu);
    int same = find_disk(c, name);
    if (same >= 0) drop_disk_at(c, (uint32_t)same);
    /* Oldest files go first; their removal is queued behind earlier writes. */
    while (c->disk_bytes + n > c->disk_max && c->n_disk) {
        uint32_t old = 0;
        for (uint32_t i = 1; i < c->n_disk; i++)
            if (c->disk[i].tick < c->disk[old].tick) old = i;
        char *victim = join(c->dir, c->disk[old].name);
        say(c, "kv cache: disk full, evicted %s", c->disk[old].name);
        drop_disk_at(c, old);
        pthread_mutex_unlock(&c->mu);
        if (victim) enqueue(c, victim, NULL, 0);
        pthread_mutex_lock(&c->mu);
    }
    bool added = add_disk(c, name, tokens, img->n_tokens, n, ++c->tick);
    pthread_mutex_unlock(&c->mu);
    if (!added) {
        free(name);
        free(tokens);
        free(path);
        free(data);
        return halo_fail(err, HALO_E_NOMEM, "out of memory");
    }
    if (!enqueue(c, path, data, n)) return halo_fail(err, HALO_E_NOMEM, "out of memory");
    return HALO_OK;
}

halo_status halo_cache_insert(halo_cache *c, halo_session *s, halo_error *err) {
    halo_kv_image *img = NULL;
    halo_status st = halo_session_capture(s, &img, err);
    if (st) return st;
    halo_status disk = HALO_OK;
    halo_error disk_err = {0};
    if (c->dir) disk = disk_insert(c, img, &disk_err);
    uint64_t bytes = halo_kv_image_size(img);
    bool in_ram = c->ram_max && ram_insert(c, img);
    if (!c->ram_max) halo_kv_image_free(img);
    if (disk) {
        *err = disk_err;
        return disk;
    }
    if (!in_ram && !c->dir)
        return halo_fail(err, HALO_E_NOMEM,
                         "a %.1f MiB state does not fit the %.1f MiB RAM "
                         "cache",
                         (double)bytes / (1 << 20), (double)c->ram_max / (1 << 20));
    return HALO_OK;
}

/* ---- restore ------------------------------------------------------------------------------ */

/* Loads and verifies a disk entry; a bad file is removed. NULL when unusable. */
static halo_kv_image *load_disk(halo_cache *c, halo_session *s, const char *name) {
    char *path = join(c->dir, name);
    if (!path) return NULL;
    halo_kv_image *img = NULL;
    halo_error err = {0};
    halo_status st = halo_kv_file_read(path, &c->id, halo_session_kv(s), &img, NULL, NULL, &err);
    if (st) {
        pthread_mutex_lock(&c->mu);
        int i = find_disk(c, name);
        if (i >= 0) drop_disk_at(c, (uint32_t)i);
        pthread_mutex_unlock(&c->mu);
        /* A context too small for the file is this session's limit, not the file's fault. */
        if (st != HALO_E_NOT_FOUND && !strstr(err.message, "does not fit a context"))
            reject_file(c, path, err.message);
    }
    free(path);
    return img;
}

static bool was_tried(char *const *tried, uint32_t n, const char *name) {
    for (uint32_t i = 0; i < n; i++)
        if (!strcmp(tried[i], name)) return true;
    return false;
}

halo_status halo_cache_restore(halo_cache *c, halo_session *s, const int32_t *tokens,
                               uint32_t max_len, uint32_t *n_restored, halo_error *err) {
    *n_restored = 0;
    /* Candidates are compared by where evaluation starts. The session itself can go back to
     * the prefix it shares with the request, re-evaluating from its checkpoint before it. */
    uint32_t own = halo_session_n_past(s);
    uint32_t l = common_prefix(halo_session_tokens(s), own, tokens, max_len);
    int64_t best_start = halo_session_resume_point(s, l);
    int best_ram = -1, best_ck = -1;
    for (uint32_t i = 0; i < c->n_ram; i++) {
        const halo_kv_image *img = c->ram[i].img;
        uint32_t m = common_prefix(img->tokens, img->n_tokens, tokens, max_len);
        int k = usable_ckpt(img, m);
        if (k >= 0 && img->ckpt[k]->pos > best_start) {
            best_start = img->ckpt[k]->pos;
            best_ram = (int)i;
            best_ck = k;
        }
    }
    halo_kv_image *from_disk = NULL;
    if (c->dir) {
        /* Disk candidates by shared prefix, longest first, until none can beat the best. A
         * file whose checkpoints do not beat the best is passed over, not the end: a shorter
         * prefix can hold a later checkpoint. */
        char **tried = NULL;
        uint32_t n_tried = 0;
        for (;;) {
            pthread_mutex_lock(&c->mu);
            int pick = -1;
            uint32_t pick_len = 0;
            for (uint32_t i = 0; i < c->n_disk; i++) {
                uint32_t m = common_prefix(c->disk[i].tokens, c->disk[i].n_tokens, tokens, max_len);
                if (m > best_start && m > pick_len && !was_tried(tried, n_tried, c->disk[i].name)) {
                    pick = (int)i;
                    pick_len = m;
                }
            }
            char *name = pick >= 0 ? strdup(c->disk[pick].name) : NULL;
            pthread_mutex_unlock(&c->mu);
            if (!name) break;
            halo_cache_flush(c); /* the file may still be in the writer's queue */
            halo_kv_image *img = load_disk(c, s, name);
            int k = img ? usable_ckpt(img, pick_len) : -1;
            if (k >= 0 && img->ckpt[k]->pos > best_start) {
                halo_kv_image_free(from_disk);
                from_disk = img;
                best_start = img->ckpt[k]->pos;
                best_ck = k;
                best_ram = -1;
                pthread_mutex_lock(&c->mu);
                int i = find_disk(c, name);
                if (i >= 0) c->disk[i].tick = ++c->tick;
                pthread_mutex_unlock(&c->mu);
                free(name);
            } else {
                halo_kv_image_free(img); /* a bad file was dropped from the index already */
                char **t = realloc(tried, (n_tried + 1) * sizeof *tried);
                if (!t) {
                    free(name);
                    break;
                }
                tried = t;
                tried[n_tried++] = name;
            }
        }
        for (uint32_t i = 0; i < n_tried; i++)
            free(tried[i]);
        free(tried);
    }
    halo_status st = HALO_OK;
    if (from_disk) {
        st = halo_session_apply(s, from_disk, (uint32_t)best_ck, err);
        /* Keep it in RAM too: the next request will likely share the same prefix. */
        if (c->ram_max && !st)
            ram_insert(c, from_disk);
        else
            halo_kv_image_free(from_disk);
    } else if (best_ram >= 0) {
        c->ram[best_ram].tick = ++c->tick;
        st = halo_session_apply(s, c->ram[best_ram].img, (uint32_t)best_ck, err);
    } else {
        st = halo_session_rewind(s, l, err);
    }
    if (st) return st;
    *n_restored = (uint32_t)(from_disk || best_ram >= 0 ? best_start : l);
    if (*n_restored)
        c->stats.hits++;
    else
        c->stats.misses++;
    c->stats.tokens_restored += *n_restored;
    return HALO_OK;
}

void halo_cache_get_stats(halo_cache *c, halo_cache_stats *out) {
    pthread_mutex_lock(&c->mu);
    *out = c->stats;
    out->ram_entries = c->n_ram;
    out->ram_bytes = c->ram_bytes;
    out->ram_max_bytes = c->ram_max;
    out->disk_files = c->n_disk;
    out->disk_bytes = c->disk_bytes;
    out->disk_max_bytes = c->disk_max;
    pthread_mutex_unlock(&c->mu);
}
