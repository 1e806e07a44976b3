/* The weight-loading progress line of `halo run`, `chat` and `serve` (on stderr). */
#ifndef HALO_CLI_LOAD_PROGRESS_H
#define HALO_CLI_LOAD_PROGRESS_H

#include "halo/plan.h"

/* A halo_load_progress_fn; user: the command's name ("run"). On a terminal: a bar redrawn in
 * place (bytes, GB/s, ETA); otherwise (a log) only the final line, and only for loads that took
 * long enough to be worth a line (1 s). */
void cli_load_progress(const halo_load_progress *p, void *user);

#endif
