/* gpureplay_oom.c: why a replay ran out of memory, and the smallest change that fits.
 *
 * One policy is replayed over a loaded trace within a capacity (the user's, else the recorded
 * failure's, as gpureplay chooses it). The engine describes the first failed request and the
 * policy accounts for its free bytes (rp_oom_report_t); here the trace's own live set at
 * that event is grouped by callsite, and three answers are looked for, through the same
 * replay calls as gpureplay (gr_run_loaded, gr_tune_run):
 *   - the live bytes alone exceed the device: no setting helps, by how much;
 *   - a setting of the same framework that fits: the sweep grid first (least peak reserved
 *     among those without an OOM), then, for PyTorch, the tuner's search within the capacity;
 *   - the smallest capacity the setting replayed fits in (bisection in 2 MiB steps).
 * Nothing is printed here: gpureplay --explain-oom writes gr_oom_t as JSON (gpureplay_oom_out.c),
 * which `gpuanalyze oom` reads and says in text. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay/tool/gpureplay.h"
#include "replay/tool/tune/gpureplay_tune.h"
#include "replay/engine/rp_map.h"

#define MiB2 (2ull << 20)

static gm_status_t run_one(const gr_config_t *cfg, const gr_loaded_t *lt, const char *spec, rp_result_t *r,
                           gm_err_t *err) {
  const char *specs[1] = {spec};
  return gr_run_loaded(cfg, lt, specs, 1, &r, err);
}

typedef struct site {
  uint32_t id;
  uint64_t bytes, allocs;
} site_t;

static int by_bytes(const void *a, const void *b) {
  const site_t *x = a, *y = b;
  if (x->bytes != y->bytes) return x->bytes < y->bytes ? 1 : -1;
  return x->id < y->id ? -1 : x->id > y->id;
}

static int by_id(const void *a, const void *b) {
  const site_t *x = a, *y = b;
  return x->id < y->id ? -1 : x->id > y->id;
}

/* Texts of string ids (callsites), read from the trace until every one is defined. */
static void strings_of(const char *path, const uint32_t *ids, int n, char (*out)[GR_OOM_TEXT]) {
  for (int i = 0; i < n; i++) out[i][0] = '\0';
  gmt_reader_t *r = NULL;
  gmt_event_t *buf = malloc(4096 * sizeof *buf);
  if (!buf || gmt_reader_open_flags(&r, path, GMT_READ_SALVAGE, NULL) != GM_OK) { /* best effort */
    free(buf);
    return;
  }
  for (;;) {
    int missing = 0;
    for (int i = 0; i < n; i++) {
      if (out[i][0] || !ids[i]) continue;
      const char *s = gmt_reader_string(r, ids[i]);
      if (s) snprintf(out[i], GR_OOM_TEXT, "%s", s);
      else missing = 1;
    }
    size_t k = 0;
    if (!missing || gmt_reader_next_batch(r, buf, 4096, &k, NULL) != GM_OK) break;
  }
  gmt_reader_close(r);
  free(buf);
}

/* The trace's requests live just before event idx on the replayed device, by callsite (as the
 * trace pairs them: ALLOC and FREE by address; VMM buffers read as requests are not listed). */
static gm_status_t live_by_callsite(const gr_loaded_t *lt, int device, int64_t idx, gr_oom_t *o, gm_err_t *err) {
  rp_map_t live;
  rp_map_init(&live);
  size_t n_sites = 0, cap_sites = 0;
  site_t *sites = NULL;
  gm_status_t st = GM_OK;
  for (size_t i = 0; i < lt->n_evs && (int64_t)i < idx; i++) {
    const gmt_event_t *ev = &lt->evs[i];
    if (ev->mem_kind != GMT_MEM_DEVICE && ev->mem_kind != GMT_MEM_UNKNOWN) continue;
    if (device >= 0 && ev->device != (unsigned)device) continue;
    /* External memory (libraries' own synchronous allocations) is counted apart. */
    if (lt->info.external_sync && ev->kind == GMT_EV_ALLOC && !(ev->flags & GMT_F_ASYNC)) continue;
    if (ev->kind == GMT_EV_ALLOC) {
      if (rp_map_put(&live, ev->addr, ev->size, ev->callsite) < 0) {
        st = gm_err_set(err, GM_ERR_NOMEM, "out of host memory");
        break;
      }
    } else if (ev->kind == GMT_EV_FREE) {
      rp_map_entry_t *m = rp_map_get(&live, ev->addr);
      if (m) rp_map_remove(&live, m);
    }
  }
  /* One row per live block, then grouped by callsite id (sorted, summed). */
  for (size_t i = 0; st == GM_OK && i < live.cap; i++) {
    const rp_map_entry_t *m = &live.slots[i];
    if (m->state != 1) continue;
    if (n_sites == cap_sites) {
      size_t nc = cap_sites ? 2 * cap_sites : 256;
      site_t *g = realloc(sites, nc * sizeof *g);
      if (!g) {
        st = gm_err_set(err, GM_ERR_NOMEM, "out of host memory");
        break;
      }
      sites = g;
      cap_sites = nc;
    }
    sites[n_sites++] = (site_t){(uint32_t)m->b, m->a, 1};
    o->live_allocs++;
  }
  rp_map_free(&live);
  if (st != GM_OK) {
    free(sites);
    return st;
  }
  if (n_sites) qsort(sites, n_sites, sizeof *sites, by_id);
  size_t k = 0;
  for (size_t i = 0; i < n_sites; i++) {
    if (k && sites[k - 1].id == sites[i].id) {
      sites[k - 1].bytes += sites[i].bytes;
      sites[k - 1].allocs++;
    } else {
      sites[k++] = sites[i];
    }
  }
  if (k) qsort(sites, k, sizeof *sites, by_bytes);
  uint32_t ids[GR_OOM_TOP];
  o->n_top = k < GR_OOM_TOP ? (int)k : GR_OOM_TOP;
  for (int i = 0; i < o->n_top; i++) {
    ids[i] = sites[i].id;
    o->top[i].bytes = sites[i].bytes;
    o->top[i].allocs = sites[i].allocs;
  }
  for (size_t i = (size_t)o->n_top; i < k; i++) o->top_other_bytes += sites[i].bytes;
  o->top_other_sites = k - (size_t)o->n_top;
  free(sites);
  char(*texts)[GR_OOM_TEXT] = calloc(GR_OOM_TOP + 1, GR_OOM_TEXT);
  if (!texts) return gm_err_set(err, GM_ERR_NOMEM, "out of host memory");
  ids[o->n_top] = o->callsite; /* the failing request's too, in the same pass */
  strings_of(lt->info.path, ids, o->n_top + 1, texts);
  for (int i = 0; i < o->n_top; i++) snprintf(o->top[i].text, sizeof o->top[i].text, "%s", texts[i]);
  snprintf(o->callsite_text, sizeof o->callsite_text, "%s", texts[o->n_top]);
  free(texts);
  return GM_OK;
}

/* The device size a bisection trial replays: the capacity, and the total memory the policies
 * see (the device's, when it is known apart from the capacity). */
static gr_config_t at_capacity(const gr_config_t *base, uint64_t fixed_total, uint64_t cap) {
  gr_config_t c = *base;
  c.capacity = cap;
  c.device_memory = fixed_total ? fixed_total : cap;
  return c;
}

/* The smallest capacity (2 MiB steps) in which spec replays without an OOM, above `floor`
 * (known not to fit), starting from what the job needs at least and doubling; 0: none within
 * 256 times that (a policy that cannot serve a request at any size). */
static gm_status_t smallest_capacity(const gr_config_t *base, const gr_loaded_t *lt, const char *spec,
                                     uint64_t fixed_total, uint64_t floor, uint64_t needs, uint64_t *out,
                                     gm_err_t *err) {
  rp_result_t *r = malloc(sizeof *r);
  if (!r) return gm_err_set(err, GM_ERR_NOMEM, "out of host memory");
  *out = 0;
  uint64_t lo = floor / MiB2;                   /* in 2 MiB units; does not fit */
  uint64_t hi = (needs + MiB2 - 1) / MiB2 + 1; /* nothing below the live bytes fits */
  if (hi <= lo) hi = lo + 1;
  gm_status_t st = GM_OK;
  int fits = 0;
  for (int tries = 0; tries < 9 && st == GM_OK && !fits; tries++) {
    gr_config_t c = at_capacity(base, fixed_total, hi * MiB2);
    st = run_one(&c, lt, spec, r, err);
    fits = st == GM_OK && !r->ooms;
    if (!fits) {
      lo = hi;
      hi *= 2;
    }
  }
  while (st == GM_OK && fits && hi - lo > 1) {
    uint64_t mid = lo + (hi - lo) / 2;
    gr_config_t c = at_capacity(base, fixed_total, mid * MiB2);
    if ((st = run_one(&c, lt, spec, r, err)) != GM_OK) break;
    if (r->ooms) lo = mid;
    else hi = mid;
  }
  free(r);
  if (st == GM_OK && fits) *out = hi * MiB2;
  return st;
}

/* Is spec a setting of the framework whose policy is `name` ("pytorch", "jax")? */
static int same_family(const char *spec, const char *name) {
  size_t l = strlen(name);
  return strncmp(spec, name, l) == 0 && (spec[l] == '\0' || spec[l] == ':');
}

/* Settings that are never the advice, as in gpureplay --tune and gpuanalyze recommend: XLA's
 * platform allocator (a driver call per buffer: the floor, like `direct`) and the driver's
 * stream-ordered pool (a wide range on the simulator). */
static int advisable(const char *spec) {
  return !strstr(spec, "ALLOCATOR=platform") && !strstr(spec, "cuda_async") && !strstr(spec, "cuda_malloc_async") &&
         strncmp(spec, "async", 5) != 0;
}

/* Keys a spec sets ("pytorch" 0, "pytorch:a:1,b:2" 2): the size of the change. */
static int keys(const char *spec) {
  const char *c = strchr(spec, ':');
  if (!c || !c[1]) return 0;
  int n = 1;
  for (int depth = 0; *c; c++) { /* commas inside [..] lists are one value */
    if (*c == '[') depth++;
    else if (*c == ']') depth--;
    else if (*c == ',' && depth == 0) n++;
  }
  return n;
}

/* a is a smaller change than b: fewer keys set, then less peak reserved. */
static int smaller_change(const char *a, uint64_t pa, const char *b, uint64_t pb) {
  int ka = keys(a), kb = keys(b);
  return ka != kb ? ka < kb : pa < pb;
}

/* A setting of the same framework that fits within cfg's capacity, the smallest change first
 * (fewest keys, then least peak reserved): on the grid, else among the points
 * the tuner's search replayed within the capacity. */
static gm_status_t find_setting(const gr_config_t *cfg, const gr_loaded_t *lt, const char *name, unsigned fw,
                                gr_oom_t *o, gm_err_t *err) {
  const char *const *grid = gr_sweep_grid_for(fw);
  const char *specs[64];
  int n = 0;
  for (int i = 0; grid[i] && n < 64; i++)
    if (same_family(grid[i], name) && strcmp(grid[i], o->policy) != 0 && advisable(grid[i])) specs[n++] = grid[i];
  o->grid_tried = n;
  rp_result_t *res[64];
  rp_result_t *block = n ? calloc((size_t)n, sizeof *block) : NULL;
  if (n && !block) return gm_err_set(err, GM_ERR_NOMEM, "out of host memory");
  for (int i = 0; i < n; i++) res[i] = &block[i];
  gm_status_t st = gr_run_loaded(cfg, lt, specs, n, res, err);
  int best = -1;
  for (int i = 0; st == GM_OK && i < n; i++) {
    if (res[i]->ooms) continue;
    o->grid_fit++;
    if (best < 0 || smaller_change(specs[i], res[i]->peak_reserved_bytes, specs[best], res[best]->peak_reserved_bytes))
      best = i;
  }
  if (best >= 0) {
    o->fix_found = 1;
    snprintf(o->fix_spec, sizeof o->fix_spec, "%s", specs[best]);
    o->fix_peak = res[best]->peak_reserved_bytes;
    o->fix_from = "the sweep grid";
  }
  free(block);
  if (st != GM_OK || o->fix_found) return st;
  /* Nothing on the grid: the tuner searches the framework's setting space within the device
   * (PyTorch: coordinate descent; JAX, TensorFlow, CuPy: bisection on their fractions). */
  gr_tune_t t;
  memset(&t, 0, sizeof t);
  gr_tune_opts_t to = {GR_TUNE_SEARCH, 0.01, 0};
  gr_config_t c = *cfg;
  st = gr_tune_run(&c, lt, &to, &t, err);
  int pick = -1;
  for (int i = 0; st == GM_OK && i < t.n; i++)
    if (t.pts[i].ok && same_family(t.pts[i].spec, name) && advisable(t.pts[i].spec) && (pick < 0 || smaller_change(t.pts[i].spec, t.pts[i].peak_reserved, t.pts[pick].spec,
                                                   t.pts[pick].peak_reserved)))
      pick = i;
  if (pick >= 0) {
    o->fix_found = 1;
    snprintf(o->fix_spec, sizeof o->fix_spec, "%s", t.pts[pick].spec);
    o->fix_peak = t.pts[pick].peak_reserved;
    o->fix_from = "the tuner's search";
  }
  o->tune_tried = t.n;
  gr_tune_free(&t);
  return st;
}

gm_status_t gr_oom_explain(const gr_config_t *cfg_in, const char *path, const char *spec, gr_oom_t *o,
                           gm_err_t *err) {
  memset(o, 0, sizeof *o);
  gr_config_t cfg = *cfg_in;
  cfg.serve_failed = 1;
  gr_loaded_t lt;
  gm_status_t st = gr_trace_load(&cfg, path, &lt, err);
  if (st != GM_OK) return st;
  unsigned fw = gmt_framework_single(lt.info.frameworks);
  char given[1024];
  if (spec && gr_policy_from_env(spec, given, sizeof given) == 0) spec = given;
  if (!spec) spec = gr_sweep_grid_for(fw)[0];
  snprintf(o->policy, sizeof o->policy, "%s", spec);
  char name[64];
  snprintf(name, sizeof name, "%.*s", (int)strcspn(spec, ":"), spec);
  snprintf(o->frameworks, sizeof o->frameworks, "%s", lt.info.frameworks_text);
  rp_result_t *r = malloc(sizeof *r);
  if (!r) {
    gr_loaded_free(&lt);
    return gm_err_set(err, GM_ERR_NOMEM, "out of host memory");
  }
  st = run_one(&cfg, &lt, spec, r, err);
  uint64_t fixed_total = cfg.device_memory;
  if (st == GM_OK && !cfg.capacity && r->recorded_failures) {
    /* The recorded run failed: replay within what it had, as gpureplay does. */
    char note[512];
    uint64_t cap = gr_failure_capacity(&lt.info, r, note, sizeof note);
    if (cap) {
      cfg.capacity = cap;
      if (!cfg.device_memory) cfg.device_memory = lt.info.gpu_total_mem ? lt.info.gpu_total_mem : cap;
      fixed_total = cfg.device_memory;
      lt.total_memory = cfg.device_memory;
      snprintf(o->capacity_note, sizeof o->capacity_note, "%s", note);
      st = run_one(&cfg, &lt, spec, r, err);
    }
  }
  if (st == GM_OK) {
    snprintf(o->policy, sizeof o->policy, "%s", r->policy);
    o->capacity = cfg.capacity;
    o->device_memory = cfg.device_memory ? cfg.device_memory : lt.total_memory;
    o->recorded_failures = r->recorded_failures;
    o->recorded_served = r->recorded_failures_served;
    o->requests = r->allocs;
    o->context_bytes = r->context_bytes; /* held from the start: no allocator can use it */
    o->needs_bytes = r->peak_requested_plus_external_bytes + r->context_bytes;
    o->peak_reserved = r->peak_reserved_plus_external_bytes;
    o->ooms = r->ooms;
    o->found = r->ooms > 0 && r->first_oom_event >= 0;
  }
  if (st == GM_OK && o->found) {
    o->event = r->first_oom_event;
    o->ts_ns = (uint64_t)r->first_oom_ts_ns;
    o->size = r->first_oom_size;
    o->stream = r->first_oom_stream;
    o->callsite = r->first_oom_callsite;
    o->cause = r->first_oom_cause;
    o->live_bytes = r->first_oom_live_bytes;
    o->external_bytes = r->first_oom_external_bytes;
    o->reserved_bytes = r->first_oom_reserved_bytes;
    o->has_report = r->has_oom_report;
    o->why = r->oom_report;
    st = live_by_callsite(&lt, r->device, o->event, o, err);
    if (st == GM_OK && o->capacity && o->needs_bytes > o->capacity) {
      o->live_exceeds = 1;
      o->live_excess = o->needs_bytes - o->capacity;
    }
    if (st == GM_OK && !o->live_exceeds && o->cause != RP_OOM_OVERSIZE)
      st = find_setting(&cfg, &lt, name, fw, o, err);
    if (st == GM_OK && o->cause != RP_OOM_OVERSIZE)
      st = smallest_capacity(&cfg, &lt, o->policy, fixed_total, o->capacity, o->needs_bytes, &o->fits_capacity, err);
  }
  free(r);
  gr_loaded_free(&lt);
  return st;
}
