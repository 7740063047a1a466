/* cupti_devmem.h: samples of the memory the process has on each device beyond its trace's maps
 * (the CUDA context, module code), pushed as DEVICE_USAGE records (cupti_devmem.c). Called by
 * the injection library (cupti_adapter.c) only. */
#ifndef CUPTI_DEVMEM_H
#define CUPTI_DEVMEM_H

#include <stdint.h>

#include <cuda.h>

#include "recorder/rec_core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* In cuInit (the injection's start): resolve the driver calls (NVML is loaded, on a thread of
 * its own, when the first context is made). now: the events' clock. GPUMEM_DEVMEM=0: nothing. */
void rec_devmem_start(uint64_t (*now)(void *));
/* 1 once started: the trace's header then says it holds samples (kv device_usage=sampled). */
int rec_devmem_on(void);
/* CUPTI resource callbacks: a context made (the device's first is sampled), one about to be
 * destroyed (sampled without making it current, then forgotten). */
void rec_devmem_context_created(rec_core_t *core, CUcontext ctx, uint32_t device, uint32_t ctx_id);
void rec_devmem_context_destroying(rec_core_t *core, CUcontext ctx);
/* atexit, before the trace is closed: every device whose context is alive. */
void rec_devmem_at_exit(rec_core_t *core);

#ifdef __cplusplus
}
#endif
#endif /* CUPTI_DEVMEM_H */
