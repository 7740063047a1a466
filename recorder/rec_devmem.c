/* rec_devmem.c: what the driver counts on a device beyond what the trace maps (the CUDA context
 * and module code), made into DEVICE_USAGE records on the writer thread (formats/SPEC.md 5.4.1).
 *
 * The source (cupti_devmem.c) samples the driver's count (NVML's per-process figure, or
 * cuMemGetInfo's total - free) less the current memory pool's unused reserve, and pushes it
 * as a DEVICE_USAGE record whose size is that count. The writer thread handles events in
 * timestamp order, so here each device's mapped bytes at the sample's moment are known: live
 * ALLOCs and VMM_MAPs of device (or unknown) memory, as the trace holds them. The record is
 * written with size = count - mapped; a count below what the trace maps (the context already
 * gone, a process NVML miscounts) says nothing about the context and is not written.
 * Cost: one branch per event and an add or subtract for those that map or unmap. */
#include "recorder/rec_core.h"

static int device_mem(const gmt_event_t *ev) {
  return ev->mem_kind == GMT_MEM_DEVICE || ev->mem_kind == GMT_MEM_UNKNOWN;
}

int rec_mapped_apply(rec_mapped_t *m, gmt_event_t *ev) {
  if (ev->device >= REC_MAPPED_DEVICES) return ev->kind == GMT_EV_DEVICE_USAGE ? -1 : 0;
  uint64_t *b = &m->bytes[ev->device];
  switch (ev->kind) {
    case GMT_EV_ALLOC:
    case GMT_EV_VMM_MAP:
      if (device_mem(ev)) *b += ev->size;
      return 0;
    case GMT_EV_FREE:
    case GMT_EV_VMM_UNMAP:
      if (device_mem(ev)) *b -= ev->size < *b ? ev->size : *b;
      return 0;
    case GMT_EV_DEVICE_USAGE:
      if (ev->size < *b) return -1;
      ev->size -= *b;
      return 0;
    default:
      return 0;
  }
}
