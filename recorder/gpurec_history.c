/* gpurec_history.c: after the job, PyTorch's memory histories (the pickles gpurec's
 * sitecustomize dumped, rec_torch.c) become traces: merged into each process's own CUPTI trace
 * in auto mode (snapshot/snap_merge.c: one trace per process, capture mode torch-history), or
 * converted beside it in torch mode (NAME.torch.zst). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/gm_base.h"
#include "formats/gmt.h"
#include "recorder/gpurec_history.h"
#include "recorder/rec_core.h"
#include "recorder/rec_torch.h"
#include "recorder/snapshot/snap_import.h"

/* The header of the CUPTI trace this run wrote for process pid (host, GPU, versions, command
 * line): the provenance its PyTorch snapshot lacks. 0 if there is none. */
static int cupti_header_for(char *const *traces, int n, long pid, gmt_header_t *out) {
  for (int i = 0; i < n; i++) {
    gmt_reader_t *rd = NULL;
    if (gmt_reader_open(&rd, traces[i], NULL) < 0) continue;
    const gmt_header_t *h = gmt_reader_header(rd);
    int match = (long)h->pid == pid && gmt_header_copy(out, h, NULL) == GM_OK;
    gmt_reader_close(rd);
    if (match) return 1;
  }
  return 0;
}

/* A history that filled its ring (as many entries as GPUMEM_TORCH_MAX_ENTRIES, which the launcher
 * set) holds only the run's tail: said at once, not left for the user to find (issue 24). */
static void say_ring(const char *trace, uint64_t entries, int quiet) {
  const char *m = getenv("GPUMEM_TORCH_MAX_ENTRIES");
  uint64_t max = m ? strtoull(m, NULL, 10) : 0;
  if (quiet || !max || entries < max) return;
  fprintf(stderr, "gpurec: %s: WARNING: PyTorch's history ring filled (%llu entries): the trace covers only "
                  "the run's last %llu entries; what was alive before them is synthesised from the "
                  "snapshot, and a peak before them cannot be seen (--max-entries sets the ring)\n",
          trace, (unsigned long long)entries, (unsigned long long)max);
}

void gpurec_convert_torch(const char *dir, const char *tmpl, gpurec_run_t *r, int quiet) {
  rec_torch_snap_t snaps[64];
  int n = rec_torch_list(dir, snaps, 64);
  int ncupti = r->ntraces; /* the CUPTI traces come first; torch traces are appended below */
  for (int i = 0; i < n; i++) {
    char out[4200];
    gm_err_t err;
    gm_err_clear(&err);
    if (rec_trace_name_tag(tmpl, "torch", snaps[i].rank, snaps[i].pid, out, sizeof out, &err) < 0) {
      fprintf(stderr, "gpurec: error: %s\n", err.msg);
      continue;
    }
    snap_import_stats_t st;
    memset(&st, 0, sizeof st);
    gmt_header_t prov;
    gmt_header_init(&prov);
    int has_prov = cupti_header_for(r->traces, ncupti, snaps[i].pid, &prov);
    gm_status_t cs = snap_import_file_prov(snaps[i].path, out, NULL, has_prov ? &prov : NULL, &st, &err);
    gmt_header_free(&prov);
    if (cs < 0) {
      char e1[1024], e2[GM_ERR_MSG_MAX * 4];
      fprintf(stderr, "gpurec: error: cannot convert the PyTorch snapshot '%s': %s\n", gm_escape(snaps[i].path, e1, sizeof e1),
              gm_escape(err.msg, e2, sizeof e2));
      continue;
    }
    if (n == 1 && snaps[i].rank < 0) {
      /* "<stem>.torch.zst" */
      char want[4200];
      snprintf(want, sizeof want, "%s", tmpl);
      size_t l = strlen(want);
      if (l >= 4 && strcmp(want + l - 4, ".zst") == 0) want[l - 4] = '\0';
      strncat(want, ".torch.zst", sizeof want - strlen(want) - 1);
      if (rename(out, want) == 0) snprintf(out, sizeof out, "%s", want);
    }
    say_ring(out, st.entries, quiet);
    if (r->ntraces < GPUREC_MAX_TRACES) r->traces[r->ntraces++] = strdup(out);
  }
  if (n == 0 && !quiet)
    fprintf(stderr, "gpurec: torch mode: no PyTorch memory snapshot was written (did the program "
                    "use torch.cuda?)\n");
}

void gpurec_progress_init(gpurec_progress_t *p, const char *name, int quiet) {
  p->name = name;
  p->on = !quiet && isatty(STDERR_FILENO);
  p->shown = 0;
}

void gpurec_progress_show(void *ctx, int pass, uint64_t events, uint64_t chunks, uint64_t total) {
  gpurec_progress_t *p = ctx;
  if (!p->on) return;
  char name[512];
  gm_escape(p->name, name, sizeof name);
  const char *what = pass == 1 ? "reading" : "writing";
  if (total)
    fprintf(stderr, "\rgpurec: merging %s: pass %d of 2 (%s), chunk %llu of %llu (%.0f%%)", name, pass, what,
            (unsigned long long)chunks, (unsigned long long)total, 100.0 * (double)chunks / (double)total);
  else
    fprintf(stderr, "\rgpurec: merging %s: pass %d of 2 (%s), %llu M events", name, pass, what,
            (unsigned long long)(events / 1000000));
  fflush(stderr);
  p->shown = 1;
}

void gpurec_progress_end(gpurec_progress_t *p) {
  if (p->shown) fputc('\n', stderr);
  p->shown = 0;
}

/* Which of the run's traces process pid wrote (-1: none). */
static int trace_of_pid(char *const *traces, int n, long pid, int *has_torch) {
  for (int i = 0; i < n; i++) {
    gmt_reader_t *rd = NULL;
    if (gmt_reader_open(&rd, traces[i], NULL) < 0) continue;
    const gmt_header_t *h = gmt_reader_header(rd);
    int match = (long)h->pid == pid;
    if (has_torch) *has_torch = gmt_header_framework_version(h, GMT_FW_PYTORCH) != NULL;
    gmt_reader_close(rd);
    if (match) return i;
  }
  return -1;
}

/* What the sitecustomize noted while the job ran (rec_torch.c, _gpurec_limits: the memory
 * fraction the job set itself, also per device, its OOM's message), into the header of the
 * process's trace: the OOM verdict replays within that limit (gpureplay_trace.c, recorded_cap).
 * Only these keys (and the fraction's of devices 0..NOTE_DEVICES-1); the last value of each
 * wins; a line too long or unknown is skipped. */
static const char *const k_note_keys[] = {"torch.per_process_memory_fraction", "oom.message"};
#define NOTE_KEYS (sizeof k_note_keys / sizeof k_note_keys[0])
#define NOTE_DEVICES 16
#define NOTE_ALL (NOTE_KEYS + NOTE_DEVICES)

/* "torch.per_process_memory_fraction.<d>" -> d; -1 for any other key. */
static int note_device(const char *key) {
  size_t l = strlen(k_note_keys[0]);
  if (strncmp(key, k_note_keys[0], l) || key[l] != '.' || !key[l + 1]) return -1;
  int d = 0;
  for (const char *p = key + l + 1; *p; p++) {
    if (*p < '0' || *p > '9' || d >= NOTE_DEVICES) return -1;
    d = d * 10 + (*p - '0');
  }
  return d < NOTE_DEVICES ? d : -1;
}

static void apply_notes(const char *dir, int rank, long pid, const char *trace, int quiet) {
  char path[4200], rk[16];
  snprintf(rk, sizeof rk, "%d", rank);
  snprintf(path, sizeof path, "%s/notes.%s.%ld.txt", dir, rank < 0 ? "-" : rk, pid);
  FILE *f = fopen(path, "r");
  if (!f) return;
  char vals[NOTE_ALL][512] = {{0}}, keys[NOTE_DEVICES][64], line[1024];
  while (fgets(line, sizeof line, f)) {
    size_t len = strcspn(line, "\n");
    if (line[len] != '\n') continue; /* longer than any note gpurec writes */
    line[len] = 0;
    char *eq = strchr(line, '=');
    if (!eq) continue;
    *eq = 0;
    for (size_t k = 0; k < NOTE_KEYS; k++)
      if (!strcmp(line, k_note_keys[k])) snprintf(vals[k], sizeof vals[k], "%s", eq + 1);
    int d = note_device(line);
    if (d >= 0) snprintf(vals[NOTE_KEYS + (size_t)d], sizeof vals[0], "%s", eq + 1);
  }
  fclose(f);
  const char *kv[2 * NOTE_ALL];
  size_t n = 0;
  for (size_t k = 0; k < NOTE_ALL; k++)
    if (vals[k][0]) {
      if (k >= NOTE_KEYS) snprintf(keys[k - NOTE_KEYS], sizeof keys[0], "%s.%d", k_note_keys[0], (int)(k - NOTE_KEYS));
      kv[2 * n] = k < NOTE_KEYS ? k_note_keys[k] : keys[k - NOTE_KEYS];
      kv[2 * n + 1] = vals[k];
      n++;
    }
  gm_err_t err;
  gm_err_clear(&err);
  if (n && gmt_trace_set_kv(trace, kv, n, &err) < 0 && !quiet)
    fprintf(stderr, "gpurec: warning: %s: the limit the job set itself is not in its header: %s\n", trace, err.msg);
}

/* Auto mode: each PyTorch process's history merged into its own CUPTI trace, which it replaces
 * (snap_merge.c): the one trace of the process. A history without a CUPTI trace (CUPTI missing
 * or held by a profiler) becomes a trace on its own; a PyTorch process's CUPTI trace without a
 * history (killed by SIGKILL, or os._exit) stays as CUPTI saw it, and the user is told. */
void gpurec_merge_torch(const char *dir, const char *want, const char *stacks, gpurec_run_t *r, int quiet) {
  rec_torch_snap_t snaps[64];
  int n = rec_torch_list(dir, snaps, 64);
  int ncupti = r->ntraces;
  char merged[GPUREC_MAX_TRACES] = {0};
  for (int i = 0; i < n; i++) {
    gm_err_t err;
    gm_err_clear(&err);
    char e1[1024], e2[GM_ERR_MSG_MAX * 4];
    int t = trace_of_pid(r->traces, ncupti, snaps[i].pid, NULL);
    if (t >= 0) {
      snap_merge_stats_t ms;
      gpurec_progress_t pg;
      gpurec_progress_init(&pg, r->traces[t], quiet);
      gm_status_t ms_st = snap_merge_file_progress(snaps[i].path, r->traces[t], r->traces[t], stacks, NULL, &ms,
                                                   gpurec_progress_show, &pg, &err);
      gpurec_progress_end(&pg);
      if (ms_st < 0) {
        fprintf(stderr, "gpurec: error: cannot merge PyTorch's memory history '%s' into %s (kept as CUPTI "
                        "saw it): %s\n", gm_escape(snaps[i].path, e1, sizeof e1), r->traces[t],
                gm_escape(err.msg, e2, sizeof e2));
        continue;
      }
      merged[t] = 1;
      apply_notes(dir, snaps[i].rank, snaps[i].pid, r->traces[t], quiet);
      char sites[128] = "";
      if (ms.site_notes || ms.allocs_with_callsite)
        snprintf(sites, sizeof sites, ", callsites for %llu of %llu allocations",
                 (unsigned long long)ms.allocs_with_callsite, (unsigned long long)ms.allocs);
      if (!quiet && ms.streamed)
        fprintf(stderr, "gpurec: %s: PyTorch's allocator trace (%llu entries, streamed%s) merged with the "
                        "CUPTI trace: %llu of %llu segments seen by CUPTI, %llu events of other libraries%s\n",
                r->traces[t], (unsigned long long)ms.entries, ms.cupti_truncated ? ", up to where the process stopped" : "",
                (unsigned long long)ms.segments_seen, (unsigned long long)ms.segments, (unsigned long long)ms.external,
                sites);
      else if (!quiet)
        fprintf(stderr, "gpurec: %s: PyTorch's history (%llu entries, stacks %s) merged with the CUPTI "
                        "trace: %llu of %llu segments seen by CUPTI, %llu events of other libraries%s\n",
                r->traces[t], (unsigned long long)ms.entries, stacks, (unsigned long long)ms.segments_seen,
                (unsigned long long)ms.segments, (unsigned long long)ms.external, sites);
      if (!ms.streamed) say_ring(r->traces[t], ms.entries, quiet);
      continue;
    }
    char out[4200];
    if (ncupti == 0 && n == 1 && snaps[i].rank < 0) {
      snprintf(out, sizeof out, "%s", want);
    } else if (rec_trace_name(want, snaps[i].rank, snaps[i].pid, out, sizeof out, &err) < 0) {
      fprintf(stderr, "gpurec: error: %s\n", err.msg);
      continue;
    }
    snap_import_stats_t st;
    if (snap_import_file(snaps[i].path, out, NULL, &st, &err) < 0) {
      fprintf(stderr, "gpurec: error: cannot convert the PyTorch snapshot '%s': %s\n",
              gm_escape(snaps[i].path, e1, sizeof e1), gm_escape(err.msg, e2, sizeof e2));
      continue;
    }
    apply_notes(dir, snaps[i].rank, snaps[i].pid, out, quiet);
    if (!quiet)
      fprintf(stderr, "gpurec: %s: PyTorch's history only (no CUPTI trace of process %ld to merge it with)\n",
              out, snaps[i].pid);
    if (r->ntraces < GPUREC_MAX_TRACES) r->traces[r->ntraces++] = strdup(out);
  }
  for (int t = 0; t < ncupti && !quiet; t++) {
    int torch = 0;
    if (merged[t]) continue;
    trace_of_pid(&r->traces[t], 1, -2, &torch);
    if (torch)
      fprintf(stderr, "gpurec: %s: PyTorch's memory history was not dumped (the process was killed "
                      "by SIGKILL, or left through os._exit): the trace holds what CUPTI saw, PyTorch's "
                      "segments, not its requests\n", r->traces[t]);
  }
}

