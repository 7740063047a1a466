/* ana_db_internal.h: what the analyzer's own files share about the database (not public):
 * the handle struct and small SQLite helpers that turn SQLite failures into cause chains. */
#ifndef ANA_DB_INTERNAL_H
#define ANA_DB_INTERNAL_H

#include <sqlite3.h>

#include "analyze/ana.h"

#ifdef __cplusplus
extern "C" {
#endif

struct ana_db {
  sqlite3 *h;
  const char *path;
  int wait_ms; /* busy timeout */
};

/* Trailing columns added to schema version 1 (ana_schema.c), NULL-terminated. */
typedef struct ana_added_column {
  const char *table, *column, *decl;
} ana_added_column_t;
extern const ana_added_column_t ana_added_columns[];
/* ana_framework.c: a trace's framework (its framework.<name> keys; torch-mode and imported
 * snapshots are PyTorch's), its name in the advice, whether a setting is of its family, may be
 * the advice (pass 0: the family's own; pass 1: the fallback for an unknown framework), and
 * the setting the job runs with when the user sets nothing. */
typedef enum { ANA_FW_UNKNOWN, ANA_FW_PYTORCH, ANA_FW_TF, ANA_FW_JAX, ANA_FW_CUPY, ANA_FW_MIXED, ANA_FW_RMM } ana_fw_t;
const char *ana_fw_name(ana_fw_t fw);
ana_fw_t ana_fw_detect(ana_db_t *db, int64_t trace_id, const char *capture_mode);
int ana_fw_in_family(ana_fw_t fw, const char *policy);
int ana_fw_advisable(ana_fw_t fw, const char *policy, int64_t ooms, int pool, int pass);
const char *ana_fw_default_policy(ana_fw_t fw);
/* ana_recommend.c's choice, for choices over many traces (ana_ranks.c): may a run of policy
 * be advised for the trace (pass 0: its framework's family; pass 1: the fallback when the
 * framework is unknown); the setting a trace's job runs with by default; the bytes a run ranks
 * by (a range by its high end). */
int ana_run_advisable(ana_db_t *db, int64_t trace_id, const char *capture_mode, const char *policy, int64_t ooms,
                      int pool, int pass);
const char *ana_trace_default_policy(ana_db_t *db, int64_t trace_id, const char *capture_mode); /* ana_framework.c */
/* A trace's framework, its capture mode read from the database (ana_fw_detect). */
ana_fw_t ana_trace_fw(ana_db_t *db, int64_t trace_id);
/* A loaded trace's capture mode ("torch-history", ...) into buf; "" when it has none. Returns buf. */
const char *ana_trace_capture_mode(ana_db_t *db, int64_t trace_id, char *buf, size_t n);
/* Can a job of framework fw run under policy (its family; any where the framework is unknown,
 * mixed or RMM's)? The settings a user is shown to choose from (the largest value that fits,
 * the predicted curve): a PyTorch job cannot run TensorFlow's BFC. */
int ana_fw_runs_setting(ana_fw_t fw, const char *policy);
/* ana_recommend_notes.c: the lines `recommend` prints about a trace before its advice. */
void ana_rec_warn_kv(ana_db_t *db, FILE *out, int64_t trace_id);
void ana_rec_warn_integrity(ana_db_t *db, FILE *out, int64_t trace_id);
int ana_rec_no_requests(ana_db_t *db, FILE *out, int64_t trace_id, ana_advice_t *adv); /* 1: none */
int ana_rec_recorded_failure(ana_db_t *db, FILE *out, int64_t trace_id);               /* 1: one */
#define ANA_FAILED_OWN_LIMIT 2 /* ana_rec_recorded_failure: one, replayed within the limit the run set itself */
void ana_rec_warn_assumed(ana_db_t *db, FILE *out, int64_t trace_id);
void ana_rec_print_frameworks(ana_db_t *db, FILE *out, int64_t trace_id, const char *fw_display, int fw_rmm,
                              int fw_pytorch);

int64_t ana_run_rank_bytes(int64_t reserved, int range, int64_t high);
/* The ends of a replayed figure with what the replay cannot tell of it (ana_run_check.c): its
 * timing range (range: low..high beside reserved) and its placement spread (bump: the peak
 * under a bump pointer, 0 when the same). recommend's choice and the job's setting (ana_ranks.c)
 * both judge by them. */
void ana_run_ends(int64_t reserved, int range, int64_t low, int64_t high, int64_t bump, int64_t *lo, int64_t *hi);
/* A trace's header value for key (raw, as recorded) into buf; NULL if it has none. */
const char *ana_trace_kv(ana_db_t *db, int64_t trace_id, const char *key, char *buf, size_t n);

/* The report's per-trace summaries, made at load by two more decoding passes (ana_load_peak.c):
 * what is live at the peak (by callsite, by stream, the largest) and the active-memory timeline
 * stacked by callsite class (the top ANA_STACK_CLASSES - 1 callsites at the peak and the rest)
 * on ANA_STACK_BUCKETS + 1 time buckets over [0, last_ts_ns]. */
enum { ANA_STACK_CLASSES = 9, ANA_STACK_BUCKETS = 800 };
gm_status_t ana_load_peak_summaries(ana_db_t *db, int64_t trace_id, const void *buf, size_t len, unsigned flags,
                                    const ana_summary_t *m, gm_err_t *err);
/* 0 when every trace of the database has the report's summaries; else an error naming the
 * first that lacks them (loaded by an older gpuanalyze) and how to upgrade it. */
gm_status_t ana_report_check_summaries(ana_db_t *db, gm_err_t *err);

/* Tables added to version 1 after it shipped (CREATE TABLE IF NOT EXISTS ...; one string). */
extern const char ana_added_tables_sql[];

gm_status_t ana_sql_err(sqlite3 *h, gm_err_t *err, const char *what);
gm_status_t ana_exec(ana_db_t *db, const char *sql, gm_err_t *err);
gm_status_t ana_prepare(ana_db_t *db, sqlite3_stmt **st, const char *sql, gm_err_t *err);
/* Identity hash of a file's bytes (content_hash columns). */
uint64_t ana_hash_bytes(const void *p, size_t n);
/* A loaded trace's coverage (ana_coverage.c, formats' gmt_coverage) from its kv pairs and
 * stats; returns c->partial. The print and HTML forms write the one line every tool prints
 * first on a partial trace (nothing on a complete one) and return whether they did. */
int ana_trace_coverage(ana_db_t *db, int64_t trace_id, gmt_coverage_t *c);
int ana_coverage_print(ana_db_t *db, FILE *out, int64_t trace_id, const char *indent);
int ana_coverage_html(ana_db_t *db, FILE *out, int64_t trace_id);

/* ---- the replay checked against the run it replays (ana_run_check.c) ---- */
/* The run of the setting the job ran with on device (-1: any): PyTorch's own record of its
 * conf, or the environment of a capture that did not switch allocators; else the framework's
 * default run. *label says which; *as_run: 1 when it is the setting the job ran with. -1: none
 * replayed. */
int64_t ana_own_run(ana_db_t *db, int64_t trace_id, ana_fw_t fw, int64_t device, char *label, size_t n, int *as_run);
enum { ANA_CHECK_NONE = 0, ANA_CHECK_EXACT = 1, ANA_CHECK_OFF = 2 };
typedef struct ana_run_check {
  int state;                 /* ANA_CHECK_*: NONE where the trace cannot be checked */
  char policy[256];          /* the setting the job ran with, in gpureplay's words */
  int64_t replay, low, high; /* its peak reserved, and the range of what the replay cannot tell */
  int64_t recorded;          /* the run's own peak reserved: its allocator's segments in the trace */
  int64_t off;               /* bytes from recorded to [low, high]; 0 unless OFF */
} ana_run_check_t;
/* Fills *k and returns k->state (see the file's top for when a trace is checked). */
int ana_run_check(ana_db_t *db, int64_t trace_id, ana_fw_t fw, int64_t device, ana_run_check_t *k);
/* The line recommend prints before its advice ("checked against the run: ..." or "warning: the
 * replay misses this run by ..."); nothing for NONE. */
void ana_run_check_print(FILE *out, const ana_run_check_t *k, const char *ind);

/* ---- small SQL helpers (ana_sql.c) ---- */
/* Step a statement that returns no row, then reset it; an error says "insert". */
gm_status_t ana_step(ana_db_t *db, sqlite3_stmt *st, gm_err_t *err);
/* Bind text, or NULL for a NULL pointer. */
void ana_bind_text(sqlite3_stmt *st, int i, const char *s);

/* ---- a trace's identity (ana_load_identity.c), for ana_load_trace.c ---- */
/* The file mapped read-only (*buf NULL when it is empty; munmap(*buf, *len) after). */
gm_status_t ana_load_read_file(const char *path, void **buf, size_t *len, gm_err_t *err);
/* The load's warning callback, formatted (nothing without one). */
void ana_load_warn(const ana_load_opts_t *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* What the database already holds of this trace: GM_END to skip it (same bytes); GM_OK to load
 * it, after replacing what was loaded from the same path. */
gm_status_t ana_load_check_identity(ana_db_t *db, const char *path, const char *real, const char *hash,
                                    const ana_load_opts_t *o, gm_err_t *err);

#ifdef __cplusplus
}
#endif
#endif
