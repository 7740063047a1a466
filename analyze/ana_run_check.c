/* ana_run_check.c: the replay checked against the run it replays.
 *
 * A trace of PyTorch's own history (capture modes torch and torch-history: gpurec's default)
 * holds the allocator's segments as the run made them: cudaMalloc'd segments, and the maps of
 * expandable segments. Their peak on the device replayed (gpureplay's results key
 * recorded_mapped_peak_bytes) is the run's own torch.cuda.max_memory_reserved(). Replayed under
 * the setting the job ran with, the simulation must give that figure, or its timing range must
 * hold it. Where it does not (the driver placed the run's segments otherwise than va_model.c
 * places them, and PyTorch's best fit broke a tie the other way: traces/predicted's resnet at
 * 16, 8 MiB short), every figure of the trace may be off as much: the report says so before
 * its advice, and the advice asks a saving past that miss (ana_recommend.c). Where it does,
 * the report says that too: it is the strongest evidence a report can give, the run itself.
 *
 * Not checked: other captures (their segments are not one allocator's, or absent), a trace that
 * covers part of the run, a run that failed a request (the replay serves it within the capacity),
 * a predicted trace, a run replayed with OOMs, a job whose setting the trace does not say. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "analyze/ana_report_internal.h"
#include "analyze/ana_run_fields.h"

/* A range ranks by its high end: what the job may reserve on an unlucky run. */
int64_t ana_run_rank_bytes(int64_t reserved, int range, int64_t high) { return range && high > reserved ? high : reserved; }

void ana_run_ends(int64_t reserved, int range, int64_t low, int64_t high, int64_t bump, int64_t *lo, int64_t *hi) {
  *hi = ana_run_rank_bytes(reserved, range, high);
  if (bump > *hi) *hi = bump;
  *lo = range && low < reserved ? low : reserved;
  if (bump && bump < *lo) *lo = bump;
}

static int64_t run_of(ana_db_t *db, int64_t trace_id, const char *policy, int64_t device) {
  sqlite3_stmt *st = NULL;
  int64_t id = -1;
  if (sqlite3_prepare_v2(db->h,
                         "SELECT run_id FROM v_runs WHERE trace_id=? AND policy=?"
                         " AND (?3 < 0 OR COALESCE(" ANA_RF_DEVICE("summary_json") ", -1) = ?3)"
                         " ORDER BY run_id LIMIT 1",
                         -1, &st, NULL) != SQLITE_OK)
    return -1;
  sqlite3_bind_int64(st, 1, trace_id);
  sqlite3_bind_text(st, 2, policy, -1, SQLITE_TRANSIENT);
  sqlite3_bind_int64(st, 3, device);
  if (sqlite3_step(st) == SQLITE_ROW) id = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  return id;
}

int64_t ana_own_run(ana_db_t *db, int64_t trace_id, ana_fw_t fw, int64_t device, char *label, size_t n, int *as_run) {
  char conf[512] = "", mode[64], pol[600];
  const char *dname = ana_fw_default_policy(fw);
  *as_run = 0;
  const char *c = ana_trace_kv(db, trace_id, "torch.alloc_conf", conf, sizeof conf);
  ana_trace_capture_mode(db, trace_id, mode, sizeof mode);
  /* `requests` mode switched the frameworks to cudaMallocAsync: its environment is gpurec's. */
  if ((!c || !*c) && strcmp(mode, "requests") != 0) {
    c = ana_trace_kv(db, trace_id, "PYTORCH_CUDA_ALLOC_CONF", conf, sizeof conf);
    if (!c || !*c) c = ana_trace_kv(db, trace_id, "PYTORCH_ALLOC_CONF", conf, sizeof conf);
  }
  int64_t dflt = run_of(db, trace_id, dname, device);
  if (c && *c && fw == ANA_FW_PYTORCH) {
    if (strstr(c, "backend:cudaMallocAsync")) snprintf(pol, sizeof pol, "async");
    else snprintf(pol, sizeof pol, "pytorch:%s", c);
    int64_t id = run_of(db, trace_id, pol, device);
    if (id >= 0) {
      snprintf(label, n, "as the job ran (PYTORCH_CUDA_ALLOC_CONF=%s)", c);
      *as_run = 1;
      return id;
    }
    snprintf(label, n, "the default (%s): the job's own setting (%s) was not replayed", dname, c);
    return dflt;
  }
  if (fw == ANA_FW_UNKNOWN || fw == ANA_FW_MIXED) {
    snprintf(label, n, "under the default (%s): the trace does not record the job's own setting", dname);
    return dflt;
  }
  snprintf(label, n, "as the job ran: %s's default (%s)", ana_fw_name(fw), dname);
  *as_run = dflt >= 0;
  return dflt;
}

int ana_run_check(ana_db_t *db, int64_t trace_id, ana_fw_t fw, int64_t device, ana_run_check_t *k) {
  memset(k, 0, sizeof *k);
  char mode[64], label[768];
  sqlite3_stmt *st = NULL;
  ana_trace_capture_mode(db, trace_id, mode, sizeof mode);
  if (fw != ANA_FW_PYTORCH || (strcmp(mode, "torch") != 0 && strcmp(mode, "torch-history") != 0)) return 0;
  gmt_coverage_t cov;
  if (ana_trace_coverage(db, trace_id, &cov)) return 0; /* a window of the run: its peak may lie outside */
  /* a run that failed a request: the replay serves it within the capacity, the run did not */
  if (sqlite3_prepare_v2(db->h, "SELECT COALESCE(SUM(count), 0) FROM trace_kinds WHERE trace_id=? AND kind='alloc_failed'",
                         -1, &st, NULL) != SQLITE_OK)
    return 0;
  sqlite3_bind_int64(st, 1, trace_id);
  int64_t failures = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 1;
  sqlite3_finalize(st);
  if (failures) return 0;
  int as_run = 0;
  int64_t id = ana_own_run(db, trace_id, fw, device, label, sizeof label, &as_run);
  if (id < 0 || !as_run) return 0;
  if (sqlite3_prepare_v2(db->h,
                         "SELECT policy, peak_reserved_bytes, ooms,"
                         " COALESCE(" ANA_RF_PEAK_RESERVED_RANGE_LOW_BYTES("summary_json") ", peak_reserved_bytes),"
                         " COALESCE(" ANA_RF_PEAK_RESERVED_RANGE_HIGH_BYTES("summary_json") ", peak_reserved_bytes),"
                         " COALESCE(" ANA_RF_RECORDED_MAPPED_PEAK_BYTES("summary_json") ", 0),"
                         " " ANA_RF_PREDICTED("summary_json") " IS NOT NULL,"
                         " COALESCE(" ANA_RF_PARTIAL("summary_json") ", 0),"
                         " COALESCE(" ANA_RF_PLACEMENT_BUMP_BYTES("summary_json") ", 0)"
                         " FROM v_runs WHERE run_id=?",
                         -1, &st, NULL) != SQLITE_OK)
    return 0;
  sqlite3_bind_int64(st, 1, id);
  int ok = 0;
  if (sqlite3_step(st) == SQLITE_ROW) {
    gm_escape((const char *)sqlite3_column_text(st, 0), k->policy, sizeof k->policy);
    k->replay = sqlite3_column_int64(st, 1);
    int64_t ooms = sqlite3_column_int64(st, 2);
    k->recorded = sqlite3_column_int64(st, 5);
    ok = ooms == 0 && k->recorded > 0 && !sqlite3_column_int(st, 6) && !sqlite3_column_int(st, 7);
    /* any range the results give and the placement spread: what the replay cannot tell */
    ana_run_ends(k->replay, 1, sqlite3_column_int64(st, 3), sqlite3_column_int64(st, 4), sqlite3_column_int64(st, 8),
                 &k->low, &k->high);
  }
  sqlite3_finalize(st);
  if (!ok) return 0;
  if (k->recorded < k->low) k->off = k->low - k->recorded;
  else if (k->recorded > k->high) k->off = k->recorded - k->high;
  k->state = k->off ? ANA_CHECK_OFF : ANA_CHECK_EXACT;
  return k->state;
}

void ana_run_check_print(FILE *out, const ana_run_check_t *k, const char *ind) {
  char b1[32], b2[32], b3[32];
  if (k->state == ANA_CHECK_EXACT && k->recorded == k->replay)
    fprintf(out, "%s  checked against the run: replayed under the setting it ran with (%s), it reserves %s, "
                 "exactly what the run reserved (the allocator's own segments, in the trace)\n",
            ind, k->policy, gm_format_size((uint64_t)k->recorded, b1, sizeof b1));
  else if (k->state == ANA_CHECK_EXACT)
    fprintf(out, "%s  checked against the run: the run reserved %s (the allocator's own segments, in the trace), "
                 "inside the replay's range %s..%s under the setting it ran with (%s: timing, placement)\n",
            ind, gm_format_size((uint64_t)k->recorded, b1, sizeof b1), gm_format_size((uint64_t)k->low, b2, sizeof b2),
            gm_format_size((uint64_t)k->high, b3, sizeof b3), k->policy);
  else if (k->state == ANA_CHECK_OFF)
    fprintf(out, "%s  warning: the replay misses this run by %s (%.2f %%): replayed under the setting it ran with "
                 "(%s), it reserves %s; the run reserved %s (the allocator's own segments, in the trace). Every "
                 "figure below may be off by as much: the advice asks a saving past it\n",
            ind, gm_format_size((uint64_t)k->off, b1, sizeof b1), 100.0 * (double)k->off / (double)k->recorded,
            k->policy, gm_format_size((uint64_t)k->replay, b2, sizeof b2),
            gm_format_size((uint64_t)k->recorded, b3, sizeof b3));
}
