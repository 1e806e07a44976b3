/* halo serve plans every slot's context before loading (src/serve/admit.c): on a small machine
 * profile (1,100 MiB available, of which the planner keeps 1 GiB for the OS) the embedded model
 * with one slot of 4,096 tokens is admitted, as the engine's own one-context admission admits it,
 * while 64 slots are refused up front with the planner's reason and the largest -np that fits;
 * that -np is admitted and one more is not, by serve_admit and by the engine given n_seq. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gguf/gguf_test_util.h"
#include "serve/admit.h"

#define MODEL "models/kjv-tiny.gguf"

static char profile[600];

static void write_profile(const char *dir) {
    snprintf(profile, sizeof profile, "%s/small.json", dir);
    FILE *f = fopen(profile, "w");
    CHECK(f != NULL);
    if (!f) return;
    fputs("{\"name\": \"small-1100\", \"description\": \"a small machine (test)\", "
          "\"sources\": [\"made up for tests/serve/test_admit.c\"], "
          "\"host\": {\"total_mib\": 1200, \"available_mib\": 1100, \"bandwidth_gbs\": 10}, "
          "\"disk\": {\"kind\": \"ssd\", \"read_gbs\": 1.0}}\n",
          f);
    fclose(f);
}

static uint64_t host_left;

static halo_status admit(uint32_t n_slots, char *summary, halo_error *err) {
    halo_engine_params ep = {.model_path = MODEL, .n_ctx = 4096};
    return serve_admit(&ep, n_slots, 4096, summary, 256, &host_left, err);
}

static void one_slot_fits_where_the_engine_admits_one_context(void) {
    char summary[256];
    halo_error err = {0};
    CHECK_INT(admit(1, summary, &err), HALO_OK);
    CHECK_CONTAINS(summary, "planned 1 slot of 4096 tokens");
    halo_engine_params ep = {.model_path = MODEL, .n_ctx = 4096};
    halo_engine *e = NULL;
    CHECK_INT(halo_engine_open(&ep, &e, &err), HALO_OK);
    halo_engine_close(e);
}

static void slots_that_do_not_fit_are_refused_with_the_most_that_do(void) {
    char summary[256];
    halo_error err = {0};
    CHECK_INT(admit(64, summary, &err), HALO_E_NOMEM);
    printf("  %s\n", err.message);
    CHECK_CONTAINS(err.message, "-np 64 --ctx 4096: refused before loading");
    CHECK_CONTAINS(err.message, "context state for 64 sequences of 4096 tokens");
    const char *fix = strstr(err.message, "fix: -np ");
    CHECK(fix != NULL);
    if (!fix) return;
    unsigned most = (unsigned)atoi(fix + strlen("fix: -np "));
    CHECK(most > 1 && most < 64);
    CHECK_INT(admit(most, summary, &err), HALO_OK);
    CHECK_INT(admit(most + 1, summary, &err), HALO_E_NOMEM);
    /* The engine plans the same slots itself when told how many (halo_engine_params.n_seq). */
    halo_engine_params ep = {.model_path = MODEL, .n_ctx = 4096, .n_seq = most};
    halo_engine *e = NULL;
    if (halo_engine_open(&ep, &e, &err)) printf("  %s\n", err.message);
    CHECK(e != NULL);
    halo_engine_close(e);
    ep.n_seq = most + 1; /* the slots' state fits only if the experts stream: refused */
    CHECK(halo_engine_open(&ep, &e, &err) != HALO_OK);
    printf("  the engine with n_seq %u: %s\n", most + 1, err.message);
    CHECK_CONTAINS(err.message, "stream");
}

/* The prefix cache's RAM and the slots' checkpoints share what the plan leaves. */
static void the_cache_and_checkpoints_get_what_the_slots_leave(void) {
    char summary[256];
    halo_error err = {0};
    CHECK_INT(admit(1, summary, &err), HALO_OK);
    uint64_t one = host_left;
    CHECK_INT(admit(2, summary, &err), HALO_OK);
    uint64_t two = host_left;
    printf("  host left: %.1f MiB with 1 slot, %.1f MiB with 2\n", (double)one / (1 << 20),
           (double)two / (1 << 20));
    CHECK(one > two && one < (1100ull << 20));
    uint64_t ckpt = 0;
    CHECK(!serve_split_host(one, one + 1, 1, 1ull << 30, &ckpt)); /* the cache does not fit */
    CHECK(serve_split_host(one, one / 2, 2, 1ull << 30, &ckpt));
    CHECK(ckpt == (one - one / 2) / 2); /* less than the 1 GiB default here */
    CHECK(serve_split_host(UINT64_MAX, 0, 8, 1ull << 30, &ckpt) && ckpt == 1ull << 30);
    CHECK(serve_split_host(one, one, 1, 1ull << 30, &ckpt) && ckpt == 0);
}

int main(void) {
    char *dir = tmpdir_make();
    write_profile(dir);
    setenv("HALO_PROFILE", profile, 1);
    RUN(one_slot_fits_where_the_engine_admits_one_context);
    RUN(slots_that_do_not_fit_are_refused_with_the_most_that_do);
    RUN(the_cache_and_checkpoints_get_what_the_slots_leave);
    unsetenv("HALO_PROFILE");
    remove(profile);
    tmpdir_remove(dir);
    return check_report();
}
