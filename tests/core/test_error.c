#include "check.h"
#include "core/error.h"

static void fail_fills_status_and_message(void) {
    halo_error err = {0};
    halo_status st = halo_fail(&err, HALO_E_TRUNCATED, "tensor %s at %d", "blk.0.x", 7);
    CHECK_INT(st, HALO_E_TRUNCATED);
    CHECK_INT(err.status, HALO_E_TRUNCATED);
    CHECK_STR(err.message, "tensor blk.0.x at 7");
    CHECK_STR(halo_status_name(st), "truncated");
}

static void fail_accepts_null_error(void) {
    CHECK_INT(halo_fail(NULL, HALO_E_IO, "x"), HALO_E_IO);
}

static void prefix_keeps_status(void) {
    halo_error err = {0};
    halo_fail(&err, HALO_E_DUPLICATE, "duplicate key 'a'");
    CHECK_INT(halo_error_prefix(&err, "%s: ", "m.gguf"), HALO_E_DUPLICATE);
    CHECK_STR(err.message, "m.gguf: duplicate key 'a'");
}

static void long_messages_are_cut_not_overrun(void) {
    halo_error err = {0};
    char big[2000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = 0;
    halo_fail(&err, HALO_E_IO, "%s", big);
    CHECK_INT(strlen(err.message), sizeof err.message - 1);
    halo_error_prefix(&err, "p: ");
    CHECK_INT(strlen(err.message), sizeof err.message - 1);
    CHECK(strncmp(err.message, "p: xx", 5) == 0);
}

int main(void) {
    RUN(fail_fills_status_and_message);
    RUN(fail_accepts_null_error);
    RUN(prefix_keeps_status);
    RUN(long_messages_are_cut_not_overrun);
    return check_report();
}
