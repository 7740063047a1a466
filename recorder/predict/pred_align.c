/* pred_align.c: which allocation of one recording is which allocation of another.
 *
 * Two runs of one job at different values make, for the most part, the same allocations in
 * the same order from the same callsites; they differ where the job chose differently (an
 * algorithm picked by size, a buffer needed only above some size). Pairing the k-th
 * allocation of a callsite in one run with the k-th of the other ("occurrence matching") goes
 * wrong at the first such difference and stays wrong after it, silently. Here:
 *  - markers (steps, phases) are anchors: the segments between the same markers are aligned
 *    separately, so a difference never reaches past the next marker;
 *  - in a segment, the longest common prefix and suffix of tokens pair directly (the common
 *    case: identical sequences cost one pass);
 *  - the rest is a shortest edit script over tokens (Myers, "An O(ND) difference algorithm",
 *    1986): repeated callsites anchor each other, insertions and deletions stay unpaired
 *    rather than shifting everything after them. Cost O((N + M) D), memory O(D^2) for the
 *    trace-back, D capped per segment; a segment over the cap stays unpaired, which the
 *    confidence figure then counts against the prediction;
 *  - two allocations are the same only when their tokens are equal and their sizes could be
 *    one tensor's at the two values: equal, or in the ratio of the values or of their squares,
 *    within an eighth (a fixed part, the allocator's rounding). Without it, a run of
 *    allocations without callsites (autograd's backward thread: 733 of 1,689 in the GPT-2-like
 *    job) has identical tokens, and where one recording makes fewer of them the edit script
 *    may delete the wrong ones and shift every pairing after them: seen in the sequence
 *    length, where the job makes 144 allocations fewer at 128 than at 256 and 384, a 3 KiB
 *    buffer at 384 was paired with a 9 MiB one at 128, and three such points fit a parabola
 *    exactly (+19 % at 768 with a confidence of 100 %);
 *  - after the script, a gap of unpaired allocations between two pairs that holds as many
 *    allocations on each side, with the same tokens, is paired in order: the same buffers
 *    whose sizes follow no tensor's law (a workspace), which the fit then judges;
 *  - last, allocations of one token made in another order (pair_reordered) are paired by
 *    their size law, not their position, within a few positions of where they belong: seen
 *    on a HuggingFace GPT-2 job's imported snapshots, 4 of 1,905 allocations, autograd's
 *    first of a step, came in another order at another batch. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "recorder/predict/pred_internal.h"

/* The sequences compared: tokens, and optionally sizes with the ratio of the values. */
typedef struct seq2 {
  const uint64_t *a, *b;   /* tokens */
  const uint64_t *as, *bs; /* sizes (NULL: tokens alone) */
  double k;                /* value of b / value of a */
} seq2_t;

static int size_compatible(uint64_t sa, uint64_t sb, double k) {
  if (sa == sb) return 1;
  double e1 = (double)sa * k, e2 = e1 * k, b = (double)sb;
  const double slack = 1024; /* small sizes rounded to the allocator's granules */
  if (fabs(b - e1) <= 0.125 * (b > e1 ? b : e1) + slack) return 1;
  if (fabs(b - e2) <= 0.125 * (b > e2 ? b : e2) + slack) return 1;
  return 0;
}

static inline int same(const seq2_t *q, int64_t i, int64_t j) {
  if (q->a[i] != q->b[j]) return 0;
  return !q->as || size_compatible(q->as[i], q->bs[j], q->k);
}

/* Myers' greedy forward pass with trace-back over a[0..na) and b[0..nb), no common prefix or
 * suffix assumed. Writes match[] for the diagonals found. */
static int64_t myers(const seq2_t *q, size_t na, size_t nb, int64_t *match, size_t max_d) {  size_t lim = na + nb < max_d ? na + nb : max_d;
  /* hist[d*d + (k + d)] = furthest x on diagonal k after step d */
  size_t hcap = 0;
  int32_t *hist = NULL;
  int32_t *v = malloc((2 * lim + 3) * sizeof *v);
  if (!v) return -2;
  const int64_t off = (int64_t)lim + 1;
  v[off + 1] = 0;
  int64_t found = -1;
  for (size_t d = 0; d <= lim && found < 0; d++) {
    size_t need = (d + 1) * (d + 1);
    if (need > hcap) {
      size_t nc = hcap ? hcap * 2 : 1024;
      while (nc < need) nc *= 2;
      int32_t *nh = realloc(hist, nc * sizeof *nh);
      if (!nh) {
        free(hist);
        free(v);
        return -2;
      }
      hist = nh;
      hcap = nc;
    }
    const int64_t di = (int64_t)d;
    for (int64_t k = -di; k <= di; k += 2) {
      int64_t x = (k == -di || (k != di && v[off + k - 1] < v[off + k + 1])) ? v[off + k + 1] : v[off + k - 1] + 1;
      int64_t y = x - k;
      while (x < (int64_t)na && y < (int64_t)nb && same(q, x, y)) x++, y++;
      v[off + k] = (int32_t)x;
      if (x >= (int64_t)na && y >= (int64_t)nb) found = di;
    }
    memcpy(hist + d * d, v + off - di, (2 * d + 1) * sizeof *v);
  }
  free(v);
  if (found < 0) {
    free(hist);
    return -1;
  }
  /* trace back from (na, nb) */
  int64_t x = (int64_t)na, y = (int64_t)nb;
  for (int64_t d = found; d >= 0; d--) {
    int64_t k = x - y, xs, ys, px = 0, py = 0;
    if (d == 0) {
      xs = ys = 0;
    } else {
      const int32_t *pv = hist + (d - 1) * (d - 1) + (d - 1); /* pv[k] for k in [-(d-1), d-1] */
      int down = k == -d || (k != d && pv[k - 1] < pv[k + 1]);
      int64_t pk = down ? k + 1 : k - 1;
      px = pv[pk];
      py = px - pk;
      xs = down ? px : px + 1;
      ys = down ? py + 1 : py;
    }
    for (int64_t i = 0; xs + i < x; i++) match[xs + i] = ys + i;
    x = px;
    y = py;
  }
  free(hist);
  return found;
}

/* Pair, in order, the unpaired allocations between two pairs where both sides hold as many
 * and their tokens agree one for one. */
static void fill_gaps(const seq2_t *q, size_t na, size_t nb, int64_t *match) {
  int64_t pi = -1, pj = -1; /* the last pair */
  for (size_t i = 0; i <= na; i++) {
    if (i < na && match[i] < 0) continue;
    int64_t j = i < na ? match[i] : (int64_t)nb;
    int64_t ga = (int64_t)i - pi - 1, gb = j - pj - 1;
    if (ga > 0 && ga == gb) {
      int64_t t = 0;
      while (t < ga && q->a[pi + 1 + t] == q->b[pj + 1 + t]) t++;
      if (t == ga)
        for (t = 0; t < ga; t++) match[pi + 1 + t] = pj + 1 + t;
    }
    pi = (int64_t)i;
    pj = j;
  }
}

/* Allocations of one token made in another order (autograd's first allocations of a step, a
 * callsite's buffers requested in another order): the edit script pairs one of each swapped
 * pair and leaves the other unpaired on both sides, each in a different gap. Pair each still
 * unpaired allocation of a with an unpaired one of b of the same token whose size follows the
 * same law (size_compatible), within REORDER_WINDOW positions of where the pairs around it put
 * it, when exactly one there is and it could be no other's (of several, none: a convolution's
 * many buffers of one shape would pair wrongly and spoil the fits). A buffer the other run does not make at all finds no
 * partner and stays unpaired. */
#define REORDER_WINDOW 16

static void pair_reordered(const seq2_t *q, size_t na, size_t nb, int64_t *match) {
  if (!q->as) return;
  uint8_t *used = calloc(nb ? nb : 1, 1);
  if (!used) return; /* only fewer pairs: the confidence counts them */
  for (size_t i = 0; i < na; i++)
    if (match[i] >= 0) used[match[i]] = 1;
  int64_t prev_b = -1; /* b of the last pair before i */
  for (size_t i = 0; i < na; i++) {
    if (match[i] >= 0) {
      prev_b = match[i];
      continue;
    }
    int64_t next_b = (int64_t)nb;
    for (size_t t = i + 1; t < na; t++)
      if (match[t] >= 0) {
        next_b = match[t];
        break;
      }
    int64_t lo = prev_b - REORDER_WINDOW, hi = next_b + REORDER_WINDOW, best = -1;
    if (lo < 0) lo = 0;
    if (hi > (int64_t)nb - 1) hi = (int64_t)nb - 1;
    int cands = 0;
    for (int64_t j = lo; j <= hi && cands < 2; j++) {
      if (used[j] || q->a[i] != q->b[j] || !size_compatible(q->as[i], q->bs[j], q->k)) continue;
      best = j;
      cands++;
    }
    /* and i the only unpaired allocation of a that could be best's (mutual: no choice made) */
    for (size_t t = i > 2 * REORDER_WINDOW ? i - 2 * REORDER_WINDOW : 0; cands == 1 && t < na && t <= i + 2 * REORDER_WINDOW; t++)
      if (t != i && match[t] < 0 && q->a[t] == q->b[best] && size_compatible(q->as[t], q->bs[best], q->k)) cands = 2;
    if (cands == 1) {
      match[i] = best;
      used[best] = 1;
    }
  }
  free(used);
}

static int64_t diff(const seq2_t *q, size_t na, size_t nb, int64_t *match, size_t max_d) {
  for (size_t i = 0; i < na; i++) match[i] = -1;
  size_t pre = 0;
  while (pre < na && pre < nb && same(q, (int64_t)pre, (int64_t)pre)) {
    match[pre] = (int64_t)pre;
    pre++;
  }
  size_t suf = 0;
  while (suf < na - pre && suf < nb - pre && same(q, (int64_t)(na - 1 - suf), (int64_t)(nb - 1 - suf))) {
    match[na - 1 - suf] = (int64_t)(nb - 1 - suf);
    suf++;
  }
  size_t ma = na - pre - suf, mb = nb - pre - suf;
  if (ma == 0 || mb == 0) return (int64_t)(ma + mb);
  if (ma > INT32_MAX || mb > INT32_MAX) return -1;
  seq2_t mid = *q;
  mid.a += pre;
  mid.b += pre;
  if (q->as) {
    mid.as += pre;
    mid.bs += pre;
  }
  int64_t d = myers(&mid, ma, mb, match + pre, max_d);
  if (d < 0) {
    for (size_t i = 0; i < na; i++) match[i] = -1;
    return d;
  }
  for (size_t i = pre; i < pre + ma; i++)
    if (match[i] >= 0) match[i] += (int64_t)pre;
  fill_gaps(q, na, nb, match);
  pair_reordered(q, na, nb, match);
  return d;
}

int64_t pred_diff(const uint64_t *a, size_t na, const uint64_t *b, size_t nb, int64_t *match, size_t max_d) {
  seq2_t q = {a, b, NULL, NULL, 1};
  return diff(&q, na, nb, match, max_d);
}

int64_t pred_diff_sized(const uint64_t *a, const uint64_t *as, size_t na, const uint64_t *b, const uint64_t *bs,
                        size_t nb, double k, int64_t *match, size_t max_d) {
  seq2_t q = {a, b, as, bs, k};
  return diff(&q, na, nb, match, max_d);
}

gm_status_t pred_align(const pred_rec_t *a, const pred_rec_t *b, int64_t *match, size_t max_d,
                       uint64_t *unaligned_segments, gm_err_t *err) {
  *unaligned_segments = 0;
  uint64_t *as = malloc((a->n_alloc ? a->n_alloc : 1) * sizeof *as), *bs = malloc((b->n_alloc ? b->n_alloc : 1) * sizeof *bs);
  if (!as || !bs) {
    free(as);
    free(bs);
    return gm_err_set(err, GM_ERR_NOMEM, "out of memory");
  }
  for (size_t i = 0; i < a->n_alloc; i++) as[i] = a->ev[a->alloc_ev[i]].size;
  for (size_t i = 0; i < b->n_alloc; i++) bs[i] = b->ev[b->alloc_ev[i]].size;
  int by_marks = a->n_mark == b->n_mark &&
                 (a->n_mark == 0 || memcmp(a->mark_name, b->mark_name, a->n_mark * sizeof *a->mark_name) == 0);
  size_t segs = by_marks ? a->n_mark + 1 : 1;
  for (size_t s = 0; s < segs; s++) {
    size_t a0 = by_marks && s > 0 ? a->mark_alloc[s - 1] : 0, a1 = by_marks && s < a->n_mark ? a->mark_alloc[s] : a->n_alloc;
    size_t b0 = by_marks && s > 0 ? b->mark_alloc[s - 1] : 0, b1 = by_marks && s < b->n_mark ? b->mark_alloc[s] : b->n_alloc;
    size_t na = a1 - a0, nb = b1 - b0;
    /* the cap grows with the segment (a tenth of it may differ) within O(D^2) = 256 MiB */
    size_t cap = (na + nb) / 10 > max_d ? (na + nb) / 10 : max_d;
    if (cap > 8000) cap = 8000;
    int64_t d = pred_diff_sized(a->tok + a0, as + a0, na, b->tok + b0, bs + b0, nb, b->value / a->value, match + a0, cap);
    if (d == -2) {
      free(as);
      free(bs);
      return gm_err_set(err, GM_ERR_NOMEM, "out of memory aligning segment %zu (%zu and %zu allocations)", s, na, nb);
    }
    if (d == -1) {
      (*unaligned_segments)++;
      continue;
    }
    for (size_t i = a0; i < a1; i++)
      if (match[i] >= 0) match[i] += (int64_t)b0;
  }
  free(as);
  free(bs);
  return GM_OK;
}
