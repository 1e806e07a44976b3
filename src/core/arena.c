#include "core/arena.h"

#include <stdint.h>
#include <stdlib.h>

enum { ARENA_CHUNK = 1 << 20, ARENA_ALIGN = 16 };

struct halo_arena_chunk {
    halo_arena_chunk *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
};

void *halo_arena_alloc(halo_arena *a, size_t size) {
    size_t rounded = (size + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
    if (rounded < size) return NULL;
    halo_arena_chunk *c = a->head;
    if (!c || c->cap - c->used < rounded) {
        /* Large requests get a chunk of their own, placed behind the current one so its free
         * space stays usable. */
        size_t cap = rounded > ARENA_CHUNK / 4 ? rounded : ARENA_CHUNK;
        if (cap > SIZE_MAX - sizeof *c) return NULL;
        halo_arena_chunk *n = malloc(sizeof *n + cap);
        if (!n) return NULL;
        n->used = 0;
        n->cap = cap;
        if (c && cap == rounded) {
            n->next = c->next;
            c->next = n;
        } else {
            n->next = c;
            a->head = n;
        }
        c = n;
    }
    void *p = c->data + c->used;
    c->used += rounded;
    return p;
}

void halo_arena_free(halo_arena *a) {
    halo_arena_chunk *c = a->head;
    while (c) {
        halo_arena_chunk *next = c->next;
        free(c);
        c = next;
    }
    a->head = NULL;
}
