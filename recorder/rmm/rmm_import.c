/* rmm_import.c: RAPIDS RMM allocation logs into gpumem traces (the format and the rules are in
 * rmm_import.h).
 *
 * One pass, line by line: each line is split into its six columns, checked, and turned into
 * one event, written at once (the trace writer holds one chunk). The pointers still allocated
 * are kept in a hash table (uthash) with their size and line, so a free is checked against
 * its allocate and memory follows the live allocations, not the log's length. The writer is
 * atomic: a log with an error leaves no trace behind. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#include "recorder/rmm/rmm_import.h"

#define DAY_NS (86400ull * 1000000000ull)

typedef struct live {
  uint64_t addr, size, line;
  UT_hash_handle hh;
} live_t;

typedef struct seen { /* threads and streams, each interned once */
  uint64_t key;
  uint32_t id;
  UT_hash_handle hh;
} seen_t;

typedef struct conv {
  gmt_writer_t *w;
  live_t *live;
  seen_t *threads, *streams;
  uint64_t line, live_bytes;
  uint64_t t0, prev, day; /* first time, previous (clamped) time, days added at midnights */
  int have_time, epoch;
  rmm_import_stats_t *st;
} conv_t;

int rmm_log_device(const char *path) {
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  const char *d = base;
  int dev = 0;
  while ((d = strstr(d, ".dev")) != NULL) { /* the last ".devN." or ".devN" at the end wins */
    d += 4;
    char *end;
    errno = 0;
    long v = strtol(d, &end, 10);
    if (end != d && *d >= '0' && *d <= '9' && (*end == '.' || *end == '\0') && !errno && v < 65536) dev = (int)v;
  }
  return dev;
}

/* Decimal (hex with 0x, or hex=1) digits only, the whole of s. 0 ok, -1 bad. */
static int parse_u64(const char *s, int hex, uint64_t *v) {
  if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    s += 2;
    hex = 1;
  }
  if (!*s) return -1;
  uint64_t x = 0;
  for (; *s; s++) {
    unsigned d;
    if (*s >= '0' && *s <= '9') d = (unsigned)(*s - '0');
    else if (hex && *s >= 'a' && *s <= 'f') d = (unsigned)(*s - 'a' + 10);
    else if (hex && *s >= 'A' && *s <= 'F') d = (unsigned)(*s - 'A' + 10);
    else return -1;
    unsigned b = hex ? 16u : 10u;
    if (x > (UINT64_MAX - d) / b) return -1;
    x = x * b + d;
  }
  *v = x;
  return 0;
}

/* A pointer as %p (0x..., (nil)) or fmt's {} (0x...) prints it. */
static int parse_ptr(const char *s, uint64_t *v) {
  if (strcmp(s, "(nil)") == 0) {
    *v = 0;
    return 0;
  }
  return parse_u64(s, 1, v);
}

/* The fraction after the point: up to 9 digits, in ns. */
static int parse_frac(const char *s, uint64_t *ns) {
  uint64_t v = 0;
  int n = 0;
  for (; *s; s++, n++) {
    if (*s < '0' || *s > '9' || n == 9) return -1;
    v = v * 10 + (uint64_t)(*s - '0');
  }
  if (n == 0) return -1;
  for (; n < 9; n++) v *= 10;
  *ns = v;
  return 0;
}

/* HH:MM:SS.ffffff (time of day, *epoch = 0) or SECONDS.ffffff (since the epoch, *epoch = 1). */
static int parse_time(const char *s, uint64_t *ns, int *epoch) {
  char buf[64];
  if (strlen(s) >= sizeof buf) return -1;
  strcpy(buf, s);
  char *dot = strchr(buf, '.');
  uint64_t frac = 0;
  if (dot) {
    *dot = '\0';
    if (parse_frac(dot + 1, &frac)) return -1;
  }
  if (strchr(buf, ':')) {
    unsigned h, m, sec;
    char tail;
    if (strlen(buf) != 8 || sscanf(buf, "%2u:%2u:%2u%c", &h, &m, &sec, &tail) != 3 || h > 23 || m > 59 || sec > 60)
      return -1;
    *ns = ((uint64_t)h * 3600 + m * 60 + sec) * 1000000000ull + frac;
    *epoch = 0;
    return 0;
  }
  uint64_t sec;
  if (parse_u64(buf, 0, &sec) || sec > UINT64_MAX / 1000000000ull - 1) return -1;
  *ns = sec * 1000000000ull + frac;
  *epoch = 1;
  return 0;
}

static gm_status_t intern(conv_t *c, seen_t **set, uint64_t key, const char *fmt, uint32_t *id, uint64_t *count,
                          gm_err_t *err) {
  seen_t *s;
  HASH_FIND(hh, *set, &key, sizeof key, s);
  if (s) {
    *id = s->id;
    return GM_OK;
  }
  if (!(s = calloc(1, sizeof *s))) return gm_err_set(err, GM_ERR_NOMEM, "out of memory");
  s->key = key;
  if (fmt) {
    char text[64];
    snprintf(text, sizeof text, fmt, key);
    gm_status_t st = gmt_writer_intern(c->w, text, &s->id, err);
    if (st != GM_OK) {
      free(s);
      return st;
    }
  }
  HASH_ADD(hh, *set, key, sizeof s->key, s);
  (*count)++;
  *id = s->id;
  return GM_OK;
}

/* The time of this line as ns since the first line's, with the tolerances of rmm_import.h. */
static gm_status_t line_time(conv_t *c, const char *text, uint64_t *ts, gm_err_t *err) {
  uint64_t t;
  int epoch;
  if (parse_time(text, &t, &epoch))
    return gm_err_set(err, GM_ERR_FORMAT, "line %" PRIu64 ": bad Time '%.40s' (accepted: HH:MM:SS.ffffff as RMM "
                      "writes it, or seconds since the epoch)", c->line, text);
  if (!c->have_time) {
    c->have_time = 1;
    c->epoch = epoch;
    c->t0 = c->prev = t;
    c->st->epoch_time = epoch;
    *ts = 0;
    return GM_OK;
  }
  if (epoch != c->epoch)
    return gm_err_set(err, GM_ERR_FORMAT, "line %" PRIu64 ": Time '%.40s' is in another form than the lines before",
                      c->line, text);
  t += c->day;
  if (t < c->prev && !epoch && c->prev - t > DAY_NS / 2) { /* midnight (local time of day) */
    c->day += DAY_NS;
    t += DAY_NS;
    c->st->midnights++;
  }
  if (t < c->prev) {
    uint64_t back = c->prev - t;
    if (back > RMM_CLAMP_NS)
      return gm_err_set(err, GM_ERR_FORMAT, "line %" PRIu64 ": Time %.40s is %.3f s earlier than the line before "
                        "(RMM writes its log in order; up to 1 s is tolerated, a step back of over 12 h is "
                        "read as midnight)", c->line, text, (double)back / 1e9);
    c->st->clamped++;
    t = c->prev;
  }
  c->prev = t;
  *ts = t - c->t0;
  c->st->duration_ns = *ts;
  return GM_OK;
}

/* One data line split into its columns (modified in place). */
static gm_status_t convert_line(conv_t *c, char *s, gm_err_t *err) {
  char *col[7];
  int n = 0;
  col[n++] = s;
  for (char *p = s; *p; p++)
    if (*p == ',') {
      *p = '\0';
      if (n == 7) break;
      col[n++] = p + 1;
    }
  if (n != 6)
    return gm_err_set(err, GM_ERR_FORMAT, "line %" PRIu64 ": %s columns: expected 6 (" RMM_LOG_HEADER ")",
                      c->line, n < 6 ? "too few" : "too many");
  uint64_t tid = 0, addr = 0, size = 0, stream = 0, ts = 0;
  if (parse_u64(col[0], 0, &tid))
    return gm_err_set(err, GM_ERR_FORMAT, "line %" PRIu64 ": bad Thread '%.40s' (a decimal thread id)", c->line, col[0]);
  gm_status_t st = line_time(c, col[1], &ts, err);
  if (st != GM_OK) return st;
  if (parse_ptr(col[3], &addr))
    return gm_err_set(err, GM_ERR_FORMAT, "line %" PRIu64 ": bad Pointer '%.40s' (0x... or (nil))", c->line, col[3]);
  if (parse_u64(col[4], 0, &size) || size > GMT_MAX_SIZE)
    return gm_err_set(err, GM_ERR_FORMAT, "line %" PRIu64 ": bad Size '%.40s' (bytes, at most 2^48)", c->line, col[4]);
  if (parse_u64(col[5], 1, &stream))
    return gm_err_set(err, GM_ERR_FORMAT, "line %" PRIu64 ": bad Stream '%.40s' (the cudaStream_t in hex)", c->line, col[5]);
  gmt_event_t ev;
  memset(&ev, 0, sizeof ev);
  ev.ts_ns = ts;
  ev.addr = addr;
  ev.size = size;
  ev.stream = stream;
  ev.device = (uint16_t)c->st->device;
  ev.mem_kind = GMT_MEM_DEVICE;
  /* No GMT_F_ASYNC: RMM's calls are stream-ordered, but the flag tells the replay that the
   * addresses came from the driver's pool (its recorded extent) and that a free on another stream
   * waits on events (record_stream): neither is known of a log, whose upstream resource is not
   * named. */
  uint32_t sid;
  if ((st = intern(c, &c->threads, tid, "RMM thread %" PRIu64, &ev.callsite, &c->st->threads, err)) != GM_OK ||
      (st = intern(c, &c->streams, stream, NULL, &sid, &c->st->streams, err)) != GM_OK)
    return st;
  live_t *l = NULL;
  if (strcmp(col[2], "allocate") == 0) {
    if (!addr) {
      if (size) return gm_err_set(err, GM_ERR_FORMAT, "line %" PRIu64 ": allocate of %" PRIu64 " bytes at a null pointer",
                                  c->line, size);
      c->st->null_skipped++;
      return GM_OK;
    }
    HASH_FIND(hh, c->live, &addr, sizeof addr, l);
    if (l)
      return gm_err_set(err, GM_ERR_FORMAT, "line %" PRIu64 ": allocate at 0x%" PRIx64 ", which line %" PRIu64
                        " allocated and no line freed", c->line, addr, l->line);
    if (!(l = malloc(sizeof *l))) return gm_err_set(err, GM_ERR_NOMEM, "out of memory");
    l->addr = addr;
    l->size = size;
    l->line = c->line;
    HASH_ADD(hh, c->live, addr, sizeof l->addr, l);
    ev.kind = GMT_EV_ALLOC;
    c->st->allocs++;
    c->live_bytes += size;
    if (c->live_bytes > c->st->peak_live_bytes) c->st->peak_live_bytes = c->live_bytes;
  } else if (strcmp(col[2], "free") == 0 || strcmp(col[2], "deallocate") == 0) {
    if (!addr) {
      c->st->null_skipped++;
      return GM_OK;
    }
    HASH_FIND(hh, c->live, &addr, sizeof addr, l);
    if (!l)
      return gm_err_set(err, GM_ERR_FORMAT, "line %" PRIu64 ": free of 0x%" PRIx64 ", which is not allocated (no "
                        "allocate line before it, or freed already)", c->line, addr);
    if (l->size != size)
      return gm_err_set(err, GM_ERR_FORMAT, "line %" PRIu64 ": free of 0x%" PRIx64 " with %" PRIu64 " bytes; line %"
                        PRIu64 " allocated it with %" PRIu64, c->line, addr, size, l->line, l->size);
    c->live_bytes -= l->size;
    HASH_DEL(c->live, l);
    free(l);
    ev.kind = GMT_EV_FREE;
    ev.size = 0;
    c->st->frees++;
  } else if (strcmp(col[2], "allocate failure") == 0) {
    ev.kind = GMT_EV_ALLOC_FAILED;
    ev.addr = 0;
    if (!c->st->failures++) c->st->first_failure_size = size;
  } else {
    return gm_err_set(err, GM_ERR_FORMAT, "line %" PRIu64 ": unknown Action '%.40s' (RMM writes allocate, free, "
                      "allocate failure)", c->line, col[2]);
  }
  return gmt_writer_append(c->w, &ev, err);
}

static void strip_eol(char *s, ssize_t *len) {
  while (*len > 0 && (s[*len - 1] == '\n' || s[*len - 1] == '\r')) s[--*len] = '\0';
}

static gm_status_t header_for(const char *in_name, int device, gmt_header_t *h, gm_err_t *err) {
  gmt_header_init(h);
  h->capture_mode = GMT_CAPTURE_IMPORT;
  gm_status_t st = gmt_header_set(&h->tool, "gpurec " GM_VERSION " import", err);
  char dev[16];
  snprintf(dev, sizeof dev, "%d", device);
  /* The framework is RMM (formats/gmt_frameworks.c): the replays say which policies model it. */
  if (st == GM_OK) st = gmt_header_kv_set(h, "framework.rmm", "unknown", err);
  if (st == GM_OK) st = gmt_header_kv_set(h, "import.source", "rmm_logging_resource_adaptor", err);
  if (st == GM_OK) st = gmt_header_kv_set(h, "import.file", in_name, err);
  if (st == GM_OK) st = gmt_header_kv_set(h, "import.device", dev, err);
  return st;
}

gm_status_t rmm_import(FILE *in, const char *in_name, const char *out_path, uint64_t gpu_memory,
                       const gmt_writer_opts_t *opts, rmm_import_stats_t *st_out, gm_err_t *err) {
  rmm_import_stats_t st;
  memset(&st, 0, sizeof st);
  st.device = rmm_log_device(in_name);
  conv_t c;
  memset(&c, 0, sizeof c);
  c.st = &st;
  gmt_header_t h;
  gm_status_t s = header_for(in_name, st.device, &h, err);
  h.gpu_total_mem = gpu_memory;
  if (s == GM_OK) s = gmt_writer_open_atomic(&c.w, out_path, &h, opts, err);
  gmt_header_free(&h);
  char *line = NULL;
  size_t cap = 0;
  ssize_t len;
  int header = 0;
  while (s == GM_OK && (len = getline(&line, &cap, in)) >= 0) {
    c.line++;
    int had_eol = len > 0 && line[len - 1] == '\n';
    if ((size_t)len != strlen(line)) {
      s = gm_err_set(err, GM_ERR_FORMAT, "line %" PRIu64 ": NUL byte in the line", c.line);
      break;
    }
    strip_eol(line, &len);
    if (!header) {
      const char *p = line;
      if ((unsigned char)p[0] == 0xEF && (unsigned char)p[1] == 0xBB && (unsigned char)p[2] == 0xBF) p += 3;
      if (strcmp(p, RMM_LOG_HEADER) != 0)
        s = gm_err_set(err, GM_ERR_FORMAT, "line %" PRIu64 ": not an RMM allocation log: expected the line '"
                       RMM_LOG_HEADER "' (rmm.mr.LoggingResourceAdaptor)", c.line);
      header = 1;
      continue;
    }
    if (len == 0) continue; /* blank lines: nothing */
    if (!had_eol) {
      /* spdlog writes whole lines: one without its newline is the last, cut short when the
       * process died (or its log was copied while written). Even when it parses, a column may
       * be cut (a stream 0x7f12 of 0x7f1234): dropped, and said. */
      st.truncated_last_line = 1;
      break;
    }
    s = convert_line(&c, line, err);
  }
  free(line);
  if (s == GM_OK && ferror(in)) s = gm_err_set(err, GM_ERR_IO, "read: %s", strerror(errno));
  if (s == GM_OK && !header) s = gm_err_set(err, GM_ERR_FORMAT, "empty: not an RMM allocation log");
  st.lines = c.line;
  st.live_at_end = HASH_COUNT(c.live);
  st.live_bytes_at_end = c.live_bytes;
  if (c.w) {
    if (s == GM_OK) s = gmt_writer_close(c.w, err);
    else gmt_writer_abandon(c.w);
  }
  live_t *l, *lt;
  HASH_ITER(hh, c.live, l, lt) {
    HASH_DEL(c.live, l);
    free(l);
  }
  seen_t *e, *et;
  HASH_ITER(hh, c.threads, e, et) {
    HASH_DEL(c.threads, e);
    free(e);
  }
  HASH_ITER(hh, c.streams, e, et) {
    HASH_DEL(c.streams, e);
    free(e);
  }
  if (st_out) *st_out = st;
  return s;
}
