/* Memory placement: what memory a machine has (probe or profile), where every tensor of a model
 * goes (the plan), and the numbers behind that choice. A plan is built and printed before
 * anything is allocated; a plan that cannot be carried out in full is refused with the smallest
 * change that would make it fit. docs/memory.md explains the pools and every rule. */
#ifndef HALO_PLAN_H
#define HALO_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "halo/gguf.h"
#include "halo/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define HALO_GIB ((uint64_t)1 << 30)
#define HALO_MIB ((uint64_t)1 << 20)

/* Memory pools, fastest for the GPU first. */
typedef enum halo_pool_kind {
    HALO_POOL_DEVICE = 0, /* device-local: VRAM; on an AMD APU the carve-out plus GTT */
    HALO_POOL_GPU_HOST,   /* host memory the GPU reads directly: pinned / hipHostMalloc */
    HALO_POOL_MANAGED,    /* managed (unified) memory: pages migrate on demand */
    HALO_POOL_HOST,       /* plain host memory, for CPU compute */
    HALO_POOL_DISK,       /* not memory: tensors streamed from the model file */
    HALO_POOL_COUNT
} halo_pool_kind;

typedef enum halo_backend_kind {
    HALO_BACKEND_AUTO = 0, /* the machine's own GPU backend, else cpu */
    HALO_BACKEND_CPU,
    HALO_BACKEND_CUDA,
    HALO_BACKEND_HIP,
    HALO_BACKEND_VULKAN,
    HALO_BACKEND_METAL,
} halo_backend_kind;

typedef enum halo_weights_policy {
    HALO_WEIGHTS_AUTO = 0, /* fastest pool that fits, group by group */
    HALO_WEIGHTS_DEVICE,   /* every weight device-local, or refuse */
    HALO_WEIGHTS_HOST,     /* GPU-visible host memory (plain host for the CPU backend) */
    HALO_WEIGHTS_MANAGED,  /* managed memory */
    HALO_WEIGHTS_STREAM,   /* routed experts streamed from disk through an expert cache */
} halo_weights_policy;

typedef enum halo_gpu_vendor {
    HALO_GPU_NONE = 0,
    HALO_GPU_AMD,
    HALO_GPU_NVIDIA,
    HALO_GPU_APPLE,
    HALO_GPU_OTHER, /* known only through Vulkan: Intel, lavapipe (the Vulkan backend's) */
} halo_gpu_vendor;

/* A machine's memory, from the probe or a profile. Sizes in bytes; 0 = absent or unknown. */
typedef struct halo_machine {
    char name[64];    /* profile name, or "probed" */
    char source[256]; /* "profile profiles/x.json" or "probe of /" */
    char description[256];

    uint64_t host_total;                    /* MemTotal */
    uint64_t host_available;                /* MemAvailable, capped by the cgroup limit */
    uint64_t cgroup_limit;                  /* memory.max of our cgroup; 0 = none */
    uint64_t hugepage_size, hugepages_free; /* explicit hugepages (HugePages_Free pages) */
    double host_bandwidth_gbs;

    halo_gpu_vendor gpu_vendor;
    char gpu_name[64];
    bool gpu_integrated;            /* shares host RAM (APU, GB10, Apple) */
    uint32_t gpu_pci_device;        /* PCI device id when probed */
    uint64_t vram_total, vram_used; /* device-local memory (an APU's BIOS carve-out) */
    uint64_t gtt_total, gtt_used;   /* AMD: GPU-visible system memory the driver maps */
    uint64_t ttm_pages_limit;       /* AMD: ttm.pages_limit (4 KiB pages); 0 = unknown */
    uint64_t gpu_host_limit;        /* pinned host memory limit; 0 = host memory */
    bool has_managed;               /* managed memory usable (CUDA, HIP) */
    double device_bandwidth_gbs;

    char disk_kind[16];   /* "nvme", "ssd", "hdd", "tmpfs", ... or "" */
    char disk_fs[16];     /* filesystem of the model file */
    double disk_read_gbs; /* sequential read, measured or estimated */
    bool disk_read_estimated;
} halo_machine;

/* Reads the machine's memory from the kernel: /proc/meminfo, the cgroup, hugepages, AMD GPUs
 * under /sys/class/drm, ttm parameters, and the filesystem holding model_path (may be NULL).
 * Every path is read under root ("/" for the real machine; tests point it at a fake tree). */
halo_status halo_machine_probe(const char *root, const char *model_path, halo_machine *m,
                               halo_error *err);

/* Measures the sequential read speed of the disk holding path: 8 reads of 16 MiB spread over the
 * file, O_DIRECT where allowed (else with its page cache dropped first), and sets disk_read_gbs
 * (disk_read_estimated = false). Takes well under a second on an SSD. A sparse file reads its
 * holes without touching the disk, so measure a real model file. */
halo_status halo_machine_measure_disk(const char *path, halo_machine *m, halo_error *err);

/* Loads a machine profile: a name looked up in $HALO_PROFILES, the source tree's profiles/ and
 * ./profiles, or a path to a .json file. */
halo_status halo_machine_load_profile(const char *name, halo_machine *m, halo_error *err);

const char *halo_pool_name(halo_pool_kind kind);       /* "device", "gpu-host", ... */
const char *halo_backend_name(halo_backend_kind kind); /* "auto", "cpu", "hip", ... */
const char *halo_weights_name(halo_weights_policy p);  /* "auto", "device", ... */
halo_status halo_backend_parse(const char *s, halo_backend_kind *out, halo_error *err);
halo_status halo_weights_parse(const char *s, halo_weights_policy *out, halo_error *err);

/* Parses a size: a number with an optional unit. K/M/G/T and KiB/MiB/GiB/TiB are binary
 * (89G = 89 GiB); KB/MB/GB/TB are decimal; no unit means bytes. Fractions are allowed. */
halo_status halo_size_parse(const char *s, uint64_t *out, halo_error *err);

typedef struct halo_plan_options {
    uint64_t n_ctx;        /* context tokens; 0 = 32768 or the model's context_length if less */
    uint32_t n_seq;        /* sequences held at once, n_ctx tokens of state each (server
                            * slots); 0 = 1 */
    uint32_t n_batch;      /* tokens per forward (scratch estimate); 0 = 512 */
    uint32_t kv_elem_size; /* bytes per KV element; 0 = 4 (f32, the CPU backend's) */
    halo_backend_kind backend;
    halo_weights_policy weights;
    uint64_t expert_cache;   /* requested expert cache bytes; 0 = as large as fits */
    uint64_t host_reserve;   /* left to the OS and other programs; 0 = default */
    uint64_t device_reserve; /* left to the GPU runtime; 0 = default */
} halo_plan_options;

/* Applies HALO_WEIGHTS (auto|device|host|managed|stream) and HALO_FORCE_DEVICE_MEM (1 forces
 * device weights, 0 is off). Anything else is an error naming the variable; the two may not
 * contradict each other. Call before applying command-line flags, which win. */
halo_status halo_plan_options_from_env(halo_plan_options *o, halo_error *err);

/* Tensor roles the planner places as groups. */
typedef enum halo_group_role {
    HALO_ROLE_EMBED_OUTPUT = 0, /* token embedding, output head and its norm / HC mixer */
    HALO_ROLE_DENSE,            /* attention, norms, compressors, indexer, router, HC mixers */
    HALO_ROLE_SHARED_EXPERTS,
    HALO_ROLE_ROUTED_EXPERTS, /* one group per layer */
    HALO_ROLE_CONTEXT,        /* KV + compressor + indexer state for n_ctx tokens */
    HALO_ROLE_SCRATCH,        /* compute buffers for one batch */
    HALO_ROLE_EXPERT_CACHE,   /* when routed experts stream */
    HALO_ROLE_COUNT
} halo_group_role;

typedef struct halo_plan_group {
    halo_group_role role;
    int32_t layer; /* routed experts: the layer; -1 otherwise */
    uint64_t bytes;
    uint64_t tensors;
    halo_pool_kind pool;
} halo_plan_group;

typedef struct halo_plan_pool {
    halo_pool_kind kind;
    bool usable;       /* the backend can use it on this machine */
    uint64_t capacity; /* this pool's own limit (before reserves) */
    uint64_t reserve;  /* kept free for the GPU runtime (host: see host_reserve) */
    uint64_t planned;  /* bytes the plan puts here */
    uint64_t headroom; /* what is left, counting memory shared with other pools */
    char limit[160];   /* what sets the capacity ("ttm.pages_limit=16384000", ...) */
} halo_plan_pool;

#define HALO_PLAN_MAX_NOTES 8
#define HALO_PLAN_MAX_FIXES 4

typedef struct halo_plan {
    halo_machine machine;
    halo_plan_options options; /* as resolved: defaults filled in, backend chosen */
    uint64_t weight_bytes, n_tensors;
    uint64_t context_bytes, scratch_bytes;
    halo_plan_pool pools[HALO_POOL_COUNT];
    /* The host RAM budget that every pool but a discrete GPU's VRAM draws on (a byte counts
     * once): MemAvailable (or the cgroup's room), the OS reserve, what the plan takes. */
    uint64_t host_available, host_reserve, host_planned, host_headroom;
    halo_plan_group *groups; /* n_groups entries */
    size_t n_groups;
    uint8_t *tensor_pool; /* per tensor (gguf order): its halo_pool_kind */
    uint64_t expert_cache_requested, expert_cache_admitted;
    halo_pool_kind expert_cache_pool;
    bool refused;
    char reason[512]; /* why refused */
    /* Loud lines: every request admitted below what was asked, every placement that departs
     * from what the user may expect. */
    char notes[HALO_PLAN_MAX_NOTES][384];
    size_t n_notes;
    /* When refused: changes that were checked to make the plan fit, smallest first. */
    char fixes[HALO_PLAN_MAX_FIXES][256];
    size_t n_fixes;
} halo_plan;

/* Plans the model in g on machine m. A refusal is not an error: *out is set with refused and
 * reason filled. Errors are for unusable input (no deepseek4 metadata, a backend the machine
 * lacks). Caller frees *out with halo_plan_free. */
halo_status halo_plan_build(const halo_gguf *g, const halo_machine *m, const halo_plan_options *o,
                            halo_plan **out, halo_error *err);
void halo_plan_free(halo_plan *p);

/* The plan for people (a table with per-pool totals and headroom) or as JSON. Caller frees. */
char *halo_plan_format_text(const halo_plan *p);
char *halo_plan_format_json(const halo_plan *p);

/* ---- carrying a plan out: the arena and the loader (CPU pools for now) ------------------- */

typedef struct halo_load_progress {
    uint64_t done, total; /* bytes */
    double seconds;       /* since the first read */
} halo_load_progress;

/* Called on the loading thread, at most every 100 ms and once at the end (done == total). */
typedef void (*halo_load_progress_fn)(const halo_load_progress *p, void *user);

typedef struct halo_load_options {
    uint32_t threads;            /* reader threads; 0 = min(4, online CPUs) */
    bool no_direct;              /* never use O_DIRECT */
    halo_load_progress_fn progress;
    void *user;
} halo_load_options;

typedef struct halo_load_stats {
    uint64_t bytes_read;         /* file bytes read (tensor bytes + alignment padding) */
    uint64_t arena_bytes;        /* bytes mapped for the arena */
    double seconds;
    uint32_t threads;
    bool direct;                 /* O_DIRECT was used for every read */
    uint64_t cached_after;       /* file bytes still in the page cache afterwards (mincore) */
    uint64_t file_bytes;
} halo_load_stats;

typedef struct halo_mem_arena halo_mem_arena;

/* Allocates the host pool and reads every tensor whose tensor_pool entry is HALO_POOL_HOST
 * (tensor_pool NULL: every tensor) straight into its final place: large aligned reads, O_DIRECT
 * where the filesystem allows, several threads, and the file's page cache dropped behind the
 * reads. Tensors in other pools are left out (HALO_POOL_DISK: streamed later); a GPU pool is
 * HALO_E_UNSUPPORTED until that backend exists. On any failure (short read, I/O error,
 * allocation) everything is freed and the error names the tensor and why. */
halo_status halo_mem_arena_load(const halo_gguf *g, const uint8_t *tensor_pool,
                                const halo_load_options *o, halo_mem_arena **out,
                                halo_load_stats *stats, halo_error *err);
/* An arena over a GGUF image already in memory (a synthetic model made in place): tensor i
 * lives at base + its file offset. The arena takes the mapping (munmap(base, size) on free). */
halo_status halo_mem_arena_adopt(const halo_gguf *g, void *base, size_t size,
                                 halo_mem_arena **out, halo_error *err);
/* The bytes of tensor i (gguf order), or NULL when it was not loaded. */
const void *halo_mem_arena_tensor(const halo_mem_arena *a, uint64_t i);
void halo_mem_arena_free(halo_mem_arena *a);

#ifdef __cplusplus
}
#endif
#endif
