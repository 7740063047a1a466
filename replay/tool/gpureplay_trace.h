/* gpureplay_trace.h: what the runner (gpureplay_run.c) takes from the trace reading
 * (gpureplay_trace.c), and only they: not part of gpureplay.h's interface. */
#ifndef GPUREPLAY_TRACE_H
#define GPUREPLAY_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "base/gm_base.h"
#include "formats/gmt.h"
#include "replay/tool/gpureplay.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Read the header and what the index says, into info; for a requests trace, whether it has
 * async allocations (which decides how its synchronous ones are read). No events replayed. */
gm_status_t gr_trace_probe(const char *path, unsigned flags, int sync_allocs, int vmm_buffers,
                           gr_trace_info_t *info, gm_err_t *err);
/* Decode the whole trace into one array (the shared input of all jobs); the reader's
 * integrity into info. hint: the index's event count (sizes the first allocation). ids: NULL,
 * or where the events' address numbers go (rp_addr_ids_build's, made on a thread beside the
 * decode; zeroed when host memory is short: then each replay hashes the addresses itself). */
gm_status_t gr_trace_preload(const char *path, unsigned flags, uint64_t hint, gmt_event_t **out, size_t *n,
                             gr_trace_info_t *info, rp_addr_ids_t *ids, gm_err_t *err);

/* gpureplay_numbering.c: the numbering on a thread that follows the decoder. start: NULL when
 * out of host memory (end then numbers on the caller's thread); more: evs[0, avail) are decoded
 * (evs: the array now); pause: before the array moves (the thread ends; end numbers the rest);
 * end: the numbers of evs[0, n) into *out, nb gone; cancel: nb gone, no numbers. */
typedef struct gr_numbering gr_numbering_t;
gr_numbering_t *gr_numbering_start(size_t hint);
void gr_numbering_more(gr_numbering_t *nb, const gmt_event_t *evs, size_t avail);
void gr_numbering_pause(gr_numbering_t *nb);
gm_status_t gr_numbering_end(gr_numbering_t *nb, const gmt_event_t *evs, size_t n, rp_addr_ids_t *out,
                             gm_err_t *err);
void gr_numbering_cancel(gr_numbering_t *nb);
/* Decode the trace once for all its jobs (cfg->preload, else when it fits)? info: the probe's. */
int gr_trace_wants_preload(const gr_config_t *cfg, const char *path, const gr_trace_info_t *info);
/* The total memory the policies see (the command line's, else the trace's GPU's); info's
 * device_memory and device_memory_assumed set to say so. */
uint64_t gr_trace_device_memory(const gr_config_t *cfg, gr_trace_info_t *info);
/* What a reader found (truncation, gaps, damage) into info. */
void gr_trace_take_integrity(gr_trace_info_t *info, const gmt_reader_stats_t *s, const char *damage);
/* The text of string id (a callsite), read from the trace up to where it is defined; "" if
 * none (best effort: past damage too). */
void gr_trace_callsite(const char *path, uint32_t id, char *out, size_t n);

#ifdef __cplusplus
}
#endif

#endif /* GPUREPLAY_TRACE_H */
