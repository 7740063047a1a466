/* pkw.c: the plain-data pickle writer (pkw.h).
 *
 * Opcodes (pickletools' names), as CPython's pickler chooses them for plain data:
 *   PROTO n; STOP
 *   None: NONE; bools: NEWTRUE / NEWFALSE
 *   ints: BININT1 (0..255), BININT2 (256..65535), BININT (signed 32 bits), else LONG1 with the
 *     fewest little-endian two's-complement bytes
 *   float: BINFLOAT (big-endian IEEE 754 double)
 *   str: SHORT_BINUNICODE (protocol 4, < 256 bytes) or BINUNICODE (4-byte length)
 *   dict: EMPTY_DICT, then MARK k v ... SETITEMS per 1000 items; list: EMPTY_LIST, MARK ...
 *     APPENDS per 1000; tuple: MARK ... TUPLE
 *   memo: MEMOIZE (protocol 4), BINPUT / LONG_BINPUT (2, 3); BINGET / LONG_BINGET
 * Batching by 1000 is CPython's, and it matters beyond taste: memory_viz's unpickler appends a
 * batch with one spread call, which a JavaScript engine refuses past some 100 k arguments. */
#include <math.h>
#include <string.h>

#include "formats/pkw.h"

enum { PKW_K_DICT = 1, PKW_K_LIST = 2, PKW_K_TUPLE = 3 };
#define BATCH 1000

static void fail(pkw_t *w, gm_status_t st, const char *why) {
  if (w->st != GM_OK) return;
  w->st = st;
  snprintf(w->why, sizeof w->why, "%s", why);
}

static void flush(pkw_t *w) {
  if (w->st == GM_OK && w->nbuf && fwrite(w->buf, 1, w->nbuf, w->f) != w->nbuf) fail(w, GM_ERR_IO, "write failed");
  w->nbuf = 0;
}

static void out(pkw_t *w, const void *p, size_t n) {
  if (w->st != GM_OK) return;
  w->bytes += n;
  if (w->nbuf + n > sizeof w->buf) flush(w);
  if (n >= sizeof w->buf) {
    if (fwrite(p, 1, n, w->f) != n) fail(w, GM_ERR_IO, "write failed");
    return;
  }
  memcpy(w->buf + w->nbuf, p, n);
  w->nbuf += n;
}

static void op(pkw_t *w, uint8_t c) { out(w, &c, 1); }

static void le(pkw_t *w, uint64_t v, int n) {
  uint8_t b[8];
  for (int i = 0; i < n; i++) b[i] = (uint8_t)(v >> (8 * i));
  out(w, b, (size_t)n);
}

/* Before a value: the parent container's MARK, opened lazily so that an empty container is
 * just EMPTY_DICT / EMPTY_LIST, as CPython writes it. */
static void item_begin(pkw_t *w) {
  if (w->depth == 0) return;
  pkw_frame_t *p = &w->stack[w->depth - 1];
  if (p->kind != PKW_K_TUPLE && !p->marked) {
    op(w, '(');
    p->marked = 1;
  }
}

/* After a value: a full batch of the parent's items is attached to it. */
static void item_end(pkw_t *w) {
  if (w->depth == 0) return;
  pkw_frame_t *p = &w->stack[w->depth - 1];
  p->pending++;
  uint32_t per = p->kind == PKW_K_DICT ? 2 * BATCH : BATCH;
  if (p->kind != PKW_K_TUPLE && p->pending == per) {
    op(w, p->kind == PKW_K_DICT ? 'u' : 'e');
    p->marked = 0;
    p->pending = 0;
  }
}

void pkw_init(pkw_t *w, FILE *f, int protocol) {
  memset(w, 0, sizeof *w);
  w->f = f;
  w->protocol = protocol < 2 ? 2 : protocol > 4 ? 4 : protocol;
  if (protocol != w->protocol) fail(w, GM_ERR_INVAL, "protocol not 2, 3 or 4");
  op(w, 0x80);
  op(w, (uint8_t)w->protocol);
}

gm_status_t pkw_finish(pkw_t *w, gm_err_t *err) {
  if (w->depth != 0) fail(w, GM_ERR_INVAL, "a container was not ended");
  op(w, '.');
  flush(w);
  if (w->st == GM_OK && fflush(w->f) != 0) fail(w, GM_ERR_IO, "write failed");
  if (w->st != GM_OK) return gm_err_set(err, w->st, "pickle: %s", w->why);
  return GM_OK;
}

void pkw_none(pkw_t *w) {
  item_begin(w);
  op(w, 'N');
  item_end(w);
}

void pkw_bool(pkw_t *w, int v) {
  item_begin(w);
  op(w, v ? 0x88 : 0x89);
  item_end(w);
}

void pkw_int(pkw_t *w, int64_t v) {
  item_begin(w);
  if (v >= 0 && v <= 0xff) {
    op(w, 'K');
    le(w, (uint64_t)v, 1);
  } else if (v >= 0 && v <= 0xffff) {
    op(w, 'M');
    le(w, (uint64_t)v, 2);
  } else if (v >= INT32_MIN && v <= INT32_MAX) {
    op(w, 'J');
    le(w, (uint64_t)v, 4);
  } else {
    /* LONG1: the fewest bytes whose top bit is the sign */
    int n = 8;
    while (n > 1) {
      int64_t top = v >> (8 * (n - 1) - 1); /* the bits a shorter encoding would drop, and its sign bit */
      if (top != 0 && top != -1) break;
      n--;
    }
    op(w, 0x8a);
    op(w, (uint8_t)n);
    le(w, (uint64_t)v, n);
  }
  item_end(w);
}

void pkw_uint(pkw_t *w, uint64_t v) {
  if (v <= (uint64_t)INT64_MAX) {
    pkw_int(w, (int64_t)v);
    return;
  }
  item_begin(w); /* 2^63 and up: eight bytes and a zero sign byte */
  op(w, 0x8a);
  op(w, 9);
  le(w, v, 8);
  op(w, 0);
  item_end(w);
}

void pkw_float(pkw_t *w, double v) {
  item_begin(w);
  uint64_t bits;
  memcpy(&bits, &v, sizeof bits);
  uint8_t b[8];
  for (int i = 0; i < 8; i++) b[i] = (uint8_t)(bits >> (8 * (7 - i)));
  op(w, 'G');
  out(w, b, 8);
  item_end(w);
}

/* Length of the valid UTF-8 sequence at s[0..n), or 0 if it is not one (overlong forms,
 * surrogates and code points above U+10FFFF are not). */
static size_t utf8_seq(const unsigned char *s, size_t n) {
  unsigned c = s[0];
  if (c < 0x80) return 1;
  size_t len = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
  if (!len || len > n) return 0;
  for (size_t i = 1; i < len; i++)
    if ((s[i] & 0xc0) != 0x80) return 0;
  if (c == 0xe0 && s[1] < 0xa0) return 0; /* overlong */
  if (c == 0xed && s[1] >= 0xa0) return 0; /* surrogate */
  if (c == 0xf0 && s[1] < 0x90) return 0; /* overlong */
  if (c == 0xf4 && s[1] >= 0x90) return 0; /* above U+10FFFF */
  return len;
}

/* The bytes of s as written: valid UTF-8 kept, each invalid byte 3 bytes of U+FFFD. */
static size_t clean_len(const unsigned char *s, size_t n, int *dirty) {
  size_t k = 0, i = 0;
  *dirty = 0;
  while (i < n) {
    size_t l = utf8_seq(s + i, n - i);
    if (l) {
      k += l;
      i += l;
    } else {
      k += 3;
      i++;
      *dirty = 1;
    }
  }
  return k;
}

void pkw_str(pkw_t *w, const char *s, size_t len) {
  static const unsigned char kRepl[3] = {0xef, 0xbf, 0xbd};
  const unsigned char *u = (const unsigned char *)s;
  int dirty = 0;
  size_t n = clean_len(u, len, &dirty);
  item_begin(w);
  if (n > UINT32_MAX) { /* BINUNICODE8 is not read by memory_viz: refuse rather than truncate */
    fail(w, GM_ERR_INVAL, "a string of 4 GiB or more");
    return;
  }
  if (w->protocol >= 4 && n < 256) {
    op(w, 0x8c);
    op(w, (uint8_t)n);
  } else {
    op(w, 'X');
    le(w, n, 4);
  }
  if (!dirty) {
    out(w, s, len);
  } else {
    for (size_t i = 0; i < len;) {
      size_t l = utf8_seq(u + i, len - i);
      if (l) {
        out(w, u + i, l);
        i += l;
      } else {
        out(w, kRepl, 3);
        i++;
      }
    }
  }
  item_end(w);
}

void pkw_cstr(pkw_t *w, const char *s) { pkw_str(w, s, strlen(s)); }

static void begin(pkw_t *w, int kind) {
  item_begin(w);
  if (w->depth == PKW_MAX_DEPTH) {
    fail(w, GM_ERR_INVAL, "containers nested deeper than PKW_MAX_DEPTH");
    return;
  }
  if (kind == PKW_K_DICT) op(w, '}');
  else if (kind == PKW_K_LIST) op(w, ']');
  else op(w, '(');
  pkw_frame_t *f = &w->stack[w->depth++];
  f->kind = (uint8_t)kind;
  f->marked = 0;
  f->pending = 0;
}

void pkw_dict_begin(pkw_t *w) { begin(w, PKW_K_DICT); }
void pkw_list_begin(pkw_t *w) { begin(w, PKW_K_LIST); }
void pkw_tuple_begin(pkw_t *w) { begin(w, PKW_K_TUPLE); }

void pkw_end(pkw_t *w) {
  if (w->depth == 0) {
    fail(w, GM_ERR_INVAL, "an end without a begin");
    return;
  }
  pkw_frame_t *f = &w->stack[w->depth - 1];
  if (f->kind == PKW_K_DICT && f->pending % 2) fail(w, GM_ERR_INVAL, "a dict key without a value");
  if (f->kind == PKW_K_TUPLE) op(w, 't');
  else if (f->marked) op(w, f->kind == PKW_K_DICT ? 'u' : 'e');
  w->depth--;
  item_end(w);
}

uint32_t pkw_memo(pkw_t *w) {
  uint32_t id = w->memo++;
  if (w->protocol >= 4) {
    op(w, 0x94);
  } else if (id < 256) {
    op(w, 'q');
    le(w, id, 1);
  } else {
    op(w, 'r');
    le(w, id, 4);
  }
  return id;
}

void pkw_get(pkw_t *w, uint32_t id) {
  item_begin(w);
  if (id >= w->memo) fail(w, GM_ERR_INVAL, "a memo entry not yet written");
  if (id < 256) {
    op(w, 'h');
    le(w, id, 1);
  } else {
    op(w, 'j');
    le(w, id, 4);
  }
  item_end(w);
}

void pkw_kv_int(pkw_t *w, const char *key, int64_t v) {
  pkw_cstr(w, key);
  pkw_int(w, v);
}

void pkw_kv_uint(pkw_t *w, const char *key, uint64_t v) {
  pkw_cstr(w, key);
  pkw_uint(w, v);
}

void pkw_kv_str(pkw_t *w, const char *key, const char *v) {
  pkw_cstr(w, key);
  pkw_cstr(w, v);
}

void pkw_kv_bool(pkw_t *w, const char *key, int v) {
  pkw_cstr(w, key);
  pkw_bool(w, v);
}
