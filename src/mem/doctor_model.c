/* `halo doctor -m MODEL`: does the model fit here, and where. Two plans with this machine's GPU
 * backend (the planner's auto choice): weights all in GPU memory, then as halo places them by
 * default; on a machine without a GPU one plan with the CPU backend. The refused device plan's
 * fixes carry the kernel command line that would fit (as `halo plan` prints it). */
#include <stdio.h>
#include <string.h>

#include "mem/doctor.h"

#define GIB ((double)HALO_GIB)

static halo_plan *plan(const halo_gguf *g, const halo_machine *m, uint64_t n_ctx,
                       halo_backend_kind backend, halo_weights_policy w, halo_doctor_report *r) {
    halo_plan_options o = {.n_ctx = n_ctx, .backend = backend, .weights = w};
    halo_plan *p = NULL;
    halo_error err = {0};
    if (halo_plan_build(g, m, &o, &p, &err) != HALO_OK) {
        halo_doctor_add(r, HALO_DOCTOR_UNKNOWN, "model", NULL, "cannot plan: %s", err.message);
        return NULL;
    }
    return p;
}

static const char *best_fix(const halo_plan *p, const char *prefer) {
    for (size_t i = 0; i < p->n_fixes; i++)
        if (prefer && strstr(p->fixes[i], prefer)) return p->fixes[i];
    return p->n_fixes ? p->fixes[0] : NULL;
}

void halo_doctor_model(const halo_gguf *g, const char *model_path, const halo_machine *m,
                       bool probed, uint64_t n_ctx, halo_doctor_report *r) {
    if (!probed) {
        halo_doctor_add(r, HALO_DOCTOR_UNKNOWN, "model", NULL,
                        "%s: cannot tell whether it fits (host memory unknown)", model_path);
        return;
    }
    bool gpu = m->gpu_vendor != HALO_GPU_NONE;
    if (m->gpu_vendor == HALO_GPU_NVIDIA && !m->vram_total) {
        halo_doctor_add(r, HALO_DOCTOR_UNKNOWN, "model", NULL,
                        "%s: fit on %s unknown until its memory size is known", model_path,
                        m->gpu_name);
        return;
    }
    halo_backend_kind be = gpu ? HALO_BACKEND_AUTO : HALO_BACKEND_CPU;
    halo_plan *dev = gpu ? plan(g, m, n_ctx, be, HALO_WEIGHTS_DEVICE, r) : NULL;
    halo_plan *def = plan(g, m, n_ctx, be, HALO_WEIGHTS_AUTO, r);
    if (!def || (gpu && !dev)) goto out;
    const double w = def->weight_bytes / GIB, ctx = def->context_bytes / GIB;
    const char *bname = halo_backend_name(def->options.backend);
    uint64_t on_disk = def->pools[HALO_POOL_DISK].planned;
    if (gpu && !dev->refused) {
        const halo_plan_pool *d = &dev->pools[HALO_POOL_DEVICE];
        halo_doctor_add(r, HALO_DOCTOR_OK, "model", NULL,
                        "%s: fits in GPU memory (%s): %.2f GiB of weights + %.2f GiB of context "
                        "(%llu tokens) in the device pool of %.2f GiB (%s)",
                        model_path, bname, w, ctx, (unsigned long long)def->options.n_ctx,
                        d->capacity / GIB, d->limit);
    } else if (!def->refused && !on_disk) {
        double host = (def->pools[HALO_POOL_GPU_HOST].planned +
                       def->pools[HALO_POOL_MANAGED].planned + def->pools[HALO_POOL_HOST].planned) /
                      GIB;
        if (gpu) {
            /* only a kernel or system setting is a fix here; elsewhere it takes a bigger GPU */
            const char *fix = best_fix(dev, "amdgpu.gttsize");
            if (fix && !strstr(fix, "amdgpu.gttsize") && !strstr(fix, "iogpu")) fix = NULL;
            const halo_plan_pool *d = &dev->pools[HALO_POOL_DEVICE];
            halo_doctor_add(r, HALO_DOCTOR_WARN, "model", fix,
                            "%s: runs (%s), but %.2f GiB of weights do not fit in GPU memory "
                            "(%.2f GiB: %s): %.2f GiB go to GPU-visible host memory%s",
                            model_path, bname, w, d->capacity / GIB, d->limit, host,
                            m->gpu_integrated ? " (the same RAM through a slower path)"
                                              : ", read over the host link");
        } else {
            halo_doctor_add(r, HALO_DOCTOR_OK, "model", NULL,
                            "%s: fits in host RAM (cpu): %.2f GiB of weights + %.2f GiB of "
                            "context (%llu tokens), %.2f GiB left",
                            model_path, w, ctx, (unsigned long long)def->options.n_ctx,
                            def->host_headroom / GIB);
        }
    } else if (!def->refused) {
        char fix[384];
        snprintf(fix, sizeof fix, "%s",
                 def->n_fixes ? def->fixes[0]
                              : "a machine with more memory, or a smaller "
                                "model (fewer bits per routed expert)");
        halo_doctor_add(r, HALO_DOCTOR_FAIL, "model", fix,
                        "%s: does not fit in memory (%s): %.2f GiB of weights would stream from "
                        "disk, which halo does not do yet; %.2f GiB available to the model",
                        model_path, bname, on_disk / GIB,
                        (def->host_available - def->host_reserve) / GIB);
    } else {
        halo_doctor_add(r, HALO_DOCTOR_FAIL, "model", def->n_fixes ? def->fixes[0] : NULL,
                        "%s: refused (%s): %s", model_path, bname, def->reason);
    }
    for (size_t i = 0; i < def->n_notes; i++)
        halo_doctor_add(r, HALO_DOCTOR_INFO, "model", NULL, "plan note: %s", def->notes[i]);
out:
    halo_plan_free(dev);
    halo_plan_free(def);
}
