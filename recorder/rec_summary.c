/* rec_summary.c: what gpurec prints at the end, read back from the traces it wrote.
 *
 * Reading the file back (rather than trusting the recorder's counters) checks that what is on
 * disk is a readable trace and reports what a user of the trace will see: events, duration,
 * bytes per event, the peak of live bytes, records CUPTI dropped, truncation.
 * Live bytes and owners: formats' gmt_owners, the one definition `gpuanalyze info` uses too:
 * "peak live" is the peak of live device requests (ALLOC ... FREE), and "mapped" each device's
 * peak of every byte mapped (requests or the framework's segments, and the VMM maps and driver
 * allocations of NCCL and other libraries), so the two tools print the same figures. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "recorder/rec_summary.h"

static const char *reader_string(void *ctx, uint32_t id) { return gmt_reader_string(ctx, id); }

gm_status_t rec_summary_read(const char *path, rec_summary_t *s, gm_err_t *err) {
  memset(s, 0, sizeof *s);
  struct stat st;
  if (stat(path, &st) == 0) s->file_bytes = (uint64_t)st.st_size;
  gmt_reader_t *r;
  gm_status_t rc = gmt_reader_open(&r, path, err);
  if (rc < 0) return rc;
  const gmt_header_t *h = gmt_reader_header(r);
  s->rank = h->rank;
  s->pid = h->pid;
  snprintf(s->gpu, sizeof s->gpu, "%s", h->gpu_name ? h->gpu_name : "");
  gmt_header_frameworks_text(h, s->frameworks, sizeof s->frameworks);
  gmt_owners_t *own = NULL;
  rc = gmt_owners_new(&own, h, err);
  gmt_event_t ev;
  int first = 1;
  while (rc >= 0 && (rc = gmt_reader_next(r, &ev, err)) == GM_OK) {
    if (first) {
      s->first_ts = ev.ts_ns;
      first = 0;
    }
    s->last_ts = ev.ts_ns;
    if (ev.kind < REC_SUMMARY_KINDS) s->by_kind[ev.kind]++;
    if (ev.kind == GMT_EV_ALLOC_FAILED && s->by_kind[GMT_EV_ALLOC_FAILED] == 1) {
      s->failed_size = ev.size;
      s->failed_stream = ev.stream;
      s->failed_ts = ev.ts_ns;
      const char *cs = gmt_reader_string(r, ev.callsite);
      snprintf(s->failed_callsite, sizeof s->failed_callsite, "%s", cs ? cs : "");
    }
    rc = gmt_owners_event(own, &ev, reader_string, r, err);
  }
  if (own) {
    const gmt_owners_result_t *o = gmt_owners_result(own);
    s->peak_live = o->peak_live;
    for (int d = 0; d < o->n_devices; d++)
      if (o->dev[d].peak_mapped > s->peak_mapped) {
        s->peak_mapped = o->dev[d].peak_mapped;
        s->mapped_other = gmt_owners_other_bytes(&o->dev[d]);
        s->mapped_device = o->dev[d].device;
      }
    for (int d = 0; d < o->n_devices; d++) {
      uint64_t ctx = 0;
      if (gmt_owners_context_bytes(&o->dev[d], &ctx) && ctx > s->context) {
        s->context = ctx;
        s->context_device = o->dev[d].device;
      }
    }
  }
  gmt_owners_free(own);
  const gmt_reader_stats_t *rs = gmt_reader_stats(r);
  s->events = rs->events;
  s->dropped = rs->dropped;
  s->seq_gaps = rs->seq_gaps;
  s->truncated = rs->truncated;
  gmt_coverage(h, rs, &s->coverage);
  gmt_reader_close(r);
  if (rc < 0) return gm_err_wrap(err, "%s", path);
  return GM_OK;
}
