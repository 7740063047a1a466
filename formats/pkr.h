/* pkr.h: a reader for Python pickles (protocols 2-5) that builds a tree of plain data
 * and nothing else. Internal to recorder/snapshot.
 *
 * Only the opcodes that make dicts, lists, tuples, sets, str, bytes, ints, floats, bools and
 * None (with the memo and frames) are understood. Every opcode that names a class or calls
 * something (GLOBAL, STACK_GLOBAL, REDUCE, BUILD, INST, OBJ, NEWOBJ, EXT*, PERSID, buffers) is
 * refused with one error: the reader never executes code and never resolves a name. Values
 * live in one arena freed with the document; strings point into the caller's buffer, which
 * must outlive the document. The parser is a loop over a value stack (no recursion), so deep
 * nesting costs memory proportional to the input, never C stack. */
#ifndef PKR_H
#define PKR_H

#include <stddef.h>
#include <stdint.h>

#include "base/gm_base.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum pkr_type {
  PKR_NONE = 0,
  PKR_BOOL,
  PKR_INT,   /* fits in int64 (i); wider ints are PKR_BIGINT */
  PKR_BIGINT,/* an int wider than 64 bits: kept as a value, its digits dropped */
  PKR_FLOAT,
  PKR_STR,   /* UTF-8 (not validated), s/len, not NUL-terminated */
  PKR_BYTES, /* s/len */
  PKR_LIST,  /* items[0..n) */
  PKR_TUPLE,
  PKR_SET,   /* set or frozenset, as a list */
  PKR_DICT   /* items[0..n): key, value, key, value, ... (n even) */
} pkr_type_t;

/* 24 bytes: a pickle opcode of one byte makes at most one value, and the values of a hostile
 * pickle of N bytes must stay within a small multiple of N (None, True, False and the ints
 * 0..255 are shared constants and cost nothing). */
typedef struct pkr_val pkr_val_t;
struct pkr_val {
  uint8_t type;    /* pkr_type_t */
  uint8_t claimed; /* set by pkr_claim: the importer used this dict as a record */
  uint32_t cap;    /* containers: item slots allocated */
  union {
    int64_t i;           /* PKR_BOOL, PKR_INT */
    double f;            /* PKR_FLOAT */
    const char *s;       /* PKR_STR, PKR_BYTES */
    pkr_val_t **items;  /* containers */
  };
  union {
    size_t len; /* PKR_STR, PKR_BYTES */
    size_t n;   /* containers: items used */
  };
};

typedef struct pkr_doc pkr_doc_t;

/* Parse buf[0..len) (a whole pickle). The root value is returned by pkr_doc_root. Anything but
 * plain data, a truncated pickle, or a malformed one: GM_ERR_FORMAT, one line naming the opcode
 * and its offset. */
gm_status_t pkr_parse(const uint8_t *buf, size_t len, pkr_doc_t **out, gm_err_t *err);
const pkr_val_t *pkr_doc_root(const pkr_doc_t *d);
void pkr_doc_free(pkr_doc_t *d);

/* Dict lookup by str key (the last one wins, as in Python); NULL if v is not a dict or has none. */
const pkr_val_t *pkr_dict_get(const pkr_val_t *v, const char *key);
/* Non-zero if v is a str equal to s. */
int pkr_str_eq(const pkr_val_t *v, const char *s);
/* Integer value of an int or bool into *out; 0 if v is neither (or a BIGINT). */
int pkr_int(const pkr_val_t *v, int64_t *out);
/* Marks a dict as used for one record (a trace entry, a segment, a block, an annotation);
 * returns 0 if it already was. A real snapshot makes a fresh dict for every record; a pickle
 * that shares one through the memo (a million entries in a few MB) is refused by the
 * importer rather than multiplied. */
int pkr_claim(const pkr_val_t *v);

#ifdef __cplusplus
}
#endif
#endif /* PKR_H */
