/* gpureplay_main.c: the gpureplay tool: replay recorded traces under allocator policies.
 *
 *   gpureplay TRACE... [--policy=SPEC]... [--sweep] [--device=sim|cuda:N] [--capacity=SIZE]
 *             [--jobs=N] [-o RESULTS] [--json] [--check]
 *   gpureplay TRACE --explain-oom [--policy=SPEC] [--capacity=SIZE] --json
 *
 * main(): parse (one option table feeds the parser and --help) -> validate (each flag's value,
 * the refused combinations, then every policy spec is created once against a throw-away
 * simulator, so a bad key is a usage error, exit 2, before any work) -> dispatch to the mode
 * (gpureplay_modes.c: run each trace, print) -> exit code. The steps' files: gpureplay_cli.h.
 * Exit codes (DESIGN.md): 0 ok, 1 runtime failure with the cause chain, 2 bad usage. stdout
 * carries only the table (or the --json lines); progress goes to stderr, and only when stderr
 * is a terminal. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "replay/tool/gpureplay.h"
#include "replay/tool/gpureplay_cli.h"
#include "replay/cuda/rp_cuda.h"

static const gm_opt_t kOpts[] = {
    {"policy", 'p', GM_OPT_LIST, "SPEC",
     "allocator policy: pytorch[:CONF] bfc[:CONF] prealloc[:SIZE|FRACTION] tf[:CONF] direct "
     "async[:CONF] (default: pytorch)", offsetof(gr_cli_opts_t, policy)},
    {"sweep", 0, GM_OPT_FLAG, NULL, "replay the built-in grid of PyTorch settings plus bfc, "
     "prealloc, direct; rank by peak reserved", offsetof(gr_cli_opts_t, sweep)},
    {"tune", 0, GM_OPT_FLAG, NULL, "search the framework's whole setting space (PyTorch: "
     "coordinate descent; JAX: bisection of the memory fraction) and answer with the front of "
     "memory against driver time, the smallest GPU each fits and the setting to paste",
     offsetof(gr_cli_opts_t, tune)},
    {"tune-mode", 0, GM_OPT_STR, "search|bounded|exhaustive", "--tune: the full search "
     "(default), the same descent over a small space, or every point of that small space",
     offsetof(gr_cli_opts_t, tune_mode)},
    {"tune-reduce", 0, GM_OPT_STR, "auto|always|never", "--tune over a long trace: search on the warm-up, "
     "the distinct training steps and a few periods, then replay the finalists on the whole trace for every figure "
     "shown; auto (default): past 1 M events, and past 5 M without a period the grid alone; always: wherever a "
     "period is found; never: every candidate on every event", offsetof(gr_cli_opts_t, tune_reduce)},
    {"budget", 0, GM_OPT_FRACTION, "FRACTION", "--tune: driver time allowed, as a share of the "
     "recorded duration (default 0.01)", offsetof(gr_cli_opts_t, budget)},
    {"no-capacity", 0, GM_OPT_FLAG, NULL, "--tune: skip the bisection over --capacity",
     offsetof(gr_cli_opts_t, no_capacity)},
    {"no-limits", 0, GM_OPT_FLAG, NULL, "--tune: search no hard limits (PyTorch's per_process_memory_fraction, "
     "JAX's and TensorFlow's memory fractions, CuPy's limit): a limit tuned to the edge of one recording fails "
     "a run that needs a little more (gpuanalyze report passes it unless given --limits)",
     offsetof(gr_cli_opts_t, no_limits)},
    {"explain-oom", 0, GM_OPT_FLAG, NULL, "why one setting (--policy, default: the framework's "
     "default) runs out of memory over one trace within --capacity (default: what the recorded run "
     "had when it failed, else unlimited): the failing request, what was live by callsite, the "
     "policy's account of its free bytes, and the smallest change that fits (a setting of the same "
     "framework, a capacity), as one JSON object (with --json; `gpuanalyze oom` says it in text)",
     offsetof(gr_cli_opts_t, explain_oom)},
    {"device", 'd', GM_OPT_STR, "sim|cuda:N", "backend: the simulator (default) or a real GPU",
     offsetof(gr_cli_opts_t, device)},
    {"addresses", 0, GM_OPT_STR, "bump|driver", "segment addresses the policies see: the CUDA "
     "driver's placement as modelled (default; PyTorch breaks ties by address) or a bump pointer",
     offsetof(gr_cli_opts_t, addresses)},
    {"cuda-addresses", 0, GM_OPT_STR, "sim|real", "cuda: give policies the driver's own addresses "
     "(default: the real run's decisions) or the simulator's (the same decisions as sim)", offsetof(gr_cli_opts_t, cuda_addresses)},
    {"capacity", 'c', GM_OPT_SIZE, "SIZE", "what-if: a device of this size (OOMs, first OOM)",
     offsetof(gr_cli_opts_t, capacity), 1, RP_REQUEST_MAX},
    {"device-memory", 0, GM_OPT_SIZE, "SIZE", "total memory the policies see (default: "
     "capacity, else the trace's GPU, else the device's / 80GiB)", offsetof(gr_cli_opts_t, device_memory),
     1ull << 20, RP_REQUEST_MAX},
    /* above 2 MiB, PyTorch's 2 MiB expandable pages are no whole number of granules (the
     * real driver's granularity is 2 MiB); below 512 B, addresses lose the alignment policies
     * rely on */
    {"granularity", 0, GM_OPT_SIZE, "SIZE", "simulated driver granularity, a power of two from "
     "512B to 2MiB (default 2MiB)", offsetof(gr_cli_opts_t, granularity), 512, 2ull << 20},
    {"sync-allocs", 0, GM_OPT_STR, "auto|external|replay", "synchronous device allocations "
     "(cudaMalloc): auto = external memory in a requests trace with async allocations (a "
     "library's own, beside the framework's allocator: counted apart, not in reserved nor the "
     "lower bound), else replayed", offsetof(gr_cli_opts_t, sync_allocs)},
    {"count-other", 0, GM_OPT_STR, "auto|yes|no", "memory of other owners than the framework's "
     "allocator (NCCL's VMM maps, formats gmt_owners) held on the device beside the policy, so "
     "--capacity counts it: auto = every map in a requests trace (its maps are not requests), in "
     "other traces the maps flagged external (torch-history: another library's); no = none; yes = "
     "every map that is not a request", offsetof(gr_cli_opts_t, count_other)},
    {"vmm-buffers", 0, GM_OPT_STR, "auto|requests|skip", "buffers mapped one by one through the "
     "VMM API (reserve + map of one buffer): auto = requests in a trace of XLA's platform "
     "allocator, else the recorded allocator's own (skipped)", offsetof(gr_cli_opts_t, vmm_buffers)},
    {"event-timing", 0, GM_OPT_STR, "range|recorded|early|late", "frees that wait on stream "
     "events (record_stream): range = as recorded, plus the peak with every event done at "
     "once (early) and every event late, reported as a range (default); or one of them only",
     offsetof(gr_cli_opts_t, event_timing)},
    {"late-mallocs", 0, GM_OPT_U64, "N", "late stream events are still pending at the next N "
     "allocations after the program freed the block (default 1)", offsetof(gr_cli_opts_t, late_mallocs)},
    {"jobs", 'j', GM_OPT_U64, "N", "replay N policies in parallel (default: the number of cores with --sweep and --tune, else 1)", offsetof(gr_cli_opts_t, jobs), 1, 256},
    {"preload", 0, GM_OPT_STR, "auto|yes|no", "decode the trace once into memory for all "
     "policies (auto: when several policies and it fits in 2 GiB and 32x the file)", offsetof(gr_cli_opts_t, preload)},
    {"output", 'o', GM_OPT_STR, "RESULTS", "write the results file (replay/RESULTS.md) here",
     offsetof(gr_cli_opts_t, output)},
    {"export-snapshot", 0, GM_OPT_STR, "OUT.pickle", "write one --policy's simulated run over one trace as a "
     "PyTorch memory snapshot (torch.cuda.memory._dump_snapshot's pickle) for pytorch.org/memory_viz",
     offsetof(gr_cli_opts_t, export_snapshot)},
    {"export-perfetto", 0, GM_OPT_STR, "OUT.json", "also write the replay of one trace as Chrome/Perfetto "
     "trace JSON (ui.perfetto.dev): live and reserved-per-policy counters, allocations as slices "
     "(bounded: replay/README.md)", offsetof(gr_cli_opts_t, export_perfetto)},
    {"json", 0, GM_OPT_FLAG, NULL, "print one JSON object per run instead of the table",
     offsetof(gr_cli_opts_t, json)},
    /* what gpurec predict --fit asks before it replays: the recorder knows no policies */
    {"list-policies", 0, GM_OPT_FLAG, NULL, "replay nothing: print the settings a replay would run, one "
     "a line in gpureplay's words (the --policy specs, then with --sweep the grid of each trace's "
     "framework), a trace after another", offsetof(gr_cli_opts_t, list_policies)},
    {"check", 0, GM_OPT_FLAG, NULL, "check the policy's invariants after every event (slow)",
     offsetof(gr_cli_opts_t, check)},
    {"quiet", 'q', GM_OPT_FLAG, NULL, "only errors on stderr", offsetof(gr_cli_opts_t, quiet)},
    {"strict", 0, GM_OPT_FLAG, NULL, "refuse a damaged trace instead of replaying its good chunks "
     "(results marked partial)", offsetof(gr_cli_opts_t, strict)},
    {"version", 0, GM_OPT_FLAG, NULL, "print versions and exit", offsetof(gr_cli_opts_t, version)},
    {"help", 'h', GM_OPT_FLAG, NULL, "show this help and exit", offsetof(gr_cli_opts_t, help)},
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
    "Figures (peak reserved, lower bound, ...): docs/glossary.md.\n"
    "Policies (replay/policies):";

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

/* Everything after the allocation of pos (main frees it whatever this returns). */
static int gpureplay(int argc, char **argv, char **pos) {
  gr_cli_opts_t o;
  memset(&o, 0, sizeof o);
  int npos = 0;
  gm_err_t err;
  gm_err_clear(&err);
  if (gm_opts_parse(kOpts, argc, argv, &o, pos, &npos, 0, &err) != GM_OK) return gr_cli_usage_error(err.msg);
  if (o.help) {
    print_help();
    return 0;
  }
  if (o.version) {
    print_version();
    return 0;
  }
  if (npos == 0) return gr_cli_usage_error("no trace given");
  if (o.quiet) gm_log_set_level(GM_LOG_ERROR);
  gr_config_t cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.traces = (const char **)pos;
  cfg.n_traces = npos;
  int rc = gr_cli_config(&o, &cfg);
  if (rc == 0) rc = gr_cli_refuse(&o, npos, &cfg);
  if (rc != 0) return rc;
  if (o.tune) return gr_cli_tune(&cfg, &o);

  static gr_cli_policies_t ps; /* 64 KiB of specs: not on the stack */
  if ((rc = gr_cli_policies(&o, &cfg, &ps)) != 0) return rc;
  cfg.policies = ps.specs;
  cfg.n_policies = ps.n_user;
  cfg.serve_failed = 1;
  cfg.device = -1;

  /* Before any replay: every input is a trace, and the results file can be written. */
  if ((rc = gr_cli_check_inputs(&cfg)) != 0) return rc;
  if ((o.output && gm_output_check(o.output, &err) != GM_OK) ||
      (o.export_perfetto && gm_output_check(o.export_perfetto, &err) != GM_OK)) {
    gm_log_err(&err);
    return 1;
  }
  if (o.explain_oom) return gr_cli_explain_oom(&cfg, ps.n_user ? ps.specs[0] : NULL);
  if (o.export_snapshot) return gr_cli_export_snapshot(&cfg, ps.specs[0], o.export_snapshot, o.quiet);
  return gr_cli_replay(&cfg, &o, &ps);
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
