/* fake_driver.c: see fake_driver.h. Linear scans over a small array: tests hold few blocks. */
#include "replay/policies/testing/fake_driver.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Saturates instead of wrapping: a huge size must fail the capacity check, not become 0. */
static uint64_t round_up(uint64_t v, uint64_t g) {
  if (g <= 1) return v;
  return v > UINT64_MAX - (g - 1) ? UINT64_MAX : (v + g - 1) / g * g;
}

static int find(rp_fake_driver_t *f, uint64_t addr, int kind) {
  for (int i = 0; i < f->nblocks; i++)
    if (f->blocks[i].addr == addr && f->blocks[i].kind == kind) return i;
  return -1;
}

static void drop(rp_fake_driver_t *f, int i) { f->blocks[i] = f->blocks[--f->nblocks]; }

static gm_status_t push(rp_fake_driver_t *f, rp_fake_block_t b) {
  if (f->nblocks == f->cap_blocks) {
    int n = f->cap_blocks ? 2 * f->cap_blocks : 64;
    rp_fake_block_t *nb = realloc(f->blocks, (size_t)n * sizeof *nb);
    if (!nb) return GM_ERR_NOMEM;
    f->blocks = nb;
    f->cap_blocks = n;
  }
  f->blocks[f->nblocks++] = b;
  return GM_OK;
}

/* keep_log: one call, in order. */
static gm_status_t note(rp_fake_driver_t *f, char op, uint64_t addr, uint64_t size, gm_status_t st) {
  if (!f->keep_log) return st;
  if (f->nlog == f->cap_log) {
    size_t n = f->cap_log ? 2 * f->cap_log : 64;
    rp_fake_call_t *nl = realloc(f->log, n * sizeof *nl);
    if (!nl) return GM_ERR_NOMEM;
    f->log = nl;
    f->cap_log = n;
  }
  f->log[f->nlog++] = (rp_fake_call_t){op, st == GM_OK, addr, size}; /* a failed alloc: addr 0 */
  return st;
}

/* Take `rounded` bytes of capacity, or say NOMEM. */
static gm_status_t take(rp_fake_driver_t *f, uint64_t rounded) {
  if (f->fail_next > 0) {
    f->fail_next--;
    f->calls.nomem++;
    return GM_ERR_NOMEM;
  }
  if (rounded > f->capacity - f->used) {
    f->calls.nomem++;
    return GM_ERR_NOMEM;
  }
  f->used += rounded;
  if (f->used > f->peak_used) f->peak_used = f->used;
  return GM_OK;
}

static uint64_t bump(rp_fake_driver_t *f, uint64_t rounded) {
  uint64_t a = f->next_addr;
  uint64_t align = f->drv.granularity > 512 ? f->drv.granularity : 512;
  f->next_addr = round_up(a + (rounded ? rounded : 1), align);
  return a;
}

static gm_status_t fk_mem_alloc_call(rp_fake_driver_t *f, uint64_t size, uint64_t *addr) {
  f->calls.mem_alloc++;
  if (f->cuda_error) return GM_ERR_CUDA;
  if (size == 0) return f->errors++, GM_ERR_INVAL;
  uint64_t r = round_up(size, f->drv.granularity);
  gm_status_t st = take(f, r);
  if (st < 0) return st;
  rp_fake_block_t b = {bump(f, r), size, r, RP_FAKE_SEGMENT, 0};
  if (push(f, b) < 0) return GM_ERR_NOMEM;
  *addr = b.addr;
  return GM_OK;
}

static gm_status_t fk_mem_alloc(void *ctx, uint64_t size, uint64_t *addr) {
  rp_fake_driver_t *f = ctx;
  uint64_t a = 0;
  gm_status_t st = fk_mem_alloc_call(f, size, &a);
  if (st == GM_OK) *addr = a;
  return note(f, 'A', a, size, st);
}

static gm_status_t fk_mem_free_call(rp_fake_driver_t *f, uint64_t addr, uint64_t size) {
  f->calls.mem_free++;
  int i = find(f, addr, RP_FAKE_SEGMENT);
  if (i < 0 || f->blocks[i].size != size) return f->errors++, GM_ERR_INVAL;
  f->used -= f->blocks[i].rounded;
  drop(f, i);
  return GM_OK;
}

static gm_status_t fk_mem_free(void *ctx, uint64_t addr, uint64_t size) {
  rp_fake_driver_t *f = ctx;
  return note(f, 'F', addr, size, fk_mem_free_call(f, addr, size));
}

static gm_status_t fk_va_reserve_call(rp_fake_driver_t *f, uint64_t size, uint64_t *addr) {
  f->calls.va_reserve++;
  if (size == 0 || size % f->drv.granularity) return f->errors++, GM_ERR_INVAL;
  rp_fake_block_t b = {bump(f, size), size, 0, RP_FAKE_VA, 0};
  if (push(f, b) < 0) return GM_ERR_NOMEM;
  *addr = b.addr;
  return GM_OK;
}

static gm_status_t fk_va_reserve(void *ctx, uint64_t size, uint64_t *addr) {
  rp_fake_driver_t *f = ctx;
  uint64_t a = 0;
  gm_status_t st = fk_va_reserve_call(f, size, &a);
  if (st == GM_OK) *addr = a;
  return note(f, 'R', a, size, st);
}

static gm_status_t fk_va_release_call(rp_fake_driver_t *f, uint64_t addr, uint64_t size) {
  f->calls.va_release++;
  int i = find(f, addr, RP_FAKE_VA);
  if (i < 0 || f->blocks[i].size != size) return f->errors++, GM_ERR_INVAL;
  /* Releasing a range with pages still mapped in it is a bug in the caller. */
  for (int j = 0; j < f->nblocks; j++)
    if (f->blocks[j].kind == RP_FAKE_MAP && f->blocks[j].addr >= addr && f->blocks[j].addr < addr + size)
      return f->errors++, GM_ERR_INVAL;
  drop(f, i);
  return GM_OK;
}

static gm_status_t fk_va_release(void *ctx, uint64_t addr, uint64_t size) {
  rp_fake_driver_t *f = ctx;
  return note(f, 'X', addr, size, fk_va_release_call(f, addr, size));
}

static int inside_va(rp_fake_driver_t *f, uint64_t addr, uint64_t size) {
  for (int i = 0; i < f->nblocks; i++)
    if (f->blocks[i].kind == RP_FAKE_VA && addr >= f->blocks[i].addr &&
        addr + size <= f->blocks[i].addr + f->blocks[i].size)
      return 1;
  return 0;
}

static gm_status_t fk_map_call(rp_fake_driver_t *f, uint64_t addr, uint64_t size) {
  f->calls.map++;
  if (f->cuda_error) return GM_ERR_CUDA;
  uint64_t g = f->drv.granularity;
  if (size == 0 || size % g || addr % g || !inside_va(f, addr, size)) return f->errors++, GM_ERR_INVAL;
  for (int j = 0; j < f->nblocks; j++) /* no overlap with a mapping */
    if (f->blocks[j].kind == RP_FAKE_MAP && addr < f->blocks[j].addr + f->blocks[j].size &&
        f->blocks[j].addr < addr + size)
      return f->errors++, GM_ERR_INVAL;
  gm_status_t st = take(f, size);
  if (st < 0) return st;
  rp_fake_block_t b = {addr, size, size, RP_FAKE_MAP, 0};
  return push(f, b);
}

static gm_status_t fk_map(void *ctx, uint64_t addr, uint64_t size) {
  rp_fake_driver_t *f = ctx;
  return note(f, 'M', addr, size, fk_map_call(f, addr, size));
}

/* The mapping that holds byte at, or -1. */
static int find_holding(rp_fake_driver_t *f, uint64_t at) {
  for (int i = 0; i < f->nblocks; i++)
    if (f->blocks[i].kind == RP_FAKE_MAP && at >= f->blocks[i].addr && at - f->blocks[i].addr < f->blocks[i].size)
      return i;
  return -1;
}

/* Pages are mapped one handle each on a real device (cuMemCreate per granule: replay/cuda
 * and torch's ExpandableSegment alike), so any granule-aligned range that is mapped all
 * through may be unmapped, part of one map call or several: the mappings it cuts are split.
 * A range with a hole, or not aligned, is misuse; nothing changes then. */
static gm_status_t fk_unmap_call(rp_fake_driver_t *f, uint64_t addr, uint64_t size) {
  f->calls.unmap++;
  uint64_t g = f->drv.granularity, end = addr + size;
  if (size == 0 || addr % g || size % g || end < addr) return f->errors++, GM_ERR_INVAL;
  for (uint64_t at = addr; at < end;) {
    int i = find_holding(f, at);
    if (i < 0) return f->errors++, GM_ERR_INVAL;
    at = f->blocks[i].addr + f->blocks[i].size;
  }
  for (uint64_t at = addr; at < end;) {
    int i = find_holding(f, at);
    rp_fake_block_t m = f->blocks[i];
    uint64_t lo = m.addr < addr ? addr : m.addr, hi = m.addr + m.size > end ? end : m.addr + m.size;
    drop(f, i);
    f->used -= hi - lo;
    if (m.addr < lo) { /* the part before the range stays mapped */
      rp_fake_block_t b = {m.addr, lo - m.addr, lo - m.addr, RP_FAKE_MAP, 0};
      if (push(f, b) < 0) return GM_ERR_NOMEM;
    }
    if (hi < m.addr + m.size) { /* and the part after it */
      rp_fake_block_t b = {hi, m.addr + m.size - hi, m.addr + m.size - hi, RP_FAKE_MAP, 0};
      if (push(f, b) < 0) return GM_ERR_NOMEM;
    }
    at = hi;
  }
  return GM_OK;
}

static gm_status_t fk_unmap(void *ctx, uint64_t addr, uint64_t size) {
  rp_fake_driver_t *f = ctx;
  return note(f, 'U', addr, size, fk_unmap_call(f, addr, size));
}

static gm_status_t fk_alloc_async(void *ctx, uint64_t size, uint64_t stream, uint64_t *addr) {
  rp_fake_driver_t *f = ctx;
  (void)stream;
  f->calls.alloc_async++;
  if (size == 0) return f->errors++, GM_ERR_INVAL;
  uint64_t r = round_up(size, 512);
  for (int i = 0; i < f->nblocks; i++) /* reuse a cached block of the same rounded size */
    if (f->blocks[i].kind == RP_FAKE_ASYNC && f->blocks[i].cached && f->blocks[i].rounded == r) {
      f->blocks[i].cached = 0;
      f->blocks[i].size = size;
      *addr = f->blocks[i].addr;
      return GM_OK;
    }
  gm_status_t st = take(f, r);
  if (st < 0) return st;
  rp_fake_block_t b = {bump(f, r), size, r, RP_FAKE_ASYNC, 0};
  if (push(f, b) < 0) return GM_ERR_NOMEM;
  *addr = b.addr;
  return GM_OK;
}

static gm_status_t fk_free_async(void *ctx, uint64_t addr, uint64_t stream) {
  rp_fake_driver_t *f = ctx;
  (void)stream;
  f->calls.free_async++;
  int i = find(f, addr, RP_FAKE_ASYNC);
  if (i < 0 || f->blocks[i].cached) return f->errors++, GM_ERR_INVAL;
  f->blocks[i].cached = 1;
  return GM_OK;
}

static gm_status_t fk_pool_trim(void *ctx, uint64_t keep) {
  rp_fake_driver_t *f = ctx;
  f->calls.pool_trim++;
  uint64_t cached = 0;
  for (int i = 0; i < f->nblocks; i++)
    if (f->blocks[i].kind == RP_FAKE_ASYNC && f->blocks[i].cached) cached += f->blocks[i].rounded;
  for (int i = f->nblocks - 1; i >= 0 && cached > keep; i--)
    if (f->blocks[i].kind == RP_FAKE_ASYNC && f->blocks[i].cached) {
      cached -= f->blocks[i].rounded;
      f->used -= f->blocks[i].rounded;
      drop(f, i);
    }
  return GM_OK;
}

void rp_fake_driver_init(rp_fake_driver_t *f, uint64_t capacity, uint64_t granularity, int with_async) {
  memset(f, 0, sizeof *f);
  f->capacity = capacity;
  f->next_addr = 1ull << 32; /* nonzero, far from 0 so a 0 address is always a bug */
  f->drv.ctx = f;
  f->drv.mem_alloc = fk_mem_alloc;
  f->drv.mem_free = fk_mem_free;
  f->drv.va_reserve = fk_va_reserve;
  f->drv.va_release = fk_va_release;
  f->drv.map = fk_map;
  f->drv.unmap = fk_unmap;
  if (with_async) {
    f->drv.alloc_async = fk_alloc_async;
    f->drv.free_async = fk_free_async;
    f->drv.pool_trim = fk_pool_trim;
  }
  f->drv.granularity = granularity ? granularity : 1;
  f->drv.total_memory = capacity;
}

void rp_fake_driver_fini(rp_fake_driver_t *f) {
  free(f->blocks);
  f->blocks = NULL;
  f->nblocks = f->cap_blocks = 0;
  free(f->log);
  f->log = NULL;
  f->nlog = f->cap_log = 0;
}

int rp_fake_driver_count(const rp_fake_driver_t *f, int kind, uint64_t *bytes) {
  int n = 0;
  uint64_t b = 0;
  for (int i = 0; i < f->nblocks; i++)
    if (f->blocks[i].kind == kind) {
      n++;
      b += f->blocks[i].size;
    }
  if (bytes) *bytes = b;
  return n;
}

int rp_fake_driver_segments(const rp_fake_driver_t *f, uint64_t *bytes) {
  return rp_fake_driver_count(f, RP_FAKE_SEGMENT, bytes);
}

size_t rp_fake_driver_log_text(const rp_fake_driver_t *f, char *buf, size_t n) {
  size_t k = 0;
  if (n) buf[0] = '\0';
  for (size_t i = 0; i < f->nlog; i++) {
    const rp_fake_call_t *c = &f->log[i];
    int w = snprintf(buf ? buf + (k < n ? k : n) : NULL, k < n ? n - k : 0, "%c%s%lluK ", c->op, c->ok ? "" : "!",
                     (unsigned long long)(c->size >> 10));
    if (w > 0) k += (size_t)w;
  }
  return k;
}
