/* rp_live.h: the live-allocation table of the pass-through policies (direct, async).
 *
 * Those policies cache nothing: every request goes to the driver and every free gives the
 * block back. What they must remember is which addresses are live, with the size (the
 * driver's mem_free and the allocated_bytes figure need it) and the stream (free_async
 * must name the stream the block was allocated on). This table holds that, in a uthash map
 * by address, and does the bookkeeping both share: the 0-byte rule (ask for 1 byte so each
 * live block keeps an address of its own), the host-memory failure, the "free of unknown
 * address" error, the release_all walk and the check() invariant. What differs between the
 * policies (which driver call, how an OOM is retried, the error wording) comes in as the
 * get/put callbacks. Internal to //replay/policies (a private header of :policies). */
#ifndef RP_LIVE_H
#define RP_LIVE_H

#include <stdint.h>
#include <uthash.h>

#include "base/gm_base.h"

typedef struct rp_live_block {
  uint64_t addr, size, stream;
  UT_hash_handle hh;
} rp_live_block_t;

typedef struct rp_live {
  const char *policy;   /* for messages: "direct: out of host memory" */
  rp_live_block_t *map; /* uthash head, by addr */
  uint64_t bytes;       /* sum of the live blocks' sizes: the policy's allocated_bytes */
} rp_live_t;

/* Gets `size` bytes on `stream` from the driver into *addr; on failure sets err (the
 * policy's own wording, its OOM count and retry) and returns < 0. */
typedef gm_status_t (*rp_live_get_fn)(void *ctx, uint64_t size, uint64_t stream, uint64_t *addr, gm_err_t *err);
/* Gives block b back to the driver; on failure sets err and returns < 0 (b stays live). */
typedef gm_status_t (*rp_live_put_fn)(void *ctx, const rp_live_block_t *b, gm_err_t *err);

void rp_live_init(rp_live_t *t, const char *policy);
/* Forgets every block without calling the driver (the policy's destroy). */
void rp_live_clear(rp_live_t *t);
/* One request: asks get() for max(size, 1) bytes and records the block. */
gm_status_t rp_live_alloc(rp_live_t *t, uint64_t size, uint64_t stream, rp_live_get_fn get, void *ctx,
                          uint64_t *addr, gm_err_t *err);
/* One free: GM_ERR_INVAL for an address that is not live; else put() and forget it. */
gm_status_t rp_live_free(rp_live_t *t, uint64_t addr, rp_live_put_fn put, void *ctx, gm_err_t *err);
/* put() every live block (stops at the first failure, which stays live). */
gm_status_t rp_live_free_all(rp_live_t *t, rp_live_put_fn put, void *ctx, gm_err_t *err);
/* GM_ERR_CORRUPT when the blocks' sizes do not sum to t->bytes. */
gm_status_t rp_live_check(const rp_live_t *t, gm_err_t *err);

#endif /* RP_LIVE_H */
