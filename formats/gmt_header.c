/* gmt_header.c: the trace header (provenance) and the name tables of kinds and modes.
 *
 * The header is the first frame of every trace (SPEC.md "Header frame"): a zstd skippable
 * frame whose payload is a fixed prefix (magic, writer version, minimum reader version,
 * CRC-32C) followed by tagged fields. Tags are declared once in GMT_HEADER_FIELDS and the
 * encoder, the decoder and the CSV header lines (gmt_csv.c) come from that list; a reader
 * skips tags it does not know, so newer writers can add provenance without a version bump. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/gmt_internal.h"

/* ---- names ---- */

static const char *const kind_names[GMT_EV_KIND_MAX] = {
#define GMT_KIND_NAME(name, val, str) [val] = str,
    GMT_KIND_LIST(GMT_KIND_NAME)
#undef GMT_KIND_NAME
};

const char *gmt_kind_name(unsigned kind) { return kind < GMT_EV_KIND_MAX ? kind_names[kind] : NULL; }

unsigned gmt_kind_from_name(const char *name) {
  for (unsigned k = 1; k < GMT_EV_KIND_MAX; k++)
    if (kind_names[k] && name && strcmp(kind_names[k], name) == 0) return k;
  return 0;
}

static const char *const mem_names[GMT_MEM_KIND_MAX] = {"unknown", "device", "pinned", "managed",
                                                        "device_static", "pageable", "array"};

const char *gmt_mem_kind_name(unsigned m) { return m < GMT_MEM_KIND_MAX ? mem_names[m] : NULL; }

unsigned gmt_mem_kind_from_name(const char *name) {
  for (unsigned k = 0; k < GMT_MEM_KIND_MAX; k++)
    if (name && strcmp(mem_names[k], name) == 0) return k;
  return 0;
}

static const char *const mode_names[] = {"unknown", "requests", "native", "torch", "import", "synthetic",
                                             "torch-history"};
#define N_MODES (sizeof mode_names / sizeof mode_names[0])

const char *gmt_capture_mode_name(unsigned mode) { return mode < N_MODES ? mode_names[mode] : NULL; }

unsigned gmt_capture_mode_from_name(const char *name) {
  for (unsigned k = 0; k < N_MODES; k++)
    if (name && strcmp(mode_names[k], name) == 0) return k;
  return 0;
}

/* ---- header object ---- */

void gmt_header_init(gmt_header_t *h) {
  memset(h, 0, sizeof *h);
  h->rank = -1;
  h->world_size = -1;
}

void gmt_header_free(gmt_header_t *h) {
  if (!h) return;
#define GMT_HF_FREE_STR(tag, name) free(h->name);
#define GMT_HF_FREE_NOP(tag, name)
  GMT_HEADER_FIELDS(GMT_HF_FREE_NOP, GMT_HF_FREE_NOP, GMT_HF_FREE_NOP, GMT_HF_FREE_STR, GMT_HF_FREE_NOP)
  for (size_t i = 0; i < h->n_kv; i++) {
    free(h->kv[i].key);
    free(h->kv[i].value);
  }
  free(h->kv);
  gmt_header_init(h);
}

gm_status_t gmt_header_set(char **field, const char *value, gm_err_t *err) {
  char *c = NULL;
  if (value && !(c = strdup(value))) return gm_err_set(err, GM_ERR_NOMEM, "out of memory");
  free(*field);
  *field = c;
  return GM_OK;
}

gm_status_t gmt_header_kv_set(gmt_header_t *h, const char *key, const char *value, gm_err_t *err) {
  if (!key || !value) return gm_err_set(err, GM_ERR_INVAL, "header kv: NULL key or value");
  for (size_t i = 0; i < h->n_kv; i++)
    if (strcmp(h->kv[i].key, key) == 0) return gmt_header_set(&h->kv[i].value, value, err);
  if (h->n_kv >= GMT_MAX_KV) /* each set scans the others: a bound on the work, not only memory */
    return gm_err_set(err, GM_ERR_INVAL, "header: more than %d key/value pairs (limit GMT_MAX_KV)", GMT_MAX_KV);
  gmt_kv_t *kv = realloc(h->kv, (h->n_kv + 1) * sizeof *kv);
  if (!kv) return gm_err_set(err, GM_ERR_NOMEM, "out of memory");
  h->kv = kv;
  char *k = strdup(key), *v = strdup(value);
  if (!k || !v) {
    free(k);
    free(v);
    return gm_err_set(err, GM_ERR_NOMEM, "out of memory");
  }
  kv[h->n_kv++] = (gmt_kv_t){k, v};
  return GM_OK;
}

const char *gmt_header_kv_get(const gmt_header_t *h, const char *key) {
  for (size_t i = 0; i < h->n_kv; i++)
    if (strcmp(h->kv[i].key, key) == 0) return h->kv[i].value;
  return NULL;
}

gm_status_t gmt_header_copy(gmt_header_t *dst, const gmt_header_t *src, gm_err_t *err) {
  gmt_header_t h;
  gmt_header_init(&h);
  gm_status_t s = GM_OK;
#define GMT_HF_COPY_NUM(tag, name) h.name = src->name;
#define GMT_HF_COPY_STR(tag, name) \
  if (s == GM_OK && src->name) s = gmt_header_set(&h.name, src->name, err);
  GMT_HEADER_FIELDS(GMT_HF_COPY_NUM, GMT_HF_COPY_NUM, GMT_HF_COPY_NUM, GMT_HF_COPY_STR, GMT_HF_COPY_NUM)
  h.format_version = src->format_version;
  h.min_reader = src->min_reader;
  h.room = src->room;
  for (size_t i = 0; s == GM_OK && i < src->n_kv; i++) s = gmt_header_kv_set(&h, src->kv[i].key, src->kv[i].value, err);
  if (s != GM_OK) {
    gmt_header_free(&h);
    return s;
  }
  *dst = h;
  return GM_OK;
}

/* ---- encoding: "GMTH" u16 version u16 min_reader u32 crc, then (varint tag, varint len, bytes) ---- */

static int put_tlv(gmt_buf_t *b, uint64_t tag, const void *v, size_t len) {
  if (gmt_buf_reserve(b, len + 20)) return -1;
  b->len += gmt_put_varint(b->p + b->len, tag);
  b->len += gmt_put_varint(b->p + b->len, len);
  if (len) memcpy(b->p + b->len, v, len);
  b->len += len;
  return 0;
}

int gmt_header_encode(const gmt_header_t *h, uint32_t version, uint32_t min_reader, gmt_buf_t *out) {
  gmt_buf_t b = {0};
  uint8_t tmp[8];
  if (gmt_buf_reserve(&b, GMT_FRAME_HDR + GMT_HEADER_FIXED)) return -1;
  b.len = GMT_FRAME_HDR + GMT_HEADER_FIXED;
  int bad = 0;
#define GMT_HF_ENC_U32(tag, name) gmt_put32(tmp, (uint32_t)h->name), bad |= put_tlv(&b, tag, tmp, 4);
#define GMT_HF_ENC_U64(tag, name) gmt_put64(tmp, (uint64_t)h->name), bad |= put_tlv(&b, tag, tmp, 8);
#define GMT_HF_ENC_STR(tag, name) \
  if (h->name) bad |= put_tlv(&b, tag, h->name, strlen(h->name));
  GMT_HEADER_FIELDS(GMT_HF_ENC_U32, GMT_HF_ENC_U32, GMT_HF_ENC_U64, GMT_HF_ENC_STR, GMT_HF_ENC_U32)
  for (size_t i = 0; i < h->n_kv && !bad; i++) {
    /* kv value: varint key length, key, value */
    size_t kl = strlen(h->kv[i].key), vl = strlen(h->kv[i].value);
    uint8_t *kv = malloc(kl + vl + 10);
    if (!kv) {
      bad = 1;
      break;
    }
    size_t n = gmt_put_varint(kv, kl);
    memcpy(kv + n, h->kv[i].key, kl);
    memcpy(kv + n + kl, h->kv[i].value, vl);
    bad |= put_tlv(&b, GMT_HTAG_KV, kv, n + kl + vl);
    free(kv);
  }
  /* room: fields of at most 129 bytes (1-byte tag, 1-byte length, up to 127 zero bytes), so
   * any room but 1 is exactly representable and the split is the same every time */
  static const uint8_t zeros[127];
  for (size_t left = h->room; left >= 2 && !bad;) {
    size_t r = left - 2 > 127 ? 127 : left - 2;
    if (left - (r + 2) == 1) r--; /* never leave a single byte */
    bad |= put_tlv(&b, GMT_HTAG_ROOM, zeros, r);
    left -= r + 2;
  }
  if (bad) {
    gmt_buf_free(&b);
    return -1;
  }
  uint8_t *p = b.p + GMT_FRAME_HDR;
  gmt_put32(b.p, GMT_MAGIC_HEADER);
  gmt_put32(b.p + 4, (uint32_t)(b.len - GMT_FRAME_HDR));
  memcpy(p, "GMTH", 4);
  gmt_put16(p + 4, (uint16_t)version);
  gmt_put16(p + 6, (uint16_t)min_reader);
  uint32_t crc = gmt_crc32c(0, p, 8);
  crc = gmt_crc32c(crc, p + GMT_HEADER_FIXED, b.len - GMT_FRAME_HDR - GMT_HEADER_FIXED);
  gmt_put32(p + 8, crc);
  int r = gmt_buf_reserve(out, b.len);
  if (!r) {
    memcpy(out->p + out->len, b.p, b.len);
    out->len += b.len;
  }
  gmt_buf_free(&b);
  return r;
}

int gmt_header_encode_fit(const gmt_header_t *h, size_t frame_len, uint32_t version, uint32_t min_reader,
                          gmt_buf_t *out) {
  gmt_header_t bare = *h; /* shallow: only room differs */
  bare.room = 0;
  gmt_buf_t b = {0};
  if (gmt_header_encode(&bare, version, min_reader, &b)) return -1;
  size_t base = b.len;
  gmt_buf_free(&b);
  if (base > frame_len || frame_len - base == 1) return -1;
  bare.room = frame_len - base;
  size_t before = out->len;
  if (gmt_header_encode(&bare, version, min_reader, out)) return -1;
  return out->len - before == frame_len ? 0 : -1;
}

static gm_status_t set_str(char **f, const uint8_t *v, uint64_t len, gm_err_t *err) {
  if (memchr(v, 0, len)) return gm_err_set(err, GM_ERR_CORRUPT, "header: NUL inside a string");
  char *s = malloc(len + 1);
  if (!s) return gm_err_set(err, GM_ERR_NOMEM, "out of memory");
  memcpy(s, v, len);
  s[len] = 0;
  free(*f);
  *f = s;
  return GM_OK;
}

static gm_status_t dec_tlv(gmt_header_t *h, uint64_t tag, const uint8_t *v, uint64_t len, gm_err_t *err) {
#define GMT_HF_DEC_U32(t, name) \
  if (tag == t) {               \
    if (len != 4) return gm_err_set(err, GM_ERR_CORRUPT, "header: field %s has length %llu", #name, (unsigned long long)len); \
    h->name = gmt_get32(v);     \
    return GM_OK;               \
  }
#define GMT_HF_DEC_I32(t, name) \
  if (tag == t) {               \
    if (len != 4) return gm_err_set(err, GM_ERR_CORRUPT, "header: field %s has length %llu", #name, (unsigned long long)len); \
    h->name = (int32_t)gmt_get32(v); \
    return GM_OK;               \
  }
#define GMT_HF_DEC_U64(t, name) \
  if (tag == t) {               \
    if (len != 8) return gm_err_set(err, GM_ERR_CORRUPT, "header: field %s has length %llu", #name, (unsigned long long)len); \
    h->name = gmt_get64(v);     \
    return GM_OK;               \
  }
#define GMT_HF_DEC_STR(t, name) \
  if (tag == t) return set_str(&h->name, v, len, err);
  GMT_HEADER_FIELDS(GMT_HF_DEC_U32, GMT_HF_DEC_I32, GMT_HF_DEC_U64, GMT_HF_DEC_STR, GMT_HF_DEC_U32)
  if (tag == GMT_HTAG_KV) {
    const uint8_t *q = v, *e = v + len;
    uint64_t kl;
    if (!gmt_get_varint(&q, e, &kl) || kl > (uint64_t)(e - q)) return gm_err_set(err, GM_ERR_CORRUPT, "header: bad kv entry");
    char *k = NULL, *val = NULL;
    gm_status_t s = set_str(&k, q, kl, err);
    if (s == GM_OK) s = set_str(&val, q + kl, (uint64_t)(e - q) - kl, err);
    if (s == GM_OK) s = gmt_header_kv_set(h, k, val, err);
    if (s == GM_ERR_INVAL && err) s = err->status = GM_ERR_CORRUPT; /* past GMT_MAX_KV: not a trace we write */
    free(k);
    free(val);
    return s;
  }
  if (tag == GMT_HTAG_ROOM) {
    size_t lsize = 1; /* the field's whole size: 1-byte tag, varint length, bytes */
    for (uint64_t x = len; x >= 128; x >>= 7) lsize++;
    h->room += 1 + lsize + (size_t)len;
    return GM_OK;
  }
  return GM_OK; /* unknown tag: provenance of a newer writer, skipped */
}

/* Each header field's tag by name (HTAG_tool, ...), from GMT_HEADER_FIELDS. */
enum {
#define HTAG_OF(tag, field) HTAG_##field = tag,
  GMT_HEADER_FIELDS(HTAG_OF, HTAG_OF, HTAG_OF, HTAG_OF, HTAG_OF)
#undef HTAG_OF
};

/* A trace from a newer writer: say which tools to install. The tagged fields are read as far
 * as they go (their framing is part of every format version) for the writer's name, e.g.
 * "gpurec 0.3.0 import": a gpumem tool's version is the release that reads its traces. */
static gm_status_t too_new(const gmt_header_t *h, const uint8_t *q, const uint8_t *e, gm_err_t *err) {
  char tool[64] = "", by[96], version[24] = "";
  uint64_t tag, len;
  while (q < e && gmt_get_varint(&q, e, &tag) && gmt_get_varint(&q, e, &len) &&
         len <= (uint64_t)(e - q)) {
    if (tag == HTAG_tool && len < sizeof tool) {
      memcpy(tool, q, (size_t)len);
      tool[len] = '\0';
      break;
    }
    q += len;
  }
  for (char *c = tool; *c; c++)
    if ((unsigned char)*c < 0x20 || (unsigned char)*c > 0x7e) *c = '?'; /* it goes to a terminal */
  const char *sp = strchr(tool, ' ');
  if (strncmp(tool, "gp", 2) == 0 && sp && sp[1] >= '0' && sp[1] <= '9') {
    size_t n = strspn(sp + 1, "0123456789.");
    if (n < sizeof version) memcpy(version, sp + 1, n), version[n] = '\0';
  }
  if (tool[0])
    snprintf(by, sizeof by, "%s, format version %u", tool, h->format_version);
  else
    snprintf(by, sizeof by, "format version %u", h->format_version);
  return gm_err_set(err, GM_ERR_VERSION,
                    "trace needs a reader of format version %u or newer (written by %s); this "
                    "reader reads version %u: install %s%s%s%s (pip install -U %s)",
                    h->min_reader, by, GMT_FORMAT_VERSION, version[0] ? "" : "a newer ", GM_DIST_NAME,
                    version[0] ? " >= " : "", version, GM_DIST_NAME);
}

gm_status_t gmt_header_decode(const uint8_t *buf, size_t n, gmt_header_t *h, size_t *used, gm_err_t *err) {
  if (n < GMT_FRAME_HDR + GMT_HEADER_FIXED) { /* a cut-off header still shows its magic */
    uint8_t want[12];
    gmt_put32(want, GMT_MAGIC_HEADER);
    memcpy(want + 8, "GMTH", 4);
    size_t k = n < 4 ? n : 4, k2 = n > 8 ? (n < 12 ? n - 8 : 4) : 0;
    if (n > 0 && memcmp(buf, want, k) == 0 && (k2 == 0 || memcmp(buf + 8, want + 8, k2) == 0))
      return gm_err_set(err, GM_ERR_TRUNCATED, "file ends inside the header");
    return gm_err_set(err, GM_ERR_FORMAT, "not a gpumem trace");
  }
  if (gmt_get32(buf) != GMT_MAGIC_HEADER || memcmp(buf + GMT_FRAME_HDR, "GMTH", 4) != 0)
    return gm_err_set(err, GM_ERR_FORMAT, "not a gpumem trace");
  uint32_t size = gmt_get32(buf + 4);
  if (size < GMT_HEADER_FIXED || size > GMT_MAX_HEADER)
    return gm_err_set(err, GM_ERR_CORRUPT, "header at offset 0: bad frame size %u", size);
  if ((uint64_t)size + GMT_FRAME_HDR > n)
    return gm_err_set(err, GM_ERR_TRUNCATED, "header at offset 0: file ends inside the header");
  const uint8_t *p = buf + GMT_FRAME_HDR;
  uint32_t crc = gmt_crc32c(0, p, 8);
  crc = gmt_crc32c(crc, p + GMT_HEADER_FIXED, size - GMT_HEADER_FIXED);
  if (crc != gmt_get32(p + 8)) return gm_err_set(err, GM_ERR_CORRUPT, "header at offset 0: checksum mismatch");
  gmt_header_init(h);
  h->format_version = gmt_get16(p + 4);
  h->min_reader = gmt_get16(p + 6);
  if (h->min_reader > GMT_FORMAT_VERSION) return too_new(h, p + GMT_HEADER_FIXED, p + size, err);
  const uint8_t *q = p + GMT_HEADER_FIXED, *e = p + size;
  while (q < e) {
    uint64_t tag, len;
    if (!gmt_get_varint(&q, e, &tag) || !gmt_get_varint(&q, e, &len) || len > (uint64_t)(e - q)) {
      gmt_header_free(h);
      return gm_err_set(err, GM_ERR_CORRUPT, "header: bad field");
    }
    gm_status_t s = dec_tlv(h, tag, q, len, err);
    if (s < 0) {
      gmt_header_free(h);
      return s;
    }
    q += len;
  }
  *used = GMT_FRAME_HDR + size;
  return GM_OK;
}
