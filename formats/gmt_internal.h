/* gmt_internal.h: what the files of formats/ share and nobody outside formats/ should use.
 *
 * Holds the on-disk constants of SPEC.md (frame magics, fixed offsets), the explicit
 * little-endian and LEB128 helpers, CRC-32C, the ONE declaration of the event record layout
 * (GMT_FIELD_LIST: the column encoder, the column decoder, the CSV writer/reader and the
 * printer are all generated from it), and hooks that tests and the test-vector generator use
 * to write deliberately odd files (unknown kinds, sequence gaps, forged versions).
 * Not part of the public API: the only contract for other components is gmt.h. */
#ifndef GMT_INTERNAL_H
#define GMT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "formats/gmt.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- frames (SPEC.md "File structure") ------------------------------------------------------ */

#define GMT_MAGIC_HEADER 0x184D2A50u /* zstd skippable frame, variant 0 */
#define GMT_MAGIC_CHUNK 0x184D2A51u  /* chunk descriptor; the zstd data frame follows */
#define GMT_MAGIC_INDEX 0x184D2A52u
#define GMT_MAGIC_FOOTER 0x184D2A53u
#define GMT_MAGIC_SKIPPABLE_MASK 0xFFFFFFF0u
#define GMT_MAGIC_SKIPPABLE 0x184D2A50u
#define GMT_MAGIC_ZSTD 0xFD2FB528u

#define GMT_FRAME_HDR 8         /* u32 magic, u32 payload size */
#define GMT_HEADER_FIXED 12     /* "GMTH", u16 version, u16 min reader, u32 crc */
#define GMT_CHUNK_DESC_SIZE 48  /* payload of a chunk descriptor (version 1) */
#define GMT_INDEX_ENTRY_SIZE 32
#define GMT_INDEX_FIXED 12      /* "GMTI", u64 chunk count */
#define GMT_FOOTER_SIZE 24      /* payload of the footer frame */
#define GMT_FOOTER_FRAME (GMT_FRAME_HDR + GMT_FOOTER_SIZE)

/* Limits a reader enforces so a hostile file cannot make it allocate without bound. */
#define GMT_MAX_CHUNK_EVENTS (1u << 20)
#define GMT_MAX_CHUNK_RAW (64u << 20)
#define GMT_MAX_STRING (1u << 20)
#define GMT_MAX_HEADER (16u << 20)

/* ---- little-endian and varint helpers -------------------------------------------------------- */

static inline void gmt_put16(uint8_t *p, uint16_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
}
static inline void gmt_put32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline void gmt_put64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline uint16_t gmt_get16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static inline uint32_t gmt_get32(const uint8_t *p) {
  return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static inline uint64_t gmt_get64(const uint8_t *p) {
  return (uint64_t)gmt_get32(p) | ((uint64_t)gmt_get32(p + 4) << 32);
}

/* LEB128: 7 bits per byte, low first; at most 10 bytes. Returns bytes written. */
static inline size_t gmt_put_varint(uint8_t *p, uint64_t v) {
  size_t n = 0;
  while (v >= 0x80) {
    p[n++] = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  p[n++] = (uint8_t)v;
  return n;
}
/* Reads a varint from [*p, end). Returns 0 on a short or over-long (> 10 bytes) varint. */
static inline int gmt_get_varint(const uint8_t **p, const uint8_t *end, uint64_t *v) {
  const uint8_t *q = *p;
  if (q < end && *q < 0x80) { /* fast path: one byte */
    *v = *q;
    *p = q + 1;
    return 1;
  }
  uint64_t r = 0;
  for (int shift = 0; shift < 70; shift += 7) {
    if (q >= end) return 0;
    uint8_t b = *q++;
    if (shift == 63 && b > 1) return 0;
    r |= (uint64_t)(b & 0x7f) << shift;
    if (b < 0x80) {
      *v = r;
      *p = q;
      return 1;
    }
  }
  return 0;
}
static inline uint64_t gmt_zigzag(int64_t v) { return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63); }
static inline int64_t gmt_unzigzag(uint64_t v) { return (int64_t)(v >> 1) ^ -(int64_t)(v & 1); }

/* CRC-32C (Castagnoli, reflected, init/final xor 0xFFFFFFFF). crc32c(0, "123456789") = 0xE3069283.
 * Chain calls by passing the previous result as crc. */
uint32_t gmt_crc32c(uint32_t crc, const void *buf, size_t n);

/* ---- growable byte buffer --------------------------------------------------------------------- */

typedef struct gmt_buf {
  uint8_t *p;
  size_t len, cap;
} gmt_buf_t;

/* Makes room for `more` bytes. 0 on success, -1 out of memory. */
int gmt_buf_reserve(gmt_buf_t *b, size_t more);
void gmt_buf_free(gmt_buf_t *b);

/* ---- the record layout (SPEC.md "Chunk payload"), declared once ------------------------------
 *
 * Every record carries every field of gmt_event_t, whatever its kind, each in its own column.
 * X(field, column id, coder, csv name, csv format)
 *   coder KIND  : one byte per record
 *   coder TS    : zigzag(delta from the previous record's value) as a varint
 *   coder DELTA : same as TS (a separate name so the spec can say what it is for)
 *   coder RLE   : (varint run length, varint value) pairs
 *   coder STREAM: RLE of (stream + 1) so GMT_STREAM_NONE is 0
 *   coder SIZE  : one code byte per record into a 255-slot direct-mapped cache of recent
 *                 values (0 = miss), misses as varints in column id + 1
 *   coder ADDR  : like SIZE; misses as zigzag(delta from the previous missed address) in id + 1
 *   coder VARINT: plain varint
 * csv format: DEC, HEX, KIND, MEM, STREAM (decimal or "-"). */
#define GMT_FIELD_LIST(X)                                  \
  X(ts_ns, 1, TS, "ts_ns", DEC)                            \
  X(kind, 2, KIND, "kind", KIND)                           \
  X(device, 3, RLE, "device", DEC)                         \
  X(stream, 4, STREAM, "stream", STREAM)                   \
  X(addr, 5, ADDR, "addr", HEX)                            \
  X(size, 7, SIZE, "size", DEC)                            \
  X(mem_kind, 9, RLE, "mem_kind", MEM)                     \
  X(flags, 10, RLE, "flags", HEX)                          \
  X(corr_id, 11, DELTA, "corr_id", DEC)                    \
  X(callsite, 12, VARINT, "callsite", DEC)                 \
  X(context, 13, RLE, "context", DEC)

#define GMT_COL_ADDR_LIT 6  /* addr cache misses */
#define GMT_COL_SIZE_LIT 8  /* size cache misses */
#define GMT_COL_STRINGS 32 /* string table entries this chunk's records use */
#define GMT_COL_EXT 33     /* per-record extension bytes (fields this version does not define) */

enum {
#define GMT_FIELD_ENUM(f, id, coder, csv, fmt) GMT_FIELD_##f,
  GMT_FIELD_LIST(GMT_FIELD_ENUM)
#undef GMT_FIELD_ENUM
  GMT_FIELD_COUNT
};

#define GMT_CACHE_SLOTS 255
static inline unsigned gmt_cache_slot(uint64_t v) {
  uint64_t h = (v * 0x9E3779B97F4A7C15ull) >> 56; /* 0..255 */
  return (unsigned)((h * GMT_CACHE_SLOTS) >> 8);  /* 0..254 */
}

/* ---- header fields (SPEC.md "Header frame"), declared once ---------------------------------
 * U32/I32/U64(tag, field): fixed little-endian 4 or 8 bytes; STR(tag, field): UTF-8 bytes.
 * Tag 15 (GMT_HTAG_KV) holds one key/value pair. Tags are part of the format: never reuse. */
#define GMT_HEADER_FIELDS(U32, I32, U64, STR) \
  U32(1, capture_mode)                         \
  I32(2, rank)                                 \
  I32(3, world_size)                           \
  U32(4, pid)                                  \
  U64(5, start_time_ns)                        \
  U64(6, gpu_total_mem)                        \
  STR(7, host)                                 \
  STR(8, gpu_name)                             \
  STR(9, gpu_uuid)                             \
  STR(10, driver_version)                      \
  STR(11, cuda_version)                        \
  STR(12, cupti_version)                       \
  STR(13, tool)                                \
  STR(14, command_line)
#define GMT_HTAG_KV 15

/* ---- column encoder (gmt_codec.c) ------------------------------------------------------------ */

#define GMT_MAX_COLS 24

/* Encoder state for one chunk. */
typedef struct gmt_enc {
  gmt_buf_t col[GMT_MAX_COLS]; /* indexed by a dense column slot, see gmt_codec.c */
  uint64_t prev[GMT_FIELD_COUNT];
  uint64_t run_val[GMT_FIELD_COUNT];
  uint64_t run_len[GMT_FIELD_COUNT];
  uint64_t size_cache[GMT_CACHE_SLOTS];
  uint64_t addr_cache[GMT_CACHE_SLOTS];
  uint64_t addr_prev_lit;
  uint32_t events;
  gmt_buf_t strings; /* varint id, varint len, bytes */
  uint32_t n_strings;
  gmt_buf_t ext;     /* varint record delta, varint len, bytes */
  uint32_t n_ext, last_ext_rec;
} gmt_enc_t;

void gmt_enc_reset(gmt_enc_t *e);
void gmt_enc_free(gmt_enc_t *e);
/* Appends one record. 0 ok, -1 out of memory. ext may be NULL. */
int gmt_enc_add(gmt_enc_t *e, const gmt_event_t *ev, const void *ext, size_t ext_len);
int gmt_enc_add_string(gmt_enc_t *e, uint32_t id, const char *s, size_t len);
/* Bytes the payload would have now (an estimate that is exact once runs are closed). */
size_t gmt_enc_size(const gmt_enc_t *e);
/* Closes runs and writes the payload (directory + columns) into out (appended). */
int gmt_enc_finish(gmt_enc_t *e, gmt_buf_t *out);

/* Decoded chunk: events (unknown kinds already removed) and its strings. */
typedef struct gmt_dec_string {
  uint32_t id;
  const char *s; /* points into the payload, NOT NUL-terminated */
  uint32_t len;
} gmt_dec_string_t;

/* Decodes payload[0..n) into evs (capacity cap). On success returns GM_OK with *n_ev (known
 * kinds), *n_unknown, and calls on_string for each string entry. Errors: GM_ERR_CORRUPT
 * with a message naming the column. */
typedef gm_status_t (*gmt_string_cb)(void *ctx, uint32_t id, const char *s, uint32_t len,
                                     gm_err_t *err);
gm_status_t gmt_dec_payload(const uint8_t *payload, size_t n, uint32_t expect_events,
                            gmt_event_t **evs, size_t *cap, size_t *n_ev, uint64_t *n_unknown,
                            gmt_string_cb on_string, void *ctx, gm_err_t *err);

/* ---- header serialization (gmt_header.c) ----------------------------------------------------- */

/* Appends the whole header frame (frame header + payload) with the given versions. */
int gmt_header_encode(const gmt_header_t *h, uint32_t version, uint32_t min_reader, gmt_buf_t *out);
/* Parses a header frame at buf[0..n). *used = frame bytes. Fills h (caller frees). */
gm_status_t gmt_header_decode(const uint8_t *buf, size_t n, gmt_header_t *h, size_t *used,
                              gm_err_t *err);

/* ---- hooks for tests and the vector generator -------------------------------------------------- */

/* Append a record without validating kind/mem_kind, with optional extension bytes. */
gm_status_t gmt_writer_append_raw(gmt_writer_t *w, const gmt_event_t *ev, const void *ext,
                                  size_t ext_len, gm_err_t *err);
/* Defines string `id` explicitly (CSV import keeps the ids of the text). Ids must be unused or
 * already hold the same string. */
gm_status_t gmt_writer_intern_id(gmt_writer_t *w, uint32_t id, const char *s, gm_err_t *err);
/* Skip n sequence numbers before the next chunk (makes a gap), for vectors. */
void gmt_writer_skip_seq(gmt_writer_t *w, uint64_t n);
/* Override the versions written in the header (before the first append), for vectors. */
void gmt_writer_force_versions(gmt_writer_t *w, uint32_t version, uint32_t min_reader);

#ifdef __cplusplus
}
#endif
#endif /* GMT_INTERNAL_H */
