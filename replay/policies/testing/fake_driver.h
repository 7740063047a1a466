/* fake_driver.h: a small deterministic rp_driver_t for policy tests.
 *
 * A bump allocator with a capacity: addresses only grow (never reused), so two runs that
 * make the same calls see the same addresses, which lets a test compare a policy with its
 * reference model call by call. mem_alloc and map round sizes up to `granularity` (as the
 * sim backend does) and fail with GM_ERR_NOMEM when the rounded live bytes would pass
 * `capacity`. Every call is counted. Misuse (freeing something never allocated, a size that
 * does not match, unmapping what is not mapped) is counted in `errors` and answered with
 * GM_ERR_INVAL, so tests assert errors == 0.
 * The async pool (when enabled) is a model good enough for unit tests: blocks freed with
 * free_async are cached in the pool (per size, any stream) and reused by alloc_async of the
 * same rounded size; pool_trim(keep) drops cached bytes down to keep.
 * With keep_log set, every segment and VA call is also logged in order (op, address, size,
 * whether it succeeded), for tests that compare a policy's driver calls with a reference
 * model's; cuda_error makes mem_alloc and map answer GM_ERR_CUDA (a backend failure). */
#ifndef RP_FAKE_DRIVER_H
#define RP_FAKE_DRIVER_H

#include <stdint.h>

#include "replay/policies/rp_policy.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum rp_fake_kind { RP_FAKE_SEGMENT = 1, RP_FAKE_VA = 2, RP_FAKE_MAP = 3, RP_FAKE_ASYNC = 4 } rp_fake_kind_t;

typedef struct rp_fake_block {
  uint64_t addr, size; /* size as asked (rounded size is what counts against capacity) */
  uint64_t rounded;
  int kind;            /* rp_fake_kind_t */
  int cached;          /* async: freed into the pool */
} rp_fake_block_t;

typedef struct rp_fake_calls {
  uint64_t mem_alloc, mem_free, va_reserve, va_release, map, unmap, alloc_async, free_async, pool_trim;
  uint64_t nomem; /* calls answered GM_ERR_NOMEM */
} rp_fake_calls_t;

/* One logged call: op 'A' mem_alloc, 'F' mem_free, 'R' va_reserve, 'X' va_release, 'M' map,
 * 'U' unmap; addr 0 where an alloc or reserve failed. */
typedef struct rp_fake_call {
  char op;
  int ok;
  uint64_t addr, size;
} rp_fake_call_t;

typedef struct rp_fake_driver {
  rp_driver_t drv; /* pass &f.drv to the policy; drv.ctx points at this struct */
  uint64_t capacity;
  uint64_t used;      /* rounded bytes held: segments + mapped pages + async pool (live + cached) */
  uint64_t peak_used;
  uint64_t next_addr; /* bump pointer */
  uint64_t fail_next; /* > 0: the next N capacity-taking calls fail with NOMEM (fault injection) */
  rp_fake_calls_t calls;
  uint64_t errors;
  rp_fake_block_t *blocks; /* live segments, VA ranges, mappings and pool blocks */
  int nblocks, cap_blocks;
  int keep_log;       /* set by the test: log the segment and VA calls */
  int cuda_error;     /* set by the test: mem_alloc and map answer GM_ERR_CUDA */
  rp_fake_call_t *log; /* keep_log: the calls in order */
  size_t nlog, cap_log;
} rp_fake_driver_t;

/* granularity: rounding unit of mem_alloc/map (e.g. 2 MiB; 1 for none). total_memory is set
 * to capacity. with_async: fill alloc_async/free_async/pool_trim (else NULL, as the sim). */
void rp_fake_driver_init(rp_fake_driver_t *f, uint64_t capacity, uint64_t granularity, int with_async);
void rp_fake_driver_fini(rp_fake_driver_t *f);
/* Segments (mem_alloc) alive now, and their asked bytes. */
int rp_fake_driver_segments(const rp_fake_driver_t *f, uint64_t *bytes);
/* Blocks of a kind (rp_fake_kind_t) alive now, and their asked bytes (bytes may be NULL). */
int rp_fake_driver_count(const rp_fake_driver_t *f, int kind, uint64_t *bytes);
/* The log as text, "A2048K M!20480K ..." (op, '!' when it failed, size in KiB), into buf
 * (NUL-terminated, cut at n); returns the length of the whole text. */
size_t rp_fake_driver_log_text(const rp_fake_driver_t *f, char *buf, size_t n);

#ifdef __cplusplus
}
#endif
#endif /* RP_FAKE_DRIVER_H */
