/* gpureplay_cli.h: what the files of the gpureplay command share, and only they (the binary's
 * own sources, not a library): the parsed command line, and the steps main() takes in order:
 *
 *   gpureplay_main.c        the option table, --help, --version, main(): parse -> the steps below
 *   gpureplay_cli_check.c   each flag's value into the config, then the refused combinations,
 *                           the policies a run replays (the user's specs created once: a bad
 *                           key is a usage error; the sweep grids this build accepts), and the
 *                           inputs (traces) before any work
 *   gpureplay_modes.c       what the run does: replay/--sweep (also --list-policies,
 *                           --export-perfetto), --tune, --explain-oom, --export-snapshot
 *
 * Exit codes (DESIGN.md): 0 ok, 1 runtime failure with the cause chain, 2 bad usage. Every
 * function here that returns an int returns one of them (0: go on). */
#ifndef GPUREPLAY_CLI_H
#define GPUREPLAY_CLI_H

#include <stdint.h>

#include "base/gm_base.h"
#include "replay/tool/gpureplay.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The command line as parsed (gm_opts_parse fills it from kOpts, gpureplay_main.c). */
typedef struct gr_cli_opts {
  int help, version, sweep, json, check, quiet, tune, no_capacity, no_limits, strict, explain_oom, list_policies;
  gm_strlist_t policy;
  const char *device, *output, *preload, *cuda_addresses, *addresses, *sync_allocs, *vmm_buffers, *count_other,
      *tune_mode, *tune_reduce,
      *event_timing, *export_snapshot, *export_perfetto;
  double budget;
  uint64_t capacity, device_memory, granularity, jobs, late_mallocs;
} gr_cli_opts_t;

/* "gpureplay: MSG" (escaped: it quotes the command line) and the hint to --help; returns 2. */
int gr_cli_usage_error(const char *msg);

/* gpureplay_cli_check.c. Each flag's value into cfg (traces set already by the caller). */
int gr_cli_config(const gr_cli_opts_t *o, gr_config_t *cfg);
/* The combinations refused, in the order the user meets them; npos: traces given. */
int gr_cli_refuse(const gr_cli_opts_t *o, int npos, const gr_config_t *cfg);
/* --tune-mode's word (NULL: search) as GR_TUNE_*, or -1. */
int gr_cli_tune_mode(const char *s);
/* --tune-reduce's word (NULL: auto) as GR_REDUCE_*, or -1. */
int gr_cli_tune_reduce(const char *s);
/* Before any replay: every input is a trace (else the advice, exit 1). */
int gr_cli_check_inputs(const gr_config_t *cfg);

/* gpureplay_cli_check.c, the policies. GR_CLI_GRIDS: the frameworks with a sweep grid of
 * their own (gr_sweep_grid_for), and the default grid. */
#define GR_CLI_GRIDS 6
#define GR_CLI_SPEC_MAX 1024

typedef struct gr_cli_policies {
  const char *specs[GM_STRLIST_MAX + 32]; /* the user's (given[]), then a trace's grid */
  char given[GM_STRLIST_MAX][GR_CLI_SPEC_MAX]; /* the user's specs in gpureplay's words */
  char grid_ok[GR_CLI_GRIDS][64];         /* this build accepts grid k's entry i */
  int n_user;                             /* specs[0..n_user): the user's (or the default) */
  int max_grid;                           /* the longest grid's length */
} gr_cli_policies_t;

/* The user's --policy specs, each created once against a simulator (a bad key: exit 2), and
 * with --sweep every grid's entries (those this build rejects are dropped: the grid is ours).
 * No --policy, no --sweep, no --explain-oom: "pytorch". */
int gr_cli_policies(const gr_cli_opts_t *o, const gr_config_t *cfg, gr_cli_policies_t *ps);
/* The user's specs, then the grid of framework (a GMT_FW_* set): how many specs ps->specs
 * holds now. */
int gr_cli_sweep_specs(gr_cli_policies_t *ps, unsigned frameworks);

/* gpureplay_modes.c: each returns the exit code. */
int gr_cli_replay(gr_config_t *cfg, const gr_cli_opts_t *o, gr_cli_policies_t *ps);
int gr_cli_tune(gr_config_t *cfg, const gr_cli_opts_t *o);
int gr_cli_explain_oom(gr_config_t *cfg, const char *spec);
int gr_cli_export_snapshot(gr_config_t *cfg, const char *spec, const char *out, int quiet);

#ifdef __cplusplus
}
#endif

#endif /* GPUREPLAY_CLI_H */
