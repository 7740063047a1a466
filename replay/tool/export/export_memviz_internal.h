/* memviz_internal.h: what the snapshot export's two files share: the run recorded through the
 * engine tap (gpureplay_memviz.c) and the pickle written from it (gpureplay_memviz_out.c).
 * Internal to //replay. */
#ifndef MEMVIZ_INTERNAL_H
#define MEMVIZ_INTERNAL_H

#include <stdint.h>
#include <uthash.h>

#include "formats/pkw.h"
#include "replay/tool/export/export_memviz.h"
#include "replay/engine/rp_map.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Trace entry actions, in torch's words (mv_action_name). */
enum {
  MV_ALLOC = 1, MV_FREE_REQUESTED, MV_FREE_COMPLETED, MV_SEGMENT_ALLOC, MV_SEGMENT_FREE,
  MV_SEGMENT_MAP, MV_SEGMENT_UNMAP, MV_OOM, MV_SNAPSHOT, MV_ACTIONS
};
const char *mv_action_name(int action);

/* One trace entry: 40 bytes, so a 10 M-event run costs 400 MB at most (a device's entries are
 * written and dropped before the next device runs). For MV_OOM, addr is the device's free
 * bytes (torch's device_free). */
typedef struct mv_ev {
  uint64_t ts_ns, addr, size, stream;
  uint32_t site;  /* callsite string id of the trace, 0: none */
  uint8_t action;
} mv_ev_t;

/* A live block of the policy (by its address). */
typedef struct mv_block {
  uint64_t addr, size, requested, stream;
  uint64_t trace_addr; /* the address the trace gave the request */
  uint32_t site;
  int pending; /* free requested, not completed (a stream event outstanding) */
  UT_hash_handle hh;
} mv_block_t;

/* A segment: a cudaMalloc'd one (hash by address) or a run of mapped pages (sorted array). */
typedef struct mv_seg {
  uint64_t addr, size, stream;
  uint32_t site;
  int expandable;
  UT_hash_handle hh;
} mv_seg_t;

typedef struct mv_run {
  int device;                 /* the device replayed */
  uint64_t capacity;          /* the simulated device's size (0: unlimited), for device_free */
  mv_ev_t *ev;
  size_t n, cap;
  int finished;               /* release_all: the end-of-replay teardown is not the run's */
  const gmt_event_t *cur;     /* the trace event being fed */
  uint64_t cur_stream;        /* the stream driver calls are made for now */
  uint32_t cur_site;
  mv_block_t *blocks;         /* live, by policy address */
  mv_seg_t *segs;             /* cudaMalloc'd, by address */
  mv_seg_t *maps;             /* mapped page runs, sorted by address, disjoint */
  size_t n_maps, cap_maps;
  rp_map_t trace_to_block;    /* trace address -> policy address (a) */
  uint64_t reserved, peak_reserved, requested, peak_requested, allocated, peak_allocated;
  int peak_pending;           /* reserved rose to a new peak: the next request's entry marks it */
  size_t peak_at;             /* the marker goes after entry peak_at - 1 (0: no peak yet) */
  uint64_t ooms;
  gm_status_t st;             /* the first failure of the tap (host memory), GM_OK if none */
} mv_run_t;

void mv_run_init(mv_run_t *r, int device, uint64_t capacity);
void mv_run_free(mv_run_t *r);

/* The writer: the root dict is opened by mv_out_begin; each device's trace list is written
 * after its run; the segments of all devices (their final states, kept) at the end. */
typedef struct mv_site mv_site_t;
typedef struct mv_out {
  pkw_t w;
  uint32_t key_memo[32];      /* memo ids of the keys written, +1 (0: not yet) */
  uint32_t action_memo[MV_ACTIONS];
  uint32_t empty_frames;      /* +1 */
  mv_site_t *sites;           /* callsite id -> text and frames memo */
  uint64_t n_sites;
  uint64_t start_time_ns;     /* the trace's wall clock at ts 0 */
  struct mv_final *finals;    /* all devices' final segments with their blocks (mv_out_keep) */
  size_t n_finals;
} mv_out_t;

/* Read the callsite texts of the trace (every chunk's strings) into o. */
gm_status_t mv_out_sites(mv_out_t *o, const char *path, gm_err_t *err);
void mv_out_begin(mv_out_t *o, FILE *f, uint64_t start_time_ns);
/* device_traces[device] for r (with the peak marker). */
void mv_out_trace(mv_out_t *o, const mv_run_t *r);
void mv_out_empty_trace(mv_out_t *o);
/* Keep r's final state for the segments list (the run itself is freed after). */
gm_status_t mv_out_keep(mv_out_t *o, const mv_run_t *r, gm_err_t *err);
/* segments, allocator_settings, gpumem_replay; the root closed; STOP. */
gm_status_t mv_out_end(mv_out_t *o, const char *trace, const char *spec, const gr_memviz_stats_t *st,
                       gm_err_t *err);
void mv_out_free(mv_out_t *o);

#ifdef __cplusplus
}
#endif
#endif /* MEMVIZ_INTERNAL_H */
