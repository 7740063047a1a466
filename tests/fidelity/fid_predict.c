/* fid_predict.c: the fidelity tools behind traces/snapshots/PREDICTION.md.
 *
 *   predict table DIR       for each workload of DIR/MANIFEST.tsv: import its default-setting
 *                           snapshot once, replay it with the pytorch policy under every other
 *                           setting of the manifest, and print a Markdown table of predicted
 *                           vs real peak reserved (torch's max_memory_reserved of that run).
 *   predict one DIR FILE    replay DIR/FILE under its own settings (with the real run's segment
 *                           addresses) and print the segment sequences around the first
 *                           divergence (a debugging aid).
 *   predict bump DIR FILE   the same with bump-pointer addresses (as a prediction has).
 *   predict as DIR FILE CONF  replay DIR/FILE under CONF (no fraction) and print the same. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "recorder/snapshot/snap_import.h"
#include "tests/fidelity/fid_addresses.h"
#include "tests/fidelity/fid_manifest.h"
#include "tests/fidelity/fid_replay.h"

static int import(const char *dir, const char *file, char *out, size_t n, gm_err_t *err) {
  char in[1024];
  snprintf(in, sizeof(in), "%s/%s", dir, file);
  const char *tmp = getenv("TMPDIR");
  snprintf(out, n, "%s/gpumem-predict-%d-%s.zst", tmp ? tmp : "/tmp", (int)getpid(), file);
  return snap_import_file(in, out, NULL, NULL, err) == GM_OK ? 0 : -1;
}

static void extra_for(const fid_entry_t *e, char *buf, size_t n) {
  buf[0] = 0;
  if (e->fraction[0]) snprintf(buf, n, "per_process_memory_fraction:%s", e->fraction);
}

/* DIR/MANIFEST.tsv, or one error line on stderr and -1. */
static int read_manifest(const char *dir, fid_entry_t **m, size_t *n) {
  gm_err_t err = {0};
  char mp[1024];
  snprintf(mp, sizeof(mp), "%s/MANIFEST.tsv", dir);
  if (fid_manifest_read(mp, m, n, &err) == GM_OK) return 0;
  fprintf(stderr, "predict: error: %s\n", err.msg);
  return -1;
}

static fid_addr_t table_addrs = FID_ADDR_DRIVER;

static int table(const char *dir) {
  fid_entry_t *m;
  size_t n;
  gm_err_t err = {0};
  if (read_manifest(dir, &m, &n)) return 1;
  printf("| workload | setting | PYTORCH_CUDA_ALLOC_CONF | predicted peak reserved (B) | real "
         "max_memory_reserved (B) | error %% | replayed under |\n|---|---|---|---:|---:|---:|---|\n");
  double worst = 0;
  int rows = 0, fails = 0;
  for (size_t k = 0; k < n; k++) {
    if (strcmp(m[k].setting, "default") != 0) continue;
    char trace[1200];
    if (import(dir, m[k].file, trace, sizeof(trace), &err)) {
      fprintf(stderr, "predict: error: %s\n", err.msg);
      free(m);
      return 1;
    }
    for (size_t j = 0; j < n; j++) {
      if (strcmp(m[j].workload, m[k].workload) != 0) continue;
      char extra[128];
      extra_for(&m[j], extra, sizeof(extra));
      fid_result_t r;
      /* the default trace, the other run's settings (verbatim) and fraction */
      if (fid_replay(trace, m[j].alloc_conf, extra[0] ? extra : NULL, m[j].total_memory, table_addrs,
                     &r, &err) != GM_OK) {
        printf("| %s | %s | `%s` | error: %s | %" PRIu64 " | | |\n", m[j].workload, m[j].setting,
               m[j].alloc_conf, err.msg, m[j].max_reserved);
        fails++;
        continue;
      }
      double e = m[j].max_reserved
                     ? 100.0 * ((double)r.actual_peak - (double)m[j].max_reserved) /
                           (double)m[j].max_reserved
                     : 0;
      if (e < 0 ? -e > worst : e > worst) worst = e < 0 ? -e : e;
      rows++;
      printf("| %s | %s | `%s` | %" PRIu64 " | %" PRIu64 " | %+.2f | `pytorch:%s` |\n",
             m[j].workload, m[j].setting, m[j].alloc_conf[0] ? m[j].alloc_conf : "(default)",
             r.actual_peak, m[j].max_reserved, e, r.conf);
      fid_result_free(&r);
    }
    remove(trace);
  }
  printf("\n%d rows, largest |error| %.2f %%%s\n", rows, worst, fails ? ", some rows failed" : "");
  free(m);
  return fails ? 1 : 0;
}

/* The address policies' scores on every cudaMalloc snapshot of DIR (fid_addresses.h). */
static int addresses(const char *dir) {
  fid_entry_t *m;
  size_t n;
  gm_err_t err = {0};
  if (read_manifest(dir, &m, &n)) return 1;
  fid_addr_stats_t tot[2] = {{0}};
  printf("| snapshot | segments | exact: driver | exact: bump | step: driver | step: bump | same-size pairs | in order: driver | in order: bump |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (size_t k = 0; k < n; k++) {
    if (strstr(m[k].alloc_conf, "expandable_segments:True")) continue; /* maps, not cuMemAlloc */
    char trace[1200];
    fid_addr_stats_t st[2] = {{0}};
    if (import(dir, m[k].file, trace, sizeof(trace), &err) ||
        fid_address_check(trace, RP_VA_DRIVER, &st[0], &err) ||
        fid_address_check(trace, RP_VA_BUMP, &st[1], &err)) {
      fprintf(stderr, "predict: error: %s: %s\n", m[k].file, err.msg);
      free(m);
      return 1;
    }
    remove(trace);
    printf("| %s | %" PRIu64 " | %" PRIu64 " | %" PRIu64 " | %" PRIu64 " | %" PRIu64 " | %" PRIu64
           " | %" PRIu64 " | %" PRIu64 " |\n",
           m[k].file, st[0].segments, st[0].exact, st[1].exact, st[0].step, st[1].step,
           st[0].pairs, st[0].pairs_same,
           st[1].pairs_same);
    for (int j = 0; j < 2; j++) {
      tot[j].segments += st[j].segments;
      tot[j].exact += st[j].exact;
      tot[j].step += st[j].step;
      tot[j].pairs += st[j].pairs;
      tot[j].pairs_same += st[j].pairs_same;
    }
  }
  for (int j = 0; j < 2; j++)
    printf("%s%s: %" PRIu64 " of %" PRIu64 " segment addresses exact (%.1f %%), %" PRIu64
           " at the real offset from the one before (%.1f %%), %" PRIu64 " of %" PRIu64
           " same-size pairs in the real order (%.1f %%)\n",
           j ? "" : "\n", j ? "bump" : "driver", tot[j].exact, tot[j].segments,
           tot[j].segments ? 100.0 * tot[j].exact / tot[j].segments : 0, tot[j].step,
           tot[j].segments ? 100.0 * tot[j].step / tot[j].segments : 0, tot[j].pairs_same,
           tot[j].pairs, tot[j].pairs ? 100.0 * tot[j].pairs_same / tot[j].pairs : 0);
  free(m);
  return 0;
}

static void around(const char *what, const fid_seq_t *s, int64_t at) {
  int64_t lo = at - 4 < 0 ? 0 : at - 4, hi = at + 4;
  printf("%s:\n", what);
  for (int64_t k = lo; k <= hi && (size_t)k < s->n; k++)
    printf("  %s#%" PRId64 " %s %" PRIu64 " B dev %u req #%" PRIu64 "\n", k == at ? "> " : "  ", k,
           fid_op_name(s->v[k].op), s->v[k].size, s->v[k].device, s->v[k].req);
}

static int one(const char *dir, const char *file, const char *conf, fid_addr_t addrs) {
  fid_entry_t *m;
  size_t n;
  gm_err_t err = {0};
  char p[1024];
  snprintf(p, sizeof(p), "%s/MANIFEST.tsv", dir);
  if (fid_manifest_read(p, &m, &n, &err) != GM_OK) {
    fprintf(stderr, "predict: error: %s\n", err.msg);
    return 1;
  }
  const fid_entry_t *e = NULL;
  for (size_t k = 0; k < n; k++)
    if (strcmp(m[k].file, file) == 0) e = &m[k];
  if (!e) {
    fprintf(stderr, "predict: error: '%s' is not in %s\n", file, p);
    free(m);
    return 1;
  }
  char trace[1200], extra[128];
  extra_for(e, extra, sizeof(extra));
  fid_result_t r;
  if (import(dir, file, trace, sizeof(trace), &err) ||
      fid_replay(trace, conf, conf ? NULL : (extra[0] ? extra : NULL), e->total_memory, addrs, &r, &err)) {
    fprintf(stderr, "predict: error: %s\n", err.msg);
    free(m);
    return 1;
  }
  printf("%s under pytorch:%s: %" PRIu64 " requests, segment events snapshot %zu replay %zu, peak "
         "snapshot %" PRIu64 " replay %" PRIu64 " torch %" PRIu64 "\n",
         file, r.conf, r.requests, r.expected.n, r.actual.n, r.expected_peak, r.actual_peak,
         e->max_reserved);
  if (r.diverge < 0) {
    printf("identical segment sequences\n");
  } else {
    printf("%s\n", r.detail);
    if (r.place_diverge >= 0) printf("%s\n", r.place_detail);
    around("snapshot", &r.expected, r.diverge);
    around("replay", &r.actual, r.diverge);
  }
  int rc = r.diverge < 0 ? 0 : 3;
  fid_result_free(&r);
  remove(trace);
  free(m);
  return rc;
}

int main(int argc, char **argv) {
  if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
    printf("usage: predict table DIR | predict one|bump DIR FILE | predict as DIR FILE CONF\n"
           "Cross-policy prediction table and fidelity replays of the snapshot corpus.\n");
    return 0;
  }
  if (argc == 3 && !strcmp(argv[1], "table")) return table(argv[2]);
  if (argc == 3 && !strcmp(argv[1], "addresses")) return addresses(argv[2]);
  if (argc == 4 && !strcmp(argv[1], "table") && !strcmp(argv[2], "--addresses=bump")) {
    table_addrs = FID_ADDR_BUMP;
    return table(argv[3]);
  }
  if (argc == 4 && !strcmp(argv[1], "one")) return one(argv[2], argv[3], NULL, FID_ADDR_ORACLE);
  if (argc == 4 && !strcmp(argv[1], "bump")) return one(argv[2], argv[3], NULL, FID_ADDR_BUMP);
  if (argc == 4 && !strcmp(argv[1], "driver")) return one(argv[2], argv[3], NULL, FID_ADDR_DRIVER);
  if (argc == 5 && !strcmp(argv[1], "as")) return one(argv[2], argv[3], argv[4], FID_ADDR_ORACLE);
  fprintf(stderr, "predict: bad usage\ntry 'predict --help'\n");
  return 2;
}
