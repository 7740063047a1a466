/* pred_replay.h: `gpurec predict --fit` replays through the gpureplay binary (pred_replay.c).
 *
 * The recorder knows nothing of policies (DESIGN.md): --fit writes each prediction to a trace
 * in a private temporary folder and runs `gpureplay TRACE -p SPEC... --json -q` on it, the
 * settings themselves in gpureplay's words from `gpureplay --list-policies`. Nothing here
 * prints; errors carry gpureplay's own message. */
#ifndef PRED_REPLAY_H
#define PRED_REPLAY_H

#include <stddef.h>
#include <stdint.h>

#include "base/gm_base.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pred_rp pred_rp_t;

#define PRED_RP_MAX_SPECS 32 /* settings in one replay */

/* Where gpureplay is: $GPUREPLAY, beside this binary (installed layout), ../replay/ (the
 * bazel-bin layout), PATH. 1 found (path in out), 0 not; *from says which place was used. */
int pred_rp_find(char *out, size_t n, const char **from);

/* A replayer over the gpureplay at path: a private folder (mkdtemp under $TMPDIR) for the
 * predicted traces and gpureplay's output, removed by pred_rp_close, and by SIGINT, SIGTERM and
 * SIGHUP while it exists (one replayer at a time per process). */
gm_status_t pred_rp_open(const char *gpureplay, pred_rp_t **out, gm_err_t *err);
/* The path of a file named name in the private folder (valid until the next call). */
const char *pred_rp_path(pred_rp_t *r, const char *name);
/* Remove the folder and everything in it; NULL is a no-op. */
void pred_rp_close(pred_rp_t *r);

/* The settings a replay of trace runs, in gpureplay's words: specs[0..n) when n > 0 (the
 * user's, in gpureplay's or the framework's words), else the sweep grid of the trace's
 * framework. device_memory (0: gpureplay's default) is what fractions are checked against.
 * *out (malloc'd array of malloc'd strings, pred_rp_free_list) and *n_out. A spec gpureplay
 * rejects is GM_ERR_INVAL with its reason ("bad --policy 'x': ..."). */
gm_status_t pred_rp_list(pred_rp_t *r, const char *trace, const char *const *specs, int n, uint64_t device_memory,
                       char ***out, int *n_out, gm_err_t *err);
void pred_rp_free_list(char **list, int n);

/* What a replay of one setting gave. */
typedef struct pred_rp_result {
  uint64_t peak_reserved_bytes;
  uint64_t ooms;
  uint64_t alloc_retries; /* times the allocator freed its cache to serve a request */
  uint64_t recorded_peak; /* the recorded run's own segments at their peak (0: none, or an older gpureplay) */
} pred_rp_result_t;

/* Replay specs[0..n) over trace (name: what messages call it) on the simulator with the
 * stream events as recorded, within capacity (0: unlimited), the policies seeing
 * device_memory; jobs settings at once. res[i] for specs[i] (the trace's first device). */
typedef struct pred_rp_opts {
  uint64_t capacity, device_memory;
  int jobs;
} pred_rp_opts_t;
gm_status_t pred_rp_replay(pred_rp_t *r, const char *trace, const char *name, const pred_rp_opts_t *o,
                         const char *const *specs, int n, pred_rp_result_t *res, gm_err_t *err);

/* The unsigned integer value of top-level key in the JSON object that starts text (one line of
 * gpureplay --json). GM_OK, or GM_ERR_FORMAT when the key is absent, not an unsigned integer,
 * or the text is not an object (nested values are skipped, strings with their escapes). */
gm_status_t pred_rp_json_u64(const char *text, const char *key, uint64_t *out, gm_err_t *err);

#ifdef __cplusplus
}
#endif
#endif /* PRED_REPLAY_H */
