/* engine_peak.c: the policy's memory at its reserved peak: where the reserved bytes went and a
 * map of the segments (rp_peak_snapshot_t in rp_engine.h), for the report's "where the bytes
 * go" and segment map.
 *
 * The engine sees every segment the policy takes (the counting driver: mem_alloc, and each page
 * of a VMM map) and every live block (its block map: policy address, requested size), so the
 * split needs nothing from the policy but its allocated bytes: rounding = allocated - live
 * requested, free inside segments = bytes of segments holding a live block - allocated, cached
 * segments = the rest of reserved. Contiguous mapped pages are one segment (an expandable
 * segment); cudaMalloc segments stay apart even when the simulator's addresses touch.
 *
 * Cost: a snapshot walks the live blocks and segments into a buffer; the sorts and the split
 * are made once, at the end, for the moment no later snapshot replaced. A peak can move at
 * every request (`direct`, a growing arena), so a snapshot waits until half as many events as
 * the last one walked elements (blocks and segments) have passed since it: it stays
 * pending and is taken at a later request while reserved is still at the peak (a caching
 * allocator stays there), or at the end of the replay if reserved is still there (a trace that
 * only grows). Walked elements then total about 4 per event. A peak that moves
 * at every request (a block and a segment each: `direct`) and is left before the replay ends
 * gets its snapshot from at least half way up; the snapshot says which reserved figure it
 * describes. */
#include <stdlib.h>
#include <string.h>

#include "replay/engine/engine_internal.h"

enum { SNAP_PER_EVENT = 2 };

typedef struct seg_rec {
  uint64_t addr, size, live;
  uint32_t blocks, kind, chosen, out;
} seg_rec_t;

typedef struct blk_rec {
  uint64_t addr, size;
} blk_rec_t;

/* A moment's live segments and blocks as the maps hold them (slot order), with the engine's
 * figures then: what a snapshot is built from. Taking one is a walk of the maps; the sorts and
 * the split wait until no later moment replaces it (build(), at the end of the replay), as the
 * budget's snapshots of a rising peak are each replaced by the next. Buffers only grow. */
struct rp_peak_raw {
  seg_rec_t *sg;
  blk_rec_t *bl;
  size_t ns, nb, cap_s, cap_b;
  uint64_t event, ts, reserved, allocated;
  int full; /* holds a moment not yet built */
};

/* Past this many live segments (a policy that takes a segment per request: `direct`) the map
 * would cost as much host memory as the engine's own block map: segments are no longer
 * followed and there is no snapshot (its split is trivial there: no segment holds two blocks). */
#define SEG_MAX (1u << 16)

static void seg_overflow(rp_engine_t *e) {
  e->segs_overflow = 1;
  rp_map_free(&e->segs);
  rp_map_init(&e->segs);
  if (e->snap) e->snap->valid = 0;
  if (e->raw[0]) e->raw[0]->full = 0;
}

void rp_peak_seg_add(rp_engine_t *e, uint64_t addr, uint64_t size, int page) {
  if (e->segs_overflow) return;
  if (e->segs.live >= SEG_MAX) {
    seg_overflow(e);
    return;
  }
  uint64_t g = page ? e->b->drv.granularity : 0;
  if (!g || size % g) g = size; /* one entry for a map that is not whole pages */
  for (uint64_t off = 0; off < size; off += g)
    if (rp_map_put(&e->segs, addr + off, g, (uint64_t)page) != 0) return; /* host OOM: map is then partial */
}

void rp_peak_seg_remove(rp_engine_t *e, uint64_t addr, uint64_t size, int page) {
  if (e->segs_overflow) return;
  uint64_t g = page ? e->b->drv.granularity : 0;
  if (!g || size % g) g = size;
  for (uint64_t off = 0; off < size; off += g) {
    rp_map_entry_t *m = rp_map_get(&e->segs, addr + off);
    if (m) rp_map_remove(&e->segs, m);
  }
}

/* The snapshot's sorts: a stable LSD radix sort on a 64-bit key, a byte at a time, skipping the
 * bytes every key shares (the high bytes of addresses). A peak that keeps rising (a policy
 * that takes a segment for every large request) takes a snapshot every few thousand events,
 * and qsort's comparator calls were then 40 % of the replay. Keys are unique (addresses of
 * live blocks and segments), so the order is the one a comparison sort gives. tmp holds n records. */
#define RADIX_SORT(name, type, KEY)                                                   \
  static void name(type *a, type *tmp, size_t n) {                                     \
    size_t count[8][256];                                                              \
    memset(count, 0, sizeof count);                                                    \
    for (size_t i = 0; i < n; i++) {                                                   \
      uint64_t k = KEY(a[i]);                                                          \
      for (int d = 0; d < 8; d++) count[d][(k >> (8 * d)) & 255]++;                    \
    }                                                                                  \
    type *src = a;                                                                     \
    type *dst = tmp;                                                                   \
    for (int d = 0; d < 8; d++) {                                                      \
      if (n == 0 || count[d][(KEY(a[0]) >> (8 * d)) & 255] == n) continue; /* shared */ \
      size_t pos = 0;                                                                  \
      for (int v = 0; v < 256; v++) {                                                  \
        size_t c = count[d][v];                                                        \
        count[d][v] = pos;                                                             \
        pos += c;                                                                      \
      }                                                                                \
      for (size_t i = 0; i < n; i++) dst[count[d][(KEY(src[i]) >> (8 * d)) & 255]++] = src[i]; \
      type *t = src;                                                                   \
      src = dst;                                                                       \
      dst = t;                                                                         \
    }                                                                                  \
    if (src != a) memcpy(a, src, n * sizeof *a);                                       \
  }

#define SEG_ADDR(r) ((r).addr)
#define BLK_ADDR(r) ((r).addr)
RADIX_SORT(sort_segs_by_addr, seg_rec_t, SEG_ADDR)
RADIX_SORT(sort_blks_by_addr, blk_rec_t, BLK_ADDR)

/* The map's segments: the RP_SNAP_SEGS largest, ties taken in address order (what the first
 * RP_SNAP_SEGS of a stable sort by descending size would be). The k-th largest size comes from
 * a min-heap of the k largest seen (most segments are smaller than its root: one compare);
 * then every larger segment is chosen, and the first segments of exactly that size fill the
 * rest. A full sort here was a sixth of a snapshot's time. sg is in address order; n > k. */
static void choose_largest(seg_rec_t *sg, size_t n, size_t k) {
  uint64_t h[RP_SNAP_SEGS];
  size_t m = 0;
  for (size_t i = 0; i < n; i++) {
    uint64_t v = sg[i].size;
    if (m < k) { /* push, sift up */
      size_t c = m++;
      while (c && h[(c - 1) / 2] > v) {
        h[c] = h[(c - 1) / 2];
        c = (c - 1) / 2;
      }
      h[c] = v;
    } else if (v > h[0]) { /* replace the root, sift down */
      size_t c = 0;
      for (;;) {
        size_t l = 2 * c + 1, s = c;
        uint64_t sv = v;
        if (l < k && h[l] < sv) s = l, sv = h[l];
        if (l + 1 < k && h[l + 1] < sv) s = l + 1;
        if (s == c) break;
        h[c] = h[s];
        c = s;
      }
      h[c] = v;
    }
  }
  uint64_t thr = h[0];
  size_t room = k;
  for (size_t i = 0; i < n; i++)
    if (sg[i].size > thr) sg[i].chosen = 1, room--;
  for (size_t i = 0; i < n && room; i++)
    if (sg[i].size == thr) sg[i].chosen = 1, room--;
}

/* A live block's range into its segment's spans: touching or near (a gap under 1/512 of the
 * segment) ranges merge; past RP_SNAP_SPANS the last span grows to cover it. */
static void add_span(rp_snap_seg_t *o, uint64_t off, uint64_t len) {
  uint64_t gap = o->size / 512;
  if (o->n_spans) {
    uint32_t k = o->n_spans - 1;
    uint64_t end = o->span_off[k] + o->span_len[k];
    if (off <= end + gap || o->n_spans == RP_SNAP_SPANS) {
      uint64_t nend = off + len > end ? off + len : end;
      o->span_len[k] = nend - o->span_off[k];
      return;
    }
  }
  o->span_off[o->n_spans] = off;
  o->span_len[o->n_spans] = len;
  o->n_spans++;
}

static int grow(void **p, size_t *cap, size_t n, size_t size) {
  if (n <= *cap) return 1;
  size_t c = *cap ? *cap : 64;
  while (c < n) c *= 2;
  void *q = realloc(*p, c * size);
  if (!q) return 0;
  *p = q;
  *cap = c;
  return 1;
}

/* The moment into the spare record; it becomes the pending one unless not every reserved byte
 * is a segment the engine saw (then the last moment stays, as a failed snapshot kept it). */
static void take(rp_engine_t *e, uint64_t event, uint64_t ts) {
  for (int k = 0; k < 2; k++)
    if (!e->raw[k] && !(e->raw[k] = calloc(1, sizeof *e->raw[k]))) return; /* host memory short */
  struct rp_peak_raw *r = e->raw[1];
  if (!grow((void **)&r->sg, &r->cap_s, e->segs.live + 1, sizeof *r->sg) ||
      !grow((void **)&r->bl, &r->cap_b, rp_blocks_live(e) + 1, sizeof *r->bl))
    return; /* host memory short: no snapshot, the replay goes on */
  seg_rec_t *sg = r->sg;
  blk_rec_t *bl = r->bl;
  size_t ns = 0, nb = 0;
  uint64_t total = 0;
  /* The live entries in slot order, found by the maps' bytes (most slots of a block map
   * are empty or freed: walking them was most of a snapshot's time). */
  for (size_t i = rp_map_next_live(&e->segs, 0); i < e->segs.cap; i = rp_map_next_live(&e->segs, i + 1)) {
    const rp_map_entry_t *m = &e->segs.slots[i];
    memset(&sg[ns], 0, sizeof sg[ns]);
    sg[ns].addr = m->key;
    sg[ns].size = m->a;
    sg[ns].kind = (uint32_t)m->b;
    total += m->a;
    ns++;
  }
  /* Not every reserved byte is a segment the engine saw (the driver's pool): no split. */
  if (total != e->reserved) return;
  for (size_t i = rp_blocks_next(e, 0); i < rp_blocks_end(e); i = rp_blocks_next(e, i + 1)) {
    const rp_map_entry_t *m = rp_blocks_at(e, i);
    if (m->a == RP_NO_BLOCK) continue;
    bl[nb].addr = rp_pol_addr(e, m->a);
    bl[nb].size = m->b;
    nb++;
  }
  r->ns = ns;
  r->nb = nb;
  r->event = event;
  r->ts = ts;
  r->reserved = e->reserved;
  r->allocated = e->allocated;
  r->full = 1;
  e->raw[1] = e->raw[0];
  e->raw[0] = r;
  e->raw[1]->full = 0;
  e->snap_pending = 0;
}

/* The pending moment into e->snap: the split and the segment map. */
static void build(rp_engine_t *e) {
  struct rp_peak_raw *r = e->raw[0];
  if (!r || !r->full) return;
  r->full = 0;
  seg_rec_t *sg = r->sg;
  blk_rec_t *bl = r->bl;
  size_t ns = r->ns, nb = r->nb;
  void *tmp = NULL;
  /* one scratch buffer for the two sorts (the largest of them) */
  size_t scratch = sizeof *sg * ns > sizeof *bl * nb ? sizeof *sg * ns : sizeof *bl * nb;
  if (!(tmp = malloc(scratch + 1))) goto out;
  sort_segs_by_addr(sg, (seg_rec_t *)tmp, ns);
  sort_blks_by_addr(bl, (blk_rec_t *)tmp, nb);
  /* Mapped pages that touch are one (expandable) segment. */
  size_t w = 0;
  for (size_t i = 0; i < ns; i++) {
    if (w && sg[i].kind == 1 && sg[w - 1].kind == 1 && sg[w - 1].addr + sg[w - 1].size == sg[i].addr)
      sg[w - 1].size += sg[i].size;
    else sg[w++] = sg[i];
  }
  ns = w;
  uint64_t served = 0, in_use = 0;
  size_t j = 0, used = 0;
  for (size_t i = 0; i < nb; i++) {
    while (j < ns && sg[j].addr + sg[j].size <= bl[i].addr) j++;
    served += bl[i].size;
    if (j < ns && sg[j].addr <= bl[i].addr) {
      sg[j].blocks++;
      sg[j].live += bl[i].size;
    }
  }
  for (size_t i = 0; i < ns; i++)
    if (sg[i].blocks) {
      in_use += sg[i].size;
      used++;
    }
  if (!e->snap && !(e->snap = calloc(1, sizeof *e->snap))) goto out;
  rp_peak_snapshot_t *p = e->snap;
  memset(p, 0, sizeof *p);
  p->valid = 1;
  p->event = r->event;
  p->ts_ns = r->ts;
  p->reserved_bytes = r->reserved;
  p->allocated_bytes = r->allocated;
  p->requested_bytes = served;
  /* Blocks held for stream events are allocated but in no trace entry: clamp so the three
   * parts always add up to reserved - live requested. */
  uint64_t waste = r->reserved > served ? r->reserved - served : 0;
  p->rounding_bytes = r->allocated > served ? r->allocated - served : 0;
  if (p->rounding_bytes > waste) p->rounding_bytes = waste;
  p->free_in_segments_bytes = in_use > r->allocated ? in_use - r->allocated : 0;
  if (p->free_in_segments_bytes > waste - p->rounding_bytes) p->free_in_segments_bytes = waste - p->rounding_bytes;
  p->cached_segments_bytes = waste - p->rounding_bytes - p->free_in_segments_bytes;
  p->segments = ns;
  p->segments_in_use = used;
  /* The map: the largest segments, shown in address order. */
  if (ns > RP_SNAP_SEGS) {
    choose_largest(sg, ns, RP_SNAP_SEGS);
  } else {
    for (size_t i = 0; i < ns; i++) sg[i].chosen = 1;
  }
  for (size_t i = 0; i < ns; i++) {
    if (!sg[i].chosen) continue;
    sg[i].out = (uint32_t)p->n_segs;
    rp_snap_seg_t *o = &p->seg[p->n_segs++];
    o->addr = sg[i].addr;
    o->size = sg[i].size;
    o->live_bytes = sg[i].live;
    o->blocks = sg[i].blocks;
  }
  j = 0;
  for (size_t i = 0; i < nb; i++) {
    while (j < ns && sg[j].addr + sg[j].size <= bl[i].addr) j++;
    if (j < ns && sg[j].addr <= bl[i].addr && sg[j].chosen) {
      rp_snap_seg_t *o = &p->seg[sg[j].out];
      uint64_t off = bl[i].addr - o->addr, len = bl[i].size;
      if (off + len > o->size) len = o->size - off;
      add_span(o, off, len);
    }
  }
out:
  free(tmp);
}

void rp_peak_init(rp_engine_t *e) {
  rp_map_init(&e->segs);
}

void rp_peak_free(rp_engine_t *e) {
  rp_map_free(&e->segs);
  free(e->snap);
  e->snap = NULL;
  for (int k = 0; k < 2; k++) {
    if (!e->raw[k]) continue;
    free(e->raw[k]->sg);
    free(e->raw[k]->bl);
    free(e->raw[k]);
    e->raw[k] = NULL;
  }
}

void rp_peak_finish(rp_engine_t *e, uint64_t ts) {
  if (e->segs_overflow) return;
  if (e->snap_pending && e->reserved == e->peak_reserved) {
    take(e, e->events ? e->events - 1 : 0, ts); /* the state after the last event */
    e->snap_pending = 0;
  }
  build(e);
}

void rp_peak_maybe_snapshot(rp_engine_t *e, uint64_t ts) {
  if (e->segs_overflow) {
    e->snap_pending = 0;
    return;
  }
  uint64_t since = e->events - e->snap_events;
  int have = (e->raw[0] && e->raw[0]->full) || (e->snap && e->snap->valid);
  if (have && since * SNAP_PER_EVENT < e->snap_elements)
    return; /* stays pending */
  e->snap_events = e->events;
  e->snap_elements = (uint64_t)(rp_blocks_live(e) + e->segs.live);
  take(e, e->events, ts);
  e->snap_pending = 0; /* taken, or not possible (no segments seen) */
}
