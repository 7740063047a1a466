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
#include "replay/policies/pytorch/pt_conf.h"
#include "replay/policies/rp_policy.h"

#ifdef __cplusplus
extern "C" {
#endif

extern const rp_policy_ops_t rp_pytorch_ops;

#ifdef __cplusplus
}
#endif
#endif /* RP_PYTORCH_H */
