/* ana_load_results.c: load one gpureplay results file (replay/RESULTS.md, version 1), or the
 * JSON lines of `gpureplay --json`, into `results`, `runs` and `run_timeline`, inside the
 * caller's transaction.
 *
 * The file is parsed whole with jansson before anything is written, and each run is checked
 * as it is inserted: a file broken anywhere fails the whole load, which the caller rolls back.
 * Unknown keys are kept (runs.summary_json holds the run object without its timeline), as
 * the schema asks readers to ignore, not drop, what they do not know. A file's identity is its
 * canonical content less the run times, so a re-run sweep is recognised. */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/ana_db_internal.h"

static gm_status_t need_int(json_t *o, const char *key, int64_t *v, size_t run, gm_err_t *err) {
  json_t *x = json_object_get(o, key);
  if (!json_is_integer(x))
    return gm_err_set(err, GM_ERR_FORMAT, "run %zu: '%s' missing or not an integer", run, key);
  *v = (int64_t)json_integer_value(x);
  return GM_OK;
}

static gm_status_t need_num(json_t *o, const char *key, double *v, size_t run, gm_err_t *err) {
  json_t *x = json_object_get(o, key);
  if (!json_is_number(x))
    return gm_err_set(err, GM_ERR_FORMAT, "run %zu: '%s' missing or not a number", run, key);
  *v = json_number_value(x);
  return GM_OK;
}

static int64_t opt_int(json_t *o, const char *key, int64_t dflt) {
  json_t *x = json_object_get(o, key);
  return json_is_integer(x) ? (int64_t)json_integer_value(x) : dflt;
}

static double opt_num(json_t *o, const char *key, double dflt) {
  json_t *x = json_object_get(o, key);
  return json_is_number(x) ? json_number_value(x) : dflt;
}

/* Integer columns of runs, in order, as named in the results file. Required keys are the
 * --json summary's (DESIGN.md); the rest default. */
static const struct {
  const char *key;
  int required;
} int_cols[] = {
    {"trace_start_time_ns", 0}, {"trace_pid", 0}, {"capacity_bytes", 0}, {"events", 1},
    {"peak_reserved_bytes", 1}, {"peak_allocated_bytes", 1}, {"peak_requested_bytes", 1},
    {"lower_bound_bytes", 1}, {"device_alloc_calls", 1}, {"device_free_calls", 1},
    {"alloc_retries", 1}, {"ooms", 1}, {"first_oom_event", 0}, {"first_oom_ts_ns", 0},
};
enum { N_INT = sizeof int_cols / sizeof int_cols[0] };

static gm_status_t insert_timeline(ana_db_t *db, sqlite3_stmt *st, int64_t run_id, json_t *tl,
                                   size_t run, gm_err_t *err) {
  if (!tl) return GM_OK;
  const char *names[4] = {"ts_ns", "reserved", "allocated", "requested"};
  json_t *arr[4];
  size_t n = 0;
  for (int k = 0; k < 4; k++) {
    arr[k] = json_object_get(tl, names[k]);
    if (!json_is_array(arr[k]))
      return gm_err_set(err, GM_ERR_FORMAT, "run %zu: timeline.%s missing or not an array", run, names[k]);
    if (k == 0) n = json_array_size(arr[0]);
    else if (json_array_size(arr[k]) != n)
      return gm_err_set(err, GM_ERR_FORMAT, "run %zu: timeline arrays differ in length", run);
  }
  for (size_t i = 0; i < n; i++) {
    sqlite3_bind_int64(st, 1, run_id);
    sqlite3_bind_int64(st, 2, (int64_t)i);
    for (int k = 0; k < 4; k++) {
      json_t *v = json_array_get(arr[k], i);
      if (!json_is_integer(v) || json_integer_value(v) < 0)
        return gm_err_set(err, GM_ERR_FORMAT, "run %zu: timeline.%s[%zu] is not an integer from 0 to %" PRId64, run,
                          names[k], i, INT64_MAX);
      sqlite3_bind_int64(st, 3 + k, (int64_t)json_integer_value(v));
    }
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    if (rc != SQLITE_DONE) return ana_sql_err(db->h, err, "insert timeline");
  }
  return GM_OK;
}

static gm_status_t insert_run(ana_db_t *db, sqlite3_stmt *st, sqlite3_stmt *tst, int64_t results_id,
                              json_t *run, size_t idx, gm_err_t *err) {
  if (!json_is_object(run)) return gm_err_set(err, GM_ERR_FORMAT, "run %zu is not an object", idx);
  json_t *policy = json_object_get(run, "policy");
  if (!json_is_string(policy))
    return gm_err_set(err, GM_ERR_FORMAT, "run %zu: 'policy' missing or not a string", idx);
  int i = 1;
  sqlite3_bind_int64(st, i++, results_id);
  json_t *tr = json_object_get(run, "trace");
  if (json_is_string(tr)) sqlite3_bind_text(st, i++, json_string_value(tr), -1, SQLITE_TRANSIENT);
  else sqlite3_bind_null(st, i++);
  sqlite3_bind_text(st, i++, json_string_value(policy), -1, SQLITE_TRANSIENT);
  json_t *be = json_object_get(run, "backend");
  if (json_is_string(be)) sqlite3_bind_text(st, i++, json_string_value(be), -1, SQLITE_TRANSIENT);
  else sqlite3_bind_null(st, i++);
  for (size_t k = 0; k < N_INT; k++) {
    int64_t v = -1;
    int may_be_none = strstr(int_cols[k].key, "oom_") != NULL; /* first_oom_*: -1 = none */
    if (int_cols[k].required) {
      gm_status_t s = need_int(run, int_cols[k].key, &v, idx, err);
      if (s < 0) return s;
    } else {
      v = opt_int(run, int_cols[k].key, may_be_none ? -1 : 0);
    }
    /* bytes and counts: validated where they enter, never a negative size in a report */
    if (v < (may_be_none ? -1 : 0))
      return gm_err_set(err, GM_ERR_FORMAT, "run %zu: '%s' is %" PRId64 " (accepted: an integer from %d to %" PRId64 ")",
                        idx, int_cols[k].key, v, may_be_none ? -1 : 0, INT64_MAX);
    sqlite3_bind_int64(st, i++, v);
  }
  double frag = 0;
  gm_status_t s = need_num(run, "fragmentation_at_peak", &frag, idx, err);
  if (s < 0) return s;
  if (!(frag >= 0.0 && frag <= 1.0))
    return gm_err_set(err, GM_ERR_FORMAT, "run %zu: 'fragmentation_at_peak' is %g (accepted: a number from 0 to 1)", idx, frag);
  sqlite3_bind_double(st, i++, frag);
  sqlite3_bind_double(st, i++, opt_num(run, "fragmentation_mean", frag));
  sqlite3_bind_double(st, i++, opt_num(run, "replay_seconds", 0));
  sqlite3_bind_double(st, i++, opt_num(run, "events_per_second", 0));
  sqlite3_bind_int(st, i++, json_is_true(json_object_get(run, "partial"))); /* replayed from a damaged trace */
  /* Everything but the timeline, verbatim. */
  json_t *copy = json_copy(run);
  if (!copy) return gm_err_set(err, GM_ERR_NOMEM, "out of memory");
  json_object_del(copy, "timeline");
  char *txt = json_dumps(copy, JSON_COMPACT | JSON_SORT_KEYS);
  json_decref(copy);
  if (!txt) return gm_err_set(err, GM_ERR_NOMEM, "out of memory");
  sqlite3_bind_text(st, i++, txt, -1, free);
  int rc = sqlite3_step(st);
  sqlite3_reset(st);
  if (rc != SQLITE_DONE) return ana_sql_err(db->h, err, "insert run");
  int64_t run_id = sqlite3_last_insert_rowid(db->h);
  return insert_timeline(db, tst, run_id, json_object_get(run, "timeline"), idx, err);
}

/* Identity of a results file: its content without what changes from one replay of the same
 * trace and policies to the next (when and how fast it ran), in canonical form. So running
 * `gpuanalyze report TRACE.zst` twice, which re-runs the sweep, does not load the runs twice. */
static const char *const volatile_keys[] = {"created_unix_ns", "tool", "replay_seconds",
                                            "events_per_second", "latency_ns", NULL};

static int results_identity(json_t *root, char *hash, size_t n) {
  json_t *c = json_deep_copy(root);
  if (!c) return -1;
  for (const char *const *k = volatile_keys; *k; k++) json_object_del(c, *k);
  json_t *runs = json_object_get(c, "runs");
  for (size_t i = 0; json_is_array(runs) && i < json_array_size(runs); i++)
    for (const char *const *k = volatile_keys; *k; k++) json_object_del(json_array_get(runs, i), *k);
  char *txt = json_dumps(c, JSON_COMPACT | JSON_SORT_KEYS);
  json_decref(c);
  if (!txt) return -1;
  snprintf(hash, n, "%016" PRIx64, ana_hash_bytes(txt, strlen(txt)));
  free(txt);
  return 0;
}

/* What `gpureplay --json` writes: one run object per line (JSON lines; --sweep, several
 * traces). Read as the results document those runs would make; NULL when the bytes are not
 * a sequence of run objects (the caller reports the JSON error of the whole). */
static json_t *json_lines(const char *buf, size_t len) {
  json_t *runs = json_array(), *root = NULL;
  size_t off = 0;
  while (runs) {
    while (off < len && (buf[off] == ' ' || buf[off] == '\t' || buf[off] == '\r' || buf[off] == '\n')) off++;
    if (off == len) break;
    json_error_t je;
    json_t *run = json_loadb(buf + off, len - off, JSON_DISABLE_EOF_CHECK, &je);
    if (!json_is_object(run) || !json_object_get(run, "policy") || je.position <= 0) {
      json_decref(run);
      json_decref(runs);
      return NULL;
    }
    json_array_append_new(runs, run);
    off += (size_t)je.position;
  }
  if (!runs || json_array_size(runs) == 0) {
    json_decref(runs);
    return NULL;
  }
  root = json_pack("{s:s, s:i, s:o}", "format", "gpumem-results", "version", 1, "runs", runs);
  return root;
}

gm_status_t ana_load_results(ana_db_t *db, const char *path, ana_load_stats_t *stats, gm_err_t *err) {
  FILE *f = fopen(path, "rb");
  if (!f) return gm_err_set(err, GM_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
  /* Read the bytes once: they give the identity hash and the JSON. */
  char *buf = NULL;
  size_t len = 0, cap = 0;
  for (;;) {
    if (len == cap) {
      cap = cap ? cap * 2 : 1 << 16;
      char *nb = realloc(buf, cap);
      if (!nb) {
        free(buf);
        fclose(f);
        return gm_err_set(err, GM_ERR_NOMEM, "out of memory reading '%s'", path);
      }
      buf = nb;
    }
    size_t got = fread(buf + len, 1, cap - len, f);
    if (got == 0) break;
    len += got;
  }
  int rerr = ferror(f);
  fclose(f);
  if (rerr) {
    free(buf);
    return gm_err_set(err, GM_ERR_IO, "cannot read '%s'", path);
  }
  json_error_t je;
  json_t *root = json_loadb(buf, len, 0, &je);
  if (!root) root = json_lines(buf, len);
  free(buf);
  if (!root)
    return gm_err_set(err, GM_ERR_FORMAT, "cannot load '%s': not a results file: line %d column %d: %s",
                      path, je.line, je.column, je.text);
  char hash[32];
  if (results_identity(root, hash, sizeof hash) < 0) {
    json_decref(root);
    return gm_err_set(err, GM_ERR_NOMEM, "out of memory");
  }
  gm_status_t s = GM_OK;
  json_t *fmt = json_object_get(root, "format"), *ver = json_object_get(root, "version");
  json_t *runs = json_object_get(root, "runs");
  if (!json_is_string(fmt) || strcmp(json_string_value(fmt), "gpumem-results") != 0)
    s = gm_err_set(err, GM_ERR_FORMAT, "not a gpumem results file (\"format\" is not \"gpumem-results\")");
  else if (!json_is_integer(ver) || json_integer_value(ver) != 1)
    s = gm_err_set(err, GM_ERR_VERSION, "results version %" JSON_INTEGER_FORMAT " (this gpuanalyze reads 1)",
                   json_is_integer(ver) ? json_integer_value(ver) : -1);
  else if (!json_is_array(runs))
    s = gm_err_set(err, GM_ERR_FORMAT, "'runs' missing or not an array");
  sqlite3_stmt *q = NULL, *st = NULL, *tst = NULL;
  if (s >= 0) s = ana_prepare(db, &q, "SELECT results_id FROM results WHERE content_hash=?", err);
  if (s >= 0) {
    sqlite3_bind_text(q, 1, hash, -1, SQLITE_TRANSIENT);
    if (sqlite3_step(q) == SQLITE_ROW) {
      stats->results_id = sqlite3_column_int64(q, 0);
      stats->results_skipped++;
      sqlite3_finalize(q);
      json_decref(root);
      return GM_OK;
    }
  }
  if (s >= 0) s = ana_prepare(db, &st, "INSERT INTO results(content_hash,path,version,tool,created_unix_ns) VALUES(?,?,?,?,?)", err);
  if (s >= 0) {
    json_t *tool = json_object_get(root, "tool");
    sqlite3_bind_text(st, 1, hash, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 2, path, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int(st, 3, 1);
    if (json_is_string(tool)) sqlite3_bind_text(st, 4, json_string_value(tool), -1, SQLITE_TRANSIENT);
    else sqlite3_bind_null(st, 4);
    sqlite3_bind_int64(st, 5, opt_int(root, "created_unix_ns", 0));
    if (sqlite3_step(st) != SQLITE_DONE) s = ana_sql_err(db->h, err, "insert results");
    sqlite3_finalize(st);
    st = NULL;
  }
  int64_t results_id = sqlite3_last_insert_rowid(db->h);
  if (s >= 0) stats->results_id = results_id;
  if (s >= 0)
    s = ana_prepare(db, &st,
                    "INSERT INTO runs(results_id,trace_path,policy,backend,trace_start_time_ns,trace_pid,"
                    "capacity_bytes,events,peak_reserved_bytes,peak_allocated_bytes,peak_requested_bytes,"
                    "lower_bound_bytes,device_alloc_calls,device_free_calls,alloc_retries,ooms,"
                    "first_oom_event,first_oom_ts_ns,fragmentation_at_peak,fragmentation_mean,"
                    "replay_seconds,events_per_second,trace_partial,summary_json)"
                    " VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                    err);
  if (s >= 0) s = ana_prepare(db, &tst, "INSERT INTO run_timeline VALUES(?,?,?,?,?,?)", err);
  for (size_t i = 0; s >= 0 && i < json_array_size(runs); i++) {
    s = insert_run(db, st, tst, results_id, json_array_get(runs, i), i, err);
    if (s >= 0) stats->runs++;
  }
  sqlite3_finalize(q);
  sqlite3_finalize(st);
  sqlite3_finalize(tst);
  json_decref(root);
  if (s < 0) return gm_err_wrap(err, "cannot load '%s'", path);
  stats->results_loaded++;
  return GM_OK;
}
