/* gpuanalyze.c: the analyzer's command line: info, dump, load, report, recommend.
 *
 * main() parses into a config struct (one option table per subcommand, the base options in
 * each, the same table feeding --help), validates, dispatches, maps the status to an exit code
 * (0 ok, 1 runtime failure with the cause chain, 2 usage) and is the only place that prints
 * errors. Options may come before the command word; usage errors point to the command's own
 * --help. `report TRACE.zst` is the newcomer's one step: it runs gpureplay's default sweep (on
 * every core; --tune: gpureplay --tune, a search past the grid), loads trace and results into
 * TRACE.db, writes the HTML and prints the
 * recommendation, naming every file it writes; run again on the same bytes it reuses the
 * replays. Given a snapshot pickle or a CSV trace it imports it first (gpurec import), given a
 * database it reports on it; any other kind of file is refused with the command that takes it.
 * Damaged traces are salvaged (formats/SPEC.md "Salvage") unless --strict: what was lost is a
 * warning on stderr and a mark in the output; --strict refuses them (exit 1). stdout is
 * checked at the end, so output that could not be written (a full disk) fails the command. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <spawn.h>
#include <stdarg.h>
#include <sqlite3.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>
#include <jansson.h>

#include "analyze/ana.h"
#include "analyze/ana_diff.h"
#include "analyze/ana_gpureplay.h"

extern char **environ;

static int progress_shown; /* a \r progress line is on stderr and needs its newline */

typedef struct config {
  int help, version, verbose, quiet;
  int csv, strict;
  uint64_t limit, wait; /* wait: UINT64_MAX until given (--wait=0 is a choice) */
  const char *db, *html, *csv_dir, *gpureplay, *gpurec;
  uint64_t gpu_memory, jobs;
  int tune;
  int json, no_replay;      /* oom, diff */
  const char *policy;       /* oom */
  uint64_t capacity, top;   /* oom; diff */
  gm_strlist_t curve;       /* report --curve (ana_html_predict.c) */
} config_t;

#define BASE_OPTS                                                                             \
  {"help", 'h', GM_OPT_FLAG, NULL, "show this help and exit", offsetof(config_t, help)},     \
  {"version", 0, GM_OPT_FLAG, NULL, "show versions and exit", offsetof(config_t, version)}, \
  {"verbose", 'v', GM_OPT_FLAG, NULL, "more diagnostics on stderr", offsetof(config_t, verbose)}, \
  {"quiet", 'q', GM_OPT_FLAG, NULL, "only errors on stderr", offsetof(config_t, quiet)}

#define GPUREPLAY_OPT                                                                            \
  {"gpureplay", 0, GM_OPT_STR, "PATH", "the gpureplay to run (default: found beside, $GPUREPLAY, PATH)", \
   offsetof(config_t, gpureplay)}
#define DB_OPT {"db", 0, GM_OPT_STR, "FILE", "SQLite database (default gpumem.db)", offsetof(config_t, db)}
#define STRICT_OPT                                                                               \
  {"strict", 0, GM_OPT_FLAG, NULL, "refuse a damaged trace instead of salvaging its good chunks", \
   offsetof(config_t, strict)}
#define WAIT_OPT                                                                                 \
  {"wait", 0, GM_OPT_U64, "SECONDS", "wait this long for another process writing to the database " \
   "(default 30)", offsetof(config_t, wait)}

static const gm_opt_t base_opts[] = {BASE_OPTS, {0}};
static const gm_opt_t info_opts[] = {BASE_OPTS, STRICT_OPT, {0}};
static const gm_opt_t dump_opts[] = {
    BASE_OPTS, STRICT_OPT,
    {"csv", 0, GM_OPT_FLAG, NULL, "the CSV text form (formats/SPEC.md) instead of lines", offsetof(config_t, csv)},
    {"limit", 'n', GM_OPT_U64, "N", "stop after N events (lines only)", offsetof(config_t, limit)},
    {0}};
static const gm_opt_t load_opts[] = {BASE_OPTS, DB_OPT, STRICT_OPT, WAIT_OPT, {0}};
static const gm_opt_t report_opts[] = {
    BASE_OPTS, DB_OPT, STRICT_OPT, WAIT_OPT,
    {"html", 0, GM_OPT_STR, "FILE", "write the self-contained HTML report to FILE", offsetof(config_t, html)},
    {"tune", 0, GM_OPT_FLAG, NULL, "run gpureplay --tune instead of the sweep: a search past the grid, and "
     "the advice is its choice with its driver time and the smallest GPU it fits (runs again each time)",
     offsetof(config_t, tune)},
    {"csv", 0, GM_OPT_STR, "DIR", "write one CSV file per table into DIR", offsetof(config_t, csv_dir)},
    GPUREPLAY_OPT,
    {"gpurec", 0, GM_OPT_STR, "PATH", "gpurec to import a snapshot pickle or CSV with (default: found beside, $GPUREC, PATH)", offsetof(config_t, gpurec)},
    {"gpu-memory", 0, GM_OPT_SIZE, "SIZE", "a snapshot pickle's GPU memory (gpurec import --gpu-memory), e.g. 80GiB", offsetof(config_t, gpu_memory)},
    {"jobs", 'j', GM_OPT_U64, "N", "replay N settings at once (default: the number of cores)", offsetof(config_t, jobs)},
    {"curve", 0, GM_OPT_LIST, "TRACE@VALUE", "a recording of the job at a value (batch, length): the HTML draws every "
     "setting's peak against the value through them (a trace of gpurec predict names its own)", offsetof(config_t, curve)},
    {0}};
static const gm_opt_t recommend_opts[] = {BASE_OPTS, DB_OPT, WAIT_OPT, {0}};
#define JSON_OPT {"json", 0, GM_OPT_FLAG, NULL, "one JSON object on stdout instead of text", offsetof(config_t, json)}
#define JOBS_OPT {"jobs", 'j', GM_OPT_U64, "N", "replay N settings at once (default: the number of cores)", offsetof(config_t, jobs)}
static const gm_opt_t oom_opts[] = {
    BASE_OPTS, STRICT_OPT, JSON_OPT, JOBS_OPT, GPUREPLAY_OPT,
    {"policy", 0, GM_OPT_STR, "SPEC", "the setting to replay, in gpureplay's or the framework's words "
     "(default: the framework's default)", offsetof(config_t, policy)},
    /* at most 256 TiB: the largest request a policy serves (RP_REQUEST_MAX), as gpureplay takes it */
    {"capacity", 'c', GM_OPT_SIZE, "SIZE", "a device of this size (default: what the recorded run had when it "
     "failed, else unlimited)", offsetof(config_t, capacity), 1, 1ull << 48},
    {0}};
static const gm_opt_t diff_opts[] = {
    BASE_OPTS, STRICT_OPT, JSON_OPT, GPUREPLAY_OPT,
    {"csv", 0, GM_OPT_STR, "DIR", "write diff_summary.csv, diff_callsites.csv (every callsite) and "
     "diff_timeline.csv (both traces on one normalised time axis) into DIR", offsetof(config_t, csv_dir)},
    {"top", 'n', GM_OPT_U64, "N", "callsites listed in the text (default 15)", offsetof(config_t, top)},
    {"no-replay", 0, GM_OPT_FLAG, NULL, "skip the replay of each trace's default setting (peak reserved)",
     offsetof(config_t, no_replay)},
    {0}};
static const gm_opt_t ranks_opts[] = {
    BASE_OPTS, DB_OPT, STRICT_OPT, WAIT_OPT,
    {"json", 0, GM_OPT_FLAG, NULL, "one JSON array of jobs on stdout", offsetof(config_t, json)},
    {"csv", 0, GM_OPT_FLAG, NULL, "one CSV row per rank and device on stdout", offsetof(config_t, csv)},
    {"gpureplay", 0, GM_OPT_STR, "PATH", "gpureplay to run for traces (default: found beside, $GPUREPLAY, PATH)", offsetof(config_t, gpureplay)},
    JOBS_OPT,
    {0}};

typedef struct command {
  const char *name, *usage, *what;
  const gm_opt_t *opts;
  int min_pos, max_pos;
} command_t;

static const command_t commands[] = {
    {"info", "gpuanalyze info [options] TRACE.zst", "Provenance, duration, events by kind, devices, streams, peak live bytes, the recorded run's failed requests and integrity of a trace.", info_opts, 1, 1},
    {"dump", "gpuanalyze dump [options] TRACE.zst", "Print a trace's events, one line each, or as CSV.", dump_opts, 1, 1},
    {"load", "gpuanalyze load [options] INPUT...", "Load traces (.zst) and gpureplay results (.json) into the database (--db, default gpumem.db), in one transaction; inputs already loaded are skipped, a trace whose file changed since it was loaded is replaced.", load_opts, 1, 1000},
    {"report", "gpuanalyze report [options] [TRACE.zst | SNAPSHOT.pickle | TRACE.csv | DB.db]...", "Given a trace: run gpureplay's default sweep on it (--tune: gpureplay --tune, a search past the grid; or reuse the one already in TRACE.db when the trace has not changed), load both into TRACE.db, print the recommendation and write report.html. Given several traces (ranks of one job, two runs to compare): the same for each, into one database (report.db unless --db) and one report over all of them. A PyTorch snapshot pickle or a CSV trace is imported into a trace beside it first (gpurec import). Without a trace: report on the database (--db; text on stdout, --html, --csv).", report_opts, 0, 1000},
    {"oom", "gpuanalyze oom [options] TRACE.zst", "Why a trace runs out of memory (its recorded failure, or under --capacity): the failing request, what was live by callsite, what was reserved but free and why it could not serve the request, and the smallest change that makes the same trace fit: a setting, a capacity, or none (the live bytes alone exceed the device). Runs gpureplay --explain-oom (found as report finds it) and says what it answers.", oom_opts, 1, 1},
    {"diff", "gpuanalyze diff [options] A.zst B.zst", "Two traces of the same job side by side: peak live, peak reserved (each framework's default setting, replayed), live bytes at each peak by callsite sorted by growth, callsites new in B or gone from A, and (--csv) both live timelines on one normalised time axis.", diff_opts, 2, 2},
    {"ranks", "gpuanalyze ranks [options] [TRACE.zst...]", "The ranks of a job side by side: peak per rank and device (live, mapped, reserved under the default and under the job's setting), the rank that limits the job, the spread, the callsites that differ most, and one setting for the whole job. Given traces: replays them under gpureplay's sweep (all at once, on every core) into --db (default ranks.db; replays already there are reused; given gpureplay results files too, loads them instead of replaying); the database keeps per-trace summaries, not events. Without arguments: reads the database (--db).", ranks_opts, 0, 100000},
    {"recommend", "gpuanalyze recommend [options]", "The best allocator setting per trace as the line to paste, its saving against the default and the waste left (figures: README.md, Glossary).", recommend_opts, 0, 0},
};

static void main_help(FILE *f) {
  fprintf(f, "usage: gpuanalyze COMMAND [options] ARGS\n\n"
             "Load gpumem traces and gpureplay results into SQLite, report and recommend.\n"
             "Inputs: gpumem traces (.zst), gpureplay results (.json), databases (.db); `report` also\n"
             "takes a PyTorch memory snapshot (.pickle) or a CSV trace and imports it first.\n\ncommands:\n");
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

/* Usage errors point to the --help that explains them: the command's own when there is one. */
static const char *g_cmd_name;

static int usage_error(const char *msg) {
  fputs("gpuanalyze: ", stderr);
  gm_fputs_escaped(msg, stderr); /* it quotes the command line */
  if (g_cmd_name) fprintf(stderr, "\ntry 'gpuanalyze %s --help'\n", g_cmd_name);
  else fputs("\ntry 'gpuanalyze --help'\n", stderr);
  return 2;
}

/* What the user is told as work happens: every file written, what was reused. -q silences it. */
static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...) {
  if (gm_log_level() < GM_LOG_INFO) return;
  va_list ap;
  va_start(ap, fmt);
  fputs("gpuanalyze: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

/* A file of a kind this command does not take: what it is and the command that takes it. */
static int wrong_kind(const char *path, unsigned wanted) {
  char advice[GM_ERR_MSG_MAX];
  if (!gm_file_advice(path, gm_file_kind(path), wanted, advice, sizeof advice)) return 0;
  gm_log(GM_LOG_ERROR, "%s", advice);
  return 1;
}

static int fail(gm_err_t *err) {
  gm_log_err(err);
  return 1;
}

static unsigned read_flags(const config_t *c) { return c->strict ? GMT_READ_STRICT : GMT_READ_SALVAGE; }

static int wait_ms(const config_t *c) {
  if (c->wait == UINT64_MAX) return ANA_DEFAULT_WAIT_MS;
  return c->wait > 86400 ? 86400 * 1000 : (int)c->wait * 1000;
}

static int cmd_info(const config_t *c, const char *path) {
  gm_err_t err = {0};
  if (wrong_kind(path, GM_WANT(GM_FILE_TRACE))) return 1;
  gmt_header_t h;
  ana_summary_t s;
  gmt_reader_stats_t rs;
  char damage[GM_ERR_MSG_MAX];
  if (ana_trace_summarize(path, read_flags(c), &h, &s, &rs, damage, sizeof damage, &err) < 0) {
    gmt_header_free(&h);
    return fail(&err);
  }
  ana_info_print(stdout, path, &h, &s, &rs, damage);
  gmt_header_free(&h);
  return 0;
}

static int cmd_dump(const config_t *c, const char *path) {
  gm_err_t err = {0};
  if (wrong_kind(path, GM_WANT(GM_FILE_TRACE))) return 1;
  gmt_reader_t *r = NULL;
  if (gmt_reader_open_flags(&r, path, read_flags(c), &err) < 0) {
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
  if (st >= 0 && gmt_stats_damaged(gmt_reader_stats(r))) {
    char what[256];
    gm_log(GM_LOG_WARN, "'%s' is damaged (%s): %s%s", path, gmt_reader_damage(r),
           gmt_stats_damage_text(gmt_reader_stats(r), what, sizeof what),
           gmt_stats_partial(gmt_reader_stats(r)) ? ": the dump is partial" : "");
  }
  gmt_reader_close(r);
  if (st < 0) {
    gm_err_wrap(&err, "cannot read '%s'", path);
    return fail(&err);
  }
  return 0; /* stdout is checked in main */
}

/* Test hooks: GPUANALYZE_FAULT_AFTER_EVENTS=N makes a load fail after N events (to prove an
 * interrupted load leaves the database as it was); GPUANALYZE_TEST_HOLD_MS=N makes it hold its
 * write transaction N ms after its first batch of events, saying so on stderr (to run a
 * second process against a database that a load holds). */
static void hold_transaction(void *ctx, uint64_t events) {
  static int held;
  const char *ms = getenv("GPUANALYZE_TEST_HOLD_MS");
  if (held++ || !ms) return;
  fprintf(stderr, "gpuanalyze: test hook: holding the load's transaction for %s ms after %" PRIu64 " events\n", ms, events);
  fflush(stderr);
  long v = strtol(ms, NULL, 10);
  struct timespec ts = {v / 1000, (v % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

static void show_progress(void *ctx, const char *input, uint64_t events) {
  (void)ctx;
  char e[512];
  fprintf(stderr, "\rgpuanalyze: loading %s: %.1f M events", gm_escape(input, e, sizeof e), (double)events / 1e6);
  fflush(stderr);
  progress_shown = 1;
}

static void end_progress(void) {
  if (progress_shown) fputc('\n', stderr);
  progress_shown = 0;
}

static void show_warning(void *ctx, const char *msg) {
  (void)ctx;
  end_progress();
  gm_log(GM_LOG_WARN, "%s", msg);
}

static ana_load_opts_t load_opts_from_env(const config_t *c) {
  ana_load_opts_t o = {0};
  o.read_flags = read_flags(c);
  o.warn = show_warning;
  /* Progress only for a person watching: never into a log or a pipe. */
  if (isatty(STDERR_FILENO) && gm_log_level() >= GM_LOG_INFO) o.progress = show_progress;
  const char *f = getenv("GPUANALYZE_FAULT_AFTER_EVENTS");
  if (f) o.fault_after_events = strtoull(f, NULL, 10);
  if (getenv("GPUANALYZE_TEST_HOLD_MS")) o.batch_done = hold_transaction;
  return o;
}

static int cmd_load(const config_t *c, char **pos, int npos) {
  gm_err_t err = {0};
  for (int i = 0; i < npos; i++)
    if (wrong_kind(pos[i], GM_WANT(GM_FILE_TRACE) | GM_WANT(GM_FILE_RESULTS))) return 1;
  ana_db_t *db = NULL;
  if (ana_db_open_wait(&db, c->db, wait_ms(c), &err) < 0) return fail(&err);
  ana_load_opts_t o = load_opts_from_env(c);
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

/* Run argv[0] with argv; its stdout goes to our stderr on a terminal (progress for a person),
 * else nowhere: our stdout carries only the recommendation. Its stderr passes through. */
static int run_tool(char *const *argv, gm_err_t *err) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  if (isatty(STDERR_FILENO)) posix_spawn_file_actions_adddup2(&fa, STDERR_FILENO, STDOUT_FILENO);
  else posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  pid_t pid;
  int rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return gm_err_set(err, GM_ERR_IO, "cannot run '%s': %s", argv[0], strerror(rc));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return gm_err_set(err, GM_ERR_IO, "waitpid: %s", strerror(errno));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    /* Its own error line is already on stderr: say only which step failed. */
    const char *base = strrchr(argv[0], '/');
    return gm_err_set(err, GM_ERR_IO, "%s failed (%s %d)", base ? base + 1 : argv[0],
                      WIFEXITED(status) ? "exit status" : "signal",
                      WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
  }
  return GM_OK;
}

static int run_sweep(const char *gpureplay, const char *trace, const char *json, uint64_t jobs, int tune,
                     int strict, gm_err_t *err) {
  char j[32];
  snprintf(j, sizeof j, "--jobs=%" PRIu64, jobs);
  /* --tune replays the sweep's grid too, and searches past it (issue 13). */
  char *argv[] = {(char *)gpureplay, (char *)trace, tune ? "--tune" : "--sweep", j, "-q", "-o", (char *)json,
                  strict ? "--strict" : NULL, NULL};
  return run_tool(argv, err);
}

static uint64_t default_jobs(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n < 1 ? 1 : n > 16 ? 16 : (uint64_t)n;
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
      ours = h->tool && strcmp(h->tool, "gpurec import") == 0;
      same_gpu = !c->gpu_memory || h->gpu_total_mem == c->gpu_memory;
      gmt_reader_close(r);
    }
    if (!ours)
      return gm_err_set(err, GM_ERR_IO, "'%s' exists and was not imported from '%s': import it yourself, "
                        "`gpurec import %s -o OTHER.zst`, and report on that", trace, in, in);
    if (same_gpu && newer_than(trace, in)) {
      say("reusing %s (imported from %s, which has not changed since)", trace, in);
      return GM_OK;
    }
  }
  char tool[PATH_MAX], mem[64];
  if (!ana_tool_find(c->gpurec, "GPUREC", "gpurec", "recorder", tool, sizeof tool))
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
    if (ana_db_open_wait(&db, c->db, wait_ms(c), &err) < 0) return fail(&err);
    gm_status_t s = ana_trace_replayed(db, trace, &runs, &others, &err);
    ana_db_close(db);
    if (s < 0) return fail(&err);
  }
  /* TRACE.db made for an older recording of the same name: its figures are stale, and would
   * be reported beside the new ones. Made afresh (only the database this command names itself,
   * never one given with --db), once the new replays have succeeded. */
  int fresh = runs < 0 && others > 0 && may_renew;
  if (runs > 0 && !c->tune) {
    say("reusing the %" PRId64 " replays of %s in %s (the trace has not changed; delete %s to replay it again)",
        runs, trace, c->db, c->db);
    return 0;
  }
  if (ana_tool_find(c->gpureplay, "GPUREPLAY", "gpureplay", "replay", replay, sizeof replay)) {
    /* .json: the loader tells results files from traces by their extension. */
    snprintf(json, sizeof json, "%s/gpuanalyze-XXXXXX.json", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    int fd = mkstemps(json, 5);
    if (fd < 0) {
      gm_err_set(&err, GM_ERR_IO, "cannot create a temporary file: %s", strerror(errno));
      return fail(&err);
    }
    close(fd);
    uint64_t jobs = c->jobs ? c->jobs : default_jobs();
    if (isatty(STDERR_FILENO))
      say(c->tune ? "tuning %s: gpureplay --tune searches the allocator settings (the sweep's grid and past it), %" PRIu64 " at once ..."
                  : "replaying %s under gpureplay's sweep of allocator settings, %" PRIu64 " at once ...", trace, jobs);
    if (run_sweep(replay, trace, json, jobs, c->tune, c->strict, &err) < 0) {
      unlink(json);
      gm_err_wrap(&err, "cannot replay '%s'", trace);
      return fail(&err);
    }
  } else {
    gm_log(GM_LOG_WARN, "gpureplay not found (beside gpuanalyze, $GPUREPLAY, PATH): reporting the trace without a policy sweep");
  }
  if (fresh) {
    static const char *const sfx[] = {"", "-journal", "-wal", "-shm"};
    for (size_t i = 0; i < sizeof sfx / sizeof sfx[0]; i++) {
      char p[PATH_MAX + 16];
      snprintf(p, sizeof p, "%s%s", c->db, sfx[i]);
      unlink(p);
    }
    say("%s changed since %s was made: made it afresh", trace, c->db);
    existed = 0;
  }
  ana_db_t *db = NULL;
  if (ana_db_open_wait(&db, c->db, wait_ms(c), &err) < 0) {
    if (*json) unlink(json);
    return fail(&err);
  }
  const char *inputs[2] = {trace, json};
  ana_load_opts_t o = load_opts_from_env(c);
  ana_load_stats_t st = {0};
  gm_status_t s = ana_db_load(db, inputs, *json ? 2 : 1, &o, &st, &err);
  end_progress();
  if (*json) unlink(json);
  ana_db_close(db);
  if (s < 0) return fail(&err);
  if (alone) say("wrote %s (the database: the trace and its replays; %s)", c->db, existed ? "added to it" : "new");
  else say("wrote %s (the database: %s and its replays; %s)", c->db, trace, existed ? "added to it" : "new");
  return 0;
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
      say("'%s' is read-only: the database goes to %s", dir, dbpath);
    }
    c->db = dbpath;
  }
  /* Every output's directory is checked before the replays start, not after. */
  if (gm_output_check(c->db, &err) < 0 || gm_output_check(html, &err) < 0 ||
      (c->csv_dir && access(c->csv_dir, F_OK) != 0 && gm_output_check(c->csv_dir, &err) < 0))
    return fail(&err);
  for (int i = 0; i < n; i++) {
    int rc = report_load(c, traces[i], db_defaulted && n == 1, n == 1);
    if (rc) return rc;
  }
  ana_db_t *db = NULL;
  if (ana_db_open_wait(&db, c->db, wait_ms(c), &err) < 0) return fail(&err);
  gm_status_t s = ana_recommend(db, stdout, &err);
  if (s >= 0) s = ana_report_html(db, html, &err);
  if (s >= 0) say("wrote %s (the report)", html);
  if (s >= 0 && c->csv_dir) {
    s = ana_report_csv(db, c->csv_dir, &err);
    if (s >= 0) say("wrote the report's tables as CSV into %s/", c->csv_dir);
  }
  ana_db_close(db);
  return s < 0 ? fail(&err) : 0;
}

/* report, recommend: the database must exist (a typo would otherwise make an empty one). */
static int need_db(const char *path) {
  if (access(path, F_OK) == 0) return 0;
  gm_log(GM_LOG_ERROR, "cannot open database '%s': no such file (`gpuanalyze report TRACE.zst` makes one, "
         "or `gpuanalyze load --db %s TRACE.zst R.json`)", path, path);
  return 1;
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
      if (import_input(c, in, buf, n, &err) < 0) return fail(&err);
      *trace = buf;
      return 0;
    case GM_FILE_DATABASE: *is_db = 1; return 0;
    case GM_FILE_MISSING:
    case GM_FILE_UNREADABLE:
      gm_err_set(&err, GM_ERR_IO, "cannot open '%s': %s", in, strerror(errno ? errno : ENOENT));
      return fail(&err);
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

static int cmd_report(config_t *c, char **pos, int npos) {
  int bad_curve = ana_html_predict_config(c->curve.v, c->curve.n, c->gpureplay);
  if (bad_curve >= 0) return usage_error("--curve: give a recording as TRACE.zst@VALUE, e.g. run8.zst@8");
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
          return usage_error("a database is reported on alone: give it without traces (or as --db to add them to it)");
        }
        if (c->db && strcmp(c->db, pos[i]) != 0) {
          free(bufs);
          free(traces);
          return usage_error("give the database once: as --db or as the argument");
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
  if (need_db(c->db)) return 1;
  ana_db_t *db = NULL;
  if (ana_db_open_wait(&db, c->db, wait_ms(c), &err) < 0) return fail(&err);
  gm_status_t s = GM_OK;
  if (!c->html && !c->csv_dir) s = ana_report_text(db, stdout, &err);
  if (s >= 0 && c->html) {
    s = ana_report_html(db, c->html, &err);
    if (s >= 0) say("wrote %s (the report)", c->html);
  }
  if (s >= 0 && c->csv_dir) {
    s = ana_report_csv(db, c->csv_dir, &err);
    if (s >= 0) say("wrote the report's tables as CSV into %s/", c->csv_dir);
  }
  ana_db_close(db);
  if (s < 0) return fail(&err);
  return 0;
}

/* gpureplay run for a command that reads its output (oom, diff): its stdout captured, its own
 * other lines (warnings) passed on to stderr, its error said in one line of ours. A usage error
 * about an option the user gave us to pass on (usage_ours: --policy, --capacity) is ours, exit
 * 2; its runtime error is its cause chain, exit 1, as if we had replayed ourselves. 0: it
 * succeeded and r holds what it printed (ana_run_free); else the exit code, all said. */
static int replay_run(char *const *argv, int usage_ours, const char *what, ana_run_t *r) {
  gm_err_t err = {0};
  if (ana_tool_capture(argv, r, &err) < 0) {
    gm_err_wrap(&err, "cannot %s", what);
    return fail(&err);
  }
  if (r->exit_status == 0) {
    fputs(r->err, stderr);
    return 0;
  }
  char msg[GM_ERR_MSG_MAX], *rest = NULL;
  int named = ana_tool_message(r, "gpureplay", msg, sizeof msg, &rest);
  if (rest) fputs(rest, stderr);
  free(rest);
  int rc = 1;
  if (r->exit_status == 2 && named && usage_ours && (strstr(msg, "--policy") || strstr(msg, "--capacity")))
    rc = usage_error(msg);
  else if (r->exit_status == 1 && named) gm_log(GM_LOG_ERROR, "%s", msg);
  else if (r->exit_status == 2 && named)
    gm_log(GM_LOG_ERROR, "cannot %s: %s refused it: %s%s", what, argv[0], msg,
           strstr(msg, "unknown option") ? " (a gpureplay older than this gpuanalyze?)" : "");
  else gm_log(GM_LOG_ERROR, "cannot %s: %s", what, msg);
  ana_run_free(r);
  return rc;
}

/* `oom`: gpureplay --explain-oom replays and searches; this says its answer. */
static int cmd_oom(const config_t *c, const char *path) {
  gm_err_t err = {0};
  if (wrong_kind(path, GM_WANT(GM_FILE_TRACE))) return 1;
  char replay[PATH_MAX], jobs[32], cap[48];
  if (!ana_tool_find(c->gpureplay, "GPUREPLAY", "gpureplay", "replay", replay, sizeof replay)) {
    gm_log(GM_LOG_ERROR, "gpureplay not found (beside gpuanalyze, $GPUREPLAY, PATH): oom replays the trace "
           "with it (--gpureplay=PATH)");
    return 1;
  }
  uint64_t j = c->jobs ? c->jobs : default_jobs();
  snprintf(jobs, sizeof jobs, "--jobs=%" PRIu64, j > 256 ? 256 : j);
  snprintf(cap, sizeof cap, "--capacity=%" PRIu64, c->capacity);
  size_t pl = c->policy ? strlen(c->policy) + 16 : 1;
  char *pol = malloc(pl);
  if (!pol) return 1;
  snprintf(pol, pl, "--policy=%s", c->policy ? c->policy : "");
  char *argv[10];
  int n = 0;
  argv[n++] = replay;
  argv[n++] = "--explain-oom";
  argv[n++] = "--json";
  argv[n++] = jobs;
  if (c->capacity) argv[n++] = cap;
  if (c->policy) argv[n++] = pol;
  if (c->strict) argv[n++] = "--strict";
  argv[n++] = "--"; /* a trace named -x.zst is a trace */
  argv[n++] = (char *)path;
  argv[n] = NULL;
  char what[PATH_MAX + 64];
  snprintf(what, sizeof what, "explain why '%s' runs out of memory", path);
  ana_run_t r;
  int rc = replay_run(argv, 1, what, &r);
  free(pol);
  if (rc) return rc;
  ana_oom_t o;
  gm_status_t s = ana_oom_read(r.out, &o, &err);
  ana_run_free(&r);
  if (s < 0) return fail(&err);
  if (c->json) s = ana_oom_print_json(stdout, &o, &err);
  else ana_oom_print_text(stdout, path, &o);
  ana_oom_free(&o);
  return s < 0 ? fail(&err) : 0;
}

/* diff's peak reserved of one trace: gpureplay --json under the setting its job ran with. */
static int diff_reserved(const config_t *c, const char *replay, const char *trace, ana_diff_side_t *side) {
  gm_err_t err = {0};
  char spec[1100], pol[1200], what[PATH_MAX + 64];
  if (ana_trace_ran_with(trace, read_flags(c), spec, sizeof spec, &err) < 0) return fail(&err);
  snprintf(pol, sizeof pol, "--policy=%s", spec);
  /* the recorded timing of stream events: one figure, not a range */
  char *argv[9];
  int n = 0;
  argv[n++] = (char *)replay;
  argv[n++] = "--json";
  argv[n++] = "-q";
  argv[n++] = "--event-timing=recorded";
  argv[n++] = pol;
  if (c->strict) argv[n++] = "--strict";
  argv[n++] = "--";
  argv[n++] = (char *)trace;
  argv[n] = NULL;
  snprintf(what, sizeof what, "replay '%s' for its peak reserved", trace);
  ana_run_t r;
  int rc = replay_run(argv, 0, what, &r);
  if (rc) return rc;
  gm_status_t s = ana_replay_peak_read(r.out, &side->peak_reserved, side->policy, sizeof side->policy, &err);
  ana_run_free(&r);
  if (s < 0) return fail(&err);
  side->has_reserved = 1;
  return 0;
}

static int cmd_diff(const config_t *c, char **pos) {
  gm_err_t err = {0};
  for (int i = 0; i < 2; i++)
    if (wrong_kind(pos[i], GM_WANT(GM_FILE_TRACE))) return 1;
  if (c->csv_dir && access(c->csv_dir, F_OK) != 0 && gm_output_check(c->csv_dir, &err) < 0) return fail(&err);
  ana_diff_t *d = malloc(sizeof *d);
  if (!d) return 1;
  gm_status_t s = ana_diff_traces(pos[0], pos[1], read_flags(c), d, &err);
  if (s < 0) {
    free(d);
    return fail(&err);
  }
  char replay[PATH_MAX];
  int rc = 0;
  if (!c->no_replay && !ana_tool_find(c->gpureplay, "GPUREPLAY", "gpureplay", "replay", replay, sizeof replay))
    gm_log(GM_LOG_WARN, "gpureplay not found (beside gpuanalyze, $GPUREPLAY, PATH): the diff goes without peak "
           "reserved (--gpureplay=PATH; --no-replay skips it)");
  else
    for (int i = 0; i < 2 && !c->no_replay && rc == 0; i++) rc = diff_reserved(c, replay, pos[i], &d->side[i]);
  if (rc == 0 && c->json) s = ana_diff_print_json(stdout, d, &err);
  else if (rc == 0) ana_diff_print_text(stdout, d, c->top ? (int)(c->top > 100000 ? 100000 : c->top) : 15);
  if (rc == 0 && s >= 0 && c->csv_dir) {
    s = ana_diff_write_csv(d, c->csv_dir, &err);
    if (s >= 0) say("wrote diff_summary.csv, diff_callsites.csv and diff_timeline.csv into %s/", c->csv_dir);
  }
  ana_diff_free(d);
  free(d);
  if (rc) return rc;
  return s < 0 ? fail(&err) : 0;
}

static int cmd_recommend(const config_t *c) {
  gm_err_t err = {0};
  if (need_db(c->db)) return 1;
  ana_db_t *db = NULL;
  if (ana_db_open_wait(&db, c->db, wait_ms(c), &err) < 0) return fail(&err);
  gm_status_t s = ana_recommend(db, stdout, &err);
  ana_db_close(db);
  return s < 0 ? fail(&err) : 0;
}

/* `ranks TRACE...`: replay the traces not yet in the database (one gpureplay, every core), load
 * them, then the view; `ranks` alone: the view of the database. */
static int cmd_ranks(config_t *c, char **pos, int npos) {
  gm_err_t err = {0};
  if (c->json && c->csv) return usage_error("give --json or --csv, not both");
  if (!c->db) c->db = npos ? "ranks.db" : "gpumem.db";
  if (!npos && need_db(c->db)) return 1;
  ana_db_t *db = NULL;
  if (ana_db_open_wait(&db, c->db, wait_ms(c), &err) < 0) return fail(&err);
  char **todo = calloc((size_t)npos + 8, sizeof *todo);
  int nt = 0, nres = 0;
  if (!todo) return ana_db_close(db), 1;
  /* results files given (gpureplay's, made beforehand): loaded with the traces, nothing replayed */
  for (int i = 0; i < npos; i++) nres += gm_file_kind(pos[i]) == GM_FILE_RESULTS;
  for (int i = 0; i < npos && nres; i++) todo[nt++] = pos[i];
  for (int i = 0; i < npos && !nres; i++) {
    int64_t runs = -1, others = 0;
    if (ana_trace_replayed(db, pos[i], &runs, &others, &err) < 0) return ana_db_close(db), free(todo), fail(&err);
    if (runs <= 0) todo[nt++] = pos[i];
  }
  ana_db_close(db);
  char replay[PATH_MAX], json[PATH_MAX] = "", jobs[32];
  int rc = 0;
  if (nt && !nres && ana_tool_find(c->gpureplay, "GPUREPLAY", "gpureplay", "replay", replay, sizeof replay)) {
    snprintf(json, sizeof json, "%s/gpuanalyze-XXXXXX.json", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    int fd = mkstemps(json, 5);
    if (fd < 0) return free(todo), gm_err_set(&err, GM_ERR_IO, "cannot create a temporary file: %s", strerror(errno)), fail(&err);
    close(fd);
    snprintf(jobs, sizeof jobs, "--jobs=%" PRIu64, c->jobs ? c->jobs : default_jobs());
    char **argv = calloc((size_t)nt + 10, sizeof *argv);
    int na = 0;
    if (!argv) return free(todo), 1;
    argv[na++] = replay;
    for (int i = 0; i < nt; i++) argv[na++] = todo[i];
    argv[na++] = "--sweep";
    argv[na++] = jobs;
    argv[na++] = "-q";
    argv[na++] = "-o";
    argv[na++] = json;
    if (c->strict) argv[na++] = "--strict";
    say("replaying %d trace%s under gpureplay's sweep ...", nt, nt == 1 ? "" : "s");
    if (run_tool(argv, &err) < 0) rc = fail(&err);
    free(argv);
  } else if (nt && !nres) {
    gm_log(GM_LOG_WARN, "gpureplay not found (beside gpuanalyze, $GPUREPLAY, PATH): the ranks without replays");
  }
  if (!rc && nt) {
    if (*json) todo[nt++] = json;
    ana_load_opts_t o = load_opts_from_env(c);
    o.summary_only = 1; /* the view reads summaries: hundreds of ranks' events stay out */
    ana_load_stats_t st = {0};
    if (ana_db_open_wait(&db, c->db, wait_ms(c), &err) < 0) rc = fail(&err);
    else if (ana_db_load(db, (const char *const *)todo, nt, &o, &st, &err) < 0) rc = fail(&err), ana_db_close(db);
    else ana_db_close(db), say("wrote %s (the ranks' traces and replays)", c->db);
    end_progress();
  }
  if (*json) unlink(json);
  free(todo);
  if (rc) return rc;
  if (ana_db_open_wait(&db, c->db, wait_ms(c), &err) < 0) return fail(&err);
  int njobs = 0;
  gm_status_t s = ana_ranks(db, stdout, c->json ? ANA_RANKS_JSON : c->csv ? ANA_RANKS_CSV : ANA_RANKS_TEXT, &njobs, &err);
  ana_db_close(db);
  return s < 0 ? fail(&err) : 0;
}

static int run(int argc, char **argv, char **pos) {
  if (argc < 2) return usage_error("missing command");
  config_t c = {0};
  c.wait = UINT64_MAX;
  gm_err_t err = {0};
  int npos = 0;
  /* The command is the first word that is not an option: options may come before it
   * (`gpuanalyze -v report x`) as well as after. The base options take no value. */
  int ci = 1;
  while (ci < argc && argv[ci][0] == '-' && strcmp(argv[ci], "--") != 0) ci++;
  const command_t *cmd = NULL;
  if (ci < argc)
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
      if (strcmp(argv[ci], commands[i].name) == 0) cmd = &commands[i];
  if (!cmd) {
    if (ci < argc && strcmp(argv[ci], "--") != 0) {
      const char *names[sizeof commands / sizeof commands[0]];
      for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) names[i] = commands[i].name;
      const char *near = gm_closest(argv[ci], names, sizeof names / sizeof names[0]);
      char msg[300];
      if (near) snprintf(msg, sizeof msg, "unknown command '%.200s' (did you mean '%s'?)", argv[ci], near);
      else snprintf(msg, sizeof msg, "unknown command '%.200s'", argv[ci]);
      if (gm_file_kind(argv[ci]) != GM_FILE_MISSING)
        snprintf(msg, sizeof msg, "missing command before '%.200s' (info, dump, load, report, oom, diff, ranks or recommend)", argv[ci]);
      return usage_error(msg);
    }
    if (gm_opts_parse(base_opts, argc, argv, &c, pos, &npos, 0, &err) < 0) return usage_error(err.msg);
    if (c.help) return main_help(stdout), 0;
    if (c.version) return print_version(), 0;
    return usage_error("missing command");
  }
  g_cmd_name = cmd->name;
  /* argv without the command word, options in their order: parse as the command's. */
  char **args = calloc((size_t)argc, sizeof *args);
  if (!args) return 1;
  int na = 0;
  args[na++] = argv[0];
  for (int i = 1; i < argc; i++)
    if (i != ci) args[na++] = argv[i];
  gm_status_t ps = gm_opts_parse(cmd->opts, na, args, &c, pos, &npos, 0, &err);
  free(args);
  if (ps < 0) return usage_error(err.msg);
  if (c.help) {
    gm_opts_help(stdout, cmd->usage, cmd->what, cmd->opts);
    return 0;
  }
  if (c.version) return print_version(), 0;
  if (c.verbose) gm_log_set_level(GM_LOG_DEBUG);
  if (c.quiet) gm_log_set_level(GM_LOG_ERROR);
  if (npos < cmd->min_pos)
    return usage_error(cmd->min_pos == 1 && cmd->max_pos == 1 ? "missing TRACE"
                       : cmd->min_pos == 2                    ? "diff takes two traces: A.zst B.zst"
                                                              : "missing INPUT");
  if (npos > cmd->max_pos) {
    char msg[256];
    snprintf(msg, sizeof msg, "unexpected argument '%.200s'", pos[cmd->max_pos]);
    return usage_error(msg);
  }
  if (!c.db && strcmp(cmd->name, "report") != 0 && strcmp(cmd->name, "ranks") != 0) c.db = "gpumem.db";
  int rc;
  if (strcmp(cmd->name, "info") == 0) rc = cmd_info(&c, pos[0]);
  else if (strcmp(cmd->name, "dump") == 0) rc = cmd_dump(&c, pos[0]);
  else if (strcmp(cmd->name, "load") == 0) rc = cmd_load(&c, pos, npos);
  else if (strcmp(cmd->name, "report") == 0) rc = cmd_report(&c, pos, npos);
  else if (strcmp(cmd->name, "oom") == 0) rc = cmd_oom(&c, pos[0]);
  else if (strcmp(cmd->name, "diff") == 0) rc = cmd_diff(&c, pos);
  else if (strcmp(cmd->name, "ranks") == 0) rc = cmd_ranks(&c, pos, npos);
  else rc = cmd_recommend(&c);
  return rc;
}

int main(int argc, char **argv) {
  gm_log_init("gpuanalyze", GM_LOG_INFO);
  char **pos = calloc((size_t)argc + 1, sizeof *pos);
  if (!pos) return 1;
  int rc = run(argc, argv, pos);
  free(pos);
  gm_err_t err = {0};
  if (gm_stdout_close(&err) < 0) {
    gm_log_err(&err);
    if (rc == 0) rc = 1;
  }
  return rc;
}
