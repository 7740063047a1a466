/* gpureplay_trace.c: what gpureplay reads of a trace besides the replay itself: the header
 * and index (probe: which framework, how its requests are to be read, how many events), the
 * devices it allocates on, the whole trace decoded into memory once (preload, when it fits:
 * gmt_event_t is 56 bytes, so 1 M events = 56 MB; at most 2 GiB and 32 times the file, so a
 * small file of millions of identical events is not blown up), and the recorded run's own
 * account: the callsite of its first failed request, and the memory it had when it failed. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "replay/tool/gpureplay.h"
#include "replay/tool/gpureplay_trace.h"

#define PRELOAD_MAX_BYTES (2ull << 30)
#define PRELOAD_RATIO 32                 /* decoded bytes per byte of file, at most */
#define PRELOAD_FLOOR_BYTES (64ull << 20) /* below this, preload whatever the ratio */

/* The devices of k events into devs (first appearance order); seen: a bit per ordinal. */
static void scan_devices(const gmt_event_t *evs, size_t k, uint64_t *seen, int *devs, int max, int *n) {
  for (size_t i = 0; i < k; i++) {
    const gmt_event_t *e = &evs[i];
    if (e->kind != GMT_EV_ALLOC && e->kind != GMT_EV_VMM_MAP && e->kind != GMT_EV_ALLOC_FAILED) continue;
    if (e->mem_kind != GMT_MEM_DEVICE && e->mem_kind != GMT_MEM_UNKNOWN) continue;
    uint64_t bit = 1ull << (e->device % 64);
    if (seen[e->device / 64] & bit) continue;
    seen[e->device / 64] |= bit;
    if (*n < max) devs[*n] = e->device;
    (*n)++;
  }
}

gm_status_t gr_trace_devices(const char *path, int *devs, int max, int *n, gm_err_t *err) {
  gmt_reader_t *r = NULL;
  *n = 0;
  /* Every good chunk's devices: a damaged trace is for the replay to refuse (--strict) or salvage. */
  gm_status_t st = gmt_reader_open_flags(&r, path, GMT_READ_SALVAGE, err);
  if (st != GM_OK) return gm_err_wrap(err, "cannot open '%s'", path);
  uint64_t seen[1024] = {0}; /* a bit per device ordinal (uint16_t) */
  gmt_event_t buf[4096];
  size_t k = 0;
  gm_err_t rerr;
  while (gmt_reader_next_batch(r, buf, sizeof buf / sizeof buf[0], &k, &rerr) == GM_OK)
    scan_devices(buf, k, seen, devs, max, n);
  gmt_reader_close(r);
  return GM_OK;
}

gm_status_t gr_trace_frameworks(const char *path, unsigned *set, gm_err_t *err) {
  gmt_reader_t *r = NULL;
  /* The header only: a damaged index is for the replay to refuse (--strict) or salvage. */
  gm_status_t st = gmt_reader_open_flags(&r, path, GMT_READ_SALVAGE, err);
  if (st != GM_OK) return gm_err_wrap(err, "cannot open '%s'", path);
  *set = gmt_header_frameworks(gmt_reader_header(r));
  gmt_reader_close(r);
  return GM_OK;
}

/* Does the trace hold an async device allocation? Decodes from the start and stops at the
 * first one (a framework's first tensor: within the first events of a requests trace); only
 * a trace without any is decoded to its end. A read error ends the scan: the replay itself
 * will report it. */
static int scan_async_alloc(gmt_reader_t *r) {
  gmt_event_t buf[512];
  gm_err_t err;
  for (;;) {
    size_t n = 0;
    if (gmt_reader_next_batch(r, buf, sizeof buf / sizeof buf[0], &n, &err) != GM_OK) return 0;
    for (size_t i = 0; i < n; i++)
      if (buf[i].kind == GMT_EV_ALLOC && (buf[i].flags & GMT_F_ASYNC) &&
          (buf[i].mem_kind == GMT_MEM_DEVICE || buf[i].mem_kind == GMT_MEM_UNKNOWN))
        return 1;
  }
}

/* "N GiB allowed" (PyTorch's OOM message under a memory fraction) -> bytes; 0: none. */
static uint64_t allowed_bytes(const char *msg) {
  const char *p = msg ? strstr(msg, " allowed") : NULL;
  if (!p) return 0;
  const char *u = p;
  while (u > msg && u[-1] != ' ') u--; /* the unit */
  const char *num = u - 1;
  while (num > msg && num[-1] == ' ') num--;
  const char *e = num;
  while (num > msg && (isdigit((unsigned char)num[-1]) || num[-1] == '.')) num--;
  if (num == e) return 0;
  double v = strtod(num, NULL);
  static const struct { const char *unit; double mult; } units[] = {
      {"B", 1}, {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0}};
  for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
    if ((size_t)(p - u) == strlen(units[i].unit) && !strncmp(u, units[i].unit, (size_t)(p - u)))
      return (uint64_t)(v * units[i].mult);
  return 0;
}

/* The limit the recorded run set itself, where the trace holds it (issue 25). */
static void recorded_cap(const gmt_header_t *h, gr_trace_info_t *info) {
  const char *frac = gmt_header_kv_get(h, "torch.per_process_memory_fraction");
  const char *msg = gmt_header_kv_get(h, "oom.message");
  const char *allowed = gmt_header_kv_get(h, "oom.allowed_bytes");
  const char *xla = gmt_header_kv_get(h, "XLA_PYTHON_CLIENT_MEM_FRACTION");
  const char *xla_name = "XLA_PYTHON_CLIENT_MEM_FRACTION";
  if (!xla && (xla = gmt_header_kv_get(h, "XLA_CLIENT_MEM_FRACTION"))) xla_name = "XLA_CLIENT_MEM_FRACTION"; /* its newer name */
  uint64_t v = 0;
  /* the total the frameworks' fractions multiply: cuMemGetInfo's (PyTorch's setMemoryFraction,
   * XLA's), else the device's */
  uint64_t total = info->gpu_mem_info_total ? info->gpu_mem_info_total : info->gpu_total_mem;
  /* exact figures first: the fraction times that total is PyTorch's own limit to the byte,
   * the message's "N GiB allowed" the same rounded to 0.01 GiB */
  /* gpurec records the device each call limited (torch.per_process_memory_fraction.<d>): then
   * a fraction is that device's alone (gr_failure_capacity picks the replayed device's) */
  for (int d = 0; d < GR_MAX_DEVICES; d++) {
    char k[64];
    snprintf(k, sizeof k, "torch.per_process_memory_fraction.%d", d);
    const char *f = gmt_header_kv_get(h, k);
    if (f && atof(f) > 0 && atof(f) <= 1) {
      info->torch_fraction_dev[d] = atof(f);
      info->torch_fraction_per_device = 1;
    }
  }
  if (allowed && gm_parse_u64(allowed, &v, NULL) == GM_OK && v) {
    snprintf(info->recorded_cap_from, sizeof info->recorded_cap_from, "%s", "the OOM's \"allowed\"");
    info->recorded_cap_exact = 1;
  } else if (frac && !info->torch_fraction_per_device && total && atof(frac) > 0 && atof(frac) <= 1) {
    v = (uint64_t)(atof(frac) * (double)total);
    snprintf(info->recorded_cap_from, sizeof info->recorded_cap_from, "set_per_process_memory_fraction(%.6g)", atof(frac));
  } else if ((v = allowed_bytes(msg))) {
    snprintf(info->recorded_cap_from, sizeof info->recorded_cap_from, "%s", "the OOM message's \"allowed\"");
  } else if (xla && total && atof(xla) > 0 && atof(xla) <= 1 && (gmt_header_frameworks(h) & GMT_FW_JAX)) {
    v = (uint64_t)(atof(xla) * (double)total);
    snprintf(info->recorded_cap_from, sizeof info->recorded_cap_from, "%s=%.6g", xla_name, atof(xla));
  }
  info->recorded_cap = v;
}

/* What the header says, into info (no events read). */
static void info_from_header(const gmt_header_t *h, gr_trace_info_t *info) {
  info->start_time_ns = h->start_time_ns;
  info->pid = h->pid;
  info->gpu_total_mem = h->gpu_total_mem;
  info->capture_mode = h->capture_mode;
  info->frameworks = gmt_header_frameworks(h);
  gmt_header_frameworks_text(h, info->frameworks_text, sizeof info->frameworks_text);
  gmt_coverage(h, NULL, &info->coverage);
  const char *pat = gmt_header_kv_get(h, "predicted.at"), *pin = gmt_header_kv_get(h, "predicted.inputs"),
             *pconf = gmt_header_kv_get(h, "predicted.confidence");
  if (pat) /* gpurec predict's trace: a run nobody made */
    snprintf(info->predicted, sizeof info->predicted, "the job at %s, predicted from %s (confidence %s)", pat,
             pin ? pin : "?", pconf ? pconf : "?");
  const char *pset = gmt_header_kv_get(h, "predicted.settings");
  if (pat && pset) snprintf(info->predicted_settings, sizeof info->predicted_settings, "%s", pset);
  const char *mi = gmt_header_kv_get(h, "gpu_mem_info_total");
  if (mi) gm_parse_u64(mi, &info->gpu_mem_info_total, NULL);
  const char *free_at_oom = gmt_header_kv_get(h, "torch.snapshot.oom_device_free_bytes");
  if (free_at_oom) gm_parse_u64(free_at_oom, &info->recorded_device_free, NULL);
  recorded_cap(h, info);
}

/* XLA's platform allocator (the header says so and no other framework's)? */
static int platform_alloc(const gmt_header_t *h, const gr_trace_info_t *info) {
  const char *xla_alloc = gmt_header_kv_get(h, "XLA_PYTHON_CLIENT_ALLOCATOR");
  return xla_alloc && strcmp(xla_alloc, "platform") == 0 && (!info->frameworks || (info->frameworks & GMT_FW_JAX));
}

/* How the requests are read, once has_async_alloc is known (when it was needed). */
static void decide_reading(const gmt_header_t *h, int sync_allocs, int vmm_buffers, int platform,
                           gr_trace_info_t *info) {
  /* XLA's platform allocator maps every buffer through the VMM API: those maps are the
   * requests (when the trace has no stream-ordered ones), and its cuMemAllocs a library's. */
  info->vmm_requests = vmm_buffers == GR_VMM_REQUESTS ||
                       (vmm_buffers == GR_VMM_AUTO && platform && !info->has_async_alloc);
  info->external_sync = sync_allocs == GR_SYNC_EXTERNAL ||
                        (sync_allocs == GR_SYNC_AUTO &&
                         (rp_sync_is_external(info->capture_mode, info->has_async_alloc) ||
                          info->vmm_requests));
  info->holds = gmt_trace_holds(h, info->vmm_requests, info->has_async_alloc);
}

gm_status_t gr_trace_probe(const char *path, unsigned flags, int sync_allocs, int vmm_buffers,
                           gr_trace_info_t *info, gm_err_t *err) {
  gmt_reader_t *r = NULL;
  gm_status_t st = gmt_reader_open_flags(&r, path, flags, err);
  if (st != GM_OK) return gm_err_wrap(err, "cannot open '%s'", path);
  const gmt_header_t *h = gmt_reader_header(r);
  if (gmt_trace_unmerged(path)) { /* segments would count twice: PyTorch's requests and the driver's calls */
    gmt_reader_close(r);
    return gm_err_set(err, GM_ERR_FORMAT,
                      "'%s' is an unmerged gpurec recording (PyTorch's streamed requests beside the driver's "
                      "calls: gpurec stopped before it merged them): `gpurec import %s -o merged.zst` merges it",
                      path, path);
  }
  info->path = path;
  info_from_header(h, info);
  info->has_context = gr_header_has_context(h);
  int platform = platform_alloc(h, info);
  info->events_in_index = 0;
  uint64_t nc = gmt_reader_chunk_count(r);
  for (uint64_t i = 0; i < nc; i++) {
    uint64_t ts = 0, ev = 0;
    if (gmt_reader_chunk_info(r, i, &ts, &ev, NULL) == GM_OK) info->events_in_index += ev;
  }
  if ((sync_allocs == GR_SYNC_AUTO && info->capture_mode == GMT_CAPTURE_REQUESTS) ||
      (vmm_buffers == GR_VMM_AUTO && platform))
    info->has_async_alloc = scan_async_alloc(r);
  decide_reading(h, sync_allocs, vmm_buffers, platform, info);
  gmt_reader_close(r);
  return GM_OK;
}

int gr_count_other(const gr_config_t *cfg, const gr_trace_info_t *info) {
  if (cfg->count_other == GR_OTHER_NO) return RP_OTHER_NONE;
  if (cfg->count_other == GR_OTHER_YES) return RP_OTHER_ALL_MAPS;
  /* In a requests trace a VMM map that is not a request is another owner's (NCCL); in torch,
   * torch-history and native traces unflagged maps are the framework's own pages (expandable
   * segments), and another owner's carry GMT_F_EXTERNAL (torch-history's CUPTI side). */
  return info->capture_mode == GMT_CAPTURE_REQUESTS && !info->vmm_requests ? RP_OTHER_ALL_MAPS
                                                                           : RP_OTHER_FLAGGED_MAPS;
}

/* Events decoded per call while a numbering thread follows: it starts on the first ones. */
#define PRELOAD_STEP ((size_t)1 << 16)

gm_status_t gr_trace_preload(const char *path, unsigned flags, uint64_t hint, gmt_event_t **out, size_t *n,
                             gr_trace_info_t *info, rp_addr_ids_t *ids, gm_err_t *err) {
  gmt_reader_t *r = NULL;
  if (ids) memset(ids, 0, sizeof *ids);
  gm_status_t st = gmt_reader_open_flags(&r, path, flags, err);
  if (st != GM_OK) return gm_err_wrap(err, "cannot open '%s'", path);
  /* the index's count is a hint from the file: it sizes the first allocation, never more than
   * what auto preloading allows */
  size_t cap = hint && hint <= PRELOAD_MAX_BYTES / sizeof(gmt_event_t) ? (size_t)hint : 65536, len = 0;
  gmt_event_t *evs = malloc(cap * sizeof *evs);
  gmt_event_t more[64]; /* the array full: is there more? (the index's count is mostly exact) */
  gr_numbering_t *nb = ids && evs ? gr_numbering_start(cap) : NULL;
  while (evs) {
    size_t k = 0;
    int full = len == cap;
    size_t room = full ? sizeof more / sizeof more[0] : cap - len;
    if (nb && room > PRELOAD_STEP) room = PRELOAD_STEP;
    st = gmt_reader_next_batch(r, full ? more : evs + len, room, &k, err);
    if (st == GM_END) break;
    if (st == GM_OK && full) {
      gr_numbering_pause(nb); /* the array moves: the thread must not read it */
      gmt_event_t *g = realloc(evs, 2 * cap * sizeof *evs);
      if (!g) { /* not a shorter trace: the error below */
        free(evs);
        evs = NULL;
        break;
      }
      evs = g;
      cap *= 2;
      memcpy(evs + len, more, k * sizeof *evs);
    }
    if (st != GM_OK) {
      gm_err_wrap(err, "cannot read '%s'", path);
      gr_numbering_cancel(nb);
      free(evs);
      gmt_reader_close(r);
      return st;
    }
    len += k;
    gr_numbering_more(nb, evs, len);
  }
  const char *damage = gmt_reader_damage(r);
  gr_trace_take_integrity(info, gmt_reader_stats(r), damage ? damage : "");
  gmt_reader_close(r);
  if (!evs) {
    gr_numbering_cancel(nb);
    return gm_err_set(err, GM_ERR_NOMEM, "out of host memory decoding '%s'", path);
  }
  gm_err_t ids_err; /* without (host memory short) each replay hashes the addresses itself */
  if (ids && gr_numbering_end(nb, evs, len, ids, &ids_err) != GM_OK) memset(ids, 0, sizeof *ids);
  *out = evs;
  *n = len;
  return GM_OK;
}

void gr_trace_callsite(const char *path, uint32_t id, char *out, size_t n) {
  out[0] = '\0';
  gmt_reader_t *r = NULL;
  if (gmt_reader_open_flags(&r, path, GMT_READ_SALVAGE, NULL) != GM_OK) return; /* best effort: past damage */
  gmt_event_t buf[512];
  const char *s = gmt_reader_string(r, id);
  while (!s) {
    size_t k = 0;
    if (gmt_reader_next_batch(r, buf, sizeof buf / sizeof buf[0], &k, NULL) != GM_OK) break;
    s = gmt_reader_string(r, id);
  }
  if (s) snprintf(out, n, "%s", s);
  gmt_reader_close(r);
}

uint64_t gr_trace_device_memory(const gr_config_t *cfg, gr_trace_info_t *info) {
  /* What the frameworks multiply their fractions by is cuMemGetInfo's total, which the
   * recorder writes when it can (gpu_mem_info_total; cuDeviceTotalMem can be 1 MiB less). */
  uint64_t total_memory = cfg->device_memory ? cfg->device_memory
                          : cfg->capacity    ? cfg->capacity
                          : info->gpu_mem_info_total ? info->gpu_mem_info_total
                                                     : info->gpu_total_mem;
  /* Said out loud wherever it matters (prealloc and bfc take a share of it). */
  info->device_memory = total_memory ? total_memory : GR_ASSUMED_DEVICE_MEMORY;
  info->device_memory_assumed = !cfg->device_memory && !info->gpu_total_mem;
  return total_memory;
}

void gr_trace_take_integrity(gr_trace_info_t *info, const gmt_reader_stats_t *s, const char *damage) {
  info->truncated = s->truncated;
  info->seq_gaps = s->seq_gaps;
  info->dropped = s->dropped;
  info->stats = *s;
  gmt_coverage_t lost; /* the reader's losses beside the header's marks */
  gmt_coverage(NULL, s, &lost);
  info->coverage.partial |= lost.partial;
  info->coverage.why |= lost.why;
  info->coverage.dropped = lost.dropped;
  info->coverage.seq_gaps = lost.seq_gaps;
  info->coverage.damaged_chunks = lost.damaged_chunks;
  snprintf(info->damage, sizeof info->damage, "%s", damage);
}

/* Preloading holds 56 bytes per event: fine for a real trace (2-5 bytes per event on disk),
 * not for a small file that decodes to millions of identical events (or an index that claims
 * them): auto preloads only what is within PRELOAD_RATIO times the file's size. */
int gr_trace_wants_preload(const gr_config_t *cfg, const char *path, const gr_trace_info_t *info) {
  struct stat sb;
  uint64_t file_bytes = stat(path, &sb) == 0 && S_ISREG(sb.st_mode) ? (uint64_t)sb.st_size : 0;
  uint64_t decoded = info->events_in_index * sizeof(gmt_event_t);
  return cfg->preload > 0 ||
         (cfg->preload < 0 && cfg->n_policies > 1 && info->events_in_index > 0 && decoded <= PRELOAD_MAX_BYTES &&
          (decoded <= PRELOAD_FLOOR_BYTES || decoded / PRELOAD_RATIO <= file_bytes));
}

void gr_decoded_free(gr_decoded_t *dec) {
  if (dec->ids.id) rp_addr_ids_free(&dec->ids);
  free(dec->evs);
  memset(dec, 0, sizeof *dec);
}

gm_status_t gr_trace_scan(const gr_config_t *cfg, const char *path, gr_decoded_t *dec, int *devs, int max,
                          int *n, gm_err_t *err) {
  gr_decoded_free(dec);
  *n = 0;
  /* Only where the replay reads as the device scan does (salvaging): --strict refuses a damaged
   * trace in the replay, after the scan found its devices. */
  gr_trace_info_t *info = &dec->info;
  if (cfg->read_flags == GMT_READ_SALVAGE &&
      gr_trace_probe(path, cfg->read_flags, cfg->sync_allocs, cfg->vmm_buffers, info, err) == GM_OK &&
      gr_trace_wants_preload(cfg, path, info) &&
      gr_trace_preload(path, cfg->read_flags, info->events_in_index, &dec->evs, &dec->n_evs, info, &dec->ids, err) ==
          GM_OK) {
    dec->path = path;
    uint64_t seen[1024] = {0};
    scan_devices(dec->evs, dec->n_evs, seen, devs, max, n);
    return GM_OK;
  }
  gr_decoded_free(dec); /* anything amiss: the scan of its own, and the replay reports it */
  return gr_trace_devices(path, devs, max, n, err);
}

/* ---- decode once, replay many (the tuner) ---- */

/* ---- decode once, replay many (the tuner) ---- */

gm_status_t gr_trace_load(const gr_config_t *cfg, const char *path, gr_loaded_t *lt, gm_err_t *err) {
  memset(lt, 0, sizeof *lt);
  gr_trace_info_t *info = &lt->info;
  gm_status_t st = gr_trace_probe(path, cfg->read_flags, cfg->sync_allocs, cfg->vmm_buffers, info, err);
  if (st != GM_OK) return st;
  lt->total_memory = gr_trace_device_memory(cfg, info);
  st = gr_trace_preload(path, cfg->read_flags, info->events_in_index, &lt->evs, &lt->n_evs, info, &lt->ids, err);
  if (st == GM_OK && info->has_context) gr_context_from_events(lt->evs, lt->n_evs, cfg->device, info);
  return st;
}

gm_status_t gr_trace_open_streamed(const gr_config_t *cfg, const char *path, gr_loaded_t *lt, gm_err_t *err) {
  memset(lt, 0, sizeof *lt);
  gr_trace_info_t *info = &lt->info;
  gm_status_t st = gr_trace_probe(path, cfg->read_flags, cfg->sync_allocs, cfg->vmm_buffers, info, err);
  if (st != GM_OK) return st;
  lt->total_memory = gr_trace_device_memory(cfg, info);
  if (info->has_context) st = gr_context_from_file(path, cfg->read_flags, cfg->device, info, err);
  return st;
}

void gr_loaded_note_failure(gr_loaded_t *lt, const rp_result_t *r0) {
  if (r0->recorded_failures && r0->first_failure_callsite)
    gr_trace_callsite(lt->info.path, r0->first_failure_callsite, lt->info.failure_callsite,
                      sizeof lt->info.failure_callsite);
}

void gr_loaded_free(gr_loaded_t *lt) {
  rp_addr_ids_free(&lt->ids);
  free(lt->evs);
  lt->evs = NULL;
  lt->n_evs = 0;
}

uint64_t gr_failure_capacity(const gr_trace_info_t *info, const rp_result_t *r, char *note, size_t n) {
  char b1[32], b2[32];
  note[0] = '\0';
  if (!r->recorded_failures) return 0;
  /* A replay's capacity holds the recorded CUDA context (gr_capacity_left takes it off): a
   * framework's own limit and what its process held and could still get are the allocator's,
   * beside the context, so the context goes on top of them. */
  uint64_t ctx = info->context_bytes;
  char b3[32];
  uint64_t cap = info->recorded_cap;
  const char *from = info->recorded_cap_from;
  char own[64];
  int d = r->device;
  double f = d >= 0 && d < GR_MAX_DEVICES ? info->torch_fraction_dev[d] : 0;
  uint64_t total = info->gpu_mem_info_total ? info->gpu_mem_info_total : info->gpu_total_mem;
  if (!info->recorded_cap_exact && f > 0 && total) { /* the fraction the job set for this device */
    cap = (uint64_t)(f * (double)total);
    snprintf(own, sizeof own, "set_per_process_memory_fraction(%.6g, %d)", f, d);
    from = own;
  }
  if (cap) {
    /* The job's own cap: the allocator refuses past it however much the device has free. */
    if (ctx)
      snprintf(note, n, "the limit the recorded run set itself: %s (%s) for the allocator, beside the CUDA context "
               "and module code (%s)", gm_format_size(cap, b1, sizeof b1), from, gm_format_size(ctx, b3, sizeof b3));
    else
      snprintf(note, n, "the limit the recorded run set itself: %s (%s)", gm_format_size(cap, b1, sizeof b1), from);
    return cap + ctx;
  }
  if (info->recorded_device_free) {
    /* PyTorch records the device's free bytes with its OOM: what the process could have had
     * is what its allocator held then plus that. */
    uint64_t held = r->first_failure_recorded_reserved_bytes > r->first_failure_live_bytes
                        ? r->first_failure_recorded_reserved_bytes
                        : r->first_failure_live_bytes;
    snprintf(note, n, "what the recorded process had: %s reserved + %s free on the device at the failure; "
             "the limit the job had is unknown: the trace holds no cap of its own (set_per_process_memory_fraction, "
             "an OOM message's \"allowed\"), and one would be lower (--capacity=SIZE)",
             gm_format_size(held, b1, sizeof b1), gm_format_size(info->recorded_device_free, b2, sizeof b2));
    return held + info->recorded_device_free + ctx;
  }
  if (info->gpu_total_mem) {
    snprintf(note, n, "the recorded GPU's memory; the limit the job had is unknown: the trace holds neither a cap "
             "of its own nor the free memory at the failure, and the CUDA context and other processes held "
             "some of it, so the real limit was lower (--capacity=SIZE)");
    return info->gpu_total_mem;
  }
  return 0;
}

