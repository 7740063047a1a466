/* pred.h: predicted traces (`gpurec predict A.zst@8 B.zst@16 --at=32 -o C.zst`).
 *
 * From two or more recordings of the same job that differ only in one value the user names
 * (batch, sequence length, width), write the trace of the job at another value: a run nobody
 * made. The recordings' allocation streams are aligned (pred_align.c), each allocation's size
 * is fitted as a function of the value (pred_fit.c: affine from two recordings, quadratic from
 * three), and the reference recording (the one nearest the target) is rewritten with the
 * fitted sizes. The result says how sure it is: the share of the live bytes at the predicted
 * peak that come from allocations matched in every recording with a consistent fit. Below the
 * threshold, or when the recordings' structure differs, nothing is written and the result
 * says why and which recording to add.
 *
 * Library rules: nothing printed, errors as gm_status_t with a cause chain. A refusal is not
 * an error: pred_run returns GM_OK with result->refused set. */
#ifndef PRED_H
#define PRED_H

#include <stddef.h>
#include <stdint.h>

#include "base/gm_base.h"
#include "formats/gmt.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PRED_MAX_INPUTS 8

typedef struct pred_input {
  const char *path; /* a gpumem trace */
  double value;     /* the value the job ran at (batch 8, sequence 512, ...) */
} pred_input_t;

typedef struct pred_opts {
  double target;         /* the value to predict */
  double min_confidence; /* refuse below this (0..1); a negative value means the default 0.95 */
  const char *command;   /* the predict command as typed, for the header (may be NULL) */
  const char *settings_note; /* the per-setting check's outcome, for the header (may be NULL) */
  const char *runs_note;     /* the recordings checked against their runs (pred_runs_check), or NULL */
} pred_opts_t;

#define PRED_DEFAULT_MIN_CONFIDENCE 0.95
/* Refuse when uncertain allocations hold more than this share of the predicted peak at any one
 * moment (pred_judge.c, pred_refuse_uncertain_off_peak, says why). Applied only at min_confidence
 * at or above the default: a lower one accepts uncertain answers. */
#define PRED_MAX_UNCERTAIN_SHARE 0.01

typedef struct pred_result {
  int refused;              /* nothing was written: reason and advice say why */
  char reason[GM_ERR_MSG_MAX];
  char advice[GM_ERR_MSG_MAX]; /* "record once more at 12 and add it: ..." */
  double suggest;           /* the value to record next, 0 if none helps */
  double confidence;        /* share of live bytes at the predicted peak that are certain */
  int quadratic;            /* some sizes were fitted with a quadratic term */
  size_t reference;         /* index of the input the output follows */
  uint64_t events;          /* events written */
  uint64_t allocs;          /* allocations in the prediction */
  uint64_t matched_all;     /* ... matched in every recording */
  uint64_t consistent;      /* ... and with a consistent fit */
  uint64_t carried;         /* ... present in only some recordings, carried by their rule */
  uint64_t near_law;        /* ... matched everywhere, sized by the law of the recordings nearest the target */
  uint64_t dropped_other;   /* allocations of other recordings the reference does not have */
  uint64_t peak_live;       /* predicted peak of live requested bytes */
  uint64_t uncertain_max;   /* the most live bytes of uncertain allocations at any moment */
  double uncertain_share;   /* uncertain_max / peak_live */
  uint64_t ref_peak_live;   /* the reference recording's own peak of live requested bytes */
  uint64_t granule;         /* the recordings' size granularity (1 or 512) */
  /* A refusal for uncertain sizes only (every byte at the predicted peak is an allocation made
   * in every recording; what is not known is some sizes): the trace can still be written, with
   * the fitted sizes or with every uncertain size at the low or high end of its plausible
   * range (pred_model_write_variant), so that a caller that can replay (gpurec predict) checks
   * per setting whether the range moves that setting's peak reserved, and answers where not. */
  int checkable;
  /* pred_model_open: the inputs' commands differ beyond the value but run one script (pred_job.c);
   * empty otherwise. The caller shows it unless the user said --same-job. */
  char warning[GM_ERR_MSG_MAX];
  uint64_t drift_allocs; /* allocations the two recordings nearest the target do not share
                            (pred_judge.c, pred_drift_count): any refuses (at the default
                            --min-confidence or above) unless spanned */
  int drift_spanned;     /* ... a third recording spans it (pred_judge.c, pred_drift_spanned): its
                            allocations are uncertain sizes, checked like the others */
  uint64_t bent;         /* a drift between two recordings alone: the allocations off the predicted
                            peak whose sizes may stop at the reference's, checked per setting
                            between the two (pred.c, pred_bend_ranges); checkable then */
} pred_result_t;

/* Predict and write out_path (nothing is written when refused or on error). Errors: an input
 * that is not a readable trace (GM_ERR_IO/FORMAT/...), inputs of different jobs, settings or
 * devices, a recording that ran out of memory (GM_ERR_INVAL, the message names both inputs). */
gm_status_t pred_run(const pred_input_t *in, size_t n, const pred_opts_t *opts, const char *out_path,
                     pred_result_t *res, gm_err_t *err);

/* The same in steps, for answers that need the prediction at many values (gpurec predict
 * --fit): the recordings are loaded, checked and aligned once, then predicted at any target.
 * in[] (its paths) must outlive the model. A refusal for differing structure comes from
 * pred_model_open (res->refused, *m still made) and again from every pred_model_at. */
typedef struct pred_model pred_model_t;
gm_status_t pred_model_open(const pred_input_t *in, size_t n, pred_model_t **m, pred_result_t *res, gm_err_t *err);
/* Predict at o->target (res as pred_run's, nothing written). */
gm_status_t pred_model_at(pred_model_t *m, const pred_opts_t *o, pred_result_t *res, gm_err_t *err);
/* After a pred_model_at that did not refuse (or refused with res->checkable): the predicted events (a malloc'd copy; callsites
 * are the model's own string ids, not a file's), the header the trace would have, or the
 * trace itself (written to a temporary name and renamed). */
gm_status_t pred_model_events(const pred_model_t *m, gmt_event_t **evs, size_t *n, gm_err_t *err);
gm_status_t pred_model_header(const pred_model_t *m, const pred_opts_t *o, const pred_result_t *res, gmt_header_t *h,
                              gm_err_t *err);
gm_status_t pred_model_write(pred_model_t *m, const pred_opts_t *o, const char *out_path, pred_result_t *res,
                             gm_err_t *err);
/* The header of recording i (NULL past the end). */
const gmt_header_t *pred_model_recording_header(const pred_model_t *m, size_t i);
/* The trace with every uncertain size fitted (pred_model_write), or at the low or high end of
 * its plausible range (pred_size.c, plausible_range, says which range). Also after a refusal when
 * res->checkable; the header then says which sizes (predicted.sizes). */
typedef enum pred_variant { PRED_SIZES_FITTED = 0, PRED_SIZES_LOW, PRED_SIZES_HIGH } pred_variant_t;
gm_status_t pred_model_write_variant(pred_model_t *m, const pred_opts_t *o, pred_variant_t v, const char *out_path,
                                     pred_result_t *res, gm_err_t *err);
void pred_model_close(pred_model_t *m);

/* "A.zst@8" -> path "A.zst" (into buf) and value 8. GM_ERR_INVAL with a reason otherwise. */
gm_status_t pred_parse_input(const char *arg, char *buf, size_t n, pred_input_t *in, gm_err_t *err);

#ifdef __cplusplus
}
#endif
#endif /* PRED_H */
