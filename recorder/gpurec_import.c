/* gpurec_import.c: `gpurec import FILE -o TRACE.zst`: a PyTorch memory snapshot (pickle) or a
 * trace in CSV text form into a gpumem trace. The input's kind and the output's directory are
 * checked before anything is read or made; a file of another kind (a trace, a results file, a
 * database) is refused with the command that takes it. After a snapshot it says what the user
 * must know before reading any figure from it: a run that ran out of memory, a history that
 * was off, a GPU whose memory the pickle does not give. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/gm_base.h"
#include "formats/gmt.h"
#include "recorder/gpurec_history.h"
#include "recorder/gpurec_import.h"
#include "recorder/rmm/rmm_import.h"
#include "recorder/snapshot/snap_import.h"

typedef struct import_config {
  const char *output;
  uint64_t gpu_memory; /* the recorded GPU's total memory, for the header */
  int quiet, help;
} import_config_t;

static int import_usage_error(const char *msg) {
  fputs("gpurec: error: ", stderr);
  gm_fputs_escaped(msg, stderr); /* it quotes the command line */
  fputs("\ntry 'gpurec import --help'\n", stderr);
  return 2;
}

/* One error line; paths and messages quote the input, so nothing in them reaches the
 * terminal as a control character. */
static void error_line(const char *what, const char *path, const char *msg) {
  char e1[1024], e2[GM_ERR_MSG_MAX * 4];
  if (path)
    fprintf(stderr, "gpurec: error: %s '%s': %s\n", what, gm_escape(path, e1, sizeof e1), gm_escape(msg, e2, sizeof e2));
  else
    fprintf(stderr, "gpurec: error: %s\n", gm_escape(msg, e2, sizeof e2));
}

/* What gpurec import says after a snapshot: what it made, and what the user should know before
 * reading any figure from it (a failure, a history that was off, an assumed GPU). */
static void import_notes(const char *in_path, const char *out_path, const snap_import_stats_t *st, uint64_t gpu_memory) {
  char b1[32], in[1024], out[1024], cs[1024];
  gm_escape(in_path, in, sizeof in);
  gm_escape(out_path, out, sizeof out);
  gm_escape(st->first_failed_callsite, cs, sizeof cs); /* the snapshot's text */
  fprintf(stderr, "gpurec: %s: %llu snapshot entries -> %llu events in %s\n", in, (unsigned long long)st->entries,
          (unsigned long long)st->events, out);
  gmt_reader_t *rd = NULL; /* a history that starts after the run did says so first (SPEC.md §3.4) */
  if (gmt_reader_open(&rd, out_path, NULL) == GM_OK) {
    gmt_coverage_t cov;
    char ct[1024];
    gmt_coverage(gmt_reader_header(rd), NULL, &cov);
    if (cov.partial && st->entries) fprintf(stderr, "gpurec: %s: %s\n", out, gmt_coverage_text(&cov, ct, sizeof ct));
    gmt_reader_close(rd);
  }
  if (st->entries == 0)
    fprintf(stderr, "gpurec: warning: '%s' has no allocation history (the snapshot was taken without "
                    "torch.cuda.memory._record_memory_history()): the trace holds only the %llu allocations "
                    "and segments alive when it was taken, nothing to replay. Record the history with "
                    "torch.cuda.memory._record_memory_history(max_entries=1000000) before the job allocates, or "
                    "record the job with `gpurec -- python train.py` (its default records this history)\n",
            in, (unsigned long long)st->synthetic);
  if (st->failed) {
    fprintf(stderr, "gpurec: %s: the recorded run ran out of memory: %llu failed request%s, the first %s on stream %llu%s%s%s; "
                    "`gpuanalyze report %s` says which setting would have served it\n",
            in, (unsigned long long)st->failed, st->failed == 1 ? "" : "s",
            gm_format_size(st->first_failed_size, b1, sizeof b1), (unsigned long long)st->first_failed_stream,
            cs[0] ? " (" : "", cs, cs[0] ? ")" : "", out);
  }
  if (!gpu_memory && st->entries)
    fprintf(stderr, "gpurec: note: a snapshot does not say which GPU it was taken on, and prealloc, bfc and "
                    "memory fractions depend on it; the replays will assume a size and say so. To give it: "
                    "`gpurec import %s --gpu-memory=SIZE -o %s` (e.g. 80GiB)\n", in, out);
}

/* What gpurec import says after an RMM log: what it made, what it tolerated, and which replays
 * model RMM (its own pool resources are not modelled). */
static void rmm_notes(const char *in_path, const char *out_path, const rmm_import_stats_t *st, uint64_t gpu_memory) {
  char in[1024], out[1024], b1[32], b2[32];
  gm_escape(in_path, in, sizeof in);
  gm_escape(out_path, out, sizeof out);
  fprintf(stderr, "gpurec: %s: RAPIDS RMM log, %llu lines -> %llu allocations, %llu frees, %llu failed in %s "
          "(device %d, %llu threads, %llu streams, %.3f s)\n", in, (unsigned long long)st->lines,
          (unsigned long long)st->allocs, (unsigned long long)st->frees, (unsigned long long)st->failures, out,
          st->device, (unsigned long long)st->threads, (unsigned long long)st->streams, (double)st->duration_ns / 1e9);
  if (st->truncated_last_line)
    fprintf(stderr, "gpurec: warning: the last line of '%s' has no newline (the process died while writing it?): "
            "dropped\n", in);
  if (st->clamped)
    fprintf(stderr, "gpurec: note: %llu timestamps were earlier than the line before (by up to 1 s: threads race "
            "for the log's lock): taken as the line before's\n", (unsigned long long)st->clamped);
  if (st->midnights)
    fprintf(stderr, "gpurec: note: the log's times of day pass midnight %llu time%s: a day added each time\n",
            (unsigned long long)st->midnights, st->midnights == 1 ? "" : "s");
  if (st->live_at_end)
    fprintf(stderr, "gpurec: note: %llu allocations (%s) are never freed in the log: live to the end of the trace\n",
            (unsigned long long)st->live_at_end, gm_format_size(st->live_bytes_at_end, b1, sizeof b1));
  if (st->failures)
    fprintf(stderr, "gpurec: %s: the logged run failed %llu allocation%s (the first of %s): `gpuanalyze report %s` "
            "says which setting would have served it\n", in, (unsigned long long)st->failures,
            st->failures == 1 ? "" : "s", gm_format_size(st->first_failure_size, b2, sizeof b2), out);
  fprintf(stderr, "gpurec: note: RMM's own pool resources (pool, arena, binning) are not modelled: `gpureplay %s "
          "--policy=direct --policy=async` replays cuda_memory_resource and cuda_async_memory_resource; --sweep adds "
          "what PyTorch's and TensorFlow's allocators would reserve for the same requests\n", out);
  if (!gpu_memory && st->allocs)
    fprintf(stderr, "gpurec: note: an RMM log does not say which GPU it was taken on: the replays will assume a "
            "size and say so. To give it: `gpurec import %s --gpu-memory=SIZE -o %s`\n", in, out);
}

int gpurec_import(int argc, char **argv) {
  static const gm_opt_t opts[] = {
      {"output", 'o', GM_OPT_STR, "TRACE.zst", "trace to write", offsetof(import_config_t, output)},
      {"gpu-memory", 0, GM_OPT_SIZE, "SIZE",
       "total memory of the GPU the snapshot or RMM log was taken on (neither says; the replay's "
       "fractions and preallocated arenas are computed from it), e.g. 80GiB",
       offsetof(import_config_t, gpu_memory), 1ull << 20, GMT_MAX_SIZE},
      {"quiet", 'q', GM_OPT_FLAG, NULL, "only errors on stderr", offsetof(import_config_t, quiet)},
      {"help", 'h', GM_OPT_FLAG, NULL, "show this help and exit", offsetof(import_config_t, help)},
      {NULL, 0, 0, NULL, NULL, 0}};
  import_config_t cfg;
  memset(&cfg, 0, sizeof cfg);
  char **pos = calloc((size_t)argc + 1, sizeof *pos);
  int npos = 0;
  gm_err_t err;
  gm_err_clear(&err);
  if (!pos) return 1;
  if (gm_opts_parse(opts, argc, argv, &cfg, pos, &npos, 0, &err) < 0) {
    free(pos);
    return import_usage_error(err.msg);
  }
  if (cfg.help) {
    gm_opts_help(stdout, "gpurec import SNAPSHOT.pickle|TRACE.csv|RMM_LOG.csv|UNMERGED.zst -o TRACE.zst",
                 "Convert a PyTorch memory snapshot (torch.cuda.memory._dump_snapshot pickle, taken with\n"
                 "torch.cuda.memory._record_memory_history() on), a trace in CSV text form\n"
                 "(formats/SPEC.md) or a RAPIDS RMM allocation log (rmm.mr.LoggingResourceAdaptor)\n"
                 "into a gpumem trace for gpureplay and gpuanalyze; or merge a process's recording that\n"
                 "gpurec itself could not merge (gpurec killed with the job: the PyTorch requests it\n"
                 "streamed are still beside the driver's calls, and gpureplay refuses it).",
                 opts);
    free(pos);
    return 0;
  }
  if (npos != 1 || !cfg.output) {
    free(pos);
    return import_usage_error(npos != 1 ? "import needs exactly one input FILE" : "import needs -o TRACE.zst");
  }
  const char *in = pos[0];
  free(pos);
  /* The input is one of the two kinds import takes, and the output can be written: both
   * before anything is read or made. */
  gm_file_kind_t kind = gm_file_kind(in);
  char advice[GM_ERR_MSG_MAX];
  if ((kind != GM_FILE_TRACE || !gmt_trace_unmerged(in)) &&
      gm_file_advice(in, kind, GM_WANT(GM_FILE_PICKLE) | GM_WANT(GM_FILE_CSV) | GM_WANT(GM_FILE_RMM_LOG), advice,
                     sizeof advice)) {
    error_line(NULL, NULL, advice);
    return 1;
  }
  if (gm_output_check(cfg.output, &err) < 0) {
    error_line(NULL, NULL, err.msg);
    return 1;
  }
  FILE *f = fopen(in, "rb");
  if (!f) {
    error_line("cannot open", in, strerror(errno));
    return 1;
  }
  gm_status_t s;
  if (kind == GM_FILE_PICKLE) {
    fclose(f);
    snap_import_stats_t st;
    memset(&st, 0, sizeof st);
    gmt_header_t prov;
    gmt_header_init(&prov);
    prov.gpu_total_mem = cfg.gpu_memory;
    s = snap_import_file_prov(in, cfg.output, NULL, cfg.gpu_memory ? &prov : NULL, &st, &err);
    gmt_header_free(&prov);
    if (s >= 0 && !cfg.quiet) import_notes(in, cfg.output, &st, cfg.gpu_memory);
  } else if (kind == GM_FILE_TRACE) {
    /* a process's own recording that gpurec did not merge (gpurec was killed with the job):
     * PyTorch's streamed requests merged now, as gpurec would have, without the snapshot of
     * where they start (the settings come from the recorded environment) */
    fclose(f);
    snap_merge_stats_t ms;
    gpurec_progress_t pg;
    gpurec_progress_init(&pg, in, cfg.quiet);
    s = snap_merge_file_progress(NULL, in, cfg.output, "none", NULL, &ms, gpurec_progress_show, &pg, &err);
    gpurec_progress_end(&pg);
    char e1[1024], e2[1024];
    if (s >= 0 && !cfg.quiet)
      fprintf(stderr, "gpurec: %s: PyTorch's streamed requests (%llu entries) merged into %s\n",
              gm_escape(in, e1, sizeof e1), (unsigned long long)ms.entries, gm_escape(cfg.output, e2, sizeof e2));
  } else if (kind == GM_FILE_RMM_LOG) {
    rmm_import_stats_t st;
    s = rmm_import(f, in, cfg.output, cfg.gpu_memory, NULL, &st, &err);
    fclose(f);
    if (s >= 0 && !cfg.quiet) rmm_notes(in, cfg.output, &st, cfg.gpu_memory);
  } else if (cfg.gpu_memory) {
    fclose(f);
    return import_usage_error("--gpu-memory is for PyTorch snapshots (a CSV trace carries gpu_total_mem itself)");
  } else {
    s = gmt_csv_import(f, in, cfg.output, NULL, &err);
    fclose(f);
    char e1[1024], e2[1024];
    if (s >= 0 && !cfg.quiet)
      fprintf(stderr, "gpurec: %s: wrote %s\n", gm_escape(in, e1, sizeof e1), gm_escape(cfg.output, e2, sizeof e2));
  }
  if (s < 0) {
    error_line("cannot import", in, err.msg);
    return 1;
  }
  return 0;
}

