/* gmt_decode.c: chunk payload -> events, one column at a time (SPEC.md "Chunk payload").
 *
 * The reader's hot loop. The payload is untrusted (fuzzed, bit-flipped, hand-made): every
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

#define DEC_KIND(F)                                                          \
  {                                                                          \
    const col_t *c = COL(F, 0);                                              \
    if (c->len != nev) BAD(SLOT(F, 0), "length is not the event count");     \
    for (size_t i = 0; i < nev; i++) {                                       \
      uint8_t k = c->p[i];                                                   \
      ev[i].F = k;                                                           \
      unknown += (k == 0 || k >= GMT_EV_KIND_MAX);                           \
    }                                                                        \
  }
#define DEC_TS(F)                                                                       \
  {                                                                                     \
    const col_t *c0 = COL(F, 0), *c1 = COL(F, 1), *c2 = COL(F, 2);                      \
    if (c0->len != nev || c1->len != nev) BAD(SLOT(F, 0), "length is not the event count"); \
    const uint8_t *q = c2->p, *qe = c2->p + c2->len;                                    \
    uint64_t prev = 0, hi;                                                              \
    for (size_t i = 0; i < nev; i++) {                                                  \
      if (!gmt_get_varint(&q, qe, &hi) || hi >> 48) BAD(SLOT(F, 2), "bad varint");      \
      prev += (uint64_t)gmt_unzigzag(c0->p[i] | ((uint64_t)c1->p[i] << 8) | (hi << 16)); \
      ev[i].F = prev;                                                                   \
    }                                                                                   \
    if (q != qe) BAD(SLOT(F, 2), "trailing bytes");                                     \
  }
#define DEC_DELTA(F)                                                         \
  {                                                                          \
    const col_t *c = COL(F, 0);                                              \
    const uint8_t *q = c->p, *qe = c->p + c->len;                            \
    uint64_t prev = 0, v;                                                    \
    for (size_t i = 0; i < nev; i++) {                                       \
      if (!gmt_get_varint(&q, qe, &v)) BAD(SLOT(F, 0), "bad varint");        \
      prev += (uint64_t)gmt_unzigzag(v);                                     \
      ev[i].F = prev;                                                        \
    }                                                                        \
    if (q != qe) BAD(SLOT(F, 0), "trailing bytes");                          \
  }
#define DEC_RLE_BIAS(F, bias)                                                   \
  {                                                                             \
    const col_t *c = COL(F, 0);                                                 \
    const uint8_t *q = c->p, *qe = c->p + c->len;                               \
    size_t i = 0;                                                               \
    while (i < nev) {                                                           \
      uint64_t run, val;                                                        \
      if (!gmt_get_varint(&q, qe, &run) || !gmt_get_varint(&q, qe, &val))       \
        BAD(SLOT(F, 0), "bad run");                                             \
      if (run == 0 || run > nev - i) BAD(SLOT(F, 0), "bad run length");         \
      val -= (bias);                                                            \
      if (!fits(val, FSZ(F))) BAD(SLOT(F, 0), "value out of range");            \
      for (uint64_t k = 0; k < run; k++) ev[i++].F = val;                       \
    }                                                                           \
    if (q != qe) BAD(SLOT(F, 0), "trailing bytes");                             \
  }
#define DEC_RLE(F) DEC_RLE_BIAS(F, 0)
#define DEC_STREAM(F) DEC_RLE_BIAS(F, 1)
#define DEC_VARINT(F)                                                      \
  {                                                                        \
    const col_t *c = COL(F, 0);                                            \
    const uint8_t *q = c->p, *qe = c->p + c->len;                          \
    uint64_t v;                                                            \
    for (size_t i = 0; i < nev; i++) {                                     \
      if (!gmt_get_varint(&q, qe, &v)) BAD(SLOT(F, 0), "bad varint");      \
      if (!fits(v, FSZ(F))) BAD(SLOT(F, 0), "value out of range");         \
      ev[i].F = v;                                                         \
    }                                                                      \
    if (q != qe) BAD(SLOT(F, 0), "trailing bytes");                        \
  }
#define DEC_SIZE(F)                                                             \
  {                                                                             \
    const col_t *c = COL(F, 0);                                                 \
    const uint8_t *q = COL(F, 1)->p, *qe = q + COL(F, 1)->len;                  \
    uint64_t cache[GMT_CACHE_SLOTS] = {0}, v;                                   \
    if (c->len != nev) BAD(SLOT(F, 0), "length is not the event count");       \
    for (size_t i = 0; i < nev; i++) {                                          \
      unsigned code = c->p[i];                                                  \
      if (code) {                                                               \
        ev[i].F = cache[code - 1];                                              \
      } else {                                                                  \
        if (!gmt_get_varint(&q, qe, &v)) BAD(SLOT(F, 1), "bad varint");         \
        cache[gmt_cache_slot(v)] = v;                                           \
        ev[i].F = v;                                                            \
      }                                                                         \
    }                                                                           \
    if (q != qe) BAD(SLOT(F, 1), "trailing bytes");                             \
  }
#define DEC_ADDR(F) /* after the others: it needs kind and size (dec_addr) */

/* Mirror of addr_code() in gmt_codec.c (SPEC.md "Address coder"). */
static gm_status_t dec_addr(const col_t *cols, gmt_event_t *ev, size_t nev, gmt_addr_model_t *m, gm_err_t *err) {
  const col_t *c = COL(addr, 0);
  const uint8_t *q = COL(addr, 1)->p, *qe = q + COL(addr, 1)->len;
  if (c->len != nev) BAD(SLOT(addr, 0), "length is not the event count");
  gmt_addr_model_reset(m);
  for (size_t i = 0; i < nev; i++) {
    unsigned code = c->p[i], cls = gmt_addr_class(ev[i].kind), s = gmt_cache_slot(ev[i].size);
    uint64_t a, v;
    if (code >= 1 && code < GMT_ADDR_FREED_BASE) {
      unsigned pos = code - 1;
      if (cls < 2 || pos >= m->live[s].depth) BAD(SLOT(addr, 0), "live-stack code out of range");
      a = gmt_stack_at(&m->live[s], pos);
      if (cls == 2) gmt_stack_remove(&m->live[s], pos);
    } else if (code >= GMT_ADDR_FREED_BASE && code < GMT_ADDR_CACHE_BASE) {
      unsigned pos = code - GMT_ADDR_FREED_BASE;
      if (cls != 1 || pos >= m->freed[s].depth) BAD(SLOT(addr, 0), "freed-stack code out of range");
      a = gmt_stack_at(&m->freed[s], pos);
      gmt_stack_remove(&m->freed[s], pos);
    } else if (code >= GMT_ADDR_CACHE_BASE) {
      a = m->cache[code - GMT_ADDR_CACHE_BASE];
    } else {
      if (!gmt_get_varint(&q, qe, &v)) BAD(SLOT(addr, 1), "bad varint");
      a = m->prev_lit += (uint64_t)gmt_unzigzag(v);
      m->cache[gmt_addr_cache_slot(a)] = a;
    }
    if (cls == 1) gmt_stack_push(&m->live[s], a);
    else if (cls == 2) gmt_stack_push(&m->freed[s], a);
    ev[i].addr = a;
  }
  if (q != qe) BAD(SLOT(addr, 1), "trailing bytes");
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
  gmt_event_t *ev = *evs;
  size_t unknown = 0;
#define GMT_DEC_FIELD(f, id, coder, csv, fmt) DEC_##coder(f)
  GMT_FIELD_LIST(GMT_DEC_FIELD)
#undef GMT_DEC_FIELD
  gm_status_t st = dec_addr(cols, ev, nev, m, err);
  if (st != GM_OK) return st;
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
