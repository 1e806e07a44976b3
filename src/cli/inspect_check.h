/* `halo inspect --check`: reads every tensor's data and reports what is wrong with it. */
#ifndef HALO_CLI_INSPECT_CHECK_H
#define HALO_CLI_INSPECT_CHECK_H

#include <stdbool.h>

#include "halo/gguf.h"

/* Prints the problems found (text, or one JSON object) and returns the exit status: 0 none,
 * 1 problems found or the data could not be read. */
int cli_inspect_check(const halo_gguf *g, bool json);

#endif
