/* Slots and the scheduler: one thread owns the engine and steps every active request through
 * halo_session_eval_many, one prefill chunk or one decoded token per request per step, so
 * concurrent requests share each step's weight reads. Requests beyond the slots wait in a
 * queue; a full queue refuses new ones. A slot keeps its session between requests, and a
 * request starts from the longest prefix of its prompt that its slot's state (rewound through
 * its checkpoints) or the prefix cache holds, so an agent resending a conversation evaluates
 * only what is new. */
#ifndef HALO_SERVE_SCHED_H
#define HALO_SERVE_SCHED_H

#include "halo/cache.h"
#include "halo/halo.h"
#include "serve/request.h"

typedef struct serve_sched serve_sched;
typedef struct serve_job serve_job;

typedef struct serve_sched_params {
    halo_engine *engine;
    const halo_tokenizer *tok;
    uint32_t n_slots, n_ctx;
    uint32_t queue_max;     /* requests waiting for a slot before 429 */
    uint32_t prefill_chunk; /* prompt tokens per request per step (0: 256) */
    uint64_t ckpt_bytes;    /* checkpoint memory per slot; 0: no checkpoints */
    /* The prefix cache (RAM and/or disk, halo/cache.h) every slot's state goes to when its
     * request ends and requests are restored from; NULL: each slot reuses only its own
     * state. Owned by the caller; used only by the scheduler thread. */
    halo_cache *cache;
} serve_sched_params;

halo_status serve_sched_start(const serve_sched_params *p, serve_sched **out, halo_error *err);
/* Stops the thread, ends every request, frees the slots. */
void serve_sched_stop(serve_sched *s);

/* Queues a request; the job takes req's contents (req is zeroed). NULL when the queue is full
 * (*retry_after: seconds to suggest). The caller holds one reference: serve_job_release. */
serve_job *serve_sched_submit(serve_sched *s, serve_request *req, unsigned *retry_after);
/* Waits up to ms milliseconds for the job to change since *seen; true when it did. */
bool serve_job_wait(serve_job *j, unsigned *seen, int ms);
/* Calls fn with the reply as it stands, under the job's lock (fn must not block). */
void serve_job_view(serve_job *j, void (*fn)(void *user, const serve_reply *r), void *user);
const serve_request *serve_job_request(const serve_job *j);
/* The client left: the scheduler drops the request at its next step. */
void serve_job_cancel(serve_job *j);
void serve_job_release(serve_job *j);

/* Prometheus text exposition of the counters and gauges. */
void serve_sched_metrics(serve_sched *s, sbuf *out);

#endif
