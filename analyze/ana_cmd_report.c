/* ana_cmd_report.c: `gpuanalyze report`: the newcomer's one step. Given traces (a snapshot
 * pickle or CSV trace imported first through gpurec import), it replays each under gpureplay
 * --tune (the sweep's grid and the tuner's search past it, a long trace searched on its steady
 * state: ana_cmd_report_tune.c; the sweep alone with --no-tune), loads trace and results into a database, prints the recommendation and
 * writes the HTML; given a database, it reports on it. */
#include <errno.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sqlite3.h>

#include "analyze/ana_cli.h"

extern char **environ;

/* gpureplay over the trace, started (*pid; wait with ana_cli_wait_tool). */
static int start_sweep(const char *gpureplay, const char *trace, const char *json, uint64_t jobs, int tune,
                       int always, int limits, int strict, uint64_t capacity, pid_t *pid, gm_err_t *err) {
  char j[32], cap[48];
  snprintf(j, sizeof j, "--jobs=%" PRIu64, jobs);
  snprintf(cap, sizeof cap, "--capacity=%" PRIu64, capacity);
  /* --tune replays the sweep's grid too, and searches past it (issue 13). */
  char *argv[12] = {(char *)gpureplay, (char *)trace, tune ? "--tune" : "--sweep", j, "-q", "-o", (char *)json};
  int n = 7;
  if (capacity) argv[n++] = cap;
  if (strict) argv[n++] = "--strict";
  /* --tune: the search wherever no period is found (by default a long trace without one gets the grid) */
  if (tune && always) argv[n++] = "--tune-reduce=always";
  /* The report's advice holds no limit tuned to the edge of this one recording (--limits). */
  if (tune && !limits) argv[n++] = "--no-limits";
  argv[n] = NULL;
  return ana_cli_start_tool(argv, pid, err);
}

/* The replay in the making while the trace loads (ana_load_opts_t.results_ready). */
typedef struct sweep_run {
  const char *gpureplay, *trace;
  pid_t pid;  /* 0: none running */
  int failed; /* it ran and failed */
} sweep_run_t;

static gm_status_t sweep_wait(void *ctx, gm_err_t *err) {
  sweep_run_t *r = ctx;
  if (!r->pid) return GM_OK;
  pid_t pid = r->pid;
  r->pid = 0;
  if (ana_cli_wait_tool(r->gpureplay, pid, err) >= 0) return GM_OK;
  r->failed = 1;
  return gm_err_wrap(err, "cannot replay '%s'", r->trace);
}

static void remove_db(const char *db) {
  static const char *const sfx[] = {"", "-journal", "-wal", "-shm"};
  for (size_t i = 0; i < sizeof sfx / sizeof sfx[0]; i++) {
    char p[PATH_MAX + 16];
    snprintf(p, sizeof p, "%s%s", db, sfx[i]);
    unlink(p);
  }
}

static int newer_than(const char *a, const char *b) {
  struct stat sa, sb;
  if (stat(a, &sa) != 0 || stat(b, &sb) != 0) return 0;
  return sa.st_mtim.tv_sec > sb.st_mtim.tv_sec ||
         (sa.st_mtim.tv_sec == sb.st_mtim.tv_sec && sa.st_mtim.tv_nsec >= sb.st_mtim.tv_nsec);
}

/* A snapshot pickle or CSV trace into a trace beside it (snap.pickle -> snap.zst), through
 * gpurec import. One made from it before (newer, written by gpurec import, with the same GPU
 * memory) is reused; a different file of that name is left alone. */
static int import_input(const config_t *c, const char *in, char *trace, size_t n, gm_err_t *err) {
  const char *slash = strrchr(in, '/'), *dot = strrchr(in, '.');
  size_t stem = dot && (!slash || dot > slash + 1) ? (size_t)(dot - in) : strlen(in);
  snprintf(trace, n, "%.*s.zst", (int)stem, in);
  gm_file_kind_t k = gm_file_kind(trace);
  if (k != GM_FILE_MISSING) {
    gmt_reader_t *r = NULL;
    int ours = 0, same_gpu = 0;
    if (k == GM_FILE_TRACE && gmt_reader_open(&r, trace, NULL) == GM_OK) {
      const gmt_header_t *h = gmt_reader_header(r);
      /* gpurec's importers write "gpurec VERSION import" */
      size_t tl = h->tool ? strlen(h->tool) : 0;
      ours = tl > 14 && strncmp(h->tool, "gpurec ", 7) == 0 && strcmp(h->tool + tl - 7, " import") == 0;
      same_gpu = !c->gpu_memory || h->gpu_total_mem == c->gpu_memory;
      gmt_reader_close(r);
    }
    if (!ours)
      return gm_err_set(err, GM_ERR_IO, "'%s' exists and was not imported from '%s': import it yourself, "
                        "`gpurec import %s -o OTHER.zst`, and report on that", trace, in, in);
    if (same_gpu && newer_than(trace, in)) {
      ana_cli_say("reusing %s (imported from %s, which has not changed since)", trace, in);
      return GM_OK;
    }
  }
  char tool[PATH_MAX], mem[64];
  if (!gm_tool_find(c->gpurec, "GPUREC", "gpurec", "recorder", tool, sizeof tool, NULL))
    return gm_err_set(err, GM_ERR_IO, "'%s' needs importing and gpurec was not found (beside gpuanalyze, "
                      "$GPUREC, PATH): run `gpurec import %s -o %s`", in, in, trace);
  snprintf(mem, sizeof mem, "--gpu-memory=%" PRIu64, c->gpu_memory);
  char *argv[] = {tool, "import", (char *)in, "-o", trace, c->gpu_memory ? mem : NULL, NULL};
  /* gpurec's own lines (what it imported, what it assumed) go to our stderr as they are. */
  pid_t pid;
  int rc = posix_spawn(&pid, tool, NULL, NULL, argv, environ);
  if (rc != 0) return gm_err_set(err, GM_ERR_IO, "cannot run '%s': %s", tool, strerror(rc));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return gm_err_set(err, GM_ERR_IO, "waitpid: %s", strerror(errno));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return gm_err_set(err, GM_ERR_IO, "gpurec import failed (exit status %d)",
                      WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
  return GM_OK;
}

/* One trace of `report TRACE...` into c->db: replayed under the sweep (or --tune) and loaded,
 * unless the database already holds its replays. may_renew: c->db is the one this command
 * named after the trace, made afresh when it holds an older recording of that name; alone:
 * the only trace of the command. */
static int report_load(config_t *c, const char *trace, int may_renew, int alone) {
  gm_err_t err = {0};
  char json[PATH_MAX] = "", replay[PATH_MAX];
  int existed = access(c->db, F_OK) == 0;
  int64_t runs = -1, others = 0;
  if (existed) {
    ana_db_t *db = NULL;
    if (ana_db_open_wait(&db, c->db, ana_cli_wait_ms(c), &err) < 0) return ana_cli_fail(&err);
    gm_status_t s = ana_trace_replayed(db, trace, &runs, &others, &err);
    ana_db_close(db);
    if (s < 0) return ana_cli_fail(&err);
  }
  /* TRACE.db made for an older recording of the same name: its figures are stale, and would
   * be reported beside the new ones. Made afresh (only the database this command names itself,
   * never one given with --db), once the new replays have succeeded. */
  int fresh = runs < 0 && others > 0 && may_renew;
  /* The replays are reused while the trace, gpureplay's version and the options that change
   * the figures are those they were made with (report_replays); a database without that note
   * (made by `load`, or an older gpuanalyze) serves a sweep, as it always did. */
  ana_replay_key_t want, have;
  char hash[32] = "";
  int have_key = 0, found = gm_tool_find(c->gpureplay, "GPUREPLAY", "gpureplay", "replay", replay, sizeof replay, NULL);
  if (found) ana_report_key_want(c, replay, &want);
  if (runs > 0) {
    ana_db_t *db = NULL;
    gm_status_t s = ana_trace_hash(trace, hash, sizeof hash, &err);
    if (s >= 0 && (s = ana_db_open_wait(&db, c->db, ana_cli_wait_ms(c), &err)) >= 0) {
      s = ana_replay_key_get(db, hash, &have, &have_key, &err);
      ana_db_close(db);
    }
    if (s < 0) return ana_cli_fail(&err);
  }
  int reuse = runs > 0 && (!found || (have_key ? ana_replay_key_serves(&have, &want) : !c->tune_now));
  if (reuse) {
    /* the trace again (skipped when it is there as it is; a trace loaded by an older
     * gpuanalyze, without the report's summaries, is upgraded in place, its replays kept) */
    ana_db_t *db = NULL;
    const char *in[1] = {trace};
    ana_load_opts_t o = ana_cli_load_opts(c);
    o.summary_only = 1;
    ana_load_stats_t st = {0};
    if (ana_db_open_wait(&db, c->db, ana_cli_wait_ms(c), &err) < 0) return ana_cli_fail(&err);
    gm_status_t s = ana_db_load(db, in, 1, &o, &st, &err);
    ana_db_close(db);
    if (s < 0) return ana_cli_fail(&err);
    if (have_key && strncmp(have.what, "tune", 4) == 0)
      ana_cli_say("reusing the tuner's search and the %" PRId64 " replays of %s in %s (the trace, gpureplay's version "
                  "and the options have not changed; delete %s to replay it again)", runs, trace, c->db, c->db);
    else
      ana_cli_say("reusing the %" PRId64 " replays of %s in %s (the trace has not changed; delete %s to replay it again)",
                  runs, trace, c->db, c->db);
    return 0;
  }
  sweep_run_t run = {replay, trace, 0, 0};
  if (found) {
    /* .json: the loader tells results files from traces by their extension. */
    snprintf(json, sizeof json, "%s/gpuanalyze-XXXXXX.json", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    int fd = mkstemps(json, 5);
    if (fd < 0) {
      gm_err_set(&err, GM_ERR_IO, "cannot create a temporary file: %s", strerror(errno));
      return ana_cli_fail(&err);
    }
    close(fd);
    uint64_t jobs = c->jobs ? c->jobs : ana_cli_default_jobs();
    if (isatty(STDERR_FILENO))
      ana_cli_say(c->tune_now ? "tuning %s: gpureplay --tune searches the allocator settings (the sweep's grid and past it; a long trace on its steady state), %" PRIu64 " at once ..."
                  : "replaying %s under gpureplay's sweep of allocator settings, %" PRIu64 " at once ...", trace, jobs);
    if (start_sweep(replay, trace, json, jobs, c->tune_now, c->tune, c->limits, c->strict, c->capacity, &run.pid,
                    &err) < 0) {
      unlink(json);
      gm_err_wrap(&err, "cannot replay '%s'", trace);
      return ana_cli_fail(&err);
    }
    /* A database made afresh goes once the replay has succeeded: waited for here; otherwise the
     * trace loads while it replays (the load's transaction waits for its results, and rolls
     * back if it fails: the database as it was) */
    if (fresh && sweep_wait(&run, &err) < 0) {
      unlink(json);
      return ana_cli_fail(&err);
    }
  } else {
    gm_log(GM_LOG_WARN, "gpureplay not found (beside gpuanalyze, $GPUREPLAY, PATH): reporting the trace without a policy sweep");
  }
  if (fresh) {
    remove_db(c->db);
    ana_cli_say("%s changed since %s was made: made it afresh", trace, c->db);
    existed = 0;
  }
  ana_db_t *db = NULL;
  if (ana_db_open_wait(&db, c->db, ana_cli_wait_ms(c), &err) < 0) {
    gm_err_t rerr;
    if (sweep_wait(&run, &rerr) < 0) err = rerr; /* what went wrong first, as before the overlap */
    if (*json) unlink(json);
    return ana_cli_fail(&err);
  }
  const char *inputs[2] = {trace, json};
  ana_load_opts_t o = ana_cli_load_opts(c);
  /* the report reads per-trace summaries (ana_load_peak.c), never events: none are stored
   * (`gpuanalyze load` stores them, for SQL) */
  o.summary_only = 1;
  if (run.pid) {
    o.results_ready = sweep_wait;
    o.results_ctx = &run;
    o.progress = NULL; /* gpureplay's progress is the one on the terminal */
  }
  ana_load_stats_t st = {0};
  gm_status_t s = ana_db_load(db, inputs, *json ? 2 : 1, &o, &st, &err);
  if (run.pid) { /* the trace failed to load: the replay ends on its own; its failure is said first */
    gm_err_t rerr;
    if (sweep_wait(&run, &rerr) < 0) err = rerr;
  }
  ana_cli_end_progress();
  /* the new runs replace the trace's older ones; noted for the next report to reuse */
  if (s >= 0 && *json && (*hash || (s = ana_trace_hash(trace, hash, sizeof hash, &err)) >= 0))
    s = ana_replay_key_put(db, hash, st.results_id, &want, &err);
  if (*json) unlink(json);
  ana_db_close(db);
  if (s < 0 && run.failed && !existed) remove_db(c->db); /* made for the load, which rolled back: as if never */
  if (s < 0) return ana_cli_fail(&err);
  if (alone) ana_cli_say("wrote %s (the database: the trace and its replays; %s)", c->db, existed ? "added to it" : "new");
  else ana_cli_say("wrote %s (the database: %s and its replays; %s)", c->db, trace, existed ? "added to it" : "new");
  return 0;
}

/* The trace_id the database gives the trace at path (the newest loaded from there), -1: none. */
static int64_t trace_id_of(ana_db_t *db, const char *path) {
  char *real = realpath(path, NULL);
  sqlite3_stmt *st = NULL;
  int64_t id = -1;
  if (sqlite3_prepare_v2((sqlite3 *)ana_db_sqlite(db), "SELECT MAX(trace_id) FROM traces WHERE real_path = ?", -1, &st,
                         NULL) == SQLITE_OK) {
    sqlite3_bind_text(st, 1, real ? real : path, -1, SQLITE_TRANSIENT);
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL) id = sqlite3_column_int64(st, 0);
  }
  sqlite3_finalize(st);
  free(real);
  return id;
}

/* `report A.zst B.zst`, two runs of one job (not two ranks): the two-runs section first, the
 * same figures `gpuanalyze diff` prints (peak reserved replayed as diff replays it). NULL: not two runs, or the traces could not be read again (said). */
static ana_diff_t *report_diff(config_t *c, ana_db_t *db, char **traces, int n) {
  if (n != 2) return NULL;
  int64_t id[2] = {trace_id_of(db, traces[0]), trace_id_of(db, traces[1])};
  if (id[0] < 0 || id[1] < 0 || id[0] == id[1]) return NULL;
  sqlite3_stmt *st = NULL;
  int ranks = 0;
  if (sqlite3_prepare_v2((sqlite3 *)ana_db_sqlite(db), "SELECT COUNT(*) FROM traces WHERE trace_id IN (?1, ?2)"
                         " AND rank IS NOT NULL", -1, &st, NULL) == SQLITE_OK) {
    sqlite3_bind_int64(st, 1, id[0]);
    sqlite3_bind_int64(st, 2, id[1]);
    if (sqlite3_step(st) == SQLITE_ROW) ranks = sqlite3_column_int(st, 0) == 2;
  }
  sqlite3_finalize(st);
  if (ranks) return NULL; /* two ranks of a job: the ranks view, not a before and after */
  gm_err_t err = {0};
  ana_diff_t *d = calloc(1, sizeof *d);
  if (!d) return NULL;
  if (ana_diff_db(db, id[0], id[1], ana_cli_read_flags(c), d, &err) < 0) {
    gm_log(GM_LOG_WARN, "the report goes without its two-runs section: %s", err.msg);
    free(d);
    return NULL;
  }
  /* peak reserved as `gpuanalyze diff` replays it, so that the page and the command agree */
  char replay[PATH_MAX];
  for (int i = 0; i < 2 && gm_tool_find(c->gpureplay, "GPUREPLAY", "gpureplay", "replay", replay, sizeof replay, NULL); i++)
    if (ana_cli_diff_reserved(c, replay, traces[i], &d->side[i]) != 0) d->side[0].has_reserved = d->side[1].has_reserved = 0;
  return d;
}

/* A trace that runs out of memory (the recorded run failed, or a replay failed under
 * --capacity): gpureplay --explain-oom, as `gpuanalyze oom` runs it, its object kept in the
 * database for the report's first section ("Why it ran out", ana_html_oom.c). */
static int report_oom(config_t *c, const char *trace) {
  gm_err_t err = {0};
  ana_db_t *db = NULL;
  int64_t need = 0;
  if (ana_db_open_wait(&db, c->db, ana_cli_wait_ms(c), &err) < 0) return ana_cli_fail(&err);
  int64_t id = trace_id_of(db, trace);
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2((sqlite3 *)ana_db_sqlite(db),
                         "SELECT COALESCE((SELECT count FROM trace_kinds k WHERE k.trace_id = ?1"
                         " AND k.kind = 'alloc_failed'), 0) + ?2 * COALESCE((SELECT SUM(ooms) FROM v_runs r"
                         " WHERE r.trace_id = ?1), 0)",
                         -1, &st, NULL) == SQLITE_OK) {
    sqlite3_bind_int64(st, 1, id);
    sqlite3_bind_int(st, 2, c->capacity != 0);
    if (sqlite3_step(st) == SQLITE_ROW) need = sqlite3_column_int64(st, 0);
  }
  sqlite3_finalize(st);
  char replay[PATH_MAX];
  if (id < 0 || need <= 0 || !gm_tool_find(c->gpureplay, "GPUREPLAY", "gpureplay", "replay", replay, sizeof replay, NULL)) {
    ana_db_close(db);
    return 0;
  }
  char jobs[32], cap[48], what[PATH_MAX + 64];
  uint64_t j = c->jobs ? c->jobs : ana_cli_default_jobs();
  snprintf(jobs, sizeof jobs, "--jobs=%" PRIu64, j > 256 ? 256 : j);
  snprintf(cap, sizeof cap, "--capacity=%" PRIu64, c->capacity);
  char *argv[10] = {replay, "--explain-oom", "--json", jobs};
  int na = 4;
  if (c->strict) argv[na++] = "--strict";
  if (c->capacity) argv[na++] = cap;
  argv[na++] = "--"; /* a trace named -x.zst is a trace */
  argv[na++] = (char *)trace;
  argv[na] = NULL;
  snprintf(what, sizeof what, "explain why '%s' runs out of memory", trace);
  ana_cli_say("%s runs out of memory: asking gpureplay --explain-oom why ...", trace);
  gm_tool_run_t r;
  int rc = ana_cli_replay_run(argv, 1, what, &r);
  if (rc) return ana_db_close(db), rc;
  gm_status_t s = ana_oom_store(db, id, r.out, &err);
  gm_tool_run_free(&r);
  ana_db_close(db);
  return s < 0 ? ana_cli_fail(&err) : 0;
}

/* `report TRACE...`: the newcomer's one step, for one trace or several (ranks, two runs). */
static int report_traces(config_t *c, char **traces, int n) {
  gm_err_t err = {0};
  char dbpath[PATH_MAX];
  const char *html = c->html ? c->html : "report.html";
  int db_defaulted = !c->db;
  if (!c->db && n > 1) {
    c->db = "report.db";
  } else if (!c->db) {
    /* TRACE.db beside the trace; in $TMPDIR when that directory is read-only. */
    char dir[PATH_MAX], base[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", traces[0]);
    snprintf(base, sizeof base, "%s", traces[0]);
    if (access(dirname(dir), W_OK) == 0) {
      snprintf(dbpath, sizeof dbpath, "%s.db", traces[0]);
    } else {
      snprintf(dbpath, sizeof dbpath, "%s/%s.db", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", basename(base));
      ana_cli_say("'%s' is read-only: the database goes to %s", dir, dbpath);
    }
    c->db = dbpath;
  }
  /* Replays on a smaller device are other figures than the same settings unlimited: their own
   * database (TRACE.capacity-BYTES.db), never reused for, or mixed with, the unlimited ones. */
  char capdb[PATH_MAX + 48];
  if (db_defaulted && c->capacity) {
    const char *d = c->db;
    size_t l = strlen(d);
    snprintf(capdb, sizeof capdb, "%.*s.capacity-%" PRIu64 ".db", (int)(l > 3 ? l - 3 : l), d, c->capacity);
    c->db = capdb;
  }
  /* Every output's directory is checked before the replays start, not after. */
  if (gm_output_check(c->db, &err) < 0 || gm_output_check(html, &err) < 0 ||
      (c->csv_dir && access(c->csv_dir, F_OK) != 0 && gm_output_check(c->csv_dir, &err) < 0))
    return ana_cli_fail(&err);
  int plan = ana_report_tune_plan(c, traces, n);
  if (plan) return plan;
  for (int i = 0; i < n; i++) {
    int rc = report_load(c, traces[i], db_defaulted && n == 1, n == 1);
    if (rc) return rc;
  }
  for (int i = 0; i < n; i++) {
    int rc = report_oom(c, traces[i]);
    if (rc) return rc;
  }
  ana_db_t *db = NULL;
  if (ana_db_open_wait(&db, c->db, ana_cli_wait_ms(c), &err) < 0) return ana_cli_fail(&err);
  gm_status_t s = ana_recommend(db, stdout, &err);
  if (s >= 0) s = ana_report_ranks_text(db, stdout, &err); /* ranks of one job: one setting for all */
  ana_diff_t *d = s >= 0 ? report_diff(c, db, traces, n) : NULL;
  if (s >= 0) s = ana_report_html_diff(db, html, d, &err);
  if (d) ana_diff_free(d);
  free(d);
  if (s >= 0) ana_cli_say("wrote %s (the report%s)", html, d ? ", opening with the two runs side by side" : "");
  if (s >= 0 && c->csv_dir) {
    s = ana_report_csv(db, c->csv_dir, &err);
    if (s >= 0) ana_cli_say("wrote the report's tables as CSV into %s/", c->csv_dir);
  }
  ana_db_close(db);
  return s < 0 ? ana_cli_fail(&err) : 0;
}

/* What `report` makes of one input: a trace (imported into one first if it is a pickle or a
 * CSV trace: into buf), or a database (*is_db). 1: refused (said why). */
static int report_input(config_t *c, const char *in, char *buf, size_t n, const char **trace, int *is_db) {
  gm_err_t err = {0};
  gm_file_kind_t k = gm_file_kind(in);
  *is_db = 0;
  switch (k) {
    case GM_FILE_TRACE: *trace = in; return 0;
    case GM_FILE_PICKLE:
    case GM_FILE_CSV:
    case GM_FILE_RMM_LOG:
      if (import_input(c, in, buf, n, &err) < 0) return ana_cli_fail(&err);
      *trace = buf;
      return 0;
    case GM_FILE_DATABASE: *is_db = 1; return 0;
    case GM_FILE_MISSING:
    case GM_FILE_UNREADABLE:
      gm_err_set(&err, GM_ERR_IO, "cannot open '%s': %s", in, strerror(errno ? errno : ENOENT));
      return ana_cli_fail(&err);
    default: {
      char advice[GM_ERR_MSG_MAX];
      if (!gm_file_advice(in, k, GM_WANT(GM_FILE_TRACE), advice, sizeof advice))
        snprintf(advice, sizeof advice, "cannot open '%s': not a gpumem trace, snapshot pickle, CSV trace "
                 "or database", in);
      gm_log(GM_LOG_ERROR, "%s", advice);
      return 1;
    }
  }
}

int ana_cmd_report(config_t *c, char **pos, int npos) {
  int bad_curve = ana_html_predict_config(c->curve.v, c->curve.n, c->gpureplay);
  if (bad_curve >= 0) return ana_cli_usage_error("--curve: give a recording as TRACE.zst@VALUE, e.g. run8.zst@8");
  gm_err_t err = {0};
  if (npos >= 1) {
    /* Every input is looked at (and imported) before anything is replayed. */
    char (*bufs)[PATH_MAX] = calloc((size_t)npos, PATH_MAX);
    char **traces = calloc((size_t)npos, sizeof *traces);
    int rc = bufs && traces ? 0 : 1, n_db = 0;
    for (int i = 0; i < npos && rc == 0; i++) {
      const char *t = NULL;
      int is_db = 0;
      rc = report_input(c, pos[i], bufs[i], PATH_MAX, &t, &is_db);
      if (rc == 0 && is_db) {
        n_db++;
        if (npos > 1) {
          free(bufs);
          free(traces);
          return ana_cli_usage_error("a database is reported on alone: give it without traces (or as --db to add them to it)");
        }
        if (c->db && strcmp(c->db, pos[i]) != 0) {
          free(bufs);
          free(traces);
          return ana_cli_usage_error("give the database once: as --db or as the argument");
        }
        c->db = pos[i];
      } else if (rc == 0) {
        traces[i] = (char *)t;
      }
    }
    if (rc == 0 && !n_db) rc = report_traces(c, traces, npos);
    free(bufs);
    free(traces);
    if (rc || !n_db) return rc;
  }
  if (!c->db) c->db = "gpumem.db";
  if (ana_cli_need_db(c->db)) return 1;
  ana_db_t *db = NULL;
  if (ana_db_open_wait(&db, c->db, ana_cli_wait_ms(c), &err) < 0) return ana_cli_fail(&err);
  gm_status_t s = GM_OK;
  if (!c->html && !c->csv_dir) s = ana_report_text(db, stdout, &err);
  if (s >= 0 && c->html) {
    s = ana_report_html(db, c->html, &err);
    if (s >= 0) ana_cli_say("wrote %s (the report)", c->html);
  }
  if (s >= 0 && c->csv_dir) {
    s = ana_report_csv(db, c->csv_dir, &err);
    if (s >= 0) ana_cli_say("wrote the report's tables as CSV into %s/", c->csv_dir);
  }
  ana_db_close(db);
  if (s < 0) return ana_cli_fail(&err);
  return 0;
}
