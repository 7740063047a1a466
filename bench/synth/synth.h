/* synth.h: a synthetic PyTorch-like training-loop trace, for benchmarks and tests.
 *
 * Until recorded traces exist, this is the "realistic" workload the format and the replayer
 * are measured on. Deterministic for a given (events, seed, options). */
#ifndef SYNTH_H
#define SYNTH_H

#include <stddef.h>
#include <stdint.h>

#include "base/gm_base.h"
#include "formats/gmt.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct synth_opts {
  uint64_t events;   /* stop after this many events */
  uint64_t seed;
  uint32_t layers;   /* transformer blocks (0: 24) */
  uint32_t hidden;   /* hidden size (0: 2048) */
  uint32_t streams;  /* 1 or 2 (0: 2): the second one is a copy stream for input batches */
} synth_opts_t;

/* Marker names, interned in this order (ids 1..SYNTH_N_STRINGS) by synth_write; events from
 * synth_fill use these ids as callsites of MARKER events. */
#define SYNTH_N_STRINGS 4
extern const char *const synth_strings[SYNTH_N_STRINGS];

/* Fills evs[0..o->events) (caller allocates o->events entries). */
void synth_fill(const synth_opts_t *o, gmt_event_t *evs);
/* A header describing the synthetic run (caller frees with gmt_header_free). */
gm_status_t synth_header(const synth_opts_t *o, gmt_header_t *h, gm_err_t *err);
/* Generates and writes a whole trace to path. */
gm_status_t synth_write(const synth_opts_t *o, const char *path, const gmt_writer_opts_t *wo, gm_err_t *err);

#ifdef __cplusplus
}
#endif
#endif
