/* snap_entry.c: one entry of a snapshot's device trace (a dict {action, addr, size, stream,
 * time_us, frames}) as a gpumem event, its fields checked. Used by the import (snap_import.c)
 * and by the initial-state pass over the same entries (snap_state.c). */
#include <stdio.h>
#include <string.h>

#include "recorder/snapshot/snap_internal.h"

static int action_kind(const pkr_val_t *a) {
  static const struct {
    const char *name;
    int kind;
  } map[] = {
      {"alloc", GMT_EV_ALLOC},
      {"free_requested", GMT_EV_FREE_REQUESTED},
      {"free_completed", GMT_EV_FREE},
      {"segment_alloc", GMT_EV_SEGMENT_ALLOC},
      {"segment_free", GMT_EV_SEGMENT_FREE},
      {"segment_map", GMT_EV_VMM_MAP},
      {"segment_unmap", GMT_EV_VMM_UNMAP},
      {"oom", GMT_EV_ALLOC_FAILED},
      {"snapshot", GMT_EV_MARKER},
  };
  for (size_t k = 0; k < sizeof(map) / sizeof(map[0]); k++)
    if (pkr_str_eq(a, map[k].name)) return map[k].kind;
  return 0;
}

gm_status_t snap_field_u64(const pkr_val_t *e, const char *key, uint64_t max, uint64_t *out, gm_err_t *err) {
  const pkr_val_t *v = pkr_dict_get(e, key);
  if (!v) return GM_OK;
  int64_t i = 0;
  if (v->type == PKR_INT && pkr_int(v, &i) && i >= 0 && (uint64_t)i <= max) {
    *out = (uint64_t)i;
    return GM_OK;
  }
  char got[64];
  switch (v->type) {
    case PKR_INT: snprintf(got, sizeof got, "%lld", (long long)v->i); break;
    case PKR_BIGINT: snprintf(got, sizeof got, "an int wider than 64 bits"); break;
    case PKR_FLOAT: snprintf(got, sizeof got, "%g (a float)", v->f); break;
    case PKR_BOOL: snprintf(got, sizeof got, "%s", v->i ? "True" : "False"); break;
    case PKR_NONE: snprintf(got, sizeof got, "None"); break;
    default: snprintf(got, sizeof got, "(a %s)", v->type == PKR_STR ? "str" : "container"); break;
  }
  return gm_err_set(err, GM_ERR_FORMAT, "%s %s: not accepted (an int from 0 to %llu)", key, got,
                    (unsigned long long)max);
}

gm_status_t snap_entry_event(const pkr_val_t *e, uint16_t device, snap_event_t *out, gm_err_t *err) {
  memset(out, 0, sizeof(*out));
  out->ev.device = device;
  out->ev.mem_kind = GMT_MEM_DEVICE;
  out->ev.stream = GMT_STREAM_NONE;
  if (!e || e->type != PKR_DICT) return gm_err_set(err, GM_ERR_FORMAT, "not a dict (not a PyTorch memory snapshot)");
  if (!pkr_claim(e)) /* shared through the memo: a million entries from a few MB */
    return gm_err_set(err, GM_ERR_FORMAT, "the same dict as an earlier entry (a snapshot makes one per entry)");
  if (e->n / 2 > SNAP_MAX_RECORD_KEYS) /* every lookup below would scan them all */
    return gm_err_set(err, GM_ERR_FORMAT, "a dict of %zu keys is not a trace entry (limit SNAP_MAX_RECORD_KEYS = %d)",
                      e->n / 2, SNAP_MAX_RECORD_KEYS);
  int kind = action_kind(pkr_dict_get(e, "action"));
  if (!kind) return GM_END; /* an action this importer does not convert */
  out->ev.kind = (uint8_t)kind;
  /* A failed request's size is whatever the program asked (a cudaMalloc(-1) included); a
   * block that exists is at most GMT_MAX_SIZE. */
  uint64_t smax = kind == GMT_EV_ALLOC_FAILED ? (uint64_t)INT64_MAX : GMT_MAX_SIZE;
  gm_status_t st;
  if ((st = snap_field_u64(e, "addr", (uint64_t)INT64_MAX, &out->ev.addr, err)) ||
      (st = snap_field_u64(e, "size", smax, &out->ev.size, err)) ||
      (st = snap_field_u64(e, "stream", (uint64_t)INT64_MAX, &out->ev.stream, err)))
    return st;
  if (!pkr_dict_get(e, "stream")) out->ev.stream = GMT_STREAM_NONE;
  const pkr_val_t *t = pkr_dict_get(e, "time_us");
  out->has_time = pkr_int(t, &out->time_us);
  if (t && !out->has_time) return gm_err_set(err, GM_ERR_FORMAT, "time_us is not an int");
  if (kind == GMT_EV_ALLOC_FAILED) {
    /* torch writes an OOM entry's free device memory under "device_free", in place of "addr"
     * (torch/csrc/cuda/memory_snapshot.cpp); older hand-made files put it in addr. Kept for
     * the header. */
    uint64_t free_bytes = out->ev.addr;
    if (pkr_dict_get(e, "device_free") &&
        (st = snap_field_u64(e, "device_free", (uint64_t)INT64_MAX, &free_bytes, err)))
      return st;
    out->device_free = free_bytes;
    out->ev.addr = 0;
  }
  out->frames = pkr_dict_get(e, "frames");
  return GM_OK;
}
