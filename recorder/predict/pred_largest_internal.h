/* pred_largest_internal.h: what the search of `gpurec predict --fit` (pred_largest.c) hands to
 * its output (pred_largest_out.c): the points replayed and the answer per setting. Internal to
 * //recorder/predict. */
#ifndef PRED_LARGEST_INTERNAL_H
#define PRED_LARGEST_INTERNAL_H

#include <stdint.h>

#include "base/gm_base.h"
#include "recorder/predict/pred.h"
#include "recorder/predict/pred_largest.h"
#include "recorder/predict/pred_replay.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MAX_POINTS 256

typedef struct point {
  long k;                 /* value = k * step */
  int recorded;           /* the recording itself was replayed */
  int refused;
  double confidence;      /* of the prediction (1 for a recording) */
  uint64_t peak[PRED_LARGEST_MAX_POLICIES];   /* unconstrained */
  int fits[PRED_LARGEST_MAX_POLICIES];
  uint64_t capped[PRED_LARGEST_MAX_POLICIES];  /* where the peak is above the capacity: the replay within it */
  uint64_t retries[PRED_LARGEST_MAX_POLICIES]; /* ... and how often it freed its cache to fit (0: not capped) */
  int checked;                        /* the prediction's uncertain sizes were checked per setting */
  int set_refused[PRED_LARGEST_MAX_POLICIES];  /* ... and the ends of their range disagree on whether this setting fits */
  uint64_t lo[PRED_LARGEST_MAX_POLICIES], hi[PRED_LARGEST_MAX_POLICIES]; /* ... the peak's range */
  char reason[GM_ERR_MSG_MAX], advice[GM_ERR_MSG_MAX];
} point_t;

typedef enum { ANS_FITS = 0, ANS_NONE, ANS_REFUSED, ANS_AT_LEAST } ans_state_t;

typedef struct answer {
  ans_state_t state;
  long lo, hi;            /* largest k known to fit (0: none), smallest known not to (0: none) */
  int refused_at;         /* point index of the refusal, -1 */
} answer_t;

typedef struct search {
  const pred_largest_cfg_t *cfg;
  pred_model_t *model;
  const pred_input_t *in;
  size_t n_in;
  pred_rp_t *rp;           /* gpureplay, and the folder of the predicted traces */
  pred_rp_opts_t ro;       /* how every value is replayed (the capacity set per run) */
  char **specs;          /* the settings, in gpureplay's words (pred_rp_list) */
  int n_specs;
  uint64_t capacity;
  point_t *pts;
  int n_pts;
  int predictions, replays;
} search_t;

static inline double value_of(const search_t *s, long k) { return (double)k * s->cfg->step; }

/* The answer per setting and the curve, on stdout: as text (largest_rec_k: the largest
 * recording's value), CSV, or one JSON object. */
void pred_largest_print_text(const search_t *s, const answer_t *ans, uint64_t device, uint64_t largest_rec_k);
void pred_largest_print_csv(const search_t *s, const answer_t *ans);
void pred_largest_print_json(const search_t *s, const answer_t *ans, uint64_t device);

#ifdef __cplusplus
}
#endif
#endif /* PRED_LARGEST_INTERNAL_H */
