/* gmt_decode.c: chunk payload -> events, one column at a time over blocks of 256 records
 * (SPEC.md "Chunk payload").
 *
 * The reader's hot loop (bench/RESULTS.md "Trace format" has its speed and profile). The payload is untrusted (fuzzed, bit-flipped, hand-made): every
 * read is bounds-checked, every column must be consumed exactly, every value must fit its
 * field, and a failure names the column. Coders mirror gmt_codec.c and are generated from the
 * same GMT_FIELD_LIST. Records of kinds this version does not know are decoded (their
 * columns are shared with everyone else's) and then dropped and counted; extension bytes
 * (fields a newer writer added) are validated and skipped. */
#include <stdlib.h>
#include <string.h>

#include "formats/gmt_internal.h"

#define SLOT(F, sub) (GMT_FIELD_##F * 4 + (sub))
enum { SLOT_STRINGS = GMT_SLOTS, SLOT_EXT, SLOT_ALL };

typedef struct col {
  const uint8_t *p;
  uint64_t len;
  int seen;
} col_t;

static int id_to_slot(uint64_t id) {
#define GMT_SLOT_CASE(f, fid, coder, csv, fmt) \
  if (id / 4 == fid && id % 4 < GMT_SUBCOLS_##coder) return SLOT(f, (int)(id % 4));
  GMT_FIELD_LIST(GMT_SLOT_CASE)
#undef GMT_SLOT_CASE
  if (id == GMT_COL_STRINGS) return SLOT_STRINGS;
  if (id == GMT_COL_EXT) return SLOT_EXT;
  return -1;
}

/* Is slot s a column some coder writes (and so must be present)? */
static int slot_required(int s) {
#define GMT_REQ(f, fid, coder, csv, fmt) \
  if (s / 4 == GMT_FIELD_##f) return s % 4 < GMT_SUBCOLS_##coder;
  GMT_FIELD_LIST(GMT_REQ)
#undef GMT_REQ
  return 0;
}

static const char *const field_names[GMT_FIELD_COUNT] = {
#define GMT_NAME_FIELD(f, id, coder, csv, fmt) csv,
    GMT_FIELD_LIST(GMT_NAME_FIELD)
#undef GMT_NAME_FIELD
};

static gm_status_t bad(gm_err_t *err, int s, const char *what) {
  if (s == SLOT_STRINGS) return gm_err_set(err, GM_ERR_CORRUPT, "column strings: %s", what);
  if (s == SLOT_EXT) return gm_err_set(err, GM_ERR_CORRUPT, "column extensions: %s", what);
  return gm_err_set(err, GM_ERR_CORRUPT, "column %s.%d: %s", field_names[s / 4], s % 4, what);
}

static inline int fits(uint64_t v, size_t sz) { return sz >= 8 || v < (1ull << (8 * sz)); }

#define BAD(slot, what) return bad(err, (slot), (what))
#define FSZ(F) sizeof(((gmt_event_t *)0)->F)
#define COL(F, sub) (&cols[SLOT(F, sub)])

/* The chunk is decoded in blocks of DEC_BLOCK events, every column's coder in turn over one
 * block before the next: the block's event structs (56 bytes each) stay in L1 between the
 * columns instead of 11 passes over a 3.6 MB array that lives in L3. Each coder keeps its
 * read position and running value in a cursor across blocks; errors and their messages are
 * the same as for one pass over the chunk. */
#define DEC_BLOCK 256

typedef struct cur {
  const uint8_t *q, *qe; /* the coder's varint sub-column (VSUB below) */
  uint64_t prev;         /* TS, DELTA: the previous record's value */
  uint64_t run_left, run_val; /* RLE, STREAM: the open run */
} cur_t;

/* Which sub-column each coder reads as a varint stream (-1: none). */
#define VSUB_KIND (-1)
#define VSUB_TS 2
#define VSUB_DELTA 0
#define VSUB_RLE 0
#define VSUB_STREAM 0
#define VSUB_SIZE 1
#define VSUB_ADDR 1
#define VSUB_VARINT 0

/* Upfront checks of the fixed-width columns (one byte per record). */
#define CHK_ONE(F, sub) \
  if (COL(F, sub)->len != nev) BAD(SLOT(F, sub), "length is not the event count");
#define CHK_KIND(F) CHK_ONE(F, 0)
#define CHK_TS(F)                                                                        \
  if (COL(F, 0)->len != nev || COL(F, 1)->len != nev) BAD(SLOT(F, 0), "length is not the event count");
#define CHK_DELTA(F)
#define CHK_RLE(F)
#define CHK_STREAM(F)
#define CHK_SIZE(F) CHK_ONE(F, 0)
#define CHK_ADDR(F) CHK_ONE(F, 0)
#define CHK_VARINT(F)

/* Per-chunk state a coder resets (the size cache). */
#define INIT_KIND(F)
#define INIT_TS(F)
#define INIT_DELTA(F)
#define INIT_RLE(F)
#define INIT_STREAM(F)
#define INIT_SIZE(F) memset(size_cache[GMT_FIELD_##F], 0, sizeof size_cache[GMT_FIELD_##F]);
#define INIT_ADDR(F)
#define INIT_VARINT(F)

#define CUR(F) (&cur[GMT_FIELD_##F])
#define DEC_KIND(F)                                    \
  {                                                    \
    const uint8_t *restrict pc = COL(F, 0)->p;          \
    size_t unk = 0;                                    \
    for (size_t i = i0; i < i1; i++) {                 \
      uint8_t k = pc[i];                                \
      ev[i].F = k;                                     \
      unk += (k == 0 || k >= GMT_EV_KIND_MAX);         \
    }                                                  \
    *unknown += unk;                                   \
  }
/* gmt_get_varint without a branch per byte for varints of up to 8 bytes (56 bits) that have
 * 8 bytes of column behind them: one load, the end found from the stop bits, the 7-bit groups
 * packed in three steps. Same values and the same errors as gmt_get_varint. */
static inline int get_varint(const uint8_t **p, const uint8_t *end, uint64_t *v) {
  const uint8_t *q = *p;
  uint64_t w, stop;
  if (end - q < 8) return gmt_get_varint(p, end, v);
  memcpy(&w, q, 8);
  stop = ~w & 0x8080808080808080ull;
  if (!stop) return gmt_get_varint(p, end, v);
  unsigned bits = (unsigned)__builtin_ctzll(stop) + 1; /* 8 * length */
  w &= bits == 64 ? ~0ull : (1ull << bits) - 1;
  w = ((w & 0x7f007f007f007f00ull) >> 1) | (w & 0x007f007f007f007full);
  w = ((w & 0x3fff00003fff0000ull) >> 2) | (w & 0x00003fff00003fffull);
  w = ((w & 0x0fffffff00000000ull) >> 4) | (w & 0x000000000fffffffull);
  *v = w;
  *p = q + bits / 8;
  return 1;
}

/* Runs BODY for the varints of [q, qe) that belong to records i0..i1-1, with the value in v
 * and the record in i. Eight one-byte varints (the common case: small deltas) are taken from
 * one 64-bit load with no branch per record; anything else goes through gmt_get_varint. */
#define FOR_VARINTS(slot, q, qe, BODY)                                                         \
  for (size_t i = i0; i < i1;) {                                                               \
    uint64_t w_, v;                                                                            \
    if (i1 - i >= 8 && qe - q >= 8 && (memcpy(&w_, q, 8), !(w_ & 0x8080808080808080ull))) {    \
      for (int k_ = 0; k_ < 8; k_++, i++) {                                                    \
        v = (w_ >> (8 * k_)) & 0xff;                                                           \
        BODY                                                                                   \
      }                                                                                        \
      q += 8;                                                                                  \
    } else {                                                                                   \
      if (!gmt_get_varint(&q, qe, &v)) BAD(slot, "bad varint");                                \
      BODY                                                                                     \
      i++;                                                                                     \
    }                                                                                          \
  }
#define DEC_TS(F)                                                                       \
  {                                                                                     \
    cur_t *u = CUR(F);                                                                  \
    const uint8_t *restrict p0 = COL(F, 0)->p, *restrict p1 = COL(F, 1)->p;             \
    const uint8_t *q = u->q, *qe = u->qe;                                               \
    uint64_t prev = u->prev;                                                            \
    FOR_VARINTS(SLOT(F, 2), q, qe, {                                                    \
      if (v >> 48) BAD(SLOT(F, 2), "bad varint");                                       \
      prev += (uint64_t)gmt_unzigzag(p0[i] | ((uint64_t)p1[i] << 8) | (v << 16));       \
      ev[i].F = prev;                                                                   \
    })                                                                                  \
    u->q = q;                                                                           \
    u->prev = prev;                                                                     \
  }
#define DEC_DELTA(F)                                                         \
  {                                                                          \
    cur_t *u = CUR(F);                                                       \
    const uint8_t *q = u->q, *qe = u->qe;                                    \
    uint64_t prev = u->prev;                                                 \
    FOR_VARINTS(SLOT(F, 0), q, qe, {                                         \
      prev += (uint64_t)gmt_unzigzag(v);                                     \
      ev[i].F = prev;                                                        \
    })                                                                       \
    u->q = q;                                                                \
    u->prev = prev;                                                          \
  }
#define DEC_RLE_BIAS(F, bias)                                                   \
  {                                                                             \
    cur_t *u = CUR(F);                                                          \
    size_t i = i0;                                                              \
    while (i < i1) {                                                            \
      if (!u->run_left) {                                                       \
        uint64_t run, val;                                                      \
        if (!gmt_get_varint(&u->q, u->qe, &run) || !gmt_get_varint(&u->q, u->qe, &val)) \
          BAD(SLOT(F, 0), "bad run");                                           \
        if (run == 0 || run > nev - i) BAD(SLOT(F, 0), "bad run length");       \
        val -= (bias);                                                          \
        if (!fits(val, FSZ(F))) BAD(SLOT(F, 0), "value out of range");          \
        u->run_left = run;                                                      \
        u->run_val = val;                                                       \
      }                                                                         \
      size_t k = u->run_left < i1 - i ? (size_t)u->run_left : i1 - i;           \
      __typeof__(ev[0].F) val = (__typeof__(ev[0].F))u->run_val;                \
      u->run_left -= k;                                                         \
      for (size_t e = i + k; i < e; i++) ev[i].F = val;                         \
    }                                                                           \
  }
#define DEC_RLE(F) DEC_RLE_BIAS(F, 0)
#define DEC_STREAM(F) DEC_RLE_BIAS(F, 1)
#define DEC_VARINT(F)                                                      \
  {                                                                        \
    cur_t *u = CUR(F);                                                     \
    const uint8_t *q = u->q, *qe = u->qe;                                  \
    FOR_VARINTS(SLOT(F, 0), q, qe, {                                       \
      if (!fits(v, FSZ(F))) BAD(SLOT(F, 0), "value out of range");         \
      ev[i].F = (__typeof__(ev[i].F))v;                                    \
    })                                                                     \
    u->q = q;                                                              \
  }
#define DEC_SIZE(F)                                                             \
  {                                                                             \
    cur_t *u = CUR(F);                                                          \
    const uint8_t *restrict pc = COL(F, 0)->p;                                   \
    const uint8_t *q = u->q, *qe = u->qe;                                       \
    uint64_t *restrict cache = size_cache[GMT_FIELD_##F], v;                             \
    for (size_t i = i0; i < i1; i++) {                                          \
      unsigned code = pc[i];                                                   \
      if (code) {                                                               \
        ev[i].F = cache[code - 1];                                              \
      } else {                                                                  \
        if (!gmt_get_varint(&q, qe, &v)) BAD(SLOT(F, 1), "bad varint");         \
        cache[gmt_cache_slot(v)] = v;                                           \
        ev[i].F = v;                                                            \
      }                                                                         \
    }                                                                           \
    u->q = q;                                                                   \
  }
#define DEC_ADDR(F) /* after the others: it needs kind and size (addr_block) */

/* One decoder function per field, generated from GMT_FIELD_LIST: each is small enough that
 * its loop keeps its pointers in registers (one function holding all eleven loops spilled
 * them to the stack on every record). Decodes records [i0, i1) of the chunk. */
#define GMT_DEC_FN(f, id, coder, csv, fmt)                                                          \
  static __attribute__((noinline)) gm_status_t dec_##f(                                            \
      const col_t *cols, cur_t *restrict cur, gmt_event_t *restrict ev, size_t i0, size_t i1,    \
      size_t nev, size_t *unknown, uint64_t (*size_cache)[GMT_CACHE_SLOTS], gm_err_t *err) {     \
    DEC_##coder(f) return GM_OK;                                                                 \
  }
GMT_FIELD_LIST(GMT_DEC_FN)
#undef GMT_DEC_FN

/* Mirror of addr_code() in gmt_codec.c (SPEC.md "Address coder"), over records [i0, i1). */
static __attribute__((noinline)) gm_status_t addr_block(const col_t *cols, cur_t *u, gmt_event_t *restrict ev, size_t i0, size_t i1,
                            gmt_addr_model_t *restrict m, const uint8_t *cls_tab, gm_err_t *err) {
  const uint8_t *restrict p = COL(addr, 0)->p;
  const uint8_t *q = u->q, *qe = u->qe;
  gmt_addr_stack_t sink = {{0}, 0, 0};
  for (size_t i = i0; i < i1; i++) {
    unsigned code = p[i], cls = cls_tab[ev[i].kind], s = gmt_cache_slot(ev[i].size);
    uint64_t a, v;
    if (code == 0) {
      if (!get_varint(&q, qe, &v)) BAD(SLOT(addr, 1), "bad varint");
      a = m->prev_lit += (uint64_t)gmt_unzigzag(v);
      m->cache[gmt_addr_cache_slot(a)] = a;
    } else if (code < GMT_ADDR_FREED_BASE) {
      unsigned pos = code - 1;
      if (cls < 2 || pos >= m->live[s].depth) BAD(SLOT(addr, 0), "live-stack code out of range");
      a = gmt_stack_at(&m->live[s], pos);
      if (cls == 2) gmt_stack_remove(&m->live[s], pos);
    } else if (code < GMT_ADDR_CACHE_BASE) {
      unsigned pos = code - GMT_ADDR_FREED_BASE;
      if (cls != 1 || pos >= m->freed[s].depth) BAD(SLOT(addr, 0), "freed-stack code out of range");
      a = gmt_stack_at(&m->freed[s], pos);
      gmt_stack_remove(&m->freed[s], pos);
    } else {
      a = m->cache[code - GMT_ADDR_CACHE_BASE];
    }
    /* push with no branch on the kind class: class 0 and 3 push into the sink stack */
    gmt_addr_stack_t *dst = &sink;
    dst = cls == 1 ? &m->live[s] : dst;
    dst = cls == 2 ? &m->freed[s] : dst;
    gmt_stack_push(dst, a);
    ev[i].addr = a;
  }
  u->q = q;
  return GM_OK;
}

static gm_status_t dec_strings(const col_t *c, gmt_string_cb cb, void *ctx, gm_err_t *err) {
  const uint8_t *q = c->p, *qe = c->p + c->len;
  uint64_t n, id, len;
  if (!gmt_get_varint(&q, qe, &n)) BAD(SLOT_STRINGS, "bad count");
  for (uint64_t i = 0; i < n; i++) {
    if (!gmt_get_varint(&q, qe, &id) || !gmt_get_varint(&q, qe, &len)) BAD(SLOT_STRINGS, "bad entry");
    if (id == 0 || id > UINT32_MAX) BAD(SLOT_STRINGS, "bad string id");
    if (len > (uint64_t)(qe - q) || len > GMT_MAX_STRING) BAD(SLOT_STRINGS, "string overruns column");
    if (memchr(q, 0, len)) BAD(SLOT_STRINGS, "NUL inside a string");
    gm_status_t s = cb ? cb(ctx, (uint32_t)id, (const char *)q, (uint32_t)len, err) : GM_OK;
    if (s < 0) return s;
    q += len;
  }
  if (q != qe) BAD(SLOT_STRINGS, "trailing bytes");
  return GM_OK;
}

static gm_status_t dec_ext(const col_t *c, size_t nev, gm_err_t *err) {
  const uint8_t *q = c->p, *qe = c->p + c->len;
  uint64_t n, delta, len, rec = 0;
  if (!gmt_get_varint(&q, qe, &n)) BAD(SLOT_EXT, "bad count");
  for (uint64_t i = 0; i < n; i++) {
    if (!gmt_get_varint(&q, qe, &delta) || !gmt_get_varint(&q, qe, &len)) BAD(SLOT_EXT, "bad entry");
    if (delta > nev || (rec += delta) >= nev) BAD(SLOT_EXT, "record index out of range");
    if (len > (uint64_t)(qe - q)) BAD(SLOT_EXT, "extension overruns column");
    q += len; /* version 1 defines no extension fields: skip them */
  }
  if (q != qe) BAD(SLOT_EXT, "trailing bytes");
  return GM_OK;
}

gm_status_t gmt_dec_payload(const uint8_t *payload, size_t n, uint32_t expect_events, gmt_event_t **evs,
                            size_t *cap, size_t *n_ev, uint64_t *n_unknown, gmt_addr_model_t *m,
                            gmt_string_cb on_string, void *ctx, gm_err_t *err) {
  const uint8_t *p = payload, *end = payload + n;
  uint64_t nev, ncols;
  col_t cols[SLOT_ALL];
  memset(cols, 0, sizeof cols);
  if (!gmt_get_varint(&p, end, &nev) || !gmt_get_varint(&p, end, &ncols))
    return gm_err_set(err, GM_ERR_CORRUPT, "payload: bad directory");
  if (nev != expect_events)
    return gm_err_set(err, GM_ERR_CORRUPT, "payload holds %llu events, descriptor says %u", (unsigned long long)nev,
                      expect_events);
  if (nev > GMT_MAX_CHUNK_EVENTS || ncols > 255) return gm_err_set(err, GM_ERR_CORRUPT, "payload: implausible directory");
  /* directory: (id, length) pairs; data follows in the same order */
  uint64_t ids[256], lens[256], total = 0;
  for (uint64_t i = 0; i < ncols; i++) {
    if (!gmt_get_varint(&p, end, &ids[i]) || !gmt_get_varint(&p, end, &lens[i]))
      return gm_err_set(err, GM_ERR_CORRUPT, "payload: bad directory");
    if (lens[i] > n) return gm_err_set(err, GM_ERR_CORRUPT, "payload: column too long");
    total += lens[i];
  }
  if (total != (uint64_t)(end - p))
    return gm_err_set(err, GM_ERR_CORRUPT, "payload: columns do not add up to the payload size");
  for (uint64_t i = 0; i < ncols; i++) {
    int s = id_to_slot(ids[i]);
    if (s >= 0) { /* unknown column ids: data of a newer writer, skipped */
      if (cols[s].seen)
        return gm_err_set(err, GM_ERR_CORRUPT, "payload: column %llu twice", (unsigned long long)ids[i]);
      cols[s] = (col_t){p, lens[i], 1};
    }
    p += lens[i];
  }
  for (int s = 0; s < GMT_SLOTS; s++)
    if (slot_required(s) && !cols[s].seen) BAD(s, "missing");
  if (*cap < nev || !*evs) {
    size_t want = nev > 1024 ? nev : 1024;
    gmt_event_t *ne = realloc(*evs, want * sizeof *ne);
    if (!ne) return gm_err_set(err, GM_ERR_NOMEM, "out of memory for %zu events", want);
    *evs = ne;
    *cap = want;
  }
  gmt_event_t *restrict ev = *evs;
  size_t unknown = 0;
#define GMT_CHK_FIELD(f, id, coder, csv, fmt) CHK_##coder(f)
  GMT_FIELD_LIST(GMT_CHK_FIELD)
#undef GMT_CHK_FIELD
  cur_t cur[GMT_FIELD_COUNT];
  uint64_t size_cache[GMT_FIELD_COUNT][GMT_CACHE_SLOTS];
  memset(cur, 0, sizeof cur);
#define GMT_CUR_FIELD(f, id, coder, csv, fmt)                                  \
  if (VSUB_##coder >= 0) {                                                     \
    const col_t *c_ = COL(f, VSUB_##coder < 0 ? 0 : VSUB_##coder);             \
    cur[GMT_FIELD_##f] = (cur_t){c_->p, c_->p + c_->len, 0, 0, 0};             \
  }                                                                            \
  INIT_##coder(f)
  GMT_FIELD_LIST(GMT_CUR_FIELD)
#undef GMT_CUR_FIELD
  uint8_t cls_tab[256]; /* gmt_addr_class of every kind byte: a load per record, not a switch */
  for (unsigned k = 0; k < 256; k++) cls_tab[k] = (uint8_t)gmt_addr_class(k);
  gmt_addr_model_reset(m);
  gm_status_t st;
  for (size_t i0 = 0; i0 < nev; i0 += DEC_BLOCK) {
    size_t i1 = nev - i0 < DEC_BLOCK ? nev : i0 + DEC_BLOCK;
#define GMT_DEC_FIELD(f, id, coder, csv, fmt) \
  if ((st = dec_##f(cols, cur, ev, i0, i1, nev, &unknown, size_cache, err)) != GM_OK) return st;
    GMT_FIELD_LIST(GMT_DEC_FIELD)
#undef GMT_DEC_FIELD
    if ((st = addr_block(cols, CUR(addr), ev, i0, i1, m, cls_tab, err)) != GM_OK) return st;
  }
  /* every varint column must be consumed exactly */
#define GMT_END_FIELD(f, id, coder, csv, fmt) \
  if (VSUB_##coder >= 0 && CUR(f)->q != CUR(f)->qe) BAD(SLOT(f, VSUB_##coder < 0 ? 0 : VSUB_##coder), "trailing bytes");
  GMT_FIELD_LIST(GMT_END_FIELD)
#undef GMT_END_FIELD
  if (cols[SLOT_STRINGS].seen && (st = dec_strings(&cols[SLOT_STRINGS], on_string, ctx, err)) != GM_OK) return st;
  if (cols[SLOT_EXT].seen && (st = dec_ext(&cols[SLOT_EXT], nev, err)) != GM_OK) return st;
  size_t out = nev;
  if (unknown) { /* drop records of kinds this reader does not know */
    out = 0;
    for (size_t i = 0; i < nev; i++)
      if (ev[i].kind != 0 && ev[i].kind < GMT_EV_KIND_MAX) ev[out++] = ev[i];
  }
  *n_ev = out;
  *n_unknown = unknown;
  return GM_OK;
}
