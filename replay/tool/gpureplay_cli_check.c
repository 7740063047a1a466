/* gpureplay_cli_check.c: gpureplay's command line checked before any work: each flag's value
 * into the config, the combinations refused, the policy specs, and the inputs. A refusal is
 * one line and exit 2 (gr_cli_usage_error); the checks run in a fixed order, so that a command
 * line with several mistakes always gets the same first one (the CLI tests compare it).
 *
 * Policies: the user's --policy specs (also as the line users paste: PYTORCH_CUDA_ALLOC_CONF=...)
 * are each created once against a throw-away simulator, so that a bad key is a usage error
 * before any replay; with --sweep, each framework's grid (gr_sweep_grid_for) is checked the
 * same way once, and the entries this build rejects are dropped with a debug line: the grid is
 * ours, not the user's mistake. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "replay/tool/gpureplay.h"
#include "replay/tool/gpureplay_cli.h"
#include "replay/tool/export/export_memviz.h"
#include "replay/tool/tune/gpureplay_tune.h"
#include "replay/engine/va_model.h"

/* The one line of a usage error, then the hint; exit status 2. */
int gr_cli_usage_error(const char *msg) {
  fputs("gpureplay: ", stderr);
  gm_fputs_escaped(msg, stderr); /* it quotes the command line */
  fputs("\ntry 'gpureplay --help'\n", stderr);
  return 2;
}

/* "sim" -> -1, "cuda" / "cuda:N" -> N; -2 if neither. */
static int parse_device(const char *s) {
  if (!s || strcmp(s, "sim") == 0) return -1;
  if (strcmp(s, "cuda") == 0) return 0;
  if (strncmp(s, "cuda:", 5) == 0) {
    uint64_t n = 0;
    if (gm_parse_u64(s + 5, &n, NULL) == GM_OK && n < 1024) return (int)n;
  }
  return -2;
}

int gr_cli_tune_mode(const char *s) {
  if (!s || strcmp(s, "search") == 0) return GR_TUNE_SEARCH;
  if (strcmp(s, "bounded") == 0) return GR_TUNE_BOUNDED;
  if (strcmp(s, "exhaustive") == 0) return GR_TUNE_EXHAUSTIVE;
  return -1;
}

int gr_cli_tune_reduce(const char *s) {
  if (!s || strcmp(s, "auto") == 0) return GR_REDUCE_AUTO;
  if (strcmp(s, "always") == 0) return GR_REDUCE_ALWAYS;
  if (strcmp(s, "never") == 0) return GR_REDUCE_NEVER;
  return -1;
}

int gr_cli_config(const gr_cli_opts_t *o, gr_config_t *cfg) {
  char m[GM_ERR_MSG_MAX];
  cfg->cuda_ordinal = parse_device(o->device);
  if (cfg->cuda_ordinal == -2) {
    snprintf(m, sizeof m, "bad --device '%s' (sim or cuda:N)", o->device);
    return gr_cli_usage_error(m);
  }
  cfg->addresses = RP_VA_DRIVER; /* issue 25: the driver's placement unless --addresses=bump */
  if (o->addresses) {
    int a = rp_va_policy_parse(o->addresses);
    if (a < 0) return gr_cli_usage_error("bad --addresses (driver or bump)");
    cfg->addresses = a;
  }
  /* cuda: the policy sees where the driver really put the memory unless --cuda-addresses=sim */
  cfg->cuda_real_addresses = 1;
  if (o->cuda_addresses && strcmp(o->cuda_addresses, "sim") == 0) cfg->cuda_real_addresses = 0;
  else if (o->cuda_addresses && strcmp(o->cuda_addresses, "real") != 0)
    return gr_cli_usage_error("bad --cuda-addresses (sim or real)");
  cfg->capacity = o->capacity;
  cfg->device_memory = o->device_memory;
  cfg->granularity = o->granularity;
  if (o->granularity && (o->granularity & (o->granularity - 1))) {
    snprintf(m, sizeof m, "--granularity: %llu bytes is not a power of two (accepted: a power "
             "of two from 512 B to 2 MiB)", (unsigned long long)o->granularity);
    return gr_cli_usage_error(m);
  }
  /* A sweep or a search uses every core; a few policies replay one at a time (each holds the
   * trace's live blocks: a trace of a million live blocks needs ~300 MiB per replay). */
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  cfg->jobs = o->jobs ? (int)o->jobs : !(o->sweep || o->tune) || cores < 1 ? 1 : cores > 256 ? 256 : (int)cores;
  cfg->check = o->check;
  cfg->read_flags = o->strict ? GMT_READ_STRICT : GMT_READ_SALVAGE;
  cfg->progress = isatty(2) && !o->json;
  cfg->preload = -1;
  if (!o->sync_allocs || strcmp(o->sync_allocs, "auto") == 0) cfg->sync_allocs = GR_SYNC_AUTO;
  else if (strcmp(o->sync_allocs, "external") == 0) cfg->sync_allocs = GR_SYNC_EXTERNAL;
  else if (strcmp(o->sync_allocs, "replay") == 0) cfg->sync_allocs = GR_SYNC_REPLAY;
  else return gr_cli_usage_error("bad --sync-allocs (auto, external or replay)");
  if (!o->count_other || strcmp(o->count_other, "auto") == 0) cfg->count_other = GR_OTHER_AUTO;
  else if (strcmp(o->count_other, "yes") == 0) cfg->count_other = GR_OTHER_YES;
  else if (strcmp(o->count_other, "no") == 0) cfg->count_other = GR_OTHER_NO;
  else return gr_cli_usage_error("bad --count-other (auto, yes or no)");
  if (!o->vmm_buffers || strcmp(o->vmm_buffers, "auto") == 0) cfg->vmm_buffers = GR_VMM_AUTO;
  else if (strcmp(o->vmm_buffers, "requests") == 0) cfg->vmm_buffers = GR_VMM_REQUESTS;
  else if (strcmp(o->vmm_buffers, "skip") == 0) cfg->vmm_buffers = GR_VMM_SKIP;
  else return gr_cli_usage_error("bad --vmm-buffers (auto, requests or skip)");
  cfg->timing_range = !o->event_timing || strcmp(o->event_timing, "range") == 0;
  if (cfg->timing_range || strcmp(o->event_timing, "recorded") == 0) cfg->event_timing = RP_EVENTS_RECORDED;
  else if (strcmp(o->event_timing, "early") == 0) cfg->event_timing = RP_EVENTS_EARLY;
  else if (strcmp(o->event_timing, "late") == 0) cfg->event_timing = RP_EVENTS_LATE;
  else return gr_cli_usage_error("bad --event-timing (range, recorded, early or late)");
  if (o->late_mallocs > 1000000) return gr_cli_usage_error("--late-mallocs must be at most 1000000");
  cfg->late_mallocs = o->late_mallocs ? o->late_mallocs : 1;
  if (o->preload && strcmp(o->preload, "yes") == 0) cfg->preload = 1;
  else if (o->preload && strcmp(o->preload, "no") == 0) cfg->preload = 0;
  else if (o->preload && strcmp(o->preload, "auto") != 0)
    return gr_cli_usage_error("bad --preload (auto, yes or no)");
  return 0;
}

int gr_cli_refuse(const gr_cli_opts_t *o, int npos, const gr_config_t *cfg) {
  if (o->explain_oom) {
    if (o->sweep || o->tune || o->output || cfg->cuda_ordinal >= 0)
      return gr_cli_usage_error("--explain-oom replays one setting on the simulator: without --sweep, --tune, -o or "
                                "--device");
    if (npos != 1) return gr_cli_usage_error("--explain-oom takes one trace");
    if (o->policy.n > 1) return gr_cli_usage_error("--explain-oom takes one --policy");
    if (!o->json)
      return gr_cli_usage_error("--explain-oom prints one JSON object: add --json (`gpuanalyze oom TRACE` says it in "
                                "text)");
  }
  if (o->export_snapshot) {
    char spec[1024] = "";
    if (o->policy.n == 1 && gr_policy_from_env(o->policy.v[0], spec, sizeof spec) < 0) spec[0] = '\0';
    const char *why = gr_memviz_refuse(spec);
    if (o->policy.n != 1 || npos != 1 || o->sweep || o->tune || o->explain_oom || o->list_policies || o->output ||
        o->json || cfg->cuda_ordinal >= 0)
      return gr_cli_usage_error("--export-snapshot writes one --policy's simulated run over one trace: give one "
                                "trace and one --policy, without --sweep, --tune, --explain-oom, --list-policies, "
                                "-o, --json or --device");
    if (why) return gr_cli_usage_error(why);
  }
  if (o->export_perfetto && (npos != 1 || o->tune || o->explain_oom || o->list_policies || o->export_snapshot))
    return gr_cli_usage_error("--export-perfetto writes the replay of one trace (without --tune, --explain-oom, "
                              "--list-policies, --export-snapshot)");
  if (o->tune && o->list_policies)
    return gr_cli_usage_error("--list-policies lists a replay's or a sweep's settings, not --tune's");
  if (o->list_policies && o->output)
    return gr_cli_usage_error("--list-policies replays nothing: no results file (-o)");
  if (o->tune) {
    if (o->sweep || o->policy.n || o->json || cfg->cuda_ordinal >= 0)
      return gr_cli_usage_error("--tune searches on the simulator by itself: without --sweep, --policy, --json "
                                "or --device (check its setting on a GPU with --policy=... --device=cuda:N)");
    if (gr_cli_tune_mode(o->tune_mode) < 0)
      return gr_cli_usage_error("bad --tune-mode (search, bounded or exhaustive)");
    if (gr_cli_tune_reduce(o->tune_reduce) < 0) return gr_cli_usage_error("bad --tune-reduce (auto, always or never)");
    if (o->budget > 1.0) return gr_cli_usage_error("--budget is a share of the recorded duration, at most 1");
    return 0;
  }
  if (o->tune_mode || o->tune_reduce || o->budget > 0 || o->no_capacity || o->no_limits)
    return gr_cli_usage_error("--tune-mode, --tune-reduce, --budget, --no-capacity and --no-limits go with --tune");
  return 0;
}

/* ---- the policies ---- */

/* The frameworks with a grid of their own; 0: the default grid (PyTorch's and the others'). */
static const unsigned kGrids[GR_CLI_GRIDS] = {0, GMT_FW_PYTORCH, GMT_FW_JAX, GMT_FW_TENSORFLOW, GMT_FW_CUPY,
                                              GMT_FW_RMM};

/* Stand-ins for the stream-ordered pool calls, so that `async` validates when the replay
 * will run on a real GPU. validate() destroys the policy before any call is made. */
static gm_status_t no_alloc_async(void *ctx, uint64_t size, uint64_t stream, uint64_t *addr) {
  return GM_ERR_UNSUPPORTED;
}
static gm_status_t no_free_async(void *ctx, uint64_t addr, uint64_t stream) {
  return GM_ERR_UNSUPPORTED;
}
static gm_status_t no_pool_trim(void *ctx, uint64_t keep) { return GM_ERR_UNSUPPORTED; }

/* Create the policy once against a simulator: a bad key is reported before any replay. */
static gm_status_t validate(const char *spec, uint64_t total, int cuda, gm_err_t *err) {
  rp_backend_t *b = NULL;
  rp_sim_opts_t so = {0, 0, total, RP_POOL_HEAP, 0};
  gm_status_t st = rp_sim_backend_create(&so, &b, err);
  if (st != GM_OK) return st;
  if (cuda) {
    b->drv.alloc_async = no_alloc_async;
    b->drv.free_async = no_free_async;
    b->drv.pool_trim = no_pool_trim;
  }
  const rp_policy_ops_t *ops = NULL;
  rp_policy_t *p = NULL;
  st = rp_policy_create(spec, &b->drv, &ops, &p, err);
  if (st == GM_OK) ops->destroy(p);
  b->destroy(b);
  return st;
}

int gr_cli_policies(const gr_cli_opts_t *o, const gr_config_t *cfg, gr_cli_policies_t *ps) {
  gm_err_t err;
  gm_err_clear(&err);
  int n = 0;
  uint64_t vtotal = o->device_memory ? o->device_memory : o->capacity ? o->capacity : (80ull << 30);
  for (int i = 0; i < o->policy.n; i++) {
    if (gr_policy_from_env(o->policy.v[i], ps->given[i], sizeof ps->given[i]) < 0) {
      char m[256];
      snprintf(m, sizeof m, "bad --policy '%.60s...' (%zu bytes): longer than %zu bytes (the limit of a policy spec)",
               o->policy.v[i], strlen(o->policy.v[i]), sizeof ps->given[i] - 1);
      return gr_cli_usage_error(m);
    }
    gm_status_t st = validate(ps->given[i], vtotal, cfg->cuda_ordinal >= 0, &err);
    if (st == GM_ERR_INVAL) {
      /* the reason goes last and must survive: a spec of 512 tokens is longer than a message */
      char m[GM_ERR_MSG_MAX + 128];
      size_t sl = strlen(o->policy.v[i]);
      if (sl > 60)
        snprintf(m, sizeof m, "bad --policy '%.60s...' (%zu bytes): %s", o->policy.v[i], sl, err.msg);
      else
        snprintf(m, sizeof m, "bad --policy '%s': %s", o->policy.v[i], err.msg);
      return gr_cli_usage_error(m);
    }
    if (st != GM_OK) {
      gm_err_wrap(&err, "policy '%s'", o->policy.v[i]);
      gm_log_err(&err);
      return 1;
    }
    ps->specs[n++] = ps->given[i];
  }
  /* The sweep grid depends on each trace's framework (gr_sweep_grid_for): it is added per
   * trace (gr_cli_sweep_specs). Checked here once, all grids, so a build without a policy says so up front. */
  ps->max_grid = 0;
  for (size_t k = 0; o->sweep && k < GR_CLI_GRIDS; k++) {
    const char *const *g = gr_sweep_grid_for(kGrids[k]);
    int len = 0;
    for (int i = 0; g[i]; i++, len++) {
      ps->grid_ok[k][i] = validate(g[i], vtotal, cfg->cuda_ordinal >= 0, &err) == GM_OK;
      if (!ps->grid_ok[k][i]) gm_log(GM_LOG_DEBUG, "sweep: skipping '%s': %s", g[i], err.msg);
    }
    if (len > ps->max_grid) ps->max_grid = len;
  }
  if (n == 0 && !o->sweep && !o->explain_oom) ps->specs[n++] = "pytorch"; /* explain: the framework's default */
  ps->n_user = n;
  return 0;
}

int gr_cli_sweep_specs(gr_cli_policies_t *ps, unsigned frameworks) {
  int n = ps->n_user;
  size_t k = 0;
  unsigned fw = gmt_framework_single(frameworks);
  while (k + 1 < GR_CLI_GRIDS && kGrids[k] != fw) k++;
  if (kGrids[k] != fw) k = 0;
  const char *const *g = gr_sweep_grid_for(kGrids[k]);
  for (int i = 0; g[i]; i++)
    if (ps->grid_ok[k][i]) ps->specs[n++] = g[i];
  return n;
}

int gr_cli_check_inputs(const gr_config_t *cfg) {
  for (int t = 0; t < cfg->n_traces; t++) {
    char advice[GM_ERR_MSG_MAX];
    if (gm_file_advice(cfg->traces[t], gm_file_kind(cfg->traces[t]), GM_WANT(GM_FILE_TRACE), advice,
                       sizeof advice)) {
      gm_log(GM_LOG_ERROR, "%s", advice);
      return 1;
    }
  }
  return 0;
}
