/* ana_oom.c: `gpuanalyze oom`, the account of an out-of-memory for a person and for a script.
 *
 * The replay and the search are gpureplay's (gr_oom_explain); this file only says it: the
 * failing request, what was live (by callsite), what was reserved but free and the rule that
 * kept each free byte from the request, then the smallest changes that make the same trace
 * fit (a setting, a capacity), or that no setting can, because the live bytes alone exceed
 * the device. Text from the trace (callsites, paths) is escaped before it is printed. */
#include <inttypes.h>
#include <jansson.h>
#include <string.h>

#include "analyze/ana.h"
#include "analyze/ana_replayed.h"

void ana_replay_config(const ana_replay_opts_t *o, gr_config_t *c) {
  memset(c, 0, sizeof *c);
  c->cuda_ordinal = -1;
  c->capacity = o->capacity;
  c->device_memory = o->device_memory;
  c->jobs = o->jobs > 0 ? o->jobs : 1;
  c->read_flags = o->read_flags;
  c->preload = 1;
  c->sync_allocs = GR_SYNC_AUTO;
  c->vmm_buffers = GR_VMM_AUTO;
  c->serve_failed = 1;
  c->device = -1;
  c->event_timing = RP_EVENTS_RECORDED;
  c->late_mallocs = 1;
}

gm_status_t ana_oom_explain(const char *path, const char *spec, const ana_replay_opts_t *o, gr_oom_t *out,
                            gm_err_t *err) {
  gr_config_t cfg;
  ana_replay_config(o, &cfg);
  return gr_oom_explain(&cfg, path, spec, out, err);
}

gm_status_t ana_replay_default_peak(const char *path, const ana_replay_opts_t *o, uint64_t *peak, char *policy,
                                    size_t n, gm_err_t *err) {
  gr_config_t cfg;
  ana_replay_config(o, &cfg);
  gr_loaded_t lt;
  gm_status_t st = gr_trace_load(&cfg, path, &lt, err);
  if (st != GM_OK) return st;
  /* The setting the job ran with where the trace says it: a PyTorch memory history records
   * the user's PYTORCH_CUDA_ALLOC_CONF (a requests-mode trace records the one gpurec set). */
  char ran[1024] = "";
  gmt_reader_t *rd = NULL;
  if (lt.info.capture_mode == GMT_CAPTURE_TORCH && gmt_reader_open_flags(&rd, path, o->read_flags, NULL) == GM_OK) {
    const char *v = gmt_header_kv_get(gmt_reader_header(rd), "PYTORCH_CUDA_ALLOC_CONF");
    char line[1024];
    if (v && *v && !strstr(v, "backend:") && (size_t)snprintf(line, sizeof line, "PYTORCH_CUDA_ALLOC_CONF=%s", v) < sizeof line)
      gr_policy_from_env(line, ran, sizeof ran);
    gmt_reader_close(rd);
  }
  const char *spec[1] = {ran[0] ? ran : gr_sweep_grid_for(gmt_framework_single(lt.info.frameworks))[0]};
  rp_result_t *r = malloc(sizeof *r);
  if (!r) st = gm_err_set(err, GM_ERR_NOMEM, "out of host memory");
  if (st == GM_OK) st = gr_run_loaded(&cfg, &lt, spec, 1, &r, err);
  if (st == GM_OK) {
    *peak = r->peak_reserved_plus_external_bytes;
    snprintf(policy, n, "%s", r->policy);
  }
  free(r);
  gr_loaded_free(&lt);
  return st;
}

static const char *sz(uint64_t v, char *b) { return gm_format_size(v, b, 32); }

/* A callsite on one line: escaped (stacks hold newlines), cut to a screen's width. */
static const char *one_line(const char *s, char *b, size_t n) {
  if (!s || !*s) return "(no callsite recorded)";
  gm_escape(s, b, n);
  return b;
}

static const char *stream_text(uint64_t s, char *b, size_t n) {
  if (s == GMT_STREAM_NONE) snprintf(b, n, "none (synchronous)");
  else snprintf(b, n, "%" PRIu64, s);
  return b;
}

static void print_why(FILE *f, const gr_oom_t *o) {
  char a[32], b[32], c[32];
  const rp_oom_report_t *w = &o->why;
  uint64_t free_b = o->reserved_bytes > w->allocated_bytes ? o->reserved_bytes - w->allocated_bytes : 0;
  if (!o->has_report) {
    fprintf(f, "reserved but free: %s (the policy %s does not say why it could not use it)\n", sz(free_b, a),
            o->policy);
    return;
  }
  fprintf(f, "reserved but free: %s in %" PRIu64 " blocks (largest %s); none could serve the request, "
             "rounded to %s:\n", sz(w->free_bytes, a), w->free_blocks, sz(w->largest_free, b),
          sz(w->rounded_size, c));
  if (w->too_small_bytes)
    fprintf(f, "  %12s  too small: each block smaller than the request (largest %s)\n", sz(w->too_small_bytes, a),
            sz(w->largest_too_small, b));
  if (w->other_stream_bytes)
    fprintf(f, "  %12s  on another stream: a cached block serves only the stream that freed it\n",
            sz(w->other_stream_bytes, a));
  if (w->other_pool_bytes)
    fprintf(f, "  %12s  in the other size class: blocks of <= 1 MiB serve only requests of <= 1 MiB, and the reverse\n",
            sz(w->other_pool_bytes, a));
  if (w->not_splittable_bytes)
    fprintf(f, "  %12s  not splittable for this request (above max_split_size, or max_non_split_rounding larger)\n",
            sz(w->not_splittable_bytes, a));
  if (!w->free_bytes) fprintf(f, "  (nothing: every reserved byte was in use)\n");
  if (w->limit_bytes)
    fprintf(f, "  the setting's own limit: %s%s\n", sz(w->limit_bytes, a),
            w->at_limit ? " (the request failed against it, not against the device)" : "");
  if (w->note[0]) fprintf(f, "  %s\n", w->note);
}

void ana_oom_print_text(FILE *f, const char *path, const gr_oom_t *o) {
  char a[32], b[32], c[32], line[1024], esc[1024];
  gm_escape(path, esc, sizeof esc);
  if (o->capacity)
    fprintf(f, "%s: %s within %s%s%s%s\n", esc, o->policy, sz(o->capacity, a),
            o->capacity_note[0] ? " (" : " (given)", o->capacity_note, o->capacity_note[0] ? ")" : "");
  else fprintf(f, "%s: %s, unlimited device (no --capacity, and the trace recorded no failed request)\n", esc, o->policy);
  if (!o->found && !o->requests) {
    fprintf(f, "no out-of-memory: the trace holds no allocation request for the replay (no GPU allocation, "
               "or frees only): nothing to run out of\n");
    return;
  }
  if (!o->found) {
    fprintf(f, "no out-of-memory: all %" PRIu64 " requests were served (peak reserved %s, needs at least %s)\n",
            o->requests, sz(o->peak_reserved, a), sz(o->needs_bytes, b));
    if (o->recorded_failures)
      fprintf(f, "the recorded run failed %" PRIu64 " requests; this replay served them within the capacity\n",
              o->recorded_failures);
    return;
  }
  fprintf(f, "failed request: %s on stream %s, event %" PRId64 " at %.3f s (%" PRIu64 " OOM%s in all)\n",
          sz(o->size, a), stream_text(o->stream, line, sizeof line), o->event, (double)o->ts_ns / 1e9, o->ooms,
          o->ooms == 1 ? "" : "s");
  fprintf(f, "  callsite: %s\n", one_line(o->callsite_text, esc, 240));
  if (o->cause == RP_OOM_OVERSIZE) {
    fprintf(f, "it asks for more than any device has (a size that wrapped around): no setting or capacity serves it\n");
    return;
  }
  if (o->cause == RP_OOM_EXTERNAL)
    fprintf(f, "  a library's own synchronous allocation (outside the framework's allocator) found no room\n");
  fprintf(f, "live then: %s in %" PRIu64 " allocations", sz(o->live_bytes, a), o->live_allocs);
  if (o->external_bytes) fprintf(f, " + %s external (libraries' own)", sz(o->external_bytes, b));
  fprintf(f, "; the setting had reserved %s\n", sz(o->reserved_bytes, c));
  for (int i = 0; i < o->n_top; i++)
    fprintf(f, "  %12s  %5" PRIu64 "x  %s\n", sz(o->top[i].bytes, a), o->top[i].allocs,
            one_line(o->top[i].text, esc, 200));
  if (o->top_other_sites)
    fprintf(f, "  %12s         (%" PRIu64 " other callsites)\n", sz(o->top_other_bytes, a), o->top_other_sites);
  print_why(f, o);
  fprintf(f, "smallest change that fits:\n");
  if (o->live_exceeds) {
    fprintf(f, "  no setting helps: the live bytes alone exceed the device by %s (needs at least %s, has %s)\n",
            sz(o->live_excess, a), sz(o->needs_bytes, b), sz(o->capacity, c));
  } else if (o->fix_found) {
    ana_policy_env_line(o->fix_spec, o->device_memory, line, sizeof line);
    fprintf(f, "  setting: %s (peak reserved %s; from %s", gm_escape(line, esc, sizeof esc), sz(o->fix_peak, a),
            o->fix_from);
    if (o->grid_tried) fprintf(f, ", %d of %d other settings fit", o->grid_fit, o->grid_tried);
    fprintf(f, ")\n");
  } else {
    fprintf(f, "  no setting of this framework fits %s (%d on the grid tried%s)\n", sz(o->capacity, a), o->grid_tried,
            o->tune_tried ? ", and the tuner's search" : "");
  }
  if (o->fits_capacity)
    fprintf(f, "  capacity: %s with %s (%s more than %s)\n", sz(o->fits_capacity, a), o->policy,
            sz(o->fits_capacity > o->capacity ? o->fits_capacity - o->capacity : 0, b), sz(o->capacity, c));
}

static void set_u64(json_t *o, const char *k, uint64_t v) { json_object_set_new(o, k, json_integer((json_int_t)v)); }

gm_status_t ana_oom_print_json(FILE *f, const char *path, const gr_oom_t *o, gm_err_t *err) {
  static const char *const causes[] = {"policy", "external", "oversize"};
  json_t *j = json_object();
  json_object_set_new(j, "trace", json_string(path));
  json_object_set_new(j, "policy", json_string(o->policy));
  set_u64(j, "capacity_bytes", o->capacity);
  json_object_set_new(j, "capacity_note", json_string(o->capacity_note));
  set_u64(j, "needs_bytes", o->needs_bytes);
  set_u64(j, "peak_reserved_bytes", o->peak_reserved);
  set_u64(j, "recorded_failures", o->recorded_failures);
  set_u64(j, "ooms", o->ooms);
  json_object_set_new(j, "oom", json_boolean(o->found));
  if (o->found) {
    json_t *q = json_object();
    json_object_set_new(q, "event", json_integer(o->event));
    set_u64(q, "ts_ns", o->ts_ns);
    set_u64(q, "size_bytes", o->size);
    json_object_set_new(q, "stream", o->stream == GMT_STREAM_NONE ? json_null() : json_integer((json_int_t)o->stream));
    json_object_set_new(q, "callsite", json_string(o->callsite_text));
    json_object_set_new(q, "cause", json_string(causes[o->cause % 3]));
    json_object_set_new(j, "request", q);
    json_t *l = json_object();
    set_u64(l, "bytes", o->live_bytes);
    set_u64(l, "allocs", o->live_allocs);
    set_u64(l, "external_bytes", o->external_bytes);
    set_u64(l, "reserved_bytes", o->reserved_bytes);
    json_t *top = json_array();
    for (int i = 0; i < o->n_top; i++) {
      json_t *t = json_object();
      json_object_set_new(t, "callsite", json_string(o->top[i].text));
      set_u64(t, "bytes", o->top[i].bytes);
      set_u64(t, "allocs", o->top[i].allocs);
      json_array_append_new(top, t);
    }
    json_object_set_new(l, "top_callsites", top);
    set_u64(l, "other_callsites_bytes", o->top_other_bytes);
    json_object_set_new(j, "live", l);
    if (o->has_report) {
      const rp_oom_report_t *w = &o->why;
      json_t *fr = json_object();
      set_u64(fr, "rounded_size_bytes", w->rounded_size);
      set_u64(fr, "free_bytes", w->free_bytes);
      set_u64(fr, "free_blocks", w->free_blocks);
      set_u64(fr, "largest_free_bytes", w->largest_free);
      set_u64(fr, "too_small_bytes", w->too_small_bytes);
      set_u64(fr, "other_stream_bytes", w->other_stream_bytes);
      set_u64(fr, "other_pool_bytes", w->other_pool_bytes);
      set_u64(fr, "not_splittable_bytes", w->not_splittable_bytes);
      set_u64(fr, "limit_bytes", w->limit_bytes);
      json_object_set_new(fr, "at_limit", json_boolean(w->at_limit));
      json_object_set_new(j, "free", fr);
    }
    json_t *fx = json_object();
    json_object_set_new(fx, "live_exceeds_device", json_boolean(o->live_exceeds));
    set_u64(fx, "live_excess_bytes", o->live_excess);
    if (o->fix_found) {
      char line[1024];
      ana_policy_env_line(o->fix_spec, o->device_memory, line, sizeof line);
      json_object_set_new(fx, "setting", json_string(o->fix_spec));
      json_object_set_new(fx, "paste", json_string(line));
      set_u64(fx, "setting_peak_reserved_bytes", o->fix_peak);
      json_object_set_new(fx, "setting_from", json_string(o->fix_from));
    } else {
      json_object_set_new(fx, "setting", json_null());
    }
    if (o->fits_capacity) set_u64(fx, "capacity_bytes", o->fits_capacity);
    else json_object_set_new(fx, "capacity_bytes", json_null());
    json_object_set_new(j, "fix", fx);
  }
  char *s = json_dumps(j, JSON_COMPACT | JSON_ENSURE_ASCII);
  json_decref(j);
  if (!s) return gm_err_set(err, GM_ERR_NOMEM, "out of memory writing JSON");
  fprintf(f, "%s\n", s);
  free(s);
  return GM_OK;
}
