/* moe_div.h's float-reciprocal quotient (the CUDA moe row classes' index arithmetic) against
 * integer division: every n below 2^16 for every d below 2^12, then for d up to 2^24 - 1 (small,
 * powers of two and their neighbours, random) the n that are hardest for it: multiples of d and
 * their neighbours up to 2^24 - 1, and random n. Runs on the CPU in every build (the same IEEE
 * single-precision operations as the device's, round to nearest, no extended precision). */
#include <stdio.h>

#include "backend/cuda/moe_div.h"
#include "check.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t next24(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 40); /* 24 bits */
}

static long bad;
static void one(int64_t n64, uint32_t d) {
    if (n64 < 0 || n64 >= MOE_DIV_LIMIT || d == 0 || d >= MOE_DIV_LIMIT) return;
    const uint32_t n = (uint32_t)n64;
    const uint32_t got = moe_quot(n, moe_divisor_of(d));
    if (got != n / d && bad++ < 5) printf("  %u / %u: %u, not %u\n", n, d, got, n / d);
}

static void quotients_equal_integer_division(void) {
    for (uint32_t d = 1; d < 4096; d++)
        for (uint32_t n = 0; n < 65536; n++)
            one(n, d);
    uint32_t ds[4096];
    int nd = 0;
    for (int s = 0; s < 24; s++)
        for (int o = -2; o <= 2; o++)
            ds[nd++] = (uint32_t)((1 << s) + o); /* 2^0 - 2 wraps: skipped by one() */
    while (nd < 4096)
        ds[nd++] = next24() >> (next24() % 24);
    for (int i = 0; i < nd; i++) {
        const uint32_t d = ds[i];
        if (d == 0 || d >= MOE_DIV_LIMIT) continue;
        const uint32_t step = d < 4096 ? d * (MOE_DIV_LIMIT / d / 4096 + 1) : d;
        for (int64_t m = 0; m < MOE_DIV_LIMIT; m += step)
            for (int o = -1; o <= 1; o++)
                one(m + o, d);
        for (int64_t k = 1; k <= 64; k++)
            for (int o = -1; o <= 1; o++)
                one(k * d + o, d);
        one(MOE_DIV_LIMIT - 1, d);
        for (int r = 0; r < 256; r++)
            one(next24(), d);
    }
    printf("  quotients checked, %ld wrong\n", bad);
    CHECK(bad == 0);
}

int main(void) {
    RUN(quotients_equal_integer_division);
    return check_report();
}
