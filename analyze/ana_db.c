/* ana_db.c: the analyzer's SQLite database: open or create it, check that it is ours and of
 * a schema version this build reads (adding the columns added since), and run a whole load as
 * one transaction.
 *
 * PRAGMAs (research/anchors-performance.md §4): one transaction and multi-row prepared
 * INSERTs carry the load rate; on top, a large page cache, temp tables in memory and
 * synchronous=OFF. Journal: write-ahead log (WAL), so that a report reads the database as it
 * was while a load writes (a rollback journal locks readers out while a writer commits or
 * spills its cache), and an interrupted load, which never committed, leaves it as it was. A
 * second writer waits for the first (busy timeout) and then says who holds the database. */
#include "analyze/ana_db_internal.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* SQLITE_BUSY after the whole busy timeout: another connection holds the write lock. */
static gm_status_t busy_err(ana_db_t *db, gm_err_t *err) {
  return gm_err_set(err, GM_ERR_IO,
                    "database '%s' is busy: another process (a gpuanalyze load?) is writing to it; "
                    "waited %g s for it to finish (--wait=SECONDS waits longer)",
                    db->path, db->wait_ms / 1000.0);
}

static int is_busy(sqlite3 *h) {
  int rc = sqlite3_errcode(h) & 0xff;
  return rc == SQLITE_BUSY || rc == SQLITE_LOCKED;
}

gm_status_t ana_exec(ana_db_t *db, const char *sql, gm_err_t *err) {
  char *msg = NULL;
  if (sqlite3_exec(db->h, sql, NULL, NULL, &msg) != SQLITE_OK) {
    if (is_busy(db->h)) {
      sqlite3_free(msg);
      return busy_err(db, err);
    }
    gm_status_t s = gm_err_set(err, GM_ERR_IO, "sqlite: %s", msg ? msg : sqlite3_errmsg(db->h));
    sqlite3_free(msg);
    return s;
  }
  return GM_OK;
}

static int has_kind(ana_db_t *db, const char *type, const char *name);
static int has_table(ana_db_t *db, const char *table) { return has_kind(db, "table", table); }

static int has_kind(ana_db_t *db, const char *type, const char *table) {
  sqlite3_stmt *st = NULL;
  int found = 0;
  if (sqlite3_prepare_v2(db->h, "SELECT 1 FROM sqlite_master WHERE type=?2 AND name=?1", -1, &st, NULL) == SQLITE_OK) {
    sqlite3_bind_text(st, 2, type, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 1, table, -1, SQLITE_STATIC);
    found = sqlite3_step(st) == SQLITE_ROW;
  }
  sqlite3_finalize(st);
  return found;
}

static int has_column(ana_db_t *db, const char *table, const char *column) {
  char sql[128];
  snprintf(sql, sizeof sql, "SELECT 1 FROM pragma_table_info('%s') WHERE name='%s'", table, column);
  sqlite3_stmt *st = NULL;
  int found = 0;
  if (sqlite3_prepare_v2(db->h, sql, -1, &st, NULL) == SQLITE_OK) found = sqlite3_step(st) == SQLITE_ROW;
  sqlite3_finalize(st);
  return found;
}

/* The columns added to schema version 1 since it shipped (ana_schema.c), where missing. Inside
 * the caller's transaction, or in one of its own. */
static gm_status_t add_columns(ana_db_t *db, int in_txn, gm_err_t *err) {
  int missing = !has_table(db, "trace_peak_callsites") || !has_table(db, "trace_stack_timeline") ||
                !has_table(db, "report_replays") || !has_kind(db, "index", "runs_trace");
  for (const ana_added_column_t *c = ana_added_columns; c->table; c++) missing |= !has_column(db, c->table, c->column);
  if (!missing) return GM_OK;
  gm_status_t s = in_txn ? GM_OK : ana_exec(db, "BEGIN IMMEDIATE", err);
  if (s >= 0) s = ana_exec(db, ana_added_tables_sql, err);
  for (const ana_added_column_t *c = ana_added_columns; c->table && s >= 0; c++) {
    if (has_column(db, c->table, c->column)) continue; /* another process added it meanwhile */
    char sql[256];
    snprintf(sql, sizeof sql, "ALTER TABLE %s ADD COLUMN %s %s", c->table, c->column, c->decl);
    s = ana_exec(db, sql, err);
  }
  if (!in_txn) s = s >= 0 ? ana_exec(db, "COMMIT", err) : (ana_exec(db, "ROLLBACK", NULL), s);
  return s < 0 ? gm_err_wrap(err, "cannot add the columns of this gpuanalyze") : GM_OK;
}

static gm_status_t check_or_create(ana_db_t *db, gm_err_t *err) {
  sqlite3_stmt *st = NULL;
  int ntables = 0, has_version = 0;
  if (sqlite3_prepare_v2(db->h, "SELECT name FROM sqlite_master WHERE type='table'", -1, &st,
                         NULL) != SQLITE_OK)
    return is_busy(db->h) ? busy_err(db, err) : ana_sql_err(db->h, err, "not a readable SQLite database");
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    ntables++;
    if (strcmp((const char *)sqlite3_column_text(st, 0), "schema_version") == 0) has_version = 1;
  }
  sqlite3_finalize(st);
  if (rc != SQLITE_DONE)
    return is_busy(db->h) ? busy_err(db, err) : ana_sql_err(db->h, err, "not a readable SQLite database");
  if (ntables == 0) {
    /* A fresh database. 4 KiB pages measured fastest for the bulk load (vs 16 and 64 KiB).
     * WAL is set before the first write (it is a property of the file from then on). */
    gm_status_t s = ana_exec(db, "PRAGMA page_size=4096; PRAGMA journal_mode=WAL; BEGIN IMMEDIATE;", err);
    if (s >= 0 && has_table(db, "schema_version")) { /* another process created it meanwhile */
      ana_exec(db, "ROLLBACK", NULL);
      return check_or_create(db, err);
    }
    if (s >= 0) s = ana_exec(db, ana_schema_sql(), err);
    if (s >= 0) s = add_columns(db, 1, err);
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
  /* A database made before WAL: switch it (needs a moment alone with it; if another process
   * holds it, stay in its mode this time). */
  sqlite3_exec(db->h, "PRAGMA journal_mode=WAL", NULL, NULL, NULL);
  return add_columns(db, 0, err);
}

gm_status_t ana_db_open(ana_db_t **out, const char *path, gm_err_t *err) {
  return ana_db_open_wait(out, path, ANA_DEFAULT_WAIT_MS, err);
}

gm_status_t ana_db_open_wait(ana_db_t **out, const char *path, int wait_ms, gm_err_t *err) {
  *out = NULL;
  ana_db_t *db = calloc(1, sizeof *db);
  if (!db) return gm_err_set(err, GM_ERR_NOMEM, "out of memory");
  db->path = path;
  db->wait_ms = wait_ms;
  gm_status_t s = GM_OK;
  /* The tools are single-threaded: SQLite's per-call mutexes and its malloc statistics (a mutex
   * per allocation) cost ~15% of a bulk load. Only possible before SQLite initializes; later
   * calls return SQLITE_MISUSE, which is harmless. */
  sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
  if (sqlite3_open_v2(path, &db->h, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                      NULL) != SQLITE_OK) {
    s = ana_sql_err(db->h, err, "open");
  } else {
    sqlite3_busy_timeout(db->h, wait_ms);
    s = check_or_create(db, err);
    /* journal_size_limit: the log of a big load is cut back after the checkpoint. */
    if (s >= 0)
      s = ana_exec(db,
                   "PRAGMA synchronous=OFF; PRAGMA cache_size=-131072; PRAGMA temp_store=MEMORY;"
                   "PRAGMA foreign_keys=OFF; PRAGMA journal_size_limit=67108864;",
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
  if (s < 0) return is_busy(db->h) ? s : gm_err_wrap(err, "cannot start a transaction on '%s'", db->path);
  int ready = !o || !o->results_ready;
  for (int i = 0; i < n && s >= 0; i++) {
    /* Results files are JSON; everything else must be a trace (the reader says if not). */
    if (ends_with(inputs[i], ".json") && !ready && (s = o->results_ready(o->results_ctx, err)) >= 0) ready = 1;
    if (s < 0) break;
    if (ends_with(inputs[i], ".json")) s = ana_load_results(db, inputs[i], st, err);
    else s = ana_load_trace(db, inputs[i], o, st, err);
  }
  if (s >= 0) s = ana_exec(db, "COMMIT", err);
  if (s < 0) {
    ana_exec(db, "ROLLBACK", NULL);
    return s;
  }
  /* Move the load from the log into the database now, while nobody else is likely to read. */
  sqlite3_exec(db->h, "PRAGMA wal_checkpoint(TRUNCATE)", NULL, NULL, NULL);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  st->seconds = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
  return GM_OK;
}
