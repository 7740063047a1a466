/* gmt_csv.c: the text form of a trace (SPEC.md "Text form") and the one-line event printer.
 *
 * The text form is for people and tests: '#key=value' lines carry the header, the string
 * table ('#string.ID=...', printed just before the first row that uses the id) and dropped
 * counts ('#dropped=N', where the chunk that reported them starts); then a line naming the
 * columns and one row per event. Columns, their order and their formats come from
 * GMT_FIELD_LIST and header keys from GMT_HEADER_FIELDS, so the text form cannot drift from
 * the binary one. export -> import -> export gives identical text. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#include "formats/gmt_internal.h"

/* ---- value formatting, one function per csv format class ---- */

static int fmt_DEC(char *b, size_t n, uint64_t v) { return snprintf(b, n, "%" PRIu64, v); }
static int fmt_HEX(char *b, size_t n, uint64_t v) { return snprintf(b, n, "0x%" PRIx64, v); }
static int fmt_KIND(char *b, size_t n, uint64_t v) {
  const char *s = gmt_kind_name((unsigned)v);
  return s ? snprintf(b, n, "%s", s) : snprintf(b, n, "%" PRIu64, v);
}
static int fmt_MEM(char *b, size_t n, uint64_t v) {
  const char *s = gmt_mem_kind_name((unsigned)v);
  return s ? snprintf(b, n, "%s", s) : snprintf(b, n, "%" PRIu64, v);
}
static int fmt_STREAM(char *b, size_t n, uint64_t v) {
  return v == GMT_STREAM_NONE ? snprintf(b, n, "-") : snprintf(b, n, "%" PRIu64, v);
}

/* Parses s as the field's format. 0 ok, -1 bad. */
static int parse_num(const char *s, uint64_t *v) {
  if (!*s || *s == '-' || *s == '+' || *s == ' ') return -1;
  char *end;
  errno = 0;
  int base = (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) ? 16 : 10;
  unsigned long long x = strtoull(s + (base == 16 ? 2 : 0), &end, base);
  if (errno || *end || end == s + (base == 16 ? 2 : 0)) return -1;
  *v = x;
  return 0;
}
static int parse_DEC(const char *s, uint64_t *v) { return parse_num(s, v); }
static int parse_HEX(const char *s, uint64_t *v) { return parse_num(s, v); }
static int parse_KIND(const char *s, uint64_t *v) { return (*v = gmt_kind_from_name(s)) ? 0 : -1; }
static int parse_MEM(const char *s, uint64_t *v) {
  *v = gmt_mem_kind_from_name(s);
  return (*v || strcmp(s, "unknown") == 0) ? 0 : -1;
}
static int parse_STREAM(const char *s, uint64_t *v) {
  if (strcmp(s, "-") == 0) {
    *v = GMT_STREAM_NONE;
    return 0;
  }
  return parse_num(s, v) == 0 && *v != GMT_STREAM_NONE ? 0 : -1;
}

static const char *const col_names[GMT_FIELD_COUNT] = {
#define GMT_CSV_NAME(f, id, coder, csv, fmt) csv,
    GMT_FIELD_LIST(GMT_CSV_NAME)
#undef GMT_CSV_NAME
};

/* ---- escaping of '#key=value' values: \\ \n \r \t \xHH ---- */

/* Keys also escape '=' (as \x3d), so a key never ends early. */
static void put_escaped_as(FILE *out, const char *s, int is_key) {
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '\\') fputs("\\\\", out);
    else if (is_key && *p == '=') fputs("\\x3d", out);
    else if (*p == '\n') fputs("\\n", out);
    else if (*p == '\r') fputs("\\r", out);
    else if (*p == '\t') fputs("\\t", out);
    else if (*p < 0x20 || *p == 0x7f) fprintf(out, "\\x%02x", *p);
    else fputc(*p, out);
  }
}

static void put_escaped(FILE *out, const char *s) { put_escaped_as(out, s, 0); }

static int hexval(int c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* In place. 0 ok, -1 bad escape (or an escaped NUL). */
static int unescape(char *s) {
  char *o = s;
  for (char *p = s; *p; p++) {
    if (*p != '\\') {
      *o++ = *p;
      continue;
    }
    p++;
    if (*p == '\\') *o++ = '\\';
    else if (*p == 'n') *o++ = '\n';
    else if (*p == 'r') *o++ = '\r';
    else if (*p == 't') *o++ = '\t';
    else if (*p == 'x' && hexval(p[1]) >= 0 && hexval(p[2]) >= 0 && (hexval(p[1]) | hexval(p[2]))) {
      *o++ = (char)(hexval(p[1]) * 16 + hexval(p[2]));
      p += 2;
    } else return -1;
  }
  *o = 0;
  return 0;
}

/* ---- export ---- */

typedef struct seen {
  uint32_t id;
  UT_hash_handle hh;
} seen_t;

static void export_header(const gmt_header_t *h, FILE *out) {
  fputs("# gpumem trace, text form 1\n", out);
#define GMT_HF_OUT_U32(tag, name) fprintf(out, "#" #name "=%" PRIu32 "\n", (uint32_t)h->name);
#define GMT_HF_OUT_I32(tag, name) fprintf(out, "#" #name "=%" PRId32 "\n", (int32_t)h->name);
#define GMT_HF_OUT_U64(tag, name) fprintf(out, "#" #name "=%" PRIu64 "\n", (uint64_t)h->name);
#define GMT_HF_OUT_STR(tag, name) \
  if (h->name) {                  \
    fputs("#" #name "=", out);    \
    put_escaped(out, h->name);    \
    fputc('\n', out);             \
  }
#define GMT_HF_OUT_MODE(tag, name)                                       \
  if (gmt_capture_mode_name(h->name))                                    \
    fprintf(out, "#" #name "=%s\n", gmt_capture_mode_name(h->name));     \
  else                                                                   \
    fprintf(out, "#" #name "=%" PRIu32 "\n", (uint32_t)h->name);
  GMT_HEADER_FIELDS(GMT_HF_OUT_U32, GMT_HF_OUT_I32, GMT_HF_OUT_U64, GMT_HF_OUT_STR, GMT_HF_OUT_MODE)
  for (size_t i = 0; i < h->n_kv; i++) {
    fputs("#kv.", out);
    put_escaped_as(out, h->kv[i].key, 1);
    fputc('=', out);
    put_escaped(out, h->kv[i].value);
    fputc('\n', out);
  }
  if (h->room) fprintf(out, "#room=%zu\n", h->room); /* tag 16: the header's room for later marks */
  for (int i = 0; i < GMT_FIELD_COUNT; i++) fprintf(out, "%s%s", i ? "," : "", col_names[i]);
  fputc('\n', out);
}

/* The row of one event, generated from the field list. Returns chars written (< n). */
static size_t format_row(const gmt_event_t *ev, char *b, size_t n) {
  size_t o = 0;
  int first = 1;
#define GMT_CSV_FMT(f, id, coder, csv, fmt)                                 \
  if (o < n) {                                                              \
    if (!first) b[o++] = ',';                                               \
    first = 0;                                                              \
    int k_ = fmt_##fmt(b + o, n - o, (uint64_t)ev->f);                      \
    o += k_ > 0 ? (size_t)k_ : 0;                                           \
  }
  GMT_FIELD_LIST(GMT_CSV_FMT)
#undef GMT_CSV_FMT
  if (o >= n) o = n - 1;
  b[o] = 0;
  return o;
}

gm_status_t gmt_csv_export(gmt_reader_t *r, FILE *out, gm_err_t *err) {
  export_header(gmt_reader_header(r), out);
  seen_t *seen = NULL;
  gmt_event_t evs[1024];
  uint64_t dropped = gmt_reader_stats(r)->dropped;
  char row[512];
  gm_status_t s;
  for (;;) {
    size_t n;
    s = gmt_reader_next_batch(r, evs, 1024, &n, err);
    const gmt_reader_stats_t *st = gmt_reader_stats(r);
    if (s >= 0 && st->dropped != dropped) { /* a chunk with drops started (or ended the file) */
      fprintf(out, "#dropped=%" PRIu64 "\n", st->dropped - dropped);
      dropped = st->dropped;
    }
    if (s != GM_OK) break;
    for (size_t i = 0; i < n; i++) {
      uint32_t cs = evs[i].callsite;
      if (cs != GMT_NO_STRING) {
        seen_t *e;
        HASH_FIND(hh, seen, &cs, sizeof cs, e);
        if (!e) {
          const char *str = gmt_reader_string(r, cs);
          if ((e = calloc(1, sizeof *e))) {
            e->id = cs;
            HASH_ADD(hh, seen, id, sizeof e->id, e);
          }
          if (str) {
            fprintf(out, "#string.%" PRIu32 "=", cs);
            put_escaped(out, str);
            fputc('\n', out);
          }
        }
      }
      format_row(&evs[i], row, sizeof row);
      fputs(row, out);
      fputc('\n', out);
    }
  }
  seen_t *e, *tmp;
  HASH_ITER(hh, seen, e, tmp) {
    HASH_DEL(seen, e);
    free(e);
  }
  if (s < 0) return s;
  if (ferror(out)) return gm_err_set(err, GM_ERR_IO, "write: %s", strerror(errno));
  return GM_OK;
}

void gmt_event_format(const gmt_event_t *ev, const gmt_reader_t *r, char *buf, size_t n) {
  if (!n) return;
  size_t o = 0;
  char v[64];
#define GMT_EV_FMT(f, id, coder, csv, fmt)                                              \
  if (o < n) {                                                                          \
    fmt_##fmt(v, sizeof v, (uint64_t)ev->f);                                            \
    int k_ = snprintf(buf + o, n - o, "%s%s=%s", o ? " " : "", csv, v);                 \
    o += k_ > 0 ? (size_t)k_ : 0;                                                       \
  }
  GMT_FIELD_LIST(GMT_EV_FMT)
#undef GMT_EV_FMT
  const char *s = (r && ev->callsite) ? gmt_reader_string(r, ev->callsite) : NULL;
  if (s && o + 3 < n) { /* the trace's text, escaped for the terminal and cut to fit */
    buf[o++] = ' ';
    buf[o++] = '"';
    gm_escape(s, buf + o, n - o - 1);
    o += strlen(buf + o);
    buf[o++] = '"';
    buf[o] = '\0';
  }
}

/* ---- import ---- */

static inline int fits(uint64_t v, size_t sz) { return sz >= 8 || v < (1ull << (8 * sz)); }

static int parse_field(int f, const char *s, gmt_event_t *ev) {
  uint64_t v;
  switch (f) {
#define GMT_CSV_PARSE(fl, id, coder, csv, fmt)                                   \
  case GMT_FIELD_##fl:                                                           \
    if (parse_##fmt(s, &v) || !fits(v, sizeof ev->fl)) return -1;                \
    ev->fl = v;                                                                  \
    return 0;
    GMT_FIELD_LIST(GMT_CSV_PARSE)
#undef GMT_CSV_PARSE
  }
  return -1;
}

/* What a column accepts, for the error message of a value it does not. */
static void accepted(int f, char *b, size_t n) {
  gmt_event_t ev;
  size_t sz = 0;
  const char *fmt = "";
  switch (f) {
#define GMT_CSV_ACC(fl, id, coder, csv, fm) \
  case GMT_FIELD_##fl:                      \
    sz = sizeof ev.fl;                      \
    fmt = #fm;                              \
    break;
    GMT_FIELD_LIST(GMT_CSV_ACC)
#undef GMT_CSV_ACC
  }
  (void)ev;
  uint64_t max = sz >= 8 ? UINT64_MAX : (1ull << (8 * sz)) - 1;
  size_t o = 0;
  if (strcmp(fmt, "KIND") == 0 || strcmp(fmt, "MEM") == 0) {
    int kind = fmt[0] == 'K';
    o += (size_t)snprintf(b, n, "%s", kind ? "an event kind:" : "a memory kind:");
    for (unsigned k = 0; k < (kind ? GMT_EV_KIND_MAX : GMT_MEM_KIND_MAX) && o < n; k++) {
      const char *name = kind ? gmt_kind_name(k) : gmt_mem_kind_name(k);
      if (name) o += (size_t)snprintf(b + o, n - o, " %s", name);
    }
  } else if (f == GMT_FIELD_size) {
    snprintf(b, n, "a byte count from 0 to %llu (alloc_failed: to %" PRIu64 "), decimal or 0x hex",
             (unsigned long long)GMT_MAX_SIZE, UINT64_MAX);
  } else if (strcmp(fmt, "STREAM") == 0) {
    snprintf(b, n, "'-' or an integer from 0 to %" PRIu64 ", decimal or 0x hex", UINT64_MAX - 1);
  } else {
    snprintf(b, n, "an integer from 0 to %" PRIu64 ", decimal or 0x hex", max);
  }
}

static int parse_i32(const char *s, int32_t *v) {
  char *end;
  errno = 0;
  long x = strtol(s, &end, 10);
  if (errno || !*s || *end || x < INT32_MIN || x > INT32_MAX) return -1;
  *v = (int32_t)x;
  return 0;
}

/* One '#key=value' line before the column line (header) or after it (strings, drops). */
static gm_status_t import_meta(char *key, char *val, gmt_header_t *h, gmt_writer_t *w, gm_err_t *err) {
  uint64_t u;
  if (strncmp(key, "string.", 7) == 0) {
    if (!w) return gm_err_set(err, GM_ERR_INVAL, "#string before the column line");
    if (parse_num(key + 7, &u) || u == 0 || u > UINT32_MAX) return gm_err_set(err, GM_ERR_INVAL, "bad string id '%s'", key + 7);
    return gmt_writer_intern_id(w, (uint32_t)u, val, err);
  }
  if (strcmp(key, "dropped") == 0) {
    if (!w) return gm_err_set(err, GM_ERR_INVAL, "#dropped before the column line");
    if (parse_num(val, &u)) return gm_err_set(err, GM_ERR_INVAL, "bad dropped count '%s'", val);
    gm_status_t s = gmt_writer_flush(w, err); /* the drops belong to the chunk that starts here */
    if (s == GM_OK) gmt_writer_add_dropped(w, u);
    return s;
  }
  if (w) return gm_err_set(err, GM_ERR_INVAL, "header line '#%s' after the column line", key);
  if (strncmp(key, "kv.", 3) == 0) return gmt_header_kv_set(h, key + 3, val, err);
  if (strcmp(key, "room") == 0) {
    if (parse_num(val, &u) || u == 1 || u > GMT_MAX_HEADER / 2) return gm_err_set(err, GM_ERR_INVAL, "bad room '%s'", val);
    h->room = (size_t)u;
    return GM_OK;
  }
#define GMT_HF_IN_U32(tag, name)                                                                   \
  if (strcmp(key, #name) == 0) {                                                                   \
    if (parse_num(val, &u) || u > UINT32_MAX) return gm_err_set(err, GM_ERR_INVAL, "bad " #name " '%s'", val); \
    h->name = (uint32_t)u;                                                                         \
    return GM_OK;                                                                                  \
  }
#define GMT_HF_IN_I32(tag, name)                                                                   \
  if (strcmp(key, #name) == 0) {                                                                   \
    if (parse_i32(val, &h->name)) return gm_err_set(err, GM_ERR_INVAL, "bad " #name " '%s'", val); \
    return GM_OK;                                                                                  \
  }
#define GMT_HF_IN_U64(tag, name)                                                                   \
  if (strcmp(key, #name) == 0) {                                                                   \
    if (parse_num(val, &u)) return gm_err_set(err, GM_ERR_INVAL, "bad " #name " '%s'", val);       \
    h->name = u;                                                                                   \
    return GM_OK;                                                                                  \
  }
#define GMT_HF_IN_STR(tag, name) \
  if (strcmp(key, #name) == 0) return gmt_header_set(&h->name, val, err);
#define GMT_HF_IN_MODE(tag, name)                                                  \
  if (strcmp(key, #name) == 0) {                                                   \
    unsigned m_ = gmt_capture_mode_from_name(val);                                 \
    if (m_ || strcmp(val, "unknown") == 0) {                                       \
      h->name = m_;                                                                \
      return GM_OK;                                                                \
    }                                                                              \
    if (parse_num(val, &u) || u > UINT32_MAX) return gm_err_set(err, GM_ERR_INVAL, "bad " #name " '%s'", val); \
    h->name = (uint32_t)u;                                                         \
    return GM_OK;                                                                  \
  }
  GMT_HEADER_FIELDS(GMT_HF_IN_U32, GMT_HF_IN_I32, GMT_HF_IN_U64, GMT_HF_IN_STR, GMT_HF_IN_MODE)
  return gm_err_set(err, GM_ERR_INVAL, "unknown header key '%s'", key);
}

typedef struct importer {
  gmt_header_t h;
  gmt_writer_t *w;
  int col_field[GMT_FIELD_COUNT];
  int ncols;
  int have_mode; /* the text set capture_mode */
} importer_t;

static gm_status_t import_columns(importer_t *im, char *line, gm_err_t *err) {
  int have[GMT_FIELD_COUNT] = {0};
  im->ncols = 0;
  for (char *tok = line, *next; tok; tok = next) {
    next = strchr(tok, ',');
    if (next) *next++ = 0;
    int f = -1;
    for (int i = 0; i < GMT_FIELD_COUNT; i++)
      if (strcmp(col_names[i], tok) == 0) f = i;
    if (f < 0) return gm_err_set(err, GM_ERR_INVAL, "unknown column '%s'", tok);
    if (have[f]++) return gm_err_set(err, GM_ERR_INVAL, "column '%s' twice", tok);
    im->col_field[im->ncols++] = f;
  }
  if (!have[GMT_FIELD_ts_ns] || !have[GMT_FIELD_kind])
    return gm_err_set(err, GM_ERR_INVAL, "the column line must name ts_ns and kind");
  return GM_OK;
}

static gm_status_t import_row(importer_t *im, char *line, gm_err_t *err) {
  gmt_event_t ev;
  memset(&ev, 0, sizeof ev);
  ev.stream = GMT_STREAM_NONE;
  int c = 0;
  for (char *tok = line, *next; tok; tok = next, c++) {
    next = strchr(tok, ',');
    if (next) *next++ = 0;
    if (c >= im->ncols) return gm_err_set(err, GM_ERR_INVAL, "expected %d columns, got more", im->ncols);
    if (parse_field(im->col_field[c], tok, &ev)) {
      char acc[512];
      accepted(im->col_field[c], acc, sizeof acc);
      return gm_err_set(err, GM_ERR_INVAL, "column %d (%s): bad value '%.40s%s' (accepted: %s)", c + 1,
                        col_names[im->col_field[c]], tok, strlen(tok) > 40 ? "..." : "", acc);
    }
  }
  if (c != im->ncols) return gm_err_set(err, GM_ERR_INVAL, "expected %d columns, got %d", im->ncols, c);
  /* Memory that exists has a size below GMT_MAX_SIZE; only a failed request may ask for more
   * (a cudaMalloc(-1) is a real program's bug, recorded as it was). */
  if (ev.kind != GMT_EV_ALLOC_FAILED && ev.size > GMT_MAX_SIZE)
    return gm_err_set(err, GM_ERR_INVAL, "size %" PRIu64 " is out of range for %s (accepted: 0 to %llu bytes; "
                      "only alloc_failed may ask for more)", ev.size, gmt_kind_name(ev.kind) ? gmt_kind_name(ev.kind) : "this kind",
                      (unsigned long long)GMT_MAX_SIZE);
  return gmt_writer_append(im->w, &ev, err);
}

gm_status_t gmt_csv_import(FILE *in, const char *in_name, const char *out_path, const gmt_writer_opts_t *opts,
                           gm_err_t *err) {
  importer_t im;
  memset(&im, 0, sizeof im);
  gmt_header_init(&im.h);
  char *line = NULL;
  size_t cap = 0;
  ssize_t len;
  uint64_t lineno = 0;
  gm_status_t s = GM_OK;
  int output_failed = 0; /* the output could not be created: not the fault of a line */
  while (s == GM_OK && (len = getline(&line, &cap, in)) >= 0) {
    lineno++;
    while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = 0;
    if ((size_t)len != strlen(line)) s = gm_err_set(err, GM_ERR_INVAL, "NUL byte in the line");
    else if (len == 0) continue;
    else if (line[0] == '#') {
      if (line[1] == ' ' || line[1] == 0) continue; /* a comment */
      char *eq = strchr(line, '=');
      if (!eq) s = gm_err_set(err, GM_ERR_INVAL, "expected '#key=value'");
      else {
        *eq = 0;
        if (unescape(line + 1) || unescape(eq + 1)) s = gm_err_set(err, GM_ERR_INVAL, "bad escape");
        else s = import_meta(line + 1, eq + 1, &im.h, im.w, err);
        if (strcmp(line + 1, "capture_mode") == 0) im.have_mode = 1;
      }
    } else if (!im.w) {
      s = import_columns(&im, line, err);
      if (s == GM_OK) {
        if (!im.have_mode) im.h.capture_mode = GMT_CAPTURE_IMPORT; /* hand-written text */
        s = gmt_writer_open_atomic(&im.w, out_path, &im.h, opts, err);
        output_failed = s < 0;

      }
    } else {
      s = import_row(&im, line, err);
    }
    if (s < 0 && !output_failed) gm_err_wrap(err, "%s:%" PRIu64, in_name ? in_name : "(csv)", lineno);
  }
  free(line);
  if (s == GM_OK && ferror(in)) s = gm_err_set(err, GM_ERR_IO, "%s: read error", in_name ? in_name : "(csv)");
  if (s == GM_OK && !im.w) {
    s = gm_err_set(err, GM_ERR_INVAL, "%s: no column line (not a gpumem trace in text form)", in_name ? in_name : "(csv)");
  }
  if (s == GM_OK) s = gmt_writer_close(im.w, err);
  else gmt_writer_abandon(im.w); /* the output is as it was: never half an import, never deleted */
  gmt_header_free(&im.h);
  return s;
}
