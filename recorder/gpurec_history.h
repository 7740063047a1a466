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

/* A long merge's progress on stderr, one line rewritten (snap_progress_fn; ctx a
 * gpurec_progress_t), only where stderr is a terminal: gpurec_progress_init says whether. */
typedef struct gpurec_progress {
  const char *name; /* the trace merged, as the user sees it */
  int on, shown;
} gpurec_progress_t;
void gpurec_progress_init(gpurec_progress_t *p, const char *name, int quiet);
void gpurec_progress_show(void *ctx, int pass, uint64_t events, uint64_t chunks, uint64_t total);
/* Ends the line if one was shown. */
void gpurec_progress_end(gpurec_progress_t *p);

#endif /* GPUREC_HISTORY_H */
