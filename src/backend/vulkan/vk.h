/* Internals of the Vulkan backend (backend.h on Vulkan 1.2 compute).
 *
 * The loader is opened with dlopen, so a binary built with Vulkan runs where there is none.
 * Every halo_buf is one VkBuffer (vk_memory.c): device-local memory for the device pool and
 * working memory (mapped where the device makes it host-visible: integrated GPUs, resizable
 * BAR, lavapipe; otherwise filled and read through a staging buffer), host-visible memory for
 * the gpu-host pool, or host memory the caller owns imported with VK_EXT_external_memory_host
 * (buf_wrap_host: the loader's arena, used where it lies). Ops record dispatches into one command
 * buffer, each followed by a compute-to-compute barrier, so ops run in order and may reuse one
 * scratch buffer; the buffer is submitted at sync, before host access, or after a bounded number of
 * dispatches so no single submission runs long. Buffers freed while recorded work may still use
 * them are released after the next wait.
 *
 * Shaders (shaders/NAME.comp) are compiled by glslc at build time and embedded as SPIR-V. All
 * share one descriptor layout. Its binding 0, the weight, is an array of VK_CHUNKS storage-
 * buffer descriptors: a weight larger than one descriptor may cover (maxStorageBufferRange, at
 * most 2 GiB) is bound as up to VK_CHUNKS consecutive ranges, each holding a whole number of
 * rows (or experts); a smaller one repeats one descriptor. Other bindings are one descriptor.
 * Quantized weights are read as 32-bit words and decoded inside the dot (quant.glsl);
 * accumulation is f32, as in the CPU backend's precise mode. */
#ifndef HALO_BACKEND_VULKAN_VK_H
#define HALO_BACKEND_VULKAN_VK_H

#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

#include "backend/backend.h"

/* Binding 0 (weights) is an array of VK_CHUNKS descriptors; bindings 1 .. VK_MAX_BINDINGS-1
 * are single descriptors; VK_GRID_BINDING holds the IQ2_XXS codebook. 8 + 11 + 1 = 20 storage
 * buffers per stage, within lavapipe's 32. */
enum { VK_CHUNKS = 8, VK_MAX_BINDINGS = 12, VK_GRID_BINDING = 12, VK_PUSH_BYTES = 128 };
/* A specialised pipeline's key: the low 6 bits are the shader's constant 0 (a weight type, or
 * matvec_q8's variant), bits 6-8 its constant 1 (the matvecs' mode: the fused norm, SwiGLU on
 * the load, matvec_moe's weighted sum). */
enum {
    VK_TYPED_KEYS = 1024,
    VK_KEY_NORM = 64,
    VK_KEY_SWIGLU = 128,
    VK_KEY_SUM = 256,
    VK_KEY_ROPE = 512
};

/* Vulkan entry points, loaded through vkGetInstanceProcAddr / vkGetDeviceProcAddr. */
#define HALO_VK_INSTANCE_FNS(X)                                                                    \
    X(vkDestroyInstance)                                                                           \
    X(vkEnumeratePhysicalDevices)                                                                  \
    X(vkGetPhysicalDeviceProperties)                                                               \
    X(vkGetPhysicalDeviceProperties2)                                                              \
    X(vkGetPhysicalDeviceFeatures2)                                                                \
    X(vkGetPhysicalDeviceMemoryProperties)                                                         \
    X(vkGetPhysicalDeviceQueueFamilyProperties)                                                    \
    X(vkEnumerateDeviceExtensionProperties)                                                        \
    X(vkCreateDevice)                                                                              \
    X(vkGetDeviceProcAddr)
#define HALO_VK_DEVICE_FNS(X)                                                                      \
    X(vkDestroyDevice)                                                                             \
    X(vkGetDeviceQueue)                                                                            \
    X(vkCreateBuffer)                                                                              \
    X(vkDestroyBuffer)                                                                             \
    X(vkGetBufferMemoryRequirements)                                                               \
    X(vkAllocateMemory)                                                                            \
    X(vkFreeMemory)                                                                                \
    X(vkBindBufferMemory)                                                                          \
    X(vkMapMemory)                                                                                 \
    X(vkCreateShaderModule)                                                                        \
    X(vkDestroyShaderModule)                                                                       \
    X(vkCreateDescriptorSetLayout)                                                                 \
    X(vkDestroyDescriptorSetLayout)                                                                \
    X(vkCreatePipelineLayout)                                                                      \
    X(vkDestroyPipelineLayout)                                                                     \
    X(vkCreateComputePipelines)                                                                    \
    X(vkDestroyPipeline)                                                                           \
    X(vkCreateDescriptorPool)                                                                      \
    X(vkDestroyDescriptorPool)                                                                     \
    X(vkResetDescriptorPool)                                                                       \
    X(vkAllocateDescriptorSets)                                                                    \
    X(vkUpdateDescriptorSets)                                                                      \
    X(vkCreateCommandPool)                                                                         \
    X(vkDestroyCommandPool)                                                                        \
    X(vkAllocateCommandBuffers)                                                                    \
    X(vkBeginCommandBuffer)                                                                        \
    X(vkEndCommandBuffer)                                                                          \
    X(vkResetCommandBuffer)                                                                        \
    X(vkCmdBindPipeline)                                                                           \
    X(vkCmdBindDescriptorSets)                                                                     \
    X(vkCmdPushConstants)                                                                          \
    X(vkCmdDispatch)                                                                               \
    X(vkCmdPipelineBarrier)                                                                        \
    X(vkCmdCopyBuffer)                                                                             \
    X(vkCmdFillBuffer)                                                                             \
    X(vkCreateFence)                                                                               \
    X(vkDestroyFence)                                                                              \
    X(vkResetFences)                                                                               \
    X(vkWaitForFences)                                                                             \
    X(vkQueueSubmit)                                                                               \
    X(vkDeviceWaitIdle)                                                                            \
    X(vkCreateQueryPool)                                                                           \
    X(vkDestroyQueryPool)                                                                          \
    X(vkCmdResetQueryPool)                                                                         \
    X(vkCmdWriteTimestamp)                                                                         \
    X(vkGetQueryPoolResults)

/* Device entry points of optional extensions (NULL when the extension is absent). */
#define HALO_VK_OPTIONAL_FNS(X) X(vkGetMemoryHostPointerPropertiesEXT)

typedef struct vk_fns {
#define X(name) PFN_##name name;
    HALO_VK_INSTANCE_FNS(X)
    HALO_VK_DEVICE_FNS(X)
    HALO_VK_OPTIONAL_FNS(X)
#undef X
} vk_fns;

/* The shaders, in the order of the embedded SPIR-V table (vk_pipelines.c). */
typedef enum vk_kernel {
    VK_K_EMBED,
    VK_K_MATMUL,
    VK_K_RMS_NORM,
    VK_K_ROPE,
    VK_K_HC_PRE,
    VK_K_HC_POST,
    VK_K_ATTENTION,
    VK_K_POOL,
    VK_K_POOL_SAVE,
    VK_K_TOPK_SCORE,
    VK_K_TOPK_SELECT,
    VK_K_MOE_ROUTE,
    VK_K_MOE_SWIGLU,
    VK_K_MOE_SUM,
    VK_K_QUANT_Q8,    /* fast mode: activations to Q8_0 */
    VK_K_MATMUL_Q8,   /* fast mode: Q8_0 weights by integer dot products */
    VK_K_MATVEC,      /* a few columns (decode, routed experts): 8 weights a lane */
    VK_K_HC_MIX,      /* hc_pre's projection, in parallel chunks */
    VK_K_MATVEC_WIDE, /* matvec with a workgroup per row (few rows) */
    VK_K_MATVEC_Q8,   /* Q8_0 decode: several rows per lane group (specialised by variant) */
    VK_K_MATVEC_MOE,  /* IQ2_XXS / Q2_K (routed experts): a sub-block per lane, rows per WG */
    VK_K_NORM_ROPE,   /* a deferred per-head norm and the rope after it, in one dispatch */
    VK_K_MATVEC_Q8S,  /* Q8_0 decode staged by 16-byte loads (specialised by rows a WG) */
    VK_K_COPY,        /* gathered buffer copies as a dispatch (vk_copy_flush) */
    VK_K_MOEQ,        /* fast mode: one token's routed experts on int8 activations (vk_moeq.c) */
    VK_K_TOPK_SCORE_ROW, /* indexer scores: a row an invocation (head_dim <= 128) */
    VK_K_MOE_BUCKET,  /* a prefill's routed pairs grouped by expert for moe_mm (vk_moe_mm.c) */
    VK_K_MOE_MM,      /* a prefill's routed experts as a grouped matrix product */
    VK_K_ATTN_PART,   /* split-K decode attention: partials of row chunks (vk_attn_split.c) */
    VK_K_ATTN_COMB,   /* split-K decode attention: the partials merged with the sink */
    VK_K_MATMUL_Q8T,  /* fast mode's Q8_0 prefill projections, tiled (64 rows x 32 columns) */
    VK_K_COUNT
} vk_kernel;

/* Where a buffer's bytes live (halo_backend_vulkan_buf_memory reports it to tests). */
typedef enum vk_mem {
    VK_MEM_DEVICE_MAPPED = 1, /* device-local and host-visible: the host copies directly */
    VK_MEM_DEVICE_STAGED,     /* device-local only: host access through the staging buffer */
    VK_MEM_HOST,              /* host-visible memory allocated by the backend (gpu-host pool) */
    VK_MEM_IMPORTED,          /* the caller's host memory, imported (VK_EXT_external_memory_host) */
} vk_mem;

struct halo_buf {
    VkBuffer buffer;
    VkDeviceMemory memory;
    unsigned char *map; /* host view of byte 0 of the halo buffer; NULL when staged */
    uint64_t base;      /* bytes from the VkBuffer's start to byte 0 (an import starts on a page) */
    uint64_t vk_size;   /* the VkBuffer's size (>= base + size) */
    uint64_t size;
    vk_mem mem;
    struct halo_buf *next_free;   /* deferred release list */
    struct halo_buf *next_import; /* the backend's imported host ranges (vk_memory.c) */
};

/* A host-visible buffer that per-op host data (positions, tokens, frequencies) is copied into
 * while recording, reset after each wait. */
typedef struct vk_upload {
    halo_buf *buf;
    uint64_t used;
} vk_upload;

/* One command buffer of the submission ring (vk_submit.c): recorded, submitted without waiting,
 * and waited for only when the ring comes back to it or the queue must drain. Its descriptor
 * pools and timestamp queries belong to it until then. */
enum { VK_RING = 4, VK_PROF_LABELS = 160 };
typedef struct vk_slot {
    VkCommandBuffer cmd;
    VkFence fence;
    VkQueryPool stamps; /* [0] before the first command, [1 + i] after dispatch i, then the end */
    VkDescriptorPool *pools;
    uint32_t n_pools;
    bool pending;          /* submitted, not yet waited for */
    uint64_t seq;          /* submission number, 1-based */
    double work;           /* estimated work recorded in it */
    double t_submit;       /* host clock at submission (the rate without timestamps) */
    uint32_t n_stamps;     /* profile: dispatch stamps written */
    uint16_t *stamp_label; /* profile: the label of each */
} vk_slot;

/* A range a recorded command reads or writes (vk_hazard.c), in VkBuffer bytes. */
enum { VK_MAX_ACCESS = 96 };
typedef struct vk_access {
    VkBuffer buf;
    uint64_t off, end;
    bool write;
    const char *op, *kernel; /* HALO_VK_BARRIER_LOG: the command's label (set by vk_hazard) */
} vk_access;

/* Copies gathered into one command (vk_record.c). */
enum { VK_COPY_REGIONS = 64 };
typedef struct vk_copies {
    halo_buf *src, *dst;
    VkBufferCopy r[VK_COPY_REGIONS];
    uint32_t n;
} vk_copies;

/* A remembered copy (vk_copy_fwd.c): n bytes at d of dst equal those at s of src (offsets in
 * the VkBuffers). A piece of a copy to make instead: n bytes from s of src to `at` bytes into the
 * copy's destination. */
enum { VK_FWD_MAX = 16 };
typedef struct vk_fwd {
    halo_buf *dst;
    uint64_t d, n;
    halo_buf *src;
    uint64_t s;
} vk_fwd;
typedef struct vk_fwd_piece {
    halo_buf *src;
    uint64_t s, at, n;
} vk_fwd_piece;

typedef struct vk_backend {
    halo_backend base;
    void *lib; /* dlopen handle of the loader */
    vk_fns fn;
    VkInstance instance;
    VkPhysicalDevice phys;
    VkDevice device;
    VkQueue queue;
    uint32_t queue_family;
    VkPhysicalDeviceProperties props;
    VkPhysicalDeviceMemoryProperties mem_props;
    /* Memory types (vk_memory.c): device-local for the device pool and working memory
     * (device_mapped: host-visible too, so no staging), host-visible for the gpu-host pool. */
    uint32_t type_device, type_host;
    uint32_t type_device_staged; /* device-local, not host-visible (type_device when none) */
    bool device_mapped;
    bool stage_uncached_reads; /* large reads of uncached mapped memory by a GPU copy */
    bool stage_all_reads;      /* ... of any mapped device memory (HALO_VK_STAGED_READ=1) */
    bool has_host_import;      /* VK_EXT_external_memory_host enabled and not turned off */
    bool wrap_to_device;       /* buf_wrap_host copies into device memory (HALO_VK_IMPORT=device) */
    uint64_t import_align;     /* minImportedHostPointerAlignment */
    halo_buf *staging;         /* host-visible bounce buffer for staged device memory */
    halo_buf *imports;         /* imported host memory (the loader's pinned staging, its arena) */
    bool pinned_copy;          /* staged writes from imported memory by one GPU copy */
    uint64_t pinned_bytes;     /* bytes written that way (tests) */
    uint64_t max_range, max_alloc, max_buffer, align;
    uint32_t subgroup_size;
    bool has_int_dot; /* VK_KHR_shader_integer_dot_product offered */
    bool int_dot;     /* fast mode on a device that has them: Q8_0 projections by integer dots */
    bool matvec;      /* matvec.comp for a few columns (HALO_VK_MATVEC=0: matmul.comp only) */
    uint32_t matvec_rows; /* HALO_VK_MATVEC_ROWS: 1 a workgroup per row, 4 a subgroup; 0 auto */
    int32_t mvq8;         /* HALO_VK_MVQ8: Q8_0 decode by matvec_q8.comp: -1 auto, 0 off, else
                           * its variant (rows per lane group | 16: a workgroup per group | 32:
                           * two units in flight) */
    int32_t mvq8s;        /* HALO_VK_MVQ8S: matvec_q8s.comp where matvec_q8.comp would run:
                           * 0 off (default), -1 "auto" (two shapes), else its rows per
                           * workgroup (1, 2, 4, 8, 16) */
    bool fuse_norm;       /* matmul_multi folds its norm into the matvecs (HALO_VK_FUSE_NORM=0:
                           * a norm dispatch first) */
    uint32_t cvt;         /* 1: decode shaders turn weight bytes into floats through the
                           * exponent (2^23 + b), not by a conversion instruction (HALO_VK_CVT) */
    uint32_t moe_unroll;  /* matvec_moe.comp: pieces a lane loads at once, 1..4 (default 2,
                           * HALO_VK_MOE_UNROLL) */
    uint32_t moe_r;       /* matvec_moe.comp: rows a subgroup takes at once, 2 or 4
                           * (HALO_VK_MOE_R) */
    uint32_t moe_pre;     /* matvec_moe.comp: first loads ahead of the barriers (default;
                           * HALO_VK_MOE_PRE=0: not) */
    uint32_t mvmoe;       /* matvec_moe.comp's rows per workgroup for IQ2_XXS / Q2_K (default 8;
                           * HALO_VK_MVMOE=N sets it, 0: matvec.comp takes them) */
    uint32_t fuse_moe;    /* HALO_VK_FUSE_MOE: 2 (default) SwiGLU folded into the down
                           * projections' loads and the weighted sum into the routed down; 1
                           * the SwiGLU only; 0 neither (their own dispatches) */
    bool moeq;            /* HALO_VK_MOEQ: fast mode's routed experts of a decode token by
                           * moeq.comp (int8 activations; vk_moeq.c); 0: matvec_moe.comp */
    uint32_t moeq_rows_gu, moeq_rows_dn; /* HALO_VK_MOEQ_ROWS=GU:DN: rows a workgroup */
    uint32_t moeq_var;    /* HALO_VK_MOEQ_VAR: moeq.comp's variant bits (1: the IQ2_XXS sign
                           * masks from a table, 2: the codebook in 16 copies, 4: gate/up's x
                           * in registers, 8: with 4, the next row's loads ahead, 16: down's
                           * first loads before its quantization, 32: the quantization's
                           * loads at once) */
    int32_t attn_split;   /* HALO_VK_ATTN_SPLIT: decode attention's row chunks (vk_attn_split.c):
                           * -1 by row count, 0 off (attention.comp), else that many */
    uint32_t attn_heads;  /* heads a workgroup of attn_part.comp (HALO_VK_ATTN_SPLIT=N:G) */
    bool defer_norm;      /* HALO_VK_DEFER_NORM=0: every rms_norm recorded when called */
    bool defer_post;      /* HALO_VK_DEFER_POST=0: every hc_post recorded when called */
    bool defer_rope;      /* HALO_VK_DEFER_ROPE=0: every inverse rope recorded when called */
    uint32_t hc_slices;   /* HALO_VK_HC_SLICES: hc_pre's workgroups per token (GPU 16, CPU 1) */
    /* A norm the forward asked for and not yet recorded (vk_rms_norm): the next op takes it
     * (a rope of the same tensor folds it in; the MoE of it folds it into its first
     * projections) or records it first (vk_defer_flush: every op, copy, flush and free). */
    struct {
        bool on, has_w;
        halo_tensor x, w;
        uint32_t width;
        float eps;
    } pend_norm;
    /* The same for hc_post (vk_hc_post): the next site's hc_pre of the same streams folds it
     * into its own two dispatches. At most one of the two is pending. */
    struct {
        bool on;
        halo_tensor streams, y, post, comb;
    } pend_post;
    /* The same for an inverse rope (the attention output's): the projection of it (out_a)
     * rotates on its loads. cs: its cos/sin table, in host memory until used. */
    struct {
        bool on;
        halo_tensor x;
        float *cs;
        uint64_t cs_bytes;
        uint32_t n_rot;
    } pend_rope;

    VkDescriptorSetLayout set_layout;
    VkPipelineLayout pipe_layout;
    VkPipeline pipes[VK_K_COUNT];
    /* Shaders that decode weights (embed, matmul, hc_pre), specialised per weight type so only
     * that type's decoder is compiled in; made on first use. */
    VkPipeline typed[VK_K_COUNT][VK_TYPED_KEYS];
    VkDescriptorPool *pools;
    uint32_t n_pools, cur_pool;
    /* Descriptor sets kept across submissions (vk_record.c): a decode step binds the same
     * ranges in the same order every token, so a set written once is bound again instead of
     * allocated and written per dispatch. Keyed by the descriptors' contents; cleared when the
     * queue has drained after a buffer was destroyed (a new buffer may reuse its handle) or
     * when the table is full. HALO_VK_DSCACHE=0 turns it off. */
    struct vk_dsc_entry *dsc;
    uint32_t dsc_cap, dsc_n;
    bool dsc_on, dsc_stale;
    VkDescriptorPool *dsc_pools;
    uint32_t dsc_n_pools, dsc_cur_pool;
    uint64_t dsc_hits, dsc_misses;

    VkCommandPool cmd_pool;
    /* The ring; cmd, fence and pools alias the slot being recorded. */
    vk_slot ring[VK_RING];
    uint32_t slot;
    uint32_t since_drain; /* submissions since the queue last drained */
    bool async;      /* submit without waiting (HALO_VK_ASYNC=0: wait after every submission) */
    bool has_stamps; /* the queue writes timestamps: submissions timed on the GPU */
    double stamp_s;  /* seconds per timestamp tick */
    uint64_t stamp_mask;
    uint32_t stamp_cap; /* dispatch stamps per submission (profile) */
    VkCommandBuffer cmd;
    VkFence fence;
    bool recording;
    uint32_t n_dispatch; /* dispatches recorded since the last submission */
    uint32_t max_dispatch;
    uint32_t first_dispatch; /* the first submission's dispatches after a drain (doubling) */
    /* Time-bounded submissions (vk_submit.c): the bound, a forced chunk size (tests), seconds
     * per unit of work as measured, the recorded work and the next dispatch's estimate. */
    double submit_s, split_work, rate, queued_work, next_work;
    uint64_t n_submits;
    /* A lost device stays lost: every later submission fails naming it. HALO_VK_TEST_LOSE=N
     * treats the N-th submission (1-based) as if the device was lost there (tests). */
    bool lost;
    uint64_t lose_at;

    halo_buf *deferred; /* freed after the next wait */
    vk_copies copies;   /* recorded at the next dispatch or submission */
    bool copy_fwd;      /* HALO_VK_COPY_FWD=0: copies read what they are asked to */
    bool copy_shader;   /* HALO_VK_COPY_SHADER=0: gathered copies by vkCmdCopyBuffer only */
    bool hc_vec;        /* HALO_VK_HC_VEC=0: hc_mix.comp one element a step */
    bool score_row;     /* HALO_VK_SCORE_ROW=0: indexer scores by topk_score.comp only */
    bool moe_mm;        /* HALO_VK_MOE_MM=0: a prefill's routed experts by matvec_moe.comp */
    bool mm_q8t;        /* HALO_VK_MMQ8T=0: fast mode's Q8_0 prefill by matmul_q8.comp only */
    vk_fwd fwd[VK_FWD_MAX];
    uint32_t n_fwd;
    /* Ranges accessed since the last barrier (vk_hazard.c); HALO_VK_BARRIERS=all: a barrier
     * before every command. */
    vk_access access[VK_MAX_ACCESS];
    uint32_t n_access;
    bool barrier_all;
    bool barrier_none; /* HALO_VK_BARRIERS=none: no hazard barriers (measurement only) */
    bool barrier_log;  /* HALO_VK_BARRIER_LOG=1: each barrier's reason on stderr */
    const char *hazard_op, *hazard_kernel; /* the command vk_hazard checks (barrier_log) */
    const char *no_barrier; /* HALO_VK_NO_BARRIER: labels whose barriers are left out */
    bool barrier_host; /* HALO_VK_BARRIER_HOST=1: every barrier names the host (vk_hazard.c) */
    bool host_pending; /* a barrier without the host since the last one with it */
    /* A copy or fill recorded since the last barrier: only then does the next barrier wait for
     * the transfer stage (HALO_VK_BARRIER_XFER=1: always, as before session 8; vk_hazard.c). */
    bool weights_staged; /* the device pool not host-visible (HALO_VK_WEIGHT_MEM) */
    bool xfer_pending, barrier_xfer;
    uint64_t n_barriers;
    uint64_t n_host_barriers; /* those naming the host (counted in n_barriers or not) */
    uint64_t n_xfer_barriers; /* those waiting for the transfer stage (the same) */
    vk_upload upload;
    halo_buf *scratch; /* grown on demand; ops are serialised by barriers, so it is shared */
    halo_buf *grid;    /* IQ2_XXS codebook */
    halo_buf *qact;    /* fast mode: activations quantized to Q8_0 (grown on demand) */

    /* HALO_VK_PROFILE=1: a timestamp after every dispatch; each dispatch's GPU time (from the
     * previous stamp: its barrier included) is added to its label (op/shader/type), printed to
     * stderr when the backend is destroyed. Nothing waits more than without it. */
    bool profile;
    bool prof_tag;    /* HALO_VK_PROFILE=3: decode steps' labels apart ("1:" before them) */
    bool prof_decode; /* the forward being recorded takes one token (vk_embed sets it) */
    /* HALO_VK_SKIP (measurement only, wrong results): dispatches whose "op/kernel" starts
     * with one of these comma-separated prefixes are not recorded, so a run's speed without
     * them shows what they and their barriers cost inside the whole step */
    const char *skip;
    /* HALO_VK_PROFILE=2: no per-dispatch stamps, only the totals (submissions, dispatches,
     * barriers, GPU busy from the stamps around each submission, the host's waits), so the
     * dispatches overlap as they do without it: whether the GPU or the host bounds a step. */
    bool stats;
    uint64_t n_dispatch_total;
    double wait_s;
    uint32_t n_labels;
    char prof_name[VK_PROF_LABELS][40];
    double prof_s[VK_PROF_LABELS];
    uint64_t prof_n[VK_PROF_LABELS];
    /* each label's dispatch times (us), for the percentiles the profile prints: a mean hides
     * a time that is bimodal (the MoE call's, session 7) */
    float *prof_samp[VK_PROF_LABELS];
    uint32_t prof_cap[VK_PROF_LABELS], prof_kept[VK_PROF_LABELS];
    double prof_gpu_s, prof_wall0, prof_wall1;

    halo_status failed; /* first failure since the last sync */
    char failed_msg[400];
} vk_backend;

static inline vk_backend *vk_of(halo_backend *be) {
    return (vk_backend *)be;
}

/* Called after each copy or fill command is recorded (the next barrier waits for transfers). */
static inline void vk_note_transfer(vk_backend *vb) {
    vb->xfer_pending = true;
}

/* Remembers the first failure (an op that cannot bind or allocate, a device error) for sync. */
void vk_fail(vk_backend *vb, halo_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* vk_memory.c. vk_buf_create makes working memory (device-local), vk_buf_create_in memory of
 * one kind (VK_MEM_DEVICE_* or VK_MEM_HOST), zeroed. */
void vk_memory_choose(vk_backend *vb);
halo_status vk_buf_create(vk_backend *vb, uint64_t bytes, halo_buf **out, halo_error *err);
halo_status vk_buf_create_in(vk_backend *vb, vk_mem mem, uint64_t bytes, halo_buf **out,
                             halo_error *err);
void vk_buf_destroy(vk_backend *vb, halo_buf *b);
halo_status vk_buf_alloc(halo_backend *be, uint64_t bytes, halo_buf **out, halo_error *err);
halo_status vk_buf_alloc_pool(halo_backend *be, uint32_t pool, uint64_t bytes, halo_buf **out,
                              halo_error *err);
void vk_buf_free(halo_backend *be, halo_buf *b);
halo_status vk_buf_wrap_host(halo_backend *be, void *data, uint64_t bytes, halo_buf **out,
                             halo_error *err);
halo_status vk_buf_write(halo_backend *be, halo_buf *b, uint64_t offset, const void *src,
                         uint64_t n, halo_error *err);
halo_status vk_buf_read(halo_backend *be, const halo_buf *b, uint64_t offset, void *dst, uint64_t n,
                        halo_error *err);

/* vk_device.c */
const char *vk_result_name(VkResult r);
/* Whether HALO_VK_TEST_HIDE names `feature` (the device is treated as lacking it: tests). */
bool vk_test_hides(const char *feature);

/* vk_submit.c: submission and its time bound. */
void vk_submit_init(vk_backend *vb);
/* The ring's command buffers, fences and timestamp queries (after the device and its command
 * pool exist), and their release. */
halo_status vk_submit_create(vk_backend *vb, halo_error *err);
void vk_submit_destroy(vk_backend *vb);
/* Submits what was recorded and waits for everything submitted (the queue drains); releases
 * deferred buffers. */
halo_status vk_flush(vk_backend *vb, halo_error *err);
/* Whether submitted work may still be running (buffers it uses must not change or go). */
bool vk_in_flight(const vk_backend *vb);
/* Profile: a timestamp after the dispatch just recorded, labelled op/kernel/type. */
void vk_profile_stamp(vk_backend *vb, const char *op, const char *kernel, uint32_t type);
void vk_profile_print(vk_backend *vb);
void vk_release_deferred(vk_backend *vb);
/* The next dispatch's work in multiply-adds (else estimated from its workgroup count). */
void vk_note_work(vk_backend *vb, double work);
/* Before recording a dispatch of `work`: submits what is recorded when adding it would pass
 * the time bound. False when that submission failed (recorded for sync). */
bool vk_submit_bound(vk_backend *vb, double work);
/* How many of n_units (a multiple of granule, or all) one dispatch may take when each unit is
 * work_per_unit multiply-adds, so no dispatch runs longer than half the bound. */
uint32_t vk_chunk(const vk_backend *vb, double work_per_unit, uint32_t n_units, uint32_t granule);

/* vk_hazard.c: a barrier before a command only where it meets work since the last one. */
void vk_hazard_init(vk_backend *vb);
uint32_t vk_kernel_writes(vk_kernel k);
/* HALO_VK_MVQ8's value as vk_backend.mvq8: unset or "auto" -1, "0" 0 (off), "R" (1..4) that
 * many rows per subgroup, "Rw" R rows per workgroup, a "u" after either: two units in flight
 * per lane; anything else -1. */
int32_t vk_mvq8_parse(const char *v);
/* Records a barrier (everything before it done and visible to everything after). */
void vk_barrier(vk_backend *vb);
void vk_barrier_if_pending(vk_backend *vb);
void vk_barrier_end(vk_backend *vb); /* before a submission ends: the host's reads */
/* Before recording a command with these accesses: a barrier where one meets pending work. */
void vk_hazard(vk_backend *vb, const vk_access *acc, uint32_t n);

/* vk_record.c */
/* The descriptor-set cache: created with the backend, cleared (when stale or full) after the
 * queue drained, destroyed with it. */
void vk_dsc_init(vk_backend *vb);
void vk_dsc_drained(vk_backend *vb);
void vk_dsc_destroy(vk_backend *vb);
/* Records the gathered copies (before any other command). */
void vk_copy_flush(vk_backend *vb);
/* Starts recording into the command buffer when not already (false on failure, recorded). */
bool vk_begin_recording(vk_backend *vb);

/* vk_pipelines.c */
const char *vk_kernel_name(vk_kernel k);
halo_status vk_pipelines_create(vk_backend *vb, halo_error *err);
void vk_pipelines_destroy(vk_backend *vb);

/* vk_record.c: one dispatch. A binding is a tensor view (or a raw buffer range); `rows`,
 * `row_bytes` and `granule` describe how a large weight may be split into chunks: a chunk
 * holds a multiple of `granule` rows. The element/byte offset of the view inside its chunk's
 * descriptor is returned in rel (bytes), and rows per chunk in chunk_rows. */
typedef struct vk_binding {
    halo_buf *buf;
    uint64_t offset, bytes;      /* the range the shader reads or writes */
    uint64_t row_bytes, granule; /* 0: never split */
} vk_binding;

typedef struct vk_bound {
    uint32_t rel;        /* bytes from the descriptor's start to the view's start */
    uint32_t chunk_rows; /* rows per chunk (0 when not split) */
} vk_bound;

vk_binding vk_bind_tensor(const halo_tensor *t);
vk_binding vk_bind_weight(const halo_tensor *t, uint64_t granule);
/* Bytes of host data copied into the upload buffer; returns a binding of it (or a zero one on
 * failure, recorded for sync). */
vk_binding vk_upload_data(vk_backend *vb, const void *data, uint64_t bytes);
/* A scratch binding of `bytes` at byte offset `off` of the shared scratch buffer, which
 * vk_scratch_reserve must have sized first. */
bool vk_scratch_reserve(vk_backend *vb, uint64_t bytes, const char *op);
/* The same for another grown buffer (*slot: scratch, qact). */
bool vk_reserve(vk_backend *vb, halo_buf **slot, uint64_t bytes, const char *op);
vk_binding vk_scratch_at(vk_backend *vb, uint64_t off, uint64_t bytes);

/* Starts an op that will upload `upload_bytes` of host data: submits first when the upload
 * buffer would overflow or enough dispatches are queued (so no submission runs long), never
 * between an op's uploads and its dispatches. False when that submission failed. */
bool vk_op_begin(vk_backend *vb, uint64_t upload_bytes);

/* Whether "op/kernel" starts with one of the comma-separated prefixes in list (the labels of
 * HALO_VK_SKIP and HALO_VK_NO_BARRIER). */
bool vk_label_in(const char *list, const char *op, const char *kernel);
/* Records kernel k over groups (x, y, z) with the given bindings and push constants. Fills
 * bound[i] for each binding. Returns false (after recording a failure) when something cannot
 * be bound; the dispatch is then skipped. */
bool vk_dispatch(vk_backend *vb, vk_kernel k, const char *op, const vk_binding *b, uint32_t n,
                 vk_bound *bound, const void *push, uint32_t push_bytes, uint32_t gx, uint32_t gy,
                 uint32_t gz);
/* The same with an explicit pipeline (a specialised variant of kernel k). */
bool vk_dispatch_pipe(vk_backend *vb, vk_kernel k, VkPipeline pipe, const char *op,
                      const vk_binding *b, uint32_t n, vk_bound *bound, const void *push,
                      uint32_t push_bytes, uint32_t gx, uint32_t gy, uint32_t gz);
/* Kernel k's pipeline for weight type `type` (made on first use; VK_NULL_HANDLE on failure,
 * recorded for sync); `type` is a key (VK_TYPED_KEYS). */
VkPipeline vk_typed_pipeline(vk_backend *vb, vk_kernel k, uint32_t type);

/* Resolves bindings' offsets without recording (to fill push constants before dispatch). */
bool vk_resolve(vk_backend *vb, const char *op, const vk_binding *b, uint32_t n, vk_bound *bound);

/* vk_ops.c / vk_ops_model.c */
void vk_embed(halo_backend *be, const halo_tensor *table, const int32_t *tokens, halo_tensor *out);
void vk_matmul(halo_backend *be, const halo_tensor *w, const halo_tensor *x, uint32_t groups,
               halo_tensor *out);
void vk_matmul_multi(halo_backend *be, const halo_tensor *x, const halo_tensor *norm, float eps,
                     uint32_t n, const halo_tensor *const *w, halo_tensor *const *out);
void vk_rms_norm(halo_backend *be, halo_tensor *x, uint32_t width, const halo_tensor *weight,
                 float eps);
/* The norm now (vk_rms_norm may defer it to the next op). */
void vk_norm_now(vk_backend *vb, halo_tensor *x, uint32_t width, const halo_tensor *weight,
                 float eps);
/* Records the deferred norm or hc_post, if any (before anything that could see its input). */
void vk_defer_flush(vk_backend *vb);
/* Whether the deferred op reads or writes buffer b. */
bool vk_defer_uses(const vk_backend *vb, const halo_buf *b);
/* Whether two views are the same one. */
bool vk_same_view(const halo_tensor *a, const halo_tensor *b);
/* A rope by the cos/sin table cs (rope.comp) now. */
void vk_rope_now(vk_backend *vb, halo_tensor *x, const float *cs, uint64_t cs_bytes, uint32_t n_rot,
                 bool inverse);
/* Copy forwarding (vk_copy_fwd.c): forget everything; forget what touches [off, end) of buf
 * (it is being written); remember a copy; the pieces [s, s + n) of src came from (0: not all of
 * it is remembered, copy it as it is). */
void vk_fwd_clear(vk_backend *vb);
void vk_fwd_written(vk_backend *vb, VkBuffer buf, uint64_t off, uint64_t end);
void vk_fwd_add(vk_backend *vb, halo_buf *dst, uint64_t d, halo_buf *src, uint64_t s, uint64_t n);
uint32_t vk_fwd_resolve(const vk_backend *vb, const halo_buf *src, uint64_t s, uint64_t n,
                        vk_fwd_piece *out, uint32_t max);
/* hc_post now (vk_hc_post may defer it to the next op). */
void vk_hc_post_now(vk_backend *vb, halo_tensor *streams, const halo_tensor *y,
                    const halo_tensor *post, const halo_tensor *comb);
/* Whether the deferred norm is of exactly this tensor. */
bool vk_norm_pending_on(const vk_backend *vb, const halo_tensor *x);
void vk_rope(halo_backend *be, halo_tensor *x, const int32_t *pos, const halo_rope *rope,
             bool inverse);
void vk_copy(halo_backend *be, halo_tensor *dst, const halo_tensor *src);
void vk_hc_pre(halo_backend *be, const halo_hc_args *a);
void vk_hc_post(halo_backend *be, halo_tensor *streams, const halo_tensor *y,
                const halo_tensor *post, const halo_tensor *comb);
void vk_attention(halo_backend *be, const halo_attn_args *a);
void vk_pool(halo_backend *be, const halo_pool_args *a);
void vk_topk(halo_backend *be, const halo_topk_args *a);
void vk_moe(halo_backend *be, const halo_moe_args *a);

/* vk_moeq.c: fast mode's routed experts of a decode token on int8 activations (moeq.comp) in two
 * dispatches: gate/up with the SwiGLU into h (pairs x n_ff); down with the weighted sum (+ ys
 * when its buffer is given) into out. vk_moeq_init reads
 * HALO_VK_MOEQ (default VK_MOEQ_DEFAULT), HALO_VK_MOEQ_VAR and HALO_VK_MOEQ_ROWS. On by default
 * (H200 requests moeq-1 and -3: one cold MoE call 71-72 us against 144-145, tg64 at 24 layers
 * 114.2 against 93.1); no variant was faster than 0 (bench/vulkan/RESULTS.md, session 10). */
enum { VK_MOEQ_DEFAULT = 1, VK_MOEQ_VAR_DEFAULT = 0 };
void vk_moeq_init(vk_backend *vb);
/* vk_attn_split.c: split-K attention for a few tokens. vk_attn_split_init reads
 * HALO_VK_ATTN_SPLIT; vk_attn_split records the call and returns true, or returns false
 * (attention.comp takes it: many tokens, or the knob is 0). */
void vk_attn_split_init(vk_backend *vb);
bool vk_attn_split(vk_backend *vb, const halo_attn_args *a);
bool vk_moeq_fits(vk_backend *vb, const halo_moe_args *a, uint32_t n_tok, vk_binding x);
void vk_moeq_gu(vk_backend *vb, const halo_moe_args *a, uint32_t n_tok, vk_binding x,
                vk_binding sel, vk_binding h);
void vk_moeq_dn(vk_backend *vb, const halo_moe_args *a, uint32_t n_tok, vk_binding h,
                vk_binding sel, vk_binding wts, vk_binding ys, vk_binding out);

/* vk_moe_mm.c: a prefill's routed experts as grouped matrix products (moe_bucket.comp then
 * moe_mm.comp, HALO_VK_MOE_MM=0 turns it off: matvec_moe.comp a pair at a time). Whether it
 * takes this call; the scratch it needs (vk_take'n by vk_moe); the bucketing; one projection of
 * every pair, out[pair][row] = W_expert(pair) · x[pair / x_col_div]. */
enum { VK_MOE_MM_BN = 16, VK_MOE_MM_MIN_TOK = 5 };
bool vk_moe_mm_fits(vk_backend *vb, const halo_moe_args *a, uint32_t n_tok);
uint32_t vk_moe_mm_tiles(uint32_t pairs, uint32_t n_expert);
void vk_moe_mm_bucket(vk_backend *vb, vk_binding sel, uint32_t pairs, uint32_t n_expert,
                      vk_binding order, vk_binding tiles);
void vk_moe_mm(vk_backend *vb, const halo_tensor *w, vk_binding x, uint32_t x_col_stride,
               uint32_t x_col_div, vk_binding out, uint32_t pairs, uint32_t n_expert,
               vk_binding order, vk_binding tiles);

/* Whether the shaders decode a weight type. */
bool vk_type_supported(uint32_t type);

#endif
