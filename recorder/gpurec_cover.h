/* gpurec_cover.h: after the run, a trace the job left cut short says so (gpurec_cover.c). */
#ifndef GPUREC_COVER_H
#define GPUREC_COVER_H

#include <stdint.h>
#include <sys/types.h>

/* How the job's own process ended, as gpurec saw it. */
typedef struct gpurec_end {
  pid_t pid;             /* the process gpurec started */
  int signal;            /* the signal that killed it, 0 if it exited */
  uint64_t died_wall_ns; /* wall clock (Unix epoch, ns) when gpurec saw it end */
} gpurec_end_t;

/* A trace whose process did not finish it (the file ends before its index, or a merged trace
 * whose CUPTI side did) gets the coverage marks of a kill in its header (SPEC.md §3.4: killed,
 * the window's end, the signal and its time when the process is the one gpurec started, the
 * flush interval that bounds the loss), so every tool says PARTIAL first. A trace the recorder
 * already marked stopped (its disk filled) keeps its own marks. Says on stderr (unless quiet)
 * only when a cut trace cannot be marked. Returns 1 if it marked the trace. */
int gpurec_mark_cut(const char *path, const gpurec_end_t *end, int quiet);

#endif /* GPUREC_COVER_H */
