/* ana_load_identity.c: which trace a file is, for the loader (ana_load_trace.c) and for
 * `report`'s question whether a trace was replayed (SCHEMA.md "Identity and loading").
 *
 * A trace is its bytes: the file is read once (mapped), and its hash is its identity. The same
 * bytes loaded twice are skipped; a path whose file has changed since replaces the trace loaded
 * from it, with its replay runs, and says so through the load's warning callback. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "analyze/ana_db_internal.h"

gm_status_t ana_load_read_file(const char *path, void **buf, size_t *len, gm_err_t *err) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return gm_err_set(err, GM_ERR_IO, "%s", strerror(errno));
  struct stat sb;
  if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode)) {
    close(fd);
    return gm_err_set(err, GM_ERR_IO, "not a regular file");
  }
  *len = (size_t)sb.st_size;
  *buf = *len ? mmap(NULL, *len, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
  close(fd);
  if (*len && *buf == MAP_FAILED) return gm_err_set(err, GM_ERR_IO, "mmap: %s", strerror(errno));
  return GM_OK;
}

gm_status_t ana_trace_replayed(ana_db_t *db, const char *path, int64_t *runs, int64_t *others,
                               gm_err_t *err) {
  *runs = -1;
  *others = 0;
  void *buf = NULL;
  size_t len = 0;
  gm_status_t s = ana_load_read_file(path, &buf, &len, err);
  if (s < 0) return gm_err_wrap(err, "cannot open '%s'", path);
  char hash[32]; /* the identity the loader gives the trace (below) */
  snprintf(hash, sizeof hash, "%016" PRIx64, ana_hash_bytes(buf, len));
  if (len) munmap(buf, len);
  sqlite3_stmt *q = NULL;
  if ((s = ana_prepare(db, &q,
                       "SELECT (SELECT COUNT(*) FROM v_runs r WHERE r.trace_id = t.trace_id)"
                       " FROM traces t WHERE content_hash=?",
                       err)) < 0)
    return s;
  ana_bind_text(q, 1, hash);
  if (sqlite3_step(q) == SQLITE_ROW) *runs = sqlite3_column_int64(q, 0);
  sqlite3_finalize(q);
  if ((s = ana_prepare(db, &q, "SELECT COUNT(*) FROM traces WHERE path=? AND content_hash<>?", err)) < 0) return s;
  ana_bind_text(q, 1, path);
  ana_bind_text(q, 2, hash);
  if (sqlite3_step(q) == SQLITE_ROW) *others = sqlite3_column_int64(q, 0);
  sqlite3_finalize(q);
  return GM_OK;
}

void ana_load_warn(const ana_load_opts_t *o, const char *fmt, ...) {
  if (!o || !o->warn) return;
  char msg[GM_ERR_MSG_MAX + 512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  o->warn(o->warn_ctx, msg);
}

/* Remove trace id and every row that belongs to it, with the replay runs that joined it and no
 * other trace (and their results file once it has no run left), unless keep_runs (the same
 * trace loaded again: its runs join the new row by process). */
static gm_status_t delete_trace(ana_db_t *db, int64_t id, int keep_runs, gm_err_t *err) {
  static const char *const sql[] = {
      "DELETE FROM events WHERE ev_id BETWEEN (SELECT first_ev_id FROM traces WHERE trace_id=?1)"
      " AND (SELECT last_ev_id FROM traces WHERE trace_id=?1)",
      "DELETE FROM open_allocs WHERE trace_id=?1",
      "DELETE FROM trace_kv WHERE trace_id=?1",
      "DELETE FROM trace_devices WHERE trace_id=?1",
      "DELETE FROM trace_owners WHERE trace_id=?1",
      "DELETE FROM trace_peak_callsites WHERE trace_id=?1",
      "DELETE FROM trace_peak_streams WHERE trace_id=?1",
      "DELETE FROM trace_peak_allocs WHERE trace_id=?1",
      "DELETE FROM trace_stack_classes WHERE trace_id=?1",
      "DELETE FROM trace_stack_timeline WHERE trace_id=?1",
      "DELETE FROM trace_oom WHERE trace_id=?1",
      "DELETE FROM trace_kinds WHERE trace_id=?1",
      "DELETE FROM strings WHERE trace_id=?1",
      "DELETE FROM trace_timeline WHERE trace_id=?1",
      "DELETE FROM size_histogram WHERE trace_id=?1",
      "DELETE FROM lifetime_histogram WHERE trace_id=?1",
      "DELETE FROM traces WHERE trace_id=?1 AND ?2", /* keep_runs: what follows finds no runs */
      "CREATE TEMP TABLE IF NOT EXISTS gone_runs(run_id INTEGER PRIMARY KEY, results_id INTEGER)",
      "DELETE FROM temp.gone_runs WHERE ?1 IS NOT NULL",
      "INSERT INTO temp.gone_runs SELECT r.run_id, r.results_id FROM runs r JOIN traces t"
      " ON t.trace_id=?1 AND r.trace_start_time_ns=t.start_time_ns AND r.trace_pid=t.pid"
      " WHERE NOT EXISTS (SELECT 1 FROM traces o WHERE o.trace_id<>?1"
      " AND o.start_time_ns=r.trace_start_time_ns AND o.pid=r.trace_pid)",
      "DELETE FROM run_timeline WHERE run_id IN (SELECT run_id FROM temp.gone_runs) AND ?1 IS NOT NULL",
      "DELETE FROM runs WHERE run_id IN (SELECT run_id FROM temp.gone_runs) AND ?1 IS NOT NULL",
      "DELETE FROM results WHERE results_id IN (SELECT results_id FROM temp.gone_runs)"
      " AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.results_id=results.results_id) AND ?1 IS NOT NULL",
      "DELETE FROM traces WHERE trace_id=?1",
      NULL};
  gm_status_t s = GM_OK;
  for (const char *const *q = sql; *q && s >= 0; q++) {
    sqlite3_stmt *st = NULL;
    if ((s = ana_prepare(db, &st, *q, err)) < 0) break;
    sqlite3_bind_int64(st, 1, id);
    if (sqlite3_bind_parameter_count(st) >= 2) sqlite3_bind_int(st, 2, keep_runs);
    s = ana_step(db, st, err);
    sqlite3_finalize(st);
  }
  return s;
}

/* What the database already holds of this trace: GM_END to skip it (same bytes); GM_OK to load
 * it, after replacing what was loaded from the same path. */
gm_status_t ana_load_check_identity(ana_db_t *db, const char *path, const char *real, const char *hash,
                                  const ana_load_opts_t *o, gm_err_t *err) {
  sqlite3_stmt *q = NULL;
  gm_status_t s = ana_prepare(db, &q, "SELECT trace_id, report_summaries FROM traces WHERE content_hash=?", err);
  if (s < 0) return s;
  ana_bind_text(q, 1, hash);
  int seen = sqlite3_step(q) == SQLITE_ROW;
  int64_t old = seen ? sqlite3_column_int64(q, 0) : -1;
  int stale = seen && !sqlite3_column_int(q, 1);
  sqlite3_finalize(q);
  if (stale) {
    /* Loaded by a gpuanalyze older than the report's summaries (ana_load_peak.c): the same
     * bytes again upgrade it in place; its replay runs stay (they join by process). */
    ana_load_warn(o, "'%s' was loaded by an older gpuanalyze (trace %lld, without the report's summaries): loading it "
         "again; its replays stay", path, (long long)old);
    return delete_trace(db, old, 1, err);
  }
  if (seen) return GM_END;
  if ((s = ana_prepare(db, &q, "SELECT trace_id, path, loaded_unix_ns, events FROM traces WHERE real_path=?", err)) < 0)
    return s;
  ana_bind_text(q, 1, real);
  while (s >= 0 && sqlite3_step(q) == SQLITE_ROW) {
    int64_t id = sqlite3_column_int64(q, 0);
    time_t when = (time_t)(sqlite3_column_int64(q, 2) / 1000000000);
    char stamp[64] = "?";
    struct tm tm;
    if (localtime_r(&when, &tm)) strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S", &tm);
    ana_load_warn(o, "'%s' has changed since it was loaded on %s (trace %lld, %lld events): replacing that trace and its replay runs",
         path, stamp, (long long)id, (long long)sqlite3_column_int64(q, 3));
    s = delete_trace(db, id, 0, err);
  }
  sqlite3_finalize(q);
  return s;
}
