/* rec_torch_stream.c: PyTorch's caching-allocator trace streamed into the recorder's trace, for
 * gpurec's default mode.
 *
 * Why: PyTorch's memory history is a ring of max_entries entries dumped at exit: it keeps only
 * the newest entries of a long job (nanoGPT's train.py fills a million in ~500 steps) and a
 * killed process dumps nothing. The allocator also calls its trace trackers for every entry it
 * would record, with the history off too (CUDACachingAllocator.cpp, record_trace: it returns
 * early only when there is neither a history nor a tracker), on the allocating thread under the
 * per-device allocator lock. A tracker sees every malloc, free_requested, free_completed (the
 * stream-event waits of record_stream), segment alloc/free/map/unmap and OOM, with address,
 * size, stream and device: exactly a history entry. Each becomes one event of the recorder's
 * trace (rec_core: buffered, flushed every 0.5 s, so a SIGKILL loses at most that), flagged
 * GMT_F_TORCH_STREAM; gpurec's merge (recorder/snapshot/snap_merge.c) turns them into the
 * requests of the final trace as it turns a history's entries.
 *
 * How, from C: the tracker is attached through a virtual method,
 *   CUDAAllocator::attachAllocatorTraceTracker(std::function<void(const TraceEntry&)>),
 * whose header-side wrapper is inline. So:
 *   - the allocator object is c10::cuda::CUDACachingAllocator::allocator (an exported
 *     std::atomic<CUDAAllocator*> in libc10_cuda.so);
 *   - the method's vtable slot is found, not assumed: libtorch_cuda.so exports
 *     CUDAPluggableAllocator's vtable and its override of the method, and a subclass keeps its
 *     base's slots, so the slot is where that vtable holds that override. The native
 *     allocator's entry in the slot must then point into libc10_cuda.so;
 *   - the std::function is built by hand in libstdc++'s layout (the Itanium C++ ABI that torch's
 *     wheels use): 16 bytes of stored functor, a manager, an invoker. Ours stores nothing; the
 *     manager clones and destroys nothing; the invoker is rec_ts_entry. Passed by value, a
 *     std::function goes as the address of a temporary the caller owns;
 *   - TraceEntry is read at the offsets of torch 2.11's layout (rec_torch_entry.h, REC_TE_*):
 *     rec_torch_stream_known() lists the releases checked.
 * Anything not as expected (a library not loaded, a symbol missing, no such slot, a torch not
 * listed) returns -1 with the reason, and gpurec's sitecustomize falls back to the history and
 * says so. Nothing here calls into PyTorch after the attach. */
#include "recorder/rec_torch_stream.h"

#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <string.h>

/* Each entry's work is rec_torch_entry.c's (rec_ts_entry: the std::function's invoker). */

int rec_torch_stream_known(const char *v) {
  /* "2.11.0+cu130", "2.11.1", ...: the major.minor whose header was read */
  return v && strncmp(v, "2.11", 4) == 0 && (v[4] == 0 || v[4] == '.' || v[4] == '+');
}

static int attached;

uint64_t rec_torch_stream_lost(void) { return rec_ts_entry_lost(); }

int rec_torch_stream_bench(int mode) { return attached ? rec_ts_entry_bench(mode) : -1; }

/* ---- std::function<void(const TraceEntry&)>, libstdc++'s layout ---------------------------- */

enum { FN_GET_TYPE_INFO, FN_GET_FUNCTOR_PTR, FN_CLONE, FN_DESTROY };

typedef struct std_function {
  void *functor[2];                                 /* _Any_data: nothing stored */
  int (*manager)(void *dest, const void *src, int op); /* returns bool */
  void (*invoker)(const void *functor, const void *arg);
} std_function_t;

static int fn_manager(void *dest, const void *src, int op) {
  switch (op) {
    case FN_GET_TYPE_INFO: *(const void **)dest = NULL; break; /* no C++ type to name */
    case FN_GET_FUNCTOR_PTR: *(const void **)dest = src; break;
    case FN_CLONE: memcpy(dest, src, sizeof(((std_function_t *)0)->functor)); break;
    default: break; /* destroy: nothing owned */
  }
  return 0;
}

/* ---- finding the allocator and the slot -------------------------------------------------- */

typedef struct found {
  const char *want; /* "libc10_cuda.so": a path whose last component starts with it */
  char path[4096];
  uintptr_t lo, hi; /* the object's loaded address range */
} found_t;

static int on_object(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  found_t *f = arg;
  const char *name = info->dlpi_name ? info->dlpi_name : "";
  const char *base = strrchr(name, '/');
  base = base ? base + 1 : name;
  if (strncmp(base, f->want, strlen(f->want)) != 0) return 0;
  snprintf(f->path, sizeof f->path, "%s", name);
  f->lo = UINTPTR_MAX;
  f->hi = 0;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *p = &info->dlpi_phdr[i];
    if (p->p_type != PT_LOAD) continue;
    uintptr_t a = info->dlpi_addr + p->p_vaddr;
    if (a < f->lo) f->lo = a;
    if (a + p->p_memsz > f->hi) f->hi = a + p->p_memsz;
  }
  return 1;
}

static void *open_loaded(const char *object, found_t *f, char *why, size_t nwhy) {
  memset(f, 0, sizeof *f);
  f->want = object;
  dl_iterate_phdr(on_object, f);
  if (!f->path[0]) {
    snprintf(why, nwhy, "%s is not loaded", object);
    return NULL;
  }
  void *h = dlopen(f->path, RTLD_LAZY | RTLD_NOLOAD);
  if (!h) snprintf(why, nwhy, "cannot open the loaded %s: %s", f->path, dlerror());
  return h;
}

/* The vtable slot CUDAAllocator gives attachAllocatorTraceTracker: where the pluggable
 * allocator's vtable (past offset-to-top and typeinfo) holds its override. -1 if none. */
#define REC_TS_MAX_SLOTS 512
static int find_slot(void *const *vtable, void *method) {
  void *const *vt = vtable + 2;
  for (int i = 0; i < REC_TS_MAX_SLOTS; i++)
    if (vt[i] == method) return i;
  return -1;
}

int rec_torch_stream_attach(rec_core_t *core, rec_callsites_t *cs, uint64_t (*now_ns)(void *ctx),
                            const char *torch_version, const char *c10_obj, const char *torch_obj, char *why, size_t nwhy) {
  if (attached) return 0;
  if (!core) {
    snprintf(why, nwhy, "nothing is recorded");
    return -1;
  }
  if (!rec_torch_stream_known(torch_version)) {
    snprintf(why, nwhy, "torch %s: its allocator trace's layout is not known to this gpurec (known: 2.11)",
             torch_version ? torch_version : "(unknown version)");
    return -1;
  }
  found_t fc, ft;
  void *hc = open_loaded(c10_obj, &fc, why, nwhy);
  if (!hc) return -1;
  void *ht = open_loaded(torch_obj, &ft, why, nwhy);
  if (!ht) {
    dlclose(hc);
    return -1;
  }
  int rc = -1;
  void **atomic_ptr = dlsym(hc, REC_TS_ALLOCATOR);
  void *const *vtable = dlsym(ht, REC_TS_PLUGGABLE_VTABLE);
  void *method = dlsym(ht, REC_TS_PLUGGABLE_ATTACH);
  void *obj = atomic_ptr ? __atomic_load_n(atomic_ptr, __ATOMIC_ACQUIRE) : NULL;
  int slot = vtable && method ? find_slot(vtable, method) : -1;
  if (!atomic_ptr || !vtable || !method) {
    snprintf(why, nwhy, "%s lacks %s", !atomic_ptr ? fc.path : ft.path,
             !atomic_ptr ? "the allocator" : !vtable ? "CUDAPluggableAllocator's vtable"
                                                     : "CUDAPluggableAllocator::attachAllocatorTraceTracker");
  } else if (slot < 0) {
    snprintf(why, nwhy, "attachAllocatorTraceTracker is not in CUDAPluggableAllocator's first %d slots",
             REC_TS_MAX_SLOTS);
  } else if (!obj) {
    snprintf(why, nwhy, "PyTorch's CUDA allocator is not set up");
  } else {
    void *const *native_vt = *(void *const *const *)obj;
    uintptr_t target = (uintptr_t)native_vt[slot];
    if (target < fc.lo || target >= fc.hi) {
      /* another allocator (a pluggable one, cudaMallocAsync's) or a layout we misread */
      snprintf(why, nwhy, "the allocator in use is not PyTorch's native caching allocator "
                          "(slot %d of its vtable is outside %s)", slot, fc.path);
    } else {
      rec_ts_entry_start(core, cs, now_ns);
      std_function_t fn = {{NULL, NULL}, fn_manager, rec_ts_entry};
      void (*attach)(void *self, std_function_t *tracker);
      memcpy(&attach, &target, sizeof attach); /* a code address read from a vtable */
      attach(obj, &fn);
      if (fn.manager) fn.manager(&fn, &fn, FN_DESTROY); /* the caller's temporary, moved from or not */
      attached = 1;
      rc = 0;
    }
  }
  dlclose(ht);
  dlclose(hc);
  return rc;
}
