/* HTTP on libmicrohttpd (serve.h). MHD runs a thread per connection, so a request's handler
 * may wait for its reply; while it waits it polls its socket, and a client that closed it has
 * its job cancelled within one scheduler step, streaming or not. MHD strips query strings
 * (`/v1/messages?beta=true`) before routing. */
#include "serve/serve.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include <cjson/cJSON.h>
#include <microhttpd.h>

#include "core/error.h"

struct serve_http {
    serve_http_params p;
    struct MHD_Daemon *d;
    _Atomic(serve_sched *) sched;
    atomic_uint active; /* requests being handled, for --max-conn */
    long started;
};

enum route {
    R_NONE,
    R_HEALTH,
    R_METRICS,
    R_MODELS,
    R_POST, /* one of the APIs: conn.api */
};

typedef struct conn {
    serve_http *h;
    struct MHD_Connection *mc;
    atomic_int refs;
    enum route route;
    serve_api api;
    bool responded, too_big;
    sbuf body;
    serve_job *job;
    serve_stream stream;
    sbuf out;
    unsigned seen;
    bool stream_done;
    double last_write;
} conn;

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void conn_unref(conn *c) {
    if (atomic_fetch_sub(&c->refs, 1) != 1) return;
    atomic_fetch_sub(&c->h->active, 1);
    serve_job_release(c->job);
    serve_stream_free(&c->stream);
    sbuf_free(&c->body);
    sbuf_free(&c->out);
    free(c);
}

/* ---- responses ----------------------------------------------------------------------------- */

static void common_headers(conn *c, struct MHD_Response *r, int status) {
    if (c->h->p.cors) MHD_add_response_header(r, "Access-Control-Allow-Origin", c->h->p.cors);
    /* A 5xx after a long prefill: tell the SDKs (both honour it) not to send it again. */
    if (status >= 500) MHD_add_response_header(r, "x-should-retry", "false");
}

static enum MHD_Result send_body(conn *c, int status, const char *type, sbuf *body,
                                 unsigned retry_after) {
    c->responded = true;
    if (body->oom) {
        sbuf_free(body);
        sbuf_adds(body, "{\"error\":{\"message\":\"out of memory\",\"type\":\"api_error\"}}");
        status = 500;
    }
    struct MHD_Response *r =
        MHD_create_response_from_buffer(body->n, body->p ? body->p : "", MHD_RESPMEM_MUST_COPY);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Content-Type", type);
    common_headers(c, r, status);
    if (retry_after) {
        char v[16];
        snprintf(v, sizeof v, "%u", retry_after);
        MHD_add_response_header(r, "retry-after", v);
    }
    enum MHD_Result ret = MHD_queue_response(c->mc, (unsigned)status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result send_json(conn *c, int status, sbuf *body) {
    enum MHD_Result r = send_body(c, status, "application/json", body, 0);
    sbuf_free(body);
    return r;
}

static enum MHD_Result send_error(conn *c, const serve_fail *f, unsigned retry_after) {
    sbuf b = {0};
    serve_format_error(c->api, f, &b);
    enum MHD_Result r = send_body(c, f->http, "application/json", &b, retry_after);
    sbuf_free(&b);
    return r;
}

static enum MHD_Result fail(conn *c, int http, const char *type, const char *msg) {
    serve_fail f;
    serve_failf(&f, http, type, "%s", msg);
    return send_error(c, &f, 0);
}

/* ---- client gone? -------------------------------------------------------------------------- */

static bool peer_gone(conn *c) {
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c->mc, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return true;
    struct pollfd p = {.fd = ci->connect_fd, .events = POLLIN | POLLRDHUP};
    if (poll(&p, 1, 0) <= 0) return false;
    if (p.revents & (POLLHUP | POLLERR | POLLRDHUP)) return true;
    char b;
    /* Readable with nothing to read: the peer closed. (A pipelined request reads as data.) */
    return recv(ci->connect_fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

/* ---- streaming ----------------------------------------------------------------------------- */

static void format_new(void *user, const serve_reply *r) {
    conn *c = user;
    if (r->done && r->finish == SERVE_FIN_ERROR) {
        serve_reply partial = *r;
        partial.done = false;
        serve_stream_format(&c->stream, &partial, &c->out);
        serve_fail f;
        serve_failf(&f, 500, "api_error", "%s", r->error ? r->error : "generation failed");
        serve_stream_error(&c->stream, &f, &c->out);
        c->stream_done = true;
        return;
    }
    if (r->done && r->finish == SERVE_FIN_CANCEL) {
        c->stream_done = true;
        return;
    }
    serve_stream_format(&c->stream, r, &c->out);
    if (r->done) c->stream_done = true;
}

static ssize_t read_stream(void *cls, uint64_t pos, char *buf, size_t max) {
    conn *c = cls;
    (void)pos;
    for (;;) {
        if (c->out.n) {
            size_t n = c->out.n < max ? c->out.n : max;
            memcpy(buf, c->out.p, n);
            sbuf_consume(&c->out, n);
            c->last_write = now_s();
            return (ssize_t)n;
        }
        if (c->stream_done || c->out.oom) return MHD_CONTENT_READER_END_OF_STREAM;
        serve_job_view(c->job, format_new, c);
        if (c->out.n || c->stream_done) continue;
        if (peer_gone(c)) {
            serve_job_cancel(c->job);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        /* SSE comments keep clients with idle timeouts connected through a long prefill;
         * both SDKs skip lines that start with ':'. */
        if (now_s() - c->last_write >= c->h->p.keepalive_s) {
            sbuf_adds(&c->out, ": keep-alive\n\n");
            continue;
        }
        serve_job_wait(c->job, &c->seen, 100);
    }
}

static void stream_freed(void *cls) {
    conn_unref(cls);
}

/* ---- the APIs ------------------------------------------------------------------------------ */

static void copy_reply(void *user, const serve_reply *r) {
    conn *c = user;
    if (r->done && r->finish == SERVE_FIN_ERROR) {
        serve_fail f;
        serve_failf(&f, 500, "api_error", "%s", r->error ? r->error : "generation failed");
        serve_format_error(c->api, &f, &c->out);
        c->stream_done = false;
        return;
    }
    serve_format_reply(c->api, serve_job_request(c->job), r, &c->out);
    c->stream_done = true;
}

static void is_done(void *user, const serve_reply *r) {
    *(bool *)user = r->done;
}

static enum MHD_Result post(conn *c) {
    serve_http *h = c->h;
    serve_sched *sched = atomic_load(&h->sched);
    if (!sched) return fail(c, 503, "overloaded_error", "the model is loading");
    serve_request req;
    serve_fail f;
    if (!serve_parse(c->api, c->body.p ? c->body.p : "", c->body.n, &h->p.mi, &req, &f))
        return send_error(c, &f, 0);
    if (c->api == SERVE_ANTHROPIC_COUNT) {
        sbuf b = {0};
        sbuf_printf(&b, "{\"input_tokens\":%zu}", req.prompt.n);
        serve_request_free(&req);
        return send_json(c, 200, &b);
    }
    unsigned retry = 0;
    c->job = serve_sched_submit(sched, &req, &retry);
    if (!c->job) {
        serve_request_free(&req);
        serve_failf(&f, 429, "rate_limit_error",
                    "all %s slots are busy and the queue is full; retry later", "server");
        return send_error(c, &f, retry);
    }
    const serve_request *r = serve_job_request(c->job);
    if (r->stream) {
        serve_stream_init(&c->stream, c->api, r);
        c->last_write = now_s();
        struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384,
                                                                      read_stream, c, stream_freed);
        if (!resp) return MHD_NO;
        atomic_fetch_add(&c->refs, 1);
        MHD_add_response_header(resp, "Content-Type", "text/event-stream");
        MHD_add_response_header(resp, "Cache-Control", "no-cache");
        MHD_add_response_header(resp, "X-Accel-Buffering", "no");
        common_headers(c, resp, 200);
        c->responded = true;
        enum MHD_Result ret = MHD_queue_response(c->mc, 200, resp);
        MHD_destroy_response(resp);
        return ret;
    }
    for (bool done = false;;) {
        serve_job_view(c->job, is_done, &done);
        if (done) break;
        if (peer_gone(c)) {
            serve_job_cancel(c->job);
            return MHD_NO;
        }
        serve_job_wait(c->job, &c->seen, 100);
    }
    serve_job_view(c->job, copy_reply, c);
    enum MHD_Result ret = send_body(c, c->stream_done ? 200 : 500, "application/json", &c->out, 0);
    sbuf_free(&c->out);
    return ret;
}

static enum MHD_Result models(conn *c) {
    const char *name = c->h->p.mi.name;
    sbuf b = {0};
    cJSON *o = cJSON_CreateObject(), *data = cJSON_AddArrayToObject(o, "data"), *m;
    cJSON_AddItemToArray(data, m = cJSON_CreateObject());
    cJSON_AddStringToObject(m, "id", name);
    if (MHD_lookup_connection_value(c->mc, MHD_HEADER_KIND, "anthropic-version")) {
        /* Anthropic's list shape (GET /v1/models with the SDK's headers). */
        char when[32];
        time_t t = (time_t)c->h->started;
        strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime(&t));
        cJSON_AddStringToObject(m, "type", "model");
        cJSON_AddStringToObject(m, "display_name", name);
        cJSON_AddStringToObject(m, "created_at", when);
        cJSON_AddBoolToObject(o, "has_more", false);
        cJSON_AddStringToObject(o, "first_id", name);
        cJSON_AddStringToObject(o, "last_id", name);
    } else {
        cJSON_AddStringToObject(o, "object", "list");
        cJSON_AddStringToObject(m, "object", "model");
        cJSON_AddNumberToObject(m, "created", (double)c->h->started);
        cJSON_AddStringToObject(m, "owned_by", "halo");
        cJSON_AddNumberToObject(m, "context_length", c->h->p.mi.n_ctx);
    }
    char *s = cJSON_PrintUnformatted(o);
    if (s) sbuf_adds(&b, s);
    cJSON_free(s);
    cJSON_Delete(o);
    return send_json(c, 200, &b);
}

/* ---- routing ------------------------------------------------------------------------------- */

static void route(conn *c, const char *url, const char *method, bool *method_ok) {
    static const struct {
        const char *path, *method;
        enum route route;
        serve_api api;
    } routes[] = {
        {"/health", "GET", R_HEALTH, SERVE_OPENAI_CHAT},
        {"/metrics", "GET", R_METRICS, SERVE_OPENAI_CHAT},
        {"/v1/models", "GET", R_MODELS, SERVE_OPENAI_CHAT},
        {"/models", "GET", R_MODELS, SERVE_OPENAI_CHAT},
        {"/v1/chat/completions", "POST", R_POST, SERVE_OPENAI_CHAT},
        {"/chat/completions", "POST", R_POST, SERVE_OPENAI_CHAT},
        {"/v1/completions", "POST", R_POST, SERVE_OPENAI_COMPLETIONS},
        {"/v1/responses", "POST", R_POST, SERVE_OPENAI_RESPONSES},
        {"/v1/messages", "POST", R_POST, SERVE_ANTHROPIC},
        {"/v1/messages/count_tokens", "POST", R_POST, SERVE_ANTHROPIC_COUNT},
    };
    c->route = R_NONE;
    c->api = !strncmp(url, "/v1/messages", 12) ? SERVE_ANTHROPIC : SERVE_OPENAI_CHAT;
    *method_ok = true;
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++) {
        if (strcmp(url, routes[i].path)) continue;
        c->api = routes[i].api;
        if (strcmp(method, routes[i].method) &&
            !(routes[i].route != R_POST && !strcmp(method, "HEAD"))) {
            *method_ok = false;
            return;
        }
        c->route = routes[i].route;
        return;
    }
}

static bool authorized(conn *c) {
    const char *key = c->h->p.api_key;
    if (!key) return true;
    const char *auth = MHD_lookup_connection_value(c->mc, MHD_HEADER_KIND, "Authorization");
    const char *xkey = MHD_lookup_connection_value(c->mc, MHD_HEADER_KIND, "x-api-key");
    const char *given = xkey;
    if (auth && !strncasecmp(auth, "Bearer ", 7)) given = auth + 7;
    if (!given) return false;
    /* Compare every byte, so the time taken does not tell how much of a guess was right. */
    size_t n = strlen(key), m = strlen(given);
    unsigned char diff = n != m;
    for (size_t i = 0; i < m; i++)
        diff |= (unsigned char)given[i] ^ (unsigned char)key[i < n ? i : 0];
    return !diff;
}

static enum MHD_Result preflight(conn *c) {
    c->responded = true;
    struct MHD_Response *r = MHD_create_response_from_buffer(0, "", MHD_RESPMEM_PERSISTENT);
    if (!r) return MHD_NO;
    common_headers(c, r, 204);
    MHD_add_response_header(r, "Access-Control-Allow-Methods", "GET, POST, OPTIONS");
    MHD_add_response_header(r, "Access-Control-Allow-Headers",
                            "Authorization, Content-Type, x-api-key, anthropic-version, "
                            "anthropic-beta, anthropic-dangerous-direct-browser-access, "
                            "x-stainless-os, x-stainless-lang, x-stainless-package-version, "
                            "x-stainless-runtime, x-stainless-runtime-version, x-stainless-arch, "
                            "x-stainless-retry-count, x-stainless-timeout, openai-organization, "
                            "openai-project");
    MHD_add_response_header(r, "Access-Control-Max-Age", "86400");
    enum MHD_Result ret = MHD_queue_response(c->mc, 204, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result first_call(conn *c, const char *url, const char *method) {
    serve_http *h = c->h;
    if (!strcmp(method, "OPTIONS") && h->p.cors) return preflight(c);
    bool method_ok;
    route(c, url, method, &method_ok);
    if (!method_ok) return fail(c, 405, "invalid_request_error", "method not allowed here");
    if (c->route == R_NONE) {
        char msg[300];
        snprintf(msg, sizeof msg, "no route for %.200s %.40s", url, method);
        return fail(c, 404, "not_found_error", msg);
    }
    if (c->route == R_HEALTH) {
        serve_sched *sched = atomic_load(&h->sched);
        sbuf b = {0};
        sbuf_adds(&b, sched ? "{\"status\":\"ok\"}" : "{\"status\":\"loading\"}");
        return send_json(c, sched ? 200 : 503, &b);
    }
    if (c->route == R_METRICS) {
        serve_sched *sched = atomic_load(&h->sched);
        sbuf b = {0};
        if (sched) serve_sched_metrics(sched, &b);
        enum MHD_Result r = send_body(c, 200, "text/plain; version=0.0.4", &b, 0);
        sbuf_free(&b);
        return r;
    }
    if (!authorized(c)) return fail(c, 401, "authentication_error", "invalid or missing API key");
    if (c->route == R_MODELS) return models(c);
    const char *cl = MHD_lookup_connection_value(c->mc, MHD_HEADER_KIND, "Content-Length");
    if (cl && strtoull(cl, NULL, 10) > h->p.max_body) {
        char msg[120];
        snprintf(msg, sizeof msg, "the request body is larger than the limit of %zu bytes",
                 h->p.max_body);
        return fail(c, 413, "request_too_large", msg);
    }
    return MHD_YES; /* the body comes next */
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *mc, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls) {
    (void)version;
    conn *c = *con_cls;
    if (!c) {
        if (!(c = calloc(1, sizeof *c))) return MHD_NO;
        c->h = cls;
        c->mc = mc;
        atomic_init(&c->refs, 1);
        *con_cls = c;
        /* Past --max-conn, an answer in the API's shape (the listener's own limit, a little
         * higher, drops connections without one). */
        if (atomic_fetch_add(&c->h->active, 1) >= c->h->p.max_conn) {
            serve_fail f;
            route(c, url, method, &(bool){true});
            serve_failf(&f, 429, "rate_limit_error", "too many connections (--max-conn %u)",
                        c->h->p.max_conn);
            return send_error(c, &f, 1);
        }
        return first_call(c, url, method);
    }
    if (c->responded) {
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (*upload_data_size) {
        if (c->body.n + *upload_data_size > c->h->p.max_body)
            c->too_big = true;
        else
            sbuf_add(&c->body, upload_data, *upload_data_size);
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (c->too_big) {
        char msg[120];
        snprintf(msg, sizeof msg, "the request body is larger than the limit of %zu bytes",
                 c->h->p.max_body);
        return fail(c, 413, "request_too_large", msg);
    }
    if (c->body.oom) return fail(c, 500, "api_error", "out of memory for the request body");
    return post(c);
}

static void on_completed(void *cls, struct MHD_Connection *mc, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
    (void)cls, (void)mc, (void)toe;
    conn *c = *con_cls;
    if (!c) return;
    *con_cls = NULL;
    conn_unref(c);
}

/* ---- the daemon ---------------------------------------------------------------------------- */

halo_status serve_http_start(const serve_http_params *p, serve_http **out, uint16_t *bound_port,
                             halo_error *err) {
    *out = NULL;
    serve_http *h = calloc(1, sizeof *h);
    if (!h) return halo_fail(err, HALO_E_NOMEM, "serve: out of memory");
    h->p = *p;
    h->started = (long)time(NULL);
    atomic_init(&h->sched, NULL);
    atomic_init(&h->active, 0);
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV},
                    *ai = NULL;
    char port[8];
    snprintf(port, sizeof port, "%u", p->port);
    int gai = getaddrinfo(p->host, port, &hints, &ai);
    if (gai) {
        free(h);
        return halo_fail(err, HALO_E_INVALID_ARG, "--host %s: %s", p->host, gai_strerror(gai));
    }
    unsigned flags =
        MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG;
    if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    h->d = MHD_start_daemon(flags, p->port, NULL, NULL, on_request, h, MHD_OPTION_SOCK_ADDR,
                            ai->ai_addr, MHD_OPTION_CONNECTION_LIMIT, (unsigned)p->max_conn + 64,
                            /* request line + headers: agents' headers are small; 64 KiB */
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)64 * 1024,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)600,
                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, h, MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!h->d) {
        free(h);
        return halo_fail(err, HALO_E_IO,
                         "cannot listen on %s:%u (in use, or not an address of "
                         "this machine)",
                         p->host, p->port);
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
    *bound_port = di ? di->port : p->port;
    *out = h;
    return HALO_OK;
}

void serve_http_ready(serve_http *h, serve_sched *sched) {
    atomic_store(&h->sched, sched);
}

void serve_http_stop(serve_http *h) {
    if (!h) return;
    MHD_stop_daemon(h->d);
    free(h);
}
