/* gpureplay.h: what the files of the gpureplay tool share (main, the runner, the output
 * writers). Internal to //replay (and the benchmarks and tests): the analyzer runs the
 * gpureplay binary and reads what it prints, it never links this (DESIGN.md). */
#ifndef GPUREPLAY_H
#define GPUREPLAY_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/gm_base.h"
#include "formats/gmt.h"
#include "replay/engine/rp_engine.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GPUREPLAY_VERSION GM_VERSION

/* What the command line asked for, validated. */
enum { GR_OTHER_AUTO = 0, GR_OTHER_YES = 1, GR_OTHER_NO = 2 };

typedef struct gr_config {
  const char **traces;
  int n_traces;
  const char **policies; /* specs as given (or the sweep grid) */
  int n_policies;
  int sweep;
  int cuda_ordinal;      /* -1: sim */
  int cuda_real_addresses; /* cuda: policies see the driver's addresses, not the simulator's */
  int addresses;           /* simulated segment addresses: rp_va_policy_t (0 bump, 1 driver model) */
  uint64_t capacity;     /* 0: unlimited */
  uint64_t device_memory;/* total memory the policies see; 0: capacity / trace / device / 80 GiB */
  uint64_t granularity;  /* sim only; 0: 2 MiB */
  int jobs;
  int check;
  int progress;          /* stderr is a terminal */
  int preload;           /* 1 always, 0 never, -1 when it fits */
  int sync_allocs;       /* GR_SYNC_*: how synchronous device allocations are read */
  int vmm_buffers;       /* GR_VMM_*: whether whole-reservation VMM maps are requests */
  int count_other;       /* GR_OTHER_*: other owners' VMM maps held on the device (capacity) */
  int serve_failed;      /* replay the recorded run's failed requests (rp_engine_opts_t) */
  int device;            /* the device to replay; -1: the first that allocates */
  int timing_range;      /* frees that wait on stream events: replay early and late too */
  int event_timing;      /* RP_EVENTS_* of the main replay (--event-timing) */
  uint64_t late_mallocs; /* late: events pending at this many mallocs (0: 1) */
  unsigned read_flags;   /* GMT_READ_SALVAGE (default) or GMT_READ_STRICT (--strict) */
  struct gr_decoded *decoded; /* the trace decoded already (gr_trace_scan), or NULL */
  int stop_at_oom;       /* only whether a setting fits is wanted: a replay ends at its first OOM */
} gr_config_t;

/* --sync-allocs: auto (rp_sync_is_external on the trace: external in a requests trace with
 * async allocations), external (always), replay (never: every alloc goes to the policy). */
enum { GR_SYNC_AUTO = 0, GR_SYNC_EXTERNAL = 1, GR_SYNC_REPLAY = 2 };
/* --vmm-buffers: auto (requests in a trace of XLA's platform allocator without stream-ordered
 * requests), requests (always), skip (never: VMM records are the recorded allocator's). */
enum { GR_VMM_AUTO = 0, GR_VMM_REQUESTS = 1, GR_VMM_SKIP = 2 };

#define GR_MAX_DEVICES 16 /* devices of one trace replayed (each its own run per policy) */

/* One trace's provenance, for the results. */
typedef struct gr_trace_info {
  const char *path;
  uint64_t start_time_ns;
  uint32_t pid;
  uint64_t gpu_total_mem;
  uint64_t events_in_index; /* 0 if no index (truncated file) */
  int truncated;
  uint64_t seq_gaps, dropped;
  unsigned capture_mode;    /* the header's gmt_capture_mode_t */
  int has_async_alloc;      /* a requests trace holds an async device allocation (scanned) */
  int external_sync;        /* synchronous allocations are replayed as external memory */
  int vmm_requests;         /* whole-reservation VMM maps are replayed as requests */
  unsigned frameworks;      /* GMT_FW_* the header names (0: not recorded) */
  char frameworks_text[128];/* "JAX 0.11.2" */
  const char *holds;        /* gmt_trace_holds: what the events are to the replay */
  char predicted[512];      /* "the job at 32, predicted from a.zst@8 b.zst@16 (confidence 0.99)"; "" for a recording */
  /* gpurec predict's check of the uncertain sizes per setting (the header's predicted.settings,
   * SPEC.md §3.3: "SPEC=answered LOW..HIGH (uncertain sizes move it by X %); ..."); "": none */
  char predicted_settings[8192];
  uint64_t gpu_mem_info_total; /* cuMemGetInfo's total, 0 if not recorded */
  /* The CUDA context and module code of the replayed device (DEVICE_USAGE records,
   * gpureplay_context.c): --capacity leaves the policy capacity - context_bytes; 0 if not
   * recorded. context_method: GMT_USAGE_*, 0 if none. */
  uint64_t context_bytes;
  unsigned context_method;
  int has_context; /* the header says the trace holds DEVICE_USAGE records */
  int n_devices;            /* devices the trace allocates on (gr_trace_devices; 0: not scanned) */
  uint64_t device_memory;   /* total memory the policies saw */
  int device_memory_assumed; /* neither the trace nor the command line said: 80 GiB */
  /* The recorded run's failure: the device's free bytes at it, as PyTorch recorded them (0:
   * unknown), the first failure's callsite text, and how the replay's capacity was chosen. */
  uint64_t recorded_device_free;
  /* The limit the recorded run set itself (issue 25), 0: not recorded. From the header:
   * torch.per_process_memory_fraction (x gpu_total_mem), oom.allowed_bytes (PyTorch's OOM
   * message, "N GiB allowed"), XLA_PYTHON_CLIENT_MEM_FRACTION (x gpu_total_mem). */
  uint64_t recorded_cap;
  char recorded_cap_from[64];
  int recorded_cap_exact;   /* recorded_cap is oom.allowed_bytes: the writer knew the limit */
  /* torch.per_process_memory_fraction.<d> (gpurec records the device each call limited): the
   * fraction of device d, 0 where the job set none; per_device: the trace says which devices
   * (then a device without one has no cap of its own: gr_failure_capacity) */
  double torch_fraction_dev[GR_MAX_DEVICES];
  int torch_fraction_per_device;
  char failure_callsite[512];
  char capacity_note[512];
  gmt_reader_stats_t stats; /* what the reader found: truncation, gaps, damage it salvaged */
  char damage[GM_ERR_MSG_MAX]; /* the first damage a salvaging reader skipped, or "" */
  gmt_coverage_t coverage;  /* the header's coverage marks and the reader's losses (SPEC.md §3.4) */
} gr_trace_info_t;

/* ---- the CUDA context (gpureplay_context.c) ---- */
/* The header says the trace holds DEVICE_USAGE records (kv `device_usage`). */
int gr_header_has_context(const gmt_header_t *h);
/* info->context_bytes / context_method of `device` (-1: any) from events or from the file. */
void gr_context_from_events(const gmt_event_t *evs, size_t n, int device, gr_trace_info_t *info);
gm_status_t gr_context_from_file(const char *path, unsigned flags, int device, gr_trace_info_t *info,
                                 gm_err_t *err);
/* What a capacity leaves beside the context (1 byte when the context alone fills it). */
uint64_t gr_capacity_left(uint64_t capacity, uint64_t context);

/* Whether a trace's other owners' VMM maps are held on the device (--count-other). */
int gr_count_other(const gr_config_t *cfg, const gr_trace_info_t *info);

/* The device memory a replay assumes when neither the trace nor the command line gives it. */
#define GR_ASSUMED_DEVICE_MEMORY (80ull << 30)

/* Replay every policy of cfg over one trace; res[i] for cfg->policies[i]. */
gm_status_t gr_run_trace(const gr_config_t *cfg, const char *path, gr_trace_info_t *info,
                         rp_result_t **res, gm_err_t *err);

/* Decode once, replay many: a trace probed and decoded into memory (the tuner's input). */
typedef struct gr_loaded {
  gr_trace_info_t info;
  gmt_event_t *evs;
  size_t n_evs;
  rp_addr_ids_t ids; /* evs' address numbers, shared by its replays (ids.id NULL: none) */
  uint32_t stream_addrs; /* evs NULL (streamed): the addresses its replays number as they read it
                            (rp_addr_numbering), known before them; 0: none, the engines' hash map */
  uint64_t total_memory; /* what the policies see unless cfg->device_memory says otherwise */
} gr_loaded_t;
gm_status_t gr_trace_load(const gr_config_t *cfg, const char *path, gr_loaded_t *lt, gm_err_t *err);
/* The same, the events left in the file (lt->evs NULL): each replay reads it (a trace too large
 * to hold in memory). */
gm_status_t gr_trace_open_streamed(const gr_config_t *cfg, const char *path, gr_loaded_t *lt, gm_err_t *err);
/* Replay specs[0..n) over the loaded events (cfg: capacity, device_memory, jobs, backend);
 * res[i] for specs[i]. No progress output. */
gm_status_t gr_run_loaded(const gr_config_t *cfg, const gr_loaded_t *lt, const char *const *specs,
                          int n, rp_result_t **res, gm_err_t *err);
/* The same, where caps[i] > 0 makes replay i a capacity probe: within caps[i], ending at its
 * first OOM (only whether it fits is read); caps NULL or caps[i] 0: cfg's. Events not in memory
 * (lt->evs NULL): the file is decoded once for all of them, batch by batch. */
gm_status_t gr_run_loaded_caps(const gr_config_t *cfg, const gr_loaded_t *lt, const char *const *specs,
                               const uint64_t *caps, int n, rp_result_t **res, gm_err_t *err);
/* What the replay cannot tell about figures gr_run_loaded made (issue 25): the timing range
 * and the placement spread of res[i] (specs[i]), as gr_run_trace adds them to its figures
 * (range_*, placement_*, spread_ooms), replaying only the other timings and placement; nothing
 * without cfg->timing_range (a timing the user fixed), as there. Reads
 * of res[i]: peak_reserved_bytes, pool_allocs, event_frees, event_frees_requested, ooms and
 * placed_* (a replay that placed no segment is its own bump pointer's replay: not run again). */
gm_status_t gr_spread_loaded(const gr_config_t *cfg, const gr_loaded_t *lt, const char *const *specs, int n,
                             rp_result_t **res, gm_err_t *err);
/* ---- why a replay ran out of memory (gpureplay_oom.c) ---- */

#define GR_OOM_TOP 8     /* callsites listed among the live bytes at the failure */
#define GR_OOM_TEXT 512  /* bytes of a callsite's text kept */
typedef struct gr_oom {
  char policy[1024];         /* the setting replayed (canonical spec) */
  char frameworks[128];      /* the trace's, as the header names them */
  uint64_t capacity;         /* the device it was replayed within (0: unlimited) */
  uint64_t device_memory;    /* the total the policies saw */
  char capacity_note[512];   /* how the capacity was chosen ("" when given) */
  uint64_t recorded_failures, recorded_served; /* the recorded run's failed requests */
  uint64_t requests;         /* allocation requests replayed */
  uint64_t needs_bytes;      /* peak live requested + external + the recorded context: no allocator needs less */
  uint64_t context_bytes;    /* the recorded CUDA context and module code (0: none) */
  uint64_t peak_reserved;    /* this setting's peak reserved + external (up to the end) */
  uint64_t ooms;             /* failed requests of this replay */
  int found;                 /* it ran out of memory; the rest is about its first failure */
  int64_t event;             /* index of the event in the trace */
  uint64_t ts_ns, size, stream;
  uint32_t callsite;
  char callsite_text[GR_OOM_TEXT];
  int cause;                 /* RP_OOM_* */
  uint64_t live_bytes, external_bytes, reserved_bytes; /* just before (reserved: just after) */
  int has_report;
  rp_oom_report_t why;       /* the policy's account of its free bytes */
  struct {
    char text[GR_OOM_TEXT];
    uint64_t bytes, allocs;
  } top[GR_OOM_TOP];         /* live bytes by callsite, largest first */
  int n_top;
  uint64_t live_allocs, top_other_bytes, top_other_sites;
  /* The smallest changes that make the trace fit. */
  int live_exceeds;          /* the live bytes alone exceed the capacity ... */
  uint64_t live_excess;      /* ... by this much: no setting helps */
  int fix_found;             /* a setting of the same framework that fits the capacity */
  char fix_spec[512];
  uint64_t fix_peak;
  const char *fix_from;      /* "the sweep grid", "the tuner's search" */
  int grid_tried, grid_fit, tune_tried;
  uint64_t fits_capacity;    /* the smallest capacity (2 MiB steps) this setting fits; 0: none */
} gr_oom_t;
/* Replay spec (NULL: the framework's default; the framework's own words are taken) over the
 * trace at path within cfg->capacity (0: the recorded failure's, as gpureplay chooses it, or
 * unlimited) and explain its first OOM. o->found == 0: no OOM (not an error). */
gm_status_t gr_oom_explain(const gr_config_t *cfg, const char *path, const char *spec, gr_oom_t *o,
                           gm_err_t *err);
/* o as one JSON object on a line (gpureplay --explain-oom --json; the schema: replay/README.md
 * "Why it ran out of memory"). */
gm_status_t gr_oom_print_json(FILE *f, const char *path, const gr_oom_t *o, gm_err_t *err);

/* The recorded run's first failure's callsite text into lt->info (from a replay's result). */
void gr_loaded_note_failure(gr_loaded_t *lt, const rp_result_t *r0);
void gr_loaded_free(gr_loaded_t *lt);

/* When the trace recorded failed requests and no --capacity was given: the capacity the
 * recorded run had (reserved + free at the first failure, from PyTorch's record; else the
 * GPU's total memory), with a note saying which. 0: unknown. */
uint64_t gr_failure_capacity(const gr_trace_info_t *info, const rp_result_t *r, char *note, size_t n);

/* A policy spec as users paste it: "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" (or
 * PYTORCH_ALLOC_CONF=) -> "pytorch:expandable_segments:True"; backend:cudaMallocAsync ->
 * "async". Other specs are copied as they are. */
int gr_policy_from_env(const char *spec, char *out, size_t n); /* -1: does not fit in n */

/* The sweep grid: NULL-terminated specs. gr_sweep_grid is PyTorch's (and the grid of a trace
 * whose framework is not recorded); gr_sweep_grid_for gives a framework's (one GMT_FW_* bit,
 * else PyTorch's), in that framework's own words. */
extern const char *const gr_sweep_grid[];
const char *const *gr_sweep_grid_for(unsigned framework);
/* The devices a trace allocates device memory on (ALLOC, VMM_MAP, ALLOC_FAILED), in the order
 * they first appear; at most max, *n the count found (which may exceed max). A read error
 * ends the scan (the replay itself reports it). */
gm_status_t gr_trace_devices(const char *path, int *devs, int max, int *n, gm_err_t *err);
/* A trace decoded once for all its replays: gr_trace_scan finds its devices in the events it
 * decodes where gr_run_trace would decode them anyway (several policies, a trace that fits in
 * memory), and gr_run_trace with cfg->decoded pointing here replays them (every device, and
 * a recorded OOM's second run) without reading the file again. */
typedef struct gr_decoded {
  const char *path; /* the trace the events are of; NULL: none decoded */
  gmt_event_t *evs;
  size_t n_evs;
  gr_trace_info_t info; /* what the reader found (stats, damage) */
  rp_addr_ids_t ids;    /* the events' address numbers (ids.id NULL: none) */
} gr_decoded_t;
/* gr_trace_devices, through *dec (emptied first) where the replay will preload the trace. */
gm_status_t gr_trace_scan(const gr_config_t *cfg, const char *path, gr_decoded_t *dec, int *devs, int max,
                          int *n, gm_err_t *err);
void gr_decoded_free(gr_decoded_t *dec);
/* The frameworks a trace's header names (GMT_FW_* set, 0 if none). */
gm_status_t gr_trace_frameworks(const char *path, unsigned *set, gm_err_t *err);

/* The replay's early and late stream events gave different peaks (rp_result_t). */
int gr_timing_sensitive(const rp_result_t *r);
int gr_timing_sensitive_any(rp_result_t *const *res, int n);
/* The line on frees that wait on stream events (nothing if none); sensitive: -1 when no range
 * was replayed, else gr_timing_sensitive_any. */
void gr_print_timing(FILE *f, const char *prefix, const rp_result_t *r0, int sensitive);
/* The line on the simulated async pool's range. */
void gr_print_pool(FILE *f, const char *prefix, uint64_t recorded_pool);

/* Output. order[] ranks results (best first) for the table. */
void gr_rank(rp_result_t *const *res, int n, int *order);
void gr_print_table(FILE *f, const gr_trace_info_t *info, rp_result_t *const *res, int n,
                    const int *order);
void gr_print_json(FILE *f, const gr_trace_info_t *info, const rp_result_t *r);
/* The framework and what the trace holds (gmt_trace_holds), with their warnings. */
void gr_print_content(FILE *f, const char *prefix, const gr_trace_info_t *info, const rp_result_t *r0);
/* The recorded run's failed requests, each line starting with prefix (nothing if none). */
void gr_print_failure(FILE *f, const char *prefix, const gr_trace_info_t *info, const rp_result_t *r0);

/* The results file (replay/RESULTS.md): collect runs, then write. */
typedef struct gr_results gr_results_t;
gr_results_t *gr_results_new(void);
gm_status_t gr_results_add(gr_results_t *rs, const gr_trace_info_t *info, const rp_result_t *r,
                           gm_err_t *err);
/* What --tune knows of a run (results file key "tune"). */
typedef struct gr_tune_note {
  const char *role;          /* "chosen", "tuned", "default", "grid", "front" */
  int from_grid;
  uint64_t needs_bytes;      /* 0: not bisected */
  double driver_time_p50_s, driver_time_p99_s, budget_s;
  unsigned smallest_gpu_gib; /* of the common GPUs, 0: none or unknown */
  int pool;                  /* the simulated stream-ordered pool's figure: shown, never chosen */
  uint64_t worst_bytes, best_bytes; /* what the replay cannot tell, counted (timing, placement,
                                       predicted sizes); 0: not computed */
  int worst_oom;             /* another timing or placement ran out of memory: no worst case */
  const char *searched;      /* how the search ran on a long trace (gr_tune_t.searched); NULL or "": whole */
} gr_tune_note_t;
/* The last run added gets the tune note. */
gm_status_t gr_results_note_tune(gr_results_t *rs, const gr_tune_note_t *n, gm_err_t *err);
gm_status_t gr_results_write(gr_results_t *rs, const char *path, gm_err_t *err);
void gr_results_free(gr_results_t *rs);

#ifdef __cplusplus
}
#endif
#endif /* GPUREPLAY_H */
