/* The `halo` binary: dispatches to one subcommand per file (inspect.c, ...). Only src/cli
 * prints and exits; everything below it returns errors as values. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

typedef struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} command;

static const command commands[] = {
    {"inspect", cli_inspect, "show a GGUF model's metadata, tensors and sizes"},
    {"logits", cli_logits, "write the logits of every position of a token file"},
    {"plan", cli_plan, "show where every tensor goes on this machine, before loading"},
    {"run", cli_run, "generate text from a prompt, streamed, with the speed"},
    {"chat", cli_chat, "talk with a model: multi-turn, line editing, /commands"},
    {"bench", cli_bench, "prefill and decode speed, llama-bench style, with the roofline"},
    {"doctor", cli_doctor, "what on this machine limits running a model, with the fix"},
    {"serve", cli_serve, "serve the model over HTTP: OpenAI and Anthropic APIs"},
};

static void usage(FILE *out) {
    fprintf(out, "usage: halo <command> [options]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "\n`halo <command> --help` describes a command.\n");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("halo %s\n", HALO_VERSION);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "halo: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}
