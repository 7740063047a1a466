/* gpureplay_memviz.h: a replayed run as a PyTorch memory snapshot pickle (gpureplay
 * --export-snapshot), for pytorch.org/memory_viz and torch.cuda._memory_viz. Internal to
 * //replay (the tool and its tests).
 *
 * One policy is replayed on the simulator over one trace, every device it allocates on (each
 * its own run, as gpureplay replays them), through an engine tap (rp_policy_tap_t) that sees
 * each request the policy serves, each free, each out-of-memory answer and each driver call it
 * makes. They become the snapshot's device_traces, in the order they happened:
 *   alloc / free_requested / free_completed   a request, at the simulator's block address, of
 *                                             the size the trace asked, with its callsite's frames
 *   segment_alloc / segment_free              the policy's cudaMalloc / cudaFree
 *   segment_map / segment_unmap               its VMM maps (expandable segments)
 *   oom                                       a request it could not serve
 *   snapshot                                  a marker where its reserved bytes peaked
 * The `segments` list is the state after the last event (blocks live, pending or free in each
 * segment), as torch's is: memory_viz rebuilds every earlier state by walking the trace back
 * from it, so it must be the end, and the peak is found by the marker (README.md).
 *
 * Layout (keys and types: gpureplay_memviz_out.c; for users: README.md "In PyTorch's memory_viz"):
 *   {segments: [...], device_traces: [[...] per device], allocator_settings: {...},
 *    gpumem_replay: {trace, policy, peaks, ...}}
 * written whole or not at all (base gm_out). */
#ifndef GPUREPLAY_MEMVIZ_H
#define GPUREPLAY_MEMVIZ_H

#include <stddef.h>
#include <stdint.h>

#include "replay/tool/gpureplay.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One device's simulated run, as the export recorded it. */
typedef struct gr_memviz_device {
  int device;
  uint64_t events;        /* device_traces entries (the peak marker included) */
  uint64_t peak_reserved; /* from the driver calls the tap saw: equal to the engine's */
  uint64_t peak_requested, peak_allocated;
  uint64_t end_segments, end_blocks; /* the final state's */
  uint64_t ooms;
} gr_memviz_device_t;

typedef struct gr_memviz_stats {
  char policy[256];       /* the canonical spec replayed */
  int n_devices;
  gr_memviz_device_t dev[GR_MAX_DEVICES];
  uint64_t callsites;     /* distinct frames lists written */
  uint64_t bytes;         /* the pickle's size */
  double seconds;         /* replay and write */
} gr_memviz_stats_t;

/* Why a policy cannot be exported (NULL: it can): `async` is the driver's stream-ordered pool,
 * whose segments the simulator does not lay out. */
const char *gr_memviz_refuse(const char *spec);

/* Replay spec over the trace at path on the simulator (cfg: capacity, device memory, reading
 * options; its policies and backend are ignored) and write the snapshot to out_path. A trace
 * that recorded an OOM is replayed within what the recorded run had, as gpureplay does. */
gm_status_t gr_memviz_export(const gr_config_t *cfg, const char *path, const char *spec,
                             const char *out_path, gr_memviz_stats_t *st, gm_err_t *err);

/* "wrote OUT (POLICY, 1 device, 1.2 MiB, peak reserved 3.0 GiB on device 0)" into buf. */
const char *gr_memviz_describe(const gr_memviz_stats_t *st, const char *out_path, char *buf, size_t n);

#ifdef __cplusplus
}
#endif
#endif /* GPUREPLAY_MEMVIZ_H */
