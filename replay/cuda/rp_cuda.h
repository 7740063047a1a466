/* rp_cuda.h: the `cuda:N` replay backend (//replay/cuda:cuda_backend): the same policy code
 * drives the real CUDA driver. No CUDA header here: cuda_backend.c is the only file that
 * sees <cuda.h>, and it finds libcuda.so.1 at run time (dlopen), so every tool starts and
 * explains itself on machines without a GPU. */
#ifndef RP_CUDA_H
#define RP_CUDA_H

#include <stdint.h>

#include "base/gm_base.h"
#include "replay/engine/rp_engine.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rp_cuda_opts {
  uint64_t capacity;     /* a software limit below the real memory (what-if); 0 = none */
  uint64_t total_memory; /* what policies see as the total; 0: capacity, else the device's */
  int real_addresses;    /* 0: policies see the simulator's addresses (identical decisions on
                            both backends); 1: the driver's own addresses */
  int addresses;         /* the simulator's segment address policy mirrored (rp_sim_opts_t) */
} rp_cuda_opts_t;

/* Open device `ordinal` through libcuda.so.1. No driver: GM_ERR_UNSUPPORTED "no CUDA driver
 * (libcuda.so.1 not found)"; other failures GM_ERR_CUDA with the driver's error name. The
 * backend's granularity is the device's minimum VMM granularity. */
gm_status_t rp_cuda_backend_create(int ordinal, const rp_cuda_opts_t *opts, rp_backend_t **out,
                                   gm_err_t *err);

/* The driver's version (e.g. 13000), 0 if libcuda.so.1 cannot be loaded. */
int rp_cuda_driver_version(void);

/* Free/total memory of the device and its VMM granularity, without creating a backend
 * (tests that compare sim and cuda configure the simulator with these). */
gm_status_t rp_cuda_device_info(int ordinal, uint64_t *total, uint64_t *granularity,
                                gm_err_t *err);

#ifdef __cplusplus
}
#endif
#endif /* RP_CUDA_H */
