/* snap_side.h: the CUPTI side of the torch-history merge, what the merge's files share (not part
 * of the contract): snap_side.c reads it (held, or counted and read again from the file),
 * snap_match.c matches its driver calls to the history's segments, snap_merge.c writes the merge
 * of a history and snap_merge_streamed.c the merge of a streamed recording. */
#ifndef SNAP_SIDE_H
#define SNAP_SIDE_H

#include "formats/gmt.h"
#include "recorder/snapshot/snap_internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One CUPTI event with its string (copied: the reader keeps one chunk's strings). */
typedef struct snap_cev {
  gmt_event_t ev;
  char *str;
  int pytorch; /* one of PyTorch's own driver calls (matched to the history) */
} snap_cev_t;

typedef struct snap_side {
  snap_cev_t *v;
  size_t n, cap;
  gmt_header_t header;
  uint64_t dropped_records; /* CUPTI's own drop count */
  int truncated;
  int cut; /* ... its file ends before its index */
  /* PyTorch's allocator trace as the recorder streamed it: counted, and (not compact) of its
   * events those the header and the matching need (segment and VMM calls, OOMs) kept; the
   * requests are read again from the file as the merged trace is written (snap_merge_streamed) */
  gmt_event_t *torch;
  size_t ntorch_kept, torch_cap;
  uint64_t ntorch, stream_allocs, stream_sites, stream_first_ts;
  /* compact (a streamed recording): no event held; the driver calls that may be PyTorch's own
   * (snap_driver_call) and its segment calls are counted by bd (snap_stream.c), every other CUPTI
   * event is decided by its kind (snap_side_kind) and counted here; the merge reads them all again
   * from the file */
  int compact;
  snap_bounded_t *bd;
  uint64_t other_dropped, other_external;
  /* what the merge is doing, for a terminal (snap_merge_file_progress) */
  snap_progress_fn progress;
  void *progress_ctx;
} snap_side_t;

static inline int snap_device_mem(const gmt_event_t *e) {
  return e->mem_kind == GMT_MEM_DEVICE || e->mem_kind == GMT_MEM_UNKNOWN;
}

static inline int snap_is_vmm(unsigned k) {
  return k == GMT_EV_VMM_RESERVE || k == GMT_EV_VMM_MAP || k == GMT_EV_VMM_UNMAP || k == GMT_EV_VMM_RELEASE;
}

/* A CUPTI event that may be one of PyTorch's own driver calls: which it is depends on the whole
 * recording (snap_match_classify). */
static inline int snap_driver_call(const gmt_event_t *e) {
  return (e->kind == GMT_EV_ALLOC || e->kind == GMT_EV_FREE || snap_is_vmm(e->kind)) && snap_device_mem(e);
}

/* What snap_match_classify makes of any other CUPTI event, from its kind alone (the same rules). */
enum { SNAP_SIDE_OUT, SNAP_SIDE_DROPPED, SNAP_SIDE_KEPT, SNAP_SIDE_EXTERNAL };
static inline int snap_side_kind(const gmt_event_t *e) {
  if (e->kind == GMT_EV_ALLOC_SITE) return SNAP_SIDE_OUT; /* an older recorder's note: the stream carries callsites */
  if ((e->kind == GMT_EV_ALLOC_FAILED && snap_device_mem(e)) || e->kind == GMT_EV_EMPTY_CACHE) return SNAP_SIDE_DROPPED;
  if (e->kind == GMT_EV_MARKER || e->kind == GMT_EV_DEVICE_USAGE) return SNAP_SIDE_KEPT; /* no one's memory */
  return SNAP_SIDE_EXTERNAL;
}

/* The streamed events kept in memory: a segment's or a mapping's (matched to the driver's
 * calls before anything is written) and an OOM's (the header says its free bytes). */
static inline int snap_stream_kept(unsigned k) {
  return k == GMT_EV_SEGMENT_ALLOC || k == GMT_EV_SEGMENT_FREE || k == GMT_EV_VMM_MAP ||
         k == GMT_EV_VMM_UNMAP || k == GMT_EV_ALLOC_FAILED;
}

/* The merged trace being written and, for the CUPTI side, a cursor over its events kept. */
typedef struct snap_out {
  gmt_writer_t *w;
  snap_side_t *c;
  size_t i;         /* the next of c->v */
  uint64_t last;    /* the last time written */
  uint64_t written; /* events written */
  /* the next CUPTI event to write (with its callsite's text): compact, read again from the file
   * by rb, in the order the first pass read them */
  gmt_reader_t *rb;
  snap_cls_t *cls; /* rb's state per address (snap_bounded_side) */
  int has_next, side_end;
  gmt_event_t next;
  char *str;
  size_t str_cap;
  int has_str;
} snap_out_t;

/* snap_side.c: the CUPTI side read (pass 1), freed; its events kept walked in order. */
void snap_side_free(snap_side_t *c);
/* Progress every 2^20 events of a pass (and at its end). */
void snap_side_progress(const snap_side_t *c, gmt_reader_t *r, int pass, uint64_t events, int end);
/* Does the trace hold PyTorch's streamed requests? Read up to the first one. */
int snap_side_streamed(const char *path);
gm_status_t snap_side_read(const char *path, snap_side_t *c, gm_err_t *err);
/* The next CUPTI event kept (not left out) into o->next, as snap_match_classify decided it. */
gm_status_t snap_side_peek(snap_out_t *o, gm_err_t *err);
/* Where the history's time 0 falls on the CUPTI trace's clock (see snap_side.c). */
int snap_clock_aligned(const snap_pass_t *ps, const gmt_header_t *cupti);
int64_t snap_clock_shift(const snap_pass_t *ps, const gmt_header_t *cupti);
gm_status_t snap_kv_u64(gmt_header_t *h, const char *k, uint64_t v, gm_err_t *err);
/* The history's coverage on the merged trace (path: the recording, read where c is compact). */
gm_status_t snap_side_mark_coverage(gmt_header_t *h, const snap_pass_t *ps, snap_side_t *c, const char *path,
                                    gm_err_t *err);

/* snap_match.c: the CUPTI calls that are PyTorch's own, queued per (kind, address, size). */
typedef struct snap_segq snap_segq_t;
gm_status_t snap_match_classify(const snap_pass_t *ps, snap_side_t *c, snap_segq_t **queues, uint64_t *dropped,
                                uint64_t *external, snap_site_t **sites, size_t *nsites, gm_err_t *err);
/* A history segment event takes the identity of the CUPTI call it matches: 1 if one did. */
int snap_match_claim(snap_segq_t *queues, const snap_side_t *c, gmt_event_t *e);
void snap_match_free(snap_segq_t **h);

/* snap_merge_streamed.c: the merge of a streamed recording (root: its snapshot, or NULL). */
gm_status_t snap_merge_streamed(const pkr_val_t *root, snap_side_t *c, const char *path, const char *out_path,
                                const char *stacks, const gmt_writer_opts_t *opts, snap_merge_stats_t *ms,
                                gm_err_t *err);

#ifdef __cplusplus
}
#endif

#endif
