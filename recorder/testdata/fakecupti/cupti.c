/* cupti.c: stands in for libcupti.so in inject_pause_test (GPUMEM_CUPTI points at it): what the
 * injection library's callback capture calls, with callbacks kept per domain and id as the real
 * one does, and fake_cupti_alloc() playing the driver: a cuMemAlloc_v2 that reaches the subscriber
 * only while its callback id is enabled. No GPU, no driver. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cuda.h>
#include <cupti.h>

int fake_cupti_enabled(int domain);
int fake_cupti_alloc(uint64_t ptr, uint64_t size);

static CUpti_CallbackFunc cb;
static void *cb_ud;
static unsigned char enabled[CUPTI_CB_DOMAIN_SIZE][1024];
static uint32_t corr;

CUptiResult cuptiGetVersion(uint32_t *v) {
  *v = 130001;
  return CUPTI_SUCCESS;
}
CUptiResult cuptiGetResultString(CUptiResult r, const char **s) {
  *s = r == CUPTI_SUCCESS ? "CUPTI_SUCCESS" : "CUPTI_ERROR (fake)";
  return CUPTI_SUCCESS;
}
CUptiResult cuptiSubscribe(CUpti_SubscriberHandle *sub, CUpti_CallbackFunc f, void *ud) {
  if (cb) return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  cb = f;
  cb_ud = ud;
  *sub = (CUpti_SubscriberHandle)&cb;
  return CUPTI_SUCCESS;
}
CUptiResult cuptiEnableCallback(uint32_t on, CUpti_SubscriberHandle sub, CUpti_CallbackDomain d,
                                CUpti_CallbackId id) {
  if (sub != (CUpti_SubscriberHandle)&cb || d <= 0 || d >= CUPTI_CB_DOMAIN_SIZE || id >= 1024)
    return CUPTI_ERROR_INVALID_PARAMETER;
  enabled[d][id] = on != 0;
  return CUPTI_SUCCESS;
}
CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc a,
                                           CUpti_BuffersCallbackCompleteFunc b) {
  return CUPTI_SUCCESS;
}
CUptiResult cuptiActivityEnable(CUpti_ActivityKind k) { return CUPTI_SUCCESS; }
CUptiResult cuptiActivityGetNextRecord(uint8_t *b, size_t n, CUpti_Activity **r) {
  return CUPTI_ERROR_MAX_LIMIT_REACHED;
}
CUptiResult cuptiActivityFlushAll(uint32_t f) { return CUPTI_SUCCESS; }
CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext c, uint32_t s, size_t *n) {
  *n = 0;
  return CUPTI_SUCCESS;
}
CUptiResult cuptiGetTimestamp(uint64_t *t) {
  *t = 0;
  return CUPTI_SUCCESS;
}
CUptiResult cuptiGetDeviceId(CUcontext c, uint32_t *d) {
  *d = 0;
  return CUPTI_SUCCESS;
}
CUptiResult cuptiGetStreamIdEx(CUcontext c, CUstream s, uint8_t p, uint32_t *id) {
  *id = 7;
  return CUPTI_SUCCESS;
}

/* How many callbacks of `domain` are enabled now. */
int fake_cupti_enabled(int domain) {
  int n = 0;
  for (int i = 0; domain > 0 && domain < CUPTI_CB_DOMAIN_SIZE && i < 1024; i++) n += enabled[domain][i];
  return n;
}

/* A cuMemAlloc_v2 returning `ptr` (size bytes): 1 if the subscriber saw it, 0 if not enabled. */
int fake_cupti_alloc(uint64_t ptr, uint64_t size) {
  CUpti_CallbackId id = CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2;
  if (!cb || !enabled[CUPTI_CB_DOMAIN_DRIVER_API][id]) return 0;
  CUdeviceptr out = (CUdeviceptr)ptr;
  struct {
    CUdeviceptr *dptr;
    size_t bytesize;
  } params = {&out, (size_t)size}; /* cuMemAlloc_v2_params */
  CUresult rc = CUDA_SUCCESS;
  CUpti_CallbackData d;
  memset(&d, 0, sizeof d);
  d.callbackSite = CUPTI_API_EXIT;
  d.functionName = "cuMemAlloc_v2";
  d.functionParams = &params;
  d.functionReturnValue = &rc;
  d.correlationId = ++corr;
  cb(cb_ud, CUPTI_CB_DOMAIN_DRIVER_API, id, &d);
  return 1;
}
