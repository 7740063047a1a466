/* cupti_capture.c: what CUPTI hands the injection library, into trace events: activity buffers
 * (on CUPTI's thread, the activity capture), driver and runtime API callbacks (on the
 * application's threads; the callback capture's fast path with per-thread caches of device and
 * stream ids), resource callbacks (contexts made and destroyed, streams destroyed), and the
 * VMM mappings whose MEMORY2 records would otherwise count twice. The library's life cycle and
 * provenance are cupti_adapter.c's, its clock cupti_device.c's. */
#include <dlfcn.h>
#include <inttypes.h>
#include <glob.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <uthash.h>

#include <cuda.h>
#include <cupti.h>

#include "recorder/cupti_inject.h"
#include "recorder/cupti_callback.h"
#include "recorder/cupti_convert.h"
#include "recorder/cupti_devmem.h"
#include "recorder/rec_pause.h"

/* Ranges mapped through cuMemMap. CUPTI also reports such a mapping as a MEMORY2 allocation
 * (and its unmapping as a release) of the same address and size, stamped after the cuMemMap
 * call; the VMM callbacks already recorded them as VMM_MAP / VMM_UNMAP, so those MEMORY2
 * records are left out instead of counted twice. A record matches a mapping only by address,
 * size and time (not before the map), because the driver reuses freed virtual addresses: an
 * earlier cudaMalloc at the same address is a real allocation (seen on an H200).
 * VMM calls are rare (one per 2 or 20 MiB page): a hash under a mutex is enough. */
#define VMM_SLACK_NS 1000000ull
typedef struct vmm_map {
  uint64_t addr;
  uint64_t size;
  uint64_t ts;
  UT_hash_handle hh;
} vmm_map_t;
static vmm_map_t *g_vmm = NULL;
static pthread_mutex_t g_vmm_mu = PTHREAD_MUTEX_INITIALIZER;

static void vmm_note(uint64_t addr, uint64_t size, uint64_t ts) {
  pthread_mutex_lock(&g_vmm_mu);
  vmm_map_t *e;
  HASH_FIND(hh, g_vmm, &addr, sizeof addr, e);
  if (!e && (e = calloc(1, sizeof *e))) {
    e->addr = addr;
    HASH_ADD(hh, g_vmm, addr, sizeof e->addr, e);
  }
  if (e) {
    e->size = size;
    e->ts = ts;
  }
  pthread_mutex_unlock(&g_vmm_mu);
}

/* Is this converted MEMORY2 event a VMM mapping already recorded? Forgets it at its release. */
static int vmm_duplicate(const gmt_event_t *ev) {
  if (ev->kind != GMT_EV_ALLOC && ev->kind != GMT_EV_FREE) return 0;
  if (ev->flags & GMT_F_ASYNC) return 0;
  int dup = 0;
  pthread_mutex_lock(&g_vmm_mu);
  vmm_map_t *e = NULL;
  if (g_vmm) HASH_FIND(hh, g_vmm, &ev->addr, sizeof ev->addr, e);
  if (e && e->size == ev->size && ev->ts_ns + VMM_SLACK_NS >= e->ts) {
    dup = 1;
    if (ev->kind == GMT_EV_FREE) {
      HASH_DEL(g_vmm, e);
      free(e);
    }
  }
  pthread_mutex_unlock(&g_vmm_mu);
  return dup;
}

/* Runtime-API allocation in progress on this thread: its driver calls are not reported twice. */
static _Thread_local int t_in_runtime;


/* ---- activity buffers (CUPTI's thread) ------------------------------------------------------ */

void CUPTIAPI inj_buf_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
  *buffer = aligned_alloc(8, ACT_BUF_BYTES);
  *size = *buffer ? ACT_BUF_BYTES : 0;
  *max_records = 0;
}

void CUPTIAPI inj_buf_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
                                   size_t valid) {
  gmt_event_t evs[512];
  size_t n = 0;
  CUpti_Activity *rec = NULL;
  rec_core_t *core = inj.core;
  if (core && getpid() == inj.pid) {
    while (inj.api.cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
      if (rec_cupti_convert(rec, inj.t0, &evs[n]) && !vmm_duplicate(&evs[n])) n++;
      if (n == sizeof evs / sizeof evs[0]) {
        rec_core_push_batch(core, evs, n, 50000000ull);
        n = 0;
      }
    }
    if (n) rec_core_push_batch(core, evs, n, 50000000ull);
    size_t dropped = 0;
    if (inj.api.cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped) == CUPTI_SUCCESS && dropped)
      rec_core_add_dropped(core, dropped);
  }
  free(buffer);
}

/* ---- API callbacks (the application's threads) ---------------------------------------------- */

static void push_now(CUcontext ctx, uint8_t kind, uint64_t addr, uint64_t size, uint64_t stream,
                     uint32_t corr) {
  gmt_event_t ev;
  memset(&ev, 0, sizeof ev);
  ev.ts_ns = inj_now(NULL);
  ev.kind = kind;
  ev.addr = addr;
  ev.size = size;
  ev.stream = stream;
  ev.corr_id = corr;
  ev.mem_kind = GMT_MEM_DEVICE;
  uint32_t dev = 0;
  if (ctx && inj.api.cuptiGetDeviceId(ctx, &dev) == CUPTI_SUCCESS) ev.device = (uint16_t)dev;
  rec_core_push(inj.core, &ev);
}

static uint64_t stream_id(CUcontext ctx, CUstream s, int per_thread) {
  uint32_t id;
  if (ctx && inj.api.cuptiGetStreamIdEx(ctx, s, (uint8_t)per_thread, &id) == CUPTI_SUCCESS) return id;
  return GMT_STREAM_NONE;
}

/* A failed runtime allocation: the size asked for, the stream for async ones. */
static void on_runtime(const CUpti_CallbackData *d, CUpti_CallbackId cbid) {
  if (d->callbackSite == CUPTI_API_ENTER) {
    t_in_runtime++;
    return;
  }
  t_in_runtime--;
  int rc = *(const int *)d->functionReturnValue;
  const void *p = d->functionParams;
  uint64_t size = 0, stream = GMT_STREAM_NONE;
  switch (cbid) {
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemPoolTrimTo_v11020: {
      /* cudaMemPool_t is an opaque pointer; same layout as the driver's params */
      const cuMemPoolTrimTo_params *t = p;
      if (rc == 0)
        push_now(d->context, GMT_EV_EMPTY_CACHE, (uint64_t)(uintptr_t)t->pool, t->minBytesToKeep,
                 GMT_STREAM_NONE, d->correlationId);
      return;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_v11020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_ptsz_v11020: {
      const cuMemAllocAsync_params *a = p; /* (void **, size_t, stream): same layout */
      size = a->bytesize;
      stream = stream_id(d->context, a->hStream,
                         cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_ptsz_v11020);
      break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_v11020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_ptsz_v11020: {
      const cuMemAllocFromPoolAsync_params *a = p;
      size = a->bytesize;
      stream = stream_id(d->context, a->hStream,
                         cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_ptsz_v11020);
      break;
    }
    default: {
      /* cudaMalloc, cudaMallocManaged, cudaMallocHost, cudaHostAlloc: (void **, size_t, ...) */
      const cuMemAlloc_v2_params *a = p;
      size = a->bytesize;
      if (cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMallocPitch_v3020) {
        const cuMemAllocPitch_v2_params *m = p; /* (void **, size_t *, width, height) */
        size = (uint64_t)m->WidthInBytes * (uint64_t)m->Height;
      }
    }
  }
  if (rc != 0) push_now(d->context, GMT_EV_ALLOC_FAILED, 0, size, stream, d->correlationId);
}

static void on_driver(const CUpti_CallbackData *d, CUpti_CallbackId cbid) {
  if (d->callbackSite != CUPTI_API_EXIT) return;
  CUresult rc = *(const CUresult *)d->functionReturnValue;
  const void *p = d->functionParams;
  uint32_t corr = d->correlationId;
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuMemAddressReserve: {
      const cuMemAddressReserve_params *a = p;
      if (rc == CUDA_SUCCESS)
        push_now(d->context, GMT_EV_VMM_RESERVE, *a->ptr, a->size, GMT_STREAM_NONE, corr);
      return;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAddressFree: {
      const cuMemAddressFree_params *a = p;
      if (rc == CUDA_SUCCESS)
        push_now(d->context, GMT_EV_VMM_RELEASE, a->ptr, a->size, GMT_STREAM_NONE, corr);
      return;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemMap: {
      const cuMemMap_params *a = p;
      if (rc == CUDA_SUCCESS) {
        vmm_note(a->ptr, a->size, inj_now(NULL));
        push_now(d->context, GMT_EV_VMM_MAP, a->ptr, a->size, GMT_STREAM_NONE, corr);
      }
      return;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemUnmap: {
      const cuMemUnmap_params *a = p;
      if (rc == CUDA_SUCCESS)
        push_now(d->context, GMT_EV_VMM_UNMAP, a->ptr, a->size, GMT_STREAM_NONE, corr);
      return;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemCreate: {
      /* physical memory for expandable segments: its failure is the OOM; success shows as the
       * cuMemMap that follows it */
      const cuMemCreate_params *a = p;
      if (rc != CUDA_SUCCESS)
        push_now(d->context, GMT_EV_ALLOC_FAILED, 0, a->size, GMT_STREAM_NONE, corr);
      return;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemRelease: return; /* handle only: no address, no size */
    default: break;
  }
  if (t_in_runtime > 0) return; /* the runtime call's own callback reports it */
  if (cbid == CUPTI_DRIVER_TRACE_CBID_cuMemPoolTrimTo) {
    const cuMemPoolTrimTo_params *t = p;
    if (rc == CUDA_SUCCESS)
      push_now(d->context, GMT_EV_EMPTY_CACHE, (uint64_t)(uintptr_t)t->pool, t->minBytesToKeep,
               GMT_STREAM_NONE, corr);
    return;
  }
  if (rc == CUDA_SUCCESS) return;
  uint64_t size = 0, stream = GMT_STREAM_NONE;
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz: {
      const cuMemAllocAsync_params *a = p;
      size = a->bytesize;
      stream = stream_id(d->context, a->hStream, cbid == CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz: {
      const cuMemAllocFromPoolAsync_params *a = p;
      size = a->bytesize;
      stream = stream_id(d->context, a->hStream,
                         cbid == CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2: {
      const cuMemAllocPitch_v2_params *a = p;
      size = (uint64_t)a->WidthInBytes * a->Height;
      break;
    }
    default: {
      const cuMemAlloc_v2_params *a = p; /* cuMemAlloc, cuMemAllocManaged, cuMemAllocHost ... */
      size = a->bytesize;
    }
  }
  push_now(d->context, GMT_EV_ALLOC_FAILED, 0, size, stream, corr);
}

/* ---- the callback capture's fast path (the application's threads) -------------------------- */

/* Per-thread caches: cuptiGetDeviceId and cuptiGetStreamIdEx are lookups inside CUPTI that an
 * allocation-heavy loop would otherwise pay on every event. A stream handle can be reused after
 * cuStreamDestroy for a new stream with another id: entries remember inj.stream_gen and expire
 * when any stream is destroyed. */
#define STREAM_CACHE 8
typedef struct stream_slot {
  CUcontext ctx;
  const void *stream;
  uint32_t gen;
  int per_thread;
  uint64_t id;
} stream_slot_t;
static _Thread_local struct {
  CUcontext dev_ctx;
  uint16_t dev;
  unsigned next;
  stream_slot_t s[STREAM_CACHE];
} t_cache;

static uint16_t device_of(CUcontext ctx) {
  if (ctx && ctx == t_cache.dev_ctx) return t_cache.dev;
  uint32_t dev = 0;
  if (ctx && inj.api.cuptiGetDeviceId(ctx, &dev) == CUPTI_SUCCESS) {
    t_cache.dev_ctx = ctx;
    t_cache.dev = (uint16_t)dev;
  }
  return (uint16_t)dev;
}

static uint64_t stream_of(CUcontext ctx, const void *stream, int per_thread) {
  uint32_t gen = atomic_load_explicit(&inj.stream_gen, memory_order_relaxed);
  for (unsigned i = 0; i < STREAM_CACHE; i++) {
    const stream_slot_t *e = &t_cache.s[i];
    if (e->stream == stream && e->ctx == ctx && e->per_thread == per_thread && e->gen == gen &&
        e->ctx)
      return e->id;
  }
  uint32_t id;
  if (!ctx || inj.api.cuptiGetStreamIdEx(ctx, (CUstream)stream, (uint8_t)per_thread, &id) !=
                  CUPTI_SUCCESS)
    return GMT_STREAM_NONE;
  stream_slot_t *e = &t_cache.s[t_cache.next++ % STREAM_CACHE];
  *e = (stream_slot_t){.ctx = ctx, .stream = stream, .gen = gen, .per_thread = per_thread,
                       .id = id};
  return id;
}

/* The callsite of an event: the Python frame for the framework's stream-ordered requests (the
 * frequent calls: a cache lookup per frame), the owner too for the rare synchronous and VMM
 * calls (an unwind: microseconds). Frees, unmaps and trims get none. */
uint32_t inj_callsite_of(CUpti_CallbackId cbid, const gmt_event_t *ev) {
  if (ev->kind != GMT_EV_ALLOC && ev->kind != GMT_EV_ALLOC_FAILED &&
      ev->kind != GMT_EV_VMM_RESERVE && ev->kind != GMT_EV_VMM_MAP)
    return GMT_NO_STRING;
  uint32_t py = rec_callsites_capture(inj.cs);
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz: return py;
    default: return rec_callsites_owner(inj.cs, py, (const void *)inj_callsite_of);
  }
}

/* One driver call's exit -> one event in the ring. No lock on the way (callsites: the table's
 * mutex on a cache miss only), no allocation but a new callsite's string. */
static void on_driver_capture(const CUpti_CallbackData *d, CUpti_CallbackId cbid) {
  if (d->callbackSite != CUPTI_API_EXIT) return;
  gmt_event_t ev;
  rec_cb_need_t need;
  if (!rec_cb_convert(cbid, d->functionParams, (int)*(const CUresult *)d->functionReturnValue, 0,
                      &ev, &need))
    return;
  ev.ts_ns = inj_now(NULL);
  ev.corr_id = d->correlationId;
  ev.context = d->contextUid;
  ev.device = device_of(d->context);
  if (need.has_stream) ev.stream = stream_of(d->context, need.stream, need.per_thread);
  if (inj.cs) ev.callsite = inj_callsite_of(cbid, &ev);
  rec_core_push(inj.core, &ev);
}

/* The CUDA context and module code: sampled when a device's first context is made (cupti_devmem.c). */
static void context_sample(CUcontext ctx, uint32_t dev) {
  static CUptiResult(CUPTIAPI * ctx_id)(CUcontext, uint32_t *);
  if (!ctx_id) *(void **)&ctx_id = dlsym(inj.lib, "cuptiGetContextId");
  uint32_t id = 0;
  if (ctx_id && ctx_id(ctx, &id) != CUPTI_SUCCESS) id = 0;
  rec_devmem_context_created(inj.core, ctx, dev, id);
}

void CUPTIAPI inj_on_callback(void *ud, CUpti_CallbackDomain dom, CUpti_CallbackId cbid,
                                 const void *data) {
  /* a fork()ed child has inj.core == NULL (in_child): no getpid() syscall on the fast path */
  if (!inj.core) return;
  if (dom == CUPTI_CB_DOMAIN_DRIVER_API && !inj.activity) {
    if (inj.diag_count) {
      int mem = cbid < sizeof inj.mem_cbid && inj.mem_cbid[cbid];
      if (((const CUpti_CallbackData *)data)->callbackSite == CUPTI_API_EXIT) {
        atomic_fetch_add_explicit(&inj.n_calls, 1, memory_order_relaxed);
        if (mem) atomic_fetch_add_explicit(&inj.n_mem_calls, 1, memory_order_relaxed);
      }
      if (!mem) return;
    }
    if (!inj.diag_empty && !atomic_load_explicit(&rec_pause_empty, memory_order_relaxed))
      on_driver_capture(data, cbid);
    return;
  }
  if (dom == CUPTI_CB_DOMAIN_RESOURCE) {
    if (cbid == CUPTI_CBID_RESOURCE_STREAM_DESTROY_STARTING) {
      atomic_fetch_add(&inj.stream_gen, 1);
      return;
    }
    if (cbid == CUPTI_CBID_RESOURCE_CONTEXT_CREATED) {
      const CUpti_ResourceData *r = data;
      static _Atomic int first = 0;
      uint32_t dev;
      int have_dev = inj.api.cuptiGetDeviceId(r->context, &dev) == CUPTI_SUCCESS;
      if (!atomic_exchange(&first, 1) && have_dev) {
        atomic_store(&inj.device, dev);
        inj_note_mem_info(r->context);
      }
      if (have_dev) context_sample(r->context, dev);
      rec_core_gpu_ready(inj.core);
    } else if (cbid == CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING) {
      rec_devmem_context_destroying(inj.core, ((const CUpti_ResourceData *)data)->context);
    }
    return;
  }
  if (dom == CUPTI_CB_DOMAIN_RUNTIME_API) on_runtime(data, cbid);
  else if (dom == CUPTI_CB_DOMAIN_DRIVER_API) on_driver(data, cbid);
}

const CUpti_CallbackId inj_driver_cbids[] = {
    CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged, CUPTI_DRIVER_TRACE_CBID_cuMemAllocHost_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc, CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz, CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz, CUPTI_DRIVER_TRACE_CBID_cuMemPoolTrimTo,
    CUPTI_DRIVER_TRACE_CBID_cuMemAddressReserve, CUPTI_DRIVER_TRACE_CBID_cuMemAddressFree,
    CUPTI_DRIVER_TRACE_CBID_cuMemCreate, CUPTI_DRIVER_TRACE_CBID_cuMemRelease,
    CUPTI_DRIVER_TRACE_CBID_cuMemMap, CUPTI_DRIVER_TRACE_CBID_cuMemUnmap};
const CUpti_CallbackId inj_runtime_cbids[] = {
    CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, CUPTI_RUNTIME_TRACE_CBID_cudaMallocPitch_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMallocHost_v3020, CUPTI_RUNTIME_TRACE_CBID_cudaHostAlloc_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMallocManaged_v6000,
    CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_v11020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_ptsz_v11020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_v11020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_ptsz_v11020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemPoolTrimTo_v11020};
const size_t inj_nruntime_cbids = sizeof inj_runtime_cbids / sizeof inj_runtime_cbids[0];
const size_t inj_ndriver_cbids = sizeof inj_driver_cbids / sizeof inj_driver_cbids[0];
