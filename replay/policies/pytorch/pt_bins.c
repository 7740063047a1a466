/* pt_bins.c: the free-block bins of pt_bins.h.
 *
 * Order: groups by stream, bins by size class, (size, address) inside a bin's tree. A group
 * emptied stays while there are at most KEEP_GROUPS groups (a stream whose pool empties and
 * refills pays no allocation); past that, empty groups are freed, so memory follows the
 * streams that hold free blocks. */
#include <stdlib.h>
#include <string.h>

#include "replay/policies/pytorch/pt_internal.h"

#define KEEP_GROUPS 8u

static int cmp_bin(const pt_block_t *a, const pt_block_t *b) {
  if (a->size != b->size) return a->size < b->size ? -1 : 1;
  if (a->addr != b->addr) return a->addr < b->addr ? -1 : 1;
  return 0;
}

static int cmp_group(const pt_bgroup_t *a, const pt_bgroup_t *b) {
  return a->stream < b->stream ? -1 : a->stream > b->stream;
}

/* libbsd's RB_GENERATE_STATIC marks its functions __unused, which libbsd leaves undefined
 * (a glibc struct has a member of that name): defined here, after every other header. */
#ifndef __unused
#define __unused __attribute__((__unused__))
#endif
RB_GENERATE_STATIC(pt_bin_tree, pt_block, rb, cmp_bin)
RB_GENERATE_STATIC(pt_group_tree, pt_bgroup, link, cmp_group)

/* Alone in its bin: no tree walk (most bins hold one block). */
static inline int alone(const pt_block_t *b) {
  return !((uintptr_t)RB_PARENT(b, rb) | (uintptr_t)RB_LEFT(b, rb) | (uintptr_t)RB_RIGHT(b, rb)); /* one branch */
}

/* Bin k of g; its array exists (the bin is non-empty, or link_bin made it). */
static inline pt_bin_t *bin_of(const pt_bgroup_t *g, uint32_t k) { return &g->bins[k / PT_BINS_CHUNK][k % PT_BINS_CHUNK]; }
static inline struct pt_bin_tree *tree_of(const pt_bgroup_t *g, uint32_t k) { return &bin_of(g, k)->tree; }

static inline uint32_t bit_next(const pt_bgroup_t *g, uint32_t k) { return rp_sc_next(&g->map, k); }
static inline uint32_t bit_prev(const pt_bgroup_t *g, uint32_t k) { return rp_sc_prev(&g->map, k); }

void pt_bins_init(pt_bins_t *s) {
  RB_INIT(&s->groups);
  s->last = NULL;
  s->ng = 0;
  s->n = 0;
}

static void group_free(pt_bgroup_t *g) {
  for (size_t i = 0; i < sizeof g->bins / sizeof g->bins[0]; i++) free(g->bins[i]);
  free(g);
}

void pt_bins_clear(pt_bins_t *s) {
  pt_bgroup_t *g;
  while ((g = RB_MIN(pt_group_tree, &s->groups))) {
    RB_REMOVE(pt_group_tree, &s->groups, g);
    group_free(g);
  }
  pt_bins_init(s);
}

/* The group of stream, or NULL. A pool of one stream (most) costs one compare. */
static inline pt_bgroup_t *group_of(pt_bins_t *s, uint64_t stream) {
  if (s->last && s->last->stream == stream) return s->last;
  pt_bgroup_t key;
  key.stream = stream;
  pt_bgroup_t *g = RB_FIND(pt_group_tree, &s->groups, &key);
  if (g) s->last = g;
  return g;
}

/* The least block of the first non-empty group from g on (NULL when none). */
static pt_block_t *first_from(const pt_bins_t *s, pt_bgroup_t *g) {
  for (; g; g = RB_NEXT(pt_group_tree, (struct pt_group_tree *)&s->groups, g))
    if (g->n) return bin_of(g, bit_next(g, 0))->min;
  return NULL;
}

/* The greatest block of the last non-empty group from g back (NULL when none). */
static pt_block_t *last_from(const pt_bins_t *s, pt_bgroup_t *g) {
  for (; g; g = RB_PREV(pt_group_tree, (struct pt_group_tree *)&s->groups, g))
    if (g->n) return RB_MAX(pt_bin_tree, tree_of(g, bit_prev(g, PT_BINS_N - 1)));
  return NULL;
}

/* The least block after bin k of group g. */
static inline pt_block_t *after_bin(const pt_bins_t *s, pt_bgroup_t *g, uint32_t k) {
  uint32_t nk = bit_next(g, k + 1);
  if (nk < PT_BINS_N) return bin_of(g, nk)->min;
  return first_from(s, RB_NEXT(pt_group_tree, (struct pt_group_tree *)&s->groups, g));
}

pt_block_t *pt_bins_first(const pt_bins_t *s) {
  return first_from(s, RB_MIN(pt_group_tree, (struct pt_group_tree *)&s->groups));
}

pt_block_t *pt_bins_last(const pt_bins_t *s) {
  return last_from(s, RB_MAX(pt_group_tree, (struct pt_group_tree *)&s->groups));
}

pt_block_t *pt_bins_next(const pt_bins_t *s, pt_block_t *b) {
  pt_block_t *n = alone(b) ? NULL : RB_NEXT(pt_bin_tree, tree_of(b->grp, b->bin), b);
  return n ? n : after_bin(s, b->grp, b->bin);
}

pt_block_t *pt_bins_prev(const pt_bins_t *s, pt_block_t *b) {
  pt_block_t *n = alone(b) ? NULL : RB_PREV(pt_bin_tree, tree_of(b->grp, b->bin), b);
  if (n) return n;
  uint32_t k = b->bin ? bit_prev(b->grp, b->bin - 1u) : UINT32_MAX;
  if (k != UINT32_MAX) return RB_MAX(pt_bin_tree, tree_of(b->grp, k));
  return last_from(s, RB_PREV(pt_group_tree, (struct pt_group_tree *)&s->groups, b->grp));
}

/* The first block of g >= (size, 0) in the size's own bin, or NULL; *k: that bin. */
static inline pt_block_t *lower_in(const pt_bgroup_t *g, uint64_t size, uint32_t *k) {
  *k = pt_bins_class(size);
  if (rp_sc_has(&g->map, *k)) {
    pt_bin_t *bin = bin_of(g, *k);
    pt_block_t *m = bin->min;
    if (m->size >= size) return m; /* (size, 0) <= (m->size, m->addr): the least block is it */
    if (alone(m)) return NULL;
    pt_block_t key; /* only the compared fields */
    key.size = size, key.addr = 0;
    return RB_NFIND(pt_bin_tree, &bin->tree, &key);
  }
  return NULL;
}

pt_block_t *pt_bins_lower(pt_bins_t *s, uint64_t stream, uint64_t size) {
  pt_bgroup_t *g = group_of(s, stream);
  if (!g) {
    pt_bgroup_t key;
    key.stream = stream;
    return first_from(s, RB_NFIND(pt_group_tree, &s->groups, &key));
  }
  uint32_t k;
  pt_block_t *b = lower_in(g, size, &k);
  return b ? b : after_bin(s, g, k);
}

pt_block_t *pt_bins_lower_in_stream(pt_bins_t *s, uint64_t stream, uint64_t size) {
  pt_bgroup_t *g = group_of(s, stream);
  if (!g) return NULL;
  uint32_t k;
  pt_block_t *b = lower_in(g, size, &k);
  if (b) return b;
  k = bit_next(g, k + 1);
  return k < PT_BINS_N ? bin_of(g, k)->min : NULL;
}

pt_block_t *pt_bins_next_in_stream(pt_block_t *b) {
  pt_block_t *n = alone(b) ? NULL : RB_NEXT(pt_bin_tree, tree_of(b->grp, b->bin), b);
  if (n) return n;
  uint32_t k = bit_next(b->grp, b->bin + 1u);
  return k < PT_BINS_N ? bin_of(b->grp, k)->min : NULL;
}

/* Into bin k of group g (its array made if need be: -1 when that fails), counts left alone.
 * Most bins hold one block (a remainder or a merged block usually changes bin), so the empty
 * tree takes a short way: the state RB_INSERT would leave. */
static inline __attribute__((always_inline)) int link_bin(pt_bgroup_t *g, pt_block_t *b, uint32_t k) {
  pt_bin_t **bins = &g->bins[k / PT_BINS_CHUNK];
  if (!*bins && !(*bins = calloc(PT_BINS_CHUNK, sizeof **bins))) return -1; /* zeroed: empty bins */
  pt_bin_t *bin = bin_of(g, k);
  struct pt_bin_tree *t = &bin->tree;
  pt_block_t *r = RB_ROOT(t);
  if (!r) {
    RB_LEFT(b, rb) = RB_RIGHT(b, rb) = RB_PARENT(b, rb) = NULL;
    RB_COLOR(b, rb) = RB_BLACK;
    RB_ROOT(t) = b;
    bin->min = b;
  } else if (alone(r)) {
    /* the second block of a bin, most of the rest: a red child of the (black) root, as
     * RB_INSERT leaves it (no recolouring under a black parent); its side without a branch */
    RB_LEFT(b, rb) = RB_RIGHT(b, rb) = NULL;
    RB_PARENT(b, rb) = r;
    RB_COLOR(b, rb) = RB_RED;
    int right = (b->size > r->size) | ((b->size == r->size) & (b->addr > r->addr));
    pt_block_t **side = right ? &RB_RIGHT(r, rb) : &RB_LEFT(r, rb);
    *side = b;
    bin->min = right ? r : b;
  } else {
    RB_INSERT(pt_bin_tree, t, b);
    if (cmp_bin(b, bin->min) < 0) bin->min = b;
  }
  rp_sc_set(&g->map, k);
  b->grp = g;
  b->bin = (uint16_t)k;
  return 0;
}

/* Out of its bin, counts left alone (the one-block tree: the state RB_REMOVE would leave). */
static inline __attribute__((always_inline)) void unlink_bin(pt_block_t *b) {
  pt_bgroup_t *g = b->grp;
  pt_bin_t *bin = bin_of(g, b->bin);
  if (alone(b)) {
    RB_ROOT(&bin->tree) = NULL;
    bin->min = NULL;
    rp_sc_clear(&g->map, b->bin);
  } else { /* two blocks or more: the bin stays non-empty */
    if (bin->min == b) bin->min = RB_NEXT(pt_bin_tree, &bin->tree, b);
    RB_REMOVE(pt_bin_tree, &bin->tree, b);
  }
}

static int put(pt_bins_t *s, pt_bgroup_t *g, pt_block_t *b) {
  if (link_bin(g, b, pt_bins_class(b->size)) != 0) return -1;
  g->n++;
  s->n++;
  return 0;
}

int pt_bins_insert(pt_bins_t *s, pt_block_t *b) {
  pt_bgroup_t *g = group_of(s, b->stream);
  if (!g) {
    g = calloc(1, sizeof *g); /* zeroed: no bin, no root array */
    if (!g) return -1;
    g->stream = b->stream;
    RB_INSERT(pt_group_tree, &s->groups, g);
    s->ng++;
    s->last = g;
  }
  return put(s, g, b);
}

/* Out of its bin; the group stays (the caller puts a block back or drops the group). */
static void take_out(pt_bins_t *s, pt_block_t *b) {
  unlink_bin(b);
  b->grp->n--;
  s->n--;
}

void pt_bins_remove(pt_bins_t *s, pt_block_t *b) {
  pt_bgroup_t *g = b->grp;
  take_out(s, b);
  b->grp = NULL;
  if (g->n == 0 && s->ng > KEEP_GROUPS) {
    RB_REMOVE(pt_group_tree, &s->groups, g);
    s->ng--;
    if (s->last == g) s->last = NULL;
    group_free(g);
  }
}

int pt_bins_shrunk(pt_bins_t *s, pt_block_t *b) {
  pt_bgroup_t *g = b->grp;
  uint32_t k = pt_bins_class(b->size);
  if (k == b->bin) {
    /* Its key only went down: still in order unless its predecessor in the bin now sorts
     * after it (the in-order sequence, all a search sees, is then what a move would give). */
    pt_block_t *prev = alone(b) ? NULL : RB_PREV(pt_bin_tree, tree_of(g, b->bin), b);
    if (!prev || cmp_bin(prev, b) < 0) return 0;
  }
  unlink_bin(b); /* to another bin of its group: the counts stay */
  if (link_bin(g, b, k) == 0) return 0;
  g->n--; /* out of memory: it left the set */
  s->n--;
  b->grp = NULL;
  return -1;
}

/* b takes old's node (links and colour): the tree keeps its shape, b sits where old sat. */
static void take_node(pt_bin_t *h, pt_block_t *old, pt_block_t *b) {
  b->rb = old->rb;
  if (h->min == old) h->min = b;
  pt_block_t *par = RB_PARENT(old, rb);
  if (!par) RB_ROOT(&h->tree) = b;
  else if (RB_LEFT(par, rb) == old) RB_LEFT(par, rb) = b;
  else RB_RIGHT(par, rb) = b;
  if (RB_LEFT(old, rb)) RB_PARENT(RB_LEFT(old, rb), rb) = b;
  if (RB_RIGHT(old, rb)) RB_PARENT(RB_RIGHT(old, rb), rb) = b;
}

int pt_bins_replace(pt_bins_t *s, pt_block_t *old, pt_block_t *b) {
  pt_bgroup_t *g = old->grp;
  uint32_t k = pt_bins_class(b->size);
  if (k == old->bin) {
    /* b's key is above old's: in order unless old's successor in the bin sorts before it */
    pt_block_t *succ = alone(old) ? NULL : RB_NEXT(pt_bin_tree, tree_of(g, old->bin), old);
    if (!succ || cmp_bin(b, succ) < 0) {
      take_node(bin_of(g, old->bin), old, b);
      b->grp = g;
      b->bin = old->bin;
      old->grp = NULL;
      return 0;
    }
  }
  unlink_bin(old); /* b takes its place in the counts */
  old->grp = NULL;
  if (link_bin(g, b, k) == 0) return 0;
  g->n--; /* out of memory: b is not in the set */
  s->n--;
  return -1;
}

const char *pt_bins_verify(const pt_bins_t *s) {
  uint64_t total = 0;
  pt_bgroup_t *g;
  RB_FOREACH(g, pt_group_tree, (struct pt_group_tree *)&s->groups) {
    uint64_t n = 0;
    for (uint32_t k = 0; k < PT_BINS_N; k++) {
      pt_bin_t *bin = g->bins[k / PT_BINS_CHUNK] ? bin_of(g, k) : NULL;
      pt_block_t *root = bin ? RB_ROOT(&bin->tree) : NULL;
      if (!root != !rp_sc_has(&g->map, k)) return "a bin's bit disagrees with its tree";
      if (!root) {
        if (bin && bin->min) return "an empty bin has a least block";
        continue;
      }
      if (bin->min != RB_MIN(pt_bin_tree, &bin->tree)) return "a bin's least block is not its tree's";
      pt_block_t *b;
      RB_FOREACH(b, pt_bin_tree, &bin->tree) {
        if (b->grp != g || b->bin != k) return "a block records another group or bin";
        n++;
      }
    }
    if (n != g->n) return "a group's count disagrees with its bins";
    total += n;
  }
  return total == s->n ? NULL : "the set's count disagrees with its groups";
}
