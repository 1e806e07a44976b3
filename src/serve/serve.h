/* `halo serve`'s HTTP front: libmicrohttpd with a thread per connection (each request's thread
 * waits on its job and streams it; the scheduler thread runs the engine). Routes, auth, CORS,
 * body limits, SSE with keep-alive comments, and noticing clients that leave. */
#ifndef HALO_SERVE_SERVE_H
#define HALO_SERVE_SERVE_H

#include <stddef.h>
#include <stdint.h>

#include "serve/request.h"
#include "serve/sched.h"

typedef struct serve_http_params {
    const char *host;     /* address to bind (default 127.0.0.1) */
    uint16_t port;        /* 0: any free port (printed) */
    const char *api_key;  /* NULL: no key required */
    const char *cors;     /* allowed origin, or NULL */
    size_t max_body;      /* bytes */
    uint32_t max_conn;    /* concurrent connections */
    double keepalive_s;   /* SSE comment after this many idle seconds */
    serve_model_info mi;  /* tok may be set before the model loads */
} serve_http_params;

typedef struct serve_http serve_http;

halo_status serve_http_start(const serve_http_params *p, serve_http **out, uint16_t *bound_port,
                             halo_error *err);
/* Makes /v1 routes live with the scheduler (before this they answer 503, as /health does). */
void serve_http_ready(serve_http *h, serve_sched *sched);
void serve_http_stop(serve_http *h);

#endif
