/* Internals of the CUDA backend (also built as HIP, see gpu.h): buffers, the stream, op
 * scratch, error recording, and device helpers shared by the kernels.
 *
 * Every op is queued on one stream, so ops run in the order the forward calls them and an op's
 * scratch can be reused by the next op. A failed runtime call or launch is recorded (the first
 * one since the last sync, naming the op and the call) and later ops are skipped; sync reports
 * it. */
#ifndef HALO_BACKEND_CUDA_CUH
#define HALO_BACKEND_CUDA_CUH

#include <stdint.h>

#include "backend/cuda/gpu.h"

extern "C" {
#include "backend/backend.h"
#include "core/error.h"
#include "halo/types.h"
}

/* Where a buffer's memory lives (one of the plan's pools). */
enum cu_buf_kind { CU_DEVICE, CU_MANAGED, CU_HOST_ALLOC, CU_REGISTERED };

struct halo_buf {
    char *dev;  /* the pointer kernels use */
    void *host; /* host address of GPU-visible host memory, else NULL */
    uint64_t size;
    int kind; /* cu_buf_kind */
};

/* Row copies queued by the copy op and run as one kernel before the next op (the forward copies
 * KV window rows one at a time: one launch for many instead of a memcpy each). Passed to the
 * kernel by value. */
enum { CU_COPY_MAX = 96 };
typedef struct cu_copy_desc {
    char *dst;
    const char *src;
    uint64_t n;
} cu_copy_desc;
typedef struct cu_copy_batch {
    cu_copy_desc d[CU_COPY_MAX];
    int n;
    uint64_t max_n;
} cu_copy_batch;
/* Blocks per descriptor of a launch of the batch (grid.x): 16 x 256 16-byte pieces a block. */
static inline unsigned cu_copy_blocks(const cu_copy_batch *b) {
    const uint64_t blocks = (b->max_n + 16 * 256 - 1) / (16 * 256);
    return (unsigned)(blocks < 1024 ? (blocks ? blocks : 1) : 1024);
}
/* Thread i0 of a grid of `stride` threads' part of one queued copy (copy_batch_kernel's, and
 * rope_copy_kernel's in norm_rope.cu). */
static __device__ __forceinline__ void cu_copy_part(const cu_copy_desc &d, uint64_t i0,
                                                    uint64_t stride) {
    if ((((uintptr_t)d.dst | (uintptr_t)d.src | d.n) & 15) == 0) {
        uint4 *o = (uint4 *)d.dst;
        const uint4 *in = (const uint4 *)d.src;
        for (uint64_t i = i0; i < d.n / 16; i += stride)
            o[i] = in[i];
    } else if ((((uintptr_t)d.dst | (uintptr_t)d.src | d.n) & 3) == 0) {
        uint32_t *o = (uint32_t *)d.dst;
        const uint32_t *in = (const uint32_t *)d.src;
        for (uint64_t i = i0; i < d.n / 4; i += stride)
            o[i] = in[i];
    } else {
        for (uint64_t i = i0; i < d.n; i += stride)
            d.dst[i] = d.src[i];
    }
}

/* A one-token hc_post not launched yet (hc.cu): the next hc_pre of the same streams runs it in
 * its first kernel; any other op, copy, buffer call or sync launches it first (cu_hc_flush). */
typedef struct cu_hc_pending {
    bool on;
    float *streams;
    const float *y, *post, *comb;
    int64_t n_embd;
    bool sum; /* y is the pending moe sum's output (be->sp): the kernel makes y itself */
} cu_hc_pending;

/* A one-token moe's weighted sum of its slots' outputs (in the moe's op scratch, which ends at
 * scratch_end) not launched yet (moe.cu): the hc_post of its output (then the next hc_pre) makes
 * it; anything else launches it first (cu_sum_flush). */
typedef struct cu_sum_pending {
    bool on;
    const float *y, *weight;
    uint32_t slots;
    int64_t n_embd;
    float *out;
    uint64_t scratch_end;
} cu_sum_pending;

/* An rms_norm of a few rows not launched yet (norm_rope.cu): a rope of the same tensor right
 * after it runs both in one kernel; anything else launches it first (cu_norm_flush). */
typedef struct cu_norm_pending {
    bool on;
    float *x;
    const float *w;
    int64_t rows, width;
    float eps;
} cu_norm_pending;

/* Host ints for a kernel by value (cu_ints_pass, below) and rotary inverse frequencies (as the
 * CPU backend computes them, cu_rope_freq_make below). */
enum { CU_INTS = 16 };
typedef struct cu_ints {
    int32_t v[CU_INTS];
} cu_ints;
enum { CU_MAX_ROT_PAIRS = 256 };
typedef struct cu_rope_freq {
    float inv_freq[CU_MAX_ROT_PAIRS];
    uint32_t n_rot;
} cu_rope_freq;

/* A norm + rope (norm_rope.cu) not launched yet (HALO_CUDA_NRPAIR): the next op's norm + rope
 * of other rows runs with it in one launch; anything else launches it first (cu_norm_flush).
 * Positions by value only. */
typedef struct cu_norm_rope_pending {
    bool on;
    float *x;
    const float *w;
    int64_t width;
    float eps;
    int64_t n_head;
    cu_ints pos;
    cu_rope_freq f;
    bool inverse;
    unsigned rows;
} cu_norm_rope_pending;

/* Device counters of kernels whose last block does the rest (it resets the counter, so a
 * graph replays them). */
enum {
    CU_CTR_ROUTE = 0,
    CU_CTR_MOEQ = 64, /* .. 64 + CU_MOEQ_CTRS: one-token moe's h chunks (moe_gu.cuh) */
    CU_MOEQ_CTRS = 128,
    CU_CTR_ATT = CU_CTR_MOEQ + CU_MOEQ_CTRS, /* decode attention split over blocks: one a
                                                (token, head), CU_ATT_CTRS at most */
    CU_ATT_CTRS = 256,
    CU_CTR_HC = CU_CTR_ATT + CU_ATT_CTRS, /* hcpost2_kernel's grid barrier: count, generation */
    /* mvq_dense_kernel's half rows (HALO_CUDA_MVQSPLIT): a count a row, then two partial sums
     * a row (floats) */
    CU_CTR_ROWS = CU_CTR_HC + 2,
    CU_ROW_CTRS = 8192,
    CU_COUNTERS = CU_CTR_ROWS + 3 * CU_ROW_CTRS
};

typedef struct cu_prof cu_prof;
typedef struct cu_graph cu_graph;
/* Parts of ops timed on their own when profiling (cu_prof_begin/end). */
enum {
    CU_PROF_MM_Q8,
    CU_PROF_MM_F16,
    CU_PROF_MM_HEAD,
    CU_PROF_MM_OTHER,
    CU_PROF_MOE_ROUTE,
    CU_PROF_MOE_GATE_UP,
    CU_PROF_MOE_DOWN,
    CU_PROF_MOE_SUM,
    CU_PROF_PARTS
};

typedef struct cu_backend {
    halo_backend base;
    int device;
    int sm_count;
    cudaStream_t stream;
    char *scratch; /* device memory ops borrow; one op at a time (stream order) */
    uint64_t scratch_cap;
    bool failed;
    char fail[400]; /* "op: call: error" of the first failure since the last sync */
    /* Fault injection for tests (HALO_TEST_FAIL_SCRATCH=N): the N-th scratch request fails. */
    int64_t fail_at, n_scratch;
    /* Pinned staging for host inputs (positions, token ids): a copy from pageable memory can
     * wait for the stream; from here it is queued. Reused from the start after each sync. */
    char *ring;
    uint64_t ring_cap, ring_used;
    /* Pinned staging for large reads back (buf_read; HALO_CUDA_PINREAD=0: none). */
    bool pinread;
    char *rd;
    uint64_t rd_cap;
    cu_copy_batch copies;
    bool naive;    /* HALO_CUDA_NAIVE=1: the generic kernels only (speed comparison, tests) */
    bool mma;      /* fast mode: prefill on tensor cores, f16 (halo_backend_cuda_set_precise,
                      gemm_mma.cu) */
    bool intdot;   /* fast mode: one-token projections over int8 activations (mvq.cu) */
    bool pdl;      /* programmatic dependent launch for cu_launch (sm_90+, HALO_CUDA_PDL=0: off) */
    bool route1;   /* one token's routing and grouping in one kernel (HALO_CUDA_ROUTE1=0: off) */
    bool route_rank; /* ... its k choices by rank, in parallel (moe_route.cuh;
                        HALO_CUDA_ROUTERANK=0: k arg-max rounds) */
    bool hc1;      /* one token's hc_pre in two wide kernels (hc.cu; HALO_CUDA_HC1=0: off) */
    bool att1;     /* decode attention on 16 warps a head (attention.cu; HALO_CUDA_ATT1=0: off) */
    bool normrope; /* a small rms_norm and the rope after it in one kernel (norm_rope.cu;
                      HALO_CUDA_NORMROPE=0: off) */
    bool sumfuse;  /* one-token moe sum made by the hc kernel after it (moe.cu, hc.cu;
                      HALO_CUDA_SUMFUSE=0: off) */
    bool ahead2;   /* decode attention loads two rows ahead (attention.cu; HALO_CUDA_AHEAD2=0) */
    bool routefuse; /* one token's ffn norm, router projection and routing in one kernel
                       (moe_route.cuh; HALO_CUDA_ROUTEFUSE=1: on, off by default) */
    unsigned *counters; /* CU_COUNTERS zeroed device counters (CU_CTR_*) */
    double qcost[3];    /* the int8 moe's block split: cost a weight of Q8_0, IQ2_XXS, Q2_K (2, 1,
                           0.8; HALO_CUDA_QCOST=a,b,c sets them, for measuring) */
    bool hclead;   /* one-token hc_pre's Sinkhorn on its own block (hc.cu; HALO_CUDA_HCLEAD=0) */
    bool hcfuse;   /* one-token hc_post run by the next hc_pre's first kernel (hc.cu;
                      HALO_CUDA_HCFUSE=0: off) */
    bool hcpost2;  /* ... and that kernel doing hc2's part after a grid barrier (hc.cu;
                      HALO_CUDA_HCPOST2=0: two launches) */
    bool hcnorm;   /* hcpost2 waits for the next op and runs the ffn site's rms_norm (hc.cu;
                      HALO_CUDA_HCNORM=0: off) */
    bool nrpair;   /* a norm + rope waits to run with the next one (norm_rope.cu;
                      HALO_CUDA_NRPAIR=0: off) */
    bool ropecopy; /* a rope runs the queued row copies in its launch (norm_rope.cu;
                      HALO_CUDA_ROPECOPY=0: off) */
    int grid_rep;  /* log2 of the IQ2_XXS grid's copies in shared memory (HALO_CUDA_GRIDREP) */
    bool multi;    /* matmul_multi in one launch (mvq.cu; HALO_CUDA_MULTI=0: off) */
    bool hold;     /* expert gate/up activations in registers (moe.cu; HALO_CUDA_HOLD=0: off) */
    bool two;      /* ... and two rows at a time (mvq.cuh's TWO; HALO_CUDA_TWO=0: one) */
    bool early;    /* int8 projections fetch weights before the PDL wait (HALO_CUDA_EARLY=0: off) */
    uint32_t early_bytes; /* ... this many of a warp's rows towards L2 (HALO_CUDA_EARLY=N, 8192) */
    bool qbatch;   /* int8 projections load x's pieces 4 at a time (mvq.cuh; HALO_CUDA_QBATCH=0) */
    bool pool_issue; /* ratio-4 pooling loads a channel's slots first (pool.cu;
                        HALO_CUDA_POOLISSUE=0: slot by slot) */
    bool hc2issue; /* hc2's loads issued at once (hc.cu; HALO_CUDA_HC2ISSUE=0: one by one) */
    bool score_nj; /* the indexer's scores with head_dim known when compiling (topk.cu;
                      HALO_CUDA_SCORENJ=0: score_kernel) */
    int att_split; /* decode attention: a block more a head per this many valid rows, up to 4
                      (attention.cu; HALO_CUDA_ATTSPLIT=N, 160 by default; 0: one block a head) */
    bool mvq_split; /* a one-group Q8_0 projection with 1-2 rows a warp split in half rows
                       (mvq.cu; opt-in, HALO_CUDA_MVQSPLIT=1) */
    int mvq_ring;   /* HALO_CUDA_MVQRING=7: the Q8_0 int8 projections' warps with 7 chunk slots
                       (mvq.cu; for measuring; 0: 6) */
    int mvq_sm;     /* int8 / multi projections' blocks a multiprocessor, at most (HALO_CUDA_MVQSM=1
                       or 2, for measuring; 0: as many as stay resident, three) */
    bool pdl_first; /* kernels trigger the next launch before their wait (HALO_CUDA_PDLFIRST=1,
                       opt-in) */
    struct cu_ahead *ahead; /* HALO_CUDA_AHEAD=1: L2 lookahead for decode (ahead.cu) */
    struct cu_trace *trace; /* HALO_CUDA_TRACE=1: per-kernel times inside graph steps (trace.cu) */
    int gufuse;    /* one-token moe: SwiGLU and h's quantization in the gate/up kernel, 2 with
                      its own IQ2_XXS decoder (moe_gu.cuh; HALO_CUDA_GUFUSE=1 or 2, off by
                      default: slower in cuda-moe-1's ncu) */
    int dnhold;    /* one-token moe down: a warp's rows in one pair, its h in registers, 2: two
                      rows at a time (moe_dn.cuh; HALO_CUDA_DNHOLD=1 or 2, off by default) */
    cu_hc_pending hcp;
    struct cu_hc2_pending *h2p; /* hc.cu; NULL until first needed */
    cu_norm_pending np;
    cu_norm_rope_pending nrp;
    cu_sum_pending sp;
    cu_prof *prof; /* HALO_CUDA_PROFILE=1: per-op device time, printed at destroy */
    uint64_t n_launch, n_upload;
    /* CUDA graphs (graph.cu): NULL when steps run eagerly (HALO_CUDA_GRAPHS=0, profiling,
     * naive, HIP). capturing: the stream is capturing, so nothing may wait on it. */
    cu_graph *graph;
    bool capturing;
} cu_backend;

static inline cu_backend *cu_of(halo_backend *be) {
    return (cu_backend *)be;
}

/* HALO_CUDA_TRACE (trace.cu): the name of each kernel launched, to pair with its record. */
void cu_trace_note_(cu_backend *be, const char *kernel);
static inline void cu_trace_note(cu_backend *be, const char *kernel) {
    if (be->trace) cu_trace_note_(be, kernel);
}
/* Starts the trace (HALO_CUDA_TRACE=1), sets the kernels' flags; at sync: reads the step's
 * records back; at destroy: prints the table and frees it. */
bool cu_trace_init(cu_backend *be);
void cu_trace_step(cu_backend *be);
void cu_trace_free(cu_backend *be);

/* HALO_CUDA_AHEAD (ahead.cu): ops counted (OP_BEGIN), reset at sync; after a large op's
 * launches its weights (key: the first), which also prefetches the next large op's; the side
 * stream joined before a capture ends. */
bool cu_ahead_init(cu_backend *be);
void cu_ahead_free(cu_backend *be);
void cu_ahead_op_(cu_backend *be);
void cu_ahead_sync_(cu_backend *be);
void cu_ahead_node_(cu_backend *be, const char *key, int parts, const char *const *p,
                    const uint64_t *n);
void cu_ahead_join(cu_backend *be);
static inline void cu_ahead_op(cu_backend *be) {
    if (be->ahead) cu_ahead_op_(be);
}
static inline void cu_ahead_sync(cu_backend *be) {
    if (be->ahead) cu_ahead_sync_(be);
}

/* Records a failed call (the first since the last sync); returns whether `e` is a success. */
bool cu_check(cu_backend *be, const char *op, const char *call, cudaError_t e);
#define CU_OK(be, op, call) cu_check((be), (op), #call, (call))
/* Checks the launch just made. */
#define CU_LAUNCHED(be, op, kernel)                                                                \
    ((be)->n_launch++, cu_trace_note((be), kernel),                                                \
     cu_check((be), (op), "launch " kernel, cudaGetLastError()))

/* Scratch of at least `bytes` for one op (grown between ops when needed), or NULL after
 * recording the failure. */
char *cu_scratch(cu_backend *be, uint64_t bytes, const char *op);
/* Copies n host ints into device memory at dst (part of an op's scratch). */
bool cu_upload(cu_backend *be, void *dst, const void *src, uint64_t bytes, const char *op);

/* Host ints (positions, token ids) for a kernel: up to CU_INTS go by value in the launch's
 * parameters, since a small host-to-device copy takes microseconds of the stream's time (a
 * decode step has a few per layer); more are uploaded to dst. *dev is dst after an upload,
 * NULL when passed by value; kernels read them with cu_int_at. */
/* (enum CU_INTS and cu_ints: above, before cu_backend) */
bool cu_ints_pass(cu_backend *be, int32_t *dst, const int32_t *src, int64_t n, cu_ints *small,
                  const int32_t **dev, const char *op);
static __device__ __forceinline__ int32_t cu_int_at(const int32_t *dev, const cu_ints &small,
                                                    int64_t i) {
    return dev ? dev[i] : small.v[i];
}

/* A small vector read element by element (sinks, biases, hc scales) must be a float type;
 * false after recording the failure otherwise. */
bool cu_float_only(cu_backend *be, uint32_t type, const char *op, const char *what);

/* A type the kernels decode, or false after recording the failure for `op`. */
bool cu_type_supported(cu_backend *be, uint32_t type, const char *op);

static inline char *cu_ptr(const halo_tensor *t) {
    return t->buf->dev + t->offset;
}
static inline float *cu_f32(const halo_tensor *t) {
    return (float *)cu_ptr(t);
}
uint64_t cu_row_bytes(uint32_t type, int64_t n);

static inline unsigned cu_blocks(int64_t n, unsigned per) {
    return (unsigned)((n + per - 1) / per);
}

/* Launches out[o, t] = Σ_i w[i, o] · x[i, t] (the matmul op's kernel, shared by hc and moe):
 * w rows of `type` with n_in elements, x rows of x_stride floats (group g reads its slice at
 * g·n_in), out rows of n_out floats. */
void cu_matmul_launch(cu_backend *be, uint32_t type, const char *w, int64_t n_in, int64_t n_out,
                      uint32_t groups, const float *x, int64_t x_stride, int64_t n_tok, float *out,
                      const char *op);
/* The one-token int8 projection (mvq.cu) when be->intdot and the shape suits it; else false. */
bool cu_mvq_matmul(cu_backend *be, uint32_t type, const char *w, int64_t n_in, int64_t n_out,
                   uint32_t groups, const float *x, float *out, const char *op);

/* Flags every kernel reads at its entry, one copy per translation unit (a __constant__ of
 * internal linkage: kernels of several .cu files share no device symbol without relocatable
 * device code). Each file registers its setter at load time (cu_devf_register) and the backend
 * sets them all when it starts (cu_devf_set_all), before it launches anything; they are the
 * process's, so the last backend started decides (tests and the bench run one at a time). */
typedef struct cu_devflags {
    int pdl_first;             /* kernels let the next kernel launch before they wait
                                  (HALO_CUDA_PDLFIRST=1, trace builds only; else after) */
    unsigned long long *trace; /* HALO_CUDA_TRACE=1: a record a kernel (trace.cu), else NULL */
    unsigned *trace_n;
    unsigned trace_cap;
} cu_devflags;
#ifndef HALO_HIP
typedef bool (*cu_devf_setter)(const cu_devflags *f);
int cu_devf_register(cu_devf_setter set);
bool cu_devf_set_all(const cu_devflags *f); /* true without setters (other builds) */
#endif
#if !defined(HALO_HIP) && defined(HALO_CUDA_TRACE_KERNELS)
static __constant__ cu_devflags cu_devf;
static bool cu_devf_set_here(const cu_devflags *f) {
    return cudaMemcpyToSymbol(cu_devf, f, sizeof *f) == cudaSuccess;
}
__attribute__((used)) static const int cu_devf_reg = cu_devf_register(cu_devf_set_here);
#endif

/* The kernels read the flags only in builds configured with HALO_CUDA_TRACE_KERNELS=ON: the
 * reads sit at every kernel's entry, and a kernel placed only once its predecessor has finished
 * (no room earlier) would wait for them; other builds run the entry as it was. */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && !defined(HALO_HIP) &&                       \
    defined(HALO_CUDA_TRACE_KERNELS)
#define CU_DEVF_READ 1
static __device__ __forceinline__ unsigned long long cu_gtime() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
/* The first thread of the first block records (its time before the wait t0, after it, the grid
 * and block sizes): block 0 passes the wait only after the kernel before it has finished, so
 * the records are in stream order, one a kernel, and the gap from one kernel's release to the
 * next one's is the first kernel's share of the step (trace.cu pairs them with the names). */
static __device__ __forceinline__ bool cu_trace_me() {
    return cu_devf.trace &&
           (threadIdx.x | threadIdx.y | threadIdx.z | blockIdx.x | blockIdx.y | blockIdx.z) == 0;
}
static __device__ __forceinline__ void cu_trace_put(unsigned long long t0) {
    const unsigned long long t1 = cu_gtime();
    const unsigned i = atomicAdd(cu_devf.trace_n, 1u);
    if (i < cu_devf.trace_cap) {
        unsigned long long *r = cu_devf.trace + 3 * (uint64_t)i;
        r[0] = t0;
        r[1] = t1;
        r[2] = (unsigned long long)(gridDim.x * gridDim.y * gridDim.z) << 16 | blockDim.x;
    }
}
#endif

/* Programmatic dependent launch (sm_90+). A kernel launched by cu_launch may start while the
 * kernel before it on the stream is still running: its blocks are placed on the multiprocessors
 * and wait in cu_pdl_entry until that kernel has finished and its writes are visible, so the
 * launch latency (~1-2 us a kernel boundary, also inside graphs) overlaps the previous kernel
 * instead of following it. Every kernel launched by cu_launch must call cu_pdl_entry before it
 * touches global memory; it also lets the next kernel launch as soon as every block of this one
 * has started. On a kernel launched plainly both instructions do nothing.
 * With cu_devf.pdl_first a kernel lets the next one launch before it waits itself, so the next
 * kernel's blocks can be placed while this one still waits for its predecessor (one kernel more
 * of lead: the chain of small kernels between two projections is then launched ahead). Safe:
 * the next kernel's wait is for this kernel's completion, which follows this kernel's wait, so
 * everything before this kernel has finished and is visible by then. */
static __device__ __forceinline__ void cu_pdl_entry() {
#if defined(CU_DEVF_READ)
    const bool tr = cu_trace_me();
    const unsigned long long t0 = tr ? cu_gtime() : 0;
    if (cu_devf.pdl_first) asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
    if (tr) cu_trace_put(t0);
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && !defined(HALO_HIP)
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}
/* The two halves, for a kernel that reads memory no kernel of the step writes (weights) before
 * it waits: cu_pdl_trigger at its entry, cu_pdl_wait before it reads anything else or writes.
 * Every thread that touches such memory must have waited (waiting twice is harmless). `record`:
 * this wait is the kernel's first (its trace record; false where cu_pdl_entry came first). */
static __device__ __forceinline__ void cu_pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && !defined(HALO_HIP)
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}
static __device__ __forceinline__ void cu_pdl_wait(bool record = true) {
#if defined(CU_DEVF_READ)
    const bool tr = record && cu_trace_me();
    const unsigned long long t0 = tr ? cu_gtime() : 0;
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
    if (tr) cu_trace_put(t0);
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && !defined(HALO_HIP)
    (void)record;
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
#else
    (void)record;
#endif
}

/* Asks L2 for bytes [0, n) at p (weights: no kernel writes them), the warp's lanes a 128-byte
 * line each in turn; nothing waits for the lines. Before cu_pdl_wait a kernel's weights then
 * stream in while the kernel before it (often a small latency-bound one) still runs. */
static __device__ __forceinline__ void cu_prefetch_l2(const char *p, uint64_t n) {
#if defined(__CUDA_ARCH__) && !defined(HALO_HIP)
    for (uint64_t o = 128 * (uint64_t)(threadIdx.x % 32); o < n; o += 128 * 32)
        asm volatile("prefetch.global.L2 [%0];" ::"l"(p + o));
#else
    (void)p, (void)n;
#endif
}

/* kernel<<<grid, block, smem, be->stream>>>(args...), with programmatic dependent launch when
 * be->pdl; the caller checks the launch (CU_LAUNCHED) as for <<<>>>. */
template <typename... KArgs, typename... Args>
static inline void cu_launch(cu_backend *be, void (*kernel)(KArgs...), dim3 grid, dim3 block,
                             size_t smem, Args &&...args) {
#ifndef HALO_HIP
    if (be->pdl) {
        cudaLaunchAttribute at[1];
        at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        at[0].val.programmaticStreamSerializationAllowed = 1;
        cudaLaunchConfig_t cfg = {};
        cfg.gridDim = grid;
        cfg.blockDim = block;
        cfg.dynamicSmemBytes = smem;
        cfg.stream = be->stream;
        cfg.attrs = at;
        cfg.numAttrs = 1;
        (void)cudaLaunchKernelEx(&cfg, kernel, static_cast<Args &&>(args)...);
        return; /* an error stays for cudaGetLastError (CU_LAUNCHED) */
    }
#endif
    kernel<<<grid, block, smem, be->stream>>>(static_cast<Args &&>(args)...);
}

/* Graph capture of small steps (graph.cu has the whole story). */
void cu_graph_init(cu_backend *be);
void cu_graph_free(cu_backend *be);
/* Before an op's launches: starts the step (an embed of embed_tokens tokens starts one, and
 * it is captured when embed_tokens <= CU_INTS; other ops pass -1) or the step's next
 * capture. */
void cu_graph_op(cu_backend *be, const char *op, int64_t embed_tokens);
/* At the forward's per-layer check: launches what was captured; the next op captures anew. */
void cu_graph_piece_end(cu_backend *be);
/* Before anything that waits on the stream or touches buffers mid-step: launches what was
 * captured, and the rest of the step runs eagerly. */
void cu_graph_break(cu_backend *be);
/* The streamed-expert moe syncs mid-op: breaks, and the backend stays eager from then on. */
void cu_graph_streamed(cu_backend *be);
/* After sync's wait (wait_s seconds of it): counts the step and its host times. */
void cu_graph_step_done(cu_backend *be, double wait_s);
double cu_host_now(void); /* seconds, monotonic */
struct halo_cuda_graph_stats;
void cu_graph_stats(cu_backend *be, struct halo_cuda_graph_stats *out);

/* Device time of a part of an op (only when be->prof: HALO_CUDA_PROFILE=1). */
void cu_prof_begin(cu_backend *be, uint64_t mark[2], cudaEvent_t *ev);
void cu_prof_end(cu_backend *be, int part, const uint64_t mark[2], cudaEvent_t ev);

/* Allows `kernel` more than 48 KiB of dynamic shared memory (once per kernel: *done). */
template <typename K>
static inline bool cu_smem_attr(cu_backend *be, K *kernel, int bytes, bool *done, const char *op) {
#ifndef HALO_HIP
    if (bytes > 48 * 1024 && !*done) {
        if (!CU_OK(be, op,
                   cudaFuncSetAttribute((const void *)kernel,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize, bytes)))
            return false;
    }
#endif
    *done = true;
    return true;
}

#ifndef HALO_HIP
/* Blocks of `threads` threads with `smem` bytes of dynamic shared memory that stay resident on
 * the whole GPU at once (the persistent row streams launch that many: a second wave would
 * finish last), at least one a multiprocessor. */
template <typename K>
static inline int64_t cu_resident(cu_backend *be, K *kernel, int threads, int smem) {
    int per = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, kernel, threads, (size_t)smem) !=
        cudaSuccess) {
        (void)cudaGetLastError();
        per = 1;
    }
    return (int64_t)(be->sm_count > 0 ? be->sm_count : 132) * (per > 0 ? per : 1);
}
#endif

/* dst[0..n) = the n elements at src (any supported type) as f32. */
void cu_to_f32(cu_backend *be, uint32_t type, const char *src, int64_t n, float *dst,
               const char *op);

/* The ops (backend.h). */
void cu_embed(halo_backend *be, const halo_tensor *table, const int32_t *tokens, halo_tensor *out);
void cu_matmul(halo_backend *be, const halo_tensor *w, const halo_tensor *x, uint32_t groups,
               halo_tensor *out);
/* Several projections of one token's input, its RMS norm folded in (mvq.cu). */
void cu_matmul_multi(halo_backend *be, const halo_tensor *x, const halo_tensor *norm, float eps,
                     uint32_t n, const halo_tensor *const *w, halo_tensor *const *out);
void cu_copy(halo_backend *be, halo_tensor *dst, const halo_tensor *src);
void cu_rms_norm(halo_backend *be, halo_tensor *x, uint32_t width, const halo_tensor *weight,
                 float eps);
/* The rms_norm op: as cu_rms_norm, or deferred for a rope after it (be->np). */
void cu_rms_norm_op(halo_backend *be, halo_tensor *x, uint32_t width, const halo_tensor *weight,
                    float eps);
void cu_rope(halo_backend *be, halo_tensor *x, const int32_t *pos, const halo_rope *rope,
             bool inverse);
void cu_hc_pre(halo_backend *be, const halo_hc_args *a);
void cu_hc_post(halo_backend *be, halo_tensor *streams, const halo_tensor *y,
                const halo_tensor *post, const halo_tensor *comb);
/* Launches a deferred one-token hc_pre (be->h2p), then a deferred hc_post (be->hcp). */
void cu_hc_flush(cu_backend *be);
void cu_hcp_flush(cu_backend *be); /* the deferred hc_post only */
/* An rms_norm of x (rows x width, weight w: F32 when w_f32) with a deferred hc_pre pending:
 * run inside its kernel when x is its collapsed row (true), else the hc_pre is launched first
 * (false: the caller norms). */
bool cu_hc2_norm(cu_backend *be, float *x, int64_t rows, int64_t width, bool w_f32,
                 const float *w, float eps);
void cu_hc_free(cu_backend *be);
/* Launches a deferred rms_norm (be->np), if any. */
void cu_flush_copies(cu_backend *be); /* the queued row copies (backend.cu) */
/* Whether a queued copy reads or writes bytes [p, p + n). */
bool cu_copies_touch(const cu_backend *be, const char *p, uint64_t n);
void cu_norm_flush(cu_backend *be); /* the pending norm + rope, then the pending norm */
void cu_np_flush(cu_backend *be);    /* the pending norm only */
void cu_nrp_flush(cu_backend *be);   /* the pending norm + rope only */
/* Launches a deferred moe sum (be->sp), if any. */
void cu_sum_flush(cu_backend *be);
void cu_attention(halo_backend *be, const halo_attn_args *a);
void cu_pool(halo_backend *be, const halo_pool_args *a);
void cu_topk(halo_backend *be, const halo_topk_args *a);
void cu_moe(halo_backend *be, const halo_moe_args *a);
void cu_moe_streamed(halo_backend *be, const halo_moe_args *a); /* a->experts set */

/* Rotary inverse frequencies, as the CPU backend computes them (host side). */
/* (cu_rope_freq: above, before cu_backend) */
bool cu_rope_freq_make(cu_backend *be, const halo_rope *rope, cu_rope_freq *f, const char *op);

/* ---- device helpers ------------------------------------------------------------------- */

static __device__ __forceinline__ float warp_sum(float v) {
    for (int m = WARP / 2; m > 0; m >>= 1)
        v += gpu_shfl_xor(v, m);
    return v;
}

static __device__ __forceinline__ float warp_max(float v) {
    for (int m = WARP / 2; m > 0; m >>= 1)
        v = fmaxf(v, gpu_shfl_xor(v, m));
    return v;
}

/* Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets it. */
static __device__ __forceinline__ float block_sum(float v, float *smem32) {
    int lane = threadIdx.x % WARP, w = threadIdx.x / WARP, nw = blockDim.x / WARP;
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0) smem32[w] = v;
    __syncthreads();
    v = lane < nw ? smem32[lane] : 0.0f;
    return warp_sum(v);
}

/* IEEE half to f32, exact (subnormals, infinities, NaN payloads), from the bits: the same on
 * CUDA and HIP without either's half type. */
static __device__ __forceinline__ float f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    if (exp == 0x1f) return __uint_as_float(sign | 0x7f800000u | (man << 13));
    if (exp != 0) return __uint_as_float(sign | ((exp + 112) << 23) | (man << 13));
    float v = (float)man * 5.9604644775390625e-8f; /* man · 2^-24, exact */
    return sign ? -v : v;
}
static __device__ __forceinline__ float bf16_to_f32(uint16_t h) {
    return __uint_as_float((uint32_t)h << 16);
}

/* Element i of a vector of a float type (F32, F16, BF16): norm weights, sinks, biases. */
static __device__ __forceinline__ float load_float(uint32_t type, const char *p, int64_t i) {
    if (type == HALO_TYPE_F16) return f16_to_f32(((const uint16_t *)p)[i]);
    if (type == HALO_TYPE_BF16) return bf16_to_f32(((const uint16_t *)p)[i]);
    return ((const float *)p)[i];
}

#endif
