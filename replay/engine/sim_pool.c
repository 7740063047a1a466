/* sim_pool.c: the simulator's stream-ordered pool (cudaMallocAsync), for the `async` policy
 * without a GPU.
 *
 * What is known of the driver's pool, and what is not. Known (measured, or set by the
 * frameworks): the pool takes physical memory from the device in whole chunks, and every
 * reservation recorded under PyTorch's backend:cudaMallocAsync is a multiple of 32 MiB
 * (traces/recorded/README.md: 320, 768, 1056 and 1440 MiB on an H200), so a chunk is
 * 32 MiB or a request rounded up to 32 MiB; PyTorch (and TF) set the release threshold to
 * UINT64_MAX, so the pool never gives memory back on its own, only at cudaMemPoolTrimTo
 * (empty_cache), and then only chunks with nothing allocated in them; a block freed on a
 * stream is reusable at once by later work on that stream. Not known, and timing-dependent
 * (issue 11: the same job reserved 1952 MiB on one run, 2208 on another): whether another
 * stream reuses it (opportunistic reuse needs the free to have completed on the GPU; event
 * dependencies need the program's own waits), and the pool's fit inside its chunks.
 *
 * So the pool is a model with knobs (rp_sim_opts_t.pool_model, bits), and gpureplay replays
 * three of them and reports a range (timing-dependent, never exact):
 *  - 0 (the point figure): one heap growing by chunks at its top, best fit (smallest free
 *    range that fits, lowest address on ties), adjacent free ranges coalesced, every free
 *    reusable at once by any stream (the GPU always done in time);
 *  - RP_POOL_IDEAL (low end): perfect packing, the reservation is the live bytes (each
 *    rounded to 512 B) rounded up to the chunk; no pool reserves less;
 *  - RP_POOL_CHUNKS | RP_POOL_SAME_STREAM (high end): free memory never coalesces across
 *    chunks, and a free is reusable only by the stream that freed it (no other stream sees
 *    its work complete in time).
 * Checked against the four recorded runs: each real reservation lies inside the range (the
 * point figure is 32-160 MiB low; the chunked same-stream model is 60-1180 MiB high):
 * README "How far to trust a replay".
 *
 * Structure: free ranges in one array sorted by address (coalescing looks at neighbours);
 * best fit scans it, which is linear in the number of free ranges (tens to hundreds in the
 * corpus; a tree would be the fix for traces that fragment into thousands). Live blocks in
 * an rp_map (address -> size, stream). Chunk addresses come from the simulator's bump
 * pointer, so they are unique and deterministic. */
#include <stdlib.h>
#include <string.h>

#include "replay/engine/rp_map.h"
#include "replay/engine/sim_internal.h"

#define POOL_ALIGN 512ull
#define ANY_STREAM UINT64_MAX /* a range never used yet, or any stream may reuse it */

typedef struct range {
  uint64_t addr, size, stream; /* stream: who may reuse it (ANY_STREAM: anyone) */
} range_t;

typedef struct chunk {
  uint64_t addr, size, used;
} chunk_t;

struct sim_pool {
  int model;
  uint64_t gran;
  uint64_t top; /* the pool's address space ends here; chunks are appended at it */
  range_t *free;
  size_t n_free, cap_free;
  chunk_t *chunks;
  size_t n_chunks, cap_chunks;
  rp_map_t live; /* addr -> (size, stream) */
  uint64_t reserved, live_bytes;
};

static uint64_t up(uint64_t v, uint64_t g) { return (v + g - 1) / g * g; }

sim_pool_t *sim_pool_new(int model, uint64_t gran) {
  sim_pool_t *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  p->model = model;
  p->gran = gran ? gran : SIM_POOL_CHUNK;
  p->top = SIM_POOL_BASE;
  rp_map_init(&p->live);
  return p;
}

void sim_pool_free(sim_pool_t *p) {
  if (!p) return;
  free(p->free);
  free(p->chunks);
  rp_map_free(&p->live);
  free(p);
}

uint64_t sim_pool_reserved(const sim_pool_t *p) { return p->reserved; }

static int chunk_of(const sim_pool_t *p, uint64_t addr) {
  size_t lo = 0, hi = p->n_chunks; /* chunks are in address order (bump addresses) */
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (p->chunks[mid].addr + p->chunks[mid].size <= addr) lo = mid + 1;
    else hi = mid;
  }
  return lo < p->n_chunks && p->chunks[lo].addr <= addr ? (int)lo : -1;
}

static int insert_free(sim_pool_t *p, size_t at, range_t r) {
  if (p->n_free == p->cap_free) {
    size_t cap = p->cap_free ? 2 * p->cap_free : 64;
    range_t *f = realloc(p->free, cap * sizeof *f);
    if (!f) return -1;
    p->free = f;
    p->cap_free = cap;
  }
  memmove(p->free + at + 1, p->free + at, (p->n_free - at) * sizeof *p->free);
  p->free[at] = r;
  p->n_free++;
  return 0;
}

static void remove_free(sim_pool_t *p, size_t at) {
  memmove(p->free + at, p->free + at + 1, (p->n_free - at - 1) * sizeof *p->free);
  p->n_free--;
}

/* Two free ranges merge when they touch, lie in one chunk, and the same streams may reuse
 * them. */
static int can_merge(const sim_pool_t *p, const range_t *a, const range_t *b) {
  if (a->addr + a->size != b->addr) return 0;
  if ((p->model & RP_POOL_CHUNKS) && chunk_of(p, a->addr) != chunk_of(p, b->addr)) return 0;
  return !(p->model & RP_POOL_SAME_STREAM) || a->stream == b->stream;
}

/* Give a range back and coalesce it with its neighbours. */
static int put_range(sim_pool_t *p, range_t r) {
  size_t lo = 0, hi = p->n_free;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (p->free[mid].addr < r.addr) lo = mid + 1;
    else hi = mid;
  }
  if (lo > 0 && can_merge(p, &p->free[lo - 1], &r)) {
    p->free[lo - 1].size += r.size;
    if (lo < p->n_free && can_merge(p, &p->free[lo - 1], &p->free[lo])) {
      p->free[lo - 1].size += p->free[lo].size;
      remove_free(p, lo);
    }
    return 0;
  }
  if (lo < p->n_free && can_merge(p, &r, &p->free[lo])) {
    p->free[lo].addr = r.addr;
    p->free[lo].size += r.size;
    return 0;
  }
  return insert_free(p, lo, r);
}

/* Add used bytes (sign +1/-1) to every chunk that [addr, addr+size) overlaps. */
static void account(sim_pool_t *p, uint64_t addr, uint64_t size, int sign) {
  for (int c = chunk_of(p, addr); c >= 0 && (size_t)c < p->n_chunks; c++) {
    chunk_t *ch = &p->chunks[c];
    if (ch->addr >= addr + size) break;
    uint64_t lo = addr > ch->addr ? addr : ch->addr;
    uint64_t hi = addr + size < ch->addr + ch->size ? addr + size : ch->addr + ch->size;
    if (hi > lo) ch->used = sign > 0 ? ch->used + (hi - lo) : ch->used - (hi - lo);
  }
}

/* Grow by a chunk at the top, big enough that the free range ending at the top (if this
 * stream may use it) and the chunk together fit `need`. */
static gm_status_t new_chunk(sim_pool_t *p, sim_t *s, uint64_t need, uint64_t stream) {
  if (p->n_free && !(p->model & RP_POOL_CHUNKS)) {
    const range_t *t = &p->free[p->n_free - 1];
    if (t->addr + t->size == p->top && t->size < need &&
        (!(p->model & RP_POOL_SAME_STREAM) || t->stream == ANY_STREAM || t->stream == stream))
      need -= t->size;
  }
  uint64_t size = up(need, p->gran);
  gm_status_t st = sim_take(s, size, NULL);
  if (st != GM_OK) return st;
  if (p->n_chunks == p->cap_chunks) {
    size_t cap = p->cap_chunks ? 2 * p->cap_chunks : 16;
    chunk_t *c = realloc(p->chunks, cap * sizeof *c);
    if (!c) {
      sim_give(s, size);
      return GM_ERR_NOMEM;
    }
    p->chunks = c;
    p->cap_chunks = cap;
  }
  uint64_t addr = p->top;
  p->top += size;
  p->chunks[p->n_chunks].addr = addr;
  p->chunks[p->n_chunks].size = size;
  p->chunks[p->n_chunks].used = 0;
  p->n_chunks++;
  p->reserved += size;
  /* A fresh chunk is anyone's; under SAME_STREAM it joins the tail only as the asking
   * stream's, which is how that stream gets the two together. */
  range_t r = {addr, size, ANY_STREAM};
  if ((p->model & RP_POOL_SAME_STREAM) && !(p->model & RP_POOL_CHUNKS) && p->n_free) {
    const range_t *t = &p->free[p->n_free - 1];
    if (t->addr + t->size == addr && t->stream == stream) r.stream = stream;
    else if (t->addr + t->size == addr && t->stream == ANY_STREAM) p->free[p->n_free - 1].stream = stream, r.stream = stream;
  }
  return put_range(p, r) == 0 ? GM_OK : GM_ERR_NOMEM;
}

static gm_status_t ideal_alloc(sim_pool_t *p, sim_t *s, uint64_t sz, uint64_t *addr) {
  uint64_t want = up(p->live_bytes + sz, p->gran);
  if (want > p->reserved) {
    gm_status_t st = sim_take(s, want - p->reserved, NULL);
    if (st != GM_OK) return st;
    p->reserved = want;
  }
  *addr = sim_bump(s, sz); /* an address of its own; ideal packing has no layout */
  return GM_OK;
}

gm_status_t sim_pool_alloc(sim_pool_t *p, sim_t *s, uint64_t size, uint64_t stream, uint64_t *addr) {
  uint64_t sz = up(size ? size : 1, POOL_ALIGN);
  gm_status_t st;
  if ((p->model & RP_POOL_IDEAL)) {
    st = ideal_alloc(p, s, sz, addr);
  } else {
    long best = -1;
    for (size_t i = 0; i < p->n_free; i++) {
      const range_t *r = &p->free[i];
      if (r->size < sz) continue;
      if ((p->model & RP_POOL_SAME_STREAM) && r->stream != ANY_STREAM && r->stream != stream) continue;
      if (best < 0 || r->size < p->free[best].size) best = (long)i;
    }
    if (best < 0) {
      if ((st = new_chunk(p, s, sz, stream)) != GM_OK) return st;
      return sim_pool_alloc(p, s, size, stream, addr); /* the new chunk fits it */
    }
    range_t *r = &p->free[best];
    *addr = r->addr;
    r->addr += sz;
    r->size -= sz;
    if (r->size == 0) remove_free(p, (size_t)best);
    account(p, *addr, sz, +1);
    st = GM_OK;
  }
  if (st != GM_OK) return st;
  if (rp_map_put(&p->live, *addr, sz, stream) != 0) return GM_ERR_NOMEM;
  p->live_bytes += sz;
  return GM_OK;
}

gm_status_t sim_pool_release(sim_pool_t *p, uint64_t addr, uint64_t stream) {
  rp_map_entry_t *m = rp_map_get(&p->live, addr);
  if (!m) return GM_ERR_INVAL;
  uint64_t sz = m->a;
  rp_map_remove(&p->live, m);
  p->live_bytes -= sz;
  if ((p->model & RP_POOL_IDEAL)) return GM_OK;
  account(p, addr, sz, -1);
  /* Freed on `stream` (the block's own, where the frameworks free): that stream may reuse
   * it at once; under SAME_STREAM no other stream ever may until it is coalesced away. */
  range_t r = {addr, sz, (p->model & RP_POOL_SAME_STREAM) ? stream : ANY_STREAM};
  return put_range(p, r) == 0 ? GM_OK : GM_ERR_NOMEM;
}

/* Remove [lo, hi) (a released chunk, all free) from the free ranges, splitting those that
 * reach beyond it. */
static void cut(sim_pool_t *p, uint64_t lo, uint64_t hi) {
  size_t i = 0;
  while (i < p->n_free) {
    range_t r = p->free[i];
    uint64_t end = r.addr + r.size;
    if (end <= lo || r.addr >= hi) {
      i++;
    } else if (r.addr < lo && end > hi) { /* the chunk lies inside: two ranges remain */
      p->free[i].size = lo - r.addr;
      range_t right = {hi, end - hi, r.stream};
      if (insert_free(p, i + 1, right) != 0) return; /* host memory: the right part is lost */
      i += 2;
    } else if (r.addr < lo) {
      p->free[i].size = lo - r.addr;
      i++;
    } else if (end > hi) {
      p->free[i].addr = hi;
      p->free[i].size = end - hi;
      i++;
    } else {
      remove_free(p, i);
    }
  }
}

/* cudaMemPoolTrimTo(keep): give back chunks with nothing allocated until at most keep
 * bytes stay reserved (ideal: the live bytes rounded up). */
void sim_pool_trim(sim_pool_t *p, sim_t *s, uint64_t keep) {
  if ((p->model & RP_POOL_IDEAL)) {
    uint64_t floor = up(p->live_bytes, p->gran), to = keep > floor ? up(keep, p->gran) : floor;
    if (to < p->reserved) {
      sim_give(s, p->reserved - to);
      p->reserved = to;
    }
    return;
  }
  for (size_t c = p->n_chunks; c-- > 0 && p->reserved > keep;) {
    chunk_t ch = p->chunks[c];
    if (ch.used) continue;
    cut(p, ch.addr, ch.addr + ch.size); /* its part of the free ranges goes with it */
    memmove(p->chunks + c, p->chunks + c + 1, (p->n_chunks - c - 1) * sizeof *p->chunks);
    p->n_chunks--;
    p->reserved -= ch.size;
    sim_give(s, ch.size);
  }
}
