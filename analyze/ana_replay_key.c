/* ana_replay_key.c: what `gpuanalyze report` asked gpureplay for each trace (table
 * report_replays), so that a second report reuses the replays, the tuner's search included,
 * while the trace's bytes, gpureplay's version and the options that change its figures are
 * the same; and, when it replays again, the older runs of the trace dropped once the new ones
 * are loaded (a sweep's 15 runs beside a later tune's 26 would be shown twice). */
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <errno.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "analyze/ana_db_internal.h"

gm_status_t ana_trace_hash(const char *path, char *out, size_t n, gm_err_t *err) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return gm_err_set(err, GM_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
  struct stat sb;
  if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode)) {
    close(fd);
    return gm_err_set(err, GM_ERR_IO, "cannot open '%s': not a regular file", path);
  }
  size_t len = (size_t)sb.st_size;
  void *buf = len ? mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
  close(fd);
  if (len && buf == MAP_FAILED) return gm_err_set(err, GM_ERR_IO, "cannot open '%s': mmap: %s", path, strerror(errno));
  /* the identity the loader gives the trace (traces.content_hash, ana_load_trace.c) */
  snprintf(out, n, "%016" PRIx64, ana_hash_bytes(buf, len));
  if (len) munmap(buf, len);
  return GM_OK;
}

gm_status_t ana_replay_key_get(ana_db_t *db, const char *hash, ana_replay_key_t *k, int *found, gm_err_t *err) {
  sqlite3_stmt *st = NULL;
  *found = 0;
  memset(k, 0, sizeof *k);
  gm_status_t s = ana_prepare(db, &st, "SELECT what, tool, options FROM report_replays WHERE trace_hash=?", err);
  if (s < 0) return s;
  sqlite3_bind_text(st, 1, hash, -1, SQLITE_STATIC);
  if (sqlite3_step(st) == SQLITE_ROW) {
    *found = 1;
    snprintf(k->what, sizeof k->what, "%s", (const char *)sqlite3_column_text(st, 0));
    snprintf(k->tool, sizeof k->tool, "%s", (const char *)sqlite3_column_text(st, 1));
    snprintf(k->options, sizeof k->options, "%s", (const char *)sqlite3_column_text(st, 2));
  }
  sqlite3_finalize(st);
  return GM_OK;
}

int ana_replay_key_serves(const ana_replay_key_t *have, const ana_replay_key_t *want) {
  /* a gpureplay that cannot say its version (want->tool "") cannot replay either: keep what is there */
  if ((want->tool[0] && strcmp(have->tool, want->tool) != 0) || strcmp(have->options, want->options) != 0) return 0;
  /* the tuner replays the sweep's grid too: its runs serve a sweep */
  return strcmp(have->what, want->what) == 0 || (strncmp(have->what, "tune", 4) == 0 && strcmp(want->what, "sweep") == 0);
}

gm_status_t ana_replay_key_put(ana_db_t *db, const char *hash, int64_t results_id, const ana_replay_key_t *k,
                               gm_err_t *err) {
  /* Runs of the trace from older results files: the ones just loaded replace them (the trace is
   * joined to its runs by process, as v_runs does). Only simulator runs, which a report makes
   * again: a real GPU's runs (`gpureplay --device=cuda:N`, loaded by hand) stay. */
  static const char *const sql[] = {
      "DELETE FROM run_timeline WHERE run_id IN (SELECT run_id FROM temp.ana_old_runs)",
      "DELETE FROM runs WHERE run_id IN (SELECT run_id FROM temp.ana_old_runs)",
      "DELETE FROM results WHERE results_id IN (SELECT results_id FROM temp.ana_old_runs)"
      " AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.results_id = results.results_id)",
      NULL};
  gm_status_t s = ana_exec(db, "BEGIN IMMEDIATE", err);
  if (s < 0) return s;
  s = ana_exec(db, "CREATE TEMP TABLE IF NOT EXISTS ana_old_runs(run_id INTEGER PRIMARY KEY, results_id INTEGER);"
                   "DELETE FROM temp.ana_old_runs", err);
  sqlite3_stmt *st = NULL;
  if (s >= 0 && (s = ana_prepare(db, &st,
                                 "INSERT INTO temp.ana_old_runs SELECT r.run_id, r.results_id FROM runs r"
                                 " JOIN traces t ON t.content_hash = ?1 AND r.trace_start_time_ns = t.start_time_ns"
                                 " AND r.trace_pid = t.pid WHERE r.backend = 'sim' AND r.results_id <> ?2",
                                 err)) >= 0) {
    sqlite3_bind_text(st, 1, hash, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, results_id);
    if (sqlite3_step(st) != SQLITE_DONE) s = ana_sql_err(db->h, err, "dropping the older runs");
    sqlite3_finalize(st);
  }
  for (const char *const *q = sql; s >= 0 && *q; q++) s = ana_exec(db, *q, err);
  if (s >= 0 && (s = ana_prepare(db, &st, "INSERT OR REPLACE INTO report_replays(trace_hash, what, tool, options)"
                                          " VALUES (?, ?, ?, ?)", err)) >= 0) {
    sqlite3_bind_text(st, 1, hash, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, k->what, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, k->tool, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, k->options, -1, SQLITE_STATIC);
    if (sqlite3_step(st) != SQLITE_DONE) s = ana_sql_err(db->h, err, "noting the replays");
    sqlite3_finalize(st);
  }
  if (s >= 0) return ana_exec(db, "COMMIT", err);
  gm_err_t ignore = {0};
  ana_exec(db, "ROLLBACK", &ignore);
  return s;
}
