#!/usr/bin/env bash
# Records the files `halo doctor` reads on this machine into a fixture tree laid out for
# `halo doctor --root DIR` (tests/data/doctor/), so tests replay real machines instead of
# constructed ones. Needs bash and coreutils only; reads small files and finishes in seconds.
#
#   scripts/record-doctor.sh NAME [MODEL_FILE]
#
# writes ${OUT:-.}/NAME/ (OUT is the device machine's result folder). With MODEL_FILE, the sysfs
# files of the block device it sits on are recorded too (the doctor's disk probe). What is read,
# and from where, is src/mem/probe.c, src/mem/doctor_system.c, src/mem/doctor_klog.c and the CPU
# cache tree of src/cli/bench_bw.c; RECORDED.txt in the tree lists every file copied, and
# machine.txt what the machine said about itself (not read by halo: for the person reading the
# fixture). Kernel log lines are kept only when they concern a GPU (amdgpu, drm, NVRM/Xid,
# nvidia), so a recorded log carries no other machine detail.
set -u
name=${1:?usage: record-doctor.sh NAME [MODEL_FILE]}
model=${2:-}
dest=${OUT:-.}/$name
mkdir -p "$dest" || exit 1
list=$dest/RECORDED.txt
: >"$list"

# copy PATH: the file's content at $dest/PATH, when it is a readable regular file (sysfs and
# procfs report size 0, so cat rather than cp)
copy() {
    local src=$1
    [ -f "$src" ] && [ -r "$src" ] || return 0
    mkdir -p "$dest$(dirname "$src")"
    if timeout 2 cat "$src" >"$dest$src" 2>/dev/null; then
        echo "$src" >>"$list"
    else
        rm -f "$dest$src"
    fi
}

# the host: memory, kernel, traps. The command line's kernel part only: what follows " -- " is
# the init program's arguments, which say nothing about memory and may say much about the setup
if [ -r /proc/cmdline ]; then
    mkdir -p "$dest/proc"
    IFS= read -r cmdline </proc/cmdline
    printf '%s\n' "${cmdline%% -- *}" >"$dest/proc/cmdline"
    echo "/proc/cmdline (kernel parameters, not init's)" >>"$list"
fi
for f in /proc/meminfo /proc/version /proc/sys/kernel/osrelease \
    /proc/sys/vm/overcommit_memory /sys/kernel/mm/transparent_hugepage/enabled \
    /sys/kernel/mm/transparent_hugepage/defrag /sys/kernel/iommu_groups/0/type \
    /sys/module/amdgpu/parameters/gttsize /sys/module/ttm/parameters/pages_limit \
    /sys/module/ttm/parameters/page_pool_size /sys/module/amdttm/parameters/pages_limit \
    /opt/rocm/.info/version /proc/driver/nvidia/version; do
    copy "$f"
done

# cgroup limits from this shell's cgroup up to the root: v2 (0::PATH) and v1's memory controller
copy /proc/self/cgroup
while IFS=: read -r id ctrl path; do
    p=$path
    while :; do
        if [ "$id" = 0 ]; then
            copy "/sys/fs/cgroup${p%/}/memory.max"
            copy "/sys/fs/cgroup${p%/}/memory.current"
        elif [ "$ctrl" = memory ]; then
            copy "/sys/fs/cgroup/memory${p%/}/memory.limit_in_bytes"
            copy "/sys/fs/cgroup/memory${p%/}/memory.usage_in_bytes"
        fi
        [ "$p" = / ] || [ -z "$p" ] && break
        p=${p%/*}
        [ -n "$p" ] || p=/
    done
done </proc/self/cgroup

# GPUs: DRM cards (not connectors such as card0-DP-1) and NVIDIA's procfs
for card in /sys/class/drm/card*; do
    [[ ${card##*/} =~ ^card[0-9]+$ ]] || continue
    for f in vendor device mem_info_vram_total mem_info_vram_used mem_info_gtt_total \
        mem_info_gtt_used mem_info_vis_vram_total; do
        copy "$card/device/$f"
    done
    for f in "$card"/device/fw_version/*_fw_version; do copy "$f"; done
done
for f in /proc/driver/nvidia/gpus/*/information; do copy "$f"; done

# the CPU caches (halo bench sizes its bandwidth buffer from the last-level one)
for d in /sys/devices/system/cpu/cpu[0-9]*/cache/index[0-9]*; do
    for f in level type size shared_cpu_list; do copy "$d/$f"; done
done

# Mesa's version, from dpkg's record of the one package the doctor asks about
if [ -r /var/lib/dpkg/status ]; then
    mkdir -p "$dest/var/lib/dpkg"
    keep=0
    while IFS= read -r line; do
        case $line in
        "Package: "*) [ "$line" = "Package: mesa-vulkan-drivers" ] && keep=1 || keep=0 ;;
        esac
        [ $keep = 1 ] && printf '%s\n' "$line"
    done </var/lib/dpkg/status >"$dest/var/lib/dpkg/status"
    echo /var/lib/dpkg/status "(mesa-vulkan-drivers only)" >>"$list"
fi

# the disk the model sits on
if [ -n "$model" ] && [ -e "$model" ]; then
    dev=$(stat -L -c '%Hd:%Ld' "$model" 2>/dev/null)
    if [ -n "$dev" ] && [ -d "/sys/dev/block/$dev" ]; then
        copy "/sys/dev/block/$dev/partition"
        copy "/sys/dev/block/$dev/queue/rotational"
        copy "/sys/dev/block/$dev/uevent"
        if [ -f "/sys/dev/block/$dev/partition" ]; then
            # the doctor reads DEV/../queue: under the fixture root that resolves to
            # sys/dev/block/queue, next to the device's own directory
            parent=$(readlink -f "/sys/dev/block/$dev/..")
            for f in queue/rotational uevent; do
                if [ -r "$parent/$f" ]; then
                    mkdir -p "$(dirname "$dest/sys/dev/block/$f")"
                    cat "$parent/$f" >"$dest/sys/dev/block/$f" && echo "$parent/$f" >>"$list"
                fi
            done
        fi
    fi
fi

# kernel log: GPU lines only, in the format each source has (kmsg records, syslog, dmesg)
gpu_re='amdgpu|\[drm\]|drm:|NVRM|Xid|nvidia|GCVM|gfxhub|ring .* timeout'
gpu_lines() {
    local line
    while IFS= read -r line || [ -n "$line" ]; do
        [[ $line =~ $gpu_re ]] && printf '%s\n' "$line"
    done
    return 0
}
if [ -r /dev/kmsg ]; then
    mkdir -p "$dest/dev"
    timeout 5 dd if=/dev/kmsg iflag=nonblock bs=65536 2>/dev/null | gpu_lines >"$dest/dev/kmsg"
    echo "/dev/kmsg (GPU lines)" >>"$list"
fi
for f in /var/log/kern.log /var/log/dmesg; do
    if [ -r "$f" ]; then
        mkdir -p "$dest/var/log"
        tail -n 20000 "$f" | gpu_lines >"$dest$f"
        echo "$f (GPU lines)" >>"$list"
    fi
done
if [ ! -r /dev/kmsg ] && [ ! -r /var/log/kern.log ] && [ ! -r /var/log/dmesg ] &&
    command -v dmesg >/dev/null; then
    mkdir -p "$dest/var/log"
    timeout 5 dmesg 2>/dev/null | gpu_lines >"$dest/var/log/dmesg"
    echo "/var/log/dmesg (from the dmesg command, GPU lines)" >>"$list"
fi

# what the machine says about itself, for people (halo reads none of this)
{
    echo "recorded: $(date -u +%Y-%m-%dT%H:%M:%SZ) by scripts/record-doctor.sh $*"
    echo "uname: $(uname -srm)"
    echo "cpus: $(nproc)"
    if [ -r /proc/cpuinfo ]; then
        while IFS= read -r line; do
            [[ $line == "model name"* ]] && { echo "$line"; break; }
        done </proc/cpuinfo
    fi
    if command -v nvidia-smi >/dev/null; then
        timeout 10 nvidia-smi --query-gpu=name,memory.total,driver_version \
            --format=csv,noheader 2>&1 | while IFS= read -r line; do echo "nvidia-smi: $line"; done
    fi
} >"$dest/machine.txt"
echo "recorded $(wc -l <"$list") files into $dest" >&2
