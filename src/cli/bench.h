/* What `halo bench` (bench.c: options, measuring) shares with bench_out.c (the md, csv, json and
 * jsonl printers and the SVG plot). */
#ifndef HALO_CLI_BENCH_H
#define HALO_CLI_BENCH_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* One test: a prompt (pp) or generation (tg) run at a depth, on one model and backend, repeated. */
typedef struct bench_result {
    /* llama-bench's fields (tools/llama-bench/llama-bench.cpp, test::get_fields) */
    char cpu_info[128], gpu_info[128], backends[32];
    char model_filename[512], model_type[128];
    uint64_t model_size, model_n_params;
    uint32_t n_batch, n_ubatch, n_threads, n_prompt, n_gen, n_depth;
    char test_time[32];
    uint64_t *samples_ns;
    uint32_t n_samples;
    double avg_ns, stddev_ns, avg_ts, stddev_ts; /* ts: tokens per second over the samples */
    /* halo's own */
    char backend[16], weights[16];
    uint64_t bytes_per_token; /* weight bytes one decoded token reads (docs/bench.md) */
    double bandwidth_gbs;     /* the read bandwidth this backend's decode can reach, from the
                               * measured bandwidths of the pools its weights sit in; 0 = unknown */
    double roofline_ts;       /* bandwidth / bytes_per_token (tg tests); 0 = unknown */
    double roofline_fraction; /* avg_ts / roofline_ts; 0 = unknown */
    uint64_t peak_host_bytes, peak_device_bytes; /* 0 = unknown */
    char placement[192];                         /* the plan's bytes per pool */
    /* measured in this run (GB/s, 0 = unknown or not this backend's): host memory read by the
     * run's threads, device memory and pinned host memory read by the GPU */
    double host_bandwidth_gbs, device_bandwidth_gbs, gpu_host_bandwidth_gbs;
} bench_result;

typedef enum bench_format { BENCH_MD = 0, BENCH_CSV, BENCH_JSON, BENCH_JSONL } bench_format;

/* Printers in llama-bench's formats (same field names and order, halo's fields after). */
void bench_print_header(FILE *f, bench_format fmt);
void bench_print_result(FILE *f, bench_format fmt, const bench_result *r, bool first);
void bench_print_footer(FILE *f, bench_format fmt);

/* The SVG plot: prefill and decode tokens/s against depth, one line per model and backend (and
 * test size). Returns false when the file cannot be written. */
bool bench_write_svg(const char *path, const bench_result *r, uint32_t n);

/* "pp512", "tg128", "pp512 @ d4096" as llama-bench names tests. */
void bench_test_name(const bench_result *r, bool with_depth, char *buf, unsigned size);

#endif
