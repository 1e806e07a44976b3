/* CUDA backend: creation, buffers in the plan's pools, the stream, op scratch, failures and
 * sync, and the ops table. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/cuda/quant.cuh"

extern "C" {
#include "halo/plan.h"
extern const uint64_t halo_iq2xxs_grid[256];
extern const uint32_t halo_iq3xxs_grid[256];
extern const uint64_t halo_iq2xs_grid[512];
extern const uint64_t halo_iq2s_grid[1024];
extern const uint32_t halo_iq3s_grid[512];
extern const uint64_t halo_iq1s_grid[2048];
void cpu_rope_inv_freq(const halo_rope *rope, float *inv_freq);
}

typedef struct cu_backend_full {
    cu_backend be;
    char *grids; /* the i-quant codebooks, in grid_table's order */
} cu_backend_full;

/* The codebooks copied to device memory once per backend (all sizes multiples of 8 bytes). */
static const struct {
    const void *host;
    size_t bytes;
} grid_table[] = {
    {halo_iq2xxs_grid, sizeof halo_iq2xxs_grid}, {halo_iq3xxs_grid, sizeof halo_iq3xxs_grid},
    {halo_iq2xs_grid, sizeof halo_iq2xs_grid},   {halo_iq2s_grid, sizeof halo_iq2s_grid},
    {halo_iq1s_grid, sizeof halo_iq1s_grid},     {halo_iq3s_grid, sizeof halo_iq3s_grid}};
enum { N_GRIDS = sizeof grid_table / sizeof grid_table[0] };

cu_grids cu_grids_get(halo_backend *be) {
    const char *p[N_GRIDS];
    const char *at = ((cu_backend_full *)be)->grids;
    for (int i = 0; i < N_GRIDS; i++) {
        p[i] = at;
        at += grid_table[i].bytes;
    }
    cu_grids out = {(const uint64_t *)p[0], (const uint32_t *)p[1], (const uint64_t *)p[2],
                    (const uint64_t *)p[3], (const uint64_t *)p[4], (const uint32_t *)p[5]};
    return out;
}

bool cu_check(cu_backend *be, const char *op, const char *call, cudaError_t e) {
    if (e == cudaSuccess) return true;
    if (!be->failed) {
        be->failed = true;
        snprintf(be->fail, sizeof be->fail, "%s: %s: %s (%s)", op, call, cudaGetErrorString(e),
                 cudaGetErrorName(e));
    }
    (void)cudaGetLastError(); /* clear a non-sticky error so the next op starts clean */
    return false;
}

uint64_t cu_row_bytes(uint32_t type, int64_t n) {
    uint64_t bytes = 0;
    halo_type_bytes(type, (uint64_t)n, &bytes);
    return bytes;
}

bool cu_type_supported(cu_backend *be, uint32_t type, const char *op) {
    switch (type) {
    case HALO_TYPE_F32:
    case HALO_TYPE_F16:
    case HALO_TYPE_BF16:
    case HALO_TYPE_Q4_0:
    case HALO_TYPE_Q4_1:
    case HALO_TYPE_Q5_0:
    case HALO_TYPE_Q5_1:
    case HALO_TYPE_Q8_0:
    case HALO_TYPE_IQ4_NL:
    case HALO_TYPE_MXFP4:
    case HALO_TYPE_Q2_K:
    case HALO_TYPE_Q3_K:
    case HALO_TYPE_Q4_K:
    case HALO_TYPE_Q5_K:
    case HALO_TYPE_Q6_K:
    case HALO_TYPE_IQ2_XXS:
    case HALO_TYPE_IQ3_XXS:
    case HALO_TYPE_IQ2_XS:
    case HALO_TYPE_IQ2_S:
    case HALO_TYPE_IQ3_S:
    case HALO_TYPE_IQ1_S:
    case HALO_TYPE_IQ1_M:
    case HALO_TYPE_IQ4_XS:
        return true;
    default:
        if (!be->failed) {
            be->failed = true;
            snprintf(be->fail, sizeof be->fail,
                     "%s: weights of type %s are not supported on the " GPU_RUNTIME " backend yet",
                     op, halo_type_name(type));
        }
        return false;
    }
}

bool cu_float_only(cu_backend *be, uint32_t type, const char *op, const char *what) {
    if (type == HALO_TYPE_F32 || type == HALO_TYPE_F16 || type == HALO_TYPE_BF16) return true;
    if (!be->failed) {
        be->failed = true;
        snprintf(be->fail, sizeof be->fail,
                 "%s: %s of type %s is not supported on the " GPU_RUNTIME
                 " backend (f32, f16 or bf16 only)",
                 op, what, halo_type_name(type));
    }
    return false;
}

char *cu_scratch(cu_backend *be, uint64_t bytes, const char *op) {
    if (be->failed) return NULL;
    if (be->fail_at && ++be->n_scratch == be->fail_at) {
        be->failed = true;
        snprintf(be->fail, sizeof be->fail, "%s: out of memory for %s's scratch (injected)", op,
                 op);
        return NULL;
    }
    if (bytes <= be->scratch_cap) return be->scratch;
    /* Grow between ops: the stream must be done with the old scratch before it is freed. */
    uint64_t cap = bytes > 2 * be->scratch_cap ? bytes : 2 * be->scratch_cap;
    if (!CU_OK(be, op, cudaStreamSynchronize(be->stream))) return NULL;
    if (be->scratch && !CU_OK(be, op, cudaFree(be->scratch))) return NULL;
    be->scratch = NULL;
    be->scratch_cap = 0;
    if (!CU_OK(be, op, cudaMalloc((void **)&be->scratch, cap))) return NULL;
    be->scratch_cap = cap;
    return be->scratch;
}

bool cu_upload(cu_backend *be, void *dst, const void *src, uint64_t bytes, const char *op) {
    return CU_OK(be, op, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, be->stream));
}

bool cu_rope_freq_make(cu_backend *be, const halo_rope *rope, cu_rope_freq *f, const char *op) {
    if (rope->n_rot / 2 > CU_MAX_ROT_PAIRS || rope->n_rot % 2) {
        if (!be->failed) {
            be->failed = true;
            snprintf(be->fail, sizeof be->fail, "%s: %u rotated channels (at most %d)", op,
                     rope->n_rot, 2 * CU_MAX_ROT_PAIRS);
        }
        return false;
    }
    f->n_rot = rope->n_rot;
    cpu_rope_inv_freq(rope, f->inv_freq);
    return true;
}

/* ---- buffers ----------------------------------------------------------------------------- */

static halo_status fail_call(halo_error *err, halo_status st, const char *what, uint64_t bytes,
                             cudaError_t e) {
    return halo_fail(err, st, GPU_RUNTIME " backend: %s of %llu bytes: %s", what,
                     (unsigned long long)bytes, cudaGetErrorString(e));
}

static halo_status buf_alloc_pool(halo_backend *hbe, uint32_t pool, uint64_t bytes, halo_buf **out,
                                  halo_error *err) {
    cudaStream_t stream = cu_of(hbe)->stream;
    halo_buf *b = (halo_buf *)calloc(1, sizeof *b);
    if (!b) return halo_fail(err, HALO_E_NOMEM, "out of memory");
    uint64_t n = bytes ? (bytes + 255) & ~255ull : 256;
    cudaError_t e = cudaSuccess;
    const char *what = "";
    switch (pool) {
    case HALO_POOL_DEVICE:
        what = "cudaMalloc";
        b->kind = CU_DEVICE;
        e = cudaMalloc((void **)&b->dev, n);
        /* On the backend's stream: our stream does not wait for the legacy default stream, so
         * a plain cudaMemset could land after the first write to the buffer. */
        if (e == cudaSuccess) e = cudaMemsetAsync(b->dev, 0, n, stream);
        if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
        break;
    case HALO_POOL_MANAGED: {
        /* More managed memory than the GPU has free can hang a discrete GPU under migration
         * pressure (not only this process): refuse it rather than oversubscribe. */
        size_t free_b = 0, total_b = 0;
        if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess && n > free_b) {
            free(b);
            return halo_fail(
                err, HALO_E_NOMEM,
                GPU_RUNTIME " backend: %.2f GiB of managed memory asked, more than the "
                            "GPU's %.2f GiB free: managed memory is not oversubscribed "
                            "(use --weights host for weights larger than the GPU)",
                (double)n / (double)(1ull << 30), (double)free_b / (double)(1ull << 30));
        }
        what = "cudaMallocManaged";
        b->kind = CU_MANAGED;
        e = cudaMallocManaged((void **)&b->dev, n, cudaMemAttachGlobal);
        if (e == cudaSuccess) e = cudaMemsetAsync(b->dev, 0, n, stream);
        if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
        break;
    }
    case HALO_POOL_GPU_HOST:
#ifdef HALO_HIP
        what = "hipHostMalloc";
#else
        what = "cudaHostAlloc";
#endif
        b->kind = CU_HOST_ALLOC;
        e = cudaHostAlloc(&b->host, n, cudaHostAllocMapped);
        if (e == cudaSuccess) e = cudaHostGetDevicePointer((void **)&b->dev, b->host, 0);
        if (e == cudaSuccess) memset(b->host, 0, n);
        break;
    default:
        free(b);
        return halo_fail(err, HALO_E_UNSUPPORTED,
                         GPU_RUNTIME " backend: cannot compute on memory of the %s pool",
                         halo_pool_name((halo_pool_kind)pool));
    }
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        if (b->kind == CU_HOST_ALLOC && b->host)
            (void)cudaFreeHost(b->host);
        else if (b->dev)
            (void)cudaFree(b->dev);
        free(b);
        return fail_call(err, e == cudaErrorMemoryAllocation ? HALO_E_NOMEM : HALO_E_IO, what,
                         bytes, e);
    }
    b->size = bytes;
    *out = b;
    return HALO_OK;
}

static halo_status buf_alloc(halo_backend *be, uint64_t bytes, halo_buf **out, halo_error *err) {
    return buf_alloc_pool(be, HALO_POOL_DEVICE, bytes, out, err);
}

static void buf_free(halo_backend *hbe, halo_buf *b) {
    if (!b) return;
    cu_backend *be = cu_of(hbe);
    /* Frees wait for the device; a buffer may be freed right after the ops that used it. */
    (void)cudaStreamSynchronize(be->stream);
    switch (b->kind) {
    case CU_DEVICE:
    case CU_MANAGED:
        (void)cudaFree(b->dev);
        break;
    case CU_HOST_ALLOC:
        (void)cudaFreeHost(b->host);
        break;
    case CU_REGISTERED:
        (void)cudaHostUnregister(b->host);
        break;
    }
    free(b);
}

static halo_status buf_wrap_host(halo_backend *hbe, void *data, uint64_t bytes, halo_buf **out,
                                 halo_error *err) {
    halo_buf *b = (halo_buf *)calloc(1, sizeof *b);
    if (!b) return halo_fail(err, HALO_E_NOMEM, "out of memory");
    /* Pin whole pages: registration works on page ranges. */
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    uintptr_t p0 = (uintptr_t)data / page * page;
    uintptr_t p1 = ((uintptr_t)data + bytes + page - 1) / page * page;
    void *dev = NULL;
    cudaError_t e = cudaHostRegister((void *)p0, p1 - p0, cudaHostRegisterMapped);
    if (e == cudaSuccess) e = cudaHostGetDevicePointer(&dev, (void *)p0, 0);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        if (dev) (void)cudaHostUnregister((void *)p0);
        free(b);
        return fail_call(err, HALO_E_NOMEM, "cudaHostRegister (GPU-visible host memory)", bytes, e);
    }
    b->kind = CU_REGISTERED;
    b->host = (void *)p0;
    b->dev = (char *)dev + ((uintptr_t)data - p0);
    b->size = bytes;
    *out = b;
    return HALO_OK;
}

static halo_status copy_sync(cu_backend *be, void *dst, const void *src, uint64_t n,
                             cudaMemcpyKind kind, const char *what, halo_error *err) {
    cudaError_t e = cudaMemcpyAsync(dst, src, n, kind, be->stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(be->stream);
    if (e != cudaSuccess)
        return halo_fail(err, HALO_E_IO, GPU_RUNTIME " backend: %s of %llu bytes: %s", what,
                         (unsigned long long)n, cudaGetErrorString(e));
    return HALO_OK;
}

static halo_status buf_write(halo_backend *hbe, halo_buf *b, uint64_t offset, const void *src,
                             uint64_t n, halo_error *err) {
    if (offset > b->size || n > b->size - offset)
        return halo_fail(err, HALO_E_OUT_OF_BOUNDS,
                         GPU_RUNTIME " backend: write past a buffer's end");
    return copy_sync(cu_of(hbe), b->dev + offset, src, n, cudaMemcpyHostToDevice, "buf_write", err);
}

static halo_status buf_read(halo_backend *hbe, const halo_buf *b, uint64_t offset, void *dst,
                            uint64_t n, halo_error *err) {
    if (offset > b->size || n > b->size - offset)
        return halo_fail(err, HALO_E_OUT_OF_BOUNDS,
                         GPU_RUNTIME " backend: read past a buffer's end");
    return copy_sync(cu_of(hbe), dst, b->dev + offset, n, cudaMemcpyDeviceToHost, "buf_read", err);
}

void cu_copy(halo_backend *hbe, halo_tensor *dst, const halo_tensor *src) {
    cu_backend *be = cu_of(hbe);
    if (be->failed) return;
    CU_OK(be, "copy",
          cudaMemcpyAsync(cu_ptr(dst), cu_ptr(src), halo_tensor_nbytes(src), cudaMemcpyDefault,
                          be->stream));
}

static halo_status sync(halo_backend *hbe, halo_error *err) {
    cu_backend *be = cu_of(hbe);
    /* A kernel that faulted reports here, after the op that launched it returned. */
    cu_check(be, "a queued kernel", "cudaStreamSynchronize", cudaStreamSynchronize(be->stream));
    if (!be->failed) return HALO_OK;
    be->failed = false;
    bool nomem = strstr(be->fail, "out of memory") != NULL;
    bool unsupported = strstr(be->fail, "not supported") != NULL;
    return halo_fail(err,
                     nomem         ? HALO_E_NOMEM
                     : unsupported ? HALO_E_UNSUPPORTED
                                   : HALO_E_IO,
                     GPU_RUNTIME " backend: %s", be->fail);
}

static void destroy(halo_backend *hbe) {
    if (!hbe) return;
    cu_backend *be = cu_of(hbe);
    (void)cudaStreamSynchronize(be->stream);
    (void)cudaFree(be->scratch);
    (void)cudaFree(((cu_backend_full *)be)->grids);
    (void)cudaStreamDestroy(be->stream);
    free(be);
}

static halo_backend_ops make_ops(void) {
    halo_backend_ops o;
    memset(&o, 0, sizeof o);
    o.name = GPU_RUNTIME;
    o.destroy = destroy;
    o.buf_alloc = buf_alloc;
    o.buf_alloc_pool = buf_alloc_pool;
    o.buf_free = buf_free;
    o.buf_wrap_host = buf_wrap_host;
    o.buf_write = buf_write;
    o.buf_read = buf_read;
    o.embed = cu_embed;
    o.matmul = cu_matmul;
    o.rms_norm = cu_rms_norm;
    o.rope = cu_rope;
    o.hc_pre = cu_hc_pre;
    o.hc_post = cu_hc_post;
    o.attention = cu_attention;
    o.pool = cu_pool;
    o.topk = cu_topk;
    o.moe = cu_moe;
    o.copy = cu_copy;
    o.sync = sync;
    return o;
}

static const halo_backend_ops cu_ops = make_ops();

extern "C" const char *halo_backend_cuda_flavor(void) {
    return GPU_RUNTIME;
}

extern "C" halo_status halo_backend_cuda_create(int device, halo_backend **out, halo_error *err) {
    *out = NULL;
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
        (void)cudaGetLastError();
        return halo_fail(err, HALO_E_UNSUPPORTED,
                         "no usable " GPU_RUNTIME " GPU: %s (" GPU_RUNTIME "GetDeviceCount: %s)",
                         e == cudaSuccess ? "the driver sees none"
                                          : "no GPU driver here, or one older than this runtime",
                         e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    }
    if (device < 0 || device >= count)
        return halo_fail(err, HALO_E_INVALID_ARG, GPU_RUNTIME " device %d: only %d present", device,
                         count);
    cu_backend_full *full = (cu_backend_full *)calloc(1, sizeof *full);
    if (!full) return halo_fail(err, HALO_E_NOMEM, "out of memory");
    cu_backend *be = &full->be;
    be->base.ops = &cu_ops;
    be->device = device;
    size_t grid_bytes = 0;
    for (int i = 0; i < N_GRIDS; i++)
        grid_bytes += grid_table[i].bytes;
    e = cudaSetDevice(device);
    if (e == cudaSuccess)
        e = cudaDeviceGetAttribute(&be->sm_count, cudaDevAttrMultiProcessorCount, device);
    if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&be->stream, cudaStreamNonBlocking);
    if (e == cudaSuccess) e = cudaMalloc((void **)&full->grids, grid_bytes);
    for (size_t i = 0, at = 0; e == cudaSuccess && i < N_GRIDS; at += grid_table[i++].bytes)
        e = cudaMemcpyAsync(full->grids + at, grid_table[i].host, grid_table[i].bytes,
                            cudaMemcpyHostToDevice, be->stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(be->stream);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        if (full->grids) (void)cudaFree(full->grids);
        if (be->stream) (void)cudaStreamDestroy(be->stream);
        free(full);
        return halo_fail(err, HALO_E_UNSUPPORTED, GPU_RUNTIME " device %d: cannot start: %s",
                         device, cudaGetErrorString(e));
    }
    const char *fail = getenv("HALO_TEST_FAIL_SCRATCH");
    be->fail_at = fail ? strtoll(fail, NULL, 10) : 0;
    *out = &be->base;
    return HALO_OK;
}
