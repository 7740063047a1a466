/* cupti_inject.h: what the injection library's files share (cupti_adapter.c: life cycle,
 * diagnostics, provenance; cupti_device.c: clocks, the device in the header; cupti_capture.c:
 * CUPTI's records and callbacks). Not a
 * public header: the library's one contract is InitializeInjection (inject.lds). */
#ifndef CUPTI_INJECT_H
#define CUPTI_INJECT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

#include <cuda.h>
#include <cupti.h>

#include "recorder/rec_callsite.h"
#include "recorder/rec_core.h"

#ifdef __cplusplus
extern "C" {
#endif

#define EXPORT __attribute__((visibility("default")))
#define ACT_BUF_BYTES (1u << 20)

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

typedef struct inj_state {
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
} inj_state_t;

extern inj_state_t inj;

/* cupti_adapter.c */
/* One warning per process, then silence: the application's stderr is not ours. */
void inj_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* cupti_device.c */
/* The events' clock: nanoseconds since inj.t0; the raw clocks it reads. */
uint64_t inj_now(void *ctx);
uint64_t inj_now_raw(void);
uint64_t inj_mono_ns(void);
/* The header's GPU (name, UUID, memory, driver and CUPTI versions) and capture mode (rec_hooks_t). */
void inj_fill_header(void *ctx, gmt_header_t *h);
/* cuMemGetInfo's total in ctx into inj.mem_info_total. */
void inj_note_mem_info(CUcontext ctx);

/* cupti_capture.c */
void CUPTIAPI inj_buf_requested(uint8_t **buffer, size_t *size, size_t *max_records);
void CUPTIAPI inj_buf_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
                                size_t valid);
void CUPTIAPI inj_on_callback(void *ud, CUpti_CallbackDomain dom, CUpti_CallbackId cbid,
                              const void *data);
uint32_t inj_callsite_of(CUpti_CallbackId cbid, const gmt_event_t *ev);
extern const CUpti_CallbackId inj_driver_cbids[];
extern const size_t inj_ndriver_cbids;
extern const CUpti_CallbackId inj_runtime_cbids[];
extern const size_t inj_nruntime_cbids;

#ifdef __cplusplus
}
#endif
#endif /* CUPTI_INJECT_H */
