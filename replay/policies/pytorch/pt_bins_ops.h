/* pt_bins_ops.h: the operations of pt_bins.h that malloc and free make on every request,
 * inline. Internal to the pytorch policy; included by pt_internal.h after pt_block_t.
 *
 * A replay makes ~10^6 requests a second and each made five or six calls into pt_bins.c
 * (search, a key lowered in place, a move between bins, a neighbour's place taken): their
 * entries and exits, register saves and reloads were a sixth of the policy's instructions.
 * Here they inline into pt_alloc.c's hot paths; what is rare stays in pt_bins.c: a tree of
 * three blocks or more (the red-black functions), a stream's group made or freed, walks in
 * order, the search that crosses streams. */
#ifndef PT_BINS_OPS_H
#define PT_BINS_OPS_H

#include <bsd/sys/tree.h>
#include <stdint.h>
#include <stdlib.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PT_BINS_KEEP_GROUPS 8u /* empty groups kept (a stream whose pool empties and refills) */
#define PT_INLINE static inline __attribute__((always_inline))

/* A bin's tree order: (size, address). */
static inline int pt_bins_cmp(const pt_block_t *a, const pt_block_t *b) {
  if (a->size != b->size) return a->size < b->size ? -1 : 1;
  if (a->addr != b->addr) return a->addr < b->addr ? -1 : 1;
  return 0;
}

RB_PROTOTYPE(pt_bin_tree, pt_block, rb, pt_bins_cmp)

/* pt_bins.c: the group of stream through the tree (remembered as the last); a new group for
 * stream (NULL: out of memory); an emptied group freed when more than the kept ones exist. */
pt_bgroup_t *pt_bins_group_find(pt_bins_t *s, uint64_t stream);
pt_bgroup_t *pt_bins_group_new(pt_bins_t *s, uint64_t stream);
void pt_bins_group_drop(pt_bins_t *s, pt_bgroup_t *g);
/* The first block of a bin >= (size, 0), NULL when none (out of line: its key on the stack
 * would be a 64-byte aligned block, and a stack realigned in every malloc). */
pt_block_t *pt_bins_nfind(pt_bin_t *bin, uint64_t size);

/* Alone in its bin: no tree walk (most bins hold one block). One branch. */
PT_INLINE int pt_bins_alone(const pt_block_t *b) {
  return !((uintptr_t)RB_PARENT(b, rb) | (uintptr_t)RB_LEFT(b, rb) | (uintptr_t)RB_RIGHT(b, rb));
}

/* Bin k of g; its array exists (the bin is non-empty, or pt_bins_link made it). */
PT_INLINE pt_bin_t *pt_bins_bin(const pt_bgroup_t *g, uint32_t k) {
  return &g->bins[k / PT_BINS_CHUNK][k % PT_BINS_CHUNK];
}

/* The group of stream, or NULL. A pool of one stream (most) costs one compare. */
PT_INLINE pt_bgroup_t *pt_bins_group(pt_bins_t *s, uint64_t stream) {
  if (s->last && s->last->stream == stream) return s->last;
  return pt_bins_group_find(s, stream);
}

/* Into bin k of group g (its array made if need be: -1 when that fails), counts left alone.
 * Most bins hold one block (a remainder or a merged block usually changes bin), so the empty
 * tree and the second block take a short way: the state RB_INSERT would leave. */
PT_INLINE int pt_bins_link(pt_bgroup_t *g, pt_block_t *b, uint32_t k) {
  pt_bin_t **bins = &g->bins[k / PT_BINS_CHUNK];
  if (!*bins && !(*bins = (pt_bin_t *)calloc(PT_BINS_CHUNK, sizeof **bins))) return -1; /* zeroed: empty bins */
  pt_bin_t *bin = pt_bins_bin(g, k);
  pt_block_t *r = RB_ROOT(&bin->tree);
  if (!r) {
    RB_LEFT(b, rb) = RB_RIGHT(b, rb) = RB_PARENT(b, rb) = NULL;
    RB_COLOR(b, rb) = RB_BLACK;
    RB_ROOT(&bin->tree) = b;
    bin->min = b;
  } else if (pt_bins_alone(r)) {
    /* the second block of a bin: a red child of the (black) root, as RB_INSERT leaves it
     * (no recolouring under a black parent); its side without a branch */
    RB_LEFT(b, rb) = RB_RIGHT(b, rb) = NULL;
    RB_PARENT(b, rb) = r;
    RB_COLOR(b, rb) = RB_RED;
    int right = (b->size > r->size) | ((b->size == r->size) & (b->addr > r->addr));
    pt_block_t **side = right ? &RB_RIGHT(r, rb) : &RB_LEFT(r, rb);
    *side = b;
    bin->min = right ? r : b;
  } else {
    RB_INSERT(pt_bin_tree, &bin->tree, b);
    if (pt_bins_cmp(b, bin->min) < 0) bin->min = b;
  }
  rp_sc_set(&g->map, k);
  b->grp = g;
  b->bin = (uint16_t)k;
  return 0;
}

/* Out of its bin, counts left alone (a one-block tree: the state RB_REMOVE would leave). */
PT_INLINE void pt_bins_unlink(pt_block_t *b) {
  pt_bgroup_t *g = b->grp;
  pt_bin_t *bin = pt_bins_bin(g, b->bin);
  if (pt_bins_alone(b)) {
    RB_ROOT(&bin->tree) = NULL;
    bin->min = NULL;
    rp_sc_clear(&g->map, b->bin);
  } else { /* two blocks or more: the bin stays non-empty */
    if (bin->min == b) bin->min = RB_NEXT(pt_bin_tree, &bin->tree, b);
    RB_REMOVE(pt_bin_tree, &bin->tree, b);
  }
}

/* The first block of stream >= (size, 0), NULL when the stream has none. Its size's own bin
 * (the least block when that is large enough, else the tree), else the least block of the
 * next non-empty bin: what most searches take. */
PT_INLINE pt_block_t *pt_bins_lower_in_stream(pt_bins_t *s, uint64_t stream, uint64_t size) {
  pt_bgroup_t *g = pt_bins_group(s, stream);
  if (!g) return NULL;
  uint32_t k = pt_bins_class(size);
  if (rp_sc_has(&g->map, k)) {
    pt_bin_t *bin = pt_bins_bin(g, k);
    pt_block_t *m = bin->min;
    if (m->size >= size) return m; /* (size, 0) <= (m->size, m->addr): the least block is it */
    if (!pt_bins_alone(m)) {
      pt_block_t *b = pt_bins_nfind(bin, size);
      if (b) return b;
    }
  }
  k = rp_sc_next(&g->map, k + 1);
  return k < PT_BINS_N ? pt_bins_bin(g, k)->min : NULL;
}

PT_INLINE int pt_bins_insert(pt_bins_t *s, pt_block_t *b) {
  pt_bgroup_t *g = pt_bins_group(s, b->stream);
  if (!g && !(g = pt_bins_group_new(s, b->stream))) return -1;
  if (pt_bins_link(g, b, pt_bins_class(b->size)) != 0) return -1;
  g->n++;
  s->n++;
  return 0;
}

PT_INLINE void pt_bins_remove(pt_bins_t *s, pt_block_t *b) {
  pt_bgroup_t *g = b->grp;
  pt_bins_unlink(b);
  g->n--;
  s->n--;
  b->grp = NULL;
  if (g->n == 0 && s->ng > PT_BINS_KEEP_GROUPS) pt_bins_group_drop(s, g);
}

/* b (in the set) had its key lowered in place (same stream): back in order. A split's
 * remainder, most mallocs. 0, or -1 when host memory ran out (b then left the set). */
PT_INLINE int pt_bins_shrunk(pt_bins_t *s, pt_block_t *b) {
  pt_bgroup_t *g = b->grp;
  uint32_t k = pt_bins_class(b->size);
  if (k == b->bin) {
    /* Its key only went down: still in order unless its predecessor in the bin now sorts
     * after it (the in-order sequence, all a search sees, is then what a move would give);
     * the bin's least block stays (b, or one before it). */
    pt_block_t *prev = pt_bins_alone(b) ? NULL : RB_PREV(pt_bin_tree, &pt_bins_bin(g, k)->tree, b);
    if (!prev || pt_bins_cmp(prev, b) < 0) return 0;
  }
  pt_bins_unlink(b); /* to another bin of its group: the counts stay */
  if (pt_bins_link(g, b, k) == 0) return 0;
  g->n--; /* out of memory: it left the set */
  s->n--;
  b->grp = NULL;
  return -1;
}

/* b takes old's node (links and colour): the tree keeps its shape, b sits where old sat. */
PT_INLINE void pt_bins_take_node(pt_bin_t *h, pt_block_t *old, pt_block_t *b) {
  b->rb = old->rb;
  if (h->min == old) h->min = b;
  pt_block_t *par = RB_PARENT(old, rb);
  if (!par) RB_ROOT(&h->tree) = b;
  else if (RB_LEFT(par, rb) == old) RB_LEFT(par, rb) = b;
  else RB_RIGHT(par, rb) = b;
  if (RB_LEFT(old, rb)) RB_PARENT(RB_LEFT(old, rb), rb) = b;
  if (RB_RIGHT(old, rb)) RB_PARENT(RB_RIGHT(old, rb), rb) = b;
}

/* b (not in the set; old's stream, a key above old's) takes old's place; old leaves. A
 * merge, most frees. 0, or -1 when host memory ran out (b is then not in the set). */
PT_INLINE int pt_bins_replace(pt_bins_t *s, pt_block_t *old, pt_block_t *b) {
  pt_bgroup_t *g = old->grp;
  uint32_t k = pt_bins_class(b->size);
  if (k == old->bin) {
    /* b's key is above old's: in order unless old's successor in the bin sorts before it */
    pt_bin_t *bin = pt_bins_bin(g, k);
    pt_block_t *succ = pt_bins_alone(old) ? NULL : RB_NEXT(pt_bin_tree, &bin->tree, old);
    if (!succ || pt_bins_cmp(b, succ) < 0) {
      pt_bins_take_node(bin, old, b);
      b->grp = g;
      b->bin = old->bin;
      old->grp = NULL;
      return 0;
    }
  }
  pt_bins_unlink(old); /* b takes its place in the counts */
  old->grp = NULL;
  if (pt_bins_link(g, b, k) == 0) return 0;
  g->n--; /* out of memory: b is not in the set */
  s->n--;
  return -1;
}

#ifdef __cplusplus
}
#endif
#endif /* PT_BINS_OPS_H */
