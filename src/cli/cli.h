/* Subcommands of the halo binary. Each takes argv starting at its own name and returns the
 * process exit status: 0 success, 1 the input is bad (e.g. a corrupt file), 2 usage error. */
#ifndef HALO_CLI_H
#define HALO_CLI_H

#include <stdint.h>

int cli_inspect(int argc, char **argv);
int cli_logits(int argc, char **argv);
int cli_plan(int argc, char **argv);
int cli_run(int argc, char **argv);
int cli_chat(int argc, char **argv);
int cli_bench(int argc, char **argv);
int cli_doctor(int argc, char **argv);
int cli_serve(int argc, char **argv);

/* Formats a byte count for people: "80.76 GiB", "512.00 MiB", "34 B". */
const char *cli_bytes(uint64_t bytes, char *buf, unsigned size);

#endif
