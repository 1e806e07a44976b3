/* The expert cache (see expert_cache.h): slots in one host mapping, a policy from
 * expert_slots.c, reads in flight from expert_reads.c; resolve hands a batch its experts, and
 * prefetch starts reads for experts known to be needed before their layer runs. */
#include "mem/expert_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "mem/expert_cache_internal.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static uint64_t align_up(uint64_t v) {
    return (v + BLOCK - 1) / BLOCK * BLOCK;
}

/* ---- loads -------------------------------------------------------------------------------- */

/* The jobs of one expert matrix's read, split into pieces of at most c->piece bytes (1 MiB) so
 * that even a single miss keeps several reads in flight (an NVMe reaches its bandwidth only
 * with queue depth). */
static void add_jobs(halo_expert_cache *c, int32_t slot, uint32_t layer, uint32_t expert, int mat) {
    const halo_expert_layer *L = &c->layers[layer];
    const halo_gguf_tensor *t = mat == 0 ? L->gate : mat == 1 ? L->up : L->down;
    uint64_t per = t->n_bytes / (uint64_t)t->ne[2];
    uint64_t off = t->file_offset + (uint64_t)expert * per;
    uint64_t start = off / BLOCK * BLOCK, end = align_up(off + per);
    uint8_t *dst = c->mem + (uint64_t)slot * c->slot_bytes + c->region[mat];
    slot_load *ld = &c->ld[slot];
    for (uint64_t at = start; at < end; at += c->piece) {
        read_job *j = &c->jobs[(uint64_t)slot * c->pps + ld->n_jobs++];
        memset(j, 0, sizeof *j);
        j->slot = slot;
        j->layer = layer;
        j->expert = expert;
        j->shard = t->shard;
        j->tensor = t->name;
        j->off = at;
        j->len = end - at < c->piece ? end - at : c->piece;
        j->need = off + per < at + j->len ? off + per : at + j->len;
        j->dst = dst + (at - start);
    }
}

/* Puts (layer, expert) in slot (a victim, emptied) and starts its reads without waiting. */
static void start_load(halo_expert_cache *c, int32_t slot, uint32_t layer, uint32_t expert,
                       bool prefetch, bool spec) {
    halo_expert_slots_assign(&c->slots, slot, layer, expert);
    slot_load *L = &c->ld[slot];
    L->n_jobs = 0;
    for (int mat = 0; mat < 3; mat++)
        add_jobs(c, slot, layer, expert, mat);
    atomic_store(&L->pending, L->n_jobs);
    L->loading = L->miss = true;
    L->reserved = L->prefetch = prefetch;
    L->spec = spec;
    L->waited = false;
    L->bad = -1;
    halo_expert_slots_hold(&c->slots, slot, true);
    c->loading[c->n_loading++] = slot;
    if (prefetch) c->st.prefetched++;
    if (spec) c->st.predicted++;
    halo_xc_queue_slot(c, slot);
}

/* Empties a slot whose reads ended (a failed load, so nothing half-read stays). */
static void drop_slot(halo_expert_cache *c, int32_t slot) {
    halo_expert_slots_drop(&c->slots, slot);
    halo_expert_slots_hold(&c->slots, slot, false);
    slot_load *L = &c->ld[slot];
    L->reserved = L->miss = L->prefetch = L->spec = L->waited = false;
    L->bad = -1;
}

static halo_status load_error(halo_expert_cache *c, int32_t slot, halo_error *err) {
    read_job bad = c->jobs[(uint64_t)slot * c->pps + (uint32_t)c->ld[slot].bad];
    drop_slot(c, slot);
    const char *path = halo_gguf_shard_path(c->g, bad.shard);
    if (bad.error < 0)
        return halo_fail(err, HALO_E_TRUNCATED,
                         "%s: tensor %s, expert %u: the file ends at %llu but the expert's "
                         "bytes run to %llu (file changed or truncated)",
                         path, bad.tensor, bad.expert, (unsigned long long)(bad.off + bad.got),
                         (unsigned long long)bad.need);
    return halo_fail(err, HALO_E_IO, "%s: reading tensor %s, expert %u at offset %llu: %s", path,
                     bad.tensor, bad.expert, (unsigned long long)bad.off, strerror(bad.error));
}

/* Lets go of every prefetch reservation (slots still reading stay held until they end). */
static void release_reservations(halo_expert_cache *c) {
    for (uint32_t slot = 0; slot < c->slots.n_slots; slot++) {
        slot_load *L = &c->ld[slot];
        if (!L->reserved) continue;
        L->reserved = false;
        if (!L->loading) halo_expert_slots_hold(&c->slots, (int32_t)slot, false);
    }
}

/* A slot for a miss of layer: the policy's victim; when every slot is pinned by this call,
 * held by a prefetch or still reading and nothing else is ready, the reservations go and the
 * reads are waited for, so a batch always makes progress. */
static int32_t victim(halo_expert_cache *c, uint32_t layer, bool stuck) {
    int32_t slot = halo_expert_slots_victim(&c->slots, layer);
    if (slot >= 0 || !stuck) return slot;
    release_reservations(c);
    slot = halo_expert_slots_victim(&c->slots, layer);
    if (slot >= 0) return slot;
    double t0 = now();
    halo_xc_drain(c);
    c->st.read_seconds += now() - t0;
    return halo_expert_slots_victim(&c->slots, layer);
}

/* ---- resolve ------------------------------------------------------------------------------ */

static halo_tensor view_of(const halo_expert_cache *c, int32_t slot, uint32_t layer,
                           uint32_t expert, int mat) {
    const halo_expert_layer *L = &c->layers[layer];
    const halo_gguf_tensor *t = mat == 0 ? L->gate : mat == 1 ? L->up : L->down;
    uint64_t off = t->file_offset + (uint64_t)expert * (t->n_bytes / (uint64_t)t->ne[2]);
    halo_tensor v = {.buf = c->buf,
                     .offset = (uint64_t)slot * c->slot_bytes + c->region[mat] + off % BLOCK,
                     .type = t->type,
                     .ne = {t->ne[0], t->ne[1], 1, 1}};
    return v;
}

static int32_t slot_of(const halo_expert_cache *c, uint32_t layer, int32_t id) {
    return halo_expert_slots_find(&c->slots, layer, (uint32_t)id);
}

/* Moves the experts of loading[0..*n_loading) whose reads ended to ready. */
static void collect(halo_expert_cache *c, uint32_t layer, int32_t *ready, uint32_t *n_ready,
                    int32_t *loading, uint32_t *n_loading) {
    uint32_t kept = 0;
    for (uint32_t i = 0; i < *n_loading; i++) {
        if (c->ld[slot_of(c, layer, loading[i])].loading)
            loading[kept++] = loading[i];
        else
            ready[(*n_ready)++] = loading[i];
    }
    *n_loading = kept;
}

/* The backend's call (backend.h): the experts of ids it may compute now first. Cached ones are
 * ready at once; the misses' reads all start together; with overlap the ready ones go back
 * before the misses' reads end (the backend computes them and the shared expert meanwhile and
 * calls again for the rest, handed out once all their reads have ended), else all together. */
static halo_status resolve(const halo_expert_source *src, int32_t *ids, uint32_t n,
                           halo_expert_view *views, uint32_t *n_ready, halo_error *err) {
    halo_expert_cache *c = src->impl;
    uint32_t layer = src->layer;
    *n_ready = 0;
    if (!c->layers[layer].gate)
        return halo_fail(err, HALO_E_BAD_VALUE, "expert cache: blk.%u has no routed experts",
                         layer);
    for (uint32_t i = 0; i < n; i++)
        if (ids[i] < 0 || (uint32_t)ids[i] >= c->n_expert)
            return halo_fail(err, HALO_E_BAD_VALUE, "%s: routing chose expert %d of %u",
                             c->layers[layer].gate->name, ids[i], c->n_expert);
    /* The rest of a batch the last call handed back in part is not a new request. */
    bool rest = layer == c->cont_layer && n == c->cont_left;
    c->cont_left = 0;
    if (c->trace && !rest) {
        fprintf(c->trace, "%u", layer);
        for (uint32_t i = 0; i < n; i++)
            fprintf(c->trace, " %d", ids[i]);
        fputc('\n', c->trace);
    }
    halo_expert_slots *s = &c->slots;
    halo_xc_settle(c);
    halo_expert_slots_new_round(s);
    /* Cached experts first (ready, or their reads in flight), pinned so that this call's
     * misses never evict them; then slots for the misses. */
    int32_t *ready = c->scratch, *loading = ready + c->n_expert, *absent = loading + c->n_expert;
    uint32_t nr = 0, nl = 0, na = 0;
    for (uint32_t i = 0; i < n; i++) {
        int32_t slot = slot_of(c, layer, ids[i]);
        if (slot < 0) {
            absent[na++] = ids[i];
            continue;
        }
        halo_expert_slots_use(s, slot);
        slot_load *L = &c->ld[slot];
        L->reserved = false; /* asked for: the prefetch's reservation has done its job */
        if (!L->loading) halo_expert_slots_hold(s, slot, false);
        if (L->loading)
            loading[nl++] = ids[i];
        else
            ready[nr++] = ids[i];
    }
    uint32_t started = 0;
    for (; started < na; started++) {
        int32_t slot = victim(c, layer, nr + nl == 0);
        if (slot < 0) break;
        start_load(c, slot, layer, (uint32_t)absent[started], false, false);
        loading[nl++] = absent[started];
    }
    /* Two rounds at most: what is ready, then all the rest. Each round costs the backend's
     * thread wake-ups, tens of milliseconds on a busy machine (bench/stream/RESULTS.md), so
     * the rest is not handed out piece by piece as reads end. */
    if (nl && (!c->overlap || nr == 0 || rest)) {
        double t0 = now();
        int32_t *slots = c->scratch + 3 * (uint64_t)c->n_expert;
        for (uint32_t i = 0; i < nl; i++)
            slots[i] = slot_of(c, layer, loading[i]);
        halo_xc_wait(c, slots, nl, true);
        c->st.read_seconds += now() - t0;
    } else if (nl) {
        halo_xc_settle(c); /* whatever has arrived meanwhile goes in this round too */
    }
    collect(c, layer, ready, &nr, loading, &nl);
    for (uint32_t i = 0; i < nr; i++) {
        int32_t slot = slot_of(c, layer, ready[i]);
        if (c->ld[slot].bad >= 0) return load_error(c, slot, err);
    }
    /* ids: ready | reading | not started (a later call: the cache holds no more at once). */
    memcpy(ids, ready, nr * sizeof *ids);
    memcpy(ids + nr, loading, nl * sizeof *ids);
    memmove(ids + nr + nl, absent + started, (na - started) * sizeof *ids);
    for (uint32_t i = 0; i < nr; i++) {
        int32_t slot = slot_of(c, layer, ids[i]);
        slot_load *L = &c->ld[slot];
        c->st.requests++;
        if (L->miss)
            c->st.misses++;
        else
            c->st.hits++;
        c->st.waited += L->waited;
        c->st.prefetch_used += L->prefetch;
        c->st.predicted_used += L->spec;
        L->miss = L->prefetch = L->spec = L->waited = false;
        views[i].gate = view_of(c, slot, layer, (uint32_t)ids[i], 0);
        views[i].up = view_of(c, slot, layer, (uint32_t)ids[i], 1);
        views[i].down = view_of(c, slot, layer, (uint32_t)ids[i], 2);
    }
    if (nr < n) {
        c->cont_layer = layer;
        c->cont_left = n - nr;
    }
    *n_ready = nr;
    return HALO_OK;
}

/* ---- prefetch ----------------------------------------------------------------------------- */

void halo_expert_cache_step(halo_expert_cache *c) {
    halo_xc_settle(c);
    halo_expert_slots_new_round(&c->slots);
    c->cont_left = 0;
    for (uint32_t slot = 0; slot < c->slots.n_slots; slot++) {
        slot_load *L = &c->ld[slot];
        bool reserved = L->reserved;
        L->reserved = false; /* a slot still reading stays held until its reads end */
        if (L->loading) continue;
        if (L->bad >= 0) {
            drop_slot(c, (int32_t)slot); /* a failed read nobody asked for: read it again */
            continue;
        }
        if (reserved) halo_expert_slots_hold(&c->slots, (int32_t)slot, false);
        if (L->prefetch) c->st.prefetch_unused++; /* cached now: a later ask is a hit */
        if (L->prefetch) L->miss = false;
        L->prefetch = L->spec = false;
    }
}

void halo_expert_cache_drain(halo_expert_cache *c) {
    double t0 = now();
    halo_xc_drain(c);
    c->st.read_seconds += now() - t0;
}

static uint32_t prefetch(halo_expert_cache *c, uint32_t layer, const int32_t *ids, uint32_t n,
                         bool spec) {
    if (layer >= c->n_layer || !c->layers[layer].gate) return 0;
    halo_xc_settle(c);
    /* At most a layer's share of the slots, so prefetches never crowd out the layers that
     * run before theirs. */
    uint32_t budget = c->n_streamed ? c->slots.n_slots / c->n_streamed : c->slots.n_slots;
    uint32_t taken = 0, started = 0;
    if (!budget) budget = 1;
    memset(c->mark, 0, c->n_expert);
    for (uint32_t i = 0; i < n && taken < budget; i++) {
        if (ids[i] < 0 || (uint32_t)ids[i] >= c->n_expert || c->mark[ids[i]]) continue;
        c->mark[ids[i]] = 1;
        int32_t slot = slot_of(c, layer, ids[i]);
        if (slot >= 0) { /* cached: kept until its layer asks for it */
            c->ld[slot].reserved = true;
            halo_expert_slots_hold(&c->slots, slot, true);
            taken++;
            continue;
        }
        slot = halo_expert_slots_victim(&c->slots, layer);
        if (slot < 0) break;
        start_load(c, slot, layer, (uint32_t)ids[i], true, spec);
        taken++;
        started++;
    }
    return started;
}

uint32_t halo_expert_cache_prefetch(halo_expert_cache *c, uint32_t layer, const int32_t *ids,
                                    uint32_t n) {
    return prefetch(c, layer, ids, n, false);
}

uint32_t halo_expert_cache_predict(halo_expert_cache *c, uint32_t layer, const int32_t *ids,
                                   uint32_t n) {
    return prefetch(c, layer, ids, n, true);
}

/* ---- setup -------------------------------------------------------------------------------- */

/* Commits the cache's memory now. Left to fault in under the reads, slots filled for the first
 * time on a machine short of free memory read at 0.16 GB/s, against 0.41 GB/s once committed
 * (bench/stream/RESULTS.md: the commit then took most of a 157 s load there, paid once). An
 * admitted size that cannot be had fails at open, not in the middle of a reply. */
static halo_status populate(halo_expert_cache *c, halo_error *err) {
#ifdef MADV_POPULATE_WRITE
    if (madvise(c->mem, c->mem_bytes, MADV_POPULATE_WRITE) == 0) return HALO_OK;
    if (errno == ENOMEM || errno == EFAULT || errno == EHWPOISON)
        return halo_fail(err, HALO_E_NOMEM, "expert cache: cannot commit %llu bytes: %s",
                         (unsigned long long)c->mem_bytes, strerror(errno));
#endif
    long page = sysconf(_SC_PAGESIZE); /* older kernels: touch every page */
    for (uint64_t at = 0; at < c->mem_bytes; at += (uint64_t)page)
        c->mem[at] = 0;
    return HALO_OK;
}

halo_status halo_expert_cache_create(const halo_gguf *g, const halo_expert_layer *layers,
                                     uint32_t n_layer, const halo_expert_cache_options *o,
                                     halo_expert_cache **out, halo_error *err) {
    *out = NULL;
    halo_expert_cache *c = calloc(1, sizeof *c);
    if (!c) return halo_fail(err, HALO_E_NOMEM, "expert cache: out of memory");
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv_work, NULL);
    pthread_cond_init(&c->cv_done, NULL);
    c->g = g;
    c->n_layer = n_layer;
    c->layers = calloc(n_layer ? n_layer : 1, sizeof *c->layers);
    c->sources = calloc(n_layer ? n_layer : 1, sizeof *c->sources);
    c->n_shards = halo_gguf_shard_count(g);
    c->fd_direct = malloc(c->n_shards * sizeof(int));
    c->fd_buf = malloc(c->n_shards * sizeof(int));
    c->st.policy = o->policy;
    halo_status st = HALO_OK;
    if (!c->layers || !c->sources || !c->fd_direct || !c->fd_buf)
        st = halo_fail(err, HALO_E_NOMEM, "expert cache: out of memory");
    for (uint32_t s = 0; !st && s < c->n_shards; s++)
        c->fd_direct[s] = c->fd_buf[s] = -1;
    /* A slot fits the largest expert of any layer: each matrix the blocks its bytes touch
     * (O_DIRECT reads whole blocks into the slot), so a slot is a little larger than the
     * expert — by at most one block per matrix, 0.2 % of DeepSeek V4 Flash's 6.75 MiB
     * experts, more for tiny test models. */
    uint64_t cap[3] = {0, 0, 0};
    for (uint32_t l = 0; !st && l < n_layer; l++) {
        c->layers[l] = layers[l];
        c->sources[l] = (halo_expert_source){.resolve = resolve, .impl = c, .layer = l};
        const halo_gguf_tensor *m[3] = {layers[l].gate, layers[l].up, layers[l].down};
        if (!m[0] || !m[1] || !m[2]) continue;
        for (int k = 0; k < 3; k++) {
            uint64_t per = m[k]->n_bytes / (uint64_t)m[k]->ne[2];
            if (m[k]->ne[2] != m[0]->ne[2] || per * (uint64_t)m[k]->ne[2] != m[k]->n_bytes)
                st = halo_fail(err, HALO_E_BAD_VALUE,
                               "expert cache: tensor %s does not split "
                               "into %lld experts",
                               m[k]->name, (long long)m[0]->ne[2]);
            for (int64_t e = 0; e < m[k]->ne[2]; e++) {
                uint64_t off = m[k]->file_offset + (uint64_t)e * per;
                uint64_t span = align_up(off + per) - off / BLOCK * BLOCK;
                cap[k] = span > cap[k] ? span : cap[k];
            }
        }
        if (c->n_expert && (uint32_t)m[0]->ne[2] != c->n_expert)
            st = halo_fail(err, HALO_E_BAD_VALUE, "expert cache: layers differ in expert count");
        c->n_expert = (uint32_t)m[0]->ne[2];
        c->n_streamed++;
    }
    /* HALO_TEST_READ_PIECE (a multiple of 4 KiB) makes tests split tiny experts too. */
    const char *piece = getenv("HALO_TEST_READ_PIECE");
    c->piece = piece && *piece ? strtoull(piece, NULL, 10) / BLOCK * BLOCK : 0;
    if (!c->piece) c->piece = (uint64_t)1 << 20;
    c->region[0] = 0;
    c->region[1] = cap[0];
    c->region[2] = cap[0] + cap[1];
    c->slot_bytes = cap[0] + cap[1] + cap[2];
    uint64_t n_slots = c->slot_bytes ? o->bytes / c->slot_bytes : 0;
    if (!st && n_slots == 0)
        st = halo_fail(err, HALO_E_BAD_VALUE,
                       "expert cache of %llu bytes cannot hold one expert (%llu bytes)",
                       (unsigned long long)o->bytes, (unsigned long long)c->slot_bytes);
    uint64_t all = (uint64_t)n_layer * c->n_expert;
    if (n_slots > all) n_slots = all;
    if (!st &&
        !halo_expert_slots_init(&c->slots, n_layer, c->n_expert, (uint32_t)n_slots, o->policy))
        st = halo_fail(err, HALO_E_NOMEM, "expert cache: out of memory");
    if (!st) {
        /* A fixed set of jobs per slot; the queue holds each job at most once. */
        uint32_t pieces = 0;
        for (int k = 0; k < 3; k++)
            pieces += (uint32_t)((cap[k] + c->piece - 1) / c->piece);
        c->pps = pieces;
        c->q_cap = n_slots * pieces;
        c->jobs = malloc((size_t)c->q_cap * sizeof *c->jobs);
        c->queue = malloc((size_t)c->q_cap * sizeof *c->queue);
        c->ld = calloc((size_t)n_slots, sizeof *c->ld);
        c->loading = malloc((size_t)n_slots * sizeof *c->loading);
        c->scratch = malloc((size_t)c->n_expert * 4 * sizeof *c->scratch);
        c->mark = malloc(c->n_expert);
        if (!c->jobs || !c->queue || !c->ld || !c->loading || !c->scratch || !c->mark)
            st = halo_fail(err, HALO_E_NOMEM, "expert cache: out of memory");
        for (uint64_t i = 0; !st && i < n_slots; i++)
            c->ld[i].bad = -1;
    }
    if (!st) {
        /* Exactly the admitted bytes: what the plan printed is what is mapped. */
        c->mem_bytes = o->bytes;
        void *m =
            mmap(NULL, c->mem_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED)
            st = halo_fail(err, HALO_E_NOMEM, "expert cache: cannot map %llu bytes: %s",
                           (unsigned long long)c->mem_bytes, strerror(errno));
        else {
            c->mem = m;
            madvise(m, c->mem_bytes, MADV_HUGEPAGE);
            st = populate(c, err);
        }
    }
    c->direct = !o->no_direct;
    for (uint32_t s = 0; !st && s < c->n_shards; s++) {
        const char *path = halo_gguf_shard_path(g, s);
        c->fd_buf[s] = open(path, O_RDONLY | O_CLOEXEC);
        if (c->fd_buf[s] < 0) {
            st = halo_fail(err, HALO_E_IO, "%s: cannot open for streaming: %s", path,
                           strerror(errno));
            break;
        }
        if (!o->no_direct) c->fd_direct[s] = open(path, O_RDONLY | O_CLOEXEC | O_DIRECT);
        if (c->fd_direct[s] < 0) c->direct = false;
        posix_fadvise(c->fd_buf[s], 0, 0, POSIX_FADV_RANDOM);
    }
    c->overlap = !o->no_overlap;
    if (!st) halo_xc_readers_start(c, o->readers);
    const char *fail = getenv("HALO_TEST_FAIL_READ");
    atomic_init(&c->reads_issued, 0);
    atomic_init(&c->fail_at, fail && *fail ? strtoull(fail, NULL, 10) : 0);
    const char *trace = getenv("HALO_STREAM_TRACE");
    if (!st && trace && *trace) halo_expert_cache_trace(c, trace);
    c->st.bytes_allocated = c->mem_bytes;
    c->st.slot_bytes = c->slot_bytes;
    c->st.slots = (uint32_t)n_slots;
    if (st) {
        halo_expert_cache_free(c);
        return st;
    }
    *out = c;
    return HALO_OK;
}

void halo_expert_cache_free(halo_expert_cache *c) {
    if (!c) return;
    halo_xc_readers_stop(c); /* waits for reads in flight: they write into c->mem */
    for (uint32_t s = 0; c->fd_buf && c->fd_direct && s < c->n_shards; s++) {
        if (c->fd_buf[s] >= 0) close(c->fd_buf[s]);
        if (c->fd_direct[s] >= 0) close(c->fd_direct[s]);
    }
    if (c->trace) fclose(c->trace);
    if (c->mem) munmap(c->mem, c->mem_bytes);
    halo_expert_slots_free(&c->slots);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv_work);
    pthread_cond_destroy(&c->cv_done);
    free(c->fd_buf);
    free(c->fd_direct);
    free(c->jobs);
    free(c->queue);
    free(c->ld);
    free(c->loading);
    free(c->scratch);
    free(c->mark);
    free(c->layers);
    free(c->sources);
    free(c);
}

void *halo_expert_cache_memory(const halo_expert_cache *c, uint64_t *bytes) {
    *bytes = c->mem_bytes;
    return c->mem;
}

void halo_expert_cache_bind(halo_expert_cache *c, halo_buf *buf) {
    c->buf = buf;
}

const halo_expert_source *halo_expert_cache_source(const halo_expert_cache *c, uint32_t layer) {
    return layer < c->n_layer && c->layers[layer].gate ? &c->sources[layer] : NULL;
}

void halo_expert_cache_stats(const halo_expert_cache *c, halo_expert_stats *out) {
    *out = c->st;
    out->direct = c->direct && !atomic_load(&c->direct_failed);
}

void halo_expert_cache_fail_read(halo_expert_cache *c, uint64_t n) {
    atomic_store(&c->fail_at, n ? atomic_load(&c->reads_issued) + n : 0);
}

void halo_expert_cache_trace(halo_expert_cache *c, const char *path) {
    if (c->trace) fclose(c->trace);
    c->trace = fopen(path, "a");
}
