/* ana_run_fields.h: the keys of a replay run's summary_json that the analyzer's SQL reads,
 * each spelled once.
 *
 * runs.summary_json is gpureplay's whole run object but its timeline (SCHEMA.md, table runs):
 * keys added after the columns were drawn live only there, so that databases written by an
 * older gpuanalyze keep opening and a newer gpureplay's keys are kept. The SQL reads them with
 * SQLite's json_extract; these macros give each key one name, so a key renamed in gpureplay
 * (replay/RESULTS.md) is changed here and the compiler finds every reader. Each expands to a
 * string literal, e.g. ANA_RF_DEVICE("r.summary_json") is "json_extract(r.summary_json,
 * '$.device')", so a query stays one string:
 *   "SELECT COALESCE(" ANA_RF_TIMING_SENSITIVE("summary_json") ", 0) FROM runs"
 * A key absent from a run (an older gpureplay) reads as NULL: callers COALESCE it. */
#ifndef ANA_RUN_FIELDS_H
#define ANA_RUN_FIELDS_H

/* json_extract(col, '$.path') as SQL text; col and path are string literals. */
#define ANA_RF(col, path) "json_extract(" col ", '$." path "')"

#define ANA_RF_DEVICE(col)                                    ANA_RF(col, "device") /* integer: the device replayed */
#define ANA_RF_DEVICE_MEMORY_ASSUMED(col)                     ANA_RF(col, "device_memory_assumed") /* true/false: no device size known, one was assumed */
#define ANA_RF_DEVICE_MEMORY_BYTES(col)                       ANA_RF(col, "device_memory_bytes") /* integer bytes: the device size replayed under */
#define ANA_RF_PARTIAL(col)                                   ANA_RF(col, "partial") /* true/false: the trace was salvaged */
#define ANA_RF_RECORDED_MAPPED_PEAK_BYTES(col)                ANA_RF(col, "recorded_mapped_peak_bytes") /* integer: the recorded allocator's own segments + maps at their peak, the replayed device */
#define ANA_RF_PEAK_REQUESTED_PLUS_EXTERNAL_BYTES(col)        ANA_RF(col, "peak_requested_plus_external_bytes") /* integer bytes */
#define ANA_RF_PEAK_RESERVED_RANGE_HIGH_BYTES(col)            ANA_RF(col, "peak_reserved_range.high_bytes") /* integer bytes: the range's top under other event timings */
#define ANA_RF_PEAK_RESERVED_RANGE_LOW_BYTES(col)             ANA_RF(col, "peak_reserved_range.low_bytes") /* integer bytes: its bottom */
#define ANA_RF_PEAK_RESERVED_RANGE_MOVED_BY(col)              ANA_RF(col, "peak_reserved_range.moved_by") /* text: what moves it ("stream_events", "async_pool") */
#define ANA_RF_PEAK_SNAPSHOT_CACHED_SEGMENTS_BYTES(col)       ANA_RF(col, "peak_snapshot.cached_segments_bytes") /* integer bytes */
#define ANA_RF_PEAK_SNAPSHOT_FREE_IN_SEGMENTS_BYTES(col)      ANA_RF(col, "peak_snapshot.free_in_segments_bytes") /* integer bytes */
#define ANA_RF_PEAK_SNAPSHOT_MAP(col)                         ANA_RF(col, "peak_snapshot.map") /* JSON array: the segments at the peak */
#define ANA_RF_PEAK_SNAPSHOT_REQUESTED_BYTES(col)             ANA_RF(col, "peak_snapshot.requested_bytes") /* integer bytes */
#define ANA_RF_PEAK_SNAPSHOT_RESERVED_BYTES(col)              ANA_RF(col, "peak_snapshot.reserved_bytes") /* integer bytes */
#define ANA_RF_PEAK_SNAPSHOT_ROUNDING_BYTES(col)              ANA_RF(col, "peak_snapshot.rounding_bytes") /* integer bytes */
#define ANA_RF_PEAK_SNAPSHOT_SEGMENTS(col)                    ANA_RF(col, "peak_snapshot.segments") /* integer: segments at the peak */
#define ANA_RF_PEAK_SNAPSHOT_SEGMENTS_IN_USE(col)             ANA_RF(col, "peak_snapshot.segments_in_use") /* integer */
#define ANA_RF_PEAK_SNAPSHOT_TS_NS(col)                       ANA_RF(col, "peak_snapshot.ts_ns") /* integer: when the peak was */
#define ANA_RF_PREDICTED(col)                                 ANA_RF(col, "predicted") /* text: the prediction the trace came from (absent: a recording) */
#define ANA_RF_RECORDED_FAILURES_CAPACITY_NOTE(col)           ANA_RF(col, "recorded_failures.capacity_note") /* text: where the capacity came from */
#define ANA_RF_RECORDED_FAILURES_COUNT(col)                   ANA_RF(col, "recorded_failures.count") /* integer: failed requests in the recording */
#define ANA_RF_RECORDED_FAILURES_DEVICE_FREE_BYTES(col)       ANA_RF(col, "recorded_failures.device_free_bytes") /* integer bytes */
#define ANA_RF_RECORDED_FAILURES_FIRST_CALLSITE(col)          ANA_RF(col, "recorded_failures.first_callsite") /* text */
#define ANA_RF_RECORDED_FAILURES_FIRST_SIZE(col)              ANA_RF(col, "recorded_failures.first_size") /* integer bytes */
#define ANA_RF_RECORDED_FAILURES_FIRST_STREAM(col)            ANA_RF(col, "recorded_failures.first_stream") /* integer, null: a synchronous request */
#define ANA_RF_RECORDED_FAILURES_FIRST_TS_NS(col)             ANA_RF(col, "recorded_failures.first_ts_ns") /* integer */
#define ANA_RF_RECORDED_FAILURES_LIVE_BYTES(col)              ANA_RF(col, "recorded_failures.live_bytes") /* integer bytes */
#define ANA_RF_RECORDED_FAILURES_RECORDED_RESERVED_BYTES(col) ANA_RF(col, "recorded_failures.recorded_reserved_bytes") /* integer bytes */
#define ANA_RF_TIMING_SENSITIVE(col)                          ANA_RF(col, "timing_sensitive") /* true/false: the peak depends on event timing */
#define ANA_RF_TUNE_BEST_BYTES(col)                           ANA_RF(col, "tune.best_bytes") /* integer bytes: the point's best case (timing, placement, predicted sizes); absent: not computed */
#define ANA_RF_TUNE_BUDGET_S(col)                             ANA_RF(col, "tune.budget_s") /* real: the time budget */
#define ANA_RF_TUNE_DRIVER_TIME_P50_S(col)                    ANA_RF(col, "tune.driver_time_p50_s") /* real seconds */
#define ANA_RF_TUNE_DRIVER_TIME_P99_S(col)                    ANA_RF(col, "tune.driver_time_p99_s") /* real seconds */
#define ANA_RF_TUNE_FROM_GRID(col)                            ANA_RF(col, "tune.from_grid") /* true/false */
#define ANA_RF_TUNE_NEEDS_BYTES(col)                          ANA_RF(col, "tune.needs_bytes") /* integer bytes */
#define ANA_RF_TUNE_POOL(col)                                 ANA_RF(col, "tune.pool") /* true, absent: not a pool setting */
#define ANA_RF_PLACEMENT_BUMP_BYTES(col)                      ANA_RF(col, "placement_bump_bytes") /* absent: the bump pointer gives the same peak (issue 25) */
#define ANA_RF_TUNE_SEARCHED(col)                             ANA_RF(col, "tune.searched") /* text: how a long trace was searched (absent: on every event) */
#define ANA_RF_TUNE_ROLE(col)                                 ANA_RF(col, "tune.role") /* text: the tuner's role for this run */
#define ANA_RF_TUNE_SMALLEST_GPU_GIB(col)                     ANA_RF(col, "tune.smallest_gpu_gib") /* integer */
#define ANA_RF_TUNE_WORST_BYTES(col)                          ANA_RF(col, "tune.worst_bytes") /* integer bytes: its worst case; absent: not computed */
#define ANA_RF_TUNE_WORST_OOM(col)                            ANA_RF(col, "tune.worst_oom") /* true: another timing or placement runs out of memory; absent: not */

#endif /* ANA_RUN_FIELDS_H */
