/* fid_addresses.h: how well an address policy (replay/engine/va_model.h) predicts the CUDA driver's
 * segment addresses, measured on a trace's real segment_alloc / segment_free sequence (an
 * imported PyTorch snapshot: its cudaMalloc segments with the driver's addresses, in order).
 * The policy is fed the same sizes, allocs and frees; it is scored on
 *   exact:  segments (after the first) whose address relative to the first segment's is the
 *           real one's to the byte;
 *   step:   segments whose address relative to the segment allocated just before is the real
 *           one's (the rule, without the drift that the process's other mappings add);
 *   pairs:  for each new segment and each live segment of the same size, whether the two are
 *           in the same address order as in the real run (what torch's best fit compares
 *           when it breaks a tie between equal-size free blocks).
 * Expandable-segment maps are not cuMemAlloc placements and are left out. */
#ifndef FID_ADDRESSES_H
#define FID_ADDRESSES_H

#include <stdint.h>

#include "base/gm_base.h"
#include "replay/engine/va_model.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fid_addr_stats {
  uint64_t segments;   /* segment_allocs after the first */
  uint64_t exact;      /* of them, placed at the real relative address */
  uint64_t step;       /* of them, at the real offset from the segment allocated before */
  uint64_t pairs;      /* same-size (new, live) pairs */
  uint64_t pairs_same; /* of them, in the real order */
} fid_addr_stats_t;

/* Adds trace_path's figures under policy p to *st (device 0 only). */
gm_status_t fid_address_check(const char *trace_path, rp_va_policy_t p, fid_addr_stats_t *st,
                              gm_err_t *err);

#ifdef __cplusplus
}
#endif
#endif /* FID_ADDRESSES_H */
