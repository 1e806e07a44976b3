/* CUDA graphs for the forward's small steps (decode): the ops between one sync and the next are
 * captured from the backend's stream instead of launched, and each captured piece is replayed
 * as one graph, so the GPU runs a layer's ~33 kernels back to back without a launch gap each.
 *
 * What is captured. A step is what the forward enqueues between two syncs; it is captured when
 * its first op is an embed of at most CU_INTS tokens (decode and short chunks: every host
 * integer then reaches its kernel by value, so the graph has kernel nodes only). Prefill steps
 * run eagerly: their kernels are long, launch gaps do not matter there.
 *
 * Pieces. The forward calls check after every layer; there the capture so far is ended and
 * launched, and the next op starts a new capture. So the GPU runs layer i while the host
 * captures layer i+1 (one graph per step would keep the GPU idle for the whole capture), and
 * sync launches the last piece (the output head) before it waits.
 *
 * Values baked into a capture (token ids, positions, window lengths, scratch addresses, which
 * copies and pools run) are those of this step: every step is captured anew and the cached
 * executable of the same piece index is updated with it (cudaGraphExecUpdate), or made anew
 * when the runtime refuses the update (a piece whose node types changed: a compressor window
 * closing adds a pool kernel). Each piece index keeps a few executables by node-type signature
 * (GRAPH_WAYS), so the shapes a decode cycles through are updated, not re-instantiated. An
 * executable is launched at most once per step and updated in a later step, normally after the
 * sync that ended the earlier one (after a failed step, without one: an update only affects
 * later launches, and a destroyed executable still in flight is freed when it completes).
 *
 * Nothing may wait on the stream while it captures (a sync would invalidate the capture and
 * lose the queued work). Whatever needs the host mid-step calls cu_graph_break first: it ends
 * and launches the capture so far, and the rest of the step runs eagerly. Those are scratch
 * growth (cu_scratch syncs before freeing the old buffer), a full or absent upload ring, the
 * streamed-expert moe (reads the routing back; a backend that met it runs eagerly from then
 * on), and every buffer call (alloc, write, read, free). Results are the same either way: the
 * kernels, their arguments and their order are the eager ones.
 *
 * A failure to capture, instantiate or launch is recorded like a failed op ("graph 3 of the
 * step (ops rms_norm to hc_post): cudaGraphInstantiate: ...") and reported at the next check or
 * sync: the step fails with that error, never with wrong logits.
 *
 * HIP builds run eagerly (the stubs at the end): ROCm 5.2's graph API differs and cannot be
 * tested here. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/cuda/cuda.cuh"
#include "backend/cuda/graph.h"

double cu_host_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#ifndef HALO_HIP

enum {
    GRAPH_WAYS = 8,         /* executables kept per piece index (LRU) */
    GRAPH_MAX_PIECES = 1024 /* piece indexes cached; later pieces are made, launched, dropped */
};

typedef struct graph_way {
    cudaGraphExec_t exec;
    uint64_t sig;  /* node count and node types, in the order the graph lists them */
    uint64_t used; /* clock of the last launch (LRU) */
} graph_way;

struct cu_graph {
    bool streamed;   /* streamed experts were met: eager from then on */
    bool in_step;    /* an op ran since the last sync */
    bool step_graph; /* this step is one to capture */
    bool step_ok;    /* ... and nothing broke its capture yet */
    int piece;       /* pieces launched in this step */
    /* HALO_CUDA_GRAPH_FIRST=N: until the step's first check, a piece ends after N << piece
     * ops (N, 2N, 4N, ...), so the GPU starts on the step while the host still captures its
     * first layer; 0 (the default): pieces end only at checks. Opt-in: at 43 layers (request
     * cuda-dense-2) N = 2 sent the first piece after 15.6 us instead of 54.9 but cost 298 us
     * more host time in the pieces and a longer GPU step: 129.53 tok/s against 130.71. */
    int first_ops, piece_ops;
    bool before_check;              /* no check yet in this step */
    const char *first_op, *last_op; /* of the capture in progress, for error messages */
    uint64_t step_kernels, clock;
    graph_way *ways; /* [n_pieces][GRAPH_WAYS] */
    int n_pieces;
    cudaGraphNode_t *nodes;
    size_t cap_nodes;
    halo_cuda_graph_stats st;
    /* Host time of graph steps (seconds, for HALO_CUDA_GRAPH_STATS): where the host is while
     * the GPU may be idle. t_begin: this step's first op; t_done: the last step's sync return. */
    double t_begin, t_done, t_first, t_pieces;
    double sum_step, sum_first, sum_pieces, sum_wait, sum_between;
    uint64_t timed, between;
};

void cu_graph_init(cu_backend *be) {
    be->graph = NULL;
    be->capturing = false;
    const char *env = getenv("HALO_CUDA_GRAPHS");
    bool off = env && (!strcmp(env, "0") || !strcmp(env, "off"));
    /* Profiling times each op with events (not in a graph); naive uploads from pageable
     * memory: both run eagerly. Without memory for the state, eager too. */
    if (off || be->prof || be->naive) return;
    be->graph = (cu_graph *)calloc(1, sizeof(cu_graph));
    if (!be->graph) return;
    be->graph->st.enabled = true;
    const char *first = getenv("HALO_CUDA_GRAPH_FIRST");
    const int n = first ? atoi(first) : 0;
    be->graph->first_ops = n > 0 && n < 64 ? n : 0;
}

/* The cached way for piece `piece` and signature `sig`: the one with that signature, else an
 * empty one, else the least recently used (the caller replaces its executable). NULL past
 * GRAPH_MAX_PIECES or without memory. */
static graph_way *way_for(cu_graph *g, int piece, uint64_t sig) {
    if (piece >= GRAPH_MAX_PIECES) return NULL;
    if (piece >= g->n_pieces) {
        int n = piece + 1 > 2 * g->n_pieces ? piece + 1 : 2 * g->n_pieces;
        if (n > GRAPH_MAX_PIECES) n = GRAPH_MAX_PIECES;
        graph_way *w = (graph_way *)realloc(g->ways, (size_t)n * GRAPH_WAYS * sizeof *w);
        if (!w) return NULL;
        memset(w + (size_t)g->n_pieces * GRAPH_WAYS, 0,
               (size_t)(n - g->n_pieces) * GRAPH_WAYS * sizeof *w);
        g->ways = w;
        g->n_pieces = n;
    }
    graph_way *row = g->ways + (size_t)piece * GRAPH_WAYS;
    for (int i = 0; i < GRAPH_WAYS; i++)
        if (row[i].exec && row[i].sig == sig) return &row[i];
    for (int i = 0; i < GRAPH_WAYS; i++)
        if (!row[i].exec) return &row[i];
    graph_way *lru = &row[0];
    for (int i = 1; i < GRAPH_WAYS; i++)
        if (row[i].used < lru->used) lru = &row[i];
    return lru;
}

/* Signature of a captured graph (its node count and types) and its kernel node count; false
 * after recording a failed call. */
static bool graph_sig(cu_backend *be, cudaGraph_t graph, const char *what, size_t *n_nodes,
                      uint64_t *sig, uint64_t *kernels) {
    cu_graph *g = be->graph;
    size_t n = 0;
    if (!cu_check(be, what, "cudaGraphGetNodes", cudaGraphGetNodes(graph, NULL, &n))) return false;
    if (n > g->cap_nodes) {
        cudaGraphNode_t *p = (cudaGraphNode_t *)realloc(g->nodes, n * sizeof *p);
        if (!p) return cu_check(be, what, "the node list (host memory)", cudaErrorMemoryAllocation);
        g->nodes = p;
        g->cap_nodes = n;
    }
    if (n && !cu_check(be, what, "cudaGraphGetNodes", cudaGraphGetNodes(graph, g->nodes, &n)))
        return false;
    uint64_t h = 1469598103934665603ull ^ (uint64_t)n, k = 0;
    for (size_t i = 0; i < n; i++) {
        cudaGraphNodeType t;
        if (!cu_check(be, what, "cudaGraphNodeGetType", cudaGraphNodeGetType(g->nodes[i], &t)))
            return false;
        h = (h ^ (uint64_t)t) * 1099511628211ull;
        k += t == cudaGraphNodeTypeKernel;
    }
    *n_nodes = n;
    *sig = h;
    *kernels = k;
    return true;
}

/* Ends the capture in progress and launches it: the cached executable of this piece updated
 * with it, or a new one. */
static void launch_captured_(cu_backend *be) {
    cu_graph *g = be->graph;
    cudaGraph_t graph = NULL;
    cu_ahead_join(be); /* the lookahead's side stream back into the capture (ahead.cu) */
    cudaError_t e = cudaStreamEndCapture(be->stream, &graph);
    be->capturing = false;
    const int piece = g->piece++;
    char what[128];
    snprintf(what, sizeof what, "graph %d of the step (ops %s to %s)", piece,
             g->first_op ? g->first_op : "?", g->last_op ? g->last_op : "?");
    if (e == cudaSuccess && !graph) e = cudaErrorStreamCaptureInvalidated;
    if (!cu_check(be, what, "cudaStreamEndCapture", e)) {
        g->step_ok = false;
        return;
    }
    size_t n = 0;
    uint64_t sig = 0, kernels = 0;
    if (!graph_sig(be, graph, what, &n, &sig, &kernels)) {
        g->step_ok = false;
        (void)cudaGraphDestroy(graph);
        return;
    }
    if (n == 0) { /* nothing was captured (every op skipped or empty) */
        (void)cudaGraphDestroy(graph);
        return;
    }
    graph_way *w = way_for(g, piece, sig);
    cudaGraphExec_t exec = NULL;
    if (w && w->exec && w->sig == sig) {
        cudaGraphExecUpdateResultInfo info;
        memset(&info, 0, sizeof info);
        if (cudaGraphExecUpdate(w->exec, graph, &info) == cudaSuccess) {
            exec = w->exec;
            g->st.updated++;
        } else {
            (void)cudaGetLastError(); /* refused: not an error, a new executable follows */
            g->st.refused++;
        }
    }
    if (!exec) {
        if (w && w->exec) (void)cudaGraphExecDestroy(w->exec); /* refused, or evicted */
        if (w) w->exec = NULL;
        if (!cu_check(be, what, "cudaGraphInstantiate", cudaGraphInstantiate(&exec, graph, 0))) {
            g->step_ok = false;
            (void)cudaGraphDestroy(graph);
            return;
        }
        g->st.instantiated++;
        if (w) {
            w->exec = exec;
            w->sig = sig;
        }
    }
    if (w) w->used = ++g->clock;
    if (cu_check(be, what, "cudaGraphLaunch", cudaGraphLaunch(exec, be->stream))) {
        g->st.graphs++;
        g->step_kernels += kernels;
    } else {
        g->step_ok = false;
    }
    /* Not cached: freed by the runtime once the launch completes. */
    if (!w) (void)cudaGraphExecDestroy(exec);
    (void)cudaGraphDestroy(graph);
}

/* The same, timed for the stats. */
static void launch_captured(cu_backend *be) {
    cu_graph *g = be->graph;
    const double t0 = cu_host_now();
    launch_captured_(be);
    const double t1 = cu_host_now();
    g->t_pieces += t1 - t0;
    if (g->t_first == 0.0) g->t_first = t1;
}

void cu_graph_op(cu_backend *be, const char *op, int64_t embed_tokens) {
    cu_graph *g = be->graph;
    if (!g) return;
    if (embed_tokens >= 0 && g->in_step) {
        /* An embed starts a step; the last one ended without a sync (it failed at a check):
         * launch what it captured (as eager would have run it) and start afresh. */
        if (be->capturing) launch_captured(be);
        g->in_step = false;
    }
    if (!g->in_step) {
        g->in_step = true;
        g->piece = 0;
        g->step_kernels = 0;
        g->t_begin = cu_host_now();
        g->t_first = g->t_pieces = 0.0;
        g->before_check = true;
        g->step_graph = embed_tokens >= 1 && embed_tokens <= CU_INTS && !g->streamed;
        g->step_ok = g->step_graph;
        if (g->step_graph) g->st.steps++;
    }
    if (be->capturing) {
        const bool early = g->first_ops && g->before_check && g->piece < 16 &&
                           ++g->piece_ops > g->first_ops << g->piece;
        if (!early) {
            g->last_op = op;
            return;
        }
        launch_captured(be); /* and this op starts the next piece */
        g->st.early++;
    }
    if (!g->step_ok || be->failed) return;
    /* Relaxed: this thread may still make calls that are unsafe during a capture (none are
     * made: everything that waits breaks the capture first), and the capture can be ended
     * from another thread if a caller moves a session between threads. */
    if (!CU_OK(be, op, cudaStreamBeginCapture(be->stream, cudaStreamCaptureModeRelaxed))) {
        g->step_ok = false;
        return;
    }
    be->capturing = true;
    g->first_op = g->last_op = op;
    g->piece_ops = 1;
}

void cu_graph_piece_end(cu_backend *be) {
    if (!be->graph) return;
    be->graph->before_check = false;
    if (be->capturing) launch_captured(be);
}

void cu_graph_break(cu_backend *be) {
    cu_graph *g = be->graph;
    if (!g) return;
    if (be->capturing) launch_captured(be);
    if (g->in_step && g->step_ok) {
        g->step_ok = false;
        g->st.breaks++;
    }
}

void cu_graph_streamed(cu_backend *be) {
    if (!be->graph) return;
    cu_graph_break(be);
    be->graph->streamed = true;
}

void cu_graph_step_done(cu_backend *be, double wait_s) {
    cu_graph *g = be->graph;
    if (!g) return;
    const double now = cu_host_now();
    if (g->in_step && g->step_graph && g->step_ok && !be->failed && g->step_kernels > 0) {
        g->st.graph_steps++;
        g->st.kernel_nodes += g->step_kernels;
        g->st.last_step_kernels = g->step_kernels;
        g->timed++;
        g->sum_step += now - g->t_begin;
        g->sum_first += (g->t_first > 0.0 ? g->t_first : now) - g->t_begin;
        g->sum_pieces += g->t_pieces;
        g->sum_wait += wait_s;
        /* From the last graph step's sync to this one's first op: the caller's own work
         * (reading the logits, sampling) and the ops before the embed, if any. */
        if (g->t_done > 0.0) {
            g->sum_between += g->t_begin - g->t_done;
            g->between++;
        }
        g->t_done = now;
    } else {
        g->t_done = 0.0;
    }
    g->in_step = false;
}

void cu_graph_stats(cu_backend *be, halo_cuda_graph_stats *out) {
    memset(out, 0, sizeof *out);
    if (be->graph) *out = be->graph->st;
}

void cu_graph_free(cu_backend *be) {
    cu_graph *g = be->graph;
    const char *env = getenv("HALO_CUDA_GRAPH_STATS");
    if (env && *env && strcmp(env, "0") != 0) {
        if (!g) {
            fprintf(stderr, "halo cuda graphs: off (eager launches)\n");
        } else {
            const halo_cuda_graph_stats *s = &g->st;
            fprintf(stderr,
                    "halo cuda graphs: %llu of %llu small steps replayed as graphs, %llu graphs "
                    "launched (%llu ended before a step's first check), %llu instantiated, "
                    "%llu updated (%llu refused), %llu captures "
                    "broken off; kernel launches per graph step %.1f (last %llu)\n",
                    (unsigned long long)s->graph_steps, (unsigned long long)s->steps,
                    (unsigned long long)s->graphs, (unsigned long long)s->early,
                    (unsigned long long)s->instantiated, (unsigned long long)s->updated,
                    (unsigned long long)s->refused, (unsigned long long)s->breaks,
                    s->graph_steps ? (double)s->kernel_nodes / (double)s->graph_steps : 0.0,
                    (unsigned long long)s->last_step_kernels);
            /* While the first piece is captured the GPU has nothing of the step; after the
             * sync returns it has nothing until the next step's first piece. */
            if (g->timed)
                fprintf(stderr,
                        "halo cuda graphs: host us a graph step: %.1f from its first op to the "
                        "sync's return, of it %.1f until the first piece was launched, %.1f "
                        "ending, updating and launching the pieces, %.1f waiting in the sync; "
                        "%.1f from one step's sync to the next step's first op\n",
                        1e6 * g->sum_step / (double)g->timed, 1e6 * g->sum_first / (double)g->timed,
                        1e6 * g->sum_pieces / (double)g->timed,
                        1e6 * g->sum_wait / (double)g->timed,
                        g->between ? 1e6 * g->sum_between / (double)g->between : 0.0);
        }
    }
    if (!g) return;
    if (be->capturing) { /* not expected (destroy breaks first): drop the capture */
        cudaGraph_t graph = NULL;
        if (cudaStreamEndCapture(be->stream, &graph) == cudaSuccess && graph)
            (void)cudaGraphDestroy(graph);
        (void)cudaGetLastError();
        be->capturing = false;
    }
    for (int i = 0; i < g->n_pieces * GRAPH_WAYS; i++)
        if (g->ways[i].exec) (void)cudaGraphExecDestroy(g->ways[i].exec);
    free(g->ways);
    free(g->nodes);
    free(g);
    be->graph = NULL;
}

#else /* HALO_HIP: eager */

void cu_graph_init(cu_backend *be) {
    be->graph = NULL;
    be->capturing = false;
}
void cu_graph_op(cu_backend *be, const char *op, int64_t embed_tokens) {
    (void)be, (void)op, (void)embed_tokens;
}
void cu_graph_piece_end(cu_backend *be) {
    (void)be;
}
void cu_graph_break(cu_backend *be) {
    (void)be;
}
void cu_graph_streamed(cu_backend *be) {
    (void)be;
}
void cu_graph_step_done(cu_backend *be, double wait_s) {
    (void)be, (void)wait_s;
}
void cu_graph_stats(cu_backend *be, halo_cuda_graph_stats *out) {
    (void)be;
    memset(out, 0, sizeof *out);
}
void cu_graph_free(cu_backend *be) {
    (void)be;
}

#endif
