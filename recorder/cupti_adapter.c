/* cupti_adapter.c: the injection library's entry point and its only contact with CUDA.
 *
 * The CUDA driver loads libgpumem_inject.so from CUDA_INJECTION64_PATH during cuInit and calls
 * InitializeInjection() (the library's one exported symbol). We then
 *   - find libcupti at run time (never linked: a tool built against one toolkit must run with
 *     another install's CUPTI, and start without one): the copy already in the process (torch
 *     loads its own), $GPUMEM_CUPTI, $CUDA_HOME, /usr/local/cuda*, the nvidia-cuda-cupti wheel in
 *     the usual site-packages, then the loader's own search;
 *   - capture allocations one of two ways (GPUMEM_CAPTURE):
 *     callbacks (default): driver-API callbacks only, for the allocation, free, VMM and trim
 *       calls (cupti_callback.c); each call's exit is stamped and pushed into the ring on the
 *       calling thread; no activity kind is enabled. About 4x cheaper per event than activity
 *       records (bench/RESULTS.md, "Recorder");
 *     activity: the MEMORY2 and MEMORY_POOL activity kinds (records arrive in CUPTI's buffers,
 *       on CUPTI's thread, converted by rec_cupti_convert()), plus API callbacks for what
 *       records miss: failed allocations, the VMM calls behind expandable segments, pool trims.
 *       Sees what no API call shows: module globals (DEVICE_STATIC), CUPTI's pool records;
 *   - start the CUDA-free core (rec_core.c), which writes the trace off the application's threads.
 * Any failure here: one "[gpurec] ..." line on stderr, recording off, the application unharmed.
 *
 * Callsites (GPUMEM_CALLSITES=user, the default; stack; none): each allocation made on a thread
 * that runs Python code carries the program's innermost frame ("train.py:42:forward") or the
 * whole stack, interned (rec_callsite.c); the rare calls that are not a framework's requests
 * (synchronous allocations, VMM reserve/map) also carry the library that made them,
 * "[libnccl.so.2]" (rec_owner.c). Frees carry none: the replay knows them by address.
 *
 * GPUMEM_SELFTEST=N replaces CUPTI with N synthetic CUpti_ActivityMemory4 records pushed through
 * the same conversion and core: CI runs the real library end to end without a GPU. */
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

#include "recorder/cupti_callback.h"
#include "recorder/cupti_convert.h"
#include "recorder/cupti_devmem.h"
#include "recorder/rec_callsite.h"
#include "recorder/rec_core.h"
#include "recorder/rec_pause.h"
#include "recorder/rec_sites.h"
#include "recorder/rec_torch_stream.h"

#define EXPORT __attribute__((visibility("default")))
#define ACT_BUF_BYTES (1u << 20)
#define SIGNAL_FINISH_NS 3000000000ull

/* The CUPTI functions we call, resolved with dlsym. */
#define CUPTI_FNS(X)                                                                              \
  X(cuptiGetVersion, CUptiResult, (uint32_t *))                                                   \
  X(cuptiGetResultString, CUptiResult, (CUptiResult, const char **))                              \
  X(cuptiSubscribe, CUptiResult, (CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *))          \
  X(cuptiEnableCallback, CUptiResult, (uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain,    \
                                       CUpti_CallbackId))                                         \
  X(cuptiActivityRegisterCallbacks, CUptiResult,                                                  \
    (CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc))                        \
  X(cuptiActivityEnable, CUptiResult, (CUpti_ActivityKind))                                       \
  X(cuptiActivityGetNextRecord, CUptiResult, (uint8_t *, size_t, CUpti_Activity **))              \
  X(cuptiActivityFlushAll, CUptiResult, (uint32_t))                                               \
  X(cuptiActivityGetNumDroppedRecords, CUptiResult, (CUcontext, uint32_t, size_t *))              \
  X(cuptiGetTimestamp, CUptiResult, (uint64_t *))                                                 \
  X(cuptiGetDeviceId, CUptiResult, (CUcontext, uint32_t *))                                       \
  X(cuptiGetStreamIdEx, CUptiResult, (CUcontext, CUstream, uint8_t, uint32_t *))

typedef struct cupti_api {
#define X(name, ret, args) ret(CUPTIAPI *name) args;
  CUPTI_FNS(X)
#undef X
  CUptiResult(CUPTIAPI *cuptiSubscribe_v2)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *,
                                           CUpti_SubscriberParams *);
} cupti_api_t;

static struct {
  pthread_once_t once;
  pid_t pid;
  void *lib;
  char lib_path[1024];
  uint32_t version;
  cupti_api_t api;
  CUpti_SubscriberHandle sub;
  rec_core_t *core;
  uint64_t t0;
  _Atomic uint32_t device; /* device of the first context: the header's GPU */
  _Atomic uint64_t mem_info_total; /* cuMemGetInfo's total in that context (what XLA's and
                                      PyTorch's memory fractions multiply), 0 if unknown */
  _Atomic int warned;
  int selftest;
  int activity; /* GPUMEM_CAPTURE=activity: MEMORY2 records instead of callbacks */
  /* GPUMEM_DIAG (bench/recorder, tests/gpu/recorder_overhead.sh: where the time goes):
   *   empty_callbacks: the memory callbacks stay enabled but return at once (CUPTI's dispatch);
   *   subscribe_only: CUPTI loaded and subscribed, no driver callback enabled (what CUPTI's mere
   *     presence costs every driver call, a kernel launch included);
   *   inert: InitializeInjection returns at once: no CUPTI, no trace (the control);
   *   count_calls: the whole driver domain enabled, every call counted, memory calls recorded
   *     as usual; the counts go to stderr at exit (how many driver calls a loop makes) */
  int diag_empty, diag_subscribe_only, diag_count;
  _Atomic uint64_t n_calls, n_mem_calls;
  unsigned char mem_cbid[1024]; /* count_calls: 1 for the cbids the capture enables */
  _Atomic uint32_t stream_gen; /* bumped when a stream is destroyed: stream-id caches expire */
  rec_callsites_t *cs; /* callsites (GPUMEM_CALLSITES); NULL: none */
  int cs_mode;
  char cs_why[160];    /* why Python frames are not read, "" if they are */
  char manifest[4096];
} g = {.once = PTHREAD_ONCE_INIT};

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

/* ---- diagnostics ---------------------------------------------------------------------------- */

static void note_manifest(const char *line) {
  if (!g.manifest[0]) return;
  FILE *f = fopen(g.manifest, "a");
  if (!f) return;
  fprintf(f, "#%s\n", line);
  fclose(f);
}

/* One warning per process, then silence: the application's stderr is not ours. */
static void warn_once(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void warn_once(const char *fmt, ...) {
  if (atomic_exchange(&g.warned, 1)) return;
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  char line[1100];
  int n = snprintf(line, sizeof line, "[gpurec] %s\n", msg);
  if (n > 0 && write(2, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1) < 0) {
  }
  note_manifest(msg);
}

static void core_warn(void *ctx, const char *msg) { warn_once("%s", msg); }

static const char *cupti_err(CUptiResult r) {
  const char *s = NULL;
  if (g.api.cuptiGetResultString && g.api.cuptiGetResultString(r, &s) == CUPTI_SUCCESS && s)
    return s;
  return "unknown CUPTI error";
}

static int resolve_api(void) {
#define X(name, ret, args)                                                                         \
  if (!(*(void **)&g.api.name = dlsym(g.lib, #name))) return 0;
  CUPTI_FNS(X)
#undef X
  *(void **)&g.api.cuptiSubscribe_v2 = dlsym(g.lib, "cuptiSubscribe_v2");
  return 1;
}

/* ---- clocks and provenance ------------------------------------------------------------------ */

static uint64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The activity capture stamps callback events in CUPTI's timebase, to order them with the
 * records; the callback capture has no records, so the vDSO clock (no call into CUPTI) does. */
static uint64_t now_raw(void) {
  uint64_t t = 0;
  if (g.selftest || !g.activity || g.api.cuptiGetTimestamp(&t) != CUPTI_SUCCESS) t = mono_ns();
  return t;
}

static uint64_t hook_now(void *ctx) {
  uint64_t t = now_raw();
  return t > g.t0 ? t - g.t0 : 0;
}

static const char *hook_string(void *ctx, uint32_t id) { return rec_callsites_string(g.cs, id); }

static void hook_tick(void *ctx) { g.api.cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED); }

static void hook_final(void *ctx) { g.api.cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED); }

/* GPU name, UUID and memory from the driver already in the process (never loaded by us). */
static void hook_fill(void *ctx, gmt_header_t *h) {
  rec_frameworks_fill(h);
  /* auto mode switches every framework to per-request allocation but PyTorch, whose requests
   * come from its own history (merged by the launcher): this trace alone holds its segments */
  const char *m = getenv(REC_ENV_MODE);
  if (m && strcmp(m, "auto") == 0 && h->capture_mode == GMT_CAPTURE_REQUESTS &&
      gmt_header_framework_version(h, GMT_FW_PYTORCH))
    h->capture_mode = GMT_CAPTURE_NATIVE;
  char buf[256];
  if (g.selftest) {
    gmt_header_set(&h->gpu_name, "selftest (no GPU)", NULL);
    const char *usage = getenv("GPUMEM_SELFTEST_DEVMEM");
    if (usage && *usage) gmt_header_kv_set(h, "device_usage", "sampled", NULL);
    return;
  }
  char vbuf[sizeof g.lib_path + 64];
  snprintf(vbuf, sizeof vbuf, "%u.%u (API %u; %s)", g.version / 10000, (g.version / 100) % 100,
           g.version, g.lib_path);
  gmt_header_set(&h->cupti_version, vbuf, NULL);
  void *cu = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (!cu) return;
  CUresult (*get)(CUdevice *, int) = (CUresult(*)(CUdevice *, int))dlsym(cu, "cuDeviceGet");
  CUresult (*name)(char *, int, CUdevice) =
      (CUresult(*)(char *, int, CUdevice))dlsym(cu, "cuDeviceGetName");
  CUresult (*uuid)(CUuuid *, CUdevice) = (CUresult(*)(CUuuid *, CUdevice))dlsym(cu, "cuDeviceGetUuid_v2");
  if (!uuid) uuid = (CUresult(*)(CUuuid *, CUdevice))dlsym(cu, "cuDeviceGetUuid");
  CUresult (*mem)(size_t *, CUdevice) = (CUresult(*)(size_t *, CUdevice))dlsym(cu, "cuDeviceTotalMem_v2");
  CUresult (*drv)(int *) = (CUresult(*)(int *))dlsym(cu, "cuDriverGetVersion");
  CUdevice dev;
  int v;
  if (drv && drv(&v) == CUDA_SUCCESS) {
    snprintf(buf, sizeof buf, "%d.%d", v / 1000, (v % 1000) / 10);
    gmt_header_set(&h->cuda_version, buf, NULL);
  }
  if (get && get(&dev, (int)atomic_load(&g.device)) == CUDA_SUCCESS) {
    if (name && name(buf, sizeof buf, dev) == CUDA_SUCCESS) gmt_header_set(&h->gpu_name, buf, NULL);
    CUuuid u;
    if (uuid && uuid(&u, dev) == CUDA_SUCCESS) {
      const unsigned char *b = (const unsigned char *)u.bytes;
      snprintf(buf, sizeof buf,
               "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
               b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
               b[14], b[15]);
      gmt_header_set(&h->gpu_uuid, buf, NULL);
    }
    size_t total;
    if (mem && mem(&total, dev) == CUDA_SUCCESS) h->gpu_total_mem = total;
  }
  if (rec_devmem_on()) { /* DEVICE_USAGE records follow: readers look for them (SPEC.md 5.4.1) */
    gm_err_t err;
    gm_err_clear(&err);
    gmt_header_kv_set(h, "device_usage", "sampled", &err);
  }
  uint64_t mi = atomic_load(&g.mem_info_total);
  if (mi) {
    gm_err_t err;
    gm_err_clear(&err);
    snprintf(buf, sizeof buf, "%" PRIu64, mi);
    gmt_header_kv_set(h, "gpu_mem_info_total", buf, &err);
  }
}

/* cuMemGetInfo's total in a new context: the figure XLA's XLA_PYTHON_CLIENT_MEM_FRACTION and
 * PyTorch's memory fraction multiply. It can differ from cuDeviceTotalMem (by 1 MiB on an
 * H100). The context may not be current on this thread: push it for the one call. */
static void note_mem_info(CUcontext ctx) {
  void *cu = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (!cu) return;
  CUresult (*push)(CUcontext) = (CUresult(*)(CUcontext))dlsym(cu, "cuCtxPushCurrent_v2");
  CUresult (*pop)(CUcontext *) = (CUresult(*)(CUcontext *))dlsym(cu, "cuCtxPopCurrent_v2");
  CUresult (*info)(size_t *, size_t *) = (CUresult(*)(size_t *, size_t *))dlsym(cu, "cuMemGetInfo_v2");
  if (push && pop && info && push(ctx) == CUDA_SUCCESS) {
    size_t fr = 0, tot = 0;
    if (info(&fr, &tot) == CUDA_SUCCESS) atomic_store(&g.mem_info_total, (uint64_t)tot);
    CUcontext old;
    pop(&old);
  }
  dlclose(cu);
}

/* ---- activity buffers (CUPTI's thread) ------------------------------------------------------ */

static void CUPTIAPI buf_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
  *buffer = aligned_alloc(8, ACT_BUF_BYTES);
  *size = *buffer ? ACT_BUF_BYTES : 0;
  *max_records = 0;
}

static void CUPTIAPI buf_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
                                   size_t valid) {
  gmt_event_t evs[512];
  size_t n = 0;
  CUpti_Activity *rec = NULL;
  rec_core_t *core = g.core;
  if (core && getpid() == g.pid) {
    while (g.api.cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
      if (rec_cupti_convert(rec, g.t0, &evs[n]) && !vmm_duplicate(&evs[n])) n++;
      if (n == sizeof evs / sizeof evs[0]) {
        rec_core_push_batch(core, evs, n, 50000000ull);
        n = 0;
      }
    }
    if (n) rec_core_push_batch(core, evs, n, 50000000ull);
    size_t dropped = 0;
    if (g.api.cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped) == CUPTI_SUCCESS && dropped)
      rec_core_add_dropped(core, dropped);
  }
  free(buffer);
}

/* ---- API callbacks (the application's threads) ---------------------------------------------- */

static void push_now(CUcontext ctx, uint8_t kind, uint64_t addr, uint64_t size, uint64_t stream,
                     uint32_t corr) {
  gmt_event_t ev;
  memset(&ev, 0, sizeof ev);
  ev.ts_ns = hook_now(NULL);
  ev.kind = kind;
  ev.addr = addr;
  ev.size = size;
  ev.stream = stream;
  ev.corr_id = corr;
  ev.mem_kind = GMT_MEM_DEVICE;
  uint32_t dev = 0;
  if (ctx && g.api.cuptiGetDeviceId(ctx, &dev) == CUPTI_SUCCESS) ev.device = (uint16_t)dev;
  rec_core_push(g.core, &ev);
}

static uint64_t stream_id(CUcontext ctx, CUstream s, int per_thread) {
  uint32_t id;
  if (ctx && g.api.cuptiGetStreamIdEx(ctx, s, (uint8_t)per_thread, &id) == CUPTI_SUCCESS) return id;
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
        vmm_note(a->ptr, a->size, hook_now(NULL));
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
 * cuStreamDestroy for a new stream with another id: entries remember g.stream_gen and expire
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
  if (ctx && g.api.cuptiGetDeviceId(ctx, &dev) == CUPTI_SUCCESS) {
    t_cache.dev_ctx = ctx;
    t_cache.dev = (uint16_t)dev;
  }
  return (uint16_t)dev;
}

static uint64_t stream_of(CUcontext ctx, const void *stream, int per_thread) {
  uint32_t gen = atomic_load_explicit(&g.stream_gen, memory_order_relaxed);
  for (unsigned i = 0; i < STREAM_CACHE; i++) {
    const stream_slot_t *e = &t_cache.s[i];
    if (e->stream == stream && e->ctx == ctx && e->per_thread == per_thread && e->gen == gen &&
        e->ctx)
      return e->id;
  }
  uint32_t id;
  if (!ctx || g.api.cuptiGetStreamIdEx(ctx, (CUstream)stream, (uint8_t)per_thread, &id) !=
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
static uint32_t callsite_of(CUpti_CallbackId cbid, const gmt_event_t *ev) {
  if (ev->kind != GMT_EV_ALLOC && ev->kind != GMT_EV_ALLOC_FAILED &&
      ev->kind != GMT_EV_VMM_RESERVE && ev->kind != GMT_EV_VMM_MAP)
    return GMT_NO_STRING;
  uint32_t py = rec_callsites_capture(g.cs);
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz: return py;
    default: return rec_callsites_owner(g.cs, py, (const void *)callsite_of);
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
  ev.ts_ns = hook_now(NULL);
  ev.corr_id = d->correlationId;
  ev.context = d->contextUid;
  ev.device = device_of(d->context);
  if (need.has_stream) ev.stream = stream_of(d->context, need.stream, need.per_thread);
  if (g.cs) ev.callsite = callsite_of(cbid, &ev);
  rec_core_push(g.core, &ev);
}

/* The CUDA context and module code: sampled when a device's first context is made (cupti_devmem.c). */
static void context_sample(CUcontext ctx, uint32_t dev) {
  static CUptiResult(CUPTIAPI * ctx_id)(CUcontext, uint32_t *);
  if (!ctx_id) *(void **)&ctx_id = dlsym(g.lib, "cuptiGetContextId");
  uint32_t id = 0;
  if (ctx_id && ctx_id(ctx, &id) != CUPTI_SUCCESS) id = 0;
  rec_devmem_context_created(g.core, ctx, dev, id);
}

static void CUPTIAPI on_callback(void *ud, CUpti_CallbackDomain dom, CUpti_CallbackId cbid,
                                 const void *data) {
  /* a fork()ed child has g.core == NULL (in_child): no getpid() syscall on the fast path */
  if (!g.core) return;
  if (dom == CUPTI_CB_DOMAIN_DRIVER_API && !g.activity) {
    if (g.diag_count) {
      int mem = cbid < sizeof g.mem_cbid && g.mem_cbid[cbid];
      if (((const CUpti_CallbackData *)data)->callbackSite == CUPTI_API_EXIT) {
        atomic_fetch_add_explicit(&g.n_calls, 1, memory_order_relaxed);
        if (mem) atomic_fetch_add_explicit(&g.n_mem_calls, 1, memory_order_relaxed);
      }
      if (!mem) return;
    }
    if (!g.diag_empty && !atomic_load_explicit(&rec_pause_empty, memory_order_relaxed))
      on_driver_capture(data, cbid);
    return;
  }
  if (dom == CUPTI_CB_DOMAIN_RESOURCE) {
    if (cbid == CUPTI_CBID_RESOURCE_STREAM_DESTROY_STARTING) {
      atomic_fetch_add(&g.stream_gen, 1);
      return;
    }
    if (cbid == CUPTI_CBID_RESOURCE_CONTEXT_CREATED) {
      const CUpti_ResourceData *r = data;
      static _Atomic int first = 0;
      uint32_t dev;
      int have_dev = g.api.cuptiGetDeviceId(r->context, &dev) == CUPTI_SUCCESS;
      if (!atomic_exchange(&first, 1) && have_dev) {
        atomic_store(&g.device, dev);
        note_mem_info(r->context);
      }
      if (have_dev) context_sample(r->context, dev);
      rec_core_gpu_ready(g.core);
    } else if (cbid == CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING) {
      rec_devmem_context_destroying(g.core, ((const CUpti_ResourceData *)data)->context);
    }
    return;
  }
  if (dom == CUPTI_CB_DOMAIN_RUNTIME_API) on_runtime(data, cbid);
  else if (dom == CUPTI_CB_DOMAIN_DRIVER_API) on_driver(data, cbid);
}

static const CUpti_CallbackId driver_cbids[] = {
    CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged, CUPTI_DRIVER_TRACE_CBID_cuMemAllocHost_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc, CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz, CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz, CUPTI_DRIVER_TRACE_CBID_cuMemPoolTrimTo,
    CUPTI_DRIVER_TRACE_CBID_cuMemAddressReserve, CUPTI_DRIVER_TRACE_CBID_cuMemAddressFree,
    CUPTI_DRIVER_TRACE_CBID_cuMemCreate, CUPTI_DRIVER_TRACE_CBID_cuMemRelease,
    CUPTI_DRIVER_TRACE_CBID_cuMemMap, CUPTI_DRIVER_TRACE_CBID_cuMemUnmap};
static const CUpti_CallbackId runtime_cbids[] = {
    CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, CUPTI_RUNTIME_TRACE_CBID_cudaMallocPitch_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMallocHost_v3020, CUPTI_RUNTIME_TRACE_CBID_cudaHostAlloc_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMallocManaged_v6000,
    CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_v11020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_ptsz_v11020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_v11020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_ptsz_v11020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemPoolTrimTo_v11020};

/* ---- life cycle ----------------------------------------------------------------------------- */

static void at_exit(void) {
  if (g.diag_count && getpid() == g.pid) {
    char line[160];
    int n = snprintf(line, sizeof line, "[gpurec] diag count_calls: %" PRIu64 " driver calls, %"
                     PRIu64 " of them memory calls\n", atomic_load(&g.n_calls),
                     atomic_load(&g.n_mem_calls));
    if (n > 0 && write(2, line, (size_t)n) < 0) {
    }
  }
  if (g.core && getpid() == g.pid) {
    rec_devmem_at_exit(g.core); /* the context and the modules loaded by now */
    rec_core_stop(g.core);
  }
}

/* SIGTERM/SIGHUP with the default action would end the process without atexit: finish the
 * trace first (bounded wait), then die of the same signal so the exit status is unchanged. */
static void on_term(int sig) {
  if (g.core && getpid() == g.pid) rec_core_stop_from_signal(g.core, SIGNAL_FINISH_NS);
  signal(sig, SIG_DFL);
  raise(sig);
}

static void install_term(int sig) {
  struct sigaction old;
  if (sigaction(sig, NULL, &old) != 0 || old.sa_handler != SIG_DFL) return; /* the app's own */
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_term;
  sigemptyset(&sa.sa_mask);
  sigaction(sig, &sa, NULL);
}

/* A fork()ed child (DataLoader worker) inherits the core but not its writer thread. */
static void in_child(void) {
  g.core = NULL;
  rec_sites_attach(NULL, NULL, NULL);
  rec_pause_detach();
}

/* What the header says about callsites: the mode, and why Python frames are not read. */
static const char *callsites_header(void) {
  static char buf[256];
  if (!g.cs) return "none";
  snprintf(buf, sizeof buf, "%s%s%s", rec_cs_mode_name(g.cs_mode), g.cs_why[0] ? "; " : "",
           g.cs_why);
  return buf;
}

/* GPUMEM_CALLSITES: the table, and the frame source when this process runs CPython. Callsites
 * are the callback capture's: the activity capture's records arrive on CUPTI's thread. */
static void start_callsites(void) {
  const char *env = getenv(REC_ENV_CALLSITES);
  g.cs_mode = rec_cs_mode_parse(env);
  if (g.cs_mode < 0) {
    warn_once("%s=%s: not none, user or stack; recording without callsites", REC_ENV_CALLSITES,
              env);
    g.cs_mode = REC_CS_NONE;
  }
  if (g.cs_mode == REC_CS_NONE || (g.activity && !g.selftest)) return;
  rec_pyframes_t src;
  int py = rec_pyframes_cpython(&src, g.cs_why, sizeof g.cs_why);
  gm_err_t err;
  gm_err_clear(&err);
  if (rec_callsites_create(&g.cs, (rec_cs_mode_t)g.cs_mode, py ? &src : NULL, 0, &err) < 0) {
    g.cs = NULL;
    return;
  }
  rec_owner_prime(); /* backtrace() loads libgcc_s on its first call: here, not in a callback */
}

static int start_core(unsigned mode) {
  rec_config_t cfg;
  memset(&cfg, 0, sizeof cfg);
  gmt_header_init(&cfg.header);
  gm_err_t err;
  gm_err_clear(&err);
  const char *tmpl = getenv(REC_ENV_OUT);
  if (!tmpl || !*tmpl) tmpl = "gpumem.zst";
  int rank;
  rec_prov_rank(&rank, NULL, NULL);
  char path[4096];
  const char *modename = getenv(REC_ENV_MODE);
  if (rec_trace_name(tmpl, rank, (long)getpid(), path, sizeof path, &err) < 0 ||
      rec_prov_fill(&cfg.header, mode, &err) < 0 ||
      gmt_header_set(&cfg.header.tool, "gpurec " GPUREC_VERSION, &err) < 0 ||
      gmt_header_kv_set(&cfg.header, "gpurec_mode", modename && *modename ? modename : "native",
                        &err) < 0 ||
      gmt_header_kv_set(&cfg.header, "gpurec_capture",
                        g.selftest ? "selftest" : g.activity ? "activity" : "callbacks",
                        &err) < 0 ||
      gmt_header_kv_set(&cfg.header, "gpurec_callsites", callsites_header(), &err) < 0) {
    warn_once("cannot start recording: %s; the program runs on unrecorded", err.msg);
    gmt_header_free(&cfg.header);
    return 0;
  }
  cfg.path = path;
  cfg.manifest = g.manifest[0] ? g.manifest : NULL;
  cfg.fill_free_sizes = !g.activity;
  rec_hooks_t hooks = {.fill_header = hook_fill, .now_ns = hook_now, .warn = core_warn,
                       .string = hook_string};
  if (!g.selftest && g.activity) { /* only activity records wait in CUPTI's buffers */
    hooks.tick = hook_tick;
    hooks.final_flush = hook_final;
  }
  gm_status_t s = rec_core_start(&g.core, &cfg, &hooks, &err);
  gmt_header_free(&cfg.header);
  if (s < 0) {
    warn_once("cannot start recording: %s; the program runs on unrecorded", err.msg);
    g.core = NULL;
    return 0;
  }
  rec_sites_attach(g.core, g.cs, hook_now);
  pthread_atfork(NULL, NULL, in_child);
  atexit(at_exit);
  install_term(SIGTERM);
  install_term(SIGHUP);
  return 1;
}

/* GPUMEM_SELFTEST=N: N synthetic MEMORY2 records (allocs and frees on two streams) and a pool
 * trim, through the same conversion and core as a real run. */
static void selftest(long n) {
  g.t0 = mono_ns();
  start_callsites();
  if (!start_core(GMT_CAPTURE_SYNTHETIC)) return;
  rec_core_gpu_ready(g.core);
  for (long i = 0; i < n; i++) {
    CUpti_ActivityMemory4 m;
    memset(&m, 0, sizeof m);
    m.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
    m.memoryOperationType = (i % 2 == 0) ? CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION
                                         : CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE;
    m.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    m.address = 0x7f0000000000ull + (uint64_t)(i / 2 % 64) * 0x100000ull;
    m.bytes = 512u * (uint64_t)(1 + (i / 2) % 64);
    m.timestamp = mono_ns();
    m.correlationId = (uint32_t)i + 1;
    m.isAsync = 1;
    m.streamId = 7 + (uint32_t)((i / 2) % 2);
    gmt_event_t ev;
    if (rec_cupti_convert(&m, g.t0, &ev)) {
      if (g.cs && ev.kind == GMT_EV_ALLOC) ev.callsite = rec_callsites_capture(g.cs);
      rec_core_push(g.core, &ev);
    }
  }
  const char *usage = getenv("GPUMEM_SELFTEST_DEVMEM"); /* tests: one context sample of N bytes */
  if (usage && *usage) { /* (hook_fill's selftest branch writes kv device_usage) */
    gmt_event_t ev;
    memset(&ev, 0, sizeof ev);
    ev.kind = GMT_EV_DEVICE_USAGE;
    ev.addr = GMT_USAGE_PROCESS;
    ev.size = strtoull(usage, NULL, 10);
    ev.stream = GMT_STREAM_NONE;
    ev.mem_kind = GMT_MEM_DEVICE;
    ev.ts_ns = hook_now(NULL); /* after the records: the writer subtracts what they left mapped */
    rec_core_push(g.core, &ev);
  }
  const char *vmm = getenv("GPUMEM_SELFTEST_VMM");
  if (vmm && *vmm == '1') { /* one reserve, as a library's own VMM call: its owner's callsite */
    gmt_event_t ev;
    memset(&ev, 0, sizeof ev);
    ev.kind = GMT_EV_VMM_RESERVE;
    ev.addr = 0x7e0000000000ull;
    ev.size = 2u << 20;
    ev.stream = GMT_STREAM_NONE;
    ev.mem_kind = GMT_MEM_DEVICE;
    ev.ts_ns = hook_now(NULL);
    if (g.cs) ev.callsite = callsite_of(CUPTI_DRIVER_TRACE_CBID_cuMemAddressReserve, &ev);
    rec_core_push(g.core, &ev);
  }
  CUpti_ActivityMemoryPool3 p;
  memset(&p, 0, sizeof p);
  p.kind = CUPTI_ACTIVITY_KIND_MEMORY_POOL;
  p.memoryPoolOperationType = CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_TRIMMED;
  p.address = 0x1000;
  p.timestamp = mono_ns();
  gmt_event_t ev;
  if (rec_cupti_convert(&p, g.t0, &ev)) rec_core_push(g.core, &ev);
}

static unsigned env_mode(void) {
  const char *m = getenv(REC_ENV_MODE);
  /* auto: JAX, TF and CuPy switched, a process without a framework asks per request anyway;
   * a PyTorch process is made native when the header is filled (hook_fill) */
  if (m && (strcmp(m, "requests") == 0 || strcmp(m, "auto") == 0)) return GMT_CAPTURE_REQUESTS;
  return GMT_CAPTURE_NATIVE; /* native, torch (whose CUPTI side is native), or unset */
}

static int enable_cupti(void) {
  CUptiResult r;
  if (g.api.cuptiGetVersion(&g.version) != CUPTI_SUCCESS || g.version < 130000) {
    warn_once("CUPTI at %s has API version %u; this recorder reads CUDA 13 records (API >= "
              "130000): not recording, the program runs on",
              g.lib_path, g.version);
    return 0;
  }
  char holder[128] = "";
  if (g.api.cuptiSubscribe_v2) {
    CUpti_SubscriberParams sp;
    memset(&sp, 0, sizeof sp);
    sp.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
    sp.subscriberName = "gpurec";
    sp.oldSubscriberName = holder;
    sp.oldSubscriberSize = sizeof holder;
    r = g.api.cuptiSubscribe_v2(&g.sub, on_callback, NULL, &sp);
  } else {
    r = g.api.cuptiSubscribe(&g.sub, on_callback, NULL);
  }
  if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
    warn_once("another CUPTI client%s%s holds CUPTI (a profiler, Nsight Systems?): not recording, "
              "the program runs on",
              holder[0] ? " " : "", holder);
    return 0;
  }
  if (r != CUPTI_SUCCESS) {
    warn_once("cuptiSubscribe: %s: not recording, the program runs on", cupti_err(r));
    return 0;
  }
  /* GPUMEM_CALLBACKS=0 (diagnostic): activity records only, no API callbacks, so no OOM, VMM
   * or trim events; used to measure what the callbacks cost */
  g.api.cuptiEnableCallback(1, g.sub, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_CREATED);
  g.api.cuptiEnableCallback(1, g.sub, CUPTI_CB_DOMAIN_RESOURCE,
                            CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING);
  if (!g.activity) {
    /* the callback capture: only the driver calls that allocate, free, map or trim; no
     * runtime domain (the runtime's cudaMalloc* reach the driver's cuMemAlloc* and are seen
     * there), no activity kind */
    g.api.cuptiEnableCallback(1, g.sub, CUPTI_CB_DOMAIN_RESOURCE,
                              CUPTI_CBID_RESOURCE_STREAM_DESTROY_STARTING);
    if (g.diag_subscribe_only) return 1;
    if (g.diag_count) {
      CUptiResult (*dom)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain) =
          (CUptiResult(*)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain))dlsym(
              g.lib, "cuptiEnableDomain");
      for (unsigned i = 0; i < rec_cb_capture_ncbids; i++)
        if (rec_cb_capture_cbids[i] < sizeof g.mem_cbid) g.mem_cbid[rec_cb_capture_cbids[i]] = 1;
      if (dom && dom(1, g.sub, CUPTI_CB_DOMAIN_DRIVER_API) == CUPTI_SUCCESS) return 1;
      warn_once("GPUMEM_DIAG=count_calls: cannot enable the driver domain; counting memory calls");
    }
    for (unsigned i = 0; i < rec_cb_capture_ncbids; i++) {
      r = g.api.cuptiEnableCallback(1, g.sub, CUPTI_CB_DOMAIN_DRIVER_API, rec_cb_capture_cbids[i]);
      if (r != CUPTI_SUCCESS) {
        warn_once("cannot enable CUPTI callback %u: %s: not recording, the program runs on",
                  rec_cb_capture_cbids[i], cupti_err(r));
        return 0;
      }
    }
    rec_pause_attach(g.lib, g.sub, g.core); /* gpumem_bench_cupti (rec_pause.c) */
    return 1;
  }
  const char *cb = getenv("GPUMEM_CALLBACKS");
  int callbacks = !(cb && strcmp(cb, "0") == 0);
  for (size_t i = 0; callbacks && i < sizeof driver_cbids / sizeof driver_cbids[0]; i++)
    g.api.cuptiEnableCallback(1, g.sub, CUPTI_CB_DOMAIN_DRIVER_API, driver_cbids[i]);
  for (size_t i = 0; callbacks && i < sizeof runtime_cbids / sizeof runtime_cbids[0]; i++)
    g.api.cuptiEnableCallback(1, g.sub, CUPTI_CB_DOMAIN_RUNTIME_API, runtime_cbids[i]);
  if ((r = g.api.cuptiActivityRegisterCallbacks(buf_requested, buf_completed)) != CUPTI_SUCCESS ||
      (r = g.api.cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMORY2)) != CUPTI_SUCCESS ||
      (r = g.api.cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMORY_POOL)) != CUPTI_SUCCESS) {
    warn_once("cannot enable CUPTI memory records: %s: not recording, the program runs on",
              cupti_err(r));
    return 0;
  }
  return 1;
}

static void init_once(void) {
  g.pid = getpid();
  const char *man = getenv(REC_ENV_MANIFEST);
  if (man) snprintf(g.manifest, sizeof g.manifest, "%s", man);
  const char *cap = getenv(REC_ENV_CAPTURE);
  g.activity = cap && strcmp(cap, "activity") == 0;
  /* diagnostic for the benchmark: the callbacks stay enabled but record nothing, which
   * separates CUPTI's dispatch cost from this library's own work per event */
  const char *diag = getenv("GPUMEM_DIAG");
  g.diag_empty = diag && strcmp(diag, "empty_callbacks") == 0;
  g.diag_subscribe_only = diag && strcmp(diag, "subscribe_only") == 0;
  g.diag_count = diag && strcmp(diag, "count_calls") == 0;
  if (diag && strcmp(diag, "inert") == 0) return;
  const char *st = getenv(REC_ENV_SELFTEST);
  if (st && *st) {
    g.selftest = 1;
    selftest(strtol(st, NULL, 10));
    return;
  }
  g.lib = rec_cupti_open(g.lib_path, sizeof g.lib_path);
  if (!g.lib) {
    const char *env = getenv(REC_ENV_CUPTI);
    warn_once("CUPTI (libcupti.so) not found%s%s (set %s to its path): not recording, the "
              "program runs on",
              env && *env ? " at " : "", env && *env ? env : " under CUDA_HOME, /usr/local/cuda*, "
              "the nvidia-cuda-cupti wheel or the loader path", REC_ENV_CUPTI);
    return;
  }
  if (!resolve_api()) {
    warn_once("%s lacks functions this recorder needs: not recording, the program runs on",
              g.lib_path);
    return;
  }
  g.t0 = now_raw();
  start_callsites();
  /* the core first: CUPTI may deliver records as soon as activity is enabled */
  if (!start_core(env_mode())) return;
  if (!enable_cupti()) rec_core_fail(g.core, "recording off");
  else rec_devmem_start(hook_now);
}

/* gpurec's sitecustomize calls this (ctypes) once PyTorch's CUDA is up and its history is on: each
 * request PyTorch's allocator serves gets its callsite from then on (rec_sites.c). Returns the
 * hooked slots (0: already), -1 when PyTorch cannot be hooked (said once on stderr), -2 when
 * nothing is recorded (no trace, or callsites off). */
EXPORT int gpumem_torch_sites(void);
EXPORT int gpumem_torch_sites(void) {
  char why[512];
  int r = rec_sites_hook(REC_SITES_OBJECT, REC_SITES_SYMBOL, why, sizeof why);
  if (r == -1) warn_once("no callsites for PyTorch's requests: %s", why);
  return r;
}

/* gpurec's sitecustomize, once PyTorch's CUDA is up in default mode: stream PyTorch's allocator
 * trace into this process's trace (rec_torch_stream.c). torch_version is torch.__version__.
 * Returns 0, -1 when it cannot (the reason said once on stderr: the sitecustomize then records
 * PyTorch's history instead), -2 when nothing is recorded. */
EXPORT int gpumem_torch_stream(const char *torch_version);
EXPORT int gpumem_torch_stream(const char *torch_version) {
  if (!g.core) return -2;
  char why[512];
  int r = rec_torch_stream_attach(g.core, hook_now, torch_version, REC_TS_C10_OBJECT,
                                  REC_TS_TORCH_OBJECT, why, sizeof why);
  if (r < 0) warn_once("PyTorch's allocator trace cannot be streamed: %s", why);
  return r;
}

/* The hook off again (tests/gpu/sites_bench.py: its cost measured against no hook, step by step
 * in one process); gpumem_torch_sites() puts it back. Returns the slots restored, -1 if none. */
EXPORT int gpumem_torch_sites_off(void);
EXPORT int gpumem_torch_sites_off(void) {
  char why[512];
  return rec_sites_unhook(REC_SITES_OBJECT, REC_SITES_SYMBOL, why, sizeof why);
}

EXPORT int InitializeInjection(void);
EXPORT int InitializeInjection(void) {
  pthread_once(&g.once, init_once);
  return 1; /* never fail the driver's initialisation because of the recorder */
}
