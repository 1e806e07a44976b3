/* The scalar reference dot product of a 256-element super-block with a Q8_K activation block.
 * Every k- and i-quant is decoded to the same form,
 *     w[e] = d * s[g] * q[e] - dmin * m[g]        (g = e / group)
 * with small integers q, s, m, so the reference is one short loop shared by all of them and the
 * per-type code only has to say where the bits live. */
#ifndef HALO_QUANT_KDOT_H
#define HALO_QUANT_KDOT_H

#include "quant/blocks.h"

typedef struct kdecoded {
    int8_t q[QK_K];
    int16_t s[16];
    int16_t m[16]; /* all zero for types without mins */
    float d, dmin;
    int group; /* 16 or 32 */
} kdecoded;

static inline float halo_kdot(const kdecoded *k, const block_q8_K *a) {
    int32_t isum = 0, msum = 0;
    for (int g = 0; g < QK_K / k->group; g++) {
        int32_t qa = 0, sa = 0;
        for (int e = g * k->group; e < (g + 1) * k->group; e++) {
            qa += k->q[e] * a->qs[e];
            sa += a->qs[e];
        }
        isum += k->s[g] * qa;
        msum += k->m[g] * sa;
    }
    return a->d * (k->d * (float)isum - k->dmin * (float)msum);
}

#endif
