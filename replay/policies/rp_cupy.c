/* rp_cupy.c: the `cupy` policy: CuPy's default memory pool (cupy/cuda/memory.pyx,
 * SingleDeviceMemoryPool), with its limit in CuPy's words.
 *
 *   cupy[:CUPY_GPU_MEMORY_LIMIT=BYTES|PERCENT%]
 *
 * Model, rule by rule from memory.pyx:
 * - malloc rounds the request up to 512 bytes (_round_size, ALLOCATION_UNIT_SIZE); 0 bytes
 *   take no memory (Memory(0)): a placeholder address outside the device.
 * - Free chunks live in per-stream arenas, one bin per rounded size ((size - 1) // 512);
 *   _get_chunk takes a chunk from the smallest non-empty bin >= the request's, of the current
 *   stream only, and splits it (chunk.split): the head serves the request, the rest goes back
 *   to its bin. Within a bin CuPy pops from a Python set, whose order is its own: the model
 *   takes the lowest address (the one choice it cannot reproduce; sizes are exact either way).
 * - No fit: _try_malloc. Past the limit (total + size > limit, limit != 0) it fails at once,
 *   without freeing anything. Else cudaMalloc(size); on failure free_all_blocks() (cudaFree of
 *   every free chunk that is a whole allocation: not split, prev and next none) and retry,
 *   then (after a gc.collect, nothing for a replay) the same again, then OutOfMemoryError.
 * - free merges the chunk with its next, then its previous neighbour when they are free (same
 *   allocation, same stream), and puts the result in its bin. Memory goes back to the driver
 *   only in free_all_blocks (the program's pool.free_all_blocks() is an empty_cache here).
 * - The limit: CUPY_GPU_MEMORY_LIMIT in bytes, or "P%" of the device's memory.
 * Structure: free chunks in one red-black tree ordered by (stream, size, address); live
 * chunks by address in a hash. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#include "replay/policies/rp_policies.h"

#ifndef __unused
#define __unused __attribute__((__unused__))
#endif
#include <bsd/sys/tree.h>

#define CUPY_UNIT 512ull
#define ZERO_BASE (1ull << 63) /* placeholder addresses of 0-byte arrays */

typedef struct cchunk cchunk_t;
struct cchunk {
  uint64_t addr, size, stream;
  cchunk_t *prev, *next; /* neighbours inside the same cudaMalloc */
  int in_use;
  RB_ENTRY(cchunk) link;
  UT_hash_handle hh;
};

static int cchunk_cmp(const cchunk_t *a, const cchunk_t *b) {
  if (a->stream != b->stream) return a->stream < b->stream ? -1 : 1;
  if (a->size != b->size) return a->size < b->size ? -1 : 1;
  return a->addr < b->addr ? -1 : a->addr > b->addr;
}

RB_HEAD(cfree, cchunk);
RB_GENERATE_STATIC(cfree, cchunk, link, cchunk_cmp)

typedef struct cupy_policy {
  rp_driver_t drv;
  uint64_t limit;       /* _total_bytes_limit, 0: none */
  uint64_t total;       /* _total_bytes: what the pool took from the driver */
  uint64_t next_zero;   /* placeholder addresses for 0-byte arrays */
  struct cfree free;
  cchunk_t *live;       /* by address */
  rp_policy_stats_t st;
  char spec[128];
} cupy_policy_t;

static gm_status_t parse(const char *conf, uint64_t total, uint64_t *limit, gm_err_t *err) {
  *limit = 0;
  if (!*conf) return GM_OK;
  static const char key[] = "CUPY_GPU_MEMORY_LIMIT=";
  if (strncmp(conf, key, sizeof key - 1) != 0)
    return gm_err_set(err, GM_ERR_INVAL, "cupy: unknown setting '%.60s' (known: CUPY_GPU_MEMORY_LIMIT)", conf);
  const char *v = conf + sizeof key - 1;
  char *end;
  size_t l = strlen(v);
  if (l && v[l - 1] == '%') {
    double p = strtod(v, &end);
    if (end != v + l - 1 || !(p >= 0.0 && p <= 100.0))
      return gm_err_set(err, GM_ERR_INVAL, "cupy: CUPY_GPU_MEMORY_LIMIT='%s' (accepted: bytes, or a percentage 0%%-100%%)", v);
    *limit = (uint64_t)((double)total * (p / 100.0));
    return GM_OK;
  }
  unsigned long long b = strtoull(v, &end, 10);
  if (end == v || *end || *v == '-')
    return gm_err_set(err, GM_ERR_INVAL, "cupy: CUPY_GPU_MEMORY_LIMIT='%s' (accepted: bytes, or a percentage 0%%-100%%)", v);
  *limit = b;
  return GM_OK;
}

static gm_status_t cupy_create(const char *conf, const rp_driver_t *drv, rp_policy_t **out, gm_err_t *err) {
  uint64_t limit;
  gm_status_t st = parse(conf, drv->total_memory, &limit, err);
  if (st < 0) return st;
  cupy_policy_t *p = calloc(1, sizeof *p);
  if (!p) return gm_err_set(err, GM_ERR_NOMEM, "cupy: out of host memory");
  p->drv = *drv;
  p->limit = limit;
  p->next_zero = ZERO_BASE;
  RB_INIT(&p->free);
  snprintf(p->spec, sizeof p->spec, "cupy%s%.120s", *conf ? ":" : "", conf);
  *out = (rp_policy_t *)p;
  return GM_OK;
}

/* The free tree, with the cached-bytes count kept beside it. */
static void tree_put(cupy_policy_t *p, cchunk_t *c) {
  RB_INSERT(cfree, &p->free, c);
  p->st.cached_bytes += c->size;
}

static void tree_take(cupy_policy_t *p, cchunk_t *c) {
  RB_REMOVE(cfree, &p->free, c);
  p->st.cached_bytes -= c->size;
}

/* free_all_blocks: every free chunk that is a whole cudaMalloc goes back to the driver. */
static gm_status_t free_all_blocks(cupy_policy_t *p, gm_err_t *err) {
  cchunk_t *c, *nx;
  RB_FOREACH_SAFE(c, cfree, &p->free, nx) {
    if (c->prev || c->next) continue;
    gm_status_t st = p->drv.mem_free(p->drv.ctx, c->addr, c->size);
    if (st < 0) return gm_err_wrap(err, "cupy: device free of 0x%" PRIx64, c->addr);
    tree_take(p, c);
    p->total -= c->size;
    free(c);
  }
  return GM_OK;
}

static gm_status_t try_malloc(cupy_policy_t *p, uint64_t size, uint64_t *addr, gm_err_t *err) {
  if (p->limit && p->total + size > p->limit) {
    p->st.ooms++;
    return gm_err_set(err, GM_ERR_NOMEM, "out of memory: %" PRIu64 " bytes past CuPy's limit of %" PRIu64,
                      size, p->limit);
  }
  for (int attempt = 0; attempt < 3; attempt++) {
    if (attempt) {
      p->st.alloc_retries++;
      gm_status_t s = free_all_blocks(p, err);
      if (s < 0) return s;
    }
    gm_status_t st = p->drv.mem_alloc(p->drv.ctx, size, addr);
    if (st == GM_OK) {
      p->total += size;
      return GM_OK;
    }
    if (st != GM_ERR_NOMEM) return gm_err_wrap(err, "cupy: device allocation of %" PRIu64 " bytes", size);
  }
  p->st.ooms++;
  return gm_err_set(err, GM_ERR_NOMEM, "out of memory: the driver refused %" PRIu64 " bytes", size);
}

static gm_status_t pol_alloc(rp_policy_t *pp, uint64_t size, uint64_t stream, uint64_t *addr, gm_err_t *err) {
  cupy_policy_t *p = (cupy_policy_t *)pp;
  if (size == 0) { /* Memory(0): no memory at all */
    *addr = p->next_zero++;
    return GM_OK;
  }
  if (size > UINT64_MAX - CUPY_UNIT) {
    p->st.ooms++;
    return gm_err_set(err, GM_ERR_NOMEM, "out of memory: %" PRIu64 " bytes", size);
  }
  uint64_t rounded = (size + CUPY_UNIT - 1) / CUPY_UNIT * CUPY_UNIT;
  cchunk_t key = {.stream = stream, .size = rounded, .addr = 0};
  cchunk_t *c = RB_NFIND(cfree, &p->free, &key);
  if (c && c->stream == stream) {
    tree_take(p, c);
    if (c->size > rounded) { /* chunk.split: the rest stays free, after the head */
      cchunk_t *r = calloc(1, sizeof *r);
      if (!r) return gm_err_set(err, GM_ERR_NOMEM, "cupy: out of host memory");
      r->addr = c->addr + rounded;
      r->size = c->size - rounded;
      r->stream = stream;
      r->prev = c;
      r->next = c->next;
      if (c->next) c->next->prev = r;
      c->next = r;
      c->size = rounded;
      tree_put(p, r);
      p->st.splits++;
    }
  } else {
    uint64_t a;
    gm_status_t st = try_malloc(p, rounded, &a, err);
    if (st < 0) return st;
    c = calloc(1, sizeof *c);
    if (!c) return gm_err_set(err, GM_ERR_NOMEM, "cupy: out of host memory");
    c->addr = a;
    c->size = rounded;
    c->stream = stream;
  }
  c->in_use = 1;
  HASH_ADD(hh, p->live, addr, sizeof(uint64_t), c);
  p->st.allocated_bytes += c->size;
  *addr = c->addr;
  return GM_OK;
}

/* c absorbs its next neighbour n (chunk.merge); neither is in the tree. */
static void absorb(cupy_policy_t *p, cchunk_t *c, cchunk_t *n) {
  c->size += n->size;
  c->next = n->next;
  if (n->next) n->next->prev = c;
  free(n);
  p->st.merges++;
}

static gm_status_t pol_free(rp_policy_t *pp, uint64_t addr, gm_err_t *err) {
  cupy_policy_t *p = (cupy_policy_t *)pp;
  if (addr >= ZERO_BASE) return GM_OK;
  cchunk_t *c;
  HASH_FIND(hh, p->live, &addr, sizeof(uint64_t), c);
  if (!c) return gm_err_set(err, GM_ERR_INVAL, "cupy: free of 0x%" PRIx64 ", not a live block", addr);
  HASH_DEL(p->live, c);
  p->st.allocated_bytes -= c->size;
  c->in_use = 0;
  if (c->next && !c->next->in_use) {
    cchunk_t *n = c->next;
    tree_take(p, n);
    absorb(p, c, n);
  }
  if (c->prev && !c->prev->in_use) {
    cchunk_t *pv = c->prev;
    tree_take(p, pv);
    absorb(p, pv, c);
    c = pv;
  }
  tree_put(p, c);
  return GM_OK;
}

static gm_status_t pol_empty_cache(rp_policy_t *pp, gm_err_t *err) {
  return free_all_blocks((cupy_policy_t *)pp, err);
}

/* Everything back to the driver, live chunks too: the head of each cudaMalloc has no prev. */
static gm_status_t pol_release_all(rp_policy_t *pp, gm_err_t *err) {
  cupy_policy_t *p = (cupy_policy_t *)pp;
  cchunk_t *c, *tmp;
  HASH_ITER(hh, p->live, c, tmp) {
    HASH_DEL(p->live, c);
    p->st.allocated_bytes -= c->size;
    c->in_use = 0;
    tree_put(p, c);
  }
  /* every allocation's chunks back into its head (no prev), then whole ones freed */
  cchunk_t *heads = NULL, *nx;
  RB_FOREACH_SAFE(c, cfree, &p->free, nx)
    if (!c->prev) {
      tree_take(p, c);
      c->hh.next = heads; /* a list of heads through the unused hash link */
      heads = c;
    }
  while (heads) {
    c = heads;
    heads = c->hh.next;
    memset(&c->hh, 0, sizeof c->hh);
    while (c->next) {
      cchunk_t *n = c->next;
      tree_take(p, n);
      absorb(p, c, n);
    }
    tree_put(p, c);
  }
  return free_all_blocks(p, err);
}

static void pol_stats(const rp_policy_t *pp, rp_policy_stats_t *out) { *out = ((const cupy_policy_t *)pp)->st; }

static gm_status_t pol_check(const rp_policy_t *pp, gm_err_t *err) {
  const cupy_policy_t *p = (const cupy_policy_t *)pp;
  uint64_t cached = 0;
  cchunk_t *c;
  RB_FOREACH(c, cfree, (struct cfree *)&p->free) {
    if (c->in_use) return gm_err_set(err, GM_ERR_CORRUPT, "cupy: live chunk 0x%" PRIx64 " in a free bin", c->addr);
    if (c->next && !c->next->in_use) return gm_err_set(err, GM_ERR_CORRUPT, "cupy: free neighbours not merged at 0x%" PRIx64, c->addr);
    cached += c->size;
  }
  if (cached != p->st.cached_bytes) return gm_err_set(err, GM_ERR_CORRUPT, "cupy: cached bytes %" PRIu64 " != %" PRIu64, cached, p->st.cached_bytes);
  if (p->st.allocated_bytes + p->st.cached_bytes != p->total)
    return gm_err_set(err, GM_ERR_CORRUPT, "cupy: allocated + cached != total");
  return GM_OK;
}

static void pol_destroy(rp_policy_t *pp) {
  cupy_policy_t *p = (cupy_policy_t *)pp;
  if (!p) return;
  cchunk_t *c, *tmp;
  HASH_ITER(hh, p->live, c, tmp) {
    HASH_DEL(p->live, c);
    free(c);
  }
  RB_FOREACH_SAFE(c, cfree, &p->free, tmp) {
    RB_REMOVE(cfree, &p->free, c);
    free(c);
  }
  free(p);
}

static const char *pol_spec(const rp_policy_t *pp) { return ((const cupy_policy_t *)pp)->spec; }

const rp_policy_ops_t rp_cupy_ops = {
    .name = "cupy",
    .description = "CuPy's default memory pool (cupy[:CUPY_GPU_MEMORY_LIMIT=BYTES|P%])",
    .create = cupy_create,
    .destroy = pol_destroy,
    .alloc = pol_alloc,
    .free = pol_free,
    .empty_cache = pol_empty_cache,
    .release_all = pol_release_all,
    .stats = pol_stats,
    .check = pol_check,
    .spec = pol_spec,
};
