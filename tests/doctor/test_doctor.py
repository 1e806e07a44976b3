#!/usr/bin/env python3
"""`halo doctor` on recorded machines (tests/data/doctor/, written by make_fixtures.py there):
each gives the verdict for DeepSeek V4 Flash at 80.76 GiB (ds4's q2) and 97.05 GiB (the IQ3_XXS
stand-in) that follows from the fixture's own numbers, with the kernel command line that fits;
the kernel logs' watchdog signature, GCVM fault and Xids are reported with their time; --watch
reports a fault appended while it runs; unreadable files are "unknown", never a crash.

Run by CTest as: test_doctor.py HALO_BIN WRITE_DSV4_FLASH (from the source root)."""
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HALO, WRITE = sys.argv[1], sys.argv[2]
DATA = "tests/data/doctor"
GIB, MIB = 1 << 30, 1 << 20
# docs/dsv4-flash-table.md: the q2 table; tests/common/dsv4_flash.h: the IQ3_XXS variant
W = {"q2": 86714775900, "iq3": 104213412188}
# context state and scratch for --ctx 4096 are far below this (docs/memory.md estimates)
K = 1 * GIB
failures = 0


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print("FAIL:", what)


def doctor(root, *args):
    p = subprocess.run([HALO, "doctor", "--root", os.path.join(DATA, root), "--no-disk", *args],
                       capture_output=True, text=True, timeout=120)
    check(p.returncode in (0, 1), f"{root}: exit {p.returncode}\n{p.stderr}")
    return p


def items(out):
    """(level, text, fix) for every reported line."""
    res, lines = [], out.splitlines()
    for i, l in enumerate(lines):
        m = re.match(r"  (ok|info|unknown|warn|FAIL)\s+(.*)", l)
        if m:
            fix = ""
            if i + 1 < len(lines) and lines[i + 1].strip().startswith("fix: "):
                fix = lines[i + 1].strip()[5:]
            res.append((m.group(1), m.group(2), fix))
    return res


def read(root, path):
    with open(os.path.join(DATA, root, path.lstrip("/"))) as f:
        return f.read().strip()


def meminfo(root, key):
    for l in read(root, "/proc/meminfo").splitlines():
        if l.startswith(key + ":"):
            return int(l.split()[1]) * 1024
    raise KeyError(key)


# NVIDIA memory as the doctor's model table gives it (the profiles' figures): GB10 unified.
NVIDIA_MIB = {"GB10": None, "H200": 143771, "GeForce RTX 4090": 24564}


def expected(root, w):
    """The verdict from the fixture's numbers: the GPU's device room D (pool less what is in use
    and the 1 GiB device reserve), the host budget H (MemAvailable less max(MemTotal/32, 1 GiB))
    every pool on a unified machine draws on; a discrete GPU's VRAM is its own."""
    total, avail = meminfo(root, "MemTotal"), meminfo(root, "MemAvailable")
    H = avail - max(total // 32, GIB)
    card = "sys/class/drm/card1/device" if os.path.isdir(
        os.path.join(DATA, root, "sys/class/drm/card1")) else "sys/class/drm/card0/device"
    nvidia = glob.glob(os.path.join(DATA, root, "proc/driver/nvidia/gpus/*/information"))
    if not os.path.isdir(os.path.join(DATA, root, card)) and not nvidia:
        return "ok" if H >= w + K else "FAIL"
    # a VM may list an NVIDIA GPU in its driver's procfs only, not in /sys/class/drm
    vendor = read(root, card + "/vendor") if os.path.isdir(os.path.join(DATA, root, card)) \
        else "0x10de"
    if vendor == "0x1002":
        gtt = min(int(read(root, card + "/mem_info_gtt_total")),
                  int(read(root, "/sys/module/ttm/parameters/pages_limit")) * 4096)
        used = int(read(root, card + "/mem_info_vram_used")) + int(read(root, card +
                                                                        "/mem_info_gtt_used"))
        D = int(read(root, card + "/mem_info_vram_total")) + gtt - used - GIB
        unified = True
    else:
        info = open(nvidia[0]).read()
        model = [k for k in NVIDIA_MIB if k in info][0]
        unified = NVIDIA_MIB[model] is None
        D = (total if unified else NVIDIA_MIB[model] * MIB) - GIB
    if D >= w + K and (not unified or H >= w + K):
        return "ok"
    if H >= w + K:
        return "warn"
    return "FAIL"


# The same verdicts written out, so a mistake in the arithmetic above cannot pass unseen:
#   stock: D = 0.5 + 62.5 - 0.49 - 1 = 61.5 GiB < 80.76: weights go to GPU-visible host memory
#          (H = 122.5 - 3.9 = 118.6 GiB holds them): warn, for both models
#   gtt120/gtt124: D = 119.0 / 123.0 GiB, H = 118.6 GiB >= 97.06 + 1: ok
#   dgx-spark: D = 119.7 - 1 = 118.7 GiB, H = 116.99 - 3.74 = 113.2 GiB >= 98.06: ok
#   pc-64-nogpu: H = 60.06 - 1.96 = 58.1 GiB < 80.76: FAIL (would stream; halo does not yet)
#   rtx4090: D = 23.99 - 1 = 23 GiB < 80.76; pinned host memory (H = 118.1 GiB) holds the rest: warn
#   vm-2core-nogpu (recorded: the CI VM, scripts/record-doctor.sh): H = 18.56 - 1 = 17.56 GiB:
#          FAIL for both
EXPECT = {"strix-halo-stock": ("warn", "warn"), "strix-halo-gtt120": ("ok", "ok"),
          "strix-halo-gtt124": ("ok", "ok"), "dgx-spark": ("ok", "ok"),
          "pc-64-nogpu": ("FAIL", "FAIL"), "rtx4090": ("warn", "warn"),
          "vm-2core-nogpu": ("FAIL", "FAIL"), "h200": ("ok", "ok")}
# Trees recorded on real machines by scripts/record-doctor.sh (they carry RECORDED.txt): each is
# also checked by test_recorded_machines, with or without an entry above.
RECORDED = sorted(d for d in os.listdir(DATA)
                  if os.path.isfile(os.path.join(DATA, d, "RECORDED.txt")))


def test_model_verdicts(models):
    for root, want in EXPECT.items():
        for (name, path), w in zip(models, want):
            check(expected(root, W[name]) == w, f"{root} {name}: arithmetic gives "
                  f"{expected(root, W[name])}, table says {w}")
            p = doctor(root, "-m", path, "--ctx", "4096")
            got = [it for it in items(p.stdout) if it[1].startswith(path + ":")]
            check(len(got) == 1, f"{root} {name}: one verdict line, got {got}")
            if not got:
                continue
            level, text, fix = got[0]
            check(level == w, f"{root} {name}: {level} (want {w}): {text}")
            if w == "FAIL":
                check(p.returncode == 1, f"{root} {name}: a blocking verdict exits 1")
            if w == "warn" and root.startswith("strix"):
                # the kernel command line that fits: GTT of G MiB holding the weights, the TTM
                # limits in 4 KiB pages, and within the machine's RAM
                m = re.search(r"amdgpu\.gttsize=(\d+) ttm\.pages_limit=(\d+) "
                              r"ttm\.page_pool_size=(\d+)", fix)
                check(m is not None, f"{root} {name}: kernel command line in the fix: {fix}")
                if m:
                    g, pages, pool = map(int, m.groups())
                    check(g * MIB >= W[name], f"{root} {name}: gttsize {g} MiB holds the weights")
                    check(g * MIB <= W[name] + 4 * GIB, f"{root} {name}: gttsize {g} is the "
                          "least that fits, not the whole RAM")
                    check(pages == g * 256 and pool == g * 256, f"{root}: pages = MiB x 256")
            if w == "warn" and root == "rtx4090":
                check("GPU-visible host memory" in text and "host link" in text, text)


def test_pools_show_the_kernel_parameters():
    out = doctor("strix-halo-stock").stdout
    check("GTT 62.50 GiB" in out and "carve-out 0.50 GiB" in out, "stock pools")
    check("ttm.pages_limit = 16384000 pages of 4 KiB = 62.50 GiB" in out, "stock pages_limit")
    check("amdgpu.gttsize = -1" in out, "stock gttsize default")
    check("no GPU memory parameters (stock)" in out, "stock command line")
    w = [it for it in items(out) if it[0] == "warn" and "the GPU addresses 63.00 GiB" in it[1]]
    check(len(w) == 1 and "amdgpu.gttsize=" in w[0][2], f"stock: the GPU pool warning: {w}")
    out = doctor("strix-halo-gtt124").stdout
    check("amdgpu.gttsize=126976 ttm.pages_limit=32505856 ttm.page_pool_size=32505856" in out,
          "gtt124: the seeds' command line is read back")
    check("GTT 124.00 GiB" in out, "gtt124 pool")
    check(not any(it[0] == "warn" and "GPU addresses" in it[1] for it in items(out)),
          "gtt124: no pool warning")
    out = doctor("dgx-spark").stdout
    check("NVIDIA GB10: 119.70 GiB unified with host memory" in out, "GB10 unified")
    out = doctor("pc-64-nogpu").stdout
    check("no GPU found" in out, "no GPU")


def test_traps():
    st = items(doctor("strix-halo-stock").stdout)
    check(any(l == "warn" and t.startswith("swap: 8.00 GiB, 1.00 GiB in use") for l, t, f in st),
          "stock: swap in use")
    # 20 GiB cached - 64 MiB shmem = 19.94 GiB > 10 % of 125 GiB on an APU
    check(any(l == "warn" and t.startswith("page cache held: 19.94 GiB") and "drop_caches" in f
              for l, t, f in st), "stock: page cache on unified memory")
    pc = items(doctor("pc-64-nogpu").stdout)
    check(any(l == "warn" and "transparent huge pages: never" in t for l, t, f in pc), "THP")
    # CommitLimit 32050 MiB = 31.30 GiB
    check(any(l == "warn" and "overcommit_memory = 2" in t and "31.30 GiB" in t
              for l, t, f in pc), "overcommit 2")
    gt = items(doctor("strix-halo-gtt120").stdout)
    check(any(l == "ok" and t == "swap: none" for l, t, f in gt), "gtt120: no swap")
    check(any(l == "info" and t == "IOMMU: on, DMA-FQ mode" for l, t, f in gt), "IOMMU mode")


def test_drivers_and_known_bad_versions():
    p = doctor("strix-halo-stock")
    st = items(p.stdout)
    check(any(l == "FAIL" and "MES firmware 0x83" in t and "#5724" in f for l, t, f in st),
          "stock: MES 0x83 is known bad")
    check(p.returncode == 1, "a known-bad firmware blocks: exit 1")
    check(any(l == "info" and t == "ROCm 6.4.1-120" for l, t, f in st), "ROCm version")
    check(any(t.startswith("kernel 6.17.9") for l, t, f in st), "kernel version")
    gt = items(doctor("strix-halo-gtt120").stdout)
    check(any(t == "Mesa (Vulkan) 25.2.3-1" for l, t, f in gt), "Mesa from dpkg")
    check(not any(l == "FAIL" for l, t, f in gt), "gtt120: MES 0x80 is not known bad")
    rt = items(doctor("rtx4090").stdout)
    check(any(t == "NVIDIA driver 550.54.14" for l, t, f in rt), "NVIDIA driver version")
    check(any(l == "warn" and "before 580" in t for l, t, f in rt), "driver 550 < 580")
    dg = items(doctor("dgx-spark").stdout)
    check(any(t == "NVIDIA driver 580.95.05" for l, t, f in dg) and
          not any("before 580" in t for l, t, f in dg), "driver 580 is fine")


def test_kernel_log_faults_are_reported_with_their_time():
    st = items(doctor("strix-halo-stock").stdout)
    log = [(l, t) for l, t, f in st if t.split(" at ")[0] in
           ("ring timeout", "GPU reset", "device wedged", "GPU page fault", "NVIDIA Xid")]
    check([t.split(" at ")[0] for l, t in log] == ["ring timeout", "GPU reset", "device wedged"],
          f"stock: the seeds' watchdog signature: {log}")
    check(any("8123.456789 s after boot" in t and "comp_1.1.1 timeout, signaled seq=7906" in t
              for l, t in log), "ring timeout with its kmsg time")
    gt = [t for l, t, f in items(doctor("strix-halo-gtt120").stdout) if "GPU page fault" in t]
    check(len(gt) == 1 and "Nov 30 14:02:11" in gt[0] and "[gfxhub] page fault" in gt[0],
          f"gtt120: one GCVM fault (the status register line is the same fault): {gt}")
    rt = [(t, f) for l, t, f in items(doctor("rtx4090").stdout) if t.startswith("NVIDIA Xid")]
    check(len(rt) == 2, f"rtx4090: two Xids: {rt}")
    check(any("): 79," in t and "fallen off the bus" in f for t, f in rt), "Xid 79 explained")
    check(any("912.345678 s after boot" in t and "Xid 13" in f for t, f in rt), "Xid 13")
    out = doctor("strix-halo-gtt124").stdout
    check("no GPU faults, resets or watchdog timeouts" in out, "gtt124: clean dmesg")


def test_recorded_machines():
    check("vm-2core-nogpu" in RECORDED, f"the recorded CI VM is a fixture: {RECORDED}")
    for root in RECORDED:
        p = doctor(root)
        it = items(p.stdout)
        check(p.returncode == 0 or any(l == "FAIL" for l, t, f in it),
              f"{root}: exit {p.returncode} without a FAIL line")
        ram = f"host RAM {meminfo(root, 'MemTotal') / GIB:.2f} GiB"
        check(any(t.startswith(ram) for l, t, f in it), f"{root}: '{ram}' in {it[:3]}")
        recorded = open(os.path.join(DATA, root, "RECORDED.txt")).read()
        # every probe whose file was recorded gives a reading, not "unknown"
        for path, what in (("/proc/sys/vm/overcommit_memory", "vm.overcommit_memory unknown"),
                           ("/sys/kernel/mm/transparent_hugepage/enabled",
                            "transparent huge pages unknown"),
                           ("/proc/sys/kernel/osrelease", "kernel version unknown"),
                           ("/dev/kmsg", "kernel log unreadable")):
            if path in recorded:
                check(not any(what in t for l, t, f in it), f"{root}: {path} recorded: {what}")
        nv = glob.glob(os.path.join(DATA, root, "proc/driver/nvidia/gpus/*/information"))
        if nv:
            model = [k for k in NVIDIA_MIB if k in open(nv[0]).read()]
            check(any(model and model[0] in t for l, t, f in it), f"{root}: NVIDIA {model}")
    # the CI VM as recorded on 2026-11-30: no GPU, no swap, THP on madvise, heuristic
    # overcommit, no IOMMU groups, a clean kernel log
    it = items(doctor("vm-2core-nogpu").stdout)
    for want in (("info", "no GPU found: the CPU backend runs from host RAM"),
                 ("ok", "swap: none"), ("ok", "transparent huge pages: always [madvise] never"),
                 ("ok", "vm.overcommit_memory = 0 (heuristic)"),
                 ("info", "IOMMU: no groups (off or absent)"), ("info", "kernel 6.18.44-fc-v657")):
        check(any((l, t) == want for l, t, f in it), f"vm-2core-nogpu: {want} in {it}")
    check(any(l == "ok" and t.startswith("no GPU faults") for l, t, f in it), "clean kmsg")
    check(not any(l in ("warn", "FAIL", "unknown") for l, t, f in it),
          f"vm-2core-nogpu without a model: nothing to warn about: {it}")


def test_record_script_records_this_machine():
    with tempfile.TemporaryDirectory() as d:
        t0 = time.time()
        p = subprocess.run(["scripts/record-doctor.sh", "here", HALO], capture_output=True,
                           text=True, timeout=60, env={**os.environ, "OUT": d})
        took = time.time() - t0
        check(p.returncode == 0, f"record-doctor.sh: exit {p.returncode}: {p.stderr}")
        check(took < 20, f"record-doctor.sh took {took:.1f} s")
        root = os.path.join(d, "here")
        recorded = open(os.path.join(root, "RECORDED.txt")).read().splitlines()
        check("/proc/meminfo" in recorded, f"meminfo recorded: {recorded[:5]}")
        for line in recorded:
            path = line.split(" (")[0]
            check(os.path.isfile(root + path), f"listed and present: {path}")
        with open("/proc/meminfo") as f:
            total = [int(l.split()[1]) * 1024 for l in f if l.startswith("MemTotal:")][0]
        q = subprocess.run([HALO, "doctor", "--root", root, "--no-disk"], capture_output=True,
                           text=True, timeout=60)
        check(q.returncode in (0, 1), f"doctor on the recording: exit {q.returncode}")
        check(f"host RAM {total / GIB:.2f} GiB" in q.stdout, f"this machine's RAM: {q.stdout}")
        with open(os.path.join(root, "proc/cmdline")) as f:
            check(" -- " not in f.read(), "init's arguments are not recorded")


def test_unreadable_files_are_unknown():
    p = doctor("unreadable", "-m", "synthetic:dsv4-flash-q2")
    check(p.returncode == 0, f"no crash, nothing known to block: exit {p.returncode}")
    it = items(p.stdout)
    unknown = [t for l, t, f in it if l == "unknown"]
    for what in ("host memory unknown", "cannot tell whether it fits", "swap unknown",
                 "transparent huge pages unknown", "vm.overcommit_memory unknown",
                 "kernel log unreadable"):
        check(any(what in t for t in unknown), f"unreadable: '{what}' in {unknown}")
    p = subprocess.run([HALO, "doctor", "--root", "/nonexistent-root"], capture_output=True,
                       text=True, timeout=60)
    check(p.returncode == 0 and "unknown" in p.stdout, "a missing root: all unknown")


def test_watch_reports_a_fault_as_it_happens():
    with tempfile.TemporaryDirectory() as d:
        root = os.path.join(d, "m")
        shutil.copytree(os.path.join(DATA, "strix-halo-gtt124"), root)
        log = os.path.join(root, "var/log/dmesg")
        p = subprocess.Popen([HALO, "doctor", "--root", root, "--watch-seconds", "4"],
                             stdout=subprocess.PIPE, text=True)
        time.sleep(1.5)
        with open(log, "a") as f:
            f.write("[ 4242.000001] amdgpu 0000:c5:00.0: amdgpu: ring comp_1.0.0 timeout, "
                    "signaled seq=10, emitted seq=11\n")
        out, _ = p.communicate(timeout=30)
        after = out.split("watching", 1)[-1]
        check("ring timeout (4242.000001 s after boot)" in after and "comp_1.0.0" in after,
              f"--watch: the appended fault is reported: {after}")


def main():
    with tempfile.TemporaryDirectory() as d:
        models = []
        for name in ("q2", "iq3"):
            path = os.path.join(d, f"dsv4-{name}.gguf")
            subprocess.run([WRITE, path, name], check=True)
            models.append((name, path))
        tests = [lambda: test_model_verdicts(models), test_pools_show_the_kernel_parameters,
                 test_traps, test_drivers_and_known_bad_versions,
                 test_kernel_log_faults_are_reported_with_their_time, test_recorded_machines,
                 test_record_script_records_this_machine, test_unreadable_files_are_unknown,
                 test_watch_reports_a_fault_as_it_happens]
        names = ["test_model_verdicts"] + [t.__name__ for t in tests[1:]]
        for name, t in zip(names, tests):
            before = failures
            t()
            print(("ok   " if failures == before else "FAIL ") + name)
    print(f"{len(names)} tests, {failures} failed checks")
    sys.exit(1 if failures else 0)


main()
