/* ana_sql.c: the small helpers every writer and reader of the analyzer's database uses (the
 * loaders, the reports, ana_db.c itself): a statement prepared or an SQLite error as a cause,
 * and the hash that identifies a loaded input. */
#include <string.h>

#include "analyze/ana_db_internal.h"

gm_status_t ana_sql_err(sqlite3 *h, gm_err_t *err, const char *what) {
  return gm_err_set(err, GM_ERR_IO, "%s: sqlite: %s", what, sqlite3_errmsg(h));
}

gm_status_t ana_prepare(ana_db_t *db, sqlite3_stmt **st, const char *sql, gm_err_t *err) {
  if (sqlite3_prepare_v2(db->h, sql, -1, st, NULL) != SQLITE_OK)
    return ana_sql_err(db->h, err, "prepare");
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

/* Step a statement that returns no row (an INSERT, UPDATE, DELETE), then reset it. */
gm_status_t ana_step(ana_db_t *db, sqlite3_stmt *st, gm_err_t *err) {
  int rc = sqlite3_step(st);
  sqlite3_reset(st);
  return rc == SQLITE_DONE ? GM_OK : ana_sql_err(db->h, err, "insert");
}

/* Text, or NULL for a NULL pointer. */
void ana_bind_text(sqlite3_stmt *st, int i, const char *s) {
  if (s) sqlite3_bind_text(st, i, s, -1, SQLITE_TRANSIENT);
  else sqlite3_bind_null(st, i);
}
