/* pkr.c: the plain-data pickle reader (see pkr.h).
 *
 * Pickle is a stack machine: each opcode pushes a value, marks a position, or folds values above
 * the last mark into a container. We run that machine over our own value stack, with the memo
 * as a dense array indexed like Python's (an index can never exceed the number of values made
 * so far, so a hostile LONG_BINPUT cannot make us allocate more than the input justifies).
 * Every length is checked against the bytes left before it is used, so a truncated or lying
 * pickle ends in "truncated" rather than a read past the buffer. */
#include "formats/pkr.h"

#include <stdlib.h>
#include <string.h>

/* ---- arena ----------------------------------------------------------------------------------- */

typedef struct arena_blk {
  struct arena_blk *next;
  size_t used, cap;
  _Alignas(8) unsigned char data[];
} arena_blk_t;

struct pkr_doc {
  arena_blk_t *blocks;
  pkr_val_t *root;
};

static void *arena_alloc(pkr_doc_t *d, size_t n) {
  n = (n + 7) & ~(size_t)7;
  arena_blk_t *b = d->blocks;
  if (!b || b->cap - b->used < n) {
    size_t cap = n > (size_t)1 << 20 ? n : (size_t)1 << 20;
    b = malloc(sizeof(*b) + cap);
    if (!b) return NULL;
    b->next = d->blocks;
    b->used = 0;
    b->cap = cap;
    d->blocks = b;
  }
  void *p = b->data + b->used;
  b->used += n;
  return p;
}

void pkr_doc_free(pkr_doc_t *d) {
  if (!d) return;
  arena_blk_t *b = d->blocks;
  while (b) {
    arena_blk_t *n = b->next;
    free(b);
    b = n;
  }
  free(d);
}

const pkr_val_t *pkr_doc_root(const pkr_doc_t *d) { return d ? d->root : NULL; }

/* ---- parser state ------------------------------------------------------------------------------ */

typedef struct parser {
  pkr_doc_t *doc;
  const uint8_t *buf;
  size_t len, pos, op_pos;
  pkr_val_t **stack;
  size_t sp, scap;
  size_t *marks;
  size_t nmarks, mcap;
  pkr_val_t **memo;
  size_t nmemo, memocap;
  size_t values; /* values pushed so far (a memo index beyond them names nothing) */
  pkr_val_t *small[256];
  gm_err_t *err;
} parser_t;

static gm_status_t fail(parser_t *p, const char *what) {
  return gm_err_set(p->err, GM_ERR_FORMAT, "not a plain-data pickle: %s at offset %zu", what,
                    p->op_pos);
}

static gm_status_t nomem(parser_t *p) {
  return gm_err_set(p->err, GM_ERR_NOMEM, "out of memory reading pickle at offset %zu", p->op_pos);
}

static gm_status_t take(parser_t *p, size_t n, const uint8_t **out) {
  if (n > p->len - p->pos)
    return gm_err_set(p->err, GM_ERR_FORMAT,
                      "truncated pickle: opcode at offset %zu needs %zu bytes, %zu left", p->op_pos,
                      n, p->len - p->pos);
  *out = p->buf + p->pos;
  p->pos += n;
  return GM_OK;
}

static uint64_t le(const uint8_t *b, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; i--) v = (v << 8) | b[i];
  return v;
}

/* The immutable values every pickle repeats, shared instead of made per opcode. */
static pkr_val_t k_none = {.type = PKR_NONE}, k_true = {.type = PKR_BOOL, .i = 1},
                  k_false = {.type = PKR_BOOL, .i = 0};

static pkr_val_t *newval(parser_t *p, pkr_type_t t) {
  if (t == PKR_NONE) return &k_none;
  pkr_val_t *v = arena_alloc(p->doc, sizeof(*v));
  if (v) {
    memset(v, 0, sizeof(*v));
    v->type = (uint8_t)t;
  }
  return v;
}

/* Ints 0..255 (BININT1: two bytes of input) are made once per document. */
static pkr_val_t *small_int(parser_t *p, int64_t i) {
  if (i >= 0 && i < 256 && p->small[i]) return p->small[i];
  pkr_val_t *v = newval(p, PKR_INT);
  if (v) v->i = i;
  if (v && i >= 0 && i < 256) p->small[i] = v;
  return v;
}

static gm_status_t push(parser_t *p, pkr_val_t *v) {
  if (!v) return nomem(p);
  if (p->sp == p->scap) {
    size_t nc = p->scap ? p->scap * 2 : 256;
    pkr_val_t **ns = realloc(p->stack, nc * sizeof(*ns));
    if (!ns) return nomem(p);
    p->stack = ns;
    p->scap = nc;
  }
  p->stack[p->sp++] = v;
  p->values++;
  return GM_OK;
}

static gm_status_t pop(parser_t *p, pkr_val_t **v) {
  size_t floor = p->nmarks ? p->marks[p->nmarks - 1] : 0;
  if (p->sp <= floor) return fail(p, "stack underflow");
  *v = p->stack[--p->sp];
  return GM_OK;
}

/* Append items to a container, growing its array in the arena (old arrays are left behind:
 * at most twice the final size in total). */
static gm_status_t add_items(parser_t *p, pkr_val_t *c, pkr_val_t **items, size_t n) {
  if (n == 0) return GM_OK; /* an empty MARK run: nothing to copy (and no NULL to memcpy) */
  if (c->n + n > c->cap) {
    /* A container filled by one MARK run (what CPython writes for up to 1000 items at a
     * time) gets exactly its size; one that grows item by item doubles. */
    size_t nc = c->cap ? (size_t)c->cap * 2 : n;
    while (nc < c->n + n) nc *= 2;
    if (nc > UINT32_MAX) return fail(p, "a container of more than 2^32 items");
    pkr_val_t **ni = arena_alloc(p->doc, nc * sizeof(*ni));
    if (!ni) return nomem(p);
    if (c->n) memcpy(ni, c->items, c->n * sizeof(*ni));
    c->items = ni;
    c->cap = (uint32_t)nc;
  }
  memcpy(c->items + c->n, items, n * sizeof(*items));
  c->n += n;
  return GM_OK;
}

/* Pops to the last mark: returns the start index of the marked items in *start. */
static gm_status_t pop_mark(parser_t *p, size_t *start) {
  if (!p->nmarks) return fail(p, "no MARK for the opcode");
  *start = p->marks[--p->nmarks];
  return GM_OK;
}

static gm_status_t make_seq(parser_t *p, pkr_type_t t, size_t start) {
  pkr_val_t *v = newval(p, t);
  if (!v) return nomem(p);
  gm_status_t st = add_items(p, v, p->stack + start, p->sp - start);
  if (st) return st;
  p->sp = start;
  return push(p, v);
}

static gm_status_t memo_put(parser_t *p, uint64_t idx) {
  if (!p->sp) return fail(p, "memo put on an empty stack");
  if (idx > p->values) return fail(p, "memo index out of range (above the number of values made)");
  if (idx >= p->memocap) {
    size_t nc = p->memocap ? p->memocap : 64;
    while (nc <= idx) nc *= 2;
    pkr_val_t **nm = realloc(p->memo, nc * sizeof(*nm));
    if (!nm) return nomem(p);
    memset(nm + p->memocap, 0, (nc - p->memocap) * sizeof(*nm));
    p->memo = nm;
    p->memocap = nc;
  }
  p->memo[idx] = p->stack[p->sp - 1];
  if (idx >= p->nmemo) p->nmemo = idx + 1;
  return GM_OK;
}

static gm_status_t memo_get(parser_t *p, uint64_t idx) {
  if (idx >= p->nmemo || !p->memo[idx]) return fail(p, "memo get of an unset index");
  return push(p, p->memo[idx]);
}

/* Two's complement little-endian int of n bytes (LONG1/LONG4). */
static gm_status_t push_long(parser_t *p, const uint8_t *b, uint64_t n) {
  pkr_val_t *v = newval(p, PKR_INT);
  if (!v) return nomem(p);
  if (n == 0) {
    v->i = 0;
  } else if (n <= 8) {
    uint64_t u = le(b, (int)n);
    if (n < 8 && (b[n - 1] & 0x80)) u |= ~(uint64_t)0 << (8 * n); /* sign-extend */
    v->i = (int64_t)u;
  } else {
    /* Wider: it still fits in int64 if the extra bytes are pure sign extension. */
    int neg = (b[n - 1] & 0x80) != 0;
    int fits = ((b[7] & 0x80) != 0) == neg;
    for (uint64_t k = 8; k < n && fits; k++) fits = b[k] == (neg ? 0xff : 0x00);
    if (fits)
      v->i = (int64_t)le(b, 8);
    else
      v->type = PKR_BIGINT;
  }
  return push(p, v);
}

static gm_status_t push_bytes(parser_t *p, pkr_type_t t, uint64_t n) {
  const uint8_t *b = NULL;
  gm_status_t st = take(p, n, &b);
  if (st) return st;
  pkr_val_t *v = newval(p, t);
  if (!v) return nomem(p);
  v->s = (const char *)b;
  v->len = n;
  return push(p, v);
}

/* Name of an opcode that would build an object or call code; NULL for any other byte. */
static const char *code_opcode(uint8_t op) {
  switch (op) {
    case 'c': return "GLOBAL";
    case 0x93: return "STACK_GLOBAL";
    case 'R': return "REDUCE";
    case 'b': return "BUILD";
    case 'i': return "INST";
    case 'o': return "OBJ";
    case 0x81: return "NEWOBJ";
    case 0x92: return "NEWOBJ_EX";
    case 0x82: return "EXT1";
    case 0x83: return "EXT2";
    case 0x84: return "EXT4";
    case 'P': return "PERSID";
    case 'Q': return "BINPERSID";
    case 0x96: return "BYTEARRAY8";
    case 0x97: return "NEXT_BUFFER";
    case 0x98: return "READONLY_BUFFER";
    default: return NULL;
  }
}

static gm_status_t step(parser_t *p, int *done) {
  const uint8_t *b = NULL;
  pkr_val_t *v, *c;
  size_t start = 0;
  gm_status_t st;
  p->op_pos = p->pos;
  if ((st = take(p, 1, &b))) return st;
  uint8_t op = b[0];
  switch (op) {
    case 0x80: /* PROTO */
      if ((st = take(p, 1, &b))) return st;
      if (b[0] < 2 || b[0] > 5) return fail(p, "unsupported pickle protocol");
      return GM_OK;
    case 0x95: /* FRAME: a length hint only */
      return take(p, 8, &b);
    case '.': /* STOP */
      if (p->sp != 1 || p->nmarks) return fail(p, "STOP with a stack that is not one value");
      *done = 1;
      return GM_OK;
    case '(': /* MARK */
      if (p->nmarks == p->mcap) {
        size_t nc = p->mcap ? p->mcap * 2 : 64;
        size_t *nm = realloc(p->marks, nc * sizeof(*nm));
        if (!nm) return nomem(p);
        p->marks = nm;
        p->mcap = nc;
      }
      p->marks[p->nmarks++] = p->sp;
      return GM_OK;
    case '}': return push(p, newval(p, PKR_DICT));
    case ']': return push(p, newval(p, PKR_LIST));
    case ')': return push(p, newval(p, PKR_TUPLE));
    case 0x8f: return push(p, newval(p, PKR_SET)); /* EMPTY_SET */
    case 'N': return push(p, newval(p, PKR_NONE));
    case 0x88: /* NEWTRUE */
    case 0x89: /* NEWFALSE */
      return push(p, op == 0x88 ? &k_true : &k_false);
    case 'J': case 'K': case 'M': { /* BININT, BININT1, BININT2 */
      int n = op == 'J' ? 4 : op == 'K' ? 1 : 2;
      if ((st = take(p, (size_t)n, &b))) return st;
      return push(p, small_int(p, op == 'J' ? (int64_t)(int32_t)(uint32_t)le(b, 4) : (int64_t)le(b, n)));
    }
    case 0x8a: case 0x8b: { /* LONG1, LONG4 */
      int w = op == 0x8a ? 1 : 4;
      if ((st = take(p, (size_t)w, &b))) return st;
      uint64_t n = le(b, w);
      if (op == 0x8b && (int32_t)(uint32_t)n < 0) return fail(p, "negative LONG4 length");
      if ((st = take(p, n, &b))) return st;
      return push_long(p, b, n);
    }
    case 'G': { /* BINFLOAT: big-endian IEEE double */
      if ((st = take(p, 8, &b))) return st;
      uint64_t u = 0;
      for (int k = 0; k < 8; k++) u = (u << 8) | b[k];
      if (!(v = newval(p, PKR_FLOAT))) return nomem(p);
      memcpy(&v->f, &u, sizeof(v->f));
      return push(p, v);
    }
    case 0x8c: case 'C': case 'U': /* SHORT_BINUNICODE, SHORT_BINBYTES, SHORT_BINSTRING */
      if ((st = take(p, 1, &b))) return st;
      return push_bytes(p, op == 'C' ? PKR_BYTES : PKR_STR, b[0]);
    case 'X': case 'B': case 'T': /* BINUNICODE, BINBYTES, BINSTRING */
      if ((st = take(p, 4, &b))) return st;
      if (op == 'T' && (int32_t)(uint32_t)le(b, 4) < 0) return fail(p, "negative BINSTRING length");
      return push_bytes(p, op == 'B' ? PKR_BYTES : PKR_STR, le(b, 4));
    case 0x8d: case 0x8e: /* BINUNICODE8, BINBYTES8 */
      if ((st = take(p, 8, &b))) return st;
      return push_bytes(p, op == 0x8e ? PKR_BYTES : PKR_STR, le(b, 8));
    case 'q': /* BINPUT */
      if ((st = take(p, 1, &b))) return st;
      return memo_put(p, b[0]);
    case 'r': /* LONG_BINPUT */
      if ((st = take(p, 4, &b))) return st;
      return memo_put(p, le(b, 4));
    case 0x94: /* MEMOIZE */
      return memo_put(p, p->nmemo);
    case 'h': /* BINGET */
      if ((st = take(p, 1, &b))) return st;
      return memo_get(p, b[0]);
    case 'j': /* LONG_BINGET */
      if ((st = take(p, 4, &b))) return st;
      return memo_get(p, le(b, 4));
    case '0': /* POP */
      if (p->nmarks && p->marks[p->nmarks - 1] == p->sp) return pop_mark(p, &start);
      return pop(p, &v);
    case '1': /* POP_MARK */
      if ((st = pop_mark(p, &start))) return st;
      p->sp = start;
      return GM_OK;
    case '2': /* DUP */
      if ((st = pop(p, &v))) return st;
      p->sp++;
      return push(p, v);
    case 't': /* TUPLE */
      if ((st = pop_mark(p, &start))) return st;
      return make_seq(p, PKR_TUPLE, start);
    case 'l': /* LIST */
      if ((st = pop_mark(p, &start))) return st;
      return make_seq(p, PKR_LIST, start);
    case 0x91: /* FROZENSET */
      if ((st = pop_mark(p, &start))) return st;
      return make_seq(p, PKR_SET, start);
    case 'd': /* DICT */
      if ((st = pop_mark(p, &start))) return st;
      if ((p->sp - start) % 2) return fail(p, "DICT with an odd number of items");
      return make_seq(p, PKR_DICT, start);
    case 0x85: case 0x86: case 0x87: { /* TUPLE1..3 */
      size_t n = (size_t)(op - 0x84);
      size_t floor = p->nmarks ? p->marks[p->nmarks - 1] : 0;
      if (p->sp - floor < n) return fail(p, "stack underflow");
      return make_seq(p, PKR_TUPLE, p->sp - n);
    }
    case 'a': /* APPEND */
      if ((st = pop(p, &v))) return st;
      if ((st = pop(p, &c))) return st;
      p->sp++;
      if (c->type != PKR_LIST) return fail(p, "APPEND to something not a list");
      return add_items(p, c, &v, 1);
    case 'e': case 0x90: /* APPENDS, ADDITEMS */
      if ((st = pop_mark(p, &start))) return st;
      if (start == 0 || (p->nmarks && p->marks[p->nmarks - 1] > start - 1))
        return fail(p, "stack underflow");
      c = p->stack[start - 1];
      if (c->type != (op == 'e' ? PKR_LIST : PKR_SET)) return fail(p, "APPENDS to a wrong type");
      st = add_items(p, c, p->stack + start, p->sp - start);
      p->sp = start;
      return st;
    case 's': /* SETITEM */
    case 'u': /* SETITEMS */
      if (op == 's') {
        start = p->sp >= 2 ? p->sp - 2 : 0;
        size_t floor = p->nmarks ? p->marks[p->nmarks - 1] : 0;
        if (p->sp < 3 || start - 1 < floor) return fail(p, "stack underflow");
      } else {
        if ((st = pop_mark(p, &start))) return st;
        if (start == 0 || (p->nmarks && p->marks[p->nmarks - 1] > start - 1))
          return fail(p, "stack underflow");
        if ((p->sp - start) % 2) return fail(p, "SETITEMS with an odd number of items");
      }
      c = p->stack[start - 1];
      if (c->type != PKR_DICT) return fail(p, "SETITEM on something not a dict");
      st = add_items(p, c, p->stack + start, p->sp - start);
      p->sp = start;
      return st;
    default: {
      const char *name = code_opcode(op);
      char msg[160];
      if (name) {
        snprintf(msg, sizeof(msg),
                 "opcode %s builds an object or calls code, refused (only plain data is read)",
                 name);
      } else {
        snprintf(msg, sizeof(msg), "unknown or unsupported opcode 0x%02x", op);
      }
      return fail(p, msg);
    }
  }
}

gm_status_t pkr_parse(const uint8_t *buf, size_t len, pkr_doc_t **out, gm_err_t *err) {
  *out = NULL;
  if (len < 2 || buf[0] != 0x80 || buf[1] < 2 || buf[1] > 5)
    return gm_err_set(err, GM_ERR_FORMAT, "not a pickle of protocol 2 to 5");
  parser_t p;
  memset(&p, 0, sizeof(p));
  p.buf = buf;
  p.len = len;
  p.err = err;
  p.doc = calloc(1, sizeof(*p.doc));
  if (!p.doc) return gm_err_set(err, GM_ERR_NOMEM, "out of memory");
  int done = 0;
  gm_status_t st = GM_OK;
  while (!done && st == GM_OK) {
    if (p.pos == p.len) {
      p.op_pos = p.pos;
      st = gm_err_set(err, GM_ERR_FORMAT, "truncated pickle: no STOP opcode before offset %zu",
                      p.len);
      break;
    }
    st = step(&p, &done);
  }
  if (st == GM_OK) p.doc->root = p.stack[0];
  free(p.stack);
  free(p.marks);
  free(p.memo);
  if (st != GM_OK) {
    pkr_doc_free(p.doc);
    return st;
  }
  *out = p.doc;
  return GM_OK;
}

/* ---- accessors --------------------------------------------------------------------------------- */

int pkr_str_eq(const pkr_val_t *v, const char *s) {
  size_t n = strlen(s);
  return v && v->type == PKR_STR && v->len == n && memcmp(v->s, s, n) == 0;
}

const pkr_val_t *pkr_dict_get(const pkr_val_t *v, const char *key) {
  if (!v || v->type != PKR_DICT) return NULL;
  for (size_t k = v->n; k >= 2; k -= 2)
    if (pkr_str_eq(v->items[k - 2], key)) return v->items[k - 1];
  return NULL;
}

int pkr_claim(const pkr_val_t *v) {
  if (!v || v->type != PKR_DICT || v->claimed) return 0;
  ((pkr_val_t *)v)->claimed = 1; /* dicts live in the document's arena, never constants */
  return 1;
}

int pkr_int(const pkr_val_t *v, int64_t *out) {
  if (!v || (v->type != PKR_INT && v->type != PKR_BOOL)) return 0;
  *out = v->i;
  return 1;
}
