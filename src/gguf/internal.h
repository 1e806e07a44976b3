/* Internals shared by the GGUF reader's files (parse, open, getters). */
#ifndef HALO_GGUF_INTERNAL_H
#define HALO_GGUF_INTERNAL_H

#include "core/arena.h"
#include "core/strmap.h"
#include "halo/gguf.h"

/* GGUF magic "GGUF" read as a little-endian u32. */
#define GGUF_MAGIC 0x46554747u

/* Sanity caps on single header allocations, so a corrupt length inside a genuinely huge file
 * cannot make halo allocate and read gigabytes of tensor data as "metadata". Real DeepSeek V4
 * headers are a few MiB (the largest arrays are the 129,280-entry vocabulary and merges). */
#define GGUF_MAX_STRING_BYTES (256ull << 20)
#define GGUF_MAX_ARRAY_BYTES (1ull << 30)

/* Where a shard's bytes come from: a file descriptor or an in-memory image. */
typedef struct gguf_source {
    int fd;                /* -1 for memory images */
    const unsigned char *mem;
    uint64_t size;
    const char *name;      /* path or "<memory>", for messages */
} gguf_source;

/* One parsed shard: its metadata and tensors (tensor file offsets are absolute). */
typedef struct gguf_shard {
    gguf_source src;
    uint32_t version, alignment;
    uint64_t data_offset;
    uint64_t n_kv, n_tensors;
    halo_gguf_kv *kvs;
    halo_gguf_tensor *tensors;
} gguf_shard;

struct halo_gguf {
    halo_arena arena;
    uint32_t n_shards;
    gguf_shard *shards;
    /* Model view: metadata of shard 0, tensors of every shard. */
    uint64_t n_kv, n_tensors;
    halo_gguf_kv *kvs;
    halo_gguf_tensor *tensors;
    halo_strmap kv_index, tensor_index;
};

/* Parses and validates one shard image; allocations go to arena. `shard_index` is stored in
 * each tensor. Errors name the source. */
halo_status gguf_parse_shard(gguf_shard *shard, uint32_t shard_index, halo_arena *arena,
                             halo_error *err);

/* Reads exactly n bytes at offset (handles short reads and EINTR). */
halo_status gguf_source_read(const gguf_source *src, uint64_t offset, void *dst, uint64_t n,
                             halo_error *err);

/* Byte size of one element of a scalar metadata type; 0 for string/array/unknown. */
size_t gguf_vtype_size(uint32_t type);

#endif
