/* The expert cache's prefetch and asynchronous reads, through its own API on a golden model:
 * an expert read ahead by a prefetch holds the file's bytes when its layer asks for it and counts
 * as a miss served by the prefetch; resolve hands cached experts out before the misses' reads
 * end (overlap) and every expert's bytes are the file's; a prefetch takes at most its layer's
 * share of the slots and lets go of what was not asked for when the next step begins; a failed
 * prefetch read is reported by the resolve that asks for the expert, naming tensor and expert,
 * and the expert is read again on the next ask; guesses (predict) are counted apart. The oracle is
 * the file itself, read with halo_gguf_read_tensor (pread). Both readers (io_uring, threads). */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "halo/gguf.h"
#include "mem/expert_cache.h"

#define MODEL "tests/golden/models/tiny-a-f32.gguf"
#define MAX_LAYERS 16

static halo_gguf *g;
static halo_expert_layer layers[MAX_LAYERS];
static uint32_t n_layer, n_expert;
static unsigned char *file_bytes[MAX_LAYERS][3]; /* each stacked expert tensor, from the file */
static uint64_t slot_bytes_estimate;

static void load_model(void) {
    halo_error err = {0};
    CHECK_INT(halo_gguf_open(MODEL, &g, &err), HALO_OK);
    static const char *mats[3] = {"gate", "up", "down"};
    for (n_layer = 0; g && n_layer < MAX_LAYERS; n_layer++) {
        const halo_gguf_tensor *t[3];
        for (int k = 0; k < 3; k++) {
            char name[64];
            snprintf(name, sizeof name, "blk.%u.ffn_%s_exps.weight", n_layer, mats[k]);
            t[k] = halo_gguf_find_tensor(g, name);
        }
        if (!t[0]) break;
        layers[n_layer] = (halo_expert_layer){t[0], t[1], t[2]};
        n_expert = (uint32_t)t[0]->ne[2];
        for (int k = 0; k < 3; k++) {
            file_bytes[n_layer][k] = malloc(t[k]->n_bytes);
            CHECK_INT(halo_gguf_read_tensor(g, t[k], file_bytes[n_layer][k], t[k]->n_bytes, &err),
                      HALO_OK);
            slot_bytes_estimate += t[k]->n_bytes / (uint64_t)t[k]->ne[2] + 3 * 4096;
        }
    }
    slot_bytes_estimate /= n_layer ? n_layer : 1;
    CHECK(n_layer >= 2 && n_expert >= 4);
}

static halo_expert_cache *make_cache(uint32_t slots, bool overlap) {
    halo_expert_cache_options o = {.bytes = slots * slot_bytes_estimate,
                                   .policy = HALO_EXPERT_LRU_LAYER,
                                   .no_overlap = !overlap};
    halo_expert_cache *c = NULL;
    halo_error err = {0};
    CHECK_INT(halo_expert_cache_create(g, layers, n_layer, &o, &c, &err), HALO_OK);
    return c;
}

/* Do the view's bytes in the cache equal expert e of the file's stacked tensor? */
static bool view_is_file(const halo_expert_cache *c, const halo_tensor *v, uint32_t layer,
                         uint32_t e, int k) {
    const halo_gguf_tensor *t = k == 0   ? layers[layer].gate
                                : k == 1 ? layers[layer].up
                                         : layers[layer].down;
    uint64_t per = t->n_bytes / (uint64_t)t->ne[2], bytes;
    const unsigned char *mem = halo_expert_cache_memory(c, &bytes);
    return v->offset + per <= bytes &&
           memcmp(mem + v->offset, file_bytes[layer][k] + (uint64_t)e * per, per) == 0;
}

/* Resolves ids[0..n) of layer to the end, checking every view; returns the calls it took. */
static int resolve_all(halo_expert_cache *c, uint32_t layer, int32_t *ids, uint32_t n,
                       halo_status *st, halo_error *err) {
    const halo_expert_source *src = halo_expert_cache_source(c, layer);
    halo_expert_view views[64];
    int calls = 0;
    *st = HALO_OK;
    for (uint32_t done = 0; done < n;) {
        uint32_t ready = 0;
        calls++;
        *st = src->resolve(src, ids + done, n - done, views, &ready, err);
        if (*st) return calls;
        CHECK(ready >= 1 && ready <= n - done);
        for (uint32_t i = 0; i < ready; i++) {
            CHECK(view_is_file(c, &views[i].gate, layer, (uint32_t)ids[done + i], 0));
            CHECK(view_is_file(c, &views[i].up, layer, (uint32_t)ids[done + i], 1));
            CHECK(view_is_file(c, &views[i].down, layer, (uint32_t)ids[done + i], 2));
        }
        done += ready;
    }
    return calls;
}

static void prefetched_experts_hold_the_files_bytes(void) {
    for (int reader = 0; reader < 2; reader++) {
        if (reader) setenv("HALO_STREAM_READER", "threads", 1);
        halo_expert_cache *c = make_cache(2 * n_layer, true);
        unsetenv("HALO_STREAM_READER");
        if (!c) continue;
        halo_expert_cache_step(c);
        int32_t want[2] = {1, 3};
        CHECK_INT(halo_expert_cache_prefetch(c, 1, want, 2), 2);
        CHECK_INT(halo_expert_cache_prefetch(c, 1, want, 2), 0); /* already on their way */
        int32_t ids[2] = {3, 1};
        halo_status st;
        halo_error err = {0};
        resolve_all(c, 1, ids, 2, &st, &err);
        CHECK_INT(st, HALO_OK);
        halo_expert_stats s;
        halo_expert_cache_stats(c, &s);
        CHECK_INT(s.prefetched, 2);
        CHECK_INT(s.prefetch_used, 2);
        CHECK_INT(s.misses, 2);
        CHECK_INT(s.hits, 0);
        CHECK_INT(s.predicted, 0);
        /* Guesses (predict): counted apart; one asked for, one not. */
        halo_expert_cache_step(c);
        int32_t guess[2] = {0, 2};
        CHECK_INT(halo_expert_cache_predict(c, 0, guess, 2), 2);
        int32_t asked[1] = {2};
        resolve_all(c, 0, asked, 1, &st, &err);
        CHECK_INT(st, HALO_OK);
        halo_expert_cache_drain(c);
        halo_expert_cache_step(c);
        halo_expert_cache_stats(c, &s);
        CHECK_INT(s.predicted, 2);
        CHECK_INT(s.predicted_used, 1);
        CHECK_INT(s.prefetched, 4);
        CHECK_INT(s.prefetch_used, 3);
        CHECK_INT(s.prefetch_unused, 1);
        halo_expert_cache_free(c);
    }
}

static void cached_experts_come_first_and_misses_follow(void) {
    for (int overlap = 0; overlap < 2; overlap++) {
        halo_expert_cache *c = make_cache(4 * n_layer, overlap);
        if (!c) continue;
        halo_status st;
        halo_error err = {0};
        int32_t first[1] = {2};
        resolve_all(c, 0, first, 1, &st, &err); /* expert 2 is now cached */
        CHECK_INT(st, HALO_OK);
        int32_t ids[3] = {0, 2, 1};
        const halo_expert_source *src = halo_expert_cache_source(c, 0);
        halo_expert_view views[3];
        uint32_t ready = 0;
        CHECK_INT(src->resolve(src, ids, 3, views, &ready, &err), HALO_OK);
        CHECK_INT(ids[0], 2); /* the cached one first */
        /* Without overlap every miss is read before anything goes back. */
        if (!overlap) CHECK_INT(ready, 3);
        CHECK(view_is_file(c, &views[0].down, 0, 2, 2));
        for (uint32_t i = 0; i < ready; i++)
            CHECK(view_is_file(c, &views[i].gate, 0, (uint32_t)ids[i], 0));
        if (ready < 3) {
            resolve_all(c, 0, ids + ready, 3 - ready, &st, &err);
            CHECK_INT(st, HALO_OK);
        }
        halo_expert_stats s;
        halo_expert_cache_stats(c, &s);
        CHECK_INT(s.requests, 4);
        CHECK_INT(s.hits, 1);
        CHECK_INT(s.misses, 3);
        CHECK(s.waited <= 3);
        halo_expert_cache_free(c);
    }
}

static void prefetch_keeps_to_its_share_and_lets_go_next_step(void) {
    halo_expert_cache *c = make_cache(n_layer, true); /* one slot per layer */
    if (!c) return;
    halo_expert_stats s;
    halo_expert_cache_stats(c, &s);
    uint32_t share = s.slots / n_layer < n_expert ? s.slots / n_layer : n_expert;
    int32_t all[64];
    for (uint32_t e = 0; e < n_expert && e < 64; e++)
        all[e] = (int32_t)e;
    halo_expert_cache_step(c);
    CHECK_INT(halo_expert_cache_prefetch(c, 0, all, n_expert), share);
    /* The next step lets go of the unasked prefetch (counted once its reads have ended); the
     * layer can read others then. */
    halo_expert_cache_drain(c);
    halo_expert_cache_step(c);
    halo_expert_cache_stats(c, &s);
    CHECK_INT(s.prefetch_unused, share);
    int32_t ids[2] = {(int32_t)n_expert - 1, (int32_t)n_expert - 2};
    halo_status st;
    halo_error err = {0};
    resolve_all(c, 0, ids, 2, &st, &err);
    CHECK_INT(st, HALO_OK);
    halo_expert_cache_free(c);
}

static void failed_prefetch_read_is_named_by_the_resolve_that_needs_it(void) {
    for (int reader = 0; reader < 2; reader++) {
        if (reader) setenv("HALO_STREAM_READER", "threads", 1);
        halo_expert_cache *c = make_cache(2 * n_layer, true);
        unsetenv("HALO_STREAM_READER");
        if (!c) continue;
        halo_expert_cache_step(c);
        halo_expert_cache_fail_read(c, 1); /* the prefetch's first read */
        int32_t want[1] = {2};
        CHECK_INT(halo_expert_cache_prefetch(c, 1, want, 1), 1);
        int32_t ids[1] = {2};
        halo_status st;
        halo_error err = {0};
        resolve_all(c, 1, ids, 1, &st, &err);
        CHECK_INT(st, HALO_E_IO);
        /* which of the expert's three reads is "first" depends on the reader's completion order */
        CHECK(strstr(err.message, "blk.1.ffn_") && strstr(err.message, "_exps.weight, expert 2"));
        CHECK_CONTAINS(err.message, "Input/output error");
        /* Asked again, it is read again, right. */
        resolve_all(c, 1, ids, 1, &st, &err);
        CHECK_INT(st, HALO_OK);
        /* A failed prefetch nobody asks for is dropped at the next step, never reported. */
        halo_expert_cache_fail_read(c, 1);
        want[0] = 3;
        CHECK_INT(halo_expert_cache_prefetch(c, 1, want, 1), 1);
        halo_expert_cache_drain(c);
        halo_expert_cache_step(c);
        ids[0] = 3;
        resolve_all(c, 1, ids, 1, &st, &err);
        CHECK_INT(st, HALO_OK);
        halo_expert_cache_free(c);
    }
}

int main(void) {
    load_model();
    if (g) {
        RUN(prefetched_experts_hold_the_files_bytes);
        RUN(cached_experts_come_first_and_misses_follow);
        RUN(prefetch_keeps_to_its_share_and_lets_go_next_step);
        RUN(failed_prefetch_read_is_named_by_the_resolve_that_needs_it);
    }
    for (uint32_t l = 0; l < n_layer; l++)
        for (int k = 0; k < 3; k++)
            free(file_bytes[l][k]);
    halo_gguf_close(g);
    return check_report();
}
