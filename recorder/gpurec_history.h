/* gpurec_history.h: the launcher's handling of PyTorch's memory histories (gpurec_history.c). */
#ifndef GPUREC_HISTORY_H
#define GPUREC_HISTORY_H

#include <stdint.h>

#define GPUREC_MAX_TRACES 256

/* The traces one run of the job wrote (the manifest's, then those made here), and the notes
 * the injection library left in the manifest. */
typedef struct gpurec_run {
  char *traces[GPUREC_MAX_TRACES];
  int ntraces;
  char notes[2048];
} gpurec_run_t;

/* Torch mode: each pickle in dir converted beside its process's CUPTI trace (its provenance
 * taken from that trace), named from tmpl with ".torch"; appended to r. */
void gpurec_convert_torch(const char *dir, const char *tmpl, gpurec_run_t *r, int quiet);

/* Auto mode: each pickle in dir merged into its process's CUPTI trace, which it replaces; a
 * pickle without one becomes a trace of its own (appended to r); a PyTorch process's trace
 * left without a history is said on stderr. stacks: "none" or "python", for the header. */
void gpurec_merge_torch(const char *dir, const char *want, const char *stacks, gpurec_run_t *r, int quiet);

/* gpurec_stream.c: PyTorch's requests streamed during the job (inj_stream.c) merged with the
 * CUPTI trace of the same process. */
#include "base/gm_base.h"
typedef struct gpurec_stream_stats {
  uint64_t stream_events, stream_dropped, cupti_kept, cupti_left_out;
  int stream_truncated;
} gpurec_stream_stats_t;
gm_status_t gpurec_stream_merge(const char *stream_path, const char *cupti_path, const char *out_path,
                                gpurec_stream_stats_t *st, gm_err_t *err);
/* Auto mode: each of r's traces whose process left "<stem>.stream[.rankR].pidP.zst" (named from
 * tmpl) takes it in; the stream file is then removed. */
void gpurec_merge_streams(const char *tmpl, gpurec_run_t *r, int quiet);

#endif /* GPUREC_HISTORY_H */
