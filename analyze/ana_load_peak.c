/* ana_load_peak.c: the per-trace summaries the report reads instead of events, made at load.
 *
 * The report (text, CSV, HTML) and views over many traces must not read a row per event: at
 * 10 M events SQLite steps about 0.3 us a row, more than the whole rest of the report, and a
 * database of every event is ~46 bytes an event. So the loader decodes the trace twice more in
 * C (13 M events/s) and stores what the report shows:
 *
 *   pass 2, up to the peak event: what is live at the peak (the pairs the first pass would
 *     make, kept when still live there): by callsite (top 50, trace_peak_callsites), by stream
 *     (trace_peak_streams), the 25 largest allocations (trace_peak_allocs), and the counts
 *     (traces.peak_live_allocs / peak_live_callsites) that give the rest of a top-N table;
 *   pass 3, the whole trace: the active-memory timeline stacked by the callsites with the most
 *     bytes live at the peak (pass 2's top ANA_STACK_CLASSES - 1, the rest grouped), on
 *     ANA_STACK_BUCKETS time buckets, each bucket keeping the split at the moment its total was
 *     highest, so every peak survives (trace_stack_classes, trace_stack_timeline).
 *
 * Level of detail is decided here, before anything is written: the HTML holds at most
 * ANA_STACK_BUCKETS rows per trace whatever its length. Pass 2 stops at the peak (half a decode
 * on average); pass 3 costs a decode and a pairing (ana_bench: bench/RESULTS.md "Analyzer"). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#include "analyze/ana_db_internal.h"

enum { PEAK_CALLSITES_KEPT = 50, PEAK_ALLOCS_KEPT = 25 };

typedef struct cs_live {
  uint32_t callsite;
  uint64_t allocs, bytes;
  UT_hash_handle hh;
} cs_live_t;

typedef struct stream_live {
  uint64_t stream;
  uint64_t allocs, bytes;
  UT_hash_handle hh;
} stream_live_t;

typedef struct peak_pass {
  uint64_t peak_seq;
  cs_live_t *by_cs;
  stream_live_t *by_stream;
  ana_pair_t big[PEAK_ALLOCS_KEPT]; /* the largest live at the peak, by size desc, seq asc */
  int n_big;
  uint64_t allocs;
} peak_pass_t;

static int bigger(const ana_pair_t *a, const ana_pair_t *b) {
  return a->size != b->size ? a->size > b->size : a->alloc_seq < b->alloc_seq;
}

static gm_status_t on_peak_pair(void *ctx, const ana_pair_t *p, gm_err_t *err) {
  peak_pass_t *pp = ctx;
  if (!ana_counts_as_device(p->mem_kind) || p->alloc_seq > pp->peak_seq) return GM_OK;
  if (p->free_seq != UINT64_MAX && p->free_seq <= pp->peak_seq) return GM_OK;
  pp->allocs++;
  cs_live_t *c;
  HASH_FIND(hh, pp->by_cs, &p->callsite, sizeof p->callsite, c);
  if (!c) {
    if (!(c = calloc(1, sizeof *c))) return gm_err_set(err, GM_ERR_NOMEM, "out of memory");
    c->callsite = p->callsite;
    HASH_ADD(hh, pp->by_cs, callsite, sizeof c->callsite, c);
  }
  c->allocs++;
  c->bytes += p->size;
  stream_live_t *s;
  HASH_FIND(hh, pp->by_stream, &p->stream, sizeof p->stream, s);
  if (!s) {
    if (!(s = calloc(1, sizeof *s))) return gm_err_set(err, GM_ERR_NOMEM, "out of memory");
    s->stream = p->stream;
    HASH_ADD(hh, pp->by_stream, stream, sizeof s->stream, s);
  }
  s->allocs++;
  s->bytes += p->size;
  /* insertion into the short sorted list of the largest */
  if (pp->n_big < PEAK_ALLOCS_KEPT || bigger(p, &pp->big[pp->n_big - 1])) {
    int i = pp->n_big < PEAK_ALLOCS_KEPT ? pp->n_big++ : PEAK_ALLOCS_KEPT - 1;
    while (i > 0 && bigger(p, &pp->big[i - 1])) {
      pp->big[i] = pp->big[i - 1];
      i--;
    }
    pp->big[i] = *p;
  }
  return GM_OK;
}

static int cs_desc(cs_live_t *a, cs_live_t *b) {
  if (a->bytes != b->bytes) return a->bytes < b->bytes ? 1 : -1;
  return a->callsite < b->callsite ? -1 : a->callsite > b->callsite;
}
static int stream_desc(stream_live_t *a, stream_live_t *b) {
  if (a->bytes != b->bytes) return a->bytes < b->bytes ? 1 : -1;
  return a->stream < b->stream ? -1 : a->stream > b->stream;
}

static gm_status_t step(ana_db_t *db, sqlite3_stmt *st, gm_err_t *err) {
  int rc = sqlite3_step(st);
  sqlite3_reset(st);
  return rc == SQLITE_DONE ? GM_OK : ana_sql_err(db->h, err, "insert");
}

/* Pass 2: decode up to the peak event and pair as the first pass did. */
static gm_status_t peak_pass(const void *buf, size_t len, unsigned flags, peak_pass_t *pp, gm_err_t *err) {
  gmt_reader_t *r = NULL;
  ana_scan_t *scan = NULL;
  gm_status_t s = gmt_reader_open_mem_flags(&r, buf, len, flags, err);
  if (s >= 0) s = ana_scan_new(&scan, on_peak_pair, pp, err);
  uint64_t seq = 0;
  while (s >= 0 && seq <= pp->peak_seq) {
    const gmt_event_t *evs = NULL;
    size_t n = 0;
    s = gmt_reader_next_view(r, &evs, &n, err);
    if (s == GM_END || s < 0) break;
    for (size_t k = 0; k < n && s >= 0 && seq <= pp->peak_seq; k++, seq++) s = ana_scan_event(scan, &evs[k], err);
  }
  if (s == GM_END) s = GM_OK;
  if (s >= 0) s = ana_scan_finish(scan, err);
  ana_scan_free(scan);
  gmt_reader_close(r);
  return s;
}

/* ---- pass 3: the stacked timeline ----------------------------------------------------------- */

typedef struct stack_pass {
  int K;                          /* classes; the last one is "the rest" */
  uint32_t cls_id[ANA_STACK_CLASSES];
  int n_named;                    /* classes named by a callsite id: 0..n_named-1 */
  double live[ANA_STACK_CLASSES]; /* bytes live per class now */
  double total;
  double *tot;                    /* per bucket: the highest total, -1 none yet */
  double *split;                  /* per bucket: live[] at that moment */
  int64_t cur;                    /* the bucket of the last event, -1 none */
} stack_pass_t;

static int class_of(const stack_pass_t *sp, uint32_t callsite) {
  for (int j = 0; j < sp->n_named; j++)
    if (sp->cls_id[j] == callsite) return j;
  return sp->K - 1;
}

static gm_status_t on_stack_pair(void *ctx, const ana_pair_t *p, gm_err_t *err) {
  stack_pass_t *sp = ctx;
  if (!ana_counts_as_device(p->mem_kind) || p->free_seq == UINT64_MAX) return GM_OK;
  int c = class_of(sp, p->callsite);
  sp->live[c] -= (double)p->size;
  sp->total -= (double)p->size;
  if (sp->live[c] < 0) sp->live[c] = 0;
  if (sp->total < 0) sp->total = 0;
  return GM_OK;
}

static void keep(stack_pass_t *sp, int64_t b) {
  if (sp->total > sp->tot[b]) {
    sp->tot[b] = sp->total;
    memcpy(&sp->split[(size_t)b * ANA_STACK_CLASSES], sp->live, sizeof sp->live);
  }
}

static gm_status_t stack_pass(const void *buf, size_t len, unsigned flags, uint64_t span, stack_pass_t *sp,
                              gm_err_t *err) {
  gmt_reader_t *r = NULL;
  ana_scan_t *scan = NULL;
  gm_status_t s = gmt_reader_open_mem_flags(&r, buf, len, flags, err);
  if (s >= 0) s = ana_scan_new(&scan, on_stack_pair, sp, err);
  while (s >= 0) {
    const gmt_event_t *evs = NULL;
    size_t n = 0;
    s = gmt_reader_next_view(r, &evs, &n, err);
    if (s == GM_END || s < 0) break;
    for (size_t k = 0; k < n && s >= 0; k++) {
      const gmt_event_t *e = &evs[k];
      int64_t b = (int64_t)((double)e->ts_ns * ANA_STACK_BUCKETS / (double)span);
      if (b < 0) b = 0;
      if (b > ANA_STACK_BUCKETS) b = ANA_STACK_BUCKETS;
      /* buckets entered since the last event: the state held over them is a value in each */
      for (int64_t x = sp->cur + 1; sp->cur >= 0 && x <= b; x++) keep(sp, x);
      if (b > sp->cur) sp->cur = b;
      s = ana_scan_event(scan, e, err); /* an end (free, alloc over a live address) subtracts */
      if (s >= 0 && e->kind == GMT_EV_ALLOC && ana_counts_as_device(e->mem_kind)) {
        int c = class_of(sp, e->callsite);
        sp->live[c] += (double)e->size;
        sp->total += (double)e->size;
      }
      keep(sp, sp->cur);
    }
  }
  if (s == GM_END) s = GM_OK;
  ana_scan_free(scan);
  gmt_reader_close(r);
  return s;
}

static void bind_u64(sqlite3_stmt *st, int i, uint64_t v) { sqlite3_bind_int64(st, i, (sqlite3_int64)v); }

static gm_status_t store_stack(ana_db_t *db, int64_t trace_id, const stack_pass_t *sp, const cs_live_t *const *named,
                               int callsites, gm_err_t *err) {
  sqlite3_stmt *st = NULL;
  gm_status_t s = ana_prepare(db, &st,
                              "INSERT INTO trace_stack_classes VALUES(?1, ?2, ?3, (SELECT text FROM strings"
                              " WHERE trace_id = ?1 AND string_id = ?4), ?5)",
                              err);
  for (int c = 0; c < sp->K && s >= 0; c++) {
    const char *kind = c < sp->n_named ? (named[c]->callsite == GMT_NO_STRING ? "none" : "callsite")
                                       : callsites ? "rest" : "all";
    sqlite3_bind_int64(st, 1, trace_id);
    sqlite3_bind_int(st, 2, c);
    sqlite3_bind_text(st, 3, kind, -1, SQLITE_STATIC);
    if (c < sp->n_named && named[c]->callsite != GMT_NO_STRING) sqlite3_bind_int64(st, 4, named[c]->callsite);
    else sqlite3_bind_null(st, 4);
    bind_u64(st, 5, c < sp->n_named ? named[c]->bytes : 0);
    s = step(db, st, err);
  }
  sqlite3_finalize(st);
  if (s < 0) return s;
  if ((s = ana_prepare(db, &st, "INSERT INTO trace_stack_timeline VALUES(?,?,?,?)", err)) < 0) return s;
  char text[ANA_STACK_CLASSES * 24];
  for (int64_t b = 0; b <= ANA_STACK_BUCKETS && s >= 0; b++) {
    if (sp->tot[b] < 0) continue;
    size_t o = 0;
    for (int c = 0; c < sp->K; c++)
      o += (size_t)snprintf(text + o, sizeof text - o, "%s%.0f", c ? "," : "", sp->split[(size_t)b * ANA_STACK_CLASSES + (size_t)c]);
    sqlite3_bind_int64(st, 1, trace_id);
    sqlite3_bind_int64(st, 2, b);
    sqlite3_bind_int64(st, 3, (int64_t)sp->tot[b]);
    sqlite3_bind_text(st, 4, text, -1, SQLITE_TRANSIENT);
    s = step(db, st, err);
  }
  sqlite3_finalize(st);
  return s;
}

gm_status_t ana_load_peak_summaries(ana_db_t *db, int64_t trace_id, const void *buf, size_t len, unsigned flags,
                                    const ana_summary_t *m, gm_err_t *err) {
  peak_pass_t pp = {0};
  pp.peak_seq = m->peak_live_seq;
  gm_status_t s = m->peak_live_bytes ? peak_pass(buf, len, flags, &pp, err) : GM_OK;
  HASH_SORT(pp.by_cs, cs_desc);
  HASH_SORT(pp.by_stream, stream_desc);
  sqlite3_stmt *st = NULL;
  /* by callsite: the 50 largest (two ids of one text add up) */
  if (s >= 0)
    s = ana_prepare(db, &st,
                    "INSERT INTO trace_peak_callsites SELECT ?1, COALESCE((SELECT text FROM strings"
                    " WHERE trace_id = ?1 AND string_id = ?2), '(none)'), ?3, ?4 WHERE 1" /* WHERE: the upsert's parse */
                    " ON CONFLICT(trace_id, callsite) DO UPDATE SET allocs = allocs + excluded.allocs,"
                    " bytes = bytes + excluded.bytes",
                    err);
  int kept = 0, callsites = 0;
  const cs_live_t *named[ANA_STACK_CLASSES];
  int n_named = 0;
  for (cs_live_t *c = pp.by_cs; c && s >= 0; c = c->hh.next) {
    callsites += c->callsite != GMT_NO_STRING;
    if (n_named < ANA_STACK_CLASSES - 1) named[n_named++] = c;
    if (kept++ >= PEAK_CALLSITES_KEPT) continue;
    sqlite3_bind_int64(st, 1, trace_id);
    if (c->callsite == GMT_NO_STRING) sqlite3_bind_null(st, 2);
    else sqlite3_bind_int64(st, 2, c->callsite);
    bind_u64(st, 3, c->allocs);
    bind_u64(st, 4, c->bytes);
    s = step(db, st, err);
  }
  sqlite3_finalize(st);
  st = NULL;
  if (s >= 0) s = ana_prepare(db, &st, "INSERT INTO trace_peak_streams VALUES(?,?,?,?)", err);
  for (stream_live_t *x = pp.by_stream; x && s >= 0; x = x->hh.next) {
    sqlite3_bind_int64(st, 1, trace_id);
    if (x->stream == GMT_STREAM_NONE) sqlite3_bind_null(st, 2);
    else bind_u64(st, 2, x->stream);
    bind_u64(st, 3, x->allocs);
    bind_u64(st, 4, x->bytes);
    s = step(db, st, err);
  }
  sqlite3_finalize(st);
  st = NULL;
  if (s >= 0) s = ana_prepare(db, &st, "INSERT INTO trace_peak_allocs VALUES(?,?,?,?,?,?,?)", err);
  for (int i = 0; i < pp.n_big && s >= 0; i++) {
    const ana_pair_t *p = &pp.big[i];
    sqlite3_bind_int64(st, 1, trace_id);
    bind_u64(st, 2, p->alloc_seq);
    bind_u64(st, 3, p->size);
    sqlite3_bind_int(st, 4, p->device);
    if (p->stream == GMT_STREAM_NONE) sqlite3_bind_null(st, 5);
    else bind_u64(st, 5, p->stream);
    if (p->callsite == GMT_NO_STRING) sqlite3_bind_null(st, 6);
    else sqlite3_bind_int64(st, 6, p->callsite);
    bind_u64(st, 7, p->t_alloc);
    s = step(db, st, err);
  }
  sqlite3_finalize(st);
  st = NULL;
  if (s >= 0) s = ana_prepare(db, &st, "UPDATE traces SET peak_live_allocs=?, peak_live_callsites=? WHERE trace_id=?", err);
  if (s >= 0) {
    bind_u64(st, 1, pp.allocs);
    sqlite3_bind_int64(st, 2, HASH_COUNT(pp.by_cs));
    sqlite3_bind_int64(st, 3, trace_id);
    s = step(db, st, err);
  }
  sqlite3_finalize(st);

  /* Pass 3: the stacked timeline, with the classes pass 2 found. */
  stack_pass_t sp = {0};
  sp.n_named = n_named;
  sp.K = n_named + 1;
  for (int j = 0; j < n_named; j++) sp.cls_id[j] = named[j]->callsite;
  if (n_named == 1 && named[0]->callsite == GMT_NO_STRING) sp.K = 1, sp.n_named = 0; /* no callsites at all */
  sp.cur = -1;
  sp.tot = malloc((ANA_STACK_BUCKETS + 1) * sizeof *sp.tot);
  sp.split = calloc((ANA_STACK_BUCKETS + 1) * ANA_STACK_CLASSES, sizeof *sp.split);
  if (s >= 0 && (!sp.tot || !sp.split)) s = gm_err_set(err, GM_ERR_NOMEM, "out of memory");
  if (s >= 0) {
    for (int b = 0; b <= ANA_STACK_BUCKETS; b++) sp.tot[b] = -1;
    uint64_t span = (m->events ? m->last_ts_ns : 0) + 1;
    if (m->by_kind[GMT_EV_ALLOC]) s = stack_pass(buf, len, flags, span, &sp, err);
    if (s >= 0) s = store_stack(db, trace_id, &sp, named, callsites, err);
  }
  free(sp.tot);
  free(sp.split);
  cs_live_t *c, *t;
  HASH_ITER(hh, pp.by_cs, c, t) {
    HASH_DEL(pp.by_cs, c);
    free(c);
  }
  stream_live_t *x, *y;
  HASH_ITER(hh, pp.by_stream, x, y) {
    HASH_DEL(pp.by_stream, x);
    free(x);
  }
  return s < 0 ? gm_err_wrap(err, "the report's summaries") : GM_OK;
}
