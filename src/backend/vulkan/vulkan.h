/* The Vulkan backend's constructor (the rest of its interface is backend.h's ops table). */
#ifndef HALO_BACKEND_VULKAN_H
#define HALO_BACKEND_VULKAN_H

#include "backend/backend.h"

/* Creates the Vulkan backend on physical device `device` (in the loader's order; -1: the
 * HALO_VK_DEVICE environment variable, else the first device with a compute queue). Fails with
 * a message naming what is missing: the loader library, a device, Vulkan 1.2, 16-bit storage,
 * subgroup arithmetic, or a buffer feature the shaders need. */
halo_status halo_backend_vulkan_create(int device, halo_backend **out, halo_error *err);

/* The device's name (a Vulkan backend only). */
const char *halo_backend_vulkan_device_name(const halo_backend *be);

/* Whether this build has the Vulkan backend (false: halo_backend_vulkan_create only fails). */
bool halo_backend_vulkan_built(void);

#endif
