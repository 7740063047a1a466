/* ana_diff.c: two traces of the same job side by side: the job before and after a change (a
 * new model size, a PyTorch upgrade, a setting).
 *
 * Per trace, two streaming passes (ana_scan): the first finds the peak of live requested
 * bytes, counts every allocation by callsite and keeps the live timeline; the second sums
 * what was live at that peak by callsite (alloc at or before the peak's event, freed after
 * it). Callsite ids belong to one trace, so the two traces meet on the callsites' texts
 * (read while their chunk is current, at most ANA_MAX_STRING bytes). Growth is B's live bytes
 * at its peak minus A's at its peak, per callsite; a callsite is new when only B allocates
 * there, gone when only A does. The timelines meet on time as a share of each trace's
 * duration (runs of different lengths compare phase by phase), each point the maximum over its
 * slice. Peak reserved is not read from the traces: the caller replays it (gpuanalyze diff)
 * or the database has it (ana_diff_db, the report). Memory follows the callsites, not the
 * events. */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <uthash.h>

#include "analyze/ana_diff.h"
#include "analyze/ana_report_internal.h"

typedef struct site {
  uint32_t id;
  char *text; /* NULL until the chunk defining it was current */
  uint64_t allocs, bytes, peak_bytes, peak_allocs;
  UT_hash_handle hh;
} site_t;

typedef struct pass {
  site_t *sites;
  uint64_t peak_seq;
  int oom; /* host memory ran out in a callback */
} pass_t;

static site_t *site_get(pass_t *p, uint32_t id) {
  site_t *s = NULL;
  HASH_FIND(hh, p->sites, &id, sizeof id, s);
  if (s) return s;
  s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->id = id;
  HASH_ADD(hh, p->sites, id, sizeof s->id, s);
  return s;
}

static gm_status_t at_peak(void *ctx, const ana_pair_t *pr, gm_err_t *err) {
  pass_t *p = ctx;
  if (!ana_counts_as_device(pr->mem_kind)) return GM_OK;
  if (pr->alloc_seq > p->peak_seq || (pr->free_seq != UINT64_MAX && pr->free_seq <= p->peak_seq)) return GM_OK;
  site_t *s = site_get(p, pr->callsite);
  if (!s) return gm_err_set(err, GM_ERR_NOMEM, "out of host memory");
  s->peak_bytes += pr->size;
  s->peak_allocs++;
  return GM_OK;
}

/* One pass over path. second: the live-at-peak pass. */
static gm_status_t scan(const char *path, unsigned flags, pass_t *p, int second, ana_diff_side_t *side,
                        uint64_t *tl_ts, uint64_t *tl_live, size_t *tl_n, gm_err_t *err) {
  gmt_reader_t *r = NULL;
  ana_scan_t *s = NULL;
  gm_status_t st = gmt_reader_open_flags(&r, path, flags, err);
  if (st < 0) return gm_err_wrap(err, "cannot open '%s'", path);
  st = ana_scan_new(&s, second ? at_peak : NULL, p, err);
  enum { CAP = 4096 };
  gmt_event_t *evs = st >= 0 ? malloc(CAP * sizeof *evs) : NULL;
  if (st >= 0 && !evs) st = gm_err_set(err, GM_ERR_NOMEM, "out of host memory");
  while (st >= 0) {
    size_t n = 0;
    st = gmt_reader_next_batch(r, evs, CAP, &n, err);
    if (st < 0 || st == GM_END) break;
    for (size_t i = 0; i < n && st >= 0; i++) {
      const gmt_event_t *ev = &evs[i];
      st = ana_scan_event(s, ev, err);
      if (second || st < 0 || ev->kind != GMT_EV_ALLOC || !ana_counts_as_device(ev->mem_kind)) continue;
      site_t *x = site_get(p, ev->callsite);
      if (!x) {
        st = gm_err_set(err, GM_ERR_NOMEM, "out of host memory");
        break;
      }
      x->allocs++;
      x->bytes += ev->size;
      if (!x->text) { /* the chunk that defines it is current now */
        const char *t = ev->callsite ? gmt_reader_string(r, ev->callsite) : "";
        if (t) x->text = strndup(t, ANA_MAX_STRING);
      }
    }
  }
  if (st >= 0) st = ana_scan_finish(s, err);
  if (st >= 0) {
    const ana_summary_t *m = ana_scan_summary(s);
    if (!second) {
      p->peak_seq = m->peak_live_seq;
      side->events = m->events;
      side->allocs = m->by_kind[GMT_EV_ALLOC];
      side->frees = m->by_kind[GMT_EV_FREE];
      side->failed_allocs = m->failed_allocs;
      /* from the earliest event (the first, unless times go back): no peak before the start */
      side->duration_ns = m->last_ts_ns > m->min_ts_ns ? m->last_ts_ns - m->min_ts_ns : 0;
      side->peak_live = m->peak_live_bytes;
      side->peak_live_ts_ns = side->peak_live && m->peak_live_ts_ns > m->min_ts_ns ? m->peak_live_ts_ns - m->min_ts_ns : 0;
      ana_out_of_order_text(m, side->out_of_order, sizeof side->out_of_order);
      *tl_n = ana_scan_timeline(s, tl_ts, tl_live, ANA_TIMELINE_POINTS);
    }
    st = GM_OK;
  } else {
    gm_err_wrap(err, "cannot read '%s'", path);
  }
  free(evs);
  ana_scan_free(s);
  gmt_reader_close(r);
  return st;
}

static void pass_free(pass_t *p) {
  site_t *s, *t;
  HASH_ITER(hh, p->sites, s, t) {
    HASH_DEL(p->sites, s);
    free(s->text);
    free(s);
  }
}

/* The timeline on the normalised axis: point k covers [k, k+1) / ANA_DIFF_POINTS of the run. */
static void normalise(const uint64_t *ts, const uint64_t *live, size_t n, uint64_t *out) {
  uint64_t last = n ? ts[n - 1] : 0;
  memset(out, 0, ANA_DIFF_POINTS * sizeof *out);
  int filled[ANA_DIFF_POINTS] = {0};
  for (size_t i = 0; i < n; i++) {
    size_t k = last ? (size_t)((double)ts[i] / (double)last * (ANA_DIFF_POINTS - 1)) : 0;
    if (k >= ANA_DIFF_POINTS) k = ANA_DIFF_POINTS - 1;
    if (live[i] > out[k]) out[k] = live[i];
    filled[k] = 1;
  }
  for (size_t k = 1; k < ANA_DIFF_POINTS; k++) /* an empty slice holds what was live before it */
    if (!filled[k]) out[k] = out[k - 1];
}

typedef struct named {
  const char *text;
  const site_t *s;
  int side;
} named_t;

static int by_text(const void *a, const void *b) {
  const named_t *x = a, *y = b;
  int c = strcmp(x->text, y->text);
  return c ? c : x->side - y->side;
}

static int64_t growth(const ana_diff_site_t *s) { return (int64_t)s->peak_bytes[1] - (int64_t)s->peak_bytes[0]; }

static int by_growth(const void *a, const void *b) {
  const ana_diff_site_t *x = a, *y = b;
  int64_t gx = growth(x), gy = growth(y);
  if (gx != gy) return gx > gy ? -1 : 1;
  /* equal growth (the same job twice): the most bytes, then the most allocations first */
  uint64_t bx = x->peak_bytes[1] + x->peak_bytes[0], by = y->peak_bytes[1] + y->peak_bytes[0];
  if (bx != by) return bx > by ? -1 : 1;
  uint64_t ax = x->allocs[1] + x->allocs[0], ay = y->allocs[1] + y->allocs[0];
  if (ax != ay) return ax > ay ? -1 : 1;
  return strcmp(x->text, y->text);
}

/* Both traces' sites, merged on their texts. */
static gm_status_t merge(pass_t *p, ana_diff_t *d, gm_err_t *err) {
  size_t n = HASH_COUNT(p[0].sites) + HASH_COUNT(p[1].sites);
  named_t *all = n ? calloc(n, sizeof *all) : NULL;
  if (n && !all) return gm_err_set(err, GM_ERR_NOMEM, "out of host memory");
  size_t k = 0;
  for (int side = 0; side < 2; side++) {
    d->side[side].sites = HASH_COUNT(p[side].sites);
    for (site_t *s = p[side].sites; s; s = s->hh.next) all[k++] = (named_t){s->text ? s->text : "", s, side};
  }
  if (n) qsort(all, n, sizeof *all, by_text);
  d->sites = n ? calloc(n, sizeof *d->sites) : NULL;
  if (n && !d->sites) {
    free(all);
    return gm_err_set(err, GM_ERR_NOMEM, "out of host memory");
  }
  for (size_t i = 0; i < n; i++) {
    ana_diff_site_t *o;
    if (d->n_sites && strcmp(d->sites[d->n_sites - 1].text, all[i].text) == 0) {
      o = &d->sites[d->n_sites - 1];
    } else {
      o = &d->sites[d->n_sites++];
      if (!(o->text = strdup(all[i].text))) {
        free(all);
        return gm_err_set(err, GM_ERR_NOMEM, "out of host memory");
      }
    }
    int sd = all[i].side;
    o->peak_bytes[sd] += all[i].s->peak_bytes;
    o->peak_allocs[sd] += all[i].s->peak_allocs;
    o->allocs[sd] += all[i].s->allocs;
    o->bytes[sd] += all[i].s->bytes;
  }
  free(all);
  for (size_t i = 0; i < d->n_sites; i++) {
    const ana_diff_site_t *s = &d->sites[i];
    if (s->allocs[1] && !s->allocs[0]) d->new_sites++, d->new_allocs += s->allocs[1], d->new_bytes += s->bytes[1];
    if (s->allocs[0] && !s->allocs[1]) d->gone_sites++, d->gone_allocs += s->allocs[0], d->gone_bytes += s->bytes[0];
  }
  if (d->n_sites) qsort(d->sites, d->n_sites, sizeof *d->sites, by_growth);
  return GM_OK;
}

gm_status_t ana_diff_traces(const char *a, const char *b, unsigned flags, ana_diff_t *d, gm_err_t *err) {
  memset(d, 0, sizeof *d);
  const char *path[2] = {a, b};
  pass_t p[2];
  memset(p, 0, sizeof p);
  uint64_t *tl = malloc(2 * ANA_TIMELINE_POINTS * sizeof *tl);
  gm_status_t st = tl ? GM_OK : gm_err_set(err, GM_ERR_NOMEM, "out of host memory");
  for (int i = 0; i < 2 && st == GM_OK; i++) {
    size_t n = 0;
    snprintf(d->side[i].path, sizeof d->side[i].path, "%s", path[i]);
    st = scan(path[i], flags, &p[i], 0, &d->side[i], tl, tl + ANA_TIMELINE_POINTS, &n, err);
    if (st == GM_OK) normalise(tl, tl + ANA_TIMELINE_POINTS, n, d->live[i]);
    if (st == GM_OK && d->side[i].allocs) st = scan(path[i], flags, &p[i], 1, &d->side[i], NULL, NULL, NULL, err);
  }
  free(tl);
  if (st == GM_OK) st = merge(p, d, err);
  pass_free(&p[0]);
  pass_free(&p[1]);
  if (st != GM_OK) ana_diff_free(d);
  return st;
}

void ana_diff_free(ana_diff_t *d) {
  for (size_t i = 0; i < d->n_sites; i++) free(d->sites[i].text);
  free(d->sites);
  d->sites = NULL;
  d->n_sites = 0;
}

/* ---- from the database (the report over two traces) ---- */

gm_status_t ana_diff_db(ana_db_t *db, int64_t trace_a, int64_t trace_b, unsigned flags, ana_diff_t *d,
                        gm_err_t *err) {
  char path[2][1024] = {"", ""};
  int64_t ids[2] = {trace_a, trace_b};
  sqlite3_stmt *st = NULL;
  gm_status_t s = ana_prepare(db, &st, "SELECT path FROM traces WHERE trace_id = ?1", err);
  for (int i = 0; i < 2 && s >= 0; i++) {
    sqlite3_reset(st);
    sqlite3_bind_int64(st, 1, ids[i]);
    if (sqlite3_step(st) != SQLITE_ROW) s = gm_err_set(err, GM_ERR_INVAL, "no trace %" PRId64 " in the database", ids[i]);
    else snprintf(path[i], sizeof path[i], "%s", (const char *)sqlite3_column_text(st, 0));
  }
  sqlite3_finalize(st);
  if (s < 0) return s;
  s = ana_diff_traces(path[0], path[1], flags, d, err);
  if (s < 0) return s;
  /* The framework's default setting as gpureplay words it: the policy with no conf, the
   * sweep's first row for its framework. */
  s = ana_prepare(db, &st,
                  "SELECT policy, peak_reserved_bytes FROM v_runs WHERE trace_id = ?1 AND policy IN"
                  " ('pytorch', 'jax', 'tf', 'cupy') ORDER BY run_id LIMIT 1", err);
  for (int i = 0; i < 2 && s >= 0; i++) {
    sqlite3_reset(st);
    sqlite3_bind_int64(st, 1, ids[i]);
    if (sqlite3_step(st) == SQLITE_ROW) {
      d->side[i].has_reserved = 1;
      snprintf(d->side[i].policy, sizeof d->side[i].policy, "%s", (const char *)sqlite3_column_text(st, 0));
      d->side[i].peak_reserved = (uint64_t)sqlite3_column_int64(st, 1);
    }
  }
  sqlite3_finalize(st);
  if (s < 0) ana_diff_free(d);
  return s;
}

/* ---- output ---- */

static const char *sz(uint64_t v, char *b) { return gm_format_size(v, b, 32); }

static const char *signed_sz(int64_t v, char *b) {
  char t[32];
  snprintf(b, 40, "%s%s", v < 0 ? "-" : "+", gm_format_size(v < 0 ? (uint64_t)-v : (uint64_t)v, t, sizeof t));
  return b;
}

static void pct(FILE *f, uint64_t a, uint64_t b) {
  if (a) fprintf(f, " (%+.1f%%)", ((double)b - (double)a) / (double)a * 100.0);
}

void ana_diff_print_text(FILE *f, const ana_diff_t *d, int top) {
  char x[40], y[40], z[40], e0[1024], e1[1024], cs[256];
  gm_escape(d->side[0].path, e0, sizeof e0);
  gm_escape(d->side[1].path, e1, sizeof e1);
  fprintf(f, "A: %s\nB: %s\n", e0, e1);
  for (int i = 0; i < 2; i++)
    if (!d->side[i].allocs)
      fprintf(f, "note: %s has no GPU allocation (%" PRIu64 " events%s): its figures are 0\n", i ? "B" : "A",
              d->side[i].events, d->side[i].frees ? ", frees only" : "");
  for (int i = 0; i < 2; i++)
    if (d->side[i].out_of_order[0]) fprintf(f, "warning: %s: %s\n", i ? "B" : "A", d->side[i].out_of_order);
  fprintf(f, "%-22s %14s %14s %16s\n", "", "A", "B", "B - A");
  fprintf(f, "%-22s %14s %14s %16s", "peak live", sz(d->side[0].peak_live, x), sz(d->side[1].peak_live, y),
          signed_sz((int64_t)d->side[1].peak_live - (int64_t)d->side[0].peak_live, z));
  pct(f, d->side[0].peak_live, d->side[1].peak_live);
  fputc('\n', f);
  if (d->side[0].has_reserved && d->side[1].has_reserved) {
    fprintf(f, "%-22s %14s %14s %16s", "peak reserved", sz(d->side[0].peak_reserved, x),
            sz(d->side[1].peak_reserved, y),
            signed_sz((int64_t)d->side[1].peak_reserved - (int64_t)d->side[0].peak_reserved, z));
    pct(f, d->side[0].peak_reserved, d->side[1].peak_reserved);
    fprintf(f, "  (%s / %s)\n", d->side[0].policy, d->side[1].policy);
  }
  fprintf(f, "%-22s %14" PRIu64 " %14" PRIu64 " %+16" PRId64 "\n", "allocations", d->side[0].allocs,
          d->side[1].allocs, (int64_t)d->side[1].allocs - (int64_t)d->side[0].allocs);
  fprintf(f, "%-22s %14" PRIu64 " %14" PRIu64 "\n", "callsites", d->side[0].sites, d->side[1].sites);
  fprintf(f, "%-22s %13.3fs %13.3fs\n", "duration", (double)d->side[0].duration_ns / 1e9,
          (double)d->side[1].duration_ns / 1e9);
  fprintf(f, "%-22s %13.1f%% %13.1f%%\n", "peak at (of the run)",
          d->side[0].duration_ns ? 100.0 * (double)d->side[0].peak_live_ts_ns / (double)d->side[0].duration_ns : 0.0,
          d->side[1].duration_ns ? 100.0 * (double)d->side[1].peak_live_ts_ns / (double)d->side[1].duration_ns : 0.0);
  fprintf(f, "new callsites (only in B): %" PRIu64 " (%" PRIu64 " allocations, %s); gone (only in A): %" PRIu64
             " (%" PRIu64 " allocations, %s)\n",
          d->new_sites, d->new_allocs, sz(d->new_bytes, x), d->gone_sites, d->gone_allocs, sz(d->gone_bytes, y));
  if (!d->n_sites) return;
  fprintf(f, "live at the peak by callsite, by growth:\n%12s %12s %13s  %s\n", "A", "B", "B - A", "callsite");
  for (size_t i = 0; i < d->n_sites && (int)i < top; i++) {
    const ana_diff_site_t *s = &d->sites[i];
    const char *mark = s->allocs[1] && !s->allocs[0] ? " [new]" : s->allocs[0] && !s->allocs[1] ? " [gone]" : "";
    fprintf(f, "%12s %12s %13s  %s%s\n", sz(s->peak_bytes[0], x), sz(s->peak_bytes[1], y), signed_sz(growth(s), z),
            s->text[0] ? gm_escape_cut(s->text, cs, 160) : "(no callsite recorded)", mark);
  }
  if (d->n_sites > (size_t)top) fprintf(f, "(%zu more callsites: --csv DIR writes %s)\n", d->n_sites - (size_t)top,
                                            d->n_sites > ANA_DIFF_CSV_MAX_SITES ? "the first 10000 and sums the rest" : "them all");
}

static json_t *jtext(const char *s) {
  json_t *j = json_string(s);
  if (j) return j;
  char esc[ANA_MAX_STRING * 4 + 16]; /* not UTF-8: \xHH as gm_escape writes it */
  return json_string(gm_escape(s, esc, sizeof esc));
}

static void set_u64(json_t *o, const char *k, uint64_t v) { json_object_set_new(o, k, json_integer((json_int_t)v)); }

gm_status_t ana_diff_print_json(FILE *f, const ana_diff_t *d, gm_err_t *err) {
  json_t *j = json_object();
  for (int i = 0; i < 2; i++) {
    const ana_diff_side_t *s = &d->side[i];
    json_t *o = json_object();
    json_object_set_new(o, "trace", jtext(s->path));
    set_u64(o, "events", s->events);
    set_u64(o, "allocs", s->allocs);
    set_u64(o, "duration_ns", s->duration_ns);
    set_u64(o, "peak_live_bytes", s->peak_live);
    set_u64(o, "peak_live_ts_ns", s->peak_live_ts_ns);
    set_u64(o, "callsites", s->sites);
    if (s->has_reserved) {
      set_u64(o, "peak_reserved_bytes", s->peak_reserved);
      json_object_set_new(o, "policy", jtext(s->policy));
    }
    json_object_set_new(j, i ? "b" : "a", o);
  }
  set_u64(j, "new_callsites", d->new_sites);
  set_u64(j, "new_allocs", d->new_allocs);
  set_u64(j, "gone_callsites", d->gone_sites);
  set_u64(j, "gone_allocs", d->gone_allocs);
  json_t *arr = json_array();
  for (size_t i = 0; i < d->n_sites && i < 100; i++) {
    const ana_diff_site_t *s = &d->sites[i];
    json_t *o = json_object();
    json_object_set_new(o, "callsite", jtext(s->text));
    set_u64(o, "a_peak_bytes", s->peak_bytes[0]);
    set_u64(o, "b_peak_bytes", s->peak_bytes[1]);
    json_object_set_new(o, "growth_bytes", json_integer(growth(s)));
    set_u64(o, "a_allocs", s->allocs[0]);
    set_u64(o, "b_allocs", s->allocs[1]);
    json_object_set_new(o, "status", json_string(s->allocs[1] && !s->allocs[0] ? "new"
                                                 : s->allocs[0] && !s->allocs[1] ? "gone" : "both"));
    json_array_append_new(arr, o);
  }
  json_object_set_new(j, "callsites", arr); /* the first 100 by growth; the CSV has more (ANA_DIFF_CSV_MAX_SITES) */
  char *out = json_dumps(j, JSON_COMPACT | JSON_ENSURE_ASCII);
  json_decref(j);
  if (!out) return gm_err_set(err, GM_ERR_NOMEM, "out of memory writing JSON");
  fprintf(f, "%s\n", out);
  free(out);
  return GM_OK;
}

static gm_status_t csv_open(const char *dir, const char *name, gm_out_t **o, gm_err_t *err) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  gm_status_t s = gm_out_open(o, path, err);
  if (s < 0) return s;
  if (!gm_out_file(*o)) {
    gm_out_abort(*o);
    return gm_err_set(err, GM_ERR_NOMEM, "out of memory");
  }
  return GM_OK;
}

gm_status_t ana_diff_write_csv(const ana_diff_t *d, const char *dir, gm_err_t *err) {
  if (mkdir(dir, 0777) != 0 && errno != EEXIST)
    return gm_err_set(err, GM_ERR_IO, "cannot write CSV into '%s': cannot create the directory: %s", dir,
                      strerror(errno));
  gm_out_t *o = NULL;
  gm_status_t s = csv_open(dir, "diff_summary.csv", &o, err);
  if (s >= 0) {
    FILE *f = gm_out_file(o);
    fputs("side,trace,events,allocs,duration_ns,peak_live_bytes,peak_live_ts_ns,peak_reserved_bytes,policy\n", f);
    for (int i = 0; i < 2; i++) {
      const ana_diff_side_t *x = &d->side[i];
      fputs(i ? "B," : "A,", f);
      ana_csv_field(f, x->path, 1);
      fprintf(f, ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",", x->events, x->allocs,
              x->duration_ns, x->peak_live, x->peak_live_ts_ns);
      if (x->has_reserved) fprintf(f, "%" PRIu64, x->peak_reserved);
      fputc(',', f);
      ana_csv_field(f, x->policy, 1);
      fputc('\n', f);
    }
    s = gm_out_commit(o, err);
  }
  if (s >= 0) s = csv_open(dir, "diff_callsites.csv", &o, err);
  if (s >= 0) {
    FILE *f = gm_out_file(o);
    fputs("callsite,status,a_peak_bytes,b_peak_bytes,growth_bytes,a_peak_allocs,b_peak_allocs,a_allocs,b_allocs,"
          "a_bytes,b_bytes\n", f);
    size_t shown = d->n_sites < ANA_DIFF_CSV_MAX_SITES ? d->n_sites : ANA_DIFF_CSV_MAX_SITES;
    for (size_t i = 0; i < shown; i++) {
      const ana_diff_site_t *x = &d->sites[i];
      ana_csv_field(f, x->text, 1);
      fprintf(f, ",%s,%" PRIu64 ",%" PRIu64 ",%" PRId64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64
                 ",%" PRIu64 "\n",
              x->allocs[1] && !x->allocs[0] ? "new" : x->allocs[0] && !x->allocs[1] ? "gone" : "both",
              x->peak_bytes[0], x->peak_bytes[1], growth(x), x->peak_allocs[0], x->peak_allocs[1], x->allocs[0],
              x->allocs[1], x->bytes[0], x->bytes[1]);
    }
    if (shown < d->n_sites) { /* the rest, summed (limit ANA_DIFF_CSV_MAX_SITES) */
      ana_diff_site_t r;
      memset(&r, 0, sizeof r);
      for (size_t i = shown; i < d->n_sites; i++)
        for (int k = 0; k < 2; k++) {
          r.peak_bytes[k] += d->sites[i].peak_bytes[k];
          r.peak_allocs[k] += d->sites[i].peak_allocs[k];
          r.allocs[k] += d->sites[i].allocs[k];
          r.bytes[k] += d->sites[i].bytes[k];
        }
      fprintf(f, "\"(%zu other callsites, summed; limit ANA_DIFF_CSV_MAX_SITES = %d)\",rest,%" PRIu64 ",%" PRIu64
                 ",%" PRId64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 "\n",
              d->n_sites - shown, ANA_DIFF_CSV_MAX_SITES, r.peak_bytes[0], r.peak_bytes[1], growth(&r), r.peak_allocs[0],
              r.peak_allocs[1], r.allocs[0], r.allocs[1], r.bytes[0], r.bytes[1]);
    }
    s = gm_out_commit(o, err);
  }
  if (s >= 0) s = csv_open(dir, "diff_timeline.csv", &o, err);
  if (s >= 0) {
    FILE *f = gm_out_file(o);
    fputs("t_share,a_ts_ns,b_ts_ns,a_live_bytes,b_live_bytes\n", f);
    for (int k = 0; k < ANA_DIFF_POINTS; k++) {
      double t = (double)k / (ANA_DIFF_POINTS - 1);
      fprintf(f, "%.4f,%.0f,%.0f,%" PRIu64 ",%" PRIu64 "\n", t, t * (double)d->side[0].duration_ns,
              t * (double)d->side[1].duration_ns, d->live[0][k], d->live[1][k]);
    }
    s = gm_out_commit(o, err);
  }
  return s < 0 ? gm_err_wrap(err, "cannot write CSV into '%s'", dir) : GM_OK;
}
