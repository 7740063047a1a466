/* pt_bins.c: the free-block bins of pt_bins.h, what is not on every request's path (that is
 * inline in pt_bins_ops.h): the red-black functions, groups made and freed, walks in order,
 * the search across streams, the verifier.
 *
 * Order: groups by stream, bins by size class, (size, address) inside a bin's tree. A group
 * emptied stays while there are at most PT_BINS_KEEP_GROUPS groups (a stream whose pool
 * empties and refills pays no allocation); past that, empty groups are freed, so memory
 * follows the streams that hold free blocks. */
#include <stdlib.h>
#include <string.h>

#include "replay/policies/pytorch/pt_internal.h"

static int cmp_group(const pt_bgroup_t *a, const pt_bgroup_t *b) {
  return a->stream < b->stream ? -1 : a->stream > b->stream;
}

/* libbsd's RB_GENERATE_STATIC marks its functions __unused, which libbsd leaves undefined
 * (a glibc struct has a member of that name): defined here, after every other header. */
#ifndef __unused
#define __unused __attribute__((__unused__))
#endif
RB_GENERATE(pt_bin_tree, pt_block, rb, pt_bins_cmp)
RB_GENERATE_STATIC(pt_group_tree, pt_bgroup, link, cmp_group)

static inline struct pt_bin_tree *tree_of(const pt_bgroup_t *g, uint32_t k) { return &pt_bins_bin(g, k)->tree; }
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

pt_bgroup_t *pt_bins_group_find(pt_bins_t *s, uint64_t stream) {
  pt_bgroup_t key;
  key.stream = stream;
  pt_bgroup_t *g = RB_FIND(pt_group_tree, &s->groups, &key);
  if (g) s->last = g;
  return g;
}

pt_bgroup_t *pt_bins_group_new(pt_bins_t *s, uint64_t stream) {
  pt_bgroup_t *g = calloc(1, sizeof *g); /* zeroed: no bin, no array of bins */
  if (!g) return NULL;
  g->stream = stream;
  RB_INSERT(pt_group_tree, &s->groups, g);
  s->ng++;
  s->last = g;
  return g;
}

void pt_bins_group_drop(pt_bins_t *s, pt_bgroup_t *g) {
  RB_REMOVE(pt_group_tree, &s->groups, g);
  s->ng--;
  if (s->last == g) s->last = NULL;
  group_free(g);
}

pt_block_t *pt_bins_nfind(pt_bin_t *bin, uint64_t size) {
  pt_block_t key; /* only the compared fields */
  key.size = size, key.addr = 0;
  return RB_NFIND(pt_bin_tree, &bin->tree, &key);
}

/* The least block of the first non-empty group from g on (NULL when none). */
static pt_block_t *first_from(const pt_bins_t *s, pt_bgroup_t *g) {
  for (; g; g = RB_NEXT(pt_group_tree, (struct pt_group_tree *)&s->groups, g))
    if (g->n) return pt_bins_bin(g, bit_next(g, 0))->min;
  return NULL;
}

/* The greatest block of the last non-empty group from g back (NULL when none). */
static pt_block_t *last_from(const pt_bins_t *s, pt_bgroup_t *g) {
  for (; g; g = RB_PREV(pt_group_tree, (struct pt_group_tree *)&s->groups, g))
    if (g->n) return RB_MAX(pt_bin_tree, tree_of(g, bit_prev(g, PT_BINS_N - 1)));
  return NULL;
}

/* The least block after bin k of group g. */
static pt_block_t *after_bin(const pt_bins_t *s, pt_bgroup_t *g, uint32_t k) {
  uint32_t nk = bit_next(g, k + 1);
  if (nk < PT_BINS_N) return pt_bins_bin(g, nk)->min;
  return first_from(s, RB_NEXT(pt_group_tree, (struct pt_group_tree *)&s->groups, g));
}

pt_block_t *pt_bins_first(const pt_bins_t *s) {
  return first_from(s, RB_MIN(pt_group_tree, (struct pt_group_tree *)&s->groups));
}

pt_block_t *pt_bins_last(const pt_bins_t *s) {
  return last_from(s, RB_MAX(pt_group_tree, (struct pt_group_tree *)&s->groups));
}

pt_block_t *pt_bins_next(const pt_bins_t *s, pt_block_t *b) {
  pt_block_t *n = pt_bins_alone(b) ? NULL : RB_NEXT(pt_bin_tree, tree_of(b->grp, b->bin), b);
  return n ? n : after_bin(s, b->grp, b->bin);
}

pt_block_t *pt_bins_prev(const pt_bins_t *s, pt_block_t *b) {
  pt_block_t *n = pt_bins_alone(b) ? NULL : RB_PREV(pt_bin_tree, tree_of(b->grp, b->bin), b);
  if (n) return n;
  uint32_t k = b->bin ? bit_prev(b->grp, b->bin - 1u) : UINT32_MAX;
  if (k != UINT32_MAX) return RB_MAX(pt_bin_tree, tree_of(b->grp, k));
  return last_from(s, RB_PREV(pt_group_tree, (struct pt_group_tree *)&s->groups, b->grp));
}

pt_block_t *pt_bins_lower(pt_bins_t *s, uint64_t stream, uint64_t size) {
  pt_bgroup_t *g = pt_bins_group(s, stream);
  if (!g) {
    pt_bgroup_t key;
    key.stream = stream;
    return first_from(s, RB_NFIND(pt_group_tree, &s->groups, &key));
  }
  pt_block_t *b = pt_bins_lower_in_stream(s, stream, size);
  return b ? b : first_from(s, RB_NEXT(pt_group_tree, &s->groups, g));
}

pt_block_t *pt_bins_next_in_stream(pt_block_t *b) {
  pt_block_t *n = pt_bins_alone(b) ? NULL : RB_NEXT(pt_bin_tree, tree_of(b->grp, b->bin), b);
  if (n) return n;
  uint32_t k = bit_next(b->grp, b->bin + 1u);
  return k < PT_BINS_N ? pt_bins_bin(b->grp, k)->min : NULL;
}

const char *pt_bins_verify(const pt_bins_t *s) {
  uint64_t total = 0;
  pt_bgroup_t *g;
  RB_FOREACH(g, pt_group_tree, (struct pt_group_tree *)&s->groups) {
    uint64_t n = 0;
    for (uint32_t k = 0; k < PT_BINS_N; k++) {
      pt_bin_t *bin = g->bins[k / PT_BINS_CHUNK] ? pt_bins_bin(g, k) : NULL;
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
