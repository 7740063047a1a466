/* gpureplay_oom_out.c: what `gpureplay TRACE --explain-oom --json` prints: gr_oom_t (why the
 * replay ran out of memory, the smallest changes that fit) as one JSON object, the schema in
 * replay/README.md "Why it ran out of memory". It is what `gpuanalyze oom` reads (the analyzer
 * does not link the replayer, DESIGN.md): every figure the analyzer's text shows is here, so
 * keys are only ever added. Texts from the trace (callsites) that are not UTF-8 are written
 * escaped (\xHH), never dropped. */
#include <jansson.h>
#include <stdlib.h>

#include "replay/tool/gpureplay.h"

static void set_u64(json_t *o, const char *k, uint64_t v) { json_object_set_new(o, k, json_integer((json_int_t)v)); }

static void set_int(json_t *o, const char *k, int v) { json_object_set_new(o, k, json_integer(v)); }

/* A string from the trace: as it is when it is UTF-8 (jansson refuses anything else). */
static json_t *text(const char *s) {
  json_t *j = json_string(s);
  if (j) return j;
  char esc[GR_OOM_TEXT * 4 + 16];
  return json_string(gm_escape(s, esc, sizeof esc));
}

static json_t *request(const gr_oom_t *o) {
  static const char *const causes[] = {"policy", "external", "oversize"};
  json_t *q = json_object();
  json_object_set_new(q, "event", json_integer(o->event));
  set_u64(q, "ts_ns", o->ts_ns);
  set_u64(q, "size_bytes", o->size);
  json_object_set_new(q, "stream", o->stream == GMT_STREAM_NONE ? json_null() : json_integer((json_int_t)o->stream));
  json_object_set_new(q, "callsite", text(o->callsite_text));
  json_object_set_new(q, "cause", json_string(causes[(unsigned)o->cause % 3]));
  return q;
}

static json_t *live(const gr_oom_t *o) {
  json_t *l = json_object();
  set_u64(l, "bytes", o->live_bytes);
  set_u64(l, "allocs", o->live_allocs);
  set_u64(l, "external_bytes", o->external_bytes);
  set_u64(l, "reserved_bytes", o->reserved_bytes);
  json_t *top = json_array();
  for (int i = 0; i < o->n_top; i++) {
    json_t *t = json_object();
    json_object_set_new(t, "callsite", text(o->top[i].text));
    set_u64(t, "bytes", o->top[i].bytes);
    set_u64(t, "allocs", o->top[i].allocs);
    json_array_append_new(top, t);
  }
  json_object_set_new(l, "top_callsites", top);
  set_u64(l, "other_callsites_bytes", o->top_other_bytes);
  set_u64(l, "other_callsites", o->top_other_sites);
  return l;
}

/* The policy's own account of its free bytes (rp_oom_report_t). */
static json_t *free_account(const rp_oom_report_t *w) {
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
  set_u64(fr, "allocated_bytes", w->allocated_bytes);
  set_u64(fr, "largest_too_small_bytes", w->largest_too_small);
  json_object_set_new(fr, "note", text(w->note));
  return fr;
}

static json_t *fix(const gr_oom_t *o) {
  json_t *fx = json_object();
  json_object_set_new(fx, "live_exceeds_device", json_boolean(o->live_exceeds));
  set_u64(fx, "live_excess_bytes", o->live_excess);
  if (o->fix_found) {
    json_object_set_new(fx, "setting", text(o->fix_spec));
    set_u64(fx, "setting_peak_reserved_bytes", o->fix_peak);
    json_object_set_new(fx, "setting_from", json_string(o->fix_from ? o->fix_from : ""));
  } else {
    json_object_set_new(fx, "setting", json_null());
  }
  if (o->fits_capacity) set_u64(fx, "capacity_bytes", o->fits_capacity);
  else json_object_set_new(fx, "capacity_bytes", json_null());
  set_int(fx, "grid_tried", o->grid_tried);
  set_int(fx, "grid_fit", o->grid_fit);
  set_int(fx, "tune_tried", o->tune_tried);
  return fx;
}

gm_status_t gr_oom_print_json(FILE *f, const char *path, const gr_oom_t *o, gm_err_t *err) {
  json_t *j = json_object();
  if (!j) return gm_err_set(err, GM_ERR_NOMEM, "out of memory writing JSON");
  json_object_set_new(j, "trace", text(path));
  json_object_set_new(j, "policy", text(o->policy));
  set_u64(j, "capacity_bytes", o->capacity);
  json_object_set_new(j, "capacity_note", text(o->capacity_note));
  set_u64(j, "needs_bytes", o->needs_bytes);
  set_u64(j, "context_bytes", o->context_bytes);
  set_u64(j, "peak_reserved_bytes", o->peak_reserved);
  set_u64(j, "recorded_failures", o->recorded_failures);
  set_u64(j, "ooms", o->ooms);
  json_object_set_new(j, "frameworks", text(o->frameworks));
  set_u64(j, "device_memory_bytes", o->device_memory);
  set_u64(j, "requests", o->requests);
  set_u64(j, "recorded_failures_served", o->recorded_served);
  json_object_set_new(j, "oom", json_boolean(o->found));
  if (o->found) {
    json_object_set_new(j, "request", request(o));
    json_object_set_new(j, "live", live(o));
    if (o->has_report) json_object_set_new(j, "free", free_account(&o->why));
    json_object_set_new(j, "fix", fix(o));
  }
  char *s = json_dumps(j, JSON_COMPACT | JSON_ENSURE_ASCII);
  json_decref(j);
  if (!s) return gm_err_set(err, GM_ERR_NOMEM, "out of memory writing JSON");
  fprintf(f, "%s\n", s);
  free(s);
  return GM_OK;
}
