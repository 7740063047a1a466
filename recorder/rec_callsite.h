/* rec_callsite.h: which line of the program made an allocation, captured on the allocating
 * thread inside the CUPTI callback, and which library made a driver call.
 *
 * Three parts, CUDA-free and tested in CI:
 *   - a frame source (rec_pyframes_t): how to read the calling thread's Python frames. The real
 *     one (rec_pyframe.c) reads CPython 3.10-3.13's own structures; tests plug in fakes;
 *   - the callsite table (rec_callsites_t, rec_callsite.c): walks the frames, skips library code
 *     (site-packages, dist-packages, the standard library, <frozen ...>), interns "file:line:name"
 *     and caches per (code object, instruction) so the steady state is a cache lookup per frame;
 *   - the owner of a driver call (rec_owner.c): the first caller outside CUDA's libraries and
 *     this one, "[libnccl.so.2]", for the rare calls that no framework request explains.
 * Ids are this table's own (1..); the recorder's writer thread maps them to the trace's string
 * ids through rec_callsites_string(). */
#ifndef REC_CALLSITE_H
#define REC_CALLSITE_H

#include <stddef.h>
#include <stdint.h>

#include "base/gm_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- frame source ------------------------------------------------------------------------- */

/* Reads the calling thread's frames. Frame and code handles are opaque. Every function must be
 * safe without the GIL on the thread that owns the frames (it is blocked in a driver call):
 * plain loads and pure functions, no allocation, no Python call that could run Python code. */
/* Optional, with the functions below: where a frame keeps its caller and its code object, so the
 * walk reads frames with plain loads instead of three calls through pointers per frame (in a
 * training step each allocation's walk crosses 4-8 library frames). It must say what the
 * functions say: back() is the pointer at fr_back; code() is NULL for a shim frame (its byte at
 * fr_owner equals owner_shim; fr_owner < 0: no such byte), else the pointer at fr_code when the
 * object there has code_type at offset 8 (its type), else NULL; stamp() is rec_pystamp() of the
 * code object's words at st_a, st_b, st_c. rec_pyframe.c fills it for CPython 3.11-3.13. */
typedef struct rec_pylayout {
  size_t fr_back, fr_code;
  long fr_owner;
  int owner_shim;
  const void *code_type;
  size_t st_a, st_b, st_c;
} rec_pylayout_t;

static inline uint64_t rec_pystamp(uint64_t a, uint64_t b, uint64_t c) {
  return a * 0x9E3779B97F4A7C15ull ^ b * 0xC2B2AE3D27D4EB4Full ^ c * 0x165667B19E3779F9ull;
}

typedef struct rec_pyframes {
  void *ctx;
  const void *(*top)(void *ctx);                         /* innermost frame, or NULL */
  const void *(*back)(void *ctx, const void *frame);     /* the caller's frame, or NULL */
  const void *(*code)(void *ctx, const void *frame);     /* NULL: not a Python code frame */
  int (*lasti)(void *ctx, const void *frame, const void *code); /* instruction offset */
  int (*line)(void *ctx, const void *code, int lasti);   /* source line of that instruction */
  /* Identity of a code object beyond its address (filename and name objects, first line): a
   * code object freed and another allocated at the same address gets a new key. */
  uint64_t (*ident)(void *ctx, const void *code);
  /* filename and function name of code, NUL-terminated and truncated; 0 if unreadable */
  int (*text)(void *ctx, const void *code, char *file, size_t nfile, char *name, size_t nname);
  /* Optional (NULL: ident): a cheaper identity from the code object's first cache line, which
   * the walk reads anyway; it keys the library-or-program cache, so the library frames of a walk
   * never read further into their code objects. */
  uint64_t (*stamp)(void *ctx, const void *code);
  /* Optional (NULL: the functions): the frames' layout, copied by rec_callsites_create */
  const rec_pylayout_t *layout;
} rec_pyframes_t;

/* The CPython of this process (dlsym in the global scope; libpython is never linked): 1 and *out
 * filled for CPython 3.10-3.13 with a layout that passed its checks, else 0 and why in `why`. */
int rec_pyframes_cpython(rec_pyframes_t *out, char *why, size_t nwhy);

/* ---- callsite table ----------------------------------------------------------------------- */

typedef enum rec_cs_mode {
  REC_CS_NONE = 0,  /* no callsites, no owners */
  REC_CS_USER = 1,  /* the innermost frame of the program (not a library), "file:line:name" */
  REC_CS_STACK = 2, /* every frame, innermost first, joined by " < " */
} rec_cs_mode_t;

/* "none" | "user" | "stack" -> mode; -1 if unknown. NULL or "" -> REC_CS_USER (the default). */
int rec_cs_mode_parse(const char *s);
const char *rec_cs_mode_name(int mode);

typedef struct rec_callsites rec_callsites_t;

/* max_strings: distinct strings kept (0: REC_CS_MAX_STRINGS); beyond it every new callsite is
 * "[other]". src may be NULL (no Python: only owners). The table copies *src. */
#define REC_CS_MAX_STRINGS 65536
gm_status_t rec_callsites_create(rec_callsites_t **out, rec_cs_mode_t mode,
                                 const rec_pyframes_t *src, unsigned max_strings, gm_err_t *err);
void rec_callsites_destroy(rec_callsites_t *c);

/* The calling thread's callsite id, 0 if it runs no Python code. Any thread; never blocks on
 * anything but this table's own mutex, taken on cache misses only. */
uint32_t rec_callsites_capture(rec_callsites_t *c);
/* Intern a string; 0 only when out of memory. Any thread. */
uint32_t rec_callsites_intern(rec_callsites_t *c, const char *s);
/* The string of an id (stable until destroy), or NULL. Any thread. */
const char *rec_callsites_string(const rec_callsites_t *c, uint32_t id);

typedef struct rec_callsites_stats {
  uint64_t captures;  /* rec_callsites_capture calls */
  uint64_t misses;    /* ... that took the mutex (not in the thread's cache) */
  uint32_t strings;   /* distinct strings */
  uint32_t other;     /* callsites folded into "[other]" because the table was full */
} rec_callsites_stats_t;
void rec_callsites_stats(const rec_callsites_t *c, rec_callsites_stats_t *st);

/* Is this source file library code (skipped when looking for the program's own frame)? */
int rec_cs_is_library(const char *file);

/* ---- owner of a driver call (rec_owner.c) --------------------------------------------------- */

/* "[libname]" of the innermost caller outside the libraries whose file name starts with one of
 * skip[] (NULL-terminated; NULL: CUDA's libraries libcuda, libcupti, libcudart, libnvidia-, and
 * the C library's libc, libpthread, ld-linux) and
 * outside the object that contains `self` (this library). Written into out; returns its length,
 * 0 if no frame was found. Costs a backtrace() (microseconds): for rare calls only. */
size_t rec_owner_name(const char *const *skip, const void *self, char *out, size_t n);
/* Call once at start, outside any callback: backtrace() loads libgcc_s on first use. */
void rec_owner_prime(void);

/* The callsite of a rare driver call: "[owner]", or "[owner] < python callsite" when the calling
 * thread runs Python code (py: rec_callsites_capture's id, or 0). 0 when c is NULL or mode none. */
uint32_t rec_callsites_owner(rec_callsites_t *c, uint32_t py, const void *self);

#ifdef __cplusplus
}
#endif
#endif /* REC_CALLSITE_H */
