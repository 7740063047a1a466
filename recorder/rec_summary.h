/* rec_summary.h: read a recorded trace back for gpurec's end-of-run summary. */
#ifndef REC_SUMMARY_H
#define REC_SUMMARY_H

#include <stdint.h>

#include "base/gm_base.h"
#include "formats/gmt.h"

#ifdef __cplusplus
extern "C" {
#endif

#define REC_SUMMARY_KINDS 32

typedef struct rec_summary {
  uint64_t events, file_bytes, dropped, seq_gaps;
  uint64_t first_ts, last_ts; /* ns since the trace's start */
  uint64_t peak_live;         /* peak of live device requests (as `gpuanalyze info`) */
  uint64_t peak_mapped;       /* the busiest device's peak of every mapped byte (gmt_owners) */
  uint64_t mapped_other;      /* of which other owners' (NCCL, libraries, unknown) then */
  unsigned mapped_device;
  uint64_t context;           /* the largest device's recorded CUDA context and module code (0: none) */
  unsigned context_device;
  uint64_t by_kind[REC_SUMMARY_KINDS];
  int truncated;
  int rank;
  uint32_t pid;
  char gpu[128];
  char frameworks[128]; /* gmt_header_frameworks_text: "JAX 0.11.2" */
  /* The first failed request (ALLOC_FAILED): valid when by_kind[GMT_EV_ALLOC_FAILED]. */
  uint64_t failed_size, failed_stream, failed_ts;
  char failed_callsite[256];
  gmt_coverage_t coverage; /* gmt_coverage: partial traces say so first (SPEC.md §3.4) */
} rec_summary_t;

gm_status_t rec_summary_read(const char *path, rec_summary_t *s, gm_err_t *err);

#ifdef __cplusplus
}
#endif
#endif /* REC_SUMMARY_H */
