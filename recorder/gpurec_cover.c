/* gpurec_cover.c: coverage marks for a trace whose process was killed (issue 24 item 3).
 *
 * A process killed by a signal it cannot handle (SIGKILL from the OOM killer or a scheduler)
 * never closes its trace: the file ends after the last chunk its writer flushed, at most one
 * flush interval (REC_FLUSH_INTERVAL_NS) before the kill, and has no index. The reader already
 * reads such a file and finds it truncated; in the default mode gpurec's merge then writes a
 * whole new trace, which would read as complete. So gpurec, which saw the process die, writes
 * what it knows into the header: the trace covers the run only up to its last event, why (the
 * signal, when), and how much may be missing. The header is rewritten in place inside the room
 * the recorder reserved (gmt_trace_mark): no copy of the trace, so this works on a full disk. */
#include <stdio.h>
#include <string.h>

#include "base/gm_base.h"
#include "formats/gmt.h"
#include "recorder/gpurec_cover.h"
#include "recorder/rec_core.h"

/* Could the trace need a mark? Its file ends before its index, a merge says its CUPTI side
 * did, or the recorder stopped (its count may need redoing after a merge). */
static int maybe_cut(const gmt_reader_t *r) {
  const gmt_header_t *h = gmt_reader_header(r);
  const char *ct = gmt_header_kv_get(h, "torch_history.cupti_truncated");
  const char *why = gmt_header_kv_get(h, "coverage.why");
  return gmt_reader_stats(r)->truncated || (ct && strcmp(ct, "1") == 0) || (why && strstr(why, "stopped"));
}

/* Events, the last one's time and whether the file ends before its index; the events are
 * counted only for a trace that may need a mark (a whole one is not read twice). 0 if
 * unreadable or whole. */
static int scan(const char *path, gmt_header_t *h, uint64_t *events, uint64_t *last_ts, int *truncated) {
  gmt_reader_t *r = NULL;
  if (gmt_reader_open_flags(&r, path, GMT_READ_SALVAGE, NULL) != GM_OK) return 0;
  int ok = maybe_cut(r) && gmt_header_copy(h, gmt_reader_header(r), NULL) == GM_OK;
  const gmt_event_t *evs;
  size_t n;
  *events = *last_ts = 0;
  while (ok && gmt_reader_next_view(r, &evs, &n, NULL) == GM_OK && n) {
    *events += n;
    *last_ts = evs[n - 1].ts_ns;
  }
  *truncated = gmt_reader_stats(r)->truncated;
  gmt_reader_close(r);
  return ok;
}

int gpurec_mark_cut(const char *path, const gpurec_end_t *end, int quiet) {
  gmt_header_t h;
  gmt_header_init(&h);
  uint64_t events = 0, last_ts = 0;
  int truncated = 0;
  if (!scan(path, &h, &events, &last_ts, &truncated)) {
    gmt_header_free(&h);
    return 0;
  }
  const char *ct = gmt_header_kv_get(&h, "torch_history.cupti_truncated"); /* a merge of a cut trace */
  gmt_coverage_t have;
  gmt_coverage(&h, NULL, &have);
  int cut = truncated || (ct && strcmp(ct, "1") == 0);
  gmt_coverage_t c;
  memset(&c, 0, sizeof c);
  if (have.why & GMT_COV_STOPPED) { /* the recorder said where it stopped, in its own events */
    gmt_header_free(&h);
    if (!have.has_end || have.to_event == events) return 0;
    c.has_end = 1; /* a merge added PyTorch's streamed requests: count the trace's own */
    c.to_event = events;
    c.to_ns = last_ts;
    return gmt_trace_mark(path, &c, NULL) == GM_OK;
  }
  if (!cut || (have.why & GMT_COV_KILLED)) { /* whole, or already said */
    gmt_header_free(&h);
    return 0;
  }
  c.partial = 1;
  c.why = GMT_COV_KILLED;
  c.has_end = 1;
  c.to_event = events;
  c.to_ns = last_ts;
  c.flush_ns = REC_FLUSH_INTERVAL_NS;
  if (end && end->signal && (pid_t)h.pid == end->pid) { /* the process gpurec started */
    c.signal = end->signal;
    if (h.start_time_ns && end->died_wall_ns > h.start_time_ns) {
      c.has_killed_at = 1;
      c.killed_ns = end->died_wall_ns - h.start_time_ns;
    }
  }
  gmt_header_free(&h);
  gm_err_t err;
  gm_err_clear(&err);
  if (gmt_trace_mark(path, &c, &err) < 0) {
    if (!quiet)
      fprintf(stderr, "gpurec: %s: WARNING: the process did not finish this trace, and its header cannot say so "
                      "(%s): it covers the run only up to t=%.3f s (%llu events)\n",
              path, err.msg, (double)last_ts / 1e9, (unsigned long long)events);
    return 0;
  }
  return 1;
}
