/* ana_oom.c: `gpuanalyze oom`, the account of an out-of-memory for a person and for a script.
 *
 * The replay and the search are gpureplay's (`gpureplay TRACE --explain-oom --json`, run by
 * gpuanalyze: the analyzer does not link the replayer); this file reads the object it prints
 * and says it: the failing request, what was live (by callsite), what was reserved but free and
 * the rule that kept each free byte from the request, then the smallest changes that make the
 * same trace fit (a setting, a capacity), or that no setting can, because the live bytes alone
 * exceed the device. --json is gpureplay's object with the line to paste added. Text from the
 * trace (callsites, paths) is escaped before it is printed. */
#include <inttypes.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/ana.h"
#include "analyze/ana_gpureplay.h"

/* Reading gpureplay's object: the first key missing or of the wrong type is the error. */
typedef struct rd {
  gm_err_t *err;
  int bad;
} rd_t;

static json_t *key(rd_t *r, json_t *o, const char *obj, const char *k, json_type type, int nullable) {
  json_t *v = o ? json_object_get(o, k) : NULL;
  if (v && (json_typeof(v) == type || (type == JSON_TRUE && json_is_boolean(v)) || (nullable && json_is_null(v))))
    return v;
  if (!r->bad)
    gm_err_set(r->err, GM_ERR_FORMAT, "gpureplay --explain-oom: %s%s%s %s", obj, *obj ? "." : "", k,
               v ? "has the wrong type" : "is missing (an older gpureplay than this gpuanalyze?)");
  r->bad = 1;
  return NULL;
}

static uint64_t u64(rd_t *r, json_t *o, const char *obj, const char *k) {
  json_t *v = key(r, o, obj, k, JSON_INTEGER, 0);
  return v && json_integer_value(v) > 0 ? (uint64_t)json_integer_value(v) : 0;
}

static const char *str(rd_t *r, json_t *o, const char *obj, const char *k) {
  json_t *v = key(r, o, obj, k, JSON_STRING, 0);
  return v ? json_string_value(v) : "";
}

static int flag(rd_t *r, json_t *o, const char *obj, const char *k) {
  json_t *v = key(r, o, obj, k, JSON_TRUE, 0);
  return v && json_is_true(v);
}

static void read_failure(rd_t *r, json_t *j, ana_oom_t *o) {
  json_t *q = key(r, j, "", "request", JSON_OBJECT, 0);
  json_t *ev = key(r, q, "request", "event", JSON_INTEGER, 0);
  o->event = ev ? (int64_t)json_integer_value(ev) : -1;
  o->ts_ns = u64(r, q, "request", "ts_ns");
  o->size = u64(r, q, "request", "size_bytes");
  json_t *s = key(r, q, "request", "stream", JSON_INTEGER, 1);
  o->has_stream = s && json_is_integer(s);
  o->stream = o->has_stream ? (uint64_t)json_integer_value(s) : 0;
  o->callsite = str(r, q, "request", "callsite");
  o->cause = str(r, q, "request", "cause");
  json_t *l = key(r, j, "", "live", JSON_OBJECT, 0);
  o->live_bytes = u64(r, l, "live", "bytes");
  o->live_allocs = u64(r, l, "live", "allocs");
  o->external_bytes = u64(r, l, "live", "external_bytes");
  o->reserved_bytes = u64(r, l, "live", "reserved_bytes");
  o->other_bytes = u64(r, l, "live", "other_callsites_bytes");
  o->other_sites = u64(r, l, "live", "other_callsites");
  json_t *top = key(r, l, "live", "top_callsites", JSON_ARRAY, 0);
  for (size_t i = 0; top && i < json_array_size(top) && o->n_top < ANA_OOM_TOP; i++) {
    json_t *t = json_array_get(top, i);
    ana_oom_site_t *x = &o->top[o->n_top++];
    x->text = str(r, t, "live.top_callsites[]", "callsite");
    x->bytes = u64(r, t, "live.top_callsites[]", "bytes");
    x->allocs = u64(r, t, "live.top_callsites[]", "allocs");
  }
  json_t *f = json_object_get(j, "free"); /* only when the policy accounts for its free bytes */
  o->has_free = f != NULL;
  if (f) {
    o->rounded = u64(r, f, "free", "rounded_size_bytes");
    o->free_bytes = u64(r, f, "free", "free_bytes");
    o->free_blocks = u64(r, f, "free", "free_blocks");
    o->largest_free = u64(r, f, "free", "largest_free_bytes");
    o->allocated = u64(r, f, "free", "allocated_bytes");
    o->too_small = u64(r, f, "free", "too_small_bytes");
    o->largest_too_small = u64(r, f, "free", "largest_too_small_bytes");
    o->other_stream = u64(r, f, "free", "other_stream_bytes");
    o->other_pool = u64(r, f, "free", "other_pool_bytes");
    o->not_splittable = u64(r, f, "free", "not_splittable_bytes");
    o->limit = u64(r, f, "free", "limit_bytes");
    o->at_limit = flag(r, f, "free", "at_limit");
    o->note = str(r, f, "free", "note");
  }
  json_t *x = key(r, j, "", "fix", JSON_OBJECT, 0);
  o->live_exceeds = flag(r, x, "fix", "live_exceeds_device");
  o->live_excess = u64(r, x, "fix", "live_excess_bytes");
  json_t *s2 = key(r, x, "fix", "setting", JSON_STRING, 1);
  o->setting = s2 && json_is_string(s2) ? json_string_value(s2) : NULL;
  if (o->setting) {
    o->setting_peak = u64(r, x, "fix", "setting_peak_reserved_bytes");
    o->setting_from = str(r, x, "fix", "setting_from");
  }
  json_t *c = key(r, x, "fix", "capacity_bytes", JSON_INTEGER, 1);
  o->fits_capacity = c && json_is_integer(c) && json_integer_value(c) > 0 ? (uint64_t)json_integer_value(c) : 0;
  o->grid_tried = (int)u64(r, x, "fix", "grid_tried");
  o->grid_fit = (int)u64(r, x, "fix", "grid_fit");
  o->tune_tried = (int)u64(r, x, "fix", "tune_tried");
}

gm_status_t ana_oom_read(const char *json_text, ana_oom_t *o, gm_err_t *err) {
  memset(o, 0, sizeof *o);
  json_error_t je;
  json_t *j = json_loads(json_text, JSON_REJECT_DUPLICATES, &je);
  if (!j || !json_is_object(j)) {
    json_decref(j);
    return gm_err_set(err, GM_ERR_FORMAT, "gpureplay --explain-oom printed no JSON object (%s)",
                      j ? "not an object" : je.text);
  }
  o->json = j;
  rd_t r = {err, 0};
  o->trace = str(&r, j, "", "trace");
  o->policy = str(&r, j, "", "policy");
  o->capacity = u64(&r, j, "", "capacity_bytes");
  o->capacity_note = str(&r, j, "", "capacity_note");
  o->device_memory = u64(&r, j, "", "device_memory_bytes");
  o->requests = u64(&r, j, "", "requests");
  o->needs = u64(&r, j, "", "needs_bytes");
  json_t *ctx = json_object_get(j, "context_bytes"); /* absent from gpureplays before it was recorded */
  o->context = ctx && json_is_integer(ctx) && json_integer_value(ctx) > 0 ? (uint64_t)json_integer_value(ctx) : 0;
  o->peak_reserved = u64(&r, j, "", "peak_reserved_bytes");
  o->recorded_failures = u64(&r, j, "", "recorded_failures");
  o->ooms = u64(&r, j, "", "ooms");
  o->found = flag(&r, j, "", "oom");
  if (o->found) read_failure(&r, j, o);
  if (r.bad) {
    ana_oom_free(o);
    return GM_ERR_FORMAT;
  }
  return GM_OK;
}

void ana_oom_free(ana_oom_t *o) {
  json_decref((json_t *)o->json);
  o->json = NULL;
}

static const char *sz(uint64_t v, char *b) { return gm_format_size(v, b, 32); }

/* A callsite on one line: escaped (stacks hold newlines), cut to a screen's width. */
static const char *one_line(const char *s, char *b, size_t n) {
  if (!s || !*s) return "(no callsite recorded)";
  gm_escape_cut(s, b, n);
  return b;
}

static const char *stream_text(const ana_oom_t *o, char *b, size_t n) {
  if (!o->has_stream) snprintf(b, n, "none (synchronous)");
  else snprintf(b, n, "%" PRIu64, o->stream);
  return b;
}

static void print_why(FILE *f, const ana_oom_t *o) {
  char a[32], b[32], c[32];
  uint64_t free_b = o->reserved_bytes > o->allocated ? o->reserved_bytes - o->allocated : 0;
  if (!o->has_free) {
    fprintf(f, "reserved but free: %s (the policy %s does not say why it could not use it)\n", sz(free_b, a),
            o->policy);
    return;
  }
  fprintf(f, "reserved but free: %s in %" PRIu64 " blocks (largest %s); none could serve the request, "
             "rounded to %s:\n", sz(o->free_bytes, a), o->free_blocks, sz(o->largest_free, b), sz(o->rounded, c));
  if (o->too_small)
    fprintf(f, "  %12s  too small: each block smaller than the request (largest %s)\n", sz(o->too_small, a),
            sz(o->largest_too_small, b));
  if (o->other_stream)
    fprintf(f, "  %12s  on another stream: a cached block serves only the stream that freed it\n",
            sz(o->other_stream, a));
  if (o->other_pool)
    fprintf(f, "  %12s  in the other size class: blocks of <= 1 MiB serve only requests of <= 1 MiB, and the reverse\n",
            sz(o->other_pool, a));
  if (o->not_splittable)
    fprintf(f, "  %12s  not splittable for this request (above max_split_size, or max_non_split_rounding larger)\n",
            sz(o->not_splittable, a));
  if (!o->free_bytes) fprintf(f, "  (nothing: every reserved byte was in use)\n");
  if (o->limit)
    fprintf(f, "  the setting's own limit: %s%s\n", sz(o->limit, a),
            o->at_limit ? " (the request failed against it, not against the device)" : "");
  if (o->note && o->note[0]) fprintf(f, "  %s\n", o->note);
}

void ana_oom_print_text(FILE *f, const char *path, const ana_oom_t *o) {
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
            o->requests, sz(o->peak_reserved, a), sz(o->needs, b));
    if (o->recorded_failures) {
      /* not reproduced: within the run's own limit a miss of the replay; within an assumed one
       * (free memory, the GPU's total) the run's limit was lower, and unknown */
      int n1 = o->recorded_failures == 1;
      const char *why = !o->capacity_note[0] ? ""
                        : !strncmp(o->capacity_note, "the limit the recorded run set itself", 37)
                            ? ": the replay does not reproduce the failure within the limit the run set itself"
                            : ": the limit the run had was lower and is unknown (--capacity=SIZE to replay within it)";
      fprintf(f, "the recorded run failed %" PRIu64 " request%s; this replay served %s within the capacity%s\n",
              o->recorded_failures, n1 ? "" : "s", n1 ? "it" : "them", why);
    }
    return;
  }
  fprintf(f, "failed request: %s on stream %s, event %" PRId64 " at %.3f s (%" PRIu64 " OOM%s in all)\n",
          sz(o->size, a), stream_text(o, line, sizeof line), o->event, (double)o->ts_ns / 1e9, o->ooms,
          o->ooms == 1 ? "" : "s");
  fprintf(f, "  callsite: %s\n", one_line(o->callsite, esc, 240));
  if (strcmp(o->cause, "oversize") == 0) {
    fprintf(f, "it asks for more than any device has (a size that wrapped around): no setting or capacity serves it\n");
    return;
  }
  if (strcmp(o->cause, "external") == 0)
    fprintf(f, "  a library's own synchronous allocation (outside the framework's allocator) found no room\n");
  fprintf(f, "live then: %s in %" PRIu64 " allocations", sz(o->live_bytes, a), o->live_allocs);
  if (o->external_bytes) fprintf(f, " + %s external (libraries' own)", sz(o->external_bytes, b));
  if (o->context) fprintf(f, " + %s CUDA context and module code (recorded)", sz(o->context, b));
  fprintf(f, "; the setting had reserved %s\n", sz(o->reserved_bytes, c));
  for (int i = 0; i < o->n_top; i++)
    fprintf(f, "  %12s  %5" PRIu64 "x  %s\n", sz(o->top[i].bytes, a), o->top[i].allocs,
            one_line(o->top[i].text, esc, 200));
  if (o->other_sites)
    fprintf(f, "  %12s         (%" PRIu64 " other callsites)\n", sz(o->other_bytes, a), o->other_sites);
  print_why(f, o);
  fprintf(f, "smallest change that fits:\n");
  if (o->live_exceeds) {
    fprintf(f, "  no setting helps: the live bytes alone exceed the device by %s (needs at least %s, has %s)\n",
            sz(o->live_excess, a), sz(o->needs, b), sz(o->capacity, c));
  } else if (o->setting) {
    ana_policy_env_line(o->setting, o->device_memory, line, sizeof line);
    fprintf(f, "  setting: %s (peak reserved %s; from %s", gm_escape(line, esc, sizeof esc), sz(o->setting_peak, a),
            o->setting_from);
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

gm_status_t ana_oom_print_json(FILE *f, const ana_oom_t *o, gm_err_t *err) {
  json_t *j = json_deep_copy((json_t *)o->json);
  json_t *fx = j ? json_object_get(j, "fix") : NULL;
  if (j && fx && o->setting) {
    /* fix as gpureplay wrote it, the line to paste right after the setting it is for */
    char line[1024];
    ana_policy_env_line(o->setting, o->device_memory, line, sizeof line);
    json_t *nf = json_object();
    const char *k;
    json_t *v;
    json_object_foreach(fx, k, v) {
      json_object_set(nf, k, v);
      if (strcmp(k, "setting") == 0) json_object_set_new(nf, "paste", json_string(line));
    }
    json_object_set_new(j, "fix", nf);
  }
  char *s = j ? json_dumps(j, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
  json_decref(j);
  if (!s) return gm_err_set(err, GM_ERR_NOMEM, "out of memory writing JSON");
  fprintf(f, "%s\n", s);
  free(s);
  return GM_OK;
}
