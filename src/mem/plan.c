/* The placement planner: every tensor group, the context state and the compute scratch get a
 * pool, or the plan is refused with the smallest changes that would make it fit. Nothing is
 * allocated here; the arena carries a plan out. Rules (docs/memory.md explains each):
 *   1. Hot state first: context and scratch take the fastest pool, before any weight.
 *   2. Fastest pool that fits first, group by group: attention/dense, shared experts,
 *      embeddings/output, then routed experts layer by layer.
 *   3. On an integrated GPU whose device pool cannot hold every weight, all weights go to
 *      GPU-visible host memory (pinned), which the GPU reads over the same fabric; the device
 *      pool keeps the hot state. Splitting would only move the limit, not remove it.
 *   4. A byte is counted once: pools that are views of the same RAM (GTT, pinned, managed, host
 *      on a unified machine) draw on one shared host budget.
 *   5. With --weights auto, a model that does not fit in memory streams its routed experts from
 *      disk through an expert cache; the cache is never silently smaller than asked: a request
 *      admitted below its size gets a loud note with both numbers and the reason.
 *   6. When nothing fits, refuse before allocating, naming the changes that were checked to fit:
 *      a shorter context, another weights policy, the kernel parameter that raises the
 *      GPU-visible limit, streaming. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "mem/mem.h"

#define DEFAULT_CTX 32768
#define DEFAULT_BATCH 512
#define NO_POOL HALO_POOL_COUNT

/* The model, summarized once: bytes and tensor counts per group. */
typedef struct model_sum {
    halo_hparams hp;
    uint64_t bytes[HALO_ROLE_COUNT], tensors[HALO_ROLE_COUNT];
    uint64_t routed[HALO_MAX_LAYERS], routed_tensors[HALO_MAX_LAYERS];
    uint64_t total;
} model_sum;

/* What is left in each pool while placing. Pools that share host RAM draw on host_room once
 * their own dedicated memory (an APU's carve-out) is used up. */
typedef struct budget {
    uint64_t room[HALO_POOL_COUNT];
    uint64_t dedicated[HALO_POOL_COUNT];
    bool shares_host[HALO_POOL_COUNT];
    uint64_t host_room;
} budget;

static uint64_t min_u64(uint64_t a, uint64_t b) {
    return a < b ? a : b;
}
static uint64_t sub_sat(uint64_t a, uint64_t b) {
    return a > b ? a - b : 0;
}
static double gib(uint64_t b) {
    return (double)b / (double)HALO_GIB;
}

/* A size with the unit that keeps it readable, for messages about small things. */
static const char *size_str(uint64_t b, char *out, size_t n) {
    if (b >= HALO_GIB)
        snprintf(out, n, "%.2f GiB", gib(b));
    else if (b >= (1u << 20))
        snprintf(out, n, "%.1f MiB", (double)b / (1u << 20));
    else
        snprintf(out, n, "%.1f KiB", (double)b / 1024);
    return out;
}

static uint64_t room_of(const budget *b, halo_pool_kind p) {
    if (!b->shares_host[p]) return b->room[p];
    return min_u64(b->room[p], b->host_room + b->dedicated[p]);
}

static void take(budget *b, halo_pool_kind p, uint64_t bytes) {
    b->room[p] = sub_sat(b->room[p], bytes);
    if (!b->shares_host[p]) return;
    uint64_t own = min_u64(bytes, b->dedicated[p]);
    b->dedicated[p] -= own;
    b->host_room = sub_sat(b->host_room, bytes - own);
}

static void note(halo_plan *p, const char *fmt, ...) HALO_PRINTF(2, 3);
static void note(halo_plan *p, const char *fmt, ...) {
    if (p->n_notes >= HALO_PLAN_MAX_NOTES) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->notes[p->n_notes++], sizeof p->notes[0], fmt, ap);
    va_end(ap);
}

static void refuse(halo_plan *p, const char *fmt, ...) HALO_PRINTF(2, 3);
static void refuse(halo_plan *p, const char *fmt, ...) {
    if (p->refused) return; /* the first reason is the one to fix */
    p->refused = true;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->reason, sizeof p->reason, fmt, ap);
    va_end(ap);
}

/* ---- model summary ------------------------------------------------------------------------ */

static halo_status summarize(const halo_gguf *g, model_sum *s, halo_error *err) {
    memset(s, 0, sizeof *s);
    halo_status st = halo_hparams_load(g, &s->hp, err);
    if (st != HALO_OK) return halo_error_prefix(err, "plan: ");
    for (uint64_t i = 0; i < halo_gguf_tensor_count(g); i++) {
        const halo_gguf_tensor *t = halo_gguf_tensor_at(g, i);
        int32_t layer;
        halo_group_role role = halo_mem_tensor_role(t->name, &layer);
        s->bytes[role] += t->n_bytes;
        s->tensors[role]++;
        s->total += t->n_bytes;
        if (role == HALO_ROLE_ROUTED_EXPERTS) {
            if ((uint32_t)layer >= s->hp.n_layer)
                return halo_fail(err, HALO_E_BAD_VALUE,
                                 "plan: tensor %s: layer %d but block_count is %u", t->name, layer,
                                 s->hp.n_layer);
            s->routed[layer] += t->n_bytes;
            s->routed_tensors[layer]++;
        }
    }
    return HALO_OK;
}

/* ---- pools -------------------------------------------------------------------------------- */

static halo_status resolve_backend(const halo_machine *m, halo_plan_options *o, halo_error *err) {
    if (o->backend == HALO_BACKEND_AUTO) {
        static const halo_backend_kind natural[] = {HALO_BACKEND_CPU, HALO_BACKEND_HIP,
                                                    HALO_BACKEND_CUDA, HALO_BACKEND_METAL,
                                                    HALO_BACKEND_VULKAN};
        o->backend = natural[m->gpu_vendor];
    }
    bool ok = o->backend == HALO_BACKEND_CPU ||
              (o->backend == HALO_BACKEND_HIP && m->gpu_vendor == HALO_GPU_AMD) ||
              (o->backend == HALO_BACKEND_CUDA && m->gpu_vendor == HALO_GPU_NVIDIA) ||
              (o->backend == HALO_BACKEND_METAL && m->gpu_vendor == HALO_GPU_APPLE) ||
              (o->backend == HALO_BACKEND_VULKAN &&
               (m->gpu_vendor == HALO_GPU_AMD || m->gpu_vendor == HALO_GPU_NVIDIA ||
                m->gpu_vendor == HALO_GPU_OTHER));
    if (!ok)
        return halo_fail(err, HALO_E_UNSUPPORTED, "plan: backend %s: machine %s has %s",
                         halo_backend_name(o->backend), m->name,
                         m->gpu_vendor ? m->gpu_name : "no GPU");
    if (o->backend == HALO_BACKEND_CPU &&
        (o->weights == HALO_WEIGHTS_DEVICE || o->weights == HALO_WEIGHTS_MANAGED))
        return halo_fail(err, HALO_E_INVALID_ARG,
                         "plan: --weights %s needs a GPU backend (backend is cpu)",
                         halo_weights_name(o->weights));
    if (o->backend == HALO_BACKEND_METAL && o->weights == HALO_WEIGHTS_MANAGED)
        return halo_fail(err, HALO_E_INVALID_ARG,
                         "plan: --weights managed: Metal memory is unified already; use auto");
    return HALO_OK;
}

/* The GTT part of an AMD GPU's device pool: the driver's GTT size, capped by TTM's limit. */
static uint64_t amd_gtt(const halo_machine *m) {
    uint64_t gtt = m->gtt_total;
    if (m->ttm_pages_limit) gtt = min_u64(gtt ? gtt : UINT64_MAX, m->ttm_pages_limit * 4096);
    return gtt;
}

static void setup_pools(const halo_machine *m, const halo_plan_options *o, halo_plan *p,
                        budget *b) {
    memset(b, 0, sizeof *b);
    const bool gpu = o->backend != HALO_BACKEND_CPU;
    const uint64_t host = sub_sat(m->host_available, o->host_reserve);
    b->host_room = host;
    for (int k = 0; k < HALO_POOL_COUNT; k++) {
        p->pools[k].kind = (halo_pool_kind)k;
        b->shares_host[k] = k != HALO_POOL_DISK;
    }
    halo_plan_pool *dev = &p->pools[HALO_POOL_DEVICE];
    if (gpu) {
        dev->usable = true;
        dev->reserve = o->device_reserve;
        if (m->gpu_vendor == HALO_GPU_AMD && m->gpu_integrated) {
            uint64_t gtt = amd_gtt(m);
            dev->capacity = m->vram_total + gtt;
            b->dedicated[HALO_POOL_DEVICE] = sub_sat(m->vram_total, m->vram_used);
            b->room[HALO_POOL_DEVICE] =
                sub_sat(dev->capacity, m->vram_used + m->gtt_used + dev->reserve);
            snprintf(dev->limit, sizeof dev->limit,
                     "VRAM carve-out %.2f GiB + GTT %.2f GiB, capped by ttm.pages_limit=%llu",
                     gib(m->vram_total), gib(gtt),
                     (unsigned long long)(m->ttm_pages_limit ? m->ttm_pages_limit : gtt / 4096));
        } else if (m->gpu_integrated) {
            dev->capacity = m->vram_total;
            b->room[HALO_POOL_DEVICE] = sub_sat(dev->capacity, m->vram_used + dev->reserve);
            snprintf(dev->limit, sizeof dev->limit, "%s",
                     m->gpu_vendor == HALO_GPU_APPLE
                         ? "GPU working-set limit (iogpu.wired_limit_mb)"
                     : m->gpu_vendor == HALO_GPU_OTHER
                         ? "the Vulkan device-local heap"
                         : "unified memory the GPU reports (cudaMemGetInfo)");
        } else {
            dev->capacity = m->vram_total;
            b->shares_host[HALO_POOL_DEVICE] = false;
            b->room[HALO_POOL_DEVICE] = sub_sat(dev->capacity, m->vram_used + dev->reserve);
            snprintf(dev->limit, sizeof dev->limit, "VRAM");
        }
    }
    halo_plan_pool *pin = &p->pools[HALO_POOL_GPU_HOST];
    pin->usable = gpu && o->backend != HALO_BACKEND_METAL;
    if (pin->usable) {
        pin->capacity = m->gpu_host_limit ? m->gpu_host_limit : m->host_available;
        b->room[HALO_POOL_GPU_HOST] = m->gpu_host_limit ? m->gpu_host_limit : host;
        snprintf(pin->limit, sizeof pin->limit, "%s",
                 m->gpu_host_limit ? "pinned-memory limit" : "host RAM (pinned, GPU-mapped)");
    }
    halo_plan_pool *man = &p->pools[HALO_POOL_MANAGED];
    man->usable = gpu && m->has_managed &&
                  (o->backend == HALO_BACKEND_CUDA || o->backend == HALO_BACKEND_HIP);
    if (man->usable) {
        man->capacity = m->host_available;
        b->room[HALO_POOL_MANAGED] = host;
        snprintf(man->limit, sizeof man->limit, "host RAM (migrates on demand)");
    }
    halo_plan_pool *hp = &p->pools[HALO_POOL_HOST];
    hp->usable = !gpu;
    if (hp->usable) {
        hp->capacity = m->host_available;
        b->room[HALO_POOL_HOST] = host;
        snprintf(hp->limit, sizeof hp->limit, "%s",
                 m->cgroup_limit ? "cgroup memory.max" : "MemAvailable");
    }
    p->pools[HALO_POOL_DISK].usable = true;
    p->pools[HALO_POOL_DISK].capacity = UINT64_MAX;
    b->room[HALO_POOL_DISK] = UINT64_MAX;
    snprintf(p->pools[HALO_POOL_DISK].limit, sizeof p->pools[0].limit, "%s, ~%.2g GB/s%s",
             m->disk_kind[0] ? m->disk_kind : "disk", m->disk_read_gbs,
             m->disk_read_estimated ? " (estimated)" : "");
}

/* ---- placement ---------------------------------------------------------------------------- */

static halo_plan_group *add_group(halo_plan *p, halo_group_role role, int32_t layer, uint64_t bytes,
                                  uint64_t tensors) {
    halo_plan_group *gr = &p->groups[p->n_groups++];
    gr->role = role;
    gr->layer = layer;
    gr->bytes = bytes;
    gr->tensors = tensors;
    gr->pool = NO_POOL;
    return gr;
}

/* Puts a group in the first candidate pool with room; false when none has. */
static bool place(halo_plan *p, budget *b, halo_plan_group *gr, const halo_pool_kind *cands,
                  size_t n) {
    for (size_t i = 0; i < n; i++) {
        halo_pool_kind k = cands[i];
        if (!p->pools[k].usable || room_of(b, k) < gr->bytes) continue;
        take(b, k, gr->bytes);
        p->pools[k].planned += gr->bytes;
        gr->pool = k;
        return true;
    }
    return false;
}

static const char *role_label(halo_group_role r) {
    static const char *const labels[HALO_ROLE_COUNT] = {
        "embeddings/output", "attention+dense", "shared experts", "routed experts",
        "context state",     "compute scratch", "expert cache"};
    return (unsigned)r < HALO_ROLE_COUNT ? labels[r] : "?";
}

/* Candidates for one weights policy, fastest first. */
static size_t weight_pools(const halo_plan *p, halo_weights_policy w, halo_pool_kind *out) {
    bool gpu = p->options.backend != HALO_BACKEND_CPU;
    switch (w) {
    case HALO_WEIGHTS_DEVICE:
        out[0] = HALO_POOL_DEVICE;
        return 1;
    case HALO_WEIGHTS_MANAGED:
        out[0] = HALO_POOL_MANAGED;
        return 1;
    case HALO_WEIGHTS_HOST:
        out[0] = gpu ? (p->pools[HALO_POOL_GPU_HOST].usable ? HALO_POOL_GPU_HOST : HALO_POOL_DEVICE)
                     : HALO_POOL_HOST;
        return 1;
    default:
        if (!gpu) {
            out[0] = HALO_POOL_HOST;
            return 1;
        }
        out[0] = HALO_POOL_DEVICE;
        out[1] = HALO_POOL_GPU_HOST;
        return 2;
    }
}

static void refuse_group(halo_plan *p, const budget *b, const halo_plan_group *gr,
                         const halo_pool_kind *cands, size_t n, const char *what) {
    char rooms[256] = "";
    size_t at = 0;
    for (size_t i = 0; i < n && at < sizeof rooms; i++) {
        const halo_plan_pool *pl = &p->pools[cands[i]];
        if (!pl->usable) continue;
        at += (size_t)snprintf(rooms + at, sizeof rooms - at, "%s%s has %.2f GiB left",
                               at ? ", " : "", halo_pool_name(cands[i]), gib(room_of(b, cands[i])));
        if (cands[i] == HALO_POOL_DEVICE && pl->limit[0] && at < sizeof rooms)
            at += (size_t)snprintf(rooms + at, sizeof rooms - at, " of %.2f GiB: %s",
                                   gib(pl->capacity), pl->limit);
    }
    refuse(p, "%s (%.2f GiB) does not fit: %s", what, gib(gr->bytes), rooms);
}

/* Places everything for one policy; fills p (groups, pools, notes, refused). */
static void place_all(const model_sum *s, const halo_machine *m, halo_plan *p) {
    const halo_plan_options *o = &p->options;
    const bool gpu = o->backend != HALO_BACKEND_CPU;
    budget b;
    setup_pools(m, o, p, &b);
    p->context_bytes = halo_mem_context_bytes(&s->hp, o->n_ctx, o->kv_elem_size) * o->n_seq;
    p->scratch_bytes = halo_mem_scratch_bytes(&s->hp, o->n_ctx, o->n_batch);

    /* Rule 1: hot state first. */
    halo_pool_kind hot[2] = {gpu ? HALO_POOL_DEVICE : HALO_POOL_HOST, HALO_POOL_GPU_HOST};
    size_t n_hot = gpu ? 2 : 1;
    halo_plan_group *ctx = add_group(p, HALO_ROLE_CONTEXT, -1, p->context_bytes, 0);
    if (!place(p, &b, ctx, hot, n_hot)) {
        char what[96];
        if (o->n_seq > 1)
            snprintf(what, sizeof what, "context state for %u sequences of %llu tokens", o->n_seq,
                     (unsigned long long)o->n_ctx);
        else
            snprintf(what, sizeof what, "context state for %llu tokens",
                     (unsigned long long)o->n_ctx);
        refuse_group(p, &b, ctx, hot, n_hot, what);
    }
    halo_plan_group *scr = add_group(p, HALO_ROLE_SCRATCH, -1, p->scratch_bytes, 0);
    if (!place(p, &b, scr, hot, n_hot)) refuse_group(p, &b, scr, hot, n_hot, "compute scratch");

    halo_pool_kind cands[3];
    size_t n = weight_pools(p, o->weights, cands);
    const bool stream = o->weights == HALO_WEIGHTS_STREAM;
    /* Rule 3: integrated GPU, device pool too small for every resident weight. */
    uint64_t resident = stream ? s->total - s->bytes[HALO_ROLE_ROUTED_EXPERTS] : s->total;
    if (gpu && m->gpu_integrated && n == 2 && p->pools[HALO_POOL_GPU_HOST].usable &&
        room_of(&b, HALO_POOL_DEVICE) < resident) {
        note(p,
             "device pool (%.2f GiB left of %.2f GiB: %s) cannot hold %.2f GiB of weights: "
             "weights go to GPU-visible host memory, which the integrated GPU reads over "
             "the same memory fabric (--weights device or HALO_FORCE_DEVICE_MEM=1 "
             "forces device memory)",
             gib(room_of(&b, HALO_POOL_DEVICE)), gib(p->pools[HALO_POOL_DEVICE].capacity),
             p->pools[HALO_POOL_DEVICE].limit, gib(resident));
        cands[0] = HALO_POOL_GPU_HOST;
        n = 1;
    }
    /* A forced single pool: say what the whole model needs against what the pool has. */
    if (n == 1 && room_of(&b, cands[0]) < resident) {
        const halo_plan_pool *pl = &p->pools[cands[0]];
        refuse(p,
               "--weights %s: %.2f GiB of %sweights do not fit in %s, which has %.2f GiB left "
               "of %.2f GiB (%s) after the context state for %llu tokens (%.2f GiB) and "
               "scratch (%.2f GiB)",
               halo_weights_name(o->weights), gib(resident), stream ? "resident " : "",
               halo_pool_name(cands[0]), gib(room_of(&b, cands[0])), gib(pl->capacity),
               pl->limit[0] ? pl->limit : "host RAM", (unsigned long long)o->n_ctx,
               gib(p->context_bytes), gib(p->scratch_bytes));
    }
    static const halo_group_role order[] = {HALO_ROLE_DENSE, HALO_ROLE_SHARED_EXPERTS,
                                            HALO_ROLE_EMBED_OUTPUT};
    for (size_t i = 0; i < 3; i++) {
        halo_plan_group *gr = add_group(p, order[i], -1, s->bytes[order[i]], s->tensors[order[i]]);
        if (gr->bytes && !place(p, &b, gr, cands, n))
            refuse_group(p, &b, gr, cands, n, role_label(order[i]));
    }
    const halo_pool_kind disk = HALO_POOL_DISK;
    for (uint32_t il = 0; il < s->hp.n_layer; il++) {
        if (!s->routed_tensors[il]) continue;
        halo_plan_group *gr = add_group(p, HALO_ROLE_ROUTED_EXPERTS, (int32_t)il, s->routed[il],
                                        s->routed_tensors[il]);
        char what[64];
        snprintf(what, sizeof what, "routed experts of blk.%u", il);
        if (!(stream ? place(p, &b, gr, &disk, 1) : place(p, &b, gr, cands, n)))
            refuse_group(p, &b, gr, cands, n, what);
    }
    if (!stream || p->refused) return;

    /* The expert cache: in the fastest pool that holds the whole request, else in the one
     * that holds the most, and then loudly. It must hold one token's experts in every layer. */
    const uint64_t all = s->bytes[HALO_ROLE_ROUTED_EXPERTS];
    const uint64_t per_token = s->hp.n_expert ? all / s->hp.n_expert * s->hp.n_expert_used : all;
    const uint64_t want = o->expert_cache ? o->expert_cache : all;
    halo_pool_kind best = NO_POOL;
    uint64_t best_room = 0;
    for (size_t i = 0; i < n_hot; i++) {
        uint64_t r = room_of(&b, hot[i]);
        if (!p->pools[hot[i]].usable) continue;
        if (r >= min_u64(want, all)) {
            best = hot[i];
            best_room = r;
            break;
        }
        if (r > best_room) {
            best = hot[i];
            best_room = r;
        }
    }
    uint64_t admitted = min_u64(min_u64(want, all), best_room);
    p->expert_cache_requested = o->expert_cache;
    if (o->expert_cache && o->expert_cache < per_token) {
        char want_s[32], need_s[32];
        refuse(p,
               "an expert cache of %s (--expert-cache) is less than one token's routed experts "
               "(%s: %u of %u in every layer); it must hold at least that much",
               size_str(o->expert_cache, want_s, sizeof want_s),
               size_str(per_token, need_s, sizeof need_s), s->hp.n_expert_used, s->hp.n_expert);
        return;
    }
    if (best == NO_POOL || admitted < per_token) {
        halo_plan_group gr = {HALO_ROLE_EXPERT_CACHE, -1, per_token, 0, NO_POOL};
        refuse_group(p, &b, &gr, hot, n_hot, "expert cache for one token's experts");
        return;
    }
    halo_plan_group *cache = add_group(p, HALO_ROLE_EXPERT_CACHE, -1, admitted, 0);
    place(p, &b, cache, &best, 1);
    p->expert_cache_admitted = admitted;
    p->expert_cache_pool = best;
    if (o->expert_cache && admitted < o->expert_cache) {
        if (admitted == all)
            note(p,
                 "expert cache: requested %.2f GiB, admitted %.2f GiB in %s: that holds "
                 "every routed expert (%.2f GiB); a larger cache would hold nothing more",
                 gib(o->expert_cache), gib(admitted), halo_pool_name(best), gib(all));
        else
            note(p,
                 "expert cache: requested %.2f GiB, admitted %.2f GiB in %s: that is all "
                 "the room left there after weights, context and reserves",
                 gib(o->expert_cache), gib(admitted), halo_pool_name(best));
    }
    if (admitted == all && !o->expert_cache)
        note(p,
             "expert cache holds every routed expert (%.2f GiB): after warm-up nothing "
             "streams; --weights auto loads them up front instead",
             gib(all));
}

/* Headroom per pool, counting the host RAM pools share. */
static void finish_pools(halo_plan *p, const halo_machine *m) {
    budget b;
    halo_plan scratch = *p;
    setup_pools(m, &p->options, &scratch, &b);
    for (size_t i = 0; i < p->n_groups; i++)
        if (p->groups[i].pool != NO_POOL) take(&b, p->groups[i].pool, p->groups[i].bytes);
    for (int k = 0; k < HALO_POOL_COUNT; k++)
        p->pools[k].headroom = p->pools[k].usable && k != HALO_POOL_DISK ? room_of(&b, k) : 0;
    p->host_available = m->host_available;
    p->host_reserve = p->options.host_reserve;
    p->host_headroom = b.host_room;
    p->host_planned = sub_sat(sub_sat(m->host_available, p->options.host_reserve), b.host_room);
}

static void plan_reset(halo_plan *p) {
    p->n_groups = 0;
    p->n_notes = 0;
    p->refused = false;
    p->reason[0] = 0;
    p->expert_cache_admitted = p->expert_cache_requested = 0;
    p->expert_cache_pool = NO_POOL;
    memset(p->pools, 0, sizeof p->pools);
}

/* One complete placement for the plan's options, with the auto policy's fallback to streaming
 * (rule 5). */
static void plan_once(const model_sum *s, const halo_machine *m, halo_plan *p) {
    plan_reset(p);
    place_all(s, m, p);
    if (!p->refused || p->options.weights != HALO_WEIGHTS_AUTO) return;
    /* Rule 5: what does not fit resident may stream (disk is the last pool). */
    plan_reset(p);
    p->options.weights = HALO_WEIGHTS_STREAM;
    place_all(s, m, p);
    p->options.weights = HALO_WEIGHTS_AUTO;
    if (!p->refused) {
        note(p,
             "weights (%.2f GiB) do not fit in memory: routed experts stream from disk "
             "[%s] through an expert cache; --weights to choose otherwise",
             gib(s->total), p->pools[HALO_POOL_DISK].limit);
        return;
    }
    /* Streaming does not fit either: report the resident plan's reason. */
    plan_reset(p);
    place_all(s, m, p);
}

/* ---- fixes -------------------------------------------------------------------------------- */

static bool fits(const model_sum *s, const halo_machine *m, const halo_plan_options *o,
                 halo_plan *tmp) {
    tmp->machine = *m;
    tmp->options = *o;
    plan_once(s, m, tmp);
    return !tmp->refused;
}

static void fix(halo_plan *p, const char *fmt, ...) HALO_PRINTF(2, 3);
static void fix(halo_plan *p, const char *fmt, ...) {
    if (p->n_fixes >= HALO_PLAN_MAX_FIXES) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->fixes[p->n_fixes++], sizeof p->fixes[0], fmt, ap);
    va_end(ap);
}

static void find_fixes(const model_sum *s, const halo_machine *m, halo_plan *p) {
    halo_plan *tmp = calloc(1, sizeof *tmp);
    halo_plan_group *groups = calloc(s->hp.n_layer + 8, sizeof *groups);
    if (!tmp || !groups) goto out;
    tmp->groups = groups;
    halo_plan_options o = p->options;

    /* A shorter context: the largest multiple of 1024 tokens that fits. */
    o.n_ctx = 1024;
    if (p->options.n_ctx > 1024 && fits(s, m, &o, tmp)) {
        uint64_t lo = 1, hi = p->options.n_ctx / 1024; /* lo fits, hi does not */
        while (hi - lo > 1) {
            o.n_ctx = (lo + hi) / 2 * 1024;
            if (fits(s, m, &o, tmp))
                lo = (lo + hi) / 2;
            else
                hi = (lo + hi) / 2;
        }
        fix(p, "--ctx %llu: the largest context that fits (requested %llu)",
            (unsigned long long)(lo * 1024), (unsigned long long)p->options.n_ctx);
    }
    o = p->options;

    /* Fewer sequences (server slots) of the requested context. */
    o.n_seq = 1;
    if (p->options.n_seq > 1 && fits(s, m, &o, tmp)) {
        uint32_t lo = 1, hi = p->options.n_seq; /* lo fits, hi does not */
        while (hi - lo > 1) {
            o.n_seq = lo + (hi - lo) / 2;
            if (fits(s, m, &o, tmp))
                lo = o.n_seq;
            else
                hi = o.n_seq;
        }
        fix(p, "-np %u: the most slots of %llu tokens that fit (requested %u)", lo,
            (unsigned long long)p->options.n_ctx, p->options.n_seq);
    }
    o = p->options;

    /* The kernel parameter that raises the GPU-visible limit, when that is the binding pool. */
    if (m->gpu_vendor == HALO_GPU_AMD && m->gpu_integrated && o.backend != HALO_BACKEND_CPU) {
        halo_machine big = *m;
        uint64_t ceiling = sub_sat(m->host_total, 4 * HALO_GIB); /* leave the OS 4 GiB */
        for (uint64_t g = (amd_gtt(m) / HALO_GIB + 1) * HALO_GIB; g <= ceiling; g += HALO_GIB) {
            big.gtt_total = g;
            big.ttm_pages_limit = g / 4096;
            if (!fits(s, &big, &o, tmp)) continue;
            fix(p,
                "raise the GPU-visible limit to %.0f GiB: boot with amdgpu.gttsize=%llu "
                "ttm.pages_limit=%llu ttm.page_pool_size=%llu (docs/memory.md)",
                gib(g), (unsigned long long)(g / HALO_MIB), (unsigned long long)(g / 4096),
                (unsigned long long)(g / 4096));
            break;
        }
    }
    if (m->gpu_vendor == HALO_GPU_APPLE) {
        halo_machine big = *m;
        big.vram_total = sub_sat(m->host_total, 8 * HALO_GIB);
        if (big.vram_total > m->vram_total && fits(s, &big, &o, tmp))
            fix(p,
                "raise the GPU working-set limit: sudo sysctl iogpu.wired_limit_mb=%llu "
                "(leaves the OS 8 GiB)",
                (unsigned long long)(big.vram_total / HALO_MIB));
    }

    /* Another weights policy. */
    static const halo_weights_policy others[] = {HALO_WEIGHTS_AUTO, HALO_WEIGHTS_STREAM};
    for (size_t i = 0; i < 2; i++) {
        if (others[i] == p->options.weights) continue;
        o = p->options;
        o.weights = others[i];
        if (!fits(s, m, &o, tmp)) continue;
        if (others[i] == HALO_WEIGHTS_AUTO)
            fix(p, "--weights auto (unset HALO_WEIGHTS / HALO_FORCE_DEVICE_MEM): %s",
                tmp->expert_cache_pool != NO_POOL ? "streams routed experts"
                                                  : "places weights where they fit");
        else
            fix(p, "--weights stream: routed experts stream from disk through an expert cache");
        break;
    }
out:
    free(groups);
    free(tmp);
}

/* ---- public ------------------------------------------------------------------------------- */

halo_status halo_plan_build(const halo_gguf *g, const halo_machine *m,
                            const halo_plan_options *opts, halo_plan **out, halo_error *err) {
    *out = NULL;
    halo_plan_options o = opts ? *opts : (halo_plan_options){0};
    model_sum *s = malloc(sizeof *s);
    if (!s) return halo_fail(err, HALO_E_NOMEM, "plan: out of memory");
    halo_status st = summarize(g, s, err);
    if (st == HALO_OK) st = resolve_backend(m, &o, err);
    if (st != HALO_OK) {
        free(s);
        return st;
    }
    /* Unasked, the context is the default or the model's own, whichever is smaller (a model
     * trained on 4,096 tokens must plan without --ctx). Asked for more, it is refused below. */
    if (!o.n_ctx)
        o.n_ctx =
            s->hp.n_ctx_train && s->hp.n_ctx_train < DEFAULT_CTX ? s->hp.n_ctx_train : DEFAULT_CTX;
    if (!o.n_batch) o.n_batch = DEFAULT_BATCH;
    if (!o.n_seq) o.n_seq = 1;
    if (!o.kv_elem_size) o.kv_elem_size = 4;
    if (!o.host_reserve)
        o.host_reserve = m->host_total / 32 > HALO_GIB ? m->host_total / 32 : HALO_GIB;
    if (!o.device_reserve && o.backend != HALO_BACKEND_CPU) o.device_reserve = HALO_GIB;
    if (s->hp.n_ctx_train && o.n_ctx > s->hp.n_ctx_train) {
        uint32_t train = s->hp.n_ctx_train;
        free(s);
        return halo_fail(err, HALO_E_INVALID_ARG,
                         "plan: context %llu exceeds the model's context_length %u",
                         (unsigned long long)o.n_ctx, train);
    }

    halo_plan *p = calloc(1, sizeof *p);
    uint64_t n_tensors = halo_gguf_tensor_count(g);
    if (p) {
        p->groups = calloc(s->hp.n_layer + 8, sizeof *p->groups);
        p->tensor_pool = malloc(n_tensors ? n_tensors : 1);
    }
    if (!p || !p->groups || !p->tensor_pool) {
        halo_plan_free(p);
        free(s);
        return halo_fail(err, HALO_E_NOMEM, "plan: out of memory");
    }
    p->machine = *m;
    p->options = o;
    p->weight_bytes = s->total;
    p->n_tensors = n_tensors;
    plan_once(s, m, p);
    if (p->refused) {
        /* find_fixes replans in a scratch plan; p keeps its own placement and reason. */
        find_fixes(s, m, p);
    }
    finish_pools(p, m);
    for (uint64_t i = 0; i < n_tensors; i++) {
        int32_t layer;
        halo_group_role role = halo_mem_tensor_role(halo_gguf_tensor_at(g, i)->name, &layer);
        p->tensor_pool[i] = NO_POOL;
        for (size_t k = 0; k < p->n_groups; k++)
            if (p->groups[k].role == role &&
                (role != HALO_ROLE_ROUTED_EXPERTS || p->groups[k].layer == layer))
                p->tensor_pool[i] = (uint8_t)p->groups[k].pool;
    }
    free(s);
    *out = p;
    return HALO_OK;
}

void halo_plan_free(halo_plan *p) {
    if (!p) return;
    free(p->groups);
    free(p->tensor_pool);
    free(p);
}
