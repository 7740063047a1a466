/* pred_internal.h: the parts of recorder/predict/ that its tests reach: a recording in memory
 * (pred_load.c), the alignment (pred_align.c) and the size fit (pred_fit.c). */
#ifndef PRED_INTERNAL_H
#define PRED_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "base/gm_base.h"
#include "formats/gmt.h"
#include "recorder/predict/pred.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Strings shared by all recordings: a callsite or marker name has one id across them. */
typedef struct pred_strings pred_strings_t;
pred_strings_t *pred_strings_new(void);
void pred_strings_free(pred_strings_t *t);
/* Id (>= 1) of s, added if new; 0 when out of memory. */
uint32_t pred_strings_id(pred_strings_t *t, const char *s);
const char *pred_strings_get(const pred_strings_t *t, uint32_t id);
uint32_t pred_strings_count(const pred_strings_t *t);

#define PRED_MAX_STREAMS 64

/* One recording: the events a prediction carries (alloc, free_requested, free, marker,
 * empty_cache), callsites as shared string ids, and per allocation a token that the
 * alignment compares (device, stream by order of first use, memory kind, callsite). */
typedef struct pred_rec {
  gmt_header_t header;
  double value;
  const char *path;
  gmt_event_t *ev; /* kept events; callsite = shared string id */
  size_t n_ev;
  size_t *alloc_ev; /* index in ev of each allocation */
  uint64_t *tok;    /* alignment token of each allocation */
  size_t n_alloc;
  size_t *mark_alloc; /* allocations before each marker (segment boundaries) */
  uint32_t *mark_name;
  size_t n_mark;
  uint64_t streams[PRED_MAX_STREAMS]; /* stream ids in order of first allocation */
  size_t n_streams;
  uint64_t failed;      /* ALLOC_FAILED events */
  uint64_t skipped;     /* segment, VMM, pool events (the allocator's own, not requests) */
  uint64_t with_callsite; /* allocations that carry a callsite */
  uint64_t all_sizes_gcd; /* gcd of every allocation size (granularity), 0 if none */
} pred_rec_t;

gm_status_t pred_rec_load(pred_rec_t *r, const char *path, double value, pred_strings_t *strs, gm_err_t *err);
void pred_rec_free(pred_rec_t *r);
/* Every input into rec[0..n) (one thread each), callsites as ids of strs. On error the
 * message names the first input, in order, that failed; rec[] is then for pred_rec_free. */
gm_status_t pred_load_all(pred_rec_t *rec, const pred_input_t *in, size_t n, pred_strings_t *strs, gm_err_t *err);
/* An in-memory recording for tests: events as given (callsites are already shared ids). */
gm_status_t pred_rec_from_events(pred_rec_t *r, const gmt_event_t *ev, size_t n, double value, gm_err_t *err);

/* ---- alignment ---------------------------------------------------------------------------- */

/* Aligns b's allocations to a's (a is the reference): match[i] = index of b's allocation
 * paired with a's allocation i, or -1. Segments between markers are aligned separately when
 * both have the same marker sequence (the caller checks it); within a segment, the common
 * prefix and suffix pair directly and the rest by a shortest edit script (Myers) over tokens,
 * up to max_d edits per segment; a segment that needs more stays unmatched.
 * *unaligned_segments counts those. */
gm_status_t pred_align(const pred_rec_t *a, const pred_rec_t *b, int64_t *match, size_t max_d,
                       uint64_t *unaligned_segments, gm_err_t *err);

/* Token sequences alone (tests, and the per-segment worker): match[i] for i < na. Returns
 * the number of edits, or -1 when more than max_d were needed (match left all -1), -2 when
 * out of memory. */
int64_t pred_diff(const uint64_t *a, size_t na, const uint64_t *b, size_t nb, int64_t *match, size_t max_d);
/* The same where two allocations are the same only when their sizes could also be one
 * tensor's at values in the ratio k = value(b) / value(a) (pred_align.c says which). */
int64_t pred_diff_sized(const uint64_t *a, const uint64_t *as, size_t na, const uint64_t *b, const uint64_t *bs,
                        size_t nb, double k, int64_t *match, size_t max_d);

/* After every other recording is aligned to rec[ref] (match[k], NULL for ref): for each
 * recording j, the allocations the alignment left unpaired on both sides, grouped by token
 * between the same markers, are paired by their size law where the other recordings fix it
 * (pred_pair_law.c says when: only where the whole group pairs exactly). *paired counts the
 * pairs added; nothing with fewer than three recordings. */
gm_status_t pred_pair_by_law(const pred_rec_t *rec, size_t n, size_t ref, int64_t *const *match, uint64_t granule,
                             uint64_t *paired, gm_err_t *err);

/* ---- size fit ----------------------------------------------------------------------------- */

typedef struct pred_fit {
  double c0, c1, c2; /* size(v) = c0 + c1 v + c2 v^2 */
  int degree;        /* 0 (one point), 1, 2 */
  int consistent;    /* the points fit within the granularity and the fit is plausible */
} pred_fit_t;

/* Fit n points (v[i], s[i]) with distinct v. Two points: affine; three or more: affine if
 * every point lies within the granularity of it, else quadratic. Consistent: residuals within
 * the granularity, not shrinking towards the target, no large negative constant part. */
void pred_fit_points(const double *v, const uint64_t *s, size_t n, uint64_t granule, double target, pred_fit_t *f);
/* The fitted size at x, rounded up to the granularity, at least one granule. */
uint64_t pred_fit_eval(const pred_fit_t *f, double x, uint64_t granule);

/* ---- one prediction in progress (pred_size.c sizes it, pred_judge.c says whether it stands) */

/* Why a reference allocation's size is what it is. */
enum { CERTAIN = 0, UNMATCHED = 1, INCONSISTENT = 2 };

typedef struct pred_work {
  pred_rec_t rec[PRED_MAX_INPUTS];
  size_t n;
  pred_strings_t *strs;
  int64_t *match[PRED_MAX_INPUTS]; /* per other recording: ref alloc -> its alloc, -1 */
  uint64_t *size;                  /* per ref alloc: predicted size */
  uint8_t *why;                    /* per ref alloc: CERTAIN, UNMATCHED, INCONSISTENT */
  uint8_t *missing_in;             /* per ref alloc: first recording lacking it (UNMATCHED) */
  uint64_t *ev_size;               /* per ref event: its size in the output */
  uint32_t *ev_alloc;              /* per ref event: the ref alloc it sizes, UINT32_MAX none */
  uint64_t *lo, *hi;               /* per ref alloc: the plausible range of an uncertain size */
  /* at the predicted peak */
  uint64_t peak, peak_certain, peak_inconsistent, peak_unmatched[PRED_MAX_INPUTS];
  uint64_t uncertain_max; /* the most live bytes of uncertain allocations at any moment */
  size_t peak_ev;         /* the reference event at which the predicted peak is reached */
} pred_work_t;

/* pred_size.c: every reference allocation's size at the target (w->size, why, lo, hi), then
 * pass 1: every output event's size, the predicted peak and the confidence into res. */
gm_status_t pred_size_fit(pred_work_t *w, size_t ref, double target, uint64_t granule, pred_result_t *res,
                          gm_err_t *err);
gm_status_t pred_size_events(pred_work_t *w, size_t ref, pred_result_t *res, gm_err_t *err);
/* After pred_size_events, for a drift between two recordings alone (pred.c says why): the
 * allocations both make, certain and sized otherwise than at the reference, grouped by (size at
 * the reference, fitted size); each group with no member live at the predicted peak takes the
 * range between the two (lo, hi; the fitted size and why stay): its law may stop at the
 * reference, as a workspace that stops growing does. *n counts the allocations given a range. */
gm_status_t pred_bend_ranges(pred_work_t *w, size_t ref, uint64_t *n, gm_err_t *err);
/* pred_write.c: the output's header (the reference's, marked as predicted with its inputs); the
 * trace at path, the reference's events with the variant's sizes. */
gm_status_t pred_write_header(const pred_work_t *w, const pred_input_t *in, size_t ref, const pred_opts_t *o,
                              const pred_result_t *res, gmt_header_t *h, gm_err_t *err);
gm_status_t pred_write_trace(const pred_work_t *w, size_t ref, const gmt_header_t *h, pred_variant_t variant,
                             const char *path, pred_result_t *res, gm_err_t *err);

/* The refusals (pred_judge.c): each sets res->refused with its reason and advice. */
void pred_refuse_low_confidence(const pred_work_t *w, const pred_input_t *in, double target, double minc, size_t ref,
                                  pred_result_t *res);
void pred_refuse_uncertain_off_peak(const pred_work_t *w, const pred_input_t *in, double target, size_t ref,
                                      pred_result_t *res);
uint64_t pred_drift_count(const pred_work_t *w, size_t ref, size_t near);
/* A drift that a third recording spans (pred_judge.c says when): uncertain sizes, not a refusal. */
int pred_drift_spanned(const pred_work_t *w, size_t ref, size_t near);
void pred_refuse_drift(const pred_work_t *w, const pred_input_t *in, double target, size_t ref, size_t near,
                         pred_result_t *res);

#ifdef __cplusplus
}
#endif
#endif /* PRED_INTERNAL_H */
