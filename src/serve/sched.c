/* The scheduler (sched.h). One mutex guards the queue, every job's reply and the counters; the
 * engine is touched only by the scheduler thread, outside the lock. A slot's prompt is
 * evaluated in chunks, the last prompt token alone: the session is snapshotted just before it,
 * so a later request with the same prompt (a retry, a regenerate, a second sample) rewinds to
 * that snapshot and evaluates one token. */
#include "serve/sched.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/error.h"
#include "serve/output.h"

struct serve_job {
    serve_sched *s;
    serve_request req;
    int refs;
    bool cancelled;
    unsigned version;
    pthread_cond_t cv;
    serve_event *events;
    size_t n_events, cap_events;
    serve_reply r; /* the view handed to formatters; events/n_events refreshed under the lock */
    char error[512];
    serve_job *next;
};

typedef struct slot {
    halo_session *sess;
    halo_sampler *smp;
    int32_t *hist; /* the tokens the session holds */
    uint32_t n_hist;
    bool store; /* the request ended: its state goes to the prefix cache before the next one */
    serve_job *job;
    uint32_t at;  /* next prompt token to evaluate */
    int32_t last; /* the token sampled last, evaluated at the next step */
    uint32_t n_gen;
    serve_output out;
    float *logits;
    /* this step's input */
    const int32_t *in;
    uint32_t n_in;
} slot;

struct serve_sched {
    serve_sched_params p;
    uint32_t n_vocab;
    slot *slots;
    pthread_t thread;
    bool thread_started, stopping;
    halo_cache *cache; /* p.cache, or a cache of no memory of its own (own_cache) that only
                        * rewinds slots through their checkpoints */
    bool own_cache;
    pthread_mutex_t mu;
    pthread_cond_t wake;
    serve_job *queue_head, *queue_tail;
    uint32_t queued;
    /* Jobs taken off the queue whose slot admit() has not yet set: counted busy in the metrics, so
     * a job between the two is never missing from both gauges (a client saw an idle server then). */
    uint32_t admitting;
    /* metrics */
    uint64_t requests, rejected, cancelled, failed, prompt_tokens, cached_tokens, gen_tokens;
    uint64_t steps, evaluated_tokens, stored;
    double decode_tps; /* moving average over steps */
};

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void *run(void *arg);

halo_status serve_sched_start(const serve_sched_params *p, serve_sched **out, halo_error *err) {
    *out = NULL;
    serve_sched *s = calloc(1, sizeof *s);
    if (!s) return halo_fail(err, HALO_E_NOMEM, "serve: out of memory");
    s->p = *p;
    if (!s->p.prefill_chunk) s->p.prefill_chunk = 256;
    s->n_vocab = halo_engine_n_vocab(p->engine);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->wake, NULL);
    s->slots = calloc(p->n_slots, sizeof *s->slots);
    halo_status st = s->slots ? HALO_OK : halo_fail(err, HALO_E_NOMEM, "serve: out of memory");
    s->cache = p->cache;
    if (!st && !s->cache) {
        halo_cache_params none = {0};
        st = halo_cache_open(p->engine, &none, &s->cache, err);
        s->own_cache = !st;
    }
    for (uint32_t i = 0; !st && i < p->n_slots; i++) {
        slot *sl = &s->slots[i];
        st = halo_session_create(p->engine, p->n_ctx, &sl->sess, err);
        halo_checkpoint_policy cp = {.interval = p->ckpt_bytes ? 0 : UINT32_MAX,
                                     .max_bytes = p->ckpt_bytes};
        if (!st) st = halo_session_set_checkpoints(sl->sess, &cp, err);
        sl->hist = malloc((size_t)p->n_ctx * sizeof *sl->hist);
        sl->logits = malloc((size_t)s->n_vocab * sizeof *sl->logits);
        if (!st && (!sl->hist || !sl->logits))
            st = halo_fail(err, HALO_E_NOMEM, "serve: out of memory for slot %u", i);
        if (st) halo_error_prefix(err, "slot %u of %u: ", i, p->n_slots);
    }
    if (!st && pthread_create(&s->thread, NULL, run, s))
        st = halo_fail(err, HALO_E_NOMEM, "serve: cannot start the scheduler thread");
    if (st) {
        serve_sched_stop(s);
        return st;
    }
    s->thread_started = true;
    *out = s;
    return HALO_OK;
}

/* ---- jobs ---------------------------------------------------------------------------------- */

static void job_unref_locked(serve_job *j) {
    if (--j->refs > 0) return;
    for (size_t i = 0; i < j->n_events; i++) {
        free(j->events[i].text);
        free(j->events[i].name);
    }
    free(j->events);
    serve_request_free(&j->req);
    pthread_cond_destroy(&j->cv);
    free(j);
}

static void job_changed(serve_job *j) {
    j->version++;
    j->r.events = j->events;
    j->r.n_events = j->n_events;
    pthread_cond_broadcast(&j->cv);
}

static void job_finish_locked(serve_job *j, serve_finish fin, const char *error) {
    if (j->r.done) return;
    j->r.done = true;
    j->r.finish = fin;
    if (error) {
        snprintf(j->error, sizeof j->error, "%s", error);
        j->r.error = j->error;
    }
    job_changed(j);
}

serve_job *serve_sched_submit(serve_sched *s, serve_request *req, unsigned *retry_after) {
    pthread_mutex_lock(&s->mu);
    /* Free slots take requests at the next step: only what waits beyond them counts. */
    uint32_t free_slots = 0;
    for (uint32_t i = 0; i < s->p.n_slots; i++)
        free_slots += s->slots[i].job == NULL;
    if (s->queued >= s->p.queue_max + free_slots) {
        s->rejected++;
        /* Roughly one slot's turn: a few seconds on a small model, more on a big one. */
        *retry_after = 1 + s->queued / (s->p.n_slots ? s->p.n_slots : 1);
        pthread_mutex_unlock(&s->mu);
        return NULL;
    }
    serve_job *j = calloc(1, sizeof *j);
    if (!j) {
        pthread_mutex_unlock(&s->mu);
        *retry_after = 1;
        return NULL;
    }
    j->s = s;
    j->req = *req;
    memset(req, 0, sizeof *req);
    j->refs = 2; /* the caller's and the scheduler's */
    pthread_cond_init(&j->cv, NULL);
    if (s->queue_tail)
        s->queue_tail->next = j;
    else
        s->queue_head = j;
    s->queue_tail = j;
    s->queued++;
    s->requests++;
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->mu);
    return j;
}

bool serve_job_wait(serve_job *j, unsigned *seen, int ms) {
    serve_sched *s = j->s;
    pthread_mutex_lock(&s->mu);
    if (j->version == *seen && ms > 0) {
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        t.tv_sec += ms / 1000;
        t.tv_nsec += (long)(ms % 1000) * 1000000L;
        if (t.tv_nsec >= 1000000000L) t.tv_sec++, t.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&j->cv, &s->mu, &t);
    }
    bool changed = j->version != *seen;
    *seen = j->version;
    pthread_mutex_unlock(&s->mu);
    return changed;
}

void serve_job_view(serve_job *j, void (*fn)(void *user, const serve_reply *r), void *user) {
    pthread_mutex_lock(&j->s->mu);
    fn(user, &j->r);
    pthread_mutex_unlock(&j->s->mu);
}

const serve_request *serve_job_request(const serve_job *j) {
    return &j->req;
}

void serve_job_cancel(serve_job *j) {
    pthread_mutex_lock(&j->s->mu);
    j->cancelled = true;
    pthread_cond_signal(&j->s->wake);
    pthread_mutex_unlock(&j->s->mu);
}

void serve_job_release(serve_job *j) {
    if (!j) return;
    serve_sched *s = j->s;
    pthread_mutex_lock(&s->mu);
    if (!j->r.done) {
        j->cancelled = true;
        pthread_cond_signal(&s->wake);
    }
    job_unref_locked(j);
    pthread_mutex_unlock(&s->mu);
}

/* serve_output_fn: appends an event to the slot's job (under the lock: readers may be
 * formatting). Deltas of one kind that follow each other stay separate events: each is one
 * SSE frame. */
static void on_output(void *user, serve_ev_kind kind, const char *text, const char *name,
                      unsigned tool_index) {
    serve_job *j = user;
    serve_sched *s = j->s;
    pthread_mutex_lock(&s->mu);
    if (j->n_events == j->cap_events) {
        size_t cap = j->cap_events ? j->cap_events * 2 : 32;
        serve_event *e = realloc(j->events, cap * sizeof *e);
        if (!e) {
            pthread_mutex_unlock(&s->mu);
            return;
        }
        j->events = e;
        j->cap_events = cap;
    }
    serve_event *e = &j->events[j->n_events];
    memset(e, 0, sizeof *e);
    e->kind = kind;
    e->text = strdup(text ? text : "");
    e->name = name ? strdup(name) : NULL;
    e->tool_index = tool_index;
    if (e->text && (!name || e->name)) {
        j->n_events++;
        job_changed(j);
    } else {
        free(e->text);
        free(e->name);
    }
    pthread_mutex_unlock(&s->mu);
}

/* ---- slots --------------------------------------------------------------------------------- */

static uint32_t common_prefix(const int32_t *a, uint32_t na, const int32_t *b, uint32_t nb) {
    uint32_t n = na < nb ? na : nb, i = 0;
    while (i < n && a[i] == b[i])
        i++;
    return i;
}

/* Prompt tokens a slot's own state can keep: at least one prompt token is always evaluated,
 * for its logits. Slots are chosen by it; the cache may do better when the request starts. */
static uint32_t reuse_of(const slot *sl, const halo_tokens *prompt) {
    uint32_t common = common_prefix(sl->hist, sl->n_hist, prompt->ids, (uint32_t)prompt->n);
    return common >= prompt->n ? (uint32_t)prompt->n - 1 : common;
}

static uint64_t replayed_total(const halo_session *sess) {
    halo_checkpoint_stats cs;
    halo_session_checkpoint_stats(sess, &cs);
    return cs.replayed_total;
}

/* Starts a job in a slot: restores the longest prefix of the prompt that the slot's own state
 * (rewound through its checkpoints) or the prefix cache holds, creates the sampler. */
static void admit(serve_sched *s, slot *sl, serve_job *j) {
    halo_error err = {0};
    const serve_request *r = &j->req;
    uint32_t keep = 0;
    uint64_t replayed = replayed_total(sl->sess);
    halo_status st = halo_cache_restore(s->cache, sl->sess, r->prompt.ids,
                                        (uint32_t)r->prompt.n - 1, &keep, &err);
    /* Tokens a rewind evaluated again to get there were not reused. */
    replayed = replayed_total(sl->sess) - replayed;
    sl->n_hist = halo_session_n_past(sl->sess);
    memcpy(sl->hist, halo_session_tokens(sl->sess), (size_t)sl->n_hist * sizeof *sl->hist);
    if (!st && sl->n_hist != keep)
        st = halo_fail(&err, HALO_E_INVALID_ARG,
                       "serve: the restored state holds %u tokens, not %u", sl->n_hist, keep);
    if (!st) st = halo_sampler_create(&r->sp, s->n_vocab, &sl->smp, &err);
    if (!st)
        for (size_t i = 0; i < r->prompt.n; i++)
            halo_sampler_accept(sl->smp, r->prompt.ids[i]);
    uint32_t cached = keep > replayed ? keep - (uint32_t)replayed : 0;
    pthread_mutex_lock(&s->mu);
    sl->job = j;
    s->admitting--;
    sl->at = keep;
    sl->n_gen = 0;
    j->r.started = true;
    j->r.usage.prompt = (uint32_t)r->prompt.n;
    j->r.usage.cached = cached;
    s->prompt_tokens += r->prompt.n;
    s->cached_tokens += cached;
    s->evaluated_tokens += r->prompt.n - cached;
    job_changed(j);
    pthread_mutex_unlock(&s->mu);
    serve_output_init(&sl->out, s->p.tok, r, on_output, j);
    if (st) {
        pthread_mutex_lock(&s->mu);
        job_finish_locked(j, SERVE_FIN_ERROR, err.message);
        pthread_mutex_unlock(&s->mu);
    }
}

/* Records the state of slots whose request ended in the prefix cache (before the slot takes
 * another request and rewinds): the next turn of that conversation, in any slot or after a
 * restart (a disk cache), starts from it. */
static void store_ended(serve_sched *s) {
    for (uint32_t i = 0; i < s->p.n_slots; i++) {
        slot *sl = &s->slots[i];
        if (!sl->store) continue;
        sl->store = false;
        if (!s->p.cache || !halo_session_n_past(sl->sess)) continue;
        halo_error err = {0};
        if (halo_cache_insert(s->p.cache, sl->sess, &err) == HALO_OK) {
            pthread_mutex_lock(&s->mu);
            s->stored++;
            pthread_mutex_unlock(&s->mu);
        }
    }
}

/* Ends a slot's job (the lock held) and frees the slot. */
static void release_locked(serve_sched *s, slot *sl, serve_finish fin, const char *error) {
    serve_job *j = sl->job;
    if (fin == SERVE_FIN_CANCEL) s->cancelled++;
    if (fin == SERVE_FIN_ERROR) s->failed++;
    j->r.stop_sequence = sl->out.stop_hit;
    job_finish_locked(j, fin, error);
    job_unref_locked(j);
    sl->job = NULL;
    sl->store = fin != SERVE_FIN_ERROR;
    halo_sampler_free(sl->smp);
    sl->smp = NULL;
}

static void finish(serve_sched *s, slot *sl, serve_finish fin, const char *error) {
    serve_output_finish(&sl->out);
    if (fin == SERVE_FIN_STOP && sl->out.n_tools) fin = SERVE_FIN_TOOLS;
    /* A tool call already streamed that the model broke is an error; one cut by max_tokens
     * stays as it is, with the length finish (what OpenAI and Anthropic send). */
    if ((fin == SERVE_FIN_STOP || fin == SERVE_FIN_TOOLS) && (sl->out.broken || sl->out.cut)) {
        fin = SERVE_FIN_ERROR;
        error = sl->out.why;
    }
    pthread_mutex_lock(&s->mu);
    release_locked(s, sl, fin, error);
    pthread_mutex_unlock(&s->mu);
    serve_output_free(&sl->out);
}

/* Picks a token from the slot's logits: logit_bias added, or the test hook's next token. */
static int32_t pick(serve_sched *s, slot *sl) {
    const serve_request *r = &sl->job->req;
    if (r->forced.n) {
        int32_t eos = halo_tokenizer_eos(s->p.tok);
        return sl->n_gen < r->forced.n ? r->forced.ids[sl->n_gen] : eos;
    }
    uint32_t rows;
    const float *logits = halo_session_logits(sl->sess, &rows);
    if (r->n_bias) {
        memcpy(sl->logits, logits, (size_t)s->n_vocab * sizeof *logits);
        for (size_t i = 0; i < r->n_bias; i++)
            if ((uint32_t)r->bias_ids[i] < s->n_vocab) sl->logits[r->bias_ids[i]] += r->bias[i];
        logits = sl->logits;
    }
    return halo_sampler_sample(sl->smp, logits);
}

/* After the slot's step: samples and streams one token, or ends the request. */
static void advance(serve_sched *s, slot *sl) {
    const serve_request *r = &sl->job->req;
    if (sl->at < r->prompt.n) return; /* still in the prompt */
    int32_t id = pick(s, sl);
    halo_sampler_accept(sl->smp, id);
    sl->n_gen++;
    bool reasoning = serve_output_in_reasoning(&sl->out);
    pthread_mutex_lock(&s->mu);
    sl->job->r.usage.completion = sl->n_gen;
    if (reasoning) sl->job->r.usage.reasoning++;
    s->gen_tokens++;
    pthread_mutex_unlock(&s->mu);
    if (!r->ignore_eos && halo_tokenizer_is_eog(s->p.tok, id)) {
        finish(s, sl, SERVE_FIN_STOP, NULL);
        return;
    }
    if (!serve_output_token(&sl->out, id)) {
        finish(s, sl, SERVE_FIN_STOP, NULL);
        return;
    }
    if (sl->n_gen >= r->max_tokens || sl->n_hist >= s->p.n_ctx) {
        finish(s, sl, SERVE_FIN_LENGTH, NULL);
        return;
    }
    sl->last = id;
}

/* The slot's tokens for this step: a prompt chunk (stopping before the last prompt token, which
 * goes alone after the snapshot), or the last sampled token. */
static void plan_input(serve_sched *s, slot *sl) {
    const serve_request *r = &sl->job->req;
    uint32_t n = (uint32_t)r->prompt.n;
    if (sl->at < n) {
        uint32_t end = sl->at + s->p.prefill_chunk;
        if (sl->at < n - 1 && end > n - 1) end = n - 1;
        if (end > n) end = n;
        sl->in = r->prompt.ids + sl->at;
        sl->n_in = end - sl->at;
    } else {
        sl->in = &sl->last;
        sl->n_in = 1;
    }
}

static void after_eval(serve_sched *s, slot *sl) {
    const serve_request *r = &sl->job->req;
    memcpy(sl->hist + sl->n_hist, sl->in, (size_t)sl->n_in * sizeof *sl->in);
    sl->n_hist += sl->n_in;
    if (sl->at < r->prompt.n) {
        sl->at += sl->n_in;
        if (sl->at == r->prompt.n - 1) {
            halo_snapshot *snap = NULL;
            halo_error err = {0};
            /* The copy returned is not needed: the session keeps its own as rewind anchor, so
             * the same prompt again (a retry, a regenerate) evaluates one token. */
            halo_session_snapshot(sl->sess, &snap, &err);
            halo_snapshot_free(snap);
        }
    }
}

static void step(serve_sched *s) {
    uint32_t n = 0;
    halo_session *sess[s->p.n_slots];
    const int32_t *toks[s->p.n_slots];
    uint32_t counts[s->p.n_slots];
    slot *batch[s->p.n_slots];
    uint32_t decoding = 0;
    for (uint32_t i = 0; i < s->p.n_slots; i++) {
        slot *sl = &s->slots[i];
        if (!sl->job) continue;
        plan_input(s, sl);
        if (sl->at >= sl->job->req.prompt.n) decoding++;
        sess[n] = sl->sess;
        toks[n] = sl->in;
        counts[n] = sl->n_in;
        batch[n++] = sl;
    }
    if (!n) return;
    double t0 = now_s();
    halo_error err = {0};
    halo_status st = halo_session_eval_many(sess, toks, counts, n, &err);
    double dt = now_s() - t0;
    for (uint32_t i = 0; i < n; i++) {
        slot *sl = batch[i];
        if (st) {
            /* Which sessions advanced is in n_past; the simplest sound recovery is to drop
             * this step's requests and let each slot start over. */
            halo_session_rewind(sl->sess, 0, NULL);
            sl->n_hist = 0;
            finish(s, sl, SERVE_FIN_ERROR, err.message);
            continue;
        }
        after_eval(s, sl);
        advance(s, sl);
    }
    pthread_mutex_lock(&s->mu);
    s->steps++;
    if (decoding && dt > 0) {
        double tps = decoding / dt;
        s->decode_tps = s->decode_tps ? 0.9 * s->decode_tps + 0.1 * tps : tps;
    }
    pthread_mutex_unlock(&s->mu);
}

/* Under the lock: drops cancelled work, moves queued jobs into free slots (the slot that keeps
 * most of the prompt). Returns the jobs to admit, with their slots. */
static uint32_t schedule_locked(serve_sched *s, slot **to, serve_job **jobs) {
    for (uint32_t i = 0; i < s->p.n_slots; i++) {
        slot *sl = &s->slots[i];
        if (sl->job && sl->job->cancelled) {
            serve_output_free(&sl->out);
            release_locked(s, sl, SERVE_FIN_CANCEL, NULL);
        }
    }
    for (serve_job **pp = &s->queue_head; *pp;) {
        serve_job *j = *pp;
        if (!j->cancelled) {
            pp = &j->next;
            continue;
        }
        *pp = j->next;
        s->queued--;
        s->cancelled++;
        job_finish_locked(j, SERVE_FIN_CANCEL, NULL);
        job_unref_locked(j);
    }
    s->queue_tail = NULL;
    for (serve_job *j = s->queue_head; j; j = j->next)
        s->queue_tail = j;
    uint32_t n = 0;
    while (s->queue_head) {
        slot *best = NULL;
        uint32_t best_keep = 0;
        for (uint32_t i = 0; i < s->p.n_slots; i++) {
            slot *sl = &s->slots[i];
            bool taken = sl->job != NULL;
            for (uint32_t k = 0; k < n; k++)
                taken |= to[k] == sl;
            if (taken) continue;
            uint32_t keep = reuse_of(sl, &s->queue_head->req.prompt);
            if (!best || keep > best_keep) best = sl, best_keep = keep;
        }
        if (!best) break;
        serve_job *j = s->queue_head;
        s->queue_head = j->next;
        if (!s->queue_head) s->queue_tail = NULL;
        j->next = NULL;
        s->queued--;
        s->admitting++;
        to[n] = best;
        jobs[n++] = j;
    }
    return n;
}

static void *run(void *arg) {
    serve_sched *s = arg;
    slot *to[s->p.n_slots];
    serve_job *jobs[s->p.n_slots];
    pthread_mutex_lock(&s->mu);
    while (!s->stopping) {
        uint32_t n = schedule_locked(s, to, jobs);
        bool busy = n > 0;
        for (uint32_t i = 0; i < s->p.n_slots; i++)
            busy |= s->slots[i].job != NULL;
        if (!busy) {
            /* Idle: the states of the requests that just ended go to the cache now. */
            bool pending = false;
            for (uint32_t i = 0; i < s->p.n_slots; i++)
                pending |= s->slots[i].store;
            if (pending) {
                pthread_mutex_unlock(&s->mu);
                store_ended(s);
                pthread_mutex_lock(&s->mu);
                continue;
            }
            pthread_cond_wait(&s->wake, &s->mu);
            continue;
        }
        pthread_mutex_unlock(&s->mu);
        store_ended(s);
        for (uint32_t i = 0; i < n; i++) {
            admit(s, to[i], jobs[i]);
            if (jobs[i]->r.done) { /* admission failed: free the slot */
                pthread_mutex_lock(&s->mu);
                to[i]->job = NULL;
                halo_sampler_free(to[i]->smp);
                to[i]->smp = NULL;
                job_unref_locked(jobs[i]);
                pthread_mutex_unlock(&s->mu);
                serve_output_free(&to[i]->out);
            }
        }
        step(s);
        pthread_mutex_lock(&s->mu);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

void serve_sched_stop(serve_sched *s) {
    if (!s) return;
    if (s->thread_started) {
        pthread_mutex_lock(&s->mu);
        s->stopping = true;
        pthread_cond_signal(&s->wake);
        pthread_mutex_unlock(&s->mu);
        pthread_join(s->thread, NULL);
    }
    pthread_mutex_lock(&s->mu);
    for (uint32_t i = 0; s->slots && i < s->p.n_slots; i++) {
        slot *sl = &s->slots[i];
        if (sl->job) {
            serve_output_free(&sl->out);
            release_locked(s, sl, SERVE_FIN_ERROR, "the server is shutting down");
        }
    }
    while (s->queue_head) {
        serve_job *j = s->queue_head;
        s->queue_head = j->next;
        job_finish_locked(j, SERVE_FIN_ERROR, "the server is shutting down");
        job_unref_locked(j);
    }
    pthread_mutex_unlock(&s->mu);
    if (s->slots) store_ended(s);
    if (s->own_cache) halo_cache_close(s->cache);
    for (uint32_t i = 0; s->slots && i < s->p.n_slots; i++) {
        halo_session_free(s->slots[i].sess);
        free(s->slots[i].hist);
        free(s->slots[i].logits);
    }
    free(s->slots);
    pthread_cond_destroy(&s->wake);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

void serve_sched_metrics(serve_sched *s, sbuf *out) {
    pthread_mutex_lock(&s->mu);
    uint32_t busy = s->admitting;
    for (uint32_t i = 0; i < s->p.n_slots; i++)
        busy += s->slots[i].job != NULL;
    static const char *const counters[][2] = {
        {"halo_requests_total", "requests accepted into the queue"},
        {"halo_requests_rejected_total", "requests refused with 429 (queue full)"},
        {"halo_requests_cancelled_total", "requests whose client left before the end"},
        {"halo_requests_failed_total", "requests ended by an engine error"},
        {"halo_prompt_tokens_total", "prompt tokens of admitted requests"},
        {"halo_prompt_tokens_cached_total",
         "prompt tokens reused (a slot's state or the prefix cache), not evaluated again"},
        {"halo_prompt_tokens_evaluated_total",
         "prompt tokens evaluated (those not reused, and those a rewind evaluated again)"},
        {"halo_generated_tokens_total", "tokens generated"},
        {"halo_steps_total", "scheduler steps (one multi-sequence eval each)"},
        {"halo_cache_stores_total", "slot states recorded in the prefix cache"},
    };
    uint64_t values[] = {s->requests,      s->rejected,      s->cancelled,        s->failed,
                         s->prompt_tokens, s->cached_tokens, s->evaluated_tokens, s->gen_tokens,
                         s->steps,         s->stored};
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++)
        sbuf_printf(out, "# HELP %s %s\n# TYPE %s counter\n%s %llu\n", counters[i][0],
                    counters[i][1], counters[i][0], counters[i][0], (unsigned long long)values[i]);
    sbuf_printf(out,
                "# HELP halo_slots_total slots (-np)\n# TYPE halo_slots_total gauge\n"
                "halo_slots_total %u\n"
                "# HELP halo_slots_busy slots running a request\n# TYPE halo_slots_busy gauge\n"
                "halo_slots_busy %u\n"
                "# HELP halo_queue_depth requests waiting for a slot\n"
                "# TYPE halo_queue_depth gauge\nhalo_queue_depth %u\n"
                "# HELP halo_decode_tokens_per_second decoded tokens per second over all slots "
                "(moving average of steps)\n# TYPE halo_decode_tokens_per_second gauge\n"
                "halo_decode_tokens_per_second %.3f\n",
                s->p.n_slots, busy, s->queued, s->decode_tps);
    pthread_mutex_unlock(&s->mu);
}
