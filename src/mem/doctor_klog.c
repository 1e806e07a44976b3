/* GPU faults and resets in the kernel log, with their time and what they mean for a run.
 * Signatures (the messages as the drivers print them):
 *   amdgpu watchdog   "amdgpu: ring comp_1.1.1 timeout, signaled seq=7906, emitted seq=7907"
 *                     "amdgpu: Starting comp_1.1.1 ring reset"
 *                     "amdgpu: [drm] device wedged, but no recovery needed"   (seeds/004)
 *   amdgpu reset      "amdgpu: GPU reset begin!", "MES failed to respond to msg=..."
 *   amdgpu VM fault   "amdgpu: [gfxhub] page fault (src_id:0 ring:40 vmid:8 pasid:32771)"
 *                     followed by "GCVM_L2_PROTECTION_FAULT_STATUS:0x..." (one event)
 *   NVIDIA Xid        "NVRM: Xid (PCI:0000:01:00): 79, pid=..., GPU has fallen off the bus."
 * Lines come as kmsg records ("6,1234,5678901,-;text"), dmesg ("[ 1234.567890] text") or
 * syslog ("Nov 30 12:00:01 host kernel: text", or an ISO 8601 stamp). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mem/doctor.h"

/* NVIDIA's Xid catalogue (docs.nvidia.com/deploy/xid-errors), the codes a compute run meets. */
static const struct {
    int xid;
    const char *meaning;
} xids[] = {
    {13, "graphics engine exception: often an out-of-range access inside a kernel"},
    {31, "GPU memory page fault: a kernel touched an address it does not own"},
    {43, "GPU stopped processing: the faulting context was killed"},
    {45, "preemptive cleanup after an earlier error"},
    {48, "double-bit ECC error: the memory gave wrong data; the GPU needs a reset"},
    {63, "ECC page retirement or row remapping recorded"},
    {64, "ECC page retirement or row remapping failed"},
    {74, "NVLink error"},
    {79, "GPU has fallen off the bus: power, PCIe or thermal; the machine needs attention"},
    {92, "high single-bit ECC error rate"},
    {94, "contained ECC error: only the affected context was stopped"},
    {95, "uncontained ECC error: every context on the GPU was stopped"},
    {109, "context switch timeout"},
    {119, "GSP RPC timeout: the GPU firmware stopped answering"},
    {120, "GSP error"},
};

static const char *const amd_meaning[HALO_GPU_EVENT_COUNT] = {
    [HALO_GPU_RING_TIMEOUT] = "a GPU submission ran past the driver's timeout (10 s on compute "
                              "rings): one op too slow at this depth; the context is killed",
    [HALO_GPU_RING_RESET] = "the GPU (or a ring) was reset: every job on it was lost",
    [HALO_GPU_WEDGED] = "the driver gave up on the device state: programs using the GPU must "
                        "restart",
    [HALO_GPU_PAGE_FAULT] = "the GPU accessed an unmapped address: an out-of-range read in a "
                            "kernel, or memory freed under a running job",
};

/* Splits a log line into its time and message. */
static void split_line(const char *line, char *time, size_t tsize, const char **msg) {
    time[0] = 0;
    *msg = line;
    unsigned pri;
    unsigned long long seq, usec;
    int n = 0;
    if (sscanf(line, "%u,%llu,%llu,%*[^;];%n", &pri, &seq, &usec, &n) == 3 && n > 0) {
        snprintf(time, tsize, "%.6f s after boot", (double)usec / 1e6);
        *msg = line + n;
        return;
    }
    double t;
    if (line[0] == '[' && sscanf(line, "[%lf]%n", &t, &n) == 1 && n > 0) {
        snprintf(time, tsize, "%.6f s after boot", t);
        *msg = line + n;
        while (**msg == ' ')
            (*msg)++;
        return;
    }
    const char *k = strstr(line, " kernel: ");
    if (k) {
        /* syslog: the stamp is everything before the host name */
        const char *host = k;
        while (host > line && host[-1] != ' ')
            host--;
        size_t len = host > line ? (size_t)(host - line - 1) : 0;
        snprintf(time, tsize, "%.*s", (int)(len < tsize ? len : tsize - 1), line);
        *msg = k + 9;
    }
}

static bool classify(const char *msg, halo_gpu_event *ev) {
    const char *x = strstr(msg, "NVRM: Xid (");
    if (x) {
        ev->kind = HALO_GPU_XID;
        const char *c = strstr(x, "): ");
        int code = c ? atoi(c + 3) : -1;
        snprintf(ev->meaning, sizeof ev->meaning, "Xid %d: see NVIDIA's Xid catalogue", code);
        for (size_t i = 0; i < sizeof xids / sizeof xids[0]; i++)
            if (xids[i].xid == code)
                snprintf(ev->meaning, sizeof ev->meaning, "Xid %d: %s", code, xids[i].meaning);
        return true;
    }
    bool amd = strstr(msg, "amdgpu") || strstr(msg, "[drm]") || strstr(msg, "drm:");
    if (strstr(msg, "device wedged"))
        ev->kind = HALO_GPU_WEDGED;
    else if (amd && strstr(msg, "ring ") && strstr(msg, " timeout"))
        ev->kind = HALO_GPU_RING_TIMEOUT;
    else if (amd && (strstr(msg, "ring reset") || strstr(msg, "GPU reset begin") ||
                     strstr(msg, "MES failed to respond")))
        ev->kind = HALO_GPU_RING_RESET;
    else if (amd && (strstr(msg, "] page fault (") || strstr(msg, "PROTECTION_FAULT_STATUS")))
        ev->kind = HALO_GPU_PAGE_FAULT;
    else
        return false;
    snprintf(ev->meaning, sizeof ev->meaning, "%s", amd_meaning[ev->kind]);
    return true;
}

size_t halo_doctor_scan_klog(const char *text, size_t len, halo_gpu_event_fn fn, void *user) {
    size_t count = 0;
    bool last_fault = false;
    for (size_t pos = 0; pos < len;) {
        size_t end = pos;
        while (end < len && text[end] != '\n')
            end++;
        char line[1024];
        size_t n = end - pos < sizeof line - 1 ? end - pos : sizeof line - 1;
        memcpy(line, text + pos, n);
        line[n] = 0;
        pos = end + 1;
        if (line[0] == ' ') continue; /* a kmsg record's dictionary continuation */
        halo_gpu_event ev;
        memset(&ev, 0, sizeof ev);
        const char *msg;
        split_line(line, ev.time, sizeof ev.time, &msg);
        if (!classify(msg, &ev)) {
            /* the fault's detail lines ("in process ...", "in page ...") keep it open */
            last_fault = last_fault && strstr(msg, "amdgpu") != NULL;
            continue;
        }
        /* the status register dump that follows a page fault line is the same fault */
        bool status = strstr(msg, "PROTECTION_FAULT_STATUS") != NULL;
        if (ev.kind == HALO_GPU_PAGE_FAULT && status && last_fault) continue;
        last_fault = ev.kind == HALO_GPU_PAGE_FAULT;
        snprintf(ev.line, sizeof ev.line, "%.319s", msg);
        if (!ev.time[0]) snprintf(ev.time, sizeof ev.time, "time unknown");
        count++;
        if (fn) fn(&ev, user);
    }
    return count;
}

bool halo_doctor_klog_path(const char *root, char *buf, size_t size) {
    static const char *const paths[] = {"/dev/kmsg", "/var/log/kern.log", "/var/log/dmesg"};
    for (size_t i = 0; i < 3; i++) {
        snprintf(buf, size, "%s%s", strcmp(root, "/") ? root : "", paths[i]);
        struct stat st;
        if (stat(buf, &st) == 0 && !S_ISDIR(st.st_mode) && access(buf, R_OK) == 0) return true;
    }
    return false;
}
