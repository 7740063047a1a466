/* pred_check.h: input checks of recorder/predict/ (pred_check.c). Private to the package. */
#ifndef PRED_CHECK_H
#define PRED_CHECK_H

#include "recorder/predict/pred_internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* "8", "0.5": a value as the user would write it. */
void pred_value_text(double v, char *buf, size_t n);
/* The command line with its value replaced by "{}" where it is a token or ends one after '='
 * or ':' ("--batch=8" -> "--batch={}"). Returns whether anything was replaced. */
int pred_mask_command(const char *cmd, double value, char *out, size_t n);
/* GM_ERR_INVAL naming the two inputs when they are not one job on one device under one
 * setting, or one ran out of memory, or holds no requests. */
gm_status_t pred_check_same_job(const pred_rec_t *r, size_t n, gm_err_t *err);
/* 1 and a reason when the recordings' structure differs (steps, streams); 0 otherwise. */
int pred_check_structure(const pred_rec_t *r, size_t n, const pred_strings_t *strs, char *reason, size_t rn);

#ifdef __cplusplus
}
#endif
#endif /* PRED_CHECK_H */
