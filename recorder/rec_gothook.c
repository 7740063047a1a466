/* rec_gothook.c: one library's calls to one imported function, redirected through its GOT.
 *
 * A call from one shared library into another goes through a GOT slot that the loader fills
 * with the callee's address: a JUMP_SLOT relocation behind a PLT stub (filled lazily, or at
 * load with -z now), or a GLOB_DAT one when the caller was built with -fno-plt. Writing our
 * function's address into that slot redirects the calls of that one library and no other,
 * with no code patched. The slot is found from the object's dynamic section (its symbol and
 * string tables and its two RELA tables), as the loader itself finds it.
 * Full RELRO (-z relro -z now, the default of most toolchains) makes the GOT read-only after
 * relocation: the page is made writable for the store and read-only again. The store is one
 * aligned pointer: a thread calling through the slot meanwhile reaches either target.
 * ELF64 only (x86_64, aarch64), the platforms CUDA runs on. */
#include "recorder/rec_gothook.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__x86_64__)
#define R_JUMP_SLOT R_X86_64_JUMP_SLOT
#define R_GLOB_DAT R_X86_64_GLOB_DAT
#elif defined(__aarch64__)
#define R_JUMP_SLOT R_AARCH64_JUMP_SLOT
#define R_GLOB_DAT R_AARCH64_GLOB_DAT
#else
#error "rec_gothook.c: ELF64 x86_64 or aarch64 only"
#endif

#define MAX_LOADS 16

typedef struct obj {
  const char *want;
  int found;
  char path[4096];
  uintptr_t base;
  const ElfW(Phdr) *phdr;
  int phnum;
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

/* Dynamic-section pointers: glibc rewrites them to run-time addresses when it loads the object,
 * other loaders leave the link-time offset. */
static uintptr_t dyn_ptr(const obj_t *o, ElfW(Addr) p) { return p < o->base ? o->base + p : p; }

static int in_object(const obj_t *o, uintptr_t a) {
  for (int i = 0; i < o->phnum; i++) {
    const ElfW(Phdr) *p = &o->phdr[i];
    if (p->p_type == PT_LOAD && a >= o->base + p->p_vaddr && a < o->base + p->p_vaddr + p->p_memsz)
      return 1;
  }
  return 0;
}

/* Write v into the slot, through a writable mapping of its page while it is in the RELRO range. */
static int store(const obj_t *o, void **slot, void *v) {
  uintptr_t a = (uintptr_t)slot, lo = 0, hi = 0;
  for (int i = 0; i < o->phnum; i++) {
    const ElfW(Phdr) *p = &o->phdr[i];
    if (p->p_type == PT_GNU_RELRO) {
      lo = o->base + p->p_vaddr;
      hi = lo + p->p_memsz;
    }
  }
  if (a < lo || a >= hi) {
    __atomic_store_n(slot, v, __ATOMIC_RELEASE);
    return 0;
  }
  uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
  void *start = (void *)(a & ~(page - 1));
  if (mprotect(start, page, PROT_READ | PROT_WRITE) != 0) return -1;
  __atomic_store_n(slot, v, __ATOMIC_RELEASE);
  mprotect(start, page, PROT_READ);
  return 0;
}

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;

static int hook_locked(const char *object, const char *sym, void *repl, void **orig, char *why,
                       size_t nwhy) {
  obj_t o;
  memset(&o, 0, sizeof o);
  o.want = object;
  dl_iterate_phdr(on_object, &o);
  if (!o.found) {
    snprintf(why, nwhy, "%s is not loaded", object);
    return -1;
  }
  const ElfW(Dyn) *dyn = NULL;
  for (int i = 0; i < o.phnum; i++)
    if (o.phdr[i].p_type == PT_DYNAMIC) dyn = (const ElfW(Dyn) *)(o.base + o.phdr[i].p_vaddr);
  const ElfW(Sym) *symtab = NULL;
  const char *strtab = NULL;
  size_t strsz = 0;
  const ElfW(Rela) *tab[2] = {NULL, NULL};
  size_t tabsz[2] = {0, 0};
  for (const ElfW(Dyn) *d = dyn; d && d->d_tag != DT_NULL; d++) {
    switch (d->d_tag) {
      case DT_SYMTAB: symtab = (const ElfW(Sym) *)dyn_ptr(&o, d->d_un.d_ptr); break;
      case DT_STRTAB: strtab = (const char *)dyn_ptr(&o, d->d_un.d_ptr); break;
      case DT_STRSZ: strsz = d->d_un.d_val; break;
      case DT_JMPREL: tab[0] = (const ElfW(Rela) *)dyn_ptr(&o, d->d_un.d_ptr); break;
      case DT_PLTRELSZ: tabsz[0] = d->d_un.d_val; break;
      case DT_RELA: tab[1] = (const ElfW(Rela) *)dyn_ptr(&o, d->d_un.d_ptr); break;
      case DT_RELASZ: tabsz[1] = d->d_un.d_val; break;
      default: break;
    }
  }
  if (!symtab || !strtab) {
    snprintf(why, nwhy, "%s has no dynamic symbol table", o.path);
    return -1;
  }
  int slots = 0, changed = 0;
  for (int t = 0; t < 2; t++) {
    for (size_t i = 0; tab[t] && i < tabsz[t] / sizeof(ElfW(Rela)); i++) {
      const ElfW(Rela) *r = &tab[t][i];
      unsigned type = (unsigned)ELF64_R_TYPE(r->r_info);
      if (type != R_JUMP_SLOT && type != R_GLOB_DAT) continue;
      const ElfW(Sym) *s = &symtab[ELF64_R_SYM(r->r_info)];
      if (s->st_name >= strsz || strcmp(strtab + s->st_name, sym) != 0) continue;
      void **slot = (void **)(o.base + r->r_offset);
      slots++;
      void *cur = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
      if (cur == repl) continue;
      if (!*orig) {
        if (cur && !in_object(&o, (uintptr_t)cur)) {
          *orig = cur; /* resolved already: whatever the calls reached, another hook included */
        } else {     /* lazy: a PLT stub of the object itself; find the definition it would bind */
          void *h = dlopen(o.path, RTLD_NOLOAD | RTLD_LAZY);
          void *f = h ? dlsym(h, sym) : NULL;
          if (!f) f = dlsym(RTLD_DEFAULT, sym);
          if (h) dlclose(h);
          *orig = f;
        }
        if (!*orig) {
          snprintf(why, nwhy, "%s: cannot find the definition of %s", o.path, sym);
          return -1;
        }
      }
      if (store(&o, slot, repl) != 0) {
        snprintf(why, nwhy, "%s: cannot write its GOT (mprotect)", o.path);
        return -1;
      }
      changed++;
    }
  }
  if (!slots) {
    snprintf(why, nwhy, "%s does not call %s", o.path, sym);
    return -1;
  }
  return changed;
}

int rec_got_hook(const char *object, const char *sym, void *repl, void **orig, char *why,
                 size_t nwhy) {
  pthread_mutex_lock(&g_mu);
  int r = hook_locked(object, sym, repl, orig, why, nwhy);
  pthread_mutex_unlock(&g_mu);
  return r;
}
