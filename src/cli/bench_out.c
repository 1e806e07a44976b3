/* `halo bench` output: llama-bench's md, csv, json and jsonl (llama.cpp v0.5.0,
 * tools/llama-bench/llama-bench.cpp: the same field names, in the same order, with halo's own
 * fields after them, so scripts that read llama-bench's output read halo's), and an SVG plot. */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "cli/bench.h"
#include "cli/cli.h"

typedef enum ftype { F_STR, F_INT, F_FLOAT } ftype;

typedef struct field {
    const char *name;
    ftype type;
} field;

/* llama-bench's fields that apply to halo, then halo's. */
static const field fields[] = {
    {"build_commit", F_STR},    {"build_number", F_INT},
    {"cpu_info", F_STR},        {"gpu_info", F_STR},
    {"backends", F_STR},        {"model_filename", F_STR},
    {"model_type", F_STR},      {"model_size", F_INT},
    {"model_n_params", F_INT},  {"n_batch", F_INT},
    {"n_ubatch", F_INT},        {"n_threads", F_INT},
    {"type_k", F_STR},          {"type_v", F_STR},
    {"n_prompt", F_INT},        {"n_gen", F_INT},
    {"n_depth", F_INT},         {"test_time", F_STR},
    {"avg_ns", F_INT},          {"stddev_ns", F_INT},
    {"avg_ts", F_FLOAT},        {"stddev_ts", F_FLOAT},
    {"backend", F_STR},         {"weights", F_STR},
    {"bytes_per_token", F_INT}, {"bandwidth_gbs", F_FLOAT},
    {"roofline_ts", F_FLOAT},   {"roofline_fraction", F_FLOAT},
    {"peak_host_bytes", F_INT}, {"peak_device_bytes", F_INT},
    {"placement", F_STR},       {"host_bandwidth_gbs", F_FLOAT},
    {"device_bandwidth_gbs", F_FLOAT}, {"gpu_host_bandwidth_gbs", F_FLOAT},
};
#define N_FIELDS (sizeof fields / sizeof fields[0])

/* The value of field i as text (unquoted). */
static void value(const bench_result *r, size_t i, char *buf, size_t size) {
    const char *n = fields[i].name;
#define S(x) snprintf(buf, size, "%s", x)
#define U(x) snprintf(buf, size, "%" PRIu64, (uint64_t)(x))
#define D(x) snprintf(buf, size, "%.6f", (double)(x))
    if (!strcmp(n, "build_commit"))
        S("halo-" HALO_VERSION);
    else if (!strcmp(n, "build_number"))
        U(0);
    else if (!strcmp(n, "cpu_info"))
        S(r->cpu_info);
    else if (!strcmp(n, "gpu_info"))
        S(r->gpu_info);
    else if (!strcmp(n, "backends"))
        S(r->backends);
    else if (!strcmp(n, "model_filename"))
        S(r->model_filename);
    else if (!strcmp(n, "model_type"))
        S(r->model_type);
    else if (!strcmp(n, "model_size"))
        U(r->model_size);
    else if (!strcmp(n, "model_n_params"))
        U(r->model_n_params);
    else if (!strcmp(n, "n_batch"))
        U(r->n_batch);
    else if (!strcmp(n, "n_ubatch"))
        U(r->n_ubatch);
    else if (!strcmp(n, "n_threads"))
        U(r->n_threads);
    else if (!strcmp(n, "type_k") || !strcmp(n, "type_v"))
        S("f32");
    else if (!strcmp(n, "n_prompt"))
        U(r->n_prompt);
    else if (!strcmp(n, "n_gen"))
        U(r->n_gen);
    else if (!strcmp(n, "n_depth"))
        U(r->n_depth);
    else if (!strcmp(n, "test_time"))
        S(r->test_time);
    else if (!strcmp(n, "avg_ns"))
        U(llround(r->avg_ns));
    else if (!strcmp(n, "stddev_ns"))
        U(llround(r->stddev_ns));
    else if (!strcmp(n, "avg_ts"))
        D(r->avg_ts);
    else if (!strcmp(n, "stddev_ts"))
        D(r->stddev_ts);
    else if (!strcmp(n, "backend"))
        S(r->backend);
    else if (!strcmp(n, "weights"))
        S(r->weights);
    else if (!strcmp(n, "bytes_per_token"))
        U(r->bytes_per_token);
    else if (!strcmp(n, "bandwidth_gbs"))
        D(r->bandwidth_gbs);
    else if (!strcmp(n, "roofline_ts"))
        D(r->roofline_ts);
    else if (!strcmp(n, "roofline_fraction"))
        D(r->roofline_fraction);
    else if (!strcmp(n, "peak_host_bytes"))
        U(r->peak_host_bytes);
    else if (!strcmp(n, "peak_device_bytes"))
        U(r->peak_device_bytes);
    else if (!strcmp(n, "host_bandwidth_gbs"))
        D(r->host_bandwidth_gbs);
    else if (!strcmp(n, "device_bandwidth_gbs"))
        D(r->device_bandwidth_gbs);
    else if (!strcmp(n, "gpu_host_bandwidth_gbs"))
        D(r->gpu_host_bandwidth_gbs);
    else if (!strcmp(n, "placement"))
        S(r->placement);
    else
        S("");
#undef S
#undef U
#undef D
}

void bench_test_name(const bench_result *r, bool with_depth, char *buf, unsigned size) {
    if (r->n_prompt && !r->n_gen)
        snprintf(buf, size, "pp%u", r->n_prompt);
    else if (r->n_gen && !r->n_prompt)
        snprintf(buf, size, "tg%u", r->n_gen);
    else
        snprintf(buf, size, "pp%u+tg%u", r->n_prompt, r->n_gen);
    size_t len = strlen(buf);
    if (with_depth && r->n_depth) snprintf(buf + len, size - len, " @ d%u", r->n_depth);
}

static void put_json_string(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static void put_csv(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"') fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

static void json_fields(FILE *f, const bench_result *r, const char *indent, const char *sep) {
    char buf[640];
    for (size_t i = 0; i < N_FIELDS; i++) {
        value(r, i, buf, sizeof buf);
        fprintf(f, "%s\"%s\": ", indent, fields[i].name);
        if (fields[i].type == F_STR)
            put_json_string(f, buf);
        else
            fputs(buf, f);
        fputs(sep, f);
    }
    fprintf(f, "%s\"samples_ns\": [ ", indent);
    for (uint32_t k = 0; k < r->n_samples; k++)
        fprintf(f, "%s%" PRIu64, k ? ", " : "", r->samples_ns[k]);
    fprintf(f, " ]%s%s\"samples_ts\": [ ", sep, indent);
    for (uint32_t k = 0; k < r->n_samples; k++) {
        uint32_t n = r->n_prompt + r->n_gen;
        double ts = r->samples_ns[k] ? 1e9 * n / (double)r->samples_ns[k] : 0.0;
        fprintf(f, "%s%.6f", k ? ", " : "", ts);
    }
    fputs(" ]", f);
}

void bench_print_header(FILE *f, bench_format fmt) {
    switch (fmt) {
    case BENCH_CSV:
        for (size_t i = 0; i < N_FIELDS; i++)
            fprintf(f, "%s%s", i ? "," : "", fields[i].name);
        fputc('\n', f);
        break;
    case BENCH_JSON:
        fputs("[\n", f);
        break;
    case BENCH_JSONL:
        break;
    case BENCH_MD:
        fprintf(f, "| %-40s | %10s | %9s | %7s | %7s | %7s | %16s | %20s | %10s | %8s |\n", "model",
                "size", "params", "backend", "weights", "threads", "test", "t/s", "B/token",
                "roofline");
        fprintf(f,
                "| %.40s | %.9s: | %.8s: | %.7s | %.7s | %.6s: | %.15s: | %.19s: | %.9s: "
                "| %.7s: |\n",
                "----------------------------------------", "----------", "---------", "-------",
                "-------", "-------", "----------------", "--------------------", "----------",
                "--------");
        break;
    }
    fflush(f);
}

void bench_print_result(FILE *f, bench_format fmt, const bench_result *r, bool first) {
    char buf[640];
    switch (fmt) {
    case BENCH_CSV:
        for (size_t i = 0; i < N_FIELDS; i++) {
            value(r, i, buf, sizeof buf);
            if (i) fputc(',', f);
            put_csv(f, buf);
        }
        fputc('\n', f);
        break;
    case BENCH_JSON:
        if (!first) fputs(",\n", f);
        fputs("  {\n", f);
        json_fields(f, r, "    ", ",\n");
        fputs("\n  }", f);
        break;
    case BENCH_JSONL:
        fputc('{', f);
        json_fields(f, r, "", ", ");
        fputs("}\n", f);
        break;
    case BENCH_MD: {
        char size[32], params[32], test[48], ts[48], bpt[32], roof[16];
        cli_bytes(r->model_size, size, sizeof size);
        snprintf(params, sizeof params, r->model_n_params < 1000000000ull ? "%.2f M" : "%.2f B",
                 r->model_n_params < 1000000000ull ? r->model_n_params / 1e6
                                                   : r->model_n_params / 1e9);
        bench_test_name(r, true, test, sizeof test);
        snprintf(ts, sizeof ts, "%.2f ± %.2f", r->avg_ts, r->stddev_ts);
        cli_bytes(r->bytes_per_token, bpt, sizeof bpt);
        if (r->roofline_fraction > 0)
            snprintf(roof, sizeof roof, "%.1f %%", 100.0 * r->roofline_fraction);
        else
            snprintf(roof, sizeof roof, "-");
        /* the ± sign is two bytes in UTF-8: one more column of padding, as llama-bench does */
        fprintf(f, "| %-40.40s | %10s | %9s | %7s | %7s | %7u | %16s | %21s | %10s | %8s |\n",
                r->model_type, size, params, r->backend, r->weights, r->n_threads, test, ts, bpt,
                roof);
        break;
    }
    }
    fflush(f);
}

void bench_print_footer(FILE *f, bench_format fmt) {
    if (fmt == BENCH_JSON) fputs("\n]\n", f);
    if (fmt == BENCH_MD) fprintf(f, "\nbuild: halo %s\n", HALO_VERSION);
    fflush(f);
}

/* ---- the SVG plot -------------------------------------------------------------------------- */

static void put_xml(FILE *f, const char *s) {
    for (; *s; s++) {
        switch (*s) {
        case '<':
            fputs("&lt;", f);
            break;
        case '>':
            fputs("&gt;", f);
            break;
        case '&':
            fputs("&amp;", f);
            break;
        case '"':
            fputs("&quot;", f);
            break;
        case '\'':
            fputs("&apos;", f);
            break;
        default:
            if ((unsigned char)*s >= 0x20 || *s == '\t') fputc(*s, f);
        }
    }
}

/* Series key: the same model, backend, weights and test size (pp512, tg128), across depths. */
static bool same_series(const bench_result *a, const bench_result *b) {
    return !strcmp(a->model_filename, b->model_filename) && !strcmp(a->backend, b->backend) &&
           !strcmp(a->weights, b->weights) && a->n_prompt == b->n_prompt && a->n_gen == b->n_gen;
}

static const char *const colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                     "#9467bd", "#8c564b", "#e377c2", "#17becf"};

/* Panel size; the legend below the plot grows by a line per series. */
enum { W = 520, PH = 184, ML = 64, MR = 16, MT = 36, LEGEND = 48 };

static uint32_t count_series(const bench_result *r, uint32_t n, bool gen) {
    uint32_t c = 0;
    for (uint32_t i = 0; i < n; i++) {
        if ((r[i].n_gen > 0) != gen) continue;
        bool seen = false;
        for (uint32_t j = 0; j < i && !seen; j++)
            seen = same_series(&r[j], &r[i]);
        c += !seen;
    }
    return c;
}

/* One panel: prefill (gen = false) or decode tokens/s against depth. */
static void panel(FILE *f, const bench_result *r, uint32_t n, bool gen, int x0) {
    double max_d = 0, max_ts = 0;
    for (uint32_t i = 0; i < n; i++) {
        if ((r[i].n_gen > 0) != gen) continue;
        if (r[i].n_depth > max_d) max_d = r[i].n_depth;
        if (r[i].avg_ts + r[i].stddev_ts > max_ts) max_ts = r[i].avg_ts + r[i].stddev_ts;
    }
    if (max_d <= 0) max_d = 1;
    if (max_ts <= 0) max_ts = 1;
    max_ts *= 1.1;
    const int pw = W - ML - MR, ph = PH;
    fprintf(f, "<g class=\"panel\" data-kind=\"%s\" transform=\"translate(%d,0)\">\n",
            gen ? "decode" : "prefill", x0);
    fprintf(f, "<text x=\"%d\" y=\"22\" font-size=\"15\" text-anchor=\"middle\">%s</text>\n",
            ML + pw / 2, gen ? "decode (tokens/s)" : "prefill (tokens/s)");
    fprintf(f,
            "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" "
            "stroke=\"#888\"/>\n",
            ML, MT, pw, ph);
    for (int k = 0; k <= 4; k++) {
        double ts = max_ts * k / 4, d = max_d * k / 4;
        int y = MT + ph - (int)(ph * k / 4), x = ML + (int)(pw * k / 4);
        fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"11\" text-anchor=\"end\">%.4g</text>\n",
                ML - 4, y + 4, ts);
        fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"11\" text-anchor=\"middle\">%.0f</text>\n",
                x, MT + ph + 14, d);
    }
    fprintf(f,
            "<text x=\"%d\" y=\"%d\" font-size=\"12\" text-anchor=\"middle\">depth "
            "(tokens)</text>\n",
            ML + pw / 2, MT + ph + 30);
    uint32_t series = 0;
    for (uint32_t i = 0; i < n; i++) {
        if ((r[i].n_gen > 0) != gen) continue;
        bool seen = false;
        for (uint32_t j = 0; j < i && !seen; j++)
            seen = same_series(&r[j], &r[i]);
        if (seen) continue;
        const char *c = colors[series % (sizeof colors / sizeof colors[0])];
        char test[32];
        bench_test_name(&r[i], false, test, sizeof test);
        fputs("<g class=\"series\" data-backend=\"", f);
        put_xml(f, r[i].backend);
        fputs("\" data-model=\"", f);
        put_xml(f, r[i].model_filename);
        fprintf(f, "\" data-test=\"%s\" data-weights=\"", test);
        put_xml(f, r[i].weights);
        fprintf(f, "\">\n<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", c);
        /* points in depth order */
        double last = -1;
        for (;;) {
            int best = -1;
            for (uint32_t j = i; j < n; j++)
                if (same_series(&r[j], &r[i]) && r[j].n_depth > last &&
                    (best < 0 || r[j].n_depth < r[best].n_depth))
                    best = (int)j;
            if (best < 0) break;
            last = r[best].n_depth;
            fprintf(f, "%.1f,%.1f ", ML + pw * r[best].n_depth / max_d,
                    MT + ph - ph * r[best].avg_ts / max_ts);
        }
        fputs("\"/>\n", f);
        for (uint32_t j = i; j < n; j++)
            if (same_series(&r[j], &r[i]))
                fprintf(f,
                        "<circle class=\"point\" cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\" "
                        "data-depth=\"%u\" data-ts=\"%.3f\" data-stddev=\"%.3f\"/>\n",
                        ML + pw * r[j].n_depth / max_d, MT + ph - ph * r[j].avg_ts / max_ts, c,
                        r[j].n_depth, r[j].avg_ts, r[j].stddev_ts);
        int ly = MT + ph + LEGEND + 14 * (int)series;
        fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"11\" fill=\"%s\">", ML, ly, c);
        put_xml(f, r[i].model_type);
        fprintf(f, " · %s · %s · weights ", r[i].backend, test);
        put_xml(f, r[i].weights);
        fputs("</text>\n</g>\n", f);
        series++;
    }
    fputs("</g>\n", f);
}

bool bench_write_svg(const char *path, const bench_result *r, uint32_t n) {
    FILE *f = fopen(path, "w");
    if (!f) return false;
    uint32_t most = count_series(r, n, false) > count_series(r, n, true) ? count_series(r, n, false)
                                                                         : count_series(r, n, true);
    int h = MT + PH + LEGEND + 14 * (int)most + 8;
    fprintf(f,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
            "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\">\n"
            "<title>halo bench: tokens/s against depth</title>\n"
            "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
            2 * W, h, 2 * W, h);
    panel(f, r, n, false, 0);
    panel(f, r, n, true, W);
    fputs("</svg>\n", f);
    return fclose(f) == 0;
}
