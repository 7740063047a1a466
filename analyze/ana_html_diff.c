/* ana_html_diff.c: two runs of one job side by side in HTML: `gpuanalyze diff A B --html=OUT`
 * (a page of its own) and the first section of `gpuanalyze report A.zst B.zst`.
 *
 * The figures are ana_diff.c's, the same struct `diff` prints as text and JSON, so the page and
 * the terminal agree to the byte: peak live and peak reserved of both with the change, the
 * callsites by growth of their bytes live at each peak (new and gone marked), and both live
 * timelines on one axis (time as a share of each run, ANA_DIFF_POINTS points, each the maximum
 * of its slice, so both peaks survive). Every exact figure is also in a data- attribute, for
 * scripts and tests. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/ana_diff.h"
#include "analyze/ana_report_internal.h"

enum { DIFF_TOP = 15 };

static const char *sz(uint64_t v, char *b) { return gm_format_size(v, b, 32); }

static void change(FILE *out, uint64_t a, uint64_t b) {
  char x[32];
  int64_t d = (int64_t)b - (int64_t)a;
  fprintf(out, "<td class=\"%s\">%s%s", d > 0 ? "diffup" : d < 0 ? "diffdown" : "", d < 0 ? "-" : "+",
          sz(d < 0 ? (uint64_t)-d : (uint64_t)d, x));
  if (a) fprintf(out, " (%+.1f%%)", ((double)b - (double)a) / (double)a * 100.0);
  fputs("</td>", out);
}

static void row_bytes(FILE *out, const char *id, const char *what, uint64_t a, uint64_t b) {
  char x[32], y[32];
  fprintf(out, "<tr id=\"%s\" data-a=\"%" PRIu64 "\" data-b=\"%" PRIu64 "\"><td class=\"t\">%s</td><td>%s</td><td>%s</td>",
          id, a, b, what, sz(a, x), sz(b, y));
  change(out, a, b);
  fputs("</tr>\n", out);
}

void ana_html_diff(FILE *out, const ana_diff_t *d) {
  char x[32], y[32];
  fputs("<section class=\"diff\" id=\"diff\"><h2>Two runs side by side</h2>\n<p>A: <code>", out);
  ana_html_escape(out, d->side[0].path);
  fputs("</code><br>B: <code>", out);
  ana_html_escape(out, d->side[1].path);
  fputs("</code></p>\n", out);
  for (int i = 0; i < 2; i++)
    if (!d->side[i].allocs)
      fprintf(out, "<p class=\"partial\">%s has no GPU allocation (%" PRIu64 " events%s): its figures are 0.</p>\n",
              i ? "B" : "A", d->side[i].events, d->side[i].frees ? ", frees only" : "");
  const ana_diff_side_t *a = &d->side[0], *b = &d->side[1];
  fputs("<div class=\"cards\">\n", out);
  int64_t dl = (int64_t)b->peak_live - (int64_t)a->peak_live;
  fprintf(out, "<div class=\"card\"><div class=\"ct\">peak live, A &rarr; B</div><div class=\"cv\">%s &rarr; %s</div>"
               "<div class=\"cs\">%s%s</div></div>\n",
          sz(a->peak_live, x), sz(b->peak_live, y), dl < 0 ? "-" : "+", sz(dl < 0 ? (uint64_t)-dl : (uint64_t)dl, (char[32]){0}));
  if (a->has_reserved && b->has_reserved) {
    int64_t dr = (int64_t)b->peak_reserved - (int64_t)a->peak_reserved;
    fprintf(out, "<div class=\"card\"><div class=\"ct\">peak reserved, A &rarr; B</div><div class=\"cv\">%s &rarr; %s</div>"
                 "<div class=\"cs\">%s%s under ",
            sz(a->peak_reserved, x), sz(b->peak_reserved, y), dr < 0 ? "-" : "+",
            sz(dr < 0 ? (uint64_t)-dr : (uint64_t)dr, (char[32]){0}));
    ana_html_escape(out, a->policy);
    fputs(" / ", out);
    ana_html_escape(out, b->policy);
    fputs(" (each job's default setting, replayed)</div></div>\n", out);
  }
  fprintf(out, "<div class=\"card\"><div class=\"ct\">callsites new in B</div><div class=\"cv\">%" PRIu64 "</div>"
               "<div class=\"cs\">%" PRIu64 " allocations, %s; gone from A: %" PRIu64 " (%" PRIu64 " allocations, %s)</div>"
               "</div>\n</div>\n",
          d->new_sites, d->new_allocs, sz(d->new_bytes, x), d->gone_sites, d->gone_allocs, sz(d->gone_bytes, y));
  fputs("<table class=\"kv\" id=\"diff-figures\"><tr><th></th><th>A</th><th>B</th><th>B - A</th></tr>\n", out);
  row_bytes(out, "diff-peak-live", "peak live", a->peak_live, b->peak_live);
  if (a->has_reserved && b->has_reserved) row_bytes(out, "diff-peak-reserved", "peak reserved", a->peak_reserved, b->peak_reserved);
  fprintf(out, "<tr id=\"diff-allocs\" data-a=\"%" PRIu64 "\" data-b=\"%" PRIu64 "\"><td class=\"t\">allocations</td>"
               "<td>%" PRIu64 "</td><td>%" PRIu64 "</td><td>%+" PRId64 "</td></tr>\n",
          a->allocs, b->allocs, a->allocs, b->allocs, (int64_t)b->allocs - (int64_t)a->allocs);
  fprintf(out, "<tr id=\"diff-callsites\" data-a=\"%" PRIu64 "\" data-b=\"%" PRIu64 "\"><td class=\"t\">callsites</td>"
               "<td>%" PRIu64 "</td><td>%" PRIu64 "</td><td></td></tr>\n",
          a->sites, b->sites, a->sites, b->sites);
  fprintf(out, "<tr><td class=\"t\">duration</td><td>%.3f s</td><td>%.3f s</td><td></td></tr>\n",
          (double)a->duration_ns / 1e9, (double)b->duration_ns / 1e9);
  fprintf(out, "<tr><td class=\"t\">peak at (of the run)</td><td>%.1f%%</td><td>%.1f%%</td><td></td></tr>\n</table>\n",
          a->duration_ns ? 100.0 * (double)a->peak_live_ts_ns / (double)a->duration_ns : 0.0,
          b->duration_ns ? 100.0 * (double)b->peak_live_ts_ns / (double)b->duration_ns : 0.0);
  /* growth by callsite */
  if (d->n_sites) {
    fputs("<h3>Live at each peak, by callsite, by growth</h3>\n<div class=\"scroll\"><table class=\"callsites\" "
          "id=\"diff-growth\"><tr><th>callsite</th><th>A</th><th>B</th><th>B - A</th></tr>\n",
          out);
    for (size_t i = 0; i < d->n_sites && i < DIFF_TOP; i++) {
      const ana_diff_site_t *s = &d->sites[i];
      const char *mark = s->allocs[1] && !s->allocs[0] ? "new" : s->allocs[0] && !s->allocs[1] ? "gone" : "";
      fprintf(out, "<tr data-a=\"%" PRIu64 "\" data-b=\"%" PRIu64 "\"><td class=\"t\">", s->peak_bytes[0], s->peak_bytes[1]);
      if (*mark) fprintf(out, "<b>[%s]</b> ", mark);
      ana_html_escape(out, s->text[0] ? s->text : "(no callsite recorded)");
      fprintf(out, "</td><td>%s</td><td>%s</td>", sz(s->peak_bytes[0], x), sz(s->peak_bytes[1], y));
      change(out, s->peak_bytes[0], s->peak_bytes[1]);
      fputs("</tr>\n", out);
    }
    fputs("</table></div>\n", out);
    if (d->n_sites > DIFF_TOP)
      fprintf(out, "<p class=\"note\">%zu more callsites: <code>gpuanalyze diff A B --csv DIR</code> writes them all.</p>\n",
              d->n_sites - DIFF_TOP);
  }
  /* both timelines on one axis */
  fputs("<h3>Live bytes of both runs on one axis</h3>\n<p><select id=\"chart-diff-select\"></select> <span class=\"note\">"
        "time as a share of each run (runs of different lengths meet phase by phase); each point the maximum of its "
        "slice; drag to zoom</span></p>\n<div class=\"chart\" id=\"chart-diff\"></div>\n<div class=\"legend\" "
        "id=\"chart-diff-legend\"></div>\n<script type=\"application/json\" class=\"chart-data\" data-chart=\"chart-diff\">"
        "{\"xlabel\":\"% of the run\",\"labels\":[\"% of the run\",\"A: live\",\"B: live\"],\"nstack\":0,\"show\":[0,1],"
        "\"rows\":[",
        out);
  int any = a->allocs || b->allocs;
  for (int i = 0; any && i < ANA_DIFF_POINTS; i++)
    fprintf(out, "%s[%.4g,%" PRIu64 ",%" PRIu64 "]", i ? "," : "", 100.0 * i / (ANA_DIFF_POINTS - 1), d->live[0][i],
            d->live[1][i]);
  fputs("]}</script>\n</section>\n", out);
}

gm_status_t ana_diff_write_html(const ana_diff_t *d, const char *path, gm_err_t *err) {
  gm_out_t *o = NULL;
  gm_status_t s = gm_out_open(&o, path, err);
  if (s < 0) return gm_err_wrap(err, "cannot write '%s'", path);
  FILE *out = gm_out_file(o);
  if (!out) {
    gm_out_abort(o);
    return gm_err_set(err, GM_ERR_NOMEM, "out of memory");
  }
  ana_html_page_begin(out, "gpumem diff");
  ana_html_diff(out, d);
  fprintf(out, "<p class=\"note\">gpuanalyze %s. Sizes in binary units.</p>\n", ANA_VERSION);
  ana_html_page_end(out);
  return gm_out_commit(o, err) < 0 ? gm_err_wrap(err, "cannot write '%s'", path) : GM_OK;
}
