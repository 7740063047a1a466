/* rec_core.h: the CUDA-free core of the recorder: a multi-producer event ring, a background
 * writer thread that orders, compresses and writes events, the provenance header and the
 * trace file naming. The CUPTI adapter (recorder/cupti_adapter.c) is the only producer in a
 * real run; tests and the self-test source drive the same core without CUDA.
 *
 * Threads: rec_core_push*() may be called from any thread and never blocks (a full ring drops
 * and counts the drop). Everything else (ordering, zstd, write(2)) happens on the core's own
 * writer thread, so the application's threads never compress or write. */
#ifndef REC_CORE_H
#define REC_CORE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/gm_base.h"
#include "formats/gmt.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- ring: bounded lock-free multi-producer / single-consumer queue of events ------------- */

typedef struct rec_ring rec_ring_t;

/* capacity is rounded up to a power of two (at least 2). */
gm_status_t rec_ring_create(rec_ring_t **out, size_t capacity, gm_err_t *err);
void rec_ring_destroy(rec_ring_t *r);
/* Any thread. 0 on success, -1 when the ring is full (nothing written). */
int rec_ring_push(rec_ring_t *r, const gmt_event_t *ev);
/* The one consumer thread. Up to cap events into out; returns how many. */
size_t rec_ring_pop(rec_ring_t *r, gmt_event_t *out, size_t cap);
size_t rec_ring_capacity(const rec_ring_t *r);
/* Events pushed so far (every push that found room). */
uint64_t rec_ring_pushed(rec_ring_t *r);

/* ---- core ---------------------------------------------------------------------------------- */

/* What the event source (the CUPTI adapter) provides. Every hook may be NULL. All hooks except
 * final_flush run on the writer thread; final_flush runs on the thread that calls
 * rec_core_stop(), or on the writer thread when a signal stops the core. */
typedef struct rec_hooks {
  void *ctx;
  /* Fill what only the source knows (GPU name, UUID, memory, CUDA/CUPTI versions) just before
   * the file is opened. */
  void (*fill_header)(void *ctx, gmt_header_t *h);
  /* Current time in the events' ts_ns clock. With it the writer keeps events in timestamp
   * order across sources that deliver late (CUPTI buffers) and early (API callbacks). */
  uint64_t (*now_ns)(void *ctx);
  /* Periodic: hand over every record buffered in the source (cuptiActivityFlushAll). After it
   * returns, every event stamped before the now_ns() taken just before the call is pushed. */
  void (*tick)(void *ctx);
  /* At stop: hand over everything, including partial buffers. */
  void (*final_flush)(void *ctx);
  /* The text of a callsite id that the source put into events (its own string table), or NULL.
   * Without this hook events' callsite ids are written as they are. */
  const char *(*string)(void *ctx, uint32_t id);
  /* The core stopped recording because of msg (write failed, ...). Called once. */
  void (*warn)(void *ctx, const char *msg);
} rec_hooks_t;

/* The default flush interval: what a SIGKILL of the process loses at most (plus the order
 * margin and one pass of the writer); gpurec says it when it marks a killed job's trace. */
#define REC_FLUSH_INTERVAL_NS 500000000ull
/* Bytes of room in each trace's header (gmt_header_t.room) for coverage marks written later. */
#define REC_HEADER_ROOM 1024

typedef struct rec_config {
  const char *path;           /* trace file to write */
  const char *manifest;       /* optional: append "path\n" here when the file is created */
  gmt_header_t header;        /* provenance; copied; the writer fills versions */
  uint64_t flush_interval_ns; /* tick + chunk flush period (0: REC_FLUSH_INTERVAL_NS) */
  uint64_t open_after_ns;     /* open the file at the latest this long after start (0: 1 s) */
  uint64_t order_margin_ns;   /* events this close to the horizon wait one more tick (0: 10 ms) */
  size_t ring_events;         /* ring capacity (0: 65536) */
  /* Frees of size 0 (the callback capture: cuMemFree and cuMemFreeAsync do not say the size)
   * get the size, and an unknown memory kind the kind, of the live allocation at that address,
   * looked up on the writer thread in timestamp order (never on the application's threads). */
  int fill_free_sizes;
  gmt_writer_opts_t writer;   /* chunking / zstd level */
} rec_config_t;

typedef struct rec_core rec_core_t;

/* Start the writer thread. The file is opened once rec_core_gpu_ready() is called, or
 * open_after_ns after start if events came without it (so fill_header can see the GPU). A core
 * that saw neither a context nor an event writes no file at all. */
gm_status_t rec_core_start(rec_core_t **out, const rec_config_t *cfg, const rec_hooks_t *hooks,
                           gm_err_t *err);
/* Any thread, never blocks. Returns 0, or -1 if the event was dropped (ring full, stopped). */
int rec_core_push(rec_core_t *c, const gmt_event_t *ev);
/* For a source's own delivery thread (CUPTI's buffer callback): waits up to max_wait_ns for
 * room before dropping. Returns how many were dropped. */
size_t rec_core_push_batch(rec_core_t *c, const gmt_event_t *evs, size_t n, uint64_t max_wait_ns);
/* rec_core_push_batch of one event, for a source's hot path (PyTorch's allocator trace, one call
 * per entry): the ring's push inline, the wait out of line. 0, or -1 if it was dropped. */
int rec_core_push_entry(rec_core_t *c, const gmt_event_t *ev, uint64_t max_wait_ns);

/* An event whose ts_ns has REC_TS_TICKS set carries, in its other bits, the CPU's time-stamp
 * counter read on the pushing thread before the push (REC_HAVE_TICKS: x86-64 only), in place of
 * a time: the writer puts it onto hooks.now_ns's clock, interpolating between readings of both
 * clocks it takes as it drains (one after each batch it pops, so every counter reading of the
 * batch lies between two), and the producer does no clock work at all. The map is one for all
 * threads and increasing, so each thread's events keep their order. A reading outside what the
 * counter can have said (0, before the core started, after the writer's own reading) is clamped,
 * counted (rec_core_stats_t.bad_ticks), and from then on rec_core_push_entry replaces every
 * event's reading with its own. Needs hooks.now_ns (without it such events get time 0). */
#define REC_TS_TICKS (1ull << 63)
#if defined(__x86_64__)
#define REC_HAVE_TICKS 1
#else
#define REC_HAVE_TICKS 0
#endif
/* Records the source lost (CUPTI dropped count); they go into the next chunk. */
void rec_core_add_dropped(rec_core_t *c, uint64_t n);
/* The source saw a GPU context: the header can be filled now. */
void rec_core_gpu_ready(rec_core_t *c);
/* Stop recording after a failure of the source: warn (through hooks.warn) once with msg,
 * drop everything still queued and leave the file truncated (readable up to its last chunk). */
void rec_core_fail(rec_core_t *c, const char *msg);
/* Normal end (atexit): final_flush, drain, write the index, close. Idempotent. The core stays
 * allocated (pushes after stop are dropped); rec_core_destroy frees it. */
gm_status_t rec_core_stop(rec_core_t *c);
/* Any thread but the writer's (not a signal handler): write everything pushed so far and flush
 * it to the file now, without closing it, waiting at most timeout_ns; for a process about to
 * die without exit() (Python re-raises an uncaught KeyboardInterrupt's SIGINT after finalizing).
 * Returns 1 when it is on disk. */
int rec_core_sync(rec_core_t *c, uint64_t timeout_ns);
/* Async-signal-safe end (SIGTERM handler): asks the writer thread to flush and close, waits
 * at most timeout_ns. Returns 1 if the trace was closed in time. */
int rec_core_stop_from_signal(rec_core_t *c, uint64_t timeout_ns);
void rec_core_destroy(rec_core_t *c);

typedef struct rec_core_stats {
  uint64_t pushed;     /* events accepted into the ring */
  uint64_t written;    /* events handed to the trace writer */
  uint64_t ring_drops; /* dropped because the ring was full */
  uint64_t src_drops;  /* dropped by the source (CUPTI) */
  uint64_t file_bytes;
  int failed;
  int closed;
  uint64_t bad_ticks;  /* REC_TS_TICKS events whose reading was not the counter's (clamped) */
} rec_core_stats_t;
void rec_core_stats(const rec_core_t *c, rec_core_stats_t *st);
/* "" until the file is named; the path the core writes. */
const char *rec_core_path(const rec_core_t *c);

/* ---- device usage (rec_devmem.c) ------------------------------------------------------------ */

/* Each device's mapped device memory as the trace's events hold it, in timestamp order (the
 * writer thread's view). */
#define REC_MAPPED_DEVICES 64
typedef struct rec_mapped {
  uint64_t bytes[REC_MAPPED_DEVICES];
} rec_mapped_t;
/* Account ev; a DEVICE_USAGE record (size = the driver's count) gets size = count - mapped.
 * Returns 0 to write ev, -1 to leave it out (a count below the mapped bytes, a device past
 * REC_MAPPED_DEVICES). */
int rec_mapped_apply(rec_mapped_t *m, gmt_event_t *ev);

/* ---- frameworks (rec_frameworks.c) --------------------------------------------------------- */

/* Adds `framework.<name>` = version ("unknown" without pip metadata) to h for each framework
 * whose CUDA library the process has loaded: pytorch, jax, tensorflow, cupy. Returns how many.
 * Call after the first CUDA context exists (the frameworks have loaded their libraries). */
int rec_frameworks_fill(gmt_header_t *h);

/* ---- provenance and naming (rec_prov.c) ---------------------------------------------------- */

/* RANK / WORLD_SIZE / LOCAL_RANK (or OMPI_COMM_WORLD_*, SLURM_PROCID...); -1 where unset. */
void rec_prov_rank(int *rank, int *world_size, int *local_rank);
/* Fill what the process knows about itself: host, pid, rank, world size, command line
 * (/proc/self/cmdline), the allocator environment variables, the NVIDIA driver version
 * (/proc/driver/nvidia/version), the start time (now). mode: gmt_capture_mode_t. */
gm_status_t rec_prov_fill(gmt_header_t *h, unsigned mode, gm_err_t *err);
/* The allocator environment variables that go into every header ("PYTORCH_CUDA_ALLOC_CONF",
 * ..., NULL-terminated; XLA_PYTHON_CLIENT_* is matched by prefix). */
extern const char *const rec_prov_env_vars[];
/* The per-process trace name for template tmpl ("run.zst"; "%p" is replaced by pid):
 * "<stem>[.rank<R>].pid<P>.zst" with stem = tmpl without its ".zst". */
gm_status_t rec_trace_name(const char *tmpl, int rank, long pid, char *out, size_t n,
                           gm_err_t *err);
/* The same for a second trace of the same process ("torch": "<stem>.torch[.rankR].pidP.zst"). */
gm_status_t rec_trace_name_tag(const char *tmpl, const char *tag, int rank, long pid, char *out,
                               size_t n, gm_err_t *err);

/* ---- finding CUPTI (rec_find.c) ------------------------------------------------------------- */

/* dlopen libcupti from where CUDA installs put it (see rec_find.c for the order). Returns the
 * handle, or NULL; path gets the file (or why it is known). */
void *rec_cupti_open(char *path, size_t n);
/* cuptiGetVersion through the handle; 1 on success. */
int rec_cupti_version(void *lib, uint32_t *version);

/* Environment variables between the launcher and the injection library. */
#define REC_ENV_OUT "GPUMEM_OUT"           /* -o template */
#define REC_ENV_MANIFEST "GPUMEM_MANIFEST" /* file the traces' names are appended to */
#define REC_ENV_MODE "GPUMEM_MODE"         /* requests | native | torch */
#define REC_ENV_CUPTI "GPUMEM_CUPTI"       /* libcupti path or directory: only that is tried */
#define REC_ENV_CAPTURE "GPUMEM_CAPTURE"   /* callbacks (default) | activity */
#define REC_ENV_CALLSITES "GPUMEM_CALLSITES" /* user (default) | stack | none */
#define GPUREC_VERSION GM_VERSION
#define REC_ENV_SELFTEST "GPUMEM_SELFTEST" /* N: no CUDA; emit N synthetic records (tests) */

#ifdef __cplusplus
}
#endif
#endif /* REC_CORE_H */
