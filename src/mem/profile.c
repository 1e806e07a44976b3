/* Machine profiles: JSON files under profiles/ that stand in for the probe (`--profile NAME`).
 * The format is in docs/plan.md; every key is checked, unknown keys are errors (a typo in a
 * profile must not silently become a 0-byte pool). */
#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "halo/plan.h"

#ifndef HALO_PROFILE_DIR
#define HALO_PROFILE_DIR "profiles"
#endif

static char *slurp(const char *path, size_t max) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = malloc(max + 1);
    size_t n = buf ? fread(buf, 1, max, f) : 0;
    int failed = ferror(f), saved = errno;
    fclose(f);
    if (!buf || failed) {
        free(buf);
        errno = failed ? saved : ENOMEM;
        return NULL;
    }
    buf[n] = 0;
    return buf;
}

static bool key_allowed(const char *key, const char *const *allowed) {
    for (; *allowed; allowed++)
        if (!strcmp(key, *allowed)) return true;
    return false;
}

static halo_status check_keys(const cJSON *obj, const char *where, const char *const *allowed,
                              halo_error *err) {
    if (!cJSON_IsObject(obj)) return halo_fail(err, HALO_E_BAD_VALUE, "%s: not an object", where);
    for (const cJSON *c = obj->child; c; c = c->next)
        if (!key_allowed(c->string, allowed))
            return halo_fail(err, HALO_E_BAD_VALUE, "%s: unknown key \"%s\"", where, c->string);
    return HALO_OK;
}

/* A non-negative number of MiB as bytes; missing gives 0 unless required. */
static halo_status get_mib(const cJSON *obj, const char *key, bool required, uint64_t *out,
                           halo_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v) {
        *out = 0;
        return required ? halo_fail(err, HALO_E_NOT_FOUND, "missing \"%s\"", key) : HALO_OK;
    }
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 1e9)
        return halo_fail(err, HALO_E_BAD_VALUE, "\"%s\" must be a number of MiB", key);
    *out = (uint64_t)llround(v->valuedouble * (double)HALO_MIB);
    return HALO_OK;
}

static halo_status get_num(const cJSON *obj, const char *key, double *out, halo_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v) return HALO_OK;
    if (!cJSON_IsNumber(v) || v->valuedouble < 0)
        return halo_fail(err, HALO_E_BAD_VALUE, "\"%s\" must be a non-negative number", key);
    *out = v->valuedouble;
    return HALO_OK;
}

static halo_status get_str(const cJSON *obj, const char *key, char *dst, size_t size,
                           halo_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v) return HALO_OK;
    if (!cJSON_IsString(v)) return halo_fail(err, HALO_E_BAD_VALUE, "\"%s\" must be a string", key);
    snprintf(dst, size, "%s", v->valuestring);
    return HALO_OK;
}

static halo_status get_bool(const cJSON *obj, const char *key, bool *out, halo_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v) return HALO_OK;
    if (!cJSON_IsBool(v)) return halo_fail(err, HALO_E_BAD_VALUE, "\"%s\" must be true/false", key);
    *out = cJSON_IsTrue(v);
    return HALO_OK;
}

#define TRY(x)                                                                                     \
    do {                                                                                           \
        halo_status try_st_ = (x);                                                                 \
        if (try_st_ != HALO_OK) return try_st_;                                                    \
    } while (0)

static halo_status parse_gpu(const cJSON *gpu, halo_machine *m, halo_error *err) {
    static const char *const keys[] = {
        "vendor",           "name",    "integrated",    "vram_mib", "gtt_mib", "ttm_pages_limit",
        "pinned_limit_mib", "managed", "bandwidth_gbs", NULL};
    TRY(check_keys(gpu, "gpu", keys, err));
    char vendor[16] = "";
    TRY(get_str(gpu, "vendor", vendor, sizeof vendor, err));
    if (!strcmp(vendor, "amd"))
        m->gpu_vendor = HALO_GPU_AMD;
    else if (!strcmp(vendor, "nvidia"))
        m->gpu_vendor = HALO_GPU_NVIDIA;
    else if (!strcmp(vendor, "apple"))
        m->gpu_vendor = HALO_GPU_APPLE;
    else
        return halo_fail(err, HALO_E_BAD_VALUE, "gpu.vendor must be amd, nvidia or apple");
    TRY(get_str(gpu, "name", m->gpu_name, sizeof m->gpu_name, err));
    TRY(get_bool(gpu, "integrated", &m->gpu_integrated, err));
    TRY(get_mib(gpu, "vram_mib", true, &m->vram_total, err));
    TRY(get_mib(gpu, "gtt_mib", false, &m->gtt_total, err));
    TRY(get_mib(gpu, "pinned_limit_mib", false, &m->gpu_host_limit, err));
    double pages = 0;
    TRY(get_num(gpu, "ttm_pages_limit", &pages, err));
    m->ttm_pages_limit = (uint64_t)pages;
    TRY(get_bool(gpu, "managed", &m->has_managed, err));
    TRY(get_num(gpu, "bandwidth_gbs", &m->device_bandwidth_gbs, err));
    return HALO_OK;
}

static halo_status parse_profile(const cJSON *j, halo_machine *m, halo_error *err) {
    static const char *const top[] = {"name", "description", "sources", "notes",
                                      "host", "gpu",         "disk",    NULL};
    static const char *const host_keys[] = {"total_mib", "available_mib", "bandwidth_gbs", NULL};
    static const char *const disk_keys[] = {"kind", "read_gbs", NULL};
    TRY(check_keys(j, "profile", top, err));
    TRY(get_str(j, "name", m->name, sizeof m->name, err));
    TRY(get_str(j, "description", m->description, sizeof m->description, err));
    const cJSON *sources = cJSON_GetObjectItemCaseSensitive(j, "sources");
    if (!cJSON_IsArray(sources) || cJSON_GetArraySize(sources) == 0)
        return halo_fail(err, HALO_E_BAD_VALUE,
                         "\"sources\" must list where the numbers come from");

    const cJSON *host = cJSON_GetObjectItemCaseSensitive(j, "host");
    if (!host) return halo_fail(err, HALO_E_NOT_FOUND, "missing \"host\"");
    TRY(check_keys(host, "host", host_keys, err));
    TRY(get_mib(host, "total_mib", true, &m->host_total, err));
    TRY(get_mib(host, "available_mib", false, &m->host_available, err));
    if (!m->host_available) m->host_available = m->host_total;
    if (m->host_available > m->host_total)
        return halo_fail(err, HALO_E_BAD_VALUE, "host.available_mib exceeds host.total_mib");
    TRY(get_num(host, "bandwidth_gbs", &m->host_bandwidth_gbs, err));

    const cJSON *gpu = cJSON_GetObjectItemCaseSensitive(j, "gpu");
    if (gpu && !cJSON_IsNull(gpu)) TRY(parse_gpu(gpu, m, err));

    const cJSON *disk = cJSON_GetObjectItemCaseSensitive(j, "disk");
    snprintf(m->disk_kind, sizeof m->disk_kind, "unknown");
    m->disk_read_gbs = 1.0;
    m->disk_read_estimated = true;
    if (disk) {
        TRY(check_keys(disk, "disk", disk_keys, err));
        TRY(get_str(disk, "kind", m->disk_kind, sizeof m->disk_kind, err));
        double gbs = 0;
        TRY(get_num(disk, "read_gbs", &gbs, err));
        if (gbs > 0) {
            m->disk_read_gbs = gbs;
            m->disk_read_estimated = false; /* the profile's sources say how it was found */
        }
    }
    return HALO_OK;
}

static halo_status load_file(const char *path, halo_machine *m, halo_error *err) {
    char *text = slurp(path, 1 << 20);
    if (!text) return halo_fail(err, HALO_E_IO, "%s: %s", path, strerror(errno));
    cJSON *j = cJSON_Parse(text);
    free(text);
    if (!j) return halo_fail(err, HALO_E_BAD_VALUE, "%s: not valid JSON", path);
    memset(m, 0, sizeof *m);
    halo_status st = parse_profile(j, m, err);
    cJSON_Delete(j);
    if (st != HALO_OK) return halo_error_prefix(err, "profile %s: ", path);
    snprintf(m->source, sizeof m->source, "profile %s", path);
    return HALO_OK;
}

halo_status halo_machine_load_profile(const char *name, halo_machine *m, halo_error *err) {
    if (!name || !*name) return halo_fail(err, HALO_E_INVALID_ARG, "empty profile name");
    size_t len = strlen(name);
    if (strchr(name, '/') || (len > 5 && !strcmp(name + len - 5, ".json")))
        return load_file(name, m, err);
    for (const char *p = name; *p; p++)
        if (!(isalnum((unsigned char)*p) || *p == '-' || *p == '_' || *p == '.'))
            return halo_fail(err, HALO_E_INVALID_ARG, "profile name \"%s\" has odd characters",
                             name);
    const char *env = getenv("HALO_PROFILES");
    const char *dirs[] = {env && *env ? env : NULL, HALO_PROFILE_DIR, "profiles"};
    char path[1024], tried[700] = "";
    size_t at = 0;
    for (size_t i = 0; i < 3; i++) {
        if (!dirs[i]) continue;
        snprintf(path, sizeof path, "%s/%s.json", dirs[i], name);
        FILE *f = fopen(path, "rb");
        if (f) {
            fclose(f);
            return load_file(path, m, err);
        }
        if (at < sizeof tried)
            at += (size_t)snprintf(tried + at, sizeof tried - at, "%s%s", at ? ", " : "", dirs[i]);
    }
    return halo_fail(err, HALO_E_NOT_FOUND, "profile \"%s\" not found (looked in %s)", name, tried);
}
