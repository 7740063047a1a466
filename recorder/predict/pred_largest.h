/* pred_largest.h: `gpurec predict ... --fit=SIZE` (pred_largest.c): the largest value of the job
 * that fits a device, per allocator setting, and the peak reserved against the value. */
#ifndef PRED_LARGEST_H
#define PRED_LARGEST_H

#include <stdint.h>

#include "recorder/predict/pred.h"

#define PRED_LARGEST_MAX_POLICIES 32

typedef struct pred_largest_cfg {
  uint64_t device;       /* the device's memory as the frameworks see it; 0: the recordings' */
  uint64_t other;        /* memory on it that is not the framework's (context, libraries) */
  double margin;         /* for the prediction's error: capacity = (device - other) / (1 + margin) */
  double step;           /* values searched: multiples of it */
  double max;            /* largest value tried */
  double min_confidence; /* as pred_opts_t (negative: the default) */
  const char *const *policies; /* --policy as given (gpureplay's or the framework's words); */
  int n_policies;              /* none: gpureplay's grid for the first recording's framework */
  const char *format;    /* "text", "csv", "json" */
  const char *name;      /* what the value is called in the output ("batch") */
  int quiet;
  int same_job;          /* --same-job: no warning when the commands differ beyond the value */
} pred_largest_cfg_t;

/* Search, print the answer on stdout, say what it cost on stderr. Returns the exit code: 0
 * answered; 1 error; 3 the prediction refused (structure, or at a value a setting needed). */
int pred_largest(const pred_largest_cfg_t *cfg, const pred_input_t *in, size_t n);

#endif /* PRED_LARGEST_H */
