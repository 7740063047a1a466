/* rp_pytorch.h: the `pytorch[:CONF]` policy, a model of PyTorch's CUDACachingAllocator as
 * shipped in torch 2.11 (c10/cuda/CUDACachingAllocator.cpp, c10/core/AllocatorConfig.{h,cpp},
 * c10/cuda/CUDAAllocatorConfig.cpp).
 *
 * The policy object is rp_pytorch_ops (see replay/policies/rp_policy.h). The configuration
 * parser and the size functions are public too, so tests and tools (a sweep that enumerates
 * settings, the fidelity harness that prints the model's reading of a snapshot's settings)
 * use the exact code the policy runs.
 *
 * Driver calls, in PyTorch's order, are the observable output: every cudaMalloc of a segment
 * is one rp_driver_t.mem_alloc, every cudaFree one mem_free; with expandable segments one
 * va_reserve per new segment, one map per SEGMENT_MAP (a whole page range), one unmap per
 * SEGMENT_UNMAP, one va_release when a segment is released. */
#ifndef RP_PYTORCH_H
#define RP_PYTORCH_H

#include <stdint.h>

#include "base/gm_base.h"
#include "replay/policies/rp_policy.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The PyTorch release this model follows. */
#define RP_PYTORCH_VERSION "2.11"

extern const rp_policy_ops_t rp_pytorch_ops;

#define RP_PYTORCH_ROUNDUP_INTERVALS 16 /* kRoundUpPowerOfTwoIntervals: 1 MiB .. 64 GiB */

/* The settings of PYTORCH_CUDA_ALLOC_CONF that change device memory, after parsing. */
typedef struct rp_pytorch_conf {
  uint64_t max_split_size;         /* bytes; UINT64_MAX = unlimited (default) */
  uint64_t max_non_split_rounding; /* bytes; default = large_segment_size */
  uint64_t large_segment_size;     /* bytes; default 20 MiB */
  uint64_t roundup_divisions[RP_PYTORCH_ROUNDUP_INTERVALS]; /* 0 or 1: off */
  double gc_threshold;             /* garbage_collection_threshold; 0 = off */
  double memory_fraction;          /* per_process_memory_fraction; 1.0 = no limit */
  int expandable_segments;
} rp_pytorch_conf_t;

void rp_pytorch_conf_default(rp_pytorch_conf_t *c);
/* Parse a PYTORCH_CUDA_ALLOC_CONF string (verbatim) on top of the defaults, with torch 2.11's
 * tokenizer, key set and validation. Unknown keys, bad values and backend:cudaMallocAsync are
 * GM_ERR_INVAL with a message that names the key. */
gm_status_t rp_pytorch_conf_parse(const char *s, rp_pytorch_conf_t *c, gm_err_t *err);

/* round_size(): the block size a request of `size` bytes gets. */
uint64_t rp_pytorch_round_size(const rp_pytorch_conf_t *c, uint64_t size);
/* get_allocation_size(): the segment size cudaMalloc is asked for, given a rounded size. */
uint64_t rp_pytorch_allocation_size(const rp_pytorch_conf_t *c, uint64_t rounded);

#ifdef __cplusplus
}
#endif
#endif /* RP_PYTORCH_H */
