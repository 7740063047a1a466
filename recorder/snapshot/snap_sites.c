/* snap_sites.c: the callsites of PyTorch's requests, from the recorder's alloc_site notes, put
 * onto the allocations of PyTorch's memory history in the torch-history merge (snap_merge.c).
 *
 * The notes (recorder/rec_sites.c) come from the allocator's per-request report, made under the
 * same per-device mutex, in the same malloc call, as the history's alloc entry: per device, the
 * notes and the history's allocations are the same sequence, one for one, from the moment both
 * are on (gpurec's sitecustomize hooks right after it enables the history). So the match walks
 * both sequences of a device in step, checking addresses. Where they part, it looks for the
 * next place where several allocations in a row agree again:
 *   - at the start (notes made before the history began, or a history whose ring dropped its
 *     oldest entries), over all notes, choosing among the places that agree the one whose time is
 *     nearest the allocation's (a training loop repeats its addresses every step: only time tells
 *     the steps apart) when both clocks are the trace's, else the first;
 *   - later (a note the ring dropped), within the next WINDOW notes.
 * An allocation without its note keeps no callsite; nothing is ever guessed from an address
 * alone. Synthetic allocations (the initial state rebuilt from the snapshot) have no note. */
#include <stdlib.h>
#include <string.h>

#include "recorder/snapshot/snap_internal.h"

#define CONFIRM 4     /* allocations in a row that must agree to (re)start the walk */
#define WINDOW 512    /* notes looked ahead for a later resync */
#define FIRST_TRIES 64 /* history allocations tried for the first sync before giving up */
#define NEAR_NS 5000000ull /* a later place wins the first sync only if this much nearer in time */

static int agrees(const snap_pass_t *ps, const size_t *h, size_t nh, size_t i, const snap_site_t *s,
                  const size_t *n, size_t nn, size_t j) {
  for (size_t t = 0; t < CONFIRM && i + t < nh && j + t < nn; t++)
    if (ps->evs[h[i + t]]->ev.addr != s[n[j + t]].addr) return 0;
  return 1;
}

static uint64_t dist(uint64_t a, uint64_t b) { return a > b ? a - b : b - a; }

/* The notes index where allocation i's note is, searching [from, to); nn if none. Timed: of the
 * places that agree, the first, unless a later one is nearer the allocation's time by NEAR_NS. */
static size_t sync(const snap_pass_t *ps, const size_t *h, size_t nh, size_t i, const snap_site_t *s,
                   const size_t *n, size_t nn, size_t from, size_t to, int64_t shift, int timed) {
  size_t best = nn;
  int64_t t = (int64_t)ps->evs[h[i]]->ev.ts_ns + shift;
  uint64_t ht = t > 0 ? (uint64_t)t : 0;
  for (size_t j = from; j < to; j++) {
    if (!agrees(ps, h, nh, i, s, n, nn, j)) continue;
    if (!timed) return j;
    if (best == nn || dist(s[n[j]].ts, ht) + NEAR_NS < dist(s[n[best]].ts, ht)) best = j;
  }
  return best;
}

static size_t match_device(const snap_pass_t *ps, const size_t *h, size_t nh, const snap_site_t *s,
                           const size_t *n, size_t nn, int64_t shift, int timed, const char **out) {
  size_t matched = 0, i = 0, j = nn;
  for (; i < nh && i < FIRST_TRIES && j == nn; i++)
    if ((j = sync(ps, h, nh, i, s, n, nn, 0, nn, shift, timed)) < nn) break;
  for (; i < nh && j < nn; i++) {
    if (ps->evs[h[i]]->ev.addr != s[n[j]].addr) {
      size_t k = sync(ps, h, nh, i, s, n, nn, j + 1, j + 1 + WINDOW < nn ? j + 1 + WINDOW : nn, 0, 0);
      if (k == nn) continue; /* no note for this one: the walk goes on from the same note */
      j = k;
    }
    out[h[i]] = s[n[j]].str;
    matched += s[n[j]].str != NULL;
    j++;
  }
  return matched;
}

size_t snap_sites_match(const snap_pass_t *ps, const snap_site_t *sites, size_t nsites, int64_t shift,
                        int timed, const char **out) {
  size_t *h = malloc((ps->n + 1) * sizeof *h), *n = malloc((nsites + 1) * sizeof *n);
  size_t matched = 0;
  char seen[65536 / 8];
  memset(seen, 0, sizeof seen);
  for (size_t d = 0; h && n && d < nsites; d++) {
    uint16_t dev = sites[d].device;
    if (seen[dev / 8] & (1 << (dev % 8))) continue;
    seen[dev / 8] |= (char)(1 << (dev % 8));
    size_t nh = 0, nn = 0;
    for (size_t k = 0; k < ps->n; k++) {
      const gmt_event_t *e = &ps->evs[k]->ev;
      if (e->kind == GMT_EV_ALLOC && e->device == dev && !(e->flags & GMT_F_SYNTHETIC)) h[nh++] = k;
    }
    for (size_t k = d; k < nsites; k++)
      if (sites[k].device == dev) n[nn++] = k;
    matched += match_device(ps, h, nh, sites, n, nn, shift, timed, out);
  }
  free(h);
  free(n);
  return matched;
}
