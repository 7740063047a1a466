/* ana_schema.c: the analyzer database schema, version ANA_SCHEMA_VERSION. The ONLY place the
 * DDL lives; analyze/SCHEMA.md documents every table, column and view.
 *
 * Design: events are append-only and each trace's rows are contiguous in rowid order (one
 * trace is loaded at a time), so the traces row records its rowid range and queries select a
 * trace's rows by rowid range instead of an index that would halve the load rate. Alloc/free
 * pairing is one column, events.ends_ev_id (a FREE points at its ALLOC's rowid, set at load
 * from the scanner's hash table), plus open_allocs for the never freed: a separate pairs table
 * cost a third of the load time. Memory kinds 0 (unknown) and 1 (device) are GPU memory. Unsigned 64-bit values (addresses, ns timestamps) are stored as SQLite's signed
 * integers, bit for bit; no real address or timestamp reaches 2^63. Streams and callsites that
 * are absent are NULL. */
#include "analyze/ana_db_internal.h"

static const char schema_sql[] =
    "CREATE TABLE schema_version(\n"
    "  version INTEGER NOT NULL,            -- ANA_SCHEMA_VERSION\n"
    "  created_by TEXT NOT NULL             -- 'gpuanalyze 0.1.0'\n"
    ");\n"
    "CREATE TABLE traces(\n"
    "  trace_id INTEGER PRIMARY KEY,\n"
    "  content_hash TEXT NOT NULL UNIQUE,   -- identity: same bytes -> same trace (reload skips)\n"
    "  path TEXT NOT NULL,                  -- as given to load\n"
    "  format_version INTEGER, min_reader INTEGER,\n"
    "  capture_mode TEXT, tool TEXT, host TEXT, pid INTEGER,\n"
    "  rank INTEGER, world_size INTEGER,    -- NULL when not set\n"
    "  start_time_ns INTEGER,               -- wall clock at ts 0 (joins results runs)\n"
    "  gpu_name TEXT, gpu_uuid TEXT, gpu_total_mem INTEGER,\n"
    "  driver_version TEXT, cuda_version TEXT, cupti_version TEXT, command_line TEXT,\n"
    "  events INTEGER, duration_ns INTEGER,\n"
    "  first_ev_id INTEGER, last_ev_id INTEGER,       -- rowid range in events\n"
    "  requested_bytes_total INTEGER,\n"
    "  peak_live_bytes INTEGER,             -- max live requested device bytes (the lower bound)\n"
    "  peak_live_seq INTEGER, peak_live_ts_ns INTEGER,\n"
    "  live_bytes_at_end INTEGER, peak_segment_bytes INTEGER,\n"
    "  n_devices INTEGER, n_streams INTEGER,\n"
    "  chunks INTEGER, seq_gaps INTEGER, dropped INTEGER, unknown_records INTEGER,\n"
    "  truncated INTEGER, has_index INTEGER,\n"
    "  unknown_free INTEGER, double_alloc INTEGER,\n"
    "  loaded_unix_ns INTEGER\n"
    ");\n"
    "CREATE TABLE trace_kv(\n"
    "  trace_id INTEGER NOT NULL REFERENCES traces(trace_id),\n"
    "  key TEXT NOT NULL, value TEXT,\n"
    "  PRIMARY KEY(trace_id, key)\n"
    ");\n"
    "CREATE TABLE trace_devices(            -- per device (the first 16 a trace uses)\n"
    "  trace_id INTEGER NOT NULL REFERENCES traces(trace_id),\n"
    "  device INTEGER NOT NULL, peak_live_bytes INTEGER NOT NULL,\n"
    "  PRIMARY KEY(trace_id, device)\n"
    ");\n"
    "CREATE TABLE trace_kinds(              -- event counts by kind\n"
    "  trace_id INTEGER NOT NULL REFERENCES traces(trace_id),\n"
    "  kind TEXT NOT NULL, count INTEGER NOT NULL,\n"
    "  PRIMARY KEY(trace_id, kind)\n"
    ");\n"
    "CREATE TABLE strings(                  -- the trace's string table (callsites, marker names)\n"
    "  trace_id INTEGER NOT NULL REFERENCES traces(trace_id),\n"
    "  string_id INTEGER NOT NULL, text TEXT NOT NULL,\n"
    "  PRIMARY KEY(trace_id, string_id)\n"
    ");\n"
    "CREATE TABLE events(                   -- every event; rowid order = trace order\n"
    "  ev_id INTEGER PRIMARY KEY,\n"
    "  trace_id INTEGER NOT NULL,\n"
    "  ts_ns INTEGER NOT NULL, kind INTEGER NOT NULL, device INTEGER NOT NULL,\n"
    "  stream INTEGER, addr INTEGER NOT NULL, size INTEGER NOT NULL,\n"
    "  mem_kind INTEGER NOT NULL, flags INTEGER NOT NULL,\n"
    "  corr_id INTEGER NOT NULL, callsite INTEGER, context INTEGER NOT NULL,\n"
    "  ends_ev_id INTEGER                   -- the ALLOC this event ends (FREE, or ALLOC over a live address)\n"
    ");\n"
    "CREATE TABLE open_allocs(              -- ALLOCs never freed by the end of the trace\n"
    "  trace_id INTEGER NOT NULL, ev_id INTEGER NOT NULL,\n"
    "  PRIMARY KEY(trace_id, ev_id)\n"
    ") WITHOUT ROWID;\n"
    "CREATE TABLE trace_timeline(           -- live requested bytes, max per time bucket\n"
    "  trace_id INTEGER NOT NULL REFERENCES traces(trace_id),\n"
    "  i INTEGER NOT NULL, ts_ns INTEGER NOT NULL, live_bytes INTEGER NOT NULL,\n"
    "  PRIMARY KEY(trace_id, i)\n"
    ");\n"
    "CREATE TABLE size_histogram(           -- GPU requests by power-of-two size class (made at load)\n"
    "  trace_id INTEGER NOT NULL REFERENCES traces(trace_id),\n"
    "  size_log2 INTEGER NOT NULL,          -- floor(log2(size)); -1 for size 0\n"
    "  allocs INTEGER NOT NULL, bytes INTEGER NOT NULL,\n"
    "  PRIMARY KEY(trace_id, size_log2)\n"
    ");\n"
    "CREATE TABLE lifetime_histogram(       -- GPU allocation lifetimes (made at load)\n"
    "  trace_id INTEGER NOT NULL REFERENCES traces(trace_id),\n"
    "  log10_ns INTEGER NOT NULL,           -- floor(log10(lifetime ns)), 0 for < 10 ns; -1: never freed\n"
    "  allocs INTEGER NOT NULL, bytes INTEGER NOT NULL,\n"
    "  PRIMARY KEY(trace_id, log10_ns)\n"
    ");\n"
    "CREATE TABLE results(                  -- one gpureplay results file\n"
    "  results_id INTEGER PRIMARY KEY,\n"
    "  content_hash TEXT NOT NULL UNIQUE,\n"
    "  path TEXT NOT NULL, version INTEGER, tool TEXT, created_unix_ns INTEGER\n"
    ");\n"
    "CREATE TABLE runs(                     -- one policy replay\n"
    "  run_id INTEGER PRIMARY KEY,\n"
    "  results_id INTEGER NOT NULL REFERENCES results(results_id),\n"
    "  trace_path TEXT, trace_start_time_ns INTEGER, trace_pid INTEGER,\n"
    "  policy TEXT NOT NULL, backend TEXT, capacity_bytes INTEGER, events INTEGER,\n"
    "  peak_reserved_bytes INTEGER, peak_allocated_bytes INTEGER, peak_requested_bytes INTEGER,\n"
    "  lower_bound_bytes INTEGER, fragmentation_at_peak REAL, fragmentation_mean REAL,\n"
    "  device_alloc_calls INTEGER, device_free_calls INTEGER, alloc_retries INTEGER, ooms INTEGER,\n"
    "  first_oom_event INTEGER, first_oom_ts_ns INTEGER,\n"
    "  replay_seconds REAL, events_per_second REAL,\n"
    "  summary_json TEXT NOT NULL           -- the whole run object except its timeline\n"
    ");\n"
    "CREATE TABLE run_timeline(             -- a run's downsampled timeline as written by gpureplay\n"
    "  run_id INTEGER NOT NULL REFERENCES runs(run_id),\n"
    "  i INTEGER NOT NULL, ts_ns INTEGER NOT NULL,\n"
    "  reserved INTEGER NOT NULL, allocated INTEGER NOT NULL, requested INTEGER NOT NULL,\n"
    "  PRIMARY KEY(run_id, i)\n"
    ");\n"
    /* Views: the questions the report asks, answerable from the sqlite3 shell too. */
    "CREATE VIEW v_runs AS                  -- runs with the trace they replayed (NULL if not loaded)\n"
    "  SELECT r.*, t.trace_id AS trace_id FROM runs r\n"
    "  LEFT JOIN traces t ON t.start_time_ns = r.trace_start_time_ns AND t.pid = r.trace_pid;\n"
    "CREATE VIEW v_events AS\n"
    "  SELECT e.ev_id - t.first_ev_id AS seq, e.* FROM events e JOIN traces t USING(trace_id);\n"
    "CREATE VIEW v_allocations AS           -- each ALLOC with the event that ended it (NULL: never)\n"
    "  SELECT a.trace_id, a.ev_id AS alloc_ev_id, e.ev_id AS end_ev_id,\n"
    "         a.ev_id - t.first_ev_id AS alloc_seq, e.ev_id - t.first_ev_id AS free_seq,\n"
    "         a.ts_ns AS t_alloc_ns, e.ts_ns AS t_free_ns, a.device, a.stream, a.addr, a.size,\n"
    "         a.mem_kind, a.callsite, a.mem_kind IN (0, 1) AS counts\n"
    "  FROM events e CROSS JOIN events a CROSS JOIN traces t\n"
    "  WHERE e.ends_ev_id IS NOT NULL AND a.ev_id = e.ends_ev_id AND t.trace_id = a.trace_id\n"
    "  UNION ALL\n"
    "  SELECT a.trace_id, a.ev_id, NULL, a.ev_id - t.first_ev_id, NULL, a.ts_ns, NULL, a.device,\n"
    "         a.stream, a.addr, a.size, a.mem_kind, a.callsite, a.mem_kind IN (0, 1)\n"
    "  FROM open_allocs o JOIN events a ON a.ev_id = o.ev_id JOIN traces t ON t.trace_id = o.trace_id;\n"
    "CREATE VIEW v_size_histogram AS        -- size_histogram recomputed from events\n"
    "  SELECT trace_id, CASE WHEN size = 0 THEN -1 ELSE CAST(log2(size) AS INTEGER) END AS size_log2,\n"
    "         COUNT(*) AS allocs, SUM(size) AS bytes\n"
    "  FROM events WHERE kind = 1 AND mem_kind IN (0, 1) GROUP BY trace_id, size_log2;\n"
    "CREATE VIEW v_lifetimes AS             -- each GPU allocation's lifetime (NULL: never freed)\n"
    "  SELECT trace_id, alloc_ev_id, alloc_seq, free_seq, size, stream, callsite,\n"
    "         t_free_ns - t_alloc_ns AS lifetime_ns\n"
    "  FROM v_allocations WHERE counts;\n"
    "CREATE VIEW v_lifetime_histogram AS    -- lifetime_histogram recomputed from v_lifetimes\n"
    "  SELECT trace_id,\n"
    "         CASE WHEN lifetime_ns IS NULL THEN -1 WHEN lifetime_ns < 1 THEN 0\n"
    "              ELSE length(CAST(lifetime_ns AS TEXT)) - 1 END AS log10_ns, -- exact, unlike log10()\n"
    "         COUNT(*) AS allocs, SUM(size) AS bytes\n"
    "  FROM v_lifetimes GROUP BY trace_id, log10_ns;\n"
    "CREATE VIEW v_live_at_peak AS          -- the GPU allocations live at each trace's peak\n"
    "  SELECT a.trace_id, a.ev_id - t.first_ev_id AS alloc_seq, a.ts_ns AS t_alloc_ns, a.device,\n"
    "         a.stream, a.addr, a.size, a.mem_kind, a.callsite\n"
    "  FROM traces t CROSS JOIN events e CROSS JOIN events a -- CROSS: this join order, by rowid\n"
    "  WHERE e.ev_id BETWEEN t.first_ev_id + t.peak_live_seq + 1 AND t.last_ev_id\n"
    "    AND e.ends_ev_id BETWEEN t.first_ev_id AND t.first_ev_id + t.peak_live_seq\n"
    "    AND a.ev_id = e.ends_ev_id AND a.mem_kind IN (0, 1)\n"
    "  UNION ALL\n"
    "  SELECT a.trace_id, a.ev_id - t.first_ev_id, a.ts_ns, a.device, a.stream, a.addr, a.size,\n"
    "         a.mem_kind, a.callsite\n"
    "  FROM traces t CROSS JOIN open_allocs o CROSS JOIN events a\n"
    "  WHERE o.trace_id = t.trace_id AND a.ev_id = o.ev_id\n"
    "    AND a.ev_id <= t.first_ev_id + t.peak_live_seq AND a.mem_kind IN (0, 1);\n";

const char *ana_schema_sql(void) { return schema_sql; }

/* Columns added to version 1 after it first shipped, in order: not in the DDL above, so that a
 * fresh database and an older file get them the same way (ALTER TABLE ... ADD COLUMN in
 * ana_db_open). Trailing columns do not change the schema version (SCHEMA.md "Versioning"). */
const ana_added_column_t ana_added_columns[] = {
    /* the salvaging reader's account of a damaged trace (formats/SPEC.md "Salvage") */
    {"traces", "damaged_chunks", "INTEGER NOT NULL DEFAULT 0"},
    {"traces", "lost_events", "INTEGER NOT NULL DEFAULT 0"},
    {"traces", "uncounted_chunks", "INTEGER NOT NULL DEFAULT 0"},
    {"traces", "damaged_bytes", "INTEGER NOT NULL DEFAULT 0"},
    {"traces", "index_damaged", "INTEGER NOT NULL DEFAULT 0"},
    {"traces", "partial", "INTEGER NOT NULL DEFAULT 0"},   /* damaged chunks skipped: events lost */
    {"traces", "real_path", "TEXT"},                       /* canonical path: a reload replaces */
    {"traces", "file_size", "INTEGER"},
    {"runs", "trace_partial", "INTEGER NOT NULL DEFAULT 0"}, /* replayed from a damaged trace */
    /* issue 17: each device's peak of every byte mapped (framework, libraries, unknown) */
    {"trace_devices", "peak_mapped_bytes", "INTEGER"},
    {"traces", "events_loaded", "INTEGER NOT NULL DEFAULT 1"}, /* 0: summaries only (ranks) */
    /* issue 14: the report reads summaries, never events (ana_load_peak.c). 0: a trace loaded
     * by an older gpuanalyze, without them: the report refuses it, a load upgrades it. */
    {"traces", "report_summaries", "INTEGER NOT NULL DEFAULT 0"},
    {"traces", "last_ts_ns", "INTEGER"},          /* the last event's ts: the timeline's span */
    {"traces", "peak_live_allocs", "INTEGER"},    /* GPU allocations live at the peak */
    {"traces", "peak_live_callsites", "INTEGER"}, /* distinct callsites among them */
    {"traces", "failed_size", "INTEGER"},         /* the recorded run's first failed request */
    {"traces", "failed_stream", "INTEGER"},
    {"traces", "failed_ts_ns", "INTEGER"},
    {"traces", "failed_callsite", "TEXT"},
    {NULL, NULL, NULL}};

/* Tables added to version 1 after it shipped: per-trace summaries made at load, so that views
 * over many traces (the ranks of a job) never read events. */
const char ana_added_tables_sql[] =
    "CREATE TABLE IF NOT EXISTS trace_owners(  -- who held each device's bytes (formats gmt_owners)\n"
    "  trace_id INTEGER NOT NULL REFERENCES traces(trace_id),\n"
    "  device INTEGER NOT NULL, owner TEXT NOT NULL,\n"
    "  owner_kind TEXT NOT NULL,               -- framework | library | unknown\n"
    "  at_peak_bytes INTEGER NOT NULL,         -- at the device's peak of mapped bytes\n"
    "  peak_bytes INTEGER NOT NULL,            -- the owner's own peak\n"
    "  PRIMARY KEY(trace_id, device, owner)\n"
    ");\n"
    "CREATE TABLE IF NOT EXISTS trace_peak_callsites( -- live at the trace's peak, by callsite (top 50)\n"
    "  trace_id INTEGER NOT NULL REFERENCES traces(trace_id),\n"
    "  callsite TEXT NOT NULL, allocs INTEGER NOT NULL, bytes INTEGER NOT NULL,\n"
    "  PRIMARY KEY(trace_id, callsite)\n"
    ");\n"
    "CREATE TABLE IF NOT EXISTS trace_peak_streams( -- live at the trace's peak, by stream\n"
    "  trace_id INTEGER NOT NULL REFERENCES traces(trace_id),\n"
    "  stream INTEGER, allocs INTEGER NOT NULL, bytes INTEGER NOT NULL\n"
    ");\n"
    "CREATE TABLE IF NOT EXISTS trace_peak_allocs( -- the 25 largest allocations live at the peak\n"
    "  trace_id INTEGER NOT NULL REFERENCES traces(trace_id),\n"
    "  alloc_seq INTEGER NOT NULL, size INTEGER NOT NULL, device INTEGER NOT NULL,\n"
    "  stream INTEGER, callsite INTEGER,   -- callsite: string_id in strings\n"
    "  t_alloc_ns INTEGER NOT NULL\n"
    ");\n"
    "CREATE TABLE IF NOT EXISTS trace_stack_classes( -- the stacked timeline's classes\n"
    "  trace_id INTEGER NOT NULL REFERENCES traces(trace_id),\n"
    "  class INTEGER NOT NULL,             -- 0: the most bytes live at the peak\n"
    "  kind TEXT NOT NULL,                 -- callsite | none (no callsite) | rest | all\n"
    "  callsite TEXT,                      -- the callsite's text (kind callsite)\n"
    "  peak_bytes INTEGER NOT NULL,        -- its bytes live at the peak (0 for rest, all)\n"
    "  PRIMARY KEY(trace_id, class)\n"
    ");\n"
    "CREATE TABLE IF NOT EXISTS trace_stack_timeline( -- live bytes per class, max per time bucket\n"
    "  trace_id INTEGER NOT NULL REFERENCES traces(trace_id),\n"
    "  bucket INTEGER NOT NULL,            -- time bucket * (last_ts_ns + 1) / 800\n"
    "  total_bytes INTEGER NOT NULL,       -- the bucket's highest live total\n"
    "  class_bytes TEXT NOT NULL,          -- each class's live bytes then, comma-separated\n"
    "  PRIMARY KEY(trace_id, bucket)\n"
    ");\n"
    "CREATE TABLE IF NOT EXISTS report_replays( -- what `report` asked gpureplay for a trace, to reuse it\n"
    "  trace_hash TEXT PRIMARY KEY,        -- traces.content_hash\n"
    "  what TEXT NOT NULL,                 -- tune (the tuner's search and the grid) | sweep\n"
    "  tool TEXT NOT NULL,                 -- gpureplay --version's first line; its binary's size and mtime\n"
    "  options TEXT NOT NULL               -- the options that change its figures\n"
    ");\n"
    "CREATE TABLE IF NOT EXISTS trace_oom(    -- why it ran out: gpureplay --explain-oom's object\n"
    "  trace_id INTEGER PRIMARY KEY REFERENCES traces(trace_id),\n"
    "  json TEXT NOT NULL                  -- as `gpuanalyze oom --json` prints it, less the paste line\n"
    ");\n"
    /* v_runs joins runs to their trace by process: a report over hundreds of ranks asks it per
     * trace (256 ranks x 15 runs: text report 13.2 s -> 4.2 s, bench/RESULTS.md "Ranks") */
    "CREATE INDEX IF NOT EXISTS runs_trace ON runs(trace_start_time_ns, trace_pid);\n"
    "CREATE INDEX IF NOT EXISTS traces_process ON traces(start_time_ns, pid);\n";
