/* cupti_devmem.c: how much memory the process has on each device beyond what its trace maps:
 * the CUDA context, the module code the driver loads (lazily: cuBLAS', NCCL's kernels at their
 * first launch) and the driver's own reservations (issue 17 item 3; formats/SPEC.md 5.4.1).
 *
 * When: when a device's first context is made (the CUPTI resource callback, on the thread that
 * made it: nothing is mapped yet, so this is the context alone) and at the process's end (atexit,
 * before the trace is closed: the context and every module loaded by then). A context destroyed
 * before the end is sampled as its destruction starts, without making it current (NVML and the
 * device's pool only: no cuMemGetInfo).
 * Not at the trace's peak: finding it would cost every allocation a comparison on the
 * application's thread, and the modules a training loop loads are loaded by its first step.
 *
 * What is counted, per device and sample (each one a DEVICE_USAGE record of that method):
 *   1. NVML's usedGpuMemory for this pid (nvmlDeviceGetComputeRunningProcesses_v3/_v2/v1),
 *      the device found by the PCI bus id CUDA gives (so CUDA_VISIBLE_DEVICES does not matter);
 *      absent where NVML is missing, fails, or does not list the pid (containers that hide pids);
 *   2. cuMemGetInfo's total - free in the context: the whole device, other processes included.
 * Less, in both, the device's current memory pool's reserved-but-unused bytes (a trace of
 * stream-ordered requests shows the pool's live blocks, not its reserve). The writer thread
 * subtracts what the trace maps at the sample's time (rec_devmem.c).
 *
 * Never harm the application: libnvidia-ml is dlopened (never linked) and initialised on a
 * thread of our own started with the first context, which a sample waits for at most
 * NVML_WAIT_NS (so the first context's creation waits for it, tens of ms); every
 * call's result is checked, and a failure only leaves a record out. GPUMEM_DEVMEM=0 turns the
 * samples off. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cuda.h>

#include "recorder/cupti_devmem.h"

#define DEVS 64
#define NVML_WAIT_NS 1000000000ull /* a sample waits this long at most for NVML to start */
#define MAX_PROCS 256              /* processes listed per device; more: no NVML figure */

/* NVML's ABI, declared here: the toolkit ships no nvml.h on every install. */
typedef int nvml_ret_t;
typedef void *nvml_dev_t;
typedef struct { unsigned pid; unsigned long long used; } nvml_proc_v1_t;
typedef struct { unsigned pid; unsigned long long used; unsigned gi, ci; } nvml_proc_v2_t;
#define NVML_NOT_AVAILABLE (~0ull)

static struct {
  atomic_int nvml; /* 0 starting, 1 ready, -1 absent or failed */
  nvml_ret_t (*init)(void);
  nvml_ret_t (*by_bus)(const char *, nvml_dev_t *);
  nvml_ret_t (*procs_v2)(nvml_dev_t, unsigned *, nvml_proc_v2_t *); /* _v3 or _v2: same layout */
  nvml_ret_t (*procs_v1)(nvml_dev_t, unsigned *, nvml_proc_v1_t *);
  CUresult (*push)(CUcontext), (*pop)(CUcontext *), (*info)(size_t *, size_t *);
  CUresult (*ctx_dev)(CUdevice *), (*get_pool)(CUmemoryPool *, CUdevice);
  CUresult (*pool_attr)(CUmemoryPool, CUmemPool_attribute, void *);
  CUresult (*bus_id)(char *, int, CUdevice);
  uint64_t (*now)(void *);
  int on;
  pthread_mutex_t mu;
  struct dev {
    CUcontext ctx; /* the first context made on the device, NULL once destroyed */
    CUdevice cudev;
    uint32_t ctx_id;
    int seen, have_cudev;
    char bus[32];
  } dev[DEVS];
  union {
    nvml_proc_v2_t v2[MAX_PROCS];
    nvml_proc_v1_t v1[MAX_PROCS];
  } procs; /* under mu */
} d = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void *sym(void *lib, const char *name) { return lib ? dlsym(lib, name) : NULL; }

static void *nvml_start(void *arg) {
  (void)arg;
  void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  *(void **)&d.init = sym(lib, "nvmlInit_v2");
  *(void **)&d.by_bus = sym(lib, "nvmlDeviceGetHandleByPciBusId_v2");
  *(void **)&d.procs_v2 = sym(lib, "nvmlDeviceGetComputeRunningProcesses_v3");
  if (!d.procs_v2) *(void **)&d.procs_v2 = sym(lib, "nvmlDeviceGetComputeRunningProcesses_v2");
  *(void **)&d.procs_v1 = sym(lib, "nvmlDeviceGetComputeRunningProcesses");
  int ok = d.init && d.by_bus && (d.procs_v2 || d.procs_v1) && d.init() == 0;
  atomic_store(&d.nvml, ok ? 1 : -1);
  return NULL;
}

void rec_devmem_start(uint64_t (*now)(void *)) {
  const char *env = getenv("GPUMEM_DEVMEM");
  if (env && strcmp(env, "0") == 0) return;
  void *cu = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (!cu) return;
  *(void **)&d.push = dlsym(cu, "cuCtxPushCurrent_v2");
  *(void **)&d.pop = dlsym(cu, "cuCtxPopCurrent_v2");
  *(void **)&d.info = dlsym(cu, "cuMemGetInfo_v2");
  *(void **)&d.ctx_dev = dlsym(cu, "cuCtxGetDevice");
  *(void **)&d.get_pool = dlsym(cu, "cuDeviceGetMemPool");
  *(void **)&d.pool_attr = dlsym(cu, "cuMemPoolGetAttribute");
  *(void **)&d.bus_id = dlsym(cu, "cuDeviceGetPCIBusId");
  dlclose(cu); /* NOLOAD: the driver stays, loaded by the application */
  if (!d.push || !d.pop || !d.info || !d.ctx_dev) return;
  d.now = now;
  d.on = 1;
}

/* NVML is loaded by a process that makes a context, not by every one that calls cuInit
 * (torchrun's agent asks for the device count): its thread starts with the first context. */
static void nvml_launch(void) {
  pthread_t t;
  pthread_attr_t a;
  pthread_attr_init(&a);
  pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
  if (pthread_create(&t, &a, nvml_start, NULL) != 0) atomic_store(&d.nvml, -1);
  pthread_attr_destroy(&a);
}

int rec_devmem_on(void) { return d.on; }

static int nvml_ready(void) {
  for (uint64_t waited = 0; atomic_load(&d.nvml) == 0 && waited < NVML_WAIT_NS; waited += 1000000ull) {
    struct timespec ts = {0, 1000000L};
    nanosleep(&ts, NULL);
  }
  return atomic_load(&d.nvml) == 1;
}

/* NVML's count of this process's memory on the device with PCI bus id bus; 0 if unknown. */
static int nvml_process_bytes(const char *bus, uint64_t *bytes) {
  nvml_dev_t h;
  if (!bus[0] || !nvml_ready() || d.by_bus(bus, &h) != 0) return 0;
  unsigned n = MAX_PROCS, pid = (unsigned)getpid();
  if (d.procs_v2 && d.procs_v2(h, &n, d.procs.v2) == 0) {
    for (unsigned i = 0; i < n && i < MAX_PROCS; i++)
      if (d.procs.v2[i].pid == pid && d.procs.v2[i].used != NVML_NOT_AVAILABLE) {
        *bytes = d.procs.v2[i].used;
        return 1;
      }
    return 0;
  }
  n = MAX_PROCS;
  if (d.procs_v1 && d.procs_v1(h, &n, d.procs.v1) == 0)
    for (unsigned i = 0; i < n && i < MAX_PROCS; i++)
      if (d.procs.v1[i].pid == pid && d.procs.v1[i].used != NVML_NOT_AVAILABLE) {
        *bytes = d.procs.v1[i].used;
        return 1;
      }
  return 0;
}

/* The device's current pool: reserved bytes its live blocks do not use (0 if unknown). */
static uint64_t pool_slack(struct dev *v) {
  CUmemoryPool pool;
  cuuint64_t res = 0, used = 0;
  if (!v->have_cudev || !d.get_pool || !d.pool_attr || d.get_pool(&pool, v->cudev) != CUDA_SUCCESS) return 0;
  if (d.pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &res) != CUDA_SUCCESS ||
      d.pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &used) != CUDA_SUCCESS)
    return 0;
  return res > used ? (uint64_t)(res - used) : 0;
}

static void push(rec_core_t *core, uint32_t device, struct dev *v, uint64_t ts, uint64_t method,
                 uint64_t bytes) {
  gmt_event_t ev;
  memset(&ev, 0, sizeof ev);
  ev.ts_ns = ts;
  ev.kind = GMT_EV_DEVICE_USAGE;
  ev.device = (uint16_t)device;
  ev.addr = method;
  ev.size = bytes;
  ev.stream = GMT_STREAM_NONE;
  ev.mem_kind = GMT_MEM_DEVICE;
  ev.context = v->ctx_id;
  rec_core_push(core, &ev);
}

/* One sample of device `device` (under d.mu). with_cuda: the context is alive and may be made
 * current for cuMemGetInfo. */
static void sample(rec_core_t *core, uint32_t device, int with_cuda) {
  struct dev *v = &d.dev[device];
  uint64_t ts = d.now ? d.now(NULL) : 0;
  uint64_t slack = 0, dev_used = 0, proc_used = 0;
  int have_dev = 0;
  if (with_cuda && v->ctx && d.push(v->ctx) == CUDA_SUCCESS) {
    size_t fr = 0, tot = 0;
    if (!v->have_cudev && d.ctx_dev(&v->cudev) == CUDA_SUCCESS) {
      v->have_cudev = 1;
      if (d.bus_id && d.bus_id(v->bus, sizeof v->bus, v->cudev) != CUDA_SUCCESS) v->bus[0] = '\0';
    }
    if (d.info(&fr, &tot) == CUDA_SUCCESS && tot >= fr) {
      dev_used = (uint64_t)(tot - fr);
      have_dev = 1;
    }
    CUcontext old;
    d.pop(&old);
  }
  slack = pool_slack(v); /* a device call, no context needed: also while one is destroyed */
  if (nvml_process_bytes(v->bus, &proc_used))
    push(core, device, v, ts, GMT_USAGE_PROCESS, proc_used > slack ? proc_used - slack : 0);
  if (have_dev) push(core, device, v, ts, GMT_USAGE_DEVICE, dev_used > slack ? dev_used - slack : 0);
}

void rec_devmem_context_created(rec_core_t *core, CUcontext ctx, uint32_t device, uint32_t ctx_id) {
  if (!d.on || !core || device >= DEVS) return;
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, nvml_launch);
  pthread_mutex_lock(&d.mu);
  struct dev *v = &d.dev[device];
  if (!v->seen) { /* the device's first context: the one the frameworks use (primary) */
    v->seen = 1;
    v->ctx = ctx;
    v->ctx_id = ctx_id;
    sample(core, device, 1);
  }
  pthread_mutex_unlock(&d.mu);
}

void rec_devmem_context_destroying(rec_core_t *core, CUcontext ctx) {
  if (!d.on) return;
  pthread_mutex_lock(&d.mu);
  for (uint32_t i = 0; i < DEVS; i++)
    if (d.dev[i].seen && d.dev[i].ctx == ctx) {
      if (core) sample(core, i, 0); /* the context is not made current inside its destruction */
      d.dev[i].ctx = NULL;
    }
  pthread_mutex_unlock(&d.mu);
}

void rec_devmem_at_exit(rec_core_t *core) {
  if (!d.on || !core) return;
  pthread_mutex_lock(&d.mu);
  for (uint32_t i = 0; i < DEVS; i++)
    if (d.dev[i].seen && d.dev[i].ctx) sample(core, i, 1);
  pthread_mutex_unlock(&d.mu);
}
