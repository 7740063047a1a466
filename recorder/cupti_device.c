/* cupti_device.c: what the injection library reads of the device and its clock, for both the
 * life cycle (cupti_adapter.c) and the capture (cupti_capture.c): the events' timestamps (CUPTI's
 * timebase when capturing activity, else the vDSO clock), the GPU's identity and memory for the
 * trace header, and cuMemGetInfo's total in a new context. Everything from the driver already in
 * the process (never loaded by us). */
#include <dlfcn.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda.h>
#include <cupti.h>

#include "recorder/cupti_devmem.h"
#include "recorder/cupti_inject.h"

uint64_t inj_mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The activity capture stamps callback events in CUPTI's timebase, to order them with the
 * records; the callback capture has no records, so the vDSO clock (no call into CUPTI) does. */
uint64_t inj_now_raw(void) {
  uint64_t t = 0;
  if (inj.selftest || !inj.activity || inj.api.cuptiGetTimestamp(&t) != CUPTI_SUCCESS) t = inj_mono_ns();
  return t;
}

uint64_t inj_now(void *ctx) {
  uint64_t t = inj_now_raw();
  return t > inj.t0 ? t - inj.t0 : 0;
}

/* GPU name, UUID and memory from the driver already in the process (never loaded by us). */
void inj_fill_header(void *ctx, gmt_header_t *h) {
  rec_frameworks_fill(h);
  /* auto mode switches every framework to per-request allocation but PyTorch, whose requests
   * come from its own history (merged by the launcher): this trace alone holds its segments */
  const char *m = getenv(REC_ENV_MODE);
  if (m && strcmp(m, "auto") == 0 && h->capture_mode == GMT_CAPTURE_REQUESTS &&
      gmt_header_framework_version(h, GMT_FW_PYTORCH))
    h->capture_mode = GMT_CAPTURE_NATIVE;
  char buf[256];
  if (inj.selftest) {
    gmt_header_set(&h->gpu_name, "selftest (no GPU)", NULL);
    const char *usage = getenv("GPUMEM_SELFTEST_DEVMEM");
    if (usage && *usage) gmt_header_kv_set(h, "device_usage", "sampled", NULL);
    return;
  }
  char vbuf[sizeof inj.lib_path + 64];
  snprintf(vbuf, sizeof vbuf, "%u.%u (API %u; %s)", inj.version / 10000, (inj.version / 100) % 100,
           inj.version, inj.lib_path);
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
  if (get && get(&dev, (int)atomic_load(&inj.device)) == CUDA_SUCCESS) {
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
  uint64_t mi = atomic_load(&inj.mem_info_total);
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
void inj_note_mem_info(CUcontext ctx) {
  void *cu = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (!cu) return;
  CUresult (*push)(CUcontext) = (CUresult(*)(CUcontext))dlsym(cu, "cuCtxPushCurrent_v2");
  CUresult (*pop)(CUcontext *) = (CUresult(*)(CUcontext *))dlsym(cu, "cuCtxPopCurrent_v2");
  CUresult (*info)(size_t *, size_t *) = (CUresult(*)(size_t *, size_t *))dlsym(cu, "cuMemGetInfo_v2");
  if (push && pop && info && push(ctx) == CUDA_SUCCESS) {
    size_t fr = 0, tot = 0;
    if (info(&fr, &tot) == CUDA_SUCCESS) atomic_store(&inj.mem_info_total, (uint64_t)tot);
    CUcontext old;
    pop(&old);
  }
  dlclose(cu);
}
