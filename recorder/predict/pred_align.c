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
 *    confidence figure then counts against the prediction. */
#include <stdlib.h>
#include <string.h>

#include "recorder/predict/pred_internal.h"

/* Myers' greedy forward pass with trace-back over a[0..na) and b[0..nb), no common prefix or
 * suffix assumed. Writes match[] for the diagonals found. */
static int64_t myers(const uint64_t *a, size_t na, const uint64_t *b, size_t nb, int64_t *match, size_t max_d) {
  size_t lim = na + nb < max_d ? na + nb : max_d;
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
      while (x < (int64_t)na && y < (int64_t)nb && a[x] == b[y]) x++, y++;
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

int64_t pred_diff(const uint64_t *a, size_t na, const uint64_t *b, size_t nb, int64_t *match, size_t max_d) {
  for (size_t i = 0; i < na; i++) match[i] = -1;
  size_t pre = 0;
  while (pre < na && pre < nb && a[pre] == b[pre]) {
    match[pre] = (int64_t)pre;
    pre++;
  }
  size_t suf = 0;
  while (suf < na - pre && suf < nb - pre && a[na - 1 - suf] == b[nb - 1 - suf]) {
    match[na - 1 - suf] = (int64_t)(nb - 1 - suf);
    suf++;
  }
  size_t ma = na - pre - suf, mb = nb - pre - suf;
  if (ma == 0 || mb == 0) return (int64_t)(ma + mb);
  if (ma > INT32_MAX || mb > INT32_MAX) return -1;
  int64_t d = myers(a + pre, ma, b + pre, mb, match + pre, max_d);
  if (d < 0) {
    for (size_t i = 0; i < na; i++) match[i] = -1;
    return d;
  }
  for (size_t i = pre; i < pre + ma; i++)
    if (match[i] >= 0) match[i] += (int64_t)pre;
  return d;
}

gm_status_t pred_align(const pred_rec_t *a, const pred_rec_t *b, int64_t *match, size_t max_d,
                       uint64_t *unaligned_segments, gm_err_t *err) {
  *unaligned_segments = 0;
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
    int64_t d = pred_diff(a->tok + a0, na, b->tok + b0, nb, match + a0, cap);
    if (d == -2) return gm_err_set(err, GM_ERR_NOMEM, "out of memory aligning segment %zu (%zu and %zu allocations)", s, na, nb);
    if (d == -1) {
      (*unaligned_segments)++;
      continue;
    }
    for (size_t i = a0; i < a1; i++)
      if (match[i] >= 0) match[i] += (int64_t)b0;
  }
  return GM_OK;
}
