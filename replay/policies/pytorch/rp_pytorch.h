/* rp_pytorch.h: the `pytorch[:CONF]` policy, a model of PyTorch's CUDACachingAllocator as
 * shipped in torch 2.11 (c10/cuda/CUDACachingAllocator.cpp, c10/core/AllocatorConfig.cpp,
 * c10/cuda/CUDAAllocatorConfig.cpp).
 *
 * The policy object is rp_pytorch_ops (see replay/policies/rp_policy.h). The configuration
 * parser and the size functions are public too, so tests and tools (a sweep that enumerates
 * settings, the fidelity harness that prints the model's reading of a snapshot's settings)
 * can use the exact same code the policy runs. */
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

#ifdef __cplusplus
}
#endif
#endif /* RP_PYTORCH_H */
