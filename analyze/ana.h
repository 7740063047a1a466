/* ana.h: the gpumem analyzer library: one streaming pass over a trace (summary, alloc/free
 * pairing, a downsampled live-bytes timeline), the SQLite database (schema in ana_schema.c,
 * documented in SCHEMA.md), loaders for traces and gpureplay results files, the report
 * writers (text, CSV, HTML) and the recommendation.
 *
 * The analyzer reads traces through formats/gmt.h and results files through their JSON
 * schema (replay/RESULTS.md); it never links the replayer. The library never prints to
 * stdout/stderr on its own and never exits: writers take a FILE* or a path from main(). */
#ifndef ANA_H
#define ANA_H

#include <stdint.h>
#include <stdio.h>

#include "base/gm_base.h"
#include "formats/gmt.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ANA_VERSION GM_VERSION
#define ANA_SCHEMA_VERSION 1
#define ANA_TIMELINE_POINTS 2048 /* trace timeline buckets kept at load time */

/* ---- one pass over a trace ---------------------------------------------------------------- */

/* An allocation paired with the free that ended it (free_seq == UINT64_MAX: never freed). */
typedef struct ana_pair {
  uint64_t alloc_seq, free_seq; /* event indexes in the trace */
  uint64_t t_alloc, t_free;     /* ts_ns; t_free meaningless when never freed */
  uint64_t addr, size, stream;
  uint32_t callsite;
  uint16_t device;
  uint8_t mem_kind;
} ana_pair_t;

/* Called for every completed pair (at the free, or at the end for the never freed). */
typedef gm_status_t (*ana_pair_fn)(void *ctx, const ana_pair_t *p, gm_err_t *err);

#define ANA_MAX_LISTED 16 /* devices / streams listed by value in the summary */
/* trace_owners.owner of the context's row (owner_kind 'context'), by how it was counted */
#define ANA_OWNER_CONTEXT "CUDA context, module code"
#define ANA_OWNER_CONTEXT_DEVICE "CUDA context, module code (whole device)"
/* Bytes of one trace string (a callsite, a marker name) kept in the database: a callsite of
 * six frames is under 2 KiB; a trace's strings may be 1 MiB each (formats/SPEC.md 5.3), and
 * a few KB of compressed chunks can define GBs of them. Longer ones are cut, marked "...". */
#define ANA_MAX_STRING 4096

typedef struct ana_summary {
  uint64_t events;
  uint64_t first_ts_ns, last_ts_ns;
  uint64_t by_kind[GMT_EV_KIND_MAX];
  uint64_t async_device_allocs; /* stream-ordered device allocations (requests-mode requests) */
  uint64_t n_devices, devices[ANA_MAX_LISTED];
  uint64_t device_peak[ANA_MAX_LISTED];        /* peak live requested bytes of devices[i] */
  uint64_t n_streams, streams[ANA_MAX_LISTED]; /* GMT_STREAM_NONE counts as a stream */
  uint64_t requested_bytes_total;              /* sum of ALLOC sizes (device memory) */
  uint64_t peak_live_bytes;                    /* max over time of live requested device bytes */
  uint64_t peak_live_seq, peak_live_ts_ns;     /* the event that reached the peak */
  uint64_t live_bytes_at_end, live_allocs_at_end;
  uint64_t peak_segment_bytes;                 /* native traces: max live SEGMENT_ALLOC bytes */
  uint64_t unknown_free, double_alloc;         /* FREE of an address not live; ALLOC over live */
  uint32_t max_callsite;                       /* largest string id used by an event */
  /* The recorded run's failed requests (ALLOC_FAILED of device memory) and the first one: where
   * it was, and what was live (requested bytes, all devices) and held in segments (the recorded
   * allocator's reservation, where the trace has segments) just before it. */
  uint64_t failed_allocs;
  uint64_t failed_seq, failed_ts_ns, failed_size, failed_stream; /* the first; valid if failed_allocs */
  uint32_t failed_callsite;
  uint16_t failed_device;
  uint64_t failed_live_bytes, failed_segment_bytes;
  char failed_callsite_text[512]; /* filled by ana_trace_summarize ("" if none) */
  /* GPU requests by floor(log2(size)) (index + 1; index 0: size 0), and allocation lifetimes
   * by floor(log10(ns)) (index + 1; index 0: never freed): the report's histograms, made in
   * the one pass instead of by GROUP BY over millions of rows. */
  uint64_t size_allocs[65], size_bytes[65];
  uint64_t life_allocs[21], life_bytes[21];
  /* Every mapped byte by owner (formats/gmt.h, gmt_owners): per device, at its peak. */
  gmt_owners_result_t owners;
  /* Events earlier than the event before them on the same device (of the first ANA_MAX_LISTED
   * devices): SPEC.md does not require order, but times, durations and timelines assume it.
   * The earliest time seen (first_ts_ns is the first event's, which may be later). */
  uint64_t ts_backward, ts_backward_max_ns, ts_backward_first_seq;
  uint16_t ts_backward_device;
  uint64_t min_ts_ns;
} ana_summary_t;

/* One line on the events out of order (ts_backward), into buf ("" when none). Returns buf. */
char *ana_out_of_order_text(const ana_summary_t *m, char *buf, size_t n);

typedef struct ana_scan ana_scan_t;

/* fn may be NULL (info only needs the summary). */
gm_status_t ana_scan_new(ana_scan_t **out, ana_pair_fn fn, void *ctx, gm_err_t *err);
void ana_scan_free(ana_scan_t *s);
/* The trace's header (capture mode, allocator settings: who owns what) and a resolver for
 * callsite ids (names libraries by their "[libname]" callsites); before the first event. */
gm_status_t ana_scan_set_trace(ana_scan_t *s, const gmt_header_t *h, gmt_string_fn str, void *ctx,
                               gm_err_t *err);
gm_status_t ana_scan_event(ana_scan_t *s, const gmt_event_t *ev, gm_err_t *err);
/* Emit the pairs never freed; the summary is final afterwards. */
gm_status_t ana_scan_finish(ana_scan_t *s, gm_err_t *err);
const ana_summary_t *ana_scan_summary(const ana_scan_t *s);
/* Timeline of live requested bytes: up to ANA_TIMELINE_POINTS (ts_ns, max live in bucket). */
size_t ana_scan_timeline(const ana_scan_t *s, uint64_t *ts, uint64_t *live, size_t cap);
/* True for memory kinds that count as GPU memory requests (device or unknown). */
int ana_counts_as_device(unsigned mem_kind);

/* Read a whole trace once: summary and the reader's integrity stats. *hdr is a copy (free it
 * with gmt_header_free). flags: GMT_READ_* (salvage or strict). damage (may be NULL) gets the
 * first damage a salvaging reader skipped, or "". */
gm_status_t ana_trace_summarize(const char *path, unsigned flags, gmt_header_t *hdr, ana_summary_t *sum,
                                gmt_reader_stats_t *rs, char *damage, size_t damage_n, gm_err_t *err);
/* The same, calling progress (may be NULL) about every 4 M events with the chunks read and the
 * chunks the index lists (0: no index), for a caller that shows progress on a terminal. */
typedef void (*ana_progress_fn)(void *ctx, uint64_t events, uint64_t chunks, uint64_t chunks_total);
gm_status_t ana_trace_summarize_progress(const char *path, unsigned flags, gmt_header_t *hdr, ana_summary_t *sum,
                                         gmt_reader_stats_t *rs, char *damage, size_t damage_n,
                                         ana_progress_fn progress, void *ctx, gm_err_t *err);

/* "2026-11-21 12:53:04.277 UTC" for ns since the epoch ("unknown" for 0). Returns buf. */
char *ana_format_wallclock(uint64_t ns, char *buf, size_t n);

/* `gpuanalyze info`: the summary as text. damage: as ana_trace_summarize gives it. */
void ana_info_print(FILE *out, const char *path, const gmt_header_t *h, const ana_summary_t *s,
                    const gmt_reader_stats_t *rs, const char *damage);

/* Every mapped byte by owner, per device at its peak (part of `info`); ind indents lines. */
void ana_owners_print(FILE *out, const gmt_header_t *h, const ana_summary_t *s, const char *ind);

/* ---- database ------------------------------------------------------------------------------ */

typedef struct ana_db ana_db_t;

/* Open or create path (":memory:" works). Creates the schema on an empty database; refuses a
 * database that is not ours or has a newer schema version. While another process writes to it,
 * waits up to wait_ms for its write lock, then fails saying the database is busy (readers do
 * not wait: the write-ahead log shows them the database as it was). */
#define ANA_DEFAULT_WAIT_MS 30000
gm_status_t ana_db_open(ana_db_t **out, const char *path, gm_err_t *err);
gm_status_t ana_db_open_wait(ana_db_t **out, const char *path, int wait_ms, gm_err_t *err);
void ana_db_close(ana_db_t *db);
/* The underlying sqlite3* (for tests and the report writers). */
void *ana_db_sqlite(ana_db_t *db);
/* The schema DDL (one place; SCHEMA.md documents it). */
const char *ana_schema_sql(void);

typedef struct ana_load_opts {
  unsigned read_flags;         /* GMT_READ_*: strict (0) or salvage damaged traces */
  uint64_t fault_after_events; /* test hook: fail the load after this many events (0: off) */
  /* Called about every million events of a trace (NULL: none); main() shows it on a terminal. */
  void (*progress)(void *ctx, const char *input, uint64_t events);
  void *progress_ctx;
  /* Test hook: called after each batch of events is in (inside the transaction); NULL: none. */
  void (*batch_done)(void *ctx, uint64_t events);
  /* Called with one line for the user (a damaged trace salvaged, a trace replaced); NULL: none. */
  void (*warn)(void *ctx, const char *msg);
  void *warn_ctx;
  /* Per-trace summaries only (traces, devices, owners, callsites at the peak, histograms,
   * timeline), no event rows: what views over hundreds of ranks read (`gpuanalyze ranks`).
   * The trace's row says events_loaded = 0 and its event range is empty. */
  int summary_only;
  /* Called inside the transaction before the first results file is read (NULL: none): the
   * results may still be in the making while the traces before them load (`gpuanalyze report`
   * loads the trace while gpureplay replays it); an error rolls the load back. */
  gm_status_t (*results_ready)(void *ctx, gm_err_t *err);
  void *results_ctx;
} ana_load_opts_t;

typedef struct ana_load_stats {
  uint64_t traces_loaded, traces_skipped; /* skipped: same content already in the db */
  uint64_t traces_partial;                /* loaded from a damaged trace, some events lost */
  uint64_t results_loaded, results_skipped;
  uint64_t events, runs;
  double seconds;
  int64_t results_id; /* the last results file loaded, or found already there (same content); 0: none */
} ana_load_stats_t;

/* Load traces (.zst) and results files (.json) in ONE transaction: on any failure nothing of
 * this call stays in the database. Inputs already loaded (same content hash) are skipped. */
gm_status_t ana_db_load(ana_db_t *db, const char *const *inputs, int n, const ana_load_opts_t *o,
                        ana_load_stats_t *st, gm_err_t *err);
/* Is the trace at path (the same bytes) in the database, and with how many replay runs?
 * *runs: -1 not loaded, else the count; *others: traces loaded from that path whose bytes
 * differ (an older recording of the same name). For `report TRACE` to reuse its replays. */
gm_status_t ana_trace_replayed(ana_db_t *db, const char *path, int64_t *runs, int64_t *others,
                               gm_err_t *err);
/* What `report` asked gpureplay for a trace (table report_replays, ana_replay_key.c): "tune"
 * (the tuner's search, the grid with it) or "sweep"; gpureplay's version line with its binary's size
 * and mtime; the options
 * that change its figures. A second report reuses the runs when the key serves. */
typedef struct ana_replay_key {
  char what[24], tool[128], options[128];
} ana_replay_key_t;
/* The trace's identity (traces.content_hash) from its bytes. */
gm_status_t ana_trace_hash(const char *path, char *out, size_t n, gm_err_t *err);
gm_status_t ana_replay_key_get(ana_db_t *db, const char *hash, ana_replay_key_t *k, int *found, gm_err_t *err);
/* 1: runs made under have answer what want asks (a tune's serve a sweep too; want's tool ""
 * matches any: a gpureplay that cannot say its version). */
int ana_replay_key_serves(const ana_replay_key_t *have, const ana_replay_key_t *want);
/* After the trace's new replays are loaded (results_id: their results file, ana_load_stats_t):
 * drop its simulator runs of every other results file, note the key. */
gm_status_t ana_replay_key_put(ana_db_t *db, const char *hash, int64_t results_id, const ana_replay_key_t *k,
                               gm_err_t *err);
/* Loaders inside an open transaction (ana_db_load wraps them). */
gm_status_t ana_load_trace(ana_db_t *db, const char *path, const ana_load_opts_t *o,
                           ana_load_stats_t *st, gm_err_t *err);
gm_status_t ana_load_results(ana_db_t *db, const char *path, ana_load_stats_t *st, gm_err_t *err);

/* ---- reports ------------------------------------------------------------------------------- */

/* Human-readable report on out. */
gm_status_t ana_report_text(ana_db_t *db, FILE *out, gm_err_t *err);
/* One CSV file per table into dir (created if missing). */
gm_status_t ana_report_csv(ana_db_t *db, const char *dir, gm_err_t *err);
/* One self-contained HTML file. */
gm_status_t ana_report_html(ana_db_t *db, const char *path, gm_err_t *err);
/* The recommendation per trace (text). */
gm_status_t ana_recommend(ana_db_t *db, FILE *out, gm_err_t *err);

/* One trace's recommendation as data (the HTML report's headline): the same choice
 * `gpuanalyze recommend` prints, whose text for this trace goes to out (NULL: none). */
typedef struct ana_advice {
  int runs;                   /* replay runs of the trace loaded */
  int advised;                /* a setting is advised: best_* below */
  char framework[32];         /* whose words the advice is in ("PyTorch") */
  char why_none[128];         /* why no setting is advised when that is a rule ("" otherwise) */
  int64_t device;             /* the device advised for (its limiting one), -1 unknown */
  int64_t lower, need;        /* peak live requested; with external memory beside it */
  int64_t best_run_id;        /* -1: none */
  char best_policy[256], paste[512];
  int64_t best_reserved, best_low, best_high;
  int best_range;             /* timing-dependent: best_low..best_high */
  char default_policy[32];    /* the framework's default setting */
  int64_t default_run_id;     /* its run, -1: not replayed */
  int64_t default_reserved, default_ooms;
  /* the replay checked against the run (ana_run_check.c): ANA_CHECK_* state, the setting it
   * ran with, its replay's and the run's own peak reserved, and the miss (0: none) */
  int check;
  char check_policy[256];
  int64_t check_replay, check_recorded, check_off;
} ana_advice_t;
/* The least saving a setting must show over the framework's default, past what the replay
 * cannot tell, to be advised (issue 25): the larger of 64 MiB and 1 % of the default. */
int64_t ana_advice_floor(int64_t default_reserved);

gm_status_t ana_advise(ana_db_t *db, int64_t trace_id, FILE *out, ana_advice_t *a, gm_err_t *err);

/* The ranks of each job side by side (traces with a rank, one command line and world size,
 * at least two): peaks per rank and device, the limiting rank, the spread, the callsites that
 * differ, one setting for the job. Reads per-trace and per-run summaries only. *jobs: how many
 * jobs were shown. ANA_RANKS_HTML: the report's box per job, its one setting to paste on every
 * rank (nothing where no job has several ranks). */
typedef enum { ANA_RANKS_TEXT, ANA_RANKS_JSON, ANA_RANKS_CSV, ANA_RANKS_HTML } ana_ranks_format_t;
gm_status_t ana_ranks(ana_db_t *db, FILE *out, ana_ranks_format_t fmt, int *jobs, gm_err_t *err);

/* The report's text section "ranks of one job" (ana_ranks' text) where the database holds
 * several ranks of one job: a job runs one setting on every rank, which the ranks' own advice
 * (each for its rank alone) does not give. Nothing otherwise. */
gm_status_t ana_report_ranks_text(ana_db_t *db, FILE *out, gm_err_t *err);

/* Warnings for known misconfigurations in an allocator config string (a
 * PYTORCH_CUDA_ALLOC_CONF value). Writes up to cap messages; returns how many there are. */
int ana_conf_warnings(const char *conf, char msgs[][256], int cap);
/* The line a user pastes for a policy spec (gpureplay's canonical form). gpu_total_mem is used
 * to turn a prealloc size into a fraction (0: unknown). */
void ana_policy_env_line(const char *policy, uint64_t gpu_total_mem, char *buf, size_t n);

/* ---- escaping (HTML and <script> JSON) ----------------------------------------------------- */

/* HTML text/attribute escape of s (& < > " '). */
void ana_html_escape(FILE *out, const char *s);
/* `report --curve=TRACE@VALUE` (recordings to draw the peak against the value with) and the
 * gpureplay to replay them with (NULL: found as report finds it); kept, not copied. Returns
 * -1, or the index of the first that is not TRACE@VALUE with a positive VALUE. */
int ana_html_predict_config(const char *const *curve, int n, const char *gpureplay);
/* A JSON string literal that is also safe inside <script>: escapes quotes, control
 * characters, '<' (so "</script>" cannot appear), U+2028 and U+2029. */
void ana_json_string(FILE *out, const char *s);

#ifdef __cplusplus
}
#endif
#endif /* ANA_H */
