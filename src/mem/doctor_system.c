/* `halo doctor`: the machine's memory pools, unified-memory traps and driver versions, read from
 * files under a root directory. A file that cannot be read gives an "unknown" line, never an
 * error: a doctor that stops at the first unreadable file diagnoses nothing. */
#include <ctype.h>
#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mem/doctor.h"

#define GIB ((double)HALO_GIB)

void halo_doctor_add(halo_doctor_report *r, halo_doctor_level level, const char *section,
                     const char *fix, const char *fmt, ...) {
    if (r->n >= HALO_DOCTOR_MAX_ITEMS) return;
    halo_doctor_item *it = &r->items[r->n++];
    it->level = level;
    snprintf(it->section, sizeof it->section, "%s", section);
    snprintf(it->fix, sizeof it->fix, "%s", fix ? fix : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(it->text, sizeof it->text, fmt, ap);
    va_end(ap);
}

const char *halo_doctor_level_name(halo_doctor_level level) {
    static const char *const names[] = {"ok", "info", "unknown", "warn", "FAIL"};
    return level <= HALO_DOCTOR_FAIL ? names[level] : "?";
}

bool halo_doctor_read(const char *root, const char *path, char *buf, size_t size) {
    char full[1024];
    snprintf(full, sizeof full, "%s%s", strcmp(root, "/") == 0 ? "" : root, path);
    FILE *f = fopen(full, "r");
    if (!f) return false;
    size_t n = fread(buf, 1, size - 1, f);
    bool ok = !ferror(f);
    fclose(f);
    buf[n] = 0;
    while (n > 0 && isspace((unsigned char)buf[n - 1]))
        buf[--n] = 0;
    return ok;
}

static bool read_i64(const char *root, const char *path, long long *out) {
    char buf[64], *end;
    if (!halo_doctor_read(root, path, buf, sizeof buf) || !buf[0]) return false;
    long long v = strtoll(buf, &end, 0);
    if (*end) return false;
    *out = v;
    return true;
}

/* A "Key:   N kB" line of meminfo text, in bytes. */
static bool meminfo(const char *text, const char *key, uint64_t *out) {
    size_t n = strlen(key);
    for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        if (!strncmp(p, key, n) && p[n] == ':') {
            *out = strtoull(p + n + 1, NULL, 10) * 1024;
            return true;
        }
    return false;
}

/* ---- the machine --------------------------------------------------------------------------- */

/* NVIDIA device memory by model name, until the CUDA backend asks the runtime (cudaMemGetInfo
 * through dlopen). Sizes as the driver reports them (the profiles in profiles/ give sources);
 * GB10 shares the host's memory. */
static const struct {
    const char *model;
    uint64_t mib; /* 0: unified with host memory */
} nvidia_models[] = {
    {"GB10", 0},
    {"H200", 143771},
    {"GeForce RTX 4090", 24564},
};

/* The "Model:" line of /proc/driver/nvidia/gpus/<bus>/information (first GPU). */
static bool nvidia_model(const char *root, char *out, size_t size) {
    char dir[600];
    snprintf(dir, sizeof dir, "%s/proc/driver/nvidia/gpus", strcmp(root, "/") ? root : "");
    DIR *d = opendir(dir);
    if (!d) return false;
    struct dirent *e;
    bool found = false;
    while (!found && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char path[400], text[2048];
        snprintf(path, sizeof path, "/proc/driver/nvidia/gpus/%.200s/information", e->d_name);
        if (!halo_doctor_read(root, path, text, sizeof text)) continue;
        char *m = strstr(text, "Model:");
        if (!m) continue;
        m += 6;
        while (*m == ' ' || *m == '\t')
            m++;
        m[strcspn(m, "\n")] = 0;
        snprintf(out, size, "%s", m);
        found = true;
    }
    closedir(d);
    return found;
}

void halo_doctor_machine(const char *root, const char *model_path, halo_machine *m, bool *probed) {
    halo_error err = {0};
    const char *file = model_path && strncmp(model_path, "synthetic:", 10) ? model_path : NULL;
    *probed = halo_machine_probe(root, file, m, &err) == HALO_OK;
    if (!*probed) {
        memset(m, 0, sizeof *m);
        snprintf(m->name, sizeof m->name, "unknown");
    }
    char model[128];
    /* A VM may pass an NVIDIA GPU through without listing it in /sys/class/drm (the H200
     * machine): its driver's procfs still names it, and on a recorded tree that is all there is
     * (halo_machine_probe asks libcuda only on the live machine). */
    if (*probed && m->gpu_vendor == HALO_GPU_NONE && nvidia_model(root, model, sizeof model)) {
        m->gpu_vendor = HALO_GPU_NVIDIA;
        m->has_managed = true;
    }
    if (m->gpu_vendor == HALO_GPU_NVIDIA && nvidia_model(root, model, sizeof model)) {
        snprintf(m->gpu_name, sizeof m->gpu_name, "%.63s", model);
        for (size_t i = 0; i < sizeof nvidia_models / sizeof nvidia_models[0]; i++)
            if (strstr(model, nvidia_models[i].model)) {
                m->gpu_integrated = nvidia_models[i].mib == 0;
                m->vram_total = m->gpu_integrated ? m->host_total : nvidia_models[i].mib * HALO_MIB;
            }
        snprintf(m->description, sizeof m->description, "%.1f GiB RAM, %s",
                 (double)m->host_total / GIB, m->gpu_name);
    }
}

/* ---- pools --------------------------------------------------------------------------------- */

/* The kernel command line's value for a parameter ("amdgpu.gttsize"), or NULL. */
static const char *cmdline_param(const char *cmdline, const char *name, char *buf, size_t size) {
    size_t n = strlen(name);
    for (const char *p = cmdline; (p = strstr(p, name)); p += n) {
        if ((p != cmdline && p[-1] != ' ') || p[n] != '=') continue;
        snprintf(buf, size, "%.*s", (int)strcspn(p + n + 1, " \n"), p + n + 1);
        return buf;
    }
    return NULL;
}

void halo_doctor_pools(const char *root, const halo_machine *m, bool probed,
                       halo_doctor_report *r) {
    if (!probed) {
        halo_doctor_add(r, HALO_DOCTOR_UNKNOWN, "memory", NULL,
                        "host memory unknown: %s/proc/meminfo is unreadable", root);
        return;
    }
    halo_doctor_add(r, HALO_DOCTOR_INFO, "memory", NULL, "host RAM %.2f GiB, %.2f GiB available%s",
                    m->host_total / GIB, m->host_available / GIB,
                    m->cgroup_limit ? " (capped by the cgroup)" : "");
    char cmd[4096] = "", v[64];
    bool have_cmd = halo_doctor_read(root, "/proc/cmdline", cmd, sizeof cmd);
    if (m->gpu_vendor == HALO_GPU_NONE) {
        halo_doctor_add(r, HALO_DOCTOR_INFO, "memory", NULL,
                        "no GPU found: the CPU backend runs from host RAM");
        return;
    }
    if (m->gpu_vendor == HALO_GPU_NVIDIA) {
        if (m->vram_total)
            halo_doctor_add(r, HALO_DOCTOR_INFO, "memory", NULL, "%s: %.2f GiB %s", m->gpu_name,
                            m->vram_total / GIB,
                            m->gpu_integrated ? "unified with host memory" : "device memory");
        else
            halo_doctor_add(r, HALO_DOCTOR_UNKNOWN, "memory", NULL,
                            "%s: device memory unknown (read from the CUDA runtime once halo's "
                            "CUDA backend is built in)",
                            m->gpu_name);
        return;
    }
    if (m->gpu_vendor != HALO_GPU_AMD) return;
    long long gttsize = 0, pages = 0, pool = 0;
    bool have_gtt = read_i64(root, "/sys/module/amdgpu/parameters/gttsize", &gttsize);
    bool have_pages = read_i64(root, "/sys/module/ttm/parameters/pages_limit", &pages);
    bool have_pool = read_i64(root, "/sys/module/ttm/parameters/page_pool_size", &pool);
    uint64_t gtt = m->gtt_total;
    if (have_pages && pages > 0 && (uint64_t)pages * 4096 < gtt) gtt = (uint64_t)pages * 4096;
    halo_doctor_add(r, HALO_DOCTOR_INFO, "memory", NULL,
                    "%s: VRAM carve-out %.2f GiB (BIOS UMA frame buffer) + GTT %.2f GiB = GPU "
                    "pool %.2f GiB",
                    m->gpu_name, m->vram_total / GIB, gtt / GIB, (m->vram_total + gtt) / GIB);
    if (have_gtt)
        halo_doctor_add(r, HALO_DOCTOR_INFO, "memory", NULL, "amdgpu.gttsize = %lld%s", gttsize,
                        gttsize < 0 ? " (default: sized from ttm.pages_limit)" : " MiB");
    else
        halo_doctor_add(r, HALO_DOCTOR_UNKNOWN, "memory", NULL, "amdgpu.gttsize unknown");
    if (have_pages)
        halo_doctor_add(r, HALO_DOCTOR_INFO, "memory", NULL,
                        "ttm.pages_limit = %lld pages of 4 KiB = %.2f GiB", pages,
                        pages * 4096.0 / GIB);
    else
        halo_doctor_add(r, HALO_DOCTOR_UNKNOWN, "memory", NULL, "ttm.pages_limit unknown");
    if (have_pool)
        halo_doctor_add(r, HALO_DOCTOR_INFO, "memory", NULL,
                        "ttm.page_pool_size = %lld pages = %.2f GiB", pool, pool * 4096.0 / GIB);
    else
        halo_doctor_add(r, HALO_DOCTOR_UNKNOWN, "memory", NULL, "ttm.page_pool_size unknown");
    if (have_cmd) {
        char line[384] = "";
        size_t len = 0;
        static const char *const params[] = {"amdgpu.gttsize", "ttm.pages_limit",
                                             "ttm.page_pool_size", "amdttm.pages_limit"};
        for (size_t i = 0; i < 4; i++)
            if (cmdline_param(cmd, params[i], v, sizeof v))
                len += (size_t)snprintf(line + len, len < sizeof line ? sizeof line - len : 0,
                                        "%s%s=%s", len ? " " : "", params[i], v);
        halo_doctor_add(r, HALO_DOCTOR_INFO, "memory", NULL, "kernel command line: %s",
                        line[0] ? line : "no GPU memory parameters (stock)");
    } else {
        halo_doctor_add(r, HALO_DOCTOR_UNKNOWN, "memory", NULL, "kernel command line unknown");
    }
    /* The GPU can address a pool far below the RAM: the seeds' stock Strix Halo (62.5 GiB of
     * 128 GB). The ceiling leaves the OS 4 GiB, as halo plan's fixes do. */
    if (m->gpu_integrated && m->host_total > 8 * HALO_GIB &&
        m->vram_total + gtt < m->host_total * 3 / 4) {
        uint64_t g = (m->host_total - 4 * HALO_GIB) / HALO_GIB * HALO_GIB;
        char fix[384];
        snprintf(fix, sizeof fix,
                 "to let the GPU address up to %.0f GiB, boot with amdgpu.gttsize=%llu "
                 "ttm.pages_limit=%llu ttm.page_pool_size=%llu (the model lines below give the "
                 "least that fits a model)",
                 g / GIB, (unsigned long long)(g / HALO_MIB), (unsigned long long)(g / 4096),
                 (unsigned long long)(g / 4096));
        halo_doctor_add(r, HALO_DOCTOR_WARN, "memory", fix,
                        "the GPU addresses %.2f GiB of %.2f GiB RAM: larger models are placed "
                        "in GPU-visible host memory instead (slower on an APU)",
                        (m->vram_total + gtt) / GIB, m->host_total / GIB);
    }
    if (have_pages && have_pool && pool < pages)
        halo_doctor_add(r, HALO_DOCTOR_INFO, "memory", NULL,
                        "ttm.page_pool_size (%lld) is below ttm.pages_limit (%lld): fewer freed "
                        "pages are kept for reuse (the seeds set both to the same value)",
                        pool, pages);
}

/* ---- traps --------------------------------------------------------------------------------- */

void halo_doctor_traps(const char *root, const halo_machine *m, bool probed,
                       halo_doctor_report *r) {
    char text[8192], buf[256];
    bool mi = halo_doctor_read(root, "/proc/meminfo", text, sizeof text);
    uint64_t swap_total = 0, swap_free = 0, cached = 0, shmem = 0, commit = 0;
    if (mi && meminfo(text, "SwapTotal", &swap_total)) {
        meminfo(text, "SwapFree", &swap_free);
        if (!swap_total)
            halo_doctor_add(r, HALO_DOCTOR_OK, "traps", NULL, "swap: none");
        else if (swap_total > swap_free)
            halo_doctor_add(r, HALO_DOCTOR_WARN, "traps",
                            "on a machine that runs one large model, turn swap off (sudo swapoff "
                            "-a) so an oversized load fails at once instead of thrashing",
                            "swap: %.2f GiB, %.2f GiB in use: memory was short enough to page out",
                            swap_total / GIB, (swap_total - swap_free) / GIB);
        else
            halo_doctor_add(r, HALO_DOCTOR_INFO, "traps", NULL,
                            "swap: %.2f GiB, unused (weights in GPU-visible memory are pinned and "
                            "never swap)",
                            swap_total / GIB);
    } else {
        halo_doctor_add(r, HALO_DOCTOR_UNKNOWN, "traps", NULL, "swap unknown");
    }
    if (halo_doctor_read(root, "/sys/kernel/mm/transparent_hugepage/enabled", buf, sizeof buf) &&
        strchr(buf, '[')) {
        if (strstr(buf, "[never]"))
            halo_doctor_add(r, HALO_DOCTOR_WARN, "traps",
                            "echo madvise | sudo tee /sys/kernel/mm/transparent_hugepage/enabled",
                            "transparent huge pages: never (halo asks for them on its weight "
                            "arena: fewer TLB misses)");
        else if (strstr(buf, "[always]"))
            halo_doctor_add(r, HALO_DOCTOR_INFO, "traps", NULL,
                            "transparent huge pages: always (fine; madvise is enough for halo)");
        else
            halo_doctor_add(r, HALO_DOCTOR_OK, "traps", NULL, "transparent huge pages: %s", buf);
    } else {
        halo_doctor_add(r, HALO_DOCTOR_UNKNOWN, "traps", NULL, "transparent huge pages unknown");
    }
    long long oc = -1;
    if (read_i64(root, "/proc/sys/vm/overcommit_memory", &oc)) {
        if (oc == 2 && mi && meminfo(text, "CommitLimit", &commit))
            halo_doctor_add(r, HALO_DOCTOR_WARN, "traps", "sudo sysctl vm.overcommit_memory=0",
                            "vm.overcommit_memory = 2 (strict): every allocation counts against "
                            "CommitLimit %.2f GiB, whether touched or not",
                            commit / GIB);
        else
            halo_doctor_add(r, oc == 2 ? HALO_DOCTOR_WARN : HALO_DOCTOR_OK, "traps",
                            oc == 2 ? "sudo sysctl vm.overcommit_memory=0" : NULL,
                            "vm.overcommit_memory = %lld%s", oc,
                            oc == 0   ? " (heuristic)"
                            : oc == 1 ? " (always)"
                                      : " (strict)");
    } else {
        halo_doctor_add(r, HALO_DOCTOR_UNKNOWN, "traps", NULL, "vm.overcommit_memory unknown");
    }
    /* IOMMU: the group type says translated (DMA, DMA-FQ) or passthrough (identity). */
    char cmd[4096] = "";
    bool have_cmd = halo_doctor_read(root, "/proc/cmdline", cmd, sizeof cmd);
    if (halo_doctor_read(root, "/sys/kernel/iommu_groups/0/type", buf, sizeof buf))
        halo_doctor_add(r, HALO_DOCTOR_INFO, "traps", NULL, "IOMMU: on, %s mode", buf);
    else if (have_cmd)
        halo_doctor_add(r, HALO_DOCTOR_INFO, "traps", NULL, "IOMMU: no groups (off or absent)");
    else
        halo_doctor_add(r, HALO_DOCTOR_UNKNOWN, "traps", NULL, "IOMMU mode unknown");
    if (have_cmd && m->gpu_vendor == HALO_GPU_AMD && strstr(cmd, "amd_iommu=off"))
        halo_doctor_add(r, HALO_DOCTOR_WARN, "traps",
                        "remove amd_iommu=off from the kernel command line (AMD's checklist for "
                        "gfx1151 memory access faults, ROCm/legacy-rocm-build#5824)",
                        "the kernel runs with amd_iommu=off, which ROCm on Strix Halo does not "
                        "expect");
    /* Page cache: on unified memory, pages cached from a model read through mmap are counted
     * against the GPU pool on top of the weights (seeds/004: "-mmp 0 is not optional"). */
    if (mi && meminfo(text, "Cached", &cached)) {
        meminfo(text, "Shmem", &shmem);
        uint64_t pc = cached > shmem ? cached - shmem : 0;
        bool big = probed && m->host_total && pc > m->host_total / 10;
        halo_doctor_add(r, big && m->gpu_integrated ? HALO_DOCTOR_WARN : HALO_DOCTOR_INFO, "traps",
                        big && m->gpu_integrated
                            ? "sync; echo 1 | sudo tee /proc/sys/vm/drop_caches (halo reads "
                              "weights with O_DIRECT; give llama.cpp --no-mmap)"
                            : NULL,
                        "page cache held: %.2f GiB%s", pc / GIB,
                        big && m->gpu_integrated
                            ? ": on unified memory a model read through mmap is counted twice "
                              "against the GPU pool"
                            : "");
    } else {
        halo_doctor_add(r, HALO_DOCTOR_UNKNOWN, "traps", NULL, "page cache unknown");
    }
}

/* ---- drivers and firmware ------------------------------------------------------------------ */

/* Versions known to break this model's runs, one table. Each entry names its reference. */
typedef struct known_bad {
    halo_doctor_level level;
    const char *component; /* "mes_fw", "rocm", "nvidia" */
    uint32_t amd_device;   /* PCI device id it applies to; 0 = any */
    long long below;       /* bad when the version is below this (major*10000+minor*100+patch) */
    long long equal;       /* or equal to this; -1 = unused */
    const char *what, *fix, *ref;
} known_bad;

static const known_bad known_bad_table[] = {
    {HALO_DOCTOR_FAIL, "mes_fw", 0x1586, -1, 0x83,
     "MES firmware 0x83 on Strix Halo: GPU hangs and memory access faults under ROCm compute",
     "roll linux-firmware (amd-gpu-firmware) back to 20251111, or update past the revert",
     "ROCm/legacy-rocm-build#5724; linux-firmware commit 3d5c8135 reverted it for gfx1150"},
    {HALO_DOCTOR_FAIL, "rocm", 0x1586, 60400, -1,
     "ROCm before 6.4 has no gfx1151 (Strix Halo) support",
     "install ROCm 6.4 or later (docs/hip.md)",
     "halo issue 11 (HIP build); ROCm/legacy-rocm-build#5339"},
    /* a warning: halo's own CUDA build may target an older toolkit */
    {HALO_DOCTOR_WARN, "nvidia", 0, 5800000, -1,
     "NVIDIA driver before 580: CUDA 13 runtimes (llama.cpp's prebuilt CUDA build, GB10's "
     "sm_121) do not load",
     "install driver 580 or later", "CUDA 13.0 release notes: minimum driver 580"},
};

/* "6.4.1" -> 60401; "580.95.05" -> 5809505. */
static long long version_number(const char *s) {
    long long a = 0, b = 0, c = 0;
    if (sscanf(s, "%lld.%lld.%lld", &a, &b, &c) < 1) return -1;
    return a * 10000 + b * 100 + c;
}

static void check_known_bad(const char *component, uint32_t device, long long v,
                            halo_doctor_report *r) {
    for (size_t i = 0; i < sizeof known_bad_table / sizeof known_bad_table[0]; i++) {
        const known_bad *k = &known_bad_table[i];
        if (strcmp(k->component, component) || (k->amd_device && k->amd_device != device)) continue;
        if ((k->below >= 0 && v < k->below) || (k->equal >= 0 && v == k->equal)) {
            char fix[384];
            snprintf(fix, sizeof fix, "%s (%s)", k->fix, k->ref);
            halo_doctor_add(r, k->level, "drivers", fix, "known bad: %s", k->what);
        }
    }
}

/* The first AMD card's directory name ("card1"), or false. */
static bool amd_card(const char *root, char *out, size_t size) {
    char dir[600];
    snprintf(dir, sizeof dir, "%s/sys/class/drm", strcmp(root, "/") ? root : "");
    DIR *d = opendir(dir);
    if (!d) return false;
    struct dirent *e;
    bool found = false;
    char best[64] = "";
    while ((e = readdir(d))) {
        const char *s = e->d_name;
        if (strncmp(s, "card", 4) || !isdigit((unsigned char)s[4]) ||
            strspn(s + 4, "0123456789") != strlen(s + 4))
            continue;
        char path[400], v[32];
        snprintf(path, sizeof path, "/sys/class/drm/%.60s/device/vendor", s);
        if (halo_doctor_read(root, path, v, sizeof v) && !strcmp(v, "0x1002") &&
            (!found || strcmp(s, best) < 0)) {
            snprintf(best, sizeof best, "%.60s", s);
            found = true;
        }
    }
    closedir(d);
    if (found) snprintf(out, size, "%s", best);
    return found;
}

/* A Debian package's version from dpkg's status file. */
static bool dpkg_version(const char *root, const char *pkg, char *out, size_t size) {
    char full[700];
    snprintf(full, sizeof full, "%s/var/lib/dpkg/status", strcmp(root, "/") ? root : "");
    FILE *f = fopen(full, "r");
    if (!f) return false;
    char line[512];
    bool in = false, found = false;
    while (!found && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        if (!strncmp(line, "Package: ", 9)) in = !strcmp(line + 9, pkg);
        if (in && !strncmp(line, "Version: ", 9)) {
            snprintf(out, size, "%.100s", line + 9);
            found = true;
        }
    }
    fclose(f);
    return found;
}

void halo_doctor_drivers(const char *root, const halo_machine *m, halo_doctor_report *r) {
    char buf[512], v[128];
    if (halo_doctor_read(root, "/proc/sys/kernel/osrelease", buf, sizeof buf))
        halo_doctor_add(r, HALO_DOCTOR_INFO, "drivers", NULL, "kernel %s", buf);
    else if (halo_doctor_read(root, "/proc/version", buf, sizeof buf) &&
             sscanf(buf, "Linux version %127s", v) == 1)
        halo_doctor_add(r, HALO_DOCTOR_INFO, "drivers", NULL, "kernel %s", v);
    else
        halo_doctor_add(r, HALO_DOCTOR_UNKNOWN, "drivers", NULL, "kernel version unknown");
    char card[64];
    if (m->gpu_vendor == HALO_GPU_AMD && amd_card(root, card, sizeof card)) {
        static const char *const fws[] = {"mes", "mec", "sos", "smc", "rlc", "vcn"};
        char line[384] = "";
        size_t len = 0;
        for (size_t i = 0; i < 6; i++) {
            char path[256];
            snprintf(path, sizeof path, "/sys/class/drm/%s/device/fw_version/%s_fw_version", card,
                     fws[i]);
            if (!halo_doctor_read(root, path, v, sizeof v)) continue;
            len += (size_t)snprintf(line + len, len < sizeof line ? sizeof line - len : 0,
                                    "%s%s %s", len ? ", " : "", fws[i], v);
            if (!strcmp(fws[i], "mes"))
                check_known_bad("mes_fw", m->gpu_pci_device, strtoll(v, NULL, 0), r);
        }
        if (line[0])
            halo_doctor_add(r, HALO_DOCTOR_INFO, "drivers", NULL, "amdgpu firmware: %s", line);
        else
            halo_doctor_add(r, HALO_DOCTOR_UNKNOWN, "drivers", NULL,
                            "amdgpu firmware versions unknown (no fw_version in sysfs)");
        if (halo_doctor_read(root, "/opt/rocm/.info/version", v, sizeof v)) {
            halo_doctor_add(r, HALO_DOCTOR_INFO, "drivers", NULL, "ROCm %s", v);
            check_known_bad("rocm", m->gpu_pci_device, version_number(v), r);
        } else {
            halo_doctor_add(r, HALO_DOCTOR_UNKNOWN, "drivers", NULL,
                            "ROCm version unknown (no /opt/rocm/.info/version)");
        }
        if (dpkg_version(root, "mesa-vulkan-drivers", v, sizeof v))
            halo_doctor_add(r, HALO_DOCTOR_INFO, "drivers", NULL, "Mesa (Vulkan) %s", v);
        else
            halo_doctor_add(r, HALO_DOCTOR_UNKNOWN, "drivers", NULL,
                            "Mesa version unknown (no Debian package record)");
    }
    if (m->gpu_vendor == HALO_GPU_NVIDIA) {
        if (halo_doctor_read(root, "/proc/driver/nvidia/version", buf, sizeof buf)) {
            /* "NVRM version: NVIDIA UNIX ... Kernel Module  580.95.05  Release Build ..." */
            const char *p = buf;
            v[0] = 0;
            while (*p) {
                while (*p == ' ' || *p == '\t')
                    p++;
                size_t n = strcspn(p, " \t\n");
                if (n && n < sizeof v && isdigit((unsigned char)p[0]) && memchr(p, '.', n)) {
                    snprintf(v, sizeof v, "%.*s", (int)n, p);
                    break;
                }
                p += n;
                if (*p == '\n') break;
            }
            if (v[0]) {
                halo_doctor_add(r, HALO_DOCTOR_INFO, "drivers", NULL, "NVIDIA driver %s", v);
                check_known_bad("nvidia", 0, version_number(v), r);
            } else {
                halo_doctor_add(r, HALO_DOCTOR_UNKNOWN, "drivers", NULL,
                                "NVIDIA driver version unknown");
            }
        } else {
            halo_doctor_add(r, HALO_DOCTOR_UNKNOWN, "drivers", NULL,
                            "NVIDIA driver version unknown (no /proc/driver/nvidia/version)");
        }
    }
}
