/* synth.h: synthetic PyTorch-like training-loop traces, for benchmarks and tests.
 *
 * Two models: "transformer" (synth.c, the default: a sized transformer with cudaMallocAsync
 * events and realistic address reuse; the workload the format and the replayer are measured
 * on) and "dynamic" (synth_dynamic.c: random sizes scaled per step, a fresh address for every
 * allocation, cudaMalloc-like events; the replay benchmarks' worst case for the block map).
 * Both come whole (synth_fill, synth_write) or streamed (synth_gen_*: endless, constant
 * memory). Deterministic for a given (seed, options); a longer run starts with the events of
 * a shorter one. */
#ifndef SYNTH_H
#define SYNTH_H

#include <stddef.h>
#include <stdint.h>

#include "base/gm_base.h"
#include "formats/gmt.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum synth_model { SYNTH_TRANSFORMER = 0, SYNTH_DYNAMIC = 1 } synth_model_t;

typedef struct synth_opts {
  uint64_t events;   /* stop after this many events (synth_fill/synth_write) */
  uint64_t seed;
  uint32_t layers;   /* transformer blocks (0: 24); dynamic: layers per step (0: 64) */
  uint32_t hidden;   /* hidden size (0: 2048); transformer only */
  uint32_t streams;  /* 1 or 2 (0: 2): the second one is a copy stream for input batches; transformer only */
  uint32_t model;    /* synth_model_t (0: transformer) */
  uint32_t batch;    /* sequences per step (0: 8); transformer only: activations scale with it */
  uint32_t callsites; /* 1: every allocation names its role as a callsite (strings after the
                         markers, synth_callsites); transformer only */
  uint32_t world_size; /* > 0: one rank of a job of this many (header rank, world size, one
                          command line for every rank, pid 4242 + rank) */
  uint32_t rank;
  uint32_t streamed; /* 1: the process's recording as gpurec's default mode leaves it before its
                        merge (transformer only): PyTorch's caching-allocator requests flagged
                        GMT_F_TORCH_STREAM (alloc; free_requested then free per free), a
                        segment_alloc per new segment with the driver's cudaMalloc beside it
                        (unflagged), header gpurec_mode=auto: `gpurec import` merges it */
} synth_opts_t;

/* "transformer" / "dynamic" -> model; -1 for another name. */
int synth_model_from_name(const char *name);

/* Marker names, interned in this order (ids 1..SYNTH_N_STRINGS) by synth_write; events from
 * synth_fill use these ids as callsites of MARKER events. */
#define SYNTH_N_STRINGS 4
extern const char *const synth_strings[SYNTH_N_STRINGS];

/* Callsites of the transformer's allocations (o->callsites): interned by synth_write after the
 * markers, ids SYNTH_N_STRINGS + 1 + i; one per role (a weight, a saved activation of kind k,
 * its gradient temporary, ...), as a recorded stack would name the line that allocated. */
#define SYNTH_N_CALLSITES 32
extern const char *const synth_callsites[SYNTH_N_CALLSITES];

/* Fills evs[0..o->events) (caller allocates o->events entries). */
void synth_fill(const synth_opts_t *o, gmt_event_t *evs);
/* A header describing the synthetic run (caller frees with gmt_header_free). */
gm_status_t synth_header(const synth_opts_t *o, gmt_header_t *h, gm_err_t *err);
/* Generates and writes a whole trace to path (streamed: memory does not grow with events). */
gm_status_t synth_write(const synth_opts_t *o, const char *path, const gmt_writer_opts_t *wo, gm_err_t *err);

/* The endless stream (o->events is ignored): the same events synth_fill gives, in order. */
typedef struct synth_gen synth_gen_t;
/* NULL when out of host memory. */
synth_gen_t *synth_gen_new(const synth_opts_t *o);
void synth_gen_free(synth_gen_t *g);
/* Next events, up to cap; returns how many: 0 only when out of host memory. */
size_t synth_gen_next(synth_gen_t *g, gmt_event_t *out, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
