/* rmm_import.h: RAPIDS RMM allocation logs (rmm::mr::logging_resource_adaptor,
 * rmm.mr.LoggingResourceAdaptor) into gpumem traces.
 *
 * The log, as RMM writes it (cpp/src/mr/detail/logging_resource_adaptor_impl.cpp): the line
 * `Thread,Time,Action,Pointer,Size,Stream`, then one line per call through the adaptor with the
 * spdlog pattern "%t,%H:%M:%S.%f,%v": the thread id (decimal), the local time of day with
 * microseconds, then `allocate,%p,%zu,STREAM`, `free,%p,%zu,STREAM` or `allocate failure,%p,%zu,
 * STREAM` (the pointer as printf's %p: 0x... or (nil); the stream as the cudaStream_t in hex).
 * Older RMM (spdlog/fmt) wrote the same columns with fmt's `{}`; RMM's user guide shows Time as
 * seconds since the epoch and the action `deallocate`: both are read too.
 *
 * What becomes of each line: allocate -> ALLOC (device memory, on its stream);
 * free -> FREE; allocate failure -> ALLOC_FAILED of its size. The thread becomes the callsite
 * ("RMM thread N"), so reports group bytes by thread. The log's device: the Python adaptor's
 * per-device file name (NAME.devN.csv), else 0.
 *
 * What is tolerated, and counted (rmm_import_stats_t): a last line without its newline (spdlog
 * writes whole lines: the process died while writing it; dropped even when it parses, as any
 * column may be cut); a timestamp earlier than the line before
 * by at most 1 s (threads race for the log's lock after reading the clock: clamped to the line
 * before); a time of day that steps back by more than 12 h (midnight: a day is added);
 * `allocate` of 0 bytes at a null pointer and `free` of a null pointer (skipped).
 * Everything else is an error naming the line: a header that is not RMM's, a line with too
 * few or too many columns, an unknown action, a bad number, a free of a pointer that is not allocated (or
 * of another size than it was allocated with), an allocate at a pointer still allocated, and
 * time going back by more than 1 s. */
#ifndef RMM_IMPORT_H
#define RMM_IMPORT_H

#include <stdio.h>

#include "base/gm_base.h"
#include "formats/gmt.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RMM_LOG_HEADER "Thread,Time,Action,Pointer,Size,Stream"
#define RMM_CLAMP_NS 1000000000ull /* backward steps tolerated (clamped): 1 s */

typedef struct rmm_import_stats {
  uint64_t lines;             /* lines read, the header included */
  uint64_t allocs, frees, failures;
  uint64_t null_skipped;      /* allocate of 0 bytes at (nil), free of (nil): skipped */
  uint64_t clamped;           /* timestamps clamped to the line before */
  uint64_t midnights;         /* time-of-day wraps */
  uint64_t threads, streams;  /* distinct */
  uint64_t live_at_end, live_bytes_at_end;
  uint64_t peak_live_bytes;
  uint64_t first_failure_size;
  uint64_t duration_ns;
  int truncated_last_line;    /* the last line was cut short and dropped */
  int device;
  int epoch_time;             /* Time was seconds since the epoch (else time of day) */
} rmm_import_stats_t;

/* The device of a log from its file name: Python's LoggingResourceAdaptor writes NAME.devN.EXT
 * per device. 0 when the name does not say. */
int rmm_log_device(const char *path);

/* Read the log from in (named in_name in messages; device from rmm_log_device) and write the
 * trace at out_path (whole or not at all). gpu_memory: the GPU's total memory for the header
 * (0: unknown; a log does not say). Errors: GM_ERR_FORMAT with "line N: ..." (the caller says
 * which file). */
gm_status_t rmm_import(FILE *in, const char *in_name, const char *out_path, uint64_t gpu_memory,
                       const gmt_writer_opts_t *opts, rmm_import_stats_t *st, gm_err_t *err);

#ifdef __cplusplus
}
#endif
#endif /* RMM_IMPORT_H */
