/* n / d for 0 <= n < 2^24 and 1 <= d < 2^24, by a float reciprocal and one correction step: the
 * moe row classes' work-item arithmetic (moe_gu.cuh, moe_dn.cuh), where a runtime 32-bit division
 * is a ~20-instruction sequence with a reciprocal's latency and ran for every row (cuda-moe-1's
 * ncu: ~400 instructions of bookkeeping a row). Why it is exact: inv = 1/d rounded (relative error
 * <= 2^-24), n is exact as a float, and the product's rounding adds another 2^-24, so the
 * estimate is within (n / d) 2^-23 < 2 / d of n / d: below one for d >= 3, and d = 1, 2 are
 * exact (inv a power of two). Truncated, it is the quotient or one off either way, which the
 * remainder's sign and size correct. Plain C so the CPU tests check it (test_cuda_moe_div). */
#ifndef HALO_BACKEND_CUDA_MOE_DIV_H
#define HALO_BACKEND_CUDA_MOE_DIV_H

#include <stdint.h>

#if defined(__CUDACC__) || defined(__HIPCC__)
#define MOE_DIV_FN static __host__ __device__ inline
#else
#define MOE_DIV_FN static inline
#endif

enum { MOE_DIV_LIMIT = 1 << 24 }; /* n and d below this */

typedef struct moe_divisor {
    uint32_t d;
    float inv;
} moe_divisor;

MOE_DIV_FN moe_divisor moe_divisor_of(uint32_t d) {
    moe_divisor v = {d, 1.0f / (float)d};
    return v;
}

MOE_DIV_FN uint32_t moe_quot(uint32_t n, moe_divisor v) {
    const uint32_t q = (uint32_t)((float)n * v.inv);
    const int32_t r = (int32_t)(n - q * v.d);
    return r < 0 ? q - 1 : r >= (int32_t)v.d ? q + 1 : q;
}

#endif
