/* gpureplay_out.c: what gpureplay writes: the ranked table (stdout), the --json summary
 * lines (exactly the keys DESIGN.md lists, in that order), and the results file for the
 * analyzer (replay/RESULTS.md, schema version 1), all JSON through jansson so strings from
 * the command line and the trace are always escaped.
 *
 * Ranking: policies that fit (no OOM) first, by peak reserved (a range by its high end),
 * then by driver calls. Then
 * those that ran out of memory: a policy that failed requests reserved less because it
 * served less, so its peak reserved says nothing; the one that got furthest (latest first
 * OOM) comes first, then the one with fewer OOMs. Ties keep the order the policies were
 * given in. */
#include <inttypes.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "replay/tool/gpureplay.h"

int gr_timing_sensitive(const rp_result_t *r) {
  return r->range_kind != RP_RANGE_NONE && r->range_low_bytes != r->range_high_bytes;
}

int gr_timing_sensitive_any(rp_result_t *const *res, int n) {
  for (int i = 0; i < n; i++)
    if (gr_timing_sensitive(res[i])) return 1;
  return 0;
}

void gr_print_timing(FILE *f, const char *prefix, const rp_result_t *r0, int sensitive) {
  if (!r0->event_frees) return;
  fprintf(f, "%sstream events: %" PRIu64 " free%s waited on events recorded on other streams "
             "(record_stream): when the GPU completed them is a race with the CPU; ", prefix,
          r0->event_frees, r0->event_frees == 1 ? "" : "s");
  if (sensitive < 0) {
    static const char *const how[] = {"as recorded", "with every event early", "with every event late"};
    fprintf(f, "replayed %s only (--event-timing=range for the range)\n", how[r0->event_timing % 3]);
    return;
  }
  fprintf(f, "replayed as recorded and with every event early and late (pending at the next %" PRIu64
             " malloc%s: --late-mallocs=N); %s\n", r0->late_mallocs, r0->late_mallocs == 1 ? "" : "s",
          sensitive ? "timing-sensitive: the figure moves within the range below, it is not exact"
                    : "the figure does not move within these timings");
}

void gr_print_pool(FILE *f, const char *prefix, uint64_t recorded_pool) {
  fprintf(f, "%sasync pool (simulated): the driver's pool grows by 32 MiB chunks and never shrinks "
             "on its own (PyTorch's release threshold); how it fits blocks and whether another stream "
             "reuses a free depends on timing, so its figure is a range, not exact: best fit with "
             "every free reusable at once (the figure), ideal packing (low), reuse on the freeing "
             "stream only (high); --device=cuda:N measures one run\n", prefix);
  if (recorded_pool) {
    char b[32];
    fprintf(f, "%sthe recorded run's own pool reserved %s at its peak (the extent of the addresses "
               "the driver gave, rounded up to its chunk: exact on every recorded run checked)\n",
            prefix, gm_format_size(recorded_pool, b, sizeof b));
  }
}

/* ---- ranking and the table ---------------------------------------------------------------- */

static int better(const rp_result_t *a, const rp_result_t *b) {
  if ((a->ooms > 0) != (b->ooms > 0)) return a->ooms == 0;
  if (a->ooms > 0) {
    if (a->first_oom_event != b->first_oom_event) return a->first_oom_event > b->first_oom_event;
    if (a->ooms != b->ooms) return a->ooms < b->ooms;
  }
  /* A timing-dependent figure ranks by the high end of its range (an unlucky run's). */
  uint64_t ra = gr_timing_sensitive(a) ? a->range_high_bytes : a->peak_reserved_bytes;
  uint64_t rb = gr_timing_sensitive(b) ? b->range_high_bytes : b->peak_reserved_bytes;
  if (ra != rb) return ra < rb;
  if (a->peak_reserved_bytes != b->peak_reserved_bytes)
    return a->peak_reserved_bytes < b->peak_reserved_bytes;
  return a->device_alloc_calls + a->device_free_calls < b->device_alloc_calls + b->device_free_calls;
}

void gr_rank(rp_result_t *const *res, int n, int *order) {
  for (int i = 0; i < n; i++) order[i] = i;
  for (int i = 1; i < n; i++) { /* insertion sort: stable, n is small */
    int k = order[i], j = i;
    while (j > 0 && better(res[k], res[order[j - 1]])) {
      order[j] = order[j - 1];
      j--;
    }
    order[j] = k;
  }
}

static void print_time(FILE *f, uint64_t ns) {
  if (ns >= 1000000000ull) fprintf(f, "%.3f s", (double)ns / 1e9);
  else fprintf(f, "%.3f ms", (double)ns / 1e6);
}

void gr_print_failure(FILE *f, const char *prefix, const gr_trace_info_t *info, const rp_result_t *r0) {
  char b1[32], b2[32];
  if (!r0->recorded_failures) return;
  fprintf(f, "%srecorded OOM: the run failed %" PRIu64 " request%s; the first: %s", prefix,
          r0->recorded_failures, r0->recorded_failures == 1 ? "" : "s",
          gm_format_size(r0->first_failure_size, b1, sizeof b1));
  if (r0->first_failure_stream == GMT_STREAM_NONE) fprintf(f, " (no stream)");
  else fprintf(f, " on stream %" PRIu64, r0->first_failure_stream);
  fprintf(f, " at #%" PRId64 " t=", r0->first_failure_event);
  print_time(f, r0->first_failure_ts_ns);
  if (info->failure_callsite[0]) {
    char cs[1024];
    fprintf(f, " (%s)", gm_escape(info->failure_callsite, cs, sizeof cs)); /* the trace's text */
  }
  fprintf(f, "; live then %s", gm_format_size(r0->first_failure_live_bytes, b1, sizeof b1));
  if (r0->first_failure_recorded_reserved_bytes)
    fprintf(f, ", reserved %s", gm_format_size(r0->first_failure_recorded_reserved_bytes, b1, sizeof b1));
  if (info->recorded_device_free)
    fprintf(f, ", free on the device %s", gm_format_size(info->recorded_device_free, b2, sizeof b2));
  fprintf(f, "\n");
  if (info->capacity_note[0])
    fprintf(f, "%sreplayed with capacity %s (%s; --capacity=SIZE to change): a policy without OOMs "
               "would have served it\n", prefix, gm_format_size(r0->capacity_bytes, b1, sizeof b1),
            info->capacity_note);
  else if (!r0->capacity_bytes)
    fprintf(f, "%sthe recorded GPU's memory is not in the trace: give --capacity=SIZE to see which "
               "policy would have served it\n", prefix);
}

/* One line on whose requests these are, one on what they are, and a warning when the
 * requests cover far less than the recorded run mapped beside them. */
void gr_print_content(FILE *f, const char *prefix, const gr_trace_info_t *info, const rp_result_t *r0) {
  char b1[32], b2[32], e[1024]; /* framework versions and the prediction come from the trace */
  fprintf(f, "%sframework: %s; the trace holds %s\n", prefix, gm_escape(info->frameworks_text, e, sizeof e),
          info->holds);
  if (info->predicted[0])
    fprintf(f, "%spredicted, not recorded: %s (gpurec predict)\n", prefix, gm_escape(info->predicted, e, sizeof e));
  if (gmt_framework_single(info->frameworks) == 0 && info->frameworks)
    fprintf(f, "%swarning: several frameworks in one process: their requests are replayed as one "
               "allocator's\n", prefix);
  uint64_t lb = r0->lower_bound_bytes;
  /* PyTorch's own history holds its segments: their peak is the run's max_memory_reserved, what
   * a replay of the setting it ran with must give (gpuanalyze report compares them) */
  if ((info->capture_mode == GMT_CAPTURE_TORCH || info->capture_mode == GMT_CAPTURE_TORCH_HISTORY) &&
      r0->recorded_mapped_peak_bytes && !info->coverage.partial && !info->predicted[0] && !r0->recorded_failures)
    fprintf(f, "%sthe run itself reserved %s at its peak (its allocator's own segments, in the trace): the "
               "replay of the setting it ran with should give the same\n",
            prefix, gm_format_size(r0->recorded_mapped_peak_bytes, b1, sizeof b1));
  /* A torch-mode or torch-history trace holds PyTorch's segments beside its requests by design: no warning. */
  if (info->capture_mode != GMT_CAPTURE_TORCH && info->capture_mode != GMT_CAPTURE_TORCH_HISTORY &&
      r0->recorded_mapped_peak_bytes > 2 * lb + (64ull << 20))
    fprintf(f, "%swarning: the requests replayed peak at %s live, but the recorded run also mapped "
               "%s that is not replayed as requests (its allocator's segments or VMM pages): %s\n",
            prefix, gm_format_size(lb, b1, sizeof b1),
            gm_format_size(r0->recorded_mapped_peak_bytes, b2, sizeof b2),
            info->capture_mode == GMT_CAPTURE_NATIVE
                ? "a native trace holds what the allocator took, not what the program asked"
                : "check that the trace holds the framework's requests (gpurec's default mode)");
  const rp_skip_counts_t *s = &r0->skipped;
  uint64_t bad = s->vmm_map_unreserved + s->vmm_unmap_unmapped + s->vmm_release_unknown +
                 s->vmm_release_mapped;
  if (bad)
    fprintf(f, "%sanomalies: VMM calls that do not pair up: %" PRIu64 " maps without a reservation, "
               "%" PRIu64 " unmaps of nothing mapped, %" PRIu64 " releases of no reservation, %" PRIu64
               " releases while mapped\n", prefix, s->vmm_map_unreserved, s->vmm_unmap_unmapped,
            s->vmm_release_unknown, s->vmm_release_mapped);
}

void gr_print_table(FILE *f, const gr_trace_info_t *info, rp_result_t *const *res, int n,
                    const int *order) {
  char b1[32], b2[32];
  const rp_result_t *r0 = res[0];
  char path[1024];
  if (info->coverage.partial) { /* first: every figure below is of part of the run */
    char cov[1024];
    fprintf(f, "%s\n", gmt_coverage_text(&info->coverage, cov, sizeof cov));
  }
  fprintf(f, "trace %s", gm_escape(info->path, path, sizeof path));
  if (info->n_devices > 1) fprintf(f, ", device %d (of %d, each replayed alone)", r0->device, info->n_devices);
  fprintf(f, ": %" PRIu64 " events, %" PRIu64 " allocs, lower bound %s", r0->events, r0->allocs,
          gm_format_size(r0->lower_bound_bytes, b1, sizeof b1));
  if (r0->capacity_bytes) fprintf(f, ", capacity %s", gm_format_size(r0->capacity_bytes, b2, sizeof b2));
  fprintf(f, ", backend %s\n", r0->backend);
  gr_print_content(f, "", info, r0);
  gr_print_failure(f, "", info, r0);
  if (r0->external_allocs || r0->external_maps) {
    char allocs[96] = "", maps[96] = "";
    if (r0->external_allocs)
      snprintf(allocs, sizeof allocs, "%" PRIu64 " %sallocs outside the framework's allocator", r0->external_allocs,
               r0->external_sync ? "synchronous " : "");
    if (r0->external_maps) /* --count-other: held on the device, so --capacity counts them */
      snprintf(maps, sizeof maps, "%s%" PRIu64 " VMM map%s of other owners (NCCL, ...)", allocs[0] ? " and " : "",
               r0->external_maps, r0->external_maps == 1 ? "" : "s");
    fprintf(f, "external: %s%s, peak %s "
               "(not replayed; not in peak reserved nor the lower bound); needs at least %s (both together)\n",
            allocs, maps,
            gm_format_size(r0->external_peak_bytes, b1, sizeof b1),
            gm_format_size(r0->peak_requested_plus_external_bytes, b2, sizeof b2));
  }
  if (r0->context_bytes) /* recorded by gpurec (DEVICE_USAGE): the capacity is what is left */
    fprintf(f, "context: %s of CUDA context and module code on the device (%s)%s\n",
            gm_format_size(r0->context_bytes, b1, sizeof b1), gmt_usage_method_text(info->context_method),
            r0->capacity_bytes ? "; --capacity leaves the rest to the allocator and the other owners" : "");
  if (info->device_memory_assumed)
    fprintf(f, "device memory: %s assumed%s, the trace does not say which GPU it came from "
               "(--device-memory=SIZE, or gpurec import --gpu-memory=SIZE)\n",
            gm_format_size(info->device_memory, b1, sizeof b1),
            r0->capacity_bytes && info->device_memory == r0->capacity_bytes ? " (the capacity)" : "");
  const rp_skip_counts_t *s = &r0->skipped;
  if (s->unknown_free || s->double_free || s->alloc_over_live)
    fprintf(f, "anomalies: %" PRIu64 " frees of unknown addresses, %" PRIu64 " double frees, %" PRIu64
               " allocs over live blocks\n", s->unknown_free, s->double_free, s->alloc_over_live);
  if (s->oversize)
    fprintf(f, "anomalies: %" PRIu64 " allocs of more than %llu bytes (no device has that much): an OOM "
               "under every policy, left out of the lower bound\n", s->oversize, (unsigned long long)RP_REQUEST_MAX);
  if (info->truncated) fprintf(f, "note: the trace is truncated (replayed up to its last complete chunk)\n");
  if (gmt_stats_damaged(&info->stats)) {
    char what[256];
    fprintf(f, "%s: the trace is damaged (%s): %s%s\n", gmt_stats_partial(&info->stats) ? "PARTIAL" : "note",
            info->damage, gmt_stats_damage_text(&info->stats, what, sizeof what),
            gmt_stats_partial(&info->stats) ? ": the replay is of what could be read" : "");
  }
  if (info->seq_gaps || info->dropped)
    fprintf(f, "note: the trace misses %" PRIu64 " chunks (sequence gaps) and its source dropped %" PRIu64
               " records: the replay is of what remains\n", info->seq_gaps, info->dropped);
  int ranged = 0;
  for (int i = 0; i < n; i++) ranged |= res[i]->range_kind != RP_RANGE_NONE;
  int ev_sensitive = -1;
  for (int i = 0; i < n; i++)
    if (res[i]->range_kind == RP_RANGE_EVENTS) ev_sensitive = ev_sensitive > 0 || gr_timing_sensitive(res[i]);
  gr_print_timing(f, "", r0, ev_sensitive);
  for (int i = 0; i < n; i++)
    if (res[i]->range_kind == RP_RANGE_POOL) {
      gr_print_pool(f, "", r0->recorded_pool_reserved_bytes);
      break;
    }
  /* The policy goes last: sweep specs are long, and the numbers should line up. */
  fprintf(f, "%4s  %13s  %10s  %9s  %12s  %7s  %6s  %s%s%s\n", "rank", "peak reserved", "vs bound",
          "frag@peak", "driver calls", "retries", "OOMs", ranged ? "range (low..high)            " : "",
          r0->capacity_bytes ? "first OOM            " : "", "policy");
  for (int i = 0; i < n; i++) {
    const rp_result_t *r = res[order[i]];
    char over[32], oom[64] = "";
    /* A run that ran out of memory served less than the trace asked: no comparison. */
    if (r->lower_bound_bytes && !r->ooms)
      snprintf(over, sizeof over, "%+.1f%%",
               100.0 * ((double)r->peak_reserved_bytes / (double)r->lower_bound_bytes - 1.0));
    else
      snprintf(over, sizeof over, "-");
    if (r->capacity_bytes) {
      char at[48];
      if (r->first_oom_event >= 0)
        snprintf(at, sizeof at, "#%" PRId64 " t=%.3f s", r->first_oom_event,
                 (double)r->first_oom_ts_ns * 1e-9);
      else
        snprintf(at, sizeof at, "fits");
      snprintf(oom, sizeof oom, "%-21s", at);
    }
    char range[64] = "";
    if (ranged) {
      char lo[32], hi[32], t[48];
      if (r->range_kind == RP_RANGE_NONE) snprintf(t, sizeof t, "-");
      else if (!gr_timing_sensitive(r)) snprintf(t, sizeof t, "none (same)");
      else
        snprintf(t, sizeof t, "%s..%s", gm_format_size(r->range_low_bytes, lo, sizeof lo),
                 gm_format_size(r->range_high_bytes, hi, sizeof hi));
      snprintf(range, sizeof range, "%-29s", t);
    }
    char pol[1024];
    fprintf(f, "%4d  %13s  %10s  %9.3f  %12" PRIu64 "  %7" PRIu64 "  %6" PRIu64 "  %s%s%s\n", i + 1,
            gm_format_size(r->peak_reserved_bytes, b1, sizeof b1), over, r->fragmentation_at_peak,
            r->device_alloc_calls + r->device_free_calls, r->alloc_retries, r->ooms, range, oom,
            gm_escape(r->policy, pol, sizeof pol));
  }
}

/* ---- JSON ---------------------------------------------------------------------------------- */

/* The --json keys: DESIGN.md's, in its order, then the additive ones (DESIGN.md asks for "at
 * least these keys"): external memory (rp_engine.h). */
/* "coverage": {"complete": bool, and for a partial trace why, the window, what was alive at
 * its start, "lower_bound": true (replay/RESULTS.md)}. */
static json_t *gr_coverage_json(const gmt_coverage_t *c) {
  json_t *o = json_object();
  json_object_set_new(o, "complete", json_boolean(!c->partial));
  if (!c->partial) return o;
  char why[512];
  json_object_set_new(o, "why", json_string(gmt_coverage_why_text(c, why, sizeof why)));
  if (c->has_window) {
    json_object_set_new(o, "from_ns", json_integer((json_int_t)c->from_ns));
    json_object_set_new(o, "from_event", json_integer((json_int_t)c->from_event));
  }
  json_object_set_new(o, "alive_bytes", json_integer((json_int_t)c->alive_bytes));
  json_object_set_new(o, "alive_count", json_integer((json_int_t)c->alive_count));
  json_object_set_new(o, "reserved_bytes", json_integer((json_int_t)c->reserved_bytes));
  json_object_set_new(o, "lower_bound", json_true());
  return o;
}

static json_t *summary(const gr_trace_info_t *info, const rp_result_t *r) {
  json_t *o = json_object();
  json_object_set_new(o, "trace", json_string(info->path));
  json_object_set_new(o, "policy", json_string(r->policy));
  json_object_set_new(o, "backend", json_string(r->backend));
  json_object_set_new(o, "events", json_integer((json_int_t)r->events));
  json_object_set_new(o, "peak_reserved_bytes", json_integer((json_int_t)r->peak_reserved_bytes));
  json_object_set_new(o, "peak_allocated_bytes", json_integer((json_int_t)r->peak_allocated_bytes));
  json_object_set_new(o, "peak_requested_bytes", json_integer((json_int_t)r->peak_requested_bytes));
  if (r->recorded_pool_reserved_bytes)
    json_object_set_new(o, "recorded_pool_reserved_bytes", json_integer((json_int_t)r->recorded_pool_reserved_bytes));
  json_object_set_new(o, "lower_bound_bytes", json_integer((json_int_t)r->lower_bound_bytes));
  json_object_set_new(o, "fragmentation_at_peak", json_real(r->fragmentation_at_peak));
  json_object_set_new(o, "device_alloc_calls", json_integer((json_int_t)r->device_alloc_calls));
  json_object_set_new(o, "device_free_calls", json_integer((json_int_t)r->device_free_calls));
  json_object_set_new(o, "alloc_retries", json_integer((json_int_t)r->alloc_retries));
  json_object_set_new(o, "ooms", json_integer((json_int_t)r->ooms));
  json_object_set_new(o, "replay_seconds", json_real(r->replay_seconds));
  json_object_set_new(o, "events_per_second", json_real(r->events_per_second));
  json_object_set_new(o, "external_allocs", json_integer((json_int_t)r->external_allocs));
  json_object_set_new(o, "external_peak_bytes", json_integer((json_int_t)r->external_peak_bytes));
  json_object_set_new(o, "peak_reserved_plus_external_bytes",
                      json_integer((json_int_t)r->peak_reserved_plus_external_bytes));
  json_object_set_new(o, "context_bytes", json_integer((json_int_t)r->context_bytes));
  json_object_set_new(o, "frameworks", json_string(info->frameworks_text));
  json_object_set_new(o, "holds", json_string(info->holds));
  json_object_set_new(o, "device", json_integer(r->device));
  json_object_set_new(o, "recorded_mapped_peak_bytes", json_integer((json_int_t)r->recorded_mapped_peak_bytes));
  /* What joins a run to its trace in gpuanalyze (the results file has them too), so that the
   * lines `--json` writes load as they are (`gpuanalyze load r.json`, issue 14). */
  json_object_set_new(o, "trace_start_time_ns", json_integer((json_int_t)info->start_time_ns));
  json_object_set_new(o, "trace_pid", json_integer((json_int_t)info->pid));
  json_object_set_new(o, "capacity_bytes", json_integer((json_int_t)r->capacity_bytes));
  json_object_set_new(o, "first_oom_event", json_integer(r->first_oom_event));
  json_object_set_new(o, "first_oom_ts_ns", json_integer(r->first_oom_ts_ns));
  if (info->predicted[0]) json_object_set_new(o, "predicted", json_string(info->predicted));
  /* Frees that wait on stream events (replay/engine/engine_events.c): the timing this run replayed
   * and, where gpureplay replayed early and late too, the range peak reserved moves in. */
  static const char *const timing[] = {"recorded", "early", "late"};
  json_object_set_new(o, "event_frees", json_integer((json_int_t)r->event_frees));
  json_object_set_new(o, "event_timing", json_string(timing[r->event_timing % 3]));
  json_object_set_new(o, "timing_sensitive", json_boolean(gr_timing_sensitive(r)));
  if (r->range_kind != RP_RANGE_NONE) {
    json_t *t = json_object();
    json_object_set_new(t, "low_bytes", json_integer((json_int_t)r->range_low_bytes));
    json_object_set_new(t, "high_bytes", json_integer((json_int_t)r->range_high_bytes));
    if (r->range_kind == RP_RANGE_EVENTS) {
      json_object_set_new(t, "moved_by", json_string("stream_events"));
      json_object_set_new(t, "early_bytes", json_integer((json_int_t)r->range_a_bytes));
      json_object_set_new(t, "late_bytes", json_integer((json_int_t)r->range_b_bytes));
      json_object_set_new(t, "late_mallocs", json_integer((json_int_t)r->late_mallocs));
    } else {
      json_object_set_new(t, "moved_by", json_string("async_pool"));
      json_object_set_new(t, "ideal_bytes", json_integer((json_int_t)r->range_a_bytes));
      json_object_set_new(t, "chunked_same_stream_bytes", json_integer((json_int_t)r->range_b_bytes));
    }
    json_object_set_new(o, "peak_reserved_range", t);
  }
  /* The placement spread: said only where the bump pointer's figure differs. */
  if (r->placement_checked && r->placement_bump_bytes != r->peak_reserved_bytes)
    json_object_set_new(o, "placement_bump_bytes", json_integer((json_int_t)r->placement_bump_bytes));
  /* true: replayed from a damaged trace, some of its events were lost (formats/SPEC.md "Salvage") */
  json_object_set_new(o, "partial", json_boolean(gmt_stats_partial(&info->stats)));
  /* does the trace cover the whole run (formats/SPEC.md §3.4)? a partial one's figures are lower bounds */
  json_object_set_new(o, "coverage", gr_coverage_json(&info->coverage));
  return o;
}

void gr_print_json(FILE *f, const gr_trace_info_t *info, const rp_result_t *r) {
  json_t *o = summary(info, r);
  json_dumpf(o, f, JSON_COMPACT | JSON_PRESERVE_ORDER);
  fputc('\n', f);
  json_decref(o);
}

struct gr_results {
  json_t *runs;
};

gr_results_t *gr_results_new(void) {
  gr_results_t *rs = calloc(1, sizeof *rs);
  if (rs) rs->runs = json_array();
  return rs;
}

void gr_results_free(gr_results_t *rs) {
  if (!rs) return;
  json_decref(rs->runs);
  free(rs);
}

static json_t *u64_array(const uint64_t *v, size_t n) {
  json_t *a = json_array();
  for (size_t i = 0; i < n; i++) json_array_append_new(a, json_integer((json_int_t)v[i]));
  return a;
}

#define JI(v) json_integer((json_int_t)(v))

/* The memory at the reserved peak (replay/RESULTS.md "peak_snapshot"): the waste split and the
 * map of the largest segments, each with its live spans as [offset, length] pairs. */
static json_t *peak_json(const rp_peak_snapshot_t *p) {
  json_t *o = json_object();
  json_object_set_new(o, "event", JI(p->event));
  json_object_set_new(o, "ts_ns", JI(p->ts_ns));
  json_object_set_new(o, "reserved_bytes", JI(p->reserved_bytes));
  json_object_set_new(o, "allocated_bytes", JI(p->allocated_bytes));
  json_object_set_new(o, "requested_bytes", JI(p->requested_bytes));
  json_object_set_new(o, "rounding_bytes", JI(p->rounding_bytes));
  json_object_set_new(o, "free_in_segments_bytes", JI(p->free_in_segments_bytes));
  json_object_set_new(o, "cached_segments_bytes", JI(p->cached_segments_bytes));
  json_object_set_new(o, "segments", JI(p->segments));
  json_object_set_new(o, "segments_in_use", JI(p->segments_in_use));
  json_t *segs = json_array();
  for (size_t i = 0; i < p->n_segs; i++) {
    const rp_snap_seg_t *g = &p->seg[i];
    json_t *s = json_object(), *sp = json_array();
    json_object_set_new(s, "addr", JI(g->addr));
    json_object_set_new(s, "size", JI(g->size));
    json_object_set_new(s, "live_bytes", JI(g->live_bytes));
    json_object_set_new(s, "blocks", JI(g->blocks));
    for (uint32_t k = 0; k < g->n_spans; k++) {
      json_t *pair = json_array();
      json_array_append_new(pair, JI(g->span_off[k]));
      json_array_append_new(pair, JI(g->span_len[k]));
      json_array_append_new(sp, pair);
    }
    json_object_set_new(s, "spans", sp);
    json_array_append_new(segs, s);
  }
  json_object_set_new(o, "map", segs);
  return o;
}

gm_status_t gr_results_add(gr_results_t *rs, const gr_trace_info_t *info, const rp_result_t *r,
                           gm_err_t *err) {
  json_t *o = summary(info, r);
  if (!o) return gm_err_set(err, GM_ERR_NOMEM, "out of memory");
  json_object_set_new(o, "trace_start_time_ns", json_integer((json_int_t)info->start_time_ns));
  json_object_set_new(o, "trace_pid", json_integer((json_int_t)info->pid));
  json_object_set_new(o, "capacity_bytes", json_integer((json_int_t)r->capacity_bytes));
  json_object_set_new(o, "fragmentation_mean", json_real(r->fragmentation_mean));
  json_object_set_new(o, "first_oom_event", json_integer(r->first_oom_event));
  json_object_set_new(o, "first_oom_ts_ns", json_integer(r->first_oom_ts_ns));
  json_t *an = json_object();
  json_object_set_new(an, "unknown_free", json_integer((json_int_t)r->skipped.unknown_free));
  json_object_set_new(an, "double_free", json_integer((json_int_t)r->skipped.double_free));
  json_object_set_new(an, "alloc_over_live", json_integer((json_int_t)r->skipped.alloc_over_live));
  json_object_set_new(an, "vmm_map_unreserved", json_integer((json_int_t)r->skipped.vmm_map_unreserved));
  json_object_set_new(an, "vmm_unmap_unmapped", json_integer((json_int_t)r->skipped.vmm_unmap_unmapped));
  json_object_set_new(an, "vmm_release_unknown", json_integer((json_int_t)r->skipped.vmm_release_unknown));
  json_object_set_new(an, "vmm_release_mapped", json_integer((json_int_t)r->skipped.vmm_release_mapped));
  json_object_set_new(an, "oversize", json_integer((json_int_t)r->skipped.oversize));
  json_object_set_new(o, "anomalies", an);
  /* Additive keys (schema version 1 readers ignore keys they do not know). */
  json_t *sk = json_object();
  json_object_set_new(sk, "not_request", json_integer((json_int_t)r->skipped.not_request));
  json_object_set_new(sk, "free_requested", json_integer((json_int_t)r->skipped.free_requested));
  json_object_set_new(sk, "trace_ooms", json_integer((json_int_t)r->skipped.trace_ooms));
  json_object_set_new(sk, "other_memory", json_integer((json_int_t)r->skipped.other_memory));
  json_object_set_new(sk, "other_device", json_integer((json_int_t)r->skipped.other_device));
  json_object_set_new(sk, "vmm_buffers_as_requests", json_integer((json_int_t)r->skipped.vmm_buffers));
  json_object_set_new(sk, "vmm_pages", json_integer((json_int_t)r->skipped.vmm_pages));
  if (r->recorded_pool_reserved_bytes)
    json_object_set_new(o, "recorded_pool_reserved_bytes", json_integer((json_int_t)r->recorded_pool_reserved_bytes));
  json_object_set_new(o, "skipped", sk);
  json_t *ti = json_object();
  json_object_set_new(ti, "truncated", json_boolean(info->truncated));
  json_object_set_new(ti, "seq_gaps", json_integer((json_int_t)info->seq_gaps));
  json_object_set_new(ti, "dropped", json_integer((json_int_t)info->dropped));
  json_object_set_new(ti, "damaged_chunks", json_integer((json_int_t)info->stats.damaged_chunks));
  json_object_set_new(ti, "lost_events", json_integer((json_int_t)info->stats.lost_events));
  json_object_set_new(ti, "uncounted_chunks", json_integer((json_int_t)info->stats.uncounted_chunks));
  json_object_set_new(ti, "index_damaged", json_boolean(info->stats.index_damaged));
  if (info->damage[0]) json_object_set_new(ti, "damage", json_string(info->damage));
  json_object_set_new(o, "trace_integrity", ti);
  json_object_set_new(o, "requests", json_integer((json_int_t)(r->allocs + r->frees + r->empty_caches)));
  json_object_set_new(o, "splits", json_integer((json_int_t)r->splits));
  json_object_set_new(o, "merges", json_integer((json_int_t)r->merges));
  json_t *ex = json_object();
  json_object_set_new(ex, "sync_allocs_external", json_boolean(r->external_sync));
  json_object_set_new(ex, "allocs", json_integer((json_int_t)r->external_allocs));
  json_object_set_new(ex, "frees", json_integer((json_int_t)r->external_frees));
  json_object_set_new(ex, "other_maps", json_integer((json_int_t)r->external_maps));
  json_object_set_new(ex, "peak_bytes", json_integer((json_int_t)r->external_peak_bytes));
  json_object_set_new(ex, "end_bytes", json_integer((json_int_t)r->external_end_bytes));
  json_object_set_new(o, "external", ex);
  /* Additive keys of the first-contact issue: what the device must hold, what the replay
   * assumed, and the recorded run's failed requests (replay/RESULTS.md). */
  json_object_set_new(o, "peak_requested_plus_external_bytes",
                      json_integer((json_int_t)r->peak_requested_plus_external_bytes));
  json_object_set_new(o, "device_memory_bytes", json_integer((json_int_t)info->device_memory));
  json_object_set_new(o, "device_memory_assumed", json_boolean(info->device_memory_assumed));
  if (r->recorded_failures) {
    json_t *rf = json_object();
    json_object_set_new(rf, "count", json_integer((json_int_t)r->recorded_failures));
    json_object_set_new(rf, "served", json_integer((json_int_t)r->recorded_failures_served));
    json_object_set_new(rf, "first_event", json_integer(r->first_failure_event));
    json_object_set_new(rf, "first_ts_ns", json_integer((json_int_t)r->first_failure_ts_ns));
    json_object_set_new(rf, "first_size", json_integer((json_int_t)r->first_failure_size));
    if (r->first_failure_stream == GMT_STREAM_NONE) json_object_set_new(rf, "first_stream", json_null());
    else json_object_set_new(rf, "first_stream", json_integer((json_int_t)r->first_failure_stream));
    json_t *cs = json_string(info->failure_callsite); /* NULL if not UTF-8 */
    json_object_set_new(rf, "first_callsite", cs ? cs : json_string("?"));
    json_object_set_new(rf, "first_served", json_boolean(r->first_failure_served));
    json_object_set_new(rf, "live_bytes", json_integer((json_int_t)r->first_failure_live_bytes));
    json_object_set_new(rf, "recorded_reserved_bytes",
                        json_integer((json_int_t)r->first_failure_recorded_reserved_bytes));
    json_object_set_new(rf, "device_free_bytes", json_integer((json_int_t)info->recorded_device_free));
    json_object_set_new(rf, "reserved_bytes", json_integer((json_int_t)r->first_failure_reserved_bytes));
    json_object_set_new(rf, "capacity_note", json_string(info->capacity_note));
    json_object_set_new(o, "recorded_failures", rf);
  }
  if (r->has_latency) {
    json_t *l = json_object();
    json_object_set_new(l, "alloc_p50", json_integer((json_int_t)r->alloc_p50_ns));
    json_object_set_new(l, "alloc_p99", json_integer((json_int_t)r->alloc_p99_ns));
    json_object_set_new(l, "free_p50", json_integer((json_int_t)r->free_p50_ns));
    json_object_set_new(l, "free_p99", json_integer((json_int_t)r->free_p99_ns));
    json_object_set_new(o, "latency_ns", l);
    json_object_set_new(o, "driver_used_bytes_at_peak", json_integer((json_int_t)r->driver_used_at_peak));
  }
  if (r->peak.valid) json_object_set_new(o, "peak_snapshot", peak_json(&r->peak));
  json_t *tl = json_object();
  json_object_set_new(tl, "ts_ns", u64_array(r->tl_ts, r->timeline_n));
  json_object_set_new(tl, "reserved", u64_array(r->tl_reserved, r->timeline_n));
  json_object_set_new(tl, "allocated", u64_array(r->tl_allocated, r->timeline_n));
  json_object_set_new(tl, "requested", u64_array(r->tl_requested, r->timeline_n));
  json_object_set_new(o, "timeline", tl);
  if (json_array_append_new(rs->runs, o) != 0) return gm_err_set(err, GM_ERR_NOMEM, "out of memory");
  return GM_OK;
}

gm_status_t gr_results_note_tune(gr_results_t *rs, const gr_tune_note_t *n, gm_err_t *err) {
  size_t k = json_array_size(rs->runs);
  if (k == 0) return gm_err_set(err, GM_ERR_INVAL, "no run to note");
  json_t *o = json_array_get(rs->runs, k - 1), *t = json_object();
  json_object_set_new(t, "role", json_string(n->role));
  json_object_set_new(t, "from_grid", json_boolean(n->from_grid));
  json_object_set_new(t, "needs_bytes", json_integer((json_int_t)n->needs_bytes));
  json_object_set_new(t, "driver_time_p50_s", json_real(n->driver_time_p50_s));
  json_object_set_new(t, "driver_time_p99_s", json_real(n->driver_time_p99_s));
  json_object_set_new(t, "budget_s", json_real(n->budget_s));
  json_object_set_new(t, "smallest_gpu_gib", json_integer(n->smallest_gpu_gib));
  if (n->pool) json_object_set_new(t, "pool", json_true());
  if (n->worst_bytes) {
    json_object_set_new(t, "worst_bytes", json_integer((json_int_t)n->worst_bytes));
    json_object_set_new(t, "best_bytes", json_integer((json_int_t)n->best_bytes));
  }
  if (n->worst_oom) json_object_set_new(t, "worst_oom", json_true());
  if (n->searched && n->searched[0]) json_object_set_new(t, "searched", json_string(n->searched));
  json_object_set_new(o, "tune", t);
  return GM_OK;
}

gm_status_t gr_results_write(gr_results_t *rs, const char *path, gm_err_t *err) {
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  json_t *doc = json_object();
  json_object_set_new(doc, "format", json_string("gpumem-results"));
  json_object_set_new(doc, "version", json_integer(1));
  json_object_set_new(doc, "tool", json_string("gpureplay " GPUREPLAY_VERSION));
  json_object_set_new(doc, "created_unix_ns",
                      json_integer((json_int_t)now.tv_sec * 1000000000 + now.tv_nsec));
  json_object_set(doc, "runs", rs->runs);
  /* Whole or not at all (gm_out: a temporary file renamed over path once complete). */
  char *text = json_dumps(doc, JSON_COMPACT | JSON_PRESERVE_ORDER);
  json_decref(doc);
  if (!text) return gm_err_set(err, GM_ERR_NOMEM, "cannot write '%s': out of memory", path);
  gm_out_t *o = NULL;
  gm_status_t s = gm_out_open(&o, path, err);
  if (s == GM_OK) {
    FILE *f = gm_out_file(o);
    if (f) fprintf(f, "%s\n", text);
    s = f ? gm_out_commit(o, err) : (gm_out_abort(o), gm_err_set(err, GM_ERR_NOMEM, "out of memory"));
  }
  free(text);
  return s;
}
