/* synth_dynamic.h: the "dynamic" model (synth_dynamic.c), behind synth.h's synth_gen API.
 * Private to //bench/synth. */
#ifndef SYNTH_DYNAMIC_H
#define SYNTH_DYNAMIC_H

#include <stddef.h>
#include <stdint.h>

#include "formats/gmt.h"

typedef struct synth_dyn synth_dyn_t;

/* layers: per step (default 64 if 0). NULL when out of host memory. */
synth_dyn_t *synth_dyn_new(uint64_t seed, unsigned layers);
void synth_dyn_free(synth_dyn_t *s);
/* Next events, up to cap; returns how many: 0 only when out of host memory (the stream is
 * otherwise endless). Every block allocated is freed eventually except the parameters. */
size_t synth_dyn_next(synth_dyn_t *s, gmt_event_t *out, size_t cap);

#endif /* SYNTH_DYNAMIC_H */
