/* ana_ranks.c: the ranks of one job side by side (issue 17, item 2): each rank's and device's
 * peak (live, mapped, reserved under the default setting and under the job's), the rank that
 * limits the job, the spread between ranks, the callsites whose bytes at the peak differ most,
 * and ONE setting for the whole job: the one whose largest peak reserved over every rank and
 * device is the least (a job runs one setting on every rank, and the rank that needs the most
 * decides whether it fits). Candidates are those `recommend` would advise for each trace
 * (ana_run_advisable: the same filter), without OOM on every rank and device.
 *
 * A job is the traces with a rank that share command line and world size. Everything here
 * reads per-trace and per-run summaries (traces, trace_devices, trace_peak_callsites, runs),
 * never events: hundreds of ranks cost hundreds of rows per table, not their events. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "analyze/ana_db_internal.h"
#include "analyze/ana_run_fields.h"

typedef struct unit { /* one rank's device */
  int64_t trace_id, rank, device;
  int64_t live, mapped;
  int64_t dflt, best; /* peak reserved (rank bytes) under the default / the job's setting; -1 none */
} unit_t;

typedef struct cand {
  char policy[256];
  int64_t *bytes, *calls; /* per unit: its run's rank bytes (-1: no run), driver calls */
  int64_t *low, *high;    /* per unit: its figure's ends with what the replay cannot tell */
  int8_t *level;          /* per unit: 0 family, 1 fallback, -1 never advised (OOM, floor, ...) */
  int64_t worst, sum_calls;
  int ok, lvl;            /* every unit has an advisable run; the worst level */
} cand_t;

static void cands_free(cand_t *c, int n) {
  for (int k = 0; k < n; k++) {
    free(c[k].bytes);
    free(c[k].calls);
    free(c[k].level);
    free(c[k].low);
    free(c[k].high);
  }
  free(c);
}

typedef struct job {
  char command[1024];
  int64_t world_size;
  unit_t *u;
  int nu;
  char dflt[64], best[256];
  int64_t best_worst, dflt_worst;
  /* the default kept for the job: the least-reserving setting (kept_policy) saves at most
   * kept_save on the ranks' worst, within the floor plus what the replay cannot tell */
  char kept_policy[256];
  int64_t kept_save, kept_floor;
  int limiting; /* index in u */
} job_t;

static int find_unit(job_t *j, int64_t trace_id, int64_t device) {
  for (int i = 0; i < j->nu; i++)
    if (j->u[i].trace_id == trace_id && j->u[i].device == device) return i;
  return -1;
}

/* The job's units: each rank's devices, from the per-trace summaries. */
static gm_status_t load_units(ana_db_t *db, job_t *j, gm_err_t *err) {
  sqlite3_stmt *st = NULL;
  gm_status_t s = ana_prepare(db, &st,
                              "SELECT t.trace_id, t.rank, d.device,"
                              /* the framework's own requests (what a setting serves), else all */
                              " COALESCE((SELECT o.peak_bytes FROM trace_owners o WHERE o.trace_id = t.trace_id"
                              "   AND o.device = d.device AND o.owner = 'framework allocator: requests'), d.peak_live_bytes),"
                              " COALESCE(d.peak_mapped_bytes, 0)"
                              " FROM traces t JOIN trace_devices d USING(trace_id)"
                              " WHERE t.rank IS NOT NULL AND t.command_line IS ?1 AND t.world_size IS ?2"
                              /* a device with an event but no memory (a pool created) is no unit */
                              " AND (d.peak_live_bytes > 0 OR COALESCE(d.peak_mapped_bytes, 0) > 0)"
                              " ORDER BY t.rank, t.trace_id, d.device",
                              err);
  if (s < 0) return s;
  sqlite3_bind_text(st, 1, j->command, -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 2, j->world_size);
  int cap = 0;
  while (sqlite3_step(st) == SQLITE_ROW) {
    if (j->nu == cap) {
      cap = cap ? cap * 2 : 64;
      unit_t *n = realloc(j->u, sizeof *n * (size_t)cap);
      if (!n) {
        sqlite3_finalize(st);
        return gm_err_set(err, GM_ERR_NOMEM, "out of memory");
      }
      j->u = n;
    }
    unit_t *u = &j->u[j->nu++];
    u->trace_id = sqlite3_column_int64(st, 0);
    u->rank = sqlite3_column_int64(st, 1);
    u->device = sqlite3_column_int64(st, 2);
    u->live = sqlite3_column_int64(st, 3);
    u->mapped = sqlite3_column_int64(st, 4);
    u->dflt = u->best = -1;
  }
  sqlite3_finalize(st);
  return GM_OK;
}

/* The job's setting: over the runs of every unit, the advisable policy with the least worst
 * peak reserved; the default's figures beside it. */
static gm_status_t choose(ana_db_t *db, job_t *j, gm_err_t *err) {
  sqlite3_stmt *st = NULL;
  gm_status_t s = ana_prepare(db, &st,
                              "SELECT t.trace_id, t.capture_mode, COALESCE(" ANA_RF_DEVICE("r.summary_json") ", 0),"
                              " r.policy, r.peak_reserved_bytes, r.ooms, r.device_alloc_calls,"
                              " COALESCE(" ANA_RF_TIMING_SENSITIVE("r.summary_json") ", 0),"
                              " COALESCE(" ANA_RF_PEAK_RESERVED_RANGE_HIGH_BYTES("r.summary_json") ", 0),"
                              " COALESCE(" ANA_RF_PEAK_RESERVED_RANGE_MOVED_BY("r.summary_json") ", ''),"
                              " COALESCE(" ANA_RF_PEAK_RESERVED_RANGE_LOW_BYTES("r.summary_json") ", r.peak_reserved_bytes),"
                              " COALESCE(" ANA_RF_PLACEMENT_BUMP_BYTES("r.summary_json") ", 0)"
                              " FROM v_runs r JOIN traces t USING(trace_id)"
                              " WHERE t.rank IS NOT NULL AND t.command_line IS ?1 AND t.world_size IS ?2 ORDER BY r.run_id",
                              err);
  if (s < 0) return s;
  sqlite3_bind_text(st, 1, j->command, -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 2, j->world_size);
  cand_t *c = NULL;
  int nc = 0, cap = 0;
  j->dflt[0] = '\0';
  while (s >= 0 && sqlite3_step(st) == SQLITE_ROW) {
    int64_t tid = sqlite3_column_int64(st, 0);
    const char *mode = (const char *)sqlite3_column_text(st, 1);
    int ui = find_unit(j, tid, sqlite3_column_int64(st, 2));
    const char *policy = (const char *)sqlite3_column_text(st, 3);
    if (ui < 0 || !policy) continue;
    int range = sqlite3_column_int64(st, 7) != 0;
    const char *mb = (const char *)sqlite3_column_text(st, 9);
    int pool = range && mb && !strcmp(mb, "async_pool");
    int64_t bytes = ana_run_rank_bytes(sqlite3_column_int64(st, 4), range, sqlite3_column_int64(st, 8));
    int64_t ooms = sqlite3_column_int64(st, 5);
    if (!j->dflt[0]) snprintf(j->dflt, sizeof j->dflt, "%s", ana_trace_default_policy(db, tid, mode));
    if (!strcmp(policy, j->dflt) && ooms == 0) j->u[ui].dflt = bytes;
    int level = ana_run_advisable(db, tid, mode, policy, ooms, pool, 0) ? 0
                : ana_run_advisable(db, tid, mode, policy, ooms, pool, 1) ? 1 : -1;
    int k = 0;
    while (k < nc && strcmp(c[k].policy, policy) != 0) k++;
    if (k == nc) {
      if (nc == cap) {
        cap = cap ? cap * 2 : 32;
        cand_t *n = realloc(c, sizeof *n * (size_t)cap);
        if (!n) {
          s = gm_err_set(err, GM_ERR_NOMEM, "out of memory");
          break;
        }
        c = n;
      }
      memset(&c[nc], 0, sizeof c[nc]);
      snprintf(c[nc].policy, sizeof c[nc].policy, "%s", policy);
      c[nc].bytes = malloc(sizeof *c[nc].bytes * (size_t)j->nu);
      c[nc].calls = calloc((size_t)j->nu, sizeof *c[nc].calls);
      c[nc].level = malloc((size_t)j->nu);
      c[nc].low = malloc(sizeof *c[nc].low * (size_t)j->nu);
      c[nc].high = malloc(sizeof *c[nc].high * (size_t)j->nu);
      nc++;
      if (!c[k].bytes || !c[k].calls || !c[k].level || !c[k].low || !c[k].high) {
        s = gm_err_set(err, GM_ERR_NOMEM, "out of memory");
        break;
      }
      for (int i = 0; i < j->nu; i++) c[k].bytes[i] = -1;
    }
    /* one figure per unit: a run loaded twice (two results files) counts once, the last */
    c[k].bytes[ui] = bytes;
    ana_run_ends(sqlite3_column_int64(st, 4), range, sqlite3_column_int64(st, 10), sqlite3_column_int64(st, 8),
                 sqlite3_column_int64(st, 11), &c[k].low[ui], &c[k].high[ui]);
    c[k].calls[ui] = sqlite3_column_int64(st, 6);
    c[k].level[ui] = (int8_t)level;
  }
  sqlite3_finalize(st);
  const cand_t *best = NULL;
  for (int k = 0; k < nc && s >= 0; k++) {
    cand_t *x = &c[k];
    x->ok = 1;
    for (int i = 0; i < j->nu && x->ok; i++) { /* every rank's every device, none out of memory */
      if (x->bytes[i] < 0 || x->level[i] < 0) x->ok = 0;
      if (x->level[i] > x->lvl) x->lvl = x->level[i];
      if (x->bytes[i] > x->worst) x->worst = x->bytes[i];
      x->sum_calls += x->calls[i];
    }
    if (!x->ok) continue;
    if (!best || x->lvl < best->lvl ||
        (x->lvl == best->lvl && (x->worst < best->worst || (x->worst == best->worst && x->sum_calls < best->sum_calls))))
      best = x;
  }
  /* No advice inside the error (ana_recommend.c's rule, over the job): a setting over a default
   * that served every rank must be smaller on the ranks' worst, its worst case against the
   * default's best, by more than the floor and twice the most any rank's replay missed its own
   * run by (ana_run_check.c). */
  const cand_t *d = NULL;
  for (int k = 0; k < nc; k++)
    if (!strcmp(c[k].policy, j->dflt) && c[k].ok && c[k].lvl == 0) d = &c[k];
  j->kept_policy[0] = '\0';
  if (best && d && best != d) {
    int64_t dlow = 0, bhigh = 0, slack = 0;
    for (int i = 0; i < j->nu; i++) {
      if (d->low[i] > dlow) dlow = d->low[i];
      if (best->high[i] > bhigh) bhigh = best->high[i];
      ana_run_check_t rc;
      if (ana_run_check(db, j->u[i].trace_id, ana_trace_fw(db, j->u[i].trace_id), j->u[i].device, &rc) &&
          rc.off > slack)
        slack = rc.off;
    }
    int64_t floor = ana_advice_floor(d->worst);
    if (dlow - bhigh <= floor + 2 * slack) {
      snprintf(j->kept_policy, sizeof j->kept_policy, "%s", best->policy);
      j->kept_save = d->worst > best->worst ? d->worst - best->worst : 0;
      j->kept_floor = floor + 2 * slack;
      best = d;
    }
  }
  j->best[0] = '\0';
  j->best_worst = j->dflt_worst = -1;
  if (best) {
    snprintf(j->best, sizeof j->best, "%s", best->policy);
    j->best_worst = best->worst;
  }
  cands_free(c, nc);
  if (s < 0 || !best) return s;
  /* each unit's figure under the job's setting */
  s = ana_prepare(db, &st,
                  "SELECT r.trace_id, COALESCE(" ANA_RF_DEVICE("r.summary_json") ", 0), r.peak_reserved_bytes,"
                  " COALESCE(" ANA_RF_TIMING_SENSITIVE("r.summary_json") ", 0),"
                  " COALESCE(" ANA_RF_PEAK_RESERVED_RANGE_HIGH_BYTES("r.summary_json") ", 0)"
                  " FROM v_runs r WHERE r.policy = ?1 AND r.trace_id IS NOT NULL",
                  err);
  if (s < 0) return s;
  sqlite3_bind_text(st, 1, j->best, -1, SQLITE_STATIC);
  while (sqlite3_step(st) == SQLITE_ROW) {
    int ui = find_unit(j, sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 1));
    if (ui >= 0)
      j->u[ui].best = ana_run_rank_bytes(sqlite3_column_int64(st, 2), sqlite3_column_int64(st, 3) != 0,
                                         sqlite3_column_int64(st, 4));
  }
  sqlite3_finalize(st);
  return GM_OK;
}

/* The figure a unit is judged by: its peak reserved under the job's setting, else its peak
 * live (no replays loaded). */
static int64_t judged(const unit_t *u) { return u->best >= 0 ? u->best : u->live; }

typedef struct spread {
  int64_t min, max;
  double mean, stddev;
} spread_t;

static spread_t spread_of(const job_t *j) {
  spread_t sp = {INT64_MAX, 0, 0, 0};
  for (int i = 0; i < j->nu; i++) {
    int64_t v = judged(&j->u[i]);
    if (v < sp.min) sp.min = v;
    if (v > sp.max) sp.max = v;
    sp.mean += (double)v;
  }
  sp.mean /= j->nu ? j->nu : 1;
  for (int i = 0; i < j->nu; i++) {
    double d = (double)judged(&j->u[i]) - sp.mean;
    sp.stddev += d * d;
  }
  sp.stddev = sqrt(sp.stddev / (j->nu ? j->nu : 1));
  return sp;
}

#define TOP_CALLSITES 5
typedef struct diff {
  char callsite[512];
  int64_t min, max, min_rank, max_rank;
} diff_t;

/* The callsites whose bytes live at each rank's peak differ most between ranks (a rank that
 * has none of a callsite counts 0), from trace_peak_callsites (made at load). */
static int callsite_diffs(ana_db_t *db, const job_t *j, diff_t *out) {
  sqlite3_stmt *st = NULL;
  int n = 0;
  if (sqlite3_prepare_v2(db->h,
                         "WITH jt AS (SELECT trace_id, rank FROM traces WHERE rank IS NOT NULL"
                         "  AND command_line IS ?1 AND world_size IS ?2),"
                         " cs AS (SELECT DISTINCT callsite FROM trace_peak_callsites WHERE trace_id IN (SELECT trace_id FROM jt)),"
                         " b AS (SELECT cs.callsite, jt.rank, COALESCE(p.bytes, 0) AS bytes FROM cs CROSS JOIN jt"
                         "  LEFT JOIN trace_peak_callsites p ON p.trace_id = jt.trace_id AND p.callsite = cs.callsite)"
                         " SELECT callsite, MIN(bytes), MAX(bytes),"
                         "  (SELECT rank FROM b b2 WHERE b2.callsite = b.callsite ORDER BY bytes, rank LIMIT 1),"
                         "  (SELECT rank FROM b b2 WHERE b2.callsite = b.callsite ORDER BY bytes DESC, rank LIMIT 1)"
                         " FROM b GROUP BY callsite HAVING MAX(bytes) > MIN(bytes)"
                         " ORDER BY MAX(bytes) - MIN(bytes) DESC, callsite LIMIT 5",
                         -1, &st, NULL) != SQLITE_OK)
    return 0;
  sqlite3_bind_text(st, 1, j->command, -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 2, j->world_size);
  while (n < TOP_CALLSITES && sqlite3_step(st) == SQLITE_ROW) {
    snprintf(out[n].callsite, sizeof out[n].callsite, "%s", (const char *)sqlite3_column_text(st, 0));
    out[n].min = sqlite3_column_int64(st, 1);
    out[n].max = sqlite3_column_int64(st, 2);
    out[n].min_rank = sqlite3_column_int64(st, 3);
    out[n].max_rank = sqlite3_column_int64(st, 4);
    n++;
  }
  sqlite3_finalize(st);
  return n;
}

static const char *sz(int64_t v, char *b, size_t n) {
  if (v < 0) return snprintf(b, n, "-"), b;
  return gm_format_size((uint64_t)v, b, n);
}

static void print_text(ana_db_t *db, FILE *out, job_t *j) {
  char b1[32], b2[32], b3[32], b4[32], e[1024];
  spread_t sp = spread_of(j);
  const unit_t *lim = &j->u[j->limiting];
  fprintf(out, "job: %s (world size %" PRId64 ", %d rank-device%s loaded)\n", gm_escape(j->command, e, sizeof e),
          j->world_size, j->nu, j->nu == 1 ? "" : "s");
  fprintf(out, "  %6s %6s %12s %12s %14s %14s\n", "rank", "device", "fw. live", "peak mapped", "default", "job setting");
  for (int i = 0; i < j->nu; i++) {
    const unit_t *u = &j->u[i];
    fprintf(out, "  %6" PRId64 " %6" PRId64 " %12s %12s %14s %14s%s\n", u->rank, u->device, sz(u->live, b1, sizeof b1),
            sz(u->mapped, b2, sizeof b2), sz(u->dflt, b3, sizeof b3), sz(u->best, b4, sizeof b4),
            i == j->limiting ? "  <- limits the job" : "");
  }
  const char *what = j->best[0] ? "peak reserved under the job's setting" : "peak live: no job setting";
  fprintf(out, "  limiting: rank %" PRId64 " device %" PRId64 " (%s %s)\n", lim->rank, lim->device, what,
          sz(judged(lim), b1, sizeof b1));
  fprintf(out, "  spread: max/min %.2f, stddev %s, mean %s (%s)\n", sp.min > 0 ? (double)sp.max / (double)sp.min : 0.0,
          sz((int64_t)sp.stddev, b1, sizeof b1), sz((int64_t)sp.mean, b2, sizeof b2), what);
  if (j->best[0]) {
    char line[512];
    ana_policy_env_line(j->best, 0, line, sizeof line);
    fprintf(out, "  job setting: %s (the largest peak reserved over ranks: %s", gm_escape(j->best, e, sizeof e),
            sz(j->best_worst, b1, sizeof b1));
    if (j->dflt_worst >= 0) fprintf(out, "; under the default %s: %s", j->dflt, sz(j->dflt_worst, b2, sizeof b2));
    fprintf(out, ")\n");
    if (j->kept_policy[0])
      fprintf(out, "  keep the default on every rank: no setting is reliably smaller for the job (the least, %s, saves "
                   "at most %s on the ranks' worst, not more than %s: the floor and what the replay cannot tell)\n",
              gm_escape(j->kept_policy, e, sizeof e), sz(j->kept_save, b1, sizeof b1), sz(j->kept_floor, b2, sizeof b2));
    fprintf(out, "  paste on every rank: %s\n", gm_escape(line, e, sizeof e));
  } else {
    fprintf(out, "  job setting: none (no setting was replayed without OOM on every rank and device: "
                 "`gpuanalyze ranks TRACES...` replays them)\n");
  }
  diff_t d[TOP_CALLSITES];
  int nd = callsite_diffs(db, j, d);
  if (nd) fprintf(out, "  callsites that differ most between ranks (bytes live at each rank's peak):\n");
  for (int i = 0; i < nd; i++)
    fprintf(out, "    %10s .. %-10s (rank %" PRId64 " .. rank %" PRId64 ")  %s\n", sz(d[i].min, b1, sizeof b1),
            sz(d[i].max, b2, sizeof b2), d[i].min_rank, d[i].max_rank, gm_escape_cut(d[i].callsite, e, 200));
}

/* The report's box for a job: its one setting, to paste on every rank, above the ranks' own
 * sections (each of which advises for its rank alone: two ranks may be told two things). */
static void print_html(FILE *out, job_t *j, int k) {
  char b1[32], b2[32];
  const unit_t *lim = &j->u[j->limiting];
  fprintf(out, "<section id=\"job-%d\" class=\"job\"><h2>One setting for the whole job</h2>\n<p>%d rank-device%s of one "
               "job (<code>", k, j->nu, j->nu == 1 ? "" : "s");
  ana_html_escape(out, j->command);
  fprintf(out, "</code>, world size %" PRId64 "). A job runs one setting on every rank, and the rank that needs the "
               "most decides whether it fits: rank %" PRId64 ", device %" PRId64 " (%s %s). Each rank's section "
               "below advises for that rank alone.</p>\n", j->world_size, lim->rank, lim->device,
          j->best[0] ? "peak reserved under the job's setting" : "peak live", sz(judged(lim), b1, sizeof b1));
  if (!j->best[0]) {
    fputs("<p class=\"partial\">No setting was replayed without running out of memory on every rank and device: "
          "<code>gpuanalyze ranks TRACES...</code> replays them.</p>\n</section>\n", out);
    return;
  }
  char line[512];
  ana_policy_env_line(j->best, 0, line, sizeof line);
  fprintf(out, "<div class=\"paste\"><span>Paste on every rank before you start the job:</span> <code id=\"paste-job-%d\">",
          k);
  ana_html_escape(out, line);
  fprintf(out, "</code> <button type=\"button\" class=\"copy\" data-copy=\"paste-job-%d\">Copy</button></div>\n", k);
  fputs("<p><code>", out);
  ana_html_escape(out, j->best);
  fprintf(out, "</code>: the largest peak reserved over ranks: %s", sz(j->best_worst, b1, sizeof b1));
  if (j->dflt_worst >= 0) {
    fputs("; under the default <code>", out);
    ana_html_escape(out, j->dflt);
    fprintf(out, "</code>: %s", sz(j->dflt_worst, b2, sizeof b2));
  }
  fputs(".", out);
  if (j->kept_policy[0]) {
    fputs(" No setting is reliably smaller for the job: the least, <code>", out);
    ana_html_escape(out, j->kept_policy);
    fprintf(out, "</code>, saves at most %s on the ranks' worst, not more than %s (the floor and what the replay "
                 "cannot tell).", sz(j->kept_save, b1, sizeof b1), sz(j->kept_floor, b2, sizeof b2));
  }
  fputs(" Every rank is a row of <a href=\"#ranks--1\">Ranks side by side</a> at the end.</p>\n</section>\n", out);
}

static json_t *job_json(ana_db_t *db, job_t *j) {
  spread_t sp = spread_of(j);
  json_t *o = json_object(), *ranks = json_array(), *cs = json_array();
  json_object_set_new(o, "command_line", json_string(j->command));
  json_object_set_new(o, "world_size", json_integer(j->world_size));
  json_object_set_new(o, "default_policy", json_string(j->dflt));
  json_object_set_new(o, "job_policy", j->best[0] ? json_string(j->best) : json_null());
  json_object_set_new(o, "job_worst_reserved_bytes", j->best_worst >= 0 ? json_integer(j->best_worst) : json_null());
  json_object_set_new(o, "default_kept_over", j->kept_policy[0] ? json_string(j->kept_policy) : json_null());
  json_object_set_new(o, "default_worst_reserved_bytes", j->dflt_worst >= 0 ? json_integer(j->dflt_worst) : json_null());
  json_object_set_new(o, "limiting_rank", json_integer(j->u[j->limiting].rank));
  json_object_set_new(o, "limiting_device", json_integer(j->u[j->limiting].device));
  json_object_set_new(o, "spread_max_over_min", json_real(sp.min > 0 ? (double)sp.max / (double)sp.min : 0.0));
  json_object_set_new(o, "spread_stddev_bytes", json_integer((json_int_t)sp.stddev));
  for (int i = 0; i < j->nu; i++) {
    const unit_t *u = &j->u[i];
    json_t *r = json_object();
    json_object_set_new(r, "rank", json_integer(u->rank));
    json_object_set_new(r, "device", json_integer(u->device));
    json_object_set_new(r, "trace_id", json_integer(u->trace_id));
    json_object_set_new(r, "peak_live_bytes", json_integer(u->live));
    json_object_set_new(r, "peak_mapped_bytes", json_integer(u->mapped));
    json_object_set_new(r, "default_reserved_bytes", u->dflt >= 0 ? json_integer(u->dflt) : json_null());
    json_object_set_new(r, "job_reserved_bytes", u->best >= 0 ? json_integer(u->best) : json_null());
    json_array_append_new(ranks, r);
  }
  json_object_set_new(o, "ranks", ranks);
  diff_t d[TOP_CALLSITES];
  int nd = callsite_diffs(db, j, d);
  for (int i = 0; i < nd; i++) {
    json_t *c = json_object();
    json_object_set_new(c, "callsite", json_string(d[i].callsite));
    json_object_set_new(c, "min_bytes", json_integer(d[i].min));
    json_object_set_new(c, "min_rank", json_integer(d[i].min_rank));
    json_object_set_new(c, "max_bytes", json_integer(d[i].max));
    json_object_set_new(c, "max_rank", json_integer(d[i].max_rank));
    json_array_append_new(cs, c);
  }
  json_object_set_new(o, "callsites_differing", cs);
  return o;
}

/* RFC 4180 with spreadsheet formulas neutralised (as ana_report.c's writer). */
static void csv_text(FILE *out, const char *s) {
  fputc('"', out);
  if (s[0] && strchr("=+-@", s[0])) fputc('\'', out);
  for (; *s; s++) {
    if (*s == '"') fputc('"', out);
    fputc(*s, out);
  }
  fputc('"', out);
}

static void print_csv_rows(FILE *out, const job_t *j) {
  for (int i = 0; i < j->nu; i++) {
    const unit_t *u = &j->u[i];
    csv_text(out, j->command);
    fprintf(out, ",%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 ",", j->world_size, u->rank, u->device,
            u->live, u->mapped);
    if (u->dflt >= 0) fprintf(out, "%" PRId64, u->dflt);
    fputc(',', out);
    if (u->best >= 0) fprintf(out, "%" PRId64, u->best);
    fputc(',', out);
    csv_text(out, j->best);
    fprintf(out, ",%d\n", i == j->limiting);
  }
}

gm_status_t ana_ranks(ana_db_t *db, FILE *out, ana_ranks_format_t fmt, int *jobs, gm_err_t *err) {
  sqlite3_stmt *st = NULL;
  *jobs = 0;
  gm_status_t s = ana_prepare(db, &st,
                              "SELECT COALESCE(command_line, ''), COALESCE(world_size, -1), COUNT(*) FROM traces"
                              " WHERE rank IS NOT NULL GROUP BY 1, 2 HAVING COUNT(*) > 1 ORDER BY MIN(trace_id)",
                              err);
  if (s < 0) return gm_err_wrap(err, "ranks");
  json_t *all = fmt == ANA_RANKS_JSON ? json_array() : NULL;
  if (fmt == ANA_RANKS_CSV)
    fprintf(out, "command_line,world_size,rank,device,peak_live_bytes,peak_mapped_bytes,default_reserved_bytes,"
                 "job_reserved_bytes,job_policy,limiting\n");
  while (s >= 0 && sqlite3_step(st) == SQLITE_ROW) {
    job_t j;
    memset(&j, 0, sizeof j);
    snprintf(j.command, sizeof j.command, "%s", (const char *)sqlite3_column_text(st, 0));
    j.world_size = sqlite3_column_int64(st, 1);
    s = load_units(db, &j, err);
    if (s >= 0 && !j.nu && fmt == ANA_RANKS_TEXT) { /* ranks, but none allocates: say so, not "no job" */
      char ec[256];
      if (*jobs) fputc('\n', out);
      (*jobs)++;
      fprintf(out, "job: %s (world size %" PRId64 ", %lld traces): no rank allocates GPU memory: nothing to compare\n",
              gm_escape(j.command, ec, sizeof ec), j.world_size, (long long)sqlite3_column_int64(st, 2));
    }
    if (s >= 0 && j.nu) s = choose(db, &j, err);
    if (s >= 0 && j.nu) {
      for (int i = 0; i < j.nu; i++) {
        if (judged(&j.u[i]) > judged(&j.u[j.limiting])) j.limiting = i;
        if (j.u[i].dflt > j.dflt_worst) j.dflt_worst = j.u[i].dflt;
      }
      if (*jobs && fmt == ANA_RANKS_TEXT) fputc('\n', out);
      (*jobs)++;
      if (fmt == ANA_RANKS_TEXT) print_text(db, out, &j);
      else if (fmt == ANA_RANKS_HTML) print_html(out, &j, *jobs);
      else if (fmt == ANA_RANKS_CSV) print_csv_rows(out, &j);
      else json_array_append_new(all, job_json(db, &j));
    }
    free(j.u);
  }
  sqlite3_finalize(st);
  if (all) {
    if (s >= 0) {
      json_dumpf(all, out, JSON_COMPACT);
      fputc('\n', out);
    }
    json_decref(all);
  }
  if (s >= 0 && !*jobs && fmt == ANA_RANKS_TEXT)
    fprintf(out, "no job with several ranks loaded (traces whose header has a rank, of one command line and "
                 "world size)\n");
  return s < 0 ? gm_err_wrap(err, "ranks") : GM_OK;
}
