/* pred_runs_check.c: before it predicts, gpurec checks that the replay follows the recordings.
 *
 * A recording of PyTorch's own history (gpurec's default mode, --mode=torch, a snapshot) holds
 * the segments its run's allocator asked the driver for; their peak is the run's own
 * max_memory_reserved. Replayed under the setting the job ran with, each recording must give
 * that figure (analyze/ana_run_check.c checks the same in every report). Where one does not (the
 * driver placed the run's segments otherwise than the replay's model, and PyTorch's best fit
 * broke a tie the other way), a prediction from it may be off by as much, at any value: said
 * before the prediction, as a warning. Where each does, that is said too: the recordings are
 * the evidence the prediction stands on.
 *
 * The replays are gpureplay's (pred_replay.c); without gpureplay nothing is checked and nothing
 * said (a prediction needs none). Recordings of other captures hold no such segments. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "recorder/predict/pred_settings.h"

/* The setting a recording's job ran with, in gpureplay's words; 0 when the recording holds no
 * run's own segments to check it against. */
static int own_setting(const gmt_header_t *h, char *spec, size_t n) {
  if (h->capture_mode != GMT_CAPTURE_TORCH && h->capture_mode != GMT_CAPTURE_TORCH_HISTORY) return 0;
  const char *c = gmt_header_kv_get(h, "torch.alloc_conf");
  if (!c || !*c) c = gmt_header_kv_get(h, "PYTORCH_CUDA_ALLOC_CONF");
  if (!c || !*c) c = gmt_header_kv_get(h, "PYTORCH_ALLOC_CONF");
  if (c && strstr(c, "backend:cudaMallocAsync")) return 0; /* the driver's pool: a range, not a figure */
  int w = c && *c ? snprintf(spec, n, "pytorch:%s", c) : snprintf(spec, n, "pytorch");
  return w > 0 && (size_t)w < n;
}

int pred_runs_check(pred_rp_t *rp, pred_model_t *m, const pred_input_t *in, size_t n, int quiet, char *note,
                    size_t note_len) {
  char dummy[1];
  if (!note) note = dummy, note_len = sizeof dummy;
  note[0] = '\0';
  char tool[4096];
  const char *from = NULL;
  gm_err_t err;
  gm_err_clear(&err);
  pred_rp_t *own = NULL;
  if (!rp) { /* one private folder at a time (pred_replay.c): the caller's when it has one */
    if (!pred_rp_find(tool, sizeof tool, &from) || pred_rp_open(tool, &own, &err) < 0) return 0;
    rp = own;
  }
  pred_rp_opts_t ro = {0, 0, 1};
  int checked = 0, missed = 0;
  for (size_t i = 0; i < n; i++) {
    char spec[600], b1[32], b2[32], b3[32];
    if (!own_setting(pred_model_recording_header(m, i), spec, sizeof spec)) continue;
    const char *specs[1] = {spec};
    pred_rp_result_t r;
    memset(&r, 0, sizeof r);
    if (pred_rp_replay(rp, in[i].path, in[i].path, &ro, specs, 1, &r, &err) < 0 || !r.recorded_peak || r.ooms) continue;
    checked++;
    if (r.peak_reserved_bytes == r.recorded_peak) continue;
    missed++;
    uint64_t off = r.peak_reserved_bytes > r.recorded_peak ? r.peak_reserved_bytes - r.recorded_peak
                                                            : r.recorded_peak - r.peak_reserved_bytes;
    size_t l = strlen(note);
    snprintf(note + l, note_len - l, "%sthe replay misses the recording at %.15g by %.2f %% (%" PRIu64 " bytes)",
             l ? "; " : "", in[i].value, 100.0 * (double)off / (double)r.recorded_peak, off);
    if (!quiet)
      fprintf(stderr, "gpurec: warning: the replay misses the recording at %.15g by %s (%.2f %%): replayed under the "
                      "setting it ran with (%s), %s reserves %s; its run reserved %s (its allocator's own segments): "
                      "a prediction from it may be off by as much\n",
              in[i].value, gm_format_size(off, b1, sizeof b1), 100.0 * (double)off / (double)r.recorded_peak, spec,
              in[i].path, gm_format_size(r.peak_reserved_bytes, b2, sizeof b2),
              gm_format_size(r.recorded_peak, b3, sizeof b3));
  }
  pred_rp_close(own);
  if (checked && !missed)
    snprintf(note, note_len, "each of %d recordings, replayed under the setting its job ran with, reserves what its run "
                             "reserved", checked);
  if (checked && !missed && !quiet)
    fprintf(stderr, "gpurec: checked: each recording (%d), replayed under the setting its job ran with, reserves what "
                    "its run reserved (its allocator's own segments)\n", checked);
  return missed;
}
