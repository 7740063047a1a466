/* gpureplay_memviz_out.c: the recorded run (memviz_internal.h) as the pickle that
 * torch.cuda.memory._snapshot() returns and _dump_snapshot() writes, with the keys and types
 * torch writes (torch/csrc/cuda/memory_snapshot.cpp) and that memory_viz reads
 * (torch/utils/viz/MemoryViz.js):
 *   segment: device, address, total_size, allocated_size, active_size, requested_size, stream,
 *            segment_type ('large' | 'small'), segment_pool_id (0, 0), is_expandable, frames,
 *            blocks
 *   block:   address, size, requested_size, state ('active_allocated' | 'active_pending_free' |
 *            'inactive'), frames. The blocks of a segment tile it in address order: memory_viz
 *            computes each block's address by adding up the sizes before it.
 *   entry:   action, addr (an oom's is device_free), size, stream, time_us, compile_context,
 *            user_metadata, frames
 *   frame:   filename, line, name (innermost first)
 * Strings used over and over (keys, actions, states) and each callsite's frames list are
 * written once and then referred to through the memo, as CPython's pickler does for shared
 * objects: a 1 M-entry trace of a few hundred callsites stays near 60 bytes an entry. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "replay/tool/export/export_memviz_internal.h"

const char *mv_action_name(int action) {
  static const char *const names[MV_ACTIONS] = {
      "?", "alloc", "free_requested", "free_completed", "segment_alloc", "segment_free",
      "segment_map", "segment_unmap", "oom", "snapshot",
  };
  return action > 0 && action < MV_ACTIONS ? names[action] : "?";
}

/* Strings written through the memo. */
enum {
  S_ACTION, S_ADDR, S_SIZE, S_STREAM, S_TIME_US, S_FRAMES, S_DEVICE_FREE, S_FILENAME, S_LINE, S_NAME,
  S_DEVICE, S_ADDRESS, S_TOTAL_SIZE, S_ALLOCATED_SIZE, S_ACTIVE_SIZE, S_REQUESTED_SIZE, S_SEGMENT_TYPE,
  S_SEGMENT_POOL_ID, S_IS_EXPANDABLE, S_BLOCKS, S_STATE, S_ACTIVE_ALLOCATED, S_ACTIVE_PENDING_FREE,
  S_INACTIVE, S_LARGE, S_SMALL, S_COMPILE_CONTEXT, S_USER_METADATA, S_NA, S_EMPTY, S_COUNT
};
static const char *const kStrings[S_COUNT] = {
    "action", "addr", "size", "stream", "time_us", "frames", "device_free", "filename", "line", "name",
    "device", "address", "total_size", "allocated_size", "active_size", "requested_size", "segment_type",
    "segment_pool_id", "is_expandable", "blocks", "state", "active_allocated", "active_pending_free",
    "inactive", "large", "small", "compile_context", "user_metadata", "N/A", "",
};

#define SITE_TEXT_MAX 512          /* bytes of a callsite's text kept (6 frames of a real stack) */
#define SITES_BYTES_MAX (64u << 20) /* all callsite texts kept; past it, frames are [] */
#define FRAMES_MAX 64              /* frames of one callsite */

struct mv_site {
  uint32_t id;
  uint32_t memo; /* +1; 0: not written yet */
  char *text;    /* NULL: none kept */
  UT_hash_handle hh;
};

/* A final segment with its blocks (copies: the run is freed before the end is written). */
struct mv_final {
  int device;
  mv_seg_t seg;
  mv_block_t *blocks; /* sorted by address, inside the segment */
  size_t nb;
};

static void put(mv_out_t *o, int s) {
  if (o->key_memo[s]) {
    pkw_get(&o->w, o->key_memo[s] - 1);
    return;
  }
  pkw_cstr(&o->w, kStrings[s]);
  o->key_memo[s] = pkw_memo(&o->w) + 1;
}

static void put_action(mv_out_t *o, int a) {
  if (o->action_memo[a]) {
    pkw_get(&o->w, o->action_memo[a] - 1);
    return;
  }
  pkw_cstr(&o->w, mv_action_name(a));
  o->action_memo[a] = pkw_memo(&o->w) + 1;
}

gm_status_t mv_out_sites(mv_out_t *o, const char *path, gm_err_t *err) {
  gmt_reader_t *r = NULL;
  gm_status_t st = gmt_reader_open_flags(&r, path, GMT_READ_SALVAGE, err);
  if (st != GM_OK) return gm_err_wrap(err, "cannot open '%s'", path);
  uint64_t kept = 0;
  for (;;) {
    const gmt_event_t *evs = NULL;
    size_t n = 0;
    st = gmt_reader_next_view(r, &evs, &n, err);
    if (st == GM_END) {
      st = GM_OK;
      break;
    }
    if (st != GM_OK) {
      gm_err_wrap(err, "cannot read '%s'", path);
      break;
    }
    /* a view is one chunk: its events' strings are the reader's current ones */
    for (size_t i = 0; i < n && st == GM_OK; i++) {
      uint32_t id = evs[i].callsite;
      if (id == GMT_NO_STRING) continue;
      mv_site_t *s = NULL;
      HASH_FIND(hh, o->sites, &id, sizeof id, s);
      if (s) continue;
      const char *text = gmt_reader_string(r, id);
      if (!text) continue; /* not defined in this chunk: a later one may define it */
      if (!(s = calloc(1, sizeof *s))) {
        st = gm_err_set(err, GM_ERR_NOMEM, "out of host memory");
        break;
      }
      s->id = id;
      size_t len = strnlen(text, SITE_TEXT_MAX);
      if (kept + len < SITES_BYTES_MAX && (s->text = malloc(len + 1))) {
        memcpy(s->text, text, len);
        s->text[len] = '\0';
        kept += len;
      }
      HASH_ADD(hh, o->sites, id, sizeof s->id, s);
    }
  }
  gmt_reader_close(r);
  return st;
}

void mv_out_begin(mv_out_t *o, FILE *f, uint64_t start_time_ns) {
  pkw_init(&o->w, f, 4);
  o->start_time_ns = start_time_ns;
  pkw_dict_begin(&o->w);
  pkw_cstr(&o->w, "device_traces");
  pkw_list_begin(&o->w);
}

/* One frame "file:line:name" (the importer's and the recorder's form); anything else is the
 * frame's filename with line 0. */
static void put_frame(mv_out_t *o, const char *p, size_t len) {
  const char *colon2 = NULL, *colon1 = NULL;
  for (size_t i = len; i > 0; i--)
    if (p[i - 1] == ':') {
      colon2 = p + i - 1;
      break;
    }
  if (colon2)
    for (const char *q = colon2; q > p; q--)
      if (q[-1] == ':') {
        colon1 = q - 1;
        break;
      }
  int64_t line = 0;
  int ok = colon1 && colon2 > colon1 + 1;
  for (const char *q = colon1 ? colon1 + 1 : NULL; ok && q < colon2; q++) {
    if (*q < '0' || *q > '9' || line > 100000000) ok = 0;
    else line = line * 10 + (*q - '0');
  }
  pkw_dict_begin(&o->w);
  put(o, S_FILENAME);
  if (ok) pkw_str(&o->w, p, (size_t)(colon1 - p));
  else pkw_str(&o->w, p, len);
  put(o, S_LINE);
  pkw_int(&o->w, ok ? line : 0);
  put(o, S_NAME);
  if (ok) pkw_str(&o->w, colon2 + 1, (size_t)(p + len - colon2 - 1));
  else pkw_cstr(&o->w, "");
  pkw_end(&o->w);
}

static void put_frames(mv_out_t *o, uint32_t id) {
  mv_site_t *s = NULL;
  if (id != GMT_NO_STRING) HASH_FIND(hh, o->sites, &id, sizeof id, s);
  if (!s || !s->text || !s->text[0]) { /* one shared empty list, as torch shares its own */
    if (o->empty_frames) {
      pkw_get(&o->w, o->empty_frames - 1);
    } else {
      pkw_list_begin(&o->w);
      o->empty_frames = pkw_memo(&o->w) + 1;
      pkw_end(&o->w);
    }
    return;
  }
  if (s->memo) {
    pkw_get(&o->w, s->memo - 1);
    return;
  }
  pkw_list_begin(&o->w);
  s->memo = pkw_memo(&o->w) + 1;
  o->n_sites++;
  const char *p = s->text;
  for (int k = 0; k < FRAMES_MAX && *p; k++) {
    const char *sep = strstr(p, " < ");
    size_t len = sep ? (size_t)(sep - p) : strlen(p);
    put_frame(o, p, len);
    if (!sep) break;
    p = sep + 3;
  }
  pkw_end(&o->w);
}

static void put_entry(mv_out_t *o, const mv_ev_t *e) {
  pkw_t *w = &o->w;
  pkw_dict_begin(w);
  put(o, S_ACTION);
  put_action(o, e->action);
  put(o, e->action == MV_OOM ? S_DEVICE_FREE : S_ADDR);
  pkw_uint(w, e->addr);
  put(o, S_SIZE);
  pkw_uint(w, e->size);
  put(o, S_STREAM);
  pkw_uint(w, e->stream);
  put(o, S_TIME_US);
  pkw_uint(w, (o->start_time_ns + e->ts_ns) / 1000u);
  put(o, S_COMPILE_CONTEXT); /* torch 2.11's entries have both: no compile, no user metadata */
  put(o, S_NA);
  put(o, S_USER_METADATA);
  put(o, S_EMPTY);
  put(o, S_FRAMES);
  put_frames(o, e->site);
  pkw_end(w);
}

void mv_out_trace(mv_out_t *o, const mv_run_t *r) {
  pkw_list_begin(&o->w);
  for (size_t i = 0; i < r->n; i++) {
    put_entry(o, &r->ev[i]);
    if (r->peak_at && i + 1 == r->peak_at) { /* torch's own marker of a snapshot taken */
      mv_ev_t m = r->ev[i];
      m.action = MV_SNAPSHOT;
      m.addr = m.size = m.stream = 0;
      m.site = 0;
      put_entry(o, &m);
    }
  }
  pkw_end(&o->w);
}

void mv_out_empty_trace(mv_out_t *o) {
  pkw_list_begin(&o->w);
  pkw_end(&o->w);
}

static int seg_by_addr(const void *a, const void *b) {
  const mv_seg_t *x = a, *y = b;
  return (x->addr > y->addr) - (x->addr < y->addr);
}

static int block_by_addr(const void *a, const void *b) {
  const mv_block_t *x = a, *y = b;
  return (x->addr > y->addr) - (x->addr < y->addr);
}

gm_status_t mv_out_keep(mv_out_t *o, const mv_run_t *r, gm_err_t *err) {
  size_t ns = HASH_COUNT(r->segs) + r->n_maps, nb = HASH_COUNT(r->blocks), k = 0;
  mv_seg_t *segs = malloc((ns ? ns : 1) * sizeof *segs);
  mv_block_t *blocks = malloc((nb ? nb : 1) * sizeof *blocks);
  struct mv_final *nf = realloc(o->finals, (o->n_finals + ns + 1) * sizeof *nf);
  if (nf) o->finals = nf;
  if (!segs || !blocks || !nf) {
    free(segs);
    free(blocks);
    return gm_err_set(err, GM_ERR_NOMEM, "out of host memory");
  }
  for (const mv_seg_t *s = r->segs; s; s = s->hh.next) segs[k++] = *s;
  for (size_t i = 0; i < r->n_maps; i++) segs[k++] = r->maps[i];
  k = 0;
  for (const mv_block_t *b = r->blocks; b; b = b->hh.next) blocks[k++] = *b;
  if (ns) qsort(segs, ns, sizeof *segs, seg_by_addr);
  if (nb) qsort(blocks, nb, sizeof *blocks, block_by_addr);
  size_t bi = 0;
  gm_status_t st = GM_OK;
  for (size_t i = 0; i < ns && st == GM_OK; i++) {
    struct mv_final *f = &o->finals[o->n_finals];
    memset(f, 0, sizeof *f);
    f->device = r->device;
    f->seg = segs[i];
    uint64_t end = segs[i].addr + segs[i].size;
    while (bi < nb && blocks[bi].addr < segs[i].addr) bi++; /* outside every segment: not shown */
    size_t first = bi;
    while (bi < nb && blocks[bi].addr < end) bi++;
    f->nb = bi - first;
    if (f->nb && !(f->blocks = malloc(f->nb * sizeof *f->blocks))) {
      st = gm_err_set(err, GM_ERR_NOMEM, "out of host memory");
      break;
    }
    if (f->nb) memcpy(f->blocks, &blocks[first], f->nb * sizeof *f->blocks);
    o->n_finals++;
  }
  free(segs);
  free(blocks);
  return st;
}

static void put_block(mv_out_t *o, uint64_t addr, uint64_t size, uint64_t requested, int state, uint32_t site) {
  pkw_t *w = &o->w;
  pkw_dict_begin(w);
  put(o, S_ADDRESS);
  pkw_uint(w, addr);
  put(o, S_SIZE);
  pkw_uint(w, size);
  put(o, S_REQUESTED_SIZE);
  pkw_uint(w, requested);
  put(o, S_STATE);
  put(o, state);
  put(o, S_FRAMES);
  put_frames(o, site);
  pkw_end(w);
}

/* One final segment: its blocks tile it, the gaps between live ones written as inactive. */
static void put_segment(mv_out_t *o, const struct mv_final *f) {
  pkw_t *w = &o->w;
  const mv_seg_t *s = &f->seg;
  uint64_t end = s->addr + s->size, allocated = 0, active = 0, requested = 0;
  for (size_t i = 0; i < f->nb; i++) {
    uint64_t bs = f->blocks[i].size;
    if (f->blocks[i].addr + bs > end) bs = end - f->blocks[i].addr;
    active += bs;
    if (!f->blocks[i].pending) allocated += bs;
    requested += f->blocks[i].requested;
  }
  pkw_dict_begin(w);
  put(o, S_DEVICE);
  pkw_int(w, f->device);
  put(o, S_ADDRESS);
  pkw_uint(w, s->addr);
  put(o, S_TOTAL_SIZE);
  pkw_uint(w, s->size);
  put(o, S_ALLOCATED_SIZE);
  pkw_uint(w, allocated);
  put(o, S_ACTIVE_SIZE);
  pkw_uint(w, active);
  put(o, S_REQUESTED_SIZE);
  pkw_uint(w, requested);
  put(o, S_STREAM);
  pkw_uint(w, s->stream);
  put(o, S_SEGMENT_TYPE);
  put(o, s->size <= (2u << 20) && !s->expandable ? S_SMALL : S_LARGE); /* PyTorch's small pool: 2 MiB segments */
  put(o, S_SEGMENT_POOL_ID);
  pkw_tuple_begin(w);
  pkw_int(w, 0);
  pkw_int(w, 0);
  pkw_end(w);
  put(o, S_IS_EXPANDABLE);
  pkw_bool(w, s->expandable);
  put(o, S_FRAMES);
  put_frames(o, s->site);
  put(o, S_BLOCKS);
  pkw_list_begin(w);
  uint64_t at = s->addr;
  for (size_t i = 0; i < f->nb; i++) {
    const mv_block_t *b = &f->blocks[i];
    if (b->addr < at) continue; /* overlaps the block before: never from a sound policy */
    if (b->addr > at) put_block(o, at, b->addr - at, 0, S_INACTIVE, 0);
    uint64_t bs = b->addr + b->size > end ? end - b->addr : b->size;
    uint64_t req = b->requested < bs ? b->requested : bs;
    put_block(o, b->addr, bs, req, b->pending ? S_ACTIVE_PENDING_FREE : S_ACTIVE_ALLOCATED, b->site);
    at = b->addr + bs;
  }
  if (at < end) put_block(o, at, end - at, 0, S_INACTIVE, 0);
  pkw_end(w);
  pkw_end(w);
}

gm_status_t mv_out_end(mv_out_t *o, const char *trace, const char *spec, const gr_memviz_stats_t *st,
                       gm_err_t *err) {
  pkw_t *w = &o->w;
  pkw_end(w); /* device_traces */
  pkw_cstr(w, "segments");
  pkw_list_begin(w);
  for (size_t i = 0; i < o->n_finals; i++) put_segment(o, &o->finals[i]);
  pkw_end(w);
  /* the setting, in torch's keys where it is PyTorch's */
  int pytorch = strncmp(spec, "pytorch", 7) == 0 && (spec[7] == '\0' || spec[7] == ':');
  pkw_cstr(w, "allocator_settings");
  pkw_dict_begin(w);
  pkw_kv_str(w, "PYTORCH_CUDA_ALLOC_CONF", pytorch && spec[7] == ':' ? spec + 8 : "");
  pkw_kv_bool(w, "expandable_segments", pytorch && strstr(spec, "expandable_segments:True") != NULL);
  pkw_end(w);
  pkw_cstr(w, "external_annotations"); /* torch 2.5+ writes it; the replay has none */
  pkw_list_begin(w);
  pkw_end(w);
  /* what this is: a simulation, not a recording (memory_viz ignores keys it does not know) */
  pkw_cstr(w, "gpumem_replay");
  pkw_dict_begin(w);
  pkw_kv_str(w, "tool", "gpureplay " GPUREPLAY_VERSION " --export-snapshot");
  pkw_kv_str(w, "trace", trace);
  pkw_kv_str(w, "policy", st->policy[0] ? st->policy : spec);
  pkw_kv_str(w, "backend", "sim");
  pkw_kv_str(w, "segments", "the state after the trace's last event");
  pkw_kv_str(w, "peak", "the entry with action 'snapshot' follows the request that took reserved bytes to their peak");
  pkw_cstr(w, "devices");
  pkw_list_begin(w);
  for (int i = 0; i < st->n_devices; i++) {
    pkw_dict_begin(w);
    pkw_kv_int(w, "device", st->dev[i].device);
    pkw_kv_uint(w, "peak_reserved_bytes", st->dev[i].peak_reserved);
    pkw_kv_uint(w, "peak_allocated_bytes", st->dev[i].peak_allocated);
    pkw_kv_uint(w, "peak_requested_bytes", st->dev[i].peak_requested);
    pkw_kv_uint(w, "ooms", st->dev[i].ooms);
    pkw_end(w);
  }
  pkw_end(w);
  pkw_end(w);
  pkw_end(w); /* root */
  return pkw_finish(w, err);
}

void mv_out_free(mv_out_t *o) {
  mv_site_t *s, *t;
  HASH_ITER(hh, o->sites, s, t) {
    HASH_DEL(o->sites, s);
    free(s->text);
    free(s);
  }
  for (size_t i = 0; i < o->n_finals; i++) free(o->finals[i].blocks);
  free(o->finals);
  o->finals = NULL;
  o->n_finals = 0;
}
