/* synth.h: a synthetic training-like request stream, for the replay benchmarks and the
 * gpureplay CLI tests until real traces and //bench/synth exist.
 *
 * Shape (what PyTorch training looks like to an allocator): parameters allocated once; then
 * steps, each a forward pass (per layer: a few activations kept for backward plus a
 * short-lived workspace), a backward pass in reverse order (gradient temporaries; the
 * layer's activations freed), and an optimizer tail. Layer sizes are fixed per layer but a
 * per-step "sequence length" scales them by 0.75-1.25 (dynamic shapes), which is what makes
 * caching allocators fragment. Sizes mix small (<1 MiB), medium (1-10 MiB) and large
 * tensors; 10% of layers run on a second stream. Deterministic for a seed. */
#ifndef BENCH_REPLAY_SYNTH_H
#define BENCH_REPLAY_SYNTH_H

#include <stddef.h>
#include <stdint.h>

#include "formats/gmt.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gr_synth gr_synth_t;

/* layers: per step (default 64 if 0). */
gr_synth_t *gr_synth_new(uint64_t seed, unsigned layers);
void gr_synth_free(gr_synth_t *s);
/* Next events, up to cap; returns how many (never 0: the stream is endless). Every block
 * allocated is freed eventually except the parameters. */
size_t gr_synth_next(gr_synth_t *s, gmt_event_t *out, size_t cap);

#ifdef __cplusplus
}
#endif
#endif /* BENCH_REPLAY_SYNTH_H */
