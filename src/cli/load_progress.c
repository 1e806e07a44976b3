/* The weight-loading progress line (see load_progress.h). */
#include "cli/load_progress.h"

#include <stdio.h>
#include <unistd.h>

#include "cli/cli.h"

void cli_load_progress(const halo_load_progress *p, void *user) {
    const char *cmd = user ? (const char *)user : "load";
    const bool tty = isatty(STDERR_FILENO), end = p->done == p->total;
    if (!tty && (!end || p->seconds < 1.0)) return;
    double gbs = p->seconds > 0 ? (double)p->done / p->seconds / 1e9 : 0.0;
    char a[32], b[32];
    if (end) {
        fprintf(stderr, "%shalo %s: loaded %s of weights in %.1f s (%.2f GB/s)\n", tty ? "\r" : "",
                cmd, cli_bytes(p->total, a, sizeof a), p->seconds, gbs);
        return;
    }
    double frac = p->total ? (double)p->done / (double)p->total : 1.0;
    double eta = gbs > 0 ? (double)(p->total - p->done) / (gbs * 1e9) : 0.0;
    char bar[31];
    int fill = (int)(frac * 30);
    for (int i = 0; i < 30; i++)
        bar[i] = i < fill ? '#' : '.';
    bar[30] = 0;
    fprintf(stderr, "\rhalo %s: loading [%s] %s / %s  %.2f GB/s  ETA %.0f s ", cmd, bar,
            cli_bytes(p->done, a, sizeof a), cli_bytes(p->total, b, sizeof b), gbs, eta);
}
