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
__attribute__((always_inline)) static inline int gmt_get_varint(const uint8_t **p, const uint8_t *end, uint64_t *v) {
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
 * Every record carries every field of gmt_event_t, whatever its kind, each in its own
 * column(s). X(field, field id, coder, csv name, csv format). A field's columns have ids
 * 4 * field id + sub (sub 0..3), see the coders:
 *   KIND  : sub 0: one byte per record
 *   TS    : zigzag(delta from the previous record's value) z, split in byte planes:
 *           sub 0: z & 0xff, sub 1: (z >> 8) & 0xff (one byte per record each),
 *           sub 2: varint(z >> 16)
 *   DELTA : sub 0: varint(zigzag(delta from the previous record's value))
 *   RLE   : sub 0: (varint run length, varint value) pairs
 *   STREAM: RLE of (stream + 1) so GMT_STREAM_NONE is 0
 *   SIZE  : sub 0: one code byte per record: 0 = miss, c = slot c - 1 of a 255-slot
 *           direct-mapped cache of recent values; sub 1: the misses as varints
 *   ADDR  : sub 0: one code byte per record, predicted from the record's kind and size
 *           (SPEC.md "Address coder"); sub 1: misses as varint(zigzag(delta from the
 *           previous miss))
 *   VARINT: sub 0: plain varint
 * csv format: DEC, HEX, KIND, MEM, STREAM (decimal or "-"). */
#define GMT_FIELD_LIST(X)                                  \
  X(ts_ns, 1, TS, "ts_ns", DEC)                            \
  X(kind, 2, KIND, "kind", KIND)                           \
  X(device, 3, RLE, "device", DEC)                         \
  X(stream, 4, STREAM, "stream", STREAM)                   \
  X(addr, 5, ADDR, "addr", HEX)                            \
  X(size, 6, SIZE, "size", DEC)                            \
  X(mem_kind, 7, RLE, "mem_kind", MEM)                     \
  X(flags, 8, RLE, "flags", HEX)                           \
  X(corr_id, 9, DELTA, "corr_id", DEC)                     \
  X(callsite, 10, VARINT, "callsite", DEC)                 \
  X(context, 11, RLE, "context", DEC)

/* Sub-columns per coder. */
#define GMT_SUBCOLS_KIND 1
#define GMT_SUBCOLS_TS 3
#define GMT_SUBCOLS_DELTA 1
#define GMT_SUBCOLS_RLE 1
#define GMT_SUBCOLS_STREAM 1
#define GMT_SUBCOLS_SIZE 2
#define GMT_SUBCOLS_ADDR 2
#define GMT_SUBCOLS_VARINT 1

#define GMT_COL_STRINGS 60 /* string table entries this chunk's records use */
#define GMT_COL_EXT 61     /* per-record extension bytes (fields this version does not define) */

enum {
#define GMT_FIELD_ENUM(f, id, coder, csv, fmt) GMT_FIELD_##f,
  GMT_FIELD_LIST(GMT_FIELD_ENUM)
#undef GMT_FIELD_ENUM
  GMT_FIELD_COUNT
};
#define GMT_SLOTS (GMT_FIELD_COUNT * 4) /* dense column slots: field index * 4 + sub */

#define GMT_CACHE_SLOTS 255
static inline unsigned gmt_cache_slot(uint64_t v) {
  uint64_t h = (v * 0x9E3779B97F4A7C15ull) >> 56; /* 0..255 */
  return (unsigned)((h * GMT_CACHE_SLOTS) >> 8);  /* 0..254 */
}

/* Address coder (SPEC.md "Address coder"). Per size slot (gmt_cache_slot(size)) two stacks of
 * up to 64 addresses: "live" (pushed by alloc-like kinds, popped by free-like kinds) and
 * "freed" (pushed by free-like kinds, popped by alloc-like kinds): allocators hand out the
 * block of that size freed last, programs free what they allocated last. Code byte:
 *   0          miss: the address is in the literal column
 *   1 .. 64    free-like and free_requested kinds: position (code - 1) from the top of the
 *              live stack
 *   65 .. 128  alloc-like kinds: position (code - 65) from the top of the freed stack
 *   129 .. 255 slot (code - 129) of a 127-slot cache of recent missed addresses */
#define GMT_ADDR_DEPTH 64
#define GMT_ADDR_FREED_BASE 65
#define GMT_ADDR_CACHE_BASE 129
#define GMT_ADDR_CACHE_SLOTS 127
static inline unsigned gmt_addr_cache_slot(uint64_t v) {
  uint64_t h = ((v >> 8) * 0x9E3779B97F4A7C15ull) >> 56;
  return (unsigned)((h * GMT_ADDR_CACHE_SLOTS) >> 8);
}
/* Kind classes for the address coder: 1 alloc-like, 2 free-like, 3 looks up in the live stack
 * without popping (free_requested: the free completes later), 0 none (and unknown kinds). */
static inline unsigned gmt_addr_class(unsigned kind) {
  switch (kind) {
    case GMT_EV_ALLOC: case GMT_EV_SEGMENT_ALLOC: case GMT_EV_VMM_RESERVE: case GMT_EV_VMM_MAP: return 1;
    case GMT_EV_FREE: case GMT_EV_SEGMENT_FREE: case GMT_EV_VMM_UNMAP: case GMT_EV_VMM_RELEASE: return 2;
    case GMT_EV_FREE_REQUESTED: return 3;
    default: return 0;
  }
}

/* A ring of GMT_ADDR_DEPTH addresses used as a stack that forgets its oldest entries. */
typedef struct gmt_addr_stack {
  uint64_t a[GMT_ADDR_DEPTH];
  uint8_t top, depth;
} gmt_addr_stack_t;

static inline uint64_t gmt_stack_at(const gmt_addr_stack_t *s, unsigned pos) {
  return s->a[(s->top - pos) & (GMT_ADDR_DEPTH - 1)];
}
static inline void gmt_stack_push(gmt_addr_stack_t *s, uint64_t a) {
  s->top = (uint8_t)((s->top + 1) & (GMT_ADDR_DEPTH - 1));
  s->a[s->top] = a;
  if (s->depth < GMT_ADDR_DEPTH) s->depth++;
}
/* Removes the entry at pos (0 = top); the entries above it move down. */
static inline void gmt_stack_remove(gmt_addr_stack_t *s, unsigned pos) {
  for (unsigned k = pos; k > 0; k--)
    s->a[(s->top - k) & (GMT_ADDR_DEPTH - 1)] = s->a[(s->top - k + 1) & (GMT_ADDR_DEPTH - 1)];
  s->top = (uint8_t)((s->top - 1) & (GMT_ADDR_DEPTH - 1));
  s->depth--;
}
/* Position of a from the top, or -1. */
static inline int gmt_stack_find(const gmt_addr_stack_t *s, uint64_t a) {
  for (unsigned pos = 0; pos < s->depth; pos++)
    if (gmt_stack_at(s, pos) == a) return (int)pos;
  return -1;
}

/* Address predictor state, the same in encoder and decoder; reset at every chunk. */
typedef struct gmt_addr_model {
  gmt_addr_stack_t live[GMT_CACHE_SLOTS], freed[GMT_CACHE_SLOTS];
  uint64_t cache[GMT_ADDR_CACHE_SLOTS];
  uint64_t prev_lit;
} gmt_addr_model_t;

void gmt_addr_model_reset(gmt_addr_model_t *m);

/* ---- header fields (SPEC.md "Header frame"), declared once ---------------------------------
 * U32/I32/U64(tag, field): fixed little-endian 4 or 8 bytes; STR(tag, field): UTF-8 bytes;
 * MODE(tag, field): a U32 the text form writes by name (gmt_capture_mode_name).
 * Tag 15 (GMT_HTAG_KV) holds one key/value pair. Tags are part of the format: never reuse. */
#define GMT_HEADER_FIELDS(U32, I32, U64, STR, MODE) \
  MODE(1, capture_mode)                              \
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
#define GMT_HTAG_ROOM 16 /* padding (gmt_header_t.room): zero bytes, skipped */

/* ---- column encoder (gmt_codec.c) ------------------------------------------------------------ */


/* Encoder state for one chunk. */
typedef struct gmt_enc {
  gmt_buf_t col[GMT_SLOTS]; /* indexed by field index * 4 + sub */
  uint64_t prev[GMT_FIELD_COUNT];
  uint64_t run_val[GMT_FIELD_COUNT];
  uint64_t run_len[GMT_FIELD_COUNT];
  uint64_t size_cache[GMT_CACHE_SLOTS];
  gmt_addr_model_t addr;
  uint32_t events;
  gmt_buf_t strings; /* varint id, varint len, bytes */
  uint32_t n_strings;
  gmt_buf_t ext;     /* varint record delta, varint len, bytes */
  uint32_t n_ext, last_ext_rec;
  size_t bounds[GMT_SLOTS + 4]; /* after gmt_enc_finish: where each column starts in out */
  int n_bounds;
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

/* Decodes payload[0..n) into evs (capacity cap); scratch is the address model's state
 * (about 70 KiB, kept by the caller so it is not on the stack). On success returns GM_OK with *n_ev (known
 * kinds), *n_unknown, and calls on_string for each string entry. Errors: GM_ERR_CORRUPT
 * with a message naming the column. */
typedef gm_status_t (*gmt_string_cb)(void *ctx, uint32_t id, const char *s, uint32_t len,
                                     gm_err_t *err);
gm_status_t gmt_dec_payload(const uint8_t *payload, size_t n, uint32_t expect_events,
                            gmt_event_t **evs, size_t *cap, size_t *n_ev, uint64_t *n_unknown,
                            gmt_addr_model_t *scratch, gmt_string_cb on_string, void *ctx, gm_err_t *err);

/* ---- header serialization (gmt_header.c) ----------------------------------------------------- */

/* Appends the whole header frame (frame header + payload) with the given versions. */
int gmt_header_encode(const gmt_header_t *h, uint32_t version, uint32_t min_reader, gmt_buf_t *out);
/* The header frame of h, exactly frame_len bytes long, its room grown or shrunk to fit (the
 * in-place rewrite of a written header). -1 if h does not fit (too little room) or no memory. */
int gmt_header_encode_fit(const gmt_header_t *h, size_t frame_len, uint32_t version, uint32_t min_reader,
                          gmt_buf_t *out);
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

/* A written trace's header edited in place (gmt_header_edit.c): edit(h, ctx) changes the decoded
 * header, which is then written back at the same length; what names the change in errors. */
typedef gm_status_t (*gmt_header_edit_fn)(gmt_header_t *h, void *ctx, gm_err_t *err);
gm_status_t gmt_trace_edit_header(const char *path, gmt_header_edit_fn edit, void *ctx, const char *what,
                                  gm_err_t *err);

#ifdef __cplusplus
}
#endif
#endif /* GMT_INTERNAL_H */
