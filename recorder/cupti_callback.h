/* cupti_callback.h: one driver-API call (its callback parameters and result) -> trace event.
 *
 * The callback capture (GPUMEM_CAPTURE=callbacks, the default) records allocations and frees
 * from CUPTI's driver-API callbacks instead of MEMORY2 activity records: the callback reads the
 * call's own parameter struct at API exit (size, stream, returned pointer, result code). Like
 * cupti_convert.h the declaration is CUDA-free (parameters passed as bytes); the definition in
 * cupti_callback.c reads the generated_cuda_meta.h parameter structs. */
#ifndef REC_CUPTI_CALLBACK_H
#define REC_CUPTI_CALLBACK_H

#include <stdint.h>

#include "formats/gmt.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What the conversion cannot know by itself: the caller resolves these. */
typedef struct rec_cb_need {
  const void *stream;   /* CUstream to turn into a stream id (stream-ordered calls) */
  int has_stream;       /* 1: ev->stream must be set from `stream` */
  int per_thread;       /* the _ptsz variant: NULL means the per-thread default stream */
  int vmm_map;          /* a successful cuMemMap (the activity path dedupes MEMORY2 on it) */
} rec_cb_need_t;

/* Convert the driver-API call `cbid` (CUPTI_DRIVER_TRACE_CBID_*) with parameter struct
 * `params` and CUresult `rc`, at its exit, into *out. Fills kind, addr, size, mem_kind, flags
 * (stream = GMT_STREAM_NONE; *need says whether the caller must resolve a stream). Does not
 * fill ts_ns, device, context, corr_id. alloc_only_failures: 1 in the activity capture, where
 * MEMORY2 records carry successful allocations and frees and callbacks only add what records
 * miss (failures, VMM, trims). Returns 1 if *out is an event, 0 if the call makes none
 * (ENTER site is the caller's business; unknown cbids, failed frees...).
 * Frees (cuMemFree_v2, cuMemFreeAsync, cuMemFreeHost) carry size 0: the call does not say; the
 * core fills it from the matching allocation (rec_config_t.fill_free_sizes). */
int rec_cb_convert(uint32_t cbid, const void *params, int rc, int alloc_only_failures,
                   gmt_event_t *out, rec_cb_need_t *need);

/* The driver cbids the callback capture enables (allocation, free, VMM, trim), and how many. */
extern const uint32_t rec_cb_capture_cbids[];
extern const unsigned rec_cb_capture_ncbids;

#ifdef __cplusplus
}
#endif
#endif /* REC_CUPTI_CALLBACK_H */
