/* ana_recommend_notes.c: what `gpuanalyze recommend` says of a trace before its advice (the
 * advice itself: ana_recommend.c): the recorded run's failure, a damaged or truncated trace,
 * settings in its environment that do not do what their author meant, a GPU memory the replays
 * assumed, the frameworks it ran, a trace with nothing to replay. Each reads the database and
 * prints lines; none chooses a setting. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/ana_db_internal.h"
#include "analyze/ana_run_fields.h"

const char *ana_trace_kv(ana_db_t *db, int64_t trace_id, const char *key, char *buf, size_t n) {
  sqlite3_stmt *st = NULL;
  const char *v = NULL;
  if (sqlite3_prepare_v2(db->h, "SELECT value FROM trace_kv WHERE trace_id=? AND key=?", -1, &st, NULL) != SQLITE_OK)
    return NULL;
  sqlite3_bind_int64(st, 1, trace_id);
  sqlite3_bind_text(st, 2, key, -1, SQLITE_STATIC);
  if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0)) {
    snprintf(buf, n, "%s", (const char *)sqlite3_column_text(st, 0));
    v = buf;
  }
  sqlite3_finalize(st);
  return v;
}

/* A header value printed on the terminal: escaped. */
static const char *kv_get(ana_db_t *db, int64_t trace_id, const char *key, char *buf, size_t n) {
  char raw[1024];
  if (!ana_trace_kv(db, trace_id, key, raw, sizeof raw)) return NULL;
  gm_escape(raw, buf, n);
  return buf;
}

void ana_rec_warn_kv(ana_db_t *db, FILE *out, int64_t trace_id) {
  char a[256], b[256];
  /* JAX: the platform allocator takes memory per request; the arena settings then do nothing. */
  const char *alloc = kv_get(db, trace_id, "XLA_PYTHON_CLIENT_ALLOCATOR", a, sizeof a);
  if (alloc && strcmp(alloc, "platform") == 0) {
    if (kv_get(db, trace_id, "XLA_PYTHON_CLIENT_MEM_FRACTION", b, sizeof b))
      fprintf(out, "  warning: XLA_PYTHON_CLIENT_MEM_FRACTION=%s is ignored with XLA_PYTHON_CLIENT_ALLOCATOR=platform\n", b);
    if (kv_get(db, trace_id, "XLA_PYTHON_CLIENT_PREALLOCATE", b, sizeof b))
      fprintf(out, "  warning: XLA_PYTHON_CLIENT_PREALLOCATE=%s is ignored with XLA_PYTHON_CLIENT_ALLOCATOR=platform\n", b);
  }
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(db->h,
                         "SELECT key, value FROM trace_kv WHERE trace_id=? AND key IN "
                         "('PYTORCH_CUDA_ALLOC_CONF','PYTORCH_ALLOC_CONF','allocator_settings','torch.alloc_conf')",
                         -1, &st, NULL) != SQLITE_OK)
    return;
  sqlite3_bind_int64(st, 1, trace_id);
  while (sqlite3_step(st) == SQLITE_ROW) {
    char msgs[8][256], e[1024];
    const char *key = (const char *)sqlite3_column_text(st, 0);
    int n = ana_conf_warnings((const char *)sqlite3_column_text(st, 1), msgs, 8);
    for (int i = 0; i < n && i < 8; i++) fprintf(out, "  warning: %s: %s\n", key, gm_escape(msgs[i], e, sizeof e));
  }
  sqlite3_finalize(st);
}

/* A damaged trace undercounts: say so next to the numbers drawn from it. */
void ana_rec_warn_integrity(ana_db_t *db, FILE *out, int64_t trace_id) {
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(db->h,
                         "SELECT truncated, seq_gaps, dropped, unknown_free, damaged_chunks, lost_events,"
                         " uncounted_chunks, index_damaged FROM traces WHERE trace_id=?",
                         -1, &st, NULL) != SQLITE_OK)
    return;
  sqlite3_bind_int64(st, 1, trace_id);
  if (sqlite3_step(st) == SQLITE_ROW) {
    gmt_reader_stats_t rs = {0};
    rs.damaged_chunks = (uint64_t)sqlite3_column_int64(st, 4);
    rs.lost_events = (uint64_t)sqlite3_column_int64(st, 5);
    rs.uncounted_chunks = (uint64_t)sqlite3_column_int64(st, 6);
    rs.index_damaged = sqlite3_column_int(st, 7);
    char what[256];
    if (gmt_stats_partial(&rs))
      fprintf(out, "  warning: PARTIAL: the trace is damaged (%s): the figures cover the events that could be read\n",
              gmt_stats_damage_text(&rs, what, sizeof what));
    else if (rs.index_damaged)
      fprintf(out, "  note: the trace's index is damaged; every chunk was found by scanning, no event lost\n");
    if (sqlite3_column_int64(st, 0))
      fprintf(out, "  warning: the trace is truncated (its process died?): the figures cover what was recorded\n");
    if (sqlite3_column_int64(st, 1))
      fprintf(out, "  warning: %lld chunks are missing (sequence gaps): the figures may be low\n",
              (long long)sqlite3_column_int64(st, 1));
    if (sqlite3_column_int64(st, 2))
      fprintf(out, "  warning: the recorder lost %lld records (CUPTI drops): the figures may be off\n",
              (long long)sqlite3_column_int64(st, 2));
    if (sqlite3_column_int64(st, 3))
      fprintf(out, "  note: %lld frees of addresses never allocated in the trace (allocated before recording began?)\n",
              (long long)sqlite3_column_int64(st, 3));
  }
  sqlite3_finalize(st);
  st = NULL;
  char ooo[320]; /* gpuanalyze load notes a trace whose times go back (ana_out_of_order_text) */
  if (ana_trace_kv(db, trace_id, "gpuanalyze.out_of_order", ooo, sizeof ooo)) fprintf(out, "  warning: %s\n", ooo);
  sqlite3_finalize(st);
}

/* A trace without one allocation (none recorded, or frees only): nothing to advise, and say so
 * instead of a "best policy" of 0 bytes. Returns 1 if so. */
int ana_rec_no_requests(ana_db_t *db, FILE *out, int64_t trace_id, ana_advice_t *adv) {
  sqlite3_stmt *st = NULL;
  int none = 0;
  if (sqlite3_prepare_v2(db->h,
                         "SELECT t.events, (SELECT count FROM trace_kinds WHERE trace_id=?1 AND kind='free'),"
                         " EXISTS(SELECT 1 FROM trace_kinds WHERE trace_id=?1 AND kind IN ('alloc','alloc_failed')"
                         " AND count>0) FROM traces t WHERE t.trace_id=?1",
                         -1, &st, NULL) != SQLITE_OK)
    return 0;
  sqlite3_bind_int64(st, 1, trace_id);
  if (sqlite3_step(st) == SQLITE_ROW && !sqlite3_column_int(st, 2)) {
    none = 1;
    fprintf(out, "  no setting advised: the trace holds no allocation (%lld events%s): nothing to replay, every figure is 0\n",
            (long long)sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 1) ? ", frees only" : "");
    fprintf(out, "  fits: any GPU; the job needs no device memory (the trace allocates none)\n");
    if (adv) snprintf(adv->why_none, sizeof adv->why_none, "%s", "the trace holds no allocation");
  }
  sqlite3_finalize(st);
  return none;
}

/* The recorded run's failure, from the replays' results (gpureplay describes it in each run):
 * the headline of the recommendation, as it is why the user is here. Returns 1 if there was one. */
int ana_rec_recorded_failure(ana_db_t *db, FILE *out, int64_t trace_id) {
  sqlite3_stmt *st = NULL;
  int any = 0;
  if (sqlite3_prepare_v2(db->h,
                         "SELECT " ANA_RF_RECORDED_FAILURES_COUNT("summary_json") ","
                         " " ANA_RF_RECORDED_FAILURES_FIRST_SIZE("summary_json") ","
                         " " ANA_RF_RECORDED_FAILURES_FIRST_STREAM("summary_json") ","
                         " " ANA_RF_RECORDED_FAILURES_FIRST_TS_NS("summary_json") ","
                         " " ANA_RF_RECORDED_FAILURES_FIRST_CALLSITE("summary_json") ","
                         " " ANA_RF_RECORDED_FAILURES_LIVE_BYTES("summary_json") ","
                         " " ANA_RF_RECORDED_FAILURES_RECORDED_RESERVED_BYTES("summary_json") ","
                         " " ANA_RF_RECORDED_FAILURES_DEVICE_FREE_BYTES("summary_json") ","
                         " " ANA_RF_RECORDED_FAILURES_CAPACITY_NOTE("summary_json") ", capacity_bytes"
                         " FROM v_runs WHERE trace_id=? AND " ANA_RF_RECORDED_FAILURES_COUNT("summary_json") " > 0"
                         " ORDER BY run_id LIMIT 1",
                         -1, &st, NULL) != SQLITE_OK)
    return 0;
  sqlite3_bind_int64(st, 1, trace_id);
  if (sqlite3_step(st) == SQLITE_ROW) {
    char b1[32], b2[32];
    any = 1;
    int64_t n = sqlite3_column_int64(st, 0);
    fprintf(out, "  OUT OF MEMORY: the recorded run failed %" PRId64 " request%s; the first: %s", n, n == 1 ? "" : "s",
            gm_format_size((uint64_t)sqlite3_column_int64(st, 1), b1, sizeof b1));
    if (sqlite3_column_type(st, 2) != SQLITE_NULL) fprintf(out, " on stream %lld", (long long)sqlite3_column_int64(st, 2));
    double t = (double)sqlite3_column_int64(st, 3);
    if (t >= 1e9) fprintf(out, " at t=%.3f s", t / 1e9);
    else fprintf(out, " at t=%.3f ms", t / 1e6);
    const char *cs = (const char *)sqlite3_column_text(st, 4);
    if (cs && *cs) fprintf(out, " (%s)", cs);
    fprintf(out, "\n    live then %s", gm_format_size((uint64_t)sqlite3_column_int64(st, 5), b1, sizeof b1));
    if (sqlite3_column_int64(st, 6))
      fprintf(out, ", reserved %s", gm_format_size((uint64_t)sqlite3_column_int64(st, 6), b1, sizeof b1));
    if (sqlite3_column_int64(st, 7))
      fprintf(out, ", free on the device %s", gm_format_size((uint64_t)sqlite3_column_int64(st, 7), b2, sizeof b2));
    fprintf(out, "\n");
    const char *note = (const char *)sqlite3_column_text(st, 8);
    if (note && !strncmp(note, "the limit the recorded run set itself", 37)) any = ANA_FAILED_OWN_LIMIT;
    if (sqlite3_column_int64(st, 9) && note && *note)
      fprintf(out, "    replayed within %s (%s)\n", gm_format_size((uint64_t)sqlite3_column_int64(st, 9), b1, sizeof b1), note);
    else if (!sqlite3_column_int64(st, 9))
      fprintf(out, "    the GPU's memory is unknown, so no replay could fail: `gpureplay TRACE --sweep --capacity=SIZE`\n");
  }
  sqlite3_finalize(st);
  return any;
}

/* What the replays assumed: a trace that does not say its GPU's memory. */
void ana_rec_warn_assumed(ana_db_t *db, FILE *out, int64_t trace_id) {
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(db->h,
                         "SELECT " ANA_RF_DEVICE_MEMORY_BYTES("summary_json") " FROM v_runs WHERE trace_id=?"
                         " AND " ANA_RF_DEVICE_MEMORY_ASSUMED("summary_json") " = 1 LIMIT 1",
                         -1, &st, NULL) != SQLITE_OK)
    return;
  sqlite3_bind_int64(st, 1, trace_id);
  if (sqlite3_step(st) == SQLITE_ROW) {
    char b1[32];
    fprintf(out, "  note: the trace does not say its GPU's memory; the replays assumed %s (prealloc, bfc and "
                 "fractions depend on it): `gpurec import --gpu-memory=SIZE` or `gpureplay --device-memory=SIZE`\n",
            gm_format_size((uint64_t)sqlite3_column_int64(st, 0), b1, sizeof b1));
  }
  sqlite3_finalize(st);
}

/* "framework: JAX 0.11.2" from the trace's framework.<name> keys. */
void ana_rec_print_frameworks(ana_db_t *db, FILE *out, int64_t trace_id, const char *fw_display, int fw_rmm,
                              int fw_pytorch) {
  sqlite3_stmt *st = NULL;
  char list[256] = "";
  size_t used = 0;
  if (sqlite3_prepare_v2(db->h, "SELECT key, value FROM trace_kv WHERE trace_id=? AND key LIKE 'framework.%' ORDER BY key",
                         -1, &st, NULL) == SQLITE_OK) {
    sqlite3_bind_int64(st, 1, trace_id);
    while (sqlite3_step(st) == SQLITE_ROW && used < sizeof list) {
      const char *k = (const char *)sqlite3_column_text(st, 0), *v = (const char *)sqlite3_column_text(st, 1);
      const char *name = k ? k + 10 : "?";
      for (unsigned bit = 1; bit <= GMT_FW_ALL; bit <<= 1)
        if (gmt_framework_key(bit) && !strcmp(gmt_framework_key(bit), name)) name = gmt_framework_display(bit);
      int w = snprintf(list + used, sizeof list - used, "%s%s %s", used ? ", " : "", name, v ? v : "");
      if (w < 0) break;
      used += (size_t)w;
    }
    sqlite3_finalize(st);
  }
  if (used && fw_rmm) fprintf(out, "  framework: %s (an imported allocation log)\n", list);
  else if (used) fprintf(out, "  framework: %s (advice in %s's words)\n", list, fw_display);
  else if (fw_pytorch) fprintf(out, "  framework: PyTorch (a PyTorch memory history)\n");
  else
    fprintf(out, "  framework: not recorded (an older recording or another tool's): the advice is in "
                 "PyTorch's words; record with this gpurec to have the job's own\n");
}
