/* gmt_writer.c: appends events to a trace file (SPEC.md "File structure").
 *
 * Model: the header frame is written at open, so even a process killed at once leaves a
 * recognisable trace. Events are column-coded as they arrive (gmt_codec.c); a chunk is cut
 * when it reaches the event count, the payload size or the age the options give, then
 * compressed into one independent zstd frame behind a chunk descriptor, and written with one
 * write(). Close appends the index and the footer. The writer keeps only the current chunk,
 * the string table and one 32-byte index entry per chunk in memory.
 * Strings: each chunk carries every string its records use (not just the new ones), so any
 * chunk decodes alone after a seek. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uthash.h>
#include <zstd.h>

#include "formats/gmt_internal.h"

typedef struct wstr {
  char *s;
  uint32_t id;
  uint64_t mark; /* chunk_no + 1 of the last chunk that carries it */
  UT_hash_handle hh;    /* by_str */
  UT_hash_handle hh_id; /* sparse_ids: ids too far above the others for the dense array */
} wstr_t;

/* Ids the writer hands out are 1, 2, 3, ...: a dense array finds them on the hot path. An id
 * chosen by the caller (the CSV text form keeps the file's ids) may be anywhere below 2^32:
 * one far above the others goes into a hash, so '#string.4294967294=x' costs one entry, not
 * 32 GB of array. */
#define DENSE_SLACK 65536u

typedef struct idx_entry {
  uint64_t offset, seq, first_ts;
  uint32_t events;
} idx_entry_t;

struct gmt_writer {
  int fd;
  gm_out_t *atomic; /* gmt_writer_open_atomic: the temporary file that close renames; owns fd */
  char *name;
  gmt_writer_opts_t o;
  gmt_header_t hdr;
  size_t header_len;
  uint64_t off, seq, chunk_no, dropped, events, first_ts, last_ts;
  /* what complete frames hold: the file's end after the last whole write, its events and the
   * last one's time (gmt_writer_stop cuts back to it) */
  uint64_t good_off, good_events, good_last_ts;
  gmt_enc_t enc;
  ZSTD_CCtx *cctx;
  gmt_buf_t payload, out;
  wstr_t *by_str;  /* uthash by string */
  wstr_t **by_id;  /* id -> entry (NULL: unused id), ids 0..n_dense */
  uint32_t n_dense; /* by_id has n_dense + 1 slots in use */
  size_t dense_cap; /* ... of dense_cap allocated: grown by doubling, as ids come one by one */
  wstr_t *sparse_ids; /* uthash (hh_id) of the ids above n_dense */
  uint32_t n_ids;  /* the largest id in use; the next automatic id is n_ids + 1 */
  uint32_t n_strs; /* strings interned */
  idx_entry_t *idx;
  size_t n_idx, cap_idx;
  gm_status_t failed; /* sticky: once a write failed, the file is not trustworthy */
  int sealed;         /* gmt_writer_seal wrote the index: close only closes */
};

static gm_status_t write_all(gmt_writer_t *w, const void *buf, size_t n, gm_err_t *err) {
  const uint8_t *p = buf;
  while (n) {
    ssize_t k = write(w->fd, p, n);
    if (k < 0 && errno == EINTR) continue;
    if (k < 0) {
      w->failed = GM_ERR_IO;
      return gm_err_set(err, GM_ERR_IO, "write: %s", strerror(errno));
    }
    p += k;
    n -= (size_t)k;
    w->off += (uint64_t)k;
  }
  return GM_OK;
}

gm_status_t gmt_writer_open_fd(gmt_writer_t **out, int fd, const char *name, const gmt_header_t *h,
                               const gmt_writer_opts_t *opts, gm_err_t *err) {
  *out = NULL;
  gmt_writer_t *w = calloc(1, sizeof *w);
  if (!w || !(w->name = strdup(name ? name : "(fd)"))) {
    free(w);
    close(fd);
    return gm_err_set(err, GM_ERR_NOMEM, "out of memory");
  }
  w->fd = fd;
  if (opts) w->o = *opts;
  if (!w->o.chunk_events) w->o.chunk_events = 65536;
  if (w->o.chunk_events > GMT_MAX_CHUNK_EVENTS) w->o.chunk_events = GMT_MAX_CHUNK_EVENTS;
  if (!w->o.chunk_bytes) w->o.chunk_bytes = 1u << 20;
  if (w->o.chunk_bytes > GMT_MAX_CHUNK_RAW / 2) w->o.chunk_bytes = GMT_MAX_CHUNK_RAW / 2;
  if (!w->o.zstd_level) w->o.zstd_level = 3;
  gmt_header_t empty;
  gmt_header_init(&empty);
  gm_status_t s = gmt_header_copy(&w->hdr, h ? h : &empty, err);
  if (s != GM_OK) {
    free(w->name);
    free(w);
    close(fd);
    return s;
  }
  w->hdr.format_version = GMT_FORMAT_VERSION;
  w->hdr.min_reader = GMT_FORMAT_MIN_READER;
  w->cctx = ZSTD_createCCtx();
  w->by_id = calloc(1, sizeof *w->by_id);
  w->dense_cap = 1;
  if (!w->cctx || !w->by_id || gmt_header_encode(&w->hdr, GMT_FORMAT_VERSION, GMT_FORMAT_MIN_READER, &w->out)) {
    gmt_writer_abandon(w);
    return gm_err_set(err, GM_ERR_NOMEM, "out of memory");
  }
  ZSTD_CCtx_setParameter(w->cctx, ZSTD_c_compressionLevel, w->o.zstd_level);
  ZSTD_CCtx_setParameter(w->cctx, ZSTD_c_checksumFlag, 1);
  ZSTD_CCtx_setParameter(w->cctx, ZSTD_c_contentSizeFlag, 1);
  w->header_len = w->out.len;
  s = write_all(w, w->out.p, w->out.len, err);
  if (s != GM_OK) {
    gmt_writer_abandon(w);
    return s;
  }
  w->good_off = w->off;
  *out = w;
  return GM_OK;
}

gm_status_t gmt_writer_open(gmt_writer_t **out, const char *path, const gmt_header_t *h,
                            const gmt_writer_opts_t *opts, gm_err_t *err) {
  *out = NULL;
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return gm_err_set(err, GM_ERR_IO, "%s", strerror(errno));
  struct stat sb;
  int regular = fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode);
  gm_status_t s = gmt_writer_open_fd(out, fd, path, h, opts, err);
  /* emptied by us and without a header (a full disk): no reader could use it */
  if (s != GM_OK && regular) unlink(path);
  return s;
}

gm_status_t gmt_writer_open_atomic(gmt_writer_t **out, const char *path, const gmt_header_t *h,
                                   const gmt_writer_opts_t *opts, gm_err_t *err) {
  *out = NULL;
  gm_out_t *o = NULL;
  gm_status_t s = gm_out_open(&o, path, err);
  if (s != GM_OK) return s;
  /* The writer gets a duplicate to close as it always does; gm_out keeps its own for the
   * fsync and the rename. */
  int fd = dup(gm_out_fd(o));
  if (fd < 0) {
    s = gm_err_set(err, GM_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
    gm_out_abort(o);
    return s;
  }
  s = gmt_writer_open_fd(out, fd, path, h, opts, err);
  if (s != GM_OK) {
    gm_out_abort(o);
    return s;
  }
  (*out)->atomic = o;
  return GM_OK;
}

/* Compress the current chunk and write descriptor + zstd frame. */
static gm_status_t cut(gmt_writer_t *w, gm_err_t *err) {
  if (w->failed) return gm_err_set(err, w->failed, "an earlier write failed");
  if (w->enc.events == 0 && w->dropped == 0) return GM_OK;
  w->payload.len = 0;
  if (gmt_enc_finish(&w->enc, &w->payload)) return gm_err_set(err, GM_ERR_NOMEM, "out of memory");
  size_t head = GMT_FRAME_HDR + GMT_CHUNK_DESC_SIZE;
  w->out.len = 0;
  if (gmt_buf_reserve(&w->out, head + ZSTD_compressBound(w->payload.len)))
    return gm_err_set(err, GM_ERR_NOMEM, "out of memory");
  /* One frame, but a block ends at every column boundary so each column gets its own entropy
   * tables (byte planes of timestamps, code bytes, varints differ a lot). */
  ZSTD_CCtx_reset(w->cctx, ZSTD_reset_session_only);
  ZSTD_CCtx_setPledgedSrcSize(w->cctx, w->payload.len);
  ZSTD_outBuffer ob = {w->out.p + head, w->out.cap - head, 0};
  ZSTD_inBuffer ib = {w->payload.p, 0, 0};
  for (int b = 1; b <= w->enc.n_bounds; b++) {
    int last = b == w->enc.n_bounds;
    ib.size = last ? w->payload.len : w->enc.bounds[b];
    if (!last && ib.size - ib.pos < 4096) continue; /* small columns share a block */
    size_t rem;
    do {
      rem = ZSTD_compressStream2(w->cctx, &ob, &ib, last ? ZSTD_e_end : ZSTD_e_flush);
      if (ZSTD_isError(rem)) return gm_err_set(err, GM_ERR_IO, "zstd: %s", ZSTD_getErrorName(rem));
    } while (rem != 0);
  }
  size_t cs = ob.pos;
  uint8_t *d = w->out.p;
  gmt_put32(d, GMT_MAGIC_CHUNK);
  gmt_put32(d + 4, GMT_CHUNK_DESC_SIZE);
  uint8_t *p = d + GMT_FRAME_HDR;
  memcpy(p, "GMTC", 4);
  gmt_put64(p + 8, w->seq);
  gmt_put64(p + 16, w->dropped);
  gmt_put64(p + 24, w->enc.events ? w->first_ts : 0);
  gmt_put32(p + 32, w->enc.events);
  gmt_put32(p + 36, (uint32_t)w->payload.len);
  gmt_put32(p + 40, (uint32_t)cs);
  gmt_put32(p + 44, 0);
  uint32_t crc = gmt_crc32c(0, p + 8, GMT_CHUNK_DESC_SIZE - 8);
  gmt_put32(p + 4, gmt_crc32c(crc, w->out.p + head, cs));
  if (w->n_idx == w->cap_idx) {
    size_t nc = w->cap_idx ? w->cap_idx * 2 : 64;
    idx_entry_t *ni = realloc(w->idx, nc * sizeof *ni);
    if (!ni) return gm_err_set(err, GM_ERR_NOMEM, "out of memory");
    w->idx = ni;
    w->cap_idx = nc;
  }
  w->idx[w->n_idx] = (idx_entry_t){w->off, w->seq, w->enc.events ? w->first_ts : 0, w->enc.events};
  gm_status_t s = write_all(w, w->out.p, head + cs, err);
  if (s != GM_OK) return s;
  w->good_off = w->off;
  w->good_events += w->enc.events;
  if (w->enc.events) w->good_last_ts = w->last_ts;
  w->n_idx++;
  w->seq++;
  w->chunk_no++;
  w->dropped = 0;
  gmt_enc_reset(&w->enc);
  return GM_OK;
}

static wstr_t *find_id(const gmt_writer_t *w, uint32_t id) {
  if (id <= w->n_dense) return w->by_id[id];
  wstr_t *e = NULL;
  HASH_FIND(hh_id, w->sparse_ids, &id, sizeof id, e);
  return e;
}

static gm_status_t append_one(gmt_writer_t *w, const gmt_event_t *ev, const void *ext, size_t ext_len,
                              gm_err_t *err) {
  if (w->failed) return gm_err_set(err, w->failed, "an earlier write failed");
  if (ev->callsite != GMT_NO_STRING) {
    wstr_t *e = find_id(w, ev->callsite);
    if (!e) return gm_err_set(err, GM_ERR_INVAL, "callsite id %u was never interned", ev->callsite);
    if (e->mark != w->chunk_no + 1) {
      if (gmt_enc_add_string(&w->enc, e->id, e->s, strlen(e->s))) return gm_err_set(err, GM_ERR_NOMEM, "out of memory");
      e->mark = w->chunk_no + 1;
    }
  }
  if (w->enc.events == 0) w->first_ts = ev->ts_ns;
  if (gmt_enc_add(&w->enc, ev, ext, ext_len)) return gm_err_set(err, GM_ERR_NOMEM, "out of memory");
  w->events++;
  w->last_ts = ev->ts_ns;
  /* the payload size is a sum over the columns: looked at every 8 events, which is close enough */
  if (w->enc.events >= w->o.chunk_events || ((w->enc.events & 7) == 0 && gmt_enc_size(&w->enc) >= w->o.chunk_bytes) ||
      (w->o.chunk_age_ns && ev->ts_ns - w->first_ts >= w->o.chunk_age_ns))
    return cut(w, err);
  return GM_OK;
}

gm_status_t gmt_writer_append(gmt_writer_t *w, const gmt_event_t *ev, gm_err_t *err) {
  if (ev->kind == 0 || ev->kind >= GMT_EV_KIND_MAX)
    return gm_err_set(err, GM_ERR_INVAL, "event kind %u is not a known kind", ev->kind);
  if (ev->mem_kind >= GMT_MEM_KIND_MAX)
    return gm_err_set(err, GM_ERR_INVAL, "memory kind %u is not a known kind", ev->mem_kind);
  return append_one(w, ev, NULL, 0, err);
}

gm_status_t gmt_writer_append_n(gmt_writer_t *w, const gmt_event_t *ev, size_t n, gm_err_t *err) {
  for (size_t i = 0; i < n; i++) {
    gm_status_t s = gmt_writer_append(w, &ev[i], err);
    if (s != GM_OK) return s;
  }
  return GM_OK;
}

gm_status_t gmt_writer_append_raw(gmt_writer_t *w, const gmt_event_t *ev, const void *ext, size_t ext_len,
                                  gm_err_t *err) {
  return append_one(w, ev, ext, ext_len, err);
}

static gm_status_t add_string(gmt_writer_t *w, uint32_t id, const char *s, gm_err_t *err) {
  if (strlen(s) > GMT_MAX_STRING) return gm_err_set(err, GM_ERR_INVAL, "string longer than %u bytes (limit GMT_MAX_STRING)", GMT_MAX_STRING);
  if (id == UINT32_MAX) return gm_err_set(err, GM_ERR_INVAL, "string id %u out of range (1 to %u)", id, UINT32_MAX - 1);
  int dense = id <= w->n_dense || (uint64_t)id <= 2ull * w->n_strs + DENSE_SLACK;
  if (dense && id > w->n_dense) {
    if ((size_t)id + 1 > w->dense_cap) { /* a realloc per id copied the table each time (issue 14) */
      size_t nc = w->dense_cap > 64 ? w->dense_cap : 64;
      while (nc < (size_t)id + 1) nc *= 2;
      wstr_t **nb = realloc(w->by_id, nc * sizeof *nb);
      if (!nb) return gm_err_set(err, GM_ERR_NOMEM, "out of memory");
      w->by_id = nb;
      w->dense_cap = nc;
    }
    memset(w->by_id + w->n_dense + 1, 0, (id - w->n_dense) * sizeof *w->by_id);
    w->n_dense = id;
  }
  wstr_t *e = calloc(1, sizeof *e);
  if (!e || !(e->s = strdup(s))) {
    free(e);
    return gm_err_set(err, GM_ERR_NOMEM, "out of memory");
  }
  e->id = id;
  if (dense) w->by_id[id] = e;
  else HASH_ADD(hh_id, w->sparse_ids, id, sizeof e->id, e);
  HASH_ADD_KEYPTR(hh, w->by_str, e->s, strlen(e->s), e);
  if (id > w->n_ids) w->n_ids = id;
  w->n_strs++;
  return GM_OK;
}

gm_status_t gmt_writer_intern(gmt_writer_t *w, const char *s, uint32_t *id, gm_err_t *err) {
  wstr_t *e;
  HASH_FIND_STR(w->by_str, s, e);
  if (e) {
    *id = e->id;
    return GM_OK;
  }
  gm_status_t st = add_string(w, w->n_ids + 1, s, err);
  if (st == GM_OK) *id = w->n_ids;
  return st;
}

gm_status_t gmt_writer_intern_id(gmt_writer_t *w, uint32_t id, const char *s, gm_err_t *err) {
  if (id == GMT_NO_STRING) return gm_err_set(err, GM_ERR_INVAL, "string id 0 is reserved");
  wstr_t *have = find_id(w, id);
  if (have) {
    if (strcmp(have->s, s) == 0) return GM_OK;
    return gm_err_set(err, GM_ERR_INVAL, "string id %u already holds a different string", id);
  }
  wstr_t *e;
  HASH_FIND_STR(w->by_str, s, e);
  if (e) return gm_err_set(err, GM_ERR_INVAL, "string for id %u already has id %u", id, e->id);
  return add_string(w, id, s, err);
}

void gmt_writer_add_dropped(gmt_writer_t *w, uint64_t n) { w->dropped += n; }

void gmt_writer_skip_seq(gmt_writer_t *w, uint64_t n) { w->seq += n; }

void gmt_writer_force_versions(gmt_writer_t *w, uint32_t version, uint32_t min_reader) {
  gmt_buf_t b = {0};
  if (gmt_header_encode(&w->hdr, version, min_reader, &b) == 0 && b.len == w->header_len)
    if (pwrite(w->fd, b.p, b.len, 0) != (ssize_t)b.len) w->failed = GM_ERR_IO;
  gmt_buf_free(&b);
}

gm_status_t gmt_writer_flush(gmt_writer_t *w, gm_err_t *err) { return cut(w, err); }

static gm_status_t write_index(gmt_writer_t *w, gm_err_t *err) {
  size_t n = GMT_FRAME_HDR + GMT_INDEX_FIXED + w->n_idx * GMT_INDEX_ENTRY_SIZE;
  w->out.len = 0;
  if (gmt_buf_reserve(&w->out, n + GMT_FOOTER_FRAME)) return gm_err_set(err, GM_ERR_NOMEM, "out of memory");
  uint8_t *p = w->out.p;
  uint64_t index_off = w->off;
  gmt_put32(p, GMT_MAGIC_INDEX);
  gmt_put32(p + 4, (uint32_t)(n - GMT_FRAME_HDR));
  memcpy(p + 8, "GMTI", 4);
  gmt_put64(p + 12, w->n_idx);
  for (size_t i = 0; i < w->n_idx; i++) {
    uint8_t *e = p + GMT_FRAME_HDR + GMT_INDEX_FIXED + i * GMT_INDEX_ENTRY_SIZE;
    gmt_put64(e, w->idx[i].offset);
    gmt_put64(e + 8, w->idx[i].seq);
    gmt_put64(e + 16, w->idx[i].first_ts);
    gmt_put32(e + 24, w->idx[i].events);
    gmt_put32(e + 28, 0);
  }
  uint32_t icrc = gmt_crc32c(0, p + GMT_FRAME_HDR, n - GMT_FRAME_HDR);
  uint8_t *f = p + n;
  gmt_put32(f, GMT_MAGIC_FOOTER);
  gmt_put32(f + 4, GMT_FOOTER_SIZE);
  memcpy(f + 8, "GMTF", 4);
  gmt_put64(f + 12, index_off);
  gmt_put32(f + 20, icrc);
  gmt_put32(f + 24, 0);
  gmt_put32(f + 28, gmt_crc32c(0, f + 8, 20));
  return write_all(w, p, n + GMT_FOOTER_FRAME, err);
}

static void destroy(gmt_writer_t *w) {
  wstr_t *e, *tmp;
  HASH_CLEAR(hh_id, w->sparse_ids);
  HASH_ITER(hh, w->by_str, e, tmp) {
    HASH_DEL(w->by_str, e);
    free(e->s);
    free(e);
  }
  free(w->by_id);
  free(w->idx);
  gmt_enc_free(&w->enc);
  gmt_buf_free(&w->payload);
  gmt_buf_free(&w->out);
  ZSTD_freeCCtx(w->cctx);
  gmt_header_free(&w->hdr);
  free(w->name);
  free(w);
}

gm_status_t gmt_writer_seal(gmt_writer_t *w, gm_err_t *err) {
  if (w->sealed) return GM_OK;
  gm_status_t s = cut(w, err);
  if (s == GM_OK) s = write_index(w, err);
  if (s == GM_OK) w->sealed = 1;
  else if (!w->failed) w->failed = s;
  return s;
}

gm_status_t gmt_writer_close(gmt_writer_t *w, gm_err_t *err) {
  if (!w) return GM_OK;
  gm_status_t s = gmt_writer_seal(w, err);
  if (close(w->fd) != 0 && s == GM_OK) s = gm_err_set(err, GM_ERR_IO, "close: %s", strerror(errno));
  if (w->atomic) {
    /* the complete trace takes the name; anything less leaves the old file as it was */
    if (s == GM_OK) s = gm_out_commit(w->atomic, err);
    else gm_out_abort(w->atomic);
  }
  destroy(w);
  return s;
}

void gmt_writer_abandon(gmt_writer_t *w) {
  if (!w) return;
  close(w->fd);
  gm_out_abort(w->atomic); /* an atomic writer leaves nothing behind */
  destroy(w);
}

uint64_t gmt_writer_events(const gmt_writer_t *w) { return w->events; }
uint64_t gmt_writer_bytes(const gmt_writer_t *w) { return w->off; }

/* ---- marks after the fact (SPEC.md §3.4): the header rewritten in place, inside its room ---- */

static gm_status_t rewrite_header(gmt_writer_t *w, const gmt_coverage_t *add, gm_err_t *err) {
  gmt_coverage_t c;
  gmt_coverage(&w->hdr, NULL, &c);
  gmt_coverage_fold(&c, add);
  gm_status_t s = gmt_coverage_mark(&w->hdr, &c, err);
  if (s != GM_OK) return s;
  gmt_buf_t b = {0};
  if (gmt_header_encode_fit(&w->hdr, w->header_len, w->hdr.format_version, w->hdr.min_reader, &b)) {
    gmt_buf_free(&b);
    return gm_err_set(err, GM_ERR_UNSUPPORTED, "no room in the header for its coverage marks (%zu bytes of room)",
                      w->hdr.room);
  }
  ssize_t k = pwrite(w->fd, b.p, b.len, 0);
  int e = errno;
  gmt_buf_free(&b);
  if (k != (ssize_t)w->header_len)
    return gm_err_set(err, GM_ERR_IO, "rewriting the header: %s", k < 0 ? strerror(e) : "short write");
  return GM_OK;
}

gm_status_t gmt_writer_mark(gmt_writer_t *w, const gmt_coverage_t *add, gm_err_t *err) {
  if (w->failed) return gm_err_set(err, w->failed, "an earlier write failed");
  return rewrite_header(w, add, err);
}

uint64_t gmt_writer_events_written(const gmt_writer_t *w, uint64_t *last_ts_ns) {
  if (last_ts_ns) *last_ts_ns = w->good_last_ts;
  return w->good_events;
}

gm_status_t gmt_writer_stop(gmt_writer_t *w, const gmt_coverage_t *add, gm_err_t *err) {
  if (!w) return GM_OK;
  if (w->atomic) { /* an output made in one go is whole or absent */
    gmt_writer_abandon(w);
    return GM_OK;
  }
  /* a chunk half written is cut off: the file ends with whole frames */
  gm_status_t s = GM_OK;
  if (ftruncate(w->fd, (off_t)w->good_off) != 0)
    s = gm_err_set(err, GM_ERR_IO, "cutting the trace back to its last chunk: %s", strerror(errno));
  gmt_coverage_t c;
  if (add) c = *add;
  else memset(&c, 0, sizeof c);
  c.partial = 1;
  c.why |= GMT_COV_STOPPED;
  c.has_end = 1;
  c.to_event = w->good_events;
  c.to_ns = w->good_last_ts;
  gm_err_t e2;
  gm_err_clear(&e2);
  gm_status_t m = rewrite_header(w, &c, &e2);
  if (s == GM_OK && m != GM_OK) {
    s = m;
    if (err) *err = e2;
  }
  /* the index, if the disk takes it (it is small: 32 bytes a chunk); else the file stays cut */
  if (s == GM_OK) {
    w->failed = GM_OK;
    w->off = w->good_off;
    if (write_index(w, &e2) != GM_OK && ftruncate(w->fd, (off_t)w->good_off) != 0) {
      /* the index's bytes stay as garbage after the last chunk: a reader salvages up to it */
    }
  }
  close(w->fd);
  destroy(w);
  return s;
}
