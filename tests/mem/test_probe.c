/* The probe against fake /proc + /sys trees (tests/data/sysfs/): a stock and a tuned Strix
 * Halo, an NVIDIA desktop; and plans built from what it found. */
#include <stdlib.h>

#include "check.h"
#include "halo/plan.h"
#include "mem/mem_test_util.h"

#define ROOT "tests/data/sysfs/"

static void probe_reads_stock_strix_halo_pools(void) {
    halo_machine m;
    halo_error err = {0};
    CHECK_INT(halo_machine_probe(ROOT "strix-halo-stock", NULL, &m, &err), HALO_OK);
    CHECK(m.host_total == 131072000ull * 1024);
    CHECK(m.host_available == 128450560ull * 1024);
    CHECK_INT(m.cgroup_limit, 0);
    CHECK_INT(m.gpu_vendor, HALO_GPU_AMD);
    CHECK(m.gpu_integrated);
    CHECK_INT(m.gpu_pci_device, 0x1586);
    CHECK_CONTAINS(m.gpu_name, "Strix Halo");
    CHECK(m.vram_total == 512 * HALO_MIB);
    CHECK(m.vram_used == 300 * HALO_MIB);
    CHECK(m.gtt_total == 16384000ull * 4096);
    CHECK(m.gtt_used == 200 * HALO_MIB);
    CHECK_INT(m.ttm_pages_limit, 16384000);
    CHECK_INT(m.hugepages_free, 0);
    CHECK_STR(m.name, "probed");
}

static void probe_reads_tuned_strix_halo_and_its_cgroup(void) {
    halo_machine m;
    halo_error err = {0};
    CHECK_INT(halo_machine_probe(ROOT "strix-halo-tuned", NULL, &m, &err), HALO_OK);
    CHECK(m.gtt_total == 126976 * HALO_MIB);
    CHECK_INT(m.ttm_pages_limit, 32505856);
    /* user.slice has memory.max 100 GiB with 2 GiB in use: that caps MemAvailable. */
    CHECK(m.cgroup_limit == 100 * HALO_GIB);
    CHECK(m.host_available == 98 * HALO_GIB);
    CHECK_INT(m.hugepages_free, 1024);
    CHECK(m.hugepage_size == 2 * HALO_MIB);
}

static void probe_reports_nvidia_without_sizes(void) {
    halo_machine m;
    halo_error err = {0};
    CHECK_INT(halo_machine_probe(ROOT "nvidia-desktop", NULL, &m, &err), HALO_OK);
    CHECK_INT(m.gpu_vendor, HALO_GPU_NVIDIA);
    CHECK_INT(m.vram_total, 0);
    CHECK_CONTAINS(m.gpu_name, "--profile");
}

static void probe_without_meminfo_fails_naming_it(void) {
    halo_machine m;
    halo_error err = {0};
    CHECK_INT(halo_machine_probe(ROOT "no-such-tree", NULL, &m, &err), HALO_E_IO);
    CHECK_CONTAINS(err.message, "proc/meminfo");
}

static void probe_of_this_machine_finds_memory(void) {
    halo_machine m;
    halo_error err = {0};
    CHECK_INT(halo_machine_probe("/", "/proc/self/exe", &m, &err), HALO_OK);
    CHECK(m.host_total > 0);
    CHECK(m.host_available <= m.host_total || m.cgroup_limit);
    CHECK(m.disk_read_gbs > 0);
}

static void disk_measurement_times_real_reads(void) {
    char *dir = tmpdir_make(), path[600];
    snprintf(path, sizeof path, "%s/data.bin", dir);
    FILE *f = fopen(path, "wb");
    static unsigned char block[1 << 20];
    for (size_t i = 0; i < sizeof block; i++)
        block[i] = (unsigned char)(i * 131 + 7);
    for (int i = 0; i < 40; i++)
        fwrite(block, 1, sizeof block, f);
    fclose(f);
    halo_machine m = {.disk_read_gbs = 1.0, .disk_read_estimated = true};
    halo_error err = {0};
    CHECK_INT(halo_machine_measure_disk(path, &m, &err), HALO_OK);
    CHECK(m.disk_read_gbs > 0 && !m.disk_read_estimated);
    snprintf(path, sizeof path, "%s/small.bin", dir);
    f = fopen(path, "wb");
    fwrite(block, 1, 4096, f);
    fclose(f);
    CHECK_INT(halo_machine_measure_disk(path, &m, &err), HALO_E_IO);
    CHECK_CONTAINS(err.message, "small.bin");
    snprintf(path, sizeof path, "%s/missing.bin", dir);
    CHECK_INT(halo_machine_measure_disk(path, &m, &err), HALO_E_IO);
    tmpdir_remove(dir);
}

/* The probe and the planner together reach the seeds' conclusions without any profile. */
static void plans_from_probed_trees_match_the_seeds(void) {
    char *dir = tmpdir_make(), path[600];
    write_variant(dir, "q2.gguf", DSV4_VARIANT_Q2, path, sizeof path);
    halo_gguf *g = NULL;
    halo_error err = {0};
    CHECK_INT(halo_gguf_open(path, &g, &err), HALO_OK);
    halo_machine stock, tuned;
    CHECK_INT(halo_machine_probe(ROOT "strix-halo-stock", path, &stock, &err), HALO_OK);
    CHECK_INT(halo_machine_probe(ROOT "strix-halo-tuned", path, &tuned, &err), HALO_OK);
    halo_plan_options o = {0};
    halo_plan *p = NULL;
    CHECK_INT(halo_plan_build(g, &stock, &o, &p, &err), HALO_OK);
    if (p) {
        CHECK(!p->refused);
        CHECK_INT(p->options.backend, HALO_BACKEND_HIP);
        CHECK(p->pools[HALO_POOL_GPU_HOST].planned == p->weight_bytes);
    }
    halo_plan_free(p);
    CHECK_INT(halo_plan_build(g, &tuned, &o, &p, &err), HALO_OK);
    if (p) {
        CHECK(!p->refused);
        CHECK(p->pools[HALO_POOL_DEVICE].planned >= p->weight_bytes);
        CHECK_INT(p->pools[HALO_POOL_GPU_HOST].planned, 0);
    }
    halo_plan_free(p);
    halo_gguf_close(g);
    tmpdir_remove(dir);
}

int main(void) {
    RUN(probe_reads_stock_strix_halo_pools);
    RUN(probe_reads_tuned_strix_halo_and_its_cgroup);
    RUN(probe_reports_nvidia_without_sizes);
    RUN(probe_without_meminfo_fails_naming_it);
    RUN(probe_of_this_machine_finds_memory);
    RUN(disk_measurement_times_real_reads);
    RUN(plans_from_probed_trees_match_the_seeds);
    return check_report();
}
