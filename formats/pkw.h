/* pkw.h: a writer of Python pickles (protocols 2 to 4) made of plain data only: dicts, lists,
 * tuples, str, int (any 64-bit value, signed or not), bool, None and float. The writer's header of
 * //formats:pickle (pkr.h is its reader's).
 *
 * What it writes is what CPython's own pickler writes for the same values (the opcodes, the
 * batching of container items by 1000), so that every reader of real pickles reads it: Python's
 * pickle.load, PyTorch's memory_viz page (whose JavaScript unpickler knows only the opcodes
 * Python emits for plain data: no BINUNICODE8, no LONG4, no BINBYTES), and the project's own
 * reader (formats/pkr.c). Strings are written as valid UTF-8: bytes that are
 * not (a callsite from an untrusted trace) become U+FFFD, since a pickle whose str is not
 * UTF-8 makes pickle.load raise.
 *
 * The memo: pkw_memo() right after a value (a container right after its _begin) gives it a
 * number that pkw_get() pushes again, so a list of stack frames shared by a million entries is
 * written once (CPython writes shared objects that way too).
 *
 * Writes go to a stdio stream; the first write error is kept and returned by pkw_finish. Misuse
 * (an _end without a _begin, a dict with an odd number of values) is a GM_ERR_INVAL from
 * pkw_finish, never a crash. Nothing here prints. */
#ifndef PKW_H
#define PKW_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/gm_base.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PKW_MAX_DEPTH 32 /* containers open at once */

typedef struct pkw_frame {
  uint8_t kind;   /* PKW_K_* */
  uint8_t marked; /* a MARK is open for this container's next items */
  uint32_t pending; /* values since the last SETITEMS/APPENDS */
} pkw_frame_t;

typedef struct pkw {
  FILE *f;
  int protocol;
  gm_status_t st;  /* the first failure, GM_OK while none */
  char why[128];   /* what failed */
  uint32_t memo;   /* memo entries given so far */
  int depth;
  pkw_frame_t stack[PKW_MAX_DEPTH];
  uint64_t bytes;  /* written so far */
  size_t nbuf;     /* bytes in buf not yet given to f (one fwrite per buffer, not per opcode) */
  uint8_t buf[32768];
} pkw_t;

/* Starts a pickle of the given protocol (2, 3 or 4) on f: writes PROTO. */
void pkw_init(pkw_t *w, FILE *f, int protocol);
/* Ends it (STOP) and returns the first failure: a write error (GM_ERR_IO), misuse
 * (GM_ERR_INVAL). The caller closes f. */
gm_status_t pkw_finish(pkw_t *w, gm_err_t *err);

void pkw_none(pkw_t *w);
void pkw_bool(pkw_t *w, int v);
void pkw_int(pkw_t *w, int64_t v);
void pkw_uint(pkw_t *w, uint64_t v); /* above INT64_MAX too (a 9-byte LONG1) */
void pkw_float(pkw_t *w, double v);
void pkw_str(pkw_t *w, const char *s, size_t len);
void pkw_cstr(pkw_t *w, const char *s);

/* Containers: values written between _begin and pkw_end are the items (a dict's alternate key,
 * value, key, value). Any value, containers included, may be an item. */
void pkw_dict_begin(pkw_t *w);
void pkw_list_begin(pkw_t *w);
void pkw_tuple_begin(pkw_t *w);
void pkw_end(pkw_t *w);

/* The memo: the value just written (for a container: just begun) gets the next memo number,
 * returned. pkw_get writes a memo entry again as a value. */
uint32_t pkw_memo(pkw_t *w);
void pkw_get(pkw_t *w, uint32_t id);

/* "key": value pairs in a dict, shorthand. */
void pkw_kv_int(pkw_t *w, const char *key, int64_t v);
void pkw_kv_uint(pkw_t *w, const char *key, uint64_t v);
void pkw_kv_str(pkw_t *w, const char *key, const char *v);
void pkw_kv_bool(pkw_t *w, const char *key, int v);

#ifdef __cplusplus
}
#endif
#endif /* PKW_H */
