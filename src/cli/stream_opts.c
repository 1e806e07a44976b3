/* --weights / --expert-cache and the streaming report lines (see stream_opts.h). */
#include "cli/stream_opts.h"

#include <stdio.h>
#include <string.h>

#include "halo/plan.h"
#include "halo/stream.h"

int cli_stream_option(const char *cmd, int argc, char **argv, int *i, cli_stream_opts *o) {
    const char *a = argv[*i], *v = *i + 1 < argc ? argv[*i + 1] : NULL;
    halo_error err = {0};
    if (!strcmp(a, "--weights")) {
        halo_weights_policy p;
        if (!v || halo_weights_parse(v, &p, &err)) {
            fprintf(stderr, "halo %s: --weights: %s\n", cmd, v ? err.message : "needs a value");
            return -1;
        }
        o->weights = v;
    } else if (!strcmp(a, "--expert-cache")) {
        if (!v || halo_size_parse(v, &o->expert_cache, &err) || !o->expert_cache) {
            fprintf(stderr, "halo %s: --expert-cache needs a size such as 12G%s%s\n", cmd,
                    v ? ": " : "", v ? err.message : "");
            return -1;
        }
    } else {
        return 0;
    }
    (*i)++;
    return 1;
}

void cli_stream_params(const cli_stream_opts *o, halo_engine_params *p) {
    p->weights = o->weights ? o->weights : "auto";
    p->expert_cache_bytes = o->expert_cache;
}

static double gib(uint64_t b) {
    return (double)b / (double)(1ull << 30);
}

void cli_stream_report(const char *cmd, const halo_engine *e, bool final) {
    halo_stream_stats s;
    if (!e || !halo_engine_stream_stats(e, &s)) return;
    if (!final) {
        fprintf(stderr,
                "halo %s: routed experts (%.2f GiB) stream from disk through a %.2f GiB expert "
                "cache (%u experts, %s, %s reads through %s)\n",
                cmd, gib(s.expert_bytes), gib(s.cache_admitted), s.slots, s.policy,
                s.direct ? "O_DIRECT" : "buffered", s.reader);
        if (*s.note) fprintf(stderr, "halo %s: NOTE: %s\n", cmd, s.note);
        return;
    }
    fprintf(stderr,
            "experts: %llu chosen, hit rate %.1f%%, %.2f GiB read, %llu of %llu misses waited on "
            "(%llu read ahead) for %.2f s\n",
            (unsigned long long)s.requests,
            s.requests ? 100.0 * (double)s.hits / (double)s.requests : 0.0, gib(s.bytes_read),
            (unsigned long long)s.waited, (unsigned long long)s.misses,
            (unsigned long long)s.prefetch_used, s.read_seconds);
}
