/* snap_import.h: PyTorch memory-snapshot pickles (torch.cuda.memory._dump_snapshot) into
 * gpumem traces, without torch and without executing anything from the pickle.
 *
 * Tensor requests become ALLOC / FREE_REQUESTED / FREE (free_completed) events with their
 * streams and sizes; the allocator's own driver calls become SEGMENT_ALLOC / SEGMENT_FREE /
 * VMM_MAP / VMM_UNMAP; Python frames become callsite strings; allocator_settings go into
 * the header's key/value pairs. */
#ifndef SNAP_IMPORT_H
#define SNAP_IMPORT_H

#include "base/gm_base.h"
#include "formats/gmt.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct snap_import_stats {
  uint64_t entries;       /* trace entries read from the pickle */
  uint64_t events;        /* events written */
  uint64_t devices;       /* devices with a trace */
  uint64_t skipped;       /* entries of actions not converted */
  uint64_t failed;        /* 'oom' entries: requests that failed in the recorded run */
  uint64_t first_failed_size, first_failed_stream;
  char first_failed_callsite[256];
  uint64_t synthetic;     /* events made from the final state (memory the history never shows) */
} snap_import_stats_t;

/* Non-zero if buf (the file's first bytes) looks like a pickle (protocol 2+). */
int snap_is_pickle(const void *buf, size_t len);

/* Convert the snapshot at pickle_path into a trace at out_path. Not a snapshot, truncated, or
 * holding anything but plain data (no globals, no reduce): GM_ERR_FORMAT with one clear line
 * (which does not repeat the file's name: the caller says which file it was). */
gm_status_t snap_import_file(const char *pickle_path, const char *out_path,
                             const gmt_writer_opts_t *opts, snap_import_stats_t *st, gm_err_t *err);

/* Same, with the provenance a pickle does not hold (host, pid, rank, GPU name/UUID/total memory,
 * driver/CUDA/CUPTI versions, command line, environment) taken from prov: the CUPTI trace of
 * the same run (gpurec --mode=torch) or what the user says (gpurec import --gpu-memory). The
 * snapshot's own fields (capture mode, start time, allocator settings) win. prov may be NULL. */
gm_status_t snap_import_file_prov(const char *pickle_path, const char *out_path,
                                  const gmt_writer_opts_t *opts, const gmt_header_t *prov,
                                  snap_import_stats_t *st, gm_err_t *err);

typedef struct snap_merge_stats {
  uint64_t entries;        /* history entries read from the pickle */
  uint64_t history_events; /* events made from them (the synthetic initial state included) */
  uint64_t segments;       /* of those, PyTorch's segment allocs and frees */
  uint64_t segments_seen;  /* ... that the CUPTI trace saw (matched by address and size) */
  uint64_t external;       /* CUPTI events kept as other libraries' memory (GMT_F_EXTERNAL) */
  uint64_t cupti_dropped;  /* CUPTI events left out: PyTorch's own driver calls, failed
                              device allocations, pool trims */
  int cupti_truncated;     /* the CUPTI trace ended early (it is merged as far as it goes) */
  uint64_t site_notes;     /* alloc_site notes in the CUPTI trace (the requests' callsites) */
  uint64_t allocs;         /* the history's allocations (the synthetic initial state left out) */
  uint64_t allocs_with_callsite; /* ... that got a callsite from their note */
  int streamed;            /* the entries came streamed in the CUPTI trace (rec_torch_stream.c),
                              the pickle only said where they start */
} snap_merge_stats_t;

/* gpurec's default for PyTorch (capture mode torch-history, snap_merge.c): the snapshot at
 * pickle_path (the process's own history, dumped at exit) merged with the CUPTI trace the same
 * process wrote at cupti_path, into out_path (which may be cupti_path: it is read whole first and
 * replaced only when the merged trace is complete). stacks: "none" or "python", for the header.
 * Where the CUPTI trace holds PyTorch's streamed requests (GMT_F_TORCH_STREAM), they are the
 * requests and the snapshot only says where they start; pickle_path NULL merges them alone (gpurec
 * import of a recording gpurec could not merge), an error where there are none. */
gm_status_t snap_merge_file(const char *pickle_path, const char *cupti_path, const char *out_path,
                            const char *stacks, const gmt_writer_opts_t *opts, snap_merge_stats_t *st,
                            gm_err_t *err);

/* How far a merge is, for a terminal: pass 1 (reading) or 2 (writing) of a streamed recording,
 * events read in that pass, chunks read and the file's (0: no index, a cut file). Called every
 * 2^20 events and at each pass's end; never for a history (a ring of at most max_entries). */
typedef void (*snap_progress_fn)(void *ctx, int pass, uint64_t events, uint64_t chunks, uint64_t total_chunks);
/* snap_merge_file with progress (fn NULL: none). */
gm_status_t snap_merge_file_progress(const char *pickle_path, const char *cupti_path, const char *out_path,
                                     const char *stacks, const gmt_writer_opts_t *opts, snap_merge_stats_t *st,
                                     snap_progress_fn fn, void *ctx, gm_err_t *err);

#ifdef __cplusplus
}
#endif
#endif /* SNAP_IMPORT_H */
