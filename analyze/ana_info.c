/* ana_info.c: `gpuanalyze info`: what a trace is (its provenance header) and what is in it
 * (duration, events by kind, devices, streams, peak live requested bytes), and how whole it is
 * (truncation, sequence gaps, records the source dropped, record kinds this reader skipped,
 * damaged chunks a salvaging reader skipped). A reader never hides damage, so neither does
 * this summary. */
#include "analyze/ana.h"

#include <inttypes.h>
#include <string.h>
#include <time.h>

/* gmt_string_fn over a reader: a batch never spans chunks, so its strings are current. */
static const char *reader_string(void *ctx, uint32_t id) { return gmt_reader_string(ctx, id); }

gm_status_t ana_trace_summarize(const char *path, unsigned flags, gmt_header_t *hdr, ana_summary_t *sum,
                                gmt_reader_stats_t *rs, char *damage, size_t damage_n, gm_err_t *err) {
  return ana_trace_summarize_progress(path, flags, hdr, sum, rs, damage, damage_n, NULL, NULL, err);
}

gm_status_t ana_trace_summarize_progress(const char *path, unsigned flags, gmt_header_t *hdr, ana_summary_t *sum,
                                         gmt_reader_stats_t *rs, char *damage, size_t damage_n,
                                         ana_progress_fn progress, void *pctx, gm_err_t *err) {
  gmt_reader_t *r = NULL;
  uint64_t next_progress = 1u << 22;
  ana_scan_t *s = NULL;
  gmt_header_init(hdr);
  if (damage && damage_n) damage[0] = '\0';
  gm_status_t st = gmt_reader_open_flags(&r, path, flags, err);
  if (st < 0) return gm_err_wrap(err, "cannot open '%s'", path);
  st = gmt_header_copy(hdr, gmt_reader_header(r), err);
  if (st >= 0) st = ana_scan_new(&s, NULL, NULL, err);
  if (st >= 0) st = ana_scan_set_trace(s, gmt_reader_header(r), reader_string, r, err);
  enum { CAP = 4096 };
  static gmt_event_t evs[CAP]; /* tools are single-threaded; keeps a big buffer off the stack */
  char failed_cs[sizeof sum->failed_callsite_text] = "";
  int have_cs = 0;
  while (st >= 0) {
    size_t n = 0;
    st = gmt_reader_next_batch(r, evs, CAP, &n, err);
    if (st < 0 || st == GM_END) break;
    for (size_t i = 0; i < n && st >= 0; i++) st = ana_scan_event(s, &evs[i], err);
    const gmt_reader_stats_t *now = gmt_reader_stats(r);
    if (progress && now->events >= next_progress) {
      progress(pctx, now->events, now->chunks, gmt_reader_chunk_count(r));
      next_progress = now->events + (1u << 22);
    }
    /* the first failed request's callsite, while its chunk (and its strings) is current */
    if (!have_cs && st >= 0 && ana_scan_summary(s)->failed_allocs) {
      const char *cs = gmt_reader_string(r, ana_scan_summary(s)->failed_callsite);
      snprintf(failed_cs, sizeof failed_cs, "%s", cs ? cs : "");
      have_cs = 1;
    }
  }
  if (st >= 0) st = ana_scan_finish(s, err);
  if (st >= 0) {
    *sum = *ana_scan_summary(s);
    snprintf(sum->failed_callsite_text, sizeof sum->failed_callsite_text, "%s", failed_cs);
    *rs = *gmt_reader_stats(r);
    if (damage && damage_n && gmt_reader_damage(r)) snprintf(damage, damage_n, "%s", gmt_reader_damage(r));
    st = GM_OK;
  } else {
    gm_err_wrap(err, "cannot read '%s'", path);
  }
  ana_scan_free(s);
  gmt_reader_close(r);
  return st;
}

/* Header strings come from the trace (a stranger's, maybe): escaped for the terminal. */
static const char *or_dash(const char *s) { return s && *s ? s : "-"; }

static void put(FILE *out, const char *label, const char *s) {
  fputs(label, out);
  gm_fputs_escaped(or_dash(s), out);
  fputc('\n', out);
}

static void print_duration(FILE *out, uint64_t ns) {
  if (ns >= 1000000000ull) fprintf(out, "%.3f s", (double)ns / 1e9);
  else if (ns >= 1000000ull) fprintf(out, "%.3f ms", (double)ns / 1e6);
  else fprintf(out, "%" PRIu64 " ns", ns);
}

char *ana_format_wallclock(uint64_t ns, char *buf, size_t n) {
  if (!ns) {
    snprintf(buf, n, "unknown");
    return buf;
  }
  time_t secs = (time_t)(ns / 1000000000ull);
  struct tm tm;
  if (!gmtime_r(&secs, &tm)) {
    snprintf(buf, n, "%" PRIu64 " ns since the epoch", ns);
    return buf;
  }
  char day[40];
  strftime(day, sizeof day, "%Y-%m-%d %H:%M:%S", &tm);
  snprintf(buf, n, "%s.%03u UTC", day, (unsigned)(ns / 1000000ull % 1000ull));
  return buf;
}

/* The recorded run's failure, first: it is why the user is here. */
static void print_failure(FILE *out, const gmt_header_t *h, const ana_summary_t *s) {
  char b1[32], b2[32];
  if (!s->failed_allocs) return;
  fprintf(out, "OUT OF MEMORY:  the recorded run failed %" PRIu64 " request%s; the first: %s on ",
          s->failed_allocs, s->failed_allocs == 1 ? "" : "s", gm_format_size(s->failed_size, b1, sizeof b1));
  if (s->failed_stream == GMT_STREAM_NONE) fprintf(out, "no stream");
  else fprintf(out, "stream %" PRIu64, s->failed_stream);
  fprintf(out, " of device %u at event %" PRIu64 ", t=", s->failed_device, s->failed_seq);
  print_duration(out, s->failed_ts_ns);
  fputs("\n                ", out);
  gm_fputs_escaped(s->failed_callsite_text[0] ? s->failed_callsite_text : "(no callsite recorded)", out);
  fputc('\n', out);
  fprintf(out, "                live then %s", gm_format_size(s->failed_live_bytes, b1, sizeof b1));
  if (s->failed_segment_bytes)
    fprintf(out, ", reserved (segments) %s", gm_format_size(s->failed_segment_bytes, b2, sizeof b2));
  uint64_t dfree = 0;
  const char *v = gmt_header_kv_get(h, "torch.snapshot.oom_device_free_bytes");
  if (v && gm_parse_u64(v, &dfree, NULL) == GM_OK)
    fprintf(out, ", free on the device %s", gm_format_size(dfree, b2, sizeof b2));
  fprintf(out, "\n                `gpuanalyze report TRACE` says which setting would have served it\n");
}

void ana_owners_print(FILE *out, const gmt_header_t *h, const ana_summary_t *s, const char *ind) {
  const gmt_owners_result_t *o = &s->owners;
  char b1[32], b2[32];
  int any_ctx = 0;
  (void)h;
  for (int d = 0; d < o->n_devices; d++) {
    const gmt_owner_dev_t *od = &o->dev[d];
    uint64_t other = gmt_owners_other_bytes(od);
    fprintf(out, "%smapped:         %s at most on device %u (the framework's %s", ind,
            gm_format_size(od->peak_mapped, b1, sizeof b1), od->device,
            gm_format_size(gmt_owners_framework_bytes(od), b2, sizeof b2));
    fprintf(out, " and %s of other owners then)\n", gm_format_size(other, b1, sizeof b1));
    for (int k = 0; k < o->n_owners; k++) {
      if (!od->peak[k]) continue;
      char name[GMT_OWNER_NAME + 8];
      gm_escape(o->names[k], name, sizeof name); /* from the trace's callsites */
      fprintf(out, "%s  %-30s %10s at the peak", ind, name, gm_format_size(od->at_peak[k], b1, sizeof b1));
      if (od->peak[k] != od->at_peak[k]) fprintf(out, ", %s at its own peak", gm_format_size(od->peak[k], b2, sizeof b2));
      fputc('\n', out);
    }
    /* The context and the module code the driver loaded: beside the maps, counted once */
    uint64_t ctx = 0;
    if (gmt_owners_context_bytes(od, &ctx)) {
      any_ctx = 1;
      fprintf(out, "%s  %-30s %10s (%s", ind, "CUDA context, module code", gm_format_size(ctx, b1, sizeof b1),
              gmt_usage_method_text(od->context_method));
      if (od->context_samples > 1)
        fprintf(out, "; %s when the context was made, %s at the end", gm_format_size(od->context_first, b1, sizeof b1),
                gm_format_size(od->context_last, b2, sizeof b2));
      fprintf(out, ")\n");
      fprintf(out, "%s  %-30s %10s (mapped at its peak and the context)\n", ind, "on the device at most",
              gm_format_size(od->peak_mapped + ctx, b1, sizeof b1));
    }
  }
  if (o->n_devices && !any_ctx)
    fprintf(out, "%s  %-30s not recorded (the trace holds no figure for it)\n", ind, "CUDA context");
}

void ana_info_print(FILE *out, const char *path, const gmt_header_t *h, const ana_summary_t *s,
                    const gmt_reader_stats_t *rs, const char *damage) {
  char b1[32];
  char e1[512], e2[512];
  put(out, "trace:          ", path);
  print_failure(out, h, s); /* the headline: why the user is here */
  gmt_coverage_t cov;        /* then, before any figure, a trace of part of the run (SPEC.md §3.4) */
  gmt_coverage(h, rs, &cov);
  if (cov.partial) {
    char ct[1024];
    fprintf(out, "coverage:       %s\n", gmt_coverage_text(&cov, ct, sizeof ct));
  }
  fprintf(out, "format:         version %u (min reader %u)\n", h->format_version, h->min_reader);
  put(out, "tool:           ", h->tool);
  fprintf(out, "capture mode:   %s\n", or_dash(gmt_capture_mode_name(h->capture_mode)));
  put(out, "host:           ", h->host);
  fprintf(out, "pid:            %u\n", h->pid);
  if (h->rank >= 0) fprintf(out, "rank:           %d of %d\n", h->rank, h->world_size);
  fprintf(out, "start time:     %s (t=0: the times below count from here)\n",
          ana_format_wallclock(h->start_time_ns, b1, sizeof b1));
  put(out, "command line:   ", h->command_line);
  fprintf(out, "gpu:            %s (%s), %s\n", gm_escape(or_dash(h->gpu_name), e1, sizeof e1),
          gm_escape(or_dash(h->gpu_uuid), e2, sizeof e2),
          h->gpu_total_mem ? gm_format_size(h->gpu_total_mem, b1, sizeof b1) : "memory unknown");
  fputs("driver/cuda/cupti: ", out);
  gm_fputs_escaped(or_dash(h->driver_version), out);
  fputs(" / ", out);
  gm_fputs_escaped(or_dash(h->cuda_version), out);
  fputs(" / ", out);
  put(out, "", h->cupti_version);
  for (size_t i = 0; i < h->n_kv; i++) {
    fputs("setting:        ", out);
    gm_fputs_escaped(h->kv[i].key, out);
    fputc('=', out);
    gm_fputs_escaped(h->kv[i].value ? h->kv[i].value : "", out);
    fputc('\n', out);
  }
  /* Requests mode switched PyTorch to another allocator than the one the job runs under: the
   * job's own figures printed inside this run are that backend's (issue 17 item 4). */
  const char *mode = gmt_capture_mode_name(h->capture_mode);
  for (size_t i = 0; mode && strcmp(mode, "requests") == 0 && i < h->n_kv; i++)
    if (h->kv[i].value && strcmp(h->kv[i].key, "PYTORCH_CUDA_ALLOC_CONF") == 0 &&
        strstr(h->kv[i].value, "backend:cudaMallocAsync")) {
      fputs("note:           recorded under backend:cudaMallocAsync, which gpurec --mode=requests set: not the "
            "allocator the job runs under by itself. PyTorch's own peaks inside this run are that backend's "
            "(the driver pool's, which move with GPU timing where buffers cross streams); replay the job's own "
            "with --policy=pytorch[:CONF], or record with gpurec's default mode, which leaves the allocator as it "
            "is\n",
            out);
      break;
    }
  fprintf(out, "duration:       ");
  print_duration(out, s->events ? s->last_ts_ns - s->min_ts_ns : 0); /* min = first when in order */
  if (s->events) {
    fprintf(out, s->ts_backward ? " (earliest event t=" : " (first event t=");
    print_duration(out, s->min_ts_ns);
    fprintf(out, s->ts_backward ? ", latest t=" : ", last t=");
    print_duration(out, s->last_ts_ns);
    fprintf(out, ")");
  }
  char fwb[128];
  fprintf(out, "\nframework:      %s\n", gmt_header_frameworks_text(h, fwb, sizeof fwb));
  fprintf(out, "holds:          %s\n", gmt_trace_holds(h, -1, s->async_device_allocs > 0));
  fprintf(out, "events:         %" PRIu64 " in %" PRIu64 " chunks\n", s->events, rs->chunks);
  for (unsigned k = 1; k < GMT_EV_KIND_MAX; k++)
    if (s->by_kind[k]) fprintf(out, "  %-14s %" PRIu64 "\n", gmt_kind_name(k), s->by_kind[k]);
  fprintf(out, "devices:        %" PRIu64 " (", s->n_devices);
  for (uint64_t i = 0; i < s->n_devices && i < ANA_MAX_LISTED; i++)
    fprintf(out, "%s%" PRIu64, i ? ", " : "", s->devices[i]);
  fprintf(out, "%s)\n", s->n_devices > ANA_MAX_LISTED ? ", ..." : "");
  if (s->n_devices > 1)
    for (uint64_t i = 0; i < s->n_devices && i < ANA_MAX_LISTED; i++)
      fprintf(out, "  device %-7" PRIu64 " peak live %s\n", s->devices[i],
              gm_format_size(s->device_peak[i], b1, sizeof b1));
  fprintf(out, "streams:        %" PRIu64 " (", s->n_streams);
  for (uint64_t i = 0; i < s->n_streams && i < ANA_MAX_LISTED; i++) {
    if (s->streams[i] == GMT_STREAM_NONE) fprintf(out, "%snone", i ? ", " : "");
    else fprintf(out, "%s%" PRIu64, i ? ", " : "", s->streams[i]);
  }
  fprintf(out, "%s)\n", s->n_streams > ANA_MAX_LISTED ? ", ..." : "");
  fprintf(out, "peak live:      %s (%" PRIu64 " bytes requested and live at once, at event %" PRIu64 ", t=",
          gm_format_size(s->peak_live_bytes, b1, sizeof b1), s->peak_live_bytes, s->peak_live_seq);
  print_duration(out, s->peak_live_ts_ns);
  fprintf(out, ")\n");
  if (s->peak_segment_bytes)
    fprintf(out, "peak segments:  %s%s\n", gm_format_size(s->peak_segment_bytes, b1, sizeof b1),
            (h->capture_mode == GMT_CAPTURE_TORCH || h->capture_mode == GMT_CAPTURE_TORCH_HISTORY) && s->n_devices == 1
                ? " (PyTorch's own segments: the run's max_memory_reserved; `gpuanalyze report` checks the replay "
                  "against it)"
                : "");
  ana_owners_print(out, h, s, "");
  fprintf(out, "live at end:    %" PRIu64 " allocations, %s\n", s->live_allocs_at_end,
          gm_format_size(s->live_bytes_at_end, b1, sizeof b1));
  fprintf(out, "integrity:      %s, index %s, %" PRIu64 " sequence gaps, %" PRIu64
               " records dropped by the source, %" PRIu64 " unknown records skipped\n",
          rs->truncated ? "TRUNCATED" : cov.partial ? "file complete, trace PARTIAL (see coverage)" : "complete", rs->has_index ? "present" : "missing",
          rs->seq_gaps, rs->dropped, rs->unknown_records);
  if (gmt_stats_damaged(rs)) {
    char what[256];
    fprintf(out, "damage:         %s%s", gmt_stats_partial(rs) ? "PARTIAL: " : "",
            gmt_stats_damage_text(rs, what, sizeof what));
    if (rs->damaged_bytes) fprintf(out, " (%" PRIu64 " bytes skipped)", rs->damaged_bytes);
    fputc('\n', out);
    if (damage && *damage) fprintf(out, "first damage:   %s\n", damage);
  }
  if (s->unknown_free || s->double_alloc)
    fprintf(out, "anomalies:      %" PRIu64 " frees of unknown addresses, %" PRIu64
                 " allocs over a live address\n", s->unknown_free, s->double_alloc);
  char ooo[320];
  if (s->ts_backward) fprintf(out, "out of order:   %s\n", ana_out_of_order_text(s, ooo, sizeof ooo));
}
