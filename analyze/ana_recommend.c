/* ana_recommend.c: `gpuanalyze recommend`: for each trace with replay runs, the allocator
 * setting that needs the least memory, as the line a user pastes, its saving against the
 * default (the `pytorch` run), the headroom left to the lower bound (peak live requested
 * bytes: no allocator can reserve less), and warnings for settings in the trace's own
 * environment that do not do what their author meant (the line and the warnings:
 * ana_policy_line.c).
 *
 * Choice: among runs without OOM, the least peak reserved, ties to fewer driver calls.
 * `direct` (every request to the driver) is the floor, never the advice: it trades memory for
 * a driver call per tensor. Candidates are limited to the framework the trace came from
 * (PyTorch unless its environment or command line says TensorFlow or JAX), falling back to
 * every policy when that family has no run (the framework and its family: ana_framework.c). What
 * it says of the trace before the advice (its failure, damage, environment, frameworks):
 * ana_recommend_notes.c. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/ana_db_internal.h"
#include "analyze/ana_run_fields.h"

typedef struct run_row {
  char policy[256];
  int64_t run_id;
  int64_t device; /* the device the run replayed (-1: older results) */
  int64_t reserved, lower, calls, ooms, first_oom, capacity;
  int64_t need; /* peak of live requests + external together ("needs at least"); 0: older results */
  /* gpureplay --tune's note (results key "tune"): its role ("chosen" is its advice), the
   * smallest memory it fits, its estimated driver time, the smallest common GPU. */
  char tune_role[16];
  int64_t tune_needs, tune_gpu, tune_from_grid;
  double tune_p50, tune_p99, tune_budget;
  /* A timing-dependent figure (frees waiting on stream events, the async pool): the range
   * peak reserved moves in; low == high == reserved when it is a point. */
  int64_t low, high;
  int range;
  int pool; /* the range is the simulated stream-ordered pool's: shown, never the advice */
  int tune_pool; /* the tuner's point served by that pool (results "tune.pool"): never the advice */
  char tune_searched[384]; /* how a long trace was searched (results "tune.searched"; "": every event) */
  int64_t bump;  /* peak reserved under a bump pointer where it differs (results "placement_bump_bytes"); 0: same */
  /* gpureplay --tune's worst and best case of its point (results "tune.worst_bytes",
   * "tune.best_bytes": timing, placement and a predicted trace's uncertain sizes); 0: none;
   * tune_worst INT64_MAX: another timing or placement ran out of memory ("tune.worst_oom") */
  int64_t tune_worst, tune_best;
  /* what the replay missed the run by under the setting it ran with (ana_run_check.c): every
   * figure of the trace may be off by as much; 0 when it matched or was not checked */
  int64_t slack;
} run_row_t;

/* A range ranks by its high end: what the job may reserve on an unlucky run. */
static int64_t rank_bytes(const run_row_t *r) { return ana_run_rank_bytes(r->reserved, r->range, r->high); }

/* What a BFC replay (JAX, TensorFlow) cannot know, said where it matters. */
static void bfc_caveats(FILE *out, ana_fw_t fw, const run_row_t *rows, int n) {
  if (fw != ANA_FW_JAX && fw != ANA_FW_TF) return;
  int tight = 0;
  for (int i = 0; i < n; i++)
    if (ana_fw_in_family(fw, rows[i].policy) && rows[i].ooms > 0) tight = 1;
  if (fw == ANA_FW_JAX)
    fprintf(out, "  note: under a memory fraction tighter than the job's peak, XLA compiles a different "
                 "program (it rematerializes to fit); a replay of an unconstrained recording is an upper "
                 "bound there%s\n", tight ? ": a fraction that ran out of memory here may still fit" : "");
  if (tight)
    fprintf(out, "  note: when %s's BFC cannot serve a request it logs \"ran out of memory\" and waits "
                 "up to about 10 s for other frees before it fails: a run near its limit is slow before "
                 "it is out of memory\n", ana_fw_name(fw));
}

/* What gpureplay --tune says of its choice: its memory, its estimated driver time with its
 * range, the smallest common GPU it fits, and how it stands against the sweep grid's best. */
static void tuned_lines(FILE *out, ana_fw_t fw, const run_row_t *best, const run_row_t *advice,
                        const run_row_t *rows, int n, int64_t need, uint64_t gpu_mem, const char *ind, int partial) {
  char b1[32], b2[32];
  /* best: the tuner's choice; advice: what the lines above advise (the same, unless the
   * recorded run failed: then the smallest change of the sweep's grid) */
  fprintf(out, "%s  tuned (gpureplay --tune): %s%speak reserved %s, est. driver time %.2f..%.2f ms (p50..p99; budget %.2f ms%s)\n",
          ind, best != advice ? best->policy : "", best != advice ? ", " : "",
          gm_format_size((uint64_t)best->reserved, b1, sizeof b1), best->tune_p50 * 1e3, best->tune_p99 * 1e3,
          best->tune_budget * 1e3,
          best->tune_p50 > best->tune_budget ? ": none that serves every request is within it, this is the fastest" : "");
  if (best->tune_searched[0]) fprintf(out, "%s  %s\n", ind, best->tune_searched);
  /* what the tuner ranked it by, where the replay cannot tell (issue 25) */
  if (best->tune_worst == INT64_MAX)
    fprintf(out, "%s  its worst case: out of memory under another timing or placement\n", ind);
  else if (best->tune_worst && (best->tune_worst != best->reserved || best->tune_best != best->reserved))
    fprintf(out, "%s  its worst and best case: %s..%s (timing, placement, a predicted trace's sizes)\n", ind,
            gm_format_size((uint64_t)best->tune_best, b1, sizeof b1), gm_format_size((uint64_t)best->tune_worst, b2, sizeof b2));
  if (best->reserved == 0 && best->tune_needs == 0 && need == 0)
    fprintf(out, "%s  fits: any GPU; the job needs no device memory (the trace allocates none)\n", ind);
  else if (best->tune_gpu && partial) /* a partial trace: a peak before its window may be larger */
    fprintf(out, "%s  fits: no GPU smaller than %" PRId64 " GiB (a lower bound: the trace is partial; it needs at "
                 "least %s on the device)\n", ind, best->tune_gpu, gm_format_size((uint64_t)best->tune_needs, b1, sizeof b1));
  else if (best->tune_gpu)
    fprintf(out, "%s  fits: a %" PRId64 " GiB GPU, the smallest of 16/24/40/48/80/94/141 GiB it fits (it needs %s "
                 "on the device)\n", ind, best->tune_gpu, gm_format_size((uint64_t)best->tune_needs, b1, sizeof b1));
  else if (best->tune_needs)
    fprintf(out, "%s  fits: no common GPU up to 141 GiB (it needs %s%s on the device)\n", ind, partial ? "at least " : "",
            gm_format_size((uint64_t)best->tune_needs, b1, sizeof b1));
  /* a memory fraction or limit the search bisected to the edge of this recording */
  if (strcasestr(best->policy, "fraction"))
    fprintf(out, "%s  its fraction is of this GPU's %s (scale it for another GPU) and a hard limit, found at the edge "
                 "for this recording: a run that needs more fails; leave headroom\n", ind,
            gpu_mem ? gm_format_size(gpu_mem, b1, sizeof b1) : "memory");
  else if (strcasestr(best->policy, "memory_limit") || strstr(best->policy, "CUPY_GPU_MEMORY_LIMIT"))
    fprintf(out, "%s  its limit is a hard one, found at the edge for this recording: a run that needs more fails; "
                 "leave headroom\n", ind);
  const run_row_t *g = NULL;
  for (int i = 0; i < n; i++)
    if (rows[i].tune_from_grid && ana_fw_advisable(fw, rows[i].policy, rows[i].ooms, rows[i].pool || rows[i].tune_pool, 0) &&
        (!g || rows[i].reserved < g->reserved))
      g = &rows[i];
  if (g && g->reserved > best->reserved)
    fprintf(out, "%s  beats the sweep grid's best, %s (%s), by %s (%.1f%%)\n", ind, g->policy,
            gm_format_size((uint64_t)g->reserved, b1, sizeof b1),
            gm_format_size((uint64_t)(g->reserved - best->reserved), b2, sizeof b2),
            100.0 * (double)(g->reserved - best->reserved) / (double)g->reserved);
  else if (g && g->reserved == best->reserved)
    fprintf(out, "%s  the sweep grid's best, %s (%s), is already the best: the search found nothing smaller within "
                 "the budget (`gpuanalyze report --limits` searches hard limits too)\n", ind, g->policy, gm_format_size((uint64_t)g->reserved, b1, sizeof b1));
  else if (g) /* smaller, but the tuner's choice is the smallest within the time budget */
    fprintf(out, "%s  the sweep grid's smallest, %s (%s), reserves %s less at more driver time (est. %.2f ms)\n", ind,
            g->policy, gm_format_size((uint64_t)g->reserved, b1, sizeof b1),
            gm_format_size((uint64_t)(best->reserved - g->reserved), b2, sizeof b2), g->tune_p50 * 1e3);
}

/* A timing-dependent figure is said to be one, with its range, and what that does to the
 * choice (ranked by the high end; settings whose ranges overlap the best's are not surely
 * worse). */
static void print_range(FILE *out, const run_row_t *best, const run_row_t *rows, int n, const char *ind) {
  char b1[32], b2[32];
  int any = 0, overlap = 0;
  for (int i = 0; i < n; i++) {
    if (rows[i].pool) continue; /* print_pool */
    any |= rows[i].range;
    if (&rows[i] != best && rows[i].ooms == 0 && strcmp(rows[i].policy, "direct") != 0 &&
        rows[i].low <= best->high && (best->range || rows[i].range))
      overlap++;
  }
  if (!any) return;
  if (best->range)
    fprintf(out, "%s  range: peak reserved %s..%s, not exact: it depends on when the GPU completes "
                 "work the allocator waits for (gpureplay's table says what moves it)\n", ind,
            gm_format_size((uint64_t)best->low, b1, sizeof b1), gm_format_size((uint64_t)best->high, b2, sizeof b2));
  fprintf(out, "%s  ranked by the high end of each range (what an unlucky run reserves)%s\n", ind,
          overlap ? "; other settings' ranges overlap this one: it is not surely the least" : "");
}

/* Settings whose figure is the simulated stream-ordered pool's range: said, not advised. */
static void print_pool(FILE *out, const run_row_t *rows, int n, const char *ind) {
  char b1[32], b2[32];
  for (int i = 0; i < n; i++)
    if (rows[i].pool && rows[i].ooms == 0)
      fprintf(out, "%s  %s: %s..%s, the driver's stream-ordered pool simulated (a range, not advised: "
                   "`gpureplay --device=cuda:0` measures it)\n", ind, rows[i].policy,
              gm_format_size((uint64_t)rows[i].low, b1, sizeof b1), gm_format_size((uint64_t)rows[i].high, b2, sizeof b2));
}

/* What the HTML report draws (ana_advice_t): the same choice the text below states. */
static void fill_advice(ana_advice_t *a, ana_fw_t fw, const run_row_t *best, const run_row_t *dflt,
                        const char *dname, int64_t lower, int64_t need, uint64_t gpu_mem, int64_t device) {
  if (!a) return;
  snprintf(a->framework, sizeof a->framework, "%s", ana_fw_name(fw));
  snprintf(a->default_policy, sizeof a->default_policy, "%s", dname);
  a->device = device;
  a->lower = lower;
  a->need = need;
  a->advised = best != NULL;
  a->best_run_id = best ? best->run_id : -1;
  if (best) {
    snprintf(a->best_policy, sizeof a->best_policy, "%s", best->policy);
    ana_policy_env_line(best->policy, gpu_mem, a->paste, sizeof a->paste);
    a->best_reserved = best->reserved;
    a->best_range = best->range;
    a->best_low = best->low;
    a->best_high = best->high;
  }
  a->default_run_id = dflt ? dflt->run_id : -1;
  if (dflt) {
    a->default_reserved = dflt->reserved;
    a->default_ooms = dflt->ooms;
  }
}

/* What the replay cannot tell (issue 25): a figure's timing range and its placement spread
 * (the driver's placement model against a bump pointer), and on gpureplay --tune's points the
 * worst and best case it counted (the same, and a predicted trace's uncertain sizes). A setting
 * is advised over the default only when it is smaller in the worst case, by more than the
 * floor (gm_advice_floor: the larger of 64 MiB and 1 % of the default; the largest miss of
 * the tables, 64 MiB (hf_seq at 256), is the same under both placements). */
static int64_t worst_high(const run_row_t *r) {
  int64_t l, h;
  ana_run_ends(r->reserved, r->range, r->low, r->high, r->bump, &l, &h);
  h = r->tune_worst > h ? r->tune_worst : h;
  return h == INT64_MAX || r->slack > INT64_MAX - h ? INT64_MAX : h + r->slack;
}

static int64_t best_low(const run_row_t *r) {
  int64_t l, h;
  ana_run_ends(r->reserved, r->range, r->low, r->high, r->bump, &l, &h);
  l = r->tune_best && r->tune_best < l ? r->tune_best : l;
  return l > r->slack ? l - r->slack : 0;
}

int64_t ana_advice_floor(int64_t default_reserved) {
  return (int64_t)gm_advice_floor(default_reserved > 0 ? (uint64_t)default_reserved : 0);
}

/* 1 when best is reliably smaller than the default: its worst case below the default's best
 * case by more than the floor. */
static int reliably_smaller(const run_row_t *best, const run_row_t *dflt) {
  return best_low(dflt) - worst_high(best) > ana_advice_floor(dflt->reserved);
}

static void print_keep_default(FILE *out, const run_row_t *best, const run_row_t *dflt, const char *dname,
                               const char *ind) {
  char b[6][32];
  fprintf(out, "%s  keep the default (%s): no setting is reliably smaller\n", ind, dname);
  fprintf(out, "%s    the default reserves %s (%s..%s with what the replay cannot tell: timing, placement%s)\n", ind,
          gm_format_size((uint64_t)dflt->reserved, b[0], sizeof b[0]), gm_format_size((uint64_t)best_low(dflt), b[1], sizeof b[1]),
          gm_format_size((uint64_t)worst_high(dflt), b[2], sizeof b[2]), dflt->slack ? ", its miss on this run" : "");
  fprintf(out, "%s    the smallest, %s, reserves %s (%s..%s): a saving of at most %s, not more than the floor %s "
               "(the larger of 64 MiB and 1 %%) plus what the replay cannot tell\n", ind, best->policy,
          gm_format_size((uint64_t)best->reserved, b[3], sizeof b[3]), gm_format_size((uint64_t)best_low(best), b[4], sizeof b[4]),
          worst_high(best) == INT64_MAX ? "out of memory" : gm_format_size((uint64_t)worst_high(best), b[5], sizeof b[5]),
          gm_format_size((uint64_t)(dflt->reserved > best->reserved ? dflt->reserved - best->reserved : 0), b[0], sizeof b[0]),
          gm_format_size((uint64_t)ana_advice_floor(dflt->reserved), b[1], sizeof b[1]));
  fprintf(out, "%s  paste: nothing (the default)\n", ind);
}

/* The recorded run failed, but its default replayed within the capacity serves every request:
 * within the limit the run set itself, the replay misses the failure; within an assumed one
 * (the free memory PyTorch recorded, the GPU's total), the run's limit was lower and unknown. */
static void unreproduced(FILE *out, const run_row_t *dflt, const char *dname, int own_limit, const char *ind) {
  char b[32];
  gm_format_size((uint64_t)dflt->capacity, b, sizeof b);
  if (own_limit)
    fprintf(out, "%s  the default (%s) serves every request within %s in replay, the one the run failed included: "
                 "the replay does not reproduce this failure within the limit the run set itself\n", ind, dname, b);
  else
    fprintf(out, "%s  the default (%s) serves every request within %s in replay, the one the run failed included: "
                 "the limit the run had was lower and is unknown (the trace holds no cap of its own); replay within "
                 "it: `gpuanalyze report --capacity=SIZE`\n", ind, dname, b);
}

/* The advice for one device's runs: the best setting of the framework, its line to paste,
 * the saving against the framework's default, the waste, what must fit. Returns the best
 * run (NULL when none is advised). ind indents the lines under a device heading. */
static const run_row_t *advise(FILE *out, ana_fw_t fw, int native, int failed, const run_row_t *rows, int n,
                               int64_t lower_trace, uint64_t gpu_mem, const char *ind, ana_advice_t *adv, int partial) {
  char b1[32], b2[32], b3[32], line[512];
  if (n == 0) return NULL;
  const run_row_t *best = NULL, *dflt = NULL;
  for (int pass = 0; pass < 2 && !best && fw != ANA_FW_MIXED && fw != ANA_FW_RMM && !native; pass++)
    for (int i = 0; i < n; i++) {
      const run_row_t *r = &rows[i];
      if (!ana_fw_advisable(fw, r->policy, r->ooms, r->pool || r->tune_pool, pass)) continue;
      if (pass == 1 && fw != ANA_FW_UNKNOWN) break; /* never another framework's setting */
      if (!best || rank_bytes(r) < rank_bytes(best) ||
          (rank_bytes(r) == rank_bytes(best) && r->calls < best->calls))
        best = r;
    }
  /* gpureplay --tune's choice (the smallest memory within its time budget) is the advice; when
   * the recorded run failed, the smallest change that would have served it is the sweep grid's
   * (one key or two, as `gpuanalyze oom` names it), and the tuner's choice is said beside it. */
  const run_row_t *tuned = NULL;
  for (int i = 0; best && i < n; i++)
    if (strcmp(rows[i].tune_role, "chosen") == 0 && ana_fw_advisable(fw, rows[i].policy, rows[i].ooms, rows[i].pool || rows[i].tune_pool, 0))
      tuned = &rows[i];
  if (tuned && !failed) best = tuned;
  if (tuned && failed) {
    const run_row_t *g = NULL;
    for (int i = 0; i < n; i++) {
      const run_row_t *r = &rows[i];
      if ((r->tune_role[0] && !r->tune_from_grid) || !ana_fw_advisable(fw, r->policy, r->ooms, r->pool || r->tune_pool, 0)) continue;
      if (!g || rank_bytes(r) < rank_bytes(g) || (rank_bytes(r) == rank_bytes(g) && r->calls < g->calls)) g = r;
    }
    if (g) best = g;
  }
  const char *dname = ana_fw_default_policy(fw);
  for (int i = 0; i < n; i++)
    if (strcmp(rows[i].policy, dname) == 0) dflt = &rows[i];
  /* A failure the replay does not reproduce: no change is needed within what it assumed, so it
   * is said, and the advice is as for a run that did not fail (issue 25). */
  if (failed && dflt && dflt->ooms == 0 && dflt->capacity > 0) {
    unreproduced(out, dflt, dname, failed == ANA_FAILED_OWN_LIMIT, ind);
    failed = 0;
    if (tuned) best = tuned;
  }
  /* The replayer's bound is for the device it replayed, like the reserved bytes it is compared
   * with; the trace's own sums every device. */
  int64_t lower = rows[0].lower > 0 ? rows[0].lower : lower_trace;
  /* Everything that must be on the device at once: the requests and the memory of libraries
   * beside the allocator (external), never less than the lower bound. */
  int64_t need = rows[0].need > lower ? rows[0].need : lower;
  /* No advice inside the error: a setting over a default that served the job must be smaller
   * in its worst case by more than the floor (issue 25). */
  const run_row_t *smallest = NULL;
  if (best && dflt && best != dflt && !failed && dflt->ooms == 0 && !reliably_smaller(best, dflt)) {
    smallest = best;
    best = NULL;
  }
  fill_advice(adv, fw, best, dflt, dname, lower, need, gpu_mem, rows[0].device);
  if (smallest) {
    if (adv) snprintf(adv->why_none, sizeof adv->why_none, "%s", "keep the default: no setting is reliably smaller");
    print_keep_default(out, smallest, dflt, dname, ind);
    best = dflt; /* what the job keeps: its waste and needs below */
  }
  if (!best && (fw == ANA_FW_MIXED || fw == ANA_FW_RMM || native)) return NULL;
  if (!best) {
    fprintf(out, "%s  every%s%s setting ran out of memory in replay", ind, fw == ANA_FW_UNKNOWN ? "" : " ",
            fw == ANA_FW_UNKNOWN ? "" : ana_fw_name(fw));
    if (rows[0].capacity) fprintf(out, " within %s", gm_format_size((uint64_t)rows[0].capacity, b2, sizeof b2));
    fprintf(out, "; the job needs at least %s on the device (its live requests and external memory "
                 "together, before any allocator's overhead)\n",
            gm_format_size((uint64_t)need, b1, sizeof b1));
    return NULL;
  }
  if (!smallest) {
    ana_policy_env_line(best->policy, gpu_mem, line, sizeof line);
    fprintf(out, "%s  %s: %s (peak reserved %s)\n", ind, failed ? "the smallest change that would have served it" : "best policy",
            best->policy, gm_format_size((uint64_t)best->reserved, b1, sizeof b1));
    fprintf(out, "%s  paste: %s\n", ind, line);
    if (tuned) tuned_lines(out, fw, tuned, best, rows, n, need, gpu_mem, ind, partial);
    print_range(out, best, rows, n, ind);
  }
  print_pool(out, rows, n, ind);
  if (smallest) {
    /* the default kept: no saving line */
  } else if (dflt && dflt->ooms > 0) {
    fprintf(out, "%s  the default (%s) ran out of memory in replay (%" PRId64 " OOM%s, the first at event %" PRId64 ")\n", ind,
            dname, dflt->ooms, dflt->ooms == 1 ? "" : "s", dflt->first_oom);
  } else if (dflt) {
    int64_t save = dflt->reserved - best->reserved;
    fprintf(out, "%s  saving vs default (%s, %s): %s%s (%.1f%%)\n", ind, dname,
            gm_format_size((uint64_t)dflt->reserved, b1, sizeof b1), save < 0 ? "-" : "",
            gm_format_size((uint64_t)(save < 0 ? -save : save), b2, sizeof b2),
            dflt->reserved ? 100.0 * (double)save / (double)dflt->reserved : 0.0);
  } else {
    fprintf(out, "%s  saving vs default: no `%s` run to compare with\n", ind, dname);
  }
  int64_t waste = best->reserved - lower;
  if (waste < 0) waste = 0;
  fprintf(out, "%s  waste: %s (%.1f%% of reserved) above the lower bound %s\n", ind,
          gm_format_size((uint64_t)waste, b3, sizeof b3),
          best->reserved ? 100.0 * (double)waste / (double)best->reserved : 0.0,
          gm_format_size((uint64_t)lower, b1, sizeof b1));
  if (need > lower)
    fprintf(out, "%s  needs at least: %s on the device (the lower bound and %s of external memory together)\n", ind,
            gm_format_size((uint64_t)need, b1, sizeof b1), gm_format_size((uint64_t)(need - lower), b2, sizeof b2));
  bfc_caveats(out, fw, rows, n);
  return best;
}

static void recommend_one(ana_db_t *db, FILE *out, int64_t trace_id, const char *path,
                          const char *capture_mode, uint64_t gpu_mem, int64_t lower_trace, ana_advice_t *adv) {
  char b1[32];
  run_row_t rows[256];
  int n = 0;
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(db->h,
                         "SELECT policy, peak_reserved_bytes, lower_bound_bytes, device_alloc_calls, ooms,"
                         " first_oom_event, capacity_bytes,"
                         " COALESCE(" ANA_RF_PEAK_REQUESTED_PLUS_EXTERNAL_BYTES("summary_json") ", 0),"
                         " COALESCE(" ANA_RF_DEVICE("summary_json") ", -1),"
                         " COALESCE(" ANA_RF_TUNE_ROLE("summary_json") ", ''),"
                         " COALESCE(" ANA_RF_TUNE_NEEDS_BYTES("summary_json") ", 0),"
                         " COALESCE(" ANA_RF_TUNE_SMALLEST_GPU_GIB("summary_json") ", 0),"
                         " COALESCE(" ANA_RF_TUNE_DRIVER_TIME_P50_S("summary_json") ", 0),"
                         " COALESCE(" ANA_RF_TUNE_DRIVER_TIME_P99_S("summary_json") ", 0),"
                         " COALESCE(" ANA_RF_TUNE_BUDGET_S("summary_json") ", 0),"
                         " COALESCE(" ANA_RF_TUNE_FROM_GRID("summary_json") ", 0),"
                         " COALESCE(" ANA_RF_TIMING_SENSITIVE("summary_json") ", 0),"
                         " COALESCE(" ANA_RF_PEAK_RESERVED_RANGE_LOW_BYTES("summary_json") ", 0),"
                         " COALESCE(" ANA_RF_PEAK_RESERVED_RANGE_HIGH_BYTES("summary_json") ", 0),"
                         " COALESCE(" ANA_RF_PEAK_RESERVED_RANGE_MOVED_BY("summary_json") ", ''), run_id,"
                         " COALESCE(" ANA_RF_TUNE_POOL("summary_json") ", 0),"
                         " COALESCE(" ANA_RF_PLACEMENT_BUMP_BYTES("summary_json") ", 0),"
                         " COALESCE(" ANA_RF_TUNE_WORST_BYTES("summary_json") ", 0),"
                         " COALESCE(" ANA_RF_TUNE_BEST_BYTES("summary_json") ", 0),"
                         " COALESCE(" ANA_RF_TUNE_WORST_OOM("summary_json") ", 0),"
                         " COALESCE(" ANA_RF_TUNE_SEARCHED("summary_json") ", '')"
                         " FROM v_runs WHERE trace_id=? ORDER BY run_id",
                         -1, &st, NULL) != SQLITE_OK)
    return;
  sqlite3_bind_int64(st, 1, trace_id);
  while (n < 256 && sqlite3_step(st) == SQLITE_ROW) {
    /* a results file is input too: its policy names are escaped for the terminal */
    gm_escape((const char *)sqlite3_column_text(st, 0), rows[n].policy, sizeof rows[n].policy);
    rows[n].reserved = sqlite3_column_int64(st, 1);
    rows[n].lower = sqlite3_column_int64(st, 2);
    rows[n].calls = sqlite3_column_int64(st, 3);
    rows[n].ooms = sqlite3_column_int64(st, 4);
    rows[n].first_oom = sqlite3_column_int64(st, 5);
    rows[n].capacity = sqlite3_column_int64(st, 6);
    rows[n].need = sqlite3_column_int64(st, 7);
    rows[n].device = sqlite3_column_int64(st, 8);
    snprintf(rows[n].tune_role, sizeof rows[n].tune_role, "%s", (const char *)sqlite3_column_text(st, 9));
    rows[n].tune_needs = sqlite3_column_int64(st, 10);
    rows[n].tune_gpu = sqlite3_column_int64(st, 11);
    rows[n].tune_p50 = sqlite3_column_double(st, 12);
    rows[n].tune_p99 = sqlite3_column_double(st, 13);
    rows[n].tune_budget = sqlite3_column_double(st, 14);
    rows[n].tune_from_grid = sqlite3_column_int64(st, 15);
    rows[n].range = sqlite3_column_int64(st, 16) != 0;
    rows[n].low = rows[n].range ? sqlite3_column_int64(st, 17) : rows[n].reserved;
    rows[n].high = rows[n].range ? sqlite3_column_int64(st, 18) : rows[n].reserved;
    const unsigned char *mb = sqlite3_column_text(st, 19);
    rows[n].pool = rows[n].range && mb && strcmp((const char *)mb, "async_pool") == 0;
    rows[n].run_id = sqlite3_column_int64(st, 20);
    rows[n].tune_pool = sqlite3_column_int64(st, 21) != 0;
    rows[n].bump = sqlite3_column_int64(st, 22);
    rows[n].tune_worst = sqlite3_column_int64(st, 23);
    rows[n].tune_best = sqlite3_column_int64(st, 24);
    rows[n].slack = 0;
    if (sqlite3_column_int64(st, 25)) rows[n].tune_worst = INT64_MAX; /* no worst case: never reliably smaller */
    gm_escape((const char *)sqlite3_column_text(st, 26), rows[n].tune_searched, sizeof rows[n].tune_searched);
    n++;
  }
  sqlite3_finalize(st);
  char epath[1024];
  path = gm_escape(path, epath, sizeof epath);
  fprintf(out, "%s:\n", path);
  if (adv) adv->runs = n;
  int failed = ana_rec_recorded_failure(db, out, trace_id); /* the headline */
  int partial = ana_coverage_print(db, out, trace_id, "  "); /* then: the figures are of part of the run */
  ana_rec_warn_integrity(db, out, trace_id);
  ana_rec_warn_kv(db, out, trace_id);
  ana_rec_warn_assumed(db, out, trace_id);
  if (n == 0) {
    fprintf(out, "  no replay runs loaded for this trace (run `gpureplay %s --sweep -o R.json` and load R.json)\n", path);
    fprintf(out, "  peak live: %s (requested bytes live at once)\n",
            gm_format_size((uint64_t)lower_trace, b1, sizeof b1));
    return;
  }
  ana_fw_t fw = ana_fw_detect(db, trace_id, capture_mode);
  if (adv) snprintf(adv->framework, sizeof adv->framework, "%s", ana_fw_name(fw));
  ana_rec_print_frameworks(db, out, trace_id, ana_fw_name(fw), fw == ANA_FW_RMM, fw == ANA_FW_PYTORCH);
  char rcheck[1024], erc[1024];
  if (ana_trace_kv(db, trace_id, "predicted.runs_check", rcheck, sizeof rcheck) && rcheck[0]) /* gpurec predict's */
    fprintf(out, "  the recordings it was predicted from: %s\n", gm_escape(rcheck, erc, sizeof erc));
  /* A native recording of a framework holds its allocator's segments or pool blocks: a
   * replay of those through another setting predicts nothing. */
  int native = capture_mode && !strcmp(capture_mode, "native") && fw != ANA_FW_UNKNOWN;
  /* An RMM log (recorder/rmm): RMM's settings are its memory resources, whose pools are not
   * modelled; the table shows the driver's allocator and pool (direct, async) instead. */
  if (fw == ANA_FW_RMM) {
    fprintf(out, "  no setting advised: RMM's pool resources (pool, arena, binning) are not modelled; "
                 "`direct` replays cuda_memory_resource and `async` cuda_async_memory_resource\n");
    if (adv) snprintf(adv->why_none, sizeof adv->why_none, "%s", "RMM's pool resources are not modelled");
  }
  if (ana_rec_no_requests(db, out, trace_id, adv)) return;
  if (fw == ANA_FW_MIXED || native) {
    fprintf(out, "  no setting advised: %s\n",
            fw == ANA_FW_MIXED ? "the requests of several frameworks are in one trace and the replay treats "
                             "them as one allocator's (record each framework's job alone)"
                           : "a native recording holds what the framework's allocator took from the "
                             "driver, not the program's requests (record in gpurec's default mode)");
    if (adv)
      snprintf(adv->why_none, sizeof adv->why_none, "%s",
               fw == ANA_FW_MIXED ? "several frameworks' requests in one trace" : "a native recording holds no requests");
  }
  /* Each device its own advice (a process's devices have an allocator each); then the job's. */
  int64_t devs[16];
  int nd = 0;
  for (int i = 0; i < n; i++) {
    int k = 0;
    while (k < nd && devs[k] != rows[i].device) k++;
    if (k == nd && nd < 16) devs[nd++] = rows[i].device;
  }
  const run_row_t *limiting = NULL;
  ana_advice_t keep_adv;
  for (int k = 0; k < nd; k++) {
    run_row_t *sub = malloc(sizeof *sub * (size_t)n);
    if (!sub) return;
    int m = 0;
    for (int i = 0; i < n; i++)
      if (rows[i].device == devs[k]) sub[m++] = rows[i];
    if (nd > 1) fprintf(out, "  device %" PRId64 ":\n", devs[k]);
    ana_run_check_t chk;
    memset(&chk, 0, sizeof chk);
    if (!native && ana_run_check(db, trace_id, fw, devs[k], &chk)) {
      ana_run_check_print(out, &chk, nd > 1 ? "  " : "");
      for (int i = 0; i < m; i++) sub[i].slack = chk.off;
    }
    ana_advice_t dev_adv;
    if (adv) {
      dev_adv = *adv;
      dev_adv.check = chk.state;
      dev_adv.check_off = chk.off;
      dev_adv.check_replay = chk.replay;
      dev_adv.check_recorded = chk.recorded;
      snprintf(dev_adv.check_policy, sizeof dev_adv.check_policy, "%s", chk.policy);
    }
    const run_row_t *b = advise(out, fw, native, failed, sub, m, lower_trace, gpu_mem, nd > 1 ? "  " : "",
                                adv ? &dev_adv : NULL, partial);
    /* The job's advice is its limiting device's (or the first device's when none is advised). */
    if (adv && (k == 0 || (b && (!limiting || b->reserved > limiting->reserved)))) keep_adv = dev_adv;
    if (b && (!limiting || b->reserved > limiting->reserved)) {
      static run_row_t keep;
      keep = *b;
      limiting = &keep;
    }
    free(sub);
  }
  if (adv && nd > 0) *adv = keep_adv;
  if (nd > 1 && limiting)
    fprintf(out, "  the job: device %" PRId64 " limits it (peak reserved %s under its best setting)\n",
            limiting->device, gm_format_size((uint64_t)limiting->reserved, b1, sizeof b1));
}

gm_status_t ana_recommend(ana_db_t *db, FILE *out, gm_err_t *err) {
  sqlite3_stmt *st = NULL;
  gm_status_t s = ana_prepare(db, &st,
                              "SELECT trace_id, path, capture_mode, gpu_total_mem, peak_live_bytes"
                              " FROM traces ORDER BY rank, trace_id",
                              err);
  if (s < 0) return gm_err_wrap(err, "recommend");
  int any = 0;
  while (sqlite3_step(st) == SQLITE_ROW) {
    any = 1;
    recommend_one(db, out, sqlite3_column_int64(st, 0), (const char *)sqlite3_column_text(st, 1),
                  (const char *)sqlite3_column_text(st, 2), (uint64_t)sqlite3_column_int64(st, 3),
                  sqlite3_column_int64(st, 4), NULL);
  }
  sqlite3_finalize(st);
  if (!any) fprintf(out, "no traces in the database: load some with `gpuanalyze load TRACE.zst R.json`\n");
  /* Runs whose trace is not loaded cannot be compared to its lower bound: name them. */
  if (sqlite3_prepare_v2(db->h,
                         "SELECT COALESCE(trace_path, '?'), COUNT(*) FROM v_runs WHERE trace_id IS NULL"
                         " GROUP BY trace_path ORDER BY trace_path",
                         -1, &st, NULL) == SQLITE_OK) {
    while (sqlite3_step(st) == SQLITE_ROW) {
      char e[1024];
      gm_escape((const char *)sqlite3_column_text(st, 0), e, sizeof e);
      fprintf(out, "%s: %lld replay runs, but the trace is not loaded: `gpuanalyze load %s`\n", e,
              (long long)sqlite3_column_int64(st, 1), e);
    }
    sqlite3_finalize(st);
  }
  return GM_OK;
}

gm_status_t ana_advise(ana_db_t *db, int64_t trace_id, FILE *out, ana_advice_t *a, gm_err_t *err) {
  memset(a, 0, sizeof *a);
  a->best_run_id = a->default_run_id = a->device = -1;
  sqlite3_stmt *st = NULL;
  gm_status_t s = ana_prepare(db, &st,
                              "SELECT path, capture_mode, gpu_total_mem, peak_live_bytes FROM traces WHERE trace_id=?",
                              err);
  if (s < 0) return gm_err_wrap(err, "recommend");
  sqlite3_bind_int64(st, 1, trace_id);
  if (sqlite3_step(st) == SQLITE_ROW) {
    a->lower = a->need = sqlite3_column_int64(st, 3);
    FILE *sink = out ? out : fopen("/dev/null", "w");
    if (sink) {
      recommend_one(db, sink, trace_id, (const char *)sqlite3_column_text(st, 0),
                    (const char *)sqlite3_column_text(st, 1), (uint64_t)sqlite3_column_int64(st, 2),
                    sqlite3_column_int64(st, 3), a);
      if (!out) fclose(sink);
    }
  }
  sqlite3_finalize(st);
  return GM_OK;
}
