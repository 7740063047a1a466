/* export_perfetto.h: a replayed run as Chrome / Perfetto trace JSON (gpureplay --export-perfetto).
 *
 * The file opens in ui.perfetto.dev and chrome://tracing (the Trace Event Format, JSON object
 * form): counter tracks of the live (requested) bytes and of each replayed policy's reserved
 * bytes, and the trace's allocations as complete events ("X") from alloc to free, on tracks
 * per stream. Its size does not grow with the trace: the counters are the replay's own
 * downsampled timeline (engine_timeline.c, at most RP_TIMELINE_MAX points per series, each the
 * maximum over its time bucket), and at most GR_PERFETTO_MAX_SLICES allocations are written:
 * every allocation alive at the peak of live bytes first (largest first), then the largest of
 * the others. The file's "otherData" says which were left out. Internal to //replay. */
#ifndef EXPORT_PERFETTO_H
#define EXPORT_PERFETTO_H

#include <stdint.h>

#include "replay/tool/gpureplay.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GR_PERFETTO_MAX_SLICES 10000 /* allocations written as slices */
#define GR_PERFETTO_LANES 64         /* tracks per stream: overlapping slices cannot share one */
#define GR_PERFETTO_STREAMS 64       /* streams with tracks of their own; the rest share one */

typedef struct gr_perfetto_stats {
  uint64_t allocations;      /* device allocations of the replayed device in the trace */
  uint64_t slices;           /* written */
  uint64_t slices_at_peak;   /* ... of them alive at the peak of live bytes */
  uint64_t alive_at_peak;    /* allocations alive at the peak (written or not) */
  uint64_t dropped_lanes;    /* selected, left out: more than GR_PERFETTO_LANES overlapping */
  uint64_t counter_points;   /* counter events written (all series) */
  uint64_t peak_live_bytes, peak_ts_ns;
  uint64_t bytes;            /* size of the file */
  double seconds;            /* the export's own time (both passes and the writing) */
} gr_perfetto_stats_t;

/* Write path (whole or not at all: base's gm_out) for the replay of trace_path whose results
 * are res[0..n) (one per policy, the same device: res[0]->device). The trace is read twice
 * (the peak of live bytes, then the slices); memory follows the live allocations. */
gm_status_t gr_export_perfetto(const char *path, const gr_config_t *cfg, const char *trace_path,
                               const gr_trace_info_t *info, rp_result_t *const *res, int n,
                               gr_perfetto_stats_t *st, gm_err_t *err);

#ifdef __cplusplus
}
#endif
#endif /* EXPORT_PERFETTO_H */
