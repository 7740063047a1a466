/* pred_settings.h: the per-setting check of a prediction whose uncertain sizes might matter
 * (pred_settings.c). */
#ifndef PRED_SETTINGS_H
#define PRED_SETTINGS_H

#include <stddef.h>
#include <stdint.h>

#include "base/gm_base.h"
#include "recorder/predict/pred_replay.h"
#include "recorder/predict/pred.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The default tolerance: the tightest target of issue 19 (1 % at 2x the recordings). */
#define PRED_DEFAULT_TOLERANCE 0.01

/* One setting's outcome: its peak reserved with the fitted sizes and at both ends of the
 * uncertain sizes' range (unconstrained), and whether the range moved it by no more than the
 * tolerance (answered) or not (refused for this setting). */
typedef struct pred_setting {
  uint64_t peak_fitted, peak_low, peak_high;
  uint64_t lo, hi; /* the smallest and largest of the three */
  double move;     /* (hi - lo) / peak_fitted */
  int answered;
} pred_setting_t;

/* Replay the prediction pred_model_at last made (res->checkable) with its uncertain sizes
 * fitted, low and high, under specs[0..n) through gpureplay (rp's folder holds the traces),
 * unconstrained; fills out[0..n). */
gm_status_t pred_settings_check(pred_rp_t *rp, pred_model_t *m, const pred_opts_t *o, pred_result_t *res,
                           const char *const *specs, int n, const pred_rp_opts_t *ro, double tolerance,
                           pred_setting_t *out, gm_err_t *err);

/* The framework's grid as gpureplay lists it, less what the recorded job cannot be given: for
 * PyTorch, gpureplay's grid also replays other frameworks' allocators (BFC, preallocation, the
 * driver's direct calls) for comparison, which no PYTORCH_CUDA_ALLOC_CONF selects; a PyTorch
 * job's prediction is neither answered nor sized under them. Keeps list[0..*n) in order, frees
 * the others; h is the first recording's header. */
void pred_settings_own(char **list, int *n, const gmt_header_t *h);

/* Each recording of PyTorch's own history replayed under the setting its job ran with, against
 * its run's own segments (pred_runs_check.c): a warning on stderr for each the replay misses,
 * one line when all match (nothing when quiet, or without gpureplay). rp: an open replayer, or
 * NULL to open one for the check. note (may be NULL): the outcome in a few words, for the
 * predicted trace's header ("" when nothing was checked). Returns how many missed. */
int pred_runs_check(pred_rp_t *rp, pred_model_t *m, const pred_input_t *in, size_t n, int quiet, char *note,
                    size_t note_len);

/* "pytorch=answered 5.71..5.72 GiB (0.2 %); pytorch:max_split_size_mb:128=refused (+3.1 %)":
 * the header's predicted.settings and what gpurec says. */
void pred_settings_note(const char *const *specs, const pred_setting_t *cs, int n, double tolerance, char *buf, size_t len);

/* `gpurec predict ... --at=V -o OUT` after a checkable refusal: open gpureplay, list the
 * settings (specs as the user gave them, or the framework's grid), check, and when at least
 * one setting is answered write OUT with the note in its header. Prints what it found on
 * stderr. Returns the exit code: 0 written, 1 error, 2 a setting gpureplay rejects, 3 refused
 * under every setting. */
int pred_settings_write(pred_model_t *m, const pred_input_t *in, pred_opts_t *o, pred_result_t *res,
                    const char *const *specs, int n_specs, double tolerance, const char *out_path, int quiet);

#ifdef __cplusplus
}
#endif
#endif /* PRED_SETTINGS_H */
