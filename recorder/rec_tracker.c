/* rec_tracker.c: PyTorch's caching-allocator requests, streamed into the trace as they happen, for
 * gpurec's default mode.
 *
 * Why this source: PyTorch's memory history is a ring (the newest max_entries entries) dumped at
 * exit: a long run keeps only its tail and a killed one keeps nothing. The allocator's trace
 * trackers see the same entries with no ring: CUDACachingAllocator.cpp's record_trace builds a
 * TraceEntry for every alloc, free_requested, free_completed, segment alloc/free/map/unmap and
 * OOM and calls each tracker with it, with the history off too, on the allocating thread under
 * the per-device allocator lock (ProcessGroupNCCL registers memory this way). So the tracker
 * pushes one event per entry into the recorder's ring (rec_core.c: lock-free, never blocks,
 * counts what it drops) and takes the callsite as rec_sites.c does; nothing else runs there.
 *
 * How C reaches it. attachAllocatorTraceTracker is a virtual method of the allocator object
 * (c10::cuda::CUDACachingAllocator::allocator, exported) taking a libstdc++
 * std::function<void(const TraceEntry&)> by value. Its slot is not guessed: the method's own
 * address is read from libc10_cuda.so's symbol table on disk (a local symbol, whose mangled
 * name pins the argument type) and looked up among the object's vtable entries, which also
 * proves the allocator is the native one (cudaMallocAsync's has another method there). The
 * std::function is built by hand: 16 bytes of functor storage, a manager (clone = copy the 16
 * bytes, destroy = nothing) and an invoker; passed, as a non-trivial type, by a pointer to the
 * caller's temporary, which the caller destroys. TraceEntry's fields are read at the offsets of
 * the torch versions listed in k_layouts (checked against their headers); any other version,
 * a stripped library, or a vtable without the method: nothing is called and the caller falls
 * back to the history, saying so. An entry whose action is out of range is counted and left out. */
#include "recorder/rec_tracker.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_SLOTS 256 /* vtable entries searched (torch 2.11's native allocator has 50) */

/* TraceEntry (c10/core/CachingDeviceAllocator.h): action_ (enum, int), device_ (int8), addr_,
 * context_ (shared_ptr), stream_, size_, mempool_, time_, two strings. */
typedef struct layout {
  const char *version; /* prefix of torch.__version__ */
  size_t action, device, addr, stream, size;
} layout_t;
static const layout_t k_layouts[] = {
    {"2.11.", 0, 4, 8, 32, 40},
};

/* TraceEntry::Action */
enum { A_ALLOC, A_FREE_REQUESTED, A_FREE_COMPLETED, A_SEGMENT_ALLOC, A_SEGMENT_FREE,
       A_SEGMENT_MAP, A_SEGMENT_UNMAP, A_SNAPSHOT, A_OOM, A_COUNT };
static const uint8_t k_kind[A_COUNT] = {GMT_EV_ALLOC, GMT_EV_FREE_REQUESTED, GMT_EV_FREE,
                                        GMT_EV_SEGMENT_ALLOC, GMT_EV_SEGMENT_FREE, GMT_EV_VMM_MAP,
                                        GMT_EV_VMM_UNMAP, 0, GMT_EV_ALLOC_FAILED};

/* libstdc++'s std::function<R(Args...)>: _Any_data, _M_manager, _M_invoker */
typedef struct std_function {
  void *functor[2];
  _Bool (*manager)(void *dest, const void *src, int op);
  void (*invoker)(const void *functor, const void *entry);
} std_function_t;
enum { OP_GET_TYPE_INFO, OP_GET_FUNCTOR_PTR, OP_CLONE_FUNCTOR, OP_DESTROY_FUNCTOR };

static struct {
  _Atomic(rec_core_t *) core;
  rec_callsites_t *cs;
  uint64_t (*now)(void *);
  layout_t lay;
  int slot;
  int attached;
  _Atomic uint64_t entries, pushed, dropped, unknown;
} T = {.slot = -1};

static _Bool manager(void *dest, const void *src, int op) {
  switch (op) {
    case OP_GET_TYPE_INFO: *(const void **)dest = NULL; break; /* no RTTI for a C functor */
    case OP_GET_FUNCTOR_PTR: *(const void **)dest = src; break;
    case OP_CLONE_FUNCTOR: memcpy(dest, src, 2 * sizeof(void *)); break;
    default: break; /* destroy: nothing is owned */
  }
  return 0;
}

static uint64_t u64_at(const unsigned char *p, size_t off) {
  uint64_t v;
  memcpy(&v, p + off, sizeof v);
  return v;
}

static void on_entry(const void *functor, const void *entry) {
  rec_core_t *core = atomic_load_explicit(&T.core, memory_order_acquire);
  if (!core) return;
  atomic_fetch_add_explicit(&T.entries, 1, memory_order_relaxed);
  const unsigned char *p = entry;
  int32_t action;
  memcpy(&action, p + T.lay.action, sizeof action);
  if (action < 0 || action >= A_COUNT || !k_kind[action]) {
    if (action != A_SNAPSHOT) atomic_fetch_add_explicit(&T.unknown, 1, memory_order_relaxed);
    return;
  }
  gmt_event_t ev;
  memset(&ev, 0, sizeof ev);
  ev.kind = k_kind[action];
  ev.ts_ns = T.now ? T.now(NULL) : 0;
  ev.device = (uint16_t)(uint8_t)p[T.lay.device];
  ev.addr = u64_at(p, T.lay.addr);
  ev.size = u64_at(p, T.lay.size);
  ev.stream = u64_at(p, T.lay.stream); /* the cudaStream_t, as the history writes it */
  ev.mem_kind = GMT_MEM_DEVICE;
  if (action == A_OOM) ev.addr = 0; /* addr_ is the device's free bytes there */
  if (action == A_ALLOC && T.cs) ev.callsite = rec_callsites_capture(T.cs);
  if (rec_core_push(core, &ev) == 0) atomic_fetch_add_explicit(&T.pushed, 1, memory_order_relaxed);
  else atomic_fetch_add_explicit(&T.dropped, 1, memory_order_relaxed);
}

int rec_tracker_version_known(const char *version) {
  for (size_t i = 0; version && i < sizeof k_layouts / sizeof k_layouts[0]; i++)
    if (strncmp(version, k_layouts[i].version, strlen(k_layouts[i].version)) == 0) return 1;
  return 0;
}

typedef struct obj {
  const char *want;
  char path[4096];
  uintptr_t base;
  const ElfW(Phdr) *phdr;
  int phnum;
  int found;
} obj_t;

static int on_object(struct dl_phdr_info *info, size_t size, void *arg) {
  obj_t *o = arg;
  const char *n = info->dlpi_name;
  if (!n || !*n) return 0;
  const char *b = strrchr(n, '/');
  b = b ? b + 1 : n;
  if (strncmp(b, o->want, strlen(o->want)) != 0) return 0;
  o->found = 1;
  snprintf(o->path, sizeof o->path, "%s", n);
  o->base = (uintptr_t)info->dlpi_addr;
  o->phdr = info->dlpi_phdr;
  o->phnum = info->dlpi_phnum;
  return 1;
}

static int in_object(const obj_t *o, uintptr_t a) {
  for (int i = 0; i < o->phnum; i++) {
    const ElfW(Phdr) *p = &o->phdr[i];
    if (p->p_type == PT_LOAD && a >= o->base + p->p_vaddr && a < o->base + p->p_vaddr + p->p_memsz)
      return 1;
  }
  return 0;
}

/* The value of sym in the file's .symtab (or .dynsym), or 0. */
static uint64_t file_symbol(const char *path, const char *sym, char *why, size_t nwhy) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0 || (size_t)st.st_size < sizeof(ElfW(Ehdr))) {
    snprintf(why, nwhy, "cannot read %s", path);
    if (fd >= 0) close(fd);
    return 0;
  }
  size_t len = (size_t)st.st_size;
  const unsigned char *m = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (m == MAP_FAILED) {
    snprintf(why, nwhy, "cannot map %s", path);
    return 0;
  }
  uint64_t val = 0;
  const ElfW(Ehdr) *eh = (const ElfW(Ehdr) *)m;
  int tables = 0;
  if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
      eh->e_shoff == 0 || eh->e_shoff > len || eh->e_shnum > (len - eh->e_shoff) / sizeof(ElfW(Shdr))) {
    snprintf(why, nwhy, "%s is not an ELF64 file this recorder can read", path);
    goto out;
  }
  const ElfW(Shdr) *sh = (const ElfW(Shdr) *)(m + eh->e_shoff);
  for (int pass = 0; pass < 2 && !val; pass++) { /* the full table first */
    for (unsigned i = 0; i < eh->e_shnum && !val; i++) {
      if (sh[i].sh_type != (pass == 0 ? SHT_SYMTAB : SHT_DYNSYM)) continue;
      if (sh[i].sh_link >= eh->e_shnum) continue;
      const ElfW(Shdr) *ss = &sh[sh[i].sh_link];
      if (sh[i].sh_offset > len || sh[i].sh_size > len - sh[i].sh_offset || ss->sh_offset > len ||
          ss->sh_size > len - ss->sh_offset)
        continue;
      tables++;
      const ElfW(Sym) *syms = (const ElfW(Sym) *)(m + sh[i].sh_offset);
      const char *str = (const char *)(m + ss->sh_offset);
      size_t n = sh[i].sh_size / sizeof(ElfW(Sym)), slen = strlen(sym);
      for (size_t k = 0; k < n; k++) {
        if (syms[k].st_name + slen >= ss->sh_size) continue;
        if (ELF64_ST_TYPE(syms[k].st_info) == STT_FUNC && syms[k].st_value &&
            memcmp(str + syms[k].st_name, sym, slen + 1) == 0) {
          val = syms[k].st_value;
          break;
        }
      }
    }
  }
  if (!val)
    snprintf(why, nwhy, "%s: no %s in its symbol table%s", path, "attachAllocatorTraceTracker",
             tables < 2 ? " (stripped?)" : " (another torch?)");
out:
  munmap((void *)m, len);
  return val;
}

int rec_tracker_attach(const char *object, const char *version, rec_core_t *core,
                       rec_callsites_t *cs, uint64_t (*now_ns)(void *ctx), char *why, size_t nwhy) {
  if (T.attached) return 0;
  const layout_t *lay = NULL;
  for (size_t i = 0; version && i < sizeof k_layouts / sizeof k_layouts[0]; i++)
    if (strncmp(version, k_layouts[i].version, strlen(k_layouts[i].version)) == 0) lay = &k_layouts[i];
  if (!lay) {
    snprintf(why, nwhy, "torch %s: its allocator's trace entry layout is not known to this "
             "recorder (known: torch 2.11)", version ? version : "(unknown version)");
    return -1;
  }
  obj_t o;
  memset(&o, 0, sizeof o);
  o.want = object;
  dl_iterate_phdr(on_object, &o);
  if (!o.found) {
    snprintf(why, nwhy, "%s is not loaded", object);
    return -1;
  }
  void *h = dlopen(o.path, RTLD_NOLOAD | RTLD_LAZY);
  void **alloc_var = h ? dlsym(h, REC_TRACKER_ALLOCATOR) : NULL;
  if (h) dlclose(h);
  if (!alloc_var) {
    snprintf(why, nwhy, "%s exports no c10::cuda::CUDACachingAllocator::allocator", o.path);
    return -1;
  }
  void *self = __atomic_load_n(alloc_var, __ATOMIC_ACQUIRE);
  if (!self) {
    snprintf(why, nwhy, "PyTorch's CUDA allocator is not set up yet");
    return -1;
  }
  uint64_t off = file_symbol(o.path, REC_TRACKER_ATTACH, why, nwhy);
  if (!off) return -1;
  uintptr_t fn = o.base + (uintptr_t)off;
  void **vtbl = *(void ***)self;
  if (!in_object(&o, (uintptr_t)vtbl)) {
    snprintf(why, nwhy, "PyTorch's CUDA allocator is not %s's own (another backend?)", object);
    return -1;
  }
  int slot = -1;
  for (int i = 0; i < MAX_SLOTS && in_object(&o, (uintptr_t)&vtbl[i]); i++) {
    if ((uintptr_t)vtbl[i] == fn) {
      slot = i;
      break;
    }
  }
  if (slot < 0) {
    snprintf(why, nwhy, "PyTorch's CUDA allocator is not the native caching allocator "
             "(PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync?)");
    return -1;
  }
  T.lay = *lay;
  T.cs = cs;
  T.now = now_ns;
  T.slot = slot;
  atomic_store_explicit(&T.core, core, memory_order_release);
  std_function_t f;
  memset(&f, 0, sizeof f);
  f.manager = manager;
  f.invoker = on_entry;
  void (*attach)(void *, std_function_t *) = (void (*)(void *, std_function_t *))vtbl[slot];
  attach(self, &f);
  if (f.manager) f.manager(f.functor, f.functor, OP_DESTROY_FUNCTOR); /* the caller's temporary */
  T.attached = 1;
  return 1;
}

void rec_tracker_detach(void) { atomic_store_explicit(&T.core, NULL, memory_order_release); }

void rec_tracker_stats(rec_tracker_stats_t *st) {
  st->entries = atomic_load(&T.entries);
  st->pushed = atomic_load(&T.pushed);
  st->dropped = atomic_load(&T.dropped);
  st->unknown = atomic_load(&T.unknown);
  st->slot = T.slot;
}
