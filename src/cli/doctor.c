/* `halo doctor [-m MODEL] [--root DIR] [--ctx N] [--watch]`: reads this machine and says, in plain
 * lines with the exact fix, what limits running a model here: GPU memory pools and their kernel
 * parameters, whether the model fits and where, unified-memory traps, drivers and firmware
 * against a table of known-bad versions, the model disk's read speed, and GPU faults in the
 * kernel log (followed with --watch). The probes live in src/mem/doctor_*.c; this file prints.
 * Exit status: 0 nothing blocks, 1 something does (a FAIL line), 2 usage error. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/run.h"
#include "halo/gguf.h"
#include "halo/plan.h"
#include "mem/doctor.h"
#include "model/synthetic.h"

static void usage(FILE *out) {
    fprintf(
        out,
        "usage: halo doctor [options]\n"
        "\n"
        "Says what on this machine limits running a model, with the fix.\n"
        "\n"
        "  -m, --model PATH      the model to check (a GGUF file or synthetic:KIND[:LAYERS])\n"
        "  --ctx N               context tokens (default 32768, or the model's if smaller)\n"
        "  --root DIR            read /proc, /sys, /dev/kmsg, /var/log under DIR (recorded\n"
        "                        machines, tests)\n"
        "  --watch               then follow the kernel log and report GPU faults as they come\n"
        "  --watch-seconds N     stop watching after N seconds (default: until Ctrl-C)\n"
        "  --no-disk             do not time reads of the model file\n"
        "\n"
        "exit status: 0 nothing blocks the model, 1 something does, 2 usage error.\n");
}

static volatile sig_atomic_t stop;
static void on_signal(int sig) {
    (void)sig;
    stop = 1;
}

static const char *const sections[][2] = {
    {"memory", "GPU memory pools"},    {"model", "the model"},
    {"traps", "unified-memory traps"}, {"drivers", "drivers and firmware"},
    {"disk", "the model's disk"},      {"gpu-log", "GPU faults in the kernel log"},
};

static void print_item(const halo_doctor_item *it) {
    printf("  %-7s %s\n", halo_doctor_level_name(it->level), it->text);
    if (it->fix[0]) printf("          fix: %s\n", it->fix);
}

static void print_report(const halo_doctor_report *r) {
    for (size_t s = 0; s < sizeof sections / sizeof sections[0]; s++) {
        bool any = false;
        for (size_t i = 0; i < r->n; i++) {
            if (strcmp(r->items[i].section, sections[s][0])) continue;
            if (!any) printf("\n%s\n", sections[s][1]);
            any = true;
            print_item(&r->items[i]);
        }
    }
}

typedef struct log_ctx {
    halo_doctor_report *r;
    bool live; /* print at once (--watch) */
} log_ctx;

static void on_event(const halo_gpu_event *ev, void *user) {
    log_ctx *c = user;
    static const char *const kinds[] = {"ring timeout", "GPU reset", "device wedged",
                                        "GPU page fault", "NVIDIA Xid"};
    char fix[384];
    snprintf(fix, sizeof fix, "means: %s", ev->meaning);
    halo_doctor_item it;
    memset(&it, 0, sizeof it);
    if (c->live) {
        time_t now = time(NULL);
        char stamp[32];
        strftime(stamp, sizeof stamp, "%H:%M:%S", localtime(&now));
        printf("[%s] %s (%s): %s\n          %s\n", stamp, kinds[ev->kind], ev->time, ev->line, fix);
        fflush(stdout);
        return;
    }
    halo_doctor_add(c->r, HALO_DOCTOR_WARN, "gpu-log", fix, "%s at %s: %s", kinds[ev->kind],
                    ev->time, ev->line);
}

/* Reads what is available from fd (non-blocking: kmsg ends with EAGAIN, a file with EOF) and
 * scans complete lines; a partial last line waits in *pend for the next read. */
static void drain(int fd, char **pend, size_t *plen, log_ctx *c) {
    char buf[8192];
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n < 0 && errno == EPIPE) continue; /* kmsg: records overwritten; go on */
        if (n <= 0) break;
        char *p = realloc(*pend, *plen + (size_t)n + 1);
        if (!p) break;
        memcpy(p + *plen, buf, (size_t)n);
        *pend = p;
        *plen += (size_t)n;
        /* kmsg returns one record per read, without a trailing newline in some kernels */
        if ((*pend)[*plen - 1] != '\n' && n < (ssize_t)sizeof buf) (*pend)[(*plen)++] = '\n';
    }
    size_t last = *plen;
    while (last > 0 && (*pend)[last - 1] != '\n')
        last--;
    if (last) {
        halo_doctor_scan_klog(*pend, last, on_event, c);
        memmove(*pend, *pend + last, *plen - last);
        *plen -= last;
    }
}

static void check_disk(const char *model, halo_doctor_report *r) {
    struct stat st;
    if (stat(model, &st) != 0 || !S_ISREG(st.st_mode)) {
        halo_doctor_add(r, HALO_DOCTOR_UNKNOWN, "disk", NULL, "%s: not a regular file", model);
        return;
    }
    if ((uint64_t)st.st_blocks * 512 < (uint64_t)st.st_size / 2) {
        halo_doctor_add(r, HALO_DOCTOR_INFO, "disk", NULL,
                        "%s is sparse (mostly holes): its read speed says nothing about the disk",
                        model);
        return;
    }
    halo_machine m;
    memset(&m, 0, sizeof m);
    halo_error err = {0};
    if (halo_machine_measure_disk(model, &m, &err) != HALO_OK) {
        halo_doctor_add(r, HALO_DOCTOR_UNKNOWN, "disk", NULL, "read speed unknown: %s",
                        err.message);
        return;
    }
    double s = (double)st.st_size / (m.disk_read_gbs * 1e9);
    halo_doctor_add(r, m.disk_read_gbs < 1.0 ? HALO_DOCTOR_WARN : HALO_DOCTOR_INFO, "disk",
                    m.disk_read_gbs < 1.0 ? "keep models on an NVMe drive" : NULL,
                    "%s: %.2f GB/s measured (O_DIRECT, 8 reads of 16 MiB): loading it takes "
                    "about %.0f s",
                    model, m.disk_read_gbs, s);
}

int cli_doctor(int argc, char **argv) {
    const char *model = NULL, *root = "/";
    uint32_t ctx = 0, watch_s = 0; /* 0: the planner's default (32768 or the model's) */
    bool watch = false, no_disk = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--watch")) {
            watch = true;
        } else if (!strcmp(a, "--no-disk")) {
            no_disk = true;
        } else if (i + 1 < argc && (!strcmp(a, "-m") || !strcmp(a, "--model"))) {
            model = argv[++i];
        } else if (i + 1 < argc && !strcmp(a, "--root")) {
            root = argv[++i];
        } else if (i + 1 < argc && !strcmp(a, "--ctx")) {
            if (!cli_parse_u32(argv[++i], &ctx) || !ctx) {
                fprintf(stderr, "halo doctor: --ctx needs a positive number\n");
                return 2;
            }
        } else if (i + 1 < argc && !strcmp(a, "--watch-seconds")) {
            if (!cli_parse_u32(argv[++i], &watch_s)) {
                fprintf(stderr, "halo doctor: --watch-seconds needs a number\n");
                return 2;
            }
            watch = true;
        } else {
            fprintf(stderr, "halo doctor: unknown option '%s' (see halo doctor --help)\n", a);
            return 2;
        }
    }
    halo_doctor_report *r = calloc(1, sizeof *r);
    if (!r) return 1;
    halo_machine m;
    bool probed = false;
    halo_doctor_machine(root, model, &m, &probed);
    printf("halo doctor: %s (%s)\n", probed ? m.description : "machine unknown",
           strcmp(root, "/") ? root : "this machine");
    halo_doctor_pools(root, &m, probed, r);
    if (model) {
        halo_gguf *g = NULL;
        halo_mem_arena *arena = NULL;
        halo_error err = {0};
        halo_status st = halo_synth_is_path(model) ? halo_synth_open(model, &g, &arena, &err)
                                                   : halo_gguf_open(model, &g, &err);
        if (st)
            halo_doctor_add(r, HALO_DOCTOR_FAIL, "model", NULL, "%s", err.message);
        else
            halo_doctor_model(g, model, &m, probed, ctx, r);
        halo_mem_arena_free(arena);
        halo_gguf_close(g);
        if (!no_disk && !halo_synth_is_path(model)) check_disk(model, r);
    }
    halo_doctor_traps(root, &m, probed, r);
    halo_doctor_drivers(root, &m, r);
    char path[1024];
    int fd = -1;
    if (halo_doctor_klog_path(root, path, sizeof path))
        fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    char *pend = NULL;
    size_t plen = 0;
    log_ctx c = {r, false};
    if (fd >= 0) {
        size_t before = r->n;
        drain(fd, &pend, &plen, &c);
        if (r->n == before)
            halo_doctor_add(r, HALO_DOCTOR_OK, "gpu-log", NULL,
                            "no GPU faults, resets or watchdog timeouts in %s", path);
    } else {
        halo_doctor_add(r, HALO_DOCTOR_UNKNOWN, "gpu-log", NULL,
                        "kernel log unreadable (dev/kmsg, var/log/kern.log under %s)", root);
    }
    print_report(r);
    size_t n[5] = {0};
    for (size_t i = 0; i < r->n; i++)
        n[r->items[i].level]++;
    printf("\n%zu blocking, %zu warnings, %zu unknown\n", n[HALO_DOCTOR_FAIL], n[HALO_DOCTOR_WARN],
           n[HALO_DOCTOR_UNKNOWN]);
    int rc = n[HALO_DOCTOR_FAIL] ? 1 : 0;
    if (watch && fd >= 0) {
        printf("\nwatching %s for GPU faults%s ...\n", path, watch_s ? "" : " (Ctrl-C stops)");
        fflush(stdout);
        signal(SIGINT, on_signal);
        signal(SIGTERM, on_signal);
        c.live = true;
        time_t t0 = time(NULL);
        while (!stop && (!watch_s || time(NULL) - t0 < (time_t)watch_s)) {
            struct timespec ts = {0, 200 * 1000 * 1000};
            nanosleep(&ts, NULL);
            drain(fd, &pend, &plen, &c);
        }
    } else if (watch) {
        fprintf(stderr, "halo doctor: --watch: no readable kernel log\n");
    }
    if (fd >= 0) close(fd);
    free(pend);
    free(r);
    return rc;
}
