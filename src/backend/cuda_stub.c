/* The CUDA backend's entry points in a build without it (-DHALO_CUDA=OFF, -DHALO_HIP=OFF). */
#include "backend/backend.h"
#include "core/error.h"

halo_status halo_backend_cuda_create(int device, halo_backend **out, halo_error *err) {
    (void)device;
    *out = NULL;
    return halo_fail(err, HALO_E_UNSUPPORTED,
                     "this halo was built without a GPU backend (configure with -DHALO_CUDA=ON or "
                     "-DHALO_HIP=ON)");
}

bool halo_backend_cuda_set_precise(halo_backend *be, bool precise) {
    (void)be, (void)precise;
    return false;
}

const char *halo_backend_cuda_flavor(void) {
    return NULL;
}
