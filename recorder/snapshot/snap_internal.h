/* snap_internal.h: what the snapshot importer's files share (not part of the contract). */
#ifndef SNAP_INTERNAL_H
#define SNAP_INTERNAL_H

#include "formats/gmt.h"
#include "recorder/snapshot/snap_import.h"
#include "formats/pkr.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SNAP_MAX_FRAMES 6 /* innermost Python frames kept in a callsite string */
#define SNAP_MAX_SETTINGS 256 /* allocator_settings keys (torch 2.11 has 16) */
#define SNAP_MAX_PATH 4096 /* bytes of a frame's filename searched for site-packages/ */
#define SNAP_MAX_RECORD_KEYS 64 /* keys of one entry, frame, segment or block dict (torch: <= 12) */

/* The key of the merge's uthash tables of driver calls: a kind (each table's own numbering) and
 * two numbers, an address and a size mostly. Three words and no padding, so a key made with a
 * compound literal hashes the same bytes wherever it was made. */
typedef struct snap_key {
  uint64_t addr, size, kind;
} snap_key_t;
#define SNAP_KEY(kind_, addr_, size_) ((snap_key_t){.addr = (addr_), .size = (size_), .kind = (kind_)})

/* One event on its way to the writer, with what its string is made from (pointers into the
 * parsed pickle: nothing is copied per event, so a snapshot's events cost 88 bytes each). */
typedef struct snap_event {
  gmt_event_t ev;
  const pkr_val_t *frames; /* requests: the entry's frames list; annotations: the name */
  union {
    const pkr_val_t *stage; /* annotations: the stage, or NULL */
    uint64_t device_free;    /* ALLOC_FAILED: the device's free bytes PyTorch recorded with it */
  };
  int64_t time_us;
  uint8_t has_time;
  uint8_t marker;           /* SNAP_MARK_* */
} snap_event_t;

enum { SNAP_MARK_NONE = 0, SNAP_MARK_SNAPSHOT = 1 /* "torch.snapshot" */, SNAP_MARK_ANNOTATION = 2 };

/* The whole conversion, planned before anything is written: events in final order (pointers
 * into the per-device lists the plan keeps). */
typedef struct snap_evvec {
  snap_event_t *v;
  size_t n, cap;
} snap_evvec_t;

typedef struct snap_pass {
  snap_event_t **evs;
  size_t n;
  snap_evvec_t *lists; /* devices, annotations, synthetic initial state */
  size_t nlists;
  uint64_t entries, devices, skipped, synthetic;
  uint64_t max_dev_entries; /* the longest device history (a full ring holds max_entries) */
  int has_time;
  uint64_t start_time_ns;
} snap_pass_t;

/* One trace entry into *out: GM_OK, GM_END (an action not converted), GM_ERR_FORMAT (not a dict,
 * or a field out of its range: err says which, without the entry's position). */
gm_status_t snap_entry_event(const pkr_val_t *e, uint16_t device, snap_event_t *out, gm_err_t *err);
/* A numeric field of a record dict, validated where it enters: absent leaves *out alone (torch
 * omits nothing, hand-made snapshots do); anything but an int in [0, max] is GM_ERR_FORMAT
 * naming the field, the value and the accepted range, so no NaN becomes 0 and no -1 becomes
 * 2^64-1. */
gm_status_t snap_field_u64(const pkr_val_t *rec, const char *key, uint64_t max, uint64_t *out, gm_err_t *err);
/* Validate the snapshot's shape, convert, merge, and prepend the synthetic initial state. */
gm_status_t snap_plan(const pkr_val_t *root, snap_pass_t *ps, gm_err_t *err);
/* snap_stream.c: a streamed recording's driver calls and segment calls counted in the merge's
 * first pass and decided again in its second, in memory of the distinct segments (see there). */
typedef struct snap_bounded snap_bounded_t;
typedef struct snap_cls snap_cls_t; /* a reader's state per address */
snap_bounded_t *snap_bounded_new(void);
void snap_bounded_free(snap_bounded_t *b);
/* Pass 1: one of PyTorch's streamed segment, VMM or OOM events; one of CUPTI's device allocs,
 * frees or VMM calls; then the end (the ranges PyTorch mapped joined, the calls decided). */
gm_status_t snap_bounded_torch(snap_bounded_t *b, const gmt_event_t *e, gm_err_t *err);
gm_status_t snap_bounded_driver(snap_bounded_t *b, const gmt_event_t *e, gm_err_t *err);
gm_status_t snap_bounded_finish(snap_bounded_t *b, gm_err_t *err);
/* What the snapshot's plan needs of PyTorch's calls (snap_plan_streamed's input). */
const gmt_event_t *snap_bounded_plan(const snap_bounded_t *b, size_t *n);
/* PyTorch's segment calls, those the driver saw, the driver calls that are PyTorch's own and
 * those of other libraries. */
void snap_bounded_counts(const snap_bounded_t *b, uint64_t *segments, uint64_t *seen, uint64_t *pytorch,
                         uint64_t *external);
/* Pass 2: is this driver call (read again, in order, by a reader whose state s is) PyTorch's? */
snap_cls_t *snap_cls_new(void);
void snap_cls_free(snap_cls_t *s);
int snap_bounded_side(const snap_bounded_t *b, snap_cls_t *s, const gmt_event_t *e);
/* Pass 2: a reader of path of its own, then each of PyTorch's segment calls, in order, takes the
 * identity (corr_id, context) of the driver call it matches, if the driver saw it. */
gm_status_t snap_bounded_open(snap_bounded_t *b, const char *path, unsigned flags, gm_err_t *err);
gm_status_t snap_bounded_claim(snap_bounded_t *b, gmt_event_t *e, gm_err_t *err);

/* snap_merge_file with every CUPTI event of a streamed recording held in memory, as the merge did
 * before it read them again from the file: the reference its tests compare the merge with. */
gm_status_t snap_merge_file_held(const char *pickle_path, const char *cupti_path, const char *out_path,
                                 snap_merge_stats_t *st, gm_err_t *err);
/* The same from the entries the recorder streamed into a process's own trace (events flagged
 * GMT_F_TORCH_STREAM, in the order they were recorded, ts_ns on that trace's clock) and, where
 * root is not NULL, the snapshot taken where the stream starts (its segments: what was alive
 * before). Event times stay on the trace's clock: ps->start_time_ns is relative to its start
 * (the caller adds the trace's start_time_ns). */
gm_status_t snap_plan_streamed(const pkr_val_t *root, const gmt_event_t *evs, size_t n, snap_pass_t *ps,
                               gm_err_t *err);
void snap_plan_free(snap_pass_t *ps);
/* allocator_settings -> an equivalent PYTORCH_CUDA_ALLOC_CONF string ("" for the defaults). */
gm_status_t snap_settings_conf(const pkr_val_t *settings, char *buf, size_t n);
/* The trace header of a snapshot: prov's provenance (may be NULL), capture mode torch, the
 * history's start time, allocator_settings and snapshot facts as kv pairs. */
gm_status_t snap_fill_header(gmt_header_t *h, const pkr_val_t *root, const snap_pass_t *ps,
                             const gmt_header_t *prov, gm_err_t *err);
/* Coverage (snap_coverage.c, SPEC.md §3.4): whether the history covers the whole run, its
 * window and what was alive at its start (in the plan's own event order and clock). ring: the
 * history's max_entries when known, else 0. */
void snap_coverage_of(const snap_pass_t *ps, uint64_t ring, gmt_coverage_t *c);
/* Mark h with c, keeping what h (a provenance header) already said was partial. */
gm_status_t snap_coverage_mark(gmt_header_t *h, const gmt_coverage_t *c, gm_err_t *err);
/* Callsite strings by frames list, interned once per list (snap_event_strings). */
typedef struct snap_cs_cache snap_cs_cache_t;
void snap_cs_cache_free(snap_cs_cache_t **cache);
/* Intern e's string (its callsite, the snapshot marker's or an annotation's name) into w and set
 * e->ev.callsite; cache starts NULL. */
gm_status_t snap_event_strings(gmt_writer_t *w, snap_cs_cache_t **cache, snap_event_t *e, gm_err_t *err);
/* One alloc_site note of the CUPTI trace (recorder/rec_sites.c): a request's callsite. */
typedef struct snap_site {
  uint64_t addr, ts; /* ts: on the CUPTI trace's clock */
  uint16_t device;
  const char *str;   /* the callsite, or NULL (a thread without Python frames) */
} snap_site_t;

/* snap_sites.c: out[k] (k: index into ps->evs, ps->n entries, NULL-filled by the caller) gets the
 * callsite of the note of each history allocation that has one; shift moves history time onto
 * the notes' clock, timed says whether it does. Returns how many allocations got a callsite. */
size_t snap_sites_match(const snap_pass_t *ps, const snap_site_t *sites, size_t nsites, int64_t shift,
                        int timed, const char **out);
/* The whole file into *buf (malloc'd). */
gm_status_t snap_read_file(const char *path, uint8_t **buf, size_t *len, gm_err_t *err);
/* Import from an already parsed tree (tests and fuzzing use it). */
gm_status_t snap_import_doc(const pkr_val_t *root, const char *out_path,
                            const gmt_writer_opts_t *opts, const gmt_header_t *prov,
                            snap_import_stats_t *st, gm_err_t *err);

#ifdef __cplusplus
}
#endif
#endif /* SNAP_INTERNAL_H */
