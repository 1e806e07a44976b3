/* `halo doctor`'s probes: what on this machine limits running a model, read from files under a
 * root directory ("/" for the machine itself; tests point it at recorded trees in
 * tests/data/doctor/). Every probe degrades to "unknown" when a file is missing or unreadable;
 * none fails. docs/doctor.md lists every file and every rule. */
#ifndef HALO_MEM_DOCTOR_H
#define HALO_MEM_DOCTOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "halo/gguf.h"
#include "halo/plan.h"

typedef enum halo_doctor_level {
    HALO_DOCTOR_OK = 0,
    HALO_DOCTOR_INFO,
    HALO_DOCTOR_UNKNOWN, /* a file could not be read */
    HALO_DOCTOR_WARN,    /* works, but slower or fragile: the fix says how to do better */
    HALO_DOCTOR_FAIL,    /* stops the model from running here */
} halo_doctor_level;

#define HALO_DOCTOR_MAX_ITEMS 96

typedef struct halo_doctor_item {
    halo_doctor_level level;
    char section[16]; /* "memory", "model", "traps", "drivers", "disk", "gpu-log" */
    char text[384];
    char fix[384]; /* "" when there is nothing to do */
} halo_doctor_item;

typedef struct halo_doctor_report {
    halo_doctor_item items[HALO_DOCTOR_MAX_ITEMS];
    size_t n;
} halo_doctor_report;

/* Appends an item (dropped when the report is full). */
void halo_doctor_add(halo_doctor_report *r, halo_doctor_level level, const char *section,
                     const char *fix, const char *fmt, ...) __attribute__((format(printf, 5, 6)));

const char *halo_doctor_level_name(halo_doctor_level level); /* "ok", "warn", ... */

/* Reads a small file under root (NUL-terminated, trailing whitespace cut); false when absent or
 * unreadable. */
bool halo_doctor_read(const char *root, const char *path, char *buf, size_t size);

/* The machine: halo_machine_probe plus what sysfs does not give the probe (NVIDIA GPUs from
 * /proc/driver/nvidia: model name and, for the models in doctor_system.c's table, memory).
 * *probed is false when even /proc/meminfo was unreadable (m then holds zeros). */
void halo_doctor_machine(const char *root, const char *model_path, halo_machine *m, bool *probed);

/* GPU memory pools and their kernel parameters (carve-out, GTT, amdgpu.gttsize, ttm.pages_limit,
 * ttm.page_pool_size, the kernel command line). */
void halo_doctor_pools(const char *root, const halo_machine *m, bool probed, halo_doctor_report *r);

/* Unified-memory traps: swap, transparent huge pages, vm.overcommit, IOMMU mode, page cache. */
void halo_doctor_traps(const char *root, const halo_machine *m, bool probed, halo_doctor_report *r);

/* Kernel, amdgpu firmware, NVIDIA driver, ROCm and Mesa versions, against the known-bad table. */
void halo_doctor_drivers(const char *root, const halo_machine *m, halo_doctor_report *r);

/* Whether the model fits and where: plans with the machine's GPU backend (or the CPU), weights
 * in GPU memory first, then as halo would place them; the kernel command line that would fit. */
void halo_doctor_model(const halo_gguf *g, const char *model_path, const halo_machine *m,
                       bool probed, uint64_t n_ctx, halo_doctor_report *r);

/* ---- kernel log -------------------------------------------------------------------------- */

typedef enum halo_gpu_event_kind {
    HALO_GPU_RING_TIMEOUT = 0, /* amdgpu: ring X timeout (the 10 s compute-ring watchdog) */
    HALO_GPU_RING_RESET,       /* amdgpu: Starting X ring reset / GPU reset */
    HALO_GPU_WEDGED,           /* [drm] device wedged */
    HALO_GPU_PAGE_FAULT,       /* amdgpu [gfxhub] page fault / GCVM_L2_PROTECTION_FAULT */
    HALO_GPU_XID,              /* NVRM: Xid */
    HALO_GPU_EVENT_COUNT
} halo_gpu_event_kind;

typedef struct halo_gpu_event {
    halo_gpu_event_kind kind;
    char time[48];     /* as the log gives it: "1234.567890 s after boot" or the syslog stamp */
    char line[320];    /* the message */
    char meaning[200]; /* what it means for a run, and what to do */
} halo_gpu_event;

/* Scans kernel log text, kmsg records ("6,1234,5678901,-;amdgpu: ...") or syslog/dmesg lines,
 * calling fn for every GPU fault or reset. Returns the number of events. */
typedef void (*halo_gpu_event_fn)(const halo_gpu_event *ev, void *user);
size_t halo_doctor_scan_klog(const char *text, size_t len, halo_gpu_event_fn fn, void *user);

/* Where the kernel log is under root: dev/kmsg, else var/log/kern.log, else var/log/dmesg.
 * Writes the path into buf; false when none is readable. */
bool halo_doctor_klog_path(const char *root, char *buf, size_t size);

#endif
