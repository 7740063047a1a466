/* ana_report.c: the report's tables, each declared once as an SQL query, and the text and
 * CSV writers over them (the HTML writer, ana_html.c, renders the same declarations).
 *
 * A table's query takes one parameter, a trace_id, or NULL for every trace (CSV writes all
 * traces in one file per table; text and HTML go trace by trace). Columns whose names end in
 * "_bytes" are shown as human sizes in text and HTML and stay exact integers in CSV.
 * Allocations live at the peak are computed once per report into a temp table: three tables
 * read them and a trace of ten million events has millions of allocation rows. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "analyze/ana_report_internal.h"
#include "analyze/ana_run_fields.h"

const ana_table_t ana_tables[] = {
    {"traces", "Trace",
     "SELECT trace_id, path, host, pid, rank, world_size, capture_mode, command_line, gpu_name,"
     " NULLIF(gpu_total_mem, 0) AS gpu_memory_bytes,"
     /* Truncated to the millisecond, as `gpuanalyze info` prints it. */
     " CASE WHEN start_time_ns > 0 THEN strftime('%Y-%m-%d %H:%M:%S', start_time_ns / 1000000000, 'unixepoch')"
     "   || printf('.%03d UTC', start_time_ns / 1000000 % 1000) END AS start_time, events, ROUND(duration_ns/1e9, 3) AS duration_s,"
     " peak_live_bytes, ROUND(peak_live_ts_ns/1e9, 3) AS peak_live_at_s,"
     " requested_bytes_total AS requested_total_bytes,"
     " (SELECT count FROM trace_kinds k WHERE k.trace_id = traces.trace_id AND k.kind = 'alloc_failed')"
     "   AS recorded_failures,"
     " truncated, seq_gaps, dropped, partial, damaged_chunks, lost_events, index_damaged"
     " FROM traces WHERE (?1 IS NULL OR trace_id=?1) ORDER BY trace_id",
     0},
    {"runs", "Policies side by side (replay runs)",
     "SELECT trace_id, policy, backend, capacity_bytes, peak_reserved_bytes, peak_allocated_bytes,"
     " peak_requested_bytes, lower_bound_bytes,"
     /* A run that ran out of memory served less than the trace asked: no waste to speak of. */
     " CASE WHEN ooms = 0 THEN MAX(peak_reserved_bytes - lower_bound_bytes, 0) END AS waste_bytes,"
     " MAX(COALESCE(" ANA_RF_PEAK_REQUESTED_PLUS_EXTERNAL_BYTES("summary_json") ", 0), lower_bound_bytes)"
     "   AS needs_at_least_bytes,"
     " ROUND(fragmentation_at_peak, 4) AS frag_at_peak, ROUND(fragmentation_mean, 4) AS frag_mean,"
     " device_alloc_calls, device_free_calls, alloc_retries, ooms,"
     /* A figure that depends on timing (frees waiting on stream events, the async pool) is a
      * range, never an exact figure: its ends beside it, and it ranks by its high end. */
     " CASE WHEN " ANA_RF_TIMING_SENSITIVE("summary_json") " THEN 'range' ELSE 'point' END AS figure,"
     " " ANA_RF_PEAK_RESERVED_RANGE_LOW_BYTES("summary_json") " AS reserved_low_bytes,"
     " " ANA_RF_PEAK_RESERVED_RANGE_HIGH_BYTES("summary_json") " AS reserved_high_bytes"
     " FROM v_runs WHERE (?1 IS NULL OR trace_id=?1)"
     /* gpureplay's ranking: those that fit by peak reserved (a range by its high end), then
      * those that got furthest. */
     " ORDER BY trace_id, ooms > 0, CASE WHEN ooms > 0 THEN -first_oom_event END, ooms,"
     " MAX(peak_reserved_bytes, COALESCE(" ANA_RF_PEAK_RESERVED_RANGE_HIGH_BYTES("summary_json") ", 0)),"
     " peak_reserved_bytes, run_id",
     0},
    {"devices", "Devices (each one's own peak; gpureplay replays one device)",
     "SELECT trace_id, device, peak_live_bytes FROM trace_devices d"
     " WHERE (?1 IS NULL OR trace_id=?1)"
     " AND (SELECT COUNT(*) FROM trace_devices d2 WHERE d2.trace_id = d.trace_id) > 1"
     " ORDER BY trace_id, device",
     0},
    {"owners", "Memory by owner (each device at its peak of mapped bytes)",
     "SELECT * FROM (SELECT trace_id, device, owner, owner_kind, at_peak_bytes, peak_bytes AS own_peak_bytes"
     " FROM trace_owners WHERE (?1 IS NULL OR trace_id=?1)"
     /* the context is in no event; a trace whose recorder wrote no figure for it says so */
     " UNION ALL SELECT trace_id, NULL, 'CUDA context (not recorded)', 'context', NULL, NULL FROM traces"
     "   WHERE (?1 IS NULL OR trace_id=?1) AND EXISTS (SELECT 1 FROM trace_owners o WHERE o.trace_id = traces.trace_id)"
     "   AND NOT EXISTS (SELECT 1 FROM trace_owners o WHERE o.trace_id = traces.trace_id AND o.owner_kind = 'context'))"
     " ORDER BY trace_id, device IS NULL, device, at_peak_bytes DESC",
     0},
    /* what was live at the peak: the loader's summaries (ana_load_peak.c), never events */
    {"live_at_peak_largest", "Largest allocations live at the peak",
     "SELECT p.trace_id, p.alloc_seq, p.size AS size_bytes, p.device, p.stream,"
     " COALESCE(s.text, '') AS callsite, ROUND((t.peak_live_ts_ns - p.t_alloc_ns)/1e9, 6) AS age_s"
     " FROM trace_peak_allocs p JOIN traces t USING(trace_id)"
     " LEFT JOIN strings s ON s.trace_id = p.trace_id AND s.string_id = p.callsite"
     " WHERE (?1 IS NULL OR p.trace_id=?1) ORDER BY p.trace_id, p.size DESC, p.alloc_seq LIMIT 25",
     1},
    {"live_at_peak_by_stream", "Live at the peak, by stream",
     "SELECT trace_id, stream, allocs, bytes AS live_bytes FROM trace_peak_streams"
     " WHERE (?1 IS NULL OR trace_id=?1) ORDER BY trace_id, live_bytes DESC, stream",
     0},
    {"live_at_peak_by_callsite", "Live at the peak, by callsite",
     "SELECT trace_id, callsite, allocs, bytes AS live_bytes FROM trace_peak_callsites"
     " WHERE (?1 IS NULL OR trace_id=?1) ORDER BY trace_id, live_bytes DESC, callsite LIMIT 25",
     1},
    {"size_histogram", "Request sizes (power-of-two classes)",
     "SELECT trace_id, (1 << MAX(size_log2, 0)) AS bucket_min_bytes, allocs, bytes AS total_bytes FROM size_histogram"
     " WHERE (?1 IS NULL OR trace_id=?1) ORDER BY trace_id, size_log2",
     0},
    {"lifetimes", "Allocation lifetimes (power-of-ten classes; -1: never freed)",
     "SELECT trace_id, log10_ns, CASE log10_ns WHEN -1 THEN 'never freed' WHEN 0 THEN '< 10 ns'"
     " ELSE '>= 1e' || log10_ns || ' ns' END AS lifetime, allocs, bytes AS total_bytes"
     " FROM lifetime_histogram WHERE (?1 IS NULL OR trace_id=?1) ORDER BY trace_id, log10_ns",
     0},
    /* per-trace and per-run summaries only (never events): hundreds of ranks stay cheap */
    {"ranks", "Ranks side by side",
     "SELECT t.trace_id, t.rank, t.world_size, t.host, d.peak_live_bytes, d.device, d.peak_mapped_bytes,"
     " (SELECT MIN(r.peak_reserved_bytes) FROM v_runs r WHERE r.trace_id = t.trace_id AND r.policy = 'pytorch'"
     "   AND COALESCE(" ANA_RF_DEVICE("r.summary_json") ", d.device) = d.device) AS default_reserved_bytes,"
     " ROUND(d.peak_live_bytes * 1.0 / (SELECT AVG(d2.peak_live_bytes) FROM trace_devices d2 JOIN traces t2 USING(trace_id)"
     "   WHERE t2.rank IS NOT NULL AND d2.peak_live_bytes > 0), 3) AS vs_mean"
     " FROM traces t JOIN trace_devices d USING(trace_id) WHERE t.rank IS NOT NULL AND ?1 IS NULL"
     " AND (d.peak_live_bytes > 0 OR COALESCE(d.peak_mapped_bytes, 0) > 0)"
     " AND (SELECT COUNT(*) FROM traces WHERE rank IS NOT NULL) > 1 ORDER BY t.rank, t.trace_id, d.device",
     0},
    {NULL, NULL, NULL, 0}};

gm_status_t ana_report_check_summaries(ana_db_t *db, gm_err_t *err) {
  sqlite3_stmt *st = NULL;
  gm_status_t s = ana_prepare(db, &st, "SELECT trace_id, path FROM traces WHERE NOT report_summaries"
                              " ORDER BY trace_id LIMIT 1", err);
  if (s < 0) return s;
  if (sqlite3_step(st) == SQLITE_ROW) {
    char p[1024];
    gm_escape((const char *)sqlite3_column_text(st, 1), p, sizeof p);
    s = gm_err_set(err, GM_ERR_VERSION, "trace %lld ('%s') was loaded by an older gpuanalyze, without the "
                   "summaries the report reads: load it again (`gpuanalyze load --db %s %s` upgrades it in "
                   "place and keeps its replays)", (long long)sqlite3_column_int64(st, 0), p,
                   db->path ? db->path : "DB", p);
  }
  sqlite3_finalize(st);
  return s;
}

/* The report reads per-trace and per-run summaries only: a trace without them is refused. */
gm_status_t ana_report_prepare(ana_db_t *db, gm_err_t *err) { return ana_report_check_summaries(db, err); }

int ana_col_is_bytes(const char *name) {
  size_t n = strlen(name);
  return n > 6 && strcmp(name + n - 6, "_bytes") == 0;
}

/* Text cell: sizes human-readable, NULL as "-". */
void ana_cell_text(sqlite3_stmt *st, int c, char *buf, size_t n) {
  int type = sqlite3_column_type(st, c);
  if (type == SQLITE_NULL) {
    snprintf(buf, n, "-");
  } else if (type == SQLITE_INTEGER && ana_col_is_bytes(sqlite3_column_name(st, c))) {
    int64_t v = sqlite3_column_int64(st, c);
    if (v < 0) {
      buf[0] = '-';
      gm_format_size((uint64_t)-v, buf + 1, n - 1);
    } else {
      gm_format_size((uint64_t)v, buf, n);
    }
  } else {
    snprintf(buf, n, "%s", (const char *)sqlite3_column_text(st, c));
  }
}

gm_status_t ana_table_query(ana_db_t *db, const ana_table_t *t, int64_t trace_id, sqlite3_stmt **st,
                            gm_err_t *err) {
  gm_status_t s = ana_prepare(db, st, t->sql, err);
  if (s < 0) return gm_err_wrap(err, "table %s", t->name);
  if (trace_id >= 0) sqlite3_bind_int64(*st, 1, trace_id);
  else sqlite3_bind_null(*st, 1);
  return GM_OK;
}

/* Text tables: cells buffered (tables are capped at a few dozen rows) so every column gets the
 * width of its widest cell; text left-aligned, numbers right-aligned, cells cut at 60 bytes.
 * The single-row provenance table prints as name: value lines. */
enum { TXT_ROWS = 64, TXT_COLS = 24, TXT_CELL = 61 };

static void print_text_table(ana_db_t *db, FILE *out, const ana_table_t *t, int64_t trace_id) {
  sqlite3_stmt *st = NULL;
  if (ana_table_query(db, t, trace_id, &st, NULL) < 0) return;
  int nc = sqlite3_column_count(st), rows = 0;
  if (nc > TXT_COLS) nc = TXT_COLS;
  static char cells[TXT_ROWS][TXT_COLS][TXT_CELL];
  int width[TXT_COLS] = {0}, text[TXT_COLS] = {0};
  char cell[256];
  for (int c = 1; c < nc; c++) width[c] = (int)strlen(sqlite3_column_name(st, c));
  while (rows < TXT_ROWS && sqlite3_step(st) == SQLITE_ROW) {
    for (int c = 1; c < nc; c++) {
      ana_cell_text(st, c, cell, sizeof cell);
      gm_escape_cut(cell, cells[rows][c], TXT_CELL); /* callsites, paths: not for the terminal to act on */
      int w = (int)strlen(cells[rows][c]);
      if (w > width[c]) width[c] = w;
      if (sqlite3_column_type(st, c) == SQLITE_TEXT) text[c] = 1;
    }
    rows++;
  }
  if (rows == 0) {
    sqlite3_finalize(st);
    return;
  }
  fprintf(out, "\n  %s\n", t->title);
  if (strcmp(t->name, "traces") == 0 && rows == 1) {
    for (int c = 1; c < nc; c++) fprintf(out, "    %-22s %s\n", sqlite3_column_name(st, c), cells[0][c]);
    sqlite3_finalize(st);
    return;
  }
  fprintf(out, "   ");
  for (int c = 1; c < nc; c++)
    fprintf(out, text[c] ? " %-*s" : " %*s", width[c], sqlite3_column_name(st, c));
  fprintf(out, "\n");
  for (int r = 0; r < rows; r++) {
    fprintf(out, "   ");
    for (int c = 1; c < nc; c++) fprintf(out, text[c] ? " %-*s" : " %*s", width[c], cells[r][c]);
    fprintf(out, "\n");
  }
  sqlite3_finalize(st);
}

/* The recorded run's first failed request, from the trace itself: the first line of the trace's
 * section (the recommendation below says which setting would have served it). */
static void print_trace_failure(ana_db_t *db, FILE *out, int64_t trace_id) {
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(db->h,
                         "SELECT k.count, t.failed_size, t.failed_stream, t.failed_ts_ns, COALESCE(t.failed_callsite, '')"
                         " FROM trace_kinds k JOIN traces t USING(trace_id)"
                         " WHERE k.trace_id = ?1 AND k.kind = 'alloc_failed' AND k.count > 0",
                         -1, &st, NULL) != SQLITE_OK)
    return;
  sqlite3_bind_int64(st, 1, trace_id);
  if (sqlite3_step(st) == SQLITE_ROW) {
    char b1[32];
    int64_t n = sqlite3_column_int64(st, 0);
    fprintf(out, "OUT OF MEMORY: the recorded run failed %" PRId64 " request%s; the first: %s", n, n == 1 ? "" : "s",
            gm_format_size((uint64_t)sqlite3_column_int64(st, 1), b1, sizeof b1));
    if (sqlite3_column_type(st, 2) != SQLITE_NULL) fprintf(out, " on stream %lld", (long long)sqlite3_column_int64(st, 2));
    double t = (double)sqlite3_column_int64(st, 3);
    if (t >= 1e9) fprintf(out, " at t=%.3f s", t / 1e9);
    else fprintf(out, " at t=%.3f ms", t / 1e6);
    const char *cs = (const char *)sqlite3_column_text(st, 4);
    if (cs && *cs) {
      fputs(" (", out);
      gm_fputs_escaped(cs, out); /* the trace's text */
      fputc(')', out);
    }
    fprintf(out, "; the recommendation below says which setting would have served it\n");
  }
  sqlite3_finalize(st);
}

gm_status_t ana_report_text(ana_db_t *db, FILE *out, gm_err_t *err) {
  gm_status_t s = ana_report_prepare(db, err);
  if (s < 0) return s;
  sqlite3_stmt *st = NULL;
  s = ana_prepare(db, &st, "SELECT trace_id, path FROM traces ORDER BY trace_id", err);
  if (s < 0) return gm_err_wrap(err, "report");
  int any = 0;
  while (sqlite3_step(st) == SQLITE_ROW) {
    any = 1;
    fprintf(out, "== trace %lld: ", (long long)sqlite3_column_int64(st, 0));
    gm_fputs_escaped((const char *)sqlite3_column_text(st, 1), out);
    fputc('\n', out);
    print_trace_failure(db, out, sqlite3_column_int64(st, 0));
    for (const ana_table_t *t = ana_tables; t->name; t++)
      if (strcmp(t->name, "ranks") != 0) print_text_table(db, out, t, sqlite3_column_int64(st, 0));
    fprintf(out, "\n");
  }
  sqlite3_finalize(st);
  if (!any) fprintf(out, "no traces in the database\n");
  if ((s = ana_report_ranks_text(db, out, err)) < 0) return s;
  fprintf(out, "\nrecommendation:\n");
  return ana_recommend(db, out, err);
}

gm_status_t ana_report_ranks_text(ana_db_t *db, FILE *out, gm_err_t *err) {
  int jobs = 0, ranks = 0;
  gm_status_t s = GM_OK;
  sqlite3_stmt *q = NULL;
  if (sqlite3_prepare_v2(db->h, "SELECT 1 FROM traces WHERE rank IS NOT NULL GROUP BY command_line, world_size"
                                " HAVING COUNT(*) > 1 LIMIT 1", -1, &q, NULL) == SQLITE_OK)
    ranks = sqlite3_step(q) == SQLITE_ROW;
  sqlite3_finalize(q);
  if (ranks) {
    fprintf(out, "\nranks of one job:\n");
    s = ana_ranks(db, out, ANA_RANKS_TEXT, &jobs, err);
  }
  return s;
}

/* RFC 4180: quote a field when it holds a comma, quote, CR or LF; double inner quotes.
 * Text from the input (paths, command lines, callsites, policy names of a results file) is
 * also neutralised for spreadsheets, as the OWASP CSV-injection guidance says: a text cell
 * that starts with '=', '+', '-', '@', TAB or CR (or another control character) would be a
 * formula, so it gets a leading
 * single quote and is quoted; a text cell holding ';' or TAB is quoted too, so that a
 * spreadsheet splitting on those cannot start a formula in the middle of it. Numbers (our
 * integers and reals, negative ones too) are written as they are. */
void ana_csv_field(FILE *f, const char *s, int is_text) {
  if (!s) return;
  /* OWASP names TAB and CR; any C0 control in front may be skipped by some reader, so all */
  int formula = is_text && s[0] && (strchr("=+-@", s[0]) || (unsigned char)s[0] < 0x20);
  if (!formula && !strpbrk(s, is_text ? ",\"\r\n;\t" : ",\"\r\n")) {
    fputs(s, f);
    return;
  }
  fputc('"', f);
  if (formula) fputc('\'', f);
  for (; *s; s++) {
    if (*s == '"') fputc('"', f);
    fputc(*s, f);
  }
  fputc('"', f);
}

/* Each CSV file is written whole or not at all (gm_out: a temporary file renamed over it). */
static gm_status_t write_csv(ana_db_t *db, const char *dir, const char *name, sqlite3_stmt *st,
                             gm_err_t *err) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s.csv", dir, name);
  gm_out_t *o = NULL;
  gm_status_t s = gm_out_open(&o, path, err);
  if (s < 0) return s;
  FILE *f = gm_out_file(o);
  if (!f) {
    gm_out_abort(o);
    return gm_err_set(err, GM_ERR_NOMEM, "out of memory");
  }
  int nc = sqlite3_column_count(st);
  for (int c = 0; c < nc; c++) {
    if (c) fputc(',', f);
    ana_csv_field(f, sqlite3_column_name(st, c), 0);
  }
  fputc('\n', f);
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    for (int c = 0; c < nc; c++) {
      if (c) fputc(',', f);
      int text = sqlite3_column_type(st, c) == SQLITE_TEXT; /* before column_text converts it */
      ana_csv_field(f, (const char *)sqlite3_column_text(st, c), text);
    }
    fputc('\n', f);
  }
  if (rc != SQLITE_DONE) {
    gm_out_abort(o);
    return ana_sql_err(db->h, err, name);
  }
  return gm_out_commit(o, err);
}

gm_status_t ana_report_csv(ana_db_t *db, const char *dir, gm_err_t *err) {
  if (mkdir(dir, 0777) != 0 && errno != EEXIST)
    return gm_err_set(err, GM_ERR_IO, "cannot write CSV into '%s': cannot create the directory: %s", dir,
                      strerror(errno));
  gm_status_t s = ana_report_prepare(db, err);
  for (const ana_table_t *t = ana_tables; t->name && s >= 0; t++) {
    sqlite3_stmt *st = NULL;
    /* CSV has every row: the LIMIT of the on-screen tables does not apply. */
    char *sql = strdup(t->sql);
    if (!sql) return gm_err_set(err, GM_ERR_NOMEM, "out of memory");
    char *lim = strstr(sql, " LIMIT ");
    if (lim) *lim = '\0';
    s = ana_prepare(db, &st, sql, err);
    free(sql);
    if (s < 0) return gm_err_wrap(err, "table %s", t->name);
    sqlite3_bind_null(st, 1);
    s = write_csv(db, dir, t->name, st, err);
    sqlite3_finalize(st);
  }
  if (s >= 0) {
    /* The timelines, downsampled as stored: each trace's live bytes and each run's series. */
    sqlite3_stmt *st = NULL;
    s = ana_prepare(db, &st,
                    "SELECT trace_id, 'trace' AS series, ts_ns, NULL AS reserved_bytes, NULL AS allocated_bytes,"
                    " live_bytes AS requested_bytes FROM trace_timeline"
                    " UNION ALL SELECT r.trace_id, r.policy, l.ts_ns, l.reserved, l.allocated, l.requested"
                    " FROM run_timeline l JOIN v_runs r USING(run_id) ORDER BY 1, 2, 3",
                    err);
    if (s >= 0) s = write_csv(db, dir, "timeline", st, err);
    sqlite3_finalize(st);
  }
  return s < 0 ? gm_err_wrap(err, "cannot write CSV into '%s'", dir) : GM_OK;
}
