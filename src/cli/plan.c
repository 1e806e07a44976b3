/* `halo plan -m MODEL [--ctx N] [--profile P] [--backend B] [--weights W] [--expert-cache SIZE]
 * [--json]`: where every tensor of MODEL would go on this machine (or a profile), with per-pool
 * totals and headroom. Exit 0 when the plan is loadable, 2 when it is refused (or on a usage
 * error), 1 when the model or an option is bad. HALO_WEIGHTS and HALO_FORCE_DEVICE_MEM mirror
 * --weights; flags win. docs/plan.md describes it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/backend.h"
#include "backend/vulkan/vulkan.h"
#include "cli/cli.h"
#include "halo/gguf.h"
#include "halo/plan.h"

static void usage(FILE *out) {
    fprintf(
        out,
        "usage: halo plan -m MODEL [options]\n"
        "\n"
        "Shows where every tensor of MODEL goes on this machine before anything is loaded.\n"
        "\n"
        "  -m, --model PATH       GGUF model (first shard of a split model)\n"
        "  --ctx N                context tokens (default 32768, or the model's if less)\n"
        "  --profile NAME|PATH    plan for a machine profile instead of probing this one\n"
        "  --backend B            auto|cpu|cuda|hip|vulkan|metal (default auto: the GPU's)\n"
        "  --weights W            auto|device|host|managed|stream (default auto)\n"
        "  --expert-cache SIZE    expert cache when streaming, e.g. 48G (default: all that fits)\n"
        "  --sysfs-root DIR       probe a fake /proc + /sys tree under DIR (tests)\n"
        "  --json                 the plan as JSON\n"
        "  --measure-disk         time a few reads of MODEL for the disk's speed (with the probe)\n"
        "  --load                 then carry the plan out (cpu backend): allocate, read every\n"
        "                         resident tensor once, report throughput, free\n"
        "\n"
        "environment: HALO_WEIGHTS=W, HALO_FORCE_DEVICE_MEM=1 (0 = off); flags win.\n"
        "exit status: 0 loadable, 2 refused or usage error, 1 bad model or option.\n");
}

static int bad(const char *what, const halo_error *err);

/* The progress bar on a terminal: bytes, GB/s, ETA, redrawn in place. */
static void progress_bar(const halo_load_progress *pr, void *user) {
    (void)user;
    double frac = pr->total ? (double)pr->done / (double)pr->total : 1.0;
    double gbs = pr->seconds > 0 ? (double)pr->done / pr->seconds / 1e9 : 0.0;
    double eta = gbs > 0 ? (double)(pr->total - pr->done) / (gbs * 1e9) : 0.0;
    char bar[31];
    int fill = (int)(frac * 30);
    for (int i = 0; i < 30; i++)
        bar[i] = i < fill ? '#' : '.';
    bar[30] = 0;
    char a[32], b[32];
    fprintf(stderr, "\rloading [%s] %s / %s  %.2f GB/s  ETA %.0f s ", bar,
            cli_bytes(pr->done, a, sizeof a), cli_bytes(pr->total, b, sizeof b), gbs, eta);
    if (pr->done == pr->total) fputc('\n', stderr);
}

/* Carries a CPU plan out: the arena and the loader, then frees it (a dry run of loading that
 * measures throughput; `halo run` will keep the arena). */
static int load_plan(const char *model, const halo_plan *p) {
    if (p->options.backend != HALO_BACKEND_CPU) {
        fprintf(stderr,
                "halo plan: --load: only the cpu backend exists so far (plan is for %s; "
                "add --backend cpu)\n",
                halo_backend_name(p->options.backend));
        return 2;
    }
    halo_error err = {0};
    halo_gguf *g = NULL;
    if (halo_gguf_open(model, &g, &err) != HALO_OK) return bad("", &err);
    halo_load_options o = {0};
    if (isatty(STDERR_FILENO)) o.progress = progress_bar;
    halo_mem_arena *a = NULL;
    halo_load_stats st;
    halo_status s = halo_mem_arena_load(g, p->tensor_pool, &o, &a, &st, &err);
    halo_gguf_close(g);
    if (s != HALO_OK) return bad("--load: ", &err);
    char x[32];
    printf("loaded %s in %.2f s: %.2f GB/s, %s, %u threads; page cache after: %.2f%% of the "
           "file\n",
           cli_bytes(st.bytes_read, x, sizeof x), st.seconds,
           st.seconds > 0 ? (double)st.bytes_read / st.seconds / 1e9 : 0.0,
           st.direct ? "O_DIRECT" : "buffered reads + page cache dropped", st.threads,
           st.file_bytes ? 100.0 * (double)st.cached_after / (double)st.file_bytes : 0.0);
    halo_mem_arena_free(a);
    return 0;
}

static int bad(const char *what, const halo_error *err) {
    fprintf(stderr, "halo plan: %s%s\n", what, err ? err->message : "");
    return 1;
}

int cli_plan(int argc, char **argv) {
    const char *model = NULL, *profile = NULL, *root = NULL;
    const char *ctx_arg = NULL, *backend_arg = NULL, *weights_arg = NULL, *cache_arg = NULL;
    bool json = false, load = false, measure = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char **dst = !strcmp(a, "-m") || !strcmp(a, "--model") ? &model
                           : !strcmp(a, "--ctx")                     ? &ctx_arg
                           : !strcmp(a, "--profile")                 ? &profile
                           : !strcmp(a, "--backend")                 ? &backend_arg
                           : !strcmp(a, "--weights")                 ? &weights_arg
                           : !strcmp(a, "--expert-cache")            ? &cache_arg
                           : !strcmp(a, "--sysfs-root")              ? &root
                                                                     : NULL;
        if (dst) {
            if (i + 1 >= argc) {
                fprintf(stderr, "halo plan: %s needs a value\n", a);
                return 2;
            }
            *dst = argv[++i];
        } else if (!strcmp(a, "--json")) {
            json = true;
        } else if (!strcmp(a, "--measure-disk")) {
            measure = true;
        } else if (!strcmp(a, "--load")) {
            load = true;
        } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "halo plan: unknown option '%s'\n\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (!model) {
        fprintf(stderr, "halo plan: -m MODEL is required\n\n");
        usage(stderr);
        return 2;
    }
    if (profile && root) {
        fprintf(stderr, "halo plan: --profile and --sysfs-root exclude each other\n");
        return 2;
    }

    halo_error err = {0};
    halo_plan_options o = {0};
    if (halo_plan_options_from_env(&o, &err) != HALO_OK) return bad("", &err);
    if (weights_arg && halo_weights_parse(weights_arg, &o.weights, &err) != HALO_OK)
        return bad("--weights: ", &err);
    if (backend_arg && halo_backend_parse(backend_arg, &o.backend, &err) != HALO_OK)
        return bad("--backend: ", &err);
    if (cache_arg && halo_size_parse(cache_arg, &o.expert_cache, &err) != HALO_OK)
        return bad("--expert-cache: ", &err);
    if (cache_arg && o.weights != HALO_WEIGHTS_STREAM && o.weights != HALO_WEIGHTS_AUTO) {
        fprintf(stderr, "halo plan: --expert-cache needs --weights stream (or auto)\n");
        return 2;
    }
    if (ctx_arg) {
        char *end;
        errno = 0;
        unsigned long long n = strtoull(ctx_arg, &end, 10);
        if (errno || end == ctx_arg || *end || n == 0 || ctx_arg[0] == '-') {
            fprintf(stderr, "halo plan: --ctx \"%s\": expected a positive number of tokens\n",
                    ctx_arg);
            return 2;
        }
        o.n_ctx = n;
    }

    halo_gguf *g = NULL;
    if (halo_gguf_open(model, &g, &err) != HALO_OK) return bad("", &err);
    halo_machine m;
    halo_status st = profile ? halo_machine_load_profile(profile, &m, &err)
                             : halo_machine_probe(root ? root : "/", model, &m, &err);
    if (st == HALO_OK && measure && !profile) st = halo_machine_measure_disk(model, &m, &err);
    /* The Vulkan device's own heaps where the probes do not know it (lavapipe, Intel). */
    if (st == HALO_OK && !profile && !root && o.backend == HALO_BACKEND_VULKAN &&
        halo_backend_vulkan_built())
        st = halo_backend_vulkan_machine(-1, &m, &err);
    if (st != HALO_OK) {
        halo_gguf_close(g);
        return bad("", &err);
    }
    halo_plan *p = NULL;
    st = halo_plan_build(g, &m, &o, &p, &err);
    halo_gguf_close(g);
    if (st != HALO_OK) return bad("", &err);

    char *text = json ? halo_plan_format_json(p) : halo_plan_format_text(p);
    if (!text) {
        halo_plan_free(p);
        fprintf(stderr, "halo plan: out of memory\n");
        return 1;
    }
    fputs(text, stdout);
    if (json) fputc('\n', stdout);
    const char *gpu = halo_backend_cuda_flavor(); /* the GPU backend this halo has, if any */
    bool built = p->options.backend == HALO_BACKEND_CPU ||
                 (p->options.backend == HALO_BACKEND_VULKAN && halo_backend_vulkan_built()) ||
                 (gpu && !strcmp(gpu, halo_backend_name(p->options.backend)));
    if (!json && !built)
        printf("(this halo has no %s backend: this is the plan that backend will carry out)\n",
               halo_backend_name(p->options.backend));
    free(text);
    int rc = p->refused ? 2 : 0;
    if (load && !p->refused) rc = load_plan(model, p);
    halo_plan_free(p);
    return rc;
}
