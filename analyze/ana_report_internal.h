/* ana_report_internal.h: the report's table declarations, shared by the text/CSV writers
 * (ana_report.c) and the HTML writer (ana_html.c). Not public. */
#ifndef ANA_REPORT_INTERNAL_H
#define ANA_REPORT_INTERNAL_H

#include "analyze/ana_db_internal.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ana_table {
  const char *name;  /* CSV file name, HTML id */
  const char *title; /* heading */
  const char *sql;   /* ?1 = trace_id or NULL for all; first column is trace_id */
  int wide;          /* has a long text column (callsite) */
} ana_table_t;

extern const ana_table_t ana_tables[]; /* ends with a NULL name */

/* Build the temp tables the report reads (live_peak). */
gm_status_t ana_report_prepare(ana_db_t *db, gm_err_t *err);
gm_status_t ana_table_query(ana_db_t *db, const ana_table_t *t, int64_t trace_id, sqlite3_stmt **st,
                            gm_err_t *err);
int ana_col_is_bytes(const char *name);
void ana_cell_text(sqlite3_stmt *st, int c, char *buf, size_t n);
/* One CSV field (RFC 4180, text from the input neutralised for spreadsheets: ana_report.c). */
void ana_csv_field(FILE *f, const char *s, int is_text);

/* A signed size as text ("-1.5 MiB" for a negative one): the HTML report's figures. */
static inline const char *ana_size_signed(int64_t v, char *buf, size_t n) {
  if (v < 0) {
    buf[0] = '-';
    gm_format_size((uint64_t)-v, buf + 1, n - 1);
    return buf;
  }
  return gm_format_size((uint64_t)v, buf, n);
}

/* The HTML report's parts (ana_html_first.c, ana_html_peak.c, ana_html_timeline.c). rec_run: the run of the
 * setting the job ran with (-1: none), which ana_html_first_screen finds. */
void ana_html_first_screen(ana_db_t *db, FILE *out, int64_t trace_id, const ana_advice_t *a, const char *rec_text,
                           int64_t *rec_run);
void ana_html_bars(ana_db_t *db, FILE *out, int64_t trace_id, const ana_advice_t *a, int64_t rec_run);
void ana_html_waste(ana_db_t *db, FILE *out, int64_t trace_id, int64_t rec_run, int64_t best_run);
void ana_html_callsites(ana_db_t *db, FILE *out, int64_t trace_id);
void ana_html_segmap(ana_db_t *db, FILE *out, int64_t trace_id, int64_t rec_run, int64_t best_run);
/* The page around the sections (ana_html_page.c): head with the styles and dygraphs, and the
 * page's script at the end. */
void ana_html_page_begin(FILE *out, const char *title);
void ana_html_page_end(FILE *out);
/* "Why it ran out" (ana_html_oom.c) from the trace's stored --explain-oom object; 1 if written. */
int ana_html_oom(ana_db_t *db, FILE *out, int64_t trace_id, const char *path);
/* Peak reserved against the value for a predicted trace, or the recordings --curve named
 * (ana_html_predict.c); nothing when neither. */
void ana_html_predict(ana_db_t *db, FILE *out, int64_t trace_id, int64_t device);
/* The largest value that fits per setting for the usual GPU sizes, and the curve (ana_html_fit.c):
 * gpurec predict --fit over inputs ("PATH@VALUE", n of them), for the settings specs. */
void ana_html_fit(FILE *out, const char *const *inputs, int n, const char *const *specs, int n_specs);
/* gpuanalyze recommend's lines for the predicted traces of db: the same answer per card. */
void ana_recommend_fit(ana_db_t *db, FILE *out);
gm_status_t ana_html_timeline(ana_db_t *db, FILE *out, int64_t trace_id, int64_t rec_run, int64_t best_run,
                              gm_err_t *err);

#ifdef __cplusplus
}
#endif
#endif
