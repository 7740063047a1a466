/* ana_diff.h: two traces of the same job side by side (issue 14): `gpuanalyze diff A B` and the
 * report's section over two traces. Part of //analyze:analyze; ana_diff.c says how. */
#ifndef ANA_DIFF_H
#define ANA_DIFF_H

#include <stdint.h>
#include <stdio.h>

#include "analyze/ana.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One callsite (by its text: ids are per trace) in both traces. */
typedef struct ana_diff_site {
  char *text;                   /* the callsite's text, "" when none recorded */
  uint64_t peak_bytes[2];       /* live at each trace's peak */
  uint64_t peak_allocs[2];
  uint64_t allocs[2], bytes[2]; /* every allocation of the trace */
} ana_diff_site_t;

#define ANA_DIFF_POINTS 1000 /* the combined timeline's points on the normalised axis */
/* diff_callsites.csv's rows: the callsites of most growth; the rest are summed in one last
 * row, so that a trace of a million distinct callsites does not make a CSV of a million rows. */
#define ANA_DIFF_CSV_MAX_SITES 10000

typedef struct ana_diff_side {
  char path[1024];
  uint64_t events, allocs, frees, failed_allocs;
  uint64_t duration_ns;
  uint64_t peak_live, peak_live_ts_ns; /* ts from the trace's start */
  char out_of_order[320];              /* ana_out_of_order_text: "" when the times go forward */
  int has_reserved;                    /* peak_reserved was replayed (or found in the database) */
  uint64_t peak_reserved;
  char policy[256];                    /* the setting peak_reserved is of */
  uint64_t sites;                      /* distinct callsites allocating */
} ana_diff_side_t;

typedef struct ana_diff {
  ana_diff_side_t side[2];
  ana_diff_site_t *sites; /* by growth at the peak (b - a), largest first; then by text */
  size_t n_sites;
  uint64_t new_sites, gone_sites;          /* callsites only in B / only in A */
  uint64_t new_allocs, new_bytes, gone_allocs, gone_bytes;
  /* The live bytes of both on one axis: time as a share of each trace's duration, each point
   * the maximum over its slice (so both peaks survive). */
  uint64_t live[2][ANA_DIFF_POINTS];
} ana_diff_t;

/* Read both traces (two streaming passes each: the peak, then what was live at it). */
gm_status_t ana_diff_traces(const char *a, const char *b, unsigned read_flags, ana_diff_t *d, gm_err_t *err);
/* The same for two traces loaded in the database (by trace_id; their files must still be
 * where they were loaded from), with peak reserved from each trace's replay of its
 * framework's default setting, when the database holds one: the report's section. */
gm_status_t ana_diff_db(ana_db_t *db, int64_t trace_a, int64_t trace_b, unsigned read_flags, ana_diff_t *d,
                        gm_err_t *err);
void ana_diff_free(ana_diff_t *d);

/* Text: the figures side by side, the top growth, new and gone callsites (top rows). */
void ana_diff_print_text(FILE *f, const ana_diff_t *d, int top);
gm_status_t ana_diff_print_json(FILE *f, const ana_diff_t *d, gm_err_t *err);
/* diff_summary.csv, diff_callsites.csv, diff_timeline.csv into dir (created if missing). */
gm_status_t ana_diff_write_csv(const ana_diff_t *d, const char *dir, gm_err_t *err);

/* HTML (ana_html_diff.c): the two-runs section (figures side by side, growth by callsite, new
 * and gone callsites, both live timelines on one axis); a page of it alone (`diff --html`);
 * and the report with it first (`report A.zst B.zst`). */
void ana_html_diff(FILE *out, const ana_diff_t *d);
gm_status_t ana_diff_write_html(const ana_diff_t *d, const char *path, gm_err_t *err);
gm_status_t ana_report_html_diff(ana_db_t *db, const char *path, const ana_diff_t *d, gm_err_t *err);

#ifdef __cplusplus
}
#endif
#endif /* ANA_DIFF_H */
