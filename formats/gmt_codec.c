/* gmt_codec.c: the chunk payload codec: events <-> columns (SPEC.md "Chunk payload").
 *
 * Workload: allocator traces repeat a few sizes, free recently allocated addresses (near
 * LIFO), carry monotonic timestamps and rarely change device/stream/context. So each field
 * of gmt_event_t goes into its own column with a coder suited to it (delta for times and
 * correlation ids, a small direct-mapped cache of recent values for sizes and addresses,
 * run-length for the slow-changing ones); zstd then squeezes the repetition across steps.
 * Every coder is generated from GMT_FIELD_LIST in gmt_internal.h, so the encoder and the
 * decoder cannot drift apart. The encoder works one record at a time (the writer appends);
 * the decoder works one column at a time over blocks of a chunk (the reader's fast path). */
#include <stdlib.h>
#include <string.h>

#include "formats/gmt_internal.h"

#define SLOT(F, sub) (GMT_FIELD_##F * 4 + (sub))

int gmt_buf_reserve(gmt_buf_t *b, size_t more) {
  if (b->cap - b->len >= more) return 0;
  size_t cap = b->cap ? b->cap : 4096;
  while (cap - b->len < more) cap *= 2;
  uint8_t *p = realloc(b->p, cap);
  if (!p) return -1;
  b->p = p;
  b->cap = cap;
  return 0;
}

void gmt_buf_free(gmt_buf_t *b) {
  free(b->p);
  memset(b, 0, sizeof *b);
}

/* ---- CRC-32C, slicing by 8 (tables computed at compile time would be 8 KiB of literals;
 * computing them once is clearer and costs microseconds) ---- */

static uint32_t crc_tab[8][256];
static int crc_ready;

static void crc_init(void) {
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1)));
    crc_tab[0][i] = c;
  }
  for (uint32_t i = 0; i < 256; i++)
    for (int t = 1; t < 8; t++) crc_tab[t][i] = (crc_tab[t - 1][i] >> 8) ^ crc_tab[0][crc_tab[t - 1][i] & 0xff];
  __atomic_store_n(&crc_ready, 1, __ATOMIC_RELEASE);
}

#if defined(__x86_64__)
/* SSE4.2 has a CRC-32C instruction: about 8x the table version, which matters because every
 * chunk is checked before it is decompressed. Used when the CPU has it. */
__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t crc, const uint8_t *p, size_t n) {
  uint64_t c = ~crc;
  while (n >= 8) {
    uint64_t v;
    memcpy(&v, p, 8);
    c = __builtin_ia32_crc32di(c, v);
    p += 8;
    n -= 8;
  }
  uint32_t c32 = (uint32_t)c;
  while (n--) c32 = __builtin_ia32_crc32qi(c32, *p++);
  return ~c32;
}
#endif

uint32_t gmt_crc32c(uint32_t crc, const void *buf, size_t n) {
#if defined(__x86_64__)
  if (__builtin_cpu_supports("sse4.2")) return crc_hw(crc, buf, n);
#endif
  /* Racing initializers write identical values, so a plain flag is enough. */
  if (!__atomic_load_n(&crc_ready, __ATOMIC_ACQUIRE)) crc_init();
  const uint8_t *p = buf;
  crc = ~crc;
  while (n >= 8) {
    uint32_t lo = crc ^ gmt_get32(p), hi = gmt_get32(p + 4);
    crc = crc_tab[7][lo & 0xff] ^ crc_tab[6][(lo >> 8) & 0xff] ^ crc_tab[5][(lo >> 16) & 0xff] ^
          crc_tab[4][lo >> 24] ^ crc_tab[3][hi & 0xff] ^ crc_tab[2][(hi >> 8) & 0xff] ^
          crc_tab[1][(hi >> 16) & 0xff] ^ crc_tab[0][hi >> 24];
    p += 8;
    n -= 8;
  }
  while (n--) crc = (crc >> 8) ^ crc_tab[0][(crc ^ *p++) & 0xff];
  return ~crc;
}

/* ---- encoder ---- */

void gmt_addr_model_reset(gmt_addr_model_t *m) {
  for (int i = 0; i < GMT_CACHE_SLOTS; i++) m->live[i].depth = m->freed[i].depth = 0;
  memset(m->cache, 0, sizeof m->cache);
  m->prev_lit = 0; /* stack entries beyond depth are never read */
}

void gmt_enc_reset(gmt_enc_t *e) {
  for (int i = 0; i < GMT_SLOTS; i++) e->col[i].len = 0;
  memset(e->prev, 0, sizeof e->prev);
  memset(e->run_val, 0, sizeof e->run_val);
  memset(e->run_len, 0, sizeof e->run_len);
  memset(e->size_cache, 0, sizeof e->size_cache);
  gmt_addr_model_reset(&e->addr);
  e->events = 0;
  e->strings.len = 0;
  e->n_strings = 0;
  e->ext.len = 0;
  e->n_ext = 0;
  e->last_ext_rec = 0;
}

void gmt_enc_free(gmt_enc_t *e) {
  for (int i = 0; i < GMT_SLOTS; i++) gmt_buf_free(&e->col[i]);
  gmt_buf_free(&e->strings);
  gmt_buf_free(&e->ext);
}

#define ROOM(b)                                                          \
  do {                                                                   \
    if ((b)->cap - (b)->len < 24 && gmt_buf_reserve((b), 24)) return -1; \
  } while (0)
#define PUTV(b, v) ((b)->len += gmt_put_varint((b)->p + (b)->len, (v)))

static inline int run_flush(gmt_buf_t *b, uint64_t len, uint64_t val) {
  ROOM(b);
  PUTV(b, len);
  PUTV(b, val);
  return 0;
}

#define ENC_KIND(F, v)                     \
  {                                        \
    gmt_buf_t *b = &e->col[SLOT(F, 0)];    \
    ROOM(b);                               \
    b->p[b->len++] = (uint8_t)(v);         \
  }
#define ENC_TS(F, v)                                                                  \
  {                                                                                   \
    uint64_t z_ = gmt_zigzag((int64_t)((uint64_t)(v) - e->prev[GMT_FIELD_##F]));      \
    gmt_buf_t *b0 = &e->col[SLOT(F, 0)], *b1 = &e->col[SLOT(F, 1)], *b2 = &e->col[SLOT(F, 2)]; \
    ROOM(b0);                                                                         \
    ROOM(b1);                                                                         \
    ROOM(b2);                                                                         \
    b0->p[b0->len++] = (uint8_t)z_;                                                   \
    b1->p[b1->len++] = (uint8_t)(z_ >> 8);                                            \
    PUTV(b2, z_ >> 16);                                                               \
    e->prev[GMT_FIELD_##F] = (v);                                                     \
  }
#define ENC_DELTA(F, v)                                                             \
  {                                                                                 \
    gmt_buf_t *b = &e->col[SLOT(F, 0)];                                             \
    ROOM(b);                                                                        \
    PUTV(b, gmt_zigzag((int64_t)((uint64_t)(v) - e->prev[GMT_FIELD_##F])));         \
    e->prev[GMT_FIELD_##F] = (v);                                                   \
  }
#define ENC_RLE(F, v)                                                                           \
  {                                                                                             \
    uint64_t val_ = (uint64_t)(v);                                                              \
    if (e->run_len[GMT_FIELD_##F] && e->run_val[GMT_FIELD_##F] == val_) {                       \
      e->run_len[GMT_FIELD_##F]++;                                                              \
    } else {                                                                                    \
      if (e->run_len[GMT_FIELD_##F] &&                                                          \
          run_flush(&e->col[SLOT(F, 0)], e->run_len[GMT_FIELD_##F], e->run_val[GMT_FIELD_##F])) \
        return -1;                                                                              \
      e->run_val[GMT_FIELD_##F] = val_;                                                         \
      e->run_len[GMT_FIELD_##F] = 1;                                                            \
    }                                                                                           \
  }
#define ENC_STREAM(F, v) ENC_RLE(F, (uint64_t)(v) + 1)
#define ENC_VARINT(F, v)                \
  {                                     \
    gmt_buf_t *b = &e->col[SLOT(F, 0)]; \
    ROOM(b);                            \
    PUTV(b, (uint64_t)(v));             \
  }
#define ENC_SIZE(F, v)                                 \
  {                                                    \
    uint64_t val_ = (v);                               \
    unsigned s_ = gmt_cache_slot(val_);                \
    gmt_buf_t *b = &e->col[SLOT(F, 0)];                \
    ROOM(b);                                           \
    if (e->size_cache[s_] == val_) {                   \
      b->p[b->len++] = (uint8_t)(s_ + 1);              \
    } else {                                           \
      gmt_buf_t *l = &e->col[SLOT(F, 1)];              \
      ROOM(l);                                         \
      b->p[b->len++] = 0;                              \
      PUTV(l, val_);                                   \
      e->size_cache[s_] = val_;                        \
    }                                                  \
  }
#define ENC_ADDR(F, v)                                             \
  {                                                                \
    gmt_buf_t *b = &e->col[SLOT(F, 0)], *l = &e->col[SLOT(F, 1)];  \
    ROOM(b);                                                       \
    ROOM(l);                                                       \
    b->p[b->len++] = addr_code(&e->addr, ev->kind, ev->size, (v), l); \
  }

/* The address coder (SPEC.md "Address coder"); the decoder mirrors it in gmt_decode.c. */
static inline uint8_t addr_code(gmt_addr_model_t *m, unsigned kind, uint64_t size, uint64_t a, gmt_buf_t *lit) {
  unsigned cls = gmt_addr_class(kind), s = gmt_cache_slot(size);
  int code = -1;
  if (cls >= 2) {
    int pos = gmt_stack_find(&m->live[s], a);
    if (pos >= 0) {
      if (cls == 2) gmt_stack_remove(&m->live[s], (unsigned)pos);
      code = 1 + pos;
    }
    if (cls == 2) gmt_stack_push(&m->freed[s], a);
  } else if (cls == 1) {
    int pos = gmt_stack_find(&m->freed[s], a);
    if (pos >= 0) {
      gmt_stack_remove(&m->freed[s], (unsigned)pos);
      code = GMT_ADDR_FREED_BASE + pos;
    }
    gmt_stack_push(&m->live[s], a);
  }
  if (code >= 0) return (uint8_t)code;
  unsigned c = gmt_addr_cache_slot(a);
  if (m->cache[c] == a) return (uint8_t)(GMT_ADDR_CACHE_BASE + c);
  m->cache[c] = a;
  lit->len += gmt_put_varint(lit->p + lit->len, gmt_zigzag((int64_t)(a - m->prev_lit)));
  m->prev_lit = a;
  return 0;
}

int gmt_enc_add(gmt_enc_t *e, const gmt_event_t *ev, const void *ext, size_t ext_len) {
#define GMT_ENC_FIELD(f, id, coder, csv, fmt) ENC_##coder(f, ev->f)
  GMT_FIELD_LIST(GMT_ENC_FIELD)
#undef GMT_ENC_FIELD
  if (ext_len) {
    if (gmt_buf_reserve(&e->ext, ext_len + 20)) return -1;
    PUTV(&e->ext, e->events - e->last_ext_rec);
    PUTV(&e->ext, ext_len);
    memcpy(e->ext.p + e->ext.len, ext, ext_len);
    e->ext.len += ext_len;
    e->last_ext_rec = e->events;
    e->n_ext++;
  }
  e->events++;
  return 0;
}

int gmt_enc_add_string(gmt_enc_t *e, uint32_t id, const char *s, size_t len) {
  if (gmt_buf_reserve(&e->strings, len + 20)) return -1;
  PUTV(&e->strings, id);
  PUTV(&e->strings, len);
  memcpy(e->strings.p + e->strings.len, s, len);
  e->strings.len += len;
  e->n_strings++;
  return 0;
}

size_t gmt_enc_size(const gmt_enc_t *e) {
  size_t n = 64 + e->strings.len + e->ext.len;
  for (int i = 0; i < GMT_SLOTS; i++) n += e->col[i].len;
  return n;
}

/* The columns each field's coder writes, in slot order: (field id, sub) pairs. */
static int used_slots(int *slots, uint32_t *ids) {
  int n = 0, f = 0;
#define GMT_USED(fl, id, coder, csv, fmt)                 \
  for (int sub = 0; sub < GMT_SUBCOLS_##coder; sub++) {   \
    slots[n] = f * 4 + sub;                               \
    ids[n++] = (uint32_t)(id * 4 + sub);                  \
  }                                                       \
  f++;
  GMT_FIELD_LIST(GMT_USED)
#undef GMT_USED
  return n;
}

int gmt_enc_finish(gmt_enc_t *e, gmt_buf_t *out) {
#define GMT_RLE_CLOSE(f, id, coder, csv, fmt)                                                    \
  if (e->run_len[GMT_FIELD_##f] &&                                                               \
      run_flush(&e->col[SLOT(f, 0)], e->run_len[GMT_FIELD_##f], e->run_val[GMT_FIELD_##f]))      \
    return -1;                                                                                   \
  e->run_len[GMT_FIELD_##f] = 0;
  GMT_FIELD_LIST(GMT_RLE_CLOSE)
#undef GMT_RLE_CLOSE
  int slots[GMT_SLOTS];
  uint32_t ids[GMT_SLOTS];
  int nused = used_slots(slots, ids);
  /* strings/ext columns get their entry count in front */
  uint8_t sh[10], xh[10];
  size_t shn = gmt_put_varint(sh, e->n_strings), xhn = gmt_put_varint(xh, e->n_ext);
  int ncols = nused + (e->n_strings ? 1 : 0) + (e->n_ext ? 1 : 0);
  if (gmt_buf_reserve(out, gmt_enc_size(e) + 40 + (size_t)ncols * 20)) return -1;
  PUTV(out, e->events);
  PUTV(out, (uint64_t)ncols);
  for (int i = 0; i < nused; i++) {
    PUTV(out, ids[i]);
    PUTV(out, e->col[slots[i]].len);
  }
  if (e->n_strings) {
    PUTV(out, GMT_COL_STRINGS);
    PUTV(out, shn + e->strings.len);
  }
  if (e->n_ext) {
    PUTV(out, GMT_COL_EXT);
    PUTV(out, xhn + e->ext.len);
  }
  e->n_bounds = 0;
  for (int i = 0; i < nused; i++) {
    const gmt_buf_t *c = &e->col[slots[i]];
    e->bounds[e->n_bounds++] = out->len;
    if (c->len) memcpy(out->p + out->len, c->p, c->len);
    out->len += c->len;
  }
  e->bounds[e->n_bounds++] = out->len;
  if (e->n_strings) {
    memcpy(out->p + out->len, sh, shn);
    out->len += shn;
    memcpy(out->p + out->len, e->strings.p, e->strings.len);
    out->len += e->strings.len;
  }
  if (e->n_ext) {
    memcpy(out->p + out->len, xh, xhn);
    out->len += xhn;
    memcpy(out->p + out->len, e->ext.p, e->ext.len);
    out->len += e->ext.len;
  }
  return 0;
}
