/* A plan for people (a table with per-pool totals and headroom, then every group's pool, the
 * loud notes and, when refused, the reason and the fixes) and as JSON for tools. */
#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "halo/plan.h"

typedef struct sbuf {
    char *data;
    size_t len, cap;
    bool failed;
} sbuf;

static void put(sbuf *b, const char *fmt, ...) HALO_PRINTF(2, 3);
static void put(sbuf *b, const char *fmt, ...) {
    if (b->failed) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->data + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->failed = true;
            return;
        }
        if (b->len + (size_t)n < b->cap) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = (b->cap + (size_t)n) * 2;
        char *d = realloc(b->data, cap);
        if (!d) {
            b->failed = true;
            return;
        }
        b->data = d;
        b->cap = cap;
    }
}

static const char *size_str(uint64_t bytes, char *buf, size_t size) {
    if (bytes == UINT64_MAX)
        snprintf(buf, size, "-");
    else if (bytes >= HALO_GIB / 10)
        snprintf(buf, size, "%.2f GiB", (double)bytes / (double)HALO_GIB);
    else
        snprintf(buf, size, "%.1f MiB", (double)bytes / (double)HALO_MIB);
    return buf;
}

static const char *role_name(halo_group_role r) {
    static const char *const names[HALO_ROLE_COUNT] = {
        "embeddings/output", "attention+dense", "shared experts", "routed experts",
        "context state",     "compute scratch", "expert cache"};
    return (unsigned)r < HALO_ROLE_COUNT ? names[r] : "?";
}

static const char *role_key(halo_group_role r) {
    static const char *const keys[HALO_ROLE_COUNT] = {
        "embeddings_output", "attention_dense", "shared_experts", "routed_experts",
        "context",           "scratch",         "expert_cache"};
    return (unsigned)r < HALO_ROLE_COUNT ? keys[r] : "?";
}

static const char *pool_of(halo_pool_kind k) {
    return k < HALO_POOL_COUNT ? halo_pool_name(k) : "(none)";
}

char *halo_plan_format_text(const halo_plan *p) {
    sbuf b = {malloc(4096), 0, 4096, false};
    if (!b.data) return NULL;
    char s1[32], s2[32], s3[32], s4[32];
    const halo_machine *m = &p->machine;
    const halo_plan_options *o = &p->options;
    put(&b, "model     %s of weights in %llu tensors\n", size_str(p->weight_bytes, s1, 32),
        (unsigned long long)p->n_tensors);
    put(&b, "machine   %s (%s)\n", m->name, m->source);
    if (m->description[0]) put(&b, "          %s\n", m->description);
    put(&b, "disk      %s%s%s, ~%.2g GB/s sequential read (%s)\n", m->disk_fs,
        m->disk_fs[0] ? " on " : "", m->disk_kind[0] ? m->disk_kind : "unknown", m->disk_read_gbs,
        m->disk_read_estimated ? "estimated" : "measured or from the profile");
    put(&b,
        "backend   %s, weights %s, context %llu tokens (state %s at %u bytes/element), "
        "batch %u\n",
        halo_backend_name(o->backend), halo_weights_name(o->weights), (unsigned long long)o->n_ctx,
        size_str(p->context_bytes, s1, 32), o->kv_elem_size, o->n_batch);

    put(&b, "\n%-10s %11s %11s %11s %11s  %s\n", "pool", "capacity", "reserve", "planned",
        "headroom", "limit");
    for (int k = 0; k < HALO_POOL_COUNT; k++) {
        const halo_plan_pool *pl = &p->pools[k];
        if (!pl->usable) continue;
        if ((k == HALO_POOL_DISK || k == HALO_POOL_MANAGED) && !pl->planned) continue;
        put(&b, "%-10s %11s %11s %11s %11s  %s\n", halo_pool_name(pl->kind),
            size_str(pl->capacity, s1, 32),
            k == HALO_POOL_DISK || !pl->reserve ? "-" : size_str(pl->reserve, s2, 32),
            size_str(pl->planned, s3, 32),
            k == HALO_POOL_DISK ? "-" : size_str(pl->headroom, s4, 32), pl->limit);
    }
    put(&b, "%-10s %11s %11s %11s %11s  %s\n", "host RAM", size_str(p->host_available, s1, 32),
        size_str(p->host_reserve, s2, 32), size_str(p->host_planned, s3, 32),
        size_str(p->host_headroom, s4, 32),
        "shared by every pool above but discrete VRAM: a byte counts once");

    put(&b, "\n%-32s %8s %11s  %s\n", "what", "tensors", "bytes", "pool");
    for (size_t i = 0; i < p->n_groups; i++) {
        const halo_plan_group *g = &p->groups[i];
        char what[64];
        if (g->role == HALO_ROLE_ROUTED_EXPERTS) {
            /* Consecutive layers in one pool print as one line. */
            size_t j = i;
            uint64_t bytes = 0, tensors = 0;
            while (j < p->n_groups && p->groups[j].role == HALO_ROLE_ROUTED_EXPERTS &&
                   p->groups[j].pool == g->pool) {
                bytes += p->groups[j].bytes;
                tensors += p->groups[j].tensors;
                j++;
            }
            if (j - i > 1)
                snprintf(what, sizeof what, "routed experts blk.%d-%d", g->layer,
                         p->groups[j - 1].layer);
            else
                snprintf(what, sizeof what, "routed experts blk.%d", g->layer);
            put(&b, "%-32s %8llu %11s  %s\n", what, (unsigned long long)tensors,
                size_str(bytes, s1, 32), pool_of(g->pool));
            i = j - 1;
            continue;
        }
        if (g->role == HALO_ROLE_CONTEXT && o->n_seq > 1)
            snprintf(what, sizeof what, "context state (%u x %llu tokens)", o->n_seq,
                     (unsigned long long)o->n_ctx);
        else if (g->role == HALO_ROLE_CONTEXT)
            snprintf(what, sizeof what, "context state (%llu tokens)",
                     (unsigned long long)o->n_ctx);
        else
            snprintf(what, sizeof what, "%s", role_name(g->role));
        if (g->tensors)
            put(&b, "%-32s %8llu %11s  %s\n", what, (unsigned long long)g->tensors,
                size_str(g->bytes, s1, 32), pool_of(g->pool));
        else
            put(&b, "%-32s %8s %11s  %s\n", what, "-", size_str(g->bytes, s1, 32),
                pool_of(g->pool));
    }
    if (p->n_notes) put(&b, "\n");
    for (size_t i = 0; i < p->n_notes; i++)
        put(&b, "NOTE: %s\n", p->notes[i]);
    if (p->refused) {
        put(&b, "\nREFUSED: %s\n", p->reason);
        if (p->n_fixes) put(&b, "any one of these changes fits (each was checked):\n");
        for (size_t i = 0; i < p->n_fixes; i++)
            put(&b, "  - %s\n", p->fixes[i]);
        if (!p->n_fixes) put(&b, "no single change found that fits: a smaller model is needed\n");
    } else {
        put(&b, "\nloadable: weights counted once, %s planned in memory\n",
            size_str(p->pools[HALO_POOL_DEVICE].planned + p->pools[HALO_POOL_GPU_HOST].planned +
                         p->pools[HALO_POOL_MANAGED].planned + p->pools[HALO_POOL_HOST].planned,
                     s1, 32));
    }
    if (b.failed) {
        free(b.data);
        return NULL;
    }
    return b.data;
}

static void add_num(cJSON *o, const char *key, double v) {
    cJSON_AddNumberToObject(o, key, v);
}

char *halo_plan_format_json(const halo_plan *p) {
    cJSON *j = cJSON_CreateObject();
    if (!j) return NULL;
    const halo_machine *m = &p->machine;
    cJSON *model = cJSON_AddObjectToObject(j, "model");
    add_num(model, "tensors", (double)p->n_tensors);
    add_num(model, "weight_bytes", (double)p->weight_bytes);

    cJSON *mach = cJSON_AddObjectToObject(j, "machine");
    cJSON_AddStringToObject(mach, "name", m->name);
    cJSON_AddStringToObject(mach, "source", m->source);
    cJSON_AddStringToObject(mach, "description", m->description);
    add_num(mach, "host_total", (double)m->host_total);
    add_num(mach, "host_available", (double)m->host_available);
    cJSON_AddStringToObject(mach, "gpu", m->gpu_vendor ? m->gpu_name : "");
    cJSON_AddBoolToObject(mach, "gpu_integrated", m->gpu_integrated);
    add_num(mach, "vram_total", (double)m->vram_total);
    add_num(mach, "gtt_total", (double)m->gtt_total);
    add_num(mach, "ttm_pages_limit", (double)m->ttm_pages_limit);
    cJSON_AddStringToObject(mach, "disk", m->disk_kind);
    add_num(mach, "disk_read_gbs", m->disk_read_gbs);

    cJSON *opt = cJSON_AddObjectToObject(j, "options");
    cJSON_AddStringToObject(opt, "backend", halo_backend_name(p->options.backend));
    cJSON_AddStringToObject(opt, "weights", halo_weights_name(p->options.weights));
    add_num(opt, "ctx", (double)p->options.n_ctx);
    add_num(opt, "seq", (double)p->options.n_seq);
    add_num(opt, "batch", p->options.n_batch);
    add_num(opt, "kv_elem_size", p->options.kv_elem_size);
    add_num(opt, "host_reserve", (double)p->options.host_reserve);
    add_num(opt, "device_reserve", (double)p->options.device_reserve);
    cJSON *host = cJSON_AddObjectToObject(j, "host_ram");
    add_num(host, "available", (double)p->host_available);
    add_num(host, "reserve", (double)p->host_reserve);
    add_num(host, "planned", (double)p->host_planned);
    add_num(host, "headroom", (double)p->host_headroom);
    add_num(j, "context_bytes", (double)p->context_bytes);
    add_num(j, "scratch_bytes", (double)p->scratch_bytes);

    cJSON *pools = cJSON_AddArrayToObject(j, "pools");
    for (int k = 0; k < HALO_POOL_COUNT; k++) {
        const halo_plan_pool *pl = &p->pools[k];
        if (!pl->usable) continue;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "pool", halo_pool_name(pl->kind));
        if (k != HALO_POOL_DISK) {
            add_num(o, "capacity", (double)pl->capacity);
            add_num(o, "reserve", (double)pl->reserve);
            add_num(o, "headroom", (double)pl->headroom);
        }
        add_num(o, "planned", (double)pl->planned);
        cJSON_AddStringToObject(o, "limit", pl->limit);
        cJSON_AddItemToArray(pools, o);
    }
    cJSON *groups = cJSON_AddArrayToObject(j, "groups");
    for (size_t i = 0; i < p->n_groups; i++) {
        const halo_plan_group *g = &p->groups[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "role", role_key(g->role));
        if (g->layer >= 0) add_num(o, "layer", g->layer);
        add_num(o, "tensors", (double)g->tensors);
        add_num(o, "bytes", (double)g->bytes);
        if (g->pool < HALO_POOL_COUNT)
            cJSON_AddStringToObject(o, "pool", halo_pool_name(g->pool));
        else
            cJSON_AddNullToObject(o, "pool");
        cJSON_AddItemToArray(groups, o);
    }
    if (p->expert_cache_pool < HALO_POOL_COUNT) {
        cJSON *ec = cJSON_AddObjectToObject(j, "expert_cache");
        add_num(ec, "requested", (double)p->expert_cache_requested);
        add_num(ec, "admitted", (double)p->expert_cache_admitted);
        cJSON_AddStringToObject(ec, "pool", halo_pool_name(p->expert_cache_pool));
    }
    cJSON_AddBoolToObject(j, "loadable", !p->refused);
    if (p->refused) cJSON_AddStringToObject(j, "reason", p->reason);
    cJSON *notes = cJSON_AddArrayToObject(j, "notes");
    for (size_t i = 0; i < p->n_notes; i++)
        cJSON_AddItemToArray(notes, cJSON_CreateString(p->notes[i]));
    cJSON *fixes = cJSON_AddArrayToObject(j, "fixes");
    for (size_t i = 0; i < p->n_fixes; i++)
        cJSON_AddItemToArray(fixes, cJSON_CreateString(p->fixes[i]));
    char *out = cJSON_Print(j);
    cJSON_Delete(j);
    return out;
}
