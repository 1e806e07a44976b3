// Weight bytes to floats without a conversion instruction. On NVIDIA an int-to-float
// conversion issues at a quarter of the FMA rate or less (16 a clock per SM on Hopper against
// 128 FMAs), and the decode shaders converted one per weight: for the q2 model's ~7 G weights
// a token that is ~1.7 ms of issue slots at 24 layers. Instead the byte is put under the
// exponent of 2^23 (uintBitsToFloat(0x4B000000 | b) = 2^23 + b, exact for b < 2^23) and the
// offset subtracted: one integer op and one add, both full rate, and the same value. Measured
// on the H200 (session 7, bench_vk_matvec): 0-6 % a projection, within the runs' spread, so
// the conversions were not what limited these kernels; kept as the default, never slower.
// HALO_VK_CVT=0 (bit 0 of constant 2 clear) keeps the conversions. Bits 4-6 of constant 2:
// HALO_VK_MOE_UNROLL, bits 8-10 HALO_VK_MOE_R, bit 12 HALO_VK_MOE_PRE (matvec_moe.comp).
layout(constant_id = 2) const uint CVT_MODE = 1u;
const bool CVT = (CVT_MODE & 1u) != 0u;
const float CVT_2P23 = 8388608.0;

// 2^23 + byte k of w
float cvt_b(uint w, uint k) { return uintBitsToFloat(0x4B000000u | ((w >> (8u * k)) & 0xffu)); }
