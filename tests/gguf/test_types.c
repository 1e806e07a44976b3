/* Block geometry of the tensor types. The ggml library itself is the oracle for these numbers
 * (tests/quant compares every entry against libggml-base's type traits); here we pin the
 * table's API and the sizes the GGUF reader depends on. */
#include "check.h"
#include "halo/types.h"

static void known_types_have_names_and_blocks(void) {
    CHECK_STR(halo_type_name(HALO_TYPE_IQ2_XXS), "iq2_xxs");
    CHECK_STR(halo_type_name(HALO_TYPE_MXFP4), "mxfp4");
    CHECK_STR(halo_type_name(4), "unknown");
    CHECK(halo_type_info_get(4) == NULL);
    CHECK(halo_type_info_get(HALO_TYPE_ID_LIMIT) == NULL);
    CHECK(halo_type_info_get(0xffffffffu) == NULL);
    CHECK_INT(halo_type_from_name("Q2_K"), HALO_TYPE_Q2_K);
    CHECK_INT(halo_type_from_name("nope"), -1);
}

static void bytes_respect_blocks_and_overflow(void) {
    uint64_t b = 0;
    CHECK(halo_type_bytes(HALO_TYPE_Q8_0, 64, &b));
    CHECK_INT(b, 68);
    CHECK(!halo_type_bytes(HALO_TYPE_Q8_0, 33, &b));
    CHECK(!halo_type_bytes(HALO_TYPE_F32, UINT64_MAX / 2, &b));
    CHECK(!halo_type_bytes(5, 32, &b));
}

int main(void) {
    RUN(known_types_have_names_and_blocks);
    RUN(bytes_respect_blocks_and_overflow);
    return check_report();
}
