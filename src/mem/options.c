/* Names and strict parsing of the plan's options: backends, weight policies, sizes, and the
 * environment variables that mirror the command-line overrides. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/error.h"
#include "halo/plan.h"

static const char *const pool_names[HALO_POOL_COUNT] = {"device", "gpu-host", "managed", "host",
                                                        "disk"};
static const char *const backend_names[] = {"auto", "cpu", "cuda", "hip", "vulkan", "metal"};
static const char *const weights_names[] = {"auto", "device", "host", "managed", "stream"};

const char *halo_pool_name(halo_pool_kind kind) {
    return (unsigned)kind < HALO_POOL_COUNT ? pool_names[kind] : "?";
}

const char *halo_backend_name(halo_backend_kind kind) {
    return (unsigned)kind <= HALO_BACKEND_METAL ? backend_names[kind] : "?";
}

const char *halo_weights_name(halo_weights_policy p) {
    return (unsigned)p <= HALO_WEIGHTS_STREAM ? weights_names[p] : "?";
}

halo_status halo_backend_parse(const char *s, halo_backend_kind *out, halo_error *err) {
    for (unsigned i = 0; s && i < sizeof backend_names / sizeof *backend_names; i++)
        if (!strcmp(s, backend_names[i])) {
            *out = (halo_backend_kind)i;
            return HALO_OK;
        }
    return halo_fail(err, HALO_E_INVALID_ARG,
                     "backend \"%s\": expected auto, cpu, cuda, hip, vulkan or metal", s ? s : "");
}

halo_status halo_weights_parse(const char *s, halo_weights_policy *out, halo_error *err) {
    for (unsigned i = 0; s && i < sizeof weights_names / sizeof *weights_names; i++)
        if (!strcmp(s, weights_names[i])) {
            *out = (halo_weights_policy)i;
            return HALO_OK;
        }
    return halo_fail(err, HALO_E_INVALID_ARG,
                     "weights \"%s\": expected auto, device, host, managed or stream", s ? s : "");
}

halo_status halo_size_parse(const char *s, uint64_t *out, halo_error *err) {
    static const struct {
        const char *unit;
        double mult;
    } units[] = {{"", 1},         {"B", 1},      {"K", 0x1p10},   {"KiB", 0x1p10}, {"M", 0x1p20},
                 {"MiB", 0x1p20}, {"G", 0x1p30}, {"GiB", 0x1p30}, {"T", 0x1p40},   {"TiB", 0x1p40},
                 {"KB", 1e3},     {"MB", 1e6},   {"GB", 1e9},     {"TB", 1e12}};
    if (!s || !*s || !(s[0] >= '0' && s[0] <= '9'))
        return halo_fail(err, HALO_E_INVALID_ARG, "size \"%s\": expected a number such as 89G",
                         s ? s : "");
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || !isfinite(v) || v < 0) goto bad;
    for (size_t i = 0; i < sizeof units / sizeof *units; i++) {
        if (strcasecmp(end, units[i].unit) != 0) continue;
        /* Case matters between K/KiB (binary) and KB (decimal) only through the B suffix. */
        double bytes = v * units[i].mult;
        if (bytes > 0x1p62) goto bad;
        *out = (uint64_t)llround(bytes);
        return HALO_OK;
    }
bad:
    return halo_fail(err, HALO_E_INVALID_ARG,
                     "size \"%s\": expected a number with an optional unit (K, M, G, T are "
                     "binary; KB, MB, GB, TB decimal)",
                     s);
}

/* A boolean environment flag: unset or empty = off, "0" off, "1" on, anything else an error. */
static halo_status env_flag(const char *name, bool *set, bool *on, halo_error *err) {
    const char *v = getenv(name);
    *set = false;
    *on = false;
    if (!v || !*v) return HALO_OK;
    if (!strcmp(v, "0") || !strcmp(v, "1")) {
        *set = true;
        *on = v[0] == '1';
        return HALO_OK;
    }
    return halo_fail(err, HALO_E_INVALID_ARG, "%s=\"%s\": expected 1 (on) or 0 (off)", name, v);
}

halo_status halo_plan_options_from_env(halo_plan_options *o, halo_error *err) {
    bool force_set = false, force = false; /* newer gcc at -O3 cannot see env_flag sets both */
    halo_status st = env_flag("HALO_FORCE_DEVICE_MEM", &force_set, &force, err);
    if (st != HALO_OK) return st;
    const char *w = getenv("HALO_WEIGHTS");
    if (w && *w) {
        halo_weights_policy p = HALO_WEIGHTS_AUTO;
        if (halo_weights_parse(w, &p, err) != HALO_OK)
            return halo_error_prefix(err, "HALO_WEIGHTS: ");
        if (force && p != HALO_WEIGHTS_DEVICE)
            return halo_fail(err, HALO_E_INVALID_ARG,
                             "HALO_FORCE_DEVICE_MEM=1 contradicts HALO_WEIGHTS=%s", w);
        o->weights = p;
    }
    if (force) o->weights = HALO_WEIGHTS_DEVICE;
    return HALO_OK;
}
