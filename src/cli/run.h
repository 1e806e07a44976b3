/* What `halo run` (run.c) shares with `halo chat` (chat.c): options common to both, opening a
 * model with its tokenizer, session and sampler, and printing streamed text and speeds. */
#ifndef HALO_CLI_RUN_H
#define HALO_CLI_RUN_H

#include <stdbool.h>
#include <stdint.h>

#include "halo/halo.h"
#include "halo/sample.h"
#include "halo/text.h"
#include "cli/stream_opts.h"

typedef struct cli_common {
    const char *model, *system;
    const char *backend; /* --backend (NULL: cpu) */
    halo_sampler_params sp;
    bool seed_set, ignore_eos;
    uint32_t ctx, threads, n_predict;
    halo_chat_thinking thinking;
    cli_stream_opts stream; /* --weights, --expert-cache */
} cli_common;

typedef struct cli_model {
    halo_tokenizer *tok;
    halo_engine *engine;
    halo_session *session;
    halo_sampler *sampler;
    halo_chat_format format;
    bool add_bos;
    uint32_t n_ctx;
} cli_model;

void cli_common_init(cli_common *c);
/* Parses argv[*i] if it is a common option: 1 (and *i advanced past its value), 0 when it is
 * not one, -1 when its value is bad (message printed). */
int cli_common_option(const char *cmd, int argc, char **argv, int *i, cli_common *c);
/* Opens the tokenizer and checks what can be checked before loading weights (sampler values,
 * context size); cli_load then loads the engine, session and sampler. On failure both print why
 * and return the exit status (1 or 2); cli_close frees whatever was opened. */
int cli_open(const char *cmd, cli_common *c, cli_model *m);
int cli_load(const char *cmd, cli_common *c, cli_model *m);
void cli_close(cli_model *m);
/* The model to use without -m: $HALO_MODEL, else the first .gguf file in models/; NULL if none. */
const char *cli_default_model(void);
bool cli_parse_u32(const char *s, uint32_t *out);
/* halo_gen_text_fn writing to stdout; user points to a bool "the text ends with a newline". */
bool cli_print_text(void *user, const char *text, size_t len);
void cli_print_stats(const halo_gen_stats *st);

#endif
