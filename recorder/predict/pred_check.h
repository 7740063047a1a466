/* pred_check.h: input checks of recorder/predict/ (pred_check.c). Private to the package. */
#ifndef PRED_CHECK_H
#define PRED_CHECK_H

#include "recorder/predict/pred_internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* "8", "0.5": a value as the user would write it. */
void pred_value_text(double v, char *buf, size_t n);
/* pred_job.c: the command line with its value replaced by "{}" wherever it stands as a whole
 * number ("--batch=8" -> "--batch={}", "out/rb8" -> "out/rb{}"). Returns whether anything was
 * replaced. */
int pred_mask_command(const char *cmd, double value, char *out, size_t n);
/* The script or module a command runs ("python train.py", "python -m pkg.mod"), or its program. */
void pred_job_identity(const char *cmd, char *out, size_t n);
/* Commands ca (of input an, at va) and cb: GM_OK when they are one job once the value is
 * masked; also GM_OK with a warning in warn (when empty) when they differ otherwise but run
 * the same script or module; GM_ERR_INVAL when the script or module differs. */
gm_status_t pred_job_compare(const char *an, const char *ca, double va, const char *bn, const char *cb, double vb,
                             char *warn, size_t wn, gm_err_t *err);
/* GM_ERR_INVAL naming the two inputs when they are not one job on one device under one
 * setting, or one ran out of memory, or holds no requests; warn (wn bytes) gets a warning
 * when the commands differ beyond the value but run the same script. */
gm_status_t pred_check_same_job(const pred_rec_t *r, size_t n, char *warn, size_t wn, gm_err_t *err);
/* 1 and a reason when the recordings' structure differs (steps, streams); 0 otherwise. */
int pred_check_structure(const pred_rec_t *r, size_t n, const pred_strings_t *strs, char *reason, size_t rn);

#ifdef __cplusplus
}
#endif
#endif /* PRED_CHECK_H */
