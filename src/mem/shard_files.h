/* A model's shard files as both loaders read them (src/mem/loader.c into the host arena,
 * src/mem/direct_load.c through staging buffers): each shard open twice, with O_DIRECT where the
 * filesystem allows it (no page-cache copy of the weights) and buffered as the fallback. */
#ifndef HALO_MEM_SHARD_FILES_H
#define HALO_MEM_SHARD_FILES_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "halo/gguf.h"
#include "halo/status.h"

typedef struct {
    const halo_gguf *g;
    uint32_t n;
    int *buffered, *direct; /* per shard; direct[s] is -1 where O_DIRECT was refused */
    atomic_bool buffered_only; /* O_DIRECT refused at an open or a read: everything buffered */
} halo_shard_files;

/* Opens every shard of g (regular files only). no_direct: buffered reads only. On failure the
 * files opened so far are closed again. */
halo_status halo_shard_files_open(halo_shard_files *f, const halo_gguf *g, bool no_direct,
                                  halo_error *err);

/* Reads len bytes at off of shard s into dst (block-aligned for O_DIRECT), retrying short and
 * interrupted reads, falling back to buffered reads for good when the filesystem refuses an
 * O_DIRECT one, and dropping the range from the page cache afterwards. Returns 0 or the errno of
 * the failed read; *got is the bytes read (less than len at the end of the file). */
int halo_shard_files_read(halo_shard_files *f, uint32_t s, uint64_t off, uint64_t len, void *dst,
                          uint64_t *got);

/* Whether every read so far went around the page cache. */
bool halo_shard_files_all_direct(const halo_shard_files *f);

/* Closes every shard; drop_cache also drops each whole file from the page cache (buffered
 * reads read ahead into tensors nobody asked for). */
void halo_shard_files_close(halo_shard_files *f, bool drop_cache);

/* Bytes of the file at path in the page cache (mincore over 1 GiB windows); *file_bytes gets its
 * size when not NULL. 0 when it cannot be read. */
uint64_t halo_file_cached_bytes(const char *path, uint64_t *file_bytes);

#endif
