/* ana_load_trace.c: load one trace into the database (inside the caller's transaction).
 *
 * Identity (SCHEMA.md "Identity and loading"): a trace is its bytes. The file is read once into
 * memory: its bytes give the identity hash (the same bytes loaded twice, from any path, are
 * skipped) and the reader decodes from the same buffer. A path names one trace: loading a
 * path whose file has changed since (recorded again under the same name) replaces the trace
 * loaded from it, and the replay runs that joined only that trace, with a warning; two
 * traces of one report would otherwise give two answers for one job. A damaged trace is
 * salvaged when the options say so, and its row says what was lost. Events go in through
 * multi-row prepared INSERTs (ROWS rows per statement: 2-3x single-row, per
 * research/anchors-performance.md §4.2). Each batch is scanned before it is inserted, so the
 * scanner's alloc/free pairing lands in the same row as the event that ends an allocation
 * (events.ends_ev_id); the never freed go into open_allocs at the end. The traces row is
 * written first (to get its id) and completed at the end with the summary. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <uthash.h>

#include "analyze/ana_db_internal.h"

enum { ROWS = 64, EV_COLS = 13, BATCH = 4096 };

/* String ids already stored for this trace. */
typedef struct str_seen {
  uint32_t id;
  UT_hash_handle hh;
} str_seen_t;

typedef struct loader {
  ana_db_t *db;
  gmt_reader_t *r;
  str_seen_t *strs;     /* ids stored so far */
  sqlite3_stmt *str_ins;
  int64_t trace_id;
  int64_t first_ev;     /* rowid of the trace's event 0 */
  uint64_t base;        /* seq of the current batch's first event */
  uint64_t ends[BATCH]; /* per event of the batch: seq of the ALLOC it ends, or UINT64_MAX */
  int summary_only;     /* ana_load_opts_t.summary_only: no event rows */
  sqlite3_stmt *ev_many, *ev_one, *open_ins;
} loader_t;

static const char *const ev_cols =
    "INSERT INTO events(trace_id,ts_ns,kind,device,stream,addr,size,mem_kind,flags,corr_id,callsite,context,ends_ev_id) VALUES";

/* "INSERT ... VALUES(?,?,..),(?,..),..." for rows rows of cols columns. */
static char *multi_insert(const char *head, int cols, int rows) {
  size_t n = strlen(head) + (size_t)rows * ((size_t)cols * 2 + 4) + 1;
  char *s = malloc(n), *p = s;
  if (!s) return NULL;
  p += sprintf(p, "%s", head);
  for (int r = 0; r < rows; r++) {
    *p++ = r ? ',' : ' ';
    *p++ = '(';
    for (int c = 0; c < cols; c++) {
      if (c) *p++ = ',';
      *p++ = '?';
    }
    *p++ = ')';
  }
  *p = '\0';
  return s;
}

static gm_status_t prep_multi(ana_db_t *db, sqlite3_stmt **st, const char *head, int cols, int rows,
                              gm_err_t *err) {
  char *sql = multi_insert(head, cols, rows);
  if (!sql) return gm_err_set(err, GM_ERR_NOMEM, "out of memory");
  gm_status_t s = ana_prepare(db, st, sql, err);
  free(sql);
  return s;
}

static inline void bind_u64(sqlite3_stmt *st, int i, uint64_t v) { sqlite3_bind_int64(st, i, (sqlite3_int64)v); }

static int bind_event(sqlite3_stmt *st, int i, const loader_t *L, const gmt_event_t *e, uint64_t ends) {
  sqlite3_bind_int64(st, i++, L->trace_id);
  bind_u64(st, i++, e->ts_ns);
  sqlite3_bind_int(st, i++, e->kind);
  sqlite3_bind_int(st, i++, e->device);
  if (e->stream == GMT_STREAM_NONE) sqlite3_bind_null(st, i++);
  else bind_u64(st, i++, e->stream);
  bind_u64(st, i++, e->addr);
  bind_u64(st, i++, e->size);
  sqlite3_bind_int(st, i++, e->mem_kind);
  sqlite3_bind_int64(st, i++, e->flags);
  bind_u64(st, i++, e->corr_id);
  if (e->callsite == GMT_NO_STRING) sqlite3_bind_null(st, i++);
  else sqlite3_bind_int64(st, i++, e->callsite);
  sqlite3_bind_int64(st, i++, e->context);
  if (ends == UINT64_MAX) sqlite3_bind_null(st, i++);
  else sqlite3_bind_int64(st, i++, L->first_ev + (int64_t)ends);
  return i;
}

/* A pair closed by an event of the current batch: note it on that event's row. A pair never
 * closed (at the end of the trace): a row of open_allocs. */
static gm_status_t on_pair(void *ctx, const ana_pair_t *p, gm_err_t *err) {
  loader_t *L = ctx;
  if (p->free_seq != UINT64_MAX) {
    if (p->free_seq >= L->base && p->free_seq - L->base < BATCH) L->ends[p->free_seq - L->base] = p->alloc_seq;
    return GM_OK;
  }
  sqlite3_bind_int64(L->open_ins, 1, L->trace_id);
  sqlite3_bind_int64(L->open_ins, 2, L->first_ev + (int64_t)p->alloc_seq);
  return ana_step(L->db, L->open_ins, err);
}

/* The strings the batch's events use, each id once per trace, while the reader still holds
 * them (it keeps the current chunk's strings only), cut to ANA_MAX_STRING bytes on a UTF-8
 * character boundary. */
static gm_status_t insert_strings(loader_t *L, const gmt_event_t *ev, size_t n, gm_err_t *err) {
  for (size_t k = 0; k < n; k++) {
    uint32_t id = ev[k].callsite;
    if (id == GMT_NO_STRING) continue;
    str_seen_t *e;
    HASH_FIND(hh, L->strs, &id, sizeof id, e);
    if (e) continue;
    const char *txt = gmt_reader_string(L->r, id);
    if (!txt) continue; /* an id the chunk does not define: no row, as before */
    if (!(e = malloc(sizeof *e))) return gm_err_set(err, GM_ERR_NOMEM, "out of memory");
    e->id = id;
    HASH_ADD(hh, L->strs, id, sizeof e->id, e);
    size_t len = strnlen(txt, ANA_MAX_STRING + 1);
    char cut[ANA_MAX_STRING + 4];
    if (len > ANA_MAX_STRING) {
      len = ANA_MAX_STRING - 3;
      while (len && ((unsigned char)txt[len] & 0xC0) == 0x80) len--; /* not inside a character */
      memcpy(cut, txt, len);
      memcpy(cut + len, "...", 4);
      txt = cut;
    }
    sqlite3_bind_int64(L->str_ins, 1, L->trace_id);
    sqlite3_bind_int64(L->str_ins, 2, id);
    sqlite3_bind_text(L->str_ins, 3, txt, -1, SQLITE_TRANSIENT);
    gm_status_t s = ana_step(L->db, L->str_ins, err);
    if (s < 0) return s;
  }
  return GM_OK;
}

static void strs_free(loader_t *L) {
  str_seen_t *e, *t;
  HASH_ITER(hh, L->strs, e, t) {
    HASH_DEL(L->strs, e);
    free(e);
  }
}

static gm_status_t insert_events(loader_t *L, const gmt_event_t *ev, size_t n, gm_err_t *err) {
  size_t k = 0;
  for (; k + ROWS <= n; k += ROWS) {
    int i = 1;
    for (int r = 0; r < ROWS; r++) i = bind_event(L->ev_many, i, L, &ev[k + (size_t)r], L->ends[k + (size_t)r]);
    gm_status_t s = ana_step(L->db, L->ev_many, err);
    if (s < 0) return s;
  }
  for (; k < n; k++) {
    bind_event(L->ev_one, 1, L, &ev[k], L->ends[k]);
    gm_status_t s = ana_step(L->db, L->ev_one, err);
    if (s < 0) return s;
  }
  return GM_OK;
}

static int64_t scalar(ana_db_t *db, const char *sql, int64_t arg) {
  sqlite3_stmt *st = NULL;
  int64_t v = -1;
  if (sqlite3_prepare_v2(db->h, sql, -1, &st, NULL) != SQLITE_OK) return -1;
  sqlite3_bind_int64(st, 1, arg);
  if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL)
    v = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  return v;
}

static gm_status_t insert_header(loader_t *L, const char *path, const char *real, uint64_t size,
                                 const char *hash, const gmt_header_t *h, gm_err_t *err) {
  sqlite3_stmt *st = NULL;
  gm_status_t s = ana_prepare(L->db, &st,
                              "INSERT INTO traces(content_hash,path,format_version,min_reader,capture_mode,"
                              "tool,host,pid,rank,world_size,start_time_ns,gpu_name,gpu_uuid,gpu_total_mem,"
                              "driver_version,cuda_version,cupti_version,command_line,loaded_unix_ns,"
                              "real_path,file_size)"
                              " VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                              err);
  if (s < 0) return s;
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  int i = 1;
  ana_bind_text(st, i++, hash);
  ana_bind_text(st, i++, path);
  sqlite3_bind_int(st, i++, (int)h->format_version);
  sqlite3_bind_int(st, i++, (int)h->min_reader);
  ana_bind_text(st, i++, gmt_capture_mode_name(h->capture_mode));
  ana_bind_text(st, i++, h->tool);
  ana_bind_text(st, i++, h->host);
  sqlite3_bind_int64(st, i++, h->pid);
  if (h->rank >= 0) sqlite3_bind_int(st, i++, h->rank);
  else sqlite3_bind_null(st, i++);
  if (h->world_size >= 0) sqlite3_bind_int(st, i++, h->world_size);
  else sqlite3_bind_null(st, i++);
  bind_u64(st, i++, h->start_time_ns);
  ana_bind_text(st, i++, h->gpu_name);
  ana_bind_text(st, i++, h->gpu_uuid);
  bind_u64(st, i++, h->gpu_total_mem);
  ana_bind_text(st, i++, h->driver_version);
  ana_bind_text(st, i++, h->cuda_version);
  ana_bind_text(st, i++, h->cupti_version);
  ana_bind_text(st, i++, h->command_line);
  sqlite3_bind_int64(st, i++, (int64_t)now.tv_sec * 1000000000 + now.tv_nsec);
  ana_bind_text(st, i++, real);
  bind_u64(st, i++, size);
  s = ana_step(L->db, st, err);
  sqlite3_finalize(st);
  if (s < 0) return s;
  L->trace_id = sqlite3_last_insert_rowid(L->db->h);
  if (ana_prepare(L->db, &st, "INSERT OR REPLACE INTO trace_kv VALUES(?,?,?)", err) < 0) return GM_ERR_IO;
  for (size_t k = 0; k < h->n_kv && s >= 0; k++) {
    sqlite3_bind_int64(st, 1, L->trace_id);
    ana_bind_text(st, 2, h->kv[k].key);
    ana_bind_text(st, 3, h->kv[k].value);
    s = ana_step(L->db, st, err);
  }
  sqlite3_finalize(st);
  return s;
}

static gm_status_t insert_summary(loader_t *L, gmt_reader_t *r, ana_scan_t *scan, gm_err_t *err) {
  int64_t first_ev = L->first_ev;
  const ana_summary_t *m = ana_scan_summary(scan);
  const gmt_reader_stats_t *rs = gmt_reader_stats(r);
  sqlite3_stmt *st = NULL;
  gm_status_t s = ana_prepare(
      L->db, &st,
      "UPDATE traces SET events=?,duration_ns=?,first_ev_id=?,last_ev_id=?,"
      "requested_bytes_total=?,peak_live_bytes=?,peak_live_seq=?,peak_live_ts_ns=?,"
      "live_bytes_at_end=?,peak_segment_bytes=?,n_devices=?,n_streams=?,chunks=?,seq_gaps=?,"
      "dropped=?,unknown_records=?,truncated=?,has_index=?,unknown_free=?,double_alloc=?,"
      "damaged_chunks=?,lost_events=?,uncounted_chunks=?,damaged_bytes=?,index_damaged=?,partial=?,"
      "report_summaries=1,last_ts_ns=?,failed_size=?,failed_stream=?,failed_ts_ns=?,"
      "failed_callsite=(SELECT text FROM strings WHERE trace_id=:tid AND string_id=:cs)"
      " WHERE trace_id=:tid",
      err);
  if (s < 0) return s;
  int i = 1;
  bind_u64(st, i++, m->events);
  bind_u64(st, i++, m->events ? m->last_ts_ns - m->min_ts_ns : 0); /* min = first when in order */
  /* summaries only: an empty range, so that no query finds another trace's rows in it */
  sqlite3_bind_int64(st, i++, L->summary_only ? 0 : first_ev);
  sqlite3_bind_int64(st, i++, L->summary_only ? -1 : first_ev + (int64_t)m->events - 1);
  bind_u64(st, i++, m->requested_bytes_total);
  bind_u64(st, i++, m->peak_live_bytes);
  bind_u64(st, i++, m->peak_live_seq);
  bind_u64(st, i++, m->peak_live_ts_ns);
  bind_u64(st, i++, m->live_bytes_at_end);
  bind_u64(st, i++, m->peak_segment_bytes);
  bind_u64(st, i++, m->n_devices);
  bind_u64(st, i++, m->n_streams);
  bind_u64(st, i++, rs->chunks);
  bind_u64(st, i++, rs->seq_gaps);
  bind_u64(st, i++, rs->dropped);
  bind_u64(st, i++, rs->unknown_records);
  sqlite3_bind_int(st, i++, rs->truncated);
  sqlite3_bind_int(st, i++, rs->has_index);
  bind_u64(st, i++, m->unknown_free);
  bind_u64(st, i++, m->double_alloc);
  bind_u64(st, i++, rs->damaged_chunks);
  bind_u64(st, i++, rs->lost_events);
  bind_u64(st, i++, rs->uncounted_chunks);
  bind_u64(st, i++, rs->damaged_bytes);
  sqlite3_bind_int(st, i++, rs->index_damaged);
  sqlite3_bind_int(st, i++, gmt_stats_partial(rs));
  if (m->events) bind_u64(st, i++, m->last_ts_ns);
  else sqlite3_bind_null(st, i++);
  for (int k = 0; k < 3; k++) { /* the recorded run's first failed request, if any */
    uint64_t v = k == 0 ? m->failed_size : k == 1 ? m->failed_stream : m->failed_ts_ns;
    if (!m->failed_allocs || (k == 1 && v == GMT_STREAM_NONE)) sqlite3_bind_null(st, i++);
    else bind_u64(st, i++, v);
  }
  int cs = sqlite3_bind_parameter_index(st, ":cs");
  if (m->failed_allocs && m->failed_callsite != GMT_NO_STRING) sqlite3_bind_int64(st, cs, m->failed_callsite);
  else sqlite3_bind_null(st, cs);
  sqlite3_bind_int64(st, sqlite3_bind_parameter_index(st, ":tid"), L->trace_id);
  s = ana_step(L->db, st, err);
  sqlite3_finalize(st);
  if (s < 0) return s;
  if (m->ts_backward) { /* the report says so (ana_recommend.c); a note, not a column */
    char ooo[320];
    if (ana_prepare(L->db, &st, "INSERT OR REPLACE INTO trace_kv VALUES(?,'gpuanalyze.out_of_order',?)", err) < 0)
      return GM_ERR_IO;
    sqlite3_bind_int64(st, 1, L->trace_id);
    ana_bind_text(st, 2, ana_out_of_order_text(m, ooo, sizeof ooo));
    s = ana_step(L->db, st, err);
    sqlite3_finalize(st);
    if (s < 0) return s;
  }

  /* Counts by kind, the string table, the timeline. */
  if (ana_prepare(L->db, &st, "INSERT INTO trace_kinds VALUES(?,?,?)", err) < 0) return GM_ERR_IO;
  for (unsigned k = 0; k < GMT_EV_KIND_MAX && s >= 0; k++) {
    if (!m->by_kind[k]) continue;
    sqlite3_bind_int64(st, 1, L->trace_id);
    ana_bind_text(st, 2, gmt_kind_name(k) ? gmt_kind_name(k) : "unknown");
    bind_u64(st, 3, m->by_kind[k]);
    s = ana_step(L->db, st, err);
  }
  sqlite3_finalize(st);
  if (s >= 0 && ana_prepare(L->db, &st, "INSERT INTO trace_devices(trace_id, device, peak_live_bytes) VALUES(?,?,?)", err) >= 0) {
    for (uint64_t k = 0; k < m->n_devices && k < ANA_MAX_LISTED && s >= 0; k++) {
      sqlite3_bind_int64(st, 1, L->trace_id);
      bind_u64(st, 2, m->devices[k]);
      bind_u64(st, 3, m->device_peak[k]);
      s = ana_step(L->db, st, err);
    }
    sqlite3_finalize(st);
  }
  if (s >= 0 && ana_prepare(L->db, &st, "INSERT INTO size_histogram VALUES(?,?,?,?)", err) >= 0) {
    for (int k = 0; k < 65 && s >= 0; k++) {
      if (!m->size_allocs[k]) continue;
      sqlite3_bind_int64(st, 1, L->trace_id);
      sqlite3_bind_int(st, 2, k - 1);
      bind_u64(st, 3, m->size_allocs[k]);
      bind_u64(st, 4, m->size_bytes[k]);
      s = ana_step(L->db, st, err);
    }
    sqlite3_finalize(st);
  }
  if (s >= 0 && ana_prepare(L->db, &st, "INSERT INTO lifetime_histogram VALUES(?,?,?,?)", err) >= 0) {
    for (int k = 0; k < 21 && s >= 0; k++) {
      if (!m->life_allocs[k]) continue;
      sqlite3_bind_int64(st, 1, L->trace_id);
      sqlite3_bind_int(st, 2, k - 1);
      bind_u64(st, 3, m->life_allocs[k]);
      bind_u64(st, 4, m->life_bytes[k]);
      s = ana_step(L->db, st, err);
    }
    sqlite3_finalize(st);
  }
  if (s >= 0 && ana_prepare(L->db, &st, "INSERT INTO trace_timeline VALUES(?,?,?,?)", err) >= 0) {
    static uint64_t ts[ANA_TIMELINE_POINTS], live[ANA_TIMELINE_POINTS];
    size_t n = ana_scan_timeline(scan, ts, live, ANA_TIMELINE_POINTS);
    for (size_t k = 0; k < n && s >= 0; k++) {
      sqlite3_bind_int64(st, 1, L->trace_id);
      sqlite3_bind_int64(st, 2, (int64_t)k);
      bind_u64(st, 3, ts[k]);
      bind_u64(st, 4, live[k]);
      s = ana_step(L->db, st, err);
    }
    sqlite3_finalize(st);
  }
  return s;
}

/* gmt_string_fn over a reader: a batch never spans chunks, so its strings are current. */
static const char *reader_string(void *ctx, uint32_t id) { return gmt_reader_string(ctx, id); }

static gm_status_t exec_id(ana_db_t *db, const char *sql, int64_t id, gm_err_t *err);

/* Who held each device's bytes (gmt_owners), and what was live at the peak by callsite: the
 * per-trace summaries that views over many traces read instead of events. */
static gm_status_t insert_owners(loader_t *L, const ana_summary_t *m, gm_err_t *err) {
  const gmt_owners_result_t *o = &m->owners;
  sqlite3_stmt *st = NULL, *up = NULL;
  gm_status_t s = ana_prepare(L->db, &st, "INSERT INTO trace_owners VALUES(?,?,?,?,?,?)", err);
  if (s >= 0) s = ana_prepare(L->db, &up, "UPDATE trace_devices SET peak_mapped_bytes=? WHERE trace_id=? AND device=?", err);
  for (int d = 0; d < o->n_devices && s >= 0; d++) {
    const gmt_owner_dev_t *od = &o->dev[d];
    bind_u64(up, 1, od->peak_mapped);
    sqlite3_bind_int64(up, 2, L->trace_id);
    sqlite3_bind_int(up, 3, od->device);
    s = ana_step(L->db, up, err);
    for (int k = 0; k < o->n_owners && s >= 0; k++) {
      if (!od->peak[k]) continue;
      sqlite3_bind_int64(st, 1, L->trace_id);
      sqlite3_bind_int(st, 2, od->device);
      ana_bind_text(st, 3, o->names[k]);
      ana_bind_text(st, 4, k < GMT_OWNER_UNKNOWN ? "framework" : k == GMT_OWNER_UNKNOWN ? "unknown" : "library");
      bind_u64(st, 5, od->at_peak[k]);
      bind_u64(st, 6, od->peak[k]);
      s = ana_step(L->db, st, err);
    }
    uint64_t ctx = 0; /* the recorder's DEVICE_USAGE samples: in no event's maps */
    if (s >= 0 && gmt_owners_context_bytes(od, &ctx)) {
      sqlite3_bind_int64(st, 1, L->trace_id);
      sqlite3_bind_int(st, 2, od->device);
      ana_bind_text(st, 3, od->context_method == GMT_USAGE_PROCESS ? ANA_OWNER_CONTEXT : ANA_OWNER_CONTEXT_DEVICE);
      ana_bind_text(st, 4, "context");
      bind_u64(st, 5, ctx);
      bind_u64(st, 6, ctx);
      s = ana_step(L->db, st, err);
    }
  }
  sqlite3_finalize(st);
  sqlite3_finalize(up);
  if (s >= 0 && L->summary_only) s = exec_id(L->db, "UPDATE traces SET events_loaded = 0 WHERE trace_id = ?1", L->trace_id, err);
  return s;
}

static gm_status_t exec_id(ana_db_t *db, const char *sql, int64_t id, gm_err_t *err) {
  sqlite3_stmt *st = NULL;
  gm_status_t s = ana_prepare(db, &st, sql, err);
  if (s < 0) return s;
  int n = sqlite3_bind_parameter_count(st);
  for (int k = 1; k <= n; k++) sqlite3_bind_int64(st, k, id);
  s = ana_step(db, st, err);
  sqlite3_finalize(st);
  return s;
}

gm_status_t ana_load_trace(ana_db_t *db, const char *path, const ana_load_opts_t *o,
                           ana_load_stats_t *stats, gm_err_t *err) {
  void *buf = NULL;
  size_t len = 0;
  gm_status_t s = ana_load_read_file(path, &buf, &len, err);
  if (s < 0) return gm_err_wrap(err, "cannot open '%s'", path);
  char hash[32], *real = realpath(path, NULL);
  snprintf(hash, sizeof hash, "%016" PRIx64, ana_hash_bytes(buf, len));
  s = ana_load_check_identity(db, path, real ? real : path, hash, o, err);
  if (s == GM_END) {
    stats->traces_skipped++;
    s = GM_OK;
    goto out_unmap;
  }
  if (s < 0) {
    gm_err_wrap(err, "cannot load '%s'", path);
    goto out_unmap;
  }

  gmt_reader_t *r = NULL;
  s = gmt_reader_open_mem_flags(&r, buf, len, o ? o->read_flags : GMT_READ_STRICT, err);
  if (s < 0) {
    gm_err_wrap(err, "cannot open '%s'", path);
    goto out_unmap;
  }
  loader_t *L = calloc(1, sizeof *L);
  ana_scan_t *scan = NULL;
  gmt_event_t *evs = malloc(sizeof *evs * BATCH);
  s = evs && L ? GM_OK : gm_err_set(err, GM_ERR_NOMEM, "out of memory");
  if (s >= 0) {
    L->db = db;
    L->first_ev = scalar(db, "SELECT COALESCE(MAX(ev_id),0)+1 FROM events WHERE ?", 1);
    s = prep_multi(db, &L->ev_many, ev_cols, EV_COLS, ROWS, err);
  }
  if (s >= 0) s = prep_multi(db, &L->ev_one, ev_cols, EV_COLS, 1, err);
  if (s >= 0) s = ana_prepare(db, &L->open_ins, "INSERT INTO open_allocs VALUES(?,?)", err);
  if (s >= 0) s = ana_prepare(db, &L->str_ins, "INSERT INTO strings VALUES(?,?,?)", err);
  if (s >= 0) L->r = r;
  if (s >= 0) s = insert_header(L, path, real ? real : path, len, hash, gmt_reader_header(r), err);
  if (s >= 0) L->summary_only = o && o->summary_only;
  if (s >= 0) s = ana_scan_new(&scan, L->summary_only ? NULL : on_pair, L, err);
  if (s >= 0) s = ana_scan_set_trace(scan, gmt_reader_header(r), reader_string, r, err);
  uint64_t done = 0;
  while (s >= 0) {
    size_t n = 0;
    s = gmt_reader_next_batch(r, evs, BATCH, &n, err);
    if (s == GM_END || s < 0) break;
    /* Scan first: the pairs closed in this batch fill ends[] for the rows about to go in. */
    L->base = done;
    for (size_t k = 0; k < n; k++) L->ends[k] = UINT64_MAX;
    for (size_t k = 0; k < n && s >= 0; k++) s = ana_scan_event(scan, &evs[k], err);
    if (s >= 0 && !L->summary_only) s = insert_events(L, evs, n, err);
    if (s >= 0) s = insert_strings(L, evs, n, err);
    if (o && o->progress && (done >> 20) != ((done + n) >> 20)) o->progress(o->progress_ctx, path, done + n);
    done += n;
    if (s >= 0 && o && o->fault_after_events && done >= o->fault_after_events)
      s = gm_err_set(err, GM_ERR_IO, "fault injected after %" PRIu64 " events", done);
    if (s >= 0 && o && o->batch_done) o->batch_done(o->progress_ctx, done);
  }
  if (s >= 0) s = ana_scan_finish(scan, err);
  if (s >= 0) s = insert_summary(L, r, scan, err);
  if (s >= 0) s = insert_owners(L, ana_scan_summary(scan), err);
  if (s >= 0)
    s = ana_load_peak_summaries(db, L->trace_id, buf, len, o ? o->read_flags : GMT_READ_STRICT,
                                ana_scan_summary(scan), err);
  if (s >= 0) {
    stats->traces_loaded++;
    stats->events += done;
    const gmt_reader_stats_t *rs = gmt_reader_stats(r);
    if (gmt_stats_partial(rs)) stats->traces_partial++;
    if (gmt_stats_damaged(rs)) {
      char what[256];
      ana_load_warn(o, "'%s' is damaged (%s): %s; loaded what could be read%s", path,
           gmt_reader_damage(r) ? gmt_reader_damage(r) : "?", gmt_stats_damage_text(rs, what, sizeof what),
           gmt_stats_partial(rs) ? ", marked partial" : "");
    }
    s = GM_OK;
  } else {
    gm_err_wrap(err, "cannot load '%s'", path);
  }
  if (L) {
    sqlite3_finalize(L->ev_many);
    sqlite3_finalize(L->ev_one);
    sqlite3_finalize(L->open_ins);
    sqlite3_finalize(L->str_ins);
    strs_free(L);
  }
  free(L);
  ana_scan_free(scan);
  free(evs);
  gmt_reader_close(r);
out_unmap:
  if (len) munmap(buf, len);
  free(real);
  return s;
}
