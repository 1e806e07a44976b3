/* L2 lookahead for decode (HALO_CUDA_AHEAD=1, opt-in until measured): the weights of the next
 * large projection asked of L2 while the small kernels before it run.
 *
 * Why: a decode layer streams ~200 MB of weights in ~6 large kernels, and between them run
 * chains of small latency-bound kernels (the attention's norms, ropes, pools, scores and select
 * before out_a; hc and routing before the experts) during which the memory is nearly idle. A
 * projection's own early fetch (mvq.cu, HALO_CUDA_EARLY) starts only when its blocks are placed,
 * one or two kernels ahead. Here, right after a large op has been queued, a side-stream kernel
 * that starts when that op finishes issues prefetch.global.L2 over the weights of the large op
 * that came next in the previous step (decode steps repeat: the same layers in the same order),
 * so those weights are on their way into the L2 (60 MiB on the H200) during the gap.
 *
 * What it cannot break: a prefetch has no effect on any value. The side stream forks from the
 * backend's stream with an event and joins it before a captured piece ends (cu_ahead_join, from
 * graph.cu), so captures stay valid. The table learned from the previous step is keyed by the
 * large op's first weight pointer, so an op sequence that shifts (a pool op more when a
 * compressor window closes) still finds the right successor. The moe is a node of the chain
 * (after it comes the next layer's q_a) but nothing is prefetched for it: its experts are
 * chosen by the routing. Weights in host memory are left alone. */
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda.cuh"

#ifndef HALO_HIP
enum {
    AHEAD_PARTS = 8,   /* weights of one large op */
    AHEAD_MAP = 1024,  /* large ops remembered (a 43-layer step has ~260) */
    AHEAD_BLOCKS = 32, /* the prefetch kernel's blocks: issuing, not waiting */
    AHEAD_MIN = 4 << 20
};

typedef struct ahead_list {
    const char *p[AHEAD_PARTS];
    uint64_t n[AHEAD_PARTS];
    int parts;
} ahead_list;

typedef struct ahead_entry {
    const char *key;
    ahead_list next; /* the large op that followed this one in the last step */
} ahead_entry;

struct cu_ahead {
    cudaStream_t side;
    cudaEvent_t fork, join;
    bool pending; /* side work forked into the capture in progress, not yet joined */
    int64_t op;   /* ops since the last sync */
    const char *last_key;
    int64_t last_op;
    ahead_entry map[AHEAD_MAP];
    int n_map;
    uint64_t cap; /* bytes prefetched ahead of one op at most */
    uint64_t launches;
};

__global__ void __launch_bounds__(256) ahead_kernel(ahead_list l) {
    const uint64_t stride = 128ull * gridDim.x * blockDim.x;
    const uint64_t first = 128ull * (blockIdx.x * blockDim.x + threadIdx.x);
    for (int j = 0; j < l.parts; j++)
        for (uint64_t o = first; o < l.n[j]; o += stride)
            asm volatile("prefetch.global.L2 [%0];" ::"l"(l.p[j] + o));
}

bool cu_ahead_init(cu_backend *be) {
    const char *env = getenv("HALO_CUDA_AHEAD");
    if (!env || strcmp(env, "1") != 0 || be->naive || be->prof) return true;
    cu_ahead *a = (cu_ahead *)calloc(1, sizeof *a);
    if (!a) return false;
    a->cap = 40ull << 20;
    if (cudaStreamCreateWithFlags(&a->side, cudaStreamNonBlocking) != cudaSuccess ||
        cudaEventCreateWithFlags(&a->fork, cudaEventDisableTiming) != cudaSuccess ||
        cudaEventCreateWithFlags(&a->join, cudaEventDisableTiming) != cudaSuccess) {
        (void)cudaGetLastError();
        if (a->side) (void)cudaStreamDestroy(a->side);
        if (a->fork) (void)cudaEventDestroy(a->fork);
        free(a);
        return false;
    }
    be->ahead = a;
    return true;
}

void cu_ahead_free(cu_backend *be) {
    cu_ahead *a = be->ahead;
    if (!a) return;
    be->ahead = NULL;
    (void)cudaStreamSynchronize(a->side);
    (void)cudaEventDestroy(a->fork);
    (void)cudaEventDestroy(a->join);
    (void)cudaStreamDestroy(a->side);
    free(a);
}

void cu_ahead_op_(cu_backend *be) {
    be->ahead->op++;
}

void cu_ahead_sync_(cu_backend *be) {
    be->ahead->op = 0;
    be->ahead->last_key = NULL;
}

static ahead_entry *ahead_find(cu_ahead *a, const char *key, bool add) {
    for (int i = 0; i < a->n_map; i++)
        if (a->map[i].key == key) return &a->map[i];
    if (!add || a->n_map == AHEAD_MAP) return NULL;
    ahead_entry *e = &a->map[a->n_map++];
    memset(e, 0, sizeof *e);
    e->key = key;
    return e;
}

void cu_ahead_node_(cu_backend *be, const char *key, int parts, const char *const *p,
                    const uint64_t *n) {
    cu_ahead *a = be->ahead;
    if (be->failed || !key) return;
    ahead_list l;
    memset(&l, 0, sizeof l);
    uint64_t total = 0;
    for (int j = 0; j < parts && l.parts < AHEAD_PARTS && total < a->cap; j++) {
        const uint64_t take = n[j] < a->cap - total ? n[j] : a->cap - total;
        l.p[l.parts] = p[j];
        l.n[l.parts++] = take;
        total += take;
    }
    /* This op follows the last large one with small ops between: remember it as its next. */
    if (a->last_key && a->op - a->last_op >= 2) {
        ahead_entry *e = ahead_find(a, a->last_key, true);
        if (e) e->next = l;
    }
    a->last_key = key;
    a->last_op = a->op;
    const ahead_entry *e = ahead_find(a, key, false);
    if (!e || e->next.parts == 0) return;
    /* The side stream starts after everything queued so far, this op included. */
    if (!CU_OK(be, "ahead", cudaEventRecord(a->fork, be->stream)) ||
        !CU_OK(be, "ahead", cudaStreamWaitEvent(a->side, a->fork, 0)))
        return;
    ahead_kernel<<<AHEAD_BLOCKS, 256, 0, a->side>>>(e->next);
    if (!CU_OK(be, "ahead", cudaGetLastError())) return;
    a->pending |= be->capturing; /* eager side work needs no join */
    a->launches++;
}

void cu_ahead_join(cu_backend *be) {
    cu_ahead *a = be->ahead;
    if (!a || !a->pending) return;
    a->pending = false;
    if (CU_OK(be, "ahead", cudaEventRecord(a->join, a->side)))
        (void)CU_OK(be, "ahead", cudaStreamWaitEvent(be->stream, a->join, 0));
}
#else
bool cu_ahead_init(cu_backend *) {
    return true;
}
void cu_ahead_free(cu_backend *) {}
void cu_ahead_op_(cu_backend *) {}
void cu_ahead_sync_(cu_backend *) {}
void cu_ahead_node_(cu_backend *, const char *, int, const char *const *, const uint64_t *) {}
void cu_ahead_join(cu_backend *) {}
#endif
