/* va_model.c: the CUDA driver's virtual address placement for cuMemAlloc, as a model
 * (va_model.h). Rules, each read off the real segment addresses of traces/snapshots (H200,
 * driver 580, torch 2.11) and tested in va_model_test.cc with the sequence it came from:
 *
 *  R0 the first area: the first allocations of a process fill one area of about 400 MiB
 *     bottom up before any region below it is taken (train_cnn, train_ckpt: 20 MiB at -414,
 *     then 38, 26, 14, 14, ... MiB each right after the one before, up to the first segment;
 *     train_amp, two_streams: the same from -488). Modelled as a first region of 384 MiB
 *     whose top is base. Its size is fitted: any of 320..416 MiB gives the same replays of the
 *     30 snapshots (256: 2 more diverge, 448..544: 1 more); the real driver's area starts
 *     a few allocations late (cnn: two 20 MiB regions below it come first), which the
 *     model does not know.
 *  R1 granule: every allocation takes whole 2 MiB granules (a 10 MiB + 1 B request ends 12 MiB on).
 *  R2 regions: the driver takes address space in regions of a multiple of 32 MiB, aligned to
 *     32 MiB, just big enough for the allocation that needed it (26 MiB -> 32, 44 -> 64,
 *     76 -> 96, 206 -> 224, 474 -> 480 MiB).
 *  R3 top down: a new region goes right below the lowest one (train_cnn: 50 MiB at -1694,
 *     76 at -1790, 50 at -1854, 20 at -1886, 20 at -1918 MiB from the first segment), or,
 *     once regions have been given back, into the highest gap between regions that fits it.
 *  R4 holes first, lowest first, bottom up: an allocation that fits in the unused part of
 *     an existing region goes there, in the lowest such hole, at its low end (train_cnn: 2 MiB
 *     at -1586 right after the 44 MiB at -1630; 20 MiB at -1714 right after the 76 MiB at -1790).
 *  R5 empty regions go back: when a region's last allocation is freed the region is given
 *     back, and its addresses can be a later region's (train_cnn gc06: 20 MiB at -1950 freed,
 *     then 50 MiB at -1982, over it).
 *
 * Not modelled: the process's other users of the same address space (the driver's own and the
 * libraries' cuMemAllocs, CPU-side mmaps) which move regions further down in real runs, so
 * absolute offsets drift; the order of segments, which is what PyTorch compares, survives
 * that drift when the hidden users only take address space (see tests/gpu/placement_probe.py
 * for the measurements that would settle the rest).
 *
 * Data: a sorted array of regions and a sorted array of live ranges; every operation is
 * linear in the live ranges (hundreds in a PyTorch run; the direct policy's thousands are
 * still fast enough for a replay). */
#include "replay/engine/va_model.h"

#include <stdlib.h>
#include <string.h>

#define VA_DEFAULT_BASE 0x7f0000000000ull /* where user-space VA tops out on x86-64 Linux */
#define VA_SPAN (1ull << 47)
#define VA_DEFAULT_FIRST (384ull << 20)

typedef struct span {
  uint64_t lo, size;
} span_t;

typedef struct region {
  uint64_t lo, hi;
  uint64_t live;
} region_t;

struct rp_va {
  rp_va_opts_t o;
  uint64_t next; /* bump */
  region_t *reg;
  size_t nreg, capreg;
  span_t *sp; /* live ranges, by address */
  size_t nsp, capsp;
};

static uint64_t round_up(uint64_t v, uint64_t g) { return (v + g - 1) / g * g; }
static int pow2(uint64_t v) { return v && !(v & (v - 1)); }

int rp_va_policy_parse(const char *s) {
  if (!strcmp(s, "driver")) return RP_VA_DRIVER;
  if (!strcmp(s, "bump")) return RP_VA_BUMP;
  return -1;
}

const char *rp_va_policy_name(rp_va_policy_t p) { return p == RP_VA_BUMP ? "bump" : "driver"; }

rp_va_t *rp_va_new(const rp_va_opts_t *o) {
  rp_va_t *v = calloc(1, sizeof *v);
  if (!v) return NULL;
  v->o = *o;
  if (!v->o.granule) v->o.granule = 2ull << 20;
  if (!v->o.region) v->o.region = 32ull << 20;
  if (!v->o.base) v->o.base = VA_DEFAULT_BASE;
  if (!pow2(v->o.granule) || !pow2(v->o.region) || v->o.region < v->o.granule ||
      v->o.base % v->o.region) {
    free(v);
    return NULL;
  }
  if (!v->o.first) v->o.first = VA_DEFAULT_FIRST;
  if (v->o.first % v->o.region || v->o.first > v->o.base) {
    free(v);
    return NULL;
  }
  v->next = v->o.base;
  if (v->o.policy == RP_VA_DRIVER) { /* R0 */
    if (!(v->reg = calloc(64, sizeof *v->reg))) {
      free(v);
      return NULL;
    }
    v->capreg = 64;
    v->reg[0] = (region_t){v->o.base - v->o.first, v->o.base, 1}; /* never given back */
    v->nreg = 1;
  }
  return v;
}

void rp_va_free_all(rp_va_t *v) {
  if (!v) return;
  free(v->reg);
  free(v->sp);
  free(v);
}

uint64_t rp_va_live(const rp_va_t *v) { return v->nsp; }

static int grow(void **p, size_t *cap, size_t n, size_t elem) {
  if (n < *cap) return 0;
  size_t nc = *cap ? *cap * 2 : 64;
  void *np = realloc(*p, nc * elem);
  if (!np) return -1;
  *p = np;
  *cap = nc;
  return 0;
}

/* First index whose lo is >= a. */
static size_t span_at(const rp_va_t *v, uint64_t a) {
  size_t lo = 0, hi = v->nsp;
  while (lo < hi) {
    size_t m = (lo + hi) / 2;
    if (v->sp[m].lo < a) lo = m + 1;
    else hi = m;
  }
  return lo;
}

static size_t region_at(const rp_va_t *v, uint64_t a) {
  size_t lo = 0, hi = v->nreg;
  while (lo < hi) {
    size_t m = (lo + hi) / 2;
    if (v->reg[m].lo < a) lo = m + 1;
    else hi = m;
  }
  return lo;
}

/* R4: the lowest hole of an existing region that fits size; its address in *at. */
static int find_hole(const rp_va_t *v, uint64_t size, uint64_t *at, size_t *ri) {
  size_t s = 0;
  for (size_t r = 0; r < v->nreg; r++) {
    uint64_t cur = v->reg[r].lo;
    while (s < v->nsp && v->sp[s].lo < v->reg[r].lo) s++;
    for (; s < v->nsp && v->sp[s].lo < v->reg[r].hi; s++) {
      if (v->sp[s].lo - cur >= size) {
        *at = cur;
        *ri = r;
        return 1;
      }
      cur = v->sp[s].lo + v->sp[s].size;
    }
    if (v->reg[r].hi - cur >= size) {
      *at = cur;
      *ri = r;
      return 1;
    }
  }
  return 0;
}

/* R2, R3: a new region of rs bytes in the highest gap below base that fits it. */
static int place_region(const rp_va_t *v, uint64_t rs, uint64_t *lo) {
  uint64_t ceil = v->o.base, floor_all = v->o.base > VA_SPAN ? v->o.base - VA_SPAN : 0;
  for (size_t r = v->nreg + 1; r-- > 0;) {
    uint64_t below = r ? v->reg[r - 1].hi : floor_all;
    if (ceil >= below + rs) {
      *lo = (ceil - rs) / v->o.region * v->o.region;
      if (*lo >= below) return 1;
    }
    if (r) ceil = v->reg[r - 1].lo;
  }
  return 0;
}

static gm_status_t add_span(rp_va_t *v, uint64_t lo, uint64_t size) {
  if (grow((void **)&v->sp, &v->capsp, v->nsp, sizeof *v->sp)) return GM_ERR_NOMEM;
  size_t i = span_at(v, lo);
  memmove(&v->sp[i + 1], &v->sp[i], (v->nsp - i) * sizeof *v->sp);
  v->sp[i] = (span_t){lo, size};
  v->nsp++;
  return GM_OK;
}

gm_status_t rp_va_alloc(rp_va_t *v, uint64_t size, uint64_t *addr) {
  uint64_t r = round_up(size ? size : 1, v->o.granule);
  if (r < size || r > VA_SPAN) return GM_ERR_NOMEM;
  if (v->o.policy == RP_VA_BUMP) {
    if (v->next - v->o.base > VA_SPAN - r - v->o.gap) return GM_ERR_NOMEM;
    if (add_span(v, v->next, r)) return GM_ERR_NOMEM;
    *addr = v->next;
    v->next += r + v->o.gap;
    return GM_OK;
  }
  uint64_t at;
  size_t ri;
  if (!find_hole(v, r, &at, &ri)) {
    uint64_t rs = round_up(r, v->o.region);
    if (!place_region(v, rs, &at)) return GM_ERR_NOMEM;
    if (grow((void **)&v->reg, &v->capreg, v->nreg, sizeof *v->reg)) return GM_ERR_NOMEM;
    ri = region_at(v, at);
    memmove(&v->reg[ri + 1], &v->reg[ri], (v->nreg - ri) * sizeof *v->reg);
    v->reg[ri] = (region_t){at, at + rs, 0};
    v->nreg++;
  }
  if (add_span(v, at, r)) return GM_ERR_NOMEM;
  v->reg[ri].live++;
  *addr = at;
  return GM_OK;
}

gm_status_t rp_va_release(rp_va_t *v, uint64_t addr) {
  size_t i = span_at(v, addr);
  if (i == v->nsp || v->sp[i].lo != addr) return GM_ERR_INVAL;
  memmove(&v->sp[i], &v->sp[i + 1], (v->nsp - i - 1) * sizeof *v->sp);
  v->nsp--;
  if (v->o.policy == RP_VA_BUMP) return GM_OK;
  size_t r = region_at(v, addr + 1) - 1; /* the region holding addr */
  if (--v->reg[r].live == 0) {        /* R5 */
    memmove(&v->reg[r], &v->reg[r + 1], (v->nreg - r - 1) * sizeof *v->reg);
    v->nreg--;
  }
  return GM_OK;
}
