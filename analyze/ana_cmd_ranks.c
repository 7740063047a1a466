/* ana_cmd_ranks.c: `gpuanalyze ranks` (the ranks of one job side by side) and `recommend`. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analyze/ana_cli.h"
#include "analyze/ana_report_internal.h"

int ana_cmd_recommend(const config_t *c) {
  gm_err_t err = {0};
  if (ana_cli_need_db(c->db)) return 1;
  ana_db_t *db = NULL;
  if (ana_db_open_wait(&db, c->db, ana_cli_wait_ms(c), &err) < 0) return ana_cli_fail(&err);
  gm_status_t s = ana_recommend(db, stdout, &err);
  if (s == GM_OK) s = ana_report_ranks_text(db, stdout, &err); /* ranks of one job: one setting for all */
  if (s == GM_OK) ana_recommend_fit(db, stdout); /* predicted traces: the largest value that fits (ana_html_fit.c) */
  ana_db_close(db);
  return s < 0 ? ana_cli_fail(&err) : 0;
}

/* `ranks TRACE...`: replay the traces not yet in the database (one gpureplay, every core), load
 * them, then the view; `ranks` alone: the view of the database. */
int ana_cmd_ranks(config_t *c, char **pos, int npos) {
  gm_err_t err = {0};
  if (c->json && c->csv) return ana_cli_usage_error("give --json or --csv, not both");
  if (!c->db) c->db = npos ? "ranks.db" : "gpumem.db";
  if (!npos && ana_cli_need_db(c->db)) return 1;
  ana_db_t *db = NULL;
  if (ana_db_open_wait(&db, c->db, ana_cli_wait_ms(c), &err) < 0) return ana_cli_fail(&err);
  char **todo = calloc((size_t)npos + 8, sizeof *todo);
  int nt = 0, nres = 0;
  if (!todo) return ana_db_close(db), 1;
  /* results files given (gpureplay's, made beforehand): loaded with the traces, nothing replayed */
  for (int i = 0; i < npos; i++) nres += gm_file_kind(pos[i]) == GM_FILE_RESULTS;
  for (int i = 0; i < npos && nres; i++) todo[nt++] = pos[i];
  for (int i = 0; i < npos && !nres; i++) {
    int64_t runs = -1, others = 0;
    if (ana_trace_replayed(db, pos[i], &runs, &others, &err) < 0) return ana_db_close(db), free(todo), ana_cli_fail(&err);
    if (runs <= 0) todo[nt++] = pos[i];
  }
  ana_db_close(db);
  char replay[PATH_MAX], json[PATH_MAX] = "", jobs[32];
  int rc = 0;
  if (nt && !nres && gm_tool_find(c->gpureplay, "GPUREPLAY", "gpureplay", "replay", replay, sizeof replay, NULL)) {
    snprintf(json, sizeof json, "%s/gpuanalyze-XXXXXX.json", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    int fd = mkstemps(json, 5);
    if (fd < 0) return free(todo), gm_err_set(&err, GM_ERR_IO, "cannot create a temporary file: %s", strerror(errno)), ana_cli_fail(&err);
    close(fd);
    snprintf(jobs, sizeof jobs, "--jobs=%" PRIu64, c->jobs ? c->jobs : ana_cli_default_jobs());
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
    ana_cli_say("replaying %d trace%s under gpureplay's sweep ...", nt, nt == 1 ? "" : "s");
    if (ana_cli_run_tool(argv, &err) < 0) rc = ana_cli_fail(&err);
    free(argv);
  } else if (nt && !nres) {
    gm_log(GM_LOG_WARN, "gpureplay not found (beside gpuanalyze, $GPUREPLAY, PATH): the ranks without replays");
  }
  if (!rc && nt) {
    if (*json) todo[nt++] = json;
    ana_load_opts_t o = ana_cli_load_opts(c);
    o.summary_only = 1; /* the view reads summaries: hundreds of ranks' events stay out */
    ana_load_stats_t st = {0};
    if (ana_db_open_wait(&db, c->db, ana_cli_wait_ms(c), &err) < 0) rc = ana_cli_fail(&err);
    else if (ana_db_load(db, (const char *const *)todo, nt, &o, &st, &err) < 0) rc = ana_cli_fail(&err), ana_db_close(db);
    else ana_db_close(db), ana_cli_say("wrote %s (the ranks' traces and replays)", c->db);
    ana_cli_end_progress();
  }
  if (*json) unlink(json);
  free(todo);
  if (rc) return rc;
  if (ana_db_open_wait(&db, c->db, ana_cli_wait_ms(c), &err) < 0) return ana_cli_fail(&err);
  int njobs = 0;
  gm_status_t s = ana_ranks(db, stdout, c->json ? ANA_RANKS_JSON : c->csv ? ANA_RANKS_CSV : ANA_RANKS_TEXT, &njobs, &err);
  ana_db_close(db);
  return s < 0 ? ana_cli_fail(&err) : 0;
}
