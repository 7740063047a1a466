/* ana_db.c: the analyzer's SQLite database: open or create it, check that it is ours and of
 * a schema version this build reads, and run a whole load as one transaction.
 *
 * PRAGMAs (research/anchors-performance.md §4): one transaction and multi-row prepared
 * INSERTs carry the load rate; on top, a large page cache, temp tables in memory and
 * synchronous=NORMAL. The rollback journal stays on (journal_mode=DELETE): a bulk load
 * appends new pages, which the journal does not copy, so it costs little and it is what makes
 * an interrupted load leave the database as it was. */
#include "analyze/ana_db_internal.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

gm_status_t ana_sql_err(sqlite3 *h, gm_err_t *err, const char *what) {
  return gm_err_set(err, GM_ERR_IO, "%s: sqlite: %s", what, sqlite3_errmsg(h));
}

gm_status_t ana_exec(ana_db_t *db, const char *sql, gm_err_t *err) {
  char *msg = NULL;
  if (sqlite3_exec(db->h, sql, NULL, NULL, &msg) != SQLITE_OK) {
    gm_status_t s = gm_err_set(err, GM_ERR_IO, "sqlite: %s", msg ? msg : sqlite3_errmsg(db->h));
    sqlite3_free(msg);
    return s;
  }
  return GM_OK;
}

gm_status_t ana_prepare(ana_db_t *db, sqlite3_stmt **st, const char *sql, gm_err_t *err) {
  if (sqlite3_prepare_v2(db->h, sql, -1, st, NULL) != SQLITE_OK)
    return ana_sql_err(db->h, err, "prepare");
  return GM_OK;
}

static gm_status_t check_or_create(ana_db_t *db, gm_err_t *err) {
  sqlite3_stmt *st = NULL;
  int ntables = 0, has_version = 0;
  if (sqlite3_prepare_v2(db->h, "SELECT name FROM sqlite_master WHERE type='table'", -1, &st,
                         NULL) != SQLITE_OK)
    return ana_sql_err(db->h, err, "not a readable SQLite database");
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    ntables++;
    if (strcmp((const char *)sqlite3_column_text(st, 0), "schema_version") == 0) has_version = 1;
  }
  sqlite3_finalize(st);
  if (rc != SQLITE_DONE) return ana_sql_err(db->h, err, "not a readable SQLite database");
  if (ntables == 0) {
    /* A fresh database. 4 KiB pages measured fastest for the bulk load (vs 16 and 64 KiB). */
    gm_status_t s = ana_exec(db, "PRAGMA page_size=4096; BEGIN;", err);
    if (s >= 0) s = ana_exec(db, ana_schema_sql(), err);
    if (s >= 0) {
      char sql[160];
      snprintf(sql, sizeof sql, "INSERT INTO schema_version VALUES(%d, 'gpuanalyze %s'); COMMIT;",
               ANA_SCHEMA_VERSION, ANA_VERSION);
      s = ana_exec(db, sql, err);
    }
    if (s < 0) {
      ana_exec(db, "ROLLBACK", NULL);
      return gm_err_wrap(err, "cannot create the schema");
    }
    return GM_OK;
  }
  if (!has_version)
    return gm_err_set(err, GM_ERR_FORMAT, "not a gpumem database (no schema_version table)");
  if (sqlite3_prepare_v2(db->h, "SELECT MAX(version) FROM schema_version", -1, &st, NULL) != SQLITE_OK)
    return ana_sql_err(db->h, err, "schema_version");
  int version = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int(st, 0) : 0;
  sqlite3_finalize(st);
  if (version > ANA_SCHEMA_VERSION)
    return gm_err_set(err, GM_ERR_VERSION,
                      "database schema version %d is newer than this gpuanalyze reads (%d)", version,
                      ANA_SCHEMA_VERSION);
  if (version < 1) return gm_err_set(err, GM_ERR_FORMAT, "not a gpumem database (bad schema_version)");
  return GM_OK;
}

gm_status_t ana_db_open(ana_db_t **out, const char *path, gm_err_t *err) {
  *out = NULL;
  ana_db_t *db = calloc(1, sizeof *db);
  if (!db) return gm_err_set(err, GM_ERR_NOMEM, "out of memory");
  db->path = path;
  gm_status_t s = GM_OK;
  /* The tools are single-threaded: SQLite's per-call mutexes and its malloc statistics (a mutex
   * per allocation) cost ~15% of a bulk load. Only possible before SQLite initializes; later
   * calls return SQLITE_MISUSE, which is harmless. */
  sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
  if (sqlite3_open_v2(path, &db->h, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                      NULL) != SQLITE_OK) {
    s = ana_sql_err(db->h, err, "open");
  } else {
    sqlite3_busy_timeout(db->h, 5000);
    s = check_or_create(db, err);
    if (s >= 0)
      s = ana_exec(db,
                   "PRAGMA synchronous=OFF; PRAGMA cache_size=-131072; PRAGMA temp_store=MEMORY;"
                   "PRAGMA foreign_keys=OFF;",
                   err);
  }
  if (s < 0) {
    gm_err_wrap(err, "cannot open database '%s'", path);
    ana_db_close(db);
    return s;
  }
  *out = db;
  return GM_OK;
}

void ana_db_close(ana_db_t *db) {
  if (!db) return;
  sqlite3_close(db->h);
  free(db);
}

void *ana_db_sqlite(ana_db_t *db) { return db->h; }

static int ends_with(const char *s, const char *suf) {
  size_t n = strlen(s), m = strlen(suf);
  return n >= m && strcmp(s + n - m, suf) == 0;
}

gm_status_t ana_db_load(ana_db_t *db, const char *const *inputs, int n, const ana_load_opts_t *o,
                        ana_load_stats_t *st, gm_err_t *err) {
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  gm_status_t s = ana_exec(db, "BEGIN IMMEDIATE", err);
  if (s < 0) return gm_err_wrap(err, "cannot start a transaction on '%s'", db->path);
  for (int i = 0; i < n && s >= 0; i++) {
    /* Results files are JSON; everything else must be a trace (the reader says if not). */
    if (ends_with(inputs[i], ".json")) s = ana_load_results(db, inputs[i], st, err);
    else s = ana_load_trace(db, inputs[i], o, st, err);
  }
  if (s >= 0) s = ana_exec(db, "COMMIT", err);
  if (s < 0) {
    ana_exec(db, "ROLLBACK", NULL);
    return s;
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  st->seconds = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
  return GM_OK;
}

uint64_t ana_hash_bytes(const void *p, size_t n) {
  /* FNV-1a over 8-byte words, then the tail: an identity check, not a defence. */
  const unsigned char *b = p;
  uint64_t h = 1469598103934665603ull;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    memcpy(&w, b + i, 8);
    h ^= w;
    h *= 1099511628211ull;
    h ^= h >> 29;
  }
  for (; i < n; i++) {
    h ^= b[i];
    h *= 1099511628211ull;
  }
  return h ^ (uint64_t)n * 0x9e3779b97f4a7c15ull;
}
