/* gpureplay_main.c: the gpureplay tool: replay recorded traces under allocator policies.
 *
 *   gpureplay TRACE... [--policy=SPEC]... [--sweep] [--device=sim|cuda:N] [--capacity=SIZE]
 *             [--jobs=N] [-o RESULTS] [--json] [--check]
 *   gpureplay TRACE --explain-oom [--policy=SPEC] [--capacity=SIZE] --json
 *
 * main(): parse (one option table feeds the parser and --help) -> validate (every policy
 * spec is created once against a throw-away simulator, so a bad key is a usage error, exit 2,
 * before any work) -> run each trace -> print -> exit code. Exit codes (DESIGN.md): 0 ok,
 * 1 runtime failure with the cause chain, 2 bad usage. stdout carries only the table (or the
 * --json lines); progress goes to stderr, and only when stderr is a terminal. */
#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include "replay/export_perfetto.h"
#include "replay/gpureplay.h"
#include "replay/gpureplay_memviz.h"
#include "replay/gpureplay_tune.h"
#include "replay/rp_cuda.h"
#include "replay/va_model.h"

typedef struct opts {
  int help, version, sweep, json, check, quiet, tune, no_capacity, strict, explain_oom, list_policies;
  gm_strlist_t policy;
  const char *device, *output, *preload, *cuda_addresses, *addresses, *sync_allocs, *vmm_buffers, *count_other,
      *tune_mode,
      *event_timing, *export_snapshot, *export_perfetto;
  double budget;
  uint64_t capacity, device_memory, granularity, jobs, late_mallocs;
} opts_t;

static const gm_opt_t kOpts[] = {
    {"policy", 'p', GM_OPT_LIST, "SPEC",
     "allocator policy: pytorch[:CONF] bfc[:CONF] prealloc[:SIZE|FRACTION] tf[:CONF] direct "
     "async[:CONF] (default: pytorch)", offsetof(opts_t, policy)},
    {"sweep", 0, GM_OPT_FLAG, NULL, "replay the built-in grid of PyTorch settings plus bfc, "
     "prealloc, direct; rank by peak reserved", offsetof(opts_t, sweep)},
    {"tune", 0, GM_OPT_FLAG, NULL, "search the framework's whole setting space (PyTorch: "
     "coordinate descent; JAX: bisection of the memory fraction) and answer with the front of "
     "memory against driver time, the smallest GPU each fits and the setting to paste",
     offsetof(opts_t, tune)},
    {"tune-mode", 0, GM_OPT_STR, "search|bounded|exhaustive", "--tune: the full search "
     "(default), the same descent over a small space, or every point of that small space",
     offsetof(opts_t, tune_mode)},
    {"budget", 0, GM_OPT_FRACTION, "FRACTION", "--tune: driver time allowed, as a share of the "
     "recorded duration (default 0.01)", offsetof(opts_t, budget)},
    {"no-capacity", 0, GM_OPT_FLAG, NULL, "--tune: skip the bisection over --capacity",
     offsetof(opts_t, no_capacity)},
    {"explain-oom", 0, GM_OPT_FLAG, NULL, "why one setting (--policy, default: the framework's "
     "default) runs out of memory over one trace within --capacity (default: what the recorded run "
     "had when it failed, else unlimited): the failing request, what was live by callsite, the "
     "policy's account of its free bytes, and the smallest change that fits (a setting of the same "
     "framework, a capacity), as one JSON object (with --json; `gpuanalyze oom` says it in text)",
     offsetof(opts_t, explain_oom)},
    {"device", 'd', GM_OPT_STR, "sim|cuda:N", "backend: the simulator (default) or a real GPU",
     offsetof(opts_t, device)},
    {"addresses", 0, GM_OPT_STR, "bump|driver", "segment addresses the policies see: a bump "
     "pointer (default) or the CUDA driver's placement as modelled (PyTorch breaks ties by address)",
     offsetof(opts_t, addresses)},
    {"cuda-addresses", 0, GM_OPT_STR, "sim|real", "cuda: give policies the simulator's addresses "
     "(default: the same decisions as sim) or the driver's own", offsetof(opts_t, cuda_addresses)},
    {"capacity", 'c', GM_OPT_SIZE, "SIZE", "what-if: a device of this size (OOMs, first OOM)",
     offsetof(opts_t, capacity), 1, RP_REQUEST_MAX},
    {"device-memory", 0, GM_OPT_SIZE, "SIZE", "total memory the policies see (default: "
     "capacity, else the trace's GPU, else the device's / 80GiB)", offsetof(opts_t, device_memory),
     1ull << 20, RP_REQUEST_MAX},
    /* above 2 MiB, PyTorch's 2 MiB expandable pages are no whole number of granules (the
     * real driver's granularity is 2 MiB); below 512 B, addresses lose the alignment policies
     * rely on */
    {"granularity", 0, GM_OPT_SIZE, "SIZE", "simulated driver granularity, a power of two from "
     "512B to 2MiB (default 2MiB)", offsetof(opts_t, granularity), 512, 2ull << 20},
    {"sync-allocs", 0, GM_OPT_STR, "auto|external|replay", "synchronous device allocations "
     "(cudaMalloc): auto = external memory in a requests trace with async allocations (a "
     "library's own, beside the framework's allocator: counted apart, not in reserved nor the "
     "lower bound), else replayed", offsetof(opts_t, sync_allocs)},
    {"count-other", 0, GM_OPT_STR, "auto|yes|no", "memory of other owners than the framework's "
     "allocator (NCCL's VMM maps, formats gmt_owners) held on the device beside the policy, so "
     "--capacity counts it: auto = every map in a requests trace (its maps are not requests), in "
     "other traces the maps flagged external (torch-history: another library's); no = none; yes = "
     "every map that is not a request", offsetof(opts_t, count_other)},
    {"vmm-buffers", 0, GM_OPT_STR, "auto|requests|skip", "buffers mapped one by one through the "
     "VMM API (reserve + map of one buffer): auto = requests in a trace of XLA's platform "
     "allocator, else the recorded allocator's own (skipped)", offsetof(opts_t, vmm_buffers)},
    {"event-timing", 0, GM_OPT_STR, "range|recorded|early|late", "frees that wait on stream "
     "events (record_stream): range = as recorded, plus the peak with every event done at "
     "once (early) and every event late, reported as a range (default); or one of them only",
     offsetof(opts_t, event_timing)},
    {"late-mallocs", 0, GM_OPT_U64, "N", "late stream events are still pending at the next N "
     "allocations after the program freed the block (default 1)", offsetof(opts_t, late_mallocs)},
    {"jobs", 'j', GM_OPT_U64, "N", "replay N policies in parallel (default: the number of cores with --sweep and --tune, else 1)", offsetof(opts_t, jobs), 1, 256},
    {"preload", 0, GM_OPT_STR, "auto|yes|no", "decode the trace once into memory for all "
     "policies (auto: when several policies and it fits in 2 GiB and 32x the file)", offsetof(opts_t, preload)},
    {"output", 'o', GM_OPT_STR, "RESULTS", "write the results file (replay/RESULTS.md) here",
     offsetof(opts_t, output)},
    {"export-snapshot", 0, GM_OPT_STR, "OUT.pickle", "write one --policy's simulated run over one trace as a "
     "PyTorch memory snapshot (torch.cuda.memory._dump_snapshot's pickle) for pytorch.org/memory_viz",
     offsetof(opts_t, export_snapshot)},
    {"export-perfetto", 0, GM_OPT_STR, "OUT.json", "also write the replay of one trace as Chrome/Perfetto "
     "trace JSON (ui.perfetto.dev): live and reserved-per-policy counters, allocations as slices "
     "(bounded: replay/README.md)", offsetof(opts_t, export_perfetto)},
    {"json", 0, GM_OPT_FLAG, NULL, "print one JSON object per run instead of the table",
     offsetof(opts_t, json)},
    /* what gpurec predict --fit asks before it replays: the recorder knows no policies */
    {"list-policies", 0, GM_OPT_FLAG, NULL, "replay nothing: print the settings a replay would run, one "
     "a line in gpureplay's words (the --policy specs, then with --sweep the grid of each trace's "
     "framework), a trace after another", offsetof(opts_t, list_policies)},
    {"check", 0, GM_OPT_FLAG, NULL, "check the policy's invariants after every event (slow)",
     offsetof(opts_t, check)},
    {"quiet", 'q', GM_OPT_FLAG, NULL, "only errors on stderr", offsetof(opts_t, quiet)},
    {"strict", 0, GM_OPT_FLAG, NULL, "refuse a damaged trace instead of replaying its good chunks "
     "(results marked partial)", offsetof(opts_t, strict)},
    {"version", 0, GM_OPT_FLAG, NULL, "print versions and exit", offsetof(opts_t, version)},
    {"help", 'h', GM_OPT_FLAG, NULL, "show this help and exit", offsetof(opts_t, help)},
    {NULL, 0, 0, NULL, NULL, 0},
};

static const char kUsage[] = "gpureplay TRACE.zst... [--policy=SPEC]... [--sweep] [--device=sim|cuda:N] "
                             "[--capacity=SIZE] [--jobs=N] [-o RESULTS.json] [--json]\n"
                             "       gpureplay TRACE.zst --explain-oom [--policy=SPEC] [--capacity=SIZE] --json";
static const char kDescription[] =
    "Replay recorded GPU memory traces under allocator policies and report what each would\n"
    "reserve, waste and cost. Device memory requests of one device are replayed (the first\n"
    "device that allocates); segment/VMM/pool records (pool_trim too: the driver's pool\n"
    "trimming itself; an explicit cudaMemPoolTrimTo is an empty_cache event and is replayed),\n"
    "host memory and other devices are skipped and counted. In a requests trace (frameworks\n"
    "switched to cudaMallocAsync) synchronous allocations come from libraries that bypass the\n"
    "framework's allocator (cuBLAS workspaces, ...): they are external memory, reported apart\n"
    "and kept out of peak reserved, so that it compares with torch.cuda.max_memory_reserved().\n"
    "Requests that failed in the recorded run (OOM) are replayed too, within the memory the run\n"
    "had (--capacity overrides): a policy without OOMs would have served them.\n"
    "Input: gpumem traces (.zst; `gpurec import` makes one from a PyTorch snapshot pickle or a CSV\n"
    "trace). A policy may be given as the line users paste: -p PYTORCH_CUDA_ALLOC_CONF=...\n"
    "Figures (peak reserved, lower bound, ...): README.md, Glossary.\n"
    "Policies (replay/policies):";

static int usage_error(const char *msg) {
  fputs("gpureplay: ", stderr);
  gm_fputs_escaped(msg, stderr); /* it quotes the command line */
  fputs("\ntry 'gpureplay --help'\n", stderr);
  return 2;
}

static void print_help(void) {
  char desc[4096];
  size_t k = (size_t)snprintf(desc, sizeof desc, "%s", kDescription);
  for (const rp_policy_ops_t *const *p = rp_policy_all(); *p && k < sizeof desc; p++)
    k += (size_t)snprintf(desc + k, sizeof desc - k, "\n  %-9s %s", (*p)->name, (*p)->description);
  gm_opts_help(stdout, kUsage, desc, kOpts);
}

static void print_version(void) {
  printf("gpureplay %s (%s)\n", GPUREPLAY_VERSION, GM_DIST_NAME);
  printf("trace format %d (reads traces that need a reader of version <= %d)\n", GMT_FORMAT_VERSION,
         GMT_FORMAT_VERSION);
  printf("zstd %s\n", ZSTD_versionString());
  int v = rp_cuda_driver_version();
  if (v) printf("CUDA driver %d.%d\n", v / 1000, (v % 1000) / 10);
  else printf("CUDA driver: not available (libcuda.so.1 not loaded)\n");
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

/* --tune: each trace decoded once, searched, printed; -o writes the shown points' runs, so
 * that `gpuanalyze report` compares the tuned setting with the grid. */
static int tune(gr_config_t *cfg, const opts_t *o) {
  if (o->sweep || o->policy.n || o->json || cfg->cuda_ordinal >= 0)
    return usage_error("--tune searches on the simulator by itself: without --sweep, --policy, --json "
                       "or --device (check its setting on a GPU with --policy=... --device=cuda:N)");
  gr_tune_opts_t to = {GR_TUNE_SEARCH, o->budget > 0 ? o->budget : 0.01, !o->no_capacity};
  if (o->tune_mode && strcmp(o->tune_mode, "bounded") == 0) to.mode = GR_TUNE_BOUNDED;
  else if (o->tune_mode && strcmp(o->tune_mode, "exhaustive") == 0) to.mode = GR_TUNE_EXHAUSTIVE;
  else if (o->tune_mode && strcmp(o->tune_mode, "search") != 0)
    return usage_error("bad --tune-mode (search, bounded or exhaustive)");
  if (o->budget > 1.0) return usage_error("--budget is a share of the recorded duration, at most 1");
  cfg->serve_failed = 1;
  gm_err_t err;
  gm_err_clear(&err);
  for (int t = 0; t < cfg->n_traces; t++) {
    char advice[GM_ERR_MSG_MAX];
    if (gm_file_advice(cfg->traces[t], gm_file_kind(cfg->traces[t]), GM_WANT(GM_FILE_TRACE), advice,
                       sizeof advice)) {
      gm_log(GM_LOG_ERROR, "%s", advice);
      return 1;
    }
  }
  if (o->output && gm_output_check(o->output, &err) != GM_OK) {
    gm_log_err(&err);
    return 1;
  }
  gr_results_t *rs = o->output ? gr_results_new() : NULL;
  int rc = 0;
  for (int i = 0; i < cfg->n_traces && rc == 0; i++) {
    gr_loaded_t lt;
    gr_tune_t tn;
    memset(&tn, 0, sizeof tn);
    if (cfg->progress) fprintf(stderr, "gpureplay: tuning %s ...\r", cfg->traces[i]);
    gm_status_t st = gr_trace_load(cfg, cfg->traces[i], &lt, &err);
    if (st == GM_OK && gmt_stats_damaged(&lt.info.stats)) {
      char what[256];
      gm_log(GM_LOG_WARN, "'%s' is damaged (%s): %s%s", cfg->traces[i], lt.info.damage,
             gmt_stats_damage_text(&lt.info.stats, what, sizeof what),
             gmt_stats_partial(&lt.info.stats) ? "; results marked partial (--strict refuses damaged traces)" : "");
    }
    gr_config_t run = *cfg;
    rp_result_t *r0 = st == GM_OK ? malloc(sizeof *r0) : NULL;
    if (st == GM_OK && !r0) st = gm_err_set(&err, GM_ERR_NOMEM, "out of memory");
    if (st == GM_OK) {
      /* A recorded OOM: the search runs within what the recorded process had, as --sweep
       * does, so a setting without OOMs is one that would have served the request. */
      unsigned fw = gmt_framework_single(lt.info.frameworks);
      const char *dflt[1] = {fw == GMT_FW_JAX ? "jax" : fw == GMT_FW_TENSORFLOW ? "tf" : "pytorch"};
      st = gr_run_loaded(cfg, &lt, dflt, 1, &r0, &err);
      char note[512];
      uint64_t cap = st == GM_OK && !o->capacity ? gr_failure_capacity(&lt.info, r0, note, sizeof note) : 0;
      if (st == GM_OK) gr_loaded_note_failure(&lt, r0);
      if (cap) {
        run.capacity = cap;
        if (!run.device_memory) run.device_memory = lt.info.gpu_total_mem ? lt.info.gpu_total_mem : cap;
        lt.total_memory = lt.info.device_memory = run.device_memory;
        snprintf(lt.info.capacity_note, sizeof lt.info.capacity_note, "%s", note);
      }
      r0->capacity_bytes = run.capacity;
      if (st == GM_OK) gr_print_failure(stdout, "", &lt.info, r0);
    }
    if (st == GM_OK) st = gr_tune_run(&run, &lt, &to, &tn, &err);
    if (cfg->progress) fprintf(stderr, "\r%*s\r", 78, "");
    if (st == GM_OK) {
      if (i) fputc('\n', stdout);
      gr_tune_print(stdout, &lt, &tn);
    }
    if (st == GM_OK && rs) st = gr_tune_results(&run, &lt, &tn, rs, &err);
    free(r0);
    if (st != GM_OK) {
      gm_log_err(&err);
      rc = 1;
    }
    gr_tune_free(&tn);
    gr_loaded_free(&lt);
  }
  if (rc == 0 && rs) {
    if (gr_results_write(rs, o->output, &err) != GM_OK) {
      gm_log_err(&err);
      rc = 1;
    } else if (!o->quiet) {
      fprintf(stderr, "gpureplay: wrote %s\n", o->output);
    }
  }
  gr_results_free(rs);
  if (fflush(stdout) != 0 && rc == 0) rc = 1;
  return rc;
}

/* --explain-oom: gr_oom_explain over the one trace, printed as one JSON object. The recorded
 * timing of stream events only (--event-timing=early|late may pick another; a range would be
 * a second answer to the same question). */
static int explain_oom(gr_config_t *cfg, const char *spec) {
  gm_err_t err;
  gm_err_clear(&err);
  cfg->timing_range = 0;
  cfg->preload = 1;
  gr_oom_t *x = malloc(sizeof *x);
  gm_status_t st = x ? gr_oom_explain(cfg, cfg->traces[0], spec, x, &err)
                     : gm_err_set(&err, GM_ERR_NOMEM, "out of memory");
  if (st == GM_OK) st = gr_oom_print_json(stdout, cfg->traces[0], x, &err);
  free(x);
  if (st != GM_OK) {
    gm_log_err(&err);
    return 1;
  }
  return 0;
}

/* --export-snapshot: gr_memviz_export, one line on stderr naming the file. */
static int export_snapshot(gr_config_t *cfg, const char *spec, const char *out, int quiet) {
  gm_err_t err;
  gm_err_clear(&err);
  gr_memviz_stats_t st;
  char line[512];
  if (gr_memviz_export(cfg, cfg->traces[0], spec, out, &st, &err) != GM_OK) {
    gm_log_err(&err);
    return 1;
  }
  if (!quiet) fprintf(stderr, "gpureplay: %s\n", gr_memviz_describe(&st, out, line, sizeof line));
  return 0;
}

/* --export-perfetto: the first device's replay as trace JSON (replay/export_perfetto.h). */
static int export_perfetto(const gr_config_t *cfg, const opts_t *o, const gr_trace_info_t *info,
                           rp_result_t *const *res, int n) {
  gm_err_t err;
  gm_err_clear(&err);
  gr_perfetto_stats_t ps;
  if (gr_export_perfetto(o->export_perfetto, cfg, cfg->traces[0], info, res, n, &ps, &err) != GM_OK) {
    gm_log_err(&err);
    return 1;
  }
  if (!o->quiet)
    fprintf(stderr, "gpureplay: wrote %s (%llu bytes): %llu of %llu allocations as slices (%llu alive at the peak), "
            "%llu counter points, in %.2f s\n", o->export_perfetto, (unsigned long long)ps.bytes, (unsigned long long)ps.slices,
            (unsigned long long)ps.allocations, (unsigned long long)ps.slices_at_peak, (unsigned long long)ps.counter_points, ps.seconds);
  return 0;
}

/* Everything after the allocation of pos (main frees it whatever this returns). */
static int gpureplay(int argc, char **argv, char **pos) {
  opts_t o;
  memset(&o, 0, sizeof o);
  int npos = 0;
  gm_err_t err;
  gm_err_clear(&err);
  if (gm_opts_parse(kOpts, argc, argv, &o, pos, &npos, 0, &err) != GM_OK) return usage_error(err.msg);
  if (o.help) {
    print_help();
    return 0;
  }
  if (o.version) {
    print_version();
    return 0;
  }
  if (npos == 0) return usage_error("no trace given");
  if (o.quiet) gm_log_set_level(GM_LOG_ERROR);
  gr_config_t cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.traces = (const char **)pos;
  cfg.n_traces = npos;
  cfg.cuda_ordinal = parse_device(o.device);
  if (cfg.cuda_ordinal == -2) {
    snprintf(err.msg, sizeof err.msg, "bad --device '%s' (sim or cuda:N)", o.device);
    return usage_error(err.msg);
  }
  if (o.addresses) {
    int a = rp_va_policy_parse(o.addresses);
    if (a < 0) return usage_error("bad --addresses (driver or bump)");
    cfg.addresses = a;
  }
  if (o.cuda_addresses && strcmp(o.cuda_addresses, "real") == 0) cfg.cuda_real_addresses = 1;
  else if (o.cuda_addresses && strcmp(o.cuda_addresses, "sim") != 0)
    return usage_error("bad --cuda-addresses (sim or real)");
  cfg.capacity = o.capacity;
  cfg.device_memory = o.device_memory;
  cfg.granularity = o.granularity;
  if (o.granularity && (o.granularity & (o.granularity - 1))) {
    snprintf(err.msg, sizeof err.msg, "--granularity: %llu bytes is not a power of two (accepted: a power "
             "of two from 512 B to 2 MiB)", (unsigned long long)o.granularity);
    return usage_error(err.msg);
  }
  /* A sweep or a search uses every core; a few policies replay one at a time (each holds the
   * trace's live blocks: a trace of a million live blocks needs ~300 MiB per replay). */
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  cfg.jobs = o.jobs ? (int)o.jobs : !(o.sweep || o.tune) || cores < 1 ? 1 : cores > 256 ? 256 : (int)cores;
  cfg.check = o.check;
  cfg.read_flags = o.strict ? GMT_READ_STRICT : GMT_READ_SALVAGE;
  cfg.progress = isatty(2) && !o.json;
  cfg.preload = -1;
  if (!o.sync_allocs || strcmp(o.sync_allocs, "auto") == 0) cfg.sync_allocs = GR_SYNC_AUTO;
  else if (strcmp(o.sync_allocs, "external") == 0) cfg.sync_allocs = GR_SYNC_EXTERNAL;
  else if (strcmp(o.sync_allocs, "replay") == 0) cfg.sync_allocs = GR_SYNC_REPLAY;
  else return usage_error("bad --sync-allocs (auto, external or replay)");
  if (!o.count_other || strcmp(o.count_other, "auto") == 0) cfg.count_other = GR_OTHER_AUTO;
  else if (strcmp(o.count_other, "yes") == 0) cfg.count_other = GR_OTHER_YES;
  else if (strcmp(o.count_other, "no") == 0) cfg.count_other = GR_OTHER_NO;
  else return usage_error("bad --count-other (auto, yes or no)");
  if (!o.vmm_buffers || strcmp(o.vmm_buffers, "auto") == 0) cfg.vmm_buffers = GR_VMM_AUTO;
  else if (strcmp(o.vmm_buffers, "requests") == 0) cfg.vmm_buffers = GR_VMM_REQUESTS;
  else if (strcmp(o.vmm_buffers, "skip") == 0) cfg.vmm_buffers = GR_VMM_SKIP;
  else return usage_error("bad --vmm-buffers (auto, requests or skip)");
  cfg.timing_range = !o.event_timing || strcmp(o.event_timing, "range") == 0;
  if (cfg.timing_range || strcmp(o.event_timing, "recorded") == 0) cfg.event_timing = RP_EVENTS_RECORDED;
  else if (strcmp(o.event_timing, "early") == 0) cfg.event_timing = RP_EVENTS_EARLY;
  else if (strcmp(o.event_timing, "late") == 0) cfg.event_timing = RP_EVENTS_LATE;
  else return usage_error("bad --event-timing (range, recorded, early or late)");
  if (o.late_mallocs > 1000000) return usage_error("--late-mallocs must be at most 1000000");
  cfg.late_mallocs = o.late_mallocs ? o.late_mallocs : 1;
  if (o.preload && strcmp(o.preload, "yes") == 0) cfg.preload = 1;
  else if (o.preload && strcmp(o.preload, "no") == 0) cfg.preload = 0;
  else if (o.preload && strcmp(o.preload, "auto") != 0) return usage_error("bad --preload (auto, yes or no)");

  if (o.explain_oom) {
    if (o.sweep || o.tune || o.output || cfg.cuda_ordinal >= 0)
      return usage_error("--explain-oom replays one setting on the simulator: without --sweep, --tune, -o or --device");
    if (npos != 1) return usage_error("--explain-oom takes one trace");
    if (o.policy.n > 1) return usage_error("--explain-oom takes one --policy");
    if (!o.json)
      return usage_error("--explain-oom prints one JSON object: add --json (`gpuanalyze oom TRACE` says it in text)");
  }
  if (o.export_snapshot) {
    char spec[1024] = "";
    if (o.policy.n == 1 && gr_policy_from_env(o.policy.v[0], spec, sizeof spec) < 0) spec[0] = '\0';
    const char *why = gr_memviz_refuse(spec);
    if (o.policy.n != 1 || npos != 1 || o.sweep || o.tune || o.explain_oom || o.list_policies || o.output || o.json ||
        cfg.cuda_ordinal >= 0)
      return usage_error("--export-snapshot writes one --policy's simulated run over one trace: give one trace and "
                         "one --policy, without --sweep, --tune, --explain-oom, --list-policies, -o, --json or --device");
    if (why) return usage_error(why);
  }
  if (o.export_perfetto && (npos != 1 || o.tune || o.explain_oom || o.list_policies || o.export_snapshot))
    return usage_error("--export-perfetto writes the replay of one trace (without --tune, --explain-oom, "
                       "--list-policies, --export-snapshot)");
  if (o.tune && o.list_policies) return usage_error("--list-policies lists a replay's or a sweep's settings, not --tune's");
  if (o.list_policies && o.output) return usage_error("--list-policies replays nothing: no results file (-o)");
  if (o.tune) return tune(&cfg, &o);
  if (o.tune_mode || o.budget > 0 || o.no_capacity)
    return usage_error("--tune-mode, --budget and --no-capacity go with --tune");

  /* Policies: the user's, then the sweep grid (entries this build rejects are dropped with a
   * warning: the grid is ours, not the user's mistake). */
  const char *specs[GM_STRLIST_MAX + 32];
  static char given[GM_STRLIST_MAX][1024]; /* the user's specs in gpureplay's words */
  int n = 0;
  uint64_t vtotal = o.device_memory ? o.device_memory : o.capacity ? o.capacity : (80ull << 30);
  for (int i = 0; i < o.policy.n; i++) {
    if (gr_policy_from_env(o.policy.v[i], given[i], sizeof given[i]) < 0) {
      char m[256];
      snprintf(m, sizeof m, "bad --policy '%.60s...' (%zu bytes): longer than %zu bytes (the limit of a policy spec)",
               o.policy.v[i], strlen(o.policy.v[i]), sizeof given[i] - 1);
      return usage_error(m);
    }
    gm_status_t st = validate(given[i], vtotal, cfg.cuda_ordinal >= 0, &err);
    if (st == GM_ERR_INVAL) {
      /* the reason goes last and must survive: a spec of 512 tokens is longer than a message */
      char m[GM_ERR_MSG_MAX + 128];
      size_t sl = strlen(o.policy.v[i]);
      if (sl > 60)
        snprintf(m, sizeof m, "bad --policy '%.60s...' (%zu bytes): %s", o.policy.v[i], sl, err.msg);
      else
        snprintf(m, sizeof m, "bad --policy '%s': %s", o.policy.v[i], err.msg);
      return usage_error(m);
    }
    if (st != GM_OK) {
      gm_err_wrap(&err, "policy '%s'", o.policy.v[i]);
      gm_log_err(&err);
      return 1;
    }
    specs[n++] = given[i];
  }
  /* The sweep grid depends on each trace's framework (gr_sweep_grid_for): it is added per
   * trace below. Checked here once, all grids, so a build without a policy says so up front. */
  int n_user = n;
  static const unsigned grids[] = {0, GMT_FW_PYTORCH, GMT_FW_JAX, GMT_FW_TENSORFLOW, GMT_FW_CUPY, GMT_FW_RMM};
  static char grid_ok[sizeof grids / sizeof grids[0]][64];
  int max_grid = 0;
  for (size_t k = 0; o.sweep && k < sizeof grids / sizeof grids[0]; k++) {
    const char *const *g = gr_sweep_grid_for(grids[k]);
    int len = 0;
    for (int i = 0; g[i]; i++, len++) {
      grid_ok[k][i] = validate(g[i], vtotal, cfg.cuda_ordinal >= 0, &err) == GM_OK;
      if (!grid_ok[k][i]) gm_log(GM_LOG_DEBUG, "sweep: skipping '%s': %s", g[i], err.msg);
    }
    if (len > max_grid) max_grid = len;
  }
  if (n == 0 && !o.sweep && !o.explain_oom) specs[n++] = "pytorch"; /* explain: the framework's default */
  n_user = n;
  cfg.policies = specs;
  cfg.n_policies = n;
  cfg.serve_failed = 1;
  cfg.device = -1;

  /* Before any replay: every input is a trace, and the results file can be written. */
  for (int t = 0; t < cfg.n_traces; t++) {
    char advice[GM_ERR_MSG_MAX];
    if (gm_file_advice(cfg.traces[t], gm_file_kind(cfg.traces[t]), GM_WANT(GM_FILE_TRACE), advice,
                       sizeof advice)) {
      gm_log(GM_LOG_ERROR, "%s", advice);
      return 1;
    }
  }
  if ((o.output && gm_output_check(o.output, &err) != GM_OK) ||
      (o.export_perfetto && gm_output_check(o.export_perfetto, &err) != GM_OK)) {
    gm_log_err(&err);
    return 1;
  }
  if (o.explain_oom) return explain_oom(&cfg, n ? specs[0] : NULL);
  if (o.export_snapshot) return export_snapshot(&cfg, specs[0], o.export_snapshot, o.quiet);

  gr_results_t *rs = o.output ? gr_results_new() : NULL;
  int n_max = n_user + max_grid;
  rp_result_t **res = calloc((size_t)n_max, sizeof *res);
  int *order = calloc((size_t)n_max, sizeof *order);
  int rc = 0, got = 1;
  for (int i = 0; res && i < n_max; i++)
    if (!(res[i] = malloc(sizeof(rp_result_t)))) got = 0;
  if (!res || !got || !order || (o.output && !rs)) {
    gm_log(GM_LOG_ERROR, "out of memory");
    rc = 1;
  }
  gr_decoded_t decoded; /* each trace decoded once for its device scan and its replays */
  memset(&decoded, 0, sizeof decoded);
  cfg.decoded = &decoded;
  for (int t = 0; t < cfg.n_traces && rc == 0; t++) {
    gr_trace_info_t info;
    /* The user's policies, then this trace's framework's grid. */
    n = n_user;
    if (o.sweep) {
      unsigned fw = 0;
      if (gr_trace_frameworks(cfg.traces[t], &fw, &err) != GM_OK) {
        gm_log_err(&err);
        rc = 1;
        break;
      }
      size_t k = 0;
      fw = gmt_framework_single(fw);
      while (k + 1 < sizeof grids / sizeof grids[0] && grids[k] != fw) k++;
      if (grids[k] != fw) k = 0;
      const char *const *g = gr_sweep_grid_for(grids[k]);
      for (int i = 0; g[i]; i++)
        if (grid_ok[k][i]) specs[n++] = g[i];
      if (n == 0) {
        gm_log(GM_LOG_ERROR, "sweep: no policy of the grid is available in this build");
        rc = 1;
        break;
      }
    }
    cfg.policies = specs;
    cfg.n_policies = n;
    if (o.list_policies) {
      for (int i = 0; i < n; i++) puts(specs[i]);
      continue;
    }
    /* Every device the trace allocates on is replayed with its own allocator state. */
    int devs[GR_MAX_DEVICES], nd = 0;
    if (gr_trace_scan(&cfg, cfg.traces[t], &decoded, devs, GR_MAX_DEVICES, &nd, &err) != GM_OK) {
      gm_log_err(&err);
      rc = 1;
      break;
    }
    if (nd > GR_MAX_DEVICES) {
      gm_log(GM_LOG_WARN, "%s: allocates on %d devices: replaying the first %d", cfg.traces[t], nd,
             GR_MAX_DEVICES);
      nd = GR_MAX_DEVICES;
    }
    for (int di = 0; di < (nd > 1 ? nd : 1) && rc == 0; di++) {
      cfg.device = nd > 1 ? devs[di] : -1;
      gm_status_t st = gr_run_trace(&cfg, cfg.traces[t], &info, res, &err);
      info.n_devices = nd;
      char note[512];
      uint64_t cap = st == GM_OK && !o.capacity ? gr_failure_capacity(&info, res[0], note, sizeof note) : 0;
      if (cap) {
        /* The recorded run ran out of memory: replay again within what it had, so each
         * policy's OOMs say whether it would have served the request that failed. */
        gr_config_t again = cfg;
        again.capacity = cap;
        if (!again.device_memory) again.device_memory = info.gpu_total_mem;
        st = gr_run_trace(&again, cfg.traces[t], &info, res, &err);
        info.n_devices = nd;
        snprintf(info.capacity_note, sizeof info.capacity_note, "%s", note);
      }
      if (st != GM_OK) {
        gm_log_err(&err);
        rc = 1;
        break;
      }
      if (di == 0 && gmt_stats_damaged(&info.stats)) { /* once per trace, not per device */
        char what[256];
        gm_log(GM_LOG_WARN, "'%s' is damaged (%s): %s%s", cfg.traces[t], info.damage,
               gmt_stats_damage_text(&info.stats, what, sizeof what),
               gmt_stats_partial(&info.stats) ? "; results marked partial (--strict refuses damaged traces)" : "");
      }
      if (o.json) {
        if (!o.quiet) gr_print_failure(stderr, "gpureplay: ", &info, res[0]);
        for (int i = 0; i < n; i++) gr_print_json(stdout, &info, res[i]);
      } else {
        gr_rank(res, n, order);
        if (t || di) fputc('\n', stdout);
        gr_print_table(stdout, &info, res, n, order);
      }
      if (o.export_perfetto && di == 0 && (rc = export_perfetto(&cfg, &o, &info, res, n)) != 0) break;
      for (int i = 0; rs && i < n && rc == 0; i++)
        if (gr_results_add(rs, &info, res[i], &err) != GM_OK) {
          gm_log_err(&err);
          rc = 1;
        }
    }
  }
  gr_decoded_free(&decoded);
  if (rc == 0 && rs && gr_results_write(rs, o.output, &err) != GM_OK) {
    gm_log_err(&err);
    rc = 1;
  } else if (rc == 0 && rs && !o.quiet) {
    fprintf(stderr, "gpureplay: wrote %s\n", o.output); /* every file written is named */
  }
  gr_results_free(rs);
  for (int i = 0; res && i < n_max; i++) free(res[i]);
  free(res);
  free(order);
  return rc;
}

int main(int argc, char **argv) {
  gm_log_init("gpureplay", GM_LOG_WARN);
  char **pos = calloc((size_t)argc + 1, sizeof *pos);
  if (!pos) return 1;
  int rc = gpureplay(argc, argv, pos);
  free(pos);
  gm_err_t err;
  gm_err_clear(&err);
  if (gm_stdout_close(&err) != GM_OK) { /* the table or the JSON lines did not all get out */
    gm_log_err(&err);
    if (rc == 0) rc = 1;
  }
  return rc;
}
