/* rec_summary.c: what gpurec prints at the end, read back from the traces it wrote.
 *
 * Reading the file back (rather than trusting the recorder's counters) checks that what is on
 * disk is a readable trace and reports what a user of the trace will see: events, duration,
 * bytes per event, the peak of live bytes, records CUPTI dropped, truncation.
 * Live bytes: requests (ALLOC, not DEVICE_STATIC) and VMM maps count from their event until the
 * FREE / VMM_UNMAP of the same address; an address hash (uthash) pairs them. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <uthash.h>

#include "recorder/rec_summary.h"

typedef struct live {
  uint64_t addr;
  uint64_t size;
  UT_hash_handle hh;
} live_t;

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
  live_t *map = NULL;
  uint64_t cur = 0;
  gmt_event_t ev;
  int first = 1;
  while ((rc = gmt_reader_next(r, &ev, err)) == GM_OK) {
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
    int adds = (ev.kind == GMT_EV_ALLOC && ev.mem_kind != GMT_MEM_DEVICE_STATIC) ||
               ev.kind == GMT_EV_VMM_MAP;
    int removes = ev.kind == GMT_EV_FREE || ev.kind == GMT_EV_VMM_UNMAP;
    live_t *e;
    if (adds) {
      HASH_FIND(hh, map, &ev.addr, sizeof ev.addr, e);
      if (!e) {
        e = calloc(1, sizeof *e);
        if (!e) {
          rc = gm_err_set(err, GM_ERR_NOMEM, "out of memory");
          break;
        }
        e->addr = ev.addr;
        HASH_ADD(hh, map, addr, sizeof e->addr, e);
      } else {
        cur -= e->size; /* re-use of a live address: the recorder missed a free */
      }
      e->size = ev.size;
      cur += ev.size;
      if (cur > s->peak_live) s->peak_live = cur;
    } else if (removes) {
      HASH_FIND(hh, map, &ev.addr, sizeof ev.addr, e);
      if (e) {
        cur -= e->size;
        HASH_DEL(map, e);
        free(e);
      }
    }
  }
  live_t *e, *tmp;
  HASH_ITER(hh, map, e, tmp) {
    HASH_DEL(map, e);
    free(e);
  }
  const gmt_reader_stats_t *rs = gmt_reader_stats(r);
  s->events = rs->events;
  s->dropped = rs->dropped;
  s->seq_gaps = rs->seq_gaps;
  s->truncated = rs->truncated;
  gmt_reader_close(r);
  if (rc < 0) return gm_err_wrap(err, "%s", path);
  return GM_OK;
}
