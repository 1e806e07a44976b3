/* Precise or fast for the CUDA backend (a plain C header, usable from C in a CUDA or HIP build),
 * as the engine's `precise` parameter says for the CPU and Vulkan backends.
 *
 * Precise (the default): activations stay f32 for every weight type, the CPU's precise mode.
 * Fast: projections and experts of batches of many tokens (prefill) run on tensor cores with
 * weights and activations rounded to f16 and f32 sums (src/backend/cuda/gemm_mma.cu); one-token
 * steps (decode) run Q8_0, IQ2_XXS and Q2_K projections and experts over int8 activations
 * quantized as the CPU's fast mode does (src/backend/cuda/mvq.cu). HALO_CUDA_MMA=1 (or 0) and
 * HALO_CUDA_INTDOT=1 (or 0) in the environment force each part fast (or precise) whatever is
 * set here, for measuring. HIP builds have no fast path. */
#ifndef HALO_BACKEND_CUDA_PRECISION_H
#define HALO_BACKEND_CUDA_PRECISION_H

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "backend/backend.h"

/* Sets the mode of a backend made by halo_backend_cuda_create; false for any other backend. */
bool halo_backend_cuda_set_precise(halo_backend *be, bool precise);

#ifdef __cplusplus
}
#endif

#endif
