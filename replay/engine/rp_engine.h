/* rp_engine.h: the replay engine and its backends (the public header of //replay/engine).
 *
 * The engine turns a recorded request stream (gmt_event_t batches, from the trace reader or
 * an in-memory array) into calls on one allocator policy, and measures what that policy
 * costs: reserved bytes (from the driver calls the policy makes, which the engine forwards
 * and counts), allocated bytes (the policy's own stats), requested bytes (from the trace),
 * peaks, fragmentation, driver calls, OOMs, and a downsampled timeline.
 *
 * Which events are requests: ALLOC, FREE (free completed) and EMPTY_CACHE, for device memory
 * (GMT_MEM_DEVICE or GMT_MEM_UNKNOWN) of one device (the first device that allocates, unless
 * opts.device says otherwise; the others are skipped and counted). SEGMENT_*, VMM_*,
 * POOL_CREATE/TRIM/DESTROY, MARKER, FREE_REQUESTED and ALLOC_FAILED describe the recorded
 * run's own allocator or its failures, not requests: skipped and counted (ALLOC_FAILED is
 * replayed as a request given back at once with opts.serve_failed). POOL_TRIM is CUPTI's
 * record of the driver's pool trimming itself (it follows the recorded run's synchronizations,
 * not the program's wishes); a program's own cudaMemPoolTrimTo (PyTorch's empty_cache under
 * the async backend) is recorded as EMPTY_CACHE by the API callback and is replayed.
 *
 * External memory (rp_engine_set_external_sync): in a `requests` trace the frameworks
 * allocate through cudaMallocAsync, so a synchronous device allocation (no GMT_F_ASYNC:
 * cudaMalloc, cuMemAlloc) comes from code that bypasses the framework's allocator
 * (cuBLAS/cuBLASLt workspaces, NCCL, extensions). It is not a request to the allocator
 * being modelled: it is not fed to the policy, not in reserved, allocated, requested or the
 * lower bound; it is counted apart (result external_*). It still takes device memory: the
 * engine allocates it from the backend directly (outside the counting driver), so a capacity
 * leaves the policy what the libraries left, and one past the capacity is an OOM. rp_sync_is_external() says when a trace is read that way.
 *
 * A backend is an rp_driver_t plus a name and optional measurements (the cuda backend's
 * latencies and the driver's own view of memory in use). Backends: `sim` (here, no CUDA)
 * and `cuda:N` (rp_cuda.h, //replay/cuda:cuda_backend).
 *
 * Libraries never print: every failure returns a gm_status_t with a cause chain. */
#ifndef RP_ENGINE_H
#define RP_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "base/gm_base.h"
#include "formats/gmt.h"
#include "replay/policies/rp_policy.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- latency histogram (fixed log buckets: 8 per power of two, 1 ns .. ~1100 s) ---------- */

#define RP_HIST_BUCKETS (8 * 40)
typedef struct rp_hist {
  uint64_t count;
  uint64_t bucket[RP_HIST_BUCKETS];
} rp_hist_t;

void rp_hist_add(rp_hist_t *h, uint64_t ns);
/* The q-quantile (0 < q <= 1) as the upper edge of its bucket (error < 9%); 0 if empty. */
uint64_t rp_hist_quantile(const rp_hist_t *h, double q);

/* ---- backends ------------------------------------------------------------------------------ */

/* Per-call-kind latencies a backend measured (cuda only; all counts 0 for sim). */
typedef struct rp_backend_latency {
  rp_hist_t alloc; /* mem_alloc, map (cuMemCreate+cuMemMap+cuMemSetAccess), alloc_async */
  rp_hist_t free;  /* mem_free, unmap (+release of the handles), free_async */
} rp_backend_latency_t;

typedef struct rp_backend rp_backend_t;
struct rp_backend {
  rp_driver_t drv; /* what the policy's calls go to (the engine wraps it to count) */
  char name[32];   /* "sim", "cuda:0" */
  char last_error[256]; /* the last failed driver call ("cuMemCreate: CUDA_ERROR_..."), or "" */
  /* Bytes the driver itself reports in use (cuMemGetInfo total - free); NULL for sim. */
  uint64_t (*driver_used)(rp_backend_t *b);
  /* Bytes the stream-ordered pool holds from the device now (cuMemPoolGetAttribute
   * RESERVED_MEM_CURRENT); NULL for sim. The engine counts it as reserved for `async`. */
  uint64_t (*pool_reserved)(rp_backend_t *b);
  /* Latencies measured so far; NULL for sim. */
  const rp_backend_latency_t *(*latency)(rp_backend_t *b);
  /* The capacities (bytes, as this backend counts them) under which every memory-taking call
   * so far would have had the same outcome as it had, so that a replay of the same calls
   * within any of them is the same replay: [*lo, *hi]. 0: unknown (cuda; NULL too). */
  int (*capacity_span)(rp_backend_t *b, uint64_t *lo, uint64_t *hi);
  /* Segments (mem_alloc within the capacity) this backend gave an address so far: where none
   * was, the placement model had nothing to place, and a replay under a bump pointer is the same
   * replay. NULL: unknown (cuda). */
  uint64_t (*placed)(rp_backend_t *b);
  /* Give everything the backend still holds back (streams, pools) and free it. */
  void (*destroy)(rp_backend_t *b);
};

typedef struct rp_sim_opts {
  uint64_t capacity;     /* bytes of device memory; 0 = unlimited. mem_alloc and map fail
                            with GM_ERR_NOMEM past it (sizes counted rounded to granularity) */
  uint64_t granularity;  /* 0: 2 MiB (the driver's on current GPUs) */
  uint64_t total_memory; /* what policies see as the device's total; 0: capacity, else 80 GiB */
  int pool_model;        /* RP_POOL_* bits: the stream-ordered pool's model */
  uint64_t pool_chunk;   /* what the pool grows by; 0: 32 MiB */
  int addresses;         /* segment addresses (rp_va_policy_t, replay/engine/va_model.h): 0 a bump
                            pointer (never reused), 1 the CUDA driver's placement model */
} rp_sim_opts_t;

/* The simulated stream-ordered pool (replay/engine/sim_pool.c): the driver's pool is
 * timing-dependent and its layout unknown, so it is a model with knobs (bits; 0 = the point
 * figure: one growing heap, best fit, every free reusable at once by any stream).
 * RP_POOL_CHUNKS: free memory never coalesces across the 32 MiB chunks the pool grows by;
 * RP_POOL_SAME_STREAM: a free is reusable only by its own stream; RP_POOL_IDEAL: perfect
 * packing, the live bytes rounded up to the chunk (no pool reserves less). gpureplay's range
 * is IDEAL (low) to CHUNKS | SAME_STREAM (high). */
enum { RP_POOL_HEAP = 0, RP_POOL_CHUNKS = 1, RP_POOL_SAME_STREAM = 2, RP_POOL_IDEAL = 4 };

/* Virtual addresses: segments placed as the CUDA driver places them (replay/engine/va_model.h) or from
 * a bump pointer, VA reservations from a bump pointer (deterministic either way: the same calls
 * give the same addresses); a model of the stream-ordered pool for `async`. */
gm_status_t rp_sim_backend_create(const rp_sim_opts_t *opts, rp_backend_t **out, gm_err_t *err);

/* ---- engine -------------------------------------------------------------------------------- */

enum { RP_OTHER_NONE = 0, RP_OTHER_FLAGGED_MAPS = 1, RP_OTHER_ALL_MAPS = 2 };

typedef struct rp_engine_opts {
  int device;      /* device ordinal to replay; -1: the first device that allocates */
  int check;       /* call the policy's check() after every op (tests; slow) */
  uint64_t capacity; /* reported in results only (the backend enforces it) */
  /* Replay the recorded run's failed requests (ALLOC_FAILED) too: each is asked of the policy
   * at the moment it failed and given back at once (nothing in the trace frees it), so a
   * policy that serves it counts it in its peaks and one that cannot within the capacity
   * has an OOM there. Off: they are skipped and counted (skipped.trace_ooms). Either way the
   * first one is described in the result (first_failure_*). */
  int serve_failed;
  /* Buffers the program took through the VMM API one by one (a reservation mapped whole by
   * one cuMemMap, later unmapped and released: XLA's platform allocator) are requests: each
   * whole-reservation map is an alloc of its size, its unmap (or the release) the free, and
   * synchronous allocations are external memory. Maps of part of a reservation (pages of an
   * expandable segment, of a pool) stay the recorded allocator's, skipped. Pairs that do not
   * match (a map without a reservation, an unmap of what was never mapped, a release of what
   * is still mapped or was never reserved) are counted as anomalies (skipped.vmm_*). */
  int vmm_requests;
  /* When a free that waits on stream events (record_stream) gives its block back
   * (engine_events.c): RP_EVENTS_RECORDED as the trace has it (the point figure),
   * RP_EVENTS_EARLY every event already done when the program freed the block,
   * RP_EVENTS_LATE events still pending at the next late_mallocs allocations (0: 1). */
  int event_timing;
  uint64_t late_mallocs;
  /* Memory of other owners than the framework's allocator, counted on the device: the VMM maps
   * that are not requests (NCCL's buffers, formats gmt_owners) are taken from the backend as
   * external memory at their map and given back at their unmap, so that a --capacity what-if
   * leaves the policy only what they left the real program (issue 17). RP_OTHER_*: none; the
   * maps flagged GMT_F_EXTERNAL; every map that is not a request. */
  int count_other;
  /* Optional: a layer between the engine and the policy (NULL: none). The engine calls
   * tap->create instead of ops->create and drives the ops and state it returns, which wrap
   * the policy and see every request and driver call it makes (gpureplay --export-snapshot
   * records the simulated run that way: replay/tool/export/export_memviz.c). */
  const struct rp_policy_tap *tap;
  /* Optional: told of what the policy does, as it does it (NULL: nobody). */
  const struct rp_engine_observer *observer;
  /* 1: only the figures a follower replay reports are wanted (a placement spread's or timing
   * range's replay: the reserved peak, the OOMs, the event figures): the per-request
   * observation (allocated and requested peaks, fragmentation, timeline) and the peak's
   * snapshot with its segment map are not kept, and the result's fields that come from them
   * are zero. The policy's and the driver's calls, hence those figures, are the same. */
  int peak_only;
} rp_engine_opts_t;

/* What a policy did, reported as it happens, with `event`: the index (from 0) of the event
 * being replayed among those this engine was fed, i.e. the request that caused it (calls made
 * by rp_engine_finish, which releases everything, come with the count of events fed). The
 * fidelity harness (tests/fidelity) compares both with the recorded run's own. */
enum { RP_CALL_MEM_ALLOC = 1, RP_CALL_MEM_FREE = 2, RP_CALL_MAP = 3, RP_CALL_UNMAP = 4 };
typedef struct rp_engine_observer {
  void *ctx;
  /* A driver call of the policy that succeeded and moved reserved memory (RP_CALL_*). */
  void (*driver_call)(void *ctx, int call, uint64_t addr, uint64_t size, uint64_t event);
  /* An ALLOC of the trace that the policy served: the block's address (not a handle). */
  void (*served)(void *ctx, const gmt_event_t *ev, uint64_t addr, uint64_t event);
} rp_engine_observer_t;

typedef struct rp_policy_tap {
  void *ctx;
  /* Create the policy `inner` with conf over drv (the engine's counting driver), wrapped:
   * *ops and *out are what the engine then calls. Fails as inner->create does. */
  gm_status_t (*create)(void *ctx, const rp_policy_ops_t *inner, const char *conf, const rp_driver_t *drv,
                        const rp_policy_ops_t **ops, rp_policy_t **out, gm_err_t *err);
} rp_policy_tap_t;

/* What failed first: the policy (its OOM path ran), an external allocation beside it (the
 * device had no room for a library's own cudaMalloc), a request larger than any device. */
enum { RP_OOM_POLICY = 0, RP_OOM_EXTERNAL = 1, RP_OOM_OVERSIZE = 2 };
enum { RP_EVENTS_RECORDED = 0, RP_EVENTS_EARLY = 1, RP_EVENTS_LATE = 2 };
enum { RP_RANGE_NONE = 0, RP_RANGE_EVENTS = 1, RP_RANGE_POOL = 2 };

/* The rule for rp_engine_set_external_sync: a trace captured in `requests` mode (the
 * frameworks were switched to cudaMallocAsync) that has at least one async device
 * allocation. A requests trace with no async allocation is a program that allocates for
 * itself (CUDA C): its synchronous allocations are its requests and are replayed. */
int rp_sync_is_external(unsigned capture_mode, int trace_has_async_alloc);

#define RP_TIMELINE_MAX 2048

/* Counts of events that were not replayed, and trace anomalies. */
typedef struct rp_skip_counts {
  uint64_t not_request;    /* SEGMENT_*, VMM_*, POOL_CREATE/TRIM/DESTROY, MARKER, unknown kinds */
  uint64_t free_requested; /* informational (the FREE that completes it is replayed) */
  uint64_t trace_ooms;     /* ALLOC_FAILED in the recorded run */
  uint64_t other_memory;   /* pinned/managed/static/pageable/array memory */
  uint64_t other_device;   /* events of devices other than the replayed one */
  uint64_t unknown_free;   /* anomaly: FREE of an address that is not live */
  uint64_t double_free;    /* anomaly: FREE of an address freed since (subset of not live) */
  uint64_t alloc_over_live;/* anomaly: ALLOC at a live address (the old block is freed first) */
  uint64_t oversize;       /* anomaly: ALLOC of more than RP_REQUEST_MAX bytes: an OOM for every
                              policy, kept out of requested (and the lower bound) */
  /* opts.vmm_requests: */
  uint64_t vmm_buffers;          /* whole-reservation maps replayed as requests */
  uint64_t vmm_pages;            /* partial maps/unmaps (a pool's pages): not requests */
  uint64_t vmm_map_unreserved;   /* anomaly: map with no reservation (replayed as a request) */
  uint64_t vmm_unmap_unmapped;   /* anomaly: unmap of nothing mapped there */
  uint64_t vmm_release_unknown;  /* anomaly: release of no reservation */
  uint64_t vmm_release_mapped;   /* anomaly: release while still mapped (the buffer is freed) */
} rp_skip_counts_t;

/* The policy's memory at its reserved peak (engine_peak.c): where the reserved bytes went
 * (live requested, rounding inside blocks, free space inside segments that hold a live block,
 * segments that hold none) and a bounded map of its segments with their live blocks. Taken
 * when the reserved peak is reached (and again while reserved stays there and more of it is
 * in use, as fragmentation_at_peak counts it); `reserved_bytes` says which peak it is, as a
 * snapshot waits until half as many events as the last one cost (live blocks + segments)
 * have passed, and is taken at the end if reserved is still at the peak then: a
 * peak left before the end may be described from 2/3 of the way up. Not taken where the engine sees no
 * segments (the stream-ordered pool: `async`). */
#define RP_SNAP_SEGS 48  /* segments in the map: the largest, in address order */
#define RP_SNAP_SPANS 64 /* live spans per segment (blocks closer than a gap merged) */
typedef struct rp_snap_seg {
  uint64_t addr, size, live_bytes; /* live: requested bytes of the live blocks in it */
  uint32_t blocks, n_spans;
  uint64_t span_off[RP_SNAP_SPANS], span_len[RP_SNAP_SPANS]; /* live ranges, from addr */
} rp_snap_seg_t;
typedef struct rp_peak_snapshot {
  int valid;
  uint64_t event, ts_ns; /* the event after which it was taken */
  uint64_t reserved_bytes, allocated_bytes, requested_bytes; /* requested: live and served */
  uint64_t rounding_bytes;          /* allocated - requested: blocks larger than asked */
  uint64_t free_in_segments_bytes;  /* free space in segments that hold a live block */
  uint64_t cached_segments_bytes;   /* segments that hold no live block */
  uint64_t segments, segments_in_use;
  size_t n_segs;
  rp_snap_seg_t seg[RP_SNAP_SEGS];
} rp_peak_snapshot_t;

typedef struct rp_result {
  char policy[256];  /* canonical spec from the policy */
  char backend[32];
  uint64_t capacity_bytes;
  int device;        /* device replayed, -1 if none allocated */
  uint64_t events;   /* events consumed (all kinds) */
  uint64_t allocs, frees, empty_caches; /* requests replayed */
  uint64_t peak_reserved_bytes, peak_allocated_bytes, peak_requested_bytes;
  uint64_t lower_bound_bytes; /* = peak_requested_bytes: the peak of live requested bytes */
  /* External memory (rp_engine_set_external_sync): synchronous allocations outside the
   * modelled allocator. Bytes as the trace gives them (the driver rounds them up again). */
  int external_sync;            /* the rule was in force */
  uint64_t external_allocs, external_frees;
  uint64_t external_maps; /* opts.count_other: VMM maps of other owners counted as external */
  uint64_t external_peak_bytes, external_end_bytes;
  uint64_t peak_reserved_plus_external_bytes; /* peak of reserved + live external, together */
  /* The CUDA context and module code held beside it all (the trace's DEVICE_USAGE records),
   * taken out of the capacity before the replay; 0 if not recorded or not counted. */
  uint64_t context_bytes;
  /* "needs at least": the peak of live requested + live external bytes together (a served
   * failed request counted at its moment): all the device must hold at once with a perfect
   * allocator, the CUDA context aside. */
  uint64_t peak_requested_plus_external_bytes;
  /* The recorded run's failed requests (ALLOC_FAILED of the replayed device) and the first of
   * them as the trace recorded it: where, how big, what was live (requested + external) and
   * what the recorded allocator held (segments and mapped VMM bytes) just before it. */
  uint64_t recorded_failures;
  uint64_t recorded_failures_served;
  /* Frees whose block came back when stream events completed (engine_events.c): a torch
   * trace's free_requested not followed at once by its free, a requests trace's free on
   * another stream than the allocating one. Non-zero: the trace is timing-sensitive. */
  uint64_t event_frees;
  uint64_t event_frees_requested; /* ... of them, torch's free_requested ones (early differs) */
  int event_timing;          /* the opts.event_timing this run replayed */
  uint64_t late_mallocs;     /* ... and its late_mallocs */
  /* Filled by gpureplay (not the engine) for a timing-dependent figure: range_kind
   * RP_RANGE_EVENTS (event_frees > 0): peak reserved with every event early (range_a) and
   * late (range_b); RP_RANGE_POOL (`async` on the simulator): the pool's ideal packing
   * (range_a) and same-stream reuse only (range_b). The range is [min, max] of the point
   * figure and those two. 0: none replayed. */
  int range_kind;
  /* Filled by gpureplay: peak reserved under a bump pointer where the run placed segments
   * with the driver's model (placement_checked), the placement spread (issue 25). */
  int placement_checked;
  uint64_t placement_bump_bytes;
  /* Filled by gpureplay: OOMs in the replays of the range and the spread (0: none, or none
   * replayed): a setting at the edge of its capacity that another timing or placement fails. */
  uint64_t spread_ooms;
  uint64_t range_a_bytes, range_b_bytes, range_low_bytes, range_high_bytes; /* opts.serve_failed: those this policy served */
  int64_t first_failure_event;       /* -1: none */
  uint64_t first_failure_ts_ns, first_failure_size, first_failure_stream;
  uint32_t first_failure_callsite;   /* string id, 0: none */
  int first_failure_served;          /* opts.serve_failed: this policy served the first */
  uint64_t first_failure_live_bytes, first_failure_recorded_reserved_bytes;
  /* Peak of what the recorded run's own allocator held that is not replayed as requests
   * (SEGMENT_ALLOC and VMM maps not taken as requests): a native trace's reservation. */
  uint64_t recorded_mapped_peak_bytes;
  /* What the recorded run's stream-ordered pool reserved at its peak, from the addresses the
   * driver gave (extent rounded up to its 32 MiB chunk); 0: no stream-ordered allocation. */
  uint64_t recorded_pool_reserved_bytes;
  uint64_t first_failure_reserved_bytes; /* this policy's reserved + external just after it */
  uint64_t end_reserved_bytes, end_allocated_bytes, end_requested_bytes;
  double fragmentation_at_peak; /* 1 - allocated/reserved at the (first) reserved peak */
  double fragmentation_mean;    /* time-weighted over the replay while reserved > 0 */
  uint64_t device_alloc_calls;  /* mem_alloc + map + alloc_async calls (failed ones too) */
  uint64_t device_free_calls;   /* mem_free + unmap + free_async */
  uint64_t va_calls;            /* va_reserve + va_release (not reserved memory) */
  uint64_t pool_allocs;         /* alloc_async calls: the reservation is a stream-ordered pool's */
  uint64_t pool_trims;
  uint64_t driver_nomem;        /* driver calls that failed with out-of-memory */
  uint64_t alloc_retries, ooms, splits, merges; /* the policy's counters */
  int64_t first_oom_event;      /* index (from 0, over all events) of the first failed request */
  int64_t first_oom_ts_ns;
  /* The first failed request of this replay (first_oom_event >= 0): what it asked, what was
   * live, and (has_oom_report) the policy's account of its free bytes (rp_oom_report_t). */
  uint64_t first_oom_size, first_oom_stream;
  uint32_t first_oom_callsite;
  int first_oom_cause;               /* RP_OOM_* */
  uint64_t first_oom_live_bytes;     /* requested live just before it (external apart) */
  uint64_t first_oom_external_bytes; /* external memory live then */
  uint64_t first_oom_reserved_bytes; /* the policy's reserved (engine count) just after it */
  int has_oom_report;
  rp_oom_report_t oom_report;
  rp_skip_counts_t skipped;
  uint64_t driver_used_at_peak; /* cuda: cuMemGetInfo's used bytes at the reserved peak */
  /* The backend's capacities (rp_backend_t.capacity_span, so after gpureplay took the context
   * out) that give this very replay: its OOMs and figures, the same driver calls. The tuner's
   * capacity search skips the capacities between by them. same_capacity_known 0: unknown. */
  int same_capacity_known;
  uint64_t same_capacity_lo, same_capacity_hi;
  /* rp_backend_t.placed at the end: segments the backend placed (placed_known 0: unknown). None
   * placed: its placement spread (a bump pointer's replay) would be this very replay. */
  int placed_known;
  uint64_t placed_segments;
  int has_latency;
  uint64_t alloc_p50_ns, alloc_p99_ns, free_p50_ns, free_p99_ns, alloc_samples, free_samples;
  double replay_seconds, events_per_second;
  size_t timeline_n; /* points below; each the max over its time bucket */
  uint64_t tl_ts[RP_TIMELINE_MAX], tl_reserved[RP_TIMELINE_MAX], tl_allocated[RP_TIMELINE_MAX],
      tl_requested[RP_TIMELINE_MAX];
  rp_peak_snapshot_t peak; /* the memory at the reserved peak (see above) */
  /* What a policy's same_run reads of this run (rp_policy.h); not part of the results. */
  rp_run_facts_t facts;
} rp_result_t;

typedef struct rp_engine rp_engine_t;

/* Create the policy `ops` with `conf` ("" for defaults) on backend b, through the engine's
 * counting driver. Bad conf: GM_ERR_INVAL from the policy, naming the key. b must outlive
 * the engine. */
gm_status_t rp_engine_create(const rp_policy_ops_t *ops, const char *conf, rp_backend_t *b,
                             const rp_engine_opts_t *opts, rp_engine_t **out, gm_err_t *err);
/* Replay n events. Fails only when the backend fails (not on OOM, not on anomalies) or,
 * with opts.check, when the policy's invariants break. */
gm_status_t rp_engine_feed(rp_engine_t *e, const gmt_event_t *evs, size_t n, gm_err_t *err);
/* The trace's addresses as dense numbers, resolved once per trace: an engine set up with
 * rp_engine_use_ids indexes an array by number where it would probe a hash map by address
 * each event, with the same results; the replays of one set of events share the numbering.
 * id[i] numbers evs[i]'s address (RP_NO_ID: an event whose address the engine never looks up);
 * numbers are < count. */
#define RP_NO_ID UINT32_MAX
typedef struct rp_addr_ids {
  const gmt_event_t *evs; /* the events numbered (a caller checks it has the same ones) */
  size_t n;
  uint32_t *id;
  size_t id_cap; /* id's room (>= n) */
  uint32_t count;
  struct rp_ids_spares *spares; /* the engines' tables, kept between replays (NULL: none kept) */
} rp_addr_ids_t;
/* Thread-safe once built: the replays of several threads share one numbering. */
gm_status_t rp_addr_ids_build(const gmt_event_t *evs, size_t n, rp_addr_ids_t *out, gm_err_t *err);
/* The same numbering built as the events come (a decoder's thread numbers what is decoded while
 * the rest decodes): begin with the count the trace is expected to have (sizing only; NULL: out
 * of host memory, which end reports), add numbers evs[0, to) (evs: the array as it is now; it
 * may move between calls, the events in it do not change), end numbers the rest of evs[0, n)
 * and fills *out as rp_addr_ids_build would (the builder is gone either way). */
typedef struct rp_ids_builder rp_ids_builder_t;
rp_ids_builder_t *rp_addr_ids_begin(size_t n_hint);
void rp_addr_ids_add(rp_ids_builder_t *b, const gmt_event_t *evs, size_t to);
gm_status_t rp_addr_ids_end(rp_ids_builder_t *b, const gmt_event_t *evs, size_t n, rp_addr_ids_t *out, gm_err_t *err);
void rp_addr_ids_free(rp_addr_ids_t *ids);
/* A trace read batch by batch from its file (too large to hold): numbered as it is read, the
 * same numbers rp_addr_ids_build gives it whole. rp_addr_ids_streamed makes the numbering the
 * engines are set up with (rp_engine_use_ids: count numbers, no events of its own); each batch
 * is numbered by rp_addr_numbering_next (id[i] for evs[i]; id NULL: only counted), which fails
 * past max numbers. The count of a whole trace, known before its replays, sizes their tables. */
typedef struct rp_addr_numbering rp_addr_numbering_t;
gm_status_t rp_addr_numbering_new(uint32_t max, rp_addr_numbering_t **out, gm_err_t *err);
gm_status_t rp_addr_numbering_next(rp_addr_numbering_t *nb, const gmt_event_t *evs, size_t n, uint32_t *id,
                                   gm_err_t *err);
uint32_t rp_addr_numbering_count(const rp_addr_numbering_t *nb);
void rp_addr_numbering_free(rp_addr_numbering_t *nb);
gm_status_t rp_addr_ids_streamed(uint32_t count, rp_addr_ids_t *out, gm_err_t *err);
/* Before the first event: the events will come with their numbers in ids (rp_engine_feed_ids;
 * numbers below ids->count). ids must outlive the engine (it gives its table back there). */
gm_status_t rp_engine_use_ids(rp_engine_t *e, const rp_addr_ids_t *ids, gm_err_t *err);
/* rp_engine_feed with ids[i] the number of evs[i]'s address (an engine set up with
 * rp_engine_use_ids takes its events only so; one that is not, only without: NULL). */
gm_status_t rp_engine_feed_ids(rp_engine_t *e, const gmt_event_t *evs, const uint32_t *ids, size_t n,
                               gm_err_t *err);
/* Read synchronous device allocations (no GMT_F_ASYNC) and their frees as external memory
 * (counted apart, never fed to the policy; see above). Call before the first feed: afterwards
 * it would split one trace between two readings, and returns GM_ERR_INVAL. */
gm_status_t rp_engine_set_external_sync(rp_engine_t *e, int on, gm_err_t *err);
/* End of replay: release everything to the driver and fill *res. Call once. */
gm_status_t rp_engine_finish(rp_engine_t *e, rp_result_t *res, gm_err_t *err);
void rp_engine_destroy(rp_engine_t *e);
/* Current reserved bytes as the engine counts them (tests). */
uint64_t rp_engine_reserved(const rp_engine_t *e);
/* Requests that failed so far (a caller that only asks whether a setting fits stops at one). */
uint64_t rp_engine_ooms(const rp_engine_t *e);
/* Host bytes the engine's own tables hold now (follows live blocks, not trace length). */
size_t rp_engine_host_bytes(const rp_engine_t *e);

#ifdef __cplusplus
}
#endif
#endif /* RP_ENGINE_H */
