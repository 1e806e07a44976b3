/* Reading a DSML tool-call block as the model writes it, so a call's arguments can be streamed
 * while they are generated: a call's head (its index and name) as soon as its
 * `<｜DSML｜invoke name="…">` is complete, then its arguments as pieces of the JSON object that
 * halo_dsml_parse builds for it: `{`, each string parameter's `"key": "` when its tag is
 * complete and its value's escaped text as it comes (held back only where it might be the start
 * of the closing tag), each non-string parameter whole when it closes (it is JSON that is
 * re-printed, or text when it is not JSON), `}` at `</｜DSML｜invoke>`. The pieces of a call
 * concatenated are exactly the arguments halo_dsml_parse gives for the whole block: when the
 * block closes it is parsed again by halo_dsml_parse and compared. */
#ifndef HALO_SERVE_DSML_STREAM_H
#define HALO_SERVE_DSML_STREAM_H

#include <stdbool.h>
#include <stddef.h>

#include "serve/sbuf.h"

typedef void (*serve_dsml_head_fn)(void *user, unsigned index, const char *name);
/* json: the next piece of call `index`'s arguments (NUL-terminated, valid UTF-8). */
typedef void (*serve_dsml_args_fn)(void *user, unsigned index, const char *json);

typedef enum serve_dsml_status {
    SERVE_DSML_MORE, /* the block goes on */
    SERVE_DSML_DONE, /* </｜DSML｜tool_calls> came and the block is well formed */
    SERVE_DSML_BAD,  /* malformed (why says how); nothing more is read */
} serve_dsml_status;

typedef struct serve_dsml_stream {
    serve_dsml_head_fn head;
    serve_dsml_args_fn args;
    void *user;
    sbuf in;      /* the block's bytes after <｜DSML｜tool_calls> (invalid UTF-8 replaced) */
    size_t at;    /* bytes of in read */
    size_t end;   /* end of the first </｜DSML｜tool_calls> in in, 0 until it comes */
    int state;    /* where `at` is in the block's grammar (dsml_stream.c) */
    bool in_call; /* a call's head went out and its </｜DSML｜invoke> has not come */
    bool any_param;
    size_t key_at, key_len; /* the open parameter's name, in in */
    unsigned n_calls;       /* heads sent */
    sbuf names, calls;      /* each call's name and whole arguments, NUL-separated */
    bool mismatch;          /* the streamed calls differ from halo_dsml_parse's (a bug) */
    bool oom;
    char why[192];
} serve_dsml_stream;

void serve_dsml_stream_init(serve_dsml_stream *s, serve_dsml_head_fn head, serve_dsml_args_fn args,
                            void *user);
/* Reads the next bytes of the block (after the opening marker), emitting what became certain. */
serve_dsml_status serve_dsml_stream_push(serve_dsml_stream *s, const char *text, size_t len);
/* The block's bytes read so far (after the opening marker). */
const char *serve_dsml_stream_text(const serve_dsml_stream *s, size_t *len);
void serve_dsml_stream_free(serve_dsml_stream *s);

#endif
