/* The kernels' device flags (cu_devflags, cuda.cuh) and HALO_CUDA_TRACE=1: where a step's time
 * goes inside CUDA graphs with programmatic dependent launch, per kernel.
 *
 * Why: the per-op profile (HALO_CUDA_PROFILE=1) runs eagerly with events around every op and
 * Nsight Compute serializes kernels and flushes caches, so both time small kernels far slower
 * than a graph step runs them (session 6: a kernel that looked ~50 us a layer slower lost 1 %
 * inside graphs), and neither shows what overlaps. Here the first thread of each kernel's first
 * block reads the GPU's global timer before and after its PDL wait (cu_pdl_entry / cu_pdl_wait)
 * and appends a record; since block 0 passes the wait only once the kernel before it has
 * finished, a kernel's share of the step is the gap from its release to the next kernel's, and
 * "lead" (release minus arrival) says how long it sat resident waiting. The host notes each
 * launch's name (CU_LAUNCHED) while it captures; at sync the records are read back and paired
 * with the names when the counts agree. Costs one atomic a kernel in block 0: a traced step is
 * a little slower than an untraced one (compare the bench's tok/s with and without).
 * destroy prints, per kernel name, launches and microseconds a step, then one step's timeline. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda.cuh"
#include "backend/cuda/graph.h"

#ifndef HALO_HIP
enum { DEVF_MAX = 64 };
static cu_devf_setter devf_setters[DEVF_MAX];
static int devf_n;

int cu_devf_register(cu_devf_setter set) {
    if (devf_n < DEVF_MAX) devf_setters[devf_n++] = set;
    return devf_n;
}

bool cu_devf_set_all(const cu_devflags *f) {
    bool ok = devf_n < DEVF_MAX; /* every file registered */
    for (int i = 0; i < devf_n; i++)
        ok &= devf_setters[i](f);
    return ok;
}

enum {
    TRACE_CAP = 1 << 16, /* records a step (a 43-layer decode step has ~1,000) */
    TRACE_NAMES = 256,   /* distinct kernel names */
    TRACE_LINE = 2048    /* rows of the one step's timeline printed */
};

typedef struct trace_name {
    const char *name;
    double us, lead_us; /* summed over matched steps */
    uint64_t n;
} trace_name;

struct cu_trace {
    unsigned long long *dev; /* TRACE_CAP x 3 */
    unsigned *dev_n;
    unsigned long long *rec; /* host copy */
    const char **names;      /* this step's launches, in order */
    uint64_t n_names;
    trace_name tab[TRACE_NAMES];
    int n_tab;
    uint64_t steps, matched, skipped, eager, graph_steps;
    double step_us; /* first release to last release, matched steps */
    char *line;     /* the timeline of one step (the 8th matched one) */
    size_t line_len;
};

void cu_trace_note_(cu_backend *be, const char *kernel) {
    cu_trace *t = be->trace;
    if (t->n_names < TRACE_CAP) t->names[t->n_names] = kernel;
    t->n_names++;
}

bool cu_trace_init(cu_backend *be) {
    cu_devflags f = {be->pdl_first ? 1 : 0, NULL, NULL, 0};
    const char *env = getenv("HALO_CUDA_TRACE");
#ifndef HALO_CUDA_TRACE_KERNELS
    if (env && strcmp(env, "1") == 0)
        fprintf(stderr, "cuda trace: this build's kernels do not record (configure with "
                        "-DHALO_CUDA_TRACE_KERNELS=ON); running untraced\n");
    if (be->pdl_first)
        fprintf(stderr, "cuda: HALO_CUDA_PDLFIRST needs a -DHALO_CUDA_TRACE_KERNELS=ON build\n");
    env = NULL;
#endif
    if (env && strcmp(env, "1") == 0 && be->pdl) {
        cu_trace *t = (cu_trace *)calloc(1, sizeof *t);
        if (t) {
            t->rec = (unsigned long long *)malloc((size_t)TRACE_CAP * 3 * sizeof *t->rec);
            t->names = (const char **)malloc((size_t)TRACE_CAP * sizeof *t->names);
            t->line = (char *)malloc((size_t)TRACE_LINE * 96);
        }
        if (!t || !t->rec || !t->names || !t->line ||
            cudaMalloc((void **)&t->dev, (size_t)TRACE_CAP * 3 * sizeof *t->dev) != cudaSuccess ||
            cudaMalloc((void **)&t->dev_n, sizeof *t->dev_n) != cudaSuccess ||
            cudaMemset(t->dev_n, 0, sizeof *t->dev_n) != cudaSuccess) {
            (void)cudaGetLastError();
            fprintf(stderr, "cuda trace: cannot start (memory); running untraced\n");
            if (t) {
                if (t->dev) (void)cudaFree(t->dev);
                free(t->rec), free(t->names), free(t->line), free(t);
            }
        } else {
            be->trace = t;
            f.trace = t->dev, f.trace_n = t->dev_n, f.trace_cap = TRACE_CAP;
        }
    }
    return cu_devf_set_all(&f);
}

static trace_name *trace_slot(cu_trace *t, const char *name) {
    for (int i = 0; i < t->n_tab; i++)
        if (t->tab[i].name == name || strcmp(t->tab[i].name, name) == 0) return &t->tab[i];
    if (t->n_tab == TRACE_NAMES) return NULL;
    trace_name *s = &t->tab[t->n_tab++];
    s->name = name;
    return s;
}

/* After sync's wait: the step's records, paired with its launches when the counts agree. */
void cu_trace_step(cu_backend *be) {
    cu_trace *t = be->trace;
    if (!t) return;
    unsigned n = 0;
    halo_cuda_graph_stats st;
    cu_graph_stats(be, &st);
    const bool graph_step = st.graph_steps != t->graph_steps; /* only replayed steps count */
    t->graph_steps = st.graph_steps;
    if (!graph_step) {
        t->eager++;
        goto reset;
    }
    if (cudaMemcpy(&n, t->dev_n, sizeof n, cudaMemcpyDeviceToHost) != cudaSuccess) goto reset;
    t->steps++;
    if (n < 2 || n > TRACE_CAP || n != t->n_names) {
        if (t->skipped++ < 4)
            fprintf(stderr, "cuda trace: step %llu: %u records, %llu launches: not paired\n",
                    (unsigned long long)t->steps, n, (unsigned long long)t->n_names);
        goto reset;
    }
    if (cudaMemcpy(t->rec, t->dev, (size_t)n * 3 * sizeof *t->rec, cudaMemcpyDeviceToHost) !=
        cudaSuccess)
        goto reset;
    t->matched++;
    t->step_us += (double)(t->rec[3 * (n - 1) + 1] - t->rec[1]) / 1e3;
    if (t->matched == 8) t->line_len = 0;
    for (unsigned i = 0; i + 1 < n; i++) {
        const unsigned long long *r = t->rec + 3 * i;
        const double us = (double)(r[4] - r[1]) / 1e3, lead = (double)(r[1] - r[0]) / 1e3;
        trace_name *s = trace_slot(t, t->names[i]);
        if (s) s->us += us, s->lead_us += lead, s->n++;
        if (t->matched == 8 && i < TRACE_LINE)
            t->line_len +=
                (size_t)snprintf(t->line + t->line_len, 96, "  %5u %8.2f %6.2f %6llu x %4llu  %s\n",
                                 i, us, lead, r[2] >> 16, r[2] & 0xffff, t->names[i]);
    }
reset:
    (void)cudaGetLastError();
    t->n_names = 0;
    (void)cudaMemsetAsync(t->dev_n, 0, sizeof *t->dev_n, be->stream); /* before the next step */
}

static int trace_cmp(const void *a, const void *b) {
    const double x = ((const trace_name *)a)->us, y = ((const trace_name *)b)->us;
    return x < y ? 1 : x > y ? -1 : 0;
}

void cu_trace_free(cu_backend *be) {
    cu_trace *t = be->trace;
    if (!t) return;
    be->trace = NULL;
    cu_devflags f = {be->pdl_first ? 1 : 0, NULL, NULL, 0};
    (void)cu_devf_set_all(&f);
    const double m = t->matched ? (double)t->matched : 1.0;
    fprintf(stderr,
            "cuda trace: %llu graph steps (and %llu eager, left out), %llu paired (%llu not); a "
            "paired step %.1f us from the first "
            "kernel's release to the last's\n"
            "  kernel                                    launches/step   us/step   us/launch  "
            "lead us\n",
            (unsigned long long)t->steps, (unsigned long long)t->eager,
            (unsigned long long)t->matched, (unsigned long long)t->skipped, t->step_us / m);
    qsort(t->tab, (size_t)t->n_tab, sizeof t->tab[0], trace_cmp);
    for (int i = 0; i < t->n_tab; i++) {
        const trace_name *s = &t->tab[i];
        fprintf(stderr, "  %-40s %10.1f %11.1f %10.2f %8.2f\n", s->name, (double)s->n / m,
                s->us / m, s->n ? s->us / (double)s->n : 0.0,
                s->n ? s->lead_us / (double)s->n : 0.0);
    }
    if (t->line_len)
        fprintf(stderr,
                "cuda trace: the 8th paired step (index, us to the next release, lead us, "
                "grid x block, kernel)\n%s",
                t->line);
    (void)cudaFree(t->dev);
    (void)cudaFree(t->dev_n);
    free(t->rec), free(t->names), free(t->line), free(t);
}
#else
void cu_trace_note_(cu_backend *, const char *) {}
bool cu_trace_init(cu_backend *) {
    return true;
}
void cu_trace_step(cu_backend *) {}
void cu_trace_free(cu_backend *) {}
#endif
