/* Opening an engine with a load progress callback: a model of tens of GiB takes a while to read,
 * and the command line shows a bar (src/cli prints it; the library only reports). */
#ifndef HALO_LOAD_H
#define HALO_LOAD_H

#include "halo/halo.h"
#include "halo/plan.h"

/* As halo_engine_open, calling progress (may be NULL) on the opening thread as weights are read
 * or made: done/total are tensor bytes over every phase of the load (host arena, device memory,
 * a synthetic model's fill), at most every 100 ms and once with done == total at the end. */
halo_status halo_engine_open_progress(const halo_engine_params *params,
                                      halo_load_progress_fn progress, void *user, halo_engine **out,
                                      halo_error *err);

#endif
