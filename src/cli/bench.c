/* `halo bench`: prefill and decode speed with llama-bench's conventions (the same options and
 * output fields, so scripts and habits carry over), several models and backends in one run, and
 * halo's own figures beside each test: the weight bytes a decoded token reads, the memory
 * bandwidth measured in the same run, the fraction of that roofline reached, peak memory, and
 * where the plan puts the weights. docs/bench.md describes it. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend/vulkan/vulkan.h"
#include "cli/bench.h"
#include "cli/bench_bw.h"
#include "cli/cli.h"
#include "cli/run.h"
#include "halo/cache.h"
#include "halo/halo.h"
#include "halo/plan.h"
#include "model/synthetic.h"

#define MAX_LIST 32

typedef struct u32_list {
    uint32_t v[MAX_LIST];
    uint32_t n;
} u32_list;

typedef struct opts {
    const char *models[MAX_LIST];
    uint32_t n_models;
    const char *backends[MAX_LIST];
    uint32_t n_backends;
    u32_list p, n, d;
    uint32_t reps, threads, batch, ubatch;
    const char *weights, *plot, *write_gguf;
    uint32_t ckpt_interval; /* 0: the session's default, UINT32_MAX: none */
    bench_format fmt;
    bool no_warmup;
} opts;

static void usage(FILE *out) {
    fprintf(out,
            "usage: halo bench [options]\n"
            "\n"
            "Prefill and decode speed, llama-bench style: every combination of the lists below\n"
            "is a test, repeated -r times (mean ± sample standard deviation).\n"
            "\n"
            "  -m, --model PATH          model (repeatable, or comma-separated)\n"
            "  --synthetic KIND[:LAYERS] a full-width synthetic DeepSeek V4 Flash made in place:\n"
            "                            dsv4-flash-q2|q2q4|mxfp4, 1-43 layers (repeatable)\n"
            "  -p, --n-prompt N,...      prompt tokens per prefill test (default 512; 0: none)\n"
            "  -n, --n-gen N,...         tokens per decode test (default 128; 0: none)\n"
            "  -d, --n-depth N,...       tokens already in the context (default 0)\n"
            "  -r, --repetitions N       runs per test (default 5)\n"
            "  -t, --threads N           CPU threads (default: one per core)\n"
            "  -b, --batch-size N        logical batch (default 2048)\n"
            "  -ub, --ubatch-size N      tokens per forward (default 512)\n"
            "  --backend B,...           cpu|cuda|hip|vulkan|auto (default cpu; several: one\n"
            "                            run, same build, same weights)\n"
            "  --weights W               auto|device|host|managed (default auto)\n"
            "  -o, --output FMT          md|csv|json|jsonl (default md)\n"
            "  --plot FILE.svg           tokens/s against depth, one line per model/backend\n"
            "  --no-warmup               skip the untimed warm-up run of each test\n"
            "  --checkpoints N|off       positions between the session's rewind checkpoints\n"
            "                            (default: the session's own; off: none, as llama-bench)\n"
            "  --write-gguf FILE         write the --synthetic model to FILE and exit\n"
            "\n"
            "Progress goes to stderr, results to stdout. exit status: 0 ok, 1 a model or\n"
            "backend failed, 2 usage error.\n");
}

static bool parse_list(const char *s, u32_list *l) {
    l->n = 0;
    char buf[512];
    snprintf(buf, sizeof buf, "%s", s);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        if (l->n == MAX_LIST || !cli_parse_u32(tok, &l->v[l->n])) return false;
        l->n++;
    }
    return l->n > 0;
}

/* Copies made while parsing, freed when the command ends. */
static char *owned[4 * MAX_LIST];
static uint32_t n_owned;

static char *own(char *p) {
    if (!p || n_owned == sizeof owned / sizeof owned[0]) {
        free(p);
        return NULL;
    }
    return owned[n_owned++] = p;
}

static void free_owned(void) {
    while (n_owned)
        free(owned[--n_owned]);
}

/* Splits a comma list of strings into dst (pointers into copies freed by free_owned). */
static bool add_strings(const char *s, const char **dst, uint32_t *n, const char *prefix) {
    char *copy = own(strdup(s));
    if (!copy) return false;
    for (char *save = NULL, *tok = strtok_r(copy, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        if (*n == MAX_LIST) return false;
        if (prefix) {
            size_t len = strlen(prefix) + strlen(tok) + 1;
            char *p = own(malloc(len));
            if (!p) return false;
            snprintf(p, len, "%s%s", prefix, tok);
            tok = p;
        }
        dst[(*n)++] = tok;
    }
    return true;
}

static int usage_error(const char *fmt, const char *arg) {
    fprintf(stderr, "halo bench: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, " (see halo bench --help)\n");
    return 2;
}

static int parse_args(int argc, char **argv, opts *o) {
    memset(o, 0, sizeof *o);
    o->p = (u32_list){{512}, 1};
    o->n = (u32_list){{128}, 1};
    o->d = (u32_list){{0}, 1};
    o->reps = 5;
    o->batch = 2048;
    o->ubatch = 512;
    o->weights = "auto";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return -1;
        }
        if (!strcmp(a, "--no-warmup")) {
            o->no_warmup = true;
            continue;
        }
        if (i + 1 >= argc) return usage_error("%s needs a value", a);
        const char *v = argv[++i];
        bool ok = true;
        if (!strcmp(a, "-m") || !strcmp(a, "--model"))
            ok = add_strings(v, o->models, &o->n_models, NULL);
        else if (!strcmp(a, "--synthetic"))
            ok = add_strings(v, o->models, &o->n_models, HALO_SYNTH_PREFIX);
        else if (!strcmp(a, "-p") || !strcmp(a, "--n-prompt"))
            ok = parse_list(v, &o->p);
        else if (!strcmp(a, "-n") || !strcmp(a, "--n-gen"))
            ok = parse_list(v, &o->n);
        else if (!strcmp(a, "-d") || !strcmp(a, "--n-depth"))
            ok = parse_list(v, &o->d);
        else if (!strcmp(a, "-r") || !strcmp(a, "--repetitions"))
            ok = cli_parse_u32(v, &o->reps) && o->reps > 0;
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads"))
            ok = cli_parse_u32(v, &o->threads);
        else if (!strcmp(a, "-b") || !strcmp(a, "--batch-size"))
            ok = cli_parse_u32(v, &o->batch) && o->batch > 0;
        else if (!strcmp(a, "-ub") || !strcmp(a, "--ubatch-size"))
            ok = cli_parse_u32(v, &o->ubatch) && o->ubatch > 0;
        else if (!strcmp(a, "--backend"))
            ok = add_strings(v, o->backends, &o->n_backends, NULL);
        else if (!strcmp(a, "--weights"))
            o->weights = v;
        else if (!strcmp(a, "--plot"))
            o->plot = v;
        else if (!strcmp(a, "--write-gguf"))
            o->write_gguf = v;
        else if (!strcmp(a, "--checkpoints")) {
            if (!strcmp(v, "off"))
                o->ckpt_interval = UINT32_MAX;
            else
                ok = cli_parse_u32(v, &o->ckpt_interval) && o->ckpt_interval > 0 &&
                     o->ckpt_interval < UINT32_MAX;
        }
        else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            static const char *const names[] = {"md", "csv", "json", "jsonl"};
            ok = false;
            for (int k = 0; k < 4; k++)
                if (!strcmp(v, names[k])) o->fmt = (bench_format)k, ok = true;
        } else
            return usage_error("unknown option '%s'", a);
        if (!ok) return usage_error("bad value for %s", a);
    }
    if (!o->n_backends) o->backends[o->n_backends++] = "cpu";
    if (!o->n_models) {
        const char *m = cli_default_model();
        if (!m) return usage_error("%s", "no model: give -m MODEL or --synthetic KIND");
        o->models[o->n_models++] = m;
    }
    halo_error err = {0};
    for (uint32_t i = 0; i < o->n_backends; i++) {
        halo_backend_kind k;
        if (halo_backend_parse(o->backends[i], &k, &err) != HALO_OK)
            return usage_error("%s", err.message);
    }
    halo_weights_policy w;
    if (halo_weights_parse(o->weights, &w, &err) != HALO_OK) return usage_error("%s", err.message);
    if (o->ubatch > o->batch) o->ubatch = o->batch;
    /* the engine plans its weights with the policy halo plan reads from the environment */
    setenv("HALO_WEIGHTS", o->weights, 1);
    return 0;
}

/* ---- what the machine and the model say ---------------------------------------------------- */

static void cpu_name(char *buf, size_t size) {
    snprintf(buf, size, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "model name", 10) && strchr(line, ':')) {
            char *v = strchr(line, ':') + 1;
            while (*v == ' ')
                v++;
            v[strcspn(v, "\n")] = 0;
            snprintf(buf, size, "%s", v);
            break;
        }
    if (f) fclose(f);
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The bandwidths measured at the start of the run, per backend: the host's (the same for all),
 * and for a GPU backend its device memory and the pinned host memory it reads (gpu-host).
 * 0 = unknown. */
typedef struct backend_bw {
    double host, device, gpu_host;
} backend_bw;

/* VmHWM of this process, after a reset (writing 5 to clear_refs resets the peak). */
static void reset_peak(void) {
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (f) {
        fputs("5", f);
        fclose(f);
    }
}

static uint64_t peak_rss(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    uint64_t kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %" SCNu64, &kb) == 1) break;
    if (f) fclose(f);
    return kb * 1024;
}

typedef struct model_info {
    char type[128];
    uint64_t size, n_params, bytes_per_token;
    uint32_t experts, used; /* routed experts and how many a token reads */
} model_info;

/* The bytes of tensor t one decoded token reads: all of it, except that the embedding and the
 * hash-routing tables give one row per token and the routed experts expert_used_count of
 * expert_count (docs/bench.md). */
static uint64_t token_bytes(const halo_gguf_tensor *t, const model_info *mi) {
    if (!strcmp(t->name, "token_embd.weight") || strstr(t->name, "ffn_gate_tid2eid"))
        return t->n_dims >= 2 && t->ne[1] > 0 ? t->n_bytes / (uint64_t)t->ne[1] : t->n_bytes;
    if (strstr(t->name, "_exps.") && mi->experts) return t->n_bytes / mi->experts * mi->used;
    return t->n_bytes;
}

/* Size, parameters and the weight bytes a decoded token reads. */
static void describe(const halo_gguf *g, const char *path, model_info *mi) {
    memset(mi, 0, sizeof *mi);
    const char *arch = "?";
    halo_gguf_get_str(g, "general.architecture", &arch, NULL);
    char key[96];
    uint32_t layers = 0;
    snprintf(key, sizeof key, "%s.expert_used_count", arch);
    halo_gguf_get_u32(g, key, &mi->used, NULL);
    snprintf(key, sizeof key, "%s.expert_count", arch);
    halo_gguf_get_u32(g, key, &mi->experts, NULL);
    snprintf(key, sizeof key, "%s.block_count", arch);
    halo_gguf_get_u32(g, key, &layers, NULL);
    for (uint64_t i = 0; i < halo_gguf_tensor_count(g); i++) {
        const halo_gguf_tensor *t = halo_gguf_tensor_at(g, i);
        mi->size += t->n_bytes;
        mi->n_params += t->n_elements;
        mi->bytes_per_token += token_bytes(t, mi);
    }
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    if (halo_synth_is_path(path)) base = path + strlen(HALO_SYNTH_PREFIX);
    snprintf(mi->type, sizeof mi->type, "%s %uL %s", arch, layers, base);
}

/* What the plan says for this model, context and backend: bytes per pool as text ("host 8.92
 * GiB"), the GPU's name, and how the bytes a token reads split over the pools (token[] stays
 * zero without a plan). */
typedef struct plan_info {
    char placement[192], gpu[64];
    uint64_t token[HALO_POOL_COUNT];
} plan_info;

static void placement(const halo_gguf *g, const char *path, const char *backend,
                      const char *weights, uint64_t n_ctx, uint32_t n_batch, const model_info *mi,
                      plan_info *pi) {
    memset(pi, 0, sizeof *pi);
    char *out = pi->placement;
    size_t size = sizeof pi->placement;
    snprintf(out, size, "unknown");
    halo_machine m;
    halo_error err = {0};
    const char *profile = getenv("HALO_PROFILE");
    if ((profile && *profile ? halo_machine_load_profile(profile, &m, &err)
                             : halo_machine_probe("/", path, &m, &err)) != HALO_OK)
        return;
    /* As the engine plans it: a Vulkan device the probes do not know, from its heaps. */
    if (!(profile && *profile) && !strcmp(backend, "vulkan") &&
        halo_backend_vulkan_machine(-1, &m, &err) != HALO_OK)
        return;
    if (strcmp(backend, "cpu")) snprintf(pi->gpu, sizeof pi->gpu, "%s", m.gpu_name);
    halo_plan_options o = {.n_ctx = n_ctx, .n_batch = n_batch};
    if (halo_backend_parse(backend, &o.backend, &err) ||
        halo_weights_parse(weights, &o.weights, &err))
        return;
    halo_plan *p = NULL;
    if (halo_plan_build(g, &m, &o, &p, &err) != HALO_OK) {
        snprintf(out, size, "no plan: %.170s", err.message);
        return;
    }
    if (p->refused) {
        snprintf(out, size, "refused: %.170s", p->reason);
    } else {
        size_t len = 0;
        out[0] = 0;
        for (int k = 0; k < HALO_POOL_COUNT; k++) {
            if (!p->pools[k].planned) continue;
            char b[32];
            len += (size_t)snprintf(out + len, len < size ? size - len : 0, "%s%s %s",
                                    len ? ", " : "", halo_pool_name((halo_pool_kind)k),
                                    cli_bytes(p->pools[k].planned, b, sizeof b));
            if (len >= size) break;
        }
        for (uint64_t i = 0; p->tensor_pool && i < halo_gguf_tensor_count(g); i++)
            if (p->tensor_pool[i] < HALO_POOL_COUNT)
                pi->token[p->tensor_pool[i]] += token_bytes(halo_gguf_tensor_at(g, i), mi);
    }
    halo_plan_free(p);
}

/* The bandwidth a decode on this backend can reach: the bytes a token reads from each pool over
 * that pool's measured bandwidth, summed as time (a harmonic mean weighted by bytes). The CPU
 * reads every memory pool at host speed; a GPU reads device and managed memory at device speed,
 * gpu-host memory at the speed it reads pinned host memory, and host memory (what the CPU side
 * keeps) at host speed. Streamed (disk) bytes or a pool without a measurement give 0: unknown.
 * Without a plan, every byte is taken to sit in the backend's own memory. */
static double roofline_bandwidth(const char *backend, const plan_info *pi, const model_info *mi,
                                 const backend_bw *bw) {
    bool cpu = !strcmp(backend, "cpu");
    uint64_t token[HALO_POOL_COUNT], total = 0;
    memcpy(token, pi->token, sizeof token);
    for (int k = 0; k < HALO_POOL_COUNT; k++)
        total += token[k];
    if (!total) token[cpu ? HALO_POOL_HOST : HALO_POOL_DEVICE] = total = mi->bytes_per_token;
    double seconds = 0;
    for (int k = 0; k < HALO_POOL_COUNT; k++) {
        if (!token[k]) continue;
        double b = 0;
        if (k == HALO_POOL_DISK) return 0;
        if (cpu || k == HALO_POOL_HOST)
            b = bw->host;
        else
            b = k == HALO_POOL_GPU_HOST ? bw->gpu_host : bw->device;
        if (b <= 0) return 0;
        seconds += (double)token[k] / (b * 1e9);
    }
    return seconds > 0 ? (double)total / seconds / 1e9 : 0;
}

/* ---- running the tests --------------------------------------------------------------------- */

typedef struct run_ctx {
    const opts *o;
    halo_engine *e;
    const char *model, *backend;
    uint32_t threads;
    int32_t *tokens; /* deterministic random ids for depth, prompt and generation */
    uint32_t n_tokens, n_ctx;
    halo_snapshot *depth_snap; /* state after depth_cached tokens, reused across repetitions */
    uint32_t depth_cached;
    uint32_t test_no, n_tests;
    /* device memory in use (all processes) before the engine opened, and the most seen since,
     * sampled at the end of every timed run while its session still holds its state */
    bool dev_known;
    uint64_t dev_base, dev_peak;
} run_ctx;

/* Prompt tokens in forwards of at most -ub tokens (halo evaluates one physical batch per call). */
static halo_status eval_chunked(const run_ctx *c, halo_session *s, const int32_t *tok, uint32_t n,
                                halo_error *err) {
    for (uint32_t done = 0; done < n;) {
        uint32_t k = n - done < c->o->ubatch ? n - done : c->o->ubatch;
        halo_status st = halo_session_eval(s, tok + done, k, false, err);
        if (st) return st;
        done += k;
    }
    return HALO_OK;
}

/* One run: a fresh session at the test's depth (restored from the cached state when there is
 * one), then the timed prompt or generation. */
static halo_status run_once(run_ctx *c, const bench_result *r, uint64_t *ns, halo_error *err) {
    /* one context size for every session: a depth snapshot restores only into its own size */
    halo_session *s = NULL;
    halo_status st = halo_session_create(c->e, c->n_ctx, &s, err);
    if (st) return st;
    if (c->o->ckpt_interval) {
        halo_checkpoint_policy cp = {.interval = c->o->ckpt_interval};
        st = halo_session_set_checkpoints(s, &cp, err);
        if (st) {
            halo_session_free(s);
            return st;
        }
    }
    if (r->n_depth) {
        if (c->depth_snap && c->depth_cached == r->n_depth &&
            halo_session_restore(s, c->depth_snap, NULL) == HALO_OK) {
        } else {
            fprintf(stderr, "halo bench: [%u/%u] filling depth %u\n", c->test_no, c->n_tests,
                    r->n_depth);
            st = eval_chunked(c, s, c->tokens, r->n_depth, err);
            halo_snapshot_free(c->depth_snap);
            c->depth_snap = NULL;
            if (!st && halo_session_snapshot(s, &c->depth_snap, NULL) == HALO_OK)
                c->depth_cached = r->n_depth;
        }
    }
    const int32_t *tok = c->tokens + r->n_depth;
    double t0 = now();
    if (!st && r->n_prompt) st = eval_chunked(c, s, tok, r->n_prompt, err);
    for (uint32_t i = 0; !st && i < r->n_gen; i++)
        st = halo_session_eval(s, tok + r->n_prompt + i, 1, false, err);
    *ns = (uint64_t)((now() - t0) * 1e9);
    uint64_t used;
    if (c->dev_known && bench_gpu_mem_used(c->backend, &used) && used > c->dev_peak)
        c->dev_peak = used;
    halo_session_free(s);
    return st;
}

static void stats(bench_result *r) {
    double n = r->n_samples, tok = r->n_prompt + r->n_gen;
    double sum = 0, sum_ts = 0;
    for (uint32_t k = 0; k < r->n_samples; k++) {
        sum += (double)r->samples_ns[k];
        sum_ts += 1e9 * tok / (double)r->samples_ns[k];
    }
    r->avg_ns = sum / n;
    r->avg_ts = sum_ts / n;
    double v = 0, v_ts = 0;
    for (uint32_t k = 0; k < r->n_samples; k++) {
        double ts = 1e9 * tok / (double)r->samples_ns[k];
        v += ((double)r->samples_ns[k] - r->avg_ns) * ((double)r->samples_ns[k] - r->avg_ns);
        v_ts += (ts - r->avg_ts) * (ts - r->avg_ts);
    }
    /* sample standard deviation (n - 1), 0 for one run, as llama-bench */
    r->stddev_ns = r->n_samples > 1 ? sqrt(v / (n - 1)) : 0;
    r->stddev_ts = r->n_samples > 1 ? sqrt(v_ts / (n - 1)) : 0;
}

static int run_test(run_ctx *c, bench_result *r) {
    halo_error err = {0};
    uint64_t ns;
    if (!c->o->no_warmup) {
        fprintf(stderr, "halo bench: [%u/%u] %s %s: warm-up\n", c->test_no, c->n_tests,
                r->model_type, r->backend);
        bench_result w = *r;
        if (w.n_gen) w.n_gen = 1;
        if (run_once(c, &w, &ns, &err)) goto fail;
    }
    r->samples_ns = calloc(c->o->reps, sizeof *r->samples_ns);
    if (!r->samples_ns) return 1;
    for (uint32_t k = 0; k < c->o->reps; k++) {
        char test[48];
        bench_test_name(r, true, test, sizeof test);
        fprintf(stderr, "halo bench: [%u/%u] %s %s %s: run %u/%u\n", c->test_no, c->n_tests,
                r->model_type, r->backend, test, k + 1, c->o->reps);
        if (run_once(c, r, &ns, &err)) goto fail;
        r->samples_ns[r->n_samples++] = ns ? ns : 1;
    }
    stats(r);
    return 0;
fail:
    fprintf(stderr, "halo bench: %s on %s: %s\n", c->model, c->backend, err.message);
    return 1;
}

/* Opening the engine first on no model: a backend this build lacks is named before any model
 * is loaded (the engine checks the backend before it opens the file). */
static int check_backends(const opts *o) {
    for (uint32_t i = 0; i < o->n_backends; i++) {
        halo_engine_params p = {.model_path = "", .backend = o->backends[i]};
        halo_engine *e = NULL;
        halo_error err = {0};
        if (halo_engine_open(&p, &e, &err) == HALO_OK) {
            halo_engine_close(e);
            continue;
        }
        if (strstr(err.message, "not built") || strstr(err.message, "backend '")) {
            fprintf(stderr, "halo bench: --backend %s: %s\n", o->backends[i], err.message);
            return 1;
        }
    }
    return 0;
}

static const char *backends_field(const char *b) {
    if (!strcmp(b, "cpu")) return "CPU";
    if (!strcmp(b, "cuda")) return "CUDA";
    if (!strcmp(b, "hip")) return "ROCm";
    if (!strcmp(b, "vulkan")) return "Vulkan";
    return b;
}

typedef struct results {
    bench_result *r;
    uint32_t n, cap;
} results;

static bench_result *push(results *rs) {
    if (rs->n == rs->cap) {
        uint32_t cap = rs->cap ? 2 * rs->cap : 16;
        bench_result *p = realloc(rs->r, cap * sizeof *p);
        if (!p) return NULL;
        rs->r = p;
        rs->cap = cap;
    }
    bench_result *r = &rs->r[rs->n++];
    memset(r, 0, sizeof *r);
    return r;
}

static int open_header(const char *path, halo_gguf **g, halo_mem_arena **a) {
    halo_error err = {0};
    halo_status st = halo_synth_is_path(path) ? halo_synth_open(path, g, a, &err)
                                              : halo_gguf_open(path, g, &err);
    if (st) fprintf(stderr, "halo bench: %s\n", err.message);
    return st ? 1 : 0;
}

static int bench_model(const opts *o, uint32_t mi_index, results *rs, bool *first,
                       uint32_t *test_no, uint32_t n_tests, const backend_bw *bws) {
    const char *model = o->models[mi_index];
    halo_gguf *g = NULL;
    halo_mem_arena *arena = NULL;
    if (open_header(model, &g, &arena)) return 1;
    model_info mi;
    halo_error err = {0};
    describe(g, model, &mi);
    uint32_t max_ctx = 0;
    for (uint32_t d = 0; d < o->d.n; d++) {
        uint32_t pmax = 0, nmax = 0;
        for (uint32_t i = 0; i < o->p.n; i++)
            pmax = o->p.v[i] > pmax ? o->p.v[i] : pmax;
        for (uint32_t i = 0; i < o->n.n; i++)
            nmax = o->n.v[i] > nmax ? o->n.v[i] : nmax;
        uint32_t need = o->d.v[d] + (pmax > nmax ? pmax : nmax) + 1;
        if (need > max_ctx) max_ctx = need;
    }
    char cpu[128];
    cpu_name(cpu, sizeof cpu);
    int rc = 0;
    for (uint32_t b = 0; b < o->n_backends && !rc; b++) {
        const char *backend = o->backends[b];
        const backend_bw *bw = &bws[b];
        plan_info pi;
        placement(g, model, backend, o->weights, max_ctx, o->ubatch, &mi, &pi);
        const char *place = pi.placement;
        double roof_bw = roofline_bandwidth(backend, &pi, &mi, bw);
        fprintf(stderr, "halo bench: loading %s on %s (plan: %s)\n", model, backend, place);
        reset_peak();
        uint64_t dev_base = 0;
        bool dev_known = bench_gpu_mem_used(backend, &dev_base);
        double t0 = now();
        halo_engine_params ep = {
            .model_path = model, .backend = backend, .threads = o->threads, .n_ctx = max_ctx};
        halo_engine *e = NULL;
        if (halo_engine_open(&ep, &e, &err) != HALO_OK) {
            fprintf(stderr, "halo bench: %s on %s: %s\n", model, backend, err.message);
            rc = 1;
            break;
        }
        fprintf(stderr, "halo bench: loaded in %.1f s\n", now() - t0);
        uint32_t V = halo_engine_n_vocab(e);
        run_ctx c = {.o = o,
                     .e = e,
                     .model = model,
                     .backend = backend,
                     .n_tests = n_tests,
                     .dev_known = dev_known,
                     .dev_base = dev_base,
                     .dev_peak = dev_base};
        c.threads = o->threads ? o->threads : (uint32_t)sysconf(_SC_NPROCESSORS_ONLN);
        c.n_tokens = max_ctx + 1;
        c.n_ctx = max_ctx;
        c.tokens = malloc(c.n_tokens * sizeof *c.tokens);
        for (uint32_t i = 0; c.tokens && i < c.n_tokens; i++)
            c.tokens[i] = (int32_t)((i * 2654435761u + 12345u) % V);
        for (uint32_t di = 0; di < o->d.n && !rc && c.tokens; di++)
            for (int kind = 0; kind < 2 && !rc; kind++) {
                const u32_list *l = kind ? &o->n : &o->p;
                for (uint32_t li = 0; li < l->n && !rc; li++) {
                    if (!l->v[li]) continue;
                    bench_result *r = push(rs);
                    if (!r) {
                        rc = 1;
                        break;
                    }
                    snprintf(r->cpu_info, sizeof r->cpu_info, "%s", cpu);
                    snprintf(r->gpu_info, sizeof r->gpu_info, "%s", pi.gpu);
                    snprintf(r->backends, sizeof r->backends, "%s", backends_field(backend));
                    snprintf(r->backend, sizeof r->backend, "%s", backend);
                    snprintf(r->weights, sizeof r->weights, "%s", o->weights);
                    snprintf(r->model_filename, sizeof r->model_filename, "%s", model);
                    snprintf(r->model_type, sizeof r->model_type, "%s", mi.type);
                    snprintf(r->placement, sizeof r->placement, "%s", place);
                    r->model_size = mi.size;
                    r->model_n_params = mi.n_params;
                    r->bytes_per_token = mi.bytes_per_token;
                    r->n_batch = o->batch;
                    r->n_ubatch = o->ubatch;
                    r->n_threads = c.threads;
                    r->n_prompt = kind ? 0 : l->v[li];
                    r->n_gen = kind ? l->v[li] : 0;
                    r->n_depth = o->d.v[di];
                    time_t now_t = time(NULL);
                    strftime(r->test_time, sizeof r->test_time, "%Y-%m-%dT%H:%M:%SZ",
                             gmtime(&now_t));
                    c.test_no = ++*test_no;
                    rc = run_test(&c, r);
                    if (rc) {
                        rs->n--;
                        break;
                    }
                    r->bandwidth_gbs = roof_bw;
                    r->host_bandwidth_gbs = bw->host;
                    if (strcmp(backend, "cpu")) {
                        r->device_bandwidth_gbs = bw->device;
                        r->gpu_host_bandwidth_gbs = bw->gpu_host;
                    }
                    if (roof_bw > 0 && r->n_gen && r->bytes_per_token) {
                        r->roofline_ts = roof_bw * 1e9 / (double)r->bytes_per_token;
                        r->roofline_fraction = r->avg_ts / r->roofline_ts;
                    }
                    r->peak_host_bytes = peak_rss();
                    if (c.dev_known) r->peak_device_bytes = c.dev_peak - c.dev_base;
                    bench_print_result(stdout, o->fmt, r, *first);
                    *first = false;
                }
            }
        halo_snapshot_free(c.depth_snap);
        free(c.tokens);
        halo_engine_close(e);
    }
    halo_mem_arena_free(arena);
    halo_gguf_close(g);
    return rc;
}

static void write_progress(const halo_load_progress *p, void *user) {
    (void)user;
    fprintf(stderr, "\rhalo bench: writing %.2f / %.2f GiB", (double)p->done / (1u << 30),
            (double)p->total / (1u << 30));
    if (p->done == p->total) fputc('\n', stderr);
}

static int write_gguf(const opts *o) {
    if (o->n_models != 1 || !halo_synth_is_path(o->models[0])) {
        fprintf(stderr, "halo bench: --write-gguf needs exactly one --synthetic model\n");
        return 2;
    }
    halo_synth_spec s;
    halo_error err = {0};
    if (halo_synth_parse(o->models[0], &s, &err) ||
        halo_synth_write_gguf(&s, o->write_gguf, o->threads, write_progress, NULL, &err)) {
        fprintf(stderr, "halo bench: %s\n", err.message);
        return 1;
    }
    fprintf(stderr, "halo bench: wrote %s\n", o->write_gguf);
    return 0;
}

/* The run's bandwidths, before any model is loaded (docs/bench.md: how and why). */
static void measure_bandwidth(const opts *o, uint32_t threads, backend_bw *bws) {
    memset(bws, 0, MAX_LIST * sizeof *bws);
    uint64_t llc = bench_llc_bytes("/");
    uint64_t buffer = bench_bw_buffer_bytes(llc);
    /* never more than a quarter of what is free: a bench must not push the machine to swap */
    uint64_t avail = bench_mem_available();
    if (avail && buffer > avail / 4) {
        buffer = avail / 4;
        fprintf(stderr,
                "halo bench: the bandwidth buffer is capped at a quarter of the available memory "
                "(%.2f GiB): part of it may be served from cache, so the figure may be high\n",
                (double)buffer / (1u << 30));
    }
    fprintf(stderr, "halo bench: measuring host memory read bandwidth (%u threads, %.2f GiB) ...\n",
            threads, (double)buffer / (1u << 30));
    bench_bw h;
    double host = 0;
    if (bench_host_bandwidth(threads, buffer, 1, 5, &h)) {
        host = h.read_gbs;
        char l[48] = "an unknown last-level cache";
        if (llc)
            snprintf(l, sizeof l, "%.0fx the %.0f MiB last-level cache",
                     (double)h.buffer / (double)llc, (double)llc / (1u << 20));
        fprintf(stderr,
                "halo bench: host read bandwidth %.1f GB/s (best of %u passes, slowest %.1f; "
                "%u threads over %.2f GiB, %s)\n",
                h.read_gbs, h.passes, h.worst_gbs, h.threads, (double)h.buffer / (1u << 30), l);
    } else {
        fprintf(stderr, "halo bench: host read bandwidth unknown (no %.2f GiB buffer or threads)\n",
                (double)buffer / (1u << 30));
    }
    for (uint32_t i = 0; i < o->n_backends; i++) {
        const char *b = o->backends[i];
        bws[i].host = host;
        if (!strcmp(b, "cpu")) continue;
        bool done = false;
        for (uint32_t j = 0; j < i && !done; j++)
            if (!strcmp(o->backends[j], b)) bws[i] = bws[j], done = true;
        if (done) continue;
        if (!strcmp(b, "vulkan")) {
            /* every Vulkan buffer is one memory type (device-local and host-visible where the
             * device has it): weights in any pool are read from there */
            bench_bw g;
            char why[256];
            if (bench_backend_copy_bandwidth(b, &g, why, sizeof why)) {
                bws[i].device = bws[i].gpu_host = g.read_gbs;
                fprintf(stderr,
                        "halo bench: vulkan copies its buffers at %.1f GB/s read + written (best "
                        "of %u passes, slowest %.1f; %.2f GiB each way)\n",
                        g.read_gbs, g.passes, g.worst_gbs, (double)g.buffer / (1u << 30));
            } else {
                fprintf(stderr, "halo bench: vulkan bandwidth unknown: %s\n", why);
            }
            continue;
        }
        for (int mapped = 0; mapped < 2; mapped++) {
            bench_bw g;
            char why[256];
            const char *what = mapped ? "pinned host memory" : "device memory";
            if (bench_gpu_bandwidth(b, mapped, &g, why, sizeof why)) {
                *(mapped ? &bws[i].gpu_host : &bws[i].device) = g.read_gbs;
                fprintf(stderr,
                        "halo bench: %s reads %s at %.1f GB/s (best of %u passes, slowest %.1f; "
                        "%.2f GiB, %.0f MiB L2)\n",
                        b, what, g.read_gbs, g.passes, g.worst_gbs, (double)g.buffer / (1u << 30),
                        (double)g.llc / (1u << 20));
            } else {
                fprintf(stderr, "halo bench: %s read bandwidth of %s unknown: %s\n", b, what, why);
            }
        }
    }
}

static int bench_run(int argc, char **argv);

int cli_bench(int argc, char **argv) {
    int rc = bench_run(argc, argv);
    free_owned();
    return rc;
}

static int bench_run(int argc, char **argv) {
    opts o;
    int rc = parse_args(argc, argv, &o);
    if (rc) return rc < 0 ? 0 : rc;
    if (o.write_gguf) return write_gguf(&o);
    if (check_backends(&o)) return 1;
    uint32_t per_model = 0;
    for (uint32_t i = 0; i < o.p.n; i++)
        per_model += o.p.v[i] > 0;
    for (uint32_t i = 0; i < o.n.n; i++)
        per_model += o.n.v[i] > 0;
    uint32_t n_tests = per_model * o.d.n * o.n_models * o.n_backends;
    uint32_t threads = o.threads ? o.threads : (uint32_t)sysconf(_SC_NPROCESSORS_ONLN);
    backend_bw bw[MAX_LIST];
    measure_bandwidth(&o, threads, bw);
    results rs = {0};
    bool first = true;
    uint32_t test_no = 0;
    bench_print_header(stdout, o.fmt);
    for (uint32_t m = 0; m < o.n_models && !rc; m++)
        rc = bench_model(&o, m, &rs, &first, &test_no, n_tests, bw);
    bench_print_footer(stdout, o.fmt);
    if (!rc && o.plot) {
        if (!bench_write_svg(o.plot, rs.r, rs.n)) {
            fprintf(stderr, "halo bench: cannot write %s: %s\n", o.plot, strerror(errno));
            rc = 1;
        } else {
            fprintf(stderr, "halo bench: plot written to %s\n", o.plot);
        }
    }
    for (uint32_t i = 0; i < rs.n; i++)
        free(rs.r[i].samples_ns);
    free(rs.r);
    return rc;
}
