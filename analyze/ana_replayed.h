/* ana_replayed.h: the analyzer's commands that replay a trace (issue 14): `gpuanalyze oom`
 * (why a replay ran out of memory, and the smallest change that fits) and the peak reserved
 * that `gpuanalyze diff` shows. They replay through gpureplay's own code (//replay:
 * gpureplay_lib, replay/gpureplay.h), never a second model: this library is the analyzer's
 * one link to the replayer, kept apart from //analyze:analyze (which reads results files). */
#ifndef ANA_REPLAYED_H
#define ANA_REPLAYED_H

#include <stdint.h>
#include <stdio.h>

#include "base/gm_base.h"
#include "replay/gpureplay.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ana_replay_opts {
  uint64_t capacity;      /* 0: the recorded failure's, else unlimited */
  uint64_t device_memory; /* 0: the trace's */
  unsigned read_flags;    /* GMT_READ_* */
  int jobs;               /* replays at once (the grid, the search) */
} ana_replay_opts_t;

/* gpureplay's configuration for one trace with these options (sim backend, defaults). */
void ana_replay_config(const ana_replay_opts_t *o, gr_config_t *cfg);

/* Explain the first OOM of spec (NULL: the framework's default) over the trace. */
gm_status_t ana_oom_explain(const char *path, const char *spec, const ana_replay_opts_t *o, gr_oom_t *out,
                            gm_err_t *err);
/* The explanation as text (what failed, what was live, why the free bytes did not serve it,
 * the smallest changes), or as one JSON object. */
void ana_oom_print_text(FILE *f, const char *path, const gr_oom_t *o);
gm_status_t ana_oom_print_json(FILE *f, const char *path, const gr_oom_t *o, gm_err_t *err);

/* The peak reserved (+ external) over the trace of the setting it ran with where the trace
 * records it (a PyTorch memory history's PYTORCH_CUDA_ALLOC_CONF), else of its framework's
 * default; and that setting's spec. */
gm_status_t ana_replay_default_peak(const char *path, const ana_replay_opts_t *o, uint64_t *peak, char *policy,
                                    size_t n, gm_err_t *err);

#ifdef __cplusplus
}
#endif
#endif /* ANA_REPLAYED_H */
