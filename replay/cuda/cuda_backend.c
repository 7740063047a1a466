/* cuda_backend.c: the `cuda:N` backend: rp_driver_t on the real CUDA driver API.
 *
 * The only file of replay/ that calls the driver. libcuda.so.1 is opened with dlopen at run
 * time and never linked, and the few entry points are declared in cuda_driver.h (checked
 * against <cuda.h> by a test), so gpureplay builds without the CUDA toolkit and runs (and
 * says why cuda is off) without a GPU.
 *
 * Mapping of the driver interface:
 *   mem_alloc / mem_free     cuMemAlloc / cuMemFree                       (cudaMalloc/Free)
 *   va_reserve / va_release  cuMemAddressReserve / cuMemAddressFree
 *   map                      per granule page: cuMemCreate + cuMemMap, then one
 *                            cuMemSetAccess over the range (what PyTorch's expandable
 *                            segments do: one physical handle per page)
 *   unmap                    per page: cuMemUnmap + cuMemRelease
 *   alloc_async / free_async cuMemAllocFromPoolAsync / cuMemFreeAsync on one pool created
 *                            with release threshold UINT64_MAX (the pool keeps what it has;
 *                            the `async` policy decides when to trim), on one stream per
 *                            trace stream id (created on first use; none/0 -> null stream)
 *   pool_trim                synchronize, cuMemPoolTrimTo
 *   pool_reserved            cuMemPoolGetAttribute(RESERVED_MEM_CURRENT): the engine's
 *                            reserved figure for `async`
 * Every call is timed (CLOCK_MONOTONIC around the driver call; map counts create + map +
 * set-access) into log histograms. CUDA results become gm_status_t in one function
 * (cu_status): CUDA_ERROR_OUT_OF_MEMORY -> GM_ERR_NOMEM, all else GM_ERR_CUDA; the failing
 * call's name and the driver's error name go to the backend's last_error.
 *
 * A capacity (what-if on a smaller GPU) is enforced in software with the same rounding as
 * the simulator, so both backends run out of memory at the same request.
 *
 * Addresses: by default the policy sees the simulator's addresses (same base, same bump
 * sequence) and this file translates them to the driver's (segments by lookup, VA ranges by
 * offset into their reservation). PyTorch's best fit breaks ties by address, and the real
 * driver hands out addresses in its own order, so with real addresses a replay on the GPU
 * can choose other blocks than the simulator and reserve different bytes (seen on an H200:
 * one real trace of five, +4.6 %). With the simulator's addresses every deterministic
 * policy makes the same decisions on both backends; the driver still serves every call
 * (real sizes, real granularity, real latency, real memory in use). opts.real_addresses
 * hands the driver's addresses through instead (what the application itself would see).
 * Stream-ordered pool addresses (`async`, real GPU only) are always the driver's. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CUD_NO_PROTOTYPES /* every call goes through the dlsym()ed table */
#include "replay/cuda/cuda_driver.h"
#include "replay/cuda/rp_cuda.h"
#include "replay/engine/rp_map.h"
#include "replay/engine/va_model.h"

/* The driver functions we use (cuda_driver.h), resolved once by their exported names. */
typedef struct cu_api {
  void *lib;
#define CU_FIELD(name, sym, params) name##_fn *name;
  CUD_FUNCS(CU_FIELD)
#undef CU_FIELD
} cu_api_t;

static cu_api_t api;
static int api_state; /* 0 not tried, 1 loaded, -1 failed */
static char api_error[256];

static int load_api(void) {
  if (api_state) return api_state;
  api.lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!api.lib) {
    snprintf(api_error, sizeof api_error, "no CUDA driver (libcuda.so.1 not found)");
    return api_state = -1;
  }
#define CU_LOAD(name, sym, params)                                                      \
  *(void **)&api.name = dlsym(api.lib, #sym);                                           \
  if (!api.name) {                                                                      \
    snprintf(api_error, sizeof api_error, "libcuda.so.1 lacks %s (driver too old)", #sym); \
    return api_state = -1;                                                              \
  }
  CUD_FUNCS(CU_LOAD)
#undef CU_LOAD
  if (api.cuInit(0) != CUDA_SUCCESS) {
    snprintf(api_error, sizeof api_error, "cuInit failed (no usable GPU)");
    return api_state = -1;
  }
  return api_state = 1;
}

typedef struct cuda_be {
  rp_backend_t b; /* first: the handle is the backend */
  CUdevice dev;
  CUcontext ctx;
  int ordinal;
  uint64_t gran, capacity, used;
  CUmemoryPool pool;
  rp_map_t pages;   /* page address -> physical handle */
  rp_map_t vas;     /* reserved VA start -> size (freed at destroy if a policy leaked) */
  rp_map_t streams; /* trace stream id -> CUstream */
  rp_map_t asyncs;  /* async address -> size (capacity accounting) */
  rp_backend_latency_t lat;
  /* Simulator addresses (opts.sim_addresses): what the policy sees -> what the driver gave. */
  int sim_addr;
  uint64_t next_virt;
  rp_va_t *va;      /* segments under the simulator's driver model; NULL: from next_virt */
  rp_map_t segs;    /* virtual segment address -> (real address, size) */
  struct resv {
    uint64_t virt, real, size;
  } *resv;          /* VA reservations, virtual -> real (few: one per expandable pool) */
  size_t n_resv, cap_resv;
} cuda_be_t;

/* The simulator's address sequence (sim_backend.c): a bump pointer from the same base,
 * advanced by the size rounded up to the granularity, for segments and VA reservations
 * alike, only on success. Mirrored here so a policy sees identical addresses on both. */
#define SIM_BASE 0x7f0000000000ull

static uint64_t virt_take(cuda_be_t *c, uint64_t size) {
  uint64_t v = c->next_virt;
  c->next_virt += (size ? size : 1) + c->gran - 1 - ((size ? size : 1) + c->gran - 1) % c->gran;
  return v;
}

/* The real address behind a virtual address inside a VA reservation. */
static int virt_to_real(const cuda_be_t *c, uint64_t virt, uint64_t *real) {
  for (size_t i = 0; i < c->n_resv; i++)
    if (virt >= c->resv[i].virt && virt < c->resv[i].virt + c->resv[i].size) {
      *real = c->resv[i].real + (virt - c->resv[i].virt);
      return 1;
    }
  return 0;
}

/* The one place CUDA results turn into project statuses. */
static gm_status_t cu_status(cuda_be_t *c, CUresult r, const char *what) {
  if (r == CUDA_SUCCESS) return GM_OK;
  const char *name = NULL;
  if (api.cuGetErrorName(r, &name) != CUDA_SUCCESS || !name) name = "unknown CUDA error";
  snprintf(c->b.last_error, sizeof c->b.last_error, "%s: %s", what, name);
  return r == CUDA_ERROR_OUT_OF_MEMORY ? GM_ERR_NOMEM : GM_ERR_CUDA;
}

static uint64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static uint64_t round_up(uint64_t v, uint64_t g) { return (v + g - 1) / g * g; }

/* Software capacity, counted as the simulator counts it. */
static int over_capacity(cuda_be_t *c, uint64_t phys) {
  return c->capacity && c->used + phys > c->capacity;
}

static gm_status_t cb_mem_alloc(void *ctx, uint64_t size, uint64_t *addr) {
  cuda_be_t *c = ctx;
  uint64_t phys = round_up(size ? size : 1, c->gran);
  if (over_capacity(c, phys)) return GM_ERR_NOMEM;
  CUdeviceptr p = 0;
  uint64_t t = now_ns();
  CUresult r = api.cuMemAlloc(&p, size);
  rp_hist_add(&c->lat.alloc, now_ns() - t);
  gm_status_t st = cu_status(c, r, "cuMemAlloc");
  if (st != GM_OK) return st;
  c->used += phys;
  *addr = (uint64_t)p;
  if (c->sim_addr) {
    uint64_t v = 0;
    int bad = 0;
    if (c->va) bad = rp_va_alloc(c->va, phys, &v) != GM_OK;
    else v = virt_take(c, size);
    if (bad || rp_map_put(&c->segs, v, (uint64_t)p, size) != 0) {
      if (c->va && !bad) rp_va_release(c->va, v);
      api.cuMemFree(p);
      c->used -= phys;
      return GM_ERR_NOMEM;
    }
    *addr = v;
  }
  return GM_OK;
}

static gm_status_t cb_mem_free(void *ctx, uint64_t addr, uint64_t size) {
  cuda_be_t *c = ctx;
  if (c->sim_addr) {
    rp_map_entry_t *m = rp_map_get(&c->segs, addr);
    if (!m) {
      snprintf(c->b.last_error, sizeof c->b.last_error, "mem_free of an address never allocated");
      return GM_ERR_INVAL;
    }
    if (c->va) rp_va_release(c->va, addr);
    addr = m->a;
    rp_map_remove(&c->segs, m);
  }
  uint64_t t = now_ns();
  CUresult r = api.cuMemFree((CUdeviceptr)addr);
  rp_hist_add(&c->lat.free, now_ns() - t);
  gm_status_t st = cu_status(c, r, "cuMemFree");
  if (st == GM_OK) {
    uint64_t phys = round_up(size ? size : 1, c->gran);
    c->used = phys > c->used ? 0 : c->used - phys;
  }
  return st;
}

static gm_status_t cb_va_reserve(void *ctx, uint64_t size, uint64_t *addr) {
  cuda_be_t *c = ctx;
  CUdeviceptr p = 0;
  gm_status_t st = cu_status(c, api.cuMemAddressReserve(&p, size, c->gran, 0, 0),
                             "cuMemAddressReserve");
  if (st != GM_OK) return st;
  if (rp_map_put(&c->vas, (uint64_t)p, size, 0) != 0) return GM_ERR_NOMEM;
  *addr = (uint64_t)p;
  if (c->sim_addr) {
    if (c->n_resv == c->cap_resv) {
      size_t nc = c->cap_resv ? 2 * c->cap_resv : 8;
      struct resv *g = realloc(c->resv, nc * sizeof *g);
      if (!g) return GM_ERR_NOMEM;
      c->resv = g;
      c->cap_resv = nc;
    }
    uint64_t v = virt_take(c, size);
    c->resv[c->n_resv++] = (struct resv){v, (uint64_t)p, size};
    *addr = v;
  }
  return GM_OK;
}

static gm_status_t cb_va_release(void *ctx, uint64_t addr, uint64_t size) {
  cuda_be_t *c = ctx;
  if (c->sim_addr) {
    size_t i = 0;
    while (i < c->n_resv && c->resv[i].virt != addr) i++;
    if (i == c->n_resv) {
      snprintf(c->b.last_error, sizeof c->b.last_error, "va_release of an address never reserved");
      return GM_ERR_INVAL;
    }
    addr = c->resv[i].real;
    c->resv[i] = c->resv[--c->n_resv];
  }
  gm_status_t st = cu_status(c, api.cuMemAddressFree((CUdeviceptr)addr, size), "cuMemAddressFree");
  rp_map_entry_t *m = rp_map_get(&c->vas, addr);
  if (st == GM_OK && m) rp_map_remove(&c->vas, m);
  return st;
}

static CUmemAllocationProp page_prop(const cuda_be_t *c) {
  CUmemAllocationProp p;
  memset(&p, 0, sizeof p);
  p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  p.location.id = c->ordinal;
  return p;
}

static gm_status_t unmap_pages(cuda_be_t *c, uint64_t addr, uint64_t size) {
  gm_status_t first = GM_OK;
  for (uint64_t off = 0; off < size; off += c->gran) {
    rp_map_entry_t *m = rp_map_get(&c->pages, addr + off);
    if (!m) continue;
    gm_status_t st = cu_status(c, api.cuMemUnmap((CUdeviceptr)(addr + off), c->gran), "cuMemUnmap");
    if (st == GM_OK) st = cu_status(c, api.cuMemRelease((CUmemGenericAllocationHandle)m->a), "cuMemRelease");
    rp_map_remove(&c->pages, m);
    if (st != GM_OK && first == GM_OK) first = st;
  }
  return first;
}

static gm_status_t cb_map(void *ctx, uint64_t addr, uint64_t size) {
  cuda_be_t *c = ctx;
  if (size % c->gran || addr % c->gran) return GM_ERR_INVAL;
  if (c->sim_addr && !virt_to_real(c, addr, &addr)) {
    snprintf(c->b.last_error, sizeof c->b.last_error, "map outside every VA reservation");
    return GM_ERR_INVAL;
  }
  if (over_capacity(c, size)) return GM_ERR_NOMEM;
  CUmemAllocationProp prop = page_prop(c);
  uint64_t t = now_ns();
  gm_status_t st = GM_OK;
  uint64_t off = 0;
  for (; off < size && st == GM_OK; off += c->gran) {
    CUmemGenericAllocationHandle h = 0;
    st = cu_status(c, api.cuMemCreate(&h, c->gran, &prop, 0), "cuMemCreate");
    if (st != GM_OK) break;
    st = cu_status(c, api.cuMemMap((CUdeviceptr)(addr + off), c->gran, 0, h, 0), "cuMemMap");
    if (st != GM_OK) {
      api.cuMemRelease(h);
      break;
    }
    if (rp_map_put(&c->pages, addr + off, (uint64_t)h, 0) != 0) st = GM_ERR_NOMEM;
  }
  if (st == GM_OK) {
    CUmemAccessDesc acc;
    memset(&acc, 0, sizeof acc);
    acc.location = prop.location;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    st = cu_status(c, api.cuMemSetAccess((CUdeviceptr)addr, size, &acc, 1), "cuMemSetAccess");
  }
  rp_hist_add(&c->lat.alloc, now_ns() - t);
  if (st != GM_OK) {
    unmap_pages(c, addr, size); /* all or nothing, as the policy expects */
    return st;
  }
  c->used += size;
  return GM_OK;
}

static gm_status_t cb_unmap(void *ctx, uint64_t addr, uint64_t size) {
  cuda_be_t *c = ctx;
  if (c->sim_addr && !virt_to_real(c, addr, &addr)) {
    snprintf(c->b.last_error, sizeof c->b.last_error, "unmap outside every VA reservation");
    return GM_ERR_INVAL;
  }
  uint64_t t = now_ns();
  gm_status_t st = unmap_pages(c, addr, size);
  rp_hist_add(&c->lat.free, now_ns() - t);
  if (st == GM_OK) c->used = size > c->used ? 0 : c->used - size;
  return st;
}

static gm_status_t get_stream(cuda_be_t *c, uint64_t id, CUstream *s) {
  *s = NULL;
  if (id == 0 || id == UINT64_MAX) return GM_OK;
  rp_map_entry_t *m = rp_map_get(&c->streams, id);
  if (m) {
    *s = (CUstream)(uintptr_t)m->a;
    return GM_OK;
  }
  gm_status_t st = cu_status(c, api.cuStreamCreate(s, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  if (st != GM_OK) return st;
  return rp_map_put(&c->streams, id, (uint64_t)(uintptr_t)*s, 0) == 0 ? GM_OK : GM_ERR_NOMEM;
}

static gm_status_t ensure_pool(cuda_be_t *c) {
  if (c->pool) return GM_OK;
  CUmemPoolProps p;
  memset(&p, 0, sizeof p);
  p.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.handleTypes = CU_MEM_HANDLE_TYPE_NONE;
  p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  p.location.id = c->ordinal;
  gm_status_t st = cu_status(c, api.cuMemPoolCreate(&c->pool, &p), "cuMemPoolCreate");
  if (st != GM_OK) return st;
  cuuint64_t keep = UINT64_MAX;
  return cu_status(c, api.cuMemPoolSetAttribute(c->pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep),
                   "cuMemPoolSetAttribute");
}

static gm_status_t cb_alloc_async(void *ctx, uint64_t size, uint64_t stream, uint64_t *addr) {
  cuda_be_t *c = ctx;
  if (over_capacity(c, size)) return GM_ERR_NOMEM;
  CUstream s;
  gm_status_t st = ensure_pool(c);
  if (st == GM_OK) st = get_stream(c, stream, &s);
  if (st != GM_OK) return st;
  CUdeviceptr p = 0;
  uint64_t t = now_ns();
  CUresult r = api.cuMemAllocFromPoolAsync(&p, size, c->pool, s);
  rp_hist_add(&c->lat.alloc, now_ns() - t);
  if ((st = cu_status(c, r, "cuMemAllocFromPoolAsync")) != GM_OK) return st;
  if (rp_map_put(&c->asyncs, (uint64_t)p, size, 0) != 0) return GM_ERR_NOMEM;
  c->used += size;
  *addr = (uint64_t)p;
  return GM_OK;
}

static gm_status_t cb_free_async(void *ctx, uint64_t addr, uint64_t stream) {
  cuda_be_t *c = ctx;
  CUstream s;
  gm_status_t st = get_stream(c, stream, &s);
  if (st != GM_OK) return st;
  uint64_t t = now_ns();
  CUresult r = api.cuMemFreeAsync((CUdeviceptr)addr, s);
  rp_hist_add(&c->lat.free, now_ns() - t);
  if ((st = cu_status(c, r, "cuMemFreeAsync")) != GM_OK) return st;
  rp_map_entry_t *m = rp_map_get(&c->asyncs, addr);
  if (m) {
    c->used = m->a > c->used ? 0 : c->used - m->a;
    rp_map_remove(&c->asyncs, m);
  }
  return GM_OK;
}

static gm_status_t cb_pool_trim(void *ctx, uint64_t keep) {
  cuda_be_t *c = ctx;
  if (!c->pool) return GM_OK;
  gm_status_t st = cu_status(c, api.cuCtxSynchronize(), "cuCtxSynchronize");
  if (st != GM_OK) return st;
  return cu_status(c, api.cuMemPoolTrimTo(c->pool, keep), "cuMemPoolTrimTo");
}

static uint64_t cb_driver_used(rp_backend_t *b) {
  size_t fr = 0, tot = 0;
  if (api.cuMemGetInfo(&fr, &tot) != CUDA_SUCCESS) return 0;
  return (uint64_t)(tot - fr);
}

static uint64_t cb_pool_reserved(rp_backend_t *b) {
  cuda_be_t *c = (cuda_be_t *)b;
  cuuint64_t v = 0;
  if (!c->pool) return 0;
  if (api.cuMemPoolGetAttribute(c->pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &v) != CUDA_SUCCESS)
    return 0;
  return (uint64_t)v;
}

static const rp_backend_latency_t *cb_latency(rp_backend_t *b) { return &((cuda_be_t *)b)->lat; }

/* Give back whatever a policy left behind, then the streams, the pool and the context. */
static void cb_destroy(rp_backend_t *b) {
  cuda_be_t *c = (cuda_be_t *)b;
  api.cuCtxSynchronize();
  for (size_t i = 0; i < c->pages.cap; i++)
    if (c->pages.slots[i].state == 1) {
      api.cuMemUnmap((CUdeviceptr)c->pages.slots[i].key, c->gran);
      api.cuMemRelease((CUmemGenericAllocationHandle)c->pages.slots[i].a);
    }
  for (size_t i = 0; i < c->segs.cap; i++)
    if (c->segs.slots[i].state == 1) api.cuMemFree((CUdeviceptr)c->segs.slots[i].a);
  for (size_t i = 0; i < c->vas.cap; i++)
    if (c->vas.slots[i].state == 1)
      api.cuMemAddressFree((CUdeviceptr)c->vas.slots[i].key, c->vas.slots[i].a);
  for (size_t i = 0; i < c->asyncs.cap; i++)
    if (c->asyncs.slots[i].state == 1) api.cuMemFreeAsync((CUdeviceptr)c->asyncs.slots[i].key, NULL);
  api.cuCtxSynchronize();
  for (size_t i = 0; i < c->streams.cap; i++)
    if (c->streams.slots[i].state == 1) api.cuStreamDestroy((CUstream)(uintptr_t)c->streams.slots[i].a);
  if (c->pool) api.cuMemPoolDestroy(c->pool);
  api.cuDevicePrimaryCtxRelease(c->dev);
  rp_map_free(&c->pages);
  rp_map_free(&c->vas);
  rp_map_free(&c->streams);
  rp_map_free(&c->asyncs);
  rp_map_free(&c->segs);
  rp_va_free_all(c->va);
  free(c->resv);
  free(c);
}

int rp_cuda_driver_version(void) {
  if (load_api() < 0) return 0;
  int v = 0;
  return api.cuDriverGetVersion(&v) == CUDA_SUCCESS ? v : 0;
}

static gm_status_t open_device(int ordinal, CUdevice *dev, uint64_t *total, uint64_t *gran,
                               gm_err_t *err) {
  if (load_api() < 0) return gm_err_set(err, GM_ERR_UNSUPPORTED, "%s", api_error);
  int n = 0;
  if (api.cuDeviceGetCount(&n) != CUDA_SUCCESS || ordinal < 0 || ordinal >= n)
    return gm_err_set(err, GM_ERR_INVAL, "no CUDA device %d (%d present)", ordinal, n);
  if (api.cuDeviceGet(dev, ordinal) != CUDA_SUCCESS)
    return gm_err_set(err, GM_ERR_CUDA, "cuDeviceGet(%d) failed", ordinal);
  size_t t = 0, g = 0;
  if (api.cuDeviceTotalMem(&t, *dev) != CUDA_SUCCESS)
    return gm_err_set(err, GM_ERR_CUDA, "cuDeviceTotalMem failed");
  CUmemAllocationProp p;
  memset(&p, 0, sizeof p);
  p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  p.location.id = ordinal;
  if (api.cuMemGetAllocationGranularity(&g, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS)
    return gm_err_set(err, GM_ERR_CUDA, "cuMemGetAllocationGranularity failed");
  *total = t;
  *gran = g;
  return GM_OK;
}

gm_status_t rp_cuda_device_info(int ordinal, uint64_t *total, uint64_t *granularity,
                                gm_err_t *err) {
  CUdevice d;
  return open_device(ordinal, &d, total, granularity, err);
}

gm_status_t rp_cuda_backend_create(int ordinal, const rp_cuda_opts_t *opts, rp_backend_t **out,
                                   gm_err_t *err) {
  *out = NULL;
  CUdevice dev;
  uint64_t total = 0, gran = 0;
  gm_status_t st = open_device(ordinal, &dev, &total, &gran, err);
  if (st != GM_OK) return st;
  cuda_be_t *c = calloc(1, sizeof *c);
  if (!c) return gm_err_set(err, GM_ERR_NOMEM, "out of host memory");
  c->dev = dev;
  c->ordinal = ordinal;
  c->gran = gran;
  rp_map_init(&c->pages);
  rp_map_init(&c->vas);
  rp_map_init(&c->streams);
  rp_map_init(&c->asyncs);
  rp_map_init(&c->segs);
  CUresult r = api.cuDevicePrimaryCtxRetain(&c->ctx, dev);
  if (r == CUDA_SUCCESS) r = api.cuCtxSetCurrent(c->ctx);
  if (r != CUDA_SUCCESS) {
    cu_status(c, r, "cuDevicePrimaryCtxRetain");
    gm_err_set(err, GM_ERR_CUDA, "%s", c->b.last_error);
    free(c);
    return GM_ERR_CUDA;
  }
  rp_cuda_opts_t o = {0};
  if (opts) o = *opts;
  c->capacity = o.capacity;
  c->sim_addr = !o.real_addresses;
  c->next_virt = SIM_BASE;
  if (c->sim_addr && o.addresses == RP_VA_DRIVER) {
    rp_va_opts_t vo = {RP_VA_DRIVER, SIM_BASE, c->gran ? c->gran : (2ull << 20), 0, 0, 0};
    if (!(c->va = rp_va_new(&vo))) {
      api.cuDevicePrimaryCtxRelease(dev);
      free(c);
      return gm_err_set(err, GM_ERR_NOMEM, "out of host memory");
    }
  }
  rp_driver_t *d = &c->b.drv;
  d->ctx = c;
  d->mem_alloc = cb_mem_alloc;
  d->mem_free = cb_mem_free;
  d->va_reserve = cb_va_reserve;
  d->va_release = cb_va_release;
  d->map = cb_map;
  d->unmap = cb_unmap;
  d->alloc_async = cb_alloc_async;
  d->free_async = cb_free_async;
  d->pool_trim = cb_pool_trim;
  d->granularity = gran;
  d->total_memory = o.total_memory ? o.total_memory : o.capacity ? o.capacity : total;
  snprintf(c->b.name, sizeof c->b.name, "cuda:%d", ordinal);
  c->b.driver_used = cb_driver_used;
  c->b.latency = cb_latency;
  c->b.pool_reserved = cb_pool_reserved;
  c->b.destroy = cb_destroy;
  *out = &c->b;
  return GM_OK;
}
