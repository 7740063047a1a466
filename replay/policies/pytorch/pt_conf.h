/* pt_conf.h: PYTORCH_CUDA_ALLOC_CONF as torch 2.11 reads it (pt_conf.c), and the two size
 * functions that follow from it. A target of its own (//replay/policies/pytorch:conf) with no
 * allocator model in it: gpurec checks a user's setting at launch with these exact rules and
 * links nothing else of the replayer. rp_pytorch.h includes it. */
#ifndef PT_CONF_H
#define PT_CONF_H

#include <stdint.h>

#include "base/gm_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The PyTorch release this model follows. */
#define RP_PYTORCH_VERSION "2.11"

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

/* 1 when round_size gives every size whose log2 (floor) is a set bit k of log2_mask the same
 * block size under a and b. */
int rp_pytorch_same_rounding(const rp_pytorch_conf_t *a, const rp_pytorch_conf_t *b, uint64_t log2_mask);
/* per_process_memory_fraction's limit in bytes of a device of total_memory (0: no limit, the
 * fraction is 1), and garbage_collection_threshold's reserved bytes under that limit. */
uint64_t rp_pytorch_allowed_max(const rp_pytorch_conf_t *c, uint64_t total_memory);
uint64_t rp_pytorch_gc_threshold(const rp_pytorch_conf_t *c, uint64_t allowed_max);

#ifdef __cplusplus
}
#endif
#endif /* PT_CONF_H */
