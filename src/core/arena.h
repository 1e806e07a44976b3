/* Bump allocator for objects that all die together (a parsed GGUF header's strings and arrays).
 * Chunks are malloc'd as needed; nothing is freed until halo_arena_free. */
#ifndef HALO_CORE_ARENA_H
#define HALO_CORE_ARENA_H

#include <stddef.h>

typedef struct halo_arena_chunk halo_arena_chunk;

typedef struct halo_arena {
    halo_arena_chunk *head;
} halo_arena;

/* Returns size bytes aligned to 16, or NULL when out of memory. size 0 gives a valid pointer. */
void *halo_arena_alloc(halo_arena *a, size_t size);
/* Frees every chunk; the arena can be reused afterwards. */
void halo_arena_free(halo_arena *a);

#endif
