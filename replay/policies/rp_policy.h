/* rp_policy.h: the contract between allocator policies and the replay engine.
 *
 * A policy is an allocator model: it receives tensor-level requests (alloc of a size on a
 * stream, free of what it returned, empty_cache) and serves them from memory it takes from a
 * driver (rp_driver_t) in segments or VMM pages, exactly as the modelled allocator would.
 * Policies are pure C: no CUDA, no files, no printing. The driver behind rp_driver_t is
 * either the simulator (virtual addresses, 2 MiB granularity, a capacity) or the real CUDA
 * driver (replay/cuda*): the same policy code runs on both.
 *
 * Accounting: the engine counts reserved bytes from the driver calls it forwards and
 * requested bytes from the trace; the policy reports allocated bytes (its block sizes in use)
 * and its own counters through rp_policy_stats_t. */
#ifndef RP_POLICY_H
#define RP_POLICY_H

#include <stdint.h>

#include "base/gm_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a policy may ask of the device. Every call is counted by the engine. All functions
 * return GM_OK or GM_ERR_NOMEM (out of device memory: the policy runs its OOM path) or
 * another error (backend failure: the replay stops). */
typedef struct rp_driver {
  void *ctx;
  /* cudaMalloc / cudaFree: a whole segment. The returned address is aligned to 512 B at least. */
  gm_status_t (*mem_alloc)(void *ctx, uint64_t size, uint64_t *addr);
  gm_status_t (*mem_free)(void *ctx, uint64_t addr, uint64_t size);
  /* VMM (expandable segments): reserve virtual range, map/unmap physical pages in it. Sizes and
   * offsets are multiples of granularity. va_* never count as reserved memory; map does. */
  gm_status_t (*va_reserve)(void *ctx, uint64_t size, uint64_t *addr);
  gm_status_t (*va_release)(void *ctx, uint64_t addr, uint64_t size);
  gm_status_t (*map)(void *ctx, uint64_t addr, uint64_t size);
  gm_status_t (*unmap)(void *ctx, uint64_t addr, uint64_t size);
  /* Stream-ordered pool (the `async` policy): the driver's on a GPU, a model in the simulator
   * (replay/engine/sim_pool.c); NULL where a driver has none. */
  gm_status_t (*alloc_async)(void *ctx, uint64_t size, uint64_t stream, uint64_t *addr);
  gm_status_t (*free_async)(void *ctx, uint64_t addr, uint64_t stream);
  gm_status_t (*pool_trim)(void *ctx, uint64_t keep_bytes);
  uint64_t granularity;  /* VMM page granularity (2 MiB on current GPUs) */
  uint64_t total_memory; /* the device's total memory (what PyTorch's fractions and the
                            expandable-segment VA reservation are computed from) */
} rp_driver_t;

/* Counters a policy keeps (names follow torch.cuda.memory_stats where one exists). */
typedef struct rp_policy_stats {
  uint64_t allocated_bytes;   /* current bytes in blocks handed out (rounded sizes) */
  uint64_t cached_bytes;      /* current free bytes the policy holds (reserved - allocated) */
  uint64_t alloc_retries;     /* num_alloc_retries: device alloc retried after freeing cache */
  uint64_t ooms;              /* requests that failed */
  uint64_t splits;            /* blocks split */
  uint64_t merges;            /* blocks merged on free */
} rp_policy_stats_t;

typedef struct rp_policy rp_policy_t; /* opaque per-policy state */

/* What a policy held when a request failed, and why none of it could serve the request: the
 * bytes that were reserved but free, split by the first rule that kept each free block from
 * the request (a block counts once, in the first reason that applies, in this order). Filled
 * by the policy's oom_report just after its whole OOM path ran (PyTorch's: after it released
 * every cached segment it could), so the free bytes are those it could neither use nor give
 * back. Sizes in bytes. */
typedef struct rp_oom_report {
  uint64_t rounded_size;      /* the request as the policy rounds it */
  uint64_t segment_size;      /* what it asked the driver for last (0: it did not ask) */
  uint64_t allocated_bytes;   /* in blocks handed out */
  uint64_t free_bytes;        /* reserved but free, all reasons */
  uint64_t free_blocks, largest_free;
  uint64_t other_stream_bytes;   /* free on another stream: blocks never move between streams */
  uint64_t other_pool_bytes;     /* free in the other size class (small <= 1 MiB / large) */
  uint64_t too_small_bytes;      /* same stream and pool, each block smaller than the request */
  uint64_t largest_too_small;
  uint64_t not_splittable_bytes; /* large enough but the policy will not split it for this
                                    request (PyTorch: max_split_size_mb, max_non_split_rounding_mb) */
  uint64_t limit_bytes;          /* the policy's own limit (memory fraction, arena); 0: none */
  int at_limit;                  /* the request failed against that limit, not the device */
  char note[256];                /* one line particular to the policy, or "" */
} rp_oom_report_t;

/* The largest request a policy serves: 2^48 bytes (256 TiB), a thousand times the memory of
 * any GPU. Anything larger (a size that wrapped around, 2^64-1 from a cudaMalloc(-1)) is an
 * out-of-memory answer before any rounding, so that no policy's arithmetic can overflow on
 * it. The engine refuses such requests before they reach a policy too; policies check again
 * because tests and benchmarks drive them directly. */
#define RP_REQUEST_MAX (1ull << 48)

/* What a finished replay showed that a policy's same_run reads (rp_result_t.facts; the engine
 * fills it from the calls it forwarded). Policy-neutral: sizes as asked of the driver and of
 * the policy. */
typedef struct rp_run_facts {
  uint64_t total_memory;   /* the driver's total_memory */
  uint64_t peak_reserved;  /* the most mem_alloc + map bytes live at once */
  uint64_t largest_alloc;  /* the largest size one mem_alloc or map asked for (failed ones too) */
  uint64_t request_log2;   /* bit k: a request of a size in [2^k, 2^(k+1)) reached the policy (0: bit 0) */
  uint64_t segment_frees;  /* mem_free + unmap calls before the end of the replay */
  int clean;               /* no request failed, no driver call failed, no alloc retried */
} rp_run_facts_t;

/* request_log2's bit for a request of size bytes (size 0: bit 0). */
static inline uint64_t rp_request_log2_bit(uint64_t size) { return 1ull << (63 - __builtin_clzll(size | 1)); }

/* A policy implementation. `conf` is the text after "name:" in the spec ("" if none),
 * e.g. "max_split_size_mb:128,expandable_segments:True" for pytorch. */
typedef struct rp_policy_ops {
  const char *name;        /* "pytorch", "bfc", "prealloc", "direct", "async" */
  const char *description; /* one line for --help */
  /* Parse conf and create. Unknown keys / bad values: GM_ERR_INVAL naming the key. */
  gm_status_t (*create)(const char *conf, const rp_driver_t *drv, rp_policy_t **out, gm_err_t *err);
  void (*destroy)(rp_policy_t *p); /* does not call the driver */
  /* Serve a request of `size` bytes on `stream`. On success *addr is the block address (unique
   * among live blocks). GM_ERR_NOMEM: the policy's whole OOM path ran and failed (counted in
   * stats.ooms); the engine records the OOM and goes on. */
  gm_status_t (*alloc)(rp_policy_t *p, uint64_t size, uint64_t stream, uint64_t *addr, gm_err_t *err);
  /* The block at addr (returned by alloc) is reusable now. */
  gm_status_t (*free)(rp_policy_t *p, uint64_t addr, gm_err_t *err);
  /* torch.cuda.empty_cache() / pool trim: give cached memory back to the driver. */
  gm_status_t (*empty_cache)(rp_policy_t *p, gm_err_t *err);
  /* Give everything back to the driver (end of replay, so cuda backends leave no leaks). */
  gm_status_t (*release_all)(rp_policy_t *p, gm_err_t *err);
  void (*stats)(const rp_policy_t *p, rp_policy_stats_t *out);
  /* Test builds: walk every structure and check invariants; GM_ERR_CORRUPT with a reason. */
  gm_status_t (*check)(const rp_policy_t *p, gm_err_t *err);
  /* The canonical spec this instance runs ("pytorch:max_split_size_mb:128"), for results. */
  const char *(*spec)(const rp_policy_t *p);
  /* Optional (NULL, or 0 returned: the engine reports reserved and allocated only): called
   * right after alloc returned GM_ERR_NOMEM for (size, stream), before anything else happens;
   * fills *out (zeroed by the caller) and returns 1. Reads the policy's state, changes nothing. */
  int (*oom_report)(const rp_policy_t *p, uint64_t size, uint64_t stream, rp_oom_report_t *out);
  /* Optional, all three or none: requests by the policy's own block handle. A caller that
   * keeps what it was given (the engine keeps it under the trace's address) frees the block
   * without the policy hashing the address again: one hash lookup per request, not two.
   * alloc_h serves exactly as alloc does and sets *handle (never UINT64_MAX) besides *addr;
   * a block taken by alloc_h is given back by free_h only, one taken by alloc by free only.
   * handle_addr: the address of a live handle's block. */
  gm_status_t (*alloc_h)(rp_policy_t *p, uint64_t size, uint64_t stream, uint64_t *addr,
                         uint64_t *handle, gm_err_t *err);
  gm_status_t (*free_h)(rp_policy_t *p, uint64_t handle, gm_err_t *err);
  uint64_t (*handle_addr)(const rp_policy_t *p, uint64_t handle);
  /* Optional: where the policy keeps the count stats reports as allocated_bytes, valid for
   * the policy's life. The engine reads it after every request instead of calling stats (a
   * call and a copy of the whole struct per event showed in profiles). */
  const uint64_t *(*allocated_bytes)(const rp_policy_t *p);
  /* Optional: 1 when a replay under conf_b would make exactly the calls, with the same
   * results, as a replay under conf_a that showed *ran (the same events, driver and engine
   * options), so that its result is conf_a's with conf_b's spec; 0 when that is not proven
   * (or a conf does not parse). A sweep copies such results instead of replaying. Pure: reads
   * its arguments only. */
  int (*same_run)(const char *conf_a, const char *conf_b, const rp_run_facts_t *ran);
} rp_policy_ops_t;

/* Registry (replay/policies/rp_registry.c). */
const rp_policy_ops_t *rp_policy_find(const char *name);
const rp_policy_ops_t *const *rp_policy_all(void); /* NULL-terminated */

/* Parse "name[:conf]" and create. Unknown name: GM_ERR_INVAL listing the known ones. */
gm_status_t rp_policy_create(const char *spec, const rp_driver_t *drv, const rp_policy_ops_t **ops,
                             rp_policy_t **out, gm_err_t *err);

#ifdef __cplusplus
}
#endif
#endif /* RP_POLICY_H */
