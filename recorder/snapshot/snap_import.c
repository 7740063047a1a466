/* snap_import.c: a PyTorch memory snapshot (the plain-data tree from formats/pkr.c) into a
 * gpumem trace.
 *
 * The snapshot is {segments, device_traces, allocator_settings, external_annotations}. Each
 * device's trace is a list of entries {action, addr, size, stream, time_us, frames} in the
 * order the allocator recorded them; that order is kept exactly (the replay depends on it),
 * and devices and annotations are merged by time only between lists. Times become ns since the
 * first entry; the header's start_time_ns is that entry's wall-clock time.
 *
 * Initial state: when recording started after allocations existed (history enabled late, or
 * the ring buffer of max_entries dropped the oldest entries), the first thing a trace says about
 * an address may be its free. Such segments and blocks, and those alive in the final `segments`
 * list that the trace never mentions, are emitted first at ts 0 with GMT_F_SYNTHETIC, so a
 * replay starts from the memory that really existed (see snap_state.c). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#include "recorder/snapshot/snap_import.h"
#include "recorder/snapshot/snap_internal.h"

int snap_is_pickle(const void *buf, size_t len) {
  const uint8_t *b = buf;
  return len >= 2 && b[0] == 0x80 && b[1] >= 2 && b[1] <= 5;
}

/* ---- callsites ------------------------------------------------------------------------------- */

/* A frame's field; a "frame" that is not a small dict has none (its text is "?:0:?"), so a
 * hostile dict of a million keys costs no million-key scans. */
static const pkr_val_t *frame_get(const pkr_val_t *f, const char *key) {
  return f && f->type == PKR_DICT && f->n / 2 <= SNAP_MAX_RECORD_KEYS ? pkr_dict_get(f, key) : NULL;
}

/* The innermost frame (the operation that allocated), then the program's own frames (those not
 * under site-packages/), innermost first, up to SNAP_MAX_FRAMES; a stack with no frame of the
 * program keeps its innermost frames. "file:line:name" joined by " < ". Paths are cut after
 * "site-packages/" so the same library code reads the same on any machine. */
static int is_library(const pkr_val_t *f) {
  const pkr_val_t *fn = frame_get(f, "filename");
  return fn && fn->type == PKR_STR &&
         memmem(fn->s, fn->len > SNAP_MAX_PATH ? SNAP_MAX_PATH : fn->len, "site-packages/", 14) != NULL;
}

static size_t frame_text(const pkr_val_t *f, char *buf, size_t n, int first) {
  const pkr_val_t *fn = frame_get(f, "filename"), *nm = frame_get(f, "name");
  int64_t line = 0;
  pkr_int(frame_get(f, "line"), &line);
  const char *fs = "?", *ns = "?";
  int fl = 1, nl = 1;
  if (fn && fn->type == PKR_STR) {
    fs = fn->s;
    fl = (int)(fn->len > 400 ? 400 : fn->len);
    const char *sp = memmem(fs, (size_t)fl, "site-packages/", 14);
    if (sp) {
      fl -= (int)(sp + 14 - fs);
      fs = sp + 14;
    }
  }
  if (nm && nm->type == PKR_STR) {
    ns = nm->s;
    nl = (int)(nm->len > 200 ? 200 : nm->len);
  }
  int w = snprintf(buf, n, "%s%.*s:%lld:%.*s", first ? "" : " < ", fl, fs, (long long)line, nl, ns);
  return w < 0 || (size_t)w >= n ? 0 : (size_t)w;
}

/* Callsite ids by frames list: entries that share one list through the pickle's memo (a
 * hostile pickle can make a million entries share a million-frame list in a few MB) make
 * its string once. */
typedef struct snap_cs_cache cs_cache_t;
struct snap_cs_cache {
  const pkr_val_t *frames;
  uint32_t id;
  UT_hash_handle hh;
};

void snap_cs_cache_free(cs_cache_t **c) {
  cs_cache_t *e, *t;
  HASH_ITER(hh, *c, e, t) {
    HASH_DEL(*c, e);
    free(e);
  }
}

/* The callsite string of a frames list into buf ("" when there is none). */
static void callsite_text(const pkr_val_t *frames, char *buf, size_t n) {
  buf[0] = '\0';
  if (!frames || frames->type != PKR_LIST || frames->n == 0) return;
  int user = 0;
  for (size_t k = 1; k < frames->n && !user; k++) user = !is_library(frames->items[k]);
  size_t off = 0;
  int kept = 0;
  for (size_t k = 0; k < frames->n && kept < SNAP_MAX_FRAMES; k++) {
    if (k > 0 && user && is_library(frames->items[k])) continue;
    size_t w2 = frame_text(frames->items[k], buf + off, n - off, kept == 0);
    if (!w2) break;
    off += w2;
    kept++;
  }
  buf[off] = '\0';
}

static gm_status_t callsite(gmt_writer_t *w, cs_cache_t **cache, const pkr_val_t *frames, uint32_t *id,
                            gm_err_t *err) {
  *id = GMT_NO_STRING;
  if (!frames || frames->type != PKR_LIST || frames->n == 0) return GM_OK;
  cs_cache_t *e;
  HASH_FIND_PTR(*cache, &frames, e);
  if (e) {
    *id = e->id;
    return GM_OK;
  }
  char buf[2048];
  callsite_text(frames, buf, sizeof buf);
  if (buf[0]) {
    gm_status_t st = gmt_writer_intern(w, buf, id, err);
    if (st != GM_OK) return st;
  }
  if (!(e = malloc(sizeof *e))) return gm_err_set(err, GM_ERR_NOMEM, "out of memory");
  e->frames = frames;
  e->id = *id;
  HASH_ADD_PTR(*cache, frames, e);
  return GM_OK;
}

gm_status_t snap_event_strings(gmt_writer_t *w, cs_cache_t **cache, snap_event_t *e, gm_err_t *err) {
  if (e->marker == SNAP_MARK_SNAPSHOT) return gmt_writer_intern(w, "torch.snapshot", &e->ev.callsite, err);
  if (e->marker == SNAP_MARK_ANNOTATION) {
    /* "STAGE name", cut to 16 + 400 bytes */
    char text[420];
    const pkr_val_t *nm = e->frames, *sg = e->stage;
    int sl = sg ? (int)(sg->len > 16 ? 16 : sg->len) : 0;
    int nl = (int)(nm->len > 400 ? 400 : nm->len);
    snprintf(text, sizeof text, "%.*s%s%.*s", sl, sl ? sg->s : "", sl ? " " : "", nl, nm->s);
    return gmt_writer_intern(w, text, &e->ev.callsite, err);
  }
  if (e->frames) return callsite(w, cache, e->frames, &e->ev.callsite, err);
  return GM_OK;
}

/* ---- header ------------------------------------------------------------------------------ */

/* Settings values as text. A snapshot's settings are flat (a number, a bool, a string, or the
 * roundup dict {"1": 0, "2": 4, ...}), but the pickle comes from a stranger: a value may nest
 * without end or contain itself (through the memo), and a few shared dicts can make the tree
 * exponentially larger than the input. So the walk is bounded in depth and in the values it
 * visits, and the limit that was hit is named in the error. */
#define SNAP_TEXT_MAX_DEPTH 8     /* torch's deepest setting is a dict of ints: depth 2 */
#define SNAP_TEXT_MAX_VALUES 4096 /* per setting; the roundup dict has at most 64 entries */

typedef struct text_walk {
  size_t visited;
  const char *limit; /* the limit hit, or NULL */
} text_walk_t;

static void val_text_at(const pkr_val_t *v, char *buf, size_t n, int depth, text_walk_t *w) {
  buf[0] = 0;
  if (!v || w->limit) return;
  if (++w->visited > SNAP_TEXT_MAX_VALUES) {
    w->limit = "more than " GM_STR(SNAP_TEXT_MAX_VALUES) " values (limit SNAP_TEXT_MAX_VALUES)";
    return;
  }
  switch (v->type) {
    case PKR_NONE: snprintf(buf, n, "None"); break;
    case PKR_BOOL: snprintf(buf, n, "%s", v->i ? "True" : "False"); break;
    case PKR_INT: snprintf(buf, n, "%lld", (long long)v->i); break;
    case PKR_FLOAT: snprintf(buf, n, "%.17g", v->f); break;
    case PKR_STR:
    case PKR_BYTES: snprintf(buf, n, "%.*s", (int)(v->len > n - 1 ? n - 1 : v->len), v->s); break;
    case PKR_DICT: {
      /* roundup_power2_divisions: {"1": 0, "2": 4, ...} -> "[1:0,2:4,...]" */
      if (depth >= SNAP_TEXT_MAX_DEPTH) {
        w->limit = "nested deeper than " GM_STR(SNAP_TEXT_MAX_DEPTH) " levels (limit SNAP_TEXT_MAX_DEPTH)";
        return;
      }
      size_t off = 0;
      off += (size_t)snprintf(buf + off, n - off, "[");
      for (size_t k = 0; k + 1 < v->n && off < n && !w->limit; k += 2) {
        char a[64], b[64];
        val_text_at(v->items[k], a, sizeof(a), depth + 1, w);
        val_text_at(v->items[k + 1], b, sizeof(b), depth + 1, w);
        off += (size_t)snprintf(buf + off, n - off, "%s%s:%s", k ? "," : "", a, b);
      }
      if (off < n) snprintf(buf + off, n - off, "]");
      break;
    }
    default: snprintf(buf, n, "?"); break;
  }
}

/* The text of one setting; GM_ERR_FORMAT naming the setting and the limit when the value is
 * deeper or larger than any real setting. */
static gm_status_t val_text(const pkr_val_t *v, const char *what, char *buf, size_t n, gm_err_t *err) {
  text_walk_t w = {0, NULL};
  val_text_at(v, buf, n, 0, &w);
  if (w.limit) return gm_err_set(err, GM_ERR_FORMAT, "allocator_settings: %s: %s", what, w.limit);
  return GM_OK;
}

/* The PYTORCH_CUDA_ALLOC_CONF equivalent of the recorded settings (for when the verbatim string
 * was not recorded, or was changed at run time): only keys that differ from the defaults. */
gm_status_t snap_settings_conf(const pkr_val_t *s, char *buf, size_t n) {
  size_t off = 0;
  buf[0] = 0;
  if (!s || s->type != PKR_DICT) return GM_OK;
  int64_t v;
#define APPEND(...)                                                                          \
  do {                                                                                       \
    int w_ = snprintf(buf + off, n - off, "%s", off ? "," : "");                            \
    if (w_ > 0) off += (size_t)w_;                                                           \
    if (off < n) {                                                                           \
      w_ = snprintf(buf + off, n - off, __VA_ARGS__);                                        \
      if (w_ > 0) off += (size_t)w_;                                                         \
    }                                                                                        \
    if (off >= n) return GM_ERR_INVAL;                                                       \
  } while (0)
  if (pkr_int(pkr_dict_get(s, "max_split_size"), &v) && v > 0 && (uint64_t)v != UINT64_MAX &&
      (uint64_t)v < ((uint64_t)1 << 62))
    APPEND("max_split_size_mb:%llu", (unsigned long long)((uint64_t)v >> 20));
  const pkr_val_t *g = pkr_dict_get(s, "garbage_collection_threshold");
  if (g && g->type == PKR_FLOAT && g->f > 0) APPEND("garbage_collection_threshold:%.17g", g->f);
  if (pkr_int(pkr_dict_get(s, "expandable_segments"), &v) && v) APPEND("expandable_segments:True");
  const pkr_val_t *r = pkr_dict_get(s, "roundup_power2_divisions");
  if (r && r->type == PKR_DICT && r->n >= 2) {
    int64_t first = -1, any = 0, same = 1;
    for (size_t k = 0; k + 1 < r->n; k += 2) {
      int64_t d = 0;
      pkr_int(r->items[k + 1], &d);
      if (first < 0) first = d;
      if (d != first) same = 0;
      if (d) any = 1;
    }
    if (any && same) {
      APPEND("roundup_power2_divisions:%lld", (long long)first);
    } else if (any) {
      char t[1024];
      if (val_text(r, "roundup_power2_divisions", t, sizeof(t), NULL) != GM_OK) return GM_ERR_FORMAT;
      APPEND("roundup_power2_divisions:%s", t);
    }
  }
  if (pkr_int(pkr_dict_get(s, "max_non_split_rounding_size"), &v) && v > 0 &&
      v != ((int64_t)20 << 20))
    APPEND("max_non_split_rounding_mb:%lld", (long long)(v >> 20));
#undef APPEND
  return GM_OK;
}

gm_status_t snap_fill_header(gmt_header_t *h, const pkr_val_t *root, const snap_pass_t *ps,
                               const gmt_header_t *prov, gm_err_t *err) {
  gm_status_t st;
  if (prov && (st = gmt_header_copy(h, prov, err))) return st;
  h->capture_mode = GMT_CAPTURE_TORCH;
  h->start_time_ns = ps->start_time_ns;
  if ((st = gmt_header_set(&h->tool, "gpurec " GM_VERSION " import", err))) return st;
  const pkr_val_t *s = pkr_dict_get(root, "allocator_settings");
  char key[160], val[1200];
  if (s && s->type == PKR_DICT) {
    if (s->n / 2 > SNAP_MAX_SETTINGS)
      return gm_err_set(err, GM_ERR_FORMAT, "allocator_settings: %zu keys, more than torch has (limit SNAP_MAX_SETTINGS = %d)",
                        s->n / 2, SNAP_MAX_SETTINGS);
    for (size_t k = 0; k + 1 < s->n; k += 2) {
      const pkr_val_t *kv = s->items[k];
      if (!kv || kv->type != PKR_STR || kv->len > 100) continue;
      snprintf(key, sizeof(key), "'%.*s'", (int)kv->len, kv->s);
      if ((st = val_text(s->items[k + 1], key, val, sizeof(val), err))) return st;
      if (pkr_str_eq(kv, "PYTORCH_CUDA_ALLOC_CONF") || pkr_str_eq(kv, "PYTORCH_ALLOC_CONF")) {
        snprintf(key, sizeof(key), "%.*s", (int)kv->len, kv->s);
      } else {
        snprintf(key, sizeof(key), "torch.allocator_settings.%.*s", (int)kv->len, kv->s);
      }
      if ((st = gmt_header_kv_set(h, key, val, err))) return st;
    }
    if (snap_settings_conf(s, val, sizeof(val)) == GM_OK &&
        (st = gmt_header_kv_set(h, "torch.alloc_conf", val, err)))
      return st;
  }
  /* The first OOM's record of the device's free memory: with what the allocator held then, it
   * says how much memory the process could have had (gpureplay replays within it). */
  for (size_t k = 0; k < ps->n; k++) {
    if (ps->evs[k]->ev.kind != GMT_EV_ALLOC_FAILED) continue;
    if (ps->evs[k]->device_free) {
      snprintf(val, sizeof(val), "%llu", (unsigned long long)ps->evs[k]->device_free);
      if ((st = gmt_header_kv_set(h, "torch.snapshot.oom_device_free_bytes", val, err))) return st;
    }
    break;
  }
  snprintf(val, sizeof(val), "%llu", (unsigned long long)ps->devices);
  if ((st = gmt_header_kv_set(h, "torch.snapshot.devices", val, err))) return st;
  snprintf(val, sizeof(val), "%llu", (unsigned long long)ps->synthetic);
  if ((st = gmt_header_kv_set(h, "torch.snapshot.synthetic_initial_events", val, err))) return st;
  if ((st = gmt_header_kv_set(h, "torch.snapshot.time", ps->has_time ? "time_us" : "none", err)))
    return st;
  gmt_coverage_t cov; /* a snapshot says nothing of its ring's size: the initial state tells */
  snap_coverage_of(ps, 0, &cov);
  return snap_coverage_mark(h, &cov, err);
}

/* ---- the whole conversion ------------------------------------------------------------------ */

gm_status_t snap_read_file(const char *path, uint8_t **buf, size_t *len, gm_err_t *err) {
  FILE *f = fopen(path, "rb");
  if (!f) return gm_err_set(err, GM_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
  size_t cap = 1 << 20, n = 0;
  uint8_t *b = malloc(cap);
  while (b) {
    size_t r = fread(b + n, 1, cap - n, f);
    n += r;
    if (r == 0) break;
    if (n == cap) {
      uint8_t *nb = realloc(b, cap * 2);
      if (!nb) {
        free(b);
        b = NULL;
        break;
      }
      b = nb;
      cap *= 2;
    }
  }
  int bad = ferror(f);
  fclose(f);
  if (!b) return gm_err_set(err, GM_ERR_NOMEM, "cannot read '%s': out of memory", path);
  if (bad) {
    free(b);
    return gm_err_set(err, GM_ERR_IO, "cannot read '%s'", path);
  }
  *buf = b;
  *len = n;
  return GM_OK;
}

gm_status_t snap_import_doc(const pkr_val_t *root, const char *out_path,
                            const gmt_writer_opts_t *opts, const gmt_header_t *prov,
                            snap_import_stats_t *st, gm_err_t *err) {
  snap_pass_t ps;
  gm_status_t s = snap_plan(root, &ps, err);
  if (s) return s;
  gmt_header_t h;
  gmt_header_init(&h);
  gmt_writer_t *w = NULL;
  cs_cache_t *cache = NULL;
  if ((s = snap_fill_header(&h, root, &ps, prov, err)) == GM_OK &&
      (s = gmt_writer_open_atomic(&w, out_path, &h, opts, err)) == GM_OK) {
    for (size_t k = 0; k < ps.n && s == GM_OK; k++) {
      snap_event_t *e = ps.evs[k];
      s = snap_event_strings(w, &cache, e, err);
      if (s == GM_OK) s = gmt_writer_append(w, &e->ev, err);
    }
    if (s == GM_OK) {
      s = gmt_writer_close(w, err);
    } else {
      gmt_writer_abandon(w);
    }
  }
  if (st) {
    st->entries = ps.entries;
    st->events = s == GM_OK ? ps.n : 0;
    st->devices = ps.devices;
    st->skipped = ps.skipped;
    st->failed = 0;
    for (size_t k = 0; k < ps.n; k++) {
      const snap_event_t *e = ps.evs[k];
      if (e->ev.kind != GMT_EV_ALLOC_FAILED) continue;
      if (st->failed++ == 0) {
        st->first_failed_size = e->ev.size;
        st->first_failed_stream = e->ev.stream;
        callsite_text(e->frames, st->first_failed_callsite, sizeof st->first_failed_callsite);
      }
    }
    st->synthetic = ps.synthetic;
  }
  snap_cs_cache_free(&cache);
  gmt_header_free(&h);
  snap_plan_free(&ps);
  return s;
}

gm_status_t snap_import_file(const char *pickle_path, const char *out_path,
                             const gmt_writer_opts_t *opts, snap_import_stats_t *st, gm_err_t *err) {
  return snap_import_file_prov(pickle_path, out_path, opts, NULL, st, err);
}

gm_status_t snap_import_file_prov(const char *pickle_path, const char *out_path,
                                  const gmt_writer_opts_t *opts, const gmt_header_t *prov,
                                  snap_import_stats_t *st, gm_err_t *err) {
  uint8_t *buf = NULL;
  size_t len = 0;
  gm_status_t s = snap_read_file(pickle_path, &buf, &len, err);
  if (s) return s;
  pkr_doc_t *doc = NULL;
  if (!snap_is_pickle(buf, len)) {
    s = gm_err_set(err, GM_ERR_FORMAT, "'%s' is not a pickle (a PyTorch memory snapshot is one)",
                   pickle_path);
  } else if ((s = pkr_parse(buf, len, &doc, err)) == GM_OK) {
    s = snap_import_doc(pkr_doc_root(doc), out_path, opts, prov, st, err);
  } /* the caller names the file: "cannot import 'x.pickle': <this message>" */
  pkr_doc_free(doc);
  free(buf);
  return s;
}
