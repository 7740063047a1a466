/* merge_mem_bench.c: gpurec's memory when it merges a long streamed recording (issue 24 item 4:
 * at most 64 MiB in gpurec whatever the length). Writes a process trace of N streamed allocations
 * (segment_alloc once, then alloc / free_requested / free_completed per allocation, flagged
 * GMT_F_TORCH_STREAM as rec_torch_stream.c writes them, 50 live, one stream; and beside them, as
 * CUPTI's side of a long job has them, a marker every 4 allocations and a device usage sample
 * every 16, which the merge keeps, in order, without holding them), merges it with a
 * snapshot pickle as gpurec does after the job (snap_merge_file), and prints the merge's wall
 * time and the process's peak resident memory. With "churn", a 2 MiB segment is also freed and
 * allocated again every 8 allocations (a job that empties the cache each step), with the driver's
 * cudaFree/cudaMalloc beside: what the merge still holds grows with those (segment calls).
 * With "held", the merge that holds every CUPTI event and segment call (the tests' reference).
 *   merge_mem_bench N SNAPSHOT.pickle DIR [churn] [held] */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "formats/gmt.h"
#include "recorder/snapshot/snap_import.h"
#include "recorder/snapshot/snap_internal.h"

static long rss_kib(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;
}

int main(int argc, char **argv) {
  int churn = 0, held = 0, bad = argc < 4;
  for (int i = 4; i < argc; i++) {
    churn |= !strcmp(argv[i], "churn");
    held |= !strcmp(argv[i], "held");
    bad |= strcmp(argv[i], "churn") && strcmp(argv[i], "held");
  }
  if (bad) {
    fprintf(stderr, "usage: merge_mem_bench N SNAPSHOT.pickle DIR [churn] [held]\n");
    return 2;
  }
  uint64_t n = strtoull(argv[1], NULL, 10);
  char trace[4096], out[4096];
  snprintf(trace, sizeof trace, "%s/merge_mem.zst", argv[3]);
  snprintf(out, sizeof out, "%s/merge_mem.merged.zst", argv[3]);
  gmt_header_t h;
  gmt_header_init(&h);
  h.pid = 4242;
  h.start_time_ns = 1;
  gm_err_t err;
  gm_err_clear(&err);
  gmt_writer_t *w = NULL;
  if (gmt_writer_open(&w, trace, &h, NULL, &err) < 0) {
    fprintf(stderr, "merge_mem_bench: %s\n", err.msg);
    return 1;
  }
  const uint64_t seg = 0x7f0000000000ull, stream = 0x55aa;
  gmt_event_t ev;
  memset(&ev, 0, sizeof ev);
  ev.mem_kind = GMT_MEM_DEVICE;
  ev.flags = GMT_F_TORCH_STREAM;
  ev.stream = stream;
  ev.kind = GMT_EV_SEGMENT_ALLOC;
  ev.addr = seg;
  ev.size = 20u << 20;
  ev.ts_ns = 1000;
  gm_status_t s = gmt_writer_append(w, &ev, &err);
  uint32_t step = 0;
  if (s == GM_OK) s = gmt_writer_intern(w, "step", &step, &err);
  uint64_t t = 2000, side = 0, extra = 0; /* CUPTI's side kept; the churn's segment calls */
  for (uint64_t i = 0; i < n && s == GM_OK; i++) {
    uint64_t a = seg + (i % 51) * 8192;
    if (i >= 50) { /* the oldest of the 50 live goes */
      uint64_t old = seg + ((i - 50) % 51) * 8192;
      ev.kind = GMT_EV_FREE_REQUESTED, ev.addr = old, ev.size = 4096, ev.ts_ns = t++;
      if ((s = gmt_writer_append(w, &ev, &err)) == GM_OK) {
        ev.kind = GMT_EV_FREE, ev.ts_ns = t++;
        s = gmt_writer_append(w, &ev, &err);
      }
    }
    ev.kind = GMT_EV_ALLOC, ev.addr = a, ev.size = 4096, ev.ts_ns = t++;
    if (s == GM_OK) s = gmt_writer_append(w, &ev, &err);
    if (s == GM_OK && churn && i % 8 == 7) { /* the cache emptied: a segment freed, allocated again */
      const uint64_t cseg = 0x7e0000000000ull;
      gmt_event_t d;
      memset(&d, 0, sizeof d);
      d.mem_kind = GMT_MEM_DEVICE;
      d.stream = GMT_STREAM_NONE;
      d.size = 2u << 20;
      d.addr = cseg;
      d.context = 1;
      for (int k = 0; k < 2 && s == GM_OK; k++) { /* the allocator's call, then the driver's */
        gmt_event_t e2 = ev;
        e2.kind = i > 7 && k == 0 ? GMT_EV_SEGMENT_FREE : GMT_EV_SEGMENT_ALLOC;
        if (k == 0 && i <= 7) continue;
        e2.addr = cseg, e2.size = d.size, e2.ts_ns = t++;
        d.kind = e2.kind == GMT_EV_SEGMENT_FREE ? GMT_EV_FREE : GMT_EV_ALLOC;
        d.ts_ns = e2.ts_ns;
        d.corr_id = t;
        if ((s = gmt_writer_append(w, &d, &err)) == GM_OK) s = gmt_writer_append(w, &e2, &err);
        extra++;
      }
    }
    if (s == GM_OK && i % 4 == 3) { /* CUPTI's side: not requests, not held by the merge */
      gmt_event_t m;
      memset(&m, 0, sizeof m);
      m.ts_ns = t++;
      m.stream = GMT_STREAM_NONE;
      m.kind = i % 16 == 15 ? GMT_EV_DEVICE_USAGE : GMT_EV_MARKER;
      m.callsite = m.kind == GMT_EV_MARKER ? step : GMT_NO_STRING;
      m.mem_kind = GMT_MEM_DEVICE;
      m.addr = m.kind == GMT_EV_MARKER ? 0 : GMT_USAGE_PROCESS;
      m.size = m.kind == GMT_EV_MARKER ? i : 1u << 30;
      s = gmt_writer_append(w, &m, &err);
      side++;
    }
  }
  if (s == GM_OK) s = gmt_writer_close(w, &err);
  gmt_header_free(&h);
  if (s < 0) {
    fprintf(stderr, "merge_mem_bench: %s\n", err.msg);
    return 1;
  }
  long before = rss_kib();
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  snap_merge_stats_t ms;
  s = held ? snap_merge_file_held(argv[2], trace, out, &ms, &err)
           : snap_merge_file(argv[2], trace, out, "none", NULL, &ms, &err);
  clock_gettime(CLOCK_MONOTONIC, &b);
  if (s < 0) {
    fprintf(stderr, "merge_mem_bench: merge: %s\n", err.msg);
    return 1;
  }
  long after = rss_kib();
  /* the merged trace holds every request, in order, after the snapshot's initial state (read
   * back: not part of the figures) */
  uint64_t want = 1 + n + 2 * (n > 50 ? n - 50 : 0) + extra, got = 0, allocs = 0, last = 0;
  int ordered = 1;
  gmt_reader_t *r = NULL;
  if (gmt_reader_open(&r, out, &err) == GM_OK) {
    while (gmt_reader_next(r, &ev, &err) == GM_OK) {
      got++;
      allocs += ev.kind == GMT_EV_ALLOC;
      ordered &= ev.ts_ns >= last && !(ev.flags & GMT_F_TORCH_STREAM);
      last = ev.ts_ns;
    }
    gmt_reader_close(r);
  }
  printf("allocations %" PRIu64 " events %" PRIu64 " merge %.2f s peak RSS %ld KiB (%ld KiB before the merge)\n",
         n, want + side, (double)(b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9, after, before);
  if (ms.entries != want || got != ms.history_events + ms.external + side || allocs < n || !ordered) {
    fprintf(stderr, "merge_mem_bench: the merged trace has %" PRIu64 " events (%" PRIu64 " allocs), %s\n", got,
            allocs, ordered ? "in order" : "NOT in order or still flagged");
    fprintf(stderr, "  (merge: %" PRIu64 " entries, %" PRIu64 " events with the initial state, %" PRIu64 " external)\n",
            ms.entries, ms.history_events, ms.external);
    return 1;
  }
  remove(trace);
  remove(out);
  return 0;
}
