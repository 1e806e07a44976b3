/* The machine's memory pools, read from the kernel. Every path is read under a root directory
 * so tests can point the probe at a fake tree (tests/data/sysfs/). Sources:
 *   /proc/meminfo                      MemTotal, MemAvailable, HugePages_Free, Hugepagesize
 *   /proc/self/cgroup + /sys/fs/cgroup  cgroup v2 memory.max / memory.current, leaf to root
 *   /sys/class/drm/cardN/device/       vendor, device, mem_info_{vram,gtt}_{total,used}
 *                                      (amdgpu's sysfs, Documentation/gpu/amdgpu/driver-misc)
 *   /sys/module/ttm/parameters/pages_limit   the TTM page limit that caps GTT (4 KiB pages)
 *   /sys/dev/block/MAJ:MIN/            the model file's block device: nvme / rotational
 * NVIDIA GPUs come from the CUDA driver (probe_cuda.c: dlopen of libcuda.so.1), on the real
 * machine only (root "/"); without a driver a GPU seen in sysfs is reported without sizes. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>
#include <sys/mman.h>

#include "core/error.h"
#include "halo/plan.h"
#include "mem/mem.h"

#define PAGE_4K 4096u

/* Reads a small file under root into buf (NUL-terminated, trailing whitespace cut). */
static bool read_text(const char *root, const char *path, char *buf, size_t size) {
    char full[1024];
    snprintf(full, sizeof full, "%s%s", strcmp(root, "/") == 0 ? "" : root, path);
    FILE *f = fopen(full, "r");
    if (!f) return false;
    size_t n = fread(buf, 1, size - 1, f);
    fclose(f);
    buf[n] = 0;
    while (n > 0 && isspace((unsigned char)buf[n - 1]))
        buf[--n] = 0;
    return true;
}

static bool read_u64(const char *root, const char *path, uint64_t *out) {
    char buf[64], *end;
    if (!read_text(root, path, buf, sizeof buf)) return false;
    errno = 0;
    unsigned long long v = strtoull(buf, &end, 0);
    if (errno || end == buf || *end) return false;
    *out = v;
    return true;
}

/* A "Key:   N kB" line of /proc/meminfo, in bytes. */
static bool meminfo_get(const char *text, const char *key, uint64_t *out) {
    size_t n = strlen(key);
    for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
        if (strncmp(p, key, n) != 0 || p[n] != ':') continue;
        char *end;
        unsigned long long v = strtoull(p + n + 1, &end, 10);
        while (*end == ' ')
            end++;
        *out = strncmp(end, "kB", 2) == 0 ? (uint64_t)v * 1024 : (uint64_t)v;
        return true;
    }
    return false;
}

static halo_status probe_host(const char *root, halo_machine *m, halo_error *err) {
    char text[8192];
    if (!read_text(root, "/proc/meminfo", text, sizeof text))
        return halo_fail(err, HALO_E_IO, "%s/proc/meminfo: cannot read", root);
    if (!meminfo_get(text, "MemTotal", &m->host_total))
        return halo_fail(err, HALO_E_BAD_VALUE, "%s/proc/meminfo: no MemTotal line", root);
    if (!meminfo_get(text, "MemAvailable", &m->host_available)) m->host_available = m->host_total;
    uint64_t pages = 0;
    if (meminfo_get(text, "HugePages_Free", &pages) &&
        meminfo_get(text, "Hugepagesize", &m->hugepage_size))
        m->hugepages_free = pages;
    return HALO_OK;
}

/* cgroup v2: the tightest memory.max from our cgroup up to the root, less what is in use. */
static void probe_cgroup(const char *root, halo_machine *m) {
    char text[1024];
    if (!read_text(root, "/proc/self/cgroup", text, sizeof text)) return;
    char *line = strstr(text, "0::");
    if (!line) return;
    char path[512];
    snprintf(path, sizeof path, "%s", line + 3);
    path[strcspn(path, "\n")] = 0;
    for (;;) {
        char file[700], buf[64];
        snprintf(file, sizeof file, "/sys/fs/cgroup%s/memory.max",
                 strcmp(path, "/") == 0 ? "" : path);
        uint64_t limit = 0, used = 0;
        if (read_text(root, file, buf, sizeof buf) && strcmp(buf, "max") != 0 &&
            read_u64(root, file, &limit)) {
            snprintf(file, sizeof file, "/sys/fs/cgroup%s/memory.current",
                     strcmp(path, "/") == 0 ? "" : path);
            read_u64(root, file, &used);
            if (!m->cgroup_limit || limit < m->cgroup_limit) m->cgroup_limit = limit;
            uint64_t left = limit > used ? limit - used : 0;
            if (left < m->host_available) m->host_available = left;
        }
        char *slash = strrchr(path, '/');
        if (!slash || slash == path) {
            if (strcmp(path, "/") == 0) break;
            strcpy(path, "/");
            continue;
        }
        *slash = 0;
    }
}

/* AMD integrated GPUs by PCI device id (pci.ids, amdgpu's amdgpu_drv.c). Anything not listed
 * whose VRAM is under 2 GiB while GTT is larger is also taken as integrated: discrete Radeons
 * have at least 4 GiB. */
static const struct {
    uint32_t id;
    const char *name;
} amd_apus[] = {
    {0x1586, "Radeon 8050S/8060S (Strix Halo, gfx1151)"},
    {0x150e, "Radeon 880M/890M (Strix Point, gfx1150)"},
    {0x1114, "Radeon 860M (Krackan Point, gfx1152)"},
    {0x15bf, "Radeon 780M (Phoenix, gfx1103)"},
    {0x15c8, "Radeon 740M (Phoenix2, gfx1103)"},
    {0x1681, "Radeon 680M (Rembrandt, gfx1035)"},
    {0x164e, "Radeon Graphics (Raphael, gfx1036)"},
    {0x13c0, "Radeon Graphics (Granite Ridge, gfx1036)"},
    {0x1638, "Radeon Vega (Cezanne, gfx90c)"},
    {0x1636, "Radeon Vega (Renoir, gfx90c)"},
    {0x15d8, "Radeon Vega (Picasso, gfx902)"},
    {0x15dd, "Radeon Vega (Raven, gfx902)"},
    {0x163f, "Radeon (Van Gogh, gfx1033)"},
};

static int card_cmp(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void probe_amd(const char *root, const char *card, halo_machine *m) {
    char path[512];
    uint64_t dev = 0;
    snprintf(path, sizeof path, "/sys/class/drm/%s/device/device", card);
    read_u64(root, path, &dev);
    m->gpu_vendor = HALO_GPU_AMD;
    m->gpu_pci_device = (uint32_t)dev;
    m->has_managed = true;
    static const char *fields[] = {"vram_total", "vram_used", "gtt_total", "gtt_used"};
    uint64_t *dst[] = {&m->vram_total, &m->vram_used, &m->gtt_total, &m->gtt_used};
    for (size_t i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "/sys/class/drm/%s/device/mem_info_%s", card, fields[i]);
        read_u64(root, path, dst[i]);
    }
    snprintf(m->gpu_name, sizeof m->gpu_name, "AMD GPU 0x%04x", (unsigned)dev);
    for (size_t i = 0; i < sizeof amd_apus / sizeof amd_apus[0]; i++)
        if (amd_apus[i].id == dev) {
            snprintf(m->gpu_name, sizeof m->gpu_name, "AMD %s", amd_apus[i].name);
            m->gpu_integrated = true;
        }
    if (!m->gpu_integrated && m->vram_total < 2 * HALO_GIB && m->gtt_total > m->vram_total)
        m->gpu_integrated = true;
    read_u64(root, "/sys/module/ttm/parameters/pages_limit", &m->ttm_pages_limit);
}

/* The first AMD card wins over an NVIDIA one: only AMD exposes its pools in sysfs. */
static void probe_gpus(const char *root, halo_machine *m) {
    char dir[600];
    snprintf(dir, sizeof dir, "%s/sys/class/drm", strcmp(root, "/") == 0 ? "" : root);
    DIR *d = opendir(dir);
    if (!d) return;
    char *cards[64];
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < 64) {
        const char *s = e->d_name;
        if (strncmp(s, "card", 4) != 0 || !isdigit((unsigned char)s[4])) continue;
        if (strspn(s + 4, "0123456789") != strlen(s + 4)) continue; /* card0-DP-1: a connector */
        cards[n] = strdup(s);
        if (cards[n]) n++;
    }
    closedir(d);
    qsort(cards, n, sizeof *cards, card_cmp);
    bool nvidia = false;
    for (size_t i = 0; i < n; i++) {
        char path[512];
        uint64_t vendor = 0;
        snprintf(path, sizeof path, "/sys/class/drm/%s/device/vendor", cards[i]);
        if (!read_u64(root, path, &vendor)) continue;
        if (vendor == 0x1002 && m->gpu_vendor != HALO_GPU_AMD) probe_amd(root, cards[i], m);
        if (vendor == 0x10de) nvidia = true;
    }
    if (nvidia && m->gpu_vendor == HALO_GPU_NONE) {
        m->gpu_vendor = HALO_GPU_NVIDIA;
        m->has_managed = true;
        snprintf(m->gpu_name, sizeof m->gpu_name,
                 "NVIDIA GPU (sizes need the CUDA backend: use --profile)");
    }
    for (size_t i = 0; i < n; i++)
        free(cards[i]);
}

/* Filesystem and device class of the model file, with a read-speed estimate per class
 * (conservative sequential figures: PCIe 4 NVMe 3 GB/s, SATA SSD 0.5, disk 0.15). */
static void probe_disk(const char *root, const char *model_path, halo_machine *m) {
    snprintf(m->disk_kind, sizeof m->disk_kind, "unknown");
    m->disk_read_gbs = 1.0;
    m->disk_read_estimated = true;
    if (!model_path) return;
    struct statfs fs;
    if (statfs(model_path, &fs) == 0) {
        static const struct {
            unsigned long magic;
            const char *name;
        } names[] = {{0xEF53, "ext4"},      {0x58465342, "xfs"},  {0x9123683E, "btrfs"},
                     {0x01021994, "tmpfs"}, {0x6969, "nfs"},      {0x794c7630, "overlay"},
                     {0x2fc12fc1, "zfs"},   {0xF2F52010, "f2fs"}, {0x4d44, "vfat"},
                     {0x5346544e, "ntfs"},  {0x65735546, "fuse"}};
        snprintf(m->disk_fs, sizeof m->disk_fs, "0x%lx", (unsigned long)fs.f_type);
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
            if ((unsigned long)fs.f_type == names[i].magic)
                snprintf(m->disk_fs, sizeof m->disk_fs, "%s", names[i].name);
        if (strcmp(m->disk_fs, "tmpfs") == 0) {
            snprintf(m->disk_kind, sizeof m->disk_kind, "memory");
            m->disk_read_gbs = 10.0;
            return;
        }
    }
    struct stat st;
    if (stat(model_path, &st) != 0) return;
    char path[128], buf[600];
    uint64_t rot = 0;
    /* A partition's sysfs dir has a `partition` file; its queue/ lives in the parent. */
    snprintf(path, sizeof path, "/sys/dev/block/%u:%u/partition", major(st.st_dev),
             minor(st.st_dev));
    bool part = read_text(root, path, buf, sizeof buf);
    snprintf(path, sizeof path, "/sys/dev/block/%u:%u/%squeue/rotational", major(st.st_dev),
             minor(st.st_dev), part ? "../" : "");
    if (!read_u64(root, path, &rot)) return;
    snprintf(path, sizeof path, "/sys/dev/block/%u:%u/%suevent", major(st.st_dev), minor(st.st_dev),
             part ? "../" : "");
    bool nvme = read_text(root, path, buf, sizeof buf) && strstr(buf, "DEVNAME=nvme");
    snprintf(m->disk_kind, sizeof m->disk_kind, "%s", nvme ? "nvme" : rot ? "hdd" : "ssd");
    m->disk_read_gbs = nvme ? 3.0 : rot ? 0.15 : 0.5;
}

halo_status halo_machine_probe(const char *root, const char *model_path, halo_machine *m,
                               halo_error *err) {
    if (!root || !*root) root = "/";
    memset(m, 0, sizeof *m);
    snprintf(m->name, sizeof m->name, "probed");
    snprintf(m->source, sizeof m->source, "probe of %s", root);
    halo_status st = probe_host(root, m, err);
    if (st != HALO_OK) return st;
    probe_cgroup(root, m);
    probe_gpus(root, m);
    /* An AMD GPU's pools come from sysfs; an NVIDIA GPU's from its driver (also when sysfs
     * does not list it, as in some VMs). Only on the real machine, not a test's fake tree. */
    if (strcmp(root, "/") == 0 && m->gpu_vendor != HALO_GPU_AMD) halo_mem_probe_cuda(m);
    probe_disk(root, model_path, m);
    snprintf(m->description, sizeof m->description, "%.1f GiB RAM%s%s",
             (double)m->host_total / (double)HALO_GIB, m->gpu_vendor ? ", " : "",
             m->gpu_vendor ? m->gpu_name : "");
    return HALO_OK;
}

halo_status halo_machine_measure_disk(const char *path, halo_machine *m, halo_error *err) {
    enum { READS = 8 };
    const size_t len = (size_t)16 << 20;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_DIRECT);
    if (fd < 0) fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return halo_fail(err, HALO_E_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    void *buf = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (fstat(fd, &st) != 0 || buf == MAP_FAILED) {
        if (buf != MAP_FAILED) munmap(buf, len);
        close(fd);
        return halo_fail(err, HALO_E_IO, "%s: cannot measure: %s", path, strerror(errno));
    }
    uint64_t size = (uint64_t)st.st_size, total = 0;
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED); /* cold reads, also without O_DIRECT */
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (uint64_t i = 0; i < READS && size > len; i++) {
        uint64_t off = (size - len) / READS * i / 4096 * 4096;
        ssize_t n = pread(fd, buf, len, (off_t)off);
        if (n <= 0) break;
        total += (uint64_t)n;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    munmap(buf, len);
    close(fd);
    double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    if (total == 0 || s <= 0)
        return halo_fail(err, HALO_E_IO, "%s: too small or unreadable to measure", path);
    m->disk_read_gbs = (double)total / s / 1e9;
    m->disk_read_estimated = false;
    return HALO_OK;
}
