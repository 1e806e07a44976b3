#!/usr/bin/env python3
"""`halo bench`: every output format parses with a standard reader (csv module, json module, an
XML parser for the plot) and carries exactly the tests asked for; repetitions give the mean and
the sample standard deviation of their samples; unknown and unbuilt backends are clear errors.

Run by CTest as: test_bench.py HALO_BIN (from the source root). Uses the tiny golden models, one
thread, few tokens: a few seconds. HALO_TEST_FULL_WIDTH=1 adds a 1-layer full-width synthetic
model (3.6 GB of memory)."""
import csv
import io
import json
import math
import re
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

HALO = sys.argv[1]
A = "tests/golden/models/tiny-a-f32.gguf"
Q = "tests/golden/models/tiny-q-ds4.gguf"
failures = 0

# llama-bench v0.5.0's fields (tools/llama-bench/llama-bench.cpp, test::get_fields) that apply
LLAMA_FIELDS = ["build_commit", "build_number", "cpu_info", "gpu_info", "backends",
                "model_filename", "model_type", "model_size", "model_n_params", "n_batch",
                "n_ubatch", "n_threads", "type_k", "type_v", "n_prompt", "n_gen", "n_depth",
                "test_time", "avg_ns", "stddev_ns", "avg_ts", "stddev_ts"]
HALO_FIELDS = ["backend", "weights", "bytes_per_token", "bandwidth_gbs", "roofline_ts",
               "roofline_fraction", "peak_host_bytes", "peak_device_bytes", "placement",
               "host_bandwidth_gbs", "device_bandwidth_gbs", "gpu_host_bandwidth_gbs"]


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print("FAIL:", what)


def bench(*args, rc=0):
    p = subprocess.run([HALO, "bench", "-t", "1", *args], capture_output=True, text=True,
                       timeout=300)
    check(p.returncode == rc, f"halo bench {' '.join(args)}: exit {p.returncode}, want {rc}\n"
          f"{p.stderr[-2000:]}")
    return p


# Two models x prompt 8,16 + gen 4 x depths 0,24: 3 tests per depth per model.
ARGS = ["-m", A, "-m", Q, "-p", "8,16", "-n", "4", "-d", "0,24", "-r", "3"]
WANT = sorted((m, p, n, d) for m in (A, Q) for d in (0, 24) for (p, n) in ((8, 0), (16, 0), (0, 4)))


def keys(rows):
    return sorted((r["model_filename"], int(r["n_prompt"]), int(r["n_gen"]), int(r["n_depth"]))
                  for r in rows)


def check_row_stats(r, where):
    """avg/stddev must be the mean and the sample standard deviation of the samples."""
    ts = [float(x) for x in r["samples_ts"]]
    ns = [float(x) for x in r["samples_ns"]]
    check(len(ts) == 3 and len(ns) == 3, f"{where}: 3 samples, got {len(ts)}")
    mean = sum(ts) / len(ts)
    sd = math.sqrt(sum((x - mean) ** 2 for x in ts) / (len(ts) - 1))
    check(abs(float(r["avg_ts"]) - mean) <= 1e-4 * mean, f"{where}: avg_ts {r['avg_ts']} != {mean}")
    check(abs(float(r["stddev_ts"]) - sd) <= 1e-4 * max(sd, 1e-9) + 1e-5,
          f"{where}: stddev_ts {r['stddev_ts']} != {sd}")
    mean_ns = sum(ns) / len(ns)
    check(abs(float(r["avg_ns"]) - mean_ns) <= 1, f"{where}: avg_ns {r['avg_ns']} != {mean_ns}")
    tok = int(r["n_prompt"]) + int(r["n_gen"])
    for t, n in zip(ts, ns):
        check(abs(t - 1e9 * tok / n) <= 1e-3 * t, f"{where}: samples_ts {t} != tokens / time")
    check(mean > 0 and sd > 0, f"{where}: three timed runs differ a little: sd {sd}")


def test_csv_parses_and_carries_the_tests():
    p = bench(*ARGS, "-o", "csv")
    rows = list(csv.DictReader(io.StringIO(p.stdout)))
    check(keys(rows) == WANT, f"csv tests: {keys(rows)}")
    hdr = p.stdout.splitlines()[0].split(",")
    check(hdr[:len(LLAMA_FIELDS)] == LLAMA_FIELDS, f"csv: llama-bench's fields first: {hdr}")
    check(hdr[len(LLAMA_FIELDS):] == HALO_FIELDS, f"csv: halo's fields after: {hdr}")
    for r in rows:
        check(float(r["avg_ts"]) > 0 and int(r["model_size"]) > 0, f"csv row {r}")
        check(r["backends"] == "CPU" and r["n_threads"] == "1", f"csv row backend {r}")
        check(int(r["bytes_per_token"]) <= int(r["model_size"]), "bytes per token <= model")
        # the CPU reads every pool at the host bandwidth: the row's roofline bandwidth is it
        check(float(r["host_bandwidth_gbs"]) > 0, "host bandwidth measured")
        check(abs(float(r["bandwidth_gbs"]) - float(r["host_bandwidth_gbs"])) < 1e-3 *
              float(r["host_bandwidth_gbs"]), "a CPU row's roofline is the host bandwidth")
        check(float(r["device_bandwidth_gbs"]) == 0 and float(r["gpu_host_bandwidth_gbs"]) == 0,
              "no device bandwidth on a CPU row")
        if int(r["n_gen"]):
            check(float(r["bandwidth_gbs"]) > 0, "bandwidth measured")
            check(abs(float(r["roofline_fraction"]) - float(r["avg_ts"]) /
                      float(r["roofline_ts"])) < 1e-3, "roofline fraction = t/s / roofline")
        check(r["placement"].startswith("host "), f"placement: {r['placement']}")
    check("progress" not in p.stdout and "run 3/3" in p.stderr, "progress on stderr only")
    # measured in the run with the run's thread count, over 1 GiB or more unless free memory is
    # short (then a quarter of it, and the line says so)
    m = re.search(r"host read bandwidth [0-9.]+ GB/s \(best of 5 passes, slowest [0-9.]+; "
                  r"1 threads over ([0-9.]+) GiB", p.stderr)
    check(m is not None and (float(m.group(1)) >= 1 or "capped" in p.stderr),
          f"bandwidth line: {p.stderr[:500]}")


def test_json_parses_with_samples():
    p = bench(*ARGS, "-o", "json")
    rows = json.loads(p.stdout)
    check(keys(rows) == WANT, f"json tests: {keys(rows)}")
    for r in rows:
        check(list(r.keys()) == LLAMA_FIELDS + HALO_FIELDS + ["samples_ns", "samples_ts"],
              f"json fields: {list(r.keys())}")
        check(isinstance(r["n_prompt"], int) and isinstance(r["avg_ts"], float),
              "json: numbers are numbers")
        check_row_stats(r, f"json {r['model_filename']} pp{r['n_prompt']} tg{r['n_gen']}")


def test_jsonl_parses_line_by_line():
    p = bench(*ARGS, "-o", "jsonl")
    rows = [json.loads(line) for line in p.stdout.splitlines() if line.strip()]
    check(keys(rows) == WANT, f"jsonl tests: {keys(rows)}")
    for r in rows:
        check_row_stats(r, f"jsonl {r['model_filename']} pp{r['n_prompt']} tg{r['n_gen']}")


def test_markdown_has_a_row_per_test():
    p = bench(*ARGS)
    lines = [l for l in p.stdout.splitlines() if l.startswith("|")]
    check(len(lines) == 2 + len(WANT), f"md: {len(lines)} table lines")
    check("| model" in lines[0] and "t/s" in lines[0], f"md header: {lines[0]}")
    body = "\n".join(lines[2:])
    for t in ("pp8", "pp16", "tg4", "pp8 @ d24", "tg4 @ d24"):
        check(t in body, f"md: test {t} listed")
    check(body.count("±") == len(WANT), "md: mean ± stddev per row")


def test_svg_is_xml_with_a_series_per_model_and_backend():
    with tempfile.TemporaryDirectory() as d:
        svg = os.path.join(d, "speed.svg")
        bench(*ARGS, "-o", "csv", "--plot", svg)
        root = ET.parse(svg).getroot()
        ns = {"s": "http://www.w3.org/2000/svg"}
        check(root.tag == "{http://www.w3.org/2000/svg}svg", f"svg root {root.tag}")
        panels = {g.get("data-kind"): g for g in root.iter("{http://www.w3.org/2000/svg}g")
                  if g.get("class") == "panel"}
        check(set(panels) == {"prefill", "decode"}, f"panels {set(panels)}")
        dec = [g for g in panels["decode"].findall("s:g", ns) if g.get("class") == "series"]
        pre = [g for g in panels["prefill"].findall("s:g", ns) if g.get("class") == "series"]
        # decode: one series per (model, backend); prefill: per (model, backend, prompt size)
        check(sorted((g.get("data-model"), g.get("data-backend")) for g in dec) ==
              [(A, "cpu"), (Q, "cpu")], f"decode series {[g.attrib for g in dec]}")
        check(len(pre) == 4, f"prefill series {len(pre)}")
        for g in dec + pre:
            pts = [c for c in g.findall("s:circle", ns)]
            check(sorted(int(c.get("data-depth")) for c in pts) == [0, 24],
                  "a point per depth")
            check(len(g.find("s:polyline", ns).get("points").split()) == 2, "line through both")


def test_unknown_backend_is_a_usage_error():
    p = bench("-m", A, "-p", "4", "-n", "0", "-r", "1", "--backend", "cpu,tpu", rc=2)
    check("tpu" in p.stderr and p.stdout == "", f"unknown backend named: {p.stderr}")


def test_unbuilt_backend_is_named_before_anything_runs():
    # Backends this build lacks fail before any test with a line naming them; ones that are
    # built (a later build may have them) must run or fail cleanly, never crash.
    for b in ("cuda", "vulkan", "hip"):
        p = subprocess.run([HALO, "bench", "-t", "1", "-m", A, "-p", "4", "-n", "0", "-r", "1",
                            "--backend", f"cpu,{b}", "-o", "csv"],
                           capture_output=True, text=True, timeout=300)
        check(p.returncode in (0, 1), f"--backend {b}: exit {p.returncode}")
        if p.returncode == 1:
            check(f"--backend {b}" in p.stderr and "not built" in p.stderr,
                  f"--backend {b}: clear error: {p.stderr}")
            check(len(p.stdout.splitlines()) <= 1, f"--backend {b}: nothing measured first")


def test_gpu_rows_carry_their_own_bandwidth():
    # A GPU backend this build has and this machine runs (Vulkan on lavapipe in CI) measures its
    # own bandwidth in the run; its rows' roofline uses it, not the host's.
    for b in ("vulkan", "cuda"):
        p = subprocess.run([HALO, "bench", "-t", "1", "-m", Q, "-p", "0", "-n", "2", "-r", "1",
                            "--backend", f"cpu,{b}", "-o", "csv"],
                           capture_output=True, text=True, timeout=600)
        if p.returncode != 0:
            print(f"  --backend {b} does not run here: {p.stderr.strip().splitlines()[-1:]}")
            continue
        rows = list(csv.DictReader(io.StringIO(p.stdout)))
        gpu = [r for r in rows if r["backend"] == b]
        check(len(gpu) == 1, f"{b}: one row: {rows}")
        for r in gpu:
            dev = float(r["device_bandwidth_gbs"])
            check(dev > 0, f"{b}: device bandwidth measured: {p.stderr[-800:]}")
            check(float(r["bandwidth_gbs"]) > 0 and float(r["roofline_fraction"]) > 0,
                  f"{b}: a roofline: {r}")
            if b == "vulkan":  # one memory type for every Vulkan buffer
                check(abs(float(r["bandwidth_gbs"]) - dev) < 1e-3 * dev, f"vulkan: {r}")
        check(all(float(r["device_bandwidth_gbs"]) == 0 for r in rows if r["backend"] == "cpu"),
              "cpu rows carry no device bandwidth")


def test_bad_values_are_usage_errors():
    for args in (["-r", "0"], ["-p", "x"], ["-o", "xml"], ["--weights", "vram"], ["--frob", "1"]):
        p = bench("-m", A, *args, rc=2)
        check("halo bench" in p.stderr, f"{args}: message {p.stderr}")


def synthetic_bytes(experts, vocab):
    """Bytes of a 1-layer synthetic q2 model from the real table (docs/dsv4-flash-table.md):
    the global tensors and layer 0 (window-only, hash-routed)."""
    q8, f16, f32, E, V, X = (lambda n: n // 32 * 34), (lambda n: 2 * n), (lambda n: 4 * n), \
        4096, vocab, experts
    glob = f16(E * V) + q8(E * V) + f16(4 * E * 4) + f32(E) + f32(4) + f32(1)
    hc = 2 * (f16(4 * E * 24) + f32(24) + f32(3))
    exps = 2 * (E * 2048 * X // 256 * 66) + E * 2048 * X // 256 * 84
    layer0 = (f32(E) + f32(64) + q8(E * 1024) + f32(1024) + q8(1024 * 64 * 512) + q8(E * 512) +
              f32(512) + q8(4096 * 8192) + q8(8192 * E) + hc + f16(E * X) + 4 * 6 * V + f32(E) +
              exps + 3 * q8(E * 2048))
    return glob + layer0


def test_synthetic_model():
    # full width but 8 experts and 1,024 vocabulary rows: 250 MB, made in place
    p = bench("--synthetic", "dsv4-flash-q2:1/e8/v1024", "-p", "4", "-n", "2", "-r", "2",
              "-o", "json")
    rows = json.loads(p.stdout)
    check([(r["n_prompt"], r["n_gen"]) for r in rows] == [(4, 0), (0, 2)], "two tests")
    for r in rows:
        check(r["model_size"] == synthetic_bytes(8, 1024), f"bytes: {r['model_size']}")
        check(r["model_filename"] == "synthetic:dsv4-flash-q2:1/e8/v1024", r["model_filename"])
        check(r["avg_ts"] > 0, "measured")
    if not os.environ.get("HALO_TEST_FULL_WIDTH"):
        print("  skipped: HALO_TEST_FULL_WIDTH=1 runs a 1-layer full-width synthetic model")
        return
    p = bench("--synthetic", "dsv4-flash-q2:1", "-p", "4", "-n", "2", "-r", "2", "-o", "json")
    rows = json.loads(p.stdout)
    check(len(rows) == 2, "two tests")
    check(rows[0]["model_size"] == synthetic_bytes(256, 129280), f"1-layer q2 bytes: {rows[0]}")


def test_written_synthetic_gguf_passes_inspect_check():
    # halo inspect --check (an independent reader of every tensor: finite values and scales,
    # routing ids in range and distinct) accepts the file --write-gguf makes
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "s.gguf")
        p = bench("--synthetic", "dsv4-flash-q2:4/e8/v1024", "--write-gguf", path)
        check(os.path.getsize(path) > synthetic_bytes(8, 1024), "written")
        c = subprocess.run([HALO, "inspect", "--check", path], capture_output=True, text=True,
                           timeout=300)
        check(c.returncode == 0 and "no problems found" in c.stdout,
              f"inspect --check: {c.returncode} {c.stdout[-500:]} {c.stderr[-500:]}")


TESTS = [v for k, v in list(globals().items()) if k.startswith("test_")]
for t in TESTS:
    before = failures
    t()
    print(("ok   " if failures == before else "FAIL ") + t.__name__)
print(f"{len(TESTS)} tests, {failures} failed checks")
sys.exit(1 if failures else 0)
