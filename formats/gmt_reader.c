/* gmt_reader.c: reads a trace from a file (mmap) or memory (SPEC.md "Reading").
 *
 * Model: the whole file is one byte range. Open checks the header frame, then looks for the
 * footer in the last 32 bytes: with a valid footer the index is loaded and checked, and the
 * chunk walk is bounded by the index offset (anything running past it is corruption); without
 * one the file is truncated (a killed writer) and the walk goes to the end of the file,
 * stopping quietly at the first incomplete frame. Chunks are decoded whole into an event
 * array (gmt_decode.c); next/next_batch hand events out of it. The first error is sticky:
 * every later call returns it again, until a seek. Input is untrusted throughout.
 *
 * Salvage (GMT_READ_SALVAGE, SPEC.md "Salvage"): a frame that fails a check is skipped instead
 * (gmt_salvage.c says how). Damage is counted in the stats, never hidden. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uthash.h>
#include <zstd.h>

#include "formats/gmt_reader_state.h"

static gm_status_t open_common(gmt_reader_t *r, gm_err_t *err);

static gm_status_t new_reader(gmt_reader_t **out, gm_err_t *err) {
  gmt_reader_t *r = calloc(1, sizeof *r);
  if (!r || !(r->dctx = ZSTD_createDCtx()) || !(r->addr_model = malloc(sizeof *r->addr_model))) {
    if (r) ZSTD_freeDCtx(r->dctx);
    free(r);
    return gm_err_set(err, GM_ERR_NOMEM, "out of memory");
  }
  gmt_header_init(&r->hdr);
  *out = r;
  return GM_OK;
}

gm_status_t gmt_reader_open_mem_flags(gmt_reader_t **out, const void *buf, size_t len, unsigned flags,
                                      gm_err_t *err) {
  *out = NULL;
  gmt_reader_t *r = NULL;
  gm_status_t s = new_reader(&r, err);
  if (s != GM_OK) return s;
  r->flags = flags;
  r->buf = buf;
  r->len = len;
  if ((s = open_common(r, err)) != GM_OK) {
    gmt_reader_close(r);
    return s;
  }
  *out = r;
  return GM_OK;
}

/* Pipes and other files that cannot be mapped are read whole, once their first bytes show a
 * trace's header frame: /dev/zero or a stream of anything else is refused after 12 bytes
 * instead of read until memory runs out. */
static gm_status_t read_all(int fd, gmt_reader_t *r, gm_err_t *err) {
  size_t cap = 1 << 16, n = 0;
  int checked = 0;
  uint8_t *p = malloc(cap);
  for (;;) {
    if (p && !checked && n >= GMT_FRAME_HDR + 4) {
      checked = 1;
      if (gmt_get32(p) != GMT_MAGIC_HEADER || memcmp(p + GMT_FRAME_HDR, "GMTH", 4) != 0) {
        free(p);
        return gm_err_set(err, GM_ERR_FORMAT, "not a gpumem trace");
      }
    }
    if (!p) return gm_err_set(err, GM_ERR_NOMEM, "out of memory");
    if (n == cap) {
      uint8_t *np = realloc(p, cap *= 2);
      if (!np) free(p);
      p = np;
      continue;
    }
    ssize_t k = read(fd, p + n, cap - n);
    if (k < 0 && errno == EINTR) continue;
    if (k < 0) {
      free(p);
      return gm_err_set(err, GM_ERR_IO, "read: %s", strerror(errno));
    }
    if (k == 0) break;
    n += (size_t)k;
  }
  r->owned = p;
  r->buf = p;
  r->len = n;
  return GM_OK;
}

gm_status_t gmt_reader_open_mem(gmt_reader_t **out, const void *buf, size_t len, gm_err_t *err) {
  return gmt_reader_open_mem_flags(out, buf, len, GMT_READ_STRICT, err);
}

gm_status_t gmt_reader_open_flags(gmt_reader_t **out, const char *path, unsigned flags, gm_err_t *err) {
  *out = NULL;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return gm_err_set(err, GM_ERR_IO, "%s", strerror(errno));
  gmt_reader_t *r = NULL;
  gm_status_t s = new_reader(&r, err);
  if (s != GM_OK) {
    close(fd);
    return s;
  }
  r->flags = flags;
  struct stat sb;
  if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size > 0) {
    void *m = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m != MAP_FAILED) {
      r->map = m;
      r->buf = m;
      r->len = (size_t)sb.st_size;
    }
  }
  if (!r->buf) s = read_all(fd, r, err);
  close(fd);
  if (s == GM_OK) s = open_common(r, err);
  if (s != GM_OK) {
    gmt_reader_close(r);
    return s;
  }
  *out = r;
  return GM_OK;
}

gm_status_t gmt_reader_open(gmt_reader_t **out, const char *path, gm_err_t *err) {
  return gmt_reader_open_flags(out, path, GMT_READ_STRICT, err);
}

/* Footer and index (SPEC.md "Index and footer"). Absent footer: truncated, not an error. */
static gm_status_t load_index(gmt_reader_t *r, gm_err_t *err) {
  r->limit = r->len;
  if (r->len < r->data_start + GMT_FOOTER_FRAME) return GM_OK;
  size_t fo = r->len - GMT_FOOTER_FRAME;
  const uint8_t *f = r->buf + fo;
  if (gmt_get32(f) != GMT_MAGIC_FOOTER || gmt_get32(f + 4) != GMT_FOOTER_SIZE || memcmp(f + 8, "GMTF", 4))
    return GM_OK;
  if (gmt_crc32c(0, f + 8, 20) != gmt_get32(f + 28))
    return gm_err_set(err, GM_ERR_CORRUPT, "footer at offset %zu: checksum mismatch", fo);
  uint64_t io = gmt_get64(f + 12);
  if (io < r->data_start || io > fo - GMT_FRAME_HDR - GMT_INDEX_FIXED)
    return gm_err_set(err, GM_ERR_CORRUPT, "footer at offset %zu: index offset %llu out of range", fo,
                      (unsigned long long)io);
  r->footer_ok = 1; /* from here on, a failure is the index's own */
  r->footer_index = (size_t)io;
  const uint8_t *x = r->buf + io;
  uint64_t isz = gmt_get32(x + 4);
  if (gmt_get32(x) != GMT_MAGIC_INDEX || io + GMT_FRAME_HDR + isz != fo || memcmp(x + 8, "GMTI", 4))
    return gm_err_set(err, GM_ERR_CORRUPT, "index at offset %llu: bad frame", (unsigned long long)io);
  if (gmt_crc32c(0, x + GMT_FRAME_HDR, isz) != gmt_get32(f + 20))
    return gm_err_set(err, GM_ERR_CORRUPT, "index at offset %llu: checksum mismatch", (unsigned long long)io);
  uint64_t n = gmt_get64(x + 12);
  if (n > (isz - GMT_INDEX_FIXED) / GMT_INDEX_ENTRY_SIZE || GMT_INDEX_FIXED + n * GMT_INDEX_ENTRY_SIZE != isz)
    return gm_err_set(err, GM_ERR_CORRUPT, "index at offset %llu: bad entry count", (unsigned long long)io);
  r->idx = malloc((n ? n : 1) * sizeof *r->idx);
  if (!r->idx) return gm_err_set(err, GM_ERR_NOMEM, "out of memory");
  for (uint64_t i = 0; i < n; i++) {
    const uint8_t *e = x + GMT_FRAME_HDR + GMT_INDEX_FIXED + i * GMT_INDEX_ENTRY_SIZE;
    r->idx[i] = (ridx_t){gmt_get64(e), gmt_get64(e + 8), gmt_get64(e + 16), gmt_get32(e + 24)};
    if (r->idx[i].off < r->data_start || r->idx[i].off >= io || (i && r->idx[i].off <= r->idx[i - 1].off))
      return gm_err_set(err, GM_ERR_CORRUPT, "index at offset %llu: entry %llu out of order", (unsigned long long)io,
                        (unsigned long long)i);
  }
  r->n_idx = n;
  r->limit = io;
  r->st.has_index = 1;
  return GM_OK;
}

static gm_status_t open_common(gmt_reader_t *r, gm_err_t *err) {
  gm_status_t s = gmt_header_decode(r->buf, r->len, &r->hdr, &r->data_start, err);
  if (s == GM_ERR_TRUNCATED && r->len >= GMT_FOOTER_FRAME &&
      gmt_get32(r->buf + r->len - GMT_FOOTER_FRAME) == GMT_MAGIC_FOOTER) /* a complete file cannot */
    return gm_err_set(err, GM_ERR_CORRUPT, "header at offset 0: frame size runs past the end of the file");
  if (s == GM_ERR_TRUNCATED) r->st.truncated = 1;
  if (s != GM_OK) return s;
  gm_err_t ie;
  gm_err_clear(&ie);
  s = load_index(r, &ie);
  if (s == GM_ERR_CORRUPT && (r->flags & GMT_READ_SALVAGE)) {
    /* Read on without the index: the chunks are found by walking and scanning. A footer that
     * held says where the chunks end. */
    r->damage = ie;
    r->st.index_damaged = 1;
    r->st.has_index = 0;
    r->n_idx = 0;
    r->limit = r->footer_ok ? r->footer_index : r->len;
  } else if (s != GM_OK) {
    if (err) *err = ie;
    return s;
  }
  r->st.truncated = !r->st.has_index && !r->footer_ok;
  r->pos = r->data_start;
  return GM_OK;
}

/* Strings are kept for the current chunk only (SPEC.md 5.3: every chunk carries the strings
 * its records use): a file of small, highly compressible chunks that each define 64 MiB of
 * strings would otherwise make the reader hold all of them. */
static void clear_strings(gmt_reader_t *r) {
  rstr_t *e, *tmp;
  HASH_ITER(hh, r->strs, e, tmp) {
    HASH_DEL(r->strs, e);
    free(e->s);
    free(e);
  }
}

void gmt_reader_close(gmt_reader_t *r) {
  if (!r) return;
  clear_strings(r);
  if (r->map) munmap(r->map, r->len);
  free(r->owned);
  free(r->idx);
  free(r->evs);
  free(r->raw);
  ZSTD_freeDCtx(r->dctx);
  free(r->addr_model);
  gmt_header_free(&r->hdr);
  free(r);
}

const gmt_header_t *gmt_reader_header(const gmt_reader_t *r) { return &r->hdr; }

const char *gmt_reader_string(const gmt_reader_t *r, uint32_t id) {
  rstr_t *e;
  HASH_FIND(hh, r->strs, &id, sizeof id, e);
  return e ? e->s : NULL;
}

static gm_status_t on_string(void *ctx, uint32_t id, const char *s, uint32_t len, gm_err_t *err) {
  gmt_reader_t *r = ctx;
  rstr_t *e;
  HASH_FIND(hh, r->strs, &id, sizeof id, e);
  if (e) return GM_OK; /* a chunk that defines an id twice: the first copy stays */
  if (!(e = calloc(1, sizeof *e)) || !(e->s = malloc((size_t)len + 1))) {
    free(e);
    return gm_err_set(err, GM_ERR_NOMEM, "out of memory");
  }
  memcpy(e->s, s, len);
  e->s[len] = 0;
  e->id = id;
  HASH_ADD(hh, r->strs, id, sizeof e->id, e);
  return GM_OK;
}

/* The file ends inside a frame: a truncated file ends here quietly; a file with a footer
 * cannot, so that is corruption. A salvaging reader first looks for a good chunk further on
 * (a damaged size field also looks like this): GM_ERR_TRUNCATED tells gmt_salvage_skip so. */
static gm_status_t short_frame(gmt_reader_t *r, const char *what, gm_err_t *err) {
  if (r->st.has_index || r->footer_ok) return gm_err_set(err, GM_ERR_CORRUPT, "%s runs past the index", what);
  if (r->flags & GMT_READ_SALVAGE) return gm_err_set(err, GM_ERR_TRUNCATED, "%s runs past the end of the file", what);
  r->st.truncated = 1;
  r->done = 1;
  return GM_END;
}

static gm_status_t decode_chunk(gmt_reader_t *r, const uint8_t *d, uint32_t dsize, gm_err_t *err) {
  size_t remain = r->limit - r->pos - GMT_FRAME_HDR - dsize;
  uint32_t events = gmt_get32(d + 32), raw = gmt_get32(d + 36), cs = gmt_get32(d + 40);
  uint64_t seq = gmt_get64(d + 8);
  if (cs > remain) return short_frame(r, "chunk data", err);
  const uint8_t *z = d + dsize;
  uint32_t crc = gmt_crc32c(0, d + 8, dsize - 8);
  if (gmt_crc32c(crc, z, cs) != gmt_get32(d + 4)) return gm_err_set(err, GM_ERR_CORRUPT, "checksum mismatch");
  if (r->st.has_index && (r->chunk_no >= r->n_idx || r->idx[r->chunk_no].off != r->pos))
    return gm_err_set(err, GM_ERR_CORRUPT, "chunk is not where the index says");
  if (events > GMT_MAX_CHUNK_EVENTS || raw > GMT_MAX_CHUNK_RAW)
    return gm_err_set(err, GM_ERR_CORRUPT, "implausible size (%u events, %u bytes)", events, raw);
  if (seq < r->expect_seq)
    return gm_err_set(err, GM_ERR_CORRUPT, "sequence number %llu after %llu", (unsigned long long)seq,
                      (unsigned long long)r->expect_seq);
  if (cs < 4 || gmt_get32(z) != GMT_MAGIC_ZSTD || ZSTD_findFrameCompressedSize(z, cs) != cs ||
      ZSTD_getFrameContentSize(z, cs) != raw)
    return gm_err_set(err, GM_ERR_CORRUPT, "not one zstd frame of %u bytes", raw);
  if (raw > r->raw_cap) {
    uint8_t *nr = realloc(r->raw, raw);
    if (!nr) return gm_err_set(err, GM_ERR_NOMEM, "out of memory");
    r->raw = nr;
    r->raw_cap = raw;
  }
  size_t got = ZSTD_decompressDCtx(r->dctx, r->raw, raw, z, cs);
  if (ZSTD_isError(got)) return gm_err_set(err, GM_ERR_CORRUPT, "zstd: %s", ZSTD_getErrorName(got));
  if (got != raw) return gm_err_set(err, GM_ERR_CORRUPT, "zstd: %zu bytes, descriptor says %u", got, raw);
  uint64_t unknown = 0;
  clear_strings(r);
  gm_status_t s = gmt_dec_payload(r->raw, raw, events, &r->evs, &r->cap, &r->n, &unknown, r->addr_model, on_string, r, err);
  if (s != GM_OK) return s;
  r->i = 0;
  r->st.seq_gaps += seq - r->expect_seq;
  r->expect_seq = seq + 1;
  r->st.dropped += gmt_get64(d + 16);
  r->st.unknown_records += unknown;
  r->st.chunks++;
  r->chunk_no++;
  r->pos = (size_t)(z + cs - r->buf);
  return GM_OK;
}

/* The frame at r->pos: a chunk (decoded, r->n events, maybe 0) or a skipped frame: GM_OK;
 * the end of the chunks: GM_END; an error leaves r->pos at the frame. */
static gm_status_t walk_frame(gmt_reader_t *r, gm_err_t *err) {
  size_t remain = r->limit - r->pos;
  if (remain == 0) return GM_END;
  if (remain < GMT_FRAME_HDR) return short_frame(r, "frame header", err);
  const uint8_t *f = r->buf + r->pos;
  uint32_t magic = gmt_get32(f), size = gmt_get32(f + 4);
  if (magic == GMT_MAGIC_CHUNK) {
    if (size > remain - GMT_FRAME_HDR) return short_frame(r, "chunk descriptor", err);
    if (size < GMT_CHUNK_DESC_SIZE || memcmp(f + 8, "GMTC", 4))
      return gm_err_set(err, GM_ERR_CORRUPT, "bad chunk descriptor");
    return decode_chunk(r, f + GMT_FRAME_HDR, size, err);
  }
  if (magic == GMT_MAGIC_INDEX && !r->st.has_index) {
    /* No valid footer: the writer was cut while finishing, or the footer is damaged. */
    if (size <= remain - GMT_FRAME_HDR && remain - GMT_FRAME_HDR - size >= GMT_FOOTER_FRAME)
      return gm_err_set(err, GM_ERR_CORRUPT, "index is followed by a damaged footer");
    r->st.truncated = 1;
    return GM_END;
  }
  if (magic == GMT_MAGIC_ZSTD) return gm_err_set(err, GM_ERR_CORRUPT, "zstd frame without a chunk descriptor");
  if ((magic & GMT_MAGIC_SKIPPABLE_MASK) != GMT_MAGIC_SKIPPABLE || magic <= GMT_MAGIC_FOOTER)
    return gm_err_set(err, GM_ERR_CORRUPT, "unexpected frame (magic 0x%08x)", magic);
  /* a skippable frame of a variant this version does not use: skip it */
  if (size > remain - GMT_FRAME_HDR) return short_frame(r, "skippable frame", err);
  r->pos += GMT_FRAME_HDR + (size_t)size;
  return GM_OK;
}

/* Walks frames from r->pos until a chunk with events is decoded, or the end. */
static gm_status_t next_chunk(gmt_reader_t *r, gm_err_t *err) {
  while (!r->done) {
    gm_status_t s = walk_frame(r, err);
    if (s < 0 && s != GM_ERR_NOMEM && (r->flags & GMT_READ_SALVAGE)) s = gmt_salvage_skip(r, s, err);
    if (s < 0) return s;
    if (s == GM_END) break;
    if (r->n) return GM_OK;
  }
  r->done = 1;
  return GM_END;
}

/* The mapped pages of the chunks decoded so far given back (GMT_READ_DROP_BEHIND): the events
 * are in r->evs, the frame is not read again unless the caller seeks back (then the kernel
 * reads the file's pages again: the mapping is private and never written). */
static void drop_behind(gmt_reader_t *r) {
  if (!(r->flags & GMT_READ_DROP_BEHIND) || !r->map) return;
  long pg = sysconf(_SC_PAGESIZE);
  size_t upto = pg > 0 ? r->pos / (size_t)pg * (size_t)pg : 0;
  if (upto < r->dropped_to + (1u << 20)) return; /* a call per MiB */
  (void)madvise((uint8_t *)r->map + r->dropped_to, upto - r->dropped_to, MADV_DONTNEED);
  r->dropped_to = upto;
}

static gm_status_t refill(gmt_reader_t *r, gm_err_t *err) {
  if (r->sticky.status != GM_OK) {
    if (err) *err = r->sticky;
    return r->sticky.status;
  }
  gm_err_t e;
  gm_err_clear(&e);
  r->n = r->i = 0;
  gm_status_t s = next_chunk(r, &e);
  if (s == GM_OK) drop_behind(r);
  if (s < 0) {
    gm_err_wrap(&e, "chunk %llu at offset %zu", (unsigned long long)r->chunk_no, r->pos);
    r->sticky = e;
    r->n = r->i = 0;
    if (err) *err = e;
  }
  return s;
}

gm_status_t gmt_reader_next(gmt_reader_t *r, gmt_event_t *ev, gm_err_t *err) {
  if (r->i == r->n) {
    gm_status_t s = refill(r, err);
    if (s != GM_OK) return s;
  }
  *ev = r->evs[r->i++];
  r->st.events++;
  return GM_OK;
}

gm_status_t gmt_reader_next_batch(gmt_reader_t *r, gmt_event_t *evs, size_t cap, size_t *n, gm_err_t *err) {
  *n = 0;
  if (cap == 0) return GM_OK;
  if (r->i == r->n) {
    gm_status_t s = refill(r, err);
    if (s != GM_OK) return s;
  }
  size_t k = r->n - r->i < cap ? r->n - r->i : cap;
  memcpy(evs, r->evs + r->i, k * sizeof *evs);
  r->i += k;
  r->st.events += k;
  *n = k;
  return GM_OK;
}

gm_status_t gmt_reader_next_view(gmt_reader_t *r, const gmt_event_t **evs, size_t *n, gm_err_t *err) {
  *n = 0;
  *evs = NULL;
  if (r->i == r->n) {
    gm_status_t s = refill(r, err);
    if (s != GM_OK) return s;
  }
  *evs = r->evs + r->i;
  *n = r->n - r->i;
  r->st.events += *n;
  r->i = r->n;
  return GM_OK;
}

uint64_t gmt_reader_chunk_count(const gmt_reader_t *r) { return r->n_idx; }

gm_status_t gmt_reader_seek_chunk(gmt_reader_t *r, uint64_t i, gm_err_t *err) {
  if (!r->st.has_index) return gm_err_set(err, GM_ERR_UNSUPPORTED, "no index (truncated trace): cannot seek");
  if (i >= r->n_idx)
    return gm_err_set(err, GM_ERR_INVAL, "chunk %llu out of range (%llu chunks)", (unsigned long long)i,
                      (unsigned long long)r->n_idx);
  r->pos = r->idx[i].off;
  if (r->pos < r->dropped_to) r->dropped_to = 0; /* given back before: resident again as it is read */
  r->chunk_no = i;
  r->expect_seq = r->idx[i].seq;
  r->n = r->i = 0;
  r->done = 0;
  gm_err_clear(&r->sticky);
  r->sticky.status = GM_OK;
  return GM_OK;
}

gm_status_t gmt_reader_chunk_info(const gmt_reader_t *r, uint64_t i, uint64_t *first_ts_ns, uint64_t *events,
                                  gm_err_t *err) {
  if (i >= r->n_idx)
    return gm_err_set(err, GM_ERR_INVAL, "chunk %llu out of range (%llu chunks)", (unsigned long long)i,
                      (unsigned long long)r->n_idx);
  if (first_ts_ns) *first_ts_ns = r->idx[i].first_ts;
  if (events) *events = r->idx[i].events;
  return GM_OK;
}

const gmt_reader_stats_t *gmt_reader_stats(const gmt_reader_t *r) { return &r->st; }

const char *gmt_reader_damage(const gmt_reader_t *r) { return r->damage.status != GM_OK ? r->damage.msg : NULL; }
