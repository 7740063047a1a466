/* ana_cli.h: what gpuanalyze's subcommand files share (the binary only, not the library).
 *
 * gpuanalyze.c holds main(), the option tables and the dispatch; each ana_cmd_*.c holds one
 * group of subcommands; ana_cli.c the helpers they share. Only these files print and choose
 * exit codes: each ana_cmd_* returns the exit code (0, 1 runtime failure said on stderr, 2
 * usage). */
#ifndef GM_ANALYZE_ANA_CLI_H
#define GM_ANALYZE_ANA_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "analyze/ana.h"
#include "analyze/ana_diff.h"
#include "analyze/ana_gpureplay.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct config {
  int help, version, verbose, quiet;
  int csv, strict;
  uint64_t limit, wait; /* wait: UINT64_MAX until given (--wait=0 is a choice) */
  const char *db, *html, *csv_dir, *gpureplay, *gpurec;
  uint64_t gpu_memory, jobs;
  int tune, no_tune; /* report: force the tuner / the sweep only */
  int limits;        /* report: let the tuner search hard limits (memory fractions) */
  int tune_now;      /* report: what this command runs (ana_report_tune_plan) */
  int json, no_replay;      /* oom, diff */
  const char *policy;       /* oom */
  uint64_t capacity, top;   /* oom; diff */
  gm_strlist_t curve;       /* report --curve (ana_html_predict.c) */
} config_t;

/* The command being run, for usage errors' "try 'gpuanalyze CMD --help'" (NULL: none yet). */
extern const char *ana_cli_cmd_name;

int ana_cli_usage_error(const char *msg);
void ana_cli_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int ana_cli_wrong_kind(const char *path, unsigned wanted);
int ana_cli_fail(gm_err_t *err);
unsigned ana_cli_read_flags(const config_t *c);
int ana_cli_wait_ms(const config_t *c);
int ana_cli_need_db(const char *path);
uint64_t ana_cli_default_jobs(void);
/* Run argv[0] with argv and wait for it (start, then wait: ana_cli.c says where its output goes). */
int ana_cli_run_tool(char *const *argv, gm_err_t *err);
int ana_cli_start_tool(char *const *argv, pid_t *pid, gm_err_t *err);
int ana_cli_wait_tool(const char *argv0, pid_t pid, gm_err_t *err);
ana_load_opts_t ana_cli_load_opts(const config_t *c);
void ana_cli_end_progress(void);
/* gpureplay run whose stdout is read (oom, diff, report's "why it ran out"): ana_cmd_oom_diff.c. */
int ana_cli_replay_run(char *const *argv, int usage_ours, const char *what, gm_tool_run_t *r);
/* diff's peak reserved of one trace: gpureplay --json under the setting its job ran with, the
 * recorded timing of stream events (one figure, not a range). 0 or the exit code, said. */
int ana_cli_diff_reserved(const config_t *c, const char *replay, const char *trace, ana_diff_side_t *side);

/* report: the tuner or the sweep for this command's traces (ana_cmd_report_tune.c): sets
 * c->tune_now, says why when a long trace gets the sweep only. 0 or the exit code. */
int ana_report_tune_plan(config_t *c, char **traces, int n);
/* The key this command's replays of a trace are kept under (what, gpureplay's version, options). */
void ana_report_key_want(const config_t *c, const char *gpureplay, ana_replay_key_t *k);

int ana_cmd_info(const config_t *c, const char *path);
int ana_cmd_dump(const config_t *c, const char *path);
int ana_cmd_load(const config_t *c, char **pos, int npos);
int ana_cmd_report(config_t *c, char **pos, int npos);
int ana_cmd_oom(const config_t *c, const char *path);
int ana_cmd_diff(const config_t *c, char **pos);
int ana_cmd_recommend(const config_t *c);
int ana_cmd_ranks(config_t *c, char **pos, int npos);

#ifdef __cplusplus
}
#endif
#endif
