/* --weights and --expert-cache for run, chat and logits, and the streaming lines they print
 * (docs/streaming.md). */
#ifndef HALO_CLI_STREAM_OPTS_H
#define HALO_CLI_STREAM_OPTS_H

#include <stdbool.h>
#include <stdint.h>

#include "halo/halo.h"

typedef struct cli_stream_opts {
    const char *weights; /* "auto" unless given */
    uint64_t expert_cache;
} cli_stream_opts;

#define CLI_STREAM_USAGE                                                                           \
    "  --weights POLICY     auto (default: routed experts stream from disk when the model does\n"  \
    "                       not fit), stream, host; GPU backends: device, managed (halo plan)\n"  \
    "  --expert-cache SIZE  expert cache when streaming (e.g. 12G; default: as large as fits)\n"

/* Parses argv[*i] if it is one of the two: 1 (and *i advanced), 0 when it is not, -1 when its
 * value is bad (message printed). */
int cli_stream_option(const char *cmd, int argc, char **argv, int *i, cli_stream_opts *o);
/* Sets the engine parameters from the options. */
void cli_stream_params(const cli_stream_opts *o, halo_engine_params *p);
/* After opening: one line on stderr when experts stream (the cache admitted, and the plan's
 * loud line when it is less than asked). At the end (final): hit rate, bytes read, GB/s. */
void cli_stream_report(const char *cmd, const halo_engine *e, bool final);

#endif
