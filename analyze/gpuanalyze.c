/* gpuanalyze.c: the analyzer's command line: info, dump, load, report, oom, diff, ranks,
 * recommend.
 *
 * main() parses into a config struct (one option table per subcommand, the base options in
 * each, the same table feeding --help), validates, dispatches, maps the status to an exit code
 * (0 ok, 1 runtime failure with the cause chain, 2 usage) and is the only place that prints
 * errors. Options may come before the command word; usage errors point to the command's own
 * --help. Each group of subcommands lives in its own file (ana_cmd_*.c, sharing ana_cli.h):
 * `report TRACE.zst` (ana_cmd_report.c) is the newcomer's one step: it runs gpureplay --tune
 * (the sweep's grid and a search past it, on every core; the sweep alone with --no-tune or
 * past 5 M events: ana_cmd_report_tune.c), loads trace
 * and results into TRACE.db, writes the HTML and prints the recommendation, naming every file
 * it writes; run again on the same bytes it reuses the replays. Given a snapshot pickle or a
 * CSV trace it imports it first (gpurec import), given a database it reports on it; any other
 * kind of file is refused with the command that takes it. Damaged traces are salvaged
 * (formats/SPEC.md "Salvage") unless --strict: what was lost is a warning on stderr and a mark
 * in the output; --strict refuses them (exit 1). stdout is checked at the end, so output that
 * could not be written (a full disk) fails the command. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sqlite3.h>
#include <zstd.h>
#include <jansson.h>

#include "analyze/ana_cli.h"

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
    {"tune", 0, GM_OPT_FLAG, NULL, "the tuner's search even on a long trace without a training period (the "
     "default searches a trace past 1 M events on its steady state and confirms on the whole trace; past 5 M "
     "events without a period, the sweep's grid: the full search costs about 1 s of CPU per 1 M events and setting)",
     offsetof(config_t, tune)},
    {"no-tune", 0, GM_OPT_FLAG, NULL, "the sweep's grid only, without the tuner's search past it",
     offsetof(config_t, no_tune)},
    {"limits", 0, GM_OPT_FLAG, NULL, "let the tuner search hard limits too (per_process_memory_fraction, JAX's "
     "and TensorFlow's fractions): smaller, but tuned to the edge of this recording, so a run that needs a "
     "little more fails; by default the advice holds none", offsetof(config_t, limits)},
    {"csv", 0, GM_OPT_STR, "DIR", "write one CSV file per table into DIR", offsetof(config_t, csv_dir)},
    GPUREPLAY_OPT,
    {"gpurec", 0, GM_OPT_STR, "PATH", "gpurec to import a snapshot pickle or CSV with (default: found beside, $GPUREC, PATH)", offsetof(config_t, gpurec)},
    {"gpu-memory", 0, GM_OPT_SIZE, "SIZE", "a snapshot pickle's GPU memory (gpurec import --gpu-memory), e.g. 80GiB", offsetof(config_t, gpu_memory)},
    {"jobs", 'j', GM_OPT_U64, "N", "replay N settings at once (default: the number of cores)", offsetof(config_t, jobs)},
    {"capacity", 'c', GM_OPT_SIZE, "SIZE", "replay on a device of this size; a trace that runs out of memory (so, "
     "or as recorded) opens with why, as `gpuanalyze oom` says it", offsetof(config_t, capacity), 1, 1ull << 48},
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
    {"csv", 0, GM_OPT_STR, "DIR", "write diff_summary.csv, diff_callsites.csv (the 10000 callsites of most growth, the rest summed) and "
     "diff_timeline.csv (both traces on one normalised time axis) into DIR", offsetof(config_t, csv_dir)},
    {"top", 'n', GM_OPT_U64, "N", "callsites listed in the text (default 15)", offsetof(config_t, top)},
    {"html", 0, GM_OPT_STR, "FILE", "also write the two runs side by side as a self-contained HTML page",
     offsetof(config_t, html)},
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
    {"report", "gpuanalyze report [options] [TRACE.zst | SNAPSHOT.pickle | TRACE.csv | DB.db]...", "Given a trace: run the tuner on it (gpureplay --tune: the sweep's grid and a search past it; the advice is its choice, with its memory, driver time and the smallest GPU it fits; --no-tune, or past 5 M events in all, the sweep alone), or reuse the replays already in TRACE.db when the trace, gpureplay's version and the options have not changed, load both into TRACE.db, print the recommendation and write report.html. A PyTorch history (gpurec's default mode, a snapshot) holds the run's own segments: the recommendation first says whether the replay of the setting the job ran with reserves what the run reserved, and a miss widens every figure by its size. Given several traces (ranks of one job, two runs to compare): the same for each, into one database (report.db unless --db) and one report over all of them; for the ranks of one job it ends with the one setting for the whole job (paste on every rank). A PyTorch snapshot pickle or a CSV trace is imported into a trace beside it first (gpurec import). Without a trace: report on the database (--db; text on stdout, --html, --csv).", report_opts, 0, 1000},
    {"oom", "gpuanalyze oom [options] TRACE.zst", "Why a trace runs out of memory (its recorded failure, or under --capacity): the failing request, what was live by callsite, what was reserved but free and why it could not serve the request, and the smallest change that makes the same trace fit: a setting, a capacity, or none (the live bytes alone exceed the device). Runs gpureplay --explain-oom (found as report finds it) and says what it answers.", oom_opts, 1, 1},
    {"diff", "gpuanalyze diff [options] A.zst B.zst", "Two traces of the same job side by side: peak live, peak reserved (each framework's default setting, replayed), live bytes at each peak by callsite sorted by growth, callsites new in B or gone from A, and (--csv) both live timelines on one normalised time axis.", diff_opts, 2, 2},
    {"ranks", "gpuanalyze ranks [options] [TRACE.zst...]", "The ranks of a job side by side: peak per rank and device (live, mapped, reserved under the default and under the job's setting), the rank that limits the job, the spread, the callsites that differ most, and one setting for the whole job. Given traces: replays them under gpureplay's sweep (all at once, on every core) into --db (default ranks.db; replays already there are reused; given gpureplay results files too, loads them instead of replaying); the database keeps per-trace summaries, not events. Without arguments: reads the database (--db).", ranks_opts, 0, 100000},
    {"recommend", "gpuanalyze recommend [options]", "The best allocator setting per trace as the line to paste, its saving against the default and the waste left (figures: docs/glossary.md), after the replay checked against the run's own segments where the trace holds them; for the ranks of one job, then the one setting for the whole job (the default unless a setting saves more than the floor on the ranks' worst).", recommend_opts, 0, 0},
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

static int run(int argc, char **argv, char **pos) {
  if (argc < 2) return ana_cli_usage_error("missing command");
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
      return ana_cli_usage_error(msg);
    }
    if (gm_opts_parse(base_opts, argc, argv, &c, pos, &npos, 0, &err) < 0) return ana_cli_usage_error(err.msg);
    if (c.help) return main_help(stdout), 0;
    if (c.version) return print_version(), 0;
    return ana_cli_usage_error("missing command");
  }
  ana_cli_cmd_name = cmd->name;
  /* argv without the command word, options in their order: parse as the command's. */
  char **args = calloc((size_t)argc, sizeof *args);
  if (!args) return 1;
  int na = 0;
  args[na++] = argv[0];
  for (int i = 1; i < argc; i++)
    if (i != ci) args[na++] = argv[i];
  gm_status_t ps = gm_opts_parse(cmd->opts, na, args, &c, pos, &npos, 0, &err);
  free(args);
  if (ps < 0) return ana_cli_usage_error(err.msg);
  if (c.help) {
    gm_opts_help(stdout, cmd->usage, cmd->what, cmd->opts);
    return 0;
  }
  if (c.version) return print_version(), 0;
  if (c.verbose) gm_log_set_level(GM_LOG_DEBUG);
  if (c.quiet) gm_log_set_level(GM_LOG_ERROR);
  if (npos < cmd->min_pos)
    return ana_cli_usage_error(cmd->min_pos == 1 && cmd->max_pos == 1 ? "missing TRACE"
                       : cmd->min_pos == 2                    ? "diff takes two traces: A.zst B.zst"
                                                              : "missing INPUT");
  if (npos > cmd->max_pos) {
    char msg[256];
    snprintf(msg, sizeof msg, "unexpected argument '%.200s'", pos[cmd->max_pos]);
    return ana_cli_usage_error(msg);
  }
  if (!c.db && strcmp(cmd->name, "report") != 0 && strcmp(cmd->name, "ranks") != 0) c.db = "gpumem.db";
  int rc;
  if (strcmp(cmd->name, "info") == 0) rc = ana_cmd_info(&c, pos[0]);
  else if (strcmp(cmd->name, "dump") == 0) rc = ana_cmd_dump(&c, pos[0]);
  else if (strcmp(cmd->name, "load") == 0) rc = ana_cmd_load(&c, pos, npos);
  else if (strcmp(cmd->name, "report") == 0) rc = ana_cmd_report(&c, pos, npos);
  else if (strcmp(cmd->name, "oom") == 0) rc = ana_cmd_oom(&c, pos[0]);
  else if (strcmp(cmd->name, "diff") == 0) rc = ana_cmd_diff(&c, pos);
  else if (strcmp(cmd->name, "ranks") == 0) rc = ana_cmd_ranks(&c, pos, npos);
  else rc = ana_cmd_recommend(&c);
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
