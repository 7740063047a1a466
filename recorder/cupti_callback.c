/* cupti_callback.c: driver-API call parameters -> trace events (the callback capture).
 *
 * Why callbacks: CUPTI's MEMORY2 activity path cost ~1 us per allocation or free on an H200
 * (bench/RESULTS.md, "Recorder"): the driver builds a record, CUPTI buffers it and hands it to
 * its own thread. The API callback that CUPTI calls anyway at the driver call's exit already
 * holds everything a request-level trace needs: the size asked for, the stream, the pointer the
 * call returned (through its out-parameter) and the result code. So one function here turns
 * that into an event; the adapter stamps it (CUPTI clock, device, context, correlation id,
 * stream id) and pushes it into the ring on the calling thread.
 * What the callbacks cannot see, and the activity capture can: memory the driver allocates
 * without an API call (module globals: DEVICE_STATIC), and CUPTI's own pool records
 * (pool_create / pool_trim); trims asked for through cuMemPoolTrimTo are still recorded here,
 * as empty_cache. Memory kind comes from the API (cuMemAllocHost/cuMemHostAlloc: pinned,
 * cuMemAllocManaged: managed, the others device). */
#include "recorder/cupti_callback.h"

#include <string.h>

#include <cuda.h>
#include <cupti.h>

const uint32_t rec_cb_capture_cbids[] = {
    CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocHost_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemFreeHost,
    CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync,
    CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemPoolTrimTo,
    CUPTI_DRIVER_TRACE_CBID_cuMemAddressReserve,
    CUPTI_DRIVER_TRACE_CBID_cuMemAddressFree,
    CUPTI_DRIVER_TRACE_CBID_cuMemCreate,
    CUPTI_DRIVER_TRACE_CBID_cuMemMap,
    CUPTI_DRIVER_TRACE_CBID_cuMemUnmap,
};
const unsigned rec_cb_capture_ncbids = sizeof rec_cb_capture_cbids / sizeof rec_cb_capture_cbids[0];

static void set(gmt_event_t *out, uint8_t kind, uint64_t addr, uint64_t size, uint8_t mem) {
  out->kind = kind;
  out->addr = addr;
  out->size = size;
  out->mem_kind = mem;
}

/* An allocation call: ALLOC with the returned pointer, or ALLOC_FAILED with the size asked.
 * Only CUDA_ERROR_OUT_OF_MEMORY is a failed allocation: the runtime makes driver calls that fail
 * for other reasons and retries them inside one successful cudaMallocAsync (seen on an H200:
 * one 32 KiB driver-level failure, then the same allocation succeeded), and a usage error
 * (bad argument, no context) is not an OOM either. */
static int alloc(gmt_event_t *out, int rc, int only_failures, uint64_t ptr, uint64_t size,
                 uint8_t mem) {
  if (rc == CUDA_SUCCESS) {
    if (only_failures) return 0;
    set(out, GMT_EV_ALLOC, ptr, size, mem);
  } else if (rc != CUDA_ERROR_OUT_OF_MEMORY) {
    return 0;
  } else {
    set(out, GMT_EV_ALLOC_FAILED, 0, size, mem);
  }
  return 1;
}

static void want_stream(rec_cb_need_t *need, CUstream s, int per_thread) {
  need->has_stream = 1;
  need->stream = (const void *)s;
  need->per_thread = per_thread;
}

int rec_cb_convert(uint32_t cbid, const void *p, int rc, int only_failures, gmt_event_t *out,
                   rec_cb_need_t *need) {
  memset(out, 0, sizeof *out);
  memset(need, 0, sizeof *need);
  out->stream = GMT_STREAM_NONE;
  out->callsite = GMT_NO_STRING;
  const int ok = rc == CUDA_SUCCESS;
  switch (cbid) {
    /* ---- allocations: the out-pointer is read only when the call succeeded ---- */
    case CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2: {
      const cuMemAlloc_v2_params *a = p;
      return alloc(out, rc, only_failures, ok ? *a->dptr : 0, a->bytesize, GMT_MEM_DEVICE);
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged: {
      const cuMemAllocManaged_params *a = p;
      return alloc(out, rc, only_failures, ok ? *a->dptr : 0, a->bytesize, GMT_MEM_MANAGED);
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2: {
      const cuMemAllocPitch_v2_params *a = p;
      /* the pitch the driver chose is what the allocation takes; asked: width x height */
      uint64_t size = (uint64_t)(ok ? *a->pPitch : a->WidthInBytes) * (uint64_t)a->Height;
      return alloc(out, rc, only_failures, ok ? *a->dptr : 0, size, GMT_MEM_DEVICE);
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocHost_v2: {
      const cuMemAllocHost_v2_params *a = p;
      return alloc(out, rc, only_failures, ok ? (uint64_t)(uintptr_t)*a->pp : 0, a->bytesize,
                   GMT_MEM_PINNED);
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc: {
      const cuMemHostAlloc_params *a = p;
      return alloc(out, rc, only_failures, ok ? (uint64_t)(uintptr_t)*a->pp : 0, a->bytesize,
                   GMT_MEM_PINNED);
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz: {
      const cuMemAllocAsync_params *a = p; /* the _ptsz struct has the same layout */
      if (!alloc(out, rc, only_failures, ok ? *a->dptr : 0, a->bytesize, GMT_MEM_DEVICE))
        return 0;
      out->flags = ok ? GMT_F_ASYNC | GMT_F_FROM_POOL : 0;
      want_stream(need, a->hStream, cbid == CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz);
      return 1;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz: {
      const cuMemAllocFromPoolAsync_params *a = p;
      if (!alloc(out, rc, only_failures, ok ? *a->dptr : 0, a->bytesize, GMT_MEM_DEVICE))
        return 0;
      out->flags = ok ? GMT_F_ASYNC | GMT_F_FROM_POOL : 0;
      want_stream(need, a->hStream, cbid == CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz);
      return 1;
    }
    /* ---- frees: size 0 (unknown here), filled by the core from the allocation ---- */
    case CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2: {
      const cuMemFree_v2_params *a = p;
      if (!ok || only_failures || !a->dptr) return 0;
      set(out, GMT_EV_FREE, a->dptr, 0, GMT_MEM_UNKNOWN); /* device or managed: the core knows */
      return 1;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeHost: {
      const cuMemFreeHost_params *a = p;
      if (!ok || only_failures || !a->p) return 0;
      set(out, GMT_EV_FREE, (uint64_t)(uintptr_t)a->p, 0, GMT_MEM_PINNED);
      return 1;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz: {
      const cuMemFreeAsync_params *a = p;
      if (!ok || only_failures || !a->dptr) return 0;
      set(out, GMT_EV_FREE, a->dptr, 0, GMT_MEM_DEVICE);
      out->flags = GMT_F_ASYNC | GMT_F_FROM_POOL;
      want_stream(need, a->hStream, cbid == CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz);
      return 1;
    }
    /* ---- pool trims, VMM (both captures) ---- */
    case CUPTI_DRIVER_TRACE_CBID_cuMemPoolTrimTo: {
      const cuMemPoolTrimTo_params *t = p;
      if (!ok) return 0;
      set(out, GMT_EV_EMPTY_CACHE, (uint64_t)(uintptr_t)t->pool, t->minBytesToKeep,
          GMT_MEM_DEVICE);
      return 1;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAddressReserve: {
      const cuMemAddressReserve_params *a = p;
      if (!ok) return 0;
      set(out, GMT_EV_VMM_RESERVE, *a->ptr, a->size, GMT_MEM_DEVICE);
      return 1;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAddressFree: {
      const cuMemAddressFree_params *a = p;
      if (!ok) return 0;
      set(out, GMT_EV_VMM_RELEASE, a->ptr, a->size, GMT_MEM_DEVICE);
      return 1;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemMap: {
      const cuMemMap_params *a = p;
      if (!ok) return 0;
      set(out, GMT_EV_VMM_MAP, a->ptr, a->size, GMT_MEM_DEVICE);
      need->vmm_map = 1;
      return 1;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemUnmap: {
      const cuMemUnmap_params *a = p;
      if (!ok) return 0;
      set(out, GMT_EV_VMM_UNMAP, a->ptr, a->size, GMT_MEM_DEVICE);
      return 1;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemCreate: {
      /* physical memory for expandable segments: its failure is the OOM; success shows as the
       * cuMemMap that follows it */
      const cuMemCreate_params *a = p;
      if (ok) return 0;
      set(out, GMT_EV_ALLOC_FAILED, 0, a->size, GMT_MEM_DEVICE);
      return 1;
    }
    default: return 0; /* cuMemRelease (a handle: no address, no size) and anything else */
  }
}
