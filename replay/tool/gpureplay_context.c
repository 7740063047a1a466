/* gpureplay_context.c: the CUDA context and module code a trace recorded for the replayed
 * device (DEVICE_USAGE records, formats/SPEC.md 5.4.1), which capacity questions count beside
 * the policy's memory: a --capacity of C leaves the policy and the other owners C - context.
 *
 * The figure is the device's largest sample (the end's, once the libraries' kernels are
 * loaded), NVML's per-process count preferred over the whole device's, as `gpuanalyze info`
 * shows it (gmt_owners). The samples come at the trace's start and end, so the figure must be
 * known before the replay begins: the preloaded events are scanned in memory; a streamed trace
 * is read once more only when its header says it holds samples (kv `device_usage`), so
 * traces without them cost nothing. With a single device (device -1) the largest of any
 * device's figures is taken. */
#include <string.h>

#include "replay/tool/gpureplay.h"

typedef struct acc {
  uint64_t max[2];
  int n[2];
} acc_t;

static void take(acc_t *a, const gmt_event_t *e, int device) {
  if (e->kind != GMT_EV_DEVICE_USAGE || (device >= 0 && e->device != (unsigned)device)) return;
  if (e->addr != GMT_USAGE_PROCESS && e->addr != GMT_USAGE_DEVICE) return;
  int m = (int)e->addr - 1;
  a->n[m]++;
  if (e->size > a->max[m]) a->max[m] = e->size;
}

static void settle(const acc_t *a, gr_trace_info_t *info) {
  int m = a->n[0] ? 0 : a->n[1] ? 1 : -1;
  info->context_bytes = m < 0 ? 0 : a->max[m];
  info->context_method = m < 0 ? 0 : (unsigned)m + 1;
}

int gr_header_has_context(const gmt_header_t *h) { return gmt_header_kv_get(h, "device_usage") != NULL; }

void gr_context_from_events(const gmt_event_t *evs, size_t n, int device, gr_trace_info_t *info) {
  acc_t a;
  memset(&a, 0, sizeof a);
  for (size_t i = 0; i < n; i++) take(&a, &evs[i], device);
  settle(&a, info);
}

gm_status_t gr_context_from_file(const char *path, unsigned flags, int device, gr_trace_info_t *info,
                                 gm_err_t *err) {
  gmt_reader_t *r = NULL;
  gm_status_t st = gmt_reader_open_flags(&r, path, flags, err);
  if (st != GM_OK) return gm_err_wrap(err, "cannot open '%s'", path);
  acc_t a;
  memset(&a, 0, sizeof a);
  gmt_event_t buf[4096];
  size_t k = 0;
  gm_err_t rerr; /* a damaged trace is for the replay itself to refuse or salvage */
  while (gmt_reader_next_batch(r, buf, sizeof buf / sizeof buf[0], &k, &rerr) == GM_OK)
    for (size_t i = 0; i < k; i++) take(&a, &buf[i], device);
  gmt_reader_close(r);
  settle(&a, info);
  return GM_OK;
}

uint64_t gr_capacity_left(uint64_t capacity, uint64_t context) {
  if (!capacity || !context) return capacity;
  return capacity > context ? capacity - context : 1; /* nothing fits: every request fails */
}
