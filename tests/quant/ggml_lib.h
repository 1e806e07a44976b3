/* Loads ggml's own libraries (llama.cpp v0.5.0, from the npm package
 * @node-llama-cpp/linux-x64@3.22.1 that scripts/fetch-ggml.sh installs) so tests and the
 * benchmark can compare halo against ggml's dequantizers, quantizers and CPU dot products.
 * The structs below restate ggml's public interface (ggml.h, ggml-cpu.h) for dlsym use. */
#ifndef HALO_TESTS_QUANT_GGML_LIB_H
#define HALO_TESTS_QUANT_GGML_LIB_H

#include <dlfcn.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef void (*ggml_to_float_fn)(const void *x, float *y, int64_t k);
typedef void (*ggml_from_float_fn)(const float *x, void *y, int64_t k);
typedef void (*ggml_vec_dot_fn)(int n, float *s, size_t bs, const void *x, size_t bx, const void *y,
                                size_t by, int nrc);

struct ggml_type_traits { /* ggml.h */
    const char *type_name;
    int64_t blck_size;
    int64_t blck_size_interleave;
    size_t type_size;
    bool is_quantized;
    ggml_to_float_fn to_float;
    ggml_from_float_fn from_float_ref;
};

struct ggml_type_traits_cpu { /* ggml-cpu.h */
    ggml_from_float_fn from_float;
    ggml_vec_dot_fn vec_dot;
    int vec_dot_type;
    int64_t nrows;
};

typedef struct ggml_lib {
    void *base, *cpu;
    const struct ggml_type_traits *(*get_type_traits)(int type);
    size_t (*type_size)(int type);
    int64_t (*blck_size)(int type);
    const struct ggml_type_traits_cpu *(*get_type_traits_cpu)(int type);
    const char *cpu_variant;
} ggml_lib;

#ifndef HALO_GGML_DIR
#define HALO_GGML_DIR "third_party/node-llama-cpp-linux-x64/bins/linux-x64"
#endif

static inline const char *ggml_lib_dir(void) {
    const char *env = getenv("HALO_GGML_DIR");
    return env && *env ? env : HALO_GGML_DIR;
}

static inline void *ggml_lib_sym(void *h, const char *name) {
    void *p = dlsym(h, name);
    if (!p) fprintf(stderr, "ggml: symbol %s not found: %s\n", name, dlerror());
    return p;
}

/* Opens libggml-base.so (and, with want_cpu, the best libggml-cpu-<variant>.so this CPU runs).
 * Returns false with a message naming the fix when the package is missing. */
static inline bool ggml_lib_open(ggml_lib *g, bool want_cpu) {
    char path[4096];
    *g = (ggml_lib){0};
    snprintf(path, sizeof path, "%s/libggml-base.so", ggml_lib_dir());
    g->base = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    if (!g->base) {
        fprintf(stderr,
                "cannot load ggml (%s): %s\n"
                "run scripts/fetch-ggml.sh to install @node-llama-cpp/linux-x64@3.22.1, or point "
                "HALO_GGML_DIR at its bins/linux-x64 directory\n",
                path, dlerror());
        return false;
    }
    *(void **)&g->get_type_traits = ggml_lib_sym(g->base, "ggml_get_type_traits");
    *(void **)&g->type_size = ggml_lib_sym(g->base, "ggml_type_size");
    *(void **)&g->blck_size = ggml_lib_sym(g->base, "ggml_blck_size");
    if (!g->get_type_traits || !g->type_size || !g->blck_size) return false;
    if (!want_cpu) return true;
    /* Most capable first; each variant is built for one CPU generation. */
    struct {
        const char *name;
        bool ok;
    } variants[] = {
        {"zen4", __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                     __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni") &&
                     __builtin_cpu_supports("avx512vbmi") && __builtin_cpu_supports("avx512bf16")},
        {"haswell", __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                        __builtin_cpu_supports("f16c") && __builtin_cpu_supports("bmi2")},
        {"x64", true},
    };
    for (size_t i = 0; i < sizeof variants / sizeof variants[0] && !g->cpu; i++) {
        if (!variants[i].ok) continue;
        snprintf(path, sizeof path, "%s/libggml-cpu-%s.so", ggml_lib_dir(), variants[i].name);
        g->cpu = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
        if (g->cpu) g->cpu_variant = variants[i].name;
    }
    if (!g->cpu) {
        fprintf(stderr, "cannot load a libggml-cpu-*.so from %s: %s\n", ggml_lib_dir(), dlerror());
        return false;
    }
    void (*cpu_init)(void);
    *(void **)&cpu_init = ggml_lib_sym(g->cpu, "ggml_cpu_init");
    *(void **)&g->get_type_traits_cpu = ggml_lib_sym(g->cpu, "ggml_get_type_traits_cpu");
    if (!cpu_init || !g->get_type_traits_cpu) return false;
    cpu_init();
    return true;
}

static inline void ggml_lib_close(ggml_lib *g) {
    if (g->cpu) dlclose(g->cpu);
    if (g->base) dlclose(g->base);
    *g = (ggml_lib){0};
}

#endif
