/* i-quant codebooks (generated: grids.c, tools/quant/gen_grids.py). An index selects a row of
 * 8 (or 4) small unsigned magnitudes, packed lowest byte first; signs are stored separately.
 * iq1s_grid rows hold signed bytes -1, 0, 1. */
#ifndef HALO_QUANT_GRIDS_H
#define HALO_QUANT_GRIDS_H

#include <stdint.h>

extern const uint64_t halo_iq2xxs_grid[256];
extern const uint64_t halo_iq2xs_grid[512];
extern const uint64_t halo_iq2s_grid[1024];
extern const uint32_t halo_iq3xxs_grid[256];
extern const uint32_t halo_iq3s_grid[512];
extern const uint64_t halo_iq1s_grid[2048];

/* For each 7-bit IQ sign index: 8 bytes of +1 / -1 (0xff), bit 7 being the parity bit. */
extern const uint64_t halo_iq_sign64[128];

#endif
