/* Admission of a server's slots: every slot holds its own session of n_ctx tokens, so the
 * server plans n_slots sessions' state with the placement planner (src/mem) before the weights
 * load, and refuses up front, with the planner's reason and fixes, what does not fit. (The
 * engine's own admission plans one context; this plans them all.) */
#ifndef HALO_SERVE_ADMIT_H
#define HALO_SERVE_ADMIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "halo/halo.h"

/* Plans the model of ep with n_slots sequences of n_ctx tokens, on this machine (or the
 * machine profile $HALO_PROFILE names, as the engine does). HALO_E_NOMEM when refused, with the
 * reason and the first fix; on success *summary (size bytes) says what was planned. A model
 * made in place (synthetic:…) has no file to plan from: it is left to the engine's check.
 * *host_left (may be NULL) gets the host memory the plan leaves free after the weights, the
 * slots' state, the scratch and the OS reserve (UINT64_MAX when nothing was planned): the server
 * gives it to what the plan does not hold, the prefix cache and the slots' checkpoints. */
halo_status serve_admit(const halo_engine_params *ep, uint32_t n_slots, uint32_t n_ctx,
                        char *summary, size_t size, uint64_t *host_left, halo_error *err);

/* Splits host_left between the prefix cache's RAM (cache_ram, taken whole) and each slot's
 * checkpoints (at most default_ckpt each; 0 when nothing is left). False when cache_ram does
 * not fit. */
bool serve_split_host(uint64_t host_left, uint64_t cache_ram, uint32_t n_slots,
                      uint64_t default_ckpt, uint64_t *ckpt_per_slot);

#endif
