#!/usr/bin/env python3
"""Writes the machine trees under tests/data/doctor/ (committed; rerun after editing this file).

Each tree holds the files `halo doctor --root` reads, in the formats the kernel prints them:
/proc/meminfo in kB, amdgpu's mem_info_* in bytes, ttm's pages_limit in 4 KiB pages, kmsg
records "prio,seq,usec,flags;text", syslog lines. Numbers come from the seeds and the profiles in
profiles/ (README.md beside this file lists them)."""
import os
import shutil

HERE = os.path.dirname(os.path.abspath(__file__))
GIB = 1 << 30
MIB = 1 << 20


def put(root, path, text):
    full = os.path.join(HERE, root, path.lstrip("/"))
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "w") as f:
        f.write(text if text.endswith("\n") or text == "" else text + "\n")


def meminfo(total_kb, avail_kb, cached_kb=2345678, swap_kb=0, swap_free_kb=0, commit_kb=None):
    commit_kb = commit_kb if commit_kb is not None else total_kb // 2 + swap_kb
    return (f"MemTotal:       {total_kb} kB\nMemFree:        {avail_kb - cached_kb} kB\n"
            f"MemAvailable:   {avail_kb} kB\nBuffers:          123456 kB\n"
            f"Cached:         {cached_kb} kB\nSwapCached:            0 kB\n"
            f"SwapTotal:      {swap_kb} kB\nSwapFree:       {swap_free_kb} kB\n"
            f"Shmem:            65536 kB\nCommitLimit:    {commit_kb} kB\n"
            f"HugePages_Total:       0\nHugePages_Free:        0\nHugePages_Rsvd:        0\n"
            f"Hugepagesize:       2048 kB\n")


def common(root, osrelease, thp="always [madvise] never", overcommit="0", iommu="DMA-FQ",
           cmdline="BOOT_IMAGE=/vmlinuz root=UUID=1234 ro quiet"):
    put(root, "/proc/self/cgroup", "0::/user.slice/user-1000.slice/session-2.scope")
    put(root, "/sys/fs/cgroup/user.slice/memory.max", "max")
    put(root, "/proc/sys/kernel/osrelease", osrelease)
    put(root, "/sys/kernel/mm/transparent_hugepage/enabled", thp)
    put(root, "/proc/sys/vm/overcommit_memory", overcommit)
    if iommu:
        put(root, "/sys/kernel/iommu_groups/0/type", iommu)
    put(root, "/proc/cmdline", cmdline)


def strix(root, gtt_bytes, pages_limit, pool, gttsize, cmdline_extra, mes="0x00000080"):
    """Ryzen AI Max+ 395 (Radeon 8060S, PCI 0x1586), 128 GB, 512 MiB carve-out: MemTotal 125 GiB
    (131072000 kB), MemAvailable 122.5 GiB (128450560 kB), desktop using some VRAM and GTT."""
    card = "/sys/class/drm/card1/device"
    put(root, f"{card}/vendor", "0x1002")
    put(root, f"{card}/device", "0x1586")
    put(root, f"{card}/mem_info_vram_total", str(512 * MIB))
    put(root, f"{card}/mem_info_vram_used", "314572800")
    put(root, f"{card}/mem_info_gtt_total", str(gtt_bytes))
    put(root, f"{card}/mem_info_gtt_used", "209715200")
    for fw, v in (("mes", mes), ("mec", "0x0000001f"), ("sos", "0x00270012"), ("smc", "0x5e4b0300")):
        put(root, f"{card}/fw_version/{fw}_fw_version", v)
    put(root, "/sys/class/drm/card1-DP-1/status", "disconnected")
    put(root, "/sys/module/amdgpu/parameters/gttsize", str(gttsize))
    put(root, "/sys/module/ttm/parameters/pages_limit", str(pages_limit))
    put(root, "/sys/module/ttm/parameters/page_pool_size", str(pool))
    common(root, "6.17.9-200.fc43.x86_64",
           cmdline="BOOT_IMAGE=/vmlinuz-6.17.9 root=UUID=1234 ro quiet " + cmdline_extra)


def nvidia(root, device, model, version, total_kb, avail_kb):
    put(root, "/sys/class/drm/card0/device/vendor", "0x10de")
    put(root, "/sys/class/drm/card0/device/device", device)
    put(root, "/proc/driver/nvidia/gpus/0000:01:00.0/information",
        f"Model: \t\t {model}\nIRQ:   \t\t 180\nGPU UUID: \t GPU-0000\nBus Type: \t PCIe\n")
    put(root, "/proc/driver/nvidia/version",
        f"NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  {version}  Release Build  "
        f"(dvs-builder@U16)  Tue Sep 30 00:00:00 UTC 2025\nGCC version:  gcc version 13.3.0\n")
    put(root, "/proc/meminfo", meminfo(total_kb, avail_kb))


# trees recorded on real machines (scripts/record-doctor.sh, with RECORDED.txt) are kept
for d in os.listdir(HERE):
    if os.path.isdir(os.path.join(HERE, d)) and \
            not os.path.isfile(os.path.join(HERE, d, "RECORDED.txt")):
        shutil.rmtree(os.path.join(HERE, d))

# 1. Stock Strix Halo: GTT = default ttm.pages_limit = half of RAM = 16384000 pages = 62.5 GiB
#    (seeds/000: "~62 GiB"); 8 GiB swap with 1 GiB swapped out; 20 GiB of page cache; MES
#    firmware 0x83 (ROCm/legacy-rocm-build#5724); ROCm 6.4.1; the seeds' watchdog signature.
root = "strix-halo-stock"
strix(root, 16384000 * 4096, 16384000, 16384000, -1, "")
put(root, "/proc/meminfo", meminfo(131072000, 128450560, cached_kb=20971520,
                                   swap_kb=8388608, swap_free_kb=7340032))
put(root, f"/sys/class/drm/card1/device/fw_version/mes_fw_version", "0x00000083")
put(root, "/opt/rocm/.info/version", "6.4.1-120")
put(root, "/dev/kmsg",
    "6,1021,5020113,-;amdgpu 0000:c5:00.0: amdgpu: VRAM: 512M 0x0000008000000000 - 0x000000801FFFFFFF (512M used)\n"
    "6,1022,5020120,-;amdgpu 0000:c5:00.0: amdgpu: amdgpu: 64000M of GTT memory ready.\n"
    " SUBSYSTEM=pci\n"
    "3,2203,8123456789,-;amdgpu 0000:c5:00.0: amdgpu: ring comp_1.1.1 timeout, signaled seq=7906, emitted seq=7907\n"
    "6,2204,8123456801,-;amdgpu 0000:c5:00.0: amdgpu: Starting comp_1.1.1 ring reset\n"
    "4,2205,8123501234,-;amdgpu 0000:c5:00.0: amdgpu: [drm] device wedged, but no recovery needed\n")

# 2. GTT 120 GiB (seeds/004: ttm.pages_limit=31457280 with a 512 MB carve-out, 97 GiB model
#    resident); page_pool_size left at its default; a GCVM page fault in kern.log (syslog).
root = "strix-halo-gtt120"
strix(root, 31457280 * 4096, 31457280, 16384000, -1, "ttm.pages_limit=31457280",
      mes="0x00000080")
put(root, "/proc/meminfo", meminfo(131072000, 128450560))
put(root, "/var/lib/dpkg/status",
    "Package: mesa-vulkan-drivers\nStatus: install ok installed\nVersion: 25.2.3-1\n\n")
put(root, "/var/log/kern.log",
    "Nov 30 14:02:10 px13 kernel: amdgpu 0000:c4:00.0: amdgpu: 122880M of GTT memory ready.\n"
    "Nov 30 14:02:11 px13 kernel: amdgpu 0000:c4:00.0: amdgpu: [gfxhub] page fault (src_id:0 ring:40 vmid:8 pasid:32771)\n"
    "Nov 30 14:02:11 px13 kernel: amdgpu 0000:c4:00.0: amdgpu:  in process llama-server pid 4242 thread llama-server pid 4242\n"
    "Nov 30 14:02:11 px13 kernel: amdgpu 0000:c4:00.0: amdgpu:   in page starting at address 0x00007f3a12345000 from client 10\n"
    "Nov 30 14:02:11 px13 kernel: amdgpu 0000:c4:00.0: amdgpu: GCVM_L2_PROTECTION_FAULT_STATUS:0x00800932\n")

# 3. GTT 124 GiB: the seeds' documented parameters (seeds/000), a clean dmesg.
root = "strix-halo-gtt124"
strix(root, 32505856 * 4096, 32505856, 32505856, 126976,
      "amdgpu.gttsize=126976 ttm.pages_limit=32505856 ttm.page_pool_size=32505856")
put(root, "/proc/meminfo", meminfo(131072000, 128450560))
put(root, "/var/log/dmesg",
    "[    5.020120] amdgpu 0000:c5:00.0: amdgpu: amdgpu: 126976M of GTT memory ready.\n")

# 4. DGX Spark (GB10, unified 122,570 MiB, 119,800 MiB available: profiles/dgx-spark-128.json).
root = "dgx-spark"
nvidia(root, "0x2e12", "NVIDIA GB10", "580.95.05", 122570 * 1024, 119800 * 1024)
common(root, "6.11.0-1016-nvidia", iommu="DMA")
put(root, "/dev/kmsg", "6,900,3000000,-;NVRM: loading NVIDIA UNIX Open Kernel Module for aarch64  580.95.05\n")

# 5. A 64 GB PC without a GPU (profiles/pc-64.json: 64,100 MiB, 61,500 available), THP off,
#    strict overcommit.
root = "pc-64-nogpu"
put(root, "/proc/meminfo", meminfo(64100 * 1024, 61500 * 1024, commit_kb=32050 * 1024))
common(root, "6.1.0-27-amd64", thp="always madvise [never]", overcommit="2", iommu=None)
put(root, "/var/log/kern.log", "Nov 30 09:00:00 pc kernel: Linux version 6.1.0-27-amd64\n")

# 6. A discrete NVIDIA GPU: RTX 4090 (24,564 MiB) in a 128 GB PC (profiles/rtx4090-24-host128),
#    driver 550 (older than CUDA 13 needs), Xid 13 and Xid 79 in kmsg.
root = "rtx4090"
nvidia(root, "0x2684", "NVIDIA GeForce RTX 4090", "550.54.14", 128700 * 1024, 125000 * 1024)
common(root, "6.8.0-49-generic")
put(root, "/dev/kmsg",
    "4,3001,912345678,-;NVRM: Xid (PCI:0000:01:00): 13, pid=5120, name=llama-bench, Graphics SM Warp Exception on (GPC 0, TPC 1, SM 0): Out Of Range Address\n"
    "4,3010,991234567,-;NVRM: Xid (PCI:0000:01:00): 79, pid=5120, name=llama-bench, GPU has fallen off the bus.\n")

# 7. Unreadable: files that are directories or hold garbage, others missing.
root = "unreadable"
os.makedirs(os.path.join(HERE, root, "proc/meminfo"), exist_ok=True)
os.makedirs(os.path.join(HERE, root, "proc/cmdline"), exist_ok=True)
os.makedirs(os.path.join(HERE, root, "dev/kmsg"), exist_ok=True)
put(root, "/proc/sys/vm/overcommit_memory", "seven")
put(root, "/sys/module/ttm/parameters/pages_limit", "")
put(root, "/sys/kernel/mm/transparent_hugepage/enabled", "")
for d in ("proc/meminfo", "proc/cmdline", "dev/kmsg"):
    put(root, d + "/.keep", "")  # git keeps no empty directories
