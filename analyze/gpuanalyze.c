/* gpuanalyze.c: the analyzer's command line: info, dump, load, report, recommend.
 *
 * main() parses into a config struct (one option table per subcommand, the base options in
 * each, the same table feeding --help), validates, dispatches, maps the status to an exit code
 * (0 ok, 1 runtime failure with the cause chain, 2 usage) and is the only place that prints
 * errors. `report TRACE.zst` is the newcomer's one step: it runs gpureplay's default sweep,
 * loads trace and results, writes the HTML and prints the recommendation. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <spawn.h>
#include <sqlite3.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zstd.h>
#include <jansson.h>

#include "analyze/ana.h"

extern char **environ;

static int progress_shown; /* a \r progress line is on stderr and needs its newline */

typedef struct config {
  int help, version, verbose, quiet;
  int csv;
  uint64_t limit;
  const char *db, *html, *csv_dir, *gpureplay;
} config_t;

#define BASE_OPTS                                                                             \
  {"help", 'h', GM_OPT_FLAG, NULL, "show this help and exit", offsetof(config_t, help)},     \
  {"version", 0, GM_OPT_FLAG, NULL, "show versions and exit", offsetof(config_t, version)}, \
  {"verbose", 'v', GM_OPT_FLAG, NULL, "more diagnostics on stderr", offsetof(config_t, verbose)}, \
  {"quiet", 'q', GM_OPT_FLAG, NULL, "only errors on stderr", offsetof(config_t, quiet)}

#define DB_OPT {"db", 0, GM_OPT_STR, "FILE", "SQLite database (default gpumem.db)", offsetof(config_t, db)}

static const gm_opt_t base_opts[] = {BASE_OPTS, {0}};
static const gm_opt_t info_opts[] = {BASE_OPTS, {0}};
static const gm_opt_t dump_opts[] = {
    BASE_OPTS,
    {"csv", 0, GM_OPT_FLAG, NULL, "the CSV text form (formats/SPEC.md) instead of lines", offsetof(config_t, csv)},
    {"limit", 'n', GM_OPT_U64, "N", "stop after N events (lines only)", offsetof(config_t, limit)},
    {0}};
static const gm_opt_t load_opts[] = {BASE_OPTS, DB_OPT, {0}};
static const gm_opt_t report_opts[] = {
    BASE_OPTS, DB_OPT,
    {"html", 0, GM_OPT_STR, "FILE", "write the self-contained HTML report to FILE", offsetof(config_t, html)},
    {"csv", 0, GM_OPT_STR, "DIR", "write one CSV file per table into DIR", offsetof(config_t, csv_dir)},
    {"gpureplay", 0, GM_OPT_STR, "PATH", "gpureplay to run for a bare trace (default: found beside, $GPUREPLAY, PATH)", offsetof(config_t, gpureplay)},
    {0}};
static const gm_opt_t recommend_opts[] = {BASE_OPTS, DB_OPT, {0}};

typedef struct command {
  const char *name, *usage, *what;
  const gm_opt_t *opts;
  int min_pos, max_pos;
} command_t;

static const command_t commands[] = {
    {"info", "gpuanalyze info [options] TRACE", "Provenance, duration, events by kind, devices, streams, peak live bytes and integrity of a trace.", info_opts, 1, 1},
    {"dump", "gpuanalyze dump [options] TRACE", "Print a trace's events, one line each, or as CSV.", dump_opts, 1, 1},
    {"load", "gpuanalyze load [options] INPUT...", "Load traces (.zst) and gpureplay results (.json) into the database, in one transaction; inputs already loaded are skipped.", load_opts, 1, 1000},
    {"report", "gpuanalyze report [options] [TRACE.zst]", "Report on the database (text on stdout, --html, --csv). Given a bare trace, run gpureplay's default sweep on it first, load both into TRACE.db and write report.html.", report_opts, 0, 1},
    {"recommend", "gpuanalyze recommend [options]", "The best allocator setting per trace as the line to paste, its saving against the default and the headroom left.", recommend_opts, 0, 0},
};

static void main_help(FILE *f) {
  fprintf(f, "usage: gpuanalyze COMMAND [options] ARGS\n\n"
             "Load gpumem traces and gpureplay results into SQLite, report and recommend.\n\ncommands:\n");
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].what);
  fprintf(f, "\n'gpuanalyze COMMAND --help' shows a command's options.\n\noptions:\n");
  for (const gm_opt_t *o = base_opts; o->name; o++) {
    char left[64];
    if (o->short_name) snprintf(left, sizeof left, "-%c, --%s", o->short_name, o->name);
    else snprintf(left, sizeof left, "    --%s", o->name);
    fprintf(f, "  %-28s %s\n", left, o->help);
  }
}

static void print_version(void) {
  printf("gpuanalyze %s (%s)\n", ANA_VERSION, GM_DIST_NAME);
  printf("trace format %d (reads traces that need a reader of version <= %d)\n", GMT_FORMAT_VERSION, GMT_FORMAT_VERSION);
  printf("database schema %d\n", ANA_SCHEMA_VERSION);
  printf("zstd %s\n", ZSTD_versionString());
  printf("SQLite %s\n", sqlite3_libversion());
  printf("jansson %s\n", jansson_version_str());
}

static int usage_error(const char *msg) {
  fprintf(stderr, "gpuanalyze: %s\ntry 'gpuanalyze --help'\n", msg);
  return 2;
}

static int fail(gm_err_t *err) {
  gm_log_err(err);
  return 1;
}

static int cmd_info(const char *path) {
  gm_err_t err = {0};
  gmt_header_t h;
  ana_summary_t s;
  gmt_reader_stats_t rs;
  if (ana_trace_summarize(path, &h, &s, &rs, &err) < 0) {
    gmt_header_free(&h);
    return fail(&err);
  }
  ana_info_print(stdout, path, &h, &s, &rs);
  gmt_header_free(&h);
  return 0;
}

static int cmd_dump(const config_t *c, const char *path) {
  gm_err_t err = {0};
  gmt_reader_t *r = NULL;
  if (gmt_reader_open(&r, path, &err) < 0) {
    gm_err_wrap(&err, "cannot open '%s'", path);
    return fail(&err);
  }
  gm_status_t st;
  if (c->csv) {
    st = gmt_csv_export(r, stdout, &err);
  } else {
    gmt_event_t ev;
    char line[1024];
    uint64_t n = 0;
    while ((!c->limit || n < c->limit) && (st = gmt_reader_next(r, &ev, &err)) == GM_OK) {
      gmt_event_format(&ev, r, line, sizeof line);
      printf("%s\n", line);
      n++;
    }
    if (st == GM_END) {
      const gmt_reader_stats_t *rs = gmt_reader_stats(r);
      if (rs->truncated) gm_log(GM_LOG_WARN, "'%s' is truncated: it ends after chunk %" PRIu64, path, rs->chunks);
      if (rs->seq_gaps) gm_log(GM_LOG_WARN, "'%s': %" PRIu64 " chunks missing by sequence number", path, rs->seq_gaps);
      if (rs->dropped) gm_log(GM_LOG_WARN, "'%s': the source dropped %" PRIu64 " records", path, rs->dropped);
    }
  }
  gmt_reader_close(r);
  if (st < 0) {
    gm_err_wrap(&err, "cannot read '%s'", path);
    return fail(&err);
  }
  return fflush(stdout) == 0 ? 0 : 1;
}

/* Test hook: GPUANALYZE_FAULT_AFTER_EVENTS=N makes a load fail after N events (to prove an
 * interrupted load leaves the database as it was). */
static void show_progress(void *ctx, const char *input, uint64_t events) {
  (void)ctx;
  fprintf(stderr, "\rgpuanalyze: loading %s: %.1f M events", input, (double)events / 1e6);
  fflush(stderr);
  progress_shown = 1;
}

static void end_progress(void) {
  if (progress_shown) fputc('\n', stderr);
  progress_shown = 0;
}

static ana_load_opts_t load_opts_from_env(void) {
  ana_load_opts_t o = {0};
  /* Progress only for a person watching: never into a log or a pipe. */
  if (isatty(STDERR_FILENO) && gm_log_level() >= GM_LOG_INFO) o.progress = show_progress;
  const char *f = getenv("GPUANALYZE_FAULT_AFTER_EVENTS");
  if (f) o.fault_after_events = strtoull(f, NULL, 10);
  return o;
}

static int cmd_load(const config_t *c, char **pos, int npos) {
  gm_err_t err = {0};
  ana_db_t *db = NULL;
  if (ana_db_open(&db, c->db, &err) < 0) return fail(&err);
  ana_load_opts_t o = load_opts_from_env();
  ana_load_stats_t st = {0};
  gm_status_t s = ana_db_load(db, (const char *const *)pos, npos, &o, &st, &err);
  end_progress();
  ana_db_close(db);
  if (s < 0) return fail(&err);
  gm_log(GM_LOG_INFO,
         "loaded %" PRIu64 " traces (%" PRIu64 " already there), %" PRIu64 " results files (%" PRIu64
         " already there): %" PRIu64 " events, %" PRIu64 " runs in %.2f s (%.2f M events/s) into '%s'",
         st.traces_loaded, st.traces_skipped, st.results_loaded, st.results_skipped, st.events, st.runs,
         st.seconds, st.seconds > 0 ? (double)st.events / st.seconds / 1e6 : 0.0, c->db);
  return 0;
}

static int file_exists_exec(const char *p) { return p && access(p, X_OK) == 0; }

/* gpureplay: --gpureplay, $GPUREPLAY, beside this binary (installed layout), ../replay/
 * (bazel-bin layout), then PATH. */
static int find_gpureplay(const config_t *c, char *out, size_t n) {
  if (c->gpureplay) return snprintf(out, n, "%s", c->gpureplay), 1;
  const char *env = getenv("GPUREPLAY");
  if (env && *env) return snprintf(out, n, "%s", env), 1;
  char self[PATH_MAX];
  ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  if (len > 0) {
    self[len] = '\0';
    char *dir = dirname(self);
    snprintf(out, n, "%s/gpureplay", dir);
    if (file_exists_exec(out)) return 1;
    snprintf(out, n, "%s/../replay/gpureplay", dir);
    if (file_exists_exec(out)) return 1;
  }
  const char *path = getenv("PATH");
  if (path) {
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *save = NULL, *d = strtok_r(buf, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
      snprintf(out, n, "%s/gpureplay", d);
      if (file_exists_exec(out)) return 1;
    }
  }
  return 0;
}

static int run_sweep(const char *gpureplay, const char *trace, const char *json, gm_err_t *err) {
  char *argv[] = {(char *)gpureplay, (char *)trace, "--sweep", "-o", (char *)json, NULL};
  /* Its table is progress for a person at a terminal (our stderr); otherwise it goes nowhere:
   * our stdout carries only the recommendation. Its stderr (errors) passes through. */
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  if (isatty(STDERR_FILENO)) posix_spawn_file_actions_adddup2(&fa, STDERR_FILENO, STDOUT_FILENO);
  else posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  pid_t pid;
  int rc = posix_spawn(&pid, gpureplay, &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return gm_err_set(err, GM_ERR_IO, "cannot run '%s': %s", gpureplay, strerror(rc));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return gm_err_set(err, GM_ERR_IO, "waitpid: %s", strerror(errno));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return gm_err_set(err, GM_ERR_IO, "'%s %s --sweep -o %s' failed (%s %d)", gpureplay, trace, json,
                      WIFEXITED(status) ? "exit status" : "signal",
                      WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
  return GM_OK;
}

static int cmd_report(config_t *c, char **pos, int npos) {
  gm_err_t err = {0};
  char dbpath[PATH_MAX], json[PATH_MAX] = "", replay[PATH_MAX];
  const char *html = c->html;
  int bare = npos == 1;
  if (bare) {
    const char *trace = pos[0];
    if (access(trace, R_OK) != 0) {
      gm_err_set(&err, GM_ERR_IO, "cannot open '%s': %s", trace, strerror(errno));
      return fail(&err);
    }
    if (!c->db) {
      /* TRACE.db beside the trace; in $TMPDIR when that directory is read-only. */
      char dir[PATH_MAX], base[PATH_MAX];
      snprintf(dir, sizeof dir, "%s", trace);
      snprintf(base, sizeof base, "%s", trace);
      if (access(dirname(dir), W_OK) == 0) {
        snprintf(dbpath, sizeof dbpath, "%s.db", trace);
      } else {
        snprintf(dbpath, sizeof dbpath, "%s/%s.db", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", basename(base));
        gm_log(GM_LOG_INFO, "'%s' is read-only: the database is %s", dir, dbpath);
      }
      c->db = dbpath;
    }
    if (!html) html = "report.html";
    if (find_gpureplay(c, replay, sizeof replay)) {
      /* .json: the loader tells results files from traces by their extension. */
      snprintf(json, sizeof json, "%s/gpuanalyze-XXXXXX.json", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
      int fd = mkstemps(json, 5);
      if (fd < 0) {
        gm_err_set(&err, GM_ERR_IO, "cannot create a temporary file: %s", strerror(errno));
        return fail(&err);
      }
      close(fd);
      if (isatty(STDERR_FILENO)) gm_log(GM_LOG_INFO, "running %s %s --sweep ...", replay, trace);
      if (run_sweep(replay, trace, json, &err) < 0) {
        unlink(json);
        return fail(&err);
      }
    } else {
      gm_log(GM_LOG_WARN, "gpureplay not found (beside gpuanalyze, $GPUREPLAY, PATH): reporting the trace without a policy sweep");
    }
    ana_db_t *db = NULL;
    if (ana_db_open(&db, c->db, &err) < 0) {
      if (*json) unlink(json);
      return fail(&err);
    }
    const char *inputs[2] = {trace, json};
    ana_load_opts_t o = load_opts_from_env();
    ana_load_stats_t st = {0};
    gm_status_t s = ana_db_load(db, inputs, *json ? 2 : 1, &o, &st, &err);
    end_progress();
    if (*json) unlink(json);
    ana_db_close(db);
    if (s < 0) return fail(&err);
  }
  ana_db_t *db = NULL;
  if (ana_db_open(&db, c->db, &err) < 0) return fail(&err);
  gm_status_t s = GM_OK;
  if (bare) s = ana_recommend(db, stdout, &err);
  else if (!html && !c->csv_dir) s = ana_report_text(db, stdout, &err);
  if (s >= 0 && html) {
    s = ana_report_html(db, html, &err);
    if (s >= 0 && isatty(STDERR_FILENO)) gm_log(GM_LOG_INFO, "wrote %s", html);
  }
  if (s >= 0 && c->csv_dir) s = ana_report_csv(db, c->csv_dir, &err);
  ana_db_close(db);
  if (s < 0) return fail(&err);
  return 0;
}

static int cmd_recommend(const config_t *c) {
  gm_err_t err = {0};
  ana_db_t *db = NULL;
  if (ana_db_open(&db, c->db, &err) < 0) return fail(&err);
  gm_status_t s = ana_recommend(db, stdout, &err);
  ana_db_close(db);
  return s < 0 ? fail(&err) : 0;
}

static int run(int argc, char **argv, char **pos) {
  if (argc < 2) return usage_error("missing command");
  config_t c = {0};
  gm_err_t err = {0};
  int npos = 0;
  const command_t *cmd = NULL;
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    if (strcmp(argv[1], commands[i].name) == 0) cmd = &commands[i];
  if (!cmd) {
    if (argv[1][0] != '-') {
      char msg[256];
      snprintf(msg, sizeof msg, "unknown command '%.200s'", argv[1]);
      return usage_error(msg);
    }
    if (gm_opts_parse(base_opts, argc, argv, &c, pos, &npos, 0, &err) < 0) return usage_error(err.msg);
    if (c.help) return main_help(stdout), 0;
    if (c.version) return print_version(), 0;
    return usage_error("missing command");
  }
  if (gm_opts_parse(cmd->opts, argc - 1, argv + 1, &c, pos, &npos, 0, &err) < 0)
    return usage_error(err.msg);
  if (c.help) {
    gm_opts_help(stdout, cmd->usage, cmd->what, cmd->opts);
    return 0;
  }
  if (c.version) return print_version(), 0;
  if (c.verbose) gm_log_set_level(GM_LOG_DEBUG);
  if (c.quiet) gm_log_set_level(GM_LOG_ERROR);
  if (npos < cmd->min_pos) return usage_error(cmd->min_pos == 1 && cmd->max_pos == 1 ? "missing TRACE" : "missing INPUT");
  if (npos > cmd->max_pos) {
    char msg[256];
    snprintf(msg, sizeof msg, "unexpected argument '%.200s'", pos[cmd->max_pos]);
    return usage_error(msg);
  }
  if (!c.db && strcmp(cmd->name, "report") != 0) c.db = "gpumem.db";
  if (!c.db && npos == 0) c.db = "gpumem.db";
  int rc;
  if (strcmp(cmd->name, "info") == 0) rc = cmd_info(pos[0]);
  else if (strcmp(cmd->name, "dump") == 0) rc = cmd_dump(&c, pos[0]);
  else if (strcmp(cmd->name, "load") == 0) rc = cmd_load(&c, pos, npos);
  else if (strcmp(cmd->name, "report") == 0) rc = cmd_report(&c, pos, npos);
  else rc = cmd_recommend(&c);
  return rc;
}

int main(int argc, char **argv) {
  gm_log_init("gpuanalyze", GM_LOG_INFO);
  char **pos = calloc((size_t)argc + 1, sizeof *pos);
  if (!pos) return 1;
  int rc = run(argc, argv, pos);
  free(pos);
  return rc;
}
