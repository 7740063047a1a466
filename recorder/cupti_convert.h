/* cupti_convert.h: CUPTI activity records -> trace events, in one function.
 *
 * The declaration is CUDA-free (the record is passed as bytes) so the core and its tests need
 * no CUDA header to call it; the definition in cupti_convert.c is one of the two places that
 * include <cupti.h> (with cupti_adapter.c). */
#ifndef REC_CUPTI_CONVERT_H
#define REC_CUPTI_CONVERT_H

#include <stdint.h>

#include "formats/gmt.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Convert one CUPTI activity record (a CUpti_Activity* from cuptiActivityGetNextRecord) of kind
 * MEMORY2 (CUpti_ActivityMemory4) or MEMORY_POOL (CUpti_ActivityMemoryPool2/3: the fields read
 * are common to both) into *out. t0 is the CUPTI timestamp of the trace's start: ts_ns is
 * relative to it (records older than t0 get 0). Returns 1 if *out was filled, 0 for a record
 * this recorder does not turn into an event (other kinds, invalid operation types). */
int rec_cupti_convert(const void *record, uint64_t t0, gmt_event_t *out);

#ifdef __cplusplus
}
#endif
#endif /* REC_CUPTI_CONVERT_H */
