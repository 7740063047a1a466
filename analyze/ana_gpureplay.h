/* ana_gpureplay.h: the analyzer's way to a replay. The analyzer never links the replayer
 * (DESIGN.md; //replay's libraries are not visible to //analyze): `report`, `oom` and `diff`
 * run the gpureplay binary and read what it prints, through this: find the tool, run it with
 * its output captured, take its error line, and read its JSON (a run's line of `--json`, the
 * object of `--explain-oom --json`, replay/README.md). Nothing here prints or exits. */
#ifndef ANA_GPUREPLAY_H
#define ANA_GPUREPLAY_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "analyze/ana.h"
#include "base/gm_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Finding, running and reading a sibling tool: gm_tool_find, gm_tool_capture, gm_tool_message
 * (base/gm_base.h). */

/* The setting a trace's job ran with, as gpureplay takes it (--policy=): where the trace
 * records it (a PyTorch memory history's PYTORCH_CUDA_ALLOC_CONF, the user's own), that line;
 * else its framework's default ("pytorch", "jax", "tf", "cupy"). */
gm_status_t ana_trace_ran_with(const char *path, unsigned read_flags, char *spec, size_t n, gm_err_t *err);

/* From `gpureplay --json` (one run object per line): the first run's peak reserved + external
 * and its policy (the first device's, when the trace has several). */
gm_status_t ana_replay_peak_read(const char *json_lines, uint64_t *peak, char *policy, size_t n, gm_err_t *err);

/* ---- `gpuanalyze oom`: what `gpureplay TRACE --explain-oom --json` printed (ana_oom.c) ---- */

#define ANA_OOM_TOP 32 /* callsites of the live bytes kept (gpureplay gives 8) */

typedef struct ana_oom_site {
  const char *text;
  uint64_t bytes, allocs;
} ana_oom_site_t;

/* The object read, its strings pointing into it (valid until ana_oom_free). */
typedef struct ana_oom {
  void *json; /* gpureplay's object (a json_t), owned */
  const char *trace, *policy, *capacity_note;
  uint64_t capacity, device_memory, requests, needs, peak_reserved, recorded_failures, ooms;
  uint64_t context; /* the recorded CUDA context and module code inside the capacity (0: none) */
  int found; /* it ran out of memory; what follows is about its first failed request */
  int64_t event;
  uint64_t ts_ns, size, stream;
  int has_stream;                 /* stream is null for a synchronous request */
  const char *callsite, *cause;   /* cause: "policy", "external", "oversize" */
  uint64_t live_bytes, live_allocs, external_bytes, reserved_bytes;
  ana_oom_site_t top[ANA_OOM_TOP];
  int n_top;
  uint64_t other_bytes, other_sites;
  int has_free; /* the policy accounted for its free bytes */
  uint64_t rounded, free_bytes, free_blocks, largest_free, allocated, too_small, largest_too_small, other_stream,
      other_pool, not_splittable, limit;
  int at_limit;
  const char *note;
  int live_exceeds;
  uint64_t live_excess;
  const char *setting, *setting_from; /* setting: NULL when none fits */
  uint64_t setting_peak, fits_capacity;
  int grid_tried, grid_fit, tune_tried;
} ana_oom_t;

/* Keep gpureplay --explain-oom's object for a loaded trace (table trace_oom): the HTML report's
 * "Why it ran out" section (ana_html_oom.c) reads it back. */
gm_status_t ana_oom_store(ana_db_t *db, int64_t trace_id, const char *json, gm_err_t *err);

/* Read the object; a key missing or of the wrong type is an error that names it. */
gm_status_t ana_oom_read(const char *json_text, ana_oom_t *o, gm_err_t *err);
void ana_oom_free(ana_oom_t *o);
/* In text: what failed, what was live, why the free bytes did not serve it, the smallest
 * changes. Texts from the trace are escaped. */
void ana_oom_print_text(FILE *f, const char *path, const ana_oom_t *o);
/* gpureplay's object as it came, with the line to paste for the setting (fix.paste, in the
 * framework's own words: ana_policy_env_line), on one line. */
gm_status_t ana_oom_print_json(FILE *f, const ana_oom_t *o, gm_err_t *err);

#ifdef __cplusplus
}
#endif
#endif /* ANA_GPUREPLAY_H */
