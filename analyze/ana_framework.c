/* ana_framework.c: which framework a trace's job ran, in whose words the advice is, and which
 * settings may be the advice (ana_recommend.c's choice, and the job-wide choice over many
 * traces of ana_ranks.c): a setting of the framework's own family that did not run out of
 * memory, never `direct` or JAX's platform allocator (a driver call per buffer: the floor),
 * never the driver's pool simulated (a wide range: shown, not advised). */
#include <stdlib.h>
#include <string.h>

#include "analyze/ana_db_internal.h"

const char *ana_fw_name(ana_fw_t fw) {
  static const char *const names[] = {"unknown", "PyTorch", "TensorFlow", "JAX", "CuPy", "several frameworks", "RAPIDS RMM"};
  return names[fw];
}

/* Which framework's words the advice is in: the trace's framework.<name> keys (gpurec writes
 * one per framework the process loaded); a torch-mode recording or an imported snapshot is
 * PyTorch's; anything else is unknown and said so (an older recording). */
ana_fw_t ana_fw_detect(ana_db_t *db, int64_t trace_id, const char *capture_mode) {
  sqlite3_stmt *st = NULL;
  int n = 0;
  ana_fw_t fw = ANA_FW_UNKNOWN;
  if (sqlite3_prepare_v2(db->h, "SELECT key FROM trace_kv WHERE trace_id=? AND key LIKE 'framework.%'",
                         -1, &st, NULL) == SQLITE_OK) {
    sqlite3_bind_int64(st, 1, trace_id);
    while (sqlite3_step(st) == SQLITE_ROW) {
      const char *k = (const char *)sqlite3_column_text(st, 0);
      if (!k) continue;
      n++;
      if (!strcmp(k, "framework.pytorch")) fw = ANA_FW_PYTORCH;
      else if (!strcmp(k, "framework.jax")) fw = ANA_FW_JAX;
      else if (!strcmp(k, "framework.tensorflow")) fw = ANA_FW_TF;
      else if (!strcmp(k, "framework.cupy")) fw = ANA_FW_CUPY;
      else if (!strcmp(k, "framework.rmm")) fw = ANA_FW_RMM;
    }
    sqlite3_finalize(st);
  }
  if (n > 1) return ANA_FW_MIXED;
  if (n == 0 && capture_mode && (!strcmp(capture_mode, "torch") || !strcmp(capture_mode, "torch-history")))
    return ANA_FW_PYTORCH;
  return fw;
}

int ana_fw_in_family(ana_fw_t fw, const char *policy) {
  switch (fw) {
    case ANA_FW_TF: return strncmp(policy, "tf", 2) == 0 || strncmp(policy, "bfc", 3) == 0;
    case ANA_FW_JAX: return strncmp(policy, "jax", 3) == 0;
    case ANA_FW_CUPY: return strncmp(policy, "cupy", 4) == 0;
    default: return strncmp(policy, "pytorch", 7) == 0 || strncmp(policy, "async", 5) == 0;
  }
}

/* May a run be the advice (pass 0: the framework's own family; pass 1: the fallback when the
 * framework is unknown)? The one filter `recommend` and the job-wide choice (ana_ranks.c) use. */
int ana_fw_advisable(ana_fw_t fw, const char *policy, int64_t ooms, int pool, int pass) {
  /* A setting that ran out of memory is never the advice, whatever it reserved. */
  if (ooms > 0 || strcmp(policy, "direct") == 0) return 0;
  /* JAX's platform allocator is the same floor, a driver call per buffer: not advice. */
  if (strstr(policy, "ALLOCATOR=platform")) return 0;
  /* The driver's pool simulated is a wide range from a model checked on four runs:
   * shown (print_pool), not advised; a real GPU measures it. */
  if (pool) return 0;
  if (pass == 0) return ana_fw_in_family(fw, policy);
  return fw == ANA_FW_UNKNOWN;
}

/* The setting the job runs with when the user sets nothing. */
const char *ana_fw_default_policy(ana_fw_t fw) {
  switch (fw) {
    case ANA_FW_TF: return "tf";
    case ANA_FW_JAX: return "jax";
    case ANA_FW_CUPY: return "cupy";
    default: return "pytorch";
  }
}

int ana_run_advisable(ana_db_t *db, int64_t trace_id, const char *capture_mode, const char *policy, int64_t ooms,
                      int pool, int pass) {
  ana_fw_t fw = ana_fw_detect(db, trace_id, capture_mode);
  if (fw == ANA_FW_MIXED || fw == ANA_FW_RMM || (fw != ANA_FW_UNKNOWN && capture_mode && !strcmp(capture_mode, "native")))
    return 0;
  return ana_fw_advisable(fw, policy, ooms, pool, pass);
}

const char *ana_trace_capture_mode(ana_db_t *db, int64_t trace_id, char *buf, size_t n) {
  buf[0] = '\0';
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(db->h, "SELECT capture_mode FROM traces WHERE trace_id=?1", -1, &st, NULL) == SQLITE_OK) {
    sqlite3_bind_int64(st, 1, trace_id);
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
      snprintf(buf, n, "%s", (const char *)sqlite3_column_text(st, 0));
  }
  sqlite3_finalize(st);
  return buf;
}

ana_fw_t ana_trace_fw(ana_db_t *db, int64_t trace_id) {
  char mode[64];
  ana_trace_capture_mode(db, trace_id, mode, sizeof mode);
  return ana_fw_detect(db, trace_id, mode[0] ? mode : NULL);
}

int ana_fw_runs_setting(ana_fw_t fw, const char *policy) {
  if (fw == ANA_FW_UNKNOWN || fw == ANA_FW_MIXED || fw == ANA_FW_RMM) return 1;
  return ana_fw_in_family(fw, policy);
}

const char *ana_trace_default_policy(ana_db_t *db, int64_t trace_id, const char *capture_mode) {
  return ana_fw_default_policy(ana_fw_detect(db, trace_id, capture_mode));
}
