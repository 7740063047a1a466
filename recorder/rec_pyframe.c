/* rec_pyframe.c: the calling thread's Python frames, read as memory (CPython 3.10-3.13).
 *
 * Why not the C API: PyTorch releases the GIL around every operator it dispatches
 * (`pybind11::gil_scoped_release` in its generated bindings), so a tensor's cuMemAllocAsync runs
 * on the Python thread WITHOUT the GIL; PyGILState_Check() is 0 there, PyEval_GetFrame() must not
 * be called, and taking the GIL from inside the driver call could deadlock (PyTorch's allocator
 * holds its own mutex around the call, and a thread that holds the GIL may be waiting for that
 * mutex to free a tensor). What stays true without the GIL: the thread's own frames cannot change
 * while it is blocked in the driver call, the code objects they point to stay alive (the frames
 * own them), and the fields read here (filename, name, first line, line table) are immutable. So
 * this file reads exactly what faulthandler reads from a signal handler: the thread state's
 * current frame, each frame's code object and instruction pointer, the caller link; it turns the
 * instruction into a line with PyCode_Addr2Line, a pure function over the immutable line table.
 * Nothing here allocates or runs Python code.
 * Guards: libpython is never linked (dlsym in the global scope: no Python, no callsites); only
 * CPython 3.10-3.13 with this file's offsets (from the CPython headers of each version); every code
 * object, frame object (3.10) and string is checked against its type object before use; and the
 * first walk reads through process_vm_readv (a failed read disables the source instead of
 * crashing) and must find a code object at the top, else the source is off for the process. */
#include "recorder/rec_callsite.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

/* Offsets into CPython's structures, per minor version (x86_64 and aarch64, LP64, the default
 * build: not the free-threaded one, whose object header differs and fails the type checks). */
typedef struct layout {
  int minor;
  int ts_direct;         /* 1: frame pointer at ts + ts_frame; 0: via ts->cframe */
  size_t ts_frame;       /* 3.10 ts->frame, 3.13 ts->current_frame, 3.11/12 ts->cframe */
  size_t cframe_current; /* 3.11/12: _PyCFrame.current_frame */
  int frame_object;      /* 3.10: frames are PyFrameObjects with an int f_lasti */
  size_t fr_code, fr_back, fr_instr;
  int fr_owner;          /* offset of `owner`, -1 if none */
  size_t co_firstlineno, co_filename, co_name;
  size_t str_data;       /* sizeof(PyASCIIObject) */
  size_t st_a, st_b, st_c; /* three immutable words in the code object's first 64 bytes (stamp) */
} layout_t;

static const layout_t layouts[] = {
    /* 3.10: Include/cpython/pystate.h, frameobject.h, code.h */
    {10, 1, 24, 0, 1, 32, 24, 96, -1, 40, 104, 112, 48, 16, 48, 56}, /* argcounts, co_code, co_consts */
    /* 3.11: _ts.cframe, _PyCFrame.current_frame, _PyInterpreterFrame.{f_code,previous,prev_instr,
     * owner} (checked against /usr/include/python3.11/internal/pycore_frame.h) */
    {11, 0, 56, 8, 0, 32, 48, 56, 69, 72, 112, 120, 48, 16, 24, 32}, /* ob_size, co_consts, co_names */
    /* 3.12: _PyCFrame lost use_tracing; _PyInterpreterFrame starts with f_code */
    {12, 0, 56, 0, 0, 0, 8, 56, 70, 68, 112, 120, 40, 16, 24, 32},
    /* 3.13: ts->current_frame, _PyInterpreterFrame.{f_executable,previous,instr_ptr,owner} */
    {13, 1, 72, 0, 0, 0, 8, 56, 70, 68, 112, 120, 40, 16, 24, 32},
};

#define OWNED_BY_CSTACK 3 /* 3.12+: a shim frame of the C stack, no code of the program */

static struct {
  layout_t L;
  void *(*this_thread)(void);
  int (*initialized)(void);
  int (*addr2line)(const void *, int);
  const void *code_type, *str_type, *frame_type;
  size_t code_base; /* 3.11+: offset of co_code_adaptive (PyCode_Type.tp_basicsize) */
  rec_pylayout_t lay; /* 3.11+: what frame_back, frame_code and code_stamp read, for the walk */
} P;

#define AT(p, off, type) (*(type const *)((const char *)(p) + (off)))
#define TYPE_OF(o) AT(o, 8, const void *)

/* ---- the source's functions ------------------------------------------------------------------ */

__attribute__((hot)) static const void *frame_top(void *ctx) {
  if (!P.initialized()) return NULL;
  const void *ts = P.this_thread();
  if (!ts) return NULL;
  if (P.L.ts_direct) return AT(ts, P.L.ts_frame, const void *);
  const void *cf = AT(ts, P.L.ts_frame, const void *);
  return cf ? AT(cf, P.L.cframe_current, const void *) : NULL;
}

__attribute__((hot)) static const void *frame_back(void *ctx, const void *f) { return AT(f, P.L.fr_back, const void *); }

__attribute__((hot)) static const void *frame_code(void *ctx, const void *f) {
  if (P.L.frame_object && TYPE_OF(f) != P.frame_type) return NULL;
  if (P.L.fr_owner >= 0 && AT(f, (size_t)P.L.fr_owner, char) == OWNED_BY_CSTACK) return NULL;
  const void *co = AT(f, P.L.fr_code, const void *);
  return co && TYPE_OF(co) == P.code_type ? co : NULL;
}

__attribute__((hot)) static int frame_lasti(void *ctx, const void *f, const void *code) {
  if (P.L.frame_object) return AT(f, P.L.fr_instr, int) * 2; /* f_lasti counts code units */
  const char *ip = AT(f, P.L.fr_instr, const char *);
  long off = ip - ((const char *)code + P.code_base);
  long units = AT(code, 16, long); /* ob_size: code units */
  return off < 0 || off >= units * 2 ? -1 : (int)off;
}

static int frame_line(void *ctx, const void *code, int lasti) {
  return P.addr2line(code, lasti); /* < 0: the first line */
}

__attribute__((hot)) static uint64_t code_ident(void *ctx, const void *code) {
  uint64_t fn = (uint64_t)(uintptr_t)AT(code, P.L.co_filename, const void *);
  uint64_t nm = (uint64_t)(uintptr_t)AT(code, P.L.co_name, const void *);
  uint64_t first = (uint64_t)(uint32_t)AT(code, P.L.co_firstlineno, int);
  return fn * 0x9E3779B97F4A7C15ull ^ nm * 0xC2B2AE3D27D4EB4Full ^ first;
}

/* The code object's stamp: words of its first 64 bytes (where its type, checked on every frame,
 * already is), immutable for its life: its size and its constants' and names' tuples (3.11+),
 * its argument counts, bytecode and constants (3.10). */
__attribute__((hot)) static uint64_t code_stamp(void *ctx, const void *code) {
  return rec_pystamp(AT(code, P.L.st_a, uint64_t), AT(code, P.L.st_b, uint64_t), AT(code, P.L.st_c, uint64_t));
}

/* A str object's UTF-8 into buf: compact ASCII strings (nearly every file and function name) from
 * their inline data, others from their cached UTF-8 if they have one, else "?". */
static void str_text(const void *s, char *buf, size_t n) {
  snprintf(buf, n, "?");
  if (!s || TYPE_OF(s) != P.str_type) return;
  long len = AT(s, 16, long);
  unsigned state = AT(s, 32, unsigned);
  int compact = (state >> 5) & 1, ascii = (state >> 6) & 1;
  const char *data = NULL;
  if (compact && ascii) {
    data = (const char *)s + P.L.str_data;
  } else if (compact) {
    len = AT(s, P.L.str_data, long);
    data = AT(s, P.L.str_data + 8, const char *);
  }
  if (!data || len < 0) return;
  size_t k = (size_t)len < n - 1 ? (size_t)len : n - 1;
  memcpy(buf, data, k);
  buf[k] = '\0';
}

static int code_text(void *ctx, const void *code, char *file, size_t nfile, char *name,
                     size_t nname) {
  str_text(AT(code, P.L.co_filename, const void *), file, nfile);
  str_text(AT(code, P.L.co_name, const void *), name, nname);
  return 1;
}

/* ---- set-up ---------------------------------------------------------------------------------- */

static int py_minor(void) {
  const unsigned long *hex = dlsym(RTLD_DEFAULT, "Py_Version"); /* 3.11+ */
  if (hex) return (*hex >> 24) == 3 ? (int)((*hex >> 16) & 0xff) : -1;
  const char *(*ver)(void) = (const char *(*)(void))dlsym(RTLD_DEFAULT, "Py_GetVersion");
  int major = 0, minor = 0;
  if (ver && sscanf(ver(), "%d.%d", &major, &minor) == 2 && major == 3) return minor;
  return -1;
}

/* Reads len bytes at addr without faulting: 1 if readable, 0 if not, -1 if the kernel does not
 * let this process read itself this way (then the layout is trusted as it is). */
static int safe_read(const void *addr, void *out, size_t len) {
  struct iovec l = {out, len}, r = {(void *)addr, len};
  ssize_t k = process_vm_readv(getpid(), &l, 1, &r, 1, 0);
  if (k == (ssize_t)len) return 1;
  return k < 0 && (errno == ENOSYS || errno == EPERM) ? -1 : 0;
}

/* The first walk on a thread with a frame: every pointer read safely, the top must be code. */
static int probe(char *why, size_t nwhy) {
  if (!P.initialized()) return 1; /* nothing to check yet: checked again by the type tests */
  const void *ts = P.this_thread();
  if (!ts) return 1;
  const void *p = NULL, *f = NULL, *co = NULL, *t = NULL;
  int r = safe_read((const char *)ts + P.L.ts_frame, &p, sizeof p);
  if (r < 0) return 1;
  if (!r) goto bad;
  if (!P.L.ts_direct && p && safe_read((const char *)p + P.L.cframe_current, &p, sizeof p) != 1)
    goto bad;
  for (int d = 0; (f = p) && d < 64; d++) {
    if (safe_read((const char *)f + P.L.fr_code, &co, sizeof co) != 1 ||
        safe_read((const char *)f + P.L.fr_back, &p, sizeof p) != 1)
      goto bad;
    if (co && safe_read((const char *)co + 8, &t, sizeof t) == 1 && t == P.code_type) return 1;
  }
  if (!f) return 1; /* no frame on this thread */
bad:
  snprintf(why, nwhy, "Python 3.%d's frames do not read as this recorder expects", P.L.minor);
  return 0;
}

int rec_pyframes_cpython(rec_pyframes_t *out, char *why, size_t nwhy) {
  memset(out, 0, sizeof *out);
  *(void **)&P.this_thread = dlsym(RTLD_DEFAULT, "PyGILState_GetThisThreadState");
  *(void **)&P.initialized = dlsym(RTLD_DEFAULT, "Py_IsInitialized");
  *(void **)&P.addr2line = dlsym(RTLD_DEFAULT, "PyCode_Addr2Line");
  P.code_type = dlsym(RTLD_DEFAULT, "PyCode_Type");
  P.str_type = dlsym(RTLD_DEFAULT, "PyUnicode_Type");
  P.frame_type = dlsym(RTLD_DEFAULT, "PyFrame_Type");
  if (!P.this_thread || !P.initialized || !P.addr2line || !P.code_type || !P.str_type) {
    snprintf(why, nwhy, "no Python in this process");
    return 0;
  }
  int minor = py_minor();
  const layout_t *L = NULL;
  for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++)
    if (layouts[i].minor == minor) L = &layouts[i];
  if (!L) {
    snprintf(why, nwhy, "Python 3.%d: callsites are read from CPython 3.10-3.13 only", minor);
    return 0;
  }
  P.L = *L;
  /* PyCode_Type.tp_basicsize (PyTypeObject: refcnt, type, size, tp_name, tp_basicsize) is the
   * offset of co_code_adaptive, where the instructions start, in 3.11+ */
  P.code_base = AT(P.code_type, 32, size_t);
  if (P.L.frame_object && !P.frame_type) {
    snprintf(why, nwhy, "Python 3.%d without PyFrame_Type", minor);
    return 0;
  }
  if (!probe(why, nwhy)) return 0;
  /* 3.11+: frames are plain structs (3.10's are objects whose type is checked first) */
  if (!P.L.frame_object)
    P.lay = (rec_pylayout_t){.fr_back = P.L.fr_back, .fr_code = P.L.fr_code, .fr_owner = P.L.fr_owner,
                             .owner_shim = OWNED_BY_CSTACK, .code_type = P.code_type,
                             .st_a = P.L.st_a, .st_b = P.L.st_b, .st_c = P.L.st_c};
  *out = (rec_pyframes_t){.top = frame_top, .back = frame_back, .code = frame_code,
                          .lasti = frame_lasti, .line = frame_line, .ident = code_ident,
                          .text = code_text, .stamp = code_stamp,
                          .layout = P.L.frame_object ? NULL : &P.lay};
  return 1;
}
