/* gmt.h: the gpumem trace format library: events, header (provenance), writer, reader.
 *
 * One public header for formats/. The file layout is normative in formats/SPEC.md; this
 * header is the in-memory view. A trace is a valid zstd stream: the header and the index
 * live in zstd skippable frames, events in independent zstd frames ("chunks"), each with
 * a sequence number, a CUPTI dropped-record count and a checksum.
 *
 * Threading: a writer or reader is used by one thread at a time. The library never prints
 * and never exits; every failure comes back as a gm_status_t with a cause chain in gm_err_t.
 * Messages never repeat the path the caller passed in: the caller wraps them, e.g.
 *   gm_err_wrap(&err, "cannot open '%s'", path)
 *   -> "cannot open 'x.zst': chunk 17 at offset 1048576: checksum mismatch". */
#ifndef GMT_H
#define GMT_H

#include <stddef.h>
#include <stdint.h>

#include "base/gm_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Writer version of this library, and the oldest reader version that can read what it writes. */
#define GMT_FORMAT_VERSION 1
#define GMT_FORMAT_MIN_READER 1

/* ---- events -------------------------------------------------------------------------------- */

/* Event kinds. Values are part of the file format: never renumber, only append. */
#define GMT_KIND_LIST(X)                                                                          \
  X(ALLOC, 1, "alloc")                   /* a request got memory: addr, size, stream */          \
  X(FREE, 2, "free")                     /* memory at addr is reusable (free completed) */        \
  X(ALLOC_FAILED, 3, "alloc_failed")     /* a request for size failed (OOM) */                   \
  X(FREE_REQUESTED, 4, "free_requested") /* program freed addr; reuse waits for FREE (record_stream) */ \
  X(SEGMENT_ALLOC, 5, "segment_alloc")   /* the app's allocator took a segment from the driver */ \
  X(SEGMENT_FREE, 6, "segment_free")     /* ... and gave it back */                               \
  X(VMM_RESERVE, 7, "vmm_reserve")       /* cuMemAddressReserve: addr, size */                   \
  X(VMM_MAP, 8, "vmm_map")               /* cuMemMap (+cuMemCreate): addr, size */               \
  X(VMM_UNMAP, 9, "vmm_unmap")           /* cuMemUnmap: addr, size */                            \
  X(VMM_RELEASE, 10, "vmm_release")      /* cuMemAddressFree: addr, size */                      \
  X(POOL_CREATE, 11, "pool_create")      /* memory pool created: addr = pool id */               \
  X(POOL_TRIM, 12, "pool_trim")          /* pool trimmed (empty_cache under cudaMallocAsync); size = keep bytes */ \
  X(POOL_DESTROY, 13, "pool_destroy")                                                             \
  X(MARKER, 14, "marker")                /* step/phase boundary: callsite = name string, size = value */ \
  X(EMPTY_CACHE, 15, "empty_cache")      /* the app asked its allocator to release cached memory */ \
  X(ALLOC_SITE, 16, "alloc_site")        /* not a request: the callsite of one the framework's allocator served at addr */ \
  X(DEVICE_USAGE, 17, "device_usage")    /* the driver's count beyond the trace's maps: addr = GMT_USAGE_* */

typedef enum gmt_kind {
#define GMT_KIND_ENUM(name, val, str) GMT_EV_##name = val,
  GMT_KIND_LIST(GMT_KIND_ENUM)
#undef GMT_KIND_ENUM
  GMT_EV_KIND_MAX
} gmt_kind_t;

/* Memory kinds (a subset of CUPTI's, which map onto these in the recorder). */
typedef enum gmt_mem_kind {
  GMT_MEM_UNKNOWN = 0,
  GMT_MEM_DEVICE = 1,
  GMT_MEM_PINNED = 2,        /* page-locked host */
  GMT_MEM_MANAGED = 3,
  GMT_MEM_DEVICE_STATIC = 4, /* module globals: not an allocation request */
  GMT_MEM_PAGEABLE = 5,
  GMT_MEM_ARRAY = 6,
  GMT_MEM_KIND_MAX
} gmt_mem_kind_t;

/* Event flags. */
#define GMT_F_ASYNC 0x1u      /* stream-ordered (cudaMallocAsync / cudaFreeAsync) */
#define GMT_F_FROM_POOL 0x2u  /* served from a memory pool */
#define GMT_F_SYNTHETIC 0x4u  /* made up by a converter (e.g. an implied free), not observed */
/* Memory beside the allocator whose requests the trace holds: a library's own driver allocation
 * (NCCL, a cuBLAS workspace outside PyTorch's pool) in a torch-history trace, whose requests
 * come from PyTorch's history. A replay keeps it out of the policy (external memory). */
#define GMT_F_EXTERNAL 0x8u
/* A raw entry of PyTorch's allocator trace, streamed by the recorder into a process's own trace
 * (recorder/rec_torch_stream.c): gpurec's merge makes it the request it is and clears the flag.
 * A trace still holding such events is an unmerged recording (gpurec was killed before it
 * merged): the replay refuses it and `gpurec import` merges it. */
#define GMT_F_TORCH_STREAM 0x10u

/* DEVICE_USAGE (SPEC.md 5.4.1): size = bytes the driver counted on the device beyond what the
 * trace's own events held mapped there at ts (the CUDA context, module code the driver loaded);
 * addr says what the driver counted. */
#define GMT_USAGE_PROCESS 1u /* this process's memory on the device (NVML's per-process count) */
#define GMT_USAGE_DEVICE 2u  /* the whole device (cuMemGetInfo: total - free, every process) */

#define GMT_STREAM_NONE UINT64_MAX /* the operation has no stream (synchronous) */
#define GMT_NO_STRING 0u           /* callsite id meaning "none" */
/* The largest size an importer accepts for memory that exists (every kind but alloc_failed):
 * 2^48 bytes (256 TiB), a thousand times any GPU's memory. A larger size is a wrapped-around
 * value (-1 read as 2^64-1), never a real block (SPEC.md section 8). */
#define GMT_MAX_SIZE (1ull << 48)
/* Distinct header key/value pairs (SPEC.md section 3; a real trace has a few dozen). */
#define GMT_MAX_KV 4096

/* One event, fully decoded. Every field is meaningful for every kind (0 / GMT_STREAM_NONE
 * where it does not apply), so consumers never need per-kind unions. */
typedef struct gmt_event {
  uint64_t ts_ns;    /* nanoseconds since the trace's start_time_ns (monotonic within a process) */
  uint64_t addr;     /* device virtual address (pool id for POOL_*) */
  uint64_t size;     /* bytes */
  uint64_t stream;   /* stream id, GMT_STREAM_NONE if none */
  uint64_t corr_id;  /* CUPTI correlation id, 0 if unknown */
  uint32_t callsite; /* string table id of the stack/callsite, GMT_NO_STRING if none */
  uint32_t context;  /* CUDA context id, 0 if unknown */
  uint32_t flags;    /* GMT_F_* */
  uint16_t device;   /* device ordinal */
  uint8_t kind;      /* gmt_kind_t */
  uint8_t mem_kind;  /* gmt_mem_kind_t */
} gmt_event_t;

/* "alloc", ... ; NULL for an unknown kind. */
const char *gmt_kind_name(unsigned kind);
/* Inverse of gmt_kind_name; 0 if unknown. */
unsigned gmt_kind_from_name(const char *name);
const char *gmt_mem_kind_name(unsigned mem_kind);
unsigned gmt_mem_kind_from_name(const char *name);

/* ---- header (provenance) ------------------------------------------------------------------- */

typedef enum gmt_capture_mode {
  GMT_CAPTURE_UNKNOWN = 0,
  GMT_CAPTURE_REQUESTS = 1, /* frameworks switched to direct-to-driver allocation */
  GMT_CAPTURE_NATIVE = 2,   /* the application's own allocator, as is */
  GMT_CAPTURE_TORCH = 3,    /* PyTorch memory history (snapshot) */
  GMT_CAPTURE_IMPORT = 4,   /* converted from CSV or another tool's file */
  GMT_CAPTURE_SYNTHETIC = 5, /* generated (tests, benchmarks) */
  /* gpurec's default for PyTorch: PyTorch's own history (its requests, allocator as the user
   * set it) merged with the CUPTI trace of the same process (other libraries' driver calls,
   * GMT_F_EXTERNAL) on the CUPTI trace's clock */
  GMT_CAPTURE_TORCH_HISTORY = 6
} gmt_capture_mode_t;

const char *gmt_capture_mode_name(unsigned mode);
unsigned gmt_capture_mode_from_name(const char *name); /* 0 if unknown */

/* Free-form key/value pairs for what the fixed fields do not cover (allocator env vars,
 * PyTorch's allocator_settings, ...). Keys are ASCII; values are UTF-8 strings. */
typedef struct gmt_kv {
  char *key;
  char *value;
} gmt_kv_t;

typedef struct gmt_header {
  uint32_t format_version; /* writer's GMT_FORMAT_VERSION (filled by the writer) */
  uint32_t min_reader;     /* GMT_FORMAT_MIN_READER (filled by the writer) */
  uint32_t capture_mode;   /* gmt_capture_mode_t */
  int32_t rank;            /* -1 if not set */
  int32_t world_size;      /* -1 if not set */
  uint32_t pid;
  uint64_t start_time_ns;  /* wall clock (Unix epoch, ns) at ts_ns == 0 */
  uint64_t gpu_total_mem;  /* bytes of device 0 (or the one recorded); 0 if unknown */
  char *host;
  char *gpu_name;
  char *gpu_uuid;
  char *driver_version;
  char *cuda_version;
  char *cupti_version;
  char *tool;              /* "gpurec 0.1.0", "gpurec 0.1.0 import" */
  char *command_line;      /* as the user typed it, arguments joined with spaces */
  gmt_kv_t *kv;            /* env vars: PYTORCH_CUDA_ALLOC_CONF=..., allocator_settings, ... */
  size_t n_kv;
  /* Bytes of room (tag 16, SPEC.md §3): padding a writer reserves so that the header can be
   * rewritten in place later (gmt_trace_mark: coverage marks after the recording stopped)
   * without moving the chunks. Kept by decode and copy; 0: none; 1 is written as none. */
  size_t room;
} gmt_header_t;

/* A zeroed header with rank/world_size = -1. */
void gmt_header_init(gmt_header_t *h);
/* Frees every string and the kv array (headers from gmt_header_copy / the reader's own). */
void gmt_header_free(gmt_header_t *h);
gm_status_t gmt_header_copy(gmt_header_t *dst, const gmt_header_t *src, gm_err_t *err);
/* Set a string field or append/replace a kv pair, copying the strings. */
gm_status_t gmt_header_set(char **field, const char *value, gm_err_t *err);
gm_status_t gmt_header_kv_set(gmt_header_t *h, const char *key, const char *value, gm_err_t *err);
const char *gmt_header_kv_get(const gmt_header_t *h, const char *key); /* NULL if absent */

/* ---- frameworks ---------------------------------------------------------------------------- */

/* The frameworks whose allocator a trace's requests come from. gpurec writes header kv
 * `framework.<name>` = version for each framework the process had loaded (SPEC.md §3); older
 * traces say nothing, except that a torch-mode trace or an imported PyTorch snapshot is
 * PyTorch's. */
#define GMT_FW_PYTORCH 0x1u
#define GMT_FW_JAX 0x2u
#define GMT_FW_TENSORFLOW 0x4u
#define GMT_FW_CUPY 0x8u
#define GMT_FW_RMM 0x10u /* RAPIDS RMM (an imported allocation log: recorder/rmm) */
#define GMT_FW_ALL 0x1fu

/* Bit set of GMT_FW_*; 0 when the header does not say. */
unsigned gmt_header_frameworks(const gmt_header_t *h);
/* The one framework of the set, or 0 when it holds none or several. */
unsigned gmt_framework_single(unsigned set);
/* "pytorch", "jax", "tensorflow", "cupy", "rmm" (header keys, policy names); "PyTorch", "JAX",
 * "TensorFlow", "CuPy", "RAPIDS RMM" (for people). NULL for anything but one bit. */
const char *gmt_framework_key(unsigned fw);
const char *gmt_framework_display(unsigned fw);
/* The version gpurec found ("unknown" without pip metadata), NULL if not recorded. */
const char *gmt_header_framework_version(const gmt_header_t *h, unsigned fw);
/* "JAX 0.11.2, CuPy 14.2.0" into buf; "unknown (not recorded)" for an empty set. */
const char *gmt_header_frameworks_text(const gmt_header_t *h, char *buf, size_t n);
/* What a trace's events are to a replay, in one phrase: "requests: ...", "segments: ...",
 * "pool blocks: ...". vmm_requests: whether whole-reservation VMM maps are read as requests
 * (-1: decide from the header: XLA's platform allocator without stream-ordered allocations);
 * has_async_alloc: the trace holds stream-ordered device allocations. */
const char *gmt_trace_holds(const gmt_header_t *h, int vmm_requests, int has_async_alloc);

/* ---- owners: who holds the memory a process mapped (gmt_owners.c) ----------------------- */

/* Every byte of device memory a trace's events map, by owner (the framework's allocator, a
 * library named by a "[libname]" callsite, unknown driver allocations), per device: each
 * owner's bytes at the moment the device held the most, and each owner's own peak. */
#define GMT_OWNERS_MAX 32      /* owners told apart per trace (more libraries: "unknown") */
#define GMT_OWNER_DEVICES 16   /* devices per trace */
#define GMT_OWNER_NAME 64
#define GMT_OWNER_REQUESTS 0   /* the framework's live requests */
#define GMT_OWNER_RESERVED 1   /* the framework's reservation (segments, expandable maps) */
#define GMT_OWNER_UNKNOWN 2    /* memory of no framework, no library named */
#define GMT_OWNER_FIRST_LIB 3  /* libraries, in the order first seen */

typedef struct gmt_owner_dev {
  uint16_t device;
  uint64_t peak_mapped;              /* max over time of max(requests, reserved) + others */
  uint64_t at_peak[GMT_OWNERS_MAX];  /* each owner's bytes at that moment */
  uint64_t peak[GMT_OWNERS_MAX];     /* each owner's own peak */
  /* The CUDA context and the module code the driver loaded (DEVICE_USAGE events): the first
   * and the last sample, and the largest; method GMT_USAGE_PROCESS where the trace has such
   * samples for the device, else GMT_USAGE_DEVICE, 0 when it has none. */
  unsigned context_method, context_samples;
  uint64_t context_first, context_last, context_max;
} gmt_owner_dev_t;

typedef struct gmt_owners_result {
  int n_owners, n_devices;
  char names[GMT_OWNERS_MAX][GMT_OWNER_NAME];
  gmt_owner_dev_t dev[GMT_OWNER_DEVICES];
  uint64_t peak_live; /* peak of live ALLOCs of device memory, whoever's, all devices: the
                         "peak live" of gpurec's summary and `gpuanalyze info` */
} gmt_owners_result_t;

typedef struct gmt_owners gmt_owners_t;
/* The text of a callsite id while the event's chunk is current (gmt_reader_string). */
typedef const char *(*gmt_string_fn)(void *ctx, uint32_t id);

gm_status_t gmt_owners_new(gmt_owners_t **out, const gmt_header_t *h, gm_err_t *err);
void gmt_owners_free(gmt_owners_t *o);
/* Feed every event in order; str (may be NULL: no library is named) resolves callsites. */
gm_status_t gmt_owners_event(gmt_owners_t *o, const gmt_event_t *ev, gmt_string_fn str, void *ctx,
                             gm_err_t *err);
/* The owner of the bytes an event adds (ALLOC, VMM_MAP, SEGMENT_ALLOC), -1 if it adds none. */
int gmt_owners_of(gmt_owners_t *o, const gmt_event_t *ev, gmt_string_fn str, void *ctx);
/* The figures so far (final after the last event); valid until gmt_owners_free. */
const gmt_owners_result_t *gmt_owners_result(gmt_owners_t *o);
/* At a device's peak: the framework's bytes (max of requests and reserved), and the rest. */
uint64_t gmt_owners_framework_bytes(const gmt_owner_dev_t *d);
uint64_t gmt_owners_other_bytes(const gmt_owner_dev_t *d);
/* "[libnccl.so.2]" -> "libnccl.so.2" (1), anything else 0: the recorder's owner convention. */
int gmt_owners_library_name(const char *callsite, char *name, size_t n);
/* A device's CUDA context and module code: the largest recorded sample (the figure capacity
 * questions count), 1 if the trace recorded one, 0 if not. */
int gmt_owners_context_bytes(const gmt_owner_dev_t *d, uint64_t *bytes);
/* "NVML, this process", "cuMemGetInfo, the whole device", "" for GMT_USAGE_* */
const char *gmt_usage_method_text(unsigned method);

/* ---- writer -------------------------------------------------------------------------------- */

typedef struct gmt_writer gmt_writer_t;
typedef struct gmt_coverage gmt_coverage_t; /* below, with the coverage marks */

typedef struct gmt_writer_opts {
  uint32_t chunk_events;   /* cut a chunk after this many events (0: default 65536; at most 2^20) */
  uint32_t chunk_bytes;    /* ... or about this many payload bytes before compression, checked
                              every 8 events (0: default 1 MiB; at most 32 MiB) */
  uint64_t chunk_age_ns;   /* ... or when the oldest buffered event is this old by its ts_ns (0: off) */
  int zstd_level;          /* 0: default (3) */
} gmt_writer_opts_t;

/* Create path (truncating) and write the header frame. opts may be NULL. */
gm_status_t gmt_writer_open(gmt_writer_t **out, const char *path, const gmt_header_t *h,
                            const gmt_writer_opts_t *opts, gm_err_t *err);
/* Same, but path is replaced only when the trace is complete: the trace goes to a temporary
 * file beside path, renamed over it by a successful gmt_writer_close (base's gm_out). A failed
 * close or gmt_writer_abandon leaves path as it was. For outputs made in one go (imports,
 * conversions); a recorder that must leave a readable trace when killed uses gmt_writer_open. */
gm_status_t gmt_writer_open_atomic(gmt_writer_t **out, const char *path, const gmt_header_t *h,
                                   const gmt_writer_opts_t *opts, gm_err_t *err);
/* Same, on an already open file descriptor (the writer takes ownership). */
gm_status_t gmt_writer_open_fd(gmt_writer_t **out, int fd, const char *name, const gmt_header_t *h,
                               const gmt_writer_opts_t *opts, gm_err_t *err);
/* Append one event / n events. Cuts and writes chunks as the options say. */
gm_status_t gmt_writer_append(gmt_writer_t *w, const gmt_event_t *ev, gm_err_t *err);
gm_status_t gmt_writer_append_n(gmt_writer_t *w, const gmt_event_t *ev, size_t n, gm_err_t *err);
/* Intern a string (callsite, marker name); same string -> same id; ids start at 1. The string
 * table is written in the chunks that first use it, so every chunk stays self-contained. */
gm_status_t gmt_writer_intern(gmt_writer_t *w, const char *s, uint32_t *id, gm_err_t *err);
/* Records the source lost (CUPTI's dropped count) since the last call; goes into the next chunk. */
void gmt_writer_add_dropped(gmt_writer_t *w, uint64_t n);
/* Write the buffered events as a chunk now (if any) and flush to the OS. */
gm_status_t gmt_writer_flush(gmt_writer_t *w, gm_err_t *err);
/* Flush, write the index and the footer, close. Frees w whatever the outcome. */
gm_status_t gmt_writer_close(gmt_writer_t *w, gm_err_t *err);
/* The first half of a close that a writer survives: the buffered events as a chunk, the index
 * and the footer. Then gmt_writer_close only closes; after a failure (the disk filled at the
 * very end) w is still there for gmt_writer_stop, which cuts the file back to its last whole
 * chunk and says so, instead of leaving half an index unmarked. */
gm_status_t gmt_writer_seal(gmt_writer_t *w, gm_err_t *err);
/* Close without the index (what a killed process leaves): for tests. Frees w. An atomic
 * writer's temporary file is removed instead. */
void gmt_writer_abandon(gmt_writer_t *w);
/* Fold add's coverage marks into the header and rewrite it in place (same length, inside the
 * room its header was opened with). Any time before close. GM_ERR_UNSUPPORTED without room. */
gm_status_t gmt_writer_mark(gmt_writer_t *w, const gmt_coverage_t *add, gm_err_t *err);
/* A writer that cannot go on (a write failed, the disk is full): the file is cut back to its
 * last complete chunk, the header marked partial (GMT_COV_STOPPED, add's reason and fields,
 * the window's end: the last chunk's last event) in place, and the index appended if the disk
 * takes it (else the file stays truncated, readable up to that chunk). Frees w. Returns the
 * first failure of the marking (the file stays readable either way). An atomic writer's
 * temporary file is removed instead, as by gmt_writer_abandon. */
gm_status_t gmt_writer_stop(gmt_writer_t *w, const gmt_coverage_t *add, gm_err_t *err);
/* Events the file holds in complete chunks, and the last one's time (what a stop keeps). */
uint64_t gmt_writer_events_written(const gmt_writer_t *w, uint64_t *last_ts_ns);
uint64_t gmt_writer_events(const gmt_writer_t *w);
uint64_t gmt_writer_bytes(const gmt_writer_t *w); /* bytes written to the file so far */

/* ---- reader -------------------------------------------------------------------------------- */

typedef struct gmt_reader gmt_reader_t;

/* What the reader learned about the file's integrity. Filled as it goes; complete at GM_END. */
typedef struct gmt_reader_stats {
  uint64_t chunks;          /* chunks decoded */
  uint64_t events;          /* events returned */
  uint64_t seq_gaps;        /* chunks missing by sequence number */
  uint64_t dropped;         /* records the source reported lost (sum over chunks) */
  uint64_t unknown_records; /* records of kinds this reader does not know, skipped */
  int truncated;            /* the file ended before its index/footer (process killed) */
  int has_index;
  /* Damage a salvaging reader (GMT_READ_SALVAGE) skipped instead of failing; always 0 for a
   * strict one. SPEC.md "Salvage" has the rules. */
  uint64_t damaged_chunks;   /* chunks skipped because they failed a check */
  uint64_t lost_events;      /* events of those chunks, where known (the index says) */
  uint64_t uncounted_chunks; /* of damaged_chunks, those whose event count is unknown */
  uint64_t damaged_bytes;    /* bytes of the file skipped as damaged */
  int index_damaged;         /* the index or footer failed its check: chunks were found by scanning */
} gmt_reader_stats_t;

/* Some recorded events may be missing: a damaged chunk was skipped. Results drawn from such a
 * trace are partial (a damaged index alone loses nothing; truncation is reported apart). */
static inline int gmt_stats_partial(const gmt_reader_stats_t *s) { return s->damaged_chunks > 0; }
/* Did the reader skip anything (a partial read, or a damaged index or footer)? */
static inline int gmt_stats_damaged(const gmt_reader_stats_t *s) {
  return s->damaged_chunks > 0 || s->damaged_bytes > 0 || s->index_damaged;
}
/* What a salvaging reader skipped, in words, for every tool alike: "1 damaged chunk skipped,
 * 4096 events lost", "... its events uncounted (no usable index)", "the index is damaged
 * (chunks found by scanning)", joined by "; "; "no damage" if nothing. Returns buf. */
char *gmt_stats_damage_text(const gmt_reader_stats_t *s, char *buf, size_t n);

/* How a reader meets damage inside a trace whose header is good:
 * GMT_READ_STRICT (the default) stops at the first damaged chunk or a damaged index with a
 * GM_ERR_CORRUPT; GMT_READ_SALVAGE skips a damaged chunk (by the index, or by scanning for the
 * next chunk that passes its checks), reads on past a damaged index, and counts what it skipped
 * in the stats. Neither ever returns an event from a chunk that failed a check. */
#define GMT_READ_STRICT 0u
#define GMT_READ_SALVAGE 1u
/* OR'ed into either: a file read once from start to end (gpurec's merge of a long recording):
 * the pages of the chunks already decoded are given back as the reader moves on, so its
 * resident memory stays that of a chunk, not of the file (a seek back reads them again). */
#define GMT_READ_DROP_BEHIND 2u

/* Open a file or a memory buffer (buffer must outlive the reader). Reads and checks the
 * header: "not a gpumem trace" (GM_ERR_FORMAT), newer minimum reader (GM_ERR_VERSION). */
gm_status_t gmt_reader_open(gmt_reader_t **out, const char *path, gm_err_t *err);
gm_status_t gmt_reader_open_mem(gmt_reader_t **out, const void *buf, size_t len, gm_err_t *err);
/* The same with GMT_READ_* flags (gmt_reader_open is flags 0: strict). */
gm_status_t gmt_reader_open_flags(gmt_reader_t **out, const char *path, unsigned flags, gm_err_t *err);
gm_status_t gmt_reader_open_mem_flags(gmt_reader_t **out, const void *buf, size_t len, unsigned flags,
                                      gm_err_t *err);
void gmt_reader_close(gmt_reader_t *r);
/* The first damage a salvaging reader skipped, as a strict reader would have reported it
 * ("chunk 3 at offset 1048576: checksum mismatch"), or NULL if none so far. Valid until close. */
const char *gmt_reader_damage(const gmt_reader_t *r);

const gmt_header_t *gmt_reader_header(const gmt_reader_t *r);
/* The string for a callsite id of the current chunk's events, or NULL (GMT_NO_STRING, or not
 * defined in the chunk the last events came from). Valid until the reader decodes another
 * chunk (a later next/next_batch/next_view that needs one, or a seek): the reader keeps one
 * chunk's strings, never the whole file's. Copy what must outlive that. */
const char *gmt_reader_string(const gmt_reader_t *r, uint32_t id);

/* Next event: GM_OK, GM_END at the end (including the end of a truncated file: check stats),
 * or an error (corrupt chunk) with the chunk number and offset in the message. The first error
 * is sticky: later calls return it again (events of earlier chunks were good). */
gm_status_t gmt_reader_next(gmt_reader_t *r, gmt_event_t *ev, gm_err_t *err);
/* Up to cap events into evs; *n = how many. GM_END only when *n == 0. Fast path. */
gm_status_t gmt_reader_next_batch(gmt_reader_t *r, gmt_event_t *evs, size_t cap, size_t *n,
                                  gm_err_t *err);
/* Zero-copy fast path: *evs points at the reader's own decoded events (the rest of the current
 * chunk, or the whole next chunk), *n of them; they stay valid until the next call on r.
 * GM_END only when *n == 0. Mixes freely with next/next_batch. */
gm_status_t gmt_reader_next_view(gmt_reader_t *r, const gmt_event_t **evs, size_t *n, gm_err_t *err);
/* Chunks in the index (0 if there is no index: truncated file). */
uint64_t gmt_reader_chunk_count(const gmt_reader_t *r);
/* Position at the start of chunk i (by the index; GM_ERR_UNSUPPORTED without one, GM_ERR_INVAL
 * past the end). Clears a sticky error; the stats keep counting from where they were. */
gm_status_t gmt_reader_seek_chunk(gmt_reader_t *r, uint64_t i, gm_err_t *err);
/* From the index, without decoding: chunk i's first timestamp and event count. */
gm_status_t gmt_reader_chunk_info(const gmt_reader_t *r, uint64_t i, uint64_t *first_ts_ns,
                                  uint64_t *events, gm_err_t *err);
const gmt_reader_stats_t *gmt_reader_stats(const gmt_reader_t *r);

/* ---- coverage (SPEC.md §3.4): does the trace cover the whole run? ------------------------ */

/* Why a trace covers only part of the run (bits of gmt_coverage_t.why). */
#define GMT_COV_HISTORY_RING 0x01u /* PyTorch's history ring (max_entries) filled: oldest entries gone */
#define GMT_COV_LATE_START   0x02u /* the recording began after the run had allocated */
#define GMT_COV_DROPPED      0x04u /* the source reported records lost (chunk drop counts) */
#define GMT_COV_CUPTI_LOST   0x08u /* CUPTI buffers or its trace's tail lost (torch-history merge) */
#define GMT_COV_TRUNCATED    0x10u /* the file ends before its index: the recording was cut */
#define GMT_COV_DAMAGED      0x20u /* damaged chunks skipped (salvage): events missing inside */
#define GMT_COV_KILLED       0x40u /* the process died without finishing its trace (SIGKILL): its end */
#define GMT_COV_STOPPED      0x80u /* the recorder stopped before the run ended (disk full): its end */

typedef struct gmt_coverage {
  int partial;          /* 1: the trace covers only part of the run (why says how) */
  unsigned why;         /* GMT_COV_* */
  int has_window;       /* from_ns / from_event are known */
  uint64_t from_ns;     /* the window starts at this event time (ns since the trace's time 0) */
  uint64_t from_event;  /* ... with this event (0-based index in the trace) */
  uint64_t alive_bytes, alive_count; /* requests alive at the window's start (synthesised) */
  uint64_t reserved_bytes;           /* the allocator's segments/maps alive then */
  uint64_t history_entries;          /* the history's entries (largest device), 0 if unknown */
  uint64_t max_entries;              /* the ring's size when known, 0 if unknown */
  uint64_t dropped, seq_gaps, damaged_chunks; /* from the reader's stats */
  /* Where the covered window ends, when the trace stops before the run did (KILLED, STOPPED) */
  int has_end;          /* to_ns / to_event are known */
  uint64_t to_ns;       /* the last event's time (ns since the trace's time 0) */
  uint64_t to_event;    /* events the trace holds: the window ends before event to_event */
  int signal;           /* KILLED: the signal that killed the process, 0 if unknown */
  int has_killed_at;    /* killed_ns is known */
  uint64_t killed_ns;   /* KILLED: when the launcher saw the process die (the trace's clock) */
  uint64_t flush_ns;    /* KILLED: the recorder's flush interval, the most a kill loses; 0 unknown */
  uint64_t unseen_frees; /* LATE_START from a recorder: frees of addresses it never saw allocated */
  char stopped[256];    /* STOPPED: why the recorder stopped ("write: No space left on device") */
} gmt_coverage_t;

/* Writer side: the producer's knowledge (partial, why, window, alive, entries) into the header
 * as `coverage*` kv pairs (§3.4). A c with partial == 0 writes `coverage=complete`. */
gm_status_t gmt_coverage_mark(gmt_header_t *h, const gmt_coverage_t *c, gm_err_t *err);
/* Adds what add says to c: reasons, and each field add knows (its window start, its end, ...). */
void gmt_coverage_fold(gmt_coverage_t *c, const gmt_coverage_t *add);
/* The trace at path gets add's marks folded into those its header has, in place: the header is
 * rewritten to the same length inside its room (gmt_header_t.room), the chunks never move, so
 * this works on a full disk and on a file cut short. GM_ERR_UNSUPPORTED if the header has no
 * room for them (a trace written without room: rewrite it instead). */
gm_status_t gmt_trace_mark(const char *path, const gmt_coverage_t *add, gm_err_t *err);
/* The trace at path gets the n key/value pairs kv[2i], kv[2i+1] set in its header (replacing a
 * key it has), in place as gmt_trace_mark: what a recorder learned after the trace began.
 * GM_ERR_UNSUPPORTED if they do not fit in its room. */
gm_status_t gmt_trace_set_kv(const char *path, const char *const *kv, size_t n, gm_err_t *err);
/* Reader side: the verdict from the header's marks and the reader's stats (NULL: header only;
 * pass them after GM_END for drops, gaps, truncation and damage). A trace without marks is
 * complete unless the stats say otherwise (older traces). */
void gmt_coverage(const gmt_header_t *h, const gmt_reader_stats_t *st, gmt_coverage_t *out);
/* The reasons in words, joined by "; " ("PyTorch's history ring filled (1000000 entries ...)").
 * Returns buf. */
char *gmt_coverage_why_text(const gmt_coverage_t *c, char *buf, size_t n);
/* One line for every tool, first in its output (no newline): "PARTIAL trace: covers from
 * t=1.234 s (event 45) to the end; alive at its start: 8.00 GiB in 3 requests (reserved 8.00
 * GiB); a peak before it cannot be seen: figures are lower bounds (why: ...)". "" if complete.
 * Returns buf. */
char *gmt_coverage_text(const gmt_coverage_t *c, char *buf, size_t n);
/* 1 when the trace at path is a process's recording that gpurec did not merge: it has the
 * header key gpurec_mode, is not torch-history, and holds an event flagged GMT_F_TORCH_STREAM
 * (decoded up to the first one). 0 otherwise, or when it cannot be read. */
int gmt_trace_unmerged(const char *path);

/* ---- text form (CSV, formats/SPEC.md "Text form") ------------------------------------------ */

/* Write the whole trace as CSV: header lines starting with '#', then one row per event.
 * Round-trips exactly through gmt_csv_import. */
gm_status_t gmt_csv_export(gmt_reader_t *r, FILE *out, gm_err_t *err);
/* Read CSV text and write a trace. Errors name the line and column. */
gm_status_t gmt_csv_import(FILE *in, const char *in_name, const char *out_path,
                           const gmt_writer_opts_t *opts, gm_err_t *err);

/* One event as a human-readable line (no newline) for `gpuanalyze dump`. */
void gmt_event_format(const gmt_event_t *ev, const gmt_reader_t *r, char *buf, size_t n);

#ifdef __cplusplus
}
#endif
#endif /* GMT_H */
