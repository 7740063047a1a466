/* synth.h: bench/replay's former generator API, now a thin name for bench/synth's "dynamic"
 * model (random sizes scaled per step, a fresh address for every allocation, cudaMalloc-like
 * events; see bench/synth/synth_dynamic.c), which is where that generator moved. Same
 * events for the same (seed, layers) as before. Kept so that replay/cuda/cuda_backend_test.cc
 * builds unchanged; new code includes bench/synth/synth.h and uses synth_gen_* itself. */
#ifndef BENCH_REPLAY_SYNTH_H
#define BENCH_REPLAY_SYNTH_H

#include <stdlib.h>

#include "bench/synth/synth.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef synth_gen_t gr_synth_t;

/* layers: per step (default 64 if 0). */
static inline gr_synth_t *gr_synth_new(uint64_t seed, unsigned layers) {
  synth_opts_t o = {0, seed, layers, 0, 0, SYNTH_DYNAMIC};
  return synth_gen_new(&o);
}
static inline void gr_synth_free(gr_synth_t *s) { synth_gen_free(s); }
/* Next events, up to cap; never 0 (aborts when out of host memory, as it always did: a
 * test or benchmark input has no way to go on). */
static inline size_t gr_synth_next(gr_synth_t *s, gmt_event_t *out, size_t cap) {
  size_t n = synth_gen_next(s, out, cap);
  if (!n) abort();
  return n;
}

#ifdef __cplusplus
}
#endif
#endif /* BENCH_REPLAY_SYNTH_H */
