/* One-token projections over int8 activations (HALO_CUDA_INTDOT=1, CUDA only): the activation
 * vector is quantized as the CPU backend's non-precise mode quantizes it (Q8_0 blocks of 32 for
 * Q8_0 weights, Q8_K blocks of 256 for IQ2_XXS and Q2_K: src/quant/quantize.c step for step),
 * and each 32-weight unit of a weight row is dotted with it by __dp4a (four int8 products a
 * instruction), so the integer sums are the CPU's and only the float summation order differs.
 * Why: with f32 activations the one-token kernels are instruction-bound, not memory-bound (run
 * 19: IQ2_XXS decoding ~60 instructions per 8 weights, Q8_0 ~45, plus 32 bytes of activation
 * loads per 8 weights); here a unit of 32 weights costs ~35-60 instructions.
 *
 * Weight rows go through the warp's shared-memory chunk slots by cp.async as in mv.cuh; a lane
 * takes one 32-weight unit (one Q8_0 block, one IQ2_XXS/Q2_K sub-block) at a time. */
#ifndef HALO_BACKEND_CUDA_MVQ_CUH
#define HALO_BACKEND_CUDA_MVQ_CUH

#include "backend/cuda/mv.cuh"

/* A quantized activation of n values (n % 256 == 0), laid out as qs[n] int8, then d[n / 32]
 * floats (Q8_0: one scale per 32, already rounded to f16 as the CPU's block stores it; Q8_K:
 * the first n / 256 entries, f32), then bs[n / 16] int32 (Q8_K: sums of 16 qs). */
static __host__ __device__ constexpr int64_t mvq_act_bytes(int64_t n) {
    return n + n / 32 * 4 + n / 16 * 4;
}

#ifndef HALO_HIP

/* The weight types with an int8 path, and whether their activation is Q8_K (else Q8_0). */
static __host__ __device__ constexpr bool mvq_type(int t) {
    return t == HALO_TYPE_Q8_0 || t == HALO_TYPE_IQ2_XXS || t == HALO_TYPE_Q2_K;
}
static __host__ __device__ constexpr bool mvq_k(int t) {
    return t != HALO_TYPE_Q8_0;
}

typedef struct q8act {
    const int8_t *qs;
    const float *d;
    const int32_t *bs;
} q8act;
static __device__ __forceinline__ q8act mvq_act_at(const uint8_t *base, int64_t n) {
    q8act a = {(const int8_t *)base, (const float *)(base + n),
               (const int32_t *)(base + n + n / 32 * 4)};
    return a;
}

/* Quantizes 256 values held by a warp, eight a lane (lane l: values 8l .. 8l + 7 of the 256
 * starting at element e0), as one Q8_K block (K) or eight Q8_0 blocks, into the activation at
 * base (n values). The float operations are src/quant/quantize.c's, correctly rounded. */
template <bool K>
static __device__ __forceinline__ void mvq_quant256(const float v[8], int64_t e0, uint8_t *base,
                                                    int64_t n) {
    const int lane = threadIdx.x % WARP;
    float *d = (float *)(base + n);
    int32_t *bs = (int32_t *)(base + n + n / 32 * 4);
    int q[8];
    if constexpr (!K) {
        float amax = 0.0f;
#pragma unroll
        for (int i = 0; i < 8; i++)
            amax = fmaxf(amax, fabsf(v[i]));
        amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 1));
        amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 2));
        const float dd = __fdiv_rn(amax, 127.0f);
        const float id = dd != 0.0f ? __fdiv_rn(1.0f, dd) : 0.0f;
#pragma unroll
        for (int i = 0; i < 8; i++) {
            float r = roundf(__fmul_rn(v[i], id));
            r = r != r ? 0.0f : r > 127.0f ? 127.0f : r < -127.0f ? -127.0f : r;
            q[i] = (int)r;
        }
        if ((lane & 3) == 0) d[(e0 >> 5) + (lane >> 2)] = __half2float(__float2half_rn(dd));
    } else {
        /* The first value of the largest magnitude (the CPU's scan order) gives the sign. */
        float amax = 0.0f, mx = 0.0f;
        int idx = 0x7fffffff;
#pragma unroll
        for (int i = 0; i < 8; i++) {
            const float ax = fabsf(v[i]);
            if (ax > amax) amax = ax, mx = v[i], idx = 8 * lane + i;
        }
#pragma unroll
        for (int m = WARP / 2; m > 0; m >>= 1) {
            const float oa = __shfl_xor_sync(0xffffffffu, amax, m);
            const float om = __shfl_xor_sync(0xffffffffu, mx, m);
            const int oi = __shfl_xor_sync(0xffffffffu, idx, m);
            if (oa > amax || (oa == amax && oi < idx)) amax = oa, mx = om, idx = oi;
        }
        float dd = 0.0f;
        if (amax == 0.0f) {
#pragma unroll
            for (int i = 0; i < 8; i++)
                q[i] = 0;
        } else {
            const float iscale = __fdiv_rn(-127.0f, mx);
#pragma unroll
            for (int i = 0; i < 8; i++) {
                const int r = __float2int_rn(__fmul_rn(iscale, v[i]));
                q[i] = r < 127 ? r : 127;
            }
            dd = __fdiv_rn(1.0f, iscale);
        }
        int s = 0;
#pragma unroll
        for (int i = 0; i < 8; i++)
            s += q[i];
        s += __shfl_xor_sync(0xffffffffu, s, 1);
        if ((lane & 1) == 0) bs[(e0 >> 4) + (lane >> 1)] = s;
        if (lane == 0) d[e0 >> 8] = dd;
    }
    uint2 packed;
    packed.x = (uint32_t)(q[0] & 255) | (uint32_t)(q[1] & 255) << 8 | (uint32_t)(q[2] & 255) << 16 |
               (uint32_t)(q[3] & 255) << 24;
    packed.y = (uint32_t)(q[4] & 255) | (uint32_t)(q[5] & 255) << 8 | (uint32_t)(q[6] & 255) << 16 |
               (uint32_t)(q[7] & 255) << 24;
    *(uint2 *)(base + e0 + 8 * lane) = packed;
}

/* The whole block quantizes x[0 .. n) (16-byte aligned, n % 256 == 0) into base; the caller
 * synchronizes the block before reading it. A warp loads MVQ_QB of its 256-value pieces before
 * quantizing the first (x is the previous kernel's output, in L2): one piece at a time, each
 * piece's loads waited for after the previous piece's shuffles and stores, so out_b's 8,192
 * inputs (4 pieces a warp) cost four L2 round trips before any row. Same values, same order.
 * batch false (the default, the experts' kernels: more registers would cost them blocks): one
 * piece at a time. */
enum { MVQ_QB = 4 };
template <bool K>
static __device__ __forceinline__ void mvq_quant_block(const float *x, int64_t n, uint8_t *base,
                                                       bool batch = false) {
    const int lane = threadIdx.x % WARP, warp = threadIdx.x / WARP, nw = blockDim.x / WARP;
    if (!batch) { /* a piece at a time, as before (HALO_CUDA_QBATCH=0) */
        for (int64_t c = warp; c < n / 256; c += nw) {
            const float4 *p = (const float4 *)(x + 256 * c + 8 * lane);
            const float4 a = p[0], b = p[1];
            const float v[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
            mvq_quant256<K>(v, 256 * c, base, n);
        }
        return;
    }
    for (int64_t c0 = warp; c0 < n / 256; c0 += (int64_t)MVQ_QB * nw) {
        float4 a[MVQ_QB], b[MVQ_QB];
#pragma unroll
        for (int u = 0; u < MVQ_QB; u++) {
            const int64_t c = c0 + (int64_t)u * nw;
            if (c < n / 256) {
                const float4 *p = (const float4 *)(x + 256 * c + 8 * lane);
                a[u] = p[0], b[u] = p[1];
            }
        }
#pragma unroll
        for (int u = 0; u < MVQ_QB; u++) {
            const int64_t c = c0 + (int64_t)u * nw;
            if (c >= n / 256) break; /* uniform across the warp */
            const float v[8] = {a[u].x, a[u].y, a[u].z, a[u].w, b[u].x, b[u].y, b[u].z, b[u].w};
            mvq_quant256<K>(v, 256 * c, base, n);
        }
    }
}

/* The IQ2_XXS grid a block keeps in shared memory: 256 rows of 8 magnitudes, in 2^rep copies
 * side by side (g.iq2xxs_rep; row i of copy c at index (i << rep) + c), lane l reading copy
 * l % 2^rep. With one copy, four random 8-byte lookups per 32 weights collide on banks (~3-4
 * wavefronts a half-warp instead of one) and they bounded the experts' gate/up kernel (H200
 * cd-3: 43.9 MB in 40.5 us). With 16 copies a row is 128 bytes, the 16 lanes of a half-warp
 * read 16 different bank pairs, and a lookup is two wavefronts whatever the indices, for 32 KiB
 * of shared memory (the kernels then hold two blocks a multiprocessor, not three). */
typedef uint2 mvq_tabs; /* 256 << rep entries: mvq_tabs_bytes */
static __host__ __device__ inline int mvq_tabs_bytes(int rep) {
    return 256 * 8 << rep;
}

static __device__ __forceinline__ void mvq_tabs_load(mvq_tabs *t, const cu_grids &g) {
    const int rep = g.iq2xxs_rep;
    for (int i = threadIdx.x; i < 256 << rep; i += blockDim.x) {
        const uint64_t r = g.iq2xxs[i >> rep];
        t[i] = make_uint2((uint32_t)r, (uint32_t)(r >> 32));
    }
}

/* This lane's copy of the grid: row i at lane[i << shift]. */
typedef struct mvq_grid {
    const uint2 *lane;
    int shift;
} mvq_grid;
static __device__ __forceinline__ mvq_grid mvq_grid_at(const mvq_tabs *t, const cu_grids &g) {
    mvq_grid r = {t ? t + (threadIdx.x & ((1 << g.iq2xxs_rep) - 1)) : NULL, g.iq2xxs_rep};
    return r;
}

/* The sign masks of four weights from four sign bits b (bit j: weight j negative): m1 has 0x01
 * in byte j where bit j is set (the multiply puts bit j at bit 8j: 0x00204081 is
 * 1 + 2^7 + 2^14 + 2^21, so no two bits meet), m = m1 * 0xff has 0xff there, and a signed byte
 * is (g ^ m) + m1: two's complement negation per byte (g >= 8, so no carry crosses a byte).
 * Computed rather than looked up: a table in shared memory (the earlier way) costs a 16-byte
 * load with bank conflicts per 8 weights, and those loads bounded the experts' gate/up kernel
 * (H200 request cd-2: 43.8 MB in 58 us, 0.75 TB/s). */
static __device__ __forceinline__ uint32_t mvq_sign_bytes(uint32_t b4) {
    return (b4 * 0x00204081u) & 0x01010101u;
}

/* The 32 int8 activations e .. e + 31 as 8 words. Lanes take units 32 bytes apart, so the
 * lanes l and l + 4 of a quarter-warp (the 8 lanes a 16-byte shared load serves at once) would
 * hit the same banks: lanes with bit 2 set load their second half first, and each
 * quarter-warp's loads fill the 32 banks once. */
static __device__ __forceinline__ void mvq_xv(const q8act &a, int64_t e, int xv[8]) {
    const int4 *xp = (const int4 *)(a.qs + e);
    const int h = (threadIdx.x >> 2) & 1;
    const int4 xa = xp[h], xb = xp[h ^ 1];
    const int4 x0 = h ? xb : xa, x1 = h ? xa : xb;
    xv[0] = x0.x, xv[1] = x0.y, xv[2] = x0.z, xv[3] = x0.w;
    xv[4] = x1.x, xv[5] = x1.y, xv[6] = x1.z, xv[7] = x1.w;
}

/* The dot of 32-weight unit u of a staged chunk with activation values e .. e + 31 (xv: their
 * int8 values, mvq_xv). */
template <int T>
static __device__ __forceinline__ float mvq_unit_x(const uint8_t *slot, int u, const int xv[8],
                                                   const q8act &a, int64_t e, const mvq_grid &tab) {
    if constexpr (T == HALO_TYPE_Q8_0) {
        /* Block u at byte 34u: 2-byte aligned; nine aligned words cover it, realigned by
         * byte_perm (the stage has 16 bytes of padding past its last slot). */
        const uint32_t *wp = (const uint32_t *)(slot + ((34 * u) & ~3));
        const bool odd = u & 1;
        uint32_t w[9];
#pragma unroll
        for (int i = 0; i < 9; i++)
            w[i] = wp[i];
        const uint32_t sel = odd ? 0x7654u : 0x5432u;
        int s = 0;
#pragma unroll
        for (int i = 0; i < 8; i++)
            s = __dp4a((int)__byte_perm(w[i], w[i + 1], sel), xv[i], s);
        const float dw = __half2float(__ushort_as_half((unsigned short)(odd ? w[0] >> 16 : w[0])));
        return dw * a.d[e >> 5] * (float)s;
    } else if constexpr (T == HALO_TYPE_IQ2_XXS) {
        /* Super-block u / 8 (66 bytes: d, then 8 x (4 grid indices, 32 bits of signs and
         * scale)); sub-block u % 8 at byte 2 + 8 (u % 8), 2-byte aligned. */
        const int off = 66 * (u >> 3) + 2 + 8 * (u & 7);
        const uint32_t *wp = (const uint32_t *)(slot + (off & ~3));
        const uint32_t sel = off & 2 ? 0x5432u : 0x3210u;
        const uint32_t w0 = wp[0], w1 = wp[1], w2 = wp[2];
        const uint32_t qi = __byte_perm(w0, w1, sel), aux = __byte_perm(w1, w2, sel);
        int s = 0;
#pragma unroll
        for (int l = 0; l < 4; l++) {
            const uint2 g = tab.lane[((qi >> (8 * l)) & 0xff) << tab.shift];
            const uint32_t sg = iq_signs((aux >> (7 * l)) & 127);
            const uint32_t lo1 = mvq_sign_bytes(sg & 15), hi1 = mvq_sign_bytes(sg >> 4);
            s = __dp4a((int)((g.x ^ (lo1 * 0xffu)) + lo1), xv[2 * l], s);
            s = __dp4a((int)((g.y ^ (hi1 * 0xffu)) + hi1), xv[2 * l + 1], s);
        }
        const int ls = 2 * (int)(aux >> 28) + 1;
        const float dw = __half2float(*(const __half *)(slot + 66 * (u >> 3))) * 0.125f;
        return dw * a.d[e >> 8] * (float)(s * ls);
    } else { /* Q2_K: scales[16] qs[64] d dmin; weight = d·sc·q - dmin·m per 16 */
        const uint8_t *b = slot + 84 * (u >> 3);
        const int sub = u & 7, shift = 2 * (sub & 3);
        const uint32_t *qw = (const uint32_t *)(b + 16 + 32 * (sub >> 2));
        const uint32_t sc = ((const uint16_t *)b)[sub];
        int s0 = 0, s1 = 0;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            s0 = __dp4a((int)((qw[i] >> shift) & 0x03030303u), xv[i], s0);
            s1 = __dp4a((int)((qw[i + 4] >> shift) & 0x03030303u), xv[i + 4], s1);
        }
        const int isum = (int)(sc & 15) * s0 + (int)((sc >> 8) & 15) * s1;
        const int msum =
            (int)((sc >> 4) & 15) * a.bs[e >> 4] + (int)(sc >> 12) * a.bs[(e >> 4) + 1];
        const uint32_t dm = *(const uint32_t *)(b + 80);
        const float d = __half2float(__ushort_as_half((unsigned short)dm));
        const float dmin = __half2float(__ushort_as_half((unsigned short)(dm >> 16)));
        return a.d[e >> 8] * (d * (float)isum - dmin * (float)msum);
    }
}

template <int T>
static __device__ __forceinline__ float mvq_unit(const uint8_t *slot, int u, const q8act &a,
                                                 int64_t e, const mvq_grid &tab) {
    int xv[8];
    mvq_xv(a, e, xv);
    return mvq_unit_x<T>(slot, u, xv, a, e, tab);
}

/* The chunks of the int8 path: weights per chunk and chunk slots per warp. The warp's
 * MV_STAGES x MV_STAGE bytes of shared memory are cut into as many slots as the type's chunk
 * allows, all but one in flight: a row of 4096 IQ2_XXS weights is 1056 bytes and a row of 2048
 * Q2_K weights 672, so 2048-weight chunks in three slots (mv_stream's layout) kept only one or
 * two kilobytes of a warp's rows in flight, too few to cover the memory's latency; here a warp
 * has five (Q8_0, IQ2_XXS) or eight (Q2_K) chunks in flight. */
static __host__ __device__ constexpr int mvq_ch(int t) {
    return t == HALO_TYPE_Q8_0 ? 1024 : t == HALO_TYPE_IQ2_XXS ? 4096 : 2048;
}
static __host__ __device__ constexpr int mvq_slot(int t) {
    return mvq_ch(t) / cx_block_elems(t) * cx_block_bytes(t);
}
static __host__ __device__ constexpr int mvq_stages(int t) {
    return MV_STAGES * MV_STAGE / mvq_slot(t);
}

/* A warp's stream of rows as mv_stream (mv.cuh), one token, over an int8 activation:
 * p.row(i, &row) as there; p.begin(i) the width (0: skip); p.act() the activation of the item
 * begun last; p.end(i, sum). p.prepare() runs once, after this warp's first copies are issued
 * and before any row is computed (a block-wide quantization goes there: every warp of the
 * block must call mvq_stream). */
/* HOLD: every item is one whole chunk (width mvq_ch(T)) over the same activation, so each lane
 * loads its HOLD = CH / 1024 units' activations into registers once (after prepare) instead of
 * once a row: the experts' IQ2_XXS gate/up rows (4096 wide, x shared by every row) read 32
 * bytes of activations from shared memory per 32 weights otherwise, as many wavefronts as the
 * grid lookups take with the grid's 16 copies. */
/* TWO (with HOLD): the warp computes two rows at a time, so the dependent chains of one row
 * (grid lookups, dp4a, the warp sum) overlap the other's: with 102 registers a thread the
 * experts' gate/up kernel keeps 16 warps a multiprocessor, too few to hide a single row's
 * latencies (H200 session 6 base, ncu: 44 MB in 48 us, 0.92 TB/s); matmul_multi's q_b rows
 * (one 1024-weight chunk each) take it too. The same rows and the same sums as one at a time;
 * p.begin is called again right before each p.end. */
/* RING: the warp's bytes of shared memory for the slots (MV_STAGES x MV_STAGE unless the caller
 * gives it more: mvq_dense_kernel's HALO_CUDA_MVQRING). */
template <int T, bool HOLD = false, class P, bool TWO = false, int RING = MV_STAGES * MV_STAGE>
static __device__ __forceinline__ void mvq_stream(P &p, int64_t first, int64_t stride,
                                                  int64_t n_items, uint8_t *stage,
                                                  const mvq_grid tab) {
    constexpr int E = cx_block_elems(T), B = cx_block_bytes(T), CH = mvq_ch(T);
    constexpr int SLOT = mvq_slot(T), S = RING / SLOT;
    static_assert(SLOT % 16 == 0 && S >= 3 && S * SLOT <= RING, "chunk");
    const int lane = threadIdx.x % WARP;
    int64_t ii = first, ik1 = 0, ikc = 0;
    int jn = 0;
    const char *irow = NULL;
    auto issue = [&]() {
        while (ik1 == 0 && ii < n_items) {
            ik1 = p.row(ii, &irow);
            if (ik1 == 0) ii += stride;
        }
        if (ii < n_items) {
            const int n16 = (int)((ik1 - ikc < CH ? ik1 - ikc : CH) / E * B / 16);
            const uint4 *src = (const uint4 *)(irow + ikc / E * B);
            uint8_t *dst = stage + (jn % S) * SLOT;
            for (int idx = lane; idx < n16; idx += WARP)
                cp_async16(dst + 16 * idx, src + idx);
            jn++;
            ikc += CH;
            if (ikc >= ik1) {
                ikc = ik1 = 0;
                ii += stride;
            }
        }
        cp_async_commit();
    };
#pragma unroll
    for (int st = 0; st < S - 1; st++)
        issue();
    p.prepare();
    int j = 0;
    if constexpr (HOLD && TWO) {
        constexpr int NH = CH / 1024;
        int xh[NH][8];
        const q8act a0 = p.act();
#pragma unroll
        for (int h = 0; h < NH; h++)
            mvq_xv(a0, 32 * (lane + WARP * h), xh[h]);
        int64_t it = first;
        for (;;) {
            while (it < n_items && p.begin(it) == 0)
                it += stride;
            if (it >= n_items) break;
            const int64_t ia = it;
            it += stride;
            while (it < n_items && p.begin(it) == 0)
                it += stride;
            const int64_t ib = it < n_items ? it : -1;
            if (ib >= 0) it += stride;
            if (ib >= 0)
                cp_async_wait<S - 3>(); /* chunks j and j + 1 are in */
            else
                cp_async_wait<S - 2>();
            __syncwarp();
            issue(); /* into the slot of chunk j - 1, read before */
            /* Both rows in one unrolled body, so their instructions interleave; without a
             * second row the first one's slot is read twice and the second sum dropped. */
            const uint8_t *sa = stage + (j % S) * SLOT;
            const uint8_t *sb = ib >= 0 ? stage + ((j + 1) % S) * SLOT : sa;
            float acc_a = 0.0f, acc_b = 0.0f;
#pragma unroll
            for (int h = 0; h < NH; h++) {
                const int u = lane + WARP * h;
                acc_a += mvq_unit_x<T>(sa, u, xh[h], a0, 32 * u, tab);
                acc_b += mvq_unit_x<T>(sb, u, xh[h], a0, 32 * u, tab);
            }
            __syncwarp();
            if (ib >= 0) issue(); /* into chunk j's slot, read now */
            acc_a = warp_sum(acc_a);
            acc_b = warp_sum(acc_b);
            p.begin(ia);
            p.end(ia, acc_a);
            if (ib >= 0) {
                p.begin(ib);
                p.end(ib, acc_b);
            }
            j += ib >= 0 ? 2 : 1;
        }
    } else if constexpr (HOLD) {
        constexpr int NH = CH / 1024; /* units a lane takes in a chunk */
        int xh[NH][8];
        const q8act a0 = p.act();
#pragma unroll
        for (int h = 0; h < NH; h++)
            mvq_xv(a0, 32 * (lane + WARP * h), xh[h]);
        for (int64_t it = first; it < n_items; it += stride, j++) {
            if (p.begin(it) == 0) {
                j--;
                continue;
            }
            cp_async_wait<S - 2>();
            __syncwarp();
            issue();
            const uint8_t *slot = stage + (j % S) * SLOT;
            float acc = 0.0f;
#pragma unroll
            for (int h = 0; h < NH; h++) {
                const int u = lane + WARP * h;
                acc += mvq_unit_x<T>(slot, u, xh[h], a0, 32 * u, tab);
            }
            __syncwarp();
            acc = warp_sum(acc);
            p.end(it, acc);
        }
    } else {
        for (int64_t it = first; it < n_items; it += stride) {
            const int64_t k1 = p.begin(it);
            if (k1 == 0) continue;
            const q8act a = p.act();
            float acc = 0.0f;
            for (int64_t kc = 0; kc < k1; kc += CH, j++) {
                cp_async_wait<S - 2>();
                __syncwarp();
                issue();
                const uint8_t *slot = stage + (j % S) * SLOT;
                const int n = (int)(k1 - kc < CH ? k1 - kc : CH);
                for (int u = lane; u < n / 32; u += WARP)
                    acc += mvq_unit<T>(slot, u, a, kc + 32 * u, tab);
                __syncwarp();
            }
            acc = warp_sum(acc);
            p.end(it, acc);
        }
    }
    cp_async_wait<0>();
}

/* Shared memory of a block of `warps` warps streaming type t over an activation of n values:
 * the chunk slots (+16 bytes the Q8_0 unit may read past the last), the activation, and the
 * IQ2_XXS grid's copies (rep: their log2). */
static inline int mvq_smem_bytes(int t, int warps, int64_t n, int rep,
                                 int ring = MV_STAGES * MV_STAGE) {
    return warps * ring + 16 + (int)mvq_act_bytes(n) +
           (t == HALO_TYPE_IQ2_XXS ? mvq_tabs_bytes(rep) : 0);
}

#endif /* !HALO_HIP */
#endif
