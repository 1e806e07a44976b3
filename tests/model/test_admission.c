/* Opening a model plans it on the machine's memory first: DeepSeek V4 Flash's full table (80.76
 * GiB, a sparse file) on a 64 GiB machine profile is refused in milliseconds, naming the reason,
 * before anything is allocated; the tiny fixtures pass. */
#include <stdlib.h>

#include "check.h"
#include "common/dsv4_flash.h"
#include "gguf/gguf_test_util.h"
#include "halo/halo.h"

static void full_size_model_is_refused_on_a_smaller_machine(void) {
    char *dir = tmpdir_make(), path[600];
    snprintf(path, sizeof path, "%s/DeepSeek-V4-Flash.gguf", dir);
    halo_gguf_writer *w = halo_gguf_writer_create();
    halo_error err = {0};
    CHECK_INT(dsv4_flash_add_to_writer(w, DSV4_MIX_DS4_Q2, &err), HALO_OK);
    CHECK_INT(halo_gguf_writer_write_file(w, path, &err), HALO_OK);
    halo_gguf_writer_free(w);

    setenv("HALO_PROFILE", "pc-64", 1);
    halo_engine_params p = {.model_path = path};
    halo_engine *e = NULL;
    halo_status st = halo_engine_open(&p, &e, &err);
    CHECK(st == HALO_E_UNSUPPORTED || st == HALO_E_NOMEM);
    CHECK(e == NULL);
    CHECK_CONTAINS(err.message, "DeepSeek-V4-Flash.gguf");
    CHECK_CONTAINS(err.message, "80.76 GiB of weights do not fit");
    printf("  %s\n", err.message);
    unsetenv("HALO_PROFILE");
    tmpdir_remove(dir);
}

static void tiny_fixture_is_admitted(void) {
    setenv("HALO_PROFILE", "pc-64", 1);
    halo_engine_params p = {.model_path = "tests/golden/models/tiny-a-f32.gguf", .n_ctx = 1100};
    halo_engine *e = NULL;
    halo_error err = {0};
    CHECK_INT(halo_engine_open(&p, &e, &err), HALO_OK);
    halo_engine_close(e);
    p.n_ctx = 100000; /* beyond the model's trained context: the planner names it */
    CHECK(halo_engine_open(&p, &e, &err) != HALO_OK);
    CHECK_CONTAINS(err.message, "context_length");
    unsetenv("HALO_PROFILE");
}

int main(void) {
    RUN(full_size_model_is_refused_on_a_smaller_machine);
    RUN(tiny_fixture_is_admitted);
    return check_report();
}
